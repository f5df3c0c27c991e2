"""Transformer-XL through the Trainer: streams, memory carried across steps and reset per epoch and evaluation,
checkpoints that resume exactly, and validation perplexity with memory lower than without."""

from __future__ import annotations

import os

import pytest
import torch
from accelerate.data_loader import BatchSamplerShard
from torch.utils.data import BatchSampler
from transformers import TrainingArguments

from hf_scratch import ScratchTransfoXLConfig, ScratchTransfoXLLMHeadModel
from hf_scratch.tools.tokenization import train_tokenizer
from hf_scratch.tools.training_transfo_xl import MEMORY_FILE, StreamSampler, TransfoXLTrainer, segment_dataset


@pytest.fixture(scope="module")
def shakespeare_ids(fixtures_dir) -> tuple[list[int], list[int], int]:
    """Character-level ids of the Shakespeare excerpt: all documents but the end of the last for training."""
    text = (fixtures_dir / "shakespeare.txt").read_text()
    documents = [d.strip() for d in text.split("=====") if d.strip()]
    tokenizer = train_tokenizer(documents, kind="char")
    ids = tokenizer("\n".join(documents), add_special_tokens=False)["input_ids"]
    return ids[:-4000], ids[-4000:], len(tokenizer)


def tiny_lm(vocab_size: int, **overrides) -> ScratchTransfoXLLMHeadModel:
    settings = dict(
        vocab_size=vocab_size,
        cutoffs=[24],
        div_val=2,
        hidden_size=32,
        embedding_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        head_dim=16,
        intermediate_size=64,
        mem_len=32,
        clamp_len=-1,
        same_length=False,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    settings.update(overrides)
    torch.manual_seed(0)
    return ScratchTransfoXLLMHeadModel(ScratchTransfoXLConfig(**settings))


def arguments(output_dir, **overrides) -> TrainingArguments:
    settings = dict(
        output_dir=str(output_dir),
        per_device_train_batch_size=4,
        per_device_eval_batch_size=4,
        learning_rate=3e-3,
        num_train_epochs=1,
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        logging_steps=1000,
        save_strategy="no",
        seed=0,
        dataloader_num_workers=0,
    )
    settings.update(overrides)
    return TrainingArguments(**settings)


def test_stream_sampler_gives_each_rank_its_own_continuing_streams():
    sampler = StreamSampler(num_segments=22, batch_size=2, world_size=2)  # 4 streams of 5 segments, 2 left over
    assert len(sampler) == 20
    rows_seen = set()
    for rank in range(2):  # the sharding accelerate applies under DDP: whole batches, round-robin
        batches = list(
            BatchSamplerShard(BatchSampler(sampler, 2, drop_last=False), num_processes=2, process_index=rank)
        )
        assert len(batches) == 5
        for row in range(2):
            stream = [batch[row] for batch in batches]
            assert stream == list(range(stream[0], stream[0] + 5))  # row i of batch k+1 continues row i of batch k
            rows_seen.add(stream[0])
    assert rows_seen == {0, 5, 10, 15}  # four disjoint streams, two per rank
    with pytest.raises(ValueError, match="cannot fill"):
        StreamSampler(num_segments=3, batch_size=2, world_size=2)


def test_trainer_carries_memory_and_resets_it_per_epoch_and_evaluation(tmp_path, shakespeare_ids):
    train_ids, valid_ids, vocab = shakespeare_ids
    model = tiny_lm(vocab)
    train = segment_dataset(train_ids[: 16 * 24], segment_length=16)  # 24 segments → 6 steps of 4 streams
    valid = segment_dataset(valid_ids[: 16 * 8], segment_length=16)
    calls = []
    model.model.register_forward_pre_hook(
        lambda module, args, kwargs: calls.append(
            (module.training, None if kwargs.get("mems") is None else kwargs["mems"][0].shape[1])
        ),
        with_kwargs=True,
    )
    trainer = TransfoXLTrainer(
        model=model, args=arguments(tmp_path, num_train_epochs=2), train_dataset=train, eval_dataset=valid
    )
    trainer.train()
    training_calls = [length for is_training, length in calls if is_training]
    assert training_calls == [None, 16, 32, 32, 32, 32] * 2  # grows to mem_len, reset when the second epoch starts
    calls.clear()
    metrics = trainer.evaluate()
    assert [length for _, length in calls] == [None, 16]  # 8 segments = 2 steps of 4 streams, from an empty memory
    assert metrics["eval_perplexity"] == pytest.approx(torch.tensor(metrics["eval_loss"]).exp().item(), rel=1e-5)


def test_validation_perplexity_is_lower_with_memory(tmp_path, shakespeare_ids):
    train_ids, valid_ids, vocab = shakespeare_ids
    model = tiny_lm(vocab)
    trainer = TransfoXLTrainer(  # 16k characters as 16 streams of 8-character segments, 3 epochs (~375 steps)
        model=model,
        args=arguments(
            tmp_path,
            num_train_epochs=3,
            per_device_train_batch_size=16,
            per_device_eval_batch_size=16,
            learning_rate=5e-3,
        ),
        train_dataset=segment_dataset(train_ids[:16000], 8),
        eval_dataset=segment_dataset(valid_ids[-2000:], 8),
    )
    trainer.train()
    with_memory = trainer.evaluate()["eval_perplexity"]
    model.config.mem_len = 0  # same segments, same model, no memory
    without_memory = trainer.evaluate()["eval_perplexity"]
    assert with_memory < without_memory < vocab  # it learned something, and the memory helps
    assert with_memory < 0.99 * without_memory  # measured: 18.25 vs 18.65


class _ForgetfulTrainer(TransfoXLTrainer):
    """Resumes without the saved memory: the negative control of the exact-resume test."""

    def _load_from_checkpoint(self, resume_from_checkpoint, model=None):
        super()._load_from_checkpoint(resume_from_checkpoint, model)
        self._restored_mems = None


def test_checkpoint_saves_memory_and_resume_continues_exactly(tmp_path, shakespeare_ids):
    train_ids, _, vocab = shakespeare_ids
    train = segment_dataset(train_ids[: 16 * 40], segment_length=16)  # 10 steps per epoch
    args = dict(max_steps=8, save_strategy="steps", save_steps=4)

    straight = tiny_lm(vocab)
    TransfoXLTrainer(model=straight, args=arguments(tmp_path / "a", **args), train_dataset=train).train()
    checkpoint = tmp_path / "a" / "checkpoint-4"
    saved = torch.load(checkpoint / MEMORY_FILE.format(rank=0), weights_only=True)
    assert saved["global_step"] == 4 and saved["mems"][0].shape == (4, 32, 32)

    resumed = tiny_lm(vocab)
    TransfoXLTrainer(model=resumed, args=arguments(tmp_path / "b", **args), train_dataset=train).train(
        resume_from_checkpoint=str(checkpoint)
    )
    forgetful = tiny_lm(vocab)
    _ForgetfulTrainer(model=forgetful, args=arguments(tmp_path / "c", **args), train_dataset=train).train(
        resume_from_checkpoint=str(checkpoint)
    )

    def max_difference(a, b):
        return max((p - q).abs().max().item() for p, q in zip(a.parameters(), b.parameters()))

    assert max_difference(straight, resumed) <= 1e-6
    assert max_difference(straight, forgetful) > 1e-4  # without the memory the run would not continue exactly

    os.remove(checkpoint / MEMORY_FILE.format(rank=0))
    with pytest.raises(ValueError, match="no transfo_xl_mems_0.pt"):
        TransfoXLTrainer(model=tiny_lm(vocab), args=arguments(tmp_path / "d", **args), train_dataset=train).train(
            resume_from_checkpoint=str(checkpoint)
        )

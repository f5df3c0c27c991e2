"""Packed sequences (issue 39), GPT: a padding-free batch — several sequences in one row, ``position_ids`` that
restart at 0 for each, no attention mask, no cache (``DataCollatorWithFlattening``, TRL's packing / ``padding_free``)
— attends within each sequence only, as transformers' ``GPT2LMHeadModel`` does. The boundaries come from our own
mask code (``masks.packed_sequences``); transformers' ``masking_utils`` is the reference the rule is held to.

Checked: the issue's repro against each sequence alone and against GPT-2 on the same weights; per-token losses of a
``DataCollatorWithFlattening`` batch equal those of the same sequences padded (≤ 1e-5) with the eager, sdpa and
flex_attention kernels and compiled (one graph, no recompilation for other boundaries); the rule against
``find_packed_sequence_indices`` and ``create_causal_mask`` on random position_ids; TRL's ``SFTTrainer`` with
``packing=True`` and with ``padding_free=True``: the first step's loss equals that of the same examples padded.

The other families take no decoder ``position_ids`` (the encoder-decoder's decoder, Transformer-XL, the RNN), so no
other decoder can be handed a packed batch: it refuses given position_ids (ValueError: transformers knows the name,
``modeling_common``'s one rule for arguments). BERT and Longformer are encoders, whose transformers counterparts do
not pack either.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import transformers
from comparing import close
from families import FAMILIES, FLEX_COMPILES_WHOLE_MODELS, FLEX_ON_TORCH_2_7
from hypothesis import given
from hypothesis import strategies as st
from torch._dynamo.testing import CompileCounterWithBackend
from transformers import DataCollatorWithFlattening
from transformers.masking_utils import create_causal_mask, find_packed_sequence_indices

from hf_scratch import ScratchGPTConfig, ScratchGPTLMHeadModel
from hf_scratch.checks import check_decoder_mask
from hf_scratch.convert import from_transformers
from hf_scratch.masks import causal_mask, decoder_self_attention_mask, packed_sequences

pytestmark = pytest.mark.boundary  # DataCollatorWithFlattening, TRL, masking_utils: the boundary with transformers

GPT = FAMILIES["gpt"]
VOCAB = GPT.tiny["vocab_size"]
ATOL = 1e-5
LENGTHS = (5, 1, 7, 3)  # a one-token sequence too: it predicts nothing and must attend only itself


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def sequences(lengths=LENGTHS, seed: int = 0) -> list[list[int]]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(3, VOCAB, (n,), generator=generator).tolist() for n in lengths]


def padding_free(rows: list[list[int]]) -> dict:
    """transformers' ``DataCollatorWithFlattening``: one row, position_ids restarting at 0, labels -100 at each
    sequence's first token, no attention mask."""
    batch = DataCollatorWithFlattening(return_tensors="pt")([{"input_ids": row} for row in rows])
    assert "attention_mask" not in batch and batch["input_ids"].shape[0] == 1
    return batch


def padded(rows: list[list[int]]) -> dict:
    """The same sequences one per row, right-padded (id 0), with the attention mask."""
    length = max(map(len, rows))
    input_ids = torch.tensor([row + [0] * (length - len(row)) for row in rows])
    attention_mask = torch.tensor([[1] * len(row) + [0] * (length - len(row)) for row in rows])
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "labels": input_ids.masked_fill(~attention_mask.bool(), -100),
    }


def per_token_losses(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """−log P(next token) at every position whose next label counts, in row order: the terms of the causal LM loss."""
    logits, labels = logits[:, :-1], labels[:, 1:]
    kept = labels != -100
    return F.cross_entropy(logits[kept].float(), labels[kept], reduction="none")


# --------------------------------------------------------------------------------------------------------------
# The repro, and GPT-2 on the same weights
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_packed_row_gives_each_sequence_its_own_logits(attn_implementation):
    """The issue's model and inputs: the logits of a packed row equal those of each sequence alone (before the fix
    the second sequence attended the first: 3.5e-3 off)."""
    config = ScratchGPTConfig(
        vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37
    )
    torch.manual_seed(0)
    model = ScratchGPTLMHeadModel._from_config(config, attn_implementation=attn_implementation).eval()
    a, b = torch.tensor([[5, 6, 7, 8]]), torch.tensor([[9, 10, 11]])
    with torch.no_grad():
        packed = model(torch.cat([a, b], 1), position_ids=torch.tensor([[0, 1, 2, 3, 0, 1, 2]]), use_cache=False)
        alone_a, alone_b = (model(x, use_cache=False).logits[0] for x in (a, b))
    close(packed.logits[0, :4], alone_a, atol=ATOL)
    close(packed.logits[0, 4:], alone_b, atol=ATOL)


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_packed_rows_match_gpt2_on_the_same_weights(attn_implementation):
    """Two packed rows (one of three sequences, one of a single sequence) through transformers' GPT2LMHeadModel and
    through ours converted from it: the same logits, and the attention weights are zero across sequences."""
    config = transformers.GPT2Config(
        vocab_size=VOCAB,
        n_embd=32,
        n_layer=2,
        n_head=4,
        n_positions=48,
        bos_token_id=1,
        eos_token_id=2,
        attn_implementation=attn_implementation,
    )
    torch.manual_seed(0)
    reference = transformers.GPT2LMHeadModel(config).eval()
    ours = from_transformers(reference).eval()
    ours.set_attn_implementation(attn_implementation)
    input_ids = torch.randint(3, VOCAB, (2, 9))
    position_ids = torch.tensor([[0, 1, 2, 0, 1, 2, 3, 0, 1], list(range(9))])
    with torch.no_grad():
        expected = reference(input_ids, position_ids=position_ids, use_cache=False).logits
        actual = ours(input_ids, position_ids=position_ids, use_cache=False, output_attentions=True)
    close(actual.logits, expected, atol=ATOL)
    sequence = torch.tensor([0, 0, 0, 1, 1, 1, 1, 2, 2])
    across = sequence[:, None] != sequence[None, :]
    assert (actual.attentions[0][0][:, across] == 0).all() and (actual.attentions[0][1] != 0).any()


# --------------------------------------------------------------------------------------------------------------
# A DataCollatorWithFlattening batch gives the per-token losses of the padded batch
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_padding_free_batch_gives_the_padded_per_token_losses(attn_implementation):
    model = GPT.tiny_model(attn_implementation=attn_implementation)
    rows = sequences()
    flat, pad = padding_free(rows), padded(rows)
    with torch.no_grad():
        flat_out, pad_out = model(**flat, use_cache=False), model(**pad, use_cache=False)
    actual, expected = (
        per_token_losses(flat_out.logits, flat["labels"]),
        per_token_losses(pad_out.logits, pad["labels"]),
    )
    assert actual.shape == expected.shape == (sum(LENGTHS) - len(LENGTHS),)
    close(actual, expected, atol=ATOL)
    close(flat_out.loss, pad_out.loss, atol=ATOL)


@pytest.mark.skipif(
    not FLEX_COMPILES_WHOLE_MODELS,
    reason=FLEX_ON_TORCH_2_7 + ": an AssertionError in torch/_dynamo/side_effects.py for any GPT batch, packed or "
    "padded; on CPU flex_attention runs only compiled",
)
def test_padding_free_batch_with_flex_attention():
    """flex_attention (on CPU it runs compiled; inference only: no FlexAttention backward on CPU)."""
    model = GPT.tiny_model(attn_implementation="flex_attention")
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    rows = sequences()
    flat, pad = padding_free(rows), padded(rows)
    with torch.no_grad():
        actual = per_token_losses(compiled(**flat, use_cache=False).logits, flat["labels"])
        expected = per_token_losses(GPT.tiny_model()(**pad, use_cache=False).logits, pad["labels"])
    close(actual, expected, atol=ATOL)


def test_padding_free_training_step_compiles_once_for_any_boundaries():
    """Compiled (fullgraph, forward and backward graphs): the padded batch's per-token losses and gradients; then
    other boundaries in a row of the same length, and one sequence alone (positions 0 … n-1), run the same graph."""
    model = GPT.tiny_model()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(model, backend=counter, fullgraph=True)
    rows = sequences()
    flat, pad = padding_free(rows), padded(rows)

    def step(run, batch):
        model.zero_grad()
        output = run(**batch, use_cache=False)
        output.loss.backward()
        return per_token_losses(output.logits, batch["labels"]), [p.grad.clone() for p in model.parameters()]

    actual, actual_grads = step(compiled, flat)
    expected, expected_grads = step(model, pad)
    close(actual, expected, atol=ATOL)
    for grad, expected_grad in zip(actual_grads, expected_grads, strict=True):
        close(grad, expected_grad, atol=ATOL)
    compilations = counter.frame_count
    with torch._dynamo.config.patch(error_on_recompile=True):
        for other in (sequences((2, 9, 5), seed=1), sequences((16,), seed=2)):
            close(step(compiled, padding_free(other))[0], step(model, padded(other))[0], atol=ATOL)
    assert counter.frame_count == compilations == 1


def test_packing_needs_a_position_per_token():
    model = GPT.tiny_model()
    with pytest.raises(ValueError, match="position_ids has shape"):
        model(torch.tensor([[5, 6, 7, 8]]), position_ids=torch.tensor([[0, 1, 0]]), use_cache=False)


def flattened_with_flash_attention_kwargs(rows: list[list[int]]) -> tuple[dict, dict]:
    """``DataCollatorWithFlattening(return_flash_attn_kwargs=True)``: (input_ids and position_ids, the sequences'
    description for flash attention: cu_seq_lens_*, max_length_*)."""
    batch = DataCollatorWithFlattening(return_tensors="pt", return_flash_attn_kwargs=True)(
        [{"input_ids": row} for row in rows]
    )
    varlen = {key: batch[key] for key in ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k")}
    return {"input_ids": batch["input_ids"], "position_ids": batch["position_ids"]}, varlen


def test_gpt_takes_the_flash_attention_description_only_where_position_ids_hold_the_boundaries():
    """The collator describes the sequences twice: ``cu_seq_lens_*`` for flash attention, ``position_ids`` for the
    rest. GPT reads the boundaries off position_ids (no mask, no cache), so beside them the description changes
    nothing; where GPT would not read them — no position_ids, an attention mask, a cache, or ``use_cache`` left at
    the config's True — it is a ValueError, not mixed sequences."""
    model = GPT.tiny_model().eval()
    inputs, varlen = flattened_with_flash_attention_kwargs(sequences((3, 4)))
    close(model(**inputs, **varlen, use_cache=False).logits, model(**inputs, use_cache=False).logits, atol=0)
    for changed in (
        {"position_ids": None, "use_cache": False},
        {"attention_mask": torch.ones_like(inputs["input_ids"]), "use_cache": False},
        {},  # use_cache from the config (True): a cache would be written
    ):
        with pytest.raises(ValueError, match="cu_seq_lens_q.*position_ids that restart"):
            model(**{**inputs, **changed}, **varlen)


@pytest.mark.parametrize("name", ["bert", "longformer", "transformer", "transfo_xl", "rnn"])
def test_the_other_families_refuse_the_flash_attention_description(name):
    """No other family packs (BERT's and Longformer's counterparts do not either): a padding-free batch's
    flash-attention description is a ValueError there, with or without position_ids, instead of being dropped while
    the sequences attend to each other."""
    family = FAMILIES[name]
    inputs, varlen = flattened_with_flash_attention_kwargs(sequences((3, 4)))
    kwargs = {"input_ids": inputs["input_ids"], **varlen}
    if family.seq2seq:
        kwargs["decoder_input_ids"] = inputs["input_ids"]
    with pytest.raises(ValueError, match="cu_seq_lens_q.*would mix the sequences"):
        family.tiny_model().eval()(**kwargs)
    if name in ("bert", "longformer"):  # the encoders take position_ids: refused beside them too
        with pytest.raises(ValueError, match="would mix the sequences"):
            family.tiny_model().eval()(**kwargs, position_ids=inputs["position_ids"])


@pytest.mark.parametrize("name", ["transformer", "transfo_xl", "rnn"])
def test_the_other_decoders_take_no_position_ids(name):
    """No other decoder can be handed a packed batch: given position_ids are refused, not ignored."""
    family = FAMILIES[name]
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    kwargs = {"input_ids": ids, "position_ids": torch.tensor([[0, 1, 2, 0, 1, 2]])}
    if family.seq2seq:
        kwargs["decoder_input_ids"] = ids
    with pytest.raises(ValueError, match="does not support position_ids=.*computes its own"):
        family.tiny_model()(**kwargs)


# --------------------------------------------------------------------------------------------------------------
# The rule, against transformers' masking_utils
# --------------------------------------------------------------------------------------------------------------


@st.composite
def packed_positions(draw):
    """(batch, position_ids): each row either sequences of random lengths, each starting at 0 or at a random later
    position, or arbitrary positions; sometimes one row shared by the whole batch, (1, length)."""
    batch, length = draw(st.integers(1, 3)), draw(st.integers(1, 12))

    def row() -> list[int]:
        if draw(st.booleans()):
            return draw(st.lists(st.integers(0, 6), min_size=length, max_size=length))
        positions = []
        while len(positions) < length:
            start, size = draw(st.integers(0, 3)), draw(st.integers(1, 5))
            positions += range(start, start + size)
        return positions[:length]

    return batch, torch.tensor([row() for _ in range(1 if draw(st.booleans()) else batch)])


@given(packed_positions())
def test_sequence_boundaries_and_mask_are_transformers_rule(case):
    """Our sequence indices equal ``find_packed_sequence_indices`` (None when no row holds a second sequence), and
    our whole relation (causal ∧ same sequence) equals ``create_causal_mask``'s, from the same position_ids."""
    batch, position_ids = case
    length = position_ids.shape[1]
    expected_ids = find_packed_sequence_indices(position_ids.expand(batch, -1))
    actual_ids = packed_sequences(position_ids, batch, length)
    assert (actual_ids is None) == (expected_ids is None)
    if expected_ids is not None:
        assert torch.equal(actual_ids, expected_ids)

    config = transformers.GPT2Config()
    config._attn_implementation = "eager"  # the materialised additive mask: 0 where a query may attend
    # (positionally: the cache's parameter is named past_key_values before transformers 5.24, cache from 5.24 on)
    expected = create_causal_mask(config, torch.zeros(batch, length, 4), None, None, position_ids)
    arange = torch.arange(length)
    mask = decoder_self_attention_mask(None, batch, length, arange, False, position_ids=position_ids, cached=False)
    actual = mask.relation
    actual = torch.ones(batch, 1, length, length, dtype=torch.bool) if actual is None else actual
    assert torch.equal(actual.expand(batch, 1, length, length), expected == 0)


def test_no_packing_with_a_mask_or_a_cache():
    """transformers' condition: position_ids that restart say nothing when a mask or a cache is given (then the
    relation is the mask's, or causal over the cache); without position_ids nothing is packed either."""
    restart = torch.tensor([[0, 1, 0, 1]])
    arange = torch.arange(4)
    for attention_mask, position_ids, cached in (
        (torch.ones(1, 4), restart, False),
        (None, restart, True),
        (None, None, False),
    ):
        checked = check_decoder_mask(attention_mask, 1, 4, arange, False)
        mask = decoder_self_attention_mask(checked, 1, 4, arange, False, position_ids=position_ids, cached=cached)
        assert torch.equal(mask.relation, causal_mask(4, 4, arange.device))  # causal alone: nothing packed


# --------------------------------------------------------------------------------------------------------------
# TRL's SFTTrainer: packing and padding_free
# --------------------------------------------------------------------------------------------------------------


CHECKPOINTING = (
    "activation_checkpointing"
    if hasattr(transformers.TrainingArguments, "activation_checkpointing")
    else "gradient_checkpointing"
)


def sft_first_step_loss(tmp_path, tokenizer, texts, **settings) -> float:
    """The logged loss of the first SFTTrainer step (learning rate 0) on a fresh model with the same weights."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    config = GPT.tiny_config(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        initializer_range=0.5,  # the issue's: large activations, so that attending across sequences shows
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        embedding_dropout_prob=0.0,
    )
    torch.manual_seed(0)
    model = ScratchGPTLMHeadModel(config)
    args = SFTConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=len(texts),  # every example in the first step
        max_steps=1,
        learning_rate=0.0,
        bf16=False,  # TRL's default (True) would compare bf16 roundings of differently shaped batches
        report_to=[],
        use_cpu=True,
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
        **{"max_length": 64, **settings},  # longer than every example: nothing is cut
        # TRL's default turns it on through the old name (gradient_checkpointing), which warns from transformers 5.x
        **{CHECKPOINTING: False},
    )
    trainer = SFTTrainer(
        model=model, args=args, train_dataset=Dataset.from_dict({"text": texts}), processing_class=tokenizer
    )
    batch = next(iter(trainer.get_train_dataloader()))
    padding_free = settings.get("packing") or settings.get("padding_free")
    assert ("attention_mask" in batch) is not padding_free, "the padding-free batches carry no attention mask"
    trainer.train()
    return next(entry["loss"] for entry in trainer.state.log_history if "loss" in entry)


def test_trl_sft_packing_first_step_loss_equals_the_padded_one(fixtures_dir, tmp_path):
    """TRL 1.16's SFTTrainer with ``packing=True`` (best-fit packing, padding-free batches) and with
    ``padding_free=True``: the first step's loss equals that of the same examples padded (≤ 1e-4)."""
    from hf_scratch.tools.tokenization import train_tokenizer

    lines = [line for line in (fixtures_dir / "shakespeare.txt").read_text().splitlines() if line.strip()]
    tokenizer = train_tokenizer(lines[:200], "bpe", vocab_size=300)
    texts = lines[:8]
    padded_loss = sft_first_step_loss(tmp_path / "padded", tokenizer, texts)
    # (padding_free alone does not cut examples, and TRL asks to say so with max_length=None)
    for settings in ({"packing": True}, {"padding_free": True, "max_length": None}):
        loss = sft_first_step_loss(tmp_path / next(iter(settings)), tokenizer, texts, **settings)
        assert abs(loss - padded_loss) <= 1e-4, (settings, loss, padded_loss)

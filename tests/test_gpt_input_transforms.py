"""GPT-1 fine-tuning (Radford et al. 2018 §3.2-3.3): the input transformations for classification, entailment,
similarity and multiple choice, on a tiny model with a byte-level BPE tokenizer trained on the fixture text, and the
auxiliary objective L3 = L2 + λ·L1."""

import pytest
import torch
import torch.nn.functional as F

from hf_scratch import (
    GPTTaskInputs,
    ScratchGPTConfig,
    ScratchGPTDoubleHeadsModel,
    ScratchGPTForSequenceClassification,
    ScratchGPTLMHeadModel,
    language_modeling_labels,
)
from hf_scratch.tools.tokenization import train_tokenizer


@pytest.fixture(scope="module")
def bpe_lines(fixtures_dir):
    return [line for line in (fixtures_dir / "shakespeare.txt").read_text().splitlines() if line.strip()]


@pytest.fixture
def task(bpe_lines):
    """A fresh tokenizer per test (GPTTaskInputs adds tokens to it) and the task-input builder."""
    tokenizer = train_tokenizer(bpe_lines, "bpe", vocab_size=300)
    return GPTTaskInputs(tokenizer)


def tiny(task, placement="post", **overrides) -> ScratchGPTConfig:
    return ScratchGPTConfig(
        vocab_size=len(task.tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=64,
        layer_norm_placement=placement,
        **overrides,
    )


def test_special_tokens_are_added_and_embeddings_resized(task, bpe_lines):
    tokenizer = task.tokenizer
    assert len({task.start_id, task.delimiter_id, task.extract_id}) == 3
    assert min(task.start_id, task.delimiter_id, task.extract_id) >= 300 - 3  # new rows at the end of the vocabulary
    assert tokenizer.convert_ids_to_tokens(task.extract_id) == "<|extract|>"
    # a pre-trained LM (old vocabulary) grows rows for them and keeps its tied head
    old = train_tokenizer(bpe_lines, "bpe", vocab_size=300)
    model = ScratchGPTLMHeadModel(
        ScratchGPTConfig(
            vocab_size=len(old), hidden_size=32, num_hidden_layers=1, num_attention_heads=4, max_position_embeddings=64
        )
    )
    model.resize_token_embeddings(len(tokenizer))
    assert model.lm_head.weight is model.model.embeddings.word.weight
    assert model.lm_head.weight.shape[0] == len(tokenizer)
    batch = task.classification(["to be or not to be"])
    assert model(**batch).logits.shape[-1] == len(tokenizer)


def test_classification_frame_and_auxiliary_lm_loss(task):
    texts = ["to be or not to be", "my lord"]
    batch = task.classification(texts)
    ids, mask = batch["input_ids"], batch["attention_mask"]
    for row, text in enumerate(texts):
        tokens = task.tokenizer(text, add_special_tokens=False)["input_ids"]
        length = int(mask[row].sum())
        assert ids[row, :length].tolist() == [task.start_id, *tokens, task.extract_id]
        assert (mask[row, length:] == 0).all()

    torch.manual_seed(0)
    model = ScratchGPTForSequenceClassification(tiny(task, num_labels=3, lm_loss_weight=0.5)).eval()
    labels, lm_labels = torch.tensor([2, 0]), language_modeling_labels(batch)
    with torch.no_grad():
        out = model(**batch, labels=labels, lm_labels=lm_labels)
        hidden = model.model(**batch).last_hidden_state
    extract = mask.sum(-1) - 1  # the extract token is each row's last real token
    expected_logits = model.score(hidden[torch.arange(2), extract])
    assert torch.allclose(out.logits, expected_logits, atol=1e-6)
    assert (ids[torch.arange(2), extract] == task.extract_id).all()
    lm_logits = hidden @ model.model.embeddings.word.weight.T  # L1 through the tied token embeddings
    lm_loss = F.cross_entropy(
        lm_logits[:, :-1].reshape(-1, lm_logits.shape[-1]), lm_labels[:, 1:].reshape(-1), ignore_index=-100
    )
    task_loss = F.cross_entropy(expected_logits, labels)
    assert torch.allclose(out.loss, task_loss + 0.5 * lm_loss, atol=1e-5)
    with torch.no_grad():
        assert torch.allclose(model(**batch, labels=labels).loss, task_loss, atol=1e-6)  # no LM labels: L2 alone


def test_entailment_frame_and_padding_does_not_move_the_extract_token(task):
    premises, hypotheses = ["the king is dead", "a horse"], ["long live the king", "my kingdom for a horse and more"]
    batch = task.entailment(premises, hypotheses)
    row = batch["input_ids"][0, : int(batch["attention_mask"][0].sum())].tolist()
    premise = task.tokenizer(premises[0], add_special_tokens=False)["input_ids"]
    hypothesis = task.tokenizer(hypotheses[0], add_special_tokens=False)["input_ids"]
    assert row == [task.start_id, *premise, task.delimiter_id, *hypothesis, task.extract_id]

    model = ScratchGPTForSequenceClassification(tiny(task, "pre", num_labels=3)).eval()
    with torch.no_grad():
        together = model(**batch).logits
        alone = model(**task.entailment(premises[:1], hypotheses[:1])).logits  # no padding at all
    assert batch["attention_mask"][0].sum() < batch["input_ids"].shape[1]  # row 0 really is padded in the batch
    assert torch.allclose(together[0], alone[0], atol=1e-5)


@pytest.mark.parametrize("placement", ["post", "pre"])
def test_similarity_sums_both_orderings_and_is_order_invariant(task, placement):
    a, b = (
        ["the quality of mercy is not strained", "to sleep"],
        ["it droppeth as the gentle rain", "perchance to dream"],
    )
    forward, backward = task.similarity(a, b), task.similarity(b, a)
    assert forward["input_ids"].shape[:2] == (2, 2)
    first = forward["input_ids"][0, 0, : int(forward["attention_mask"][0, 0].sum())].tolist()
    a_tokens = task.tokenizer(a[0], add_special_tokens=False)["input_ids"]
    b_tokens = task.tokenizer(b[0], add_special_tokens=False)["input_ids"]
    assert first == [task.start_id, *a_tokens, task.delimiter_id, *b_tokens, task.extract_id]
    assert torch.equal(forward["input_ids"][:, 0], backward["input_ids"][:, 1])  # the same two orderings, swapped

    torch.manual_seed(0)  # a larger init than GPT's 0.02 so that a random decoder is clearly order-sensitive
    model = ScratchGPTForSequenceClassification(tiny(task, placement, num_labels=1, initializer_range=0.3)).eval()
    with torch.no_grad():
        ab, ba = model(**forward).logits, model(**backward).logits
        # each ordering alone, as a plain classification input: the decoder is unidirectional, so order matters
        single_ab = model(input_ids=forward["input_ids"][:, 0], attention_mask=forward["attention_mask"][:, 0]).logits
        single_ba = model(input_ids=forward["input_ids"][:, 1], attention_mask=forward["attention_mask"][:, 1]).logits
        hidden = model.model(
            input_ids=forward["input_ids"].flatten(0, 1), attention_mask=forward["attention_mask"].flatten(0, 1)
        ).last_hidden_state
    assert ab.shape == (2, 1)
    assert torch.allclose(ab, ba, atol=1e-5)
    assert (single_ab - single_ba).abs().max() > 1e-3
    # the final states are summed before the linear layer: h(a$b) + h(b$a)
    extract = forward["attention_mask"].flatten(0, 1).sum(-1) - 1
    states = hidden[torch.arange(4), extract].view(2, 2, -1).sum(1)
    assert torch.allclose(ab, model.score(states), atol=1e-5)


def test_multiple_choice_scores_each_choice_at_its_extract_token(task):
    contexts = ["the king is dead", "to be or not to be"]
    questions = ["who rules now?", "what is the question?"]
    choices = [["long live the king", "nobody", "a horse"], ["that", "a rose by any other name", "mercy"]]
    batch = task.multiple_choice(contexts, choices, questions)
    assert batch["input_ids"].shape[:2] == (2, 3) and batch["mc_token_ids"].shape == (2, 3)
    picked = batch["input_ids"].gather(-1, batch["mc_token_ids"][..., None]).squeeze(-1)
    assert (picked == task.extract_id).all()
    row = batch["input_ids"][0, 1, : int(batch["attention_mask"][0, 1].sum())].tolist()
    context, question, answer = (
        task.tokenizer(t, add_special_tokens=False)["input_ids"] for t in (contexts[0], questions[0], choices[0][1])
    )
    assert row == [task.start_id, *context, *question, task.delimiter_id, *answer, task.extract_id]

    torch.manual_seed(0)
    model = ScratchGPTDoubleHeadsModel(tiny(task, lm_loss_weight=0.5, multiple_choice_dropout=0.0)).eval()
    mc_labels, labels = torch.tensor([0, 1]), language_modeling_labels(batch)
    with torch.no_grad():
        out = model(**batch, mc_labels=mc_labels, labels=labels)
        hidden = model.model(
            input_ids=batch["input_ids"].flatten(0, 1), attention_mask=batch["attention_mask"].flatten(0, 1)
        ).last_hidden_state
    states = hidden[torch.arange(6), batch["mc_token_ids"].flatten()].view(2, 3, -1)
    assert torch.allclose(out.mc_logits, model.multiple_choice_head.summary(states).squeeze(-1), atol=1e-5)
    assert torch.allclose(out.mc_loss, F.cross_entropy(out.mc_logits, mc_labels), atol=1e-6)  # softmax over choices
    assert torch.allclose(out.loss, out.mc_loss + 0.5 * out.lm_loss, atol=1e-6)


def test_multiple_choice_fine_tuning_learns(task):
    """A few steps of L3 = L2 + λ·L1 fit a toy task: the right answer repeats the context's last word."""
    contexts = ["the king", "a horse", "gentle rain", "the rose"]
    choices = [["king", "rain"], ["rose", "horse"], ["rain", "king"], ["horse", "rose"]]
    batch = task.multiple_choice(contexts, choices)
    batch["mc_labels"], batch["labels"] = torch.tensor([0, 1, 0, 1]), language_modeling_labels(batch)
    torch.manual_seed(0)
    model = ScratchGPTDoubleHeadsModel(
        tiny(
            task,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            embedding_dropout_prob=0.0,
            multiple_choice_dropout=0.0,
        )
    ).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(40):
        out = model(**batch)
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(out.mc_loss.item())
    assert losses[-1] < 0.1 * losses[0]
    model.eval()
    with torch.no_grad():
        assert torch.equal(model(**batch).mc_logits.argmax(-1), batch["mc_labels"])


def test_truncation_and_bad_input(task):
    long = " ".join(["to be or not to be"] * 20)
    truncating = GPTTaskInputs(task.tokenizer, max_length=16)
    batch = truncating.entailment([long], ["the question"])
    row = batch["input_ids"][0].tolist()
    assert len(row) == 16 and row[0] == task.start_id and row[-1] == task.extract_id and task.delimiter_id in row
    with pytest.raises(ValueError, match="one entry per example"):
        task.entailment(["a", "b"], ["c"])
    with pytest.raises(ValueError, match="same, non-zero number of choices"):
        task.multiple_choice(["a", "b"], [["x", "y"], ["z"]])
    with pytest.raises(ValueError, match="strings"):
        task.classification([3])

"""Longformer: parity with transformers on converted weights, the banded kernel against dense attention under the
equivalent boolean mask (hypothesis, forward and gradients; tests/reference.py), global tokens and dilation, the
attention maps' layout, the HF contract, and bad input.

What every family shares is checked once, in the cross-family files (test_robustness.py, test_every_family.py,
test_conformance.py, test_generation.py, …: CONTRIBUTING.md, "A family, step by step", 6. Tests)."""

import ast
import inspect
import textwrap

import pytest
import torch
import transformers
from batches import longformer_batch as padded_batch
from comparing import assert_converts_back, assert_multiple_choice_parity, max_diff_on_real
from dispatch import dispatched_ops
from families import ENCODER_HEADS, FAMILIES
from hypothesis import given
from hypothesis import strategies as st
from reference import dense_longformer_attention, sliding_window_mask
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import LongformerConfig, pipeline

import hf_scratch
from hf_scratch import (
    ScratchLongformerConfig,
    ScratchLongformerForMaskedLM,
    ScratchLongformerForQuestionAnswering,
    ScratchLongformerForSequenceClassification,
    ScratchLongformerForTokenClassification,
    ScratchLongformerModel,
    modeling_bert,
    modeling_longformer,
)
from hf_scratch.banded_attention import ATTENTION_KERNELS, GlobalTokens
from hf_scratch.convert import from_transformers, to_transformers
from hf_scratch.encoder_heads import EncoderHead
from hf_scratch.modeling_longformer import ScratchLongformerSelfAttention
from hf_scratch.tools.tokenization import train_tokenizer

TINY = FAMILIES["longformer"].tiny  # windows [4, 8]: transformers pads to the largest, a multiple of the others
tiny_config = FAMILIES["longformer"].tiny_config
PAD = TINY["pad_token_id"]


# ---- parity with transformers -------------------------------------------------------------------------------

HEADS = [("Longformer" + head, field, extra) for head, field, extra in ENCODER_HEADS]


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("reference_name,field,extra", HEADS)
def test_parity_with_transformers(reference_name, field, extra, attn_implementation):
    torch.manual_seed(0)
    reference = getattr(transformers, reference_name)(LongformerConfig(**TINY, **extra)).eval()
    ours = from_transformers(reference).eval()
    ours.config._attn_implementation = attn_implementation
    assert type(ours).__name__ == reference_name.replace("Longformer", "ScratchLongformer")
    input_ids, attention_mask, global_attention_mask = padded_batch()
    inputs = dict(input_ids=input_ids, attention_mask=attention_mask, global_attention_mask=global_attention_mask)
    with torch.no_grad():
        expected = reference(**inputs, output_attentions=True)
        actual = ours(**inputs, output_attentions=attn_implementation == "eager")
    for name in [field, "end_logits"]:
        if name in expected:
            assert max_diff_on_real(expected[name], actual[name], attention_mask) <= 1e-4, name
    if attn_implementation == "eager":  # weights in transformers' layout: global columns, then offsets -w/2 … w/2
        real = attention_mask.bool()[:, None, :, None]
        for layer, (a, b) in enumerate(zip(expected.attentions, actual.attentions)):
            assert a.shape == b.shape, layer
            assert (a - b).masked_fill(~real, 0).abs().max() <= 1e-5, layer
        slot_is_real = GlobalTokens.from_masks(attention_mask.bool(), global_attention_mask.bool()).is_real
        for layer, (a, b) in enumerate(zip(expected.global_attentions, actual.global_attentions)):
            a = a[:, :, : input_ids.shape[1]]  # transformers leaves these padded to the window multiple
            keep = real & slot_is_real[:, None, None, :]  # transformers fills missing slots with a uniform row
            assert (a - b).masked_fill(~keep, 0).abs().max() <= 1e-5, layer

    assert_converts_back(ours, reference)


@pytest.mark.parametrize("reference_name", ["LongformerForSequenceClassification", "LongformerForQuestionAnswering"])
def test_default_global_attention_matches_transformers(reference_name):
    """Without a global_attention_mask: the first token (classification) or the question (QA) is global."""
    reference = getattr(transformers, reference_name)(LongformerConfig(**TINY)).eval()
    ours = from_transformers(reference).eval()
    input_ids, attention_mask, _ = padded_batch()
    with torch.no_grad():
        expected = reference(input_ids=input_ids, attention_mask=attention_mask)
        actual = ours(input_ids=input_ids, attention_mask=attention_mask)
        no_global = ours(
            input_ids=input_ids, attention_mask=attention_mask, global_attention_mask=torch.zeros_like(input_ids)
        )
    field = "logits" if "logits" in expected else "start_logits"
    assert max_diff_on_real(expected[field], actual[field], attention_mask) <= 1e-4
    assert max_diff_on_real(no_global[field], actual[field], attention_mask) > 1e-4  # the default did something


def test_multiple_choice_parity():
    reference = transformers.LongformerForMultipleChoice(LongformerConfig(**TINY)).eval()
    input_ids, attention_mask, _ = padded_batch(batch=4)
    attention_mask[3] = 1
    shape = (2, 2, input_ids.shape[-1])
    inputs = dict(input_ids=input_ids.view(shape), attention_mask=attention_mask.view(shape))
    assert_multiple_choice_parity(
        reference, inputs
    )  # default global attention: the tokens after the first separator pair


def test_masked_lm_loss_matches_reference():
    reference = transformers.LongformerForMaskedLM(LongformerConfig(**TINY)).eval()
    ours = from_transformers(reference).eval()
    input_ids, attention_mask, global_attention_mask = padded_batch()
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    kwargs = dict(
        input_ids=input_ids, attention_mask=attention_mask, global_attention_mask=global_attention_mask, labels=labels
    )
    with torch.no_grad():
        assert abs(reference(**kwargs).loss.item() - ours(**kwargs).loss.item()) <= 1e-5


def test_load_reference_checkpoint_directory(tmp_path):
    from hf_scratch.convert import load_reference_checkpoint

    reference = transformers.LongformerForMaskedLM(LongformerConfig(**TINY)).eval()
    reference.save_pretrained(tmp_path)
    ours = load_reference_checkpoint(tmp_path)
    assert isinstance(ours, ScratchLongformerForMaskedLM) and ours.config.attention_window == [4, 8]
    input_ids, attention_mask, global_attention_mask = padded_batch()
    inputs = dict(input_ids=input_ids, attention_mask=attention_mask, global_attention_mask=global_attention_mask)
    with torch.no_grad():
        assert max_diff_on_real(reference(**inputs).logits, ours(**inputs).logits, attention_mask) <= 1e-4


# ---- the heads' forwards: written once (encoder_heads.py), with global_attention_mask third ----------------

ENCODER_HEAD_CLASSES = [
    getattr(module, name)
    for module in (modeling_bert, modeling_longformer)
    for name in module.__all__
    if issubclass(getattr(module, name), EncoderHead)
]


def forwards_written(cls) -> list[str]:
    """The classes of ``cls``'s MRO, in the package, whose own body writes a ``forward``."""
    written = []
    for base in cls.__mro__:
        if base.__module__.startswith("hf_scratch."):
            body = ast.parse(textwrap.dedent(inspect.getsource(base))).body[0].body
            if any(isinstance(node, ast.FunctionDef) and node.name == "forward" for node in body):
                written.append(base.__name__)
    return written


@pytest.mark.parametrize("cls", ENCODER_HEAD_CLASSES, ids=lambda cls: cls.__name__)
def test_a_heads_forward_is_written_once(cls):
    """Every head of the BERT-style encoders (BERT's, Longformer's) has one forward in its source: the shared head's,
    whose signature takes the family's inputs from its base model, or the head's own (BERT's pre-training)."""
    assert len(forwards_written(cls)) == 1, forwards_written(cls)


@pytest.mark.boundary
@pytest.mark.parametrize("reference_name", [name for name, _, _ in HEADS])
def test_positional_arguments_bind_as_in_transformers(reference_name):
    """``global_attention_mask`` is the third parameter, as in transformers' Longformer heads, and a positional call
    gives what the call by name gives. The parameters ours and transformers' share come in transformers' order, but
    for multiple choice, where transformers puts ``token_type_ids`` second (ours keeps the base model's order)."""
    cls = getattr(hf_scratch, "Scratch" + reference_name)
    ours = list(inspect.signature(cls.forward).parameters)
    theirs = list(inspect.signature(getattr(transformers, reference_name).forward).parameters)
    assert ours[1:4] == ["input_ids", "attention_mask", "global_attention_mask"]
    if reference_name != "LongformerForMultipleChoice":
        assert [name for name in ours if name in theirs] == [name for name in theirs if name in ours]
    model = cls(tiny_config(num_labels=2)).eval()
    input_ids, attention_mask, global_attention_mask = padded_batch()
    if reference_name == "LongformerForMultipleChoice":
        input_ids, attention_mask, global_attention_mask = (
            x[:, None].expand(-1, 2, -1) for x in (input_ids, attention_mask, global_attention_mask)
        )
    with torch.no_grad():
        by_position = model(input_ids, attention_mask, global_attention_mask)
        by_name = model(input_ids=input_ids, attention_mask=attention_mask, global_attention_mask=global_attention_mask)
    for name, value in by_name.items():
        torch.testing.assert_close(by_position[name], value, atol=0, rtol=0)


# ---- the kernel against dense attention under the equivalent boolean mask ------------------------------------


@st.composite
def attention_problems(draw):
    heads = draw(st.sampled_from([1, 2, 3]))
    batch = draw(st.integers(1, 2))
    length = draw(st.integers(1, 19))
    window = 2 * draw(st.integers(1, 4))
    dilations = [draw(st.sampled_from([1, 1, 2, 3])) for _ in range(heads)]
    real_lengths = [draw(st.integers(0 if b else 1, length)) for b in range(batch)]
    is_global = [[draw(st.booleans()) and draw(st.booleans()) for _ in range(length)] for _ in range(batch)]
    implementation = draw(st.sampled_from(["eager", "sdpa"]))
    return heads, length, window, dilations, real_lengths, is_global, implementation


@given(attention_problems())
def test_banded_kernel_equals_dense_attention(problem):
    heads, length, window, dilations, real_lengths, is_global, implementation = problem
    config = ScratchLongformerConfig(
        hidden_size=4 * heads,
        num_attention_heads=heads,
        num_hidden_layers=1,
        intermediate_size=8,
        vocab_size=10,
        attention_window=window,
        attention_dilation=[dilations],
        attention_probs_dropout_prob=0.0,
    )
    config._attn_implementation = implementation
    attention = ScratchLongformerSelfAttention(config, 0)
    key_is_real = torch.arange(length)[None, :] < torch.tensor(real_lengths)[:, None]
    is_global = torch.tensor(is_global, dtype=torch.bool)
    hidden = torch.randn(len(real_lengths), length, 4 * heads, requires_grad=True)
    upstream = torch.randn(len(real_lengths), length, 4 * heads)

    def run(fn):
        attention.zero_grad()
        hidden.grad = None
        output = fn()
        (output * upstream).sum().backward()
        # without global tokens the global projections get no gradient at all: count that as zero
        grads = [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in attention.parameters()]
        return output.detach(), hidden.grad.clone(), grads

    banded = run(lambda: attention(hidden, key_is_real, GlobalTokens.from_masks(key_is_real, is_global))[0])
    dense = run(lambda: dense_longformer_attention(attention, hidden, key_is_real, is_global))
    assert torch.allclose(banded[0], dense[0], atol=1e-5), "forward"
    assert torch.allclose(banded[1], dense[1], atol=1e-5), "gradient of the input"
    for a, b in zip(banded[2], dense[2]):
        assert torch.allclose(a, b, atol=1e-5), "gradient of a weight"


def test_sliding_window_mask_is_the_dilated_band():
    mask = sliding_window_mask(9, 2, dilation=2)
    assert mask[4].nonzero().flatten().tolist() == [0, 2, 4, 6, 8]
    assert mask[1].nonzero().flatten().tolist() == [1, 3, 5]
    assert sliding_window_mask(5, 1)[2].nonzero().flatten().tolist() == [1, 2, 3]


class _LargestTensor(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(tensor, torch.Tensor):
                self.largest = max(self.largest, tensor.numel())
        return out


@pytest.mark.parametrize("attention_dilation", [1, [[1, 4]]])
def test_no_quadratic_tensor_anywhere(attention_dilation):
    """Forward and backward at n = 1024 with a window of 16 never create a tensor of n²/16 elements."""
    config = ScratchLongformerConfig(
        vocab_size=50,
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=8,
        attention_window=16,
        attention_dilation=attention_dilation,
        max_position_embeddings=1100,
        hidden_dropout_prob=0.0,
    )
    model = ScratchLongformerModel(config)
    length = 1024
    input_ids = torch.randint(3, 50, (1, length))
    global_attention_mask = torch.zeros_like(input_ids)
    global_attention_mask[0, [0, 500]] = 1
    with _LargestTensor() as mode:
        model(input_ids=input_ids, global_attention_mask=global_attention_mask).last_hidden_state.sum().backward()
    assert mode.largest < length * length // 16, mode.largest


# ---- properties ----------------------------------------------------------------------------------------------


def test_eager_equals_sdpa_with_dilation_and_globals():
    torch.manual_seed(0)
    dilated = dict(attention_dilation=[[1, 2, 1, 3], 2])
    eager = ScratchLongformerForMaskedLM._from_config(tiny_config(**dilated), attn_implementation="eager").eval()
    sdpa = ScratchLongformerForMaskedLM._from_config(tiny_config(**dilated), attn_implementation="sdpa").eval()
    sdpa.load_state_dict(eager.state_dict())
    assert eager.config._attn_implementation == "eager" and sdpa.config._attn_implementation == "sdpa"
    input_ids, attention_mask, global_attention_mask = padded_batch()
    inputs = dict(input_ids=input_ids, attention_mask=attention_mask, global_attention_mask=global_attention_mask)
    with torch.no_grad():
        a = eager(**inputs, output_attentions=True)
        b = sdpa(**inputs)
    assert max_diff_on_real(a.logits, b.logits, attention_mask) <= 1e-5
    # local rows of real, non-global tokens sum to one over global columns + window; global rows are zero
    is_global = (global_attention_mask.bool() & attention_mask.bool())[:, None, :]
    sums = a.attentions[0].sum(-1)
    real = attention_mask.bool()[:, None, :].expand_as(sums)
    assert torch.allclose(sums[real & ~is_global], torch.ones(1), atol=1e-5)
    assert (sums[~real] == 0).all() and (sums[is_global.expand_as(sums)] == 0).all()
    # each real global token's weights over all tokens sum to one; missing slots (rows with fewer globals) are zero
    slot_is_real = GlobalTokens.from_masks(attention_mask.bool(), is_global[:, 0]).is_real[:, None, :].float()
    assert torch.allclose(a.global_attentions[0].sum(2), slot_is_real.expand(-1, 4, -1), atol=1e-5)


def test_the_global_rows_mask_is_built_once_per_forward(monkeypatch):
    """Every layer's global rows see every real key through one mask, built with the global tokens and shared."""
    import hf_scratch.modeling_longformer as modeling

    seen = []

    def recording_attend(query, key, value, mask, **settings):
        if settings.get("queries_from_data"):  # the global rows
            seen.append(mask)
        return attend(query, key, value, mask, **settings)

    attend = modeling.attend
    monkeypatch.setattr(modeling, "attend", recording_attend)
    model = ScratchLongformerForMaskedLM(tiny_config()).eval()
    input_ids, attention_mask, global_attention_mask = padded_batch()
    with torch.no_grad():
        model(input_ids=input_ids, attention_mask=attention_mask, global_attention_mask=global_attention_mask)
    assert len(seen) == model.config.num_hidden_layers > 1
    assert all(mask is seen[0] for mask in seen)
    relation = seen[0].relation  # (batch, 1, G, n): a real global slot sees every real key
    slot_is_real = GlobalTokens.from_masks(attention_mask.bool(), global_attention_mask.bool()).is_real
    assert torch.equal(relation, attention_mask.bool()[:, None, None, :] & slot_is_real[:, None, :, None])


def test_global_attention_on_padding_is_ignored():
    """A padded position marked global changes nothing: padding wins over global (the cross-family padding
    invariance, test_robustness.py, marks no padding global)."""
    model = ScratchLongformerForMaskedLM(tiny_config()).eval()
    input_ids = torch.randint(3, 97, (1, 9))
    padded = torch.cat([input_ids, torch.full((1, 6), PAD)], dim=1)
    mask = torch.cat([torch.ones(1, 9), torch.zeros(1, 6)], dim=1).long()
    global_alone = torch.zeros(1, 9, dtype=torch.long)
    global_alone[0, 2] = 1
    global_padded = torch.cat([global_alone, torch.ones(1, 6, dtype=torch.long)], dim=1)  # padding marked global
    with torch.no_grad():
        alone = model(input_ids=input_ids, global_attention_mask=global_alone).logits
        with_padding = model(input_ids=padded, attention_mask=mask, global_attention_mask=global_padded).logits[:, :9]
    assert (alone - with_padding).abs().max() <= 1e-5


def test_dilation_changes_what_a_token_sees():
    """With dilation 2 and window 4, token 8 sees 4, 6, 8, 10, 12: changing token 7 leaves it alone, token 12 not."""
    config = tiny_config(num_hidden_layers=1, attention_window=4, attention_dilation=2)
    model = ScratchLongformerModel(config).eval()
    input_ids = torch.randint(3, 97, (1, 16))
    with torch.no_grad():
        base = model(input_ids=input_ids).last_hidden_state[0, 8]
        for position, changes in [(7, False), (9, False), (12, True), (6, True)]:
            edited = input_ids.clone()
            edited[0, position] = (edited[0, position] + 1 - 3) % 94 + 3
            moved = (model(input_ids=edited).last_hidden_state[0, 8] - base).abs().max() > 1e-6
            assert bool(moved) == changes, position


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_padded_rows_and_padded_globals_get_no_weight(attn_implementation):
    """Beyond the cross-family check of fully masked rows (test_robustness.py): global tokens on padding and on a
    row of padding only, with per-head dilations; padded queries get no weight at all."""
    config = tiny_config(attention_dilation=[[1, 2, 1, 2], 1])
    model = ScratchLongformerModel._from_config(config, attn_implementation=attn_implementation)
    input_ids, attention_mask, global_attention_mask = padded_batch()
    attention_mask[0] = 0  # a row that may attend nothing at all, with global tokens on it
    out = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        global_attention_mask=global_attention_mask,
        output_attentions=attn_implementation == "eager",
    )
    assert torch.isfinite(out.last_hidden_state).all()
    out.last_hidden_state.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    if out.attentions:
        assert (out.attentions[0][0] == 0).all() and (out.attentions[0][2, :, 6:] == 0).all()


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_feed_forward_input_projection_runs_once_per_layer(mode):
    """The feed-forward network recomputes its activation in the backward pass; no mode may run x W₁ twice."""
    model = ScratchLongformerForMaskedLM(tiny_config())
    model.train(mode == "train")
    calls = []
    for layer in model.model.layers:
        layer.feed_forward.fc_in.register_forward_hook(lambda *_: calls.append(1))
    input_ids, attention_mask, global_attention_mask = padded_batch()
    with torch.set_grad_enabled(mode == "train"):
        model(input_ids=input_ids, attention_mask=attention_mask, global_attention_mask=global_attention_mask)
    assert len(calls) == len(model.model.layers)


def test_training_runs_the_attention_kernel_once_per_layer():
    """The local attention is checkpointed (its key windows are rebuilt in the backward pass), but the kernel's
    output is kept: forward + backward runs the fused attention once per layer for the band and once for the global
    tokens' rows, not again for the band. (Without attention dropout: with it, SDPA on the CPU takes the unfused
    path.)"""
    model = ScratchLongformerForMaskedLM(tiny_config(attention_probs_dropout_prob=0.0)).train()
    input_ids, attention_mask, global_attention_mask = padded_batch()
    ops = dispatched_ops(
        lambda: model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            global_attention_mask=global_attention_mask,
            labels=input_ids.masked_fill(attention_mask == 0, -100),
        ).loss.backward()
    )
    assert sum(op in ATTENTION_KERNELS for op in ops) == 2 * len(model.model.layers)  # the band, the global rows


def test_trainer_masked_lm_loss_falls(wordpiece, fixtures_dir, tmp_path):
    from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments

    lines = [line for line in (fixtures_dir / "shakespeare.txt").read_text().splitlines() if len(line.split()) > 4]
    examples = [wordpiece(line, truncation=True, max_length=32) for line in lines[:200]]
    config = tiny_config(
        vocab_size=len(wordpiece),
        pad_token_id=wordpiece.pad_token_id,
        sep_token_id=wordpiece.sep_token_id,
        max_position_embeddings=40,
        hidden_size=48,
        intermediate_size=96,
        attention_window=[8, 16],
        attention_dilation=[1, [1, 2, 1, 2]],
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    args = TrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=16,
        max_steps=60,
        learning_rate=3e-3,
        logging_steps=5,
        save_strategy="no",
        report_to=[],
        seed=0,
        use_cpu=True,
        warmup_steps=4,
        lr_scheduler_type="constant_with_warmup",
    )
    collator = DataCollatorForLanguageModeling(wordpiece, mlm_probability=0.15, seed=0)
    trainer = Trainer(
        model=ScratchLongformerForMaskedLM(config), args=args, train_dataset=examples, data_collator=collator
    )
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    # from ~ln(300) = 5.7 (uniform) toward the unigram entropy of the masked tokens
    assert len(losses) >= 10 and sum(losses[-4:]) / 4 < sum(losses[:2]) / 2 - 0.3, losses


def test_heads_compute_losses():
    input_ids, attention_mask, _ = padded_batch()
    regression = ScratchLongformerForSequenceClassification(tiny_config(num_labels=1))
    assert regression(input_ids=input_ids, labels=torch.tensor([0.5, 1.0, -1.0])).loss.ndim == 0
    assert regression.config.problem_type == "regression"
    qa = ScratchLongformerForQuestionAnswering(tiny_config())
    assert (
        qa(input_ids=input_ids, start_positions=torch.tensor([5, 6, 3]), end_positions=torch.tensor([6, 7, 3])).loss > 0
    )
    tokens = ScratchLongformerForTokenClassification(tiny_config(num_labels=4)).eval()
    labels = torch.randint(0, 4, input_ids.shape).masked_fill(attention_mask == 0, -100)
    count = int((labels != -100).sum())
    with torch.no_grad():
        mean = tokens(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        summed = tokens(
            input_ids=input_ids, attention_mask=attention_mask, labels=labels, num_items_in_batch=2 * count
        ).loss
    assert mean > 0 and torch.allclose(summed, mean / 2, atol=1e-6)


# ---- bad input -----------------------------------------------------------------------------------------------


def test_default_global_attention_needs_a_separator():
    qa = ScratchLongformerForQuestionAnswering(tiny_config()).eval()
    with pytest.raises(ValueError, match="sep_token_id"):
        qa(input_ids=torch.tensor([[5, 6, 7, 8]]))


def test_dilated_model_does_not_convert_to_transformers():
    with pytest.raises(ValueError, match="dilat"):
        to_transformers(ScratchLongformerModel(tiny_config(attention_dilation=2)))


# ---- pipelines -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wordpiece(fixtures_dir):
    return train_tokenizer((fixtures_dir / "shakespeare.txt").read_text().splitlines(), "wordpiece", vocab_size=300)


@pytest.fixture(scope="module")
def pipeline_config(wordpiece):
    return tiny_config(
        vocab_size=len(wordpiece),
        pad_token_id=wordpiece.pad_token_id,
        sep_token_id=wordpiece.sep_token_id,
        num_labels=2,
        id2label={0: "NEG", 1: "POS"},
        label2id={"NEG": 0, "POS": 1},
        max_position_embeddings=128,
        attention_dilation=[1, [1, 2, 1, 2]],
    )


PIPELINES = [  # task, head, input, what every result must satisfy
    (
        "fill-mask",
        ScratchLongformerForMaskedLM,
        "to be or not to [MASK]",
        lambda out, config: len(out) == 5 and all("token_str" in p for p in out),
    ),
    (
        "text-classification",
        ScratchLongformerForSequenceClassification,
        "my lord",
        lambda out, config: out[0]["label"] in {"NEG", "POS"},
    ),
    (
        "token-classification",
        ScratchLongformerForTokenClassification,
        "my good lord",
        lambda out, config: out and all(i["entity"] in {"NEG", "POS"} for i in out),
    ),
    (
        "feature-extraction",
        ScratchLongformerModel,
        "my lord",
        lambda out, config: torch.tensor(out).shape[-1] == config.hidden_size,
    ),
]


@pytest.mark.parametrize("task,head,text,check", PIPELINES, ids=[p[0] for p in PIPELINES])
def test_transformers_pipelines(task, head, text, check, wordpiece, pipeline_config):
    runner = pipeline(task, model=head(pipeline_config).eval(), tokenizer=wordpiece)
    assert check(runner(text), pipeline_config)


def test_question_answering_pipeline(wordpiece, pipeline_config, tmp_path):
    """The extractive QA pipeline of hf_scratch.pipelines, loading a saved Longformer QA model through the Auto
    classes; the question gets global attention by default."""
    ScratchLongformerForQuestionAnswering(pipeline_config).eval().save_pretrained(tmp_path)
    wordpiece.save_pretrained(tmp_path)
    qa = pipeline("scratch-question-answering", model=str(tmp_path))
    context = "the players shall laugh when the king is welcome"
    answer = qa(question="who laughs?", context=context)
    assert set(answer) >= {"answer", "score", "start", "end"}
    assert answer["answer"] == context[answer["start"] : answer["end"]] and answer["answer"]

"""The six families, for the tests: how to build each family's main head from drawn sizes and how to feed it
(the cross-family tests: robustness, conformance, torch.compile, ...), and the fixed tiny configuration, padded
batches and reference-parity helpers that the family files and ``test_every_family.py`` share."""

from __future__ import annotations

from collections.abc import Callable
from copy import deepcopy
from dataclasses import dataclass, field

import torch
from hypothesis import strategies as st

import hf_scratch

ATOL = 1e-4
# torch 2.7 (pyproject's floor) cannot compile a whole model with flex_attention into one graph on the CPU: Dynamo
# fails inside itself (BERT, GPT, the encoder-decoder: an AssertionError in side_effects.py; Longformer: Tensor.item).
# Longformer's compiled flex kernel alone runs there; 2.13 and 2.14.1 compile every model.
FLEX_COMPILES_WHOLE_MODELS = torch.__version__ >= "2.8"
FLEX_ON_TORCH_2_7 = "torch 2.7 cannot compile a whole model with flex_attention into one graph (families.py)"


def close(actual: torch.Tensor, expected: torch.Tensor, atol: float = ATOL) -> None:
    torch.testing.assert_close(actual, expected, atol=atol, rtol=atol)


def close_to_fp32(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """``actual`` (computed in bf16 or fp16) within rounding of ``expected`` (fp32). bf16 keeps 8 significant bits
    (eps = 2⁻⁷ ≈ 0.008: two to three decimal digits), and the tiny models round some twenty times between the ids
    and logits of order 1–10, so a few eps of error are expected: measured over 60 random configurations per family
    and kernel, at most 0.026 (3.3 eps) in bf16 and 0.015 in fp16 (whose CPU kernels accumulate in half precision:
    it does not get its own eps of 2⁻¹⁰). 8 bf16 eps absolute + 2 eps relative, for both formats, leaves more than
    twice the worst seen, and still fails an overflow (inf) or a mask that leaks in low precision."""
    eps = torch.finfo(torch.bfloat16).eps
    torch.testing.assert_close(actual.float(), expected.float(), atol=8 * eps, rtol=2 * eps)


def randomise(model: torch.nn.Module) -> torch.nn.Module:
    """Perturb every parameter (LayerNorm weights, biases, zero-initialised clusters) so every term matters."""
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)
    return model.eval()


# --------------------------------------------------------------------------------------------------------------
# The families: small random configurations, and the fixed tiny one of each family's own tests
# --------------------------------------------------------------------------------------------------------------


@dataclass
class Family:
    """How to build a family's main head from drawn sizes (or on its fixed tiny configuration), and how to feed it
    (ids, mask) → model kwargs."""

    name: str
    config: Callable[[dict], object]  # drawn sizes → config
    head: str  # class name in hf_scratch
    seq2seq: bool = False  # padding goes on the source; outputs are per decoder position
    causal: bool = False  # decoder-only causal LM
    padding_side: str = "right"
    fast_switch: dict | None = None  # config change that selects the other kernel (default: eager vs sdpa)
    extra_inputs: Callable[[dict, torch.Tensor], dict] = field(default=lambda sizes, ids: {})
    tiny: dict = field(default_factory=dict)  # the fixed tiny configuration of the family's own tests

    def build(self, sizes: dict, attn_implementation: str = "sdpa", **overrides):
        config = self.config(sizes, **overrides)
        torch.manual_seed(sizes["seed"])
        model = getattr(hf_scratch, self.head)._from_config(config, attn_implementation=attn_implementation)
        return randomise(model)

    def inputs(self, sizes: dict, ids: torch.Tensor, mask: torch.Tensor | None) -> dict:
        kwargs = {"input_ids": ids, "attention_mask": mask}
        if self.seq2seq:
            kwargs["decoder_input_ids"] = sizes["decoder_ids"][: ids.shape[0]]
        kwargs.update(self.extra_inputs(sizes, ids))
        return kwargs

    def tiny_config(self, **overrides):
        """The fixed tiny configuration of the family's own tests, with ``overrides``."""
        return getattr(hf_scratch, self.head).config_class(**{**deepcopy(self.tiny), **overrides})

    def tiny_model(self, head: str | None = None, attn_implementation: str = "sdpa", **overrides):
        """The main head (or the class named ``head``) on :meth:`tiny_config`, every parameter perturbed, in eval."""
        torch.manual_seed(0)
        model_class = getattr(hf_scratch, head or self.head)
        return randomise(
            model_class._from_config(self.tiny_config(**overrides), attn_implementation=attn_implementation)
        )


def _bert(s, **overrides):
    return hf_scratch.ScratchBertConfig(
        **{
            **dict(
                vocab_size=s["vocab"],
                hidden_size=s["hidden"],
                num_hidden_layers=s["layers"],
                num_attention_heads=s["heads"],
                intermediate_size=2 * s["hidden"],
                max_position_embeddings=32,
                hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0,
            ),
            **overrides,
        }
    )


def _gpt(s, **overrides):
    return hf_scratch.ScratchGPTConfig(
        **{
            **dict(
                vocab_size=s["vocab"],
                hidden_size=s["hidden"],
                num_hidden_layers=s["layers"],
                num_attention_heads=s["heads"],
                intermediate_size=2 * s["hidden"],
                max_position_embeddings=32,
                hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0,
                embedding_dropout_prob=0.0,
                pad_token_id=0,
                layer_norm_placement="pre" if s["variant"] else "post",
            ),
            **overrides,
        }
    )


def _transformer(s, **overrides):
    return hf_scratch.ScratchTransformerConfig(
        **{
            **dict(
                vocab_size=s["vocab"],
                hidden_size=s["hidden"],
                encoder_layers=s["layers"],
                decoder_layers=s["layers"],
                encoder_attention_heads=s["heads"],
                decoder_attention_heads=s["heads"],
                encoder_ffn_dim=2 * s["hidden"],
                decoder_ffn_dim=2 * s["hidden"],
                max_position_embeddings=32,
                hidden_dropout_prob=0.0,
                pre_norm=s["variant"],
            ),
            **overrides,
        }
    )


def _transfo_xl(s, **overrides):
    vocab = s["vocab"]
    return hf_scratch.ScratchTransfoXLConfig(
        **{
            **dict(
                vocab_size=vocab,
                cutoffs=[vocab // 3, 2 * vocab // 3],
                div_val=2 if s["variant"] else 1,
                hidden_size=s["hidden"],
                embedding_size=s["hidden"],
                num_hidden_layers=s["layers"],
                num_attention_heads=s["heads"],
                head_dim=s["hidden"] // s["heads"],
                intermediate_size=2 * s["hidden"],
                mem_len=s["mem_len"],
                clamp_len=64,
                same_length=False,
                hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0,
            ),
            **overrides,
        }
    )


def _longformer(s, **overrides):
    return hf_scratch.ScratchLongformerConfig(
        **{
            **dict(
                vocab_size=s["vocab"],
                hidden_size=s["hidden"],
                num_hidden_layers=s["layers"],
                num_attention_heads=s["heads"],
                intermediate_size=2 * s["hidden"],
                max_position_embeddings=64,
                attention_window=2 * s["one_sided_window"],
                attention_dilation=s["dilation"],
                hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0,
                pad_token_id=1,
            ),
            **overrides,
        }
    )


def _longformer_globals(s, ids):
    is_global = torch.zeros_like(ids)
    if s["variant"]:
        is_global[:, 0] = 1  # a classification-style global first token
    return {"global_attention_mask": is_global}


def _rnn(s, **overrides):
    return hf_scratch.ScratchRNNConfig(
        **{
            **dict(
                vocab_size=s["vocab"],
                hidden_size=s["hidden"],
                encoder_layers=s["layers"],
                decoder_layers=s["layers"],
                cell_type=s["cell_type"],
                attention_type=s["attention_type"],
                bahdanau_output=s["bahdanau_output"]
                if s["attention_type"] in hf_scratch.configuration_rnn.BAHDANAU_DECODERS
                else "linear",
                bidirectional_encoder=s["variant"],
                hidden_dropout_prob=0.0,
            ),
            **overrides,
        }
    )


# The fixed tiny configuration of each family's own tests (test_<family>.py, test_every_family.py)
TINY = {
    "bert": dict(
        vocab_size=97,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=40,
        type_vocab_size=2,
    ),
    "gpt": dict(
        vocab_size=97,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=48,
        layer_norm_placement="pre",
        pad_token_id=0,
    ),
    "transformer": dict(
        vocab_size=61,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=48,
        decoder_ffn_dim=48,
        max_position_embeddings=32,
        initializer_range=0.2,
    ),
    "transfo_xl": dict(
        vocab_size=40,
        cutoffs=[10, 20],
        div_val=2,
        hidden_size=16,
        embedding_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        head_dim=8,
        intermediate_size=32,
        mem_len=8,
        clamp_len=6,
        same_length=False,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    ),
    # windows differ per layer; transformers pads to the largest one, so it must be a multiple of the others
    "longformer": dict(
        vocab_size=97,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=64,
        attention_window=[4, 8],
        pad_token_id=1,
        sep_token_id=2,
    ),
    "rnn": dict(vocab_size=61, hidden_size=16, encoder_layers=2, decoder_layers=2, hidden_dropout_prob=0.0),
}

FAMILIES = {
    "bert": Family("bert", _bert, "ScratchBertForMaskedLM", tiny=TINY["bert"]),
    "gpt": Family("gpt", _gpt, "ScratchGPTLMHeadModel", causal=True, padding_side="left", tiny=TINY["gpt"]),
    "transformer": Family(
        "transformer",
        _transformer,
        "ScratchTransformerForConditionalGeneration",
        seq2seq=True,
        tiny=TINY["transformer"],
    ),
    "transfo_xl": Family(
        "transfo_xl",
        _transfo_xl,
        "ScratchTransfoXLLMHeadModel",
        causal=True,
        padding_side="left",
        tiny=TINY["transfo_xl"],
    ),
    "longformer": Family(
        "longformer",
        _longformer,
        "ScratchLongformerForMaskedLM",
        extra_inputs=_longformer_globals,
        tiny=TINY["longformer"],
    ),
    "rnn": Family(
        "rnn",
        _rnn,
        "ScratchRNNForConditionalGeneration",
        seq2seq=True,
        fast_switch={"rnn_implementation": ("cells", "fused")},
        tiny=TINY["rnn"],
    ),
}
NAMES = list(FAMILIES)
CAUSAL = [name for name in NAMES if FAMILIES[name].causal or FAMILIES[name].seq2seq]
CACHED = ["gpt", "transformer", "rnn"]


@st.composite
def sizes(draw, family: str):
    heads = draw(st.sampled_from([1, 2, 4]))
    s = {
        "seed": draw(st.integers(0, 2**16)),
        "vocab": draw(st.integers(24, 60)),
        "hidden": heads * draw(st.sampled_from([4, 8])),
        "heads": heads,
        "layers": draw(st.integers(1, 2)),
        "batch": draw(st.integers(1, 2)),
        "length": draw(st.integers(2, 9)),
        "pad": draw(st.integers(1, 4)),
        "variant": draw(st.booleans()),
        "mem_len": draw(st.integers(0, 6)),
        "one_sided_window": draw(st.integers(1, 3)),
        "dilation": draw(st.integers(1, 2)),
        "cell_type": draw(st.sampled_from(["rnn", "lstm", "gru", "gru_cho"])),
        "attention_type": draw(st.sampled_from(hf_scratch.configuration_rnn.ATTENTION_TYPES)),
        "bahdanau_output": draw(st.sampled_from(["linear", "maxout"])),
    }
    generator = torch.Generator().manual_seed(s["seed"])
    s["ids"] = torch.randint(3, s["vocab"], (s["batch"], s["length"]), generator=generator)
    s["decoder_ids"] = torch.randint(3, s["vocab"], (s["batch"], draw(st.integers(1, 6))), generator=generator)
    return s


def fixed_sizes() -> dict:
    return {
        "seed": 0,
        "vocab": 30,
        "hidden": 8,
        "heads": 2,
        "layers": 1,
        "batch": 2,
        "length": 6,
        "pad": 2,
        "variant": False,
        "mem_len": 4,
        "one_sided_window": 1,
        "dilation": 1,
        "cell_type": "lstm",
        "attention_type": "bahdanau",
        "bahdanau_output": "linear",
        "ids": torch.randint(3, 30, (2, 6)),
        "decoder_ids": torch.randint(3, 30, (2, 3)),
    }


def logits(model, kwargs) -> torch.Tensor:
    with torch.no_grad():
        return model(**kwargs).logits


def changed(ids: torch.Tensor, where, vocab: int) -> torch.Tensor:
    """A copy of ``ids`` with the tokens at ``where`` (an index or slice of positions) replaced by other ids ≥ 3."""
    changed = ids.clone()
    changed[:, where] = (changed[:, where] - 2) % (vocab - 3) + 3
    return changed


def pad_id(model) -> int:
    return model.config.pad_token_id if model.config.pad_token_id is not None else 0


# --------------------------------------------------------------------------------------------------------------
# The family tests' padded batches, and helpers for parity with the reference implementations
# --------------------------------------------------------------------------------------------------------------


def right_padded(
    low: int, high: int, batch: int, length: int, real_lengths: dict, pad: int = 0, seed: int | None = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask): ids drawn from [low, high) by a generator seeded with ``seed`` (None: from the
    global random stream), the rows of ``real_lengths`` ({row: number of real tokens}) right-padded with ``pad``."""
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    input_ids = torch.randint(low, high, (batch, length), generator=generator)
    attention_mask = torch.ones(batch, length, dtype=torch.long)
    for row, real in real_lengths.items():
        attention_mask[row, real:] = 0
    return input_ids.masked_fill(attention_mask == 0, pad), attention_mask


def bert_batch(batch=3, length=11, vocab=97):
    """(input_ids, attention_mask, token_type_ids): rows 1 and 2 padded; the second segment from position 5."""
    input_ids, attention_mask = right_padded(5, vocab, batch, length, {1: 7, 2: 4})
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[:, 5:] = 1
    return input_ids, attention_mask, token_type_ids


def gpt_batch(batch=3, length=10):
    """(input_ids, attention_mask), rows 1 and 2 right-padded."""
    return right_padded(3, FAMILIES["gpt"].tiny["vocab_size"], batch, length, {1: 7, 2: 4})


def longformer_batch(batch=3, length=13):
    """(input_ids, attention_mask, global_attention_mask). Length 13 is no window multiple; row 1 and 2 are padded;
    three separators per row (transformers' QA needs exactly three); global tokens include one on padding (row 2,
    position 6), which must stay masked."""
    tiny = FAMILIES["longformer"].tiny
    input_ids, attention_mask = right_padded(
        3, tiny["vocab_size"], batch, length, {1: 9, 2: 6}, pad=tiny["pad_token_id"]
    )
    input_ids[:, 3] = tiny["sep_token_id"]
    input_ids[:, 4] = tiny["sep_token_id"]
    for row in range(batch):
        input_ids[row, int(attention_mask[row].sum()) - 1] = tiny["sep_token_id"]
    global_attention_mask = torch.zeros_like(input_ids)
    global_attention_mask[0, [0, 5, 11]] = 1
    global_attention_mask[1, 2] = 1
    global_attention_mask[2, 6] = 1
    return input_ids, attention_mask, global_attention_mask


def transformer_sources(vocab=98, pad=98):
    """Three sources of lengths 9, 6 and 3, right-padded like a tokenizer does (ids from the global random
    stream; the defaults are the Marian reference's: pad = the last id)."""
    return right_padded(1, vocab, 3, 9, {1: 6, 2: 3}, pad=pad, seed=None)


def rnn_batch(batch=3, length=9, vocab=61):
    """(input_ids, attention_mask), rows 1 and 2 right-padded."""
    return right_padded(4, vocab, batch, length, {1: 6, 2: 3})


# The task heads of the encoder families (BERT, Longformer), as transformers names them after the family's prefix
# (BertModel, LongformerForMaskedLM, ...): (name without the prefix, the output compared, config settings of the head)
ENCODER_HEADS = [
    ("Model", "last_hidden_state", {}),
    ("ForMaskedLM", "logits", {}),
    ("ForSequenceClassification", "logits", {"num_labels": 3}),
    ("ForTokenClassification", "logits", {"num_labels": 5}),
    ("ForQuestionAnswering", "start_logits", {}),
]


# The heads each test class of test_transformers_model_tests.py runs transformers' model tests on (its
# ``all_model_classes``), kept here so that test_every_family.py checks offline, without the sdist that module needs,
# that every head a family registers has its test class
MODEL_TEST_HEADS = {
    "ScratchBertModelTest": (
        hf_scratch.ScratchBertModel,
        hf_scratch.ScratchBertForPreTraining,
        hf_scratch.ScratchBertForMaskedLM,
        hf_scratch.ScratchBertForNextSentencePrediction,
        hf_scratch.ScratchBertForSequenceClassification,
        hf_scratch.ScratchBertForTokenClassification,
        hf_scratch.ScratchBertForQuestionAnswering,
        hf_scratch.ScratchBertForMultipleChoice,
    ),
    "ScratchLongformerModelTest": (
        hf_scratch.ScratchLongformerModel,
        hf_scratch.ScratchLongformerForMaskedLM,
        hf_scratch.ScratchLongformerForSequenceClassification,
        hf_scratch.ScratchLongformerForQuestionAnswering,
        hf_scratch.ScratchLongformerForTokenClassification,
        hf_scratch.ScratchLongformerForMultipleChoice,
    ),
    "ScratchGPTModelTest": (
        hf_scratch.ScratchGPTModel,
        hf_scratch.ScratchGPTLMHeadModel,
        hf_scratch.ScratchGPTDoubleHeadsModel,
        hf_scratch.ScratchGPTForSequenceClassification,
        hf_scratch.ScratchGPTForMultipleChoice,
    ),
    "ScratchTransfoXLModelTest": (hf_scratch.ScratchTransfoXLModel, hf_scratch.ScratchTransfoXLLMHeadModel),
    "ScratchTransformerModelTest": (
        hf_scratch.ScratchTransformerModel,
        hf_scratch.ScratchTransformerForConditionalGeneration,
    ),
    "ScratchRNNModelTest": (hf_scratch.ScratchRNNModel, hf_scratch.ScratchRNNForConditionalGeneration),
    "ScratchRNNForSequenceClassificationModelTest": (hf_scratch.ScratchRNNForSequenceClassification,),
}


def max_diff_on_real(expected: torch.Tensor, actual: torch.Tensor, attention_mask: torch.Tensor) -> float:
    """The largest |expected − actual| over the real tokens (where ``attention_mask`` is 1) of per-token outputs;
    over every entry of outputs that are not per token (pooled, per sequence)."""
    if expected.shape[: attention_mask.dim()] == attention_mask.shape:
        expected, actual = expected[attention_mask.bool()], actual[attention_mask.bool()]
    return (expected - actual).abs().max().item()


def assert_converts_back(ours, reference):
    """``to_transformers(ours)`` is the reference's class again, with exactly the reference's weights."""
    from hf_scratch.convert import to_transformers

    back = to_transformers(ours)
    assert type(back) is type(reference)
    reference_state, back_state = reference.state_dict(), back.state_dict()
    assert set(reference_state) == set(back_state)
    for key in reference_state:
        assert torch.equal(reference_state[key], back_state[key]), key
    return back


def assert_multiple_choice_parity(reference, inputs: dict) -> None:
    """Our conversion of a reference multiple-choice head gives its logits and loss on ``inputs`` (two questions of
    two choices each: (2, 2, length)), and converts back to its weights."""
    from hf_scratch.convert import from_transformers, to_transformers

    ours = from_transformers(reference).eval()
    labels = torch.tensor([0, 1])
    with torch.no_grad():
        expected, actual = reference(**inputs, labels=labels), ours(**inputs, labels=labels)
    assert actual.logits.shape == (2, 2)
    assert (expected.logits - actual.logits).abs().max() <= 1e-4
    assert abs(expected.loss.item() - actual.loss.item()) <= 1e-4
    back = to_transformers(ours)
    assert all(torch.equal(back.state_dict()[k], v) for k, v in reference.state_dict().items())

"""The six families, for the tests: how to build each family's main head from drawn sizes and how to feed it
(the cross-family tests: robustness, conformance, torch.compile, ...), the fixed tiny configuration of each family's
own tests, and the heads the family and model tests run. Hand-made padded batches are in ``batches.py``, numeric
comparison and reference parity in ``comparing.py``."""

from __future__ import annotations

from collections.abc import Callable
from copy import deepcopy
from dataclasses import dataclass, field

import torch
from hypothesis import strategies as st

import hf_scratch

# torch 2.7 (pyproject's floor) cannot compile a whole model with flex_attention into one graph on the CPU: Dynamo
# fails inside itself (BERT, GPT, the encoder-decoder: an AssertionError in side_effects.py; Longformer: Tensor.item).
# Longformer's compiled flex kernel alone runs there; 2.13 and 2.14.1 compile every model.
FLEX_COMPILES_WHOLE_MODELS = torch.__version__ >= "2.8"
FLEX_ON_TORCH_2_7 = "torch 2.7 cannot compile a whole model with flex_attention into one graph (families.py)"


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

"""The families as small random configurations, shared by the cross-family tests (robustness, torch.compile):
how to build each family's main head from drawn sizes and how to feed it. Families are picked up from
``hf_scratch`` as they exist."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import torch
from hypothesis import strategies as st

import hf_scratch

ATOL = 1e-4


def close(actual: torch.Tensor, expected: torch.Tensor, atol: float = ATOL) -> None:
    torch.testing.assert_close(actual, expected, atol=atol, rtol=atol)


def randomise(model: torch.nn.Module) -> torch.nn.Module:
    """Perturb every parameter (LayerNorm weights, biases, zero-initialised clusters) so every term matters."""
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)
    return model.eval()


# --------------------------------------------------------------------------------------------------------------
# The families, as small random configurations
# --------------------------------------------------------------------------------------------------------------


@dataclass
class Family:
    """How to build a family's main head from drawn sizes, and how to feed it (ids, mask) → model kwargs."""

    name: str
    config: Callable[[dict], object]  # drawn sizes → config
    head: str  # class name in hf_scratch
    seq2seq: bool = False  # padding goes on the source; outputs are per decoder position
    causal: bool = False  # decoder-only causal LM
    padding_side: str = "right"
    fast_switch: Optional[dict] = None  # config change that selects the other kernel (default: eager vs sdpa)
    extra_inputs: Callable[[dict, torch.Tensor], dict] = field(default=lambda sizes, ids: {})

    @property
    def available(self) -> bool:
        return hasattr(hf_scratch, self.head)

    def build(self, sizes: dict, attn_implementation: str = "sdpa", **overrides):
        config = self.config(sizes, **overrides)
        torch.manual_seed(sizes["seed"])
        model = getattr(hf_scratch, self.head)._from_config(config, attn_implementation=attn_implementation)
        return randomise(model)

    def inputs(self, sizes: dict, ids: torch.Tensor, mask: Optional[torch.Tensor]) -> dict:
        kwargs = {"input_ids": ids, "attention_mask": mask}
        if self.seq2seq:
            kwargs["decoder_input_ids"] = sizes["decoder_ids"][: ids.shape[0]]
        kwargs.update(self.extra_inputs(sizes, ids))
        return kwargs


def _bert(s, **overrides):
    return hf_scratch.ScratchBertConfig(**{**dict(
        vocab_size=s["vocab"], hidden_size=s["hidden"], num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
        intermediate_size=2 * s["hidden"], max_position_embeddings=32, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    ), **overrides})


def _gpt(s, **overrides):
    return hf_scratch.ScratchGPTConfig(**{**dict(
        vocab_size=s["vocab"], hidden_size=s["hidden"], num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
        intermediate_size=2 * s["hidden"], max_position_embeddings=32, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, embedding_dropout_prob=0.0, pad_token_id=0,
        layer_norm_placement="pre" if s["variant"] else "post",
    ), **overrides})


def _transformer(s, **overrides):
    return hf_scratch.ScratchTransformerConfig(**{**dict(
        vocab_size=s["vocab"], hidden_size=s["hidden"], encoder_layers=s["layers"], decoder_layers=s["layers"],
        encoder_attention_heads=s["heads"], decoder_attention_heads=s["heads"], encoder_ffn_dim=2 * s["hidden"],
        decoder_ffn_dim=2 * s["hidden"], max_position_embeddings=32, hidden_dropout_prob=0.0, pre_norm=s["variant"],
    ), **overrides})


def _transfo_xl(s, **overrides):
    vocab = s["vocab"]
    return hf_scratch.ScratchTransfoXLConfig(**{**dict(
        vocab_size=vocab, cutoffs=[vocab // 3, 2 * vocab // 3], div_val=2 if s["variant"] else 1,
        hidden_size=s["hidden"], embedding_size=s["hidden"], num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"], head_dim=s["hidden"] // s["heads"], intermediate_size=2 * s["hidden"],
        mem_len=s["mem_len"], clamp_len=64, same_length=False, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    ), **overrides})


def _longformer(s, **overrides):
    return hf_scratch.ScratchLongformerConfig(**{**dict(
        vocab_size=s["vocab"], hidden_size=s["hidden"], num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
        intermediate_size=2 * s["hidden"], max_position_embeddings=64, attention_window=2 * s["one_sided_window"],
        attention_dilation=s["dilation"], hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, pad_token_id=1,
    ), **overrides})


def _longformer_globals(s, ids):
    is_global = torch.zeros_like(ids)
    if s["variant"]:
        is_global[:, 0] = 1  # a classification-style global first token
    return {"global_attention_mask": is_global}


def _rnn(s, **overrides):
    return hf_scratch.ScratchRNNConfig(**{**dict(
        vocab_size=s["vocab"], hidden_size=s["hidden"], encoder_layers=s["layers"], decoder_layers=s["layers"],
        cell_type=s["cell_type"], attention_type=s["attention_type"], bidirectional_encoder=s["variant"],
        hidden_dropout_prob=0.0,
    ), **overrides})


FAMILIES = {
    "bert": Family("bert", _bert, "ScratchBertForMaskedLM"),
    "gpt": Family("gpt", _gpt, "ScratchGPTLMHeadModel", causal=True, padding_side="left"),
    "transformer": Family("transformer", _transformer, "ScratchTransformerForConditionalGeneration", seq2seq=True),
    "transfo_xl": Family("transfo_xl", _transfo_xl, "ScratchTransfoXLLMHeadModel", causal=True, padding_side="left"),
    "longformer": Family("longformer", _longformer, "ScratchLongformerForMaskedLM", extra_inputs=_longformer_globals),
    "rnn": Family("rnn", _rnn, "ScratchRNNForConditionalGeneration", seq2seq=True,
                  fast_switch={"rnn_implementation": ("cells", "fused")}),
}
PRESENT = [name for name, family in FAMILIES.items() if family.available]
CAUSAL = [name for name in PRESENT if FAMILIES[name].causal or FAMILIES[name].seq2seq]
CACHED = [name for name in PRESENT if name in ("gpt", "transformer", "rnn")]


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
        "attention_type": draw(st.sampled_from(["none", "bahdanau", "luong-dot", "luong-general", "luong-concat"])),
    }
    generator = torch.Generator().manual_seed(s["seed"])
    s["ids"] = torch.randint(3, s["vocab"], (s["batch"], s["length"]), generator=generator)
    s["decoder_ids"] = torch.randint(3, s["vocab"], (s["batch"], draw(st.integers(1, 6))), generator=generator)
    return s


def fixed_sizes() -> dict:
    return {"seed": 0, "vocab": 30, "hidden": 8, "heads": 2, "layers": 1, "batch": 2, "length": 6, "pad": 2,
            "variant": False, "mem_len": 4, "one_sided_window": 1, "dilation": 1, "cell_type": "lstm",
            "attention_type": "bahdanau", "ids": torch.randint(3, 30, (2, 6)), "decoder_ids": torch.randint(3, 30, (2, 3))}


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

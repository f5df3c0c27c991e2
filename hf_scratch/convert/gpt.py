"""GPT (transformers' ``gpt2`` and ``openai-gpt`` → ``scratch-gpt``): the config translation and the weight map.

One hf_scratch family covers both: GPT-2 (Radford et al. 2019, §2.3) is GPT-1 (Radford et al. 2018, §3.1) with the
LayerNorm moved before each sub-block and one more after the last block, so ``layer_norm_placement`` ("pre" for
gpt2, "post" for openai-gpt) picks the reference type on the way back. Both store their linear layers as Conv1D,
(in, out): the rules transpose them into ``nn.Linear``'s (out, in).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from ..configuration_gpt import ScratchGPTConfig
from .engine import TASK_FIELDS, Conversion, FieldNames, WeightMap, register_conversion, rule, weight_and_bias

# GPT2Config's and OpenAIGPTConfig's names → ours: ScratchGPTConfig's attribute_map, less the FFN width and the
# activation, which differ between the two and are translated below
_FIELD_NAMES = FieldNames.of(
    ScratchGPTConfig,
    same=("vocab_size", "initializer_range", "pad_token_id", "tie_word_embeddings", *TASK_FIELDS),
    without=("n_inner", "activation_function", "afn"),
)
# OpenAI GPT's afn="gelu" is the tanh approximation (transformers' gelu_new), as in GPT-2.
_OPENAI_ACTIVATIONS = {"gelu": "gelu_new", "relu": "relu", "silu": "silu", "swish": "silu"}


def _check_reference_config(reference: dict) -> None:
    """Reject reference settings our single GPT implementation does not have, instead of loading them wrongly."""
    unsupported = {
        "add_cross_attention": (False, "cross-attention layers"),
        "scale_attn_weights": (True, "unscaled attention scores"),
        "scale_attn_by_inverse_layer_idx": (False, "attention scaled by 1/layer"),
        "summary_type": ("cls_index", "a multiple-choice summary other than the extract token"),
        "summary_use_proj": (True, "a multiple-choice head without projection"),
        "summary_proj_to_labels": (True, "a multiple-choice projection to hidden_size"),
    }
    for name, (expected, what) in unsupported.items():
        if reference.get(name, expected) != expected:
            raise ValueError(
                f"The reference config sets {name}={reference[name]!r} ({what}); hf_scratch's GPT supports only "
                f"{name}={expected!r}."
            )


def _config_to_ours(reference: dict[str, Any], layer_norm_placement: str) -> ScratchGPTConfig:
    _check_reference_config(reference)
    fields = _FIELD_NAMES.to_ours(reference)
    if layer_norm_placement == "pre":  # GPT-2
        fields["hidden_act"] = reference.get("activation_function", "gelu_new")
        fields["intermediate_size"] = reference.get("n_inner")
        fields["use_cache"] = reference.get("use_cache", True)
    else:  # OpenAI GPT: the MLP is always 4 × hidden
        afn = reference.get("afn", "gelu")
        if afn not in _OPENAI_ACTIVATIONS:
            raise ValueError(
                f"Unknown OpenAI GPT activation afn={afn!r}: expected one of {sorted(_OPENAI_ACTIVATIONS)}."
            )
        fields["hidden_act"] = _OPENAI_ACTIVATIONS[afn]
    defaults = (
        {"vocab_size": 50257, "hidden_size": 768, "max_position_embeddings": 1024}
        if layer_norm_placement == "pre"
        else {}
    )
    return ScratchGPTConfig(**{**defaults, **fields}, layer_norm_placement=layer_norm_placement)


def _config_to_reference(config: ScratchGPTConfig, layer_norm_placement: str) -> dict[str, Any]:
    reference = _FIELD_NAMES.to_reference(config.to_dict())
    if layer_norm_placement == "pre":
        reference.update(
            activation_function=config.hidden_act, n_inner=config.intermediate_size, use_cache=config.use_cache
        )
        return reference
    if config.intermediate_size != 4 * config.hidden_size:
        raise ValueError(
            f"OpenAI GPT has no intermediate size setting (its MLP is 4 × hidden = {4 * config.hidden_size}); this "
            f"model has intermediate_size={config.intermediate_size} and cannot be converted to OpenAIGPT classes."
        )
    back = {"gelu_new": "gelu", "relu": "relu", "silu": "silu"}
    if config.hidden_act not in back:
        raise ValueError(f"OpenAI GPT supports the activations {sorted(back)}, not hidden_act={config.hidden_act!r}.")
    reference["afn"] = back[config.hidden_act]
    return reference


@dataclass
class _GPTWeightMap(WeightMap):
    """Two quirks of the reference checkpoints on top of the rules:

    - GPT-2 checkpoints on the hub store the base model without its ``transformer.`` prefix (``h.0.attn.c_attn…``)
      even when ``architectures`` names a head class, and old ones carry the causal-mask buffers: both load.
    - ``OpenAIGPTDoubleHeadsModel`` ties the other way round (the token embeddings follow ``lm_head.weight``), so
      with tied weights its untied state holds only ``lm_head.weight``, and it expects that key back.
    """

    word_embeddings: str = "transformer.wte.weight"
    tied: bool = True

    head_prefixes = ("transformer.", "lm_head.", "multiple_choice_head.", "score.")

    def to_ours(self, reference_state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        state = {k if k.startswith(self.head_prefixes) else f"transformer.{k}": v for k, v in reference_state.items()}
        if self.tied and self.word_embeddings not in state and "lm_head.weight" in state:
            state[self.word_embeddings] = state["lm_head.weight"]
        return super().to_ours(state)

    def to_reference(self, our_state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        reference = super().to_reference(our_state)
        has_lm_head = any(k.startswith("multiple_choice_head.") for k in reference)
        if self.tied and has_lm_head and "lm_head.weight" not in reference:
            reference["lm_head.weight"] = reference[self.word_embeddings]
        return reference


def _has_placement(config: ScratchGPTConfig, layer_norm_placement: str) -> bool:
    """Whether ``config`` is the GPT this conversion writes back (gpt2: "pre", openai-gpt: "post")."""
    return config.layer_norm_placement == layer_norm_placement


def _weight_map(embeddings: tuple[str, str], final_norm: bool) -> Callable[[ScratchGPTConfig], WeightMap]:
    def build(config: ScratchGPTConfig) -> WeightMap:
        layer, ref = "model.layers.{i}", "transformer.h.{i}"
        word, position = embeddings
        rules = [
            rule("model.embeddings.word.weight", f"transformer.{word}.weight"),
            rule("model.embeddings.position.weight", f"transformer.{position}.weight"),
            # GPT's Conv1D stores (in, out): transpose into nn.Linear's (out, in); c_attn is already [Q | K | V].
            *weight_and_bias(f"{layer}.attention.qkv_proj", f"{ref}.attn.c_attn", transpose=True),
            *weight_and_bias(f"{layer}.attention.out_proj", f"{ref}.attn.c_proj", transpose=True),
            # ln_1 / ln_2 sit before the sub-layer in GPT-2 and after it in GPT-1: the same ResidualNorm either way.
            *weight_and_bias(f"{layer}.attention_residual.norm", f"{ref}.ln_1"),
            *weight_and_bias(f"{layer}.feed_forward.fc_in", f"{ref}.mlp.c_fc", transpose=True),
            *weight_and_bias(f"{layer}.feed_forward.fc_out", f"{ref}.mlp.c_proj", transpose=True),
            *weight_and_bias(f"{layer}.feed_forward_residual.norm", f"{ref}.ln_2"),
            # heads (a tied lm_head.weight is present in state dicts, absent from saved checkpoints: both load)
            rule("lm_head.weight", "lm_head.weight"),
            *weight_and_bias("multiple_choice_head.summary", "multiple_choice_head.summary"),
            rule("score.weight", "score.weight"),
        ]
        if final_norm:  # GPT-2's LayerNorm after the last block
            rules.extend(weight_and_bias("model.final_norm", "transformer.ln_f"))
        ignore = ["transformer.h.{i}.attn.bias", "transformer.h.{i}.attn.masked_bias", "transformer.position_ids"]
        return _GPTWeightMap(
            rules,
            ignore_reference=ignore,
            word_embeddings=f"transformer.{word}.weight",
            tied=config.tie_word_embeddings,
        )

    return build


for _reference_type, _placement, _prefix, _embeddings in (
    ("gpt2", "pre", "GPT2", ("wte", "wpe")),
    ("openai-gpt", "post", "OpenAIGPT", ("tokens_embed", "positions_embed")),
):
    register_conversion(
        Conversion(
            reference_model_type=_reference_type,
            reference_prefix="transformer",
            heads={
                f"{_prefix}Model": "ScratchGPTModel",
                f"{_prefix}LMHeadModel": "ScratchGPTLMHeadModel",
                f"{_prefix}DoubleHeadsModel": "ScratchGPTDoubleHeadsModel",
                f"{_prefix}ForSequenceClassification": "ScratchGPTForSequenceClassification",
            },
            config_to_ours=partial(_config_to_ours, layer_norm_placement=_placement),
            config_to_reference=partial(_config_to_reference, layer_norm_placement=_placement),
            weight_map=_weight_map(_embeddings, final_norm=_placement == "pre"),
            accepts=partial(_has_placement, layer_norm_placement=_placement),
        ),
        scratch_model_type="scratch-gpt",
    )

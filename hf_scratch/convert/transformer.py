"""The encoder-decoder Transformer (transformers' ``marian`` → ``scratch-transformer``): the config translation and
the weight map.

Marian (the opus-mt checkpoints) is the post-LN Transformer of Vaswani et al. 2017 (§3.1) with its sinusoids laid
out as [sin | cos] halves rather than interleaved (§3.5's PE(pos, 2i) / PE(pos, 2i+1)) and LayerNorm eps 1e-5, so
only models configured that way (``sinusoidal_layout="split"``, ``pre_norm=False``) convert back.
"""

from __future__ import annotations

from typing import Any

import torch

from ..configuration_transformer import ScratchTransformerConfig
from ..positional import sinusoidal_table
from .engine import (
    Conversion,
    FieldNames,
    WeightMap,
    WeightRule,
    copy_fields,
    register_conversion,
    rule,
    weight_and_bias,
)

# MarianConfig's names → ours: ScratchTransformerConfig's attribute_map (less the shared names it reads as the
# encoder's, which are not Marian's) and the fields named alike. Marian is post-LN with split sinusoids and LayerNorm
# eps 1e-5.
_FIELD_NAMES = FieldNames.of(
    ScratchTransformerConfig,
    without=("num_hidden_layers", "num_attention_heads", "intermediate_size"),
    same=(
        "vocab_size",
        "decoder_vocab_size",
        "encoder_layers",
        "decoder_layers",
        "encoder_attention_heads",
        "decoder_attention_heads",
        "encoder_ffn_dim",
        "decoder_ffn_dim",
        "activation_dropout",
        "max_position_embeddings",
        "scale_embedding",
        "share_encoder_decoder_embeddings",
        "tie_word_embeddings",
        "pad_token_id",
        "bos_token_id",
        "eos_token_id",
        "decoder_start_token_id",
    ),
)
_MARIAN_LAYER_NORM_EPS = 1e-5  # Marian's nn.LayerNorm default


def _config_to_ours(reference: dict[str, Any]) -> ScratchTransformerConfig:
    for name in ("encoder_layerdrop", "decoder_layerdrop"):
        if reference.get(name, 0.0):
            raise ValueError(f"Marian {name}={reference[name]} (LayerDrop) has no counterpart in scratch-transformer.")
    # Legacy BART-family switches some opus-mt config.json files still carry; all False in Marian's architecture.
    for name in ("normalize_before", "add_final_layer_norm", "normalize_embedding", "add_bias_logits"):
        if reference.get(name):
            raise ValueError(
                f"Marian config has {name}=True, which transformers' Marian (and scratch-transformer) "
                "does not implement: this checkpoint needs a different architecture."
            )
    fields = _FIELD_NAMES.to_ours(reference)
    # Marian: one vocabulary unless stated otherwise; no separate flag means shared (its default).
    fields.setdefault("share_encoder_decoder_embeddings", True)
    fields.setdefault("tie_word_embeddings", True)
    if fields["share_encoder_decoder_embeddings"] and not fields["tie_word_embeddings"]:
        # transformers 5 ties Marian's embeddings (encoder's and decoder's to ``shared``) only with
        # tie_word_embeddings: untied, each side reads an embedding matrix of its own (``shared`` goes unused).
        fields.update(share_encoder_decoder_embeddings=False, decoder_vocab_size=fields["vocab_size"])
    return ScratchTransformerConfig(
        **fields,
        sinusoidal_layout="split",
        pre_norm=False,
        layer_norm_eps=_MARIAN_LAYER_NORM_EPS,
        **copy_fields(reference, ("id2label", "label2id")),
    )


def _config_to_reference(config: ScratchTransformerConfig) -> dict[str, Any]:
    differences = {
        "sinusoidal_layout": (config.sinusoidal_layout, "split"),
        "pre_norm": (config.pre_norm, False),
        "layer_norm_eps": (config.layer_norm_eps, _MARIAN_LAYER_NORM_EPS),
    }
    for name, (value, marian) in differences.items():
        if value != marian:
            raise ValueError(
                f"Marian has {name}={marian!r} built in but this model has {name}={value!r}: only models configured "
                f"like Marian (sinusoidal_layout='split', pre_norm=False, layer_norm_eps=1e-5) "
                "convert to MarianMTModel."
            )
    return _FIELD_NAMES.to_reference(config.to_dict())


class _MarianWeightMap(WeightMap):
    """Marian stores its fixed sinusoidal tables as ``embed_positions.weight``; ours are rebuilt from the config.
    Coming in, the stored tables are checked against ours (a checkpoint with other positions would silently
    translate worse); going out, ours are written in Marian's place.

    A Marian configured to share its embeddings but with ``tie_word_embeddings=False`` converts to per-side
    embeddings (``_config_to_ours``): its ``shared`` matrix is then unused, except in checkpoints written before
    transformers 5 (where both sides were the ``shared`` module), which may hold no per-side copy."""

    position_keys = ("model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight")
    token_keys = ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight")

    def __init__(self, rules: list[WeightRule], config: ScratchTransformerConfig, **kwargs: Any) -> None:
        super().__init__(rules, **kwargs)
        self.config = config

    def _table(self) -> torch.Tensor:
        return sinusoidal_table(self.config.max_position_embeddings, self.config.hidden_size, "split")

    def to_ours(self, reference_state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        reference_state = dict(reference_state)
        if not self.config.share_encoder_decoder_embeddings and "model.shared.weight" in reference_state:
            shared = reference_state.pop("model.shared.weight")
            for key in self.token_keys:
                reference_state.setdefault(key, shared)
        for key in self.position_keys:
            stored = reference_state.pop(key, None)
            if stored is None:
                continue
            expected = self._table()
            if stored.shape != expected.shape or (stored.float() - expected).abs().max() > 1e-4:
                raise ValueError(
                    f"{key} in the checkpoint is not the split sinusoidal table of {tuple(expected.shape)} that "
                    "scratch-transformer rebuilds from the config: the checkpoint uses other position encodings."
                )
        return super().to_ours(reference_state)

    def to_reference(self, our_state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        reference = super().to_reference(our_state)
        for key in self.position_keys:
            reference[key] = self._table()
        return reference


def _layer_rules(layer: str, cross_attention: bool) -> list[WeightRule]:
    """One layer's weights, named alike by Marian and us under ``layer`` (``model.encoder.layers.{i}`` or
    ``model.decoder.layers.{i}``): self-attention (separate q, k, v → our fused ``qkv_proj``; our encoder layer is
    the shared ``layers.TransformerBlock``, whose self-attention is ``attention``), in the decoder the cross-attention
    over the encoder's states (k, v → our fused ``kv_proj``), and the feed-forward, each with its post-LN residual
    (Vaswani et al. 2017, §3.1)."""
    attention = "self_attention" if cross_attention else "attention"
    rules = [
        *weight_and_bias(
            f"{layer}.{attention}.qkv_proj",
            f"{layer}.self_attn.q_proj",
            f"{layer}.self_attn.k_proj",
            f"{layer}.self_attn.v_proj",
        ),
        *weight_and_bias(f"{layer}.{attention}.out_proj", f"{layer}.self_attn.out_proj"),
        *weight_and_bias(f"{layer}.{attention}_residual.norm", f"{layer}.self_attn_layer_norm"),
        *weight_and_bias(f"{layer}.feed_forward.fc_in", f"{layer}.fc1"),
        *weight_and_bias(f"{layer}.feed_forward.fc_out", f"{layer}.fc2"),
        *weight_and_bias(f"{layer}.feed_forward_residual.norm", f"{layer}.final_layer_norm"),
    ]
    if cross_attention:
        rules += [
            *weight_and_bias(f"{layer}.cross_attention.q_proj", f"{layer}.encoder_attn.q_proj"),
            *weight_and_bias(
                f"{layer}.cross_attention.kv_proj", f"{layer}.encoder_attn.k_proj", f"{layer}.encoder_attn.v_proj"
            ),
            *weight_and_bias(f"{layer}.cross_attention.out_proj", f"{layer}.encoder_attn.out_proj"),
            *weight_and_bias(f"{layer}.cross_attention_residual.norm", f"{layer}.encoder_attn_layer_norm"),
        ]
    return rules


def _weight_map(config: ScratchTransformerConfig) -> WeightMap:
    rules = [
        *_layer_rules("model.encoder.layers.{i}", cross_attention=False),
        *_layer_rules("model.decoder.layers.{i}", cross_attention=True),
        # Marian's output bias is a (1, vocab) buffer; ours is the bias of the output projection.
        rule(
            "lm_head.bias",
            "final_logits_bias",
            to_ours_fn=lambda t: t.reshape(-1),
            to_reference_fn=lambda t: t.reshape(1, -1),
        ),
    ]
    # Embeddings: one shared matrix (model.shared; Marian's per-side copies are tied to it) or one per side.
    ignore = []
    if config.share_encoder_decoder_embeddings:
        rules.append(rule("model.encoder.embeddings.tokens.weight", "model.shared.weight"))
        ignore += ["model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"]
    else:
        rules.append(rule("model.encoder.embeddings.tokens.weight", "model.encoder.embed_tokens.weight"))
        rules.append(rule("model.decoder.embeddings.tokens.weight", "model.decoder.embed_tokens.weight"))
    if config.tie_word_embeddings:
        ignore.append("lm_head.weight")
    else:
        rules.append(rule("lm_head.weight", "lm_head.weight"))
    return _MarianWeightMap(rules, config, ignore_reference=ignore)


register_conversion(
    Conversion(
        reference_model_type="marian",
        reference_prefix="model",
        heads={
            "MarianModel": "ScratchTransformerModel",
            "MarianMTModel": "ScratchTransformerForConditionalGeneration",
        },
        config_to_ours=_config_to_ours,
        config_to_reference=_config_to_reference,
        weight_map=_weight_map,
    ),
    scratch_model_type="scratch-transformer",
)

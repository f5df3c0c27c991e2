"""Transformer-XL (the original ``transfo-xl`` checkpoints → ``scratch-transfo-xl``): the config translation and
the weight map.

transformers 5 no longer ships Transformer-XL, so the reference config is read as a plain dict and conversion runs
one way only (``load_reference_checkpoint``). The map covers the adaptive input embeddings and adaptive softmax
(Baevski & Auli 2019; Grave et al. 2017), each layer's relative attention with its position projection W_{k,R} and
the learned u, v biases (Dai et al. 2019, §3.3), shared or per layer (``untie_r``).
"""

from __future__ import annotations

from typing import Any

from ..configuration_transfo_xl import ScratchTransfoXLConfig
from .engine import (
    Conversion,
    FieldNames,
    WeightMap,
    copy_fields,
    register_conversion,
    rule,
    scratch_heads,
    weight_and_bias,
)

# the reference's names → ours (read from a plain dict: transformers 5 has no TransfoXLConfig): the attribute_map of
# ScratchTransfoXLConfig, the original hub configs' tie_weight (e.g. transfo-xl-wt103), and the fields named alike
_FIELD_NAMES = FieldNames.of(
    ScratchTransfoXLConfig,
    other={"tie_weight": "tie_word_embeddings"},
    same=(
        "vocab_size",
        "div_val",
        "mem_len",
        "clamp_len",
        "same_length",
        "untie_r",
        "cutoffs",
        "tie_projs",
        "proj_init_std",
        "eos_token_id",
        "pad_token_id",
        "tie_word_embeddings",
    ),
)


def _config_to_ours(reference: dict[str, Any]) -> ScratchTransfoXLConfig:
    if reference.get("attn_type", 0) != 0:
        raise ValueError(
            f"Only Transformer-XL's relative attention (attn_type=0) can be converted, got attn_type="
            f"{reference['attn_type']} (the original code's absolute-position variants)."
        )
    if reference.get("sample_softmax", -1) > 0:
        raise ValueError("Transformer-XL checkpoints with a sampled softmax (sample_softmax > 0) are not supported.")
    fields = _FIELD_NAMES.to_ours(reference)
    if "tie_projs" not in fields and "cutoffs" in fields:  # configs that only carry proj_share_all_but_first
        share = reference.get("proj_share_all_but_first", True)
        fields["tie_projs"] = [False] + [share] * len(fields["cutoffs"])
    return ScratchTransfoXLConfig(**fields, **copy_fields(reference, ("id2label", "label2id", "bos_token_id")))


def _config_to_reference(config: ScratchTransfoXLConfig) -> dict[str, Any]:
    return _FIELD_NAMES.to_reference(config.to_dict())


def _has_no_transformers_class(config: ScratchTransfoXLConfig) -> bool:
    raise ValueError(
        "transformers 5 no longer ships Transformer-XL (TransfoXLLMHeadModel was removed), so to_transformers cannot "
        "build one: share the hf_scratch model itself (save_pretrained carries its code for trust_remote_code=True). "
        "Reference checkpoints load the other way with hf_scratch.convert.load_reference_checkpoint(path)."
    )


def _weight_map(config: ScratchTransfoXLConfig) -> WeightMap:
    layer, ref = "model.layers.{i}", "transformer.layers.{i}"
    rules = [
        rule("model.word_embeddings.embeddings.{i}.weight", "transformer.word_emb.emb_layers.{i}.weight"),
        rule("model.word_embeddings.projections.{i}", "transformer.word_emb.emb_projs.{i}"),
        rule(f"{layer}.attention.qkv_proj.weight", f"{ref}.dec_attn.qkv_net.weight"),
        rule(f"{layer}.attention.position_proj.weight", f"{ref}.dec_attn.r_net.weight"),
        rule(f"{layer}.attention.out_proj.weight", f"{ref}.dec_attn.o_net.weight"),
        *weight_and_bias(f"{layer}.attention_residual.norm", f"{ref}.dec_attn.layer_norm"),
        *weight_and_bias(f"{layer}.feed_forward.fc_in", f"{ref}.pos_ff.CoreNet.0"),
        *weight_and_bias(f"{layer}.feed_forward.fc_out", f"{ref}.pos_ff.CoreNet.3"),
        *weight_and_bias(f"{layer}.feed_forward_residual.norm", f"{ref}.pos_ff.layer_norm"),
        rule("lm_head.biases.{i}", "crit.out_layers.{i}.bias"),
        rule("lm_head.cluster_weight", "crit.cluster_weight"),
        rule("lm_head.cluster_bias", "crit.cluster_bias"),
    ]
    ignore = ["transformer.pos_emb.inv_freq"]  # a buffer rebuilt from hidden_size
    if config.untie_r:  # u, v per layer
        rules += [
            rule(f"{layer}.attention.content_bias", f"{ref}.dec_attn.r_w_bias"),
            rule(f"{layer}.attention.position_bias", f"{ref}.dec_attn.r_r_bias"),
        ]
    else:  # shared u, v; pickled checkpoints also hold each layer's alias of them
        rules += [
            rule("model.content_bias", "transformer.r_w_bias"),
            rule("model.position_bias", "transformer.r_r_bias"),
        ]
        ignore += [f"{ref}.dec_attn.r_w_bias", f"{ref}.dec_attn.r_r_bias"]
    # Tied softmax tensors are the input embedding's (the model ties them); checkpoints may still hold their copies.
    if config.tie_word_embeddings:
        ignore.append("crit.out_layers.{i}.weight")
    else:
        rules.append(rule("lm_head.weights.{i}", "crit.out_layers.{i}.weight"))
    for cluster, tied in enumerate(config.filled_tie_projs):
        if config.has_projection and not tied:
            rules.append(rule(f"lm_head.projections.{cluster}", f"crit.out_projs.{cluster}"))
        else:
            ignore.append(f"crit.out_projs.{cluster}")
    return WeightMap(rules, ignore_reference=ignore)


register_conversion(
    Conversion(
        reference_model_type="transfo-xl",
        reference_prefix="transformer",
        heads=scratch_heads("TransfoXLLMHeadModel", "TransfoXLModel"),
        config_to_ours=_config_to_ours,
        config_to_reference=_config_to_reference,
        weight_map=_weight_map,
        accepts=_has_no_transformers_class,
    ),
    scratch_model_type="scratch-transfo-xl",
)

"""Longformer (transformers' ``longformer`` → ``scratch-longformer``): the config translation and the weight map.

transformers' Longformer keeps BERT's weight names (``bert.encoder_rules``) and adds, per layer, the separate
projections of global attention (Beltagy et al. 2020, §3.1: Q_g, K_g, V_g); it has no dilation, so only models
with ``attention_dilation=1`` convert back.
"""

from __future__ import annotations

from typing import Any

from ..configuration_longformer import ScratchLongformerConfig
from .bert import BERT_SHARED_FIELDS, encoder_rules, mlm_head_rules
from .engine import (
    TASK_FIELDS,
    Conversion,
    FieldNames,
    WeightMap,
    register_conversion,
    scratch_heads,
    weight_and_bias,
)

# BERT's shared fields without classifier_dropout (LongformerConfig has none), plus the window and separator
_FIELD_NAMES = FieldNames.of(
    ScratchLongformerConfig,
    same=(
        *(name for name in BERT_SHARED_FIELDS if name != "classifier_dropout"),
        "attention_window",
        "sep_token_id",
        *TASK_FIELDS,
    ),
)


def _config_to_ours(reference: dict[str, Any]) -> ScratchLongformerConfig:
    return ScratchLongformerConfig(**_FIELD_NAMES.to_ours(reference))


def _config_to_reference(config: ScratchLongformerConfig) -> dict[str, Any]:
    dilations = {d for layer in range(config.num_hidden_layers) for d in config.dilations_for_layer(layer)}
    if dilations != {1}:
        raise ValueError(
            f"This model uses dilated attention (attention_dilation={config.attention_dilation}), which transformers' "
            "Longformer does not have: only models with attention_dilation=1 convert to transformers."
        )
    return _FIELD_NAMES.to_reference(config.to_dict())


def _weight_map(config: ScratchLongformerConfig) -> WeightMap:
    layer, attention = "model.layers.{i}.attention", "longformer.encoder.layer.{i}.attention.self"
    mlm_head, mlm_ignore, mlm_aliases = mlm_head_rules(
        config, ("lm_head.dense", "lm_head.layer_norm"), bias="lm_head.bias", decoder="lm_head.decoder"
    )
    rules = [
        *encoder_rules("longformer"),
        *weight_and_bias(f"{layer}.query_global", f"{attention}.query_global"),
        *weight_and_bias(f"{layer}.key_global", f"{attention}.key_global"),
        *weight_and_bias(f"{layer}.value_global", f"{attention}.value_global"),
        # heads
        *mlm_head,
        *weight_and_bias("classifier.dense", "classifier.dense"),
        *weight_and_bias("classifier.out_proj", "classifier.out_proj"),
        *weight_and_bias("classifier", "classifier"),
        *weight_and_bias("qa_outputs", "qa_outputs"),
    ]
    return WeightMap(
        rules, ignore_reference=["longformer.embeddings.position_ids", *mlm_ignore], reference_aliases=mlm_aliases
    )


register_conversion(
    Conversion(
        reference_model_type="longformer",
        reference_prefix="longformer",
        heads=scratch_heads(
            "LongformerModel",
            "LongformerForMaskedLM",
            "LongformerForSequenceClassification",
            "LongformerForTokenClassification",
            "LongformerForQuestionAnswering",
            "LongformerForMultipleChoice",
        ),
        config_to_ours=_config_to_ours,
        config_to_reference=_config_to_reference,
        weight_map=_weight_map,
    ),
    scratch_model_type="scratch-longformer",
)

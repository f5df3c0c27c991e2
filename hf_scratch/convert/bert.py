"""BERT (transformers' ``bert`` → ``scratch-bert``): the config translation and the weight map.

``encoder_rules`` (embeddings, encoder layers, pooler) and ``mlm_head_rules`` also serve Longformer, whose reference
implementation keeps BERT's weight names (``longformer.py``).
"""

from __future__ import annotations

from typing import Any

from ..configuration_bert import ScratchBertConfig
from ..configuration_common import BertShapedConfig
from .engine import (
    TASK_FIELDS,
    Conversion,
    FieldNames,
    WeightMap,
    WeightRule,
    register_conversion,
    rule,
    scratch_heads,
    weight_and_bias,
)

# Fields whose names and meanings are the same in transformers' BertConfig and ours (ScratchBertConfig has no
# attribute_map: it uses BertConfig's names).
BERT_SHARED_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "hidden_act",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "max_position_embeddings",
    "type_vocab_size",
    "initializer_range",
    "layer_norm_eps",
    "classifier_dropout",
    "pad_token_id",
    "tie_word_embeddings",
)

_FIELD_NAMES = FieldNames.of(ScratchBertConfig, same=BERT_SHARED_FIELDS + TASK_FIELDS)


def _config_to_ours(reference: dict[str, Any]) -> ScratchBertConfig:
    if reference.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError("Only BERT with absolute position embeddings can be converted (position_embedding_type).")
    return ScratchBertConfig(**_FIELD_NAMES.to_ours(reference))


def _config_to_reference(config: ScratchBertConfig) -> dict[str, Any]:
    return _FIELD_NAMES.to_reference(config.to_dict())


def encoder_rules(prefix: str) -> list[WeightRule]:
    """Our base model ← transformers' ``BertModel`` under ``prefix``: the embeddings (token + position + segment,
    then LayerNorm), every layer's self-attention (separate Q, K, V → our fused ``qkv_proj``) and feed-forward,
    each with its post-LN residual, and the pooler."""
    layer, ref = "model.layers.{i}", f"{prefix}.encoder.layer.{{i}}"
    attention = f"{ref}.attention.self"
    return [
        rule("model.embeddings.word.weight", f"{prefix}.embeddings.word_embeddings.weight"),
        rule("model.embeddings.position.weight", f"{prefix}.embeddings.position_embeddings.weight"),
        rule("model.embeddings.token_type.weight", f"{prefix}.embeddings.token_type_embeddings.weight"),
        *weight_and_bias("model.embeddings.norm", f"{prefix}.embeddings.LayerNorm"),
        *weight_and_bias(f"{layer}.attention.qkv_proj", f"{attention}.query", f"{attention}.key", f"{attention}.value"),
        *weight_and_bias(f"{layer}.attention.out_proj", f"{ref}.attention.output.dense"),
        *weight_and_bias(f"{layer}.attention_residual.norm", f"{ref}.attention.output.LayerNorm"),
        *weight_and_bias(f"{layer}.feed_forward.fc_in", f"{ref}.intermediate.dense"),
        *weight_and_bias(f"{layer}.feed_forward.fc_out", f"{ref}.output.dense"),
        *weight_and_bias(f"{layer}.feed_forward_residual.norm", f"{ref}.output.LayerNorm"),
        *weight_and_bias("model.pooler.dense", f"{prefix}.pooler.dense"),
    ]


def mlm_head_rules(
    config: BertShapedConfig, transform: tuple[str, str], bias: str, decoder: str
) -> tuple[list[WeightRule], list[str], dict[str, str]]:
    """Our ``mlm_head`` ← the reference's masked-LM head: the transform (``transform`` = its dense layer and
    LayerNorm), the decoder weight unless it is tied to the word embeddings, and the output bias. The reference keeps
    that bias twice, as ``bias`` and as ``{decoder}.bias``; transformers 5 ties the two only with
    ``tie_word_embeddings``, so an untied decoder reads its own ``{decoder}.bias`` (``bias`` is then unused). The
    bias is read from the one the reference uses, or from the other where a checkpoint holds only that one, and
    written to both. Returns the rules, the reference keys to ignore (a tied ``{decoder}.weight``, which old
    checkpoints may still carry) and the ``WeightMap.reference_aliases``."""
    dense, norm = transform
    rules = [*weight_and_bias("mlm_head.dense", dense), *weight_and_bias("mlm_head.norm", norm)]
    if config.tie_word_embeddings:
        rules.append(rule("mlm_head.decoder.bias", bias))
        return rules, [f"{decoder}.weight"], {f"{decoder}.bias": bias}
    rules += [rule("mlm_head.decoder.weight", f"{decoder}.weight"), rule("mlm_head.decoder.bias", f"{decoder}.bias")]
    return rules, [], {bias: f"{decoder}.bias"}


def _weight_map(config: ScratchBertConfig) -> WeightMap:
    mlm_head, mlm_ignore, mlm_aliases = mlm_head_rules(
        config,
        ("cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm"),
        bias="cls.predictions.bias",
        decoder="cls.predictions.decoder",
    )
    rules = [
        *encoder_rules("bert"),
        # heads
        *mlm_head,
        *weight_and_bias("nsp_head", "cls.seq_relationship"),
        *weight_and_bias("classifier", "classifier"),
        *weight_and_bias("qa_outputs", "qa_outputs"),
    ]
    ignore = ["bert.embeddings.position_ids", "bert.embeddings.token_type_ids", *mlm_ignore]
    return WeightMap(rules, ignore_reference=ignore, reference_aliases=mlm_aliases)


register_conversion(
    Conversion(
        reference_model_type="bert",
        reference_prefix="bert",
        heads=scratch_heads(
            "BertModel",
            "BertForPreTraining",
            "BertForMaskedLM",
            "BertForNextSentencePrediction",
            "BertForSequenceClassification",
            "BertForTokenClassification",
            "BertForQuestionAnswering",
            "BertForMultipleChoice",
        ),
        config_to_ours=_config_to_ours,
        config_to_reference=_config_to_reference,
        weight_map=_weight_map,
    ),
    scratch_model_type="scratch-bert",
)

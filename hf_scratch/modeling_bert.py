"""BERT (Devlin et al. 2019), from scratch, read top-down in the order of the paper:

1. input representation: token + segment + learned position embeddings, LayerNorm, dropout (§3, Figure 2;
   ``layers.EncoderEmbeddings``);
2. a stack of post-LN Transformer encoder layers (Vaswani et al. 2017 §3.1): multi-head self-attention with the
   padding mask, position-wise feed-forward with GELU, each wrapped as LayerNorm(x + Dropout(Sublayer(x)))
   (``layers.TransformerBlock``);
3. the pooler: tanh(W h_[CLS] + b), the sentence representation used by NSP and classification (``layers.Pooler``);
4. pre-training heads (§3.1): masked LM (tied to the word embeddings) and next-sentence prediction;
5. fine-tuning heads (§3.2, §4): sequence classification, token classification, extractive QA, multiple choice.

The masked-LM and fine-tuning heads are the BERT-style encoders' shared ones (``encoder_heads``), which Longformer
uses too; BERT names its base model and what it chooses (the pooled [CLS] for classification, the dropout).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import torch
from torch import nn
from transformers.modeling_outputs import BaseModelOutputWithPooling, NextSentencePredictorOutput
from transformers.utils import ModelOutput

from .checks import check_class_labels, check_one_input, check_padding_or_relation, scored_classes
from .configuration_bert import ScratchBertConfig
from .encoder_heads import (
    EncoderForMaskedLM,
    EncoderForMultipleChoice,
    EncoderForQuestionAnswering,
    EncoderForSequenceClassification,
    EncoderForTokenClassification,
    EncoderHead,
)
from .heads import label_count, token_cross_entropy
from .layers import (
    EncoderEmbeddings,
    MaskedLMHead,
    MaskedLMOutputEmbeddings,
    Pooler,
    TransformerBlock,
    classifier_dropout,
    run_layers,
)
from .masks import padding_or_relation
from .modeling_common import ScratchPreTrainedModel, normalise_inputs


class ScratchBertLayer(TransformerBlock):
    """One encoder layer, post-LN: h = LN(x + MultiHead(x, x, x)), out = LN(h + FFN(h)) (Vaswani et al. 2017
    §3.1-3.3; ``layers.TransformerBlock``) over the padding mask, with GELU in the feed-forward network."""

    def __init__(self, config: ScratchBertConfig, layer_idx: int) -> None:
        super().__init__(config, layer_idx, config.num_attention_heads, config.intermediate_size)


class ScratchBertPreTrainedModel(ScratchPreTrainedModel):
    config_class = ScratchBertConfig
    _input_embed_layer = "word"  # get/set_input_embeddings (transformers' own) find embeddings.word by this name
    _can_compile_fullgraph = True  # every head, forward and backward (tests/test_compile.py)
    _supports_attention_backend = True  # standard attention: kernels of transformers' AttentionInterface run it
    _supports_flex_attn = True
    _no_split_modules = ["ScratchBertLayer"]


class ScratchBertModel(ScratchBertPreTrainedModel):
    """The BERT encoder: embeddings → L encoder layers → (optional) pooler."""

    def __init__(self, config: ScratchBertConfig, add_pooling_layer: bool = True) -> None:
        super().__init__(config)
        self.embeddings = EncoderEmbeddings(config)
        self.layers = nn.ModuleList(ScratchBertLayer(config, i) for i in range(config.num_hidden_layers))
        self.pooler = Pooler(config.hidden_size) if add_pooling_layer else None
        self.post_init()

    @normalise_inputs
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
    ) -> BaseModelOutputWithPooling:
        batch, length = check_one_input(input_ids, inputs_embeds).shape[:2]
        mask = padding_or_relation(check_padding_or_relation(attention_mask, batch, length, length))

        hidden_states = self.embeddings(input_ids, token_type_ids, position_ids, inputs_embeds)
        hidden_states, all_hidden_states, (all_attentions,) = run_layers(
            self.layers,
            hidden_states,
            lambda layer, x: layer(x, mask, output_attentions),
            output_hidden_states,
            output_attentions,
        )
        pooled = self.pooler(hidden_states) if self.pooler is not None else None
        return BaseModelOutputWithPooling(
            last_hidden_state=hidden_states,
            pooler_output=pooled,
            hidden_states=all_hidden_states,
            attentions=all_attentions,
        )


# ---- pre-training heads (Devlin et al. 2019 §3.1) -------------------------------------------------------------


@dataclass
class ScratchBertForPreTrainingOutput(ModelOutput):
    """loss = masked-LM cross-entropy (over labels ≠ -100) + next-sentence cross-entropy."""

    loss: torch.Tensor | None = None
    prediction_logits: torch.Tensor | None = None
    seq_relationship_logits: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


class ScratchBertForPreTraining(MaskedLMOutputEmbeddings, EncoderHead, ScratchBertPreTrainedModel):
    """Masked LM + next-sentence prediction, the two pre-training tasks of Devlin et al. 2019 §3.1."""

    base_model_class = ScratchBertModel
    output_class = ScratchBertForPreTrainingOutput
    _tied_weights_keys = {"mlm_head.decoder.weight": "model.embeddings.word.weight"}

    def __init__(self, config: ScratchBertConfig) -> None:
        super().__init__(config)
        self.build_base_model(config, add_pooling_layer=True)
        self.mlm_head = MaskedLMHead(config.hidden_size, config.vocab_size, config.hidden_act, config.layer_norm_eps)
        self.nsp_head = nn.Linear(config.hidden_size, 2)
        self.post_init()

    @normalise_inputs
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        next_sentence_label: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        num_items_in_batch: int | None = None,
    ) -> ScratchBertForPreTrainingOutput:
        shape = self.input_shape({"input_ids": input_ids, "inputs_embeds": inputs_embeds})
        if shape:
            check_class_labels(labels, shape, scored_classes(self.mlm_head.decoder))
            check_class_labels(next_sentence_label, shape[:1], 2, "next_sentence_label")
        outputs = self.encode(
            input_ids=input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
        )
        prediction_logits = self.mlm_head(outputs.last_hidden_state)
        seq_relationship_logits = self.nsp_head(outputs.pooler_output)
        loss = None
        if labels is not None and next_sentence_label is not None:
            mlm_loss = token_cross_entropy(prediction_logits, labels, num_items_in_batch)
            loss = mlm_loss + token_cross_entropy(seq_relationship_logits, next_sentence_label)
        output = self.head_output(
            outputs, loss=loss, prediction_logits=prediction_logits, seq_relationship_logits=seq_relationship_logits
        )
        return cast(ScratchBertForPreTrainingOutput, output)


class ScratchBertForMaskedLM(EncoderForMaskedLM, ScratchBertPreTrainedModel):
    """Predict the original token at masked positions (Devlin et al. 2019 §3.1, Task #1):
    logits = W_e · LN(act(W h + b)) + b_vocab, act = ``config.hidden_act`` (``encoder_heads.EncoderForMaskedLM``)."""

    base_model_class = ScratchBertModel


class ScratchBertForNextSentencePrediction(EncoderForSequenceClassification, ScratchBertPreTrainedModel):
    """Is sentence B the sentence that follows A? (Devlin et al. 2019 §3.1, Task #2; label 0 = IsNext, 1 = NotNext):
    a two-class classification of the pooled [CLS], logits = W_nsp · pooled, with the cross-entropy whatever
    ``config.num_labels`` and ``problem_type`` say (they are the fine-tuning heads')."""

    base_model_class = ScratchBertModel
    output_class = NextSentencePredictorOutput

    def __init__(self, config: ScratchBertConfig) -> None:
        super().__init__(config)
        self.build_base_model(config, add_pooling_layer=True)
        self.nsp_head = nn.Linear(config.hidden_size, 2)
        self.post_init()

    def sequence_logits(self, outputs: BaseModelOutputWithPooling) -> torch.Tensor:
        return self.nsp_head(outputs.pooler_output)

    def check_sequence_labels(self, labels: torch.Tensor, batch: int) -> None:
        check_class_labels(labels, (batch,), 2)

    def sequence_loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return token_cross_entropy(logits, labels)


# ---- fine-tuning heads (Devlin et al. 2019 §3.2, §4; shared with Longformer: encoder_heads.py) ----------------


class ScratchBertForSequenceClassification(EncoderForSequenceClassification, ScratchBertPreTrainedModel):
    """logits = W · Dropout(pooled), the pooled [CLS] state (§4.1) — regression, single- or multi-label by
    ``config.problem_type``."""

    base_model_class = ScratchBertModel

    def __init__(self, config: ScratchBertConfig) -> None:
        super().__init__(config)
        self.num_labels = label_count(config)
        self.build_base_model(config, add_pooling_layer=True)
        self.dropout = nn.Dropout(classifier_dropout(config))
        self.classifier = nn.Linear(config.hidden_size, self.num_labels)
        self.post_init()

    def sequence_logits(self, outputs: BaseModelOutputWithPooling) -> torch.Tensor:
        return self.classifier(self.dropout(outputs.pooler_output))


class ScratchBertForTokenClassification(EncoderForTokenClassification, ScratchBertPreTrainedModel):
    """A label per token (e.g. NER, §5.3): logits_t = W · Dropout(h_t)."""

    base_model_class = ScratchBertModel

    def __init__(self, config: ScratchBertConfig) -> None:
        super().__init__(config, dropout=classifier_dropout(config))


class ScratchBertForQuestionAnswering(EncoderForQuestionAnswering, ScratchBertPreTrainedModel):
    """Extractive QA (Devlin et al. 2019 §4.2): a start and an end score per token, (start, end) = W · h_t."""

    base_model_class = ScratchBertModel


class ScratchBertForMultipleChoice(EncoderForMultipleChoice, ScratchBertPreTrainedModel):
    """Inputs (batch, choices, length); each choice's pooled vector gets a score; softmax over choices (SWAG,
    Devlin et al. 2019 §4.4)."""

    base_model_class = ScratchBertModel

    def __init__(self, config: ScratchBertConfig) -> None:
        super().__init__(config, dropout=classifier_dropout(config))


__all__ = [
    "ScratchBertPreTrainedModel",
    "ScratchBertModel",
    "ScratchBertForPreTraining",
    "ScratchBertForMaskedLM",
    "ScratchBertForNextSentencePrediction",
    "ScratchBertForSequenceClassification",
    "ScratchBertForTokenClassification",
    "ScratchBertForQuestionAnswering",
    "ScratchBertForMultipleChoice",
]

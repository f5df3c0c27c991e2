"""What the families' task heads share, around their base models: the training objectives, the classifier's width,
multiple choices as sequences, and the encoder-decoders' generation head.

The objectives follow transformers' conventions: labels of -100 are ignored, and ``num_items_in_batch`` (passed by the
Trainer under gradient accumulation) turns the mean into sum / that count, so that accumulated steps add up to the
full batch's loss. Losses are computed in fp32 whatever the logits' dtype. A family's own objective stays in its
modeling file: GPT-1's auxiliary objective (eq. 5), BERT's MLM + NSP sum, Transformer-XL's loss over the adaptive
softmax's target log-probabilities. (The encoders' task heads, BERT's and Longformer's, are in ``encoder_heads.py``.)
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import torch
from torch import nn
from torch.nn import functional as F
from transformers import PreTrainedConfig
from transformers.modeling_outputs import Seq2SeqLMOutput
from transformers.utils import ModelOutput

from .checks import IGNORE_INDEX, check_class_labels, scored_classes
from .modeling_common import (
    DecoderInputsFromLabelsMixin,
    ScratchGenerationMixin,
    ScratchPreTrainedModel,
    already_normalised,
    cache_output,
    normalise_inputs,
    returned_cache,
)

# --------------------------------------------------------------------------------------------------------------
# Objectives
# --------------------------------------------------------------------------------------------------------------


def per_item(total: torch.Tensor, num_items: int | torch.Tensor) -> torch.Tensor:
    """``total`` / ``num_items``: a summed loss as a mean over the items that count (a count the Trainer passes may
    sit on another device)."""
    if isinstance(num_items, torch.Tensor):
        num_items = num_items.to(total.device)
    return total / num_items


def token_cross_entropy(
    logits: torch.Tensor, labels: torch.Tensor, num_items_in_batch: int | None = None, label_smoothing: float = 0.0
) -> torch.Tensor:
    """Mean cross-entropy over labels ≠ -100 (with ``num_items_in_batch``: the sum divided by that count), over any
    leading shape; ``label_smoothing`` ε as in Vaswani et al. 2017 §5.4."""
    logits = logits.reshape(-1, logits.shape[-1]).float()
    labels = labels.reshape(-1).to(logits.device)
    if num_items_in_batch is None:
        return F.cross_entropy(logits, labels, ignore_index=IGNORE_INDEX, label_smoothing=label_smoothing)
    total = F.cross_entropy(logits, labels, ignore_index=IGNORE_INDEX, reduction="sum", label_smoothing=label_smoothing)
    return per_item(total, num_items_in_batch)


def next_token_labels(labels: torch.Tensor | None, shift_labels: torch.Tensor | None = None) -> torch.Tensor | None:
    """What each position predicts: ``shift_labels`` when given (labels already shifted, as transformers passes them
    under context parallelism), else ``labels`` shifted left by one, ending in -100; None when neither is given.
    Works for any leading shape (batch[, choices], length)."""
    if shift_labels is not None or labels is None:
        return shift_labels
    return F.pad(labels[..., 1:], (0, 1), value=IGNORE_INDEX)


def causal_lm_loss(
    logits: torch.Tensor,
    labels: torch.Tensor | None,
    num_items_in_batch: int | None = None,
    shift_labels: torch.Tensor | None = None,
) -> torch.Tensor | None:
    """The language-modelling loss L1 (Radford et al. 2018 eq. 1) as a mean negative log-likelihood: the logits at
    position i predict the label at i + 1 (``next_token_labels``); None without labels.

    The labels are shifted, not the logits: slicing the logits would copy the largest tensor of the step, and the
    zero-filled gradient of a slice costs as much."""
    targets = next_token_labels(labels, shift_labels)
    if targets is None:
        return None
    return token_cross_entropy(logits, targets.to(logits.device), num_items_in_batch)


ProblemType = Literal["regression", "single_label_classification", "multi_label_classification"]
PROBLEM_TYPES: tuple[ProblemType, ...] = get_args(ProblemType)


def problem_type(config: PreTrainedConfig, num_labels: int, labels: torch.Tensor) -> ProblemType:
    """``config.problem_type``, or when unset the rule transformers' heads follow: regression for one label,
    single-label classification for integer labels, multi-label classification otherwise."""
    if config.problem_type is not None:
        if config.problem_type not in PROBLEM_TYPES:
            raise ValueError(f"Unknown problem_type {config.problem_type!r}: use one of {', '.join(PROBLEM_TYPES)}.")
        return config.problem_type
    if num_labels == 1:
        return "regression"
    if labels.dtype in (torch.long, torch.int):
        return "single_label_classification"
    return "multi_label_classification"


def check_sequence_labels(labels: torch.Tensor | None, batch: int, num_labels: int, config: PreTrainedConfig) -> None:
    """A sequence classifier's labels, checked before the model runs: a class index per example for single-label
    classification, ``num_labels`` values per example for regression and multi-label classification."""
    if labels is None:
        return
    if not isinstance(labels, torch.Tensor):
        raise ValueError(f"labels must be a torch.Tensor with one label per example, got {type(labels).__name__}.")
    kind = problem_type(config, num_labels, labels)
    if kind == "single_label_classification":
        check_class_labels(labels, (batch,), num_labels)
    elif labels.numel() != batch * num_labels:
        raise ValueError(
            f"labels has shape {tuple(labels.shape)} but {kind} takes {num_labels} value(s) per example: shape "
            f"({batch}, {num_labels})."
        )


def sequence_classification_loss(logits: torch.Tensor, labels: torch.Tensor, config: PreTrainedConfig) -> torch.Tensor:
    """Regression (MSE), single-label (cross-entropy) or multi-label (BCE) by ``config.problem_type``, inferred from
    ``num_labels`` and the label dtype when unset (``problem_type``), and kept in the config, as transformers' heads
    do."""
    num_labels = logits.shape[-1]
    config.problem_type = problem_type(config, num_labels, labels)
    if config.problem_type == "regression":
        if num_labels == 1:
            return F.mse_loss(logits.squeeze(-1).float(), labels.squeeze(-1).float())
        return F.mse_loss(logits.float(), labels.float())
    if config.problem_type == "single_label_classification":
        return F.cross_entropy(logits.view(-1, num_labels).float(), labels.view(-1))
    return F.binary_cross_entropy_with_logits(logits.float(), labels.float())


def span_loss(
    start_logits: torch.Tensor, end_logits: torch.Tensor, start_positions: torch.Tensor, end_positions: torch.Tensor
) -> torch.Tensor:
    """Extractive QA: mean of the start and end cross-entropies; positions outside the sequence are ignored."""
    length = start_logits.shape[1]
    start = start_positions.reshape(-1).clamp(0, length)
    end = end_positions.reshape(-1).clamp(0, length)
    start_loss = F.cross_entropy(start_logits.float(), start, ignore_index=length)
    end_loss = F.cross_entropy(end_logits.float(), end, ignore_index=length)
    return (start_loss + end_loss) / 2


# --------------------------------------------------------------------------------------------------------------
# Classifiers and multiple choice
# --------------------------------------------------------------------------------------------------------------


def label_count(config: PreTrainedConfig) -> int:
    """``config.num_labels``, the classifier's width: transformers' config gives 2 unless ``id2label`` is None."""
    if config.num_labels is None:
        raise ValueError(f"{type(config).__name__}.num_labels is None: set num_labels (or id2label) for this head.")
    return config.num_labels


def flatten_choices(x: torch.Tensor | None) -> torch.Tensor | None:
    """(batch, choices, length[, hidden]) → (batch·choices, length[, hidden]): each choice is its own sequence."""
    return None if x is None else x.reshape(-1, *x.shape[2:])


# --------------------------------------------------------------------------------------------------------------
# Encoder-decoders: the source, and the generation head
# --------------------------------------------------------------------------------------------------------------


def given_source(
    input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None, encoder_outputs: Any
) -> torch.Tensor | None:
    """The tensor that sizes an encoder-decoder's source: the encoder's output when given (a ModelOutput or a tuple,
    its states first), else the ids, else the embeddings the encoder reads; None when none is given."""
    if encoder_outputs is not None:
        return encoder_outputs[0]
    return input_ids if input_ids is not None else inputs_embeds


class Seq2SeqLMHead(DecoderInputsFromLabelsMixin, ScratchPreTrainedModel, ScratchGenerationMixin):
    """The encoder-decoders' generation head: p(y_t | y_<t, x) = softmax(logits_t), the logits from the top decoder
    state by the family's output layer (``lm_logits``); with ``labels`` (the targets as they are, not shifted: the
    decoder reads them shifted right, ``decoder_inputs_for``) the family's token loss (``lm_loss``). ``self.model``
    is the family's encoder-decoder; ``past_key_values`` is its decoder cache (an ``EncoderDecoderCache``, the RNN's
    recurrent state); ``generate`` runs on it (``ScratchGenerationMixin``). A head subclasses it beside its family's
    pre-trained model, in either order: ``class ScratchTransformerForConditionalGeneration(
    ScratchTransformerPreTrainedModel, Seq2SeqLMHead)``."""

    model: nn.Module  # the family's encoder-decoder (Seq2SeqModelOutput)

    def lm_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """The family's output layer: the top decoder states (batch, target_length, hidden) → the logits over the
        target vocabulary."""
        raise NotImplementedError(f"{type(self).__name__} must define lm_logits (its output layer).")

    def lm_loss(self, logits: torch.Tensor, labels: torch.Tensor, num_items_in_batch: int | None) -> torch.Tensor:
        """The family's loss over the target tokens (labels ≠ -100), per item of the batch with
        ``num_items_in_batch``."""
        raise NotImplementedError(f"{type(self).__name__} must define lm_loss (its token loss).")

    @normalise_inputs
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: ModelOutput | tuple[torch.Tensor, ...] | None = None,
        past_key_values: Any = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        num_items_in_batch: int | None = None,
    ) -> Seq2SeqLMOutput:
        decoder_input_ids = self.decoder_inputs_for(labels, decoder_input_ids, decoder_inputs_embeds)
        if labels is not None:  # one per target position, -100 where nothing is predicted
            target = decoder_input_ids if decoder_input_ids is not None else decoder_inputs_embeds
            shape = tuple(labels.shape) if target is None else tuple(target.shape[:2])
            check_class_labels(labels, shape, scored_classes(self.get_output_embeddings()))
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            encoder_outputs=encoder_outputs,
            past_key_values=past_key_values,
            inputs_embeds=inputs_embeds,
            decoder_inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache and labels is None,  # (training: the whole target at once)
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            **already_normalised(),
        )
        logits = self.lm_logits(outputs.last_hidden_state)
        loss = self.lm_loss(logits, labels, num_items_in_batch) if labels is not None else None
        return Seq2SeqLMOutput(
            loss=loss,
            logits=logits,
            **cache_output(returned_cache(outputs)),
            decoder_hidden_states=outputs.decoder_hidden_states,
            decoder_attentions=outputs.decoder_attentions,
            cross_attentions=outputs.cross_attentions,
            encoder_last_hidden_state=outputs.encoder_last_hidden_state,
            encoder_hidden_states=outputs.encoder_hidden_states,
            encoder_attentions=outputs.encoder_attentions,
        )

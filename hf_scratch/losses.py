"""The training objectives the families share, with transformers' conventions: labels of -100 are ignored, and
``num_items_in_batch`` (passed by the Trainer under gradient accumulation) turns the mean into sum / that count, so
that accumulated steps add up to the full batch's loss. Losses are computed in fp32 whatever the logits' dtype.

A family's own objective stays in its modeling file: GPT-1's auxiliary objective (eq. 5), BERT's MLM + NSP sum,
Transformer-XL's loss over the adaptive softmax's target log-probabilities.

What the training code reports from a loss is here too: ``perplexity``.
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F
from transformers import PreTrainedConfig

IGNORE_INDEX = -100  # transformers' label for "nothing to predict here"


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


def sequence_classification_loss(logits: torch.Tensor, labels: torch.Tensor, config: PreTrainedConfig) -> torch.Tensor:
    """Regression (MSE), single-label (cross-entropy) or multi-label (BCE) by ``config.problem_type``, inferred from
    ``num_labels`` and the label dtype when unset — the rule transformers' heads follow."""
    num_labels = logits.shape[-1]
    if config.problem_type is None:
        if num_labels == 1:
            config.problem_type = "regression"
        elif labels.dtype in (torch.long, torch.int):
            config.problem_type = "single_label_classification"
        else:
            config.problem_type = "multi_label_classification"
    if config.problem_type == "regression":
        if num_labels == 1:
            return F.mse_loss(logits.squeeze(-1).float(), labels.squeeze(-1).float())
        return F.mse_loss(logits.float(), labels.float())
    if config.problem_type == "single_label_classification":
        return F.cross_entropy(logits.view(-1, num_labels).float(), labels.view(-1))
    if config.problem_type == "multi_label_classification":
        return F.binary_cross_entropy_with_logits(logits.float(), labels.float())
    raise ValueError(
        f"Unknown problem_type {config.problem_type!r}: use 'regression', 'single_label_classification' or "
        "'multi_label_classification'."
    )


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


# Perplexity is exp(loss). math.exp raises OverflowError above ln(max float) ≈ 709.78, which a diverged run's loss can
# reach: the loss is capped just below, so such a run reports a huge but finite perplexity (≈ 1e304) instead of
# failing its evaluation. Every loss a working model has is far below the cap, where the value is exact.
MAX_LOG_PERPLEXITY = 700.0


def perplexity(loss: float) -> float:
    """exp(loss) of a mean cross-entropy in nats, with the loss capped at ``MAX_LOG_PERPLEXITY`` (see there).
    ``TransfoXLTrainer`` and the training scripts (``training/common.py``) report ``eval_perplexity`` with it."""
    return math.exp(min(loss, MAX_LOG_PERPLEXITY))

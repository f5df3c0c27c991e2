"""Checks that run before any kernel: bad input gets a ValueError that names the argument and the fix.

Two kinds live here:

- the compile-safe check on tensor *values* (``values_pass``): plain in eager mode, an assertion inside the graph
  under ``torch.compile`` / ``torch.export`` (CONTRIBUTING, "Input validation under torch.compile");
- the user-input validation every family runs on what it is given: the 0/1 ``attention_mask`` (as bool, True = real
  token), token ids against the live embedding table, the one-of ``input_ids`` / ``inputs_embeds`` rule, and the
  shapes of multiple-choice inputs (the (batch, num_choices, length) layout of Radford et al. 2018 §3.3 and Devlin et
  al. 2019 §4.4, each choice its own sequence).

Checks on shapes, dtypes and types are plain Python and raise everywhere. The masks built from a valid mask (the
"may attend" relations) are in ``masks.py``; positions are checked by the positional modules, ``positional.py``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from transformers import PreTrainedConfig

# --------------------------------------------------------------------------------------------------------------
# Checks that read tensor values, and torch.compile / torch.export
# --------------------------------------------------------------------------------------------------------------


def values_pass(ok: torch.Tensor, message: str) -> bool:
    """Whether a check on tensor *values* passes (``ok``: bool tensor, all True when it does).

    Checks on shapes, dtypes and types read nothing from the device and raise their ValueError everywhere. A check on
    values has to read them: in eager mode this reads ``ok.all()`` (one device sync on an accelerator, none on CPU)
    and returns it, so that the caller raises its detailed ValueError. Under ``torch.compile`` / ``torch.export``
    reading a value would break the graph (and sync the device on every call), so the check becomes an
    asynchronous assertion inside the graph, ``torch._assert_async(ok.all(), message)``, and this returns True: bad
    values still stop the call, as a RuntimeError carrying ``message`` (on an accelerator, a device-side assertion
    reported at the next synchronisation)."""
    if torch.compiler.is_compiling():
        torch._assert_async(ok.all(), message)
        return True
    return bool(ok.all())


# --------------------------------------------------------------------------------------------------------------
# The user's 0/1 attention mask
# --------------------------------------------------------------------------------------------------------------


def check_attention_mask(
    attention_mask: torch.Tensor | None, batch_size: int, length: int, name: str = "attention_mask"
) -> torch.Tensor | None:
    """Validate a (batch, length) 0/1 mask as users pass it and return it as bool (True = real token)."""
    if attention_mask is None:
        return None
    if not isinstance(attention_mask, torch.Tensor):
        raise ValueError(
            f"{name} must be a torch.Tensor of shape (batch, length), got {type(attention_mask).__name__}."
        )
    if attention_mask.dim() != 2 or tuple(attention_mask.shape) != (batch_size, length):
        raise ValueError(
            f"{name} has shape {tuple(attention_mask.shape)} but the inputs need ({batch_size}, {length}): "
            "pass one 0/1 value per input token (1 = attend, 0 = padding)."
        )
    if attention_mask.dtype == torch.bool:
        return attention_mask
    if attention_mask.is_floating_point() or attention_mask.dtype in (
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.uint8,
    ):
        message = (
            f"{name} must contain only 0 and 1 (1 = attend, 0 = padding); got other values. "
            "Pass the tokenizer's attention_mask, not an additive bias."
        )
        if not values_pass((attention_mask == 0) | (attention_mask == 1), message):
            raise ValueError(message)
        return attention_mask != 0
    raise ValueError(f"{name} has dtype {attention_mask.dtype}; use bool or an integer/float 0/1 tensor.")


# --------------------------------------------------------------------------------------------------------------
# Token ids and embeddings
# --------------------------------------------------------------------------------------------------------------


def embedding_rows(embedding: nn.Module) -> int:
    """How many ids the live embedding module accepts — its ``num_embeddings`` now, so that the id check follows
    ``resize_token_embeddings`` and ``set_input_embeddings``. A wrapper without that attribute (a peft adapter
    around the embedding) is asked for the layer it wraps (``get_base_layer()``)."""
    while not hasattr(embedding, "num_embeddings") and hasattr(embedding, "get_base_layer"):
        base = embedding.get_base_layer()  # type: ignore[operator]  # peft's method; torch types attributes Tensor | Module
        if base is embedding:
            break
        embedding = base
    return embedding.num_embeddings  # type: ignore[return-value]  # an int; torch types attributes Tensor | Module


def check_input_ids(input_ids: torch.Tensor, vocab_size: int, name: str = "input_ids") -> None:
    """Ids must index the embedding table: 0 ≤ id < vocab_size (pass ``embedding_rows`` of the live table)."""
    if input_ids.dim() != 2:
        raise ValueError(f"{name} must have shape (batch, length), got {tuple(input_ids.shape)}.")
    if input_ids.dtype.is_floating_point:
        raise ValueError(f"{name} must hold integer token ids, got dtype {input_ids.dtype}.")
    if input_ids.numel() == 0:
        raise ValueError(f"{name} is empty: pass at least one token.")
    fix = "use the tokenizer that belongs to this model, or resize the embeddings (model.resize_token_embeddings)."
    in_vocabulary = (input_ids >= 0) & (input_ids < vocab_size)
    if not values_pass(in_vocabulary, f"{name} contains an id outside the vocabulary of {vocab_size} tokens: {fix}"):
        bad = input_ids[~in_vocabulary][0].item()
        raise ValueError(f"{name} contains id {bad}, outside the vocabulary of {vocab_size} tokens (vocab_size): {fix}")


def check_one_input(input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None) -> torch.Tensor:
    """The one of ``input_ids`` / ``inputs_embeds`` that is given (its leading dimensions are the batch's shape);
    a ValueError unless exactly one is."""
    if input_ids is not None and inputs_embeds is None:
        return input_ids
    if inputs_embeds is not None and input_ids is None:
        return inputs_embeds
    raise ValueError("Pass exactly one of input_ids or inputs_embeds.")


# --------------------------------------------------------------------------------------------------------------
# Multiple choice: each choice is its own sequence
# --------------------------------------------------------------------------------------------------------------


def flatten_choices(x: torch.Tensor | None) -> torch.Tensor | None:
    """(batch, choices, length[, hidden]) → (batch·choices, length[, hidden]): each choice is its own sequence."""
    return None if x is None else x.reshape(-1, *x.shape[2:])


def choice_dimensions(input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None) -> tuple[int, int, int]:
    """(batch, num_choices, length) of multiple-choice inputs, or a ValueError if they are not shaped that way. The
    one-of rule is checked once, by the base model the flattened choices go to (``check_one_input``); here only
    when neither input is given, since there are no dimensions to read then."""
    reference = input_ids if input_ids is not None else inputs_embeds
    if reference is None:
        reference = check_one_input(input_ids, inputs_embeds)  # raises: neither is given
    if reference.dim() != (3 if input_ids is not None else 4):
        raise ValueError(
            f"Multiple-choice inputs must be shaped (batch, num_choices, length), got {tuple(reference.shape)}: "
            "put each example's choices along dimension 1 "
            "(for GPT, tools.gpt_input_transforms.multiple_choice_inputs does)."
        )
    batch, num_choices, length = reference.shape[:3]
    return batch, num_choices, length


def label_count(config: PreTrainedConfig) -> int:
    """``config.num_labels``, the classifier's width: transformers' config gives 2 unless ``id2label`` is None."""
    if config.num_labels is None:
        raise ValueError(f"{type(config).__name__}.num_labels is None: set num_labels (or id2label) for this head.")
    return config.num_labels


def given_source(
    input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None, encoder_outputs: Any
) -> torch.Tensor | None:
    """The tensor that sizes an encoder-decoder's source: the encoder's output when given (a ModelOutput or a tuple,
    its states first), else the ids, else the embeddings the encoder reads; None when none is given."""
    if encoder_outputs is not None:
        return encoder_outputs[0]
    return input_ids if input_ids is not None else inputs_embeds

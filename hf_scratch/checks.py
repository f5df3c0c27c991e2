"""Checks that run before any kernel: bad input gets a ValueError that names the argument and the fix.

A public forward calls them on what it is given, before it builds anything from it: its masks are built afterwards,
once, from what these checks return (``masks.py``). Two kinds live here:

- the compile-safe check on tensor *values* (``values_pass``): plain in eager mode, an assertion inside the graph
  under ``torch.compile`` / ``torch.export`` (CONTRIBUTING, "Input validation under torch.compile");
- the user-input validation every family runs on what it is given: the masks — the 0/1 ``attention_mask`` (as bool,
  True = real token), over a cache's key slots or ending with the new tokens, and a custom 4-D relation as
  transformers' models take it — token ids against the live embedding table, the one-of ``input_ids`` /
  ``inputs_embeds`` rule, positions (their shape, and the table they index), and the shapes of multiple-choice inputs
  (the (batch, num_choices, length) layout of Radford et al. 2018 §3.3 and Devlin et al. 2019 §4.4, each choice its
  own sequence), and the labels a head's loss reads (class indices in range, or -100; one per example or position).

Checks on shapes, dtypes and types are plain Python and raise everywhere.
"""

from __future__ import annotations

import math

import torch
from torch import nn

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


def check_relation_mask(
    attention_mask: torch.Tensor, batch_size: int, query_length: int, key_length: int, name: str = "attention_mask"
) -> torch.Tensor:
    """Validate a custom 4-D mask, the whole "may attend" relation of every query and key, and return it as
    (batch or 1, 1, query_length, key_length) bool.

    It takes the place of the mask the model would build (padding, causal, packed sequences), as transformers' models
    take a prepared 4-D mask: boolean (True = may attend), or additive float as in the attention equation (0 = may
    attend; masked: a large negative value, at most -1e4 — ``finfo.min``, -inf, the -10000 of older models).
    ``key_length`` counts the cached keys and the new ones (all of a static cache's slots)."""
    expected = (batch_size, 1, query_length, key_length)
    shape = tuple(attention_mask.shape)
    if len(shape) != 4 or shape[0] not in (1, batch_size) or shape[1:] != expected[1:]:
        raise ValueError(
            f"{name} has shape {shape} but a 4-D mask must be (batch, 1, query_length, key_length) = {expected} "
            "(batch may be 1; key_length counts the cached tokens and the new ones), or a (batch, length) 0/1 mask."
        )
    if attention_mask.dtype == torch.bool:
        return attention_mask
    if not attention_mask.is_floating_point():
        raise ValueError(
            f"A 4-D {name} must be bool (True = attend) or an additive float mask (0 = attend, large negative = "
            f"masked), got dtype {attention_mask.dtype}."
        )
    message = (
        f"A float 4-D {name} is additive: 0 where a query may attend a key, a large negative value (≤ -1e4, "
        "e.g. torch.finfo(dtype).min) where it may not; got other values."
    )
    if not values_pass((attention_mask == 0) | (attention_mask <= -1e4), message):
        raise ValueError(message)
    return attention_mask == 0


def check_padding_or_relation(
    attention_mask: torch.Tensor | None,
    batch_size: int,
    query_length: int,
    key_length: int,
    name: str = "attention_mask",
) -> torch.Tensor | None:
    """The mask of an encoder's self-attention or a cross-attention, validated: a (batch, key_length) 0/1 mask as
    bool key padding (``check_attention_mask``), or a 4-D mask as the bool relation (``check_relation_mask``)."""
    if isinstance(attention_mask, torch.Tensor) and attention_mask.dim() == 4:
        return check_relation_mask(attention_mask, batch_size, query_length, key_length, name)
    return check_attention_mask(attention_mask, batch_size, key_length, name)


def check_decoder_mask(
    attention_mask: torch.Tensor | None,
    batch_size: int,
    key_length: int,
    cache_positions: torch.Tensor,
    static: bool,
    name: str = "attention_mask",
) -> torch.Tensor | None:
    """The mask of a decoder's masked self-attention, validated (``masks.cache_layout`` gives ``key_length``,
    ``cache_positions``, ``static``): a 4-D mask as the bool relation (``check_relation_mask``), causality included;
    a 0/1 mask as (batch, key_length) bool over the cache's key slots.

    The 0/1 mask covers the cached tokens and the new ones: exactly ``key_length`` columns for a growing cache; for a
    static cache any width up to its ``max_cache_len`` slots that reaches the new tokens (``generate`` passes it
    widened to all slots, see ``ScratchGenerationMixin.create_masks_for_generate``) — slots after its end count as
    padding."""
    if isinstance(attention_mask, torch.Tensor) and attention_mask.dim() == 4:
        return check_relation_mask(attention_mask, batch_size, cache_positions.shape[0], key_length, name)
    length = key_length
    if static and isinstance(attention_mask, torch.Tensor) and attention_mask.dim() == 2:
        length = min(attention_mask.shape[1], key_length)
    key_is_real = check_attention_mask(attention_mask, batch_size, length, name)
    if key_is_real is None or length == key_length:
        return key_is_real
    message = f"{name} has {length} columns but the static cache holds more tokens: cover every token so far."
    if not values_pass(cache_positions < length, message):
        raise ValueError(message)
    return torch.cat([key_is_real, key_is_real.new_zeros(batch_size, key_length - length)], dim=1)


def check_mask_of_last_tokens(
    attention_mask: torch.Tensor | None, batch_size: int, length: int, name: str = "attention_mask"
) -> torch.Tensor | None:
    """A 0/1 mask whose last ``length`` columns are the new tokens', preceded by any number of earlier tokens' (as
    ``generate`` grows it past a model's memory), as (batch, columns) bool."""
    columns = length
    if isinstance(attention_mask, torch.Tensor) and attention_mask.dim() == 2:
        columns = max(attention_mask.shape[1], length)
    return check_attention_mask(attention_mask, batch_size, columns, name)


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
# Positions
# --------------------------------------------------------------------------------------------------------------


def check_position_ids(position_ids: torch.Tensor, batch_size: int, length: int) -> None:
    """One position per input token: ``position_ids`` shaped (batch, length), or (1, length) / (length,) shared by
    every row."""
    if (
        position_ids.dim() > 2
        or position_ids.shape[-1] != length
        or position_ids.numel() not in (length, batch_size * length)
    ):
        raise ValueError(
            f"position_ids has shape {tuple(position_ids.shape)} but the inputs need ({batch_size}, {length}) "
            f"(or (1, {length}), shared by every row): one position per input token."
        )


def check_positions(position_ids: torch.Tensor, num_positions: int) -> None:
    """Positions past the table cannot be encoded: say so instead of indexing out of range. (A check on values:
    under torch.compile / torch.export it is an assertion inside the graph, see ``values_pass``.)"""
    fix = (
        "shorten or truncate the input (tokenizer(..., truncation=True, max_length=...)) or use a model configured "
        "with more positions."
    )
    message = f"The input needs positions past the {num_positions} the model has (max_position_embeddings): {fix}"
    if not values_pass(position_ids < num_positions, message):
        raise ValueError(
            f"The input needs position {int(position_ids.max())} but the model has only {num_positions} positions "
            f"(max_position_embeddings={num_positions}): {fix}"
        )
    if not values_pass(position_ids >= 0, "position_ids must be ≥ 0."):
        raise ValueError("position_ids must be ≥ 0.")


# --------------------------------------------------------------------------------------------------------------
# Labels: what a head's loss reads, checked before the model runs
# --------------------------------------------------------------------------------------------------------------

IGNORE_INDEX = -100  # transformers' label for "nothing to predict here"


def scored_classes(layer: nn.Module) -> int | None:
    """How many classes the live output layer scores (its ``out_features``, or the layer a peft wrapper wraps);
    None when it does not say."""
    while not hasattr(layer, "out_features") and hasattr(layer, "get_base_layer"):
        base = layer.get_base_layer()  # type: ignore[operator]  # peft's method; torch types attributes Tensor | Module
        if base is layer:
            break
        layer = base
    classes = getattr(layer, "out_features", None)
    return classes if isinstance(classes, int) else None


def check_class_labels(
    labels: torch.Tensor | None,
    shape: tuple[int, ...],
    classes: int | None,
    name: str = "labels",
    exact: bool = False,
) -> None:
    """Class indices for a cross-entropy: integers, one for each of ``shape`` (the examples or positions they label;
    with ``exact`` in that very shape, else any layout of that many, which the loss flattens as transformers' does),
    each in [0, ``classes``) or -100 (nothing to predict there). ``classes`` None: the range is not checked."""
    if labels is None:
        return
    if not isinstance(labels, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of shape {shape}, got {type(labels).__name__}.")
    if labels.dtype.is_floating_point or labels.dtype.is_complex or labels.dtype == torch.bool:
        raise ValueError(f"{name} must hold integer class indices, got dtype {labels.dtype}.")
    if tuple(labels.shape) != tuple(shape) and (exact or labels.numel() != math.prod(shape)):
        raise ValueError(
            f"{name} has shape {tuple(labels.shape)} but the inputs call for {tuple(shape)}: one label per "
            f"{'position' if len(shape) > 1 else 'example'}, -100 where nothing is predicted."
        )
    if classes is None:
        return
    fix = f"each must be a class index in [0, {classes}) or {IGNORE_INDEX} (ignored)"
    valid = ((labels >= 0) & (labels < classes)) | (labels == IGNORE_INDEX)
    if not values_pass(valid, f"{name} contains a value that is not a class index: {fix}."):
        bad = labels[~valid][0].item()
        raise ValueError(f"{name} contains {bad}, which is not a class index: {fix}.")


def check_next_token_labels(
    input_ids: torch.Tensor | None,
    inputs_embeds: torch.Tensor | None,
    labels: torch.Tensor | None,
    shift_labels: torch.Tensor | None,
    classes: int | None,
) -> None:
    """A language model's labels, checked before the model runs: ``labels`` (the inputs, shifted inside) or
    ``shift_labels`` (shifted already) in the inputs' very shape, class indices below ``classes`` or -100."""
    given = input_ids if input_ids is not None else inputs_embeds  # (the base model checks the one-of rule)
    if given is not None:
        for name, labelled in (("labels", labels), ("shift_labels", shift_labels)):
            check_class_labels(labelled, tuple(given.shape[:2]), classes, name, exact=True)


# --------------------------------------------------------------------------------------------------------------
# Multiple choice: each choice is its own sequence
# --------------------------------------------------------------------------------------------------------------


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

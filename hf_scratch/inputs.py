"""What a model checks and builds from its inputs before any kernel runs: bad input gets a ValueError that names the
argument and the fix (token ids, the one-of ``input_ids`` / ``inputs_embeds`` rule, multiple-choice shapes), and the
decoder inputs an encoder-decoder builds from its labels. (Masks are checked where they are built, in
``attention.py``; positions by the positional modules, ``positional.py``.)

Checks on shapes and dtypes are plain Python; checks on values go through ``attention.values_pass``, so that they
also hold under ``torch.compile`` / ``torch.export`` (CONTRIBUTING, "Input validation under torch.compile").
"""

from __future__ import annotations

import torch
from torch import nn

from .attention import values_pass

# --------------------------------------------------------------------------------------------------------------
# Token ids and embeddings
# --------------------------------------------------------------------------------------------------------------


def embedding_rows(embedding: nn.Module) -> int:
    """How many ids the live embedding module accepts — its ``num_embeddings`` now, so that the id check follows
    ``resize_token_embeddings`` and ``set_input_embeddings``. A wrapper without that attribute (a peft adapter
    around the embedding) is asked for the layer it wraps (``get_base_layer()``)."""
    while not hasattr(embedding, "num_embeddings") and hasattr(embedding, "get_base_layer"):
        base = embedding.get_base_layer()
        if base is embedding:
            break
        embedding = base
    return embedding.num_embeddings


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
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError("Pass exactly one of input_ids or inputs_embeds.")
    return input_ids if input_ids is not None else inputs_embeds


# --------------------------------------------------------------------------------------------------------------
# Multiple choice: each choice is its own sequence
# --------------------------------------------------------------------------------------------------------------


def flatten_choices(x: torch.Tensor | None) -> torch.Tensor | None:
    """(batch, choices, length[, hidden]) → (batch·choices, length[, hidden]): each choice is its own sequence."""
    return None if x is None else x.reshape(-1, *x.shape[2:])


def choice_dimensions(input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None) -> tuple[int, int, int]:
    """(batch, num_choices, length) of multiple-choice inputs, or a ValueError if they are not shaped that way."""
    reference = check_one_input(input_ids, inputs_embeds)
    if reference.dim() != (3 if input_ids is not None else 4):
        raise ValueError(
            f"Multiple-choice inputs must be shaped (batch, num_choices, length), got {tuple(reference.shape)}: "
            "put each example's choices along dimension 1 "
            "(for GPT, tools.gpt_input_transforms.multiple_choice_inputs does)."
        )
    batch, num_choices, length = reference.shape[:3]
    return batch, num_choices, length


# --------------------------------------------------------------------------------------------------------------
# Encoder-decoders: the decoder inputs that go with the labels
# --------------------------------------------------------------------------------------------------------------


def shift_tokens_right(labels: torch.Tensor, pad_token_id: int | None, decoder_start_token_id: int) -> torch.Tensor:
    """Decoder inputs from labels: [start, y_1 … y_{n-1}], the outputs "offset by one position" of Vaswani et al.
    2017 §3.1 (the decoder reads "<s> i want a beer" to predict "i want a beer </s>"). Ignored label positions
    (-100) become padding."""
    shifted = labels.new_zeros(labels.shape)
    shifted[:, 1:] = labels[:, :-1]
    shifted[:, 0] = decoder_start_token_id
    if (shifted == -100).any():
        if pad_token_id is None:
            raise ValueError(
                "labels contain -100 (ignored positions) but config.pad_token_id is None: set pad_token_id so the "
                "shifted decoder inputs can be padded there."
            )
        shifted = shifted.masked_fill(shifted == -100, pad_token_id)
    return shifted

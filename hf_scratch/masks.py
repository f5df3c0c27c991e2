"""Masks: which key each query may attend, as boolean relations (True = may attend), and where the new tokens' keys
sit in a cache.

Scaled dot-product attention (Vaswani et al. 2017 §3.2.1, eq. 1) is softmax(Q Kᵀ / √d_k + M) V, with M 0 where a
query may attend a key and a very large negative number where it may not. Masks are kept as boolean "may attend"
relations, broadcastable to (batch, heads, query_length, key_length), and combined with logic — key padding ∧ causal
∧ same packed sequence ∧ … (``AttentionMask``) — and only a kernel turns them into the additive M (``mask_to_bias``:
``torch.finfo(dtype).min``, never a fixed constant or infinity, which overflow in half precision or give NaN).

This room holds:

- the algebra: key padding, the decoder's causal mask ("subsequent positions", Vaswani et al. 2017 §3.1, §3.2.3),
  Transformer-XL's causal window (``same_length``, Dai et al. 2019), packed sequences from ``position_ids``
  (padding-free batches), a custom 4-D relation as transformers' models take it, and their conjunction;
- the masks the families build from their inputs: an encoder's or a cross-attention's (``padding_or_relation``) and a
  decoder's masked self-attention (``decoder_self_attention_mask``);
- the cache layout: where this call's keys go in a transformers ``Cache`` (``DynamicCache`` grows, ``StaticCache``
  has fixed slots) and the 0/1 mask over those slots.

The user's 0/1 mask is validated in ``checks.py``; the kernels that read these relations are in ``kernels.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import Cache

from .checks import check_attention_mask, values_pass

# --------------------------------------------------------------------------------------------------------------
# The algebra: boolean "may attend" relations, broadcastable to (batch, heads, query_length, key_length)
# --------------------------------------------------------------------------------------------------------------


def padding_mask(key_is_real: torch.Tensor) -> torch.Tensor:
    """(batch, key_length) bool → (batch, 1, 1, key_length): every query may attend the real keys."""
    return key_is_real[:, None, None, :]


def padding_or_none(key_is_real: torch.Tensor | None) -> torch.Tensor | None:
    """The key-padding part of a mask, or None when it restricts nothing.

    In eager mode an all-ones mask is dropped (one read of the mask), so that SDPA runs unmasked or with its own
    causal kernel. Under ``torch.compile`` / ``torch.export`` the mask is kept as it is: an all-ones mask gives the
    same result, while deciding would break the graph, sync the device, and recompile whenever a batch gains or loses
    padding."""
    if key_is_real is None or torch.compiler.is_compiling():
        return key_is_real
    return None if bool(key_is_real.all()) else key_is_real


def causal_mask(
    query_length: int, key_length: int, device: torch.device, query_positions: torch.Tensor | None = None
) -> torch.Tensor:
    """(1, 1, query_length, key_length) bool: query i may attend key j iff j ≤ pos(i) — the decoder's mask of
    "subsequent positions" (Vaswani et al. 2017 §3.1, §3.2.3). pos(i), the key slot of query i, is by default among
    the last ``query_length`` of ``key_length`` (cached keys, then the new ones); ``query_positions``
    (query_length,) gives the slots — a static cache has more slots than tokens so far, and the slots not yet
    written lie after every query."""
    if query_positions is None:
        query_positions = torch.arange(query_length, device=device) + (key_length - query_length)
    key_positions = torch.arange(key_length, device=device)[None, :]
    return (key_positions <= query_positions[:, None])[None, None]


def causal_window_mask(query_length: int, key_length: int, window: int, device: torch.device) -> torch.Tensor:
    """(1, 1, query_length, key_length) bool: query i (the last ``query_length`` of ``key_length`` positions, as in
    ``causal_mask``) may attend key j iff 0 ≤ pos(i) - j < ``window`` — the causal mask restricted to the ``window``
    most recent keys: Transformer-XL's ``same_length`` (every query sees the same number of keys, Dai et al. 2019)
    with window = mem_len."""
    query_positions = torch.arange(query_length, device=device)[:, None] + (key_length - query_length)
    distance = query_positions - torch.arange(key_length, device=device)[None, :]
    return ((distance >= 0) & (distance < window))[None, None]


def combine_masks(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """Logical AND of the masks that are given (None means "no restriction")."""
    combined = None
    for mask in masks:
        if mask is None:
            continue
        combined = mask if combined is None else combined & mask
    return combined


def packed_sequences(position_ids: torch.Tensor, batch_size: int, length: int) -> torch.Tensor | None:
    """(batch, length) index of the sequence each token belongs to, when ``position_ids`` pack several sequences into
    one row (a padding-free batch: ``DataCollatorWithFlattening``, TRL's packing / ``padding_free``).

    A new sequence starts wherever a position is not the previous one + 1 (positions that restart at 0, or jump);
    the index is the running count of starts: positions [[0, 1, 2, 3, 0, 1, 2]] → [[0, 0, 0, 0, 1, 1, 1]] — the rule
    of transformers' ``masking_utils.find_packed_sequence_indices``. In eager mode None when no row holds a second
    sequence (one read of the starts), so that SDPA keeps its causal kernel; under ``torch.compile`` /
    ``torch.export`` the indices are kept as they are (all 0 restricts nothing), as in ``padding_or_none``."""
    if (
        position_ids.dim() > 2
        or position_ids.shape[-1] != length
        or position_ids.numel() not in (length, batch_size * length)
    ):
        raise ValueError(
            f"position_ids has shape {tuple(position_ids.shape)} but the inputs need ({batch_size}, {length}) "
            f"(or (1, {length}), shared by every row): one position per input token."
        )
    position_ids = position_ids.reshape(-1, length).expand(batch_size, length)
    starts = position_ids[:, 1:] != position_ids[:, :-1] + 1
    sequence_ids = torch.cat([starts.new_zeros(batch_size, 1), starts], dim=1).cumsum(-1)
    if torch.compiler.is_compiling() or bool(starts.any()):
        return sequence_ids
    return None


def same_sequence_mask(sequence_ids: torch.Tensor) -> torch.Tensor:
    """(batch, length) packed sequence indices → (batch, 1, length, length) bool: token i may attend token j only
    within its own sequence (the queries are the keys: nothing is cached)."""
    return (sequence_ids[:, :, None] == sequence_ids[:, None, :])[:, None]


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


def mask_to_bias(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Turn a boolean "may attend" mask into the additive M of the attention equation (0 or finfo.min)."""
    bias = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    return bias.masked_fill(~allowed, torch.finfo(dtype).min)


@dataclass
class AttentionMask:
    """The parts of a "may attend" relation, kept apart until a kernel needs them.

    ``key_padding``: (batch, key_length) bool, True for real tokens (None: no padding).
    ``causal``: whether query i may only attend keys ≤ i (aligned at the end when keys include a cache).
    ``query_positions``: (query_length,) the key slots of the queries when they are not the last ones — with
    transformers' ``StaticCache`` the keys are all ``max_cache_len`` slots, written or not (see ``cache_layout``).
    ``sequence_ids``: (batch, length) the packed sequence of each token (``packed_sequences``; no cache: the queries
    are the keys), None: one sequence per row.
    ``relation``: a custom (batch or 1, 1, query_length, key_length) bool relation (``check_relation_mask``), None:
    none.
    """

    key_padding: torch.Tensor | None = None
    causal: bool = False
    query_positions: torch.Tensor | None = None
    sequence_ids: torch.Tensor | None = None
    relation: torch.Tensor | None = None

    @property
    def only_causal(self) -> bool:
        """Whether the relation is "key ≤ query" alone, with the new tokens the last keys: SDPA's own causal kernel."""
        parts = (self.key_padding, self.query_positions, self.sequence_ids, self.relation)
        return self.causal and all(part is None for part in parts)

    def to_bool(self, query_length: int, key_length: int, device: torch.device) -> torch.Tensor | None:
        """The combined relation, broadcastable to (batch, heads, query_length, key_length), or None."""
        causal = None
        if self.causal and (query_length > 1 or self.query_positions is not None):
            causal = causal_mask(query_length, key_length, device, self.query_positions)
        padding = padding_mask(self.key_padding) if self.key_padding is not None else None
        same_sequence = same_sequence_mask(self.sequence_ids) if self.sequence_ids is not None else None
        return combine_masks(padding, causal, same_sequence, self.relation)


# --------------------------------------------------------------------------------------------------------------
# Caches: where the new tokens' keys go in a transformers Cache (DynamicCache grows, StaticCache has fixed slots)
# --------------------------------------------------------------------------------------------------------------


def cache_layout(
    past_key_values: Cache | None, query_length: int, device: torch.device
) -> tuple[int, torch.Tensor, bool]:
    """(key_length, cache_positions, static) for this call's ``query_length`` new tokens.

    ``key_length``: the keys attention sees once the cache is updated — the cached tokens and the new ones for a
    growing cache (``DynamicCache``), all ``max_cache_len`` slots for transformers' ``StaticCache`` (written or not);
    ``cache_positions``: (query_length,) the slots of the new tokens, past + 0 … past + query_length - 1, where a
    static cache counts ``past`` on the device (a 0-d tensor: reading it would sync the device and tie a compiled
    graph to one decoding step); ``static``: whether the new tokens are not simply the last keys (then the causal
    mask is built from ``cache_positions``, and it also hides the slots not yet written)."""
    if past_key_values is None:
        return query_length, torch.arange(query_length, device=device), False
    past_length = past_key_values.get_seq_length()
    key_length, _ = past_key_values.get_mask_sizes(query_length, 0)
    cache_positions = torch.arange(query_length, device=device) + past_length
    return key_length, cache_positions, bool(past_key_values.is_compileable)


def check_cache_mask(
    attention_mask: torch.Tensor | None,
    batch_size: int,
    key_length: int,
    cache_positions: torch.Tensor,
    static: bool,
    name: str = "attention_mask",
) -> torch.Tensor | None:
    """The 0/1 mask of a decoder with a cache, as (batch, key_length) bool over the key slots.

    It covers the cached tokens and the new ones: exactly ``key_length`` columns for a growing cache; for a static
    cache any width up to its ``max_cache_len`` slots that reaches the new tokens (``generate`` passes it widened to
    all slots, see ``ScratchPreTrainedModel.create_masks_for_generate``) — slots after its end count as padding."""
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


# --------------------------------------------------------------------------------------------------------------
# The masks the families build from their inputs
# --------------------------------------------------------------------------------------------------------------


def padding_or_relation(
    attention_mask: torch.Tensor | None,
    batch_size: int,
    query_length: int,
    key_length: int,
    name: str = "attention_mask",
) -> AttentionMask:
    """An encoder's self-attention or a cross-attention relation, where every query may attend every real key: from
    a (batch, key_length) 0/1 mask, key padding (``check_attention_mask``); a 4-D mask is the whole relation as given
    (``check_relation_mask``), as transformers' models take a prepared 4-D mask."""
    if isinstance(attention_mask, torch.Tensor) and attention_mask.dim() == 4:
        return AttentionMask(relation=check_relation_mask(attention_mask, batch_size, query_length, key_length, name))
    return AttentionMask(
        key_padding=padding_or_none(check_attention_mask(attention_mask, batch_size, key_length, name))
    )


def decoder_self_attention_mask(
    attention_mask: torch.Tensor | None,
    batch_size: int,
    key_length: int,
    cache_positions: torch.Tensor,
    static: bool,
    *,
    position_ids: torch.Tensor | None = None,
    cached: bool = True,
    name: str = "attention_mask",
) -> tuple[AttentionMask, torch.Tensor | None]:
    """A decoder's masked self-attention relation from its inputs (``cache_layout`` gives ``key_length``,
    ``cache_positions``, ``static``; ``position_ids``: as the user gave them; ``cached``: a cache is read or
    written), and the key padding, (batch, key_length) bool or None, from which positions are counted:

    - a 4-D ``attention_mask`` is the whole relation as given (``check_relation_mask``), causality included, as
      transformers' models take a prepared 4-D mask; it says nothing of padding, so positions are not counted from it;
    - a (batch, key_length) 0/1 mask: key padding ∧ causal (``check_cache_mask``);
    - ``position_ids`` with no mask and no cache: causal ∧ same packed sequence (``packed_sequences``) — a
      padding-free batch, transformers' condition (``masking_utils``: position_ids given, no mask, no cache);
    - otherwise causal alone."""
    query_length = cache_positions.shape[0]
    if isinstance(attention_mask, torch.Tensor) and attention_mask.dim() == 4:
        return padding_or_relation(attention_mask, batch_size, query_length, key_length, name), None
    key_is_real = check_cache_mask(attention_mask, batch_size, key_length, cache_positions, static, name)
    sequence_ids = None
    if attention_mask is None and position_ids is not None and not cached:
        sequence_ids = packed_sequences(position_ids, batch_size, query_length)
    mask = AttentionMask(
        key_padding=padding_or_none(key_is_real),
        causal=True,
        query_positions=cache_positions if static else None,
        sequence_ids=sequence_ids,
    )
    return mask, key_is_real

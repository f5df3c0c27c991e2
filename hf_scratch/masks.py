"""Masks: which key each query may attend, as boolean relations (True = may attend), and where the new tokens' keys
sit in a cache.

Scaled dot-product attention (Vaswani et al. 2017 §3.2.1, eq. 1) is softmax(Q Kᵀ / √d_k + M) V, with M 0 where a
query may attend a key and a very large negative number where it may not. Masks are kept as boolean "may attend"
relations, broadcastable to (batch, heads, query_length, key_length), and combined with logic — key padding ∧ causal
∧ same packed sequence ∧ … (``AttentionMask``) — and only a kernel turns them into the additive M (``mask_to_bias``:
``torch.finfo(dtype).min``, never a fixed constant or infinity, which overflow in half precision or give NaN).

This room builds, and checks nothing: a public forward validates its masks first (``checks.py``), then builds here,
once, the relation every layer's kernel reads (``AttentionMask``). It holds:

- the algebra: key padding, the decoder's causal mask ("subsequent positions", Vaswani et al. 2017 §3.1, §3.2.3),
  Transformer-XL's causal window (``same_length``, Dai et al. 2019), packed sequences from ``position_ids``
  (padding-free batches), and their conjunction (``may_attend``);
- the masks the families build from their checked inputs: an encoder's or a cross-attention's
  (``padding_or_relation``, ``key_padding_mask``), a decoder's masked self-attention (``decoder_self_attention_mask``)
  and Transformer-XL's over memory and segment (``memory_mask``);
- the cache layout: where this call's keys go in a transformers ``Cache`` (``DynamicCache`` grows, ``StaticCache``
  has fixed slots).

The kernels that read these relations, and turn them into the additive M, are in ``kernels.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import Cache

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
    ``torch.export`` the indices are kept as they are (all 0 restricts nothing), as in ``padding_or_none``.
    ``position_ids`` are shaped as ``checks.check_position_ids`` requires."""
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


@dataclass
class AttentionMask:
    """The "may attend" relation of one attention, built once per forward from its parts (``may_attend`` and the
    builders below) and read by every layer's kernel as it is (``kernels.attend``).

    ``relation``: bool, broadcastable to (batch, heads, query_length, key_length), True where a query may attend a key;
    None: every query may attend every key.
    ``only_causal``: the relation is "key ≤ query" alone, the new tokens the last keys: SDPA may run its own causal
    kernel instead of reading ``relation``.
    ``key_padding``: (batch, key_length) bool, the real keys the relation was built from (None: no padding), for what
    reads padding rather than attention (the RNN encoder's packed sequences).
    """

    relation: torch.Tensor | None = None
    only_causal: bool = False
    key_padding: torch.Tensor | None = None


def may_attend(
    query_length: int,
    key_length: int,
    device: torch.device,
    *,
    key_padding: torch.Tensor | None = None,
    causal: bool = False,
    query_positions: torch.Tensor | None = None,
    sequence_ids: torch.Tensor | None = None,
    relation: torch.Tensor | None = None,
) -> AttentionMask:
    """key padding ∧ causal ∧ same packed sequence ∧ a custom relation, from the parts that are given:

    ``key_padding``: (batch, key_length) bool, True for real tokens (None: no padding);
    ``causal``: query i may only attend keys ≤ i (aligned at the end when keys include a cache);
    ``query_positions``: (query_length,) the key slots of the queries when they are not the last ones — with
    transformers' ``StaticCache`` the keys are all ``max_cache_len`` slots, written or not (see ``cache_layout``);
    ``sequence_ids``: (batch, length) the packed sequence of each token (``packed_sequences``; no cache: the queries
    are the keys);
    ``relation``: a custom (batch or 1, 1, query_length, key_length) bool relation (``checks.check_relation_mask``).
    """
    causal_part = None
    if causal and (query_length > 1 or query_positions is not None):
        causal_part = causal_mask(query_length, key_length, device, query_positions)
    padding = padding_mask(key_padding) if key_padding is not None else None
    same_sequence = same_sequence_mask(sequence_ids) if sequence_ids is not None else None
    only_causal = causal and all(part is None for part in (key_padding, query_positions, sequence_ids, relation))
    combined = combine_masks(padding, causal_part, same_sequence, relation)
    return AttentionMask(relation=combined, only_causal=only_causal, key_padding=key_padding)


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


# --------------------------------------------------------------------------------------------------------------
# The masks the families build from their inputs
# --------------------------------------------------------------------------------------------------------------


def key_padding_mask(key_is_real: torch.Tensor | None) -> AttentionMask:
    """Every query may attend every real key: an encoder's self-attention, a cross-attention, the RNN's attention over
    the source. ``key_is_real``: (batch, key_length) bool as ``checks.check_attention_mask`` returns it."""
    key_is_real = padding_or_none(key_is_real)
    return AttentionMask(
        relation=padding_mask(key_is_real) if key_is_real is not None else None, key_padding=key_is_real
    )


def padding_or_relation(checked: torch.Tensor | None) -> AttentionMask:
    """An encoder's self-attention or a cross-attention relation from the mask as ``checks.check_padding_or_relation``
    returns it: (batch, key_length) key padding (``key_padding_mask``), or a 4-D relation, the whole relation as given
    (as transformers' models take a prepared 4-D mask)."""
    if checked is not None and checked.dim() == 4:
        return AttentionMask(relation=checked)
    return key_padding_mask(checked)


def decoder_self_attention_mask(
    checked: torch.Tensor | None,
    batch_size: int,
    key_length: int,
    cache_positions: torch.Tensor,
    static: bool,
    *,
    position_ids: torch.Tensor | None = None,
    cached: bool = True,
) -> AttentionMask:
    """A decoder's masked self-attention relation (``cache_layout`` gives ``key_length``, ``cache_positions``,
    ``static``; ``checked``: the mask as ``checks.check_decoder_mask`` returns it; ``position_ids``: as the user gave
    them; ``cached``: a cache is read or written):

    - a 4-D mask is the whole relation as given, causality included, as transformers' models take a prepared 4-D
      mask;
    - a (batch, key_length) mask over the key slots: key padding ∧ causal;
    - ``position_ids`` with no mask and no cache: causal ∧ same packed sequence (``packed_sequences``) — a
      padding-free batch, transformers' condition (``masking_utils``: position_ids given, no mask, no cache);
    - otherwise causal alone."""
    if checked is not None and checked.dim() == 4:
        return AttentionMask(relation=checked)
    query_length = cache_positions.shape[0]
    sequence_ids = None
    if checked is None and position_ids is not None and not cached:
        sequence_ids = packed_sequences(position_ids, batch_size, query_length)
    return may_attend(
        query_length,
        key_length,
        cache_positions.device,
        key_padding=padding_or_none(checked),
        causal=True,
        query_positions=cache_positions if static else None,
        sequence_ids=sequence_ids,
    )


def memory_mask(
    key_is_real: torch.Tensor | None, query_length: int, key_length: int, window: int | None, device: torch.device
) -> AttentionMask:
    """Transformer-XL's relation over memory and segment (Dai et al. 2019 §3.2): causal over the ``key_length`` keys
    (the memory, then the segment's ``query_length`` tokens), within the ``window`` most recent keys when given
    (``same_length``), and over the real keys. ``key_is_real``: as ``checks.check_mask_of_last_tokens`` returns it,
    the last columns the segment's; earlier keys it does not cover (the memory) count as real."""
    if key_is_real is not None:
        key_is_real = padding_or_none(key_is_real[:, -key_length:])
    if key_is_real is not None and key_is_real.shape[1] < key_length:
        memory = key_length - key_is_real.shape[1]
        key_is_real = torch.cat([key_is_real.new_ones(key_is_real.shape[0], memory), key_is_real], dim=1)
    window_part = causal_window_mask(query_length, key_length, window, device) if window is not None else None
    padding = padding_mask(key_is_real) if key_is_real is not None else None
    return AttentionMask(relation=combine_masks(causal_mask(query_length, key_length, device), window_part, padding))

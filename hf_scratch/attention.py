"""The attention core every family shares.

Scaled dot-product attention (Vaswani et al. 2017 §3.2.1, eq. 1):

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k + M) V

where M is 0 where a query may attend a key and a very large negative number where it may not. Masks are kept
as boolean "may attend" relations (True = may attend) and combined with logic — key padding ∧ causal ∧ same packed
sequence ∧ … — and only the eager kernel turns them into the additive M, with ``torch.finfo(dtype).min`` (never a
fixed constant or infinity, which overflow in half precision or give NaN). A query row that may attend nothing
returns zeros, never NaN. A custom 4-D mask, as transformers' models accept it, is such a relation given whole
(``check_relation_mask``). Families with their own score terms build on this core in their own files:
Transformer-XL's relative positions (``modeling_transfo_xl.attend_with_score_bias``), Longformer's banded windows
(``banded_attention.py``).

Kernels, chosen by ``config._attn_implementation``:
- ``"eager"``: the equation above written out, and the only one that can return the attention weights;
- ``"sdpa"``: ``torch.nn.functional.scaled_dot_product_attention`` with the same boolean mask;
- for the families whose attention is exactly this equation (BERT, GPT, the encoder-decoder: their models set
  transformers' ``_supports_attention_backend``), any kernel registered in transformers' ``AttentionInterface``
  that takes the additive mask M, 4-D — ``"flex_attention"`` (on CPU, under ``torch.compile``) or your own
  (``AttentionInterface.register("name", function)``); see ``registered_attention``;
- Longformer, whose attention is a band (``banded_attention``), also runs ``"flex_attention"``: torch's
  flex_attention with a block mask built from the window, the dilations and the global tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AttentionInterface

ATTENTION_IMPLEMENTATIONS = ("eager", "sdpa")
# torch's flex_attention as a kernel of the family's own score function (Longformer's band, ``banded_attention``):
# transformers refuses it, before our check runs, for every model that does not set ``_supports_flex_attn``.
FLEX_ATTENTION = "flex_attention"
# Registered kernels that expect their mask or cache in another form than the additive 4-D M (flash attention's
# 2-D padding mask and unpadded sequences, paged caches): not ours to feed.
OTHER_MASK_FORMATS = ("flash_attention", "paged|", "kernels-community/")


def registered_kernels() -> list[str]:
    """Kernels in transformers' ``AttentionInterface`` (built-in and user-registered) that take the 4-D mask."""
    return [
        name
        for name in AttentionInterface()
        if not name.startswith(OTHER_MASK_FORMATS) and name not in ATTENTION_IMPLEMENTATIONS
    ]


def check_attn_implementation(name: str | None, registry: bool = False) -> str:
    """Return a supported attention implementation name or raise a ValueError that lists the choices.
    ``registry``: the family also runs the kernels of transformers' ``AttentionInterface`` (``registered_kernels``).
    ``"flex_attention"`` passes: transformers has already refused it unless the model sets ``_supports_flex_attn``."""
    if name is None:
        return "sdpa"
    choices = ATTENTION_IMPLEMENTATIONS + (tuple(registered_kernels()) if registry else (FLEX_ATTENTION,))
    if name not in choices:
        raise ValueError(
            f"Unknown attention implementation {name!r}: this model supports {choices}. Pass attn_implementation="
            "'eager' or 'sdpa'"
            + (", or a kernel registered with transformers.AttentionInterface." if registry else ".")
        )
    return name


# --------------------------------------------------------------------------------------------------------------
# Input checks that read tensor values, and torch.compile / torch.export
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


def padding_or_none(key_is_real: torch.Tensor | None) -> torch.Tensor | None:
    """The key-padding part of a mask, or None when it restricts nothing.

    In eager mode an all-ones mask is dropped (one read of the mask), so that SDPA runs unmasked or with its own
    causal kernel. Under ``torch.compile`` / ``torch.export`` the mask is kept as it is: an all-ones mask gives the
    same result, while deciding would break the graph, sync the device, and recompile whenever a batch gains or loses
    padding."""
    if key_is_real is None or torch.compiler.is_compiling():
        return key_is_real
    return None if bool(key_is_real.all()) else key_is_real


# --------------------------------------------------------------------------------------------------------------
# Mask algebra: boolean "may attend" relations, broadcastable to (batch, heads, query_length, key_length)
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


def padding_mask(key_is_real: torch.Tensor) -> torch.Tensor:
    """(batch, key_length) bool → (batch, 1, 1, key_length): every query may attend the real keys."""
    return key_is_real[:, None, None, :]


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
# Kernels
# --------------------------------------------------------------------------------------------------------------


def softmax_dtype(dtype: torch.dtype) -> torch.dtype:
    """Half-precision scores are normalised in float32; float32/float64 stay as they are (a float64 finfo.min
    cast to float32 would become -inf and make fully masked rows NaN)."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def masked_softmax(scores: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
    """softmax over the last dimension of ``scores`` + M, M = 0 / ``finfo.min`` from the boolean "may attend" mask
    (broadcastable to ``scores``): exactly 0 where a key may not be attended, and an all-zero row (never NaN) where
    none may. The eager kernel uses it, and so do other score functions (the RNN baselines' additive and Luong
    scores)."""
    if allowed is None:
        return torch.softmax(scores, dim=-1, dtype=softmax_dtype(scores.dtype)).to(scores.dtype)
    weights = torch.softmax(scores + mask_to_bias(allowed, scores.dtype), dim=-1, dtype=softmax_dtype(scores.dtype)).to(
        scores.dtype
    )
    return weights.masked_fill(~allowed, 0.0)


def eager_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    allowed: torch.Tensor | None,
    dropout: float = 0.0,
    scale: float | None = None,
    score_bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q Kᵀ/√d + B + M) V, written out; returns (output, weights). Inputs are (batch, heads, length,
    head_dim); B is an optional extra score term (e.g. Transformer-XL's relative-position terms)."""
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = torch.matmul(query, key.transpose(-1, -2)) * scale
    if score_bias is not None:
        scores = scores + score_bias
    weights = masked_softmax(scores, allowed).to(query.dtype)
    weights_dropped = F.dropout(weights, p=dropout) if dropout > 0.0 else weights
    return torch.matmul(weights_dropped, value), weights


def sdpa_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    allowed: torch.Tensor | None,
    dropout: float = 0.0,
    scale: float | None = None,
    is_causal: bool = False,
) -> torch.Tensor:
    """The fused kernel; a fully masked row gives zeros (torch ≥ 2.5 kernels return 0 for such rows)."""
    return F.scaled_dot_product_attention(
        query, key, value, attn_mask=allowed, dropout_p=dropout, is_causal=is_causal, scale=scale
    )


def registered_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    allowed: torch.Tensor | None,
    implementation: str,
    dropout: float = 0.0,
    scale: float | None = None,
) -> torch.Tensor:
    """softmax(Q Kᵀ·scale + M) V by a kernel of transformers' ``AttentionInterface``, called the way transformers'
    models call it: ``kernel(module, query, key, value, attention_mask, dropout=, scaling=, is_causal=False)`` with
    (batch, heads, length, head_dim) inputs and M as an additive (batch, 1, query_length, key_length) mask (0 or
    ``finfo.min``; None when nothing is masked); it returns (batch, query_length, heads, head_dim). A row that may
    attend nothing is set to zeros, as with our kernels."""
    bias = None
    if allowed is not None:
        batch, query_length, key_length = query.shape[0], query.shape[-2], key.shape[-2]
        bias = mask_to_bias(allowed, query.dtype).expand(batch, 1, query_length, key_length)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    kernel = AttentionInterface()[implementation]
    output, _ = kernel(module, query, key, value, bias, dropout=dropout, scaling=scale, is_causal=False)
    output = output.transpose(1, 2)
    if allowed is not None:
        output = output.masked_fill(~allowed.any(dim=-1, keepdim=True), 0.0)
    return output


def attend(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: AttentionMask | None = None,
    *,
    implementation: str = "sdpa",
    dropout: float = 0.0,
    scale: float | None = None,
    output_attentions: bool = False,
    module: nn.Module | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Run attention with the chosen kernel; returns (output, weights or None).

    Asking for the weights always runs the eager kernel (SDPA cannot return them). Another ``implementation`` than
    "eager" / "sdpa" is a kernel of transformers' ``AttentionInterface``, called with ``module`` (the attention
    layer, as transformers passes it).
    """
    query_length, key_length = query.shape[-2], key.shape[-2]
    if not output_attentions and implementation not in ATTENTION_IMPLEMENTATIONS:
        allowed = mask.to_bool(query_length, key_length, query.device) if mask is not None else None
        output = registered_attention(module, query, key, value, allowed, implementation, dropout=dropout, scale=scale)
        return output, None
    if output_attentions or implementation == "eager":
        allowed = mask.to_bool(query_length, key_length, query.device) if mask is not None else None
        output, weights = eager_attention(query, key, value, allowed, dropout=dropout, scale=scale)
        return output, (weights if output_attentions else None)
    if mask is not None and mask.only_causal and query_length == key_length:
        # Pure causal self-attention: let the kernel use its own (faster) triangular mask.
        return sdpa_attention(query, key, value, None, dropout=dropout, scale=scale, is_causal=True), None
    allowed = mask.to_bool(query_length, key_length, query.device) if mask is not None else None
    return sdpa_attention(query, key, value, allowed, dropout=dropout, scale=scale), None


# --------------------------------------------------------------------------------------------------------------
# Caches: where the new tokens' keys go in a transformers Cache (DynamicCache grows, StaticCache has fixed slots)
# --------------------------------------------------------------------------------------------------------------


def cache_layout(past_key_values, query_length: int, device) -> tuple[int, torch.Tensor, bool]:
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


# --------------------------------------------------------------------------------------------------------------
# Multi-head attention (Vaswani et al. eq. 4-5): MultiHead(Q, K, V) = Concat(head_1 … head_h) Wᴼ
# --------------------------------------------------------------------------------------------------------------


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(batch, length, hidden) → (batch, heads, length, head_dim)."""
    batch, length, hidden = x.shape
    return x.view(batch, length, num_heads, hidden // num_heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(batch, heads, length, head_dim) → (batch, length, hidden)."""
    batch, heads, length, head_dim = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * head_dim)


def kernel_settings(module: nn.Module) -> dict:
    """What an attention layer passes its kernel on every call: ``implementation``, read from its config then (so
    that ``set_attn_implementation`` takes effect at once), and its attention ``dropout``, only while it trains."""
    return {"implementation": module.config._attn_implementation, "dropout": module.dropout if module.training else 0.0}


class MultiHeadAttention(nn.Module):
    """head_i = Attention(Q W_iQ, K W_iK, V W_iV); output = Concat(head_1 … head_h) Wᴼ.

    Self-attention projects Q, K and V with one fused matrix (``qkv_proj``, one GEMM instead of three); cross-attention
    (``is_cross_attention=True``) projects Q from the decoder and K, V from the encoder output (``kv_proj``).
    ``layer_idx`` locates this layer in a transformers ``Cache`` (``DynamicCache`` for decoders,
    ``EncoderDecoderCache`` for encoder-decoders, whose cross-attention part is computed once and reused).
    The kernel is read from ``config._attn_implementation`` at call time.
    """

    def __init__(
        self,
        config,
        hidden_size: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        is_cross_attention: bool = False,
        layer_idx: int | None = None,
    ):
        super().__init__()
        if hidden_size % num_heads != 0:
            raise ValueError(
                f"hidden size {hidden_size} is not divisible by the number of attention heads {num_heads}: "
                "choose a number of heads that divides the hidden size."
            )
        self.config = config
        self.num_heads = num_heads
        self.dropout = dropout
        self.is_cross_attention = is_cross_attention
        self.layer_idx = layer_idx
        if is_cross_attention:
            self.q_proj = nn.Linear(hidden_size, hidden_size, bias=bias)
            self.kv_proj = nn.Linear(hidden_size, 2 * hidden_size, bias=bias)
        else:
            self.qkv_proj = nn.Linear(hidden_size, 3 * hidden_size, bias=bias)
        self.out_proj = nn.Linear(hidden_size, hidden_size, bias=bias)

    def _project(self, hidden_states, key_value_states, past_key_values):
        """Q, K, V as (batch, heads, length, head_dim), reading and updating the cache."""
        cache = past_key_values
        if cache is not None and hasattr(cache, "self_attention_cache"):  # an EncoderDecoderCache
            cache = cache.cross_attention_cache if self.is_cross_attention else cache.self_attention_cache

        if not self.is_cross_attention:
            query, key, value = self.qkv_proj(hidden_states).chunk(3, dim=-1)
            query, key, value = (split_heads(t, self.num_heads) for t in (query, key, value))
            if cache is not None:
                key, value = cache.update(key, value, self.layer_idx)
            return query, key, value

        query = split_heads(self.q_proj(hidden_states), self.num_heads)
        reuse = cache is not None and past_key_values.is_updated.get(self.layer_idx, False)
        if reuse:  # the encoder output does not change while decoding: its K, V were cached at the first step
            layer = cache.layers[self.layer_idx]
            return query, layer.keys, layer.values
        key, value = self.kv_proj(key_value_states).chunk(2, dim=-1)
        key, value = split_heads(key, self.num_heads), split_heads(value, self.num_heads)
        if cache is not None:
            key, value = cache.update(key, value, self.layer_idx)
            past_key_values.is_updated[self.layer_idx] = True
        return query, key, value

    def forward(
        self,
        hidden_states: torch.Tensor,
        mask: AttentionMask | None = None,
        key_value_states: torch.Tensor | None = None,
        past_key_values=None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        query, key, value = self._project(hidden_states, key_value_states, past_key_values)
        output, weights = attend(
            query, key, value, mask, output_attentions=output_attentions, module=self, **kernel_settings(self)
        )
        return self.out_proj(merge_heads(output)), weights

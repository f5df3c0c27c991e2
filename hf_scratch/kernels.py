"""Attention kernels and the one dispatcher every family calls, ``attend``:

    Attention(Q, K, V) = softmax(Q Kᵀ·scale + B + M) V

— scaled dot-product attention (Vaswani et al. 2017 §3.2.1, eq. 1; scale = 1/√d_k) with an optional additive score
term B (``score_bias``: Transformer-XL's relative-position terms (b) + (d), Dai et al. 2019 §3.3) and M the additive
form of a boolean "may attend" relation (``masks.py``). A query row that may attend nothing returns zeros, never NaN,
with every kernel.

The kernels, chosen by ``config._attn_implementation``:

- ``"eager"``: the equation above written out, and the only one that can return the attention weights;
- ``"sdpa"``: ``torch.nn.functional.scaled_dot_product_attention`` with the same boolean mask, or, with a score term,
  the additive float mask B + M;
- for the families whose attention is exactly this equation without B (BERT, GPT, the encoder-decoder: their models
  set transformers' ``_supports_attention_backend``), any kernel registered in transformers' ``AttentionInterface``
  that takes the additive mask M, 4-D — ``"flex_attention"`` (on CPU, under ``torch.compile``) or your own
  (``AttentionInterface.register("name", function)``); see ``registered_attention``;
- for a relation too large to build whole, given by blocks (``BlockSparseMask``: Longformer's band, Beltagy et al.
  2020, in ``banded_attention.py``), ``"flex_attention"`` is torch's flex_attention over its ``BlockMask``
  (``block_sparse_flex``); the other kernels run its blocks, each a small dense problem.

``attend`` is the only place a kernel is chosen, by the first row that applies:

| the mask, what is asked         | implementation                     | kernel                                    |
|---------------------------------|------------------------------------|-------------------------------------------|
| ``BlockSparseMask``, no weights | ``"flex_attention"``               | ``block_sparse_flex``, its ``BlockMask``  |
| ``BlockSparseMask``             | any                                | its blocks, each by the rows below        |
| the weights asked for           | any                                | ``eager_attention`` (SDPA gives none)     |
| any                             | ``"eager"``                        | ``eager_attention``                       |
| queries counted from the data ² | any, under ``torch.compile``       | ``eager_attention``                       |
| no score term                   | registered, with ``registry``      | ``registered_attention``                  |
| a score term B                  | ``"sdpa"``                         | ``sdpa_with_score_bias``                  |
| causal only, keys = queries     | ``"sdpa"``                         | SDPA with its own causal mask             |
| any                             | ``"sdpa"``, ``"flex_attention"`` ¹ | ``sdpa_attention``                        |

¹ without ``registry`` (Longformer), ``"flex_attention"`` is torch's flex_attention over block-sparse relations;
a dense relation (Longformer's global rows, G × n: no tile to skip) runs SDPA.
² ``queries_from_data``: the caller counted its queries from the data (Longformer's G global tokens), so a compiled
graph cannot rule out 0 queries, on which SDPA's checks cannot be traced.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention.flex_attention import BlockMask, flex_attention
from transformers import AttentionInterface

from .masks import AttentionMask

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
# Relations given by blocks
# --------------------------------------------------------------------------------------------------------------


# A dense attention with the kernel settings of one ``attend`` call: (query, key, value, mask) → (output, weights)
DenseAttention = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, AttentionMask], tuple[torch.Tensor, torch.Tensor | None]
]


class BlockSparseMask:
    """A "may attend" relation that attention visits block by block and never builds whole (n × n): Longformer's
    sliding window with its global keys (``banded_attention.BandedMask``). ``attend`` runs it one of two ways: torch's
    flex_attention over its ``BlockMask`` (``flex_block_mask``), or its blocks of queries against their own keys as
    a batch of small dense problems, by the dense rows of ``attend`` (``attend_in_blocks``)."""

    def flex_block_mask(self) -> BlockMask:
        """The relation as flex_attention's tiles over (batch, heads, n, n), built without an n×n tensor."""
        raise NotImplementedError

    def attend_in_blocks(
        self,
        dense: DenseAttention,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        keep_only_kernel_outputs: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``dense`` on the blocks of ``query``, ``key``, ``value`` (batch, heads, n, head_dim); returns the output,
        (batch, heads, n, head_dim), and the weights in the relation's own layout or None.
        ``keep_only_kernel_outputs``: keep only the fused kernel's output for the backward pass, and build the
        blocks again there (they would be the largest tensors kept)."""
        raise NotImplementedError


# --------------------------------------------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------------------------------------------


def softmax_dtype(dtype: torch.dtype) -> torch.dtype:
    """Half-precision scores are normalised in float32; float32/float64 stay as they are (a float64 finfo.min
    cast to float32 would become -inf and make fully masked rows NaN)."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def mask_to_bias(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Turn a boolean "may attend" mask into the additive M of the attention equation (0 or finfo.min)."""
    bias = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    return bias.masked_fill(~allowed, torch.finfo(dtype).min)


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


def sdpa_with_score_bias(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    allowed: torch.Tensor | None,
    score_bias: torch.Tensor,
    dropout: float = 0.0,
    scale: float | None = None,
) -> torch.Tensor:
    """softmax(Q Kᵀ·scale + B + M) V by the fused kernel: B (broadcastable to (batch, heads, query_length,
    key_length)) masked with ``finfo.min`` where ``allowed`` is False is its additive float mask. With a float mask
    the kernel gives a row that may attend nothing uniform weights, so such rows are set to zeros, as with the
    other kernels."""
    bias = score_bias.to(query.dtype)
    if allowed is not None:
        bias = bias.masked_fill(~allowed, torch.finfo(query.dtype).min)
    output = sdpa_attention(query, key, value, bias, dropout=dropout, scale=scale)
    if allowed is not None:
        output = output.masked_fill(~allowed.any(dim=-1, keepdim=True), 0.0)
    return output


def registered_attention(
    module: nn.Module | None,
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


# torch's flex_attention as this package calls it: without return_lse / return_aux, it returns the output alone
FlexAttention = Callable[..., torch.Tensor]


@functools.cache
def compiled_flex_attention(device_type: str) -> FlexAttention:
    """flex_attention compiled once per device type. On the CPU for one shape at a time (``dynamic=False``: torch
    2.13's C++ template for flex_attention does not build with dynamic shapes, which torch.compile switches to when
    a second length arrives), elsewhere with torch.compile's defaults."""
    return torch.compile(flex_attention, dynamic=False if device_type == "cpu" else None)


def flex_kernel(device_type: str) -> FlexAttention:
    """flex_attention as it runs fused and block-sparse: compiled (as transformers' models do), or as it is inside a
    graph that torch.compile is tracing. Called uncompiled, torch runs a dense reference that materialises the n×n
    scores. On the CPU torch 2.13 runs it without gradients only."""
    if torch.compiler.is_compiling():
        return flex_attention
    return compiled_flex_attention(device_type)


def block_sparse_flex(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: BlockSparseMask,
    dropout: float,
    scale: float | None = None,
) -> torch.Tensor:
    """softmax(Q Kᵀ/√d + M) V by torch's flex_attention (``flex_kernel``) with M given by tiles, the ``BlockMask``
    of ``mask``: the fused kernel visits only the tiles the relation touches. flex_attention has no attention
    dropout."""
    if dropout > 0.0:
        raise ValueError(
            "flex_attention has no attention dropout: use the model in eval mode, set "
            "attention_probs_dropout_prob=0.0, or train with attn_implementation='sdpa'."
        )
    return flex_kernel(query.device.type)(query, key, value, block_mask=mask.flex_block_mask(), scale=scale)


# --------------------------------------------------------------------------------------------------------------
# The dispatcher
# --------------------------------------------------------------------------------------------------------------


def may_be_empty(queries_from_data: bool) -> bool:
    """Whether the query length may be 0 in a compiled graph: a count read from the data (``queries_from_data``:
    Longformer's number of global tokens G, a symbol the graph cannot bound below by 1). SDPA's checks cannot be
    traced on such a length; the eager kernel can."""
    return queries_from_data and torch.compiler.is_compiling()


def relation(mask: AttentionMask | None) -> torch.Tensor | None:
    """The boolean "may attend" relation of ``mask``, as the model built it; None when every key may be attended."""
    return None if mask is None else mask.relation


def attend_block_sparse(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: BlockSparseMask,
    score_bias: torch.Tensor | None,
    **settings: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``attend``'s rows for a ``BlockSparseMask``: torch's flex_attention over its ``BlockMask``, or its blocks by
    ``attend``'s dense rows with the same ``settings`` — keeping only SDPA's output for the backward pass."""
    if score_bias is not None:
        raise ValueError("A block-sparse mask takes no extra score term (score_bias).")
    implementation, output_attentions = settings["implementation"], settings["output_attentions"]
    if implementation == FLEX_ATTENTION and not output_attentions:
        return block_sparse_flex(query, key, value, mask, settings["dropout"], settings["scale"]), None
    fused = implementation == "sdpa" and not output_attentions and torch.is_grad_enabled()
    return mask.attend_in_blocks(functools.partial(attend, **settings), query, key, value, fused)


def attend(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: AttentionMask | BlockSparseMask | None = None,
    *,
    score_bias: torch.Tensor | None = None,
    implementation: str = "sdpa",
    registry: bool = True,
    dropout: float = 0.0,
    scale: float | None = None,
    output_attentions: bool = False,
    module: nn.Module | None = None,
    queries_from_data: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """softmax(Q Kᵀ·scale + B + M) V by the kernel the module's table chooses; returns (output, weights or None).
    Q, K, V: (batch, heads, length, head_dim); ``mask``: the "may attend" relation, dense (``AttentionMask``, as the
    model built it), by blocks (``BlockSparseMask``) or None (every key); B (``score_bias``): broadcastable to (batch,
    heads, query_length, key_length); ``implementation``: the config's ``_attn_implementation``; ``registry``: it may
    name a kernel of transformers' ``AttentionInterface`` (models with ``_supports_attention_backend``), called with
    ``module``, the attention layer, as transformers passes it; ``queries_from_data``: the number of queries was read
    from the data (footnote ² of the table)."""
    if isinstance(mask, BlockSparseMask):
        settings = dict(implementation=implementation, registry=registry, dropout=dropout, scale=scale, module=module)
        return attend_block_sparse(query, key, value, mask, score_bias, output_attentions=output_attentions, **settings)
    if output_attentions or implementation == "eager" or may_be_empty(queries_from_data):
        output, weights = eager_attention(query, key, value, relation(mask), dropout, scale, score_bias)
        return output, (weights if output_attentions else None)
    if registry and implementation not in ATTENTION_IMPLEMENTATIONS:
        if score_bias is not None:
            raise ValueError(
                f"attn_implementation={implementation!r} takes no extra score term (score_bias): use 'eager' or 'sdpa'."
            )
        allowed = relation(mask)
        return registered_attention(module, query, key, value, allowed, implementation, dropout, scale), None
    if score_bias is not None:
        return sdpa_with_score_bias(query, key, value, relation(mask), score_bias, dropout, scale), None
    if mask is not None and mask.only_causal and query.shape[-2] == key.shape[-2]:
        # Pure causal self-attention: let the kernel use its own (faster) triangular mask.
        return sdpa_attention(query, key, value, None, dropout=dropout, scale=scale, is_causal=True), None
    return sdpa_attention(query, key, value, relation(mask), dropout=dropout, scale=scale), None

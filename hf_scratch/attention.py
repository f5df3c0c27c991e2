"""Multi-head attention (Vaswani et al. 2017 §3.2.2, eq. 4-5), the layer BERT, GPT and the encoder-decoder share:

    MultiHead(Q, K, V) = Concat(head_1 … head_h) Wᴼ,   head_i = Attention(Q W_iQ, K W_iK, V W_iV)

with Attention the scaled dot-product attention that ``kernels.attend`` runs by the configured kernel, over the
"may attend" relation from ``masks.py``. The families with their own score terms keep their attention layers in
their own files (Transformer-XL's relative positions) or in their kernel's module (Longformer's band,
``banded_attention.py``), and call the same dispatcher.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
from torch import nn
from transformers import Cache, EncoderDecoderCache, PreTrainedConfig

from .kernels import attend
from .masks import AttentionMask


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(batch, length, hidden) → (batch, heads, length, head_dim)."""
    batch, length, hidden = x.shape
    return x.view(batch, length, num_heads, hidden // num_heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(batch, heads, length, head_dim) → (batch, length, hidden)."""
    batch, heads, length, head_dim = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * head_dim)


class AttentionLayer(Protocol):
    """What ``kernel_settings`` reads from an attention layer (``MultiHeadAttention``, Transformer-XL's)."""

    @property
    def config(self) -> PreTrainedConfig: ...

    @property
    def dropout(self) -> float: ...

    @property
    def training(self) -> bool: ...


def kernel_settings(module: AttentionLayer) -> dict[str, Any]:
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
        config: PreTrainedConfig,
        hidden_size: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        is_cross_attention: bool = False,
        layer_idx: int | None = None,
    ) -> None:
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

    def _cache_index(self) -> int:
        """This layer's index in a transformers ``Cache``; a layer built without ``layer_idx`` cannot use one."""
        if self.layer_idx is None:
            raise ValueError("This attention layer was built without layer_idx: give it one to use a cache.")
        return self.layer_idx

    def _project(
        self, hidden_states: torch.Tensor, key_value_states: torch.Tensor | None, past_key_values: Cache | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Q, K, V as (batch, heads, length, head_dim), reading and updating the cache."""
        if self.is_cross_attention:
            return self._project_cross(hidden_states, key_value_states, past_key_values)
        cache = past_key_values
        if isinstance(cache, EncoderDecoderCache):
            cache = cache.self_attention_cache
        query, key, value = self.qkv_proj(hidden_states).chunk(3, dim=-1)
        query, key, value = (split_heads(t, self.num_heads) for t in (query, key, value))
        if cache is not None:
            key, value = cache.update(key, value, self._cache_index())
        return query, key, value

    def _project_cross(
        self, hidden_states: torch.Tensor, key_value_states: torch.Tensor | None, past_key_values: Cache | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Q from the decoder, K and V from the encoder output; with a cache (an ``EncoderDecoderCache``), K and V
        are computed at the first decoding step and read from the cache afterwards."""
        query = split_heads(self.q_proj(hidden_states), self.num_heads)
        if past_key_values is not None and not isinstance(past_key_values, EncoderDecoderCache):
            raise ValueError(
                f"Cross-attention caches its keys in an EncoderDecoderCache, got {type(past_key_values).__name__}."
            )
        if past_key_values is not None and past_key_values.is_updated.get(self._cache_index(), False):
            # the encoder output does not change while decoding: its K, V were cached at the first step
            layer = past_key_values.cross_attention_cache.layers[self._cache_index()]
            return query, layer.keys, layer.values  # type: ignore[union-attr,return-value]  # a written layer holds tensors
        key, value = self.kv_proj(key_value_states).chunk(2, dim=-1)
        key, value = split_heads(key, self.num_heads), split_heads(value, self.num_heads)
        if past_key_values is not None:
            key, value = past_key_values.cross_attention_cache.update(key, value, self._cache_index())
            past_key_values.is_updated[self._cache_index()] = True
        return query, key, value

    def forward(
        self,
        hidden_states: torch.Tensor,
        mask: AttentionMask | None = None,
        key_value_states: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        query, key, value = self._project(hidden_states, key_value_states, past_key_values)
        output, weights = attend(
            query, key, value, mask, output_attentions=output_attentions, module=self, **kernel_settings(self)
        )
        return self.out_proj(merge_heads(output)), weights

"""Reference computations the tests compare the package with: the same result computed the slow, obvious way.

- ``dense_longformer_attention``: a Longformer attention layer computed with full n × n attention under the dense
  relation (``longformer_mask``, which the pictures in ``hf_scratch.tools.viz`` draw), the oracle of the banded kernel
  (quadratic time and memory: no model uses it). ``benchmarks/longformer_gpu_check.py`` runs it on a GPU.
"""

from __future__ import annotations

import torch

from hf_scratch.kernels import eager_attention
from hf_scratch.layers import merge_heads, split_heads
from hf_scratch.modeling_longformer import ScratchLongformerSelfAttention
from hf_scratch.tools.viz import longformer_mask, sliding_window_mask

__all__ = ["dense_longformer_attention", "longformer_mask", "sliding_window_mask"]


def dense_longformer_attention(attention: ScratchLongformerSelfAttention, hidden_states, key_is_real, is_global):
    """What ``attention`` (one layer's Longformer attention) computes, densely: full n × n attention under
    ``longformer_mask`` for the local rows, the global projections over every real key for the global rows (padded
    global tokens are not global), then the output projection."""
    heads = attention.num_heads
    query, key, value = (split_heads(x, heads) for x in attention.qkv_proj(hidden_states).chunk(3, dim=-1))
    allowed = longformer_mask(key_is_real, is_global, attention.pattern.one_sided_window, attention.pattern.dilations)
    local, _ = eager_attention(query, key, value, allowed)
    is_global = is_global & key_is_real
    global_allowed = key_is_real[:, None, None, :] & is_global[:, None, :, None]
    global_query, global_key, global_value = (
        split_heads(projection(hidden_states), heads)
        for projection in (attention.query_global, attention.key_global, attention.value_global)
    )
    global_rows, _ = eager_attention(global_query, global_key, global_value, global_allowed)
    output = torch.where(is_global[:, None, :, None], global_rows, local)
    return attention.out_proj(merge_heads(output))

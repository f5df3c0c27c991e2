"""The layers the families share, in the order of Vaswani et al. 2017 §3: multi-head attention (§3.2.2, eq. 4-5),
the layer BERT, GPT and the encoder-decoder share,

    MultiHead(Q, K, V) = Concat(head_1 … head_h) Wᴼ,   head_i = Attention(Q W_iQ, K W_iK, V W_iV)

with Attention the scaled dot-product attention that ``kernels.attend`` runs by the configured kernel, over the
"may attend" relation from ``masks.py``; the position-wise feed-forward network (§3.3); the residual + LayerNorm
wrapper (post-LN and pre-LN); the Transformer block that BERT, GPT and the Transformer's encoder share; the stack of N
layers; the MLM head, and the input representation and pooler of the BERT-style encoders.

The families with their own score terms keep their attention layers in their own files (Transformer-XL's relative
positions) or in their kernel's module (Longformer's band, ``banded_attention.py``), and call the same dispatcher.
Input checks are in ``checks.py``, the training objectives in ``heads.py``, the encoders' task heads in
``encoder_heads.py``."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import torch
from torch import nn
from torch.utils.checkpoint import (
    CheckpointPolicy,
    SelectiveCheckpointContext,
    checkpoint,
    create_selective_checkpoint_contexts,
)
from transformers import Cache, EncoderDecoderCache, PreTrainedConfig
from transformers.activations import ACT2FN
from transformers.modeling_layers import GradientCheckpointingLayer

from .checks import check_input_ids, check_positions, embedding_rows
from .kernels import attend
from .masks import AttentionMask

# The tanh approximation of GELU, 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) — GPT-2's "gelu_new" — is written in
# transformers as six elementwise operations; torch's fused kernel computes the same formula (|Δ| ≈ 2e-7) in about
# half the time, forward + backward. transformers itself names it as the equivalent ("gelu_pytorch_tanh").
SAME_FUNCTION_FUSED = {"gelu_new": "gelu_pytorch_tanh", "gelu_fast": "gelu_pytorch_tanh"}


def get_activation(name: str) -> nn.Module:
    """The activation called ``name`` in transformers (``"gelu"``, ``"gelu_new"``, ``"relu"``, ``"swish"``…), as
    its fused kernel where torch has one (``SAME_FUNCTION_FUSED``)."""
    if name not in ACT2FN:
        raise ValueError(f"Unknown activation {name!r} (hidden_act): choose one of {sorted(ACT2FN.keys())}.")
    return ACT2FN[SAME_FUNCTION_FUSED.get(name, name)]


# --------------------------------------------------------------------------------------------------------------
# Multi-head attention
# --------------------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------------------
# Blocks
# --------------------------------------------------------------------------------------------------------------


class FeedForward(nn.Module):
    """Position-wise feed-forward network (Vaswani et al. 2017 §3.3, eq. 2): FFN(x) = act(x W₁ + b₁) W₂ + b₂."""

    def __init__(self, hidden_size: int, intermediate_size: int, activation: str, activation_dropout: float = 0.0):
        super().__init__()
        self.fc_in = nn.Linear(hidden_size, intermediate_size)
        self.activation = get_activation(activation)
        self.activation_dropout = nn.Dropout(activation_dropout)
        self.fc_out = nn.Linear(intermediate_size, hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.output(self.fc_in(hidden_states))

    def output(self, inner: torch.Tensor) -> torch.Tensor:
        """The second half, from ``inner`` = x W₁ + b₁: act(inner) W₂ + b₂."""
        return self.fc_out(self.activation_dropout(self.activation(inner)))


MATMULS = frozenset(getattr(torch.ops.aten, name).default for name in ("mm", "addmm", "bmm"))


def keep_matmuls(ctx: SelectiveCheckpointContext, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
    """Selective-checkpoint policy: save the matrix products' outputs, recompute the elementwise ops."""
    return CheckpointPolicy.MUST_SAVE if op in MATMULS else CheckpointPolicy.PREFER_RECOMPUTE


# torch 2.14 asks whether the tensors a selective checkpoint keeps (the products above) go through the
# ``saved_tensors_hooks`` around it, e.g. ``save_on_cpu`` or a hook that counts the bytes saved for backward: it warns
# (FutureWarning) until ``checkpoint(respect_saved_tensors_hooks=...)`` chooses. We choose True, torch's announced
# future default: the hooks then see every tensor held until the backward pass, whether autograd or the checkpoint
# holds it (save_on_cpu offloads all of them). Before 2.14 torch has no such argument and the kept tensors bypass
# the hooks; the signature is read once, here.
SAC_OPTIONS: dict[str, Any] = (
    {"respect_saved_tensors_hooks": True}
    if "respect_saved_tensors_hooks" in inspect.signature(checkpoint).parameters
    else {}
)


def selective_checkpoint(function: Callable[..., Any], *args: Any, policy: Callable[..., CheckpointPolicy]) -> Any:
    """``function(*args)`` under a non-reentrant selective activation checkpoint: ``policy`` (``keep_matmuls``,
    ``banded_attention.keep_attention_kernels``) says which ops' outputs are kept, the others are recomputed in the
    backward pass; the surrounding ``saved_tensors_hooks`` see the kept ones (``SAC_OPTIONS``)."""
    return checkpoint(
        function,
        *args,
        use_reentrant=False,
        context_fn=functools.partial(create_selective_checkpoint_contexts, policy),
        **SAC_OPTIONS,
    )


def feed_forward_recomputing_activation(feed_forward: FeedForward, hidden_states: torch.Tensor) -> torch.Tensor:
    """``feed_forward(hidden_states)`` (Vaswani et al. 2017 eq. 2: act(x W₁ + b₁) W₂ + b₂) with act(x) recomputed
    in the backward pass instead of kept (Longformer's layers use it): ``fc_out`` runs as a module under a selective
    checkpoint that keeps the products, so only the elementwise activation runs twice."""
    inner = feed_forward.fc_in(hidden_states)
    if not (torch.is_grad_enabled() and inner.requires_grad) or torch.is_autocast_enabled(inner.device.type):
        return feed_forward.output(inner)
    if torch.compiler.is_compiling():  # the compiler's partitioner chooses what to keep (Inductor recomputes act(x))
        return feed_forward.output(inner)
    return selective_checkpoint(feed_forward.output, inner, policy=keep_matmuls)


class ResidualNorm(nn.Module):
    """The residual connection around a sub-layer, with its LayerNorm placed after or before (Vaswani et al. 2017
    §3.1, with the residual dropout of §5.4).

    post-LN (the paper, BERT, GPT-1):  y = LayerNorm(x + Dropout(Sublayer(x)))
    pre-LN  (GPT-2, many later models): y = x + Dropout(Sublayer(LayerNorm(x)))

    Use as ``out = res.after(x, sublayer(res.before(x)))``.
    """

    def __init__(self, hidden_size: int, eps: float, dropout: float, pre_norm: bool = False):
        super().__init__()
        self.pre_norm = pre_norm
        self.norm = nn.LayerNorm(hidden_size, eps=eps)
        self.dropout = nn.Dropout(dropout)

    def before(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x) if self.pre_norm else x

    def after(self, residual: torch.Tensor, sublayer_output: torch.Tensor) -> torch.Tensor:
        out = residual + self.dropout(sublayer_output)
        return out if self.pre_norm else self.norm(out)


class TransformerBlock(GradientCheckpointingLayer):
    """The Transformer block (Vaswani et al. 2017 §3.1): multi-head self-attention (§3.2.2), then the position-wise
    feed-forward network (§3.3), each a residual sub-layer with its LayerNorm (``ResidualNorm``), post-LN or pre-LN:

    post-LN, LayerNorm(x + Sublayer(x)) — the paper, GPT-1 (Radford et al. 2018 §3.1), BERT (Devlin et al. 2019 §3):
        h = LN(x + Dropout(MultiHead(x, x, x))),   out = LN(h + Dropout(FFN(h)))
    pre-LN (``pre_norm``: GPT-2, Radford et al. 2019 §2.3; the Transformer as an option):
        h = x + Dropout(MultiHead(LN(x))),         out = h + Dropout(FFN(LN(h)))

    The mask says what each position attends, and so what the block is: an encoder layer under a padding mask (BERT,
    the Transformer's encoder, §3.1 "Encoder"), a decoder block without cross-attention under causal ∧ padding (GPT),
    whose cache ``past_key_values`` the attention reads and extends. The families subclass it under their own
    names."""

    def __init__(
        self,
        config: PreTrainedConfig,
        layer_idx: int,
        num_heads: int,
        intermediate_size: int,
        pre_norm: bool = False,
        activation_dropout: float = 0.0,
    ) -> None:
        super().__init__()
        hidden, eps, dropout = config.hidden_size, config.layer_norm_eps, config.hidden_dropout_prob
        self.attention = MultiHeadAttention(
            config, hidden, num_heads, config.attention_probs_dropout_prob, layer_idx=layer_idx
        )
        self.attention_residual = ResidualNorm(hidden, eps, dropout, pre_norm=pre_norm)
        self.feed_forward = FeedForward(hidden, intermediate_size, config.hidden_act, activation_dropout)
        self.feed_forward_residual = ResidualNorm(hidden, eps, dropout, pre_norm=pre_norm)

    def forward(
        self,
        hidden_states: torch.Tensor,
        mask: AttentionMask | None = None,
        output_attentions: bool = False,
        past_key_values: Cache | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        residual = self.attention_residual
        attended, weights = self.attention(
            residual.before(hidden_states), mask, past_key_values=past_key_values, output_attentions=output_attentions
        )
        hidden_states = residual.after(hidden_states, attended)
        transformed = self.feed_forward(self.feed_forward_residual.before(hidden_states))
        return self.feed_forward_residual.after(hidden_states, transformed), weights


def run_layers(
    layers: Iterable[Any],
    hidden_states: torch.Tensor,
    call: Callable[[Any, torch.Tensor], tuple[Any, ...]],
    output_hidden_states: bool | None,
    output_attentions: bool | None,
    final_norm: Callable[[torch.Tensor], torch.Tensor] | None = None,
    kinds: int = 1,
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...] | None, tuple[tuple[torch.Tensor, ...] | None, ...]]:
    """The stack of N identical layers (Vaswani et al. 2017 §3.1): ``hidden_states`` through each layer in turn —
    ``call(layer, hidden_states)`` returns the layer's output and its attention weights, one tensor per kind (self,
    cross, global…: ``kinds``) — then through ``final_norm`` (pre-LN stacks). Returns (hidden_states,
    all_hidden_states, attentions): what transformers' ``output_hidden_states`` asks for — each layer's input, then
    the stack's output — and, for ``output_attentions``, per kind a tuple with one tensor per layer; None for what is
    not asked."""
    all_hidden_states: tuple[torch.Tensor, ...] = ()
    attentions: tuple[tuple[torch.Tensor, ...], ...] = tuple(() for _ in range(kinds))
    for layer in layers:
        if output_hidden_states:
            all_hidden_states += (hidden_states,)
        hidden_states, *weights = call(layer, hidden_states)
        if output_attentions:
            attentions = tuple(kind + (w,) for kind, w in zip(attentions, weights))
    if final_norm is not None:
        hidden_states = final_norm(hidden_states)
    if output_hidden_states:
        all_hidden_states += (hidden_states,)
    asked = tuple(kind if output_attentions else None for kind in attentions)
    return hidden_states, (all_hidden_states if output_hidden_states else None), asked


class MaskedLMHead(nn.Module):
    """BERT's (and RoBERTa/Longformer's) MLM head: vocab logits = W_e · LayerNorm(act(W h + b)) + b_vocab.

    ``decoder.weight`` is tied to the word embeddings by the model's ``_tied_weights_keys``.
    """

    def __init__(self, hidden_size: int, vocab_size: int, activation: str, eps: float):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.activation = get_activation(activation)
        self.norm = nn.LayerNorm(hidden_size, eps=eps)
        self.decoder = nn.Linear(hidden_size, vocab_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.norm(self.activation(self.dense(hidden_states))))


class MaskedLMOutputEmbeddings:
    """``get/set_output_embeddings`` for the heads whose output projection is ``mlm_head.decoder`` (transformers'
    own look for ``lm_head``): what ``resize_token_embeddings`` and weight tying use."""

    mlm_head: MaskedLMHead  # the head's

    def get_output_embeddings(self) -> nn.Linear:
        return self.mlm_head.decoder

    def set_output_embeddings(self, value: nn.Linear) -> None:
        self.mlm_head.decoder = value


# --------------------------------------------------------------------------------------------------------------
# The BERT-style encoders' input representation and pooler (BERT; RoBERTa's, in Longformer)
# --------------------------------------------------------------------------------------------------------------


class EncoderEmbeddings(nn.Module):
    """E = LayerNorm(E_token + E_segment + E_position), then dropout: BERT's input representation (Devlin et al.
    2019 §3, Figure 2), kept by RoBERTa and Longformer; E_position a learned vector per position (checked to be in the
    table). Positions count 0, 1, 2, … unless the family overrides
    ``default_position_ids`` (Longformer counts RoBERTa's way); ``position_padding_idx`` is the position row that
    padding keeps (RoBERTa's pad_token_id), None for BERT."""

    def __init__(self, config: PreTrainedConfig, position_padding_idx: int | None = None) -> None:
        super().__init__()
        self.word = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position = nn.Embedding(
            config.max_position_embeddings, config.hidden_size, padding_idx=position_padding_idx
        )
        self.token_type = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def default_position_ids(self, input_ids: torch.Tensor | None, given: torch.Tensor) -> torch.Tensor:
        """(1, length): 0, 1, 2, … — the positions when the caller passes none (``given``: the ids or the
        embeddings, whichever the caller passed)."""
        return torch.arange(given.shape[1], device=given.device)[None, :]

    def forward(
        self,
        input_ids: torch.Tensor | None,
        token_type_ids: torch.Tensor | None,
        position_ids: torch.Tensor | None,
        inputs_embeds: torch.Tensor | None,
    ) -> torch.Tensor:
        given = input_ids if inputs_embeds is None else inputs_embeds
        assert given is not None  # the model has checked that exactly one is given
        if inputs_embeds is None:
            check_input_ids(given, embedding_rows(self.word))
        if position_ids is None:
            position_ids = self.default_position_ids(input_ids, given)
        check_positions(position_ids, embedding_rows(self.position))
        if token_type_ids is not None:
            check_input_ids(token_type_ids, embedding_rows(self.token_type), name="token_type_ids")
        # every id checked: the lookups
        if inputs_embeds is None:
            inputs_embeds = self.word(input_ids)
        if token_type_ids is None:
            token_type_ids = torch.zeros(given.shape[:2], dtype=torch.long, device=inputs_embeds.device)
        # (.to: with device_map="auto" over several devices the three tables may sit on different ones)
        device = inputs_embeds.device
        embeddings = inputs_embeds + self.token_type(token_type_ids).to(device) + self.position(position_ids).to(device)
        return self.dropout(self.norm(embeddings))


class Pooler(nn.Module):
    """pooled = tanh(W h_0 + b): the first token's (``[CLS]``, ``<s>``) final state C (Devlin et al. 2019 §3) through a
    dense layer and tanh — the dense + tanh layer is the reference implementation's addition, which the BERT
    checkpoints carry. The sequence summary that next-sentence prediction, classification and multiple choice read."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(hidden_states[:, 0]))


def classifier_dropout(config: PreTrainedConfig) -> float:
    """The dropout before a classification layer: ``config.classifier_dropout`` when set, else
    ``hidden_dropout_prob`` (transformers' convention)."""
    dropout = getattr(config, "classifier_dropout", None)
    return config.hidden_dropout_prob if dropout is None else dropout

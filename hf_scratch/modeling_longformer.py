"""Longformer (Beltagy et al. 2020), from scratch, read top-down in the order of the paper (§3, "Longformer"):

1. input representation: RoBERTa's embeddings — token + learned position (ids start at pad_token_id + 1, padding
   keeps pad_token_id) + segment, LayerNorm, dropout;
2. the attention pattern (§3.1), computed banded in time and memory linear in the length — never an n×n matrix:
   - sliding window: token i attends the w/2 tokens on each side (w = ``attention_window`` of the layer);
   - dilated sliding window: head h attends i + k·d_h for |k| ≤ w/2 (``attention_dilation``, per layer and head);
   - global attention on the tokens of ``global_attention_mask``: they attend every token and every token attends
     them, through their own projections ``query_global`` / ``key_global`` / ``value_global`` (§3.1 "Linear
     Projections for Global Attention"); padding wins over global;
3. a stack of post-LN encoder layers (attention, then the position-wise feed-forward network);
4. heads: masked LM (RoBERTa's head, tied to the word embeddings), sequence classification (global attention on
   the first token by default), token classification, extractive QA (global attention on the question by default),
   multiple choice.

The kernel, for one head group of dilation d: the sequence is split into its d residue classes (i mod d), each a
plain sliding-window problem of length n/d; that is cut into blocks of w/2 queries, each attending the 3·w/2 keys
of its own and the two neighbouring blocks (a fixed band mask keeps |i - j| ≤ w/2) plus the global keys. Dilation
thus costs what no dilation costs. Both kernels — ``"eager"`` (softmax written out; returns the weights) and
``"sdpa"`` (``scaled_dot_product_attention`` on the blocks) — go through ``hf_scratch.attention``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutputWithPooling,
    MaskedLMOutput,
    MultipleChoiceModelOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.utils import can_return_tuple

from .attention import (
    check_attention_mask,
    eager_attention,
    longformer_mask,
    masked_softmax,
    merge_heads,
    sdpa_attention,
    split_heads,
    values_pass,
)
from .configuration_longformer import ScratchLongformerConfig
from .layers import (
    EncoderEmbeddings,
    FeedForward,
    MaskedLMHead,
    Pooler,
    ResidualNorm,
    ScratchPreTrainedModel,
    check_one_input,
    choice_dimensions,
    flatten_choices,
    sequence_classification_loss,
    span_loss,
    token_cross_entropy,
)

# ---- 1. input representation ---------------------------------------------------------------------------------


class ScratchLongformerEmbeddings(EncoderEmbeddings):
    """BERT's E = LayerNorm(E_token + E_segment + E_position), then dropout, with RoBERTa's positions: real tokens
    count from pad_token_id + 1, padding tokens keep position pad_token_id."""

    def __init__(self, config: ScratchLongformerConfig):
        super().__init__(config, position_padding_idx=config.pad_token_id)
        self.padding_idx = config.pad_token_id

    def default_position_ids(self, input_ids: Optional[torch.Tensor], inputs_embeds: torch.Tensor) -> torch.Tensor:
        if input_ids is not None:
            is_token = input_ids.ne(self.padding_idx).long()
            return torch.cumsum(is_token, dim=1) * is_token + self.padding_idx
        length = inputs_embeds.shape[1]  # no ids: padding cannot be told apart, count every position
        return torch.arange(self.padding_idx + 1, self.padding_idx + 1 + length, device=inputs_embeds.device)[None, :]


# ---- 2. the attention pattern, banded ------------------------------------------------------------------------


def pad_length(x: torch.Tensor, multiple: int, value=0) -> torch.Tensor:
    """Pad dim 1 of ``x`` (batch, length, …) at the end up to a multiple of ``multiple``."""
    missing = -x.shape[1] % multiple
    if missing == 0:
        return x
    return F.pad(x, (0, 0) * (x.dim() - 2) + (0, missing), value=value)


def split_residues(x: torch.Tensor, dilation: int) -> torch.Tensor:
    """(batch, n, …) → (batch·d, n/d, …): row b·d + r holds positions r, r + d, r + 2d, … — the tokens a dilated
    window of dilation d links, now adjacent. ``n`` must be a multiple of d."""
    if dilation == 1:
        return x
    batch, length = x.shape[:2]
    rest = x.shape[2:]
    return x.reshape(batch, length // dilation, dilation, *rest).transpose(1, 2).reshape(batch * dilation, length // dilation, *rest)


def merge_residues(x: torch.Tensor, dilation: int) -> torch.Tensor:
    """Inverse of ``split_residues``."""
    if dilation == 1:
        return x
    batch, length = x.shape[0] // dilation, x.shape[1] * dilation
    rest = x.shape[2:]
    return x.reshape(batch, dilation, length // dilation, *rest).transpose(1, 2).reshape(batch, length, *rest)


def key_windows(x: torch.Tensor, block: int, prefix: Optional[torch.Tensor] = None) -> torch.Tensor:
    """(batch, n, heads, d) → (batch·n/block, heads, [G +] 3·block, d): for every query block, the keys of the
    previous, the same and the next block (zeros beyond the ends), after the G ``prefix`` keys (batch, G, heads, d)
    shared by all blocks. One copy: the windows are a strided view until then."""
    batch, length, heads, dim = x.shape
    blocks = length // block
    edge = x.new_zeros(batch, block, heads, dim)
    padded = torch.cat([edge, x, edge], dim=1)  # (F.pad would first fill all of it with zeros)
    windows = padded.unfold(1, 3 * block, block).transpose(3, 4)  # (batch, blocks, heads, 3·block, d), a view
    if prefix is not None:
        shared = prefix.transpose(1, 2)[:, None].expand(batch, blocks, heads, prefix.shape[1], dim)
        windows = torch.cat([shared, windows], dim=3)
    return windows.reshape(batch * blocks, heads, windows.shape[3], dim)


def block_mask(
    key_is_local: torch.Tensor, query_is_real: torch.Tensor, block: int, global_slot_is_real: Optional[torch.Tensor]
) -> torch.Tensor:
    """The "may attend" relation of ``block_attention``, block by block: (batch·n/block, 1, block,
    [G +] 3·block) bool — the G global slots that exist, then |i - j| ≤ w among local keys; padded queries none."""
    batch, length = key_is_local.shape
    blocks = length // block
    query_ok = query_is_real.reshape(batch, blocks, block, 1)
    key_ok = F.pad(key_is_local, (block, block)).unfold(1, 3 * block, block)  # (batch, blocks, 3·block)
    allowed = band_mask(block, key_is_local.device) & key_ok[:, :, None, :]
    if global_slot_is_real is not None:
        allowed = torch.cat([global_slot_is_real[:, None, None, :].expand(-1, blocks, block, -1), allowed], dim=-1)
    return (allowed & query_ok).reshape(batch * blocks, 1, block, allowed.shape[-1])


def band_mask(block: int, device) -> torch.Tensor:
    """(block, 3·block) bool: query r of a block may attend column s of its key window iff |s - block - r| ≤ block."""
    rows = torch.arange(block, device=device)[:, None]
    columns = torch.arange(3 * block, device=device)[None, :]
    return (columns - block - rows).abs() <= block


def band_to_diagonals(weights: torch.Tensor, block: int) -> torch.Tensor:
    """Block weights (…, block, 3·block) → (…, block, 2·block + 1), column t = key offset t - block (the layout
    transformers returns for Longformer attentions)."""
    index = torch.arange(block, device=weights.device)[:, None] + torch.arange(2 * block + 1, device=weights.device)[None, :]
    return weights.gather(-1, index.expand(*weights.shape[:-2], block, 2 * block + 1))


def query_blocks(x: torch.Tensor, block: int) -> torch.Tensor:
    """(batch, n, heads, d) → (batch·n/block, heads, block, d): the queries, block by block."""
    batch, length, heads, dim = x.shape
    return x.reshape(batch, length // block, block, heads, dim).transpose(2, 3).reshape(-1, heads, block, dim)


def from_blocks(x: torch.Tensor, batch: int) -> torch.Tensor:
    """Inverse of ``query_blocks`` for any last dimension: (batch·blocks, heads, block, C) → (batch, n, heads, C)."""
    blocks_total, heads, block, channels = x.shape
    blocks = blocks_total // batch
    return x.reshape(batch, blocks, heads, block, channels).transpose(2, 3).reshape(batch, blocks * block, heads, channels)


def block_attention(queries, keys, values, allowed, implementation: str, dropout: float, output_attentions: bool):
    """softmax(Q Kᵀ/√d + M) V in every block at once: ``queries`` (blocks, heads, w, d) against ``keys`` /
    ``values`` (blocks, heads, G + 3w, d) from ``key_windows``, M from ``block_mask``. Returns (output, weights or
    None); the eager kernel is the one that can return the weights."""
    if output_attentions or implementation == "eager":
        output, weights = eager_attention(queries, keys, values, allowed, dropout=dropout)
        return output, (weights if output_attentions else None)
    return sdpa_attention(queries, keys, values, allowed, dropout=dropout), None


# The fused attention kernels SDPA dispatches to (those this torch build has). Their outputs are kept when the
# local attention is checkpointed, so that the backward pass rebuilds the key windows but not the attention.
ATTENTION_KERNELS = frozenset(
    getattr(torch.ops.aten, name).default
    for name in (
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
    )
    if hasattr(torch.ops.aten, name)
)


def keep_attention_kernels(ctx, op, *args, **kwargs) -> CheckpointPolicy:
    """Selective-checkpoint policy: save the attention kernel's outputs, recompute everything else."""
    return CheckpointPolicy.MUST_SAVE if op in ATTENTION_KERNELS else CheckpointPolicy.PREFER_RECOMPUTE


@dataclass
class GlobalTokens:
    """Where the global tokens are: ``positions`` (batch, G) in increasing order, ``is_real`` (batch, G) False for
    the slots of rows with fewer than G global tokens. G = 0 when no token is global. Built once per forward pass,
    it also keeps the block masks every layer with the same window and dilation shares."""

    is_global: torch.Tensor  # (batch, n) bool, already ∧ real
    positions: torch.Tensor
    is_real: torch.Tensor
    block_masks: dict = field(default_factory=dict)

    def block_mask(self, key_is_real: torch.Tensor, block: int, dilation: int, multiple: int) -> torch.Tensor:
        """``block_mask`` for the residue classes of ``dilation``, the length padded to a multiple of ``multiple``."""
        if (block, dilation, multiple) not in self.block_masks:
            def prepare(x):
                return split_residues(pad_length(x, multiple, False), dilation)

            slots = self.is_real.repeat_interleave(dilation, dim=0) if self.present else None
            self.block_masks[block, dilation, multiple] = block_mask(
                prepare(key_is_real & ~self.is_global), prepare(key_is_real), block, slots
            )
        return self.block_masks[block, dilation, multiple]

    @classmethod
    def from_mask(cls, is_global: torch.Tensor) -> "GlobalTokens":
        counts = is_global.sum(dim=1)
        num_global = counts.max().item() if is_global.numel() else 0  # (.item(): a symbol when traced, not a guess)
        torch._check(num_global >= 0)  # what a compiled graph must know when G is a symbol
        torch._check(num_global <= is_global.shape[1])
        positions = torch.argsort((~is_global).to(torch.int8), dim=1, stable=True)[:, :num_global]
        is_real = torch.arange(num_global, device=is_global.device)[None, :] < counts[:, None]
        return cls(is_global, positions, is_real)

    @property
    def count(self) -> int:
        return self.positions.shape[1]

    @property
    def present(self) -> bool:
        """Whether the global-attention parts run. In eager mode only when some token is global (G > 0). Under
        torch.compile / torch.export G is a size read from the mask (an unbacked symbol: one device read, no graph
        break) that the graph cannot branch on, so they always run — with G = 0 on empty tensors, the same result."""
        return torch.compiler.is_compiling() or self.count > 0

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, n, …) → (batch, G, …): the rows of the global tokens."""
        index = self.positions.reshape(*self.positions.shape, *([1] * (x.dim() - 2))).expand(-1, -1, *x.shape[2:])
        return x.gather(1, index)

    def scatter(self, x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """``x`` (batch, n, …) with the global tokens' rows replaced by ``rows`` (batch, G, …). The empty slots of
        rows with fewer than G global tokens write to a spare row n, dropped afterwards (selecting the real slots
        instead would make the host wait for the device on every layer)."""
        length = x.shape[1]
        spare = torch.cat([x, x.new_zeros(x.shape[0], 1, *x.shape[2:])], dim=1)
        positions = self.positions.masked_fill(~self.is_real, length)
        index = positions.reshape(*positions.shape, *([1] * (x.dim() - 2))).expand(-1, -1, *x.shape[2:])
        return spare.scatter(1, index, rows.to(x.dtype))[:, :length]


class ScratchLongformerSelfAttention(nn.Module):
    """One layer's Longformer attention: (dilated) sliding window + global attention, then the output projection.

    Local rows: softmax over {j : |i - j| ≤ w/2·d_h, d_h | i - j} ∪ {global j}, with Q, K, V = ``qkv_proj``(x).
    Global rows: softmax over every real j, with ``query_global``, ``key_global``, ``value_global`` (§3.1).
    """

    def __init__(self, config: ScratchLongformerConfig, layer_idx: int):
        super().__init__()
        self.config = config
        hidden = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_dim = hidden // self.num_heads
        self.one_sided_window = config.window_for_layer(layer_idx) // 2
        self.dilations = config.dilations_for_layer(layer_idx)
        # heads that share a dilation run together: {dilation: head indices}
        self.head_groups = {d: [h for h, dh in enumerate(self.dilations) if dh == d] for d in sorted(set(self.dilations))}
        self.dropout = config.attention_probs_dropout_prob
        self.qkv_proj = nn.Linear(hidden, 3 * hidden)
        self.query_global = nn.Linear(hidden, hidden)
        self.key_global = nn.Linear(hidden, hidden)
        self.value_global = nn.Linear(hidden, hidden)
        self.out_proj = nn.Linear(hidden, hidden)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(*x.shape[:2], self.num_heads, self.head_dim)

    def _groups(self) -> list[tuple[int, slice]]:
        """(dilation, heads) of each head group, the heads as a slice of the heads sorted by dilation."""
        groups, first = [], 0
        for dilation, heads in self.head_groups.items():
            groups.append((dilation, slice(first, first + len(heads))))
            first += len(heads)
        return groups

    def _block_masks(self, key_is_real, globals_: GlobalTokens) -> torch.Tensor:
        """The block masks of ``_local`` for every head group, stacked along the heads (one broadcast mask when all
        heads share a dilation: an expanded one would be materialised). Built before ``_local`` runs, so that the
        checkpointed ``_local`` reads them and changes nothing outside itself (torch.compile requires that)."""
        block = self.one_sided_window
        multiple = block * math.lcm(*self.head_groups)
        groups = self._groups()
        if len(groups) == 1:
            return globals_.block_mask(key_is_real, block, groups[0][0], multiple)
        return torch.cat(
            [globals_.block_mask(key_is_real, block, d, multiple).expand(-1, g.stop - g.start, -1, -1) for d, g in groups],
            dim=1,
        )

    def _local(self, query, key, value, key_is_real, allowed, globals_, implementation, dropout, output_attentions):
        """Sliding-window (+ global keys) attention for every head in one kernel call, ``allowed`` from
        ``_block_masks``.

        Each dilation group's heads are split into residue classes and cut into blocks; with the length padded to
        a multiple of w/2 · lcm(dilations) every group has the same number of blocks, so the groups stack along
        the head dimension, each with its own block mask."""
        batch, length = key_is_real.shape
        block = self.one_sided_window
        multiple = block * math.lcm(*self.head_groups)
        global_keys = globals_.gather(key) if globals_.present else None
        global_values = globals_.gather(value) if globals_.present else None
        # heads sorted by dilation (a no-op when they already are), then each group is a view of consecutive heads
        head_order = sorted(range(self.num_heads), key=lambda h: self.dilations[h])
        sorted_already = head_order == list(range(self.num_heads))

        def by_dilation(x):
            return x if x is None or sorted_already else x[:, :, head_order]

        query, key, value, global_keys, global_values = map(by_dilation, (query, key, value, global_keys, global_values))
        groups = self._groups()

        def stacked(make):
            parts = [make(dilation, group) for dilation, group in groups]
            return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)

        def residues(x, dilation, group):
            return split_residues(pad_length(x[:, :, group], multiple), dilation)

        def shared(x, dilation, group):
            return None if x is None else x[:, :, group].repeat_interleave(dilation, dim=0)

        queries = stacked(lambda d, g: query_blocks(residues(query, d, g), block))
        keys = stacked(lambda d, g: key_windows(residues(key, d, g), block, shared(global_keys, d, g)))
        values = stacked(lambda d, g: key_windows(residues(value, d, g), block, shared(global_values, d, g)))
        output, weights = block_attention(queries, keys, values, allowed, implementation, dropout, output_attentions)

        num_global = keys.shape[2] - 3 * block
        outputs, all_weights = [], []
        for dilation, group in groups:
            outputs.append(merge_residues(from_blocks(output[:, group], batch * dilation), dilation)[:, :length])
            if weights is not None:  # → (batch, heads, n, G + 2w + 1): global columns, then offsets -w … w
                weight = weights[:, group]
                weight = torch.cat([weight[..., :num_global], band_to_diagonals(weight[..., num_global:], block)], dim=-1)
                weight = merge_residues(from_blocks(weight, batch * dilation), dilation)[:, :length]
                all_weights.append(weight.transpose(1, 2))
        output = outputs[0] if len(outputs) == 1 else torch.cat(outputs, dim=2)
        weights = None if not all_weights else torch.cat(all_weights, dim=1)
        if not sorted_already:
            inverse = torch.argsort(torch.tensor(head_order, device=output.device))
            output, weights = output[:, :, inverse], (None if weights is None else weights[:, inverse])
        return output, weights

    def _global(self, hidden_states, key_is_real, globals_, dropout):
        """The global tokens' rows: softmax(q_g K_gᵀ/√d) V_g over every real token, with the global projections
        (§3.1), each called as a module so that hooks, adapters and quantized replacements see it."""
        dim = self.head_dim
        query = self._heads(self.query_global(globals_.gather(hidden_states))).transpose(1, 2) * dim**-0.5
        key = self._heads(self.key_global(hidden_states)).transpose(1, 2)  # (batch, heads, n, dim)
        value = self._heads(self.value_global(hidden_states)).transpose(1, 2)
        scores = torch.matmul(query, key.transpose(-1, -2))  # (batch, heads, G, n)
        allowed = key_is_real[:, None, None, :] & globals_.is_real[:, None, :, None]
        weights = masked_softmax(scores, allowed)
        dropped = F.dropout(weights, p=dropout) if dropout > 0.0 else weights
        return torch.matmul(dropped, value), weights

    def forward(self, hidden_states, key_is_real, globals_: GlobalTokens, output_attentions: bool = False):
        implementation = self.config._attn_implementation
        dropout = self.dropout if self.training else 0.0
        query, key, value = (self._heads(x) for x in self.qkv_proj(hidden_states).chunk(3, dim=-1))
        allowed = self._block_masks(key_is_real, globals_)
        if implementation == "sdpa" and not output_attentions and torch.is_grad_enabled():
            # Keep only Q, K, V (views of one projection) and the attention kernel's output for the backward pass
            # and rebuild the 3× key windows there: the windows would be the largest tensors kept, and rebuilding
            # them is cheap; the attention itself is not run again.
            output, local_weights = checkpoint(
                self._local, query, key, value, key_is_real, allowed, globals_, implementation, dropout, False,
                use_reentrant=False, context_fn=functools.partial(create_selective_checkpoint_contexts, keep_attention_kernels),
            )
        else:
            output, local_weights = self._local(
                query, key, value, key_is_real, allowed, globals_, implementation, dropout, output_attentions
            )
        global_weights = None
        if globals_.present:
            global_output, global_weights = self._global(hidden_states, key_is_real, globals_, dropout)
            output = globals_.scatter(output, global_output.transpose(1, 2))
            if local_weights is not None:  # as in transformers: a global row's local weights are not used, zero them
                local_weights = local_weights.masked_fill(globals_.is_global[:, None, :, None], 0.0)
                global_weights = global_weights.transpose(2, 3)  # (batch, heads, n, G)
            else:
                global_weights = None
        output = self.out_proj(output.reshape(*output.shape[:2], -1))
        return output, local_weights, global_weights


def dense_longformer_attention(attention: ScratchLongformerSelfAttention, hidden_states, key_is_real, is_global):
    """The same layer computed densely, for checking the banded kernel (quadratic time and memory: never used by the
    models): full n × n attention under ``longformer_mask`` for the local rows, the global projections over every
    real key for the global rows (padded global tokens are not global), then the output projection."""
    heads = attention.num_heads
    query, key, value = (split_heads(x, heads) for x in attention.qkv_proj(hidden_states).chunk(3, dim=-1))
    allowed = longformer_mask(key_is_real, is_global, attention.one_sided_window, attention.dilations)
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


# ---- 3. the encoder ------------------------------------------------------------------------------------------


MATMULS = frozenset(getattr(torch.ops.aten, name).default for name in ("mm", "addmm", "bmm"))


def keep_matmuls(ctx, op, *args, **kwargs) -> CheckpointPolicy:
    """Selective-checkpoint policy: save the matrix products' outputs, recompute the elementwise ops."""
    return CheckpointPolicy.MUST_SAVE if op in MATMULS else CheckpointPolicy.PREFER_RECOMPUTE


def feed_forward_recomputing_activation(feed_forward: FeedForward, hidden_states: torch.Tensor) -> torch.Tensor:
    """``feed_forward(hidden_states)`` (Vaswani et al. 2017 eq. 2: act(x W₁ + b₁) W₂ + b₂) with act(x) recomputed
    in the backward pass instead of kept (no activation dropout in Longformer's FFN): ``fc_out`` runs as a module
    under a selective checkpoint that keeps the products, so only the elementwise activation runs twice."""
    inner = feed_forward.fc_in(hidden_states)
    if not (torch.is_grad_enabled() and inner.requires_grad) or torch.is_autocast_enabled(inner.device.type):
        return feed_forward.output(inner)
    if torch.compiler.is_compiling():  # the compiler's partitioner chooses what to keep (Inductor recomputes act(x))
        return feed_forward.output(inner)
    return checkpoint(feed_forward.output, inner, use_reentrant=False,
                      context_fn=functools.partial(create_selective_checkpoint_contexts, keep_matmuls))


class ScratchLongformerLayer(GradientCheckpointingLayer):
    """h = LN(x + LongformerAttention(x)), out = LN(h + FFN(h)) (Vaswani et al. 2017 §3.1, with the sparse
    attention of Beltagy et al. 2020 §3.1)."""

    def __init__(self, config: ScratchLongformerConfig, layer_idx: int):
        super().__init__()
        self.attention = ScratchLongformerSelfAttention(config, layer_idx)
        self.attention_residual = ResidualNorm(config.hidden_size, config.layer_norm_eps, config.hidden_dropout_prob)
        self.feed_forward = FeedForward(config.hidden_size, config.intermediate_size, config.hidden_act)
        self.feed_forward_residual = ResidualNorm(config.hidden_size, config.layer_norm_eps, config.hidden_dropout_prob)

    def forward(self, hidden_states, key_is_real, globals_: GlobalTokens, output_attentions: bool = False):
        attended, local_weights, global_weights = self.attention(hidden_states, key_is_real, globals_, output_attentions)
        hidden_states = self.attention_residual.after(hidden_states, attended)
        transformed = feed_forward_recomputing_activation(self.feed_forward, hidden_states)
        return self.feed_forward_residual.after(hidden_states, transformed), local_weights, global_weights


@dataclass
class ScratchLongformerModelOutput(BaseModelOutputWithPooling):
    """``attentions``: per layer (batch, heads, n, G + w + 1) — weights on the G global tokens, then on key offsets
    -w/2 … w/2 (times the head's dilation); ``global_attentions``: (batch, heads, n, G), the global tokens' weights
    on every token."""

    global_attentions: Optional[tuple[torch.Tensor, ...]] = None


class ScratchLongformerPreTrainedModel(ScratchPreTrainedModel):
    """Compiles as one graph: the number of global tokens G, a size read from the mask, is a symbol of the graph
    (one read from the device per forward, no recompilation when it changes; see ``GlobalTokens.present``)."""

    config_class = ScratchLongformerConfig
    _input_embed_layer = "word"  # get/set_input_embeddings (transformers' own) find embeddings.word by this name
    _can_compile_fullgraph = True
    _no_split_modules = ["ScratchLongformerLayer"]


class ScratchLongformerModel(ScratchLongformerPreTrainedModel):
    """The Longformer encoder: embeddings → L layers of sliding-window + global attention → (optional) pooler."""

    def __init__(self, config: ScratchLongformerConfig, add_pooling_layer: bool = True):
        super().__init__(config)
        self.embeddings = ScratchLongformerEmbeddings(config)
        self.layers = nn.ModuleList(ScratchLongformerLayer(config, i) for i in range(config.num_hidden_layers))
        self.pooler = Pooler(config.hidden_size) if add_pooling_layer else None  # (used by multiple choice)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        global_attention_mask: Optional[torch.Tensor] = None,
        token_type_ids: Optional[torch.Tensor] = None,
        position_ids: Optional[torch.Tensor] = None,
        inputs_embeds: Optional[torch.Tensor] = None,
        output_attentions: Optional[bool] = None,
        output_hidden_states: Optional[bool] = None,
        return_dict: Optional[bool] = None,
        **kwargs,
    ) -> ScratchLongformerModelOutput:
        check_one_input(input_ids, inputs_embeds)
        batch, length = (input_ids if input_ids is not None else inputs_embeds).shape[:2]
        device = (input_ids if input_ids is not None else inputs_embeds).device
        key_is_real = check_attention_mask(attention_mask, batch, length)
        if key_is_real is None:
            key_is_real = torch.ones(batch, length, dtype=torch.bool, device=device)
        is_global = check_attention_mask(global_attention_mask, batch, length, name="global_attention_mask")
        if is_global is None:
            is_global = torch.zeros(batch, length, dtype=torch.bool, device=device)
        globals_ = GlobalTokens.from_mask(is_global & key_is_real)  # padding wins over global
        output_attentions = self.config.output_attentions if output_attentions is None else output_attentions
        output_hidden_states = self.config.output_hidden_states if output_hidden_states is None else output_hidden_states

        hidden_states = self.embeddings(input_ids, token_type_ids, position_ids, inputs_embeds)
        all_hidden_states = (hidden_states,) if output_hidden_states else None
        all_attentions = () if output_attentions else None
        all_global_attentions = () if output_attentions and globals_.present else None
        for layer in self.layers:
            hidden_states, local_weights, global_weights = layer(hidden_states, key_is_real, globals_, output_attentions)
            if output_hidden_states:
                all_hidden_states += (hidden_states,)
            if output_attentions:
                all_attentions += (local_weights,)
                if globals_.present:
                    all_global_attentions += (global_weights,)

        pooled = self.pooler(hidden_states) if self.pooler is not None else None
        return ScratchLongformerModelOutput(
            last_hidden_state=hidden_states,
            pooler_output=pooled,
            hidden_states=all_hidden_states,
            attentions=all_attentions,
            global_attentions=all_global_attentions,
        )


# ---- 4. heads ------------------------------------------------------------------------------------------------


def tokens_before_first(input_ids: Optional[torch.Tensor], token_id: Optional[int], what: str) -> torch.Tensor:
    """(batch, n) bool: True before the first ``token_id`` of each row (the question, for QA)."""
    if input_ids is None or token_id is None:
        raise ValueError(
            f"Cannot place the default global attention ({what}) without input_ids and config.sep_token_id: pass "
            "global_attention_mask explicitly."
        )
    is_sep = input_ids == token_id
    message = (
        f"Every row needs a separator token (sep_token_id={token_id}) to place the default global attention "
        f"({what}); encode question and context as a pair, or pass global_attention_mask explicitly."
    )
    if not values_pass(is_sep.any(dim=-1), message):
        raise ValueError(message)
    first_sep = is_sep.long().argmax(dim=-1, keepdim=True)
    return torch.arange(input_ids.shape[-1], device=input_ids.device)[None, :] < first_sep


def _output_fields(outputs) -> dict:
    return dict(hidden_states=outputs.hidden_states, attentions=outputs.attentions, global_attentions=outputs.global_attentions)


@dataclass
class ScratchLongformerMaskedLMOutput(MaskedLMOutput):
    global_attentions: Optional[tuple[torch.Tensor, ...]] = None


@dataclass
class ScratchLongformerSequenceClassifierOutput(SequenceClassifierOutput):
    global_attentions: Optional[tuple[torch.Tensor, ...]] = None


@dataclass
class ScratchLongformerTokenClassifierOutput(TokenClassifierOutput):
    global_attentions: Optional[tuple[torch.Tensor, ...]] = None


@dataclass
class ScratchLongformerQuestionAnsweringOutput(QuestionAnsweringModelOutput):
    global_attentions: Optional[tuple[torch.Tensor, ...]] = None


@dataclass
class ScratchLongformerMultipleChoiceOutput(MultipleChoiceModelOutput):
    global_attentions: Optional[tuple[torch.Tensor, ...]] = None


class ScratchLongformerForMaskedLM(ScratchLongformerPreTrainedModel):
    """Masked LM with RoBERTa's head: logits = W_e · LN(gelu(W h + b)) + b_vocab."""

    _tied_weights_keys = {"mlm_head.decoder.weight": "model.embeddings.word.weight"}

    def __init__(self, config: ScratchLongformerConfig):
        super().__init__(config)
        self.model = ScratchLongformerModel(config, add_pooling_layer=False)
        self.mlm_head = MaskedLMHead(config.hidden_size, config.vocab_size, "gelu", config.layer_norm_eps)
        self.post_init()

    def get_output_embeddings(self):
        return self.mlm_head.decoder

    def set_output_embeddings(self, value):
        self.mlm_head.decoder = value

    @can_return_tuple
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        global_attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        output_attentions=None,
        output_hidden_states=None,
        return_dict=None,
        **kwargs,
    ) -> ScratchLongformerMaskedLMOutput:
        outputs = self.model(
            input_ids, attention_mask, global_attention_mask, token_type_ids, position_ids, inputs_embeds,
            output_attentions, output_hidden_states, return_dict=True,
        )
        logits = self.mlm_head(outputs.last_hidden_state)
        loss = token_cross_entropy(logits, labels, kwargs.get("num_items_in_batch")) if labels is not None else None
        return ScratchLongformerMaskedLMOutput(loss=loss, logits=logits, **_output_fields(outputs))


class ScratchLongformerClassificationHead(nn.Module):
    """logits = W_out · Dropout(tanh(W · Dropout(h_<s>)))."""

    def __init__(self, config: ScratchLongformerConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.out_proj = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        pooled = torch.tanh(self.dense(self.dropout(hidden_states[:, 0])))
        return self.out_proj(self.dropout(pooled))


class ScratchLongformerForSequenceClassification(ScratchLongformerPreTrainedModel):
    """Classification/regression from the first token, which gets global attention unless told otherwise."""

    def __init__(self, config: ScratchLongformerConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.model = ScratchLongformerModel(config, add_pooling_layer=False)
        self.classifier = ScratchLongformerClassificationHead(config)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        global_attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        output_attentions=None,
        output_hidden_states=None,
        return_dict=None,
        **kwargs,
    ) -> ScratchLongformerSequenceClassifierOutput:
        if global_attention_mask is None:
            reference = input_ids if input_ids is not None else inputs_embeds
            global_attention_mask = torch.zeros(reference.shape[:2], dtype=torch.long, device=reference.device)
            global_attention_mask[:, 0] = 1
        outputs = self.model(
            input_ids, attention_mask, global_attention_mask, token_type_ids, position_ids, inputs_embeds,
            output_attentions, output_hidden_states, return_dict=True,
        )
        logits = self.classifier(outputs.last_hidden_state)
        loss = sequence_classification_loss(logits, labels, self.config) if labels is not None else None
        return ScratchLongformerSequenceClassifierOutput(loss=loss, logits=logits, **_output_fields(outputs))


class ScratchLongformerForTokenClassification(ScratchLongformerPreTrainedModel):
    """A label per token: logits_t = W · Dropout(h_t)."""

    def __init__(self, config: ScratchLongformerConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.model = ScratchLongformerModel(config, add_pooling_layer=False)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        global_attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        output_attentions=None,
        output_hidden_states=None,
        return_dict=None,
        **kwargs,
    ) -> ScratchLongformerTokenClassifierOutput:
        outputs = self.model(
            input_ids, attention_mask, global_attention_mask, token_type_ids, position_ids, inputs_embeds,
            output_attentions, output_hidden_states, return_dict=True,
        )
        logits = self.classifier(self.dropout(outputs.last_hidden_state))
        loss = token_cross_entropy(logits, labels, kwargs.get("num_items_in_batch")) if labels is not None else None
        return ScratchLongformerTokenClassifierOutput(loss=loss, logits=logits, **_output_fields(outputs))


class ScratchLongformerForQuestionAnswering(ScratchLongformerPreTrainedModel):
    """Extractive QA: (start, end) = W · h_t; the question (tokens before the first separator) is global by default."""

    def __init__(self, config: ScratchLongformerConfig):
        super().__init__(config)
        self.model = ScratchLongformerModel(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        global_attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        start_positions=None,
        end_positions=None,
        output_attentions=None,
        output_hidden_states=None,
        return_dict=None,
        **kwargs,
    ) -> ScratchLongformerQuestionAnsweringOutput:
        if global_attention_mask is None:
            global_attention_mask = tokens_before_first(input_ids, self.config.sep_token_id, "on the question")
        outputs = self.model(
            input_ids, attention_mask, global_attention_mask, token_type_ids, position_ids, inputs_embeds,
            output_attentions, output_hidden_states, return_dict=True,
        )
        start_logits, end_logits = self.qa_outputs(outputs.last_hidden_state).unbind(dim=-1)
        loss = None
        if start_positions is not None and end_positions is not None:
            loss = span_loss(start_logits, end_logits, start_positions, end_positions)
        return ScratchLongformerQuestionAnsweringOutput(
            loss=loss, start_logits=start_logits.contiguous(), end_logits=end_logits.contiguous(), **_output_fields(outputs)
        )


class ScratchLongformerForMultipleChoice(ScratchLongformerPreTrainedModel):
    """Inputs (batch, choices, n); each choice's pooled vector gets a score. By default (as in transformers) the
    tokens after the first separator pair — the choice — get global attention."""

    def __init__(self, config: ScratchLongformerConfig):
        super().__init__(config)
        self.model = ScratchLongformerModel(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        global_attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        output_attentions=None,
        output_hidden_states=None,
        return_dict=None,
        **kwargs,
    ) -> ScratchLongformerMultipleChoiceOutput:
        _, num_choices, _ = choice_dimensions(input_ids, inputs_embeds)
        flat = flatten_choices
        if global_attention_mask is None:
            before_pair = tokens_before_first(flat(input_ids), self.config.sep_token_id, "on the choice")
            flat_global = ~F.pad(before_pair, (2, 0), value=True)[:, :-2]  # positions > first separator + 1
        else:
            flat_global = flat(global_attention_mask)
        outputs = self.model(
            flat(input_ids), flat(attention_mask), flat_global, flat(token_type_ids),
            flat(position_ids), flat(inputs_embeds), output_attentions, output_hidden_states, return_dict=True,
        )
        logits = self.classifier(self.dropout(outputs.pooler_output)).view(-1, num_choices)
        loss = token_cross_entropy(logits, labels) if labels is not None else None
        return ScratchLongformerMultipleChoiceOutput(loss=loss, logits=logits, **_output_fields(outputs))


__all__ = [
    "ScratchLongformerPreTrainedModel",
    "ScratchLongformerModel",
    "ScratchLongformerForMaskedLM",
    "ScratchLongformerForSequenceClassification",
    "ScratchLongformerForTokenClassification",
    "ScratchLongformerForQuestionAnswering",
    "ScratchLongformerForMultipleChoice",
]

"""Sliding-window attention computed banded, in time and memory linear in the length — never an n×n matrix: the
kernel of Longformer's attention pattern (Beltagy et al. 2020 §3.1, dilated windows and global tokens; §3.2 on
computing it without the full matrix).

For one head group of dilation d: the sequence is split into its d residue classes (i mod d), each a plain
sliding-window problem of length n/d; that is cut into blocks of w/2 queries, each attending the 3·w/2 keys of its
own and the two neighbouring blocks (a fixed band mask keeps |i - j| ≤ w/2) plus the global keys. Dilation thus
costs what no dilation costs. ``BandedMask`` is this relation as the mask the one dispatcher, ``kernels.attend``,
takes (a ``kernels.BlockSparseMask``); the dispatcher chooses the kernel: ``"eager"`` (softmax written out; returns
the weights) or ``"sdpa"`` (``scaled_dot_product_attention``) on the blocks. ``GlobalTokens`` says where the global
tokens are and keeps the block masks the layers share; the dense relation, for tests and pictures, is
``viz.longformer_mask``.

For ``"flex_attention"`` the dispatcher runs torch's ``flex_attention`` on the unsplit sequence: a ``mask_mod``
states the relation (``longformer_mask_mod``), and a ``BlockMask`` of 128 × 128 tiles built from the window, each
head's dilation, the global keys and the padding (``flex_block_mask``) — from per-tile summaries, never from an n×n
mask — lets the fused kernel visit only the tiles the band and the global columns touch, and skip the mask on the
tiles they cover entirely. A head of dilation d visits the tiles within its reach w/2·d, d times as many as an
undilated head (the residue classes above avoid that cost; flex does not split them).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import BlockMask
from torch.utils.checkpoint import CheckpointPolicy, SelectiveCheckpointContext

from .kernels import BlockSparseMask, DenseAttention
from .layers import selective_checkpoint
from .masks import AttentionMask


def pad_length(x: torch.Tensor, multiple: int, value: float = 0) -> torch.Tensor:
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
    return (
        x.reshape(batch, length // dilation, dilation, *rest)
        .transpose(1, 2)
        .reshape(batch * dilation, length // dilation, *rest)
    )


def merge_residues(x: torch.Tensor, dilation: int) -> torch.Tensor:
    """Inverse of ``split_residues``."""
    if dilation == 1:
        return x
    batch, length = x.shape[0] // dilation, x.shape[1] * dilation
    rest = x.shape[2:]
    return x.reshape(batch, dilation, length // dilation, *rest).transpose(1, 2).reshape(batch, length, *rest)


def key_windows(x: torch.Tensor, block: int, prefix: torch.Tensor | None = None) -> torch.Tensor:
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
    key_is_local: torch.Tensor, query_is_real: torch.Tensor, block: int, global_slot_is_real: torch.Tensor | None
) -> torch.Tensor:
    """The "may attend" relation of ``block_attention``, block by block: (batch·n/block, 1, block,
    [G +] 3·block) bool — the G global slots that exist, then |i - j| ≤ block (= w/2) among local keys; padded
    queries none."""
    batch, length = key_is_local.shape
    blocks = length // block
    query_ok = query_is_real.reshape(batch, blocks, block, 1)
    key_ok = F.pad(key_is_local, (block, block)).unfold(1, 3 * block, block)  # (batch, blocks, 3·block)
    allowed = band_mask(block, key_is_local.device) & key_ok[:, :, None, :]
    if global_slot_is_real is not None:
        allowed = torch.cat([global_slot_is_real[:, None, None, :].expand(-1, blocks, block, -1), allowed], dim=-1)
    return (allowed & query_ok).reshape(batch * blocks, 1, block, allowed.shape[-1])


def band_mask(block: int, device: torch.device) -> torch.Tensor:
    """(block, 3·block) bool: query r of a block may attend column s of its key window iff |s - block - r| ≤ block."""
    rows = torch.arange(block, device=device)[:, None]
    columns = torch.arange(3 * block, device=device)[None, :]
    return (columns - block - rows).abs() <= block


def band_to_diagonals(weights: torch.Tensor, block: int) -> torch.Tensor:
    """Block weights (…, block, 3·block) → (…, block, 2·block + 1), column t = key offset t - block (the layout
    transformers returns for Longformer attentions)."""
    index = (
        torch.arange(block, device=weights.device)[:, None]
        + torch.arange(2 * block + 1, device=weights.device)[None, :]
    )
    return weights.gather(-1, index.expand(*weights.shape[:-2], block, 2 * block + 1))


def query_blocks(x: torch.Tensor, block: int) -> torch.Tensor:
    """(batch, n, heads, d) → (batch·n/block, heads, block, d): the queries, block by block."""
    batch, length, heads, dim = x.shape
    return x.reshape(batch, length // block, block, heads, dim).transpose(2, 3).reshape(-1, heads, block, dim)


def from_blocks(x: torch.Tensor, batch: int) -> torch.Tensor:
    """Inverse of ``query_blocks`` for any last dimension: (batch·blocks, heads, block, C) → (batch, n, heads, C)."""
    blocks_total, heads, block, channels = x.shape
    blocks = blocks_total // batch
    return (
        x.reshape(batch, blocks, heads, block, channels).transpose(2, 3).reshape(batch, blocks * block, heads, channels)
    )


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


def keep_attention_kernels(ctx: SelectiveCheckpointContext, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
    """Selective-checkpoint policy: save the attention kernel's outputs, recompute everything else."""
    return CheckpointPolicy.MUST_SAVE if op in ATTENTION_KERNELS else CheckpointPolicy.PREFER_RECOMPUTE


# ---- the same local rows through torch's flex_attention -------------------------------------------------------

FLEX_BLOCK_SIZE = 128  # flex_attention's tile (its default sparse block size): queries and keys by 128


def longformer_mask_mod(
    key_is_real: torch.Tensor, is_global: torch.Tensor, one_sided_window: int, dilations: torch.Tensor
) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
    """flex_attention's ``mask_mod`` for the local rows of Beltagy et al. 2020 §3.1, the banded kernel's relation:

        may_attend(b, h, i, j) = [(|i - j| ≤ w/2·d_h ∧ d_h | i - j) ∨ global_b(j)] ∧ real_b(i) ∧ real_b(j)

    ``key_is_real``, ``is_global`` (batch, n) bool (global ∧ real), padded with False to whole tiles so that the
    kernel may read any index of its last tile; ``dilations`` (heads,) int. The global tokens' own rows use
    their own projections (``ScratchLongformerSelfAttention._global``), not this relation."""
    reach = one_sided_window * dilations

    def may_attend(b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
        offset = q_idx - kv_idx
        in_window = (offset.abs() <= reach[h]) & (offset % dilations[h] == 0)
        return key_is_real[b, q_idx] & key_is_real[b, kv_idx] & (in_window | is_global[b, kv_idx])

    return may_attend


def window_tiles(
    num_tiles: int, tile: int, one_sided_window: int, dilations: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(touched, covered), each (heads, query tiles, key tiles) bool: the tiles where the (dilated) band holds some
    pair, and those it holds entirely. Tile (i, j) holds the offsets tile·(i - j) ± (tile - 1); head h reaches
    |offset| ≤ w/2·d_h on every d_h-th offset, so it touches the tile at most when the nearest offset is in reach
    (a superset: the mask_mod decides inside), and covers it when d_h = 1 and the farthest offset is in reach."""
    starts = torch.arange(num_tiles, device=dilations.device) * tile
    distance = (starts[:, None] - starts[None, :]).abs()[None]
    reach = (one_sided_window * dilations)[:, None, None]
    return distance - (tile - 1) <= reach, (distance + (tile - 1) <= reach) & (dilations == 1)[:, None, None]


def ordered_tiles(tiles: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(…, query tiles, key tiles) bool → flex's (counts (…, query tiles), indices (…, query tiles, key tiles)) int32:
    each query tile's key tiles, listed first."""
    counts = tiles.sum(dim=-1, dtype=torch.int32)
    return counts, torch.argsort((~tiles).to(torch.int8), dim=-1, stable=True).to(torch.int32)


def flex_block_mask(
    key_is_real: torch.Tensor,
    is_global: torch.Tensor,
    one_sided_window: int,
    dilations: tuple[int, ...],
    tile: int = FLEX_BLOCK_SIZE,
) -> BlockMask:
    """The ``BlockMask`` of ``longformer_mask_mod`` over (batch, heads, n, n), built from per-tile summaries (which
    tiles hold a real query, a real local key, a global key; which hold only real ones) and ``window_tiles`` — no n×n
    mask. A tile is visited when some query of it may attend some key of it (band ∧ local key, or a global key; an
    over-estimate is only work), and skips the mask when every pair may (all real, and the band covers it or every
    key is global). One head dimension when every head has the same dilation."""
    batch, length = key_is_real.shape
    num_tiles = -(-length // tile)
    real, is_global = (pad_length(x, tile, False) for x in (key_is_real, is_global))
    real_tiles, global_tiles = real.view(batch, num_tiles, tile), is_global.view(batch, num_tiles, tile)
    per_head = torch.tensor(dilations, device=key_is_real.device)
    shared = len(set(dilations)) == 1  # then one head dimension serves all heads
    touched, covered = window_tiles(num_tiles, tile, one_sided_window, per_head[:1] if shared else per_head)

    def by_key(x: torch.Tensor) -> torch.Tensor:  # (batch, key tiles) → (batch, 1, 1, key tiles)
        return x[:, None, None, :]

    some_local, some_global = by_key((real_tiles & ~global_tiles).any(-1)), by_key(global_tiles.any(-1))
    visited = real_tiles.any(-1)[:, None, :, None] & ((touched & some_local) | some_global)
    every_real = real_tiles.all(-1)
    full = every_real[:, None, :, None] & by_key(every_real) & (covered | by_key(global_tiles.all(-1)))
    return BlockMask.from_kv_blocks(
        *ordered_tiles(visited & ~full),
        *ordered_tiles(full),
        BLOCK_SIZE=tile,
        mask_mod=longformer_mask_mod(real, is_global, one_sided_window, per_head),
        seq_lengths=(length, length),
    )


@dataclass
class GlobalTokens:
    """Where the global tokens are: ``positions`` (batch, G) in increasing order, ``is_real`` (batch, G) False for
    the slots of rows with fewer than G global tokens. G = 0 when no token is global. Built once per forward pass,
    it also holds the masks the layers share: ``global_rows``, the global rows' mask (each real slot may attend every
    real key, §3.1), and the block masks of every layer with the same window and dilation."""

    is_global: torch.Tensor  # (batch, n) bool, already ∧ real
    positions: torch.Tensor
    is_real: torch.Tensor
    global_rows: AttentionMask  # relation (batch, 1, G, n)
    block_masks: dict[tuple[int, int, int], torch.Tensor] = field(default_factory=dict)
    flex_block_masks: dict[tuple[int, tuple[int, ...]], BlockMask] = field(default_factory=dict)

    def block_mask(self, key_is_real: torch.Tensor, block: int, dilation: int, multiple: int) -> torch.Tensor:
        """``block_mask`` for the residue classes of ``dilation``, the length padded to a multiple of ``multiple``."""
        if (block, dilation, multiple) not in self.block_masks:

            def prepare(x: torch.Tensor) -> torch.Tensor:
                return split_residues(pad_length(x, multiple, False), dilation)

            slots = self.is_real.repeat_interleave(dilation, dim=0) if self.present else None
            self.block_masks[block, dilation, multiple] = block_mask(
                prepare(key_is_real & ~self.is_global), prepare(key_is_real), block, slots
            )
        return self.block_masks[block, dilation, multiple]

    def flex_block_mask(
        self, key_is_real: torch.Tensor, one_sided_window: int, dilations: tuple[int, ...]
    ) -> BlockMask:
        """``flex_block_mask`` for a window and the dilation of each head, built once per forward pass."""
        key = (one_sided_window, dilations)
        if key not in self.flex_block_masks:
            self.flex_block_masks[key] = flex_block_mask(key_is_real, self.is_global, one_sided_window, dilations)
        return self.flex_block_masks[key]

    @classmethod
    def from_masks(cls, key_is_real: torch.Tensor, is_global: torch.Tensor) -> GlobalTokens:
        """From the real tokens and those marked global, (batch, n) bool each: a padded token is never global."""
        is_global = is_global & key_is_real
        counts = is_global.sum(dim=1)
        num_global = counts.max().item() if is_global.numel() else 0  # (.item(): a symbol when traced, not a guess)
        torch._check(num_global >= 0)  # what a compiled graph must know when G is a symbol
        torch._check(num_global <= is_global.shape[1])
        positions = torch.argsort((~is_global).to(torch.int8), dim=1, stable=True)[:, :num_global]
        is_real = torch.arange(num_global, device=is_global.device)[None, :] < counts[:, None]
        global_rows = AttentionMask(relation=key_is_real[:, None, None, :] & is_real[:, None, :, None])
        return cls(is_global, positions, is_real, global_rows)

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


class BandedPattern:
    """One layer's sliding-window pattern — ``one_sided_window`` w/2 and a dilation per head — and the banded
    attention over it. Heads that share a dilation run together (``head_groups``: {dilation: head indices})."""

    def __init__(self, one_sided_window: int, dilations: tuple[int, ...]) -> None:
        self.one_sided_window = one_sided_window
        self.dilations = dilations
        self.num_heads = len(dilations)
        self.head_groups = {d: [h for h, dh in enumerate(dilations) if dh == d] for d in sorted(set(dilations))}

    def groups(self) -> list[tuple[int, slice]]:
        """(dilation, heads) of each head group, the heads as a slice of the heads sorted by dilation."""
        groups: list[tuple[int, slice]] = []
        first = 0
        for dilation, heads in self.head_groups.items():
            groups.append((dilation, slice(first, first + len(heads))))
            first += len(heads)
        return groups

    def block_masks(self, key_is_real: torch.Tensor, globals_: GlobalTokens) -> torch.Tensor:
        """The block masks of ``attend`` for every head group, stacked along the heads (one broadcast mask when all
        heads share a dilation: an expanded one would be materialised). Built before ``attend`` runs, so that a
        checkpointed ``attend`` reads them and changes nothing outside itself (torch.compile requires that)."""
        block = self.one_sided_window
        multiple = block * math.lcm(*self.head_groups)
        groups = self.groups()
        if len(groups) == 1:
            return globals_.block_mask(key_is_real, block, groups[0][0], multiple)
        return torch.cat(
            [
                globals_.block_mask(key_is_real, block, d, multiple).expand(-1, g.stop - g.start, -1, -1)
                for d, g in groups
            ],
            dim=1,
        )

    def attend(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        key_is_real: torch.Tensor,
        allowed: torch.Tensor,
        globals_: GlobalTokens,
        dense: DenseAttention,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Sliding-window (+ global keys) attention for every head in one ``dense`` call (the dispatcher's kernel):
        ``query``, ``key``, ``value`` (batch, n, heads, d), ``allowed`` from ``block_masks``; returns (output
        (batch, n, heads, d), weights (batch, heads, n, G + w + 1) or None).

        Each dilation group's heads are split into residue classes and cut into blocks; with the length padded to
        a multiple of w/2 · lcm(dilations) every group has the same number of blocks, so the groups stack along
        the head dimension, each with its own block mask. The blocks are softmax(Q Kᵀ/√d + M) V with queries
        (blocks, heads, w/2, d) against keys and values (blocks, heads, G + 3·w/2, d) from ``key_windows``, M from
        ``block_mask``."""
        batch, length = key_is_real.shape
        # heads sorted by dilation (a no-op when they already are), then each group is a view of consecutive heads
        head_order = sorted(range(self.num_heads), key=lambda h: self.dilations[h])
        sorted_already = head_order == list(range(self.num_heads))

        def by_dilation(x: torch.Tensor) -> torch.Tensor:
            return x if sorted_already else x[:, :, head_order]

        global_keys = by_dilation(globals_.gather(key)) if globals_.present else None
        global_values = by_dilation(globals_.gather(value)) if globals_.present else None
        groups = self.groups()
        queries, keys, values = self._blocks(
            by_dilation(query), by_dilation(key), by_dilation(value), global_keys, global_values, groups
        )
        output, weights = dense(queries, keys, values, AttentionMask(relation=allowed))
        num_global = keys.shape[2] - 3 * self.one_sided_window
        output, weights = self._unblock(output, weights, groups, num_global, batch, length)
        if not sorted_already:
            inverse = torch.argsort(torch.tensor(head_order, device=output.device))
            output, weights = output[:, :, inverse], (None if weights is None else weights[:, inverse])
        return output, weights

    def _blocks(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        global_keys: torch.Tensor | None,
        global_values: torch.Tensor | None,
        groups: list[tuple[int, slice]],
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """What ``block_attention`` takes, for heads sorted by dilation: the query blocks (``query_blocks``) and the
        key and value windows after the global keys (``key_windows``) of every dilation group's residue classes,
        the groups stacked along the heads."""
        block = self.one_sided_window
        multiple = block * math.lcm(*self.head_groups)

        def stacked(make: Callable[[int, slice], torch.Tensor]) -> torch.Tensor:
            parts = [make(dilation, group) for dilation, group in groups]
            return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)

        def residues(x: torch.Tensor, dilation: int, group: slice) -> torch.Tensor:
            return split_residues(pad_length(x[:, :, group], multiple), dilation)

        def shared(x: torch.Tensor | None, dilation: int, group: slice) -> torch.Tensor | None:
            return None if x is None else x[:, :, group].repeat_interleave(dilation, dim=0)

        queries = stacked(lambda d, g: query_blocks(residues(query, d, g), block))
        keys = stacked(lambda d, g: key_windows(residues(key, d, g), block, shared(global_keys, d, g)))
        values = stacked(lambda d, g: key_windows(residues(value, d, g), block, shared(global_values, d, g)))
        return queries, keys, values

    def _unblock(
        self,
        output: torch.Tensor,
        weights: torch.Tensor | None,
        groups: list[tuple[int, slice]],
        num_global: int,
        batch: int,
        length: int,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The blocks of every dilation group back in sequence order: output (batch, n, heads, d) and weights
        (batch, heads, n, G + w + 1) — the global columns, then the key offsets -w/2 … w/2 — or None."""
        block = self.one_sided_window
        outputs, all_weights = [], []
        for dilation, group in groups:
            outputs.append(merge_residues(from_blocks(output[:, group], batch * dilation), dilation)[:, :length])
            if weights is not None:
                weight = weights[:, group]
                weight = torch.cat(
                    [weight[..., :num_global], band_to_diagonals(weight[..., num_global:], block)], dim=-1
                )
                weight = merge_residues(from_blocks(weight, batch * dilation), dilation)[:, :length]
                all_weights.append(weight.transpose(1, 2))
        output = outputs[0] if len(outputs) == 1 else torch.cat(outputs, dim=2)
        return output, (None if not all_weights else torch.cat(all_weights, dim=1))


@dataclass(eq=False)
class BandedMask(BlockSparseMask):
    """One layer's local rows as the mask ``kernels.attend`` takes (Beltagy et al. 2020 §3.1): query i may attend
    the keys of its (dilated) sliding window — ``pattern`` — and the global keys, among the real tokens of this
    batch (``key_is_real``, ``globals_``). Never built n × n: the dispatcher asks it for flex_attention's tiles
    (``flex_block_mask``) or runs its blocks (``attend_in_blocks``)."""

    pattern: BandedPattern
    key_is_real: torch.Tensor
    globals_: GlobalTokens

    def flex_block_mask(self) -> BlockMask:
        """``flex_block_mask`` of this pattern, built once per forward pass (``GlobalTokens``)."""
        return self.globals_.flex_block_mask(self.key_is_real, self.pattern.one_sided_window, self.pattern.dilations)

    def attend_in_blocks(
        self,
        dense: DenseAttention,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        keep_only_kernel_outputs: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``BandedPattern.attend`` on ``query``, ``key``, ``value`` (batch, heads, n, d); returns the output
        (batch, heads, n, d) and the weights (batch, heads, n, G + w + 1) or None.

        With ``keep_only_kernel_outputs`` it runs under a selective checkpoint that keeps only Q, K, V (views of one
        projection) and the attention kernel's output for the backward pass, and rebuilds the 3× key windows
        there: the windows would be the largest tensors kept, and rebuilding them is cheap; the attention itself is
        not run again. Under torch.compile the partitioner would keep the windows without it (measured, Inductor's
        min-cut), and torch logs "context_fn is passed ... make sure the checkpointed region does not contain
        in-place ops" for any selective checkpoint it compiles: ``BandedPattern.attend`` runs none
        (tests/test_compile.py checks it), so the warning is harmless here. The block masks are built first, outside
        the checkpointed region, which then changes nothing outside itself (torch.compile requires that)."""
        allowed = self.pattern.block_masks(self.key_is_real, self.globals_)
        query, key, value = (x.transpose(1, 2) for x in (query, key, value))  # (batch, n, heads, d), the blocks'
        arguments = (query, key, value, self.key_is_real, allowed, self.globals_, dense)
        if keep_only_kernel_outputs:
            output, weights = selective_checkpoint(self.pattern.attend, *arguments, policy=keep_attention_kernels)
        else:
            output, weights = self.pattern.attend(*arguments)
        return output.transpose(1, 2), weights

"""Adaptive input embeddings (Baevski & Auli 2019) and the adaptive softmax (Grave et al. 2017), with the
projections Transformer-XL gives them (Dai et al. 2019, in their experiments §4; the reference's
``AdaptiveEmbedding`` and ``ProjectedAdaptiveLogSoftmax``).

The vocabulary, sorted by frequency, is cut at ``config.cutoffs`` into a head (the frequent words) and tail clusters.
Cluster c embeds its words in d_embed // div_val^c dimensions, projected to the model width by P_c; the output
distribution scores the head and one "go to cluster c" entry per tail cluster, and within a tail cluster only its own
words. The softmax's tables and projections may be the input's (``tie_word_embeddings``, ``tie_projs``): the model
ties them by ``_tied_weights_keys``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F
from transformers import initialization as init

from .checks import check_input_ids, embedding_rows
from .configuration_transfo_xl import ScratchTransfoXLConfig

# --------------------------------------------------------------------------------------------------------------
# The parameters: one table (and projection) per cluster
# --------------------------------------------------------------------------------------------------------------


def embedding_tables(config: ScratchTransfoXLConfig) -> list[tuple[int, int, int]]:
    """(low, high, width) of each embedding table: one table for the whole vocabulary when ``div_val == 1``,
    otherwise one per cluster with width d_embed // div_val^i."""
    if config.div_val == 1:
        return [(0, config.vocab_size, config.embedding_size)]
    return [(low, high, config.cluster_embedding_size(i)) for i, (low, high) in enumerate(config.cluster_bounds())]


class _Projections(nn.ParameterList):
    """The projections P_c (hidden_size × cluster width) between a cluster's width and the model's."""


class _ProjectionsByCluster(nn.ParameterDict):
    """The softmax's projections, keyed by cluster number (those with ``tie_projs`` are the input's)."""


class _OutputWeights(nn.ParameterList):
    """The softmax's output embeddings, one per table (the input tables with ``tie_word_embeddings``)."""


class _OutputBiases(nn.ParameterList):
    """The softmax's output biases, one per table."""


# --------------------------------------------------------------------------------------------------------------
# Adaptive input (Baevski & Auli 2019)
# --------------------------------------------------------------------------------------------------------------


class AdaptiveEmbedding(nn.Module):
    """x = √d_model · P_c E_c[w] for the cluster c holding word w (P_c absent when E_c is already d_model wide)."""

    def __init__(self, config: ScratchTransfoXLConfig):
        super().__init__()
        self.hidden_size = config.hidden_size
        self.scale = config.hidden_size**0.5
        tables = embedding_tables(config)
        self.embeddings = nn.ModuleList(nn.Embedding(high - low, width) for low, high, width in tables)
        self.projections = (
            _Projections(nn.Parameter(torch.empty(config.hidden_size, width)) for _, _, width in tables)
            if config.has_projection
            else _Projections()
        )

    @property
    def num_embeddings(self) -> int:
        """The vocabulary size now: the rows of all tables (``resize_token_embeddings`` changes the last one)."""
        return sum(embedding_rows(table) for table in self.embeddings)

    @property
    def weight(self) -> torch.Tensor:
        """The embedding matrix (vocab_size, embedding_size) when there is one table (``div_val == 1``), as an
        ``nn.Embedding`` has it: scripts read ``get_input_embeddings().weight.shape[0]`` as the vocabulary size, and
        accelerate's FSDP recognises the tied output embeddings by it. Read-only; with one table per cluster there is
        no single matrix, and reading it raises AttributeError (``getattr(embedding, "weight", None)`` is None)."""
        if len(self.embeddings) != 1:
            raise AttributeError(
                "the adaptive input has one embedding table per cluster (div_val > 1), no single weight"
            )
        return self.embeddings[0].weight  # type: ignore[return-value]  # torch types it Tensor | Module

    def table_bounds(self) -> list[tuple[int, int]]:
        """[low, high) token ids of each table, read from the tables as they are now."""
        bounds, low = [], 0
        for table in self.embeddings:
            bounds.append((low, low + embedding_rows(table)))
            low = bounds[-1][1]
        return bounds

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Every table looks up every token (ids outside it clamped into it) and the token keeps the vector of the
        table that holds it. Looking up only each table's own tokens would make the shapes depend on the ids (a
        graph break under torch.compile, a device sync); the extra rows cost the projections P_c of the narrow
        tables, a fraction of one layer."""
        check_input_ids(input_ids, self.num_embeddings)
        embedded = None
        for index, (low, high) in enumerate(self.table_bounds()):
            vectors = self.embeddings[index]((input_ids - low).clamp(0, high - low - 1))
            if len(self.projections):
                vectors = F.linear(vectors, self.projections[index])
            in_table = ((input_ids >= low) & (input_ids < high))[..., None]
            embedded = vectors if embedded is None else torch.where(in_table, vectors, embedded)
        return embedded * self.scale


# --------------------------------------------------------------------------------------------------------------
# Adaptive softmax (Grave et al. 2017)
# --------------------------------------------------------------------------------------------------------------


class AdaptiveSoftmax(nn.Module):
    """log p(w | h) over a clustered vocabulary (Grave et al. 2017), with projections as in Transformer-XL.

    The head cluster scores its words and one "go to cluster c" entry per tail cluster:
        log p(w) = log softmax([W_0; C] P_0ᵀ h + [b_0; c])[w]                       for w in the head,
        log p(w) = log p_head(cluster c) + log softmax(W_c P_cᵀ h + b_c)[w - low_c]   for w in tail cluster c.
    The softmax computes with its own parameters only: W_c (``weights``, one per embedding table), b_c (``biases``),
    P_c (``projections``, one per cluster when the embeddings are projected). With ``tie_word_embeddings`` the W_c
    are the input embedding tables and with ``tie_projs[c]`` P_c is the input projection: the same ``Parameter``s,
    registered here by the LM head's ``_tied_weights_keys`` (as transformers' TransfoXL tied
    ``crit.out_layers[i].weight`` to ``word_emb.emb_layers[i].weight``), so they are stored once and saved under
    the input's names. Without cutoffs this is the ordinary softmax log softmax(W P h + b).
    """

    def __init__(self, config: ScratchTransfoXLConfig):
        super().__init__()
        self.config = config
        tables = embedding_tables(config)
        self.widths = [width for _, _, width in tables]
        self.biases = _OutputBiases(nn.Parameter(torch.empty(high - low)) for low, high, _ in tables)
        self.weights = _OutputWeights(nn.Parameter(torch.empty(high - low, width)) for low, high, width in tables)
        self.projections = _ProjectionsByCluster(
            {
                str(cluster): nn.Parameter(torch.empty(config.hidden_size, self._cluster_width(cluster)))
                for cluster in range(config.num_clusters)
                if config.has_projection
            }
        )
        if config.num_clusters > 1:
            self.cluster_weight = nn.Parameter(torch.empty(config.num_clusters - 1, config.embedding_size))
            self.cluster_bias = nn.Parameter(torch.empty(config.num_clusters - 1))

    def _cluster_width(self, cluster: int) -> int:
        return self.widths[0] if self.config.div_val == 1 else self.widths[cluster]

    @property
    def weight(self) -> torch.Tensor:
        """The output embedding matrix when there is one table (``div_val == 1``), as a linear output layer has it
        (accelerate's FSDP groups it with the input embedding it is tied to); AttributeError otherwise."""
        if len(self.weights) != 1:
            raise AttributeError(
                "the adaptive softmax has one output table per cluster (div_val > 1), no single weight"
            )
        return self.weights[0]

    def cluster_bounds(self) -> list[tuple[int, int]]:
        """[low, high) token ids of each cluster: the cutoffs, then the vocabulary size now, the rows of the biases
        (new tokens from ``resize_token_embeddings`` join the last, rarest cluster)."""
        ends = [0] + self.config.filled_cutoffs + [sum(bias.shape[0] for bias in self.biases)]
        return list(zip(ends, ends[1:]))

    def resize_rarest_cluster(self, rows: int, mean_resizing: bool = True) -> None:
        """Give the last output table ``rows`` rows, as ``resize_token_embeddings`` does to the last input table:
        the kept rows keep their values. New rows start as the mean of the old ones with ``mean_resizing`` (new
        tokens then take about an average token's probability, transformers' rule for untied output layers), else
        at bias 0 and N(0, initializer_range) output embeddings. (Tied output embeddings are the input table: the
        model ties them again.)"""

        def resized(old: nn.Parameter, random_row: Callable[[torch.Tensor], torch.Tensor]) -> nn.Parameter:
            new = old.new_empty(rows, *old.shape[1:])
            kept = min(rows, old.shape[0])
            new[:kept] = old[:kept]
            if rows > kept:
                new[kept:] = old.mean(dim=0) if mean_resizing else random_row(new[kept:])
            return nn.Parameter(new, requires_grad=old.requires_grad)

        with torch.no_grad():
            self.biases[-1] = resized(self.biases[-1], torch.zeros_like)
            if not self.config.tie_word_embeddings:
                std = self.config.initializer_range
                self.weights[-1] = resized(self.weights[-1], lambda rows_: rows_.normal_(0.0, std))

    def cluster_parameters(
        self, cluster: int, device: torch.device | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(W_c, b_c, P_c or None) of one cluster, on ``device`` if given (the hidden states'): with
        device_map="auto" over several devices the softmax's tensors may sit on different ones (its parameter lists
        have no forward for accelerate to hook)."""
        table = 0 if self.config.div_val == 1 else cluster
        weight, bias = self.weights[table], self.biases[table]
        if self.config.div_val == 1:  # one table for the whole vocabulary: slice the cluster out of it
            low, high = self.cluster_bounds()[cluster]
            weight, bias = weight[low:high], bias[low:high]
        projection = self.projections[str(cluster)] if len(self.projections) else None
        if device is not None:
            weight, bias = weight.to(device), bias.to(device)
            projection = projection.to(device) if projection is not None else None
        return weight, bias, projection

    @staticmethod
    def _logits(
        hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, projection: torch.Tensor | None
    ) -> torch.Tensor:
        if projection is not None:
            hidden = F.linear(hidden, projection.t())
        return F.linear(hidden, weight, bias)

    def target_log_probs(self, hidden_states: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """log p(target | h) for (N, hidden) states and N targets, without the full distribution: the head for
        every token, each tail cluster only for the tokens whose target lies in it (what makes the adaptive
        softmax cheap, Grave et al. §3). Targets of -100 get 0."""
        bounds, device = self.cluster_bounds(), hidden_states.device
        weight, bias, projection = self.cluster_parameters(0, device)
        if len(bounds) > 1:
            weight = torch.cat([weight, self.cluster_weight.to(device)], dim=0)
            bias = torch.cat([bias, self.cluster_bias.to(device)], dim=0)
        head = torch.log_softmax(self._logits(hidden_states, weight, bias, projection).float(), dim=-1)
        log_probs = torch.zeros(targets.shape, dtype=head.dtype, device=head.device)
        shortlist = bounds[0][1]
        in_head = (targets >= 0) & (targets < shortlist)
        log_probs[in_head] = head[in_head].gather(-1, targets[in_head, None])[:, 0]
        for cluster in range(1, len(bounds)):
            low, high = bounds[cluster]
            # (an empty cluster runs on empty tensors: branching on it would break a torch.compile graph)
            rows = ((targets >= low) & (targets < high)).nonzero().squeeze(1)
            tail = torch.log_softmax(
                self._logits(hidden_states[rows], *self.cluster_parameters(cluster, device)).float(), dim=-1
            )
            log_probs[rows] = (
                head[rows, shortlist + cluster - 1] + tail.gather(-1, (targets[rows] - low)[:, None])[:, 0]
            )
        return log_probs

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(…, hidden_size) → (…, vocab_size) log-probabilities."""
        bounds, device = self.cluster_bounds(), hidden_states.device
        weight, bias, projection = self.cluster_parameters(0, device)
        if len(bounds) == 1:
            return torch.log_softmax(self._logits(hidden_states, weight, bias, projection).float(), dim=-1)
        head_weight = torch.cat([weight, self.cluster_weight.to(device)], dim=0)
        head_bias = torch.cat([bias, self.cluster_bias.to(device)], dim=0)
        head = torch.log_softmax(self._logits(hidden_states, head_weight, head_bias, projection).float(), dim=-1)
        shortlist = bounds[0][1]
        pieces = [head[..., :shortlist]]
        for cluster in range(1, len(bounds)):
            tail = torch.log_softmax(
                self._logits(hidden_states, *self.cluster_parameters(cluster, device)).float(), dim=-1
            )
            pieces.append(head[..., shortlist + cluster - 1, None] + tail)
        return torch.cat(pieces, dim=-1)


def init_adaptive_weights(module: nn.Module, std: float, projection_std: float) -> None:
    """Transformer-XL's init="normal" for the parameters the adaptive modules hold themselves: projections
    N(0, projection_std), output embeddings and cluster weights N(0, std), biases 0. (The embedding tables are
    ``nn.Embedding``s, initialised with the model's other weights.) transformers initialises each module that owns
    parameters directly, hence the small parameter-list classes."""
    if isinstance(module, (_Projections, _ProjectionsByCluster)):
        for projection in module.parameters():
            init.normal_(projection, mean=0.0, std=projection_std)
    elif isinstance(module, _OutputWeights):
        for weight in module:
            init.normal_(weight, mean=0.0, std=std)
    elif isinstance(module, _OutputBiases):
        for bias in module:
            init.zeros_(bias)
    elif isinstance(module, AdaptiveSoftmax) and hasattr(module, "cluster_weight"):
        init.normal_(module.cluster_weight, mean=0.0, std=std)
        init.zeros_(module.cluster_bias)

"""Transformer-XL (Dai et al. 2019, "Transformer-XL: Attentive Language Models Beyond a Fixed-Length Context"), from
scratch, read top-down in the order of the paper:

1. adaptive input embeddings (Baevski & Auli 2019; ``adaptive_softmax.py``): frequent words get wide vectors, rare
   ones narrow vectors projected to the model width, all scaled by √d_model;
2. segment-level recurrence (§3.2): every layer attends over [SG(m^{n-1}_τ) ∘ h^{n-1}_τ], the stop-gradient memory
   of the previous segment(s) concatenated with the current one; the new memory is the last ``mem_len`` inputs of
   each layer, detached;
3. relative positional encoding (§3.3): the score between query i and key j is
       A^rel_{i,j} = (a) q_iᵀ k_j + (b) q_iᵀ W_R R_{i-j} + (c) uᵀ k_j + (d) vᵀ W_R R_{i-j}
   with R the sinusoidal encoding of the distance i - j (clamped at ``clamp_len``), u and v learned; (b)+(d) are
   computed for all distances at once and aligned by the relative shift (appendix B);
4. the layer (the N-layer computation at the end of §3.3): causal relative attention over memory + segment,
   residual + LayerNorm, position-wise feed-forward (ReLU), residual + LayerNorm (post-LN, or pre-LN with
   ``pre_norm``);
5. the adaptive softmax (Grave et al. 2017; ``adaptive_softmax.py``) over the clustered vocabulary, whose weights
   and projections may be tied to the adaptive input (the same parameters, registered in both modules by
   ``_tied_weights_keys``).

Memory is ``mems``: a list with one (batch, memory_length, hidden_size) tensor per layer, returned by every forward
and passed back in for the next segment (batch-first; the converter handles the reference's sequence-first layout).
``generate`` carries it as a ``ScratchTransfoXLMemory``, which also counts the tokens read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from transformers import initialization as init
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.utils import ModelOutput

from .adaptive_softmax import AdaptiveEmbedding, AdaptiveSoftmax, embedding_tables, init_adaptive_weights
from .checks import check_mask_of_last_tokens, check_next_token_labels, check_one_input
from .configuration_transfo_xl import ScratchTransfoXLConfig
from .heads import IGNORE_INDEX, causal_lm_loss, next_token_labels, per_item
from .kernels import attend
from .layers import FeedForward, ResidualNorm, kernel_settings, merge_heads, run_layers, split_heads
from .masks import AttentionMask, memory_mask
from .modeling_common import (
    DecodingState,
    ScratchGenerationMixin,
    ScratchPreTrainedModel,
    already_normalised,
    normalise_inputs,
)
from .positional import relative_sinusoidal_embedding

# --------------------------------------------------------------------------------------------------------------
# 3. Relative multi-head attention: A_rel = (a) + (b) + (c) + (d)
# --------------------------------------------------------------------------------------------------------------


def relative_shift(position_scores: torch.Tensor) -> torch.Tensor:
    """Align the position scores: (batch, heads, q, k) with column r holding distance k-1-r for every query → column j
    holding the distance between query i and key j, i.e. (mem + i) - j.

    The paper's trick (appendix B): pad one zero column on the left, read the (q, k+1) block as (k+1, q), drop the
    first row and read it back as (q, k). Row i ends up shifted left by q-1-i, with no gather and no index tensor.
    Entries for keys after the query (j > mem + i) are garbage; the causal mask removes them."""
    batch, heads, query_length, key_length = position_scores.shape
    padded = F.pad(position_scores, (1, 0))
    padded = padded.view(batch, heads, key_length + 1, query_length)
    return padded[:, :, 1:].reshape(batch, heads, query_length, key_length)


def add_relative_biases(module: nn.Module, config: ScratchTransfoXLConfig) -> None:
    """Register u (``content_bias``) and v (``position_bias``) of A_rel, one (heads, head_dim) vector each, on
    ``module``: the model, whose pair every layer shares (the paper), or each attention (``untie_r``). The reference
    code calls them r_w_bias and r_r_bias."""
    module.content_bias = nn.Parameter(torch.empty(config.num_attention_heads, config.head_dim))
    module.position_bias = nn.Parameter(torch.empty(config.num_attention_heads, config.head_dim))


class ScratchTransfoXLRelativeAttention(nn.Module):
    """Relative multi-head attention over [memory ∘ segment] (Dai et al. 2019 §3.3, terms (a)-(d)).

    q = W_q h_τ (current segment only), k = W_k [m ∘ h], v = W_v [m ∘ h], W_R R (``position_proj``);
    A_rel = (q + u)ᵀ k  [terms (a) + (c)]  +  shift((q + v)ᵀ W_R R)  [terms (b) + (d)], scaled by 1/√d_head.

    u and v are read, in this forward, from one module, ``biases``: the model that shares its pair with every layer
    (``shared_biases``), or this attention itself with ``untie_r`` (its own pair). ``biases`` is a reference, not a
    submodule, so every parameter is registered once, where its name has always been (a deep copy of the whole model
    copies the reference with it; a deep copy of one shared-bias attention alone copies the model it reads)."""

    biases: ScratchTransfoXLRelativeAttention | ScratchTransfoXLModel  # the module holding u and v
    content_bias: nn.Parameter  # u, with untie_r (add_relative_biases)
    position_bias: nn.Parameter  # v, with untie_r

    def __init__(
        self,
        config: ScratchTransfoXLConfig,
        shared_biases: ScratchTransfoXLRelativeAttention | ScratchTransfoXLModel | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        self.num_heads, self.head_dim = config.num_attention_heads, config.head_dim
        inner = config.num_attention_heads * config.head_dim
        self.qkv_proj = nn.Linear(config.hidden_size, 3 * inner, bias=False)
        self.position_proj = nn.Linear(config.hidden_size, inner, bias=False)
        self.out_proj = nn.Linear(inner, config.hidden_size, bias=False)
        self.dropout = config.attention_probs_dropout_prob
        if shared_biases is None:
            add_relative_biases(self, config)
        # (set in __dict__: nn.Module's __setattr__ would register the model as a submodule and save u, v twice)
        self.__dict__["biases"] = self if shared_biases is None else shared_biases

    def forward(
        self,
        context: torch.Tensor,
        query_length: int,
        relative_positions: torch.Tensor,
        mask: AttentionMask,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        # u, v (on this layer's device: with a device map over several GPUs the model's pair sits on the first)
        content_bias = self.biases.content_bias.to(context.device)
        position_bias = self.biases.position_bias.to(context.device)
        inner = self.num_heads * self.head_dim
        # One call of the projection for memory + segment (hooks and adapters see it); queries are read for the
        # current segment only, keys and values for memory + segment.
        qkv = self.qkv_proj(context)
        query = split_heads(qkv[:, -query_length:, :inner], self.num_heads)
        key, value = (
            split_heads(qkv[..., inner : 2 * inner], self.num_heads),
            split_heads(qkv[..., 2 * inner :], self.num_heads),
        )
        positions = self.position_proj(relative_positions).view(-1, self.num_heads, self.head_dim).transpose(0, 1)

        scale = 1.0 / math.sqrt(self.head_dim)
        position_scores = torch.matmul(query + position_bias[:, None], positions.transpose(-1, -2))  # (b) + (d)
        output, weights = attend(
            query + content_bias[:, None],  # (a) + (c) inside the kernel
            key,
            value,
            mask,
            score_bias=relative_shift(position_scores) * scale,
            scale=scale,
            output_attentions=output_attentions,
            module=self,
            **kernel_settings(self),
        )
        return self.out_proj(merge_heads(output)), weights


# --------------------------------------------------------------------------------------------------------------
# 4. The layer
# --------------------------------------------------------------------------------------------------------------


class ScratchTransfoXLLayer(GradientCheckpointingLayer):
    """h̃ = [SG(m) ∘ h]; a = LN(h + RelAttn(h, h̃)); out = LN(a + FFN(a)) — or the pre-LN variant (Dai et al. 2019,
    the N-layer computation at the end of §3.3). ``shared_biases``: the module whose u and v every layer reads
    (the model), None with ``untie_r`` (each attention has its own)."""

    def __init__(self, config: ScratchTransfoXLConfig, shared_biases: ScratchTransfoXLModel | None = None) -> None:
        super().__init__()
        self.attention = ScratchTransfoXLRelativeAttention(config, shared_biases)
        self.attention_residual = ResidualNorm(
            config.hidden_size, config.layer_norm_eps, config.hidden_dropout_prob, pre_norm=config.pre_norm
        )
        self.feed_forward = FeedForward(
            config.hidden_size,
            config.intermediate_size,
            config.hidden_act,
            activation_dropout=config.hidden_dropout_prob,
        )
        self.feed_forward_residual = ResidualNorm(
            config.hidden_size, config.layer_norm_eps, config.hidden_dropout_prob, pre_norm=config.pre_norm
        )

    def forward(
        self,
        hidden_states: torch.Tensor,
        relative_positions: torch.Tensor,
        mask: AttentionMask,
        memory: torch.Tensor | None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        context = hidden_states if memory is None else torch.cat([memory, hidden_states], dim=1)
        attended, weights = self.attention(
            self.attention_residual.before(context),
            hidden_states.shape[1],
            relative_positions,
            mask,
            output_attentions,
        )
        hidden_states = self.attention_residual.after(hidden_states, attended)
        transformed = self.feed_forward(self.feed_forward_residual.before(hidden_states))
        return self.feed_forward_residual.after(hidden_states, transformed), weights


# --------------------------------------------------------------------------------------------------------------
# The model: the layers over [memory ∘ segment] and the memory they leave (2. segment-level recurrence); the head
# --------------------------------------------------------------------------------------------------------------


class ScratchTransfoXLMemory(DecodingState):
    """The memory ``generate`` carries between steps and returns (``return_dict_in_generate=True``): ``mems``, the
    list a forward returns (None when ``mem_len == 0``), and the number of tokens read so far (``get_seq_length()``;
    the memory keeps at most ``mem_len`` of them, so its length cannot tell). Passed as ``mems``, a forward reads
    its list and returns the next memory as a ``ScratchTransfoXLMemory`` too. What ``generate`` reads of it:
    ``DecodingState``."""

    def __init__(self, mems: list[torch.Tensor] | None, seen_tokens: int, layer_count: int) -> None:
        super().__init__(seen_tokens, layer_count)
        self.mems = mems

    def after(self, mems: list[torch.Tensor] | None, read: int) -> ScratchTransfoXLMemory:
        """The memory after a segment of ``read`` more tokens, whose forward left ``mems``."""
        return ScratchTransfoXLMemory(mems, self.seen_tokens + read, self.layer_count)

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        if self.mems is not None:
            self.mems = [m.index_select(0, beam_idx.to(m.device)) for m in self.mems]


@dataclass
class ScratchTransfoXLModelOutput(ModelOutput):
    """``mems``: the memory for the next segment, one (batch, ≤ mem_len, hidden) tensor per layer (None when
    ``mem_len == 0``), as a ``ScratchTransfoXLMemory`` when the forward was given one."""

    last_hidden_state: torch.Tensor | None = None
    mems: list[torch.Tensor] | ScratchTransfoXLMemory | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


@dataclass
class ScratchTransfoXLLMHeadModelOutput(ModelOutput):
    """``loss``: mean cross-entropy over predicted tokens (labels ≠ -100, shifted inside); ``logits``: the
    log-probabilities of the adaptive softmax (valid logits: their softmax is the distribution)."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    mems: list[torch.Tensor] | ScratchTransfoXLMemory | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


class ScratchTransfoXLPreTrainedModel(ScratchPreTrainedModel):
    """``torch.compile(model, fullgraph=True)`` compiles the forward (and backward) as one graph, with and without
    ``mems``: the first segment (no memory) and the following ones (a full memory, ``mem_len`` per layer, each its
    own contiguous tensor) are two graphs, reused by every later segment (tests/test_compile.py).

    The memory is no transformers ``Cache``, which transformers' flags declare: ``_is_stateful`` (it cannot be
    rolled back to fewer tokens: ``generate`` refuses assisted decoding), ``_supports_default_dynamic_cache() ->
    False`` on the LM head (``generate`` makes no cache for it, and ``ScratchGenerationMixin`` refuses
    ``cache_implementation`` and ``compile_config``), and ``_can_compile_fullgraph = False``, which transformers
    reads as "``generate`` can decode with a static cache and compile its step" (its generation tests skip those)."""

    config_class = ScratchTransfoXLConfig
    config: ScratchTransfoXLConfig
    _is_stateful = True
    _can_compile_fullgraph = False
    _no_split_modules = ["ScratchTransfoXLLayer"]
    _skip_keys_device_placement = ["mems"]
    # transformers' get/set_input_embeddings look here (on the LM head: through ``model``); get_output_embeddings
    # gives ``lm_head``
    _input_embed_layer = "word_embeddings"

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """The reference's init="normal": weights N(0, init_std), projections N(0, proj_init_std), LayerNorm gains
        N(1, init_std), biases 0 (the adaptive input's and softmax's own parameters: ``init_adaptive_weights``)."""
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, nn.Embedding)):
            init.normal_(module.weight, mean=0.0, std=std)
            bias = getattr(module, "bias", None)  # nn.Embedding has none
            if bias is not None:
                init.zeros_(bias)
        elif isinstance(module, nn.LayerNorm):
            init.normal_(module.weight, mean=1.0, std=std)
            init.zeros_(module.bias)
        else:
            init_adaptive_weights(module, std, self.config.proj_init_std)
        if isinstance(module, (ScratchTransfoXLRelativeAttention, ScratchTransfoXLModel)) and hasattr(
            module, "content_bias"
        ):
            init.normal_(module.content_bias, mean=0.0, std=std)
            init.normal_(module.position_bias, mean=0.0, std=std)

    def resize_token_embeddings(  # type: ignore[override]  # transformers types it nn.Embedding; this one is adaptive
        self, new_num_tokens: int | None = None, pad_to_multiple_of: int | None = None, mean_resizing: bool = True
    ) -> AdaptiveEmbedding:
        """Resize the vocabulary to ``new_num_tokens`` (rounded up to ``pad_to_multiple_of``). Added or removed
        tokens belong to the rarest cluster, as in the reference (its ``layer=-1``): the last table of the adaptive
        input grows or shrinks (transformers' resizing of one embedding table, ``mean_resizing`` included), and with
        it the last cluster of the adaptive softmax (its biases, and its output embeddings when untied); the cutoffs
        stay. Returns the adaptive embedding."""
        embedding = self.get_input_embeddings()
        if not isinstance(embedding, AdaptiveEmbedding):
            raise ValueError(
                f"resize_token_embeddings resizes the adaptive input embedding, got {type(embedding).__name__}."
            )
        if new_num_tokens is None and pad_to_multiple_of is None:
            return embedding
        new_num_tokens = embedding.num_embeddings if new_num_tokens is None else new_num_tokens
        if pad_to_multiple_of is not None:
            new_num_tokens = -(-new_num_tokens // pad_to_multiple_of) * pad_to_multiple_of
        last_cutoff = max(self.config.filled_cutoffs, default=0)
        if new_num_tokens <= last_cutoff:
            raise ValueError(
                f"Cannot resize the vocabulary to {new_num_tokens} tokens: tokens are added to or removed from the "
                f"rarest cluster of the adaptive softmax, which starts at the last cutoff ({last_cutoff}); keep more "
                "than that many tokens, or build the model with smaller cutoffs."
            )
        low = embedding.table_bounds()[-1][0]
        old_table = embedding.embeddings[-1]
        if not isinstance(old_table, nn.Embedding):  # (transformers' _get_resized_embeddings raises the same)
            raise TypeError(f"The rarest cluster's table is a {type(old_table).__name__}, not an nn.Embedding.")
        new_table = self._get_resized_embeddings(old_table, new_num_tokens - low, mean_resizing=mean_resizing)
        new_table.requires_grad_(old_table.weight.requires_grad)
        embedding.embeddings[-1] = new_table
        head = getattr(self, "lm_head", None)
        if isinstance(head, AdaptiveSoftmax):
            head.resize_rarest_cluster(new_num_tokens - low, mean_resizing)
        self.config.vocab_size = new_num_tokens
        self.vocab_size = new_num_tokens
        self.tie_weights()  # a tied last output table is the new input table
        return embedding


class ScratchTransfoXLModel(ScratchTransfoXLPreTrainedModel):
    """Adaptive input → L relative-attention layers over [memory ∘ segment]; returns the new memory (``mems``).

    Without ``mems`` the first segment starts from an empty memory, as in the paper and the original code.
    (transformers' TransfoXL started from ``mem_len`` zero vectors per layer; pass those as ``mems`` to reproduce
    its outputs for a first segment.)"""

    content_bias: nn.Parameter  # u, shared by every layer unless untie_r (add_relative_biases)
    position_bias: nn.Parameter  # v, likewise

    def __init__(self, config: ScratchTransfoXLConfig) -> None:
        super().__init__(config)
        self.word_embeddings = AdaptiveEmbedding(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        shared_biases = None
        if not config.untie_r:  # u and v are the model's, read by every layer
            add_relative_biases(self, config)
            shared_biases = self
        self.layers = nn.ModuleList(
            ScratchTransfoXLLayer(config, shared_biases) for _ in range(config.num_hidden_layers)
        )
        self.post_init()

    # -- memory ----------------------------------------------------------------------------------------------
    def _check_mems(self, mems: object, batch_size: int) -> list[torch.Tensor] | None:
        if isinstance(mems, ScratchTransfoXLMemory):
            mems = mems.mems
        if mems is None:
            return None
        if not isinstance(mems, (list, tuple)) or len(mems) != self.config.num_hidden_layers:
            raise ValueError(
                f"mems must be a list of {self.config.num_hidden_layers} tensors (one per layer, as returned in "
                f"outputs.mems) or a ScratchTransfoXLMemory, got {type(mems).__name__} of length "
                f"{len(mems) if hasattr(mems, '__len__') else '?'}."
            )
        lengths = {tuple(m.shape) for m in mems}
        shape = next(iter(lengths))
        if len(lengths) != 1 or len(shape) != 3 or shape[0] != batch_size or shape[2] != self.config.hidden_size:
            raise ValueError(
                f"every mems tensor must have shape (batch={batch_size}, memory_length, hidden_size="
                f"{self.config.hidden_size}), got {sorted(lengths)}: pass the mems the previous segment of the same "
                "batch returned (they are batch-first)."
            )
        return list(mems) if shape[1] > 0 else None

    def _update_mems(
        self, layer_inputs: list[torch.Tensor], mems: list[torch.Tensor] | None
    ) -> list[torch.Tensor] | None:
        """New memory of each layer: the last ``mem_len`` of [old memory ∘ this segment's layer input], detached
        (the stop-gradient SG(·) of Dai et al. 2019 §3.2). ``mem_len`` is read from the config now. Each memory
        is its own contiguous tensor: a view would keep the whole layer input alive, and give every segment other
        strides (a torch.compile guard: a recompilation per segment)."""
        mem_len = self.config.mem_len
        if mem_len == 0:
            return None
        with torch.no_grad():
            if mems is None:
                return [h[:, -mem_len:].detach().contiguous() for h in layer_inputs]
            return [torch.cat([m, h], dim=1)[:, -mem_len:].detach().contiguous() for m, h in zip(mems, layer_inputs)]

    # -- positions --------------------------------------------------------------------------------------------
    def _relative_positions(self, key_length: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        """R for the distances key_length-1 … 0 (the first key is the farthest), clamped at ``clamp_len``."""
        distances = torch.arange(key_length - 1, -1, -1, device=device, dtype=torch.float32)
        if self.config.clamp_len > 0:
            distances = distances.clamp(max=self.config.clamp_len)
        return relative_sinusoidal_embedding(distances, self.config.hidden_size).to(dtype)

    @normalise_inputs
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        mems: list[torch.Tensor] | ScratchTransfoXLMemory | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
    ) -> ScratchTransfoXLModelOutput:
        batch, query_length = check_one_input(input_ids, inputs_embeds).shape[:2]
        counted = mems if isinstance(mems, ScratchTransfoXLMemory) else None
        mems = self._check_mems(mems, batch)
        memory_length = 0 if mems is None else mems[0].shape[1]
        key_length = memory_length + query_length

        # The user's 0/1 mask covers the segment, optionally preceded by earlier tokens (as ``generate`` passes it);
        # causal over memory + segment; with ``same_length`` each query also sees at most ``mem_len`` keys.
        key_is_real = check_mask_of_last_tokens(attention_mask, batch, query_length)
        embedded = self.word_embeddings(input_ids) if inputs_embeds is None else inputs_embeds
        device = embedded.device
        window = self.config.mem_len if self.config.same_length and key_length > self.config.mem_len else None
        mask = memory_mask(key_is_real, query_length, key_length, window, device)
        relative_positions = self.dropout(self._relative_positions(key_length, device, embedded.dtype))

        memories = mems if mems is not None else [None] * len(self.layers)

        def call(
            layer_and_memory: tuple[ScratchTransfoXLLayer, torch.Tensor | None], hidden_states: torch.Tensor
        ) -> tuple[torch.Tensor, torch.Tensor | None]:
            layer, memory = layer_and_memory
            return layer(hidden_states, relative_positions, mask, memory, output_attentions)

        # every layer's input is kept (the next segment's memory), then the output after dropout
        hidden_states, all_hidden_states, (all_attentions,) = run_layers(
            zip(self.layers, memories), self.dropout(embedded), call, True, output_attentions, final_norm=self.dropout
        )
        assert all_hidden_states is not None  # asked for above (True)
        layer_inputs = list(all_hidden_states[:-1])
        new_mems = self._update_mems(layer_inputs, mems)
        return ScratchTransfoXLModelOutput(
            last_hidden_state=hidden_states,
            mems=new_mems if counted is None else counted.after(new_mems, query_length),
            hidden_states=all_hidden_states if output_hidden_states else None,
            attentions=all_attentions,
        )


class ScratchTransfoXLLMHeadModel(ScratchTransfoXLPreTrainedModel, ScratchGenerationMixin):
    """Transformer-XL language model: the model above + the adaptive softmax. ``loss`` is the mean next-token
    cross-entropy (labels shifted inside, -100 ignored); ``generate`` carries ``mems`` between steps."""

    def __init__(self, config: ScratchTransfoXLConfig) -> None:
        super().__init__(config)
        self.model = ScratchTransfoXLModel(config)
        self.lm_head = AdaptiveSoftmax(config)
        self.loss_type = "ForCausalLM"  # Trainer counts num_items_in_batch over the shifted labels
        self.post_init()

    def configured_ties(self) -> dict[str, str]:
        """{softmax parameter: input parameter}: W_c is the input table E_c with ``tie_word_embeddings``, and P_c
        the input projection of its table with ``tie_projs[c]``."""
        config, ties = self.config, {}
        if config.tie_word_embeddings:
            for table in range(len(embedding_tables(config))):
                ties[f"lm_head.weights.{table}"] = f"model.word_embeddings.embeddings.{table}.weight"
        if config.has_projection:
            for cluster, tied in enumerate(config.filled_tie_projs):
                if tied:
                    table = 0 if config.div_val == 1 else cluster
                    ties[f"lm_head.projections.{cluster}"] = f"model.word_embeddings.projections.{table}"
        return ties

    @normalise_inputs(unlisted=("shift_labels",))  # a second label name would hide the loss from the Trainer
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        mems: list[torch.Tensor] | ScratchTransfoXLMemory | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        num_items_in_batch: int | None = None,
        logits_to_keep: int = 0,
        shift_labels: torch.Tensor | None = None,
    ) -> ScratchTransfoXLLMHeadModelOutput:
        """``labels`` are the inputs (shifted inside); ``shift_labels``, already shifted (what transformers passes
        under context parallelism), take their place when given. ``logits_to_keep``: log-probabilities only for the
        last n positions (0: all); ``generate`` asks for 1. The loss never needs them: with ``logits_to_keep`` set it
        scores only each target (the adaptive softmax's cheap path), the way perplexity evaluation should."""
        check_next_token_labels(input_ids, inputs_embeds, labels, shift_labels, self.config.vocab_size)
        outputs = self.model(
            input_ids=input_ids,
            mems=mems,
            attention_mask=attention_mask,
            inputs_embeds=inputs_embeds,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            **already_normalised(),
        )
        hidden_states = outputs.last_hidden_state
        logits = self.lm_head(hidden_states[:, -logits_to_keep:] if logits_to_keep else hidden_states)
        loss = None
        if not logits_to_keep:
            loss = causal_lm_loss(logits, labels, num_items_in_batch, shift_labels)
        elif labels is not None or shift_labels is not None:
            targets = next_token_labels(labels, shift_labels)
            assert targets is not None  # labels or shift_labels is given
            loss = self._target_only_loss(hidden_states, targets, num_items_in_batch)
        return ScratchTransfoXLLMHeadModelOutput(
            loss=loss,
            logits=logits,
            mems=outputs.mems,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )

    def _target_only_loss(
        self, hidden_states: torch.Tensor, targets: torch.Tensor, num_items_in_batch: int | torch.Tensor | None
    ) -> torch.Tensor:
        """The same mean (or sum / num_items_in_batch) negative log-likelihood as token_cross_entropy, from the
        targets' log-probabilities alone."""
        targets = targets.reshape(-1).to(hidden_states.device)
        log_probs = self.lm_head.target_log_probs(hidden_states.reshape(-1, hidden_states.shape[-1]), targets)
        count = (targets != IGNORE_INDEX).sum() if num_items_in_batch is None else num_items_in_batch
        return per_item(-log_probs.sum(), count)

    # -- generate() carries the memory: outputs.mems → the generation cache → mems -----------------------------
    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        return False  # the memory is not a transformers Cache

    def decoding_state(
        self, outputs: ScratchTransfoXLLMHeadModelOutput
    ) -> list[torch.Tensor] | ScratchTransfoXLMemory | None:
        return outputs.mems

    def prepare_inputs_for_generation(
        self,
        input_ids: torch.Tensor,
        inputs_embeds: torch.Tensor | None = None,
        cache: ScratchTransfoXLMemory | None = None,
        past_key_values: ScratchTransfoXLMemory | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """transformers' preparation — every keyword it does not consume goes on to ``forward`` (``output_attentions``,
        ``output_hidden_states``, ``inputs_embeds`` on the first step, …) — with the memory as ``mems``. With
        ``use_cache`` (consumed here: the memory is the cache) the memory is a ``ScratchTransfoXLMemory``, which
        counts the tokens read: ``generate`` feeds only the newest token after the first step, and the memory holds
        everything before it, and a later ``generate`` handed the memory an earlier one returned feeds only the tokens
        after those it has read. With ``use_cache=False`` every step feeds the whole sequence, and no memory is
        carried; so too with ``mem_len=0``, which keeps no memory to carry (as in the reference). A memory given to
        ``generate`` as ``mems`` is the context before the prompt. (``generate`` hands the memory on under the cache's
        name, ``cache`` from transformers 5.24 on, ``past_key_values`` before.)"""
        carried = cache if cache is not None else past_key_values
        given = kwargs.pop("mems", None)
        use_cache = kwargs.pop("use_cache", None)
        if self.config.mem_len == 0:  # no memory is kept: every step reads the whole sequence, as without use_cache
            if inputs_embeds is not None:
                raise ValueError(
                    "This Transformer-XL keeps no memory (mem_len=0), so after the first step generate() could not "
                    "see a prompt given as inputs_embeds: pass input_ids, or set model.config.mem_len > 0."
                )
            kwargs.pop("next_sequence_length", None)  # (generate would feed only the newest token)
            given = given.mems if isinstance(given, ScratchTransfoXLMemory) else given
        elif use_cache and carried is None and not isinstance(given, ScratchTransfoXLMemory):
            given = ScratchTransfoXLMemory(given, seen_tokens=0, layer_count=self.config.num_hidden_layers)
        inputs = super().prepare_inputs_for_generation(input_ids, inputs_embeds=inputs_embeds, **kwargs)
        inputs["mems"] = carried if carried is not None else given
        return inputs

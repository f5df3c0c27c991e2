"""GPT (Radford et al. 2018) and, by ``layer_norm_placement="pre"``, GPT-2 (Radford et al. 2019), from scratch, read
top-down in the order of the GPT-1 paper (Radford et al. 2018 §3.1–3.3; GPT-2's changes: Radford et al. 2019 §2.3):

1. input: h_0 = U W_e + W_p — token embeddings plus learned position embeddings (§3.1, eq. 2), then dropout;
2. a stack of Transformer decoder blocks without cross-attention: masked (causal) multi-head self-attention and a
   position-wise feed-forward network with GELU, each with a residual connection and LayerNorm — after the
   sub-layer (GPT-1, post-LN) or before it with a final LayerNorm (GPT-2, pre-LN);
3. unsupervised pre-training: P(u) = softmax(h_n W_eᵀ), the LM head tied to the token embeddings, trained with
   L1 = Σ log P(u_i | u_{i-k} … u_{i-1}) (§3.1, eq. 1); ``generate`` through transformers' ``DynamicCache``, or
   its ``StaticCache`` (``cache_implementation="static"``: fixed shapes for a compiled decoding step; the masks
   cover every slot of the cache and the positions come from it, see ``masks.cache_layout``);
4. supervised fine-tuning: P(y | x) = softmax(h_l^m W_y) on the final state of the last (extract) token (§3.2,
   eq. 3-4), with the auxiliary objective L3 = L2 + λ·L1 (eq. 5, λ = ``config.lm_loss_weight``); the task input
   transformations of §3.3 (classification, entailment, similarity, multiple choice) are built by
   ``tools.gpt_input_transforms``: similarity feeds both orderings, whose final states are summed (3-D inputs to
   ``ScratchGPTForSequenceClassification``), multiple choice scores each choice and normalises with a softmax
   over the choices (``ScratchGPTForMultipleChoice`` with transformers' multiple-choice contract;
   ``ScratchGPTDoubleHeadsModel`` adds the auxiliary LM objective).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from transformers import Cache, DynamicCache
from transformers import initialization as init
from transformers.modeling_outputs import (
    BaseModelOutputWithPast,
    CausalLMOutputWithPast,
    MultipleChoiceModelOutput,
    SequenceClassifierOutputWithPast,
)
from transformers.utils import ModelOutput

from .checks import (
    check_class_labels,
    check_decoder_mask,
    check_input_ids,
    check_next_token_labels,
    check_one_input,
    check_position_ids,
    check_positions,
    choice_dimensions,
    embedding_rows,
    scored_classes,
    values_pass,
)
from .configuration_gpt import ScratchGPTConfig
from .heads import (
    causal_lm_loss,
    check_sequence_labels,
    flatten_choices,
    label_count,
    sequence_classification_loss,
    token_cross_entropy,
)
from .layers import TransformerBlock, get_activation, run_layers
from .masks import cache_layout, decoder_self_attention_mask
from .modeling_common import (
    ScratchGenerationMixin,
    ScratchPreTrainedModel,
    already_normalised,
    cache_output,
    normalise_inputs,
    returned_cache,
)

# --------------------------------------------------------------------------------------------------------------
# 1. Input representation
# --------------------------------------------------------------------------------------------------------------


def positions_from_attention_mask(key_is_real: torch.Tensor, cache_positions: torch.Tensor) -> torch.Tensor:
    """Position of each new token, counting only real tokens before it.

    ``key_is_real`` covers the cache's key slots, (batch, key_length): the cached tokens and the new ones, which sit
    at ``cache_positions`` (the last columns, or a static cache's next slots). A left-padded row [pad, pad, a, b]
    gets positions [0, 0, 0, 1]: its first real token sits at position 0, as it would unpadded. Padding positions
    are set to 0 (their outputs are never read).
    """
    positions = key_is_real.long().cumsum(-1) - 1
    positions = positions.masked_fill(~key_is_real, 0)
    return positions[:, cache_positions]


def default_positions(key_is_real: torch.Tensor | None, cache_positions: torch.Tensor) -> torch.Tensor:
    """The positions of the new tokens when the caller gives none: counted over the real tokens where a mask says
    which are real (left padding), else the cache slots they fill."""
    if key_is_real is not None:
        return positions_from_attention_mask(key_is_real, cache_positions)
    return cache_positions[None, :]


class ScratchGPTEmbeddings(nn.Module):
    """h_0 = U W_e + W_p (GPT-1 eq. 2), then dropout: W_p a learned vector per position (the model checks that the
    positions are in its table). ``token_type_ids``, when given, are looked up in the token table W_e as well and
    added (what the reference implementations do, e.g. for dialogue segments)."""

    def __init__(self, config: ScratchGPTConfig) -> None:
        super().__init__()
        self.word = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.dropout = nn.Dropout(config.embedding_dropout_prob)

    def forward(
        self,
        input_ids: torch.Tensor | None,
        position_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if inputs_embeds is None:
            inputs_embeds = self.word(input_ids)
        # (.to: with device_map="auto" over several devices the tables may sit on different ones, as in GPT-2's)
        embeddings = inputs_embeds + self.position(position_ids).to(inputs_embeds.device)
        if token_type_ids is not None:
            check_input_ids(token_type_ids, embedding_rows(self.word), name="token_type_ids")
            embeddings = embeddings + self.word(token_type_ids)
        return self.dropout(embeddings)


# --------------------------------------------------------------------------------------------------------------
# 2. The decoder block: masked self-attention and feed-forward, each with residual + LayerNorm
# --------------------------------------------------------------------------------------------------------------


class ScratchGPTLayer(TransformerBlock):
    """GPT-1 (post-LN):  h = LN(x + MaskedMultiHead(x)),       out = LN(h + FFN(h))
    GPT-2 (pre-LN):   h = x + MaskedMultiHead(LN(x)),       out = h + FFN(LN(h))

    The causal mask lets position i attend positions ≤ i only — the LM objective of GPT-1 eq. 1 conditions on the
    preceding tokens, so predicting B in "A B C D" must not see B, C or D (the decoder's masking, Vaswani et al.
    2017 §3.2.3); the cached keys of earlier steps are read from and appended to ``past_key_values``. The layer is
    the shared Transformer block (``layers.TransformerBlock``) under the causal mask: a decoder block without
    cross-attention.
    """

    def __init__(self, config: ScratchGPTConfig, layer_idx: int) -> None:
        # GPT's "gelu_new" (the tanh approximation of GELU) runs as torch's fused kernel: see layers.get_activation
        assert config.intermediate_size is not None  # derive_defaults fills it, check() requires a positive int
        super().__init__(
            config, layer_idx, config.num_attention_heads, config.intermediate_size, pre_norm=config.pre_norm
        )


class ScratchGPTPreTrainedModel(ScratchPreTrainedModel):
    """transformers' own ``get/set_input_embeddings`` find ``embeddings.word`` by ``_input_embed_layer``, and its
    ``get/set_output_embeddings`` the heads' ``lm_head``."""

    config_class = ScratchGPTConfig
    _input_embed_layer = "word"
    _can_compile_fullgraph = True  # every head, forward and backward; decoding with a StaticCache too
    _supports_attention_backend = True  # standard attention: kernels of transformers' AttentionInterface run it
    _supports_flex_attn = True
    _no_split_modules = ["ScratchGPTLayer"]
    _skip_keys_device_placement = ["past_key_values"]
    counterparts_return_the_cache = True  # GPT-2's classifier and double heads return the decoder's cache

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """N(0, initializer_range) everywhere (GPT-1 §4.1); the projections that write into the residual stream
        are scaled down by 1/√(2·layers), as GPT-2 does (§2.3), so the residual sum keeps its scale with depth."""
        super()._init_weights(module)
        if isinstance(module, ScratchGPTLayer):
            std = self.config.initializer_range / math.sqrt(2 * self.config.num_hidden_layers)
            init.normal_(module.attention.out_proj.weight, mean=0.0, std=std)
            init.normal_(module.feed_forward.fc_out.weight, mean=0.0, std=std)


class ScratchGPTModel(ScratchGPTPreTrainedModel):
    """The GPT decoder: embeddings → L masked self-attention blocks → (GPT-2 only) final LayerNorm.

    The mask (``masks.decoder_self_attention_mask``): causal ∧ key padding; a padding-free batch (position_ids
    that restart, no mask, no cache) attends within each of its sequences; a 4-D mask is the whole relation."""

    # position_ids that restart, and their flash-attention description (modeling_common.packed_boundaries_kept)
    accepts_padding_free_batches = True

    def __init__(self, config: ScratchGPTConfig) -> None:
        super().__init__(config)
        self.embeddings = ScratchGPTEmbeddings(config)
        self.layers = nn.ModuleList(ScratchGPTLayer(config, i) for i in range(config.num_hidden_layers))
        self.final_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps) if config.pre_norm else None
        self.post_init()

    def _checked_input(self, input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None) -> torch.Tensor:
        """The one of ``input_ids`` / ``inputs_embeds`` given, checked: ids within the live vocabulary, embeddings
        shaped (batch, length, hidden)."""
        reference = check_one_input(input_ids, inputs_embeds)
        if input_ids is not None:
            check_input_ids(input_ids, embedding_rows(self.embeddings.word))
        elif reference.dim() != 3:  # reference is inputs_embeds here
            raise ValueError(f"inputs_embeds must have shape (batch, length, hidden), got {tuple(reference.shape)}.")
        return reference

    def _checked_positions(
        self,
        position_ids: torch.Tensor | None,
        checked_mask: torch.Tensor | None,
        cache_positions: torch.Tensor,
        batch: int,
    ) -> torch.Tensor:
        """The new tokens' positions, checked against the table W_p: as given (one per new token), else counted over
        the real tokens of the checked mask (``default_positions``; a 4-D mask says nothing of padding, so not from
        it)."""
        if position_ids is not None:
            check_position_ids(position_ids, batch, len(cache_positions))
        else:
            key_is_real = checked_mask if checked_mask is not None and checked_mask.dim() == 2 else None
            position_ids = default_positions(key_is_real, cache_positions)
        check_positions(position_ids, embedding_rows(self.embeddings.position))
        return position_ids

    @normalise_inputs
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
    ) -> BaseModelOutputWithPast:
        reference = self._checked_input(input_ids, inputs_embeds)
        batch, length = reference.shape[:2]
        if use_cache and past_key_values is None:
            past_key_values = DynamicCache(config=self.config)
        elif not use_cache:
            past_key_values = None
        key_length, cache_positions, static = cache_layout(past_key_values, length, reference.device)
        # The mask covers the key slots: the cached tokens and the new ones (and a static cache's empty slots).
        checked_mask = check_decoder_mask(attention_mask, batch, key_length, cache_positions, static)
        positions = self._checked_positions(position_ids, checked_mask, cache_positions, batch)

        # Built once for every layer: causal ∧ key padding; packed sequences (position_ids that restart, no mask, no
        # cache) attend within themselves.
        cached = past_key_values is not None
        mask = decoder_self_attention_mask(
            checked_mask, batch, key_length, cache_positions, static, position_ids=position_ids, cached=cached
        )
        hidden_states = self.embeddings(input_ids, positions, token_type_ids, inputs_embeds)
        hidden_states, all_hidden_states, (all_attentions,) = run_layers(
            self.layers,
            hidden_states,
            lambda layer, x: layer(x, mask, past_key_values=past_key_values, output_attentions=output_attentions),
            output_hidden_states,
            output_attentions,
            self.final_norm,
        )
        return BaseModelOutputWithPast(
            last_hidden_state=hidden_states,
            **cache_output(past_key_values),
            hidden_states=all_hidden_states,
            attentions=all_attentions,
        )


# --------------------------------------------------------------------------------------------------------------
# 3. Unsupervised pre-training: the language-modelling head
# --------------------------------------------------------------------------------------------------------------


class ScratchGPTLMHeadModel(ScratchGPTPreTrainedModel, ScratchGenerationMixin):
    """P(u) = softmax(h_n W_eᵀ) (GPT-1 eq. 2), the output projection tied to the token embeddings."""

    _tied_weights_keys = {"lm_head.weight": "model.embeddings.word.weight"}
    accepts_padding_free_batches = True  # handed on to the base model as they are

    def __init__(self, config: ScratchGPTConfig) -> None:
        super().__init__(config)
        self.model = ScratchGPTModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.loss_type = "ForCausalLM"  # Trainer counts num_items_in_batch over the shifted labels
        self.post_init()

    @normalise_inputs(unlisted=("shift_labels",))  # a second label name would hide the loss from the Trainer
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        logits_to_keep: int = 0,
        num_items_in_batch: int | None = None,
        shift_labels: torch.Tensor | None = None,
    ) -> CausalLMOutputWithPast:
        """``labels`` are the inputs (shifted inside); ``shift_labels``, already shifted (what transformers passes
        under context parallelism), take their place when given. The loss L1 is transformers' causal-LM loss
        (``loss_function`` for ``loss_type = "ForCausalLM"``, as its GPT-2 computes it): the mean negative
        log-likelihood over labels ≠ -100, or their sum over ``num_items_in_batch``. ``logits_to_keep``: logits for
        the last n positions only (0: all); ``generate`` asks for 1."""
        check_next_token_labels(input_ids, inputs_embeds, labels, shift_labels, scored_classes(self.lm_head))
        outputs = self.model(
            input_ids=input_ids,
            past_key_values=past_key_values,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            **already_normalised(),
        )
        hidden_states = outputs.last_hidden_state
        if logits_to_keep:  # generation needs only the last position's distribution
            hidden_states = hidden_states[:, -logits_to_keep:]
        logits = self.lm_head(hidden_states)  # always through the module: hooks, adapters, quantized layers see it
        loss = None
        if labels is not None or shift_labels is not None:  # L1 (eq. 1): the logits at i predict the token at i + 1
            loss = self.loss_function(
                logits, labels, logits.shape[-1], num_items_in_batch=num_items_in_batch, shift_labels=shift_labels
            )
        return CausalLMOutputWithPast(
            loss=loss,
            logits=logits,
            **cache_output(returned_cache(outputs)),
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )


# --------------------------------------------------------------------------------------------------------------
# 4. Supervised fine-tuning: task heads on the final state of the extract token, with the auxiliary LM loss
# --------------------------------------------------------------------------------------------------------------


def auxiliary_objective(
    task_loss: torch.Tensor | None, lm_loss: torch.Tensor | None, lm_loss_weight: float
) -> torch.Tensor | None:
    """L3(C) = L2(C) + λ·L1(C) (GPT-1 eq. 5); with only one kind of labels, that loss alone."""
    if task_loss is None or lm_loss is None:
        return task_loss if lm_loss is None else lm_loss
    return task_loss + lm_loss_weight * lm_loss


def last_real_token_index(
    attention_mask: torch.Tensor | None,
    input_ids: torch.Tensor | None,
    pad_token_id: int | None,
    length: int,
    batch: int,
    device: torch.device,
) -> torch.Tensor:
    """Index of each row's last non-padding token — the extract token h_l^m that classification reads. From the
    (batch, length) attention mask when given (left or right padding; a custom 4-D mask relates queries to keys and
    does not say which tokens are padding), else from ``pad_token_id``, else the last position.

    Called after the base model, which validated the mask (``checks.check_attention_mask``: 0/1 or bool, shaped
    (batch, length)); the mask is read as that check returns it, ``attention_mask != 0``, and not checked again."""
    positions = torch.arange(length, device=device)
    if attention_mask is not None and attention_mask.dim() == 2:
        return (positions * (attention_mask != 0).long()).argmax(-1)
    if input_ids is not None and pad_token_id is not None:
        return (positions * (input_ids != pad_token_id).long()).argmax(-1)
    if batch > 1:
        raise ValueError(
            "Cannot find the last real token of each row: pass the attention_mask (or set config.pad_token_id) "
            "when classifying a batch of more than one sequence."
        )
    return torch.full((batch,), length - 1, dtype=torch.long, device=device)


class ScratchGPTForSequenceClassification(ScratchGPTPreTrainedModel):
    """P(y | x) = softmax(h_l^m W_y) on the final state of the last real token (GPT-1 eq. 3).

    Inputs shaped (batch, length) are one sequence per example (classification, entailment). Inputs shaped
    (batch, orderings, length) are several orderings of one example — GPT-1's similarity transformation feeds
    "a $ b" and "b $ a" — whose final states are summed element-wise before W_y (§3.3), so the prediction does not
    depend on the order of the two texts. ``lm_labels`` (same shape as the input, -100 ignored) adds the
    auxiliary language-modelling loss λ·L1 through ``lm_head``, the LM head of pre-training tied to the token
    embeddings (eq. 5). The tie means checkpoints saved before this head existed load unchanged.

    ``lm_labels`` is hidden from ``inspect.signature`` on purpose (``normalise_inputs(unlisted=…)``): the Trainer
    takes its label names from the parameters whose name contains "label" (``transformers.utils.find_labels``) and
    reports an evaluation loss and metrics only for batches that hold all of them, so a second label parameter
    silently switched evaluation off in generic scripts. With the Trainer, keep an ``lm_labels`` column with
    ``remove_unused_columns=False``.
    """

    _tied_weights_keys = {"lm_head.weight": "model.embeddings.word.weight"}

    def __init__(self, config: ScratchGPTConfig) -> None:
        super().__init__(config)
        self.num_labels = label_count(config)
        self.model = ScratchGPTModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.score = nn.Linear(config.hidden_size, self.num_labels, bias=False)
        self.post_init()

    def check_labels(
        self, given: torch.Tensor | None, labels: torch.Tensor | None, lm_labels: torch.Tensor | None, embedded: bool
    ) -> None:
        """Before the model runs: the task's labels (one per example) and the auxiliary objective's (one per token of
        ``given``, the ids or, ``embedded``, the embeddings)."""
        if given is None:
            return  # (the base model refuses the call)
        check_sequence_labels(labels, given.shape[0], label_count(self.config), self.config)
        tokens = tuple(given.shape[: given.dim() - embedded])
        check_class_labels(lm_labels, tokens, scored_classes(self.lm_head), "lm_labels", exact=True)

    @normalise_inputs(unlisted=("lm_labels",))
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        lm_labels: torch.Tensor | None = None,
    ) -> SequenceClassifierOutputWithPast:
        given = input_ids if input_ids is not None else inputs_embeds  # the base model checks the one-of rule
        several_orderings = given is not None and given.dim() == (3 if input_ids is not None else 4)
        self.check_labels(given, labels, lm_labels, embedded=input_ids is None)
        flat = flatten_choices if several_orderings else (lambda x: x)
        input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds = (
            flat(x) for x in (input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds)
        )
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            use_cache=False,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            **already_normalised(),
        )
        hidden_states = outputs.last_hidden_state
        batch, length = hidden_states.shape[:2]
        extract = last_real_token_index(
            attention_mask, input_ids, self.config.pad_token_id, length, batch, hidden_states.device
        )
        final_states = hidden_states[torch.arange(batch, device=hidden_states.device), extract]
        if several_orderings:  # h = Σ_orderings h_l^m
            assert given is not None  # several_orderings is only True for a given input
            final_states = final_states.view(*given.shape[:2], -1).sum(dim=1)
        logits = self.score(final_states)

        task_loss = sequence_classification_loss(logits, labels, self.config) if labels is not None else None
        lm_loss = causal_lm_loss(self.lm_head(hidden_states), flat(lm_labels)) if lm_labels is not None else None
        return SequenceClassifierOutputWithPast(
            loss=auxiliary_objective(task_loss, lm_loss, self.config.lm_loss_weight),
            logits=logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )


class ScratchGPTMultipleChoiceHead(nn.Module):
    """score_k = act(W · Dropout(h_l^m of choice k) + b): one number per choice, read at its extract token."""

    def __init__(self, config: ScratchGPTConfig) -> None:
        super().__init__()
        self.dropout = nn.Dropout(config.multiple_choice_dropout)
        self.summary = nn.Linear(config.hidden_size, 1)
        activation = config.multiple_choice_activation
        self.activation = get_activation(activation) if activation else nn.Identity()

    def forward(self, hidden_states: torch.Tensor, mc_token_ids: torch.Tensor) -> torch.Tensor:
        """hidden_states (batch, choices, length, hidden), mc_token_ids (batch, choices) → scores (batch, choices)."""
        index = mc_token_ids[..., None, None].expand(*mc_token_ids.shape, 1, hidden_states.shape[-1])
        extract_states = hidden_states.gather(-2, index).squeeze(-2)
        return self.activation(self.summary(self.dropout(extract_states))).squeeze(-1)


def extract_positions(
    mc_token_ids: torch.Tensor | None, batch: int, num_choices: int, length: int, device: torch.device
) -> torch.Tensor:
    """The position of each choice's extract token (batch, choices), checked: the last position when not given."""
    if mc_token_ids is None:
        return torch.full((batch, num_choices), length - 1, dtype=torch.long, device=device)
    if tuple(mc_token_ids.shape) != (batch, num_choices):
        raise ValueError(
            f"mc_token_ids has shape {tuple(mc_token_ids.shape)} but the inputs need ({batch}, {num_choices}): "
            "give the position of the extract token of every choice."
        )
    message = f"mc_token_ids must be positions in [0, {length - 1}], the extract token of each choice."
    if not values_pass((mc_token_ids >= 0) & (mc_token_ids < length), message):
        raise ValueError(message)
    return mc_token_ids


@dataclass
class ScratchGPTDoubleHeadsModelOutput(ModelOutput):
    """loss = mc_loss + λ·lm_loss (GPT-1 eq. 5) with whichever parts have labels; both parts are also returned."""

    loss: torch.Tensor | None = None
    lm_loss: torch.Tensor | None = None
    mc_loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    mc_logits: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


class ScratchGPTDoubleHeadsModel(ScratchGPTPreTrainedModel):
    """GPT-1's multiple-choice fine-tuning (§3.3): each choice [start; context; question; $; answer_k; extract] is
    processed independently, scored at its extract token (``mc_token_ids``), and the scores are normalised with a
    softmax over the choices; the LM head (tied) gives the auxiliary objective. Inputs are (batch, choices, length).
    """

    _tied_weights_keys = {"lm_head.weight": "model.embeddings.word.weight"}

    def __init__(self, config: ScratchGPTConfig) -> None:
        super().__init__(config)
        self.model = ScratchGPTModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.multiple_choice_head = ScratchGPTMultipleChoiceHead(config)
        self.post_init()

    @normalise_inputs
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        mc_token_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        mc_labels: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
    ) -> ScratchGPTDoubleHeadsModelOutput:
        batch, num_choices, length = choice_dimensions(input_ids, inputs_embeds)
        given = input_ids if input_ids is not None else inputs_embeds
        assert given is not None  # choice_dimensions raised when neither is given
        device = given.device
        check_class_labels(labels, (batch, num_choices, length), scored_classes(self.lm_head), exact=True)
        check_class_labels(mc_labels, (batch,), num_choices, "mc_labels")
        mc_token_ids = extract_positions(mc_token_ids, batch, num_choices, length, device)
        outputs = self.model(
            input_ids=flatten_choices(input_ids),
            attention_mask=flatten_choices(attention_mask),
            token_type_ids=flatten_choices(token_type_ids),
            position_ids=flatten_choices(position_ids),
            inputs_embeds=flatten_choices(inputs_embeds),
            use_cache=False,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            **already_normalised(),
        )
        hidden_states = outputs.last_hidden_state.view(batch, num_choices, length, -1)
        lm_logits = self.lm_head(hidden_states)
        mc_logits = self.multiple_choice_head(hidden_states, mc_token_ids)

        mc_loss = token_cross_entropy(mc_logits, mc_labels) if mc_labels is not None else None
        lm_loss = causal_lm_loss(lm_logits, labels)
        return ScratchGPTDoubleHeadsModelOutput(
            loss=auxiliary_objective(mc_loss, lm_loss, self.config.lm_loss_weight),
            lm_loss=lm_loss,
            mc_loss=mc_loss,
            logits=lm_logits,
            mc_logits=mc_logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )


class ScratchGPTForMultipleChoice(ScratchGPTPreTrainedModel):
    """GPT-1's multiple-choice transformation (§3.3) behind transformers' standard multiple-choice contract, what
    ``AutoModelForMultipleChoice``, the Trainer and generic multiple-choice scripts expect: ``input_ids`` /
    ``attention_mask`` shaped (batch, num_choices, length), ``labels`` the index of the right choice (batch,),
    a ``MultipleChoiceModelOutput`` with the loss first.

    Each choice [start; context; $; answer_k; extract] runs through the decoder on its own, is scored at its extract
    token — the last real token, found from the attention mask (or ``pad_token_id``) — by the multiple-choice head
    of ``ScratchGPTDoubleHeadsModel``, and the scores are normalised with a softmax over the choices:
    P(k | x) = softmax_k(score_k), L2 = -log P(label | x) (eq. 4). For the auxiliary LM objective and explicit
    ``mc_token_ids``, use ``ScratchGPTDoubleHeadsModel``, whose ``labels`` are LM labels.
    """

    def __init__(self, config: ScratchGPTConfig) -> None:
        super().__init__(config)
        self.model = ScratchGPTModel(config)
        self.multiple_choice_head = ScratchGPTMultipleChoiceHead(config)
        self.post_init()

    @normalise_inputs
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        num_items_in_batch: int | None = None,
    ) -> MultipleChoiceModelOutput:
        batch, num_choices, length = choice_dimensions(input_ids, inputs_embeds)
        if labels is not None and tuple(labels.shape) != (batch,):
            raise ValueError(
                f"labels has shape {tuple(labels.shape)} but ScratchGPTForMultipleChoice takes the index of the right "
                f"choice of each example, shape ({batch},); for language-modelling labels of every choice use "
                "ScratchGPTDoubleHeadsModel (labels) or its mc_labels for the choice."
            )
        check_class_labels(labels, (batch,), num_choices)
        flat_ids, flat_mask = flatten_choices(input_ids), flatten_choices(attention_mask)
        outputs = self.model(
            input_ids=flat_ids,
            attention_mask=flat_mask,
            token_type_ids=flatten_choices(token_type_ids),
            position_ids=flatten_choices(position_ids),
            inputs_embeds=flatten_choices(inputs_embeds),
            use_cache=False,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            **already_normalised(),
        )
        hidden_states = outputs.last_hidden_state.view(batch, num_choices, length, -1)
        extract = last_real_token_index(
            flat_mask, flat_ids, self.config.pad_token_id, length, batch * num_choices, hidden_states.device
        ).view(batch, num_choices)
        logits = self.multiple_choice_head(hidden_states, extract)
        loss = token_cross_entropy(logits, labels, num_items_in_batch) if labels is not None else None
        return MultipleChoiceModelOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


__all__ = [
    "ScratchGPTPreTrainedModel",
    "ScratchGPTModel",
    "ScratchGPTLMHeadModel",
    "ScratchGPTForSequenceClassification",
    "ScratchGPTForMultipleChoice",
    "ScratchGPTDoubleHeadsModel",
]

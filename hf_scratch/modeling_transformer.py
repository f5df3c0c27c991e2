"""The encoder-decoder Transformer (Vaswani et al. 2017, "Attention Is All You Need"), from scratch, read top-down
in the order of the paper (§3: the encoder and decoder stacks, attention, feed-forward, embeddings, positions):

1. input representation: token embeddings scaled by √d_model plus the fixed sinusoidal encoding PE(pos), then
   dropout (paper §3.4-3.5);
2. the encoder: N layers of [multi-head self-attention with the source padding mask] and [position-wise FFN],
   each wrapped as LayerNorm(x + Dropout(Sublayer(x))) (post-LN, §3.1; pre-LN as an option);
3. the decoder: N layers of [masked self-attention (causal ∧ target padding)], [cross-attention whose keys and
   values are the encoder output, masked by the source padding] and [FFN], same residual wrapping;
4. the output projection to the target vocabulary (tied to the target embeddings, §3.4), the non-shifted
   cross-entropy with optional label smoothing (§5.4), and generation (greedy / beam search) over transformers'
   ``EncoderDecoderCache``: the decoder's self-attention keys/values grow by one token per step (or fill the
   fixed slots of a ``StaticCache`` with ``cache_implementation="static"``, for a compiled decoding step), the
   cross-attention keys/values are computed from the encoder output once.

Decoder inputs are the labels shifted right behind ``decoder_start_token_id``, the output embeddings "offset by one
position" of §3.1 (the decoder reads ``<s> i want a beer`` to predict ``i want a beer </s>``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import initialization as init
from transformers.cache_utils import Cache, DynamicCache, EncoderDecoderCache
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutput,
    BaseModelOutputWithPastAndCrossAttentions,
    Seq2SeqModelOutput,
)

from .checks import (
    check_attention_mask,
    check_decoder_mask,
    check_input_ids,
    check_one_input,
    check_padding_or_relation,
    check_positions,
    embedding_rows,
)
from .configuration_transformer import ScratchTransformerConfig
from .heads import Seq2SeqLMHead, given_source, token_cross_entropy
from .layers import FeedForward, MultiHeadAttention, ResidualNorm, TransformerBlock, run_layers
from .masks import AttentionMask, cache_layout, decoder_self_attention_mask, key_padding_mask, padding_or_relation
from .modeling_common import (
    CACHE_NAME,
    ScratchPreTrainedModel,
    already_normalised,
    cache_output,
    normalise_inputs,
    returned_cache,
)
from .positional import SinusoidalPositionalEmbedding, sinusoidal_table

# --------------------------------------------------------------------------------------------------------------
# 1. Input representation
# --------------------------------------------------------------------------------------------------------------


class ScaledTokenEmbedding(nn.Embedding):
    """√d_model · E[token] (paper §3.4: "we multiply those weights by √d_model"). The scale sits inside the module
    that ``get_input_embeddings`` returns, so embeddings built with it (soft prompts, ``inputs_embeds``) equal what
    ``input_ids`` give, as in transformers' Bart; the tied output projection reads the unscaled table."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None, scale: float):
        super().__init__(num_embeddings, embedding_dim, padding_idx=padding_idx)
        self.scale = scale

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return super().forward(input_ids) * self.scale


class ScratchTransformerEmbeddings(nn.Module):
    """x_pos = Dropout(√d_model · E[token] + PE(pos)) (paper §3.4-3.5); PE is the fixed sinusoidal table.
    ``tokens``: an existing token embedding module to use (the source one, when the target side shares it)."""

    tokens: nn.Module  # the token embedding: replaceable by set_input_embeddings (a peft wrapper, say)

    def __init__(self, config: ScratchTransformerConfig, vocab_size: int, tokens: nn.Module | None = None) -> None:
        super().__init__()
        if tokens is None:
            scale = math.sqrt(config.hidden_size) if config.scale_embedding else 1.0
            tokens = ScaledTokenEmbedding(vocab_size, config.hidden_size, config.pad_token_id, scale)
        self.tokens = tokens
        self.position = SinusoidalPositionalEmbedding(
            config.max_position_embeddings, config.hidden_size, layout=config.sinusoidal_layout
        )
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def check(self, input_ids: torch.Tensor | None, position_ids: torch.Tensor, name: str = "input_ids") -> None:
        """The ids (when given rather than embeddings) in the vocabulary, the positions in the table."""
        if input_ids is not None:
            check_input_ids(input_ids, embedding_rows(self.tokens), name=name)
        check_positions(position_ids, self.position.num_positions)

    def forward(
        self, input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None, position_ids: torch.Tensor
    ) -> torch.Tensor:
        """Of inputs ``check`` has checked: ``inputs_embeds`` are used as given (built with ``tokens``, they are
        scaled already); ``position_ids`` (1 or batch, length): 0 … length - 1 for the source, the cache positions
        for the target (they continue after the cached tokens)."""
        if inputs_embeds is None:
            inputs_embeds = self.tokens(input_ids)
        # (.to: the device too, for device_map="auto" over several devices)
        return self.dropout(inputs_embeds + self.position(position_ids).to(inputs_embeds.device, inputs_embeds.dtype))


# --------------------------------------------------------------------------------------------------------------
# 2. The encoder
# --------------------------------------------------------------------------------------------------------------


class ScratchTransformerEncoderLayer(TransformerBlock):
    """h = LN(x + SelfAttention(x)) with the source padding mask; out = LN(h + FFN(h)) (§3.1 "Encoder": multi-head
    self-attention §3.2.2, the feed-forward network §3.3 eq. 2; ``layers.TransformerBlock``), pre-LN as an option.
    Checkpoints name its attention ``self_attention``, as the decoder layer's
    (``ScratchTransformerPreTrainedModel.checkpoint_weight_names``)."""

    def __init__(self, config: ScratchTransformerConfig, layer_idx: int) -> None:
        super().__init__(
            config,
            layer_idx,
            config.encoder_attention_heads,
            config.encoder_ffn_dim,
            pre_norm=config.pre_norm,
            activation_dropout=config.activation_dropout,
        )


class ScratchTransformerEncoder(nn.Module):
    """Embeddings → N encoder layers (→ a final LayerNorm when pre-LN). Returns the memory the decoder attends."""

    def __init__(self, config: ScratchTransformerConfig) -> None:
        super().__init__()
        self.config = config
        self.embeddings = ScratchTransformerEmbeddings(config, config.vocab_size)
        self.layers = nn.ModuleList(ScratchTransformerEncoderLayer(config, i) for i in range(config.encoder_layers))
        self.final_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps) if config.pre_norm else None

    @normalise_inputs
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | AttentionMask | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
    ) -> BaseModelOutput:
        """``attention_mask``: the source's 0/1 padding mask (or a 4-D relation), or the ``AttentionMask`` the model
        has built from it (``source_for_both_sides``), used as it is."""
        given = check_one_input(input_ids, inputs_embeds)
        batch, length = given.shape[:2]
        positions = torch.arange(length, device=given.device)[None, :]
        self.embeddings.check(input_ids, positions)
        mask = attention_mask  # as the model built it
        if not isinstance(mask, AttentionMask):
            mask = padding_or_relation(check_padding_or_relation(mask, batch, length, length))

        hidden_states = self.embeddings(input_ids, inputs_embeds, positions)
        hidden_states, all_hidden_states, (all_attentions,) = run_layers(
            self.layers,
            hidden_states,
            lambda layer, x: layer(x, mask, output_attentions),
            output_hidden_states,
            output_attentions,
            self.final_norm,
        )
        return BaseModelOutput(
            last_hidden_state=hidden_states, hidden_states=all_hidden_states, attentions=all_attentions
        )


# --------------------------------------------------------------------------------------------------------------
# 3. The decoder
# --------------------------------------------------------------------------------------------------------------


class ScratchTransformerDecoderLayer(GradientCheckpointingLayer):
    """Three sub-layers, each LN(x + Sublayer(x)) (§3.1 "Decoder", §3.2.3):
    masked self-attention (causal ∧ target padding) → cross-attention Q = decoder, K = V = encoder output (source
    padding mask) → position-wise FFN."""

    def __init__(self, config: ScratchTransformerConfig, layer_idx: int) -> None:
        super().__init__()
        size, eps, dropout = config.hidden_size, config.layer_norm_eps, config.hidden_dropout_prob
        heads, attention_dropout = config.decoder_attention_heads, config.attention_probs_dropout_prob
        self.self_attention = MultiHeadAttention(config, size, heads, attention_dropout, layer_idx=layer_idx)
        self.self_attention_residual = ResidualNorm(size, eps, dropout, pre_norm=config.pre_norm)
        self.cross_attention = MultiHeadAttention(
            config, size, heads, attention_dropout, is_cross_attention=True, layer_idx=layer_idx
        )
        self.cross_attention_residual = ResidualNorm(size, eps, dropout, pre_norm=config.pre_norm)
        self.feed_forward = FeedForward(size, config.decoder_ffn_dim, config.hidden_act, config.activation_dropout)
        self.feed_forward_residual = ResidualNorm(size, eps, dropout, pre_norm=config.pre_norm)

    def forward(
        self,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor,
        self_mask: AttentionMask,
        cross_mask: AttentionMask,
        past_key_values: EncoderDecoderCache | None = None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        residual = self.self_attention_residual
        attended, self_weights = self.self_attention(
            residual.before(hidden_states),
            self_mask,
            past_key_values=past_key_values,
            output_attentions=output_attentions,
        )
        hidden_states = residual.after(hidden_states, attended)
        residual = self.cross_attention_residual
        attended, cross_weights = self.cross_attention(
            residual.before(hidden_states),
            cross_mask,
            key_value_states=encoder_hidden_states,
            past_key_values=past_key_values,
            output_attentions=output_attentions,
        )
        hidden_states = residual.after(hidden_states, attended)
        residual = self.feed_forward_residual
        hidden_states = residual.after(hidden_states, self.feed_forward(residual.before(hidden_states)))
        return hidden_states, self_weights, cross_weights


def check_decoder_inputs(
    input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None, encoder_hidden_states: torch.Tensor | None
) -> tuple[int, int]:
    """(batch, length) of the decoder inputs; a ValueError unless exactly one of ``input_ids`` / ``inputs_embeds``
    is given, with an encoder output of the same batch (or, before the encoder runs, the source it will read)."""
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError(
            "Pass exactly one of decoder_input_ids or decoder_inputs_embeds (or labels, from which the decoder "
            "inputs are built by shifting them right)."
        )
    if encoder_hidden_states is None:
        raise ValueError("The decoder needs encoder_hidden_states (the encoder output) for its cross-attention.")
    given = input_ids if input_ids is not None else inputs_embeds
    assert given is not None  # exactly one is given, checked above
    batch, length = given.shape[:2]
    if encoder_hidden_states.shape[0] != batch:
        raise ValueError(
            f"The encoder output has batch size {encoder_hidden_states.shape[0]} but the decoder inputs have "
            f"{batch}: pass one source sequence per target sequence."
        )
    return batch, length


def decoder_cache(past_key_values: Cache | None, use_cache: bool | None) -> EncoderDecoderCache | None:
    """The cache this step reads and extends: self- and cross-attention kept apart (an ``EncoderDecoderCache``), a
    new one on the first step of cached decoding, None without ``use_cache``."""
    if past_key_values is not None and not isinstance(past_key_values, EncoderDecoderCache):
        raise ValueError(
            f"{CACHE_NAME} is a {type(past_key_values).__name__}; the decoder caches self- and cross-attention "
            "separately: pass an EncoderDecoderCache(DynamicCache(), DynamicCache()) or None (one is created)."
        )
    if not use_cache:
        return None
    return past_key_values if past_key_values is not None else EncoderDecoderCache(DynamicCache(), DynamicCache())


def target_mask(
    attention_mask: torch.Tensor | None, batch: int, key_length: int, cache_positions: torch.Tensor, static: bool
) -> AttentionMask:
    """Masked self-attention (§3.2.3): each target position may attend the real tokens up to itself, the cached
    ones included (causal ∧ target padding); a 4-D mask is the whole relation."""
    checked = check_decoder_mask(attention_mask, batch, key_length, cache_positions, static, "decoder_attention_mask")
    return decoder_self_attention_mask(checked, batch, key_length, cache_positions, static)


def source_mask(encoder_attention_mask: torch.Tensor | None, encoder_hidden_states: torch.Tensor) -> AttentionMask:
    """Cross-attention (§3.2.3): every target position may attend the source's real tokens."""
    batch, source_length = encoder_hidden_states.shape[:2]
    name = "attention_mask (of the source)"
    return key_padding_mask(check_attention_mask(encoder_attention_mask, batch, source_length, name))


def source_for_both_sides(
    attention_mask: torch.Tensor | None,
    input_ids: torch.Tensor | None,
    inputs_embeds: torch.Tensor | None,
    encoder_outputs: BaseModelOutput | tuple[torch.Tensor, ...] | None,
) -> tuple[torch.Tensor, AttentionMask]:
    """The tensor that sizes the source — the encoder's output when given, else what the encoder reads — and the
    source's padding, checked once and built once for the encoder's self-attention and the decoder's
    cross-attention (every query may attend the source's real tokens)."""
    sized_by = given_source(input_ids, inputs_embeds, encoder_outputs)
    if sized_by is None:
        raise ValueError("Pass the source: input_ids or inputs_embeds, or encoder_outputs (the encoder's output).")
    return sized_by, source_mask(attention_mask, sized_by)


@dataclass
class CheckedTarget:
    """The decoder's inputs of one call, checked, and what the masked self-attention (§3.2.3) reads: the cache this
    step reads and extends, the positions of the new tokens (after the cached ones) and the mask built once."""

    input_ids: torch.Tensor | None
    inputs_embeds: torch.Tensor | None
    cache: EncoderDecoderCache | None
    positions: torch.Tensor  # (1, length)
    self_mask: AttentionMask


class ScratchTransformerDecoder(nn.Module):
    """Target embeddings (positions continue after the cached tokens) → N decoder layers (→ final LN when pre-LN).
    ``shared_tokens``: the source token embedding module, used as is when the two sides share their embeddings."""

    def __init__(self, config: ScratchTransformerConfig, shared_tokens: nn.Module | None = None) -> None:
        super().__init__()
        self.config = config
        assert config.decoder_vocab_size is not None  # derive_defaults fills it, check() requires a positive int
        self.embeddings = ScratchTransformerEmbeddings(config, config.decoder_vocab_size, shared_tokens)
        self.layers = nn.ModuleList(ScratchTransformerDecoderLayer(config, i) for i in range(config.decoder_layers))
        self.final_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps) if config.pre_norm else None

    def check_target(
        self,
        input_ids: torch.Tensor | None,
        attention_mask: torch.Tensor | None,
        past_key_values: Cache | None,
        inputs_embeds: torch.Tensor | None,
        use_cache: bool | None,
        source: torch.Tensor | None,
    ) -> CheckedTarget:
        """Everything the decoder reads, checked before any layer runs, and its self-attention mask built:
        ``source``, the encoder's output, or before the encoder runs the source it will read (the model checks the
        target first, so that a bad target is refused before the encoder computes anything)."""
        batch, length = check_decoder_inputs(input_ids, inputs_embeds, source)
        given = input_ids if input_ids is not None else inputs_embeds
        assert given is not None  # check_decoder_inputs: exactly one is given
        cache = decoder_cache(past_key_values, use_cache)
        key_length, cache_positions, static = cache_layout(cache, length, given.device)
        positions = cache_positions[None, :]
        self.embeddings.check(input_ids, positions, name="decoder_input_ids")
        self_mask = target_mask(attention_mask, batch, key_length, cache_positions, static)
        return CheckedTarget(input_ids, inputs_embeds, cache, positions, self_mask)

    @normalise_inputs
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | AttentionMask | None = None,
        past_key_values: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        checked_target: CheckedTarget | None = None,
    ) -> BaseModelOutputWithPastAndCrossAttentions:
        """``checked_target``: the target as ``check_target`` has checked it (the model passes it, and not the
        target's inputs again)."""
        target = checked_target
        if target is None:
            target = self.check_target(
                input_ids, attention_mask, past_key_values, inputs_embeds, use_cache, encoder_hidden_states
            )
        assert encoder_hidden_states is not None  # check_target refuses a call without it; the model passes it
        cross_mask = encoder_attention_mask  # as the model built it
        if not isinstance(cross_mask, AttentionMask):
            cross_mask = source_mask(cross_mask, encoder_hidden_states)
        hidden_states = self.embeddings(target.input_ids, target.inputs_embeds, target.positions)
        hidden_states, all_hidden_states, (all_self_attentions, all_cross_attentions) = run_layers(
            self.layers,
            hidden_states,
            lambda layer, x: layer(
                x,
                encoder_hidden_states,
                target.self_mask,
                cross_mask,
                past_key_values=target.cache,
                output_attentions=output_attentions,
            ),
            output_hidden_states,
            output_attentions,
            self.final_norm,
            kinds=2,
        )
        return BaseModelOutputWithPastAndCrossAttentions(
            last_hidden_state=hidden_states,
            **cache_output(target.cache),
            hidden_states=all_hidden_states,
            attentions=all_self_attentions,
            cross_attentions=all_cross_attentions,
        )


# --------------------------------------------------------------------------------------------------------------
# The models
# --------------------------------------------------------------------------------------------------------------


class ScratchTransformerPreTrainedModel(ScratchPreTrainedModel):
    config_class = ScratchTransformerConfig
    _can_compile_fullgraph = True  # forward and backward; decoding with a static EncoderDecoderCache too
    _supports_attention_backend = True  # standard attention: kernels of transformers' AttentionInterface run it
    _supports_flex_attn = True
    _no_split_modules = ["ScratchTransformerEncoderLayer", "ScratchTransformerDecoderLayer"]
    # checkpoints name the encoder layers' attention as the decoder layers' (and Marian's), self_attention
    checkpoint_weight_names = {
        r"encoder.layers.(\d+).self_attention": r"encoder.layers.\1.attention",
        r"encoder.layers.(\d+).self_attention_residual": r"encoder.layers.\1.attention_residual",
    }

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """transformers' defaults (normal(0, initializer_range) weights, zero biases, unit LayerNorms); the
        sinusoidal table is a non-saved buffer, rebuilt from the config (also after loading on the meta device)."""
        super()._init_weights(module)
        if isinstance(module, SinusoidalPositionalEmbedding):
            num_positions, dim = module.table.shape
            init.copy_(module.table, sinusoidal_table(num_positions, dim, self.config.sinusoidal_layout))

    def _embedding_ties(self, prefix: str = "") -> dict[str, str]:
        """{target: source} for ``share_encoder_decoder_embeddings``: the target embeddings are the source ones
        (their module is the source's, see ``ScratchTransformerModel``)."""
        ties = {}
        if self.config.share_encoder_decoder_embeddings:
            ties[f"{prefix}decoder.embeddings.tokens.weight"] = f"{prefix}encoder.embeddings.tokens.weight"
        return ties

    def resize_token_embeddings(
        self, new_num_tokens: int | None = None, pad_to_multiple_of: int | None = None, mean_resizing: bool = True
    ) -> nn.Embedding:
        """transformers' resizing of the source embeddings; when the target side shares them, its vocabulary size
        (``decoder_vocab_size``) follows."""
        embeddings = super().resize_token_embeddings(new_num_tokens, pad_to_multiple_of, mean_resizing)
        if self.config.share_encoder_decoder_embeddings:
            self.config.decoder_vocab_size = self.config.vocab_size
        return embeddings


class ScratchTransformerModel(ScratchTransformerPreTrainedModel):
    """The encoder-decoder without the output projection: returns the decoder's last hidden states.

    With ``share_encoder_decoder_embeddings`` the decoder's token embedding is the encoder's module itself (as BART's
    ``shared``): one module, called by both sides, under both names in the state dict; the tie keeps checkpoints that
    hold one key or both loading, and saving writes the source key only."""

    def __init__(self, config: ScratchTransformerConfig) -> None:
        super().__init__(config)
        self.encoder = ScratchTransformerEncoder(config)
        shared = self.encoder.embeddings.tokens if config.share_encoder_decoder_embeddings else None
        self.decoder = ScratchTransformerDecoder(config, shared)
        self.post_init()

    def configured_ties(self) -> dict[str, str]:
        return self._embedding_ties()

    # transformers finds the encoder, the decoder and, on the head, lm_head and the embeddings (through ``model``) by
    # name; the token embeddings inside the encoder it cannot
    def get_input_embeddings(self) -> nn.Module:
        return self.encoder.embeddings.tokens

    def set_input_embeddings(self, value: nn.Module) -> None:
        self.encoder.embeddings.tokens = value
        if self.config.share_encoder_decoder_embeddings:
            self.decoder.embeddings.tokens = value

    @normalise_inputs
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: BaseModelOutput | tuple[Any, ...] | None = None,
        past_key_values: EncoderDecoderCache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
    ) -> Seq2SeqModelOutput:
        # both sides are checked before any layer runs
        sized_by, source = source_for_both_sides(attention_mask, input_ids, inputs_embeds, encoder_outputs)
        target = self.decoder.check_target(
            decoder_input_ids, decoder_attention_mask, past_key_values, decoder_inputs_embeds, use_cache, sized_by
        )
        if encoder_outputs is None:
            encoder_outputs = self.encoder(
                input_ids=input_ids,
                attention_mask=source,
                inputs_embeds=inputs_embeds,
                output_attentions=output_attentions,
                output_hidden_states=output_hidden_states,
                **already_normalised(),
            )
        if not isinstance(encoder_outputs, BaseModelOutput):  # a tuple, as transformers accepts it
            encoder_outputs = BaseModelOutput(*encoder_outputs)
        decoder_outputs = self.decoder(
            encoder_hidden_states=encoder_outputs.last_hidden_state,
            encoder_attention_mask=source,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            checked_target=target,
            **already_normalised(),
        )
        return Seq2SeqModelOutput(
            last_hidden_state=decoder_outputs.last_hidden_state,
            **cache_output(returned_cache(decoder_outputs)),
            decoder_hidden_states=decoder_outputs.hidden_states,
            decoder_attentions=decoder_outputs.attentions,
            cross_attentions=decoder_outputs.cross_attentions,
            encoder_last_hidden_state=encoder_outputs.last_hidden_state,
            encoder_hidden_states=encoder_outputs.hidden_states,
            encoder_attentions=encoder_outputs.attentions,
        )


class ScratchTransformerForConditionalGeneration(ScratchTransformerPreTrainedModel, Seq2SeqLMHead):
    """The full model of the paper: P(y_t | y_<t, x) = softmax(W_out h_t + b) with W_out tied to the target
    embeddings (§3.4). ``labels`` → decoder inputs shifted right; loss = cross-entropy over labels ≠ -100 with
    ``config.label_smoothing`` (§5.4). ``generate`` runs greedy or beam search over an ``EncoderDecoderCache``."""

    def __init__(self, config: ScratchTransformerConfig) -> None:
        super().__init__(config)
        self.model = ScratchTransformerModel(config)
        assert config.decoder_vocab_size is not None  # derive_defaults fills it, check() requires a positive int
        self.lm_head = nn.Linear(config.hidden_size, config.decoder_vocab_size, bias=True)
        # the labels are the decoder's targets as they are (not shifted inside): the Trainer must count every one of
        # them for num_items_in_batch (a "…ForConditionalGeneration" name makes some releases count from the second)
        self.loss_type = "ForMaskedLM"
        self.post_init()

    def configured_ties(self) -> dict[str, str]:
        """The shared embeddings, and with ``tie_word_embeddings`` the output projection is the target embeddings
        (§3.4: "we share the same weight matrix between the two embedding layers and the pre-softmax linear
        transformation") — the source ones when the two sides share them."""
        ties = self._embedding_ties(prefix="model.")
        if self.config.tie_word_embeddings:
            target_embeddings = "model.decoder.embeddings.tokens.weight"
            ties["lm_head.weight"] = ties.get(target_embeddings, target_embeddings)
        return ties

    def resize_token_embeddings(
        self, new_num_tokens: int | None = None, pad_to_multiple_of: int | None = None, mean_resizing: bool = True
    ) -> nn.Embedding:
        """Resize the source embeddings (and, when shared, the target embeddings and the tied output projection)."""
        if not self.config.share_encoder_decoder_embeddings and not self.config.tie_word_embeddings:
            raise ValueError(
                "resize_token_embeddings resizes the source vocabulary, but this model's output projection is neither "
                "shared with it nor tied to the target embeddings: resize model.model.encoder.embeddings.tokens "
                "(source) and the target side separately."
            )
        return super().resize_token_embeddings(new_num_tokens, pad_to_multiple_of, mean_resizing)

    def lm_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """The pre-softmax linear transformation W_out h_t + b of P(y_t | y_<t, x) = softmax(W_out h_t + b) (§3.4),
        W_out tied to the target embeddings with ``tie_word_embeddings``."""
        return self.lm_head(hidden_states)

    def lm_loss(self, logits: torch.Tensor, labels: torch.Tensor, num_items_in_batch: int | None) -> torch.Tensor:
        """Cross-entropy over the labels ≠ -100 against targets smoothed with ε_ls = ``config.label_smoothing``
        (§5.4, "Label Smoothing": (1 − ε_ls) on the true token, ε_ls spread over the vocabulary)."""
        return token_cross_entropy(logits, labels, num_items_in_batch, label_smoothing=self.config.label_smoothing)


__all__ = [
    "ScratchTransformerPreTrainedModel",
    "ScratchTransformerModel",
    "ScratchTransformerForConditionalGeneration",
]

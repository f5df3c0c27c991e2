"""RNN seq2seq baselines — what the Transformer replaced — read top-down in the order of their papers: the
encoder-decoder of Sutskever et al. 2014 (§2), the attention of Bahdanau et al. 2015 (§3) and Luong et al. 2015 (§3).

1. the recurrent cells (RNN, LSTM, GRU) and layers, one direction or two: ``recurrent.py``;
2. the encoder: embeddings → stacked (Bi)RNN layers (Bahdanau et al. §3.2) → the states h_i and the final states
   that start the decoder (Sutskever et al. §2);
3. attention over the encoder states: scores e_ti — Bahdanau's additive score from s_{t-1} (§3.1, eq. 6 and
   appendix A.1.2); Luong's dot, general and concat scores from s_t (§3.1, eq. 8) — α_ti = softmax_i(e_ti) over the
   real source tokens, c_t = Σ_i α_ti h_i (Bahdanau eq. 5-6; Luong eq. 7);
4. the decoder, in each paper's order of computation:
       Bahdanau: s_{t-1} → e_ti → c_t → s_t = RNN([y_{t-1}; c_t], s_{t-1}) → y_t = softmax(V s_t)      (§3.1, eq. 4)
                 or, with ``bahdanau_output="maxout"``, y_t = softmax(V t_t), t_t = maxout(U_o s_t + V_o y_{t-1}
                 + C_o c_t)                                                                     (appendix A.2.2)
       Luong:    s_{t-1} → s_t = RNN(y_{t-1}, s_{t-1}) → e_ti → c_t → s̃_t = tanh(W_c[s_t; c_t] + b_c)
                 → y_t = softmax(V s̃_t)
                 (§3, eq. 5-6, with a bias b_c; global attention, without §3.3's input feeding)
       none:     s_{t-1} → s_t = RNN(y_{t-1}, s_{t-1}) → y_t = softmax(V s_t)                    (Sutskever et al.)
       fixed-context: c = the encoder's final state → s_t = RNN([y_{t-1}; c], s_{t-1}) → y_t = softmax(V s_t)
                 (Cho et al. 2014 §2.2: Bahdanau et al.'s "RNNencdec", their decoder with c_t = c)
   Bahdanau's output layer is by default simplified to the linear V s_t; ``bahdanau_output="maxout"`` is the
   paper's deep output, which reads y_{t-1}, s_t and c_t (or c) (``DeepOutput``);
5. heads: sequence-to-sequence generation (``heads.Seq2SeqLMHead``, with ``generate``; the decoder's recurrent state
   is the cache) and sequence classification from the encoder's final state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import initialization as init
from transformers.modeling_outputs import Seq2SeqModelOutput, SequenceClassifierOutput
from transformers.utils import ModelOutput

from .checks import (
    check_attention_mask,
    check_input_ids,
    check_one_input,
    embedding_rows,
    values_pass,
)
from .configuration_rnn import ATTENDING_TYPES, BAHDANAU_DECODERS, ScratchRNNConfig
from .heads import (
    Seq2SeqLMHead,
    check_sequence_labels,
    given_source,
    label_count,
    sequence_classification_loss,
    token_cross_entropy,
)
from .kernels import masked_softmax
from .layers import classifier_dropout
from .masks import AttentionMask, key_padding_mask
from .modeling_common import (
    CACHE_NAME,
    DecodingState,
    ScratchPreTrainedModel,
    already_normalised,
    cache_output,
    normalise_inputs,
)
from .recurrent import LayerState, ScratchRNNStack, stack_states, unstack_states

# --------------------------------------------------------------------------------------------------------------
# 2. Encoder (the cells and recurrent layers it stacks, step 1, are in recurrent.py)
# --------------------------------------------------------------------------------------------------------------


@dataclass
class ScratchRNNEncoderOutput(ModelOutput):
    """``last_hidden_state``: h_i for every source token (batch, source_length, hidden), 0 at padding;
    ``final_hidden_state`` / ``final_cell_state``: every layer's state after the whole source
    (batch, layers, hidden; cell only for the LSTM), both directions concatenated for a BiRNN."""

    last_hidden_state: torch.Tensor | None = None
    final_hidden_state: torch.Tensor | None = None
    final_cell_state: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


def final_hidden_state(encoder_outputs: ScratchRNNEncoderOutput) -> torch.Tensor:
    """Every encoder layer's state after the whole source, which the decoder starts from (and "fixed-context"
    reads); a ValueError when given encoder_outputs lack it (a tuple of the last hidden states only)."""
    if encoder_outputs.final_hidden_state is None:
        raise ValueError(
            "encoder_outputs has no final_hidden_state, which the RNN decoder starts from: pass the "
            "ScratchRNNEncoderOutput that model.encoder(...) returns (or a tuple of its fields in order)."
        )
    return encoder_outputs.final_hidden_state


class ScratchRNNEncoder(nn.Module):
    """Embeddings → dropout → stacked (Bi)RNN. Owns the token embeddings, which the decoder and (tied) the output
    projection share."""

    embed_tokens: nn.Module  # the token embedding: replaceable by set_input_embeddings (a peft wrapper, say)

    def __init__(self, config: ScratchRNNConfig) -> None:
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.stack = ScratchRNNStack(config, config.hidden_size, config.encoder_layers, config.bidirectional_encoder)

    def check_tokens(
        self, input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None, name: str = "input_ids"
    ) -> torch.Tensor:
        """The one of ids / embeddings that is given (exactly one must be), its ids in the vocabulary."""
        given = check_one_input(input_ids, inputs_embeds)
        if inputs_embeds is None:
            check_input_ids(given, embedding_rows(self.embed_tokens), name=name)
        return given

    def embed(self, input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None) -> torch.Tensor:
        """Dropout(E[x]) of ids ``check_tokens`` has checked, or of the embeddings given."""
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)
        return self.dropout(inputs_embeds)

    @normalise_inputs
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | AttentionMask | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
    ) -> ScratchRNNEncoderOutput:
        """``attention_mask``: the source's 0/1 mask, or the ``AttentionMask`` the model has built from it
        (``ScratchRNNModel`` checks it once for the encoder and the attention), used as it is."""
        given = self.check_tokens(input_ids, inputs_embeds)
        if not isinstance(attention_mask, AttentionMask):
            attention_mask = source_mask(attention_mask, given.shape[:2])
        hidden_states = self.embed(input_ids, inputs_embeds)
        outputs, finals, all_hidden = self.stack(hidden_states, attention_mask.key_padding, None, output_hidden_states)
        final_hidden, final_cell = stack_states(finals)
        return ScratchRNNEncoderOutput(
            last_hidden_state=outputs,
            final_hidden_state=final_hidden,
            final_cell_state=final_cell,
            hidden_states=(hidden_states,) + all_hidden if output_hidden_states else None,
        )


def check_right_padded(key_is_real: torch.Tensor, name: str = "attention_mask") -> None:
    """An RNN reads the real tokens first: padding must come after them (the tokenizer's padding_side='right')."""
    lengths = key_is_real.sum(-1, keepdim=True)
    positions = torch.arange(key_is_real.shape[1], device=key_is_real.device)[None, :]
    message = (
        f"{name} has padding before real tokens, but the RNN encoder reads each sequence from its first token: "
        "pad on the right (tokenizer.padding_side = 'right')."
    )
    if not values_pass((positions < lengths) == key_is_real, message):
        raise ValueError(message)


def source_mask(attention_mask: torch.Tensor | None, shape: tuple[int, ...]) -> AttentionMask:
    """The source's padding: the (batch, source_length) 0/1 mask checked (right padding only), then built into the
    relation of the attention over the source states (every target position may attend the real source tokens)."""
    key_is_real = check_attention_mask(attention_mask, shape[0], shape[1])
    if key_is_real is not None:
        check_right_padded(key_is_real)
    return key_padding_mask(key_is_real)


def checked_source(
    attention_mask: torch.Tensor | None, source: torch.Tensor | None
) -> AttentionMask | torch.Tensor | None:
    """The source's padding, checked and built once (``source_mask``) for the encoder and the attention over its
    states: sized by ``source``, the encoder's output when given, else the input the encoder reads. Without a source
    of (batch, length, …) the mask is handed on as it is: the encoder refuses those inputs first
    (``check_one_input``, ``check_input_ids``)."""
    if source is None or source.dim() < 2:
        return attention_mask
    return source_mask(attention_mask, source.shape[:2])


# --------------------------------------------------------------------------------------------------------------
# 3. Attention over the encoder states. Scores have the shape of transformers' cross-attentions:
#    (batch, 1 head, target_length, source_length).
# --------------------------------------------------------------------------------------------------------------


class AdditiveScore(nn.Module):
    """e_ti = v_aᵀ tanh(W_a [q_t; h_i]) = v_aᵀ tanh(W_q q_t + W_k h_i) — Bahdanau's alignment model with
    q_t = s_{t−1} (Bahdanau et al. 2015 appendix A.1.2, a(s_{i-1}, h_j) = v_aᵀ tanh(W_a s_{i-1} + U_a h_j)), Luong's
    concat score with q_t = s_t (Luong et al. 2015 eq. 8). W_k h_i is computed once per source (``keys``)."""

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.query_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.key_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.v = nn.Linear(hidden_size, 1, bias=False)

    def keys(self, encoder_states: torch.Tensor) -> torch.Tensor:
        return self.key_proj(encoder_states)

    def forward(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        hidden = torch.tanh(self.query_proj(queries)[:, :, None, :] + keys[:, None, :, :])
        return self.v(hidden).squeeze(-1)[:, None]


class DotScore(nn.Module):
    """Luong's dot score (Luong et al. 2015 eq. 8): e_ti = s_tᵀ h_i."""

    def keys(self, encoder_states: torch.Tensor) -> torch.Tensor:
        return encoder_states

    def forward(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        return torch.matmul(queries, keys.transpose(-1, -2))[:, None]


class GeneralScore(DotScore):
    """Luong's general score (Luong et al. 2015 eq. 8): e_ti = s_tᵀ W_a h_i (W_a h_i computed once per source)."""

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.key_proj = nn.Linear(hidden_size, hidden_size, bias=False)

    def keys(self, encoder_states: torch.Tensor) -> torch.Tensor:
        return self.key_proj(encoder_states)


SCORES: dict[str, type[AdditiveScore | DotScore]] = {
    "bahdanau": AdditiveScore,
    "luong-concat": AdditiveScore,
    "luong-general": GeneralScore,
}


def attend_to_source(
    scores: torch.Tensor, mask: AttentionMask, encoder_states: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """α_ti = exp(e_ti) / Σ_k exp(e_tk) over the real source tokens (exactly 0 on padding: ``mask``, the source's,
    ``source_mask``); c_t = Σ_i α_ti h_i (Bahdanau et al. 2015 eq. 5-6; Luong et al. 2015 eq. 7, global attention).
    Returns (contexts (batch, target_length, hidden), weights (batch, 1, target_length, source_length))."""
    weights = masked_softmax(scores, mask.relation)
    return torch.matmul(weights[:, 0], encoder_states), weights


# --------------------------------------------------------------------------------------------------------------
# 4. Decoder
# --------------------------------------------------------------------------------------------------------------


# what the decoder returns: its output vectors, the states after the last input, the attention weights (or None),
# every layer's outputs (when asked)
DecoderResult = tuple[torch.Tensor, list[LayerState], torch.Tensor | None, tuple[torch.Tensor, ...]]


class DeepOutput(nn.Module):
    """Bahdanau et al. 2015 appendix A.2.2: t̃_t = U_o s_t + V_o E y_{t-1} + C_o c_t (2 × hidden units), t_t =
    [max(t̃_{t,2j-1}, t̃_{t,2j})]_j (hidden units), the vector V reads — so p(y_t) = g(y_{t-1}, s_t, c_t), eq. 4.
    (The appendix writes s_{t-1}; eq. 4 and this order of computation use s_t.)"""

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.state_proj = nn.Linear(hidden_size, 2 * hidden_size)  # U_o (with the layer's bias)
        self.previous_token_proj = nn.Linear(hidden_size, 2 * hidden_size, bias=False)  # V_o
        self.context_proj = nn.Linear(hidden_size, 2 * hidden_size, bias=False)  # C_o

    def forward(self, states: torch.Tensor, previous_tokens: torch.Tensor, contexts: torch.Tensor) -> torch.Tensor:
        pre_maxout = self.state_proj(states) + self.previous_token_proj(previous_tokens) + self.context_proj(contexts)
        return pre_maxout.unflatten(-1, (-1, 2)).amax(dim=-1)


class ScratchRNNDecoder(nn.Module):
    """A unidirectional stack over the target embeddings y_{t-1}, attending to the encoder states in the order of
    computation of the paper that ``config.attention_type`` names (see the module docstring)."""

    score: AdditiveScore | DotScore  # e_ti, for the attending types only

    def __init__(self, config: ScratchRNNConfig) -> None:
        super().__init__()
        self.attention_type = config.attention_type
        hidden = config.hidden_size
        bahdanau_decoder = config.attention_type in BAHDANAU_DECODERS
        input_size = 2 * hidden if bahdanau_decoder else hidden  # Bahdanau et al.'s decoders read [y_{t-1}; c_t]
        self.stack = ScratchRNNStack(config, input_size, config.decoder_layers, bidirectional=False)
        if config.attention_type in ATTENDING_TYPES:
            self.score = SCORES[config.attention_type](hidden) if config.attention_type in SCORES else DotScore()
        if config.attention_type.startswith("luong"):
            self.attentional = nn.Linear(2 * hidden, hidden)  # s̃_t = tanh(W_c [s_t; c_t] + b_c)
        self.deep_output = DeepOutput(hidden) if bahdanau_decoder and config.bahdanau_output == "maxout" else None

    def forward(
        self,
        inputs_embeds: torch.Tensor,
        encoder_states: torch.Tensor,
        source_mask: AttentionMask,
        states: list[LayerState],
        summary: torch.Tensor | None,
        output_hidden_states: bool | None = False,
    ) -> DecoderResult:
        """inputs_embeds: y_{t-1} embedded (batch, target_length, hidden); states: s_{t-1} of every layer before the
        first input; summary: c of "fixed-context", the top encoder layer's final state (batch, hidden). Returns
        (the vectors V reads (batch, target_length, hidden), the states after the last input, attention weights
        (batch, 1, target_length, source_length) or None, every layer's outputs if asked)."""
        if self.attention_type == "bahdanau":
            return self._bahdanau(inputs_embeds, encoder_states, source_mask, states, output_hidden_states)
        if self.attention_type == "fixed-context":
            assert summary is not None  # the model passes it for "fixed-context"
            context = summary[:, None].expand_as(inputs_embeds)  # c, the same at every step
            step_inputs = torch.cat([inputs_embeds, context], dim=-1)  # [y_{t-1}; c]
            outputs, states, all_hidden = self.stack(step_inputs, None, states, output_hidden_states)  # s_t
            if self.deep_output is not None:
                outputs = self.deep_output(outputs, inputs_embeds, context)  # t_t
            return outputs, states, None, all_hidden
        # s_t = RNN(y_{t-1}, s_{t-1}): without input feeding, all target steps in one (fused) call
        outputs, states, all_hidden = self.stack(inputs_embeds, None, states, output_hidden_states)
        if self.attention_type == "none":
            return outputs, states, None, all_hidden
        scores = self.score(outputs, self.score.keys(encoder_states))  # e_ti from s_t
        context, weights = attend_to_source(scores, source_mask, encoder_states)  # c_t
        attentional = torch.tanh(self.attentional(torch.cat([outputs, context], dim=-1)))  # s̃_t
        return attentional, states, weights, all_hidden

    def _bahdanau(
        self,
        inputs_embeds: torch.Tensor,
        encoder_states: torch.Tensor,
        source_mask: AttentionMask,
        states: list[LayerState],
        output_hidden_states: bool | None,
    ) -> DecoderResult:
        keys = self.score.keys(encoder_states)
        step_outputs: list[torch.Tensor] = []
        contexts: list[torch.Tensor] = []
        all_weights: list[torch.Tensor] = []
        layer_outputs: list[tuple[torch.Tensor, ...]] = []
        for t in range(inputs_embeds.shape[1]):
            previous = states[-1][0][-1]  # s_{t-1}: the top layer's hidden state
            scores = self.score(previous[:, None], keys)  # e_ti
            context, weights = attend_to_source(scores, source_mask, encoder_states)  # c_t
            step_input = torch.cat([inputs_embeds[:, t : t + 1], context], dim=-1)  # [y_{t-1}; c_t]
            output, states, hidden = self.stack(step_input, None, states, output_hidden_states)  # s_t
            step_outputs.append(output)
            contexts.append(context)
            all_weights.append(weights)
            layer_outputs.append(hidden)
        all_hidden = tuple(torch.cat(layer, dim=1) for layer in zip(*layer_outputs)) if output_hidden_states else ()
        outputs = torch.cat(step_outputs, dim=1)
        if self.deep_output is not None:
            outputs = self.deep_output(outputs, inputs_embeds, torch.cat(contexts, dim=1))  # t_t
        return outputs, states, torch.cat(all_weights, dim=2), all_hidden


class ScratchRNNDecoderState(DecodingState):
    """The decoder's recurrent state carried between ``generate`` steps — what the key/value cache is to a
    Transformer: every decoder layer's hidden (and LSTM cell) state, batch-first (batch, layers, hidden), and the
    number of target tokens read so far (``get_seq_length()``). What ``generate`` reads of it: ``DecodingState``."""

    def __init__(self, hidden: torch.Tensor, cell: torch.Tensor | None, seen_tokens: int) -> None:
        super().__init__(seen_tokens, layer_count=hidden.shape[1])
        self.hidden, self.cell = hidden, cell

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        self.hidden = self.hidden.index_select(0, beam_idx.to(self.hidden.device))
        if self.cell is not None:
            self.cell = self.cell.index_select(0, beam_idx.to(self.cell.device))

    def layer_states(self) -> list[LayerState]:
        return unstack_states(self.hidden, self.cell)


# --------------------------------------------------------------------------------------------------------------
# 5. Models and heads
# --------------------------------------------------------------------------------------------------------------


class ScratchRNNPreTrainedModel(ScratchPreTrainedModel):
    """The RNN attention has one kernel of its own: ``attn_implementation`` "eager" and "sdpa" are both accepted
    (and give the same numbers) so that the family loads with the same arguments as the others.

    ``torch.compile``: not as one graph with Dynamo's defaults (``_can_compile_fullgraph = False``). The weights live
    in ``torch.nn.LSTM/GRU/RNN`` modules (the checkpoint layout of torch.nn), which Dynamo refuses to trace unless
    ``torch._dynamo.config.allow_rnn = True``; with that opt-in the forward compiles with ``fullgraph=True``, running
    the step-by-step cell equations (the fused kernels and packed sequences are opaque to Dynamo). The recurrence
    unrolls one step per token, so every new source or target length compiles a new graph, ``dynamic=True`` or not.
    ``generate`` carries the recurrent state (``ScratchRNNDecoderState``), not a transformers ``Cache``, which
    transformers' flags declare: ``_is_stateful`` (a state cannot be rolled back to fewer tokens: ``generate``
    refuses assisted decoding) and ``_supports_default_dynamic_cache() -> False`` on the generation head
    (``ScratchGenerationMixin`` refuses ``cache_implementation`` and ``compile_config``: the state has a fixed
    size already)."""

    config_class = ScratchRNNConfig
    _is_stateful = True
    _can_compile_fullgraph = False
    _no_split_modules = ["ScratchRNNLayer"]

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """Recurrent weights as torch.nn initializes them, U(−1/√H, 1/√H); the rest transformers' defaults."""
        if isinstance(module, nn.RNNBase):
            bound = module.hidden_size**-0.5
            for parameter in module.parameters(recurse=False):
                init.uniform_(parameter, -bound, bound)
        else:
            super()._init_weights(module)


class ScratchRNNModel(ScratchRNNPreTrainedModel):
    """Encoder + decoder; returns the decoder's output vectors (``last_hidden_state``), before the vocabulary
    projection. ``add_decoder=False`` keeps only the encoder (the classification head).

    ``output_hidden_states``: the embeddings and each recurrent layer's outputs, on each side (layers + 1).
    ``output_attentions``: there is no self-attention; ``cross_attentions`` holds one map (batch, 1, target, source)
    — the top layer's attention over the source — or nothing when ``attention_type="none"``."""

    def __init__(self, config: ScratchRNNConfig, add_decoder: bool = True) -> None:
        super().__init__(config)
        self.encoder = ScratchRNNEncoder(config)
        self.decoder = ScratchRNNDecoder(config) if add_decoder else None
        self.post_init()

    # transformers finds the encoder, the decoder and, on the heads, lm_head and the embeddings (through ``model``)
    # by name; the token embeddings inside the encoder it cannot
    def get_input_embeddings(self) -> nn.Module:
        return self.encoder.embed_tokens

    def set_input_embeddings(self, value: nn.Module) -> None:
        self.encoder.embed_tokens = value

    def initial_decoder_states(self, encoder_outputs: ScratchRNNEncoderOutput) -> list[LayerState]:
        """s_0: each decoder layer starts from the encoder's final state of the same layer (Sutskever et al. 2014
        §2), or, when the depths differ, from the top encoder layer's. (Bahdanau et al. 2015 appendix A.2.2 start
        from tanh(W_s h←_1) instead, a learned map of the backward encoder's first state.)"""
        hidden, cell = final_hidden_state(encoder_outputs), encoder_outputs.final_cell_state
        if hidden.shape[1] != self.config.decoder_layers:
            expand = lambda t: t[:, -1:].expand(-1, self.config.decoder_layers, -1)  # noqa: E731
            hidden, cell = expand(hidden), (expand(cell) if cell is not None else None)
        return unstack_states(hidden, cell)

    def check_target(
        self,
        decoder_input_ids: torch.Tensor | None,
        decoder_attention_mask: torch.Tensor | None,
        past_key_values: ScratchRNNDecoderState | None,
        decoder_inputs_embeds: torch.Tensor | None,
    ) -> int:
        """The target, checked before the encoder runs: its ids, the decoder state it continues from, its mask;
        returns the number of target tokens read before. Right-padded targets cannot influence earlier positions of a
        left-to-right RNN: their mask is only checked. It covers the target tokens read so far and the new ones, as
        generate grows it (and the Transformer's)."""
        if past_key_values is not None and not isinstance(past_key_values, ScratchRNNDecoderState):
            raise ValueError(
                f"{CACHE_NAME} must be the ScratchRNNDecoderState a previous call returned, got "
                f"{type(past_key_values).__name__}: the RNN's decoder state is no transformers Cache."
            )
        given = self.encoder.check_tokens(decoder_input_ids, decoder_inputs_embeds, "decoder_input_ids")
        seen = 0 if past_key_values is None else past_key_values.get_seq_length()
        check_attention_mask(decoder_attention_mask, given.shape[0], seen + given.shape[1], "decoder_attention_mask")
        return seen

    def decoder_start(
        self, past_key_values: ScratchRNNDecoderState | None, encoder_outputs: ScratchRNNEncoderOutput
    ) -> list[LayerState]:
        """The decoder's states: the cache's (a ``ScratchRNNDecoderState`` a previous call returned), or s_0 from
        the encoder."""
        if past_key_values is None:
            return self.initial_decoder_states(encoder_outputs)
        return past_key_values.layer_states()

    def encoded_source(
        self,
        input_ids: torch.Tensor | None,
        attention_mask: torch.Tensor | None,
        inputs_embeds: torch.Tensor | None,
        encoder_outputs: ScratchRNNEncoderOutput | tuple[Any, ...] | None,
        output_attentions: bool | None,
        output_hidden_states: bool | None,
    ) -> tuple[ScratchRNNEncoderOutput, AttentionMask]:
        """The encoder's output — as given (a tuple made a ``ScratchRNNEncoderOutput``), or the encoder run on the
        source — and the source's padding, checked once for the encoder and the attention over its states
        (``checked_source``)."""
        source = checked_source(attention_mask, given_source(input_ids, inputs_embeds, encoder_outputs))
        if encoder_outputs is None:
            encoder_outputs = self.encoder(
                input_ids=input_ids,
                attention_mask=source,
                inputs_embeds=inputs_embeds,
                output_attentions=output_attentions,
                output_hidden_states=output_hidden_states,
                **already_normalised(),
            )
        if not isinstance(encoder_outputs, ScratchRNNEncoderOutput):  # a tuple, as transformers accepts it
            encoder_outputs = ScratchRNNEncoderOutput(*encoder_outputs)
        if isinstance(source, AttentionMask):
            return encoder_outputs, source
        states = encoder_outputs.last_hidden_state
        assert states is not None  # the encoder returns it; given encoder_outputs hold it first (given above)
        return encoder_outputs, source_mask(source, states.shape[:2])

    @normalise_inputs
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: ScratchRNNEncoderOutput | tuple[Any, ...] | None = None,
        past_key_values: ScratchRNNDecoderState | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
    ) -> Seq2SeqModelOutput:
        if self.decoder is None:
            raise ValueError("This ScratchRNNModel was built with add_decoder=False: call model.encoder(...) instead.")
        seen = self.check_target(decoder_input_ids, decoder_attention_mask, past_key_values, decoder_inputs_embeds)
        encoder_outputs, source = self.encoded_source(
            input_ids, attention_mask, inputs_embeds, encoder_outputs, output_attentions, output_hidden_states
        )
        encoder_states = encoder_outputs.last_hidden_state

        target = self.encoder.embed(decoder_input_ids, decoder_inputs_embeds)
        states = self.decoder_start(past_key_values, encoder_outputs)
        # c of "fixed-context": the top encoder layer's final state (both directions)
        summary = final_hidden_state(encoder_outputs)[:, -1] if self.config.attention_type == "fixed-context" else None
        outputs, states, weights, all_hidden = self.decoder(
            target, encoder_states, source, states, summary, output_hidden_states
        )

        next_cache = ScratchRNNDecoderState(*stack_states(states), seen + target.shape[1]) if use_cache else None
        return Seq2SeqModelOutput(
            last_hidden_state=outputs,
            **cache_output(next_cache),
            decoder_hidden_states=(target,) + all_hidden if output_hidden_states else None,
            cross_attentions=(weights,) if output_attentions and weights is not None else None,
            encoder_last_hidden_state=encoder_states,
            encoder_hidden_states=encoder_outputs.hidden_states,
        )


class ScratchRNNForConditionalGeneration(ScratchRNNPreTrainedModel, Seq2SeqLMHead):
    """y_t = softmax(V · Dropout(decoder output)); loss = cross-entropy against the (non-shifted) labels, -100
    ignored. Decoder inputs are the labels shifted right behind ``decoder_start_token_id`` when not given."""

    _tied_weights_keys = {"lm_head.weight": "model.encoder.embed_tokens.weight"}

    def __init__(self, config: ScratchRNNConfig) -> None:
        super().__init__(config)
        self.model = ScratchRNNModel(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        # the labels are the decoder's targets as they are (not shifted inside): the Trainer must count every one of
        # them for num_items_in_batch (a "…ForConditionalGeneration" name makes some releases count from the second)
        self.loss_type = "ForMaskedLM"
        self.post_init()

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        return False  # the cache is the recurrent state (ScratchRNNDecoderState), not keys and values

    def lm_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """The output layer, logits V · Dropout(o_t) of y_t = softmax(V o_t), o_t the decoder's output: s_t
        (Bahdanau et al. 2015 §3.1 eq. 4, simplified; Sutskever et al. 2014), Luong et al. 2015's s̃_t (eq. 6) or
        the maxout t_t (Bahdanau et al. appendix A.2.2); V the bias-free ``lm_head``."""
        return self.lm_head(self.dropout(hidden_states))

    def lm_loss(self, logits: torch.Tensor, labels: torch.Tensor, num_items_in_batch: int | None) -> torch.Tensor:
        """−Σ_t log p(y_t | y_<t, x), the log-likelihood of the target the papers maximise (Bahdanau et al. 2015
        §2.1; Sutskever et al. 2014 §2), averaged over the labels ≠ -100 (or per item with ``num_items_in_batch``)."""
        return token_cross_entropy(logits, labels, num_items_in_batch)


class ScratchRNNForSequenceClassification(ScratchRNNPreTrainedModel):
    """logits = W · Dropout(h_final), h_final the top encoder layer's state after the whole sequence (for a BiRNN,
    the forward state after the last token and the backward state after the first, concatenated). Regression,
    single- or multi-label by ``config.problem_type``."""

    def __init__(self, config: ScratchRNNConfig) -> None:
        super().__init__(config)
        self.num_labels = label_count(config)
        self.model = ScratchRNNModel(config, add_decoder=False)
        self.dropout = nn.Dropout(classifier_dropout(config))
        self.classifier = nn.Linear(config.hidden_size, self.num_labels)
        self.post_init()

    @normalise_inputs
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
    ) -> SequenceClassifierOutput:
        given = input_ids if input_ids is not None else inputs_embeds  # (the encoder checks the one-of rule)
        if given is not None:
            check_sequence_labels(labels, given.shape[0], self.num_labels, self.config)
        outputs = self.model.encoder(
            input_ids=input_ids,
            attention_mask=attention_mask,
            inputs_embeds=inputs_embeds,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            **already_normalised(),
        )
        logits = self.classifier(self.dropout(outputs.final_hidden_state[:, -1]))
        loss = sequence_classification_loss(logits, labels, self.config) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=outputs.hidden_states)

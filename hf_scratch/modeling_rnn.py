"""RNN seq2seq baselines (seed 003): what the Transformer replaced, read top-down in the order of the seed.

1. the recurrent cells, written from the seed's equations: RNN, LSTM, GRU (torch's variant and the seed's, Cho et
   al. 2014). The weights sit in the layout of ``torch.nn.RNN/LSTM/GRU``: W[h_{t-1}, x_t] + b is
   W_hh h_{t-1} + b_hh + W_ih x_t + b_ih, with the gate rows in torch's order;
2. a recurrent layer, one direction or two (BiRNN: run forward, run backward, concatenate), padding handled by
   masked updates (cells) or packed sequences (fused), with the fused ``torch.nn`` module as the fast path;
3. the encoder: embeddings → stacked (Bi)RNN layers → the states h_i and the final states that start the decoder;
4. attention over the encoder states: scores e_ti (Bahdanau's additive from s_{t-1}; Luong's dot, general and
   concat from s_t), α_ti = softmax_i(e_ti) over the real source tokens, c_t = Σ_i α_ti h_i;
5. the decoder, in the seed's order of computation:
       Bahdanau: s_{t-1} → e_ti → c_t → s_t = RNN([y_{t-1}; c_t], s_{t-1}) → y_t = softmax(V s_t)
       Luong:    s_{t-1} → s_t = RNN(y_{t-1}, s_{t-1}) → e_ti → c_t → s̃_t = tanh(W_c[s_t; c_t] + b_c) → y_t = softmax(V s̃_t)
       none:     s_{t-1} → s_t = RNN(y_{t-1}, s_{t-1}) → y_t = softmax(V s_t)
   (Luong's concat score uses [s_t; h_i] as in Luong et al. 2015; the seed's [s_{t-1}, y_{i-1}] is a typo);
6. heads: sequence-to-sequence generation (GenerationMixin; the decoder's recurrent state is the cache) and
   sequence classification from the encoder's final state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from transformers import GenerationMixin
from transformers import initialization as init
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import Seq2SeqLMOutput, Seq2SeqModelOutput, SequenceClassifierOutput
from transformers.utils import ModelOutput, can_return_tuple

from .attention import check_attention_mask, masked_softmax, padding_mask, padding_or_none, values_pass
from .configuration_rnn import ScratchRNNConfig
from .layers import (
    ScratchPreTrainedModel,
    check_input_ids,
    check_one_input,
    embedding_rows,
    sequence_classification_loss,
    shift_tokens_right,
    token_cross_entropy,
)

# A layer's recurrent state: (hidden, cell), each (directions, batch, hidden per direction) as torch.nn's h_n / c_n;
# cell is None except for the LSTM.
LayerState = tuple[torch.Tensor, Optional[torch.Tensor]]


# --------------------------------------------------------------------------------------------------------------
# 1. Cells. ``x_projected`` is W_ih x_t + b_ih, computed for every time step at once before the loop.
# --------------------------------------------------------------------------------------------------------------


def rnn_cell(x_projected, state: LayerState, weight_hh, bias_hh, nonlinearity: str) -> LayerState:
    """s_t = f(U x_t + W s_{t-1} + b), f = tanh (or relu)."""
    hidden, _ = state
    pre_activation = x_projected + F.linear(hidden, weight_hh, bias_hh)
    return (torch.tanh(pre_activation) if nonlinearity == "tanh" else torch.relu(pre_activation)), None


def lstm_cell(x_projected, state: LayerState, weight_hh, bias_hh, nonlinearity: str = "") -> LayerState:
    """f_t = σ(W_f[h_{t-1}, x_t] + b_f)          forget gate
    i_t = σ(W_i[h_{t-1}, x_t] + b_i)             input gate
    c̃_t = tanh(W_c[h_{t-1}, x_t] + b_c)         candidate cell state
    c_t = f_t · c_{t-1} + i_t · c̃_t
    o_t = σ(W_o[h_{t-1}, x_t] + b_o)             output gate
    h_t = o_t · tanh(c_t)
    (rows of W in torch's order: i, f, c̃, o)."""
    hidden, cell = state
    i, f, c, o = (x_projected + F.linear(hidden, weight_hh, bias_hh)).chunk(4, dim=-1)
    forget_gate, input_gate, output_gate = torch.sigmoid(f), torch.sigmoid(i), torch.sigmoid(o)
    candidate = torch.tanh(c)
    cell = forget_gate * cell + input_gate * candidate
    return output_gate * torch.tanh(cell), cell


def gru_cell(x_projected, state: LayerState, weight_hh, bias_hh, nonlinearity: str = "") -> LayerState:
    """torch.nn.GRU's variant — the reset gate is applied after the hidden matmul and z keeps the old state:
    r_t = σ(W_ir x_t + b_ir + W_hr h_{t-1} + b_hr); z_t = σ(W_iz x_t + b_iz + W_hz h_{t-1} + b_hz)
    n_t = tanh(W_in x_t + b_in + r_t · (W_hn h_{t-1} + b_hn)); h_t = (1 − z_t) · n_t + z_t · h_{t-1}."""
    hidden, _ = state
    x_reset, x_update, x_new = x_projected.chunk(3, dim=-1)
    h_reset, h_update, h_new = F.linear(hidden, weight_hh, bias_hh).chunk(3, dim=-1)
    reset_gate = torch.sigmoid(x_reset + h_reset)
    update_gate = torch.sigmoid(x_update + h_update)
    candidate = torch.tanh(x_new + reset_gate * h_new)
    return (1 - update_gate) * candidate + update_gate * hidden, None


def gru_cho_cell(x_projected, state: LayerState, weight_hh, bias_hh, nonlinearity: str = "") -> LayerState:
    """The seed's GRU (Cho et al. 2014) — the reset gate is applied before the matmul, u weighs the new state:
    r_t = σ(W_r[h_{t-1}, x_t] + b_r)            reset gate
    h̃_t = tanh(W[r_t · h_{t-1}, x_t] + b)       candidate hidden state
    u_t = σ(W_u[h_{t-1}, x_t] + b_u)            update gate
    h_t = (1 − u_t) · h_{t-1} + u_t · h̃_t
    (rows of W in the order r, u, h̃ — the same shapes as torch.nn.GRU's r, z, n)."""
    hidden, _ = state
    x_reset, x_update, x_candidate = x_projected.chunk(3, dim=-1)
    w_reset, w_update, w_candidate = weight_hh.chunk(3, dim=0)
    b_reset, b_update, b_candidate = bias_hh.chunk(3, dim=0)
    reset_gate = torch.sigmoid(x_reset + F.linear(hidden, w_reset, b_reset))
    candidate = torch.tanh(x_candidate + F.linear(reset_gate * hidden, w_candidate, b_candidate))
    update_gate = torch.sigmoid(x_update + F.linear(hidden, w_update, b_update))
    return (1 - update_gate) * hidden + update_gate * candidate, None


# cell_type → (the torch.nn module that holds the weights (and runs the fused kernel), the cell equations)
CELLS = {
    "rnn": (nn.RNN, rnn_cell),
    "lstm": (nn.LSTM, lstm_cell),
    "gru": (nn.GRU, gru_cell),
    "gru_cho": (nn.GRU, gru_cho_cell),
}
FUSED_CELLS = ("rnn", "lstm", "gru")


# --------------------------------------------------------------------------------------------------------------
# 2. A recurrent layer
# --------------------------------------------------------------------------------------------------------------


def reverse_padded(sequence: torch.Tensor, key_is_real: Optional[torch.Tensor]) -> torch.Tensor:
    """Reverse every (batch, length, …) sequence within its real length, padding staying at the end: the backward
    direction's input, and (applied again) its output back in source order."""
    if key_is_real is None:
        return sequence.flip(1)
    length = sequence.shape[1]
    lengths = key_is_real.sum(-1, keepdim=True)
    positions = torch.arange(length, device=sequence.device)[None, :]
    index = torch.where(positions < lengths, lengths - 1 - positions, positions)
    return sequence.gather(1, index[..., None].expand_as(sequence))


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


def select_state(keep_old: torch.Tensor, old: LayerState, new: LayerState) -> LayerState:
    """Per batch row, the old state where ``keep_old`` (broadcastable bool) and the new one elsewhere."""
    return tuple(torch.where(keep_old, o, n) if n is not None else None for o, n in zip(old, new))


class ScratchRNNLayer(GradientCheckpointingLayer):
    """One recurrent layer over a (batch, length, input_size) sequence, forward only or both directions.

    Its weights live in a one-layer ``torch.nn.RNN/LSTM/GRU`` (``weight_ih_l0``, ``weight_hh_l0``, ``bias_ih_l0``,
    ``bias_hh_l0`` and the ``_reverse`` ones): with ``rnn_implementation="fused"`` and a torch-compatible cell that
    module runs (packed sequences skip the padding); otherwise the cell equations above run step by step, with the
    state frozen on padding. Either way the outputs are 0 at padding and the final state is the one after each
    sequence's last real token (forward) or first token (backward)."""

    def __init__(self, config: ScratchRNNConfig, input_size: int, hidden_size: int, bidirectional: bool):
        super().__init__()
        module_class, self.cell = CELLS[config.cell_type]
        extra = {"nonlinearity": config.rnn_nonlinearity} if config.cell_type == "rnn" else {}
        self.recurrence = module_class(input_size, hidden_size, batch_first=True, bidirectional=bidirectional, **extra)
        self.has_cell_state = config.cell_type == "lstm"
        self.nonlinearity = config.rnn_nonlinearity
        self.num_directions = 2 if bidirectional else 1
        self.hidden_size = hidden_size
        self.fused = config.rnn_implementation == "fused" and config.cell_type in FUSED_CELLS

    def zero_state(self, inputs: torch.Tensor) -> LayerState:
        zeros = inputs.new_zeros(self.num_directions, inputs.shape[0], self.hidden_size)
        return zeros, (zeros if self.has_cell_state else None)

    def forward(
        self,
        inputs: torch.Tensor,
        key_is_real: Optional[torch.Tensor] = None,
        hidden: Optional[torch.Tensor] = None,
        cell: Optional[torch.Tensor] = None,
    ) -> tuple[torch.Tensor, LayerState]:
        """(outputs (batch, length, directions · hidden), final state). ``key_is_real``: (batch, length) bool,
        right-padded, or None; ``hidden`` / ``cell``: the initial state (zeros when None). Tensors are passed
        positionally so that gradient checkpointing propagates their gradients."""
        state = self.zero_state(inputs) if hidden is None else (hidden, cell)
        if self.fused and not torch.compiler.is_compiling():  # Dynamo does not trace torch.nn's fused RNN kernels
            return self._fused(inputs, key_is_real, state)
        return self._cells(inputs, key_is_real, state)

    def _fused(self, inputs, key_is_real, state: LayerState):
        if inputs.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
            # oneDNN's fused recurrence has no bfloat16 kernel on CPUs without native bfloat16 ("could not create a
            # primitive descriptor"): run it outside autocast, in the precision of the weights
            dtype = self.recurrence.weight_ih_l0.dtype
            with torch.autocast("cpu", enabled=False):
                state = tuple(None if s is None else s.to(dtype) for s in state)
                return self._fused(inputs.to(dtype), key_is_real, state)
        # cuDNN refuses a non-contiguous initial state ("rnn: hx is not contiguous"); the decoder's is a slice of the
        # encoder's (batch, layers, hidden) final states
        initial = tuple(s.contiguous() for s in state) if self.has_cell_state else state[0].contiguous()
        if key_is_real is None:
            outputs, final = self.recurrence(inputs, initial)
            # torch.nn.LSTM returns batch-first outputs as a view (transposed): give them their own memory (a view
            # returned by an FSDP2 unit loses its pre-backward hook to any in-place op; the next kernel wants them
            # contiguous anyway). A copy, also when the view is contiguous (one token, or one row).
            outputs = outputs.clone(memory_format=torch.contiguous_format)
        else:
            lengths = key_is_real.sum(-1)
            # a row without real tokens is packed as length 1, then given back its initial state and zero outputs
            packed = pack_padded_sequence(inputs, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False)
            outputs, final = self.recurrence(packed, initial)
            outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=inputs.shape[1])
            outputs = outputs.masked_fill(~key_is_real[..., None], 0.0)
        final = final if self.has_cell_state else (final, None)
        if key_is_real is not None:
            final = select_state((key_is_real.sum(-1) == 0)[None, :, None], state, final)
        return outputs, final

    def _cells(self, inputs, key_is_real, state: LayerState):
        hidden, cell = state
        outputs, final_hidden, final_cell = [], [], []
        for direction in range(self.num_directions):
            suffix = "_l0_reverse" if direction else "_l0"
            names = ("weight_ih", "bias_ih", "weight_hh", "bias_hh")
            weights = [getattr(self.recurrence, name + suffix) for name in names]
            sequence = reverse_padded(inputs, key_is_real) if direction else inputs
            direction_state = (hidden[direction], cell[direction] if cell is not None else None)
            output, (h, c) = self._run_direction(sequence, key_is_real, direction_state, *weights)
            outputs.append(reverse_padded(output, key_is_real) if direction else output)
            final_hidden.append(h)
            final_cell.append(c)
        final = (torch.stack(final_hidden), torch.stack(final_cell) if self.has_cell_state else None)
        return torch.cat(outputs, dim=-1), final

    def _run_direction(self, sequence, key_is_real, state, weight_ih, bias_ih, weight_hh, bias_hh):
        x_projected = F.linear(sequence, weight_ih, bias_ih)  # W_ih x_t + b_ih for every t in one matmul
        steps = []
        for t in range(sequence.shape[1]):
            new_state = self.cell(x_projected[:, t], state, weight_hh, bias_hh, self.nonlinearity)
            if key_is_real is not None:  # padding: keep the state of the last real token
                new_state = select_state(~key_is_real[:, t, None], state, new_state)
            state = new_state
            steps.append(state[0])
        outputs = torch.stack(steps, dim=1)
        if key_is_real is not None:
            outputs = outputs.masked_fill(~key_is_real[..., None], 0.0)
        return outputs, state


class ScratchRNNStack(nn.Module):
    """L stacked layers; layer l > 0 reads layer l − 1's outputs after dropout (as ``torch.nn.LSTM(dropout=p)``).
    A bidirectional stack gives each direction hidden_size / 2 units, so outputs always have hidden_size features."""

    def __init__(self, config: ScratchRNNConfig, input_size: int, num_layers: int, bidirectional: bool):
        super().__init__()
        per_direction = config.hidden_size // (2 if bidirectional else 1)
        self.layers = nn.ModuleList(
            ScratchRNNLayer(config, input_size if index == 0 else config.hidden_size, per_direction, bidirectional)
            for index in range(num_layers)
        )
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, inputs, key_is_real=None, states: Optional[list[LayerState]] = None, output_hidden_states=False):
        """(top-layer outputs, final state of every layer, every layer's outputs if asked)."""
        hidden, finals, all_hidden = inputs, [], ()
        for index, layer in enumerate(self.layers):
            if index > 0:
                hidden = self.dropout(hidden)
            hidden, final = layer(hidden, key_is_real, *(states[index] if states is not None else ()))
            finals.append(final)
            if output_hidden_states:
                all_hidden += (hidden,)
        return hidden, finals, all_hidden


def stack_states(states: list[LayerState]) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
    """Per-layer states → batch-first (batch, layers, hidden) tensors, the directions of a layer concatenated."""

    def batch_first(tensors):
        return torch.stack([t.permute(1, 0, 2).reshape(t.shape[1], -1) for t in tensors], dim=1)

    hidden = batch_first([h for h, _ in states])
    cell = batch_first([c for _, c in states]) if states[0][1] is not None else None
    return hidden, cell


def unstack_states(hidden: torch.Tensor, cell: Optional[torch.Tensor]) -> list[LayerState]:
    """(batch, layers, hidden) → per-layer (1, batch, hidden) states of a unidirectional stack."""
    return [
        (hidden[:, index][None], cell[:, index][None] if cell is not None else None) for index in range(hidden.shape[1])
    ]


# --------------------------------------------------------------------------------------------------------------
# 3. Encoder
# --------------------------------------------------------------------------------------------------------------


@dataclass
class ScratchRNNEncoderOutput(ModelOutput):
    """``last_hidden_state``: h_i for every source token (batch, source_length, hidden), 0 at padding;
    ``final_hidden_state`` / ``final_cell_state``: every layer's state after the whole source
    (batch, layers, hidden; cell only for the LSTM), both directions concatenated for a BiRNN."""

    last_hidden_state: Optional[torch.Tensor] = None
    final_hidden_state: Optional[torch.Tensor] = None
    final_cell_state: Optional[torch.Tensor] = None
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None
    attentions: Optional[tuple[torch.Tensor, ...]] = None


class ScratchRNNEncoder(nn.Module):
    """Embeddings → dropout → stacked (Bi)RNN. Owns the token embeddings, which the decoder and (tied) the output
    projection share."""

    def __init__(self, config: ScratchRNNConfig):
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.stack = ScratchRNNStack(config, config.hidden_size, config.encoder_layers, config.bidirectional_encoder)

    def embed(self, input_ids, inputs_embeds, name: str = "input_ids") -> torch.Tensor:
        check_one_input(input_ids, inputs_embeds)
        if inputs_embeds is None:
            check_input_ids(input_ids, embedding_rows(self.embed_tokens), name=name)
            inputs_embeds = self.embed_tokens(input_ids)
        return self.dropout(inputs_embeds)

    @can_return_tuple
    def forward(
        self,
        input_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        inputs_embeds: Optional[torch.Tensor] = None,
        output_attentions: Optional[bool] = None,
        output_hidden_states: Optional[bool] = None,
        return_dict: Optional[bool] = None,
        **kwargs,
    ) -> ScratchRNNEncoderOutput:
        output_hidden_states = self.config.output_hidden_states if output_hidden_states is None else output_hidden_states
        hidden_states = self.embed(input_ids, inputs_embeds)
        key_is_real = source_padding(attention_mask, hidden_states.shape[:2])
        outputs, finals, all_hidden = self.stack(hidden_states, key_is_real, None, output_hidden_states)
        final_hidden, final_cell = stack_states(finals)
        return ScratchRNNEncoderOutput(
            last_hidden_state=outputs,
            final_hidden_state=final_hidden,
            final_cell_state=final_cell,
            hidden_states=(hidden_states,) + all_hidden if output_hidden_states else None,
        )


def source_padding(attention_mask: Optional[torch.Tensor], shape) -> Optional[torch.Tensor]:
    """The validated (batch, source_length) bool mask of real source tokens; None when nothing is padded."""
    key_is_real = padding_or_none(check_attention_mask(attention_mask, shape[0], shape[1]))
    if key_is_real is not None:
        check_right_padded(key_is_real)
    return key_is_real


# --------------------------------------------------------------------------------------------------------------
# 4. Attention over the encoder states. Scores have the shape of transformers' cross-attentions:
#    (batch, 1 head, target_length, source_length).
# --------------------------------------------------------------------------------------------------------------


class AdditiveScore(nn.Module):
    """e_ti = v_aᵀ tanh(W_a [q_t; h_i]) = v_aᵀ tanh(W_q q_t + W_k h_i) — Bahdanau's score with q_t = s_{t−1},
    Luong's concat score with q_t = s_t. W_k h_i is computed once per source (``keys``)."""

    def __init__(self, hidden_size: int):
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
    """Luong's dot score: e_ti = s_tᵀ h_i."""

    def keys(self, encoder_states: torch.Tensor) -> torch.Tensor:
        return encoder_states

    def forward(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        return torch.matmul(queries, keys.transpose(-1, -2))[:, None]


class GeneralScore(DotScore):
    """Luong's general score: e_ti = s_tᵀ W_a h_i (W_a h_i computed once per source)."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.key_proj = nn.Linear(hidden_size, hidden_size, bias=False)

    def keys(self, encoder_states: torch.Tensor) -> torch.Tensor:
        return self.key_proj(encoder_states)


SCORES = {"bahdanau": AdditiveScore, "luong-concat": AdditiveScore, "luong-general": GeneralScore}


def attend_to_source(scores, key_is_real, encoder_states) -> tuple[torch.Tensor, torch.Tensor]:
    """α_ti = exp(e_ti) / Σ_k exp(e_tk) over the real source tokens (exactly 0 on padding); c_t = Σ_i α_ti h_i.
    Returns (contexts (batch, target_length, hidden), weights (batch, 1, target_length, source_length))."""
    weights = masked_softmax(scores, padding_mask(key_is_real) if key_is_real is not None else None)
    return torch.matmul(weights[:, 0], encoder_states), weights


# --------------------------------------------------------------------------------------------------------------
# 5. Decoder
# --------------------------------------------------------------------------------------------------------------


class ScratchRNNDecoder(nn.Module):
    """A unidirectional stack over the target embeddings y_{t-1}, attending to the encoder states in the seed's
    order of computation for ``config.attention_type`` (see the module docstring)."""

    def __init__(self, config: ScratchRNNConfig):
        super().__init__()
        self.attention_type = config.attention_type
        hidden = config.hidden_size
        input_size = 2 * hidden if config.attention_type == "bahdanau" else hidden  # Bahdanau reads [y_{t-1}; c_t]
        self.stack = ScratchRNNStack(config, input_size, config.decoder_layers, bidirectional=False)
        if config.attention_type != "none":
            self.score = SCORES[config.attention_type](hidden) if config.attention_type in SCORES else DotScore()
        if config.attention_type.startswith("luong"):
            self.attentional = nn.Linear(2 * hidden, hidden)  # s̃_t = tanh(W_c [s_t; c_t] + b_c)

    def forward(self, inputs_embeds, encoder_states, key_is_real, states: list[LayerState], output_hidden_states=False):
        """inputs_embeds: y_{t-1} embedded (batch, target_length, hidden); states: s_{t-1} of every layer before the
        first input. Returns (the vectors V reads (batch, target_length, hidden), the states after the last input,
        attention weights (batch, 1, target_length, source_length) or None, every layer's outputs if asked)."""
        if self.attention_type == "bahdanau":
            return self._bahdanau(inputs_embeds, encoder_states, key_is_real, states, output_hidden_states)
        # s_t = RNN(y_{t-1}, s_{t-1}): without input feeding, all target steps in one (fused) call
        outputs, states, all_hidden = self.stack(inputs_embeds, None, states, output_hidden_states)
        if self.attention_type == "none":
            return outputs, states, None, all_hidden
        scores = self.score(outputs, self.score.keys(encoder_states))  # e_ti from s_t
        context, weights = attend_to_source(scores, key_is_real, encoder_states)  # c_t
        attentional = torch.tanh(self.attentional(torch.cat([outputs, context], dim=-1)))  # s̃_t
        return attentional, states, weights, all_hidden

    def _bahdanau(self, inputs_embeds, encoder_states, key_is_real, states, output_hidden_states):
        keys = self.score.keys(encoder_states)
        outputs, all_weights, layer_outputs = [], [], []
        for t in range(inputs_embeds.shape[1]):
            previous = states[-1][0][-1]  # s_{t-1}: the top layer's hidden state
            scores = self.score(previous[:, None], keys)  # e_ti
            context, weights = attend_to_source(scores, key_is_real, encoder_states)  # c_t
            step_input = torch.cat([inputs_embeds[:, t : t + 1], context], dim=-1)  # [y_{t-1}; c_t]
            output, states, hidden = self.stack(step_input, None, states, output_hidden_states)  # s_t
            outputs.append(output)
            all_weights.append(weights)
            layer_outputs.append(hidden)
        all_hidden = tuple(torch.cat(layer, dim=1) for layer in zip(*layer_outputs)) if output_hidden_states else ()
        return torch.cat(outputs, dim=1), states, torch.cat(all_weights, dim=2), all_hidden


class ScratchRNNDecoderState:
    """The decoder's recurrent state carried between ``generate`` steps — what the key/value cache is to a
    Transformer: every decoder layer's hidden (and LSTM cell) state, batch-first (batch, layers, hidden), and the
    number of target tokens read so far. ``generate`` asks ``get_seq_length()`` and beam search calls
    ``reorder_cache(beam_idx)``."""

    is_compileable = False
    is_croppable = False

    def __init__(self, hidden: torch.Tensor, cell: Optional[torch.Tensor], seen_tokens: int):
        self.hidden, self.cell, self.seen_tokens = hidden, cell, seen_tokens

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.seen_tokens

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        self.hidden = self.hidden.index_select(0, beam_idx.to(self.hidden.device))
        if self.cell is not None:
            self.cell = self.cell.index_select(0, beam_idx.to(self.cell.device))

    def layer_states(self) -> list[LayerState]:
        return unstack_states(self.hidden, self.cell)


# --------------------------------------------------------------------------------------------------------------
# 6. Models and heads
# --------------------------------------------------------------------------------------------------------------


class ScratchRNNPreTrainedModel(ScratchPreTrainedModel):
    """The RNN attention has one kernel of its own: ``attn_implementation`` "eager" and "sdpa" are both accepted
    (and give the same numbers) so that the family loads with the same arguments as the others.

    ``torch.compile``: not as one graph with Dynamo's defaults (``_can_compile_fullgraph = False``). The weights live
    in ``torch.nn.LSTM/GRU/RNN`` modules (the checkpoint layout of torch.nn), which Dynamo refuses to trace unless
    ``torch._dynamo.config.allow_rnn = True``; with that opt-in the forward compiles with ``fullgraph=True``, running
    the step-by-step cell equations (the fused kernels and packed sequences are opaque to Dynamo). The recurrence
    unrolls one step per token, so every new source or target length compiles a new graph, ``dynamic=True`` or not.
    ``generate`` carries the recurrent state (``ScratchRNNDecoderState``), not a transformers ``Cache``:
    ``cache_implementation="static"`` does not apply — the state has a fixed size already."""

    config_class = ScratchRNNConfig
    _can_compile_fullgraph = False
    _no_split_modules = ["ScratchRNNLayer"]

    @torch.no_grad()
    def _init_weights(self, module):
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

    def __init__(self, config: ScratchRNNConfig, add_decoder: bool = True):
        super().__init__(config)
        self.encoder = ScratchRNNEncoder(config)
        self.decoder = ScratchRNNDecoder(config) if add_decoder else None
        self.post_init()

    def get_input_embeddings(self):
        return self.encoder.embed_tokens

    def set_input_embeddings(self, value):
        self.encoder.embed_tokens = value

    def get_encoder(self, modality: Optional[str] = None):
        return self.encoder

    def get_decoder(self):
        return self.decoder

    def initial_decoder_states(self, encoder_outputs: ScratchRNNEncoderOutput) -> list[LayerState]:
        """s_0: each decoder layer starts from the encoder's final state of the same layer, or, when the depths
        differ, from the top encoder layer's."""
        hidden, cell = encoder_outputs.final_hidden_state, encoder_outputs.final_cell_state
        if hidden.shape[1] != self.config.decoder_layers:
            expand = lambda t: t[:, -1:].expand(-1, self.config.decoder_layers, -1)  # noqa: E731
            hidden, cell = expand(hidden), (expand(cell) if cell is not None else None)
        return unstack_states(hidden, cell)

    @can_return_tuple
    def forward(
        self,
        input_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        decoder_input_ids: Optional[torch.Tensor] = None,
        decoder_attention_mask: Optional[torch.Tensor] = None,
        encoder_outputs: Optional[ScratchRNNEncoderOutput] = None,
        past_key_values: Optional[ScratchRNNDecoderState] = None,
        inputs_embeds: Optional[torch.Tensor] = None,
        decoder_inputs_embeds: Optional[torch.Tensor] = None,
        use_cache: Optional[bool] = None,
        output_attentions: Optional[bool] = None,
        output_hidden_states: Optional[bool] = None,
        return_dict: Optional[bool] = None,
        **kwargs,
    ) -> Seq2SeqModelOutput:
        if self.decoder is None:
            raise ValueError("This ScratchRNNModel was built with add_decoder=False: call model.encoder(...) instead.")
        if past_key_values is not None and not isinstance(past_key_values, ScratchRNNDecoderState):
            raise ValueError(
                f"past_key_values must be the ScratchRNNDecoderState a previous call returned, got "
                f"{type(past_key_values).__name__}."
            )
        use_cache = self.config.use_cache if use_cache is None else use_cache
        output_attentions = self.config.output_attentions if output_attentions is None else output_attentions
        output_hidden_states = self.config.output_hidden_states if output_hidden_states is None else output_hidden_states

        if encoder_outputs is None:
            encoder_outputs = self.encoder(
                input_ids, attention_mask, inputs_embeds, output_hidden_states=output_hidden_states, return_dict=True
            )
        elif not isinstance(encoder_outputs, ScratchRNNEncoderOutput):
            encoder_outputs = ScratchRNNEncoderOutput(*encoder_outputs)
        encoder_states = encoder_outputs.last_hidden_state
        key_is_real = source_padding(attention_mask, encoder_states.shape[:2])

        target = self.encoder.embed(decoder_input_ids, decoder_inputs_embeds, name="decoder_input_ids")
        # Right-padded targets cannot influence earlier positions of a left-to-right RNN: the mask is only checked.
        check_attention_mask(decoder_attention_mask, target.shape[0], target.shape[1], name="decoder_attention_mask")
        if past_key_values is not None:
            states, seen = past_key_values.layer_states(), past_key_values.get_seq_length()
        else:
            states, seen = self.initial_decoder_states(encoder_outputs), 0
        outputs, states, weights, all_hidden = self.decoder(target, encoder_states, key_is_real, states, output_hidden_states)

        next_cache = ScratchRNNDecoderState(*stack_states(states), seen + target.shape[1]) if use_cache else None
        return Seq2SeqModelOutput(
            last_hidden_state=outputs,
            past_key_values=next_cache,
            decoder_hidden_states=(target,) + all_hidden if output_hidden_states else None,
            cross_attentions=(weights,) if output_attentions and weights is not None else None,
            encoder_last_hidden_state=encoder_states,
            encoder_hidden_states=encoder_outputs.hidden_states,
        )


class ScratchRNNForConditionalGeneration(ScratchRNNPreTrainedModel, GenerationMixin):
    """y_t = softmax(V · Dropout(decoder output)); loss = cross-entropy against the (non-shifted) labels, -100
    ignored. Decoder inputs are the labels shifted right behind ``decoder_start_token_id`` when not given."""

    _tied_weights_keys = {"lm_head.weight": "model.encoder.embed_tokens.weight"}

    def __init__(self, config: ScratchRNNConfig):
        super().__init__(config)
        self.model = ScratchRNNModel(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        return False  # the cache is the recurrent state (ScratchRNNDecoderState), not keys and values

    def get_input_embeddings(self):
        return self.model.get_input_embeddings()

    def set_input_embeddings(self, value):
        self.model.set_input_embeddings(value)

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    def get_encoder(self, modality: Optional[str] = None):
        return self.model.encoder

    def get_decoder(self):
        return self.model.decoder

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)

    @can_return_tuple
    def forward(
        self,
        input_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        decoder_input_ids: Optional[torch.Tensor] = None,
        decoder_attention_mask: Optional[torch.Tensor] = None,
        encoder_outputs: Optional[ScratchRNNEncoderOutput] = None,
        past_key_values: Optional[ScratchRNNDecoderState] = None,
        inputs_embeds: Optional[torch.Tensor] = None,
        decoder_inputs_embeds: Optional[torch.Tensor] = None,
        labels: Optional[torch.Tensor] = None,
        use_cache: Optional[bool] = None,
        output_attentions: Optional[bool] = None,
        output_hidden_states: Optional[bool] = None,
        return_dict: Optional[bool] = None,
        **kwargs,
    ) -> Seq2SeqLMOutput:
        if labels is not None:
            use_cache = False
            if decoder_input_ids is None and decoder_inputs_embeds is None:
                decoder_input_ids = self.prepare_decoder_input_ids_from_labels(labels)
        outputs = self.model(
            input_ids, attention_mask, decoder_input_ids, decoder_attention_mask, encoder_outputs, past_key_values,
            inputs_embeds, decoder_inputs_embeds, use_cache, output_attentions, output_hidden_states, return_dict=True,
        )
        logits = self.lm_head(self.dropout(outputs.last_hidden_state))
        loss = token_cross_entropy(logits, labels, kwargs.get("num_items_in_batch")) if labels is not None else None
        return Seq2SeqLMOutput(
            loss=loss,
            logits=logits,
            past_key_values=outputs.past_key_values,
            decoder_hidden_states=outputs.decoder_hidden_states,
            cross_attentions=outputs.cross_attentions,
            encoder_last_hidden_state=outputs.encoder_last_hidden_state,
            encoder_hidden_states=outputs.encoder_hidden_states,
        )


class ScratchRNNForSequenceClassification(ScratchRNNPreTrainedModel):
    """logits = W · Dropout(h_final), h_final the top encoder layer's state after the whole sequence (for a BiRNN,
    the forward state after the last token and the backward state after the first, concatenated). Regression,
    single- or multi-label by ``config.problem_type``."""

    def __init__(self, config: ScratchRNNConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.model = ScratchRNNModel(config, add_decoder=False)
        dropout = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def get_input_embeddings(self):
        return self.model.get_input_embeddings()

    def set_input_embeddings(self, value):
        self.model.set_input_embeddings(value)

    @can_return_tuple
    def forward(
        self,
        input_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        inputs_embeds: Optional[torch.Tensor] = None,
        labels: Optional[torch.Tensor] = None,
        output_attentions: Optional[bool] = None,
        output_hidden_states: Optional[bool] = None,
        return_dict: Optional[bool] = None,
        **kwargs,
    ) -> SequenceClassifierOutput:
        outputs = self.model.encoder(
            input_ids, attention_mask, inputs_embeds, output_hidden_states=output_hidden_states, return_dict=True
        )
        logits = self.classifier(self.dropout(outputs.final_hidden_state[:, -1]))
        loss = sequence_classification_loss(logits, labels, self.config) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=outputs.hidden_states)

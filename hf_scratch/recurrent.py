"""Recurrent layers, written from the cells' equations: the building blocks of the RNN baselines (modeling_rnn.py).

1. the cells: Elman's RNN (s_t = f(U x_t + W s_{t-1} + b)), the LSTM (Hochreiter & Schmidhuber 1997, with the
   forget gate of Gers et al. 2000) and the GRU, both as torch.nn.GRU computes it and as Cho et al. 2014 §2.3 write
   it. The weights sit in the layout of ``torch.nn.RNN/LSTM/GRU``: W[h_{t-1}, x_t] + b is
   W_hh h_{t-1} + b_hh + W_ih x_t + b_ih, with the gate rows in torch's order;
2. a recurrent layer, one direction or two (a BiRNN, Schuster & Paliwal 1997: run forward, run backward,
   concatenate), padding handled by masked updates (cells) or packed sequences (fused), with the fused ``torch.nn``
   module as the fast path; and a stack of such layers.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from transformers.modeling_layers import GradientCheckpointingLayer

from .configuration_rnn import ScratchRNNConfig

# A layer's recurrent state: (hidden, cell), each (directions, batch, hidden per direction) as torch.nn's h_n / c_n;
# cell is None except for the LSTM.
LayerState = tuple[torch.Tensor, torch.Tensor | None]
# A cell's equations: (x_projected, state, weight_hh, bias_hh, nonlinearity) → the next state.
Cell = Callable[[torch.Tensor, LayerState, torch.Tensor, torch.Tensor, str], LayerState]


# --------------------------------------------------------------------------------------------------------------
# 1. Cells. ``x_projected`` is W_ih x_t + b_ih, computed for every time step at once before the loop.
# --------------------------------------------------------------------------------------------------------------


def rnn_cell(
    x_projected: torch.Tensor, state: LayerState, weight_hh: torch.Tensor, bias_hh: torch.Tensor, nonlinearity: str
) -> LayerState:
    """Elman's RNN (Elman 1990; the RNN of Sutskever et al. 2014 §2): s_t = f(U x_t + W s_{t-1} + b), f = tanh (or
    relu)."""
    hidden, _ = state
    pre_activation = x_projected + F.linear(hidden, weight_hh, bias_hh)
    return (torch.tanh(pre_activation) if nonlinearity == "tanh" else torch.relu(pre_activation)), None


def lstm_cell(
    x_projected: torch.Tensor, state: LayerState, weight_hh: torch.Tensor, bias_hh: torch.Tensor, nonlinearity: str = ""
) -> LayerState:
    """The LSTM (Hochreiter & Schmidhuber 1997) with the forget gate of Gers et al. 2000, as torch.nn.LSTM has it:
    f_t = σ(W_f[h_{t-1}, x_t] + b_f)             forget gate
    i_t = σ(W_i[h_{t-1}, x_t] + b_i)             input gate
    c̃_t = tanh(W_c[h_{t-1}, x_t] + b_c)         candidate cell state
    c_t = f_t · c_{t-1} + i_t · c̃_t
    o_t = σ(W_o[h_{t-1}, x_t] + b_o)             output gate
    h_t = o_t · tanh(c_t)
    (rows of W in torch's order: i, f, c̃, o)."""
    hidden, cell = state
    if cell is None:
        raise ValueError("the LSTM's state needs a cell state c_{t-1}: give (hidden, cell), not (hidden, None)")
    i, f, c, o = (x_projected + F.linear(hidden, weight_hh, bias_hh)).chunk(4, dim=-1)
    forget_gate, input_gate, output_gate = torch.sigmoid(f), torch.sigmoid(i), torch.sigmoid(o)
    candidate = torch.tanh(c)
    cell = forget_gate * cell + input_gate * candidate
    return output_gate * torch.tanh(cell), cell


def gru_cell(
    x_projected: torch.Tensor, state: LayerState, weight_hh: torch.Tensor, bias_hh: torch.Tensor, nonlinearity: str = ""
) -> LayerState:
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


def gru_cho_cell(
    x_projected: torch.Tensor, state: LayerState, weight_hh: torch.Tensor, bias_hh: torch.Tensor, nonlinearity: str = ""
) -> LayerState:
    """The GRU of Cho et al. 2014 (§2.3, eq. 5-8) — the reset gate is applied before the matmul:
    r_t = σ(W_r[h_{t-1}, x_t] + b_r)            reset gate
    h̃_t = tanh(W[r_t · h_{t-1}, x_t] + b)       candidate hidden state
    u_t = σ(W_u[h_{t-1}, x_t] + b_u)            update gate
    h_t = (1 − u_t) · h_{t-1} + u_t · h̃_t
    Written, as Chung et al. 2014 (§3.2) write it, with the update gate weighing the new state: Cho et al.'s z_t,
    which weighs the old one (h_t = z_t · h_{t-1} + (1 − z_t) · h̃_t), is 1 − u_t — the same model with the learned
    gate relabelled. Rows of W in the order r, u, h̃ — the shapes of torch.nn.GRU's r, z, n, so the weights load
    into either cell; the biases b are b_ih + b_hh of that layout."""
    hidden, _ = state
    x_reset, x_update, x_candidate = x_projected.chunk(3, dim=-1)
    w_reset, w_update, w_candidate = weight_hh.chunk(3, dim=0)
    b_reset, b_update, b_candidate = bias_hh.chunk(3, dim=0)
    reset_gate = torch.sigmoid(x_reset + F.linear(hidden, w_reset, b_reset))
    candidate = torch.tanh(x_candidate + F.linear(reset_gate * hidden, w_candidate, b_candidate))
    update_gate = torch.sigmoid(x_update + F.linear(hidden, w_update, b_update))
    return (1 - update_gate) * hidden + update_gate * candidate, None


# cell_type → (the torch.nn module that holds the weights (and runs the fused kernel), the cell equations)
CELLS: dict[str, tuple[Callable[..., nn.RNNBase], Cell]] = {
    "rnn": (nn.RNN, rnn_cell),
    "lstm": (nn.LSTM, lstm_cell),
    "gru": (nn.GRU, gru_cell),
    "gru_cho": (nn.GRU, gru_cho_cell),
}
FUSED_CELLS = ("rnn", "lstm", "gru")


# --------------------------------------------------------------------------------------------------------------
# 2. A recurrent layer
# --------------------------------------------------------------------------------------------------------------


def reverse_padded(sequence: torch.Tensor, is_real: torch.Tensor | None) -> torch.Tensor:
    """Reverse every (batch, length, …) sequence within its real length, padding staying at the end: the backward
    direction's input, and (applied again) its output back in source order."""
    if is_real is None:
        return sequence.flip(1)
    length = sequence.shape[1]
    lengths = is_real.sum(-1, keepdim=True)
    positions = torch.arange(length, device=sequence.device)[None, :]
    index = torch.where(positions < lengths, lengths - 1 - positions, positions)
    return sequence.gather(1, index[..., None].expand_as(sequence))


def select_state(keep_old: torch.Tensor, old: LayerState, new: LayerState) -> LayerState:
    """Per batch row, the old state where ``keep_old`` (broadcastable bool) and the new one elsewhere."""
    (old_hidden, old_cell), (new_hidden, new_cell) = old, new
    hidden = torch.where(keep_old, old_hidden, new_hidden)
    cell = torch.where(keep_old, old_cell, new_cell) if old_cell is not None and new_cell is not None else None
    return hidden, cell


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
        is_real: torch.Tensor | None = None,
        hidden: torch.Tensor | None = None,
        cell: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(outputs (batch, length, directions · hidden), final hidden state, final cell state or None).
        ``is_real``: (batch, length) bool, right-padded, or None; ``hidden`` / ``cell``: the initial state (zeros
        when None). Tensors go in positionally and come out as a flat tuple, so that gradient checkpointing propagates
        their gradients: reentrant checkpointing (``use_reentrant=True``) tracks only tensors at the top level of a
        layer's inputs and outputs, and a final state nested in a tuple came back without gradient (the sequence
        classifier, which reads the final state, then trained nothing below its classifier)."""
        state = self.zero_state(inputs) if hidden is None else (hidden, cell)
        if self.fused and not torch.compiler.is_compiling():  # Dynamo does not trace torch.nn's fused RNN kernels
            outputs, final = self._fused(inputs, is_real, state)
        else:
            outputs, final = self._cells(inputs, is_real, state)
        return outputs, *final

    def _fused(
        self, inputs: torch.Tensor, is_real: torch.Tensor | None, state: LayerState
    ) -> tuple[torch.Tensor, LayerState]:
        if inputs.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
            # oneDNN's fused recurrence has no bfloat16 kernel on CPUs without native bfloat16 ("could not create a
            # primitive descriptor"): run it outside autocast, in the precision of the weights
            # (torch types a module's attributes Tensor | Module)
            dtype: torch.dtype = self.recurrence.weight_ih_l0.dtype  # type: ignore[assignment]
            with torch.autocast("cpu", enabled=False):
                state = (state[0].to(dtype), None if state[1] is None else state[1].to(dtype))
                return self._fused(inputs.to(dtype), is_real, state)
        # cuDNN refuses a non-contiguous initial state ("rnn: hx is not contiguous"); the decoder's is a slice of the
        # encoder's (batch, layers, hidden) final states
        hidden, cell = state
        initial = (
            (hidden.contiguous(), cell.contiguous())
            if self.has_cell_state and cell is not None
            else hidden.contiguous()
        )
        if is_real is None:
            outputs, final = self.recurrence(inputs, initial)
            # torch.nn.LSTM returns batch-first outputs as a view (transposed): give them their own memory (a view
            # returned by an FSDP2 unit loses its pre-backward hook to any in-place op; the next kernel wants them
            # contiguous anyway). A copy, also when the view is contiguous (one token, or one row).
            outputs = outputs.clone(memory_format=torch.contiguous_format)
        else:
            lengths = is_real.sum(-1)
            # a row without real tokens is packed as length 1, then given back its initial state and zero outputs
            packed = pack_padded_sequence(inputs, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False)
            outputs, final = self.recurrence(packed, initial)
            outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=inputs.shape[1])
            outputs = outputs.masked_fill(~is_real[..., None], 0.0)
        final = final if self.has_cell_state else (final, None)
        if is_real is not None:
            final = select_state((is_real.sum(-1) == 0)[None, :, None], state, final)
        return outputs, final

    def _cells(
        self, inputs: torch.Tensor, is_real: torch.Tensor | None, state: LayerState
    ) -> tuple[torch.Tensor, LayerState]:
        hidden, cell = state
        outputs, final_hidden, final_cell = [], [], []  # final_cell: the LSTM's only
        for direction in range(self.num_directions):
            suffix = "_l0_reverse" if direction else "_l0"
            names = ("weight_ih", "bias_ih", "weight_hh", "bias_hh")
            weights = [getattr(self.recurrence, name + suffix) for name in names]
            sequence = reverse_padded(inputs, is_real) if direction else inputs
            direction_state = (hidden[direction], cell[direction] if cell is not None else None)
            output, (h, c) = self._run_direction(sequence, is_real, direction_state, *weights)
            outputs.append(reverse_padded(output, is_real) if direction else output)
            final_hidden.append(h)
            if c is not None:
                final_cell.append(c)
        final = (torch.stack(final_hidden), torch.stack(final_cell) if self.has_cell_state else None)
        return torch.cat(outputs, dim=-1), final

    def _run_direction(
        self,
        sequence: torch.Tensor,
        is_real: torch.Tensor | None,
        state: LayerState,
        weight_ih: torch.Tensor,
        bias_ih: torch.Tensor,
        weight_hh: torch.Tensor,
        bias_hh: torch.Tensor,
    ) -> tuple[torch.Tensor, LayerState]:
        x_projected = F.linear(sequence, weight_ih, bias_ih)  # W_ih x_t + b_ih for every t in one matmul
        steps = []
        for t in range(sequence.shape[1]):
            new_state = self.cell(x_projected[:, t], state, weight_hh, bias_hh, self.nonlinearity)
            if is_real is not None:  # padding: keep the state of the last real token
                new_state = select_state(~is_real[:, t, None], state, new_state)
            state = new_state
            steps.append(state[0])
        outputs = torch.stack(steps, dim=1)
        if is_real is not None:
            outputs = outputs.masked_fill(~is_real[..., None], 0.0)
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

    def forward(
        self,
        inputs: torch.Tensor,
        is_real: torch.Tensor | None = None,
        states: list[LayerState] | None = None,
        output_hidden_states: bool = False,
    ) -> tuple[torch.Tensor, list[LayerState], tuple[torch.Tensor, ...]]:
        """(top-layer outputs, final state of every layer, every layer's outputs if asked)."""
        hidden, finals = inputs, []
        all_hidden: tuple[torch.Tensor, ...] = ()
        for index, layer in enumerate(self.layers):
            if index > 0:
                hidden = self.dropout(hidden)
            hidden, *final = layer(hidden, is_real, *(states[index] if states is not None else ()))
            finals.append(tuple(final))
            if output_hidden_states:
                all_hidden += (hidden,)
        return hidden, finals, all_hidden


def stack_states(states: list[LayerState]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-layer states → batch-first (batch, layers, hidden) tensors, the directions of a layer concatenated."""

    def batch_first(tensors: list[torch.Tensor]) -> torch.Tensor:
        return torch.stack([t.permute(1, 0, 2).reshape(t.shape[1], -1) for t in tensors], dim=1)

    hidden = batch_first([h for h, _ in states])
    cell = batch_first([c for _, c in states if c is not None]) if states[0][1] is not None else None
    return hidden, cell


def unstack_states(hidden: torch.Tensor, cell: torch.Tensor | None) -> list[LayerState]:
    """(batch, layers, hidden) → per-layer (1, batch, hidden) states of a unidirectional stack."""
    return [
        (hidden[:, index][None], cell[:, index][None] if cell is not None else None) for index in range(hidden.shape[1])
    ]

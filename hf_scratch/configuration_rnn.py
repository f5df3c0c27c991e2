"""Configuration of the RNN seq2seq baselines: recurrent encoder-decoders (Sutskever et al. 2014) with RNN, LSTM
(Hochreiter & Schmidhuber 1997) or GRU (Cho et al. 2014) cells, an optional bidirectional encoder (Bahdanau et al.
2015 §3.2), and Bahdanau (additive, Bahdanau et al. 2015 §3.1) or Luong (dot / general / concat, Luong et al. 2015
§3.1) attention — the models the Transformer replaced. Defaults are a one-layer LSTM encoder-decoder with Bahdanau
attention."""

from __future__ import annotations

from .configuration_common import Seq2SeqConfig

CELL_TYPES = ("rnn", "lstm", "gru", "gru_cho")
ATTENDING_TYPES = ("bahdanau", "luong-dot", "luong-general", "luong-concat")  # score the encoder states every step
ATTENTION_TYPES = ("none", "fixed-context", *ATTENDING_TYPES)  # the first two attend to nothing
# the decoders of Bahdanau et al. 2015 (RNNsearch and its RNNencdec baseline): they read [y_{t-1}; c_t] and may
# predict through the maxout deep output (``bahdanau_output``)
BAHDANAU_DECODERS = ("fixed-context", "bahdanau")
RNN_IMPLEMENTATIONS = ("fused", "cells")


class ScratchRNNConfig(Seq2SeqConfig):
    r"""
    Example:
    ```python
    >>> from hf_scratch import ScratchRNNConfig, ScratchRNNForConditionalGeneration
    >>> config = ScratchRNNConfig(vocab_size=1000, hidden_size=64, cell_type="lstm", attention_type="bahdanau",
    ...                           bidirectional_encoder=True)
    >>> model = ScratchRNNForConditionalGeneration(config)
    ```

    Fields beyond the shared names (CONTRIBUTING.md, "Names across families"; the special tokens are
    ``Seq2SeqConfig``'s, configuration_common.py):

    - ``cell_type``: ``"rnn"`` (s_t = f(U x_t + W s_{t-1})), ``"lstm"`` (forget / input / output gates and a cell
      state), ``"gru"`` (torch's GRU: reset applied after the hidden matmul, h = (1−z)·n + z·h) or ``"gru_cho"``
      (the GRU of Cho et al. 2014 §2.3, eq. 5–8: reset applied before the matmul, h̃ = tanh(W x + U(r·h)); written
      with the update gate weighing the new state, h = (1−u)·h + u·h̃, as Chung et al. 2014 §3.2 do — Cho's z is
      1−u, the same model with the learned gate relabelled).
    - ``rnn_nonlinearity``: f of the plain RNN cell, ``"tanh"`` or ``"relu"``.
    - ``bidirectional_encoder``: a BiRNN encoder (a BiLSTM with LSTM cells; Bahdanau et al. 2015 §3.2); each
      direction gets ``hidden_size // 2`` units and their outputs are concatenated, so encoder states always have
      ``hidden_size`` features (Bahdanau et al. give each direction the full size instead).
    - ``attention_type``: ``"none"`` (Sutskever et al. 2014: the encoder's final state only starts the decoder),
      ``"fixed-context"`` (no attention either: Cho et al. 2014's RNN Encoder–Decoder, Bahdanau et al. 2015's
      "RNNencdec" baseline — one context c, the top encoder layer's final state (Cho et al. first map it
      through a learned tanh layer, appendix A), read at every step as Bahdanau's c_t is), ``"bahdanau"``
      (additive, scores from s_{t-1}), ``"luong-dot"`` / ``"luong-general"`` / ``"luong-concat"`` (Luong et al.
      2015, scores from s_t).
    - ``bahdanau_output``: what V reads in Bahdanau et al.'s decoders (``attention_type`` ``"bahdanau"`` or
      ``"fixed-context"``): ``"linear"`` (s_t alone, the default) or ``"maxout"``, the paper's deep output
      (Bahdanau et al. 2015 eq. 4 and appendix A.2.2): t̃_t = U_o s_t + V_o E y_{t-1} + C_o c_t, t_t = max over
      pairs of t̃_t's units, so the context c_t also reaches the prediction directly.
    - ``rnn_implementation``: ``"fused"`` runs ``torch.nn.RNN/LSTM/GRU`` where the cell is torch's
      (``gru_cho`` has no fused kernel and always runs the cell equations); ``"cells"`` runs the written-out gate
      equations step by step. Both give the same numbers.
    - ``encoder_layers`` / ``decoder_layers``: stacked recurrent layers (``num_hidden_layers`` reads the encoder's).
      The decoder starts from the encoder's final state of the same layer, or from the top encoder layer's final
      state in every layer when the depths differ.

    Source and target share one vocabulary and one embedding matrix (the seq2seq tokenizers here are shared);
    ``tie_word_embeddings`` makes the output projection V reuse it.
    """

    model_type = "scratch-rnn"
    default_auto_map = {
        "AutoConfig": "configuration_rnn.ScratchRNNConfig",
        "AutoModel": "modeling_rnn.ScratchRNNModel",
        "AutoModelForSeq2SeqLM": "modeling_rnn.ScratchRNNForConditionalGeneration",
        "AutoModelForSequenceClassification": "modeling_rnn.ScratchRNNForSequenceClassification",
    }
    default_tokenizer = "seq2seq"
    learning_rates = {"tiny": 1e-3, "small": 1e-3, "base": 1e-3}
    keys_to_ignore_at_inference = ["past_key_values"]
    attribute_map = {"num_hidden_layers": "encoder_layers", "d_model": "hidden_size"}

    vocab_size: int = 32000
    hidden_size: int = 256
    encoder_layers: int = 1
    decoder_layers: int = 1
    cell_type: str = "lstm"
    rnn_nonlinearity: str = "tanh"
    bidirectional_encoder: bool = False
    attention_type: str = "bahdanau"
    bahdanau_output: str = "linear"
    rnn_implementation: str = "fused"
    hidden_dropout_prob: float = 0.1
    classifier_dropout: float | None = None
    initializer_range: float = 0.02

    def check(self) -> None:
        self.require_positive("vocab_size", "hidden_size", "encoder_layers", "decoder_layers")
        self.require_probability("hidden_dropout_prob", "classifier_dropout")
        self.require_choice("cell_type", CELL_TYPES)
        self.require_choice("rnn_nonlinearity", ("tanh", "relu"))
        self.require_choice("attention_type", ATTENTION_TYPES)
        self.require_choice("bahdanau_output", ("linear", "maxout"))
        if self.bahdanau_output != "linear" and self.attention_type not in BAHDANAU_DECODERS:
            raise ValueError(
                f"ScratchRNNConfig: bahdanau_output={self.bahdanau_output!r} is the output layer of Bahdanau et "
                f"al.'s decoders, but attention_type={self.attention_type!r}: use attention_type='bahdanau' or "
                "'fixed-context', or leave bahdanau_output='linear'."
            )
        self.require_choice("rnn_implementation", RNN_IMPLEMENTATIONS)
        if self.bidirectional_encoder and self.hidden_size % 2 != 0:
            raise ValueError(
                f"ScratchRNNConfig: bidirectional_encoder=True splits hidden_size={self.hidden_size} between the two "
                f"directions, so it must be even: use hidden_size={self.hidden_size + 1} "
                "or bidirectional_encoder=False."
            )
        self.require_target_token_ids("vocab_size")

"""Configuration of the encoder-decoder Transformer (Vaswani et al. 2017, "Attention Is All You Need", §3 and Table 3).
Defaults are the paper's base model: 6 + 6 layers, d_model 512, 8 heads, FFN 2048 with ReLU, dropout 0.1 (§5.4),
sinusoidal positions (§3.5), embeddings scaled by √d_model and shared between source, target and output projection
(§3.4). Marian (opus-mt) checkpoints are the same architecture with ``sinusoidal_layout="split"`` and
``hidden_act="swish"``.
"""

from __future__ import annotations

from .configuration_common import Seq2SeqConfig
from .positional import SINUSOIDAL_LAYOUTS


class ScratchTransformerConfig(Seq2SeqConfig):
    r"""
    Example:
    ```python
    >>> from hf_scratch import ScratchTransformerConfig, ScratchTransformerForConditionalGeneration
    >>> config = ScratchTransformerConfig(vocab_size=1000, d_model=64, encoder_layers=2, decoder_layers=2,
    ...                                   encoder_attention_heads=4, decoder_attention_heads=4,
    ...                                   encoder_ffn_dim=128, decoder_ffn_dim=128)
    >>> model = ScratchTransformerForConditionalGeneration(config)
    ```

    Fields beyond the shared names (CONTRIBUTING.md, "Names across families"; the special tokens are
    ``Seq2SeqConfig``'s, configuration_common.py):

    - ``decoder_vocab_size``: target vocabulary when it differs from the source one (None: same as ``vocab_size``;
      must equal it when ``share_encoder_decoder_embeddings``).
    - ``share_encoder_decoder_embeddings``: one embedding matrix for source and target tokens (paper §3.4);
      ``tie_word_embeddings``: the output projection reuses the target embedding matrix.
    - ``scale_embedding``: multiply token embeddings by √d_model (paper §3.4).
    - ``sinusoidal_layout``: ``"interleaved"`` (the paper: sin in even, cos in odd columns) or ``"split"``
      ([sin… | cos…], Marian's layout).
    - ``pre_norm``: False = post-LN blocks as in the paper (§3.1), LayerNorm(x + Sublayer(x)); True = pre-LN,
      x + Sublayer(LayerNorm(x)), with a final LayerNorm after each stack (Xiong et al. 2020, "On Layer
      Normalization in the Transformer Architecture").
    - ``activation_dropout``: dropout inside the FFN after the activation (0 in the paper).
    - ``label_smoothing``: ε_ls of the training loss (the paper used 0.1, §5.4; 0 gives plain cross-entropy).
    """

    model_type = "scratch-transformer"
    default_auto_map = {
        "AutoConfig": "configuration_transformer.ScratchTransformerConfig",
        "AutoModel": "modeling_transformer.ScratchTransformerModel",
        "AutoModelForSeq2SeqLM": "modeling_transformer.ScratchTransformerForConditionalGeneration",
    }
    default_tokenizer = "seq2seq"
    # base: the schedule of Vaswani et al. 2017 §5.3 peaks near 7e-4 for d=512 after 4,000 warm-up steps
    learning_rates = {"tiny": 1e-3, "small": 5e-4, "base": 5e-4}
    attribute_map = {
        "d_model": "hidden_size",
        "num_hidden_layers": "encoder_layers",
        "num_attention_heads": "encoder_attention_heads",
        "intermediate_size": "encoder_ffn_dim",
        "activation_function": "hidden_act",
        "dropout": "hidden_dropout_prob",
        "attention_dropout": "attention_probs_dropout_prob",
        "init_std": "initializer_range",
    }

    vocab_size: int = 32000
    decoder_vocab_size: int | None = None
    hidden_size: int = 512
    encoder_layers: int = 6
    decoder_layers: int = 6
    encoder_attention_heads: int = 8
    decoder_attention_heads: int = 8
    encoder_ffn_dim: int = 2048
    decoder_ffn_dim: int = 2048
    hidden_act: str = "relu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.0
    activation_dropout: float = 0.0
    max_position_embeddings: int = 512
    sinusoidal_layout: str = "interleaved"
    scale_embedding: bool = True
    pre_norm: bool = False
    layer_norm_eps: float = 1e-5
    initializer_range: float = 0.02
    label_smoothing: float = 0.0
    share_encoder_decoder_embeddings: bool = True

    def derive_defaults(self) -> None:
        if self.decoder_vocab_size is None:
            self.decoder_vocab_size = self.vocab_size

    def check(self) -> None:
        self.require_positive(
            "vocab_size",
            "decoder_vocab_size",
            "hidden_size",
            "encoder_layers",
            "decoder_layers",
            "encoder_attention_heads",
            "decoder_attention_heads",
            "encoder_ffn_dim",
            "decoder_ffn_dim",
            "max_position_embeddings",
        )
        self.require_divisible("hidden_size", "encoder_attention_heads")
        self.require_divisible("hidden_size", "decoder_attention_heads")
        self.require_probability(
            "hidden_dropout_prob", "attention_probs_dropout_prob", "activation_dropout", "label_smoothing"
        )
        self.require_choice("sinusoidal_layout", SINUSOIDAL_LAYOUTS)
        if self.share_encoder_decoder_embeddings and self.decoder_vocab_size != self.vocab_size:
            raise ValueError(
                f"ScratchTransformerConfig: share_encoder_decoder_embeddings=True needs one vocabulary, but "
                f"vocab_size={self.vocab_size} and decoder_vocab_size={self.decoder_vocab_size}: set "
                "decoder_vocab_size=None (or equal to vocab_size), or share_encoder_decoder_embeddings=False."
            )
        self.require_target_token_ids("decoder_vocab_size")

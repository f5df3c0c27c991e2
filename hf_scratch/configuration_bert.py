"""Configuration of BERT (Devlin et al. 2018; seed 002). Defaults are BERT-base: 12 layers, hidden 768, 12 heads,
FFN 3072, GELU, 512 positions, two segments."""

from __future__ import annotations

from .configuration_common import ScratchConfig


class ScratchBertConfig(ScratchConfig):
    r"""
    Example:
    ```python
    >>> from hf_scratch import ScratchBertConfig, ScratchBertForMaskedLM
    >>> config = ScratchBertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
    ...                            intermediate_size=128)
    >>> model = ScratchBertForMaskedLM(config)
    ```"""

    model_type = "scratch-bert"
    default_auto_map = {
        "AutoConfig": "configuration_bert.ScratchBertConfig",
        "AutoModel": "modeling_bert.ScratchBertModel",
        "AutoModelForPreTraining": "modeling_bert.ScratchBertForPreTraining",
        "AutoModelForMaskedLM": "modeling_bert.ScratchBertForMaskedLM",
        "AutoModelForNextSentencePrediction": "modeling_bert.ScratchBertForNextSentencePrediction",
        "AutoModelForSequenceClassification": "modeling_bert.ScratchBertForSequenceClassification",
        "AutoModelForTokenClassification": "modeling_bert.ScratchBertForTokenClassification",
        "AutoModelForQuestionAnswering": "modeling_bert.ScratchBertForQuestionAnswering",
        "AutoModelForMultipleChoice": "modeling_bert.ScratchBertForMultipleChoice",
    }

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    classifier_dropout: float | None = None
    pad_token_id: int | None = 0
    tie_word_embeddings: bool = True

    def check(self) -> None:
        self.require_positive(
            "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
            "max_position_embeddings", "type_vocab_size",
        )
        self.require_divisible("hidden_size", "num_attention_heads")
        self.require_probability("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout")

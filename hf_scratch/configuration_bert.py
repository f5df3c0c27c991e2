"""Configuration of BERT (Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional Transformers for Language
Understanding", §3). Defaults are BERT-base: 12 layers, hidden 768, 12 heads, FFN 3072, GELU, 512 positions, two
segments."""

from __future__ import annotations

from .configuration_common import BertShapedConfig


class ScratchBertConfig(BertShapedConfig):
    r"""
    The encoder's fields (``vocab_size``, ``hidden_size``, ``num_hidden_layers``, ``num_attention_heads``,
    ``intermediate_size``, ``hidden_act``, ``hidden_dropout_prob``, ``attention_probs_dropout_prob``,
    ``max_position_embeddings``, ``type_vocab_size``, ``initializer_range``, ``layer_norm_eps``,
    ``tie_word_embeddings``) are transformers' ``BertConfig`` ones, declared once in ``BertShapedConfig``
    (configuration_common.py) with BERT-base's defaults. BERT adds:

    - ``classifier_dropout``: dropout before the classification heads (None: ``hidden_dropout_prob``);
    - ``pad_token_id``: the [PAD] id of the WordPiece vocabulary (0).

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

    classifier_dropout: float | None = None
    pad_token_id: int | None = 0

    def check(self) -> None:
        super().check()
        self.require_probability("classifier_dropout")

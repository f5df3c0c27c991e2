"""Configuration of Longformer (Beltagy et al. 2020, "Longformer: The Long-Document Transformer", §3.1 attention
pattern). Defaults follow transformers' LongformerConfig (so configs convert both ways without surprises);
``attention_window`` and ``attention_dilation`` describe the sparse attention pattern of each layer."""

from __future__ import annotations

from .configuration_common import BertShapedConfig


class ScratchLongformerConfig(BertShapedConfig):
    r"""
    The encoder's fields are transformers' ``BertConfig`` ones, declared once in ``BertShapedConfig``
    (configuration_common.py) with the same defaults as transformers' LongformerConfig. Longformer adds the sparse
    attention pattern (§3.1: sliding window, dilated sliding window, global attention on chosen tokens) and
    RoBERTa's special tokens (``pad_token_id`` 1, positions start at ``pad_token_id + 1``):

    ``attention_window``: the full window w of each layer (an even int, or one per layer): token i attends the w/2
    tokens on each side of it.
    ``attention_dilation``: gaps between the attended tokens: an int for every head of every layer, one int per
    layer, or one list of per-head ints per layer. With dilation d a head attends i + k·d for |k| ≤ w/2, so its
    receptive field grows d-fold at the same cost. 1 everywhere is transformers' Longformer.

    Example:
    ```python
    >>> from hf_scratch import ScratchLongformerConfig, ScratchLongformerForMaskedLM
    >>> config = ScratchLongformerConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
    ...                                  intermediate_size=128, attention_window=[8, 16],
    ...                                  attention_dilation=[[1, 1, 2, 4], 1], max_position_embeddings=1026)
    >>> model = ScratchLongformerForMaskedLM(config)
    ```"""

    model_type = "scratch-longformer"
    default_auto_map = {
        "AutoConfig": "configuration_longformer.ScratchLongformerConfig",
        "AutoModel": "modeling_longformer.ScratchLongformerModel",
        "AutoModelForMaskedLM": "modeling_longformer.ScratchLongformerForMaskedLM",
        "AutoModelForSequenceClassification": "modeling_longformer.ScratchLongformerForSequenceClassification",
        "AutoModelForTokenClassification": "modeling_longformer.ScratchLongformerForTokenClassification",
        "AutoModelForQuestionAnswering": "modeling_longformer.ScratchLongformerForQuestionAnswering",
        "AutoModelForMultipleChoice": "modeling_longformer.ScratchLongformerForMultipleChoice",
    }

    size_presets = {"tiny": {"attention_window": 16}, "small": {"attention_window": 64}, "base": {}}

    attention_window: int | list[int] = 512
    attention_dilation: int | list[int | list[int]] = 1
    pad_token_id: int | None = 1
    bos_token_id: int | None = 0
    eos_token_id: int | None = 2
    sep_token_id: int | None = 2

    @property
    def max_input_tokens(self) -> int:
        """RoBERTa's position ids start at ``pad_token_id + 1``: ``max_position_embeddings - pad_token_id - 1`` tokens
        (4098 - 2 = 4096 for longformer-base, what its tokenizer says)."""
        if self.pad_token_id is None:
            raise ValueError("ScratchLongformerConfig.pad_token_id is None: positions start at pad_token_id + 1.")
        return self.max_position_embeddings - self.pad_token_id - 1

    def check(self) -> None:
        super().check()
        if not isinstance(self.pad_token_id, int) or isinstance(self.pad_token_id, bool):
            raise ValueError(
                f"ScratchLongformerConfig.pad_token_id must be an int (positions start at pad_token_id + 1), got "
                f"{self.pad_token_id!r}: set it to the tokenizer's pad token id."
            )
        for layer in range(self.num_hidden_layers):
            self.window_for_layer(layer)
            self.dilations_for_layer(layer)

    def window_for_layer(self, layer: int) -> int:
        """The full attention window w of ``layer`` (even, > 0)."""
        windows = self.attention_window
        if isinstance(windows, (list, tuple)):
            if len(windows) != self.num_hidden_layers:
                raise ValueError(
                    f"ScratchLongformerConfig.attention_window has {len(windows)} values for {self.num_hidden_layers} "
                    "layers (num_hidden_layers): give one window per layer, or a single int for all."
                )
            window = windows[layer]
        else:
            window = windows
        if not isinstance(window, int) or isinstance(window, bool) or window <= 0 or window % 2:
            raise ValueError(
                f"ScratchLongformerConfig.attention_window must be a positive even int (w/2 tokens on each side), "
                f"got {window!r} for layer {layer}: use e.g. "
                f"{max(2, (int(window) // 2) * 2) if isinstance(window, (int, float)) else 512}."
            )
        return window

    def dilations_for_layer(self, layer: int) -> tuple[int, ...]:
        """One dilation per head of ``layer`` (1 = no gaps)."""
        dilation = self.attention_dilation
        if isinstance(dilation, (list, tuple)):
            if len(dilation) != self.num_hidden_layers:
                raise ValueError(
                    f"ScratchLongformerConfig.attention_dilation has {len(dilation)} entries for "
                    f"{self.num_hidden_layers} layers (num_hidden_layers): give one entry per layer, or a single int."
                )
            layer_dilation = dilation[layer]
        else:
            layer_dilation = dilation
        heads = self.num_attention_heads
        per_head = list(layer_dilation) if isinstance(layer_dilation, (list, tuple)) else [layer_dilation] * heads
        if len(per_head) != heads:
            raise ValueError(
                f"ScratchLongformerConfig.attention_dilation for layer {layer} has {len(per_head)} per-head values "
                f"but the layer has {heads} heads (num_attention_heads): give one value per head, or a single int."
            )
        checked: list[int] = []
        for value in per_head:
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(
                    f"ScratchLongformerConfig.attention_dilation values must be ints ≥ 1 (1 = no gaps), got {value!r} "
                    f"in layer {layer}."
                )
            checked.append(value)
        return tuple(checked)

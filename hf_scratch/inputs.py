"""The decoder inputs an encoder-decoder builds from its labels (``shift_tokens_right``), used by the models and by
the collator's hook (``modeling_common.DecoderInputsFromLabelsMixin``). The checks of what users pass are in
``checks.py``.
"""

from __future__ import annotations

import torch

from .checks import values_pass


def shift_tokens_right(labels: torch.Tensor, pad_token_id: int | None, decoder_start_token_id: int) -> torch.Tensor:
    """Decoder inputs from labels: [start, y_1 … y_{n-1}], the outputs "offset by one position" of Vaswani et al.
    2017 §3.1 (the decoder reads ``<s> i want a beer`` to predict ``i want a beer </s>``). Ignored label positions
    (-100) become padding, filled whatever the values (no branch on them: it compiles); without a ``pad_token_id``
    they are an error, checked with ``values_pass``."""
    shifted = labels.new_zeros(labels.shape)
    shifted[:, 1:] = labels[:, :-1]
    shifted[:, 0] = decoder_start_token_id
    ignored = shifted == -100
    if pad_token_id is None:
        message = (
            "labels contain -100 (ignored positions) but config.pad_token_id is None: set pad_token_id so the "
            "shifted decoder inputs can be padded there."
        )
        if not values_pass(~ignored, message):
            raise ValueError(message)
        return shifted
    return shifted.masked_fill(ignored, pad_token_id)

"""Position information: sinusoidal (Vaswani et al. 2017, §3.5) and the sinusoidal relative encodings of
Transformer-XL. (Learned absolute positions, BERT's and GPT's, are a plain ``nn.Embedding`` table looked up by position.
The position ids of either kind are checked by the model, with ``checks.check_positions``, before any lookup.)

The paper's encoding, for position ``pos`` and pair index ``i`` (Vaswani et al. 2017 §3.5):

    PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
    PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))

so even columns hold sines and odd columns cosines of the same frequency, with wavelengths from 2π to 10000·2π.
(Tutorial code sometimes takes the exponent 2i/d per *column* instead of per sin/cos pair, which changes the
frequencies, or zeroes position 0; we follow the paper.) Marian and Transformer-XL lay the same values out split,
[sin(all i) | cos(all i)]: ``layout="split"``.
"""

from __future__ import annotations

import torch
from torch import nn

SINUSOIDAL_LAYOUTS = ("interleaved", "split")


def check_sinusoidal_layout(layout: str) -> str:
    if layout not in SINUSOIDAL_LAYOUTS:
        raise ValueError(
            f"Unknown sinusoidal layout {layout!r}: use 'interleaved' (the paper's sin/cos per column pair) or "
            "'split' ([sin… | cos…], as Marian and Transformer-XL store it)."
        )
    return layout


def sinusoid_frequencies(dim: int, base: float = 10000.0) -> torch.Tensor:
    """1 / base^(2i/d) for i = 0 … ⌈d/2⌉-1."""
    return 1.0 / base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)


def sinusoidal_table(num_positions: int, dim: int, layout: str = "interleaved", base: float = 10000.0) -> torch.Tensor:
    """The (num_positions, dim) table of PE(pos, ·) in float32."""
    check_sinusoidal_layout(layout)
    angles = torch.arange(num_positions, dtype=torch.float64)[:, None] * sinusoid_frequencies(dim, base)[None, :]
    sin, cos = torch.sin(angles), torch.cos(angles)[:, : dim // 2]
    table = torch.zeros(num_positions, dim, dtype=torch.float64)
    if layout == "interleaved":
        table[:, 0::2] = sin
        table[:, 1::2] = cos
    else:
        table[:, : sin.shape[1]] = sin
        table[:, sin.shape[1] :] = cos
    return table.float()


class SinusoidalPositionalEmbedding(nn.Module):
    """Fixed PE table, looked up by position id. Not saved in checkpoints: it is rebuilt from the config."""

    table: torch.Tensor  # (num_positions, dim), a buffer

    def __init__(self, num_positions: int, dim: int, layout: str = "interleaved"):
        super().__init__()
        self.num_positions = num_positions
        self.register_buffer("table", sinusoidal_table(num_positions, dim, layout), persistent=False)

    def forward(self, position_ids: torch.Tensor) -> torch.Tensor:
        """PE of each position id (checked to be in the table, ``checks.check_positions``, by the caller)."""
        return self.table[position_ids]


def relative_sinusoidal_embedding(distances: torch.Tensor, dim: int) -> torch.Tensor:
    """Transformer-XL's R_{i-j} (Dai et al. 2019 §3.3): the split sinusoidal encoding of (possibly clamped) relative
    distances.

    ``distances`` is a 1-D float tensor (e.g. klen-1 … 0); returns (len(distances), dim).
    """
    inv_freq = sinusoid_frequencies(dim).to(device=distances.device, dtype=torch.float32)
    angles = distances[:, None].float() * inv_freq[None, :]
    return torch.cat([angles.sin(), angles.cos()], dim=-1)

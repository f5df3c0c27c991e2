"""Reference outputs of transformers' own Transformer-XL, produced in a side environment (transformers v5 no longer
ships the class). Run it with an older transformers, never in the main environment:

    python -m venv /work/venv-tfxl
    /work/venv-tfxl/bin/pip install torch==2.13.0 transformers==4.46.3
    /work/venv-tfxl/bin/python benchmarks/transfo_xl_reference.py [OUT_DIR]    # default: tests/fixtures/transfo_xl

For each tiny configuration below it builds a random ``TransfoXLLMHeadModel`` (seeded), saves it as a reference
checkpoint directory (``config.json`` + ``model.safetensors``, exactly what ``save_pretrained`` writes), and writes
``reference_outputs.safetensors`` beside it: the inputs of two consecutive segments, the log-probabilities of both
(the second one computed with the memory of the first), the memory after each segment (batch-first, like ours) and
the per-token losses with ``labels = input_ids``. ``tests/test_transfo_xl.py`` loads the directory with
``hf_scratch.convert.load_reference_checkpoint`` and compares (max |Δ| ≤ 1e-4).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

# transformers 4.46's TransfoXL calls ``tensor.type_as(dtype=...)``, which current torch rejects.
_original_type_as = torch.Tensor.type_as


def _type_as(self, other=None, dtype=None):
    return self.to(dtype) if dtype is not None else _original_type_as(self, other)


torch.Tensor.type_as = _type_as

from safetensors.torch import save_file  # noqa: E402
from transformers import TransfoXLConfig, TransfoXLLMHeadModel  # noqa: E402

CONFIGS = {
    # the transfo-xl-wt103 layout, shrunk: adaptive input/softmax with div_val > 1, per-layer u and v, post-LN,
    # same_length, clamped relative distances
    "adaptive_div2": dict(
        vocab_size=48,
        cutoffs=[12, 24],
        d_model=16,
        d_embed=16,
        n_head=2,
        d_head=8,
        d_inner=32,
        div_val=2,
        pre_lnorm=False,
        n_layer=2,
        mem_len=6,
        clamp_len=5,
        same_length=True,
        untie_r=True,
        dropout=0.0,
        dropatt=0.0,
    ),
    # div_val = 1 with d_embed ≠ d_model (projections), shared u and v, pre-LN, no same_length, untied projections
    "adaptive_div1_preln": dict(
        vocab_size=40,
        cutoffs=[15],
        d_model=16,
        d_embed=12,
        n_head=4,
        d_head=3,
        d_inner=24,
        div_val=1,
        pre_lnorm=True,
        n_layer=2,
        mem_len=8,
        clamp_len=-1,
        same_length=False,
        untie_r=False,
        proj_share_all_but_first=False,
        dropout=0.0,
        dropatt=0.0,
    ),
}
BATCH, SEGMENT = 2, 5


def make_reference(name: str, kwargs: dict, out_dir: Path) -> None:
    torch.manual_seed(0)
    config = TransfoXLConfig(**kwargs)
    model = TransfoXLLMHeadModel(config).eval()
    # The default init leaves biases and cluster weights at zero: randomise every tensor so parity means something.
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn_like(parameter) * 0.3)
    model.tie_weights()
    target = out_dir / name
    # safetensors refuses the aliases a shared u, v creates (untie_r=False): such models are saved as
    # pytorch_model.bin, like the original checkpoints on the hub, which keep every tied duplicate too.
    model.save_pretrained(target, safe_serialization=config.untie_r)

    generator = torch.Generator().manual_seed(1)
    first = torch.randint(0, config.vocab_size, (BATCH, SEGMENT), generator=generator)
    second = torch.randint(0, config.vocab_size, (BATCH, SEGMENT), generator=generator)
    with torch.no_grad():
        out1 = model(first)
        out2 = model(second, mems=out1.mems)
        loss1 = model(first, labels=first.clone())
        loss2 = model(second, mems=out1.mems, labels=second.clone())
    tensors = {
        "first_input_ids": first,
        "second_input_ids": second,
        "first_log_probs": out1.prediction_scores,
        "second_log_probs": out2.prediction_scores,
        "first_losses": loss1.losses,
        "second_losses": loss2.losses,
        "first_loss": loss1.loss.reshape(1),
        "second_loss": loss2.loss.reshape(1),
    }
    for i, mem in enumerate(out2.mems):  # the reference keeps memory sequence-first: store it batch-first
        tensors[f"second_mems_{i}"] = mem.transpose(0, 1)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(target / "reference_outputs.safetensors"))
    print(f"{name}: wrote {target} ({json.loads((target / 'config.json').read_text())['architectures']})")


def main() -> None:
    out_dir = (
        Path(sys.argv[1])
        if len(sys.argv) > 1
        else Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "transfo_xl"
    )
    for name, kwargs in CONFIGS.items():
        make_reference(name, kwargs, out_dir)


if __name__ == "__main__":
    main()

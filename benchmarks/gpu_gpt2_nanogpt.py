"""GPT-2-small training step on a GPU: nanoGPT's own model.py beside ScratchGPTLMHeadModel and transformers'
GPT2LMHeadModel (issue 27), the same weights and batch, timed interleaved in one process.

GPT-2 small as nanoGPT's bench.py runs it: 12 layers × 768, 12 heads, block 1024, batch 12, vocabulary 50,304, bias,
dropout 0. Every model: bf16 autocast, torch.compile with its defaults, fused AdamW with nanoGPT's parameter groups
(weight decay 0.01 on the ≥ 2-D weights, lr 1e-4, betas 0.9 / 0.95, as bench.py), TF32 matmuls (as bench.py), the
loss read every step (as bench.py). nanoGPT's model is its model.py imported from a checkout beside the repository
(``--nanogpt_dir`` or ``$NANOGPT_DIR``: never copied into it), with transformers' weights copied in by nanoGPT's own
``from_pretrained`` mapping (Conv1D weights transposed); ours is converted from the same transformers model. The
three fp32 losses must agree before anything is timed. Each model learns the next 1,023 tokens of each row
(transformers' label shift; nanoGPT's last target is its ignore index, -1).

MFU is nanoGPT's ``estimate_mfu``: 6N + 12·L·H·Q·T FLOPs per token (N: the parameters without the position table)
over the GPU's dense bf16 peak (``PEAK_BF16_TFLOPS``, or ``--peak_tflops``). Goal (issue 27): ours ≥ 1.05× nanoGPT,
at ≥ 42 % MFU, in the same run.

    NANOGPT_DIR=../nanoGPT python benchmarks/gpu_gpt2_nanogpt.py        # on a CUDA GPU (minutes: three compilations)
    python benchmarks/gpu_gpt2_nanogpt.py --dry_run [--no_compile]       # the CPU, a tiny GPT, writes nothing

The table goes to ``benchmarks/results/gpt2_small_nanogpt_gpu.md``.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.nn.functional as F
import transformers
from bench_shakespeare_char import check_nanogpt_dir, nanogpt_model_module
from common import Autocast, compare, device_peak_mib, in_repo_path, synchronized, train_step_fn, warmed_up, write_table
from transformers import GPT2Config, GPT2LMHeadModel
from transformers.modeling_outputs import CausalLMOutput

in_repo_path()

from hf_scratch.convert import from_transformers  # noqa: E402

GPT2_SMALL = dict(layers=12, hidden=768, heads=12, block=1024, vocab=50304, batch=12)
TINY = dict(layers=2, hidden=64, heads=4, block=64, vocab=256, batch=2)
ARMS = ("nanoGPT", "ours", "transformers")
LR, BETAS, WEIGHT_DECAY = 1e-4, (0.9, 0.95), 1e-2  # nanoGPT's bench.py
# Dense bf16 peak of the GPU (TFLOP/s), by a part of its name; the first that matches counts.
PEAK_BF16_TFLOPS = {"H100 PCIe": 756.0, "H100": 989.0, "H200": 989.0, "A100": 312.0}
# Conv1D weights in transformers' GPT-2 are nn.Linear's transposed (nanoGPT's from_pretrained transposes them).
TRANSPOSED = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def transformers_gpt2(size: dict) -> GPT2LMHeadModel:
    config = GPT2Config(
        vocab_size=size["vocab"],
        n_positions=size["block"],
        n_embd=size["hidden"],
        n_layer=size["layers"],
        n_head=size["heads"],
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
    )
    return GPT2LMHeadModel(config)


def nanogpt_gpt2(module, reference: GPT2LMHeadModel, size: dict) -> torch.nn.Module:
    """nanoGPT's GPT (from its model.py) with ``reference``'s weights."""
    model = module.GPT(
        module.GPTConfig(
            block_size=size["block"],
            vocab_size=size["vocab"],
            n_layer=size["layers"],
            n_head=size["heads"],
            n_embd=size["hidden"],
            dropout=0.0,
            bias=True,
        )
    )
    state = {key: value.t() if key.endswith(TRANSPOSED) else value for key, value in reference.state_dict().items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [key for key in missing if key != "lm_head.weight" and not key.endswith(".attn.bias")]  # tied; a buffer
    if missing or unexpected:
        raise RuntimeError(f"nanoGPT's GPT and transformers' GPT-2 differ: missing {missing}, unexpected {unexpected}")
    return model


class NanoGPTWithLabels(torch.nn.Module):
    """nanoGPT's GPT called as ``train_step_fn`` calls a model: ``labels`` as in transformers (the row itself), its
    ``targets`` the next token, -1 (its ignore index) after the last."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids, labels):
        logits, loss = self.model(input_ids, F.pad(labels[:, 1:], (0, 1), value=-1))
        return CausalLMOutput(loss=loss, logits=logits)


def nanogpt_adamw(model: torch.nn.Module) -> torch.optim.AdamW:
    """nanoGPT's ``configure_optimizers``: weight decay on the ≥ 2-D parameters, none on biases and norms; fused."""
    parameters = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in parameters if p.dim() >= 2], "weight_decay": WEIGHT_DECAY},
        {"params": [p for p in parameters if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=LR, betas=BETAS, fused=True)


def build(arms, size: dict, checkout, device) -> tuple[dict, dict, int]:
    """({arm: model}, inputs, N) — the same weights in every arm, on ``device``; N as nanoGPT's get_num_params."""
    torch.manual_seed(0)
    reference = transformers_gpt2(size)
    models = {"transformers": reference, "ours": from_transformers(reference)}
    if "nanoGPT" in arms:
        models["nanoGPT"] = NanoGPTWithLabels(nanogpt_gpt2(nanogpt_model_module(checkout), reference, size))
    models = {arm: models[arm].to(device) for arm in arms}
    ids = torch.randint(size["vocab"], (size["batch"], size["block"]), generator=torch.Generator().manual_seed(0))
    inputs = {"input_ids": ids.to(device), "labels": ids.to(device)}
    parameters = sum(p.numel() for p in reference.parameters()) - reference.transformer.wpe.weight.numel()
    return models, inputs, parameters


def check_same_loss(models: dict, inputs: dict) -> dict:
    """The fp32 losses (eval mode, TF32 off): they agree, or the timings would compare different computations."""
    with torch.no_grad():
        losses = {arm: model.eval()(**inputs).loss.item() for arm, model in models.items()}
    print(f"fp32 losses: {losses}", flush=True)
    if max(losses.values()) - min(losses.values()) > 1e-3:
        raise RuntimeError(f"the losses disagree ({losses}): not benchmarking")
    return losses


def peak_flops(device, given: float | None) -> float:
    if given is not None:
        return given * 1e12
    name = torch.cuda.get_device_name(device) if str(device).startswith("cuda") else ""
    return next((tflops * 1e12 for part, tflops in PEAK_BF16_TFLOPS.items() if part in name), float("nan"))


def rows_of(times: dict, peaks: dict, flops_per_step: float, tokens: int, peak: float) -> list[dict]:
    rows = []
    for arm, timing in times.items():
        seconds = timing.median
        rows.append(
            {
                "model": arm,
                "step (ms)": round(seconds * 1e3, 2),
                "tokens/s": f"{tokens / seconds / 1e3:.0f}k",
                f"MFU of {peak / 1e12:.0f} TFLOP/s": f"{flops_per_step / seconds / peak:.1%}",
                "peak (MiB)": round(peaks[arm], 1),
                "noise": f"{timing.spread:.0%}",
            }
        )
        if "nanoGPT" in times:
            rows[-1]["nanoGPT's step ÷ this"] = round(times["nanoGPT"].median / seconds, 3)
    return rows


def parse(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--nanogpt_dir",
        default=os.environ.get("NANOGPT_DIR"),
        help="a checkout of https://github.com/karpathy/nanoGPT (default: $NANOGPT_DIR)",
    )
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dry_run", action="store_true", help="the CPU, a tiny GPT, writes nothing")
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    parser.add_argument("--no_compile", action="store_true")
    parser.add_argument("--warmup", type=int, help="untimed steps per model (the first compiles); 3 (dry run: 1)")
    parser.add_argument("--repeats", type=int, help="interleaved rounds; 10 (dry run: 2)")
    parser.add_argument("--inner", type=int, help="steps per model per round; 5 (dry run: 1)")
    parser.add_argument("--peak_tflops", type=float, help="the GPU's dense bf16 peak, when PEAK_BF16_TFLOPS lacks it")
    args = parser.parse_args(argv)
    for name, on_gpu, dry in (("warmup", 3, 1), ("repeats", 10, 2), ("inner", 5, 1)):
        if getattr(args, name) is None:
            setattr(args, name, dry if args.dry_run else on_gpu)
    args.device = "cpu" if args.dry_run else args.device
    return args


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    size, device = (TINY if args.dry_run else GPT2_SMALL), torch.device(args.device)
    checkout = check_nanogpt_dir(args.nanogpt_dir) if "nanoGPT" in args.arms else None
    torch.backends.cuda.matmul.allow_tf32 = False
    models, inputs, parameters = build(args.arms, size, checkout, device)
    check_same_loss(models, inputs)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True  # as nanoGPT's bench.py
    steps = {}
    for arm, model in models.items():
        wrapped = Autocast(model, args.device, torch.bfloat16)
        wrapped = wrapped if args.no_compile else torch.compile(wrapped)
        steps[arm] = synchronized(train_step_fn(wrapped, inputs, optimizer=nanogpt_adamw(model)), device)
    steps = warmed_up(steps, args.warmup)
    times = compare(steps, warmup=0, repeats=args.repeats, inner=args.inner)
    peaks = {arm: device_peak_mib(step, device) for arm, step in steps.items()}
    tokens = size["batch"] * size["block"]
    flops_per_token = 6 * parameters + 12 * size["layers"] * size["hidden"] * size["block"]  # 12·L·H·Q·T, H·Q = hidden
    rows = rows_of(times, peaks, flops_per_token * tokens, tokens, peak_flops(device, args.peak_tflops))
    where = torch.cuda.get_device_name(device) if args.device.startswith("cuda") else "CPU (dry run)"
    notes = [
        f"`python benchmarks/gpu_gpt2_nanogpt.py {' '.join(argv)}` on {where}, torch {torch.__version__}, "
        f"transformers {transformers.__version__}; nanoGPT from {checkout}",
        f"{size['layers']} layers × {size['hidden']}, {size['heads']} heads, block {size['block']}, batch "
        f"{size['batch']}, vocabulary {size['vocab']}, bias, dropout 0; bf16 autocast, "
        f"{'eager' if args.no_compile else 'torch.compile defaults'}, fused AdamW (nanoGPT's groups), TF32; "
        f"median of {args.repeats} interleaved rounds of {args.inner} steps after {args.warmup}; peak = "
        "torch.cuda.max_memory_allocated during one step minus what was allocated before",
        f"MFU: (6N + 12·L·H·Q·T)·tokens per step / time / peak, N = {parameters / 1e6:.2f}M (nanoGPT's estimate_mfu)",
    ]
    if args.dry_run:
        print(rows, notes, sep="\n")
    else:
        title = "GPT-2-small training step: nanoGPT, ours, transformers (GPU)"
        write_table("gpt2_small_nanogpt_gpu", title, rows, notes)


if __name__ == "__main__":
    main()

"""Longformer through torch's flex_attention on a GPU (issue 27): checks, then time and peak memory against
transformers' LongformerForMaskedLM.

1. Checks (PASS/FAIL lines): ``attn_implementation="flex_attention"`` against the banded kernel (``"sdpa"``) on a
   padded batch with a window per layer, a dilation per head and global tokens (one on padding) — logits and every
   gradient of the MLM loss, fp32 with TF32 off — at one tile and at several 128-token tiles; bf16 autocast finite.
2. The table: issue 6's model (``bench_longformer``: hidden 256, 2 layers, 4 heads, FFN 1024, window 256, first token
   global, dropout 0, vocabulary 1000; ours converted from transformers' weights) at 4,096 and 16,384 tokens, batch
   1 and 8, bf16 autocast, forward + backward of the MLM loss. Arms: transformers; ours with the banded kernel
   (``"sdpa"``); ours with ``"flex_attention"`` (the model eager, flex_attention compiled, as transformers' own
   models run it); the same with the whole model compiled. Times interleaved (``common.compare``, median); peak =
   what one step adds to ``torch.cuda.max_memory_allocated``. Goal: flex ≥ 5× transformers at 16k tokens, batch 8,
   at ≤ 0.25× its memory.

    python benchmarks/gpu_longformer_flex.py             # on a CUDA GPU (minutes, most of them compiling)
    python benchmarks/gpu_longformer_flex.py --dry_run   # the CPU, tiny sizes, forward only

A dry run checks the plumbing: torch 2.13 has no flex_attention backward on the CPU, and Inductor's CPU template
cannot lower a block mask built inside a compiled model, so there the steps are forward passes and the compiled
model uses the ``aot_eager`` backend. The table is written to ``benchmarks/results/longformer_flex_gpu.md`` after
every row (a run cut short keeps its rows); a dry run writes nothing.
"""

from __future__ import annotations

import argparse
import sys

import bench_longformer
import longformer_gpu_check
import torch
import transformers
from common import (
    CHECKS,
    Autocast,
    check_summary,
    compare,
    device_peak_mib,
    guarded,
    in_repo_path,
    inference_fn,
    max_diff,
    report,
    synchronized,
    warmed_up,
    write_table,
)

in_repo_path()

from hf_scratch import ScratchLongformerConfig, ScratchLongformerForMaskedLM  # noqa: E402

ARMS = ("transformers", "ours banded", "ours flex", "ours flex compiled")
CHECK_CONFIG = dict(
    vocab_size=100,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=128,
    attention_window=[32, 64],
    attention_dilation=[[1, 2, 1, 3], [2, 2, 1, 1]],
    pad_token_id=1,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)


# ---- 1. checks ----------------------------------------------------------------------------------------------------


def flex_and_banded(length: int, device) -> dict:
    """The check model with each kernel, same weights, on ``device``."""
    config = dict(CHECK_CONFIG, max_position_embeddings=length + 8)
    models = {}
    for implementation in ("sdpa", "flex_attention"):
        torch.manual_seed(0)
        models[implementation] = ScratchLongformerForMaskedLM._from_config(
            ScratchLongformerConfig(**config), attn_implementation=implementation
        ).to(device)
    models["flex_attention"].load_state_dict(models["sdpa"].state_dict())
    return models


def loss_and_gradients(model, inputs: dict, train: bool, bf16: bool = False):
    """Logits and (when ``train``) every parameter's gradient of the MLM loss."""
    model.zero_grad(set_to_none=True)
    with torch.set_grad_enabled(train), torch.autocast(inputs["input_ids"].device.type, torch.bfloat16, enabled=bf16):
        output = model(**inputs)
    if train:
        output.loss.backward()
    gradients = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    return output.logits.detach(), gradients


@guarded("flex ≡ banded")
def check_flex_equals_banded(device, lengths, train: bool) -> None:
    for length in lengths:
        input_ids, attention_mask, global_attention_mask = longformer_gpu_check.padded_batch(length, device)
        inputs = dict(
            input_ids=input_ids,
            attention_mask=attention_mask,
            global_attention_mask=global_attention_mask,
            labels=input_ids.masked_fill(attention_mask == 0, -100),
        )
        models = flex_and_banded(length, device)
        (banded, banded_grads), (flex, flex_grads) = (loss_and_gradients(m, inputs, train) for m in models.values())
        real = attention_mask.bool()
        logits = max_diff(banded[real], flex[real])
        grads = max((max_diff(banded_grads[name], flex_grads[name]) for name in banded_grads), default=0.0)
        same_grads = banded_grads.keys() == flex_grads.keys()
        report(
            f"flex ≡ banded fp32 n={length}" + (" (forward only)" if not train else ""),
            logits <= 1e-4 and grads <= 1e-4 and same_grads,
            f"max |Δ logits| on real tokens {logits:.2e}, max |Δ grad| {grads:.2e}",
        )
        flex_bf16, bf16_grads = loss_and_gradients(models["flex_attention"], inputs, train, bf16=True)
        finite = bool(torch.isfinite(flex_bf16).all()) and all(torch.isfinite(g).all() for g in bf16_grads.values())
        report(f"flex bf16 autocast finite n={length}", finite, f"logits dtype {flex_bf16.dtype}")


# ---- 2. time and peak memory against transformers -----------------------------------------------------------------


def arm_model(arm: str, length: int, batch: int, device, backend: str):
    """(model to step, inputs): bench_longformer's models (ours converted from transformers'), on ``device``."""
    which = "transformers" if arm == "transformers" else "ours"
    model, inputs = longformer_gpu_check.build(which, length, device, batch=batch)
    if arm.startswith("ours flex"):
        model.config._attn_implementation = "flex_attention"  # read at every call: the same as choosing it at load
    model = Autocast(model, device, torch.bfloat16)
    if arm == "ours flex compiled":
        model = torch.compile(model, backend=backend, fullgraph=True)  # the model declares _can_compile_fullgraph
    return model, inputs


def arm_steps(arms, length: int, batch: int, device, train: bool, backend: str, warmup: int) -> dict:
    """{arm: step (forward + backward, or forward)} for the arms whose warm-up steps, compilation included, ran."""
    steps = {}
    for arm in arms:
        model, inputs = arm_model(arm, length, batch, device, backend)
        step = bench_longformer.step_fn(model, inputs) if train else inference_fn(model, inputs)
        steps[arm] = synchronized(step, device)
    print(f"batch {batch} × {length} tokens: warming up {list(steps)}", flush=True)
    return warmed_up(steps, warmup)


def table_row(length: int, batch: int, steps: dict, repeats: int, device) -> dict:
    times = compare(steps, warmup=0, repeats=repeats)
    peaks = {arm: device_peak_mib(step, device) for arm, step in steps.items()}
    row = {"batch": batch, "tokens": length}
    for arm in ARMS:
        row[f"{arm} (ms)"] = round(times[arm].median * 1e3, 2) if arm in times else float("nan")
    for arm in ARMS:
        row[f"{arm} peak (MiB)"] = round(peaks.get(arm, float("nan")), 1)
    reference_ms, reference_peak = row["transformers (ms)"], peaks.get("transformers", float("nan"))
    for arm in ARMS[1:]:
        row[f"{arm}: speed-up"] = round(reference_ms / row[f"{arm} (ms)"], 2)
        row[f"{arm}: memory ratio"] = round(peaks.get(arm, float("nan")) / reference_peak, 2)
    row["noise"] = f"{max((t.spread for t in times.values()), default=float('nan')):.0%}"
    print(row, flush=True)
    return row


def notes(args, train: bool) -> list[str]:
    device = torch.cuda.get_device_name() if args.device.startswith("cuda") else "CPU"
    passed = sum(check.startswith("PASS") for check in CHECKS)
    return [
        f"`python benchmarks/gpu_longformer_flex.py {' '.join(args.argv)}` on {device}; torch {torch.__version__}, "
        f"transformers {transformers.__version__}; checks: {passed} PASS of {len(CHECKS)}",
        "issue 6's model (hidden 256, 2 layers, 4 heads, FFN 1024, window 256, first token global, dropout 0, "
        f"vocabulary 1000), bf16 autocast, {'forward + backward of the MLM loss' if train else 'forward pass'}; "
        f"median of {args.repeats} interleaved steps after {args.warmup}; peak = torch.cuda.max_memory_allocated "
        "during one step minus what was allocated before; speed-up and memory ratio against transformers",
        "ours flex: the model eager, flex_attention compiled once (torch.compile defaults); ours flex compiled: the "
        f"whole model under torch.compile (backend {args.backend})",
    ]


# What a run on a GPU measures, and what a dry run on the CPU (tiny, quick) does instead. The goal's row (batch 8,
# 16k tokens) first: a run cut short by the GPU's time limit still has it.
SETTINGS = {
    "lengths": ([16384, 4096], [300]),
    "batches": ([8, 1], [2, 1]),
    "repeats": (10, 2),
    "warmup": (3, 1),
    "backend": ("inductor", "aot_eager"),
    "check_lengths": ([37, 301, 1000], [37, 301]),
}


def parse(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dry_run", action="store_true", help="the CPU, tiny sizes, forward only, writes nothing")
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    parser.add_argument("--lengths", type=int, nargs="+")
    parser.add_argument("--batches", type=int, nargs="+")
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--warmup", type=int, help="untimed steps per arm (the first compiles)")
    parser.add_argument("--backend", help="torch.compile backend of the compiled-model arm")
    parser.add_argument("--check_lengths", type=int, nargs="*", help="lengths of the checks (none: no checks)")
    args = parser.parse_args(argv)
    for name, (on_gpu, dry) in SETTINGS.items():
        if getattr(args, name) is None:
            setattr(args, name, dry if args.dry_run else on_gpu)
    args.device = "cpu" if args.dry_run else args.device
    args.argv = argv
    return args


def main(argv=None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    device, train = torch.device(args.device), not args.dry_run
    torch.backends.cuda.matmul.allow_tf32 = False  # the checks compare fp32 results
    check_flex_equals_banded(device, args.check_lengths, train)
    rows = []
    for batch in args.batches:
        for length in args.lengths:
            steps = arm_steps(args.arms, length, batch, device, train, args.backend, args.warmup)
            rows.append(table_row(length, batch, steps, args.repeats, device))
            if not args.dry_run:
                write_table(
                    "longformer_flex_gpu",
                    "Longformer through flex_attention against transformers (GPU)",
                    rows,
                    notes(args, train),
                )
    failures = check_summary()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

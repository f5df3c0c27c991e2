"""Longformer on a CUDA GPU: parity with transformers, the banded (dilated) kernel against dense attention under the
equivalent boolean mask (forward and gradients, GPU against the dense oracle and against the same computation on
the CPU), bf16 autocast, and a time / peak-memory table against transformers' LongformerForMaskedLM (issue 6's
configuration: hidden 256, 2 layers, 4 heads, FFN 1024, window 256, one global token, dropout 0, vocabulary 1000).

Not part of CI (it needs a GPU). From the repository root, on a machine with CUDA:

    python benchmarks/longformer_gpu_check.py [--device cuda] [--batch 1 8] [--small]

(--small: tiny sizes, CPU dry run.)

It prints PASS/FAIL lines (and exits non-zero if any fails), then markdown tables; the results are collected in
``benchmarks/results/longformer_gpu.md``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import traceback
from pathlib import Path

import bench_longformer
import torch
import transformers
from common import CHECKS, check_summary, device_peak_mib, guarded, max_diff, report, synchronize
from transformers import LongformerConfig, LongformerForMaskedLM

import hf_scratch  # noqa: F401
from hf_scratch import ScratchLongformerConfig, ScratchLongformerForMaskedLM
from hf_scratch.convert import from_transformers
from hf_scratch.modeling_longformer import GlobalTokens, ScratchLongformerSelfAttention

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from reference import dense_longformer_attention  # noqa: E402  (the tests' dense oracle)

# ---- 1. parity with transformers ------------------------------------------------------------------------------

PAR = dict(
    vocab_size=100,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=128,
    attention_window=[8, 16],
    max_position_embeddings=600,
    pad_token_id=1,
    sep_token_id=2,
)


def padded_batch(length, device, seed=1):
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(3, 100, (3, length), generator=g)
    attention_mask = torch.ones(3, length, dtype=torch.long)
    attention_mask[1, (2 * length) // 3 :] = 0
    attention_mask[2, length // 2 :] = 0
    input_ids[attention_mask == 0] = 1
    gam = torch.zeros_like(input_ids)
    gam[0, [0, 5, length - 2]] = 1
    gam[1, 2] = 1
    gam[2, [0, length // 2 + 1]] = 1  # the second one is on padding
    return input_ids.to(device), attention_mask.to(device), gam.to(device)


@guarded("parity")
def check_parity(device, lengths):
    torch.manual_seed(0)
    reference = LongformerForMaskedLM(LongformerConfig(**PAR)).to(device).eval()
    ours = from_transformers(reference)
    device_kept = next(ours.parameters()).device == next(reference.parameters()).device
    report("from_transformers keeps the device", device_kept, f"parameters on {next(ours.parameters()).device}")
    ours = ours.eval()
    for length in lengths:
        input_ids, attention_mask, gam = padded_batch(length, device)
        inputs = dict(input_ids=input_ids, attention_mask=attention_mask, global_attention_mask=gam)
        labels = input_ids.masked_fill(attention_mask == 0, -100)
        with torch.no_grad():
            expected = reference(**inputs, labels=labels)
        real = attention_mask.bool()
        for impl in ("sdpa", "eager"):
            ours.config._attn_implementation = impl
            with torch.no_grad():
                actual = ours(**inputs, labels=labels)
            diff = (expected.logits[real] - actual.logits[real]).abs().max().item()
            ldiff = abs(expected.loss.item() - actual.loss.item())
            finite = bool(torch.isfinite(actual.logits).all())
            report(
                f"parity fp32 {impl} length {length}",
                diff <= 1e-4 and ldiff <= 1e-4 and finite,
                f"max|dlogits| on real = {diff:.3e}, |dloss| = {ldiff:.3e}, finite={finite}",
            )
        # gradients too (sdpa in training path uses checkpoint): compare grads of the MLM loss
        ours.config._attn_implementation = "sdpa"
        reference.zero_grad(set_to_none=True)
        ours.zero_grad(set_to_none=True)
        reference(**inputs, labels=labels).loss.backward()
        ours(**inputs, labels=labels).loss.backward()
        gref = reference.longformer.embeddings.word_embeddings.weight.grad
        gours = ours.get_input_embeddings().weight.grad
        gd = (gref - gours).abs().max().item()
        report(f"parity fp32 sdpa grad(word embeddings) length {length}", gd <= 1e-4, f"max|dgrad| = {gd:.3e}")


# ---- 2. dilation: banded kernel vs dense oracle ---------------------------------------------------------------


def run_attention(attention, hidden, upstream, fn):
    attention.zero_grad(set_to_none=True)
    hidden.grad = None
    output = fn()
    (output * upstream).sum().backward()
    grads = [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in attention.parameters()]
    return output.detach(), hidden.grad.clone(), grads


@guarded("dilation")
def check_dilation(device, length):
    cases = [
        ("int 2", 2, 4),
        ("per-layer [1, 3]", [1, 3], 4),
        ("per-head [[1,2,4,8],[2,2,1,1]]", [[1, 2, 4, 8], [2, 2, 1, 1]], 4),
        ("per-head [[3,1,2,1],[1,1,1,1]]", [[3, 1, 2, 1], [1, 1, 1, 1]], 4),
    ]
    for name, dilation, heads in cases:
        for window in (4, 8):
            config = ScratchLongformerConfig(
                hidden_size=8 * heads,
                num_attention_heads=heads,
                num_hidden_layers=2,
                intermediate_size=16,
                vocab_size=10,
                attention_window=window,
                attention_dilation=dilation,
                attention_probs_dropout_prob=0.0,
                max_position_embeddings=length + 8,
            )
            for layer in (0, 1):
                for impl in ("sdpa", "eager"):
                    config._attn_implementation = impl
                    torch.manual_seed(layer)
                    attention = ScratchLongformerSelfAttention(config, layer).to(device)
                    g = torch.Generator().manual_seed(7)
                    real_lengths = torch.tensor([length, length - 5, length // 3, 0 if length > 2 else 1])
                    key_is_real = (torch.arange(length)[None, :] < real_lengths[:, None]).to(device)
                    is_global = torch.zeros(4, length, dtype=torch.bool)
                    is_global[0, [0, length // 2]] = True
                    is_global[1, length - 1] = True  # on padding
                    is_global[2, [min(1, length - 1), max(length - 2, 0)]] = True  # second on padding
                    is_global[3, 0] = True  # row of all padding, global on padding
                    is_global = is_global.to(device)
                    hidden = torch.randn(4, length, 8 * heads, generator=g).to(device).requires_grad_(True)
                    upstream = torch.randn(4, length, 8 * heads, generator=g).to(device)
                    banded = run_attention(
                        attention,
                        hidden,
                        upstream,
                        lambda attention=attention, hidden=hidden, key_is_real=key_is_real, is_global=is_global: (
                            attention(hidden, key_is_real, GlobalTokens.from_masks(key_is_real, is_global))[0]
                        ),
                    )
                    dense = run_attention(
                        attention,
                        hidden,
                        upstream,
                        lambda attention=attention, hidden=hidden, key_is_real=key_is_real, is_global=is_global: (
                            dense_longformer_attention(attention, hidden, key_is_real, is_global)
                        ),
                    )
                    # the same banded computation on CPU
                    attention_cpu = ScratchLongformerSelfAttention(config, layer)
                    attention_cpu.load_state_dict({k: v.cpu() for k, v in attention.state_dict().items()})
                    hidden_cpu = hidden.detach().cpu().requires_grad_(True)

                    def banded_on_cpu(
                        attention_cpu=attention_cpu, hidden_cpu=hidden_cpu, key_is_real=key_is_real, is_global=is_global
                    ):
                        return attention_cpu(
                            hidden_cpu, key_is_real.cpu(), GlobalTokens.from_masks(key_is_real.cpu(), is_global.cpu())
                        )[0]

                    cpu = run_attention(attention_cpu, hidden_cpu, upstream.cpu(), banded_on_cpu)
                    finite = all(torch.isfinite(t).all() for t in [banded[0], banded[1], *banded[2]])
                    fwd = max_diff(banded[0], dense[0])
                    gin = max_diff(banded[1], dense[1])
                    gw = max(max_diff(a, b) for a, b in zip(banded[2], dense[2]))
                    cpu_d = max(
                        max_diff(banded[0], cpu[0]),
                        max_diff(banded[1], cpu[1]),
                        max(max_diff(a, b) for a, b in zip(banded[2], cpu[2])),
                    )
                    ok = finite and fwd <= 1e-5 and gin <= 1e-5 and gw <= 1e-5 and cpu_d <= 1e-5
                    report(
                        f"dilation {name} window {window} layer {layer} {impl} n={length}",
                        ok,
                        f"fwd {fwd:.2e}, grad input {gin:.2e}, grad weights {gw:.2e} vs dense on {device.type}; "
                        f"max vs CPU banded {cpu_d:.2e}; finite={finite}",
                    )


@guarded("dilation full model")
def check_dilated_model_cpu_vs_gpu(device, length):
    config = ScratchLongformerConfig(
        **{
            **PAR,
            "max_position_embeddings": length + 8,
            "attention_dilation": [[1, 2, 4, 8], [2, 2, 1, 1]],
            "hidden_dropout_prob": 0.0,
            "attention_probs_dropout_prob": 0.0,
        }
    )
    torch.manual_seed(0)
    cpu_model = ScratchLongformerForMaskedLM(config).train()
    for impl in ("sdpa", "eager"):
        gpu_model = ScratchLongformerForMaskedLM(config).to(device).train()
        gpu_model.load_state_dict(cpu_model.state_dict())
        cpu_model.config._attn_implementation = impl
        gpu_model.config._attn_implementation = impl
        input_ids, attention_mask, gam = padded_batch(length, torch.device("cpu"), seed=3)
        labels = input_ids.masked_fill(attention_mask == 0, -100)
        results = []
        for model, dev in ((cpu_model, torch.device("cpu")), (gpu_model, device)):
            model.zero_grad(set_to_none=True)
            out = model(
                input_ids=input_ids.to(dev),
                attention_mask=attention_mask.to(dev),
                global_attention_mask=gam.to(dev),
                labels=labels.to(dev),
            )
            out.loss.backward()
            results.append(
                (
                    out.logits.detach().cpu(),
                    {n: p.grad.detach().cpu() for n, p in model.named_parameters() if p.grad is not None},
                )
            )
        real = attention_mask.bool()
        ld = (results[0][0][real] - results[1][0][real]).abs().max().item()
        gd = max((results[0][1][n] - results[1][1][n]).abs().max().item() for n in results[0][1])
        finite = bool(torch.isfinite(results[1][0]).all()) and all(
            torch.isfinite(g).all() for g in results[1][1].values()
        )
        report(
            f"dilated full MLM model {impl} n={length} GPU vs CPU",
            ld <= 1e-4 and gd <= 1e-4 and finite,
            f"max|dlogits| {ld:.2e}, max|dgrad| {gd:.2e}, finite={finite}",
        )


# ---- 3. bf16 autocast --------------------------------------------------------------------------------------------


@guarded("bf16 autocast")
def check_bf16(device, length):
    for dilation in (1, [[1, 2, 4, 8], [2, 2, 1, 1]]):
        config = ScratchLongformerConfig(
            **{**PAR, "max_position_embeddings": length + 8, "attention_dilation": dilation}
        )
        for impl in ("sdpa", "eager"):
            torch.manual_seed(0)
            model = ScratchLongformerForMaskedLM._from_config(config, attn_implementation=impl).to(device).train()
            input_ids, attention_mask, gam = padded_batch(length, device)
            attention_mask = attention_mask.clone()
            attention_mask[2] = 0  # a row with nothing real, globals on it
            labels = input_ids.masked_fill(attention_mask == 0, -100)
            with torch.autocast(device.type, dtype=torch.bfloat16):
                out = model(
                    input_ids=input_ids, attention_mask=attention_mask, global_attention_mask=gam, labels=labels
                )
            out.loss.backward()
            real = attention_mask.bool()
            finite = bool(torch.isfinite(out.loss)) and bool(torch.isfinite(out.logits[real]).all())
            all_logits_finite = bool(torch.isfinite(out.logits).all())
            grads_finite = all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
            report(
                f"bf16 autocast fwd+bwd {impl} dilation={dilation} n={length}",
                finite and grads_finite and all_logits_finite,
                f"loss {out.loss.item():.4f} dtype {out.logits.dtype}, logits finite (real/all) "
                f"{finite}/{all_logits_finite}, grads finite {grads_finite}",
            )


# ---- 4. timing ----------------------------------------------------------------------------------------------------


def build(which, length, device, dilation=1, batch=1):
    """bench_longformer's models and inputs (issue 6's configuration, ours converted from transformers'), on
    ``device``."""
    model, inputs = bench_longformer.build(which, length, dilation, batch=batch)
    return model.to(device), {name: tensor.to(device) for name, tensor in inputs.items()}


def measure(model, inputs, device, bf16, warmup, repeats):
    def step():
        model.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = model(**inputs).loss
        loss.backward()
        return loss

    for _ in range(warmup):
        step()
    synchronize(device)
    times = []
    for _ in range(repeats):
        synchronize(device)
        t0 = time.perf_counter()
        step()
        synchronize(device)
        times.append(time.perf_counter() - t0)
    model.zero_grad(set_to_none=True)
    losses = []
    peak = device_peak_mib(lambda: losses.append(step()), device)
    return statistics.median(times) * 1e3, peak, losses[0].item()


def timing(device, lengths, warmup, repeats, batch=1):
    rows = []
    for bf16 in (False, True):
        for length in lengths:
            row = {"precision": "bf16 autocast" if bf16 else "fp32", "tokens": length, "batch": batch}
            losses = {}
            for which in ("ours", "transformers"):
                try:
                    model, inputs = build(which, length, device, batch=batch)
                    ms, mib, loss = measure(model, inputs, device, bf16, warmup, repeats)
                    losses[which] = loss
                    row[f"{which} ms"], row[f"{which} MiB"] = ms, mib
                except Exception:
                    traceback.print_exc()
                    row[f"{which} ms"], row[f"{which} MiB"] = float("nan"), float("nan")
                finally:
                    model = inputs = None
                    if device.type == "cuda":
                        torch.cuda.empty_cache()
            row["speed-up"] = row["transformers ms"] / row["ours ms"]
            row["mem ratio"] = row["ours MiB"] / row["transformers MiB"] if device.type == "cuda" else float("nan")
            row["loss ours/theirs"] = (
                f"{losses.get('ours', float('nan')):.4f}/{losses.get('transformers', float('nan')):.4f}"
            )
            rows.append(row)
            print(row, flush=True)
    print(
        "\n| precision | batch | tokens | ours ms | transformers ms | speed-up | ours peak MiB | transformers peak MiB "
        "| mem ratio (ours/theirs) | loss ours/theirs |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['precision']} | {r['batch']} | {r['tokens']} | {r['ours ms']:.2f} | {r['transformers ms']:.2f} | "
            f"{r['speed-up']:.2f} | "
            f"{r['ours MiB']:.0f} | {r['transformers MiB']:.0f} | {r['mem ratio']:.2f} | {r['loss ours/theirs']} |"
        )


def dilation_timing(device, length, warmup, repeats, batch=1):
    print(f"\n| precision | ours, batch {batch:d} × {length:d} tokens | ms | peak MiB | time / dilation 1 |")
    print("|---|---|---|---|---|")
    for bf16 in (False, True):
        base = None
        for name, dilation in (("dilation 1", 1), ("dilation [[1,2,4,8]]*2", [[1, 2, 4, 8]] * 2)):
            try:
                model, inputs = build("ours", length, device, dilation=dilation, batch=batch)
                ms, mib, _ = measure(model, inputs, device, bf16, warmup, repeats)
            except Exception:
                traceback.print_exc()
                ms, mib = float("nan"), float("nan")
            model = inputs = None
            if device.type == "cuda":
                torch.cuda.empty_cache()
            base = base or ms
            print(
                f"| {'bf16 autocast' if bf16 else 'fp32'} | {name} | {ms:.2f} | {mib:.0f} | {ms / base:.2f} |",
                flush=True,
            )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--small", action="store_true")
    parser.add_argument("--skip-timing", action="store_true")
    parser.add_argument("--batch", type=int, nargs="+", default=[1])
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, python {sys.version.split()[0]}")
    if device.type == "cuda":
        print(
            f"device: {torch.cuda.get_device_name()}, CUDA {torch.version.cuda}, "
            f"capability {torch.cuda.get_device_capability()}"
        )
    print(f"hf_scratch from {hf_scratch.__file__}", flush=True)

    check_parity(device, [13, 301])
    for length in [1, 2, 7, 19] if args.small else [1, 2, 7, 19, 37]:
        check_dilation(device, length)
    check_dilated_model_cpu_vs_gpu(device, 45 if args.small else 301)
    check_bf16(device, 45 if args.small else 301)
    print("\n==== SUMMARY ====")
    for line in CHECKS:
        print(line)
    failures = check_summary()

    if not args.skip_timing:
        for batch in args.batch:
            if args.small:
                timing(device, [512, 1024], warmup=1, repeats=2, batch=batch)
                dilation_timing(device, 1024, warmup=1, repeats=2, batch=batch)
            else:
                timing(device, [1024, 4096, 16384], warmup=3, repeats=10, batch=batch)
                dilation_timing(device, 4096, warmup=3, repeats=10, batch=batch)
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()

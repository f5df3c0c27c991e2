"""Cached generation speed of ScratchGPTLMHeadModel against transformers' GPT2LMHeadModel at the same configuration
and weights (converted with ``hf_scratch.convert.from_transformers``), timed round-robin in one process; and our
cached vs uncached generation at 512 new tokens.

Greedy decoding with ``generate`` (``min_new_tokens`` = ``max_new_tokens``, no EOS, so every run produces exactly the
same number of tokens), batch 1 and a left-padded batch of 4. Goal: tokens/s ≥ 1.1 × transformers'; both models
produce the same tokens (checked before timing).

    python benchmarks/bench_gpt.py                       # GPT-2-shaped small model, 128 and 512 new tokens
    python benchmarks/bench_gpt.py --size gpt2 --new-tokens 64 --repeats 3
    python benchmarks/bench_gpt.py --profile             # torch.profiler table of one cached generation of ours

Compiled static-cache decoding (issue 15), greedy, batch 1 and 8, in one run: our eager dynamic cache, our compiled
static cache, transformers' compiled static cache (and transformers' eager dynamic cache for reference). Goals: ours
compiled ≥ 3 × ours eager, ≥ 1.0 × transformers compiled (tokens/s). Both compiled sides use the same
``CompileConfig`` (transformers' default: Inductor, ``mode="reduce-overhead"``):

    python benchmarks/bench_gpt.py --compiled --batches 1 8 --repeats 3
    python benchmarks/bench_gpt.py --compiled --device cuda --dtype bfloat16 --batches 1 8   # on a GPU
    python benchmarks/bench_gpt.py --compiled --profile   # cProfile: ours eager dynamic vs compiled static, batch 1
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
from common import bar_plot, compare, in_repo_path, print_cpu_profile, setup_threads, write_table

in_repo_path()

SIZES = {
    "small": dict(vocab=8000, hidden=256, layers=4, heads=4),
    "gpt2": dict(vocab=50257, hidden=768, layers=12, heads=12),  # GPT-2 small (124M), random weights
}
PROMPT = 16


def build(size: dict, positions: int = 1024):
    from transformers import GPT2Config, GPT2LMHeadModel

    from hf_scratch.convert import from_transformers

    config = GPT2Config(
        vocab_size=size["vocab"],
        n_embd=size["hidden"],
        n_layer=size["layers"],
        n_head=size["heads"],
        n_positions=positions,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    reference = GPT2LMHeadModel(config).eval()
    return from_transformers(reference).eval(), reference


def prompts(vocab: int, batch: int):
    """``batch`` prompts of PROMPT tokens, all but the first left-padded by a few tokens."""
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(5, vocab, (batch, PROMPT), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    for row in range(1, batch):
        attention_mask[row, : 2 * row] = 0
    return input_ids.masked_fill(attention_mask == 0, 0), attention_mask


def generate_fn(model, inputs, new_tokens: int, use_cache: bool = True, **generate_kwargs):
    def run():
        with torch.inference_mode():
            tokens = model.generate(
                **inputs,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                do_sample=False,
                use_cache=use_cache,
                eos_token_id=None,
                pad_token_id=0,
                **generate_kwargs,
            )
        if tokens.is_cuda:
            torch.cuda.synchronize()
        return tokens

    return run


def compiled_rows(ours, reference, size: dict, args) -> list[dict]:
    """Greedy decode tokens/s: ours eager dynamic, ours compiled static, transformers compiled static (and eager
    dynamic), timed round-robin; the first (warm-up) calls compile, so the timed ones run the compiled graphs."""
    from transformers import CompileConfig

    compile_config = CompileConfig()  # transformers' defaults, the same for both models
    compile_config._compile_all_devices = True  # transformers auto-compiles on accelerators only unless told so
    static = dict(cache_implementation="static", compile_config=compile_config)
    rows = []
    for batch in args.batches:
        input_ids, attention_mask = prompts(size["vocab"], batch)
        inputs = {"input_ids": input_ids.to(args.device), "attention_mask": attention_mask.to(args.device)}
        runs = {
            "ours eager dynamic": generate_fn(ours, inputs, args.new_tokens),
            "ours compiled static": generate_fn(ours, inputs, args.new_tokens, **static),
            "transformers compiled static": generate_fn(reference, inputs, args.new_tokens, **static),
            "transformers eager dynamic": generate_fn(reference, inputs, args.new_tokens),
        }
        compile_s, tokens = {}, {}
        for name, run in runs.items():  # first call: compiles (the compiled ones), and gives the tokens to compare
            start = time.perf_counter()
            tokens[name] = run()
            compile_s[name] = time.perf_counter() - start
        times = compare(runs, warmup=1, repeats=args.repeats)
        tps = {name: batch * args.new_tokens / timing.median for name, timing in times.items()}
        same_ours = torch.equal(tokens["ours compiled static"], tokens["ours eager dynamic"])
        same_ref = torch.equal(tokens["ours compiled static"], tokens["transformers compiled static"])
        vs_eager = tps["ours compiled static"] / tps["ours eager dynamic"]
        vs_ref = tps["ours compiled static"] / tps["transformers compiled static"]
        rows.append(
            {
                "batch": batch,
                "ours eager dynamic (tok/s)": round(tps["ours eager dynamic"], 1),
                "ours compiled static (tok/s)": round(tps["ours compiled static"], 1),
                "transformers compiled static (tok/s)": round(tps["transformers compiled static"], 1),
                "transformers eager dynamic (tok/s)": round(tps["transformers eager dynamic"], 1),
                "compiled ÷ our eager (goal ≥ 3)": f"{vs_eager:.2f} ({'met' if vs_eager >= 3 else 'NOT met'})",
                "ours ÷ transformers compiled (goal ≥ 1.0)": f"{vs_ref:.2f} ({'met' if vs_ref >= 1.0 else 'NOT met'})",
                "first call s (ours / transformers compiled)": f"{compile_s['ours compiled static']:.0f} / "
                f"{compile_s['transformers compiled static']:.0f}",
                "same tokens (ours static≡dynamic / ≡ transformers)": f"{'yes' if same_ours else 'NO'} / "
                f"{'yes' if same_ref else 'NO'}",
                "noise": f"{max(t.spread for t in times.values()):.0%}",
            }
        )
        print(rows[-1], flush=True)
    return rows


def speed_row(case: str, times: dict, ours: str, other: str, batch: int, new_tokens: int, same: bool) -> dict:
    """Tokens/s of both (median), their ratio (> 1: ``ours`` is faster), whether both generated the same tokens."""
    ours_tps, other_tps = (round(batch * new_tokens / times[name].median, 1) for name in (ours, other))
    return {
        "case": case,
        "ours (tokens/s)": ours_tps,
        "other": other,
        "other (tokens/s)": other_tps,
        "ratio": round(ours_tps / other_tps, 3),
        "same tokens": "yes" if same else "NO",
        "noise": f"{max(times[ours].spread, times[other].spread):.0%}",
    }


def profile_compiled(ours, size: dict, args) -> None:
    """cProfile of one greedy generate of ours, eager dynamic cache then compiled static cache (batch 1): how much
    of a token's time the matrix products take (``linear`` eager; ``addmm`` / ``mm`` in the Inductor graph)."""
    import cProfile
    import pstats

    from transformers import CompileConfig

    compile_config = CompileConfig()
    compile_config._compile_all_devices = True
    inputs = dict(zip(("input_ids", "attention_mask"), prompts(size["vocab"], 1)))
    runs = {
        "eager dynamic": generate_fn(ours, inputs, args.new_tokens),
        "compiled static": generate_fn(
            ours, inputs, args.new_tokens, cache_implementation="static", compile_config=compile_config
        ),
    }
    for name, run in runs.items():
        run(), run()  # compiles (the static one), warms up
        profiler = cProfile.Profile()
        start = time.perf_counter()
        profiler.runcall(run)
        print(f"=== ours {name}: {(time.perf_counter() - start) * 1e3 / args.new_tokens:.2f} ms per token (profiled)")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(8)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--long", type=int, default=512, help="new tokens for cached vs uncached (0: skip)")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--long-repeats", type=int, default=1)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--compiled", action="store_true", help="compiled static cache vs eager dynamic (issue 15)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    args = parser.parse_args()
    threads = setup_threads()
    size = SIZES[args.size]
    ours, reference = build(size, positions=max(1024, PROMPT + args.long))

    if args.compiled and args.profile:
        profile_compiled(ours, size, args)
    elif args.compiled:
        write_compiled_table(ours, reference, size, args, threads)
    elif args.profile:
        profile_eager(ours, size)
    else:
        write_cached_table(ours, reference, size, args, threads)


def write_compiled_table(ours, reference, size: dict, args, threads: int) -> None:
    """Compiled static cache vs eager dynamic cache, ours and transformers' (issue 15)."""
    dtype = getattr(torch, args.dtype)
    ours, reference = ours.to(args.device, dtype), reference.to(args.device, dtype)
    rows = compiled_rows(ours, reference, size, args)
    where = torch.cuda.get_device_name() if args.device.startswith("cuda") else f"CPU, {threads} thread(s)"
    command = " ".join(["python benchmarks/bench_gpt.py", *sys.argv[1:]])
    notes = [
        f"machine: {where}; {args.dtype}",
        f"size {args.size}: vocab {size['vocab']}, hidden {size['hidden']}, {size['layers']} layers, "
        f"{size['heads']} heads; prompt {PROMPT} tokens (rows after the first left-padded); greedy, "
        f"{args.new_tokens} new tokens; tokens/s = batch × new tokens ÷ median generate() time of {args.repeats} "
        "repeats, timed round-robin after one untimed call each (the compiling one for the compiled columns)",
        "compiled = generate(cache_implementation='static', compile_config=CompileConfig()) — transformers' "
        "default compile settings (Inductor, mode='reduce-overhead'), the same for both models",
        "noise = (max − min) ÷ median over the repeats, the largest of the four columns",
    ]
    suffix = "cuda" if args.device.startswith("cuda") else "cpu"
    write_table(
        f"gpt_generation_compiled_{args.size}_{suffix}",
        f"GPT greedy decoding: compiled static cache vs eager dynamic cache\n\n`{command}`",
        rows,
        notes=notes,
    )


def profile_eager(ours, size: dict) -> None:
    """Where an eager generate() of ours spends its time (torch.profiler's table)."""
    print_cpu_profile(generate_fn(ours, dict(zip(("input_ids", "attention_mask"), prompts(size["vocab"], 4))), 32))


def write_cached_table(ours, reference, size: dict, args, threads: int) -> None:
    """Cached generation, ours vs transformers at each batch size, then ours cached vs uncached."""
    rows = [cached_row(ours, reference, size, args, batch) for batch in args.batches]
    if args.long > 0:
        rows.append(cached_vs_uncached_row(ours, size, args))
    notes = [
        f"size {args.size}: vocab {size['vocab']}, hidden {size['hidden']}, {size['layers']} layers, "
        f"{size['heads']} heads; prompt {PROMPT} tokens (rows after the first left-padded); greedy; {threads} threads",
        "ratio = our tokens/s ÷ the other column's tokens/s (> 1: ours is faster); goal ≥ 1.1 against transformers",
        "every decode step of ours goes through its lm_head module; where a step's time goes: "
        "`python benchmarks/bench_gpt.py --compiled --profile` (cProfile, eager dynamic vs compiled static)",
    ]
    command = " ".join(["python benchmarks/bench_gpt.py", *sys.argv[1:]])
    write_table(f"gpt_generation_{args.size}", f"GPT cached generation\n\n`{command}`", rows, notes=notes)
    bar_plot(f"gpt_generation_{args.size}", rows, value_key="ratio", ylabel="ratio of tokens/s", reference_line=1.1)


def cached_row(ours, reference, size: dict, args, batch: int) -> dict:
    input_ids, attention_mask = prompts(size["vocab"], batch)
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
    same = torch.equal(generate_fn(ours, inputs, args.new_tokens)(), generate_fn(reference, inputs, args.new_tokens)())
    times = compare(
        {
            "ours": generate_fn(ours, inputs, args.new_tokens),
            "transformers": generate_fn(reference, inputs, args.new_tokens),
        },
        warmup=1,
        repeats=args.repeats,
    )
    return speed_row(
        f"cached, batch {batch}, {args.new_tokens} new", times, "ours", "transformers", batch, args.new_tokens, same
    )


def cached_vs_uncached_row(ours, size: dict, args) -> dict:
    """Uncached generation is quadratic in the length (about a minute at 512 tokens here): one timed run each, whose
    outputs are also compared."""
    input_ids, attention_mask = prompts(size["vocab"], 1)
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
    outputs = {}

    def keep(name, run):
        return lambda: outputs.__setitem__(name, run())

    times = compare(
        {
            "cached": keep("cached", generate_fn(ours, inputs, args.long)),
            "uncached": keep("uncached", generate_fn(ours, inputs, args.long, use_cache=False)),
        },
        warmup=0,
        repeats=args.long_repeats,
    )
    same = torch.equal(outputs["cached"], outputs["uncached"])
    return speed_row(
        f"ours cached vs uncached, batch 1, {args.long} new", times, "cached", "uncached", 1, args.long, same
    )


if __name__ == "__main__":
    main()

"""Longformer: ours vs transformers' LongformerForMaskedLM, side by side in one run.

Configuration of issue 6: hidden 256, 2 layers, 4 heads, FFN 1024, window 256, one global token (the first),
dropout 0, vocabulary 1000 (small, so that the attention rather than the vocabulary projection is measured).
Our model is converted from the transformers one, so both compute the same function with the same weights.

1. forward + backward (MLM loss on every token) at 4,096 tokens: time (round-robin, median) and peak memory;
2. time and peak memory from 1k to 16k tokens, and time(16k) / time(4k);
3. dilation on vs off at equal window (ours only: transformers has no dilation): dilation 2 on every head, and
   dilations 1, 2, 4, 8 on the four heads.

Peak memory: each measurement runs in a fresh process (``common.peak_memory_mib``), which builds the model and
inputs, resets the kernel's high-water mark, runs one forward + backward and reads the peak resident memory: what
the step adds on top of the weights (activations, saved tensors, temporaries, gradients).

    python benchmarks/bench_longformer.py [--lengths 1024,2048,4096,8192,16384] [--repeats 3]
"""

from __future__ import annotations

import argparse

import torch
from common import bar_plot, compare, in_repo_path, line_plot, peak_memory_mib, ratio_row, setup_threads, write_table

in_repo_path()

VOCAB = 1000
CONFIG = dict(
    vocab_size=VOCAB,
    hidden_size=256,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=1024,
    attention_window=256,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
    max_position_embeddings=16384 + 8,
)


def build(which: str, length: int, dilation=1, seed: int = 0, batch: int = 1):
    """The model (``"ours"``, ``"transformers"``) in train mode and its inputs; ours is converted from theirs."""
    from transformers import LongformerConfig, LongformerForMaskedLM

    import hf_scratch  # noqa: F401  (registers the Auto classes)
    from hf_scratch.convert import from_transformers

    torch.manual_seed(seed)
    reference = LongformerForMaskedLM(LongformerConfig(**CONFIG))
    if which == "transformers":
        model = reference
    else:
        model = from_transformers(reference)
        if dilation != 1:  # same weights, dilated pattern
            config = model.config.to_dict()
            config["attention_dilation"] = dilation
            dilated = type(model)(type(model.config).from_dict(config))
            dilated.load_state_dict(model.state_dict())
            model = dilated
    model.train()
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(3, VOCAB, (batch, length), generator=generator)
    global_attention_mask = torch.zeros_like(input_ids)
    global_attention_mask[:, 0] = 1
    inputs = dict(input_ids=input_ids, global_attention_mask=global_attention_mask, labels=input_ids)
    return model, inputs


def step_fn(model, inputs):
    """One forward + backward of the MLM loss (no optimizer step: that is the same for both)."""

    def step():
        model.zero_grad(set_to_none=True)
        model(**inputs).loss.backward()

    return step


def setup_step(which: str, length: int, dilation=1):
    """For ``peak_memory_mib``: build in the child process, return the step to measure."""
    setup_threads()
    model, inputs = build(which, length, dilation)
    return step_fn(model, inputs)


def attention_step(which: str, length: int):
    """Forward + backward of one self-attention layer (converted weights) on random hidden states."""
    from transformers import LongformerConfig, LongformerForMaskedLM

    from hf_scratch.convert import from_transformers
    from hf_scratch.modeling_longformer import GlobalTokens

    torch.manual_seed(0)
    reference = LongformerForMaskedLM(LongformerConfig(**CONFIG))
    hidden = torch.randn(1, length, CONFIG["hidden_size"], requires_grad=True)
    is_global = torch.zeros(1, length, dtype=torch.bool)
    is_global[:, 0] = True
    if which == "transformers":
        layer = reference.longformer.encoder.layer[0].attention.self
        mask = torch.zeros(1, length).masked_fill(is_global, torch.finfo(torch.float32).max)

        def run():
            return layer(
                hidden,
                attention_mask=mask,
                is_index_masked=mask < 0,
                is_index_global_attn=mask > 0,
                is_global_attn=True,
            )[0]
    else:
        layer = from_transformers(reference).model.layers[0].attention
        real = torch.ones(1, length, dtype=torch.bool)

        def run():
            return layer(hidden, real, GlobalTokens.from_masks(real, is_global))[0]

    layer.train()

    def step():
        hidden.grad = None
        layer.zero_grad(set_to_none=True)
        run().sum().backward()

    return step


def shared_linear_layers_step(length: int):
    """Forward + backward of only the matrix products both implementations must compute for the MLM step: per
    layer Q, K, V (one 256 → 768 product), the output projection and the two feed-forward products; then the MLM
    head's dense layer and its vocabulary projection. Its time bounds the speed-up from below the attention:
    speed-up ≤ transformers' step / this, however fast the attention."""
    hidden, ffn = CONFIG["hidden_size"], CONFIG["intermediate_size"]
    shapes = [(hidden, 3 * hidden), (hidden, hidden), (hidden, ffn), (ffn, hidden)] * CONFIG["num_hidden_layers"]
    shapes += [(hidden, hidden), (hidden, VOCAB)]
    torch.manual_seed(0)
    layers = [torch.nn.Linear(a, b) for a, b in shapes]
    inputs = [torch.randn(1, length, a, requires_grad=True) for a, _ in shapes]

    def step():
        for layer, x in zip(layers, inputs):
            layer.zero_grad(set_to_none=True)
            layer(x).sum().backward()

    return step


def matrix_product_flops(length: int) -> dict:
    """Forward + backward FLOPs (one multiply-add = 2) of the step's matrix products at the least work any exact
    implementation does: the linear layers of ``shared_linear_layers_step``, and the attention's Q Kᵀ and P V with
    every query against exactly its w + 1 window keys (the one global token's row and column left out)."""
    hidden, ffn, layers = CONFIG["hidden_size"], CONFIG["intermediate_size"], CONFIG["num_hidden_layers"]
    per_token = layers * (hidden * 3 * hidden + hidden * hidden + 2 * hidden * ffn) + hidden * hidden + hidden * VOCAB
    window_keys = CONFIG["attention_window"] + 1
    return {
        "linear": 3 * 2 * length * per_token,  # forward, and two products backward
        "attention": 3 * 2 * 2 * layers * length * window_keys * hidden,
    }  # Q Kᵀ and P V over all heads


# glibc returns every block of 32 MB or more to the kernel when it is freed, so each new one is page-faulted in again:
# at 16k tokens most activations are that large, at 4k none is, and the faults (slow on this virtual machine) add a
# cost that grows faster than the work. Keeping freed memory in the process removes that allocator effect.
NO_MMAP = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 40)}


def scaling_times(lengths, repeats) -> dict:
    """{which: [median seconds per length]} for ours and transformers, round-robin at each length."""
    times = {"ours": [], "transformers": []}
    for length in lengths:
        steps = {which: step_fn(*build(which, length)) for which in times}
        timing = compare(steps, warmup=1, repeats=repeats)
        for which in times:
            times[which].append(timing[which].median)
    return times


def scaling_without_page_faults(lengths, repeats: int) -> dict:
    """``scaling_times`` in a child process whose allocator keeps freed memory (``NO_MMAP``)."""
    import json
    import os
    import subprocess
    import sys

    command = [
        sys.executable,
        __file__,
        "--scaling-child",
        "--repeats",
        str(repeats),
        "--lengths",
        ",".join(map(str, lengths)),
    ]
    completed = subprocess.run(command, env={**os.environ, **NO_MMAP}, capture_output=True, text=True, check=True)
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", default="1024,2048,4096,8192,16384")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--scaling-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    threads = setup_threads()
    if args.scaling_child:  # see scaling_without_page_faults
        import json

        print(json.dumps(scaling_times([int(x) for x in args.lengths.split(",")], args.repeats)))
        return
    lengths = [int(x) for x in args.lengths.split(",")]
    notes = [
        f"{threads} threads; hidden 256, 2 layers, 4 heads, FFN 1024, window 256, 1 global token, dropout 0, "
        f"vocabulary {VOCAB}; forward + backward of the MLM loss; speed-up = transformers time / ours",
        "memory: peak RSS a step adds over the built model, each in a fresh process",
    ]
    rows, times, bound, memory = time_and_memory_over_lengths(lengths, args)
    if 4096 in lengths:
        notes += matrix_product_bound_notes(bound, times["transformers"][lengths.index(4096)])
    if 4096 in lengths and 16384 in lengths:
        notes += scaling_notes(lengths, times, args.repeats)
    write_table("longformer_lengths", "Longformer MLM forward + backward vs length (ours vs transformers)", rows, notes)
    line_plot(
        "longformer_lengths",
        lengths,
        {k: [t * 1e3 for t in v] for k, v in times.items()},
        xlabel="tokens",
        ylabel="forward + backward (ms)",
        logx=True,
        logy=True,
    )
    if memory["ours"]:
        line_plot(
            "longformer_memory",
            lengths,
            memory,
            xlabel="tokens",
            ylabel="peak memory added (MiB)",
            logx=True,
            logy=True,
        )
    write_attention_table(lengths, args.repeats, threads)
    write_dilation_table(args.repeats, threads)
    bar_plot("longformer_speedup", rows, value_key="speed-up", label_key="tokens", ylabel="transformers time / ours")


def time_and_memory_over_lengths(lengths: list[int], args):
    """1 + 2: time and memory over lengths (4,096 is the headline row): the rows, the medians per implementation,
    the shared linear layers' timing at 4,096 tokens (or None) and the peak memory per implementation."""
    rows, times, bound = [], {"ours": [], "transformers": []}, None
    memory = {"ours": [], "transformers": []}
    for length in lengths:
        ours, ours_inputs = build("ours", length)
        reference, reference_inputs = build("transformers", length)
        repeats = args.repeats if length <= 4096 else max(2, args.repeats - 1)
        steps = {"ours": step_fn(ours, ours_inputs), "transformers": step_fn(reference, reference_inputs)}
        if length == 4096:  # the floor every implementation pays, in the same round-robin: the shared products
            steps["linear layers"] = shared_linear_layers_step(length)
        timing = compare(steps, warmup=1, repeats=repeats)
        bound = timing.get("linear layers", bound)
        del ours, reference
        row = {
            "tokens": length,
            "ours (ms)": round(timing["ours"].median * 1e3, 1),
            "transformers (ms)": round(timing["transformers"].median * 1e3, 1),
            "speed-up": round(timing["transformers"].median / timing["ours"].median, 2),
            "noise": f"{max(timing['ours'].spread, timing['transformers'].spread):.0%}",
        }
        times["ours"].append(timing["ours"].median)
        times["transformers"].append(timing["transformers"].median)
        if not args.skip_memory:
            for which in ("ours", "transformers"):
                memory[which].append(peak_memory_mib(setup_step, which, length))
            row["ours peak (MiB)"] = round(memory["ours"][-1])
            row["transformers peak (MiB)"] = round(memory["transformers"][-1])
            row["memory ratio"] = round(memory["ours"][-1] / memory["transformers"][-1], 2)
        rows.append(row)
        print(row, flush=True)
    return rows, times, bound, memory


def matrix_product_bound_notes(bound, transformers_4k: float) -> list[str]:
    """How fast any implementation could be at 4,096 tokens, given the time of the matrix products."""
    notes = []
    notes.append(
        f"at 4,096 tokens the matrix products both implementations share (Q/K/V, output, feed-forward, MLM head; "
        f"forward + backward, timed alone in the same round-robin) take {bound.median * 1e3:.0f} ms: however fast "
        f"the attention, the "
        f"speed-up cannot exceed {transformers_4k / bound.median:.2f}× here"
    )
    flops = matrix_product_flops(4096)
    floor = bound.median * (1 + flops["attention"] / flops["linear"])
    notes.append(
        f"adding the attention's own products at their least ({flops['attention'] / 1e9:.1f} GFLOP: each query against "
        f"exactly its {CONFIG['attention_window'] + 1} window keys) at the rate the linear layers reach "
        f"({flops['linear'] / bound.median / 1e9:.0f} GFLOP/s) gives {floor * 1e3:.0f} ms of matrix products alone, "
        f"before any softmax, normalisation, activation or loss: no exact implementation can be more than "
        f"{transformers_4k / floor:.2f}× faster than transformers at 4,096 tokens here"
    )
    return notes


def scaling_notes(lengths: list[int], times: dict, repeats: int) -> list[str]:
    """Time at 16k over time at 4k, as measured and with the allocator keeping freed memory."""
    notes = []
    i4, i16 = lengths.index(4096), lengths.index(16384)
    for which in ("ours", "transformers"):
        notes.append(f"time(16k) / time(4k), {which}: {times[which][i16] / times[which][i4]:.2f}")
    kept = scaling_without_page_faults([4096, 16384], max(2, repeats - 1))
    notes.append(
        "the same with the allocator keeping freed memory ("
        + " ".join(f"{k}={v}" for k, v in NO_MMAP.items())
        + "; otherwise each activation of 32 MB or more — at 16k most of them, at 4k none — is page-faulted in "
        "afresh at every step): " + ", ".join(f"{which} {kept[which][1] / kept[which][0]:.2f}" for which in kept)
    )
    return notes


def write_attention_table(lengths: list[int], repeats: int, threads: int) -> None:
    """2b: the attention layer alone (where the two implementations differ), up to 8,192 tokens."""
    attention_rows = []
    for length in [n for n in lengths if n <= 8192]:
        attention = {which: attention_step(which, length) for which in ("ours", "transformers")}
        timing = compare(attention, warmup=1, repeats=repeats)
        attention_rows.append(ratio_row(f"{length} tokens", timing["ours"], timing["transformers"]))
    write_table(
        "longformer_attention",
        "Longformer self-attention layer alone, forward + backward",
        attention_rows,
        [
            f"{threads} threads; ours includes the output projection, transformers' LongformerSelfAttention does "
            "not (so this understates our lead); one global token, window 256, hidden 256, 4 heads"
        ],
    )


def write_dilation_table(repeats: int, threads: int) -> None:
    """3: dilation on vs off, equal window (ours only)."""
    length = 4096
    cases = {"dilation 1": 1, "dilation 2, every head": 2, "dilations 1,2,4,8 per head": [[1, 2, 4, 8]] * 2}
    steps = {name: step_fn(*build("ours", length, dilation=dilation)) for name, dilation in cases.items()}
    timing = compare(steps, warmup=1, repeats=repeats)
    plain = timing["dilation 1"].median
    dilation_rows = [
        {
            "case": name,
            "forward + backward (ms)": round(t.median * 1e3, 1),
            "time / dilation 1": round(t.median / plain, 2),
            "noise": f"{t.spread:.0%}",
        }
        for name, t in timing.items()
    ]
    write_table(
        "longformer_dilation",
        f"Longformer: dilated vs plain sliding window (ours, {length} tokens, window 256)",
        dilation_rows,
        [f"{threads} threads; same model as above, forward + backward, window 256 in every case"],
    )


if __name__ == "__main__":
    main()

"""torch.compile (Inductor) vs eager: training-step time of every family at the small configuration.

hidden 256, 4 layers, 4 heads, FFN 1024, vocabulary 8,000, batch 8 × 128, dropout 0 (the RNN: one 256-unit LSTM
layer per side with Bahdanau attention; Transformer-XL: memory 128). The compiled model is checked against the eager
one (same weights, same loss) before timing; the compile time is reported apart.

    python benchmarks/bench_compile.py [--only bert gpt] [--repeats 5]

``--transformers`` (issue 15): BERT, GPT and the encoder-decoder beside transformers' BertForMaskedLM,
GPT2LMHeadModel and MarianMTModel at the same configuration and weights (``bench_training_step.build_pair``), all four
steps (ours / transformers × eager / compiled) timed round-robin in one run. Goals: ours compiled ≥ 1.25 ×
transformers eager and ≥ 1.0 × transformers compiled. ``--device cuda --dtype bfloat16`` runs it on a GPU under bf16
autocast:

    python benchmarks/bench_compile.py --transformers --repeats 5
    python benchmarks/bench_compile.py --transformers --device cuda --dtype bfloat16 --repeats 20

``--base``: the same table for BERT-base instead (12 layers, hidden 768, 12 heads, FFN 3072, vocabulary 30,522;
batch ``--base-batch`` (2) × 128 tokens, so that a step takes seconds on one thread), written to
``compile_vs_transformers_bert_base_<device>.md``. On the CPU every case also times the floor under the step, as
bench_training_step.py does: our step's linear-layer matrix products replayed alone plus AdamW's update alone
(Inductor on the CPU leaves those GEMMs to the same library kernels).

    python benchmarks/bench_compile.py --transformers --base --repeats 3
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time

import torch
from common import (
    Autocast,
    bar_plot,
    compare,
    in_repo_path,
    matrix_products_fn,
    optimizer_step_fn,
    ratio_row,
    setup_threads,
    synchronized,
    train_step_fn,
    write_table,
)

in_repo_path()

import hf_scratch  # noqa: E402

VOCAB, HIDDEN, LAYERS, HEADS, FFN, BATCH, LENGTH = 8000, 256, 4, 4, 1024, 8, 128
NO_DROPOUT = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
ENCODER = dict(
    vocab_size=VOCAB,
    hidden_size=HIDDEN,
    num_hidden_layers=LAYERS,
    num_attention_heads=HEADS,
    intermediate_size=FFN,
    **NO_DROPOUT,
)

MODELS = {
    "bert": lambda: hf_scratch.ScratchBertForMaskedLM(hf_scratch.ScratchBertConfig(**ENCODER)),
    "gpt": lambda: hf_scratch.ScratchGPTLMHeadModel(
        hf_scratch.ScratchGPTConfig(**ENCODER, embedding_dropout_prob=0.0, layer_norm_placement="pre")
    ),
    "transformer": lambda: hf_scratch.ScratchTransformerForConditionalGeneration(
        hf_scratch.ScratchTransformerConfig(
            vocab_size=VOCAB,
            hidden_size=HIDDEN,
            encoder_layers=LAYERS,
            decoder_layers=LAYERS,
            encoder_attention_heads=HEADS,
            decoder_attention_heads=HEADS,
            encoder_ffn_dim=FFN,
            decoder_ffn_dim=FFN,
            **NO_DROPOUT,
        )
    ),
    "longformer": lambda: hf_scratch.ScratchLongformerForMaskedLM(
        hf_scratch.ScratchLongformerConfig(**ENCODER, attention_window=32, max_position_embeddings=LENGTH + 2)
    ),
    "transfo_xl": lambda: hf_scratch.ScratchTransfoXLLMHeadModel(
        hf_scratch.ScratchTransfoXLConfig(
            vocab_size=VOCAB,
            cutoffs=[2000, 4000],
            hidden_size=HIDDEN,
            embedding_size=HIDDEN,
            num_hidden_layers=LAYERS,
            num_attention_heads=HEADS,
            head_dim=HIDDEN // HEADS,
            intermediate_size=FFN,
            mem_len=LENGTH,
            **NO_DROPOUT,
        )
    ),
    "rnn": lambda: hf_scratch.ScratchRNNForConditionalGeneration(
        hf_scratch.ScratchRNNConfig(vocab_size=VOCAB, hidden_size=HIDDEN, hidden_dropout_prob=0.0)
    ),
}


def inputs_for(name: str) -> dict:
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(5, VOCAB, (BATCH, LENGTH), generator=generator)
    inputs = {"input_ids": ids, "labels": ids}
    if name in ("bert", "gpt", "transformer", "longformer", "rnn"):
        inputs["attention_mask"] = torch.ones_like(ids)
    if name in ("transformer", "rnn"):
        inputs["labels"] = torch.randint(5, VOCAB, (BATCH, LENGTH), generator=generator)
    return inputs


def against_transformers(args, threads: int, argv) -> None:
    """Ours vs transformers, each eager and compiled, one run (issue 15's table)."""
    from bench_training_step import BERT_BASE, SMALL

    rows = [time_case(args, *case) for case in compile_cases(args, BERT_BASE, SMALL)]
    where = torch.cuda.get_device_name() if args.device.startswith("cuda") else f"CPU, {threads} thread(s)"
    command = " ".join(["python benchmarks/bench_compile.py", *(argv if argv is not None else sys.argv[1:])])
    suffix = ("bert_base_" if args.base else "") + ("cuda" if args.device.startswith("cuda") else "cpu")
    title = "Compiled training step" + (", BERT-base" if args.base else "") + ": ours vs transformers"
    write_table(
        f"compile_vs_transformers_{suffix}",
        f"{title}\n\n`{command}`",
        rows,
        against_transformers_notes(args, where, BERT_BASE, SMALL),
    )


def compile_cases(args, bert_base: dict, small: dict) -> list[tuple]:
    """(label, family, size, batch) of each case: BERT-base under --base, else the small size of each family asked."""
    if args.base:
        return [("bert base", "bert", bert_base, args.base_batch)]
    return [(family, family, small, BATCH) for family in args.only if family in ("bert", "gpt", "transformer")]


def time_case(args, label: str, family: str, size: dict, batch: int) -> dict:
    """One case's row: our model and transformers', each eager and compiled, timed round-robin once their first
    steps (the compiled ones compile there) agree."""
    from bench_training_step import build_pair

    cpu_float32 = args.device == "cpu" and args.dtype == "float32"
    load_before = os.getloadavg()[0]
    torch.manual_seed(0)
    ours, reference, inputs = build_pair(family, size)
    inputs = {k: v[:batch].to(args.device) for k, v in inputs.items()}  # the first `batch` rows of its batch
    models = {
        "ours eager": ours.to(args.device),
        "ours compiled": copy.deepcopy(ours).to(args.device),
        "transformers eager": reference.to(args.device),
        "transformers compiled": copy.deepcopy(reference).to(args.device),
    }
    steps, compile_s = first_steps(args, label, models, inputs)
    timed = dict(steps)
    if cpu_float32:  # the floor under our step (bench_training_step.py's ceiling), timed in the same round-robin
        ours_eager = models["ours eager"]
        timed["products"] = matrix_products_fn(lambda: ours_eager(**inputs).loss.backward())
        timed["update"] = optimizer_step_fn(ours_eager)
    times = compare(timed, warmup=2, repeats=args.repeats)
    row = compile_row(label, batch, times, compile_s, cpu_float32)
    row["noise"] = f"{max(times[name].spread for name in steps):.0%}"
    row["load"] = f"{load_before:.1f} → {os.getloadavg()[0]:.1f}"
    print(row, flush=True)
    return row


def first_steps(args, label: str, models: dict, inputs: dict) -> tuple[dict, dict]:
    """Each model's synchronized training step, its first step run (and timed: the compiled ones compile there), and
    the four first losses checked equal — same weights, same batch — or the timings would compare different
    computations."""
    cpu_float32 = args.device == "cpu" and args.dtype == "float32"
    dtype = getattr(torch, args.dtype)
    torch._dynamo.reset()
    steps, compile_s, first_loss = {}, {}, {}
    for name, model in models.items():
        wrapped = Autocast(model, args.device, dtype)
        if "compiled" in name:
            wrapped = torch.compile(wrapped)
        steps[name] = synchronized(train_step_fn(wrapped, inputs), args.device)
        start = time.perf_counter()
        first_loss[name] = steps[name]()  # the compiled ones compile here (forward + backward + optimizer step)
        compile_s[name] = time.perf_counter() - start
        print(f"{label} {name}: first step {compile_s[name]:.1f} s, loss {first_loss[name]:.4f}", flush=True)
    if max(first_loss.values()) - min(first_loss.values()) > (1e-3 if cpu_float32 else 5e-2):
        raise RuntimeError(f"{label}: the first-step losses disagree ({first_loss}): not benchmarking")
    return steps, compile_s


def compile_row(label: str, batch: int, times: dict, compile_s: dict, cpu_float32: bool) -> dict:
    """The table's row of one case, from its timings, up to its noise and load columns."""
    ms = {name: timing.median * 1e3 for name, timing in times.items()}
    vs_ref_eager = ms["transformers eager"] / ms["ours compiled"]
    vs_ref_compiled = ms["transformers compiled"] / ms["ours compiled"]
    row = {
        "case": label,
        "batch": f"{batch} × {LENGTH}",
        "ours eager (ms)": round(ms["ours eager"], 2),
        "ours compiled (ms)": round(ms["ours compiled"], 2),
        "transformers eager (ms)": round(ms["transformers eager"], 2),
        "transformers compiled (ms)": round(ms["transformers compiled"], 2),
        "ours: eager ÷ compiled": round(ms["ours eager"] / ms["ours compiled"], 2),
        "vs transformers eager (goal ≥ 1.25)": f"{vs_ref_eager:.2f} ({'met' if vs_ref_eager >= 1.25 else 'NOT met'})",
        "vs transformers compiled (goal ≥ 1.0)": (
            f"{vs_ref_compiled:.2f} ({'met' if vs_ref_compiled >= 1.0 else 'NOT met'})"
        ),
    }
    if cpu_float32:
        row["ceiling vs transformers eager"] = round(ms["transformers eager"] / (ms["products"] + ms["update"]), 2)
    row["compile s (ours / transformers)"] = (
        f"{compile_s['ours compiled']:.0f} / {compile_s['transformers compiled']:.0f}"
    )
    return row


def against_transformers_notes(args, where: str, bert_base: dict, small: dict) -> list[str]:
    cpu_float32 = args.device == "cpu" and args.dtype == "float32"
    size = "BERT-base: " if args.base else ""
    size += "hidden {hidden}, {layers} layers, {heads} heads, FFN {ffn}, vocabulary {vocab}".format(
        **(bert_base if args.base else small)
    )
    notes = [
        f"machine: {where}; {args.dtype}" + (" autocast" if args.dtype != "float32" else ""),
        f"training step (forward + backward + AdamW), {size}, dropout 0, SDPA on both sides"
        + ("" if args.base else f" (the encoder-decoder {small['layers']} + {small['layers']} layers)")
        + f"; torch.compile defaults (Inductor) on the model; medians of {args.repeats} repeats, timed round-robin "
        "after 2 warm-up steps each",
        "compared with BertForMaskedLM"
        + ("" if args.base else ", GPT2LMHeadModel, MarianMTModel")
        + " at the same configuration and weights; the four first-step losses are checked equal before timing",
        "ratios: other time ÷ our compiled time (> 1: ours compiled is faster); compile s = the first step",
        "noise = (max − min) ÷ median over the repeats, the largest of the four columns; load = the machine's "
        f"1-minute load average ({os.cpu_count()} cores, shared) at the case's start → end",
    ]
    if cpu_float32:
        notes.append(
            "ceiling = transformers eager ÷ (our step's linear-layer matrix products, forward + backward, replayed "
            "alone + AdamW's update alone), timed in the same round-robin: the ratio ours compiled would reach if "
            "everything but those GEMMs and the update took no time; Inductor on the CPU leaves the GEMMs to the "
            "same library kernels, so a ceiling below 1.25 means the goal is out of reach of any fusion"
        )
    if not torch.cuda.is_available():
        notes.append(
            "no GPU on this machine: the bf16 GPU table of issue 15 (`--device cuda --dtype bfloat16`, "
            "compile_vs_transformers_cuda.md) is not measured here"
        )
    return notes


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=sorted(MODELS), default=[n for n in MODELS])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--transformers", action="store_true", help="ours vs transformers, eager and compiled")
    parser.add_argument("--base", action="store_true", help="with --transformers: BERT-base, not the small configs")
    parser.add_argument("--base-batch", type=int, default=2, help="BERT-base batch size (× 128 tokens)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    args = parser.parse_args(argv)
    if args.base and not args.transformers:
        parser.error("--base is a case of the --transformers table: pass --transformers too")
    if not 1 <= args.base_batch <= 8:
        parser.error(f"--base-batch {args.base_batch}: takes the first rows of an 8-row batch, so 1 to 8")
    threads = setup_threads()
    if args.transformers:
        against_transformers(args, threads, argv)
        return
    rows = []
    for name in args.only:
        torch.manual_seed(0)
        eager = MODELS[name]()
        compiled_model = copy.deepcopy(eager)
        inputs = inputs_for(name)
        torch._dynamo.reset()
        compiled = torch.compile(compiled_model)
        start = time.perf_counter()
        with torch.no_grad():  # compile the forward graph and check it before timing
            difference = (compiled(**inputs).loss - eager(**inputs).loss).abs().item()
        if difference > 1e-3:
            raise RuntimeError(f"{name}: compiled loss differs from eager by {difference:.2e}")
        compiled_step = train_step_fn(compiled, inputs)
        compiled_step()  # compiles the training graphs (forward + backward)
        compile_seconds = time.perf_counter() - start
        times = compare(
            {"compiled": compiled_step, "eager": train_step_fn(eager, inputs)}, warmup=1, repeats=args.repeats
        )
        row = ratio_row(name, times["compiled"], times["eager"], compile_s=round(compile_seconds))
        row = {
            ("compiled (ms)" if k == "ours (ms)" else "eager (ms)" if k == "transformers (ms)" else k): v
            for k, v in row.items()
        }
        rows.append(row)
        print(row, flush=True)
    notes = [
        f"training step (forward + backward + AdamW), batch {BATCH} × {LENGTH}, {threads} thread(s), Inductor "
        "(torch.compile default); speed-up = eager median / compiled median; compile_s = first compiled step.",
        "compiled and eager start from the same weights; the compiled loss is checked against eager before timing.",
    ]
    command = " ".join(["python benchmarks/bench_compile.py", *(argv if argv is not None else sys.argv[1:])])
    write_table("compile", f"torch.compile vs eager, training step (hf_scratch models)\n\n`{command}`", rows, notes)
    bar_plot("compile", rows, ylabel="speed-up (eager / compiled)", title="torch.compile training step")


if __name__ == "__main__":
    main()

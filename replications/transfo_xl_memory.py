"""Dai et al. 2019 (Transformer-XL), Table 6 and Table 9: segment-level memory with relative positions.

The claims, at laptop scale on Shakespeare:

(a) Table 6: at the same segment length, a model trained and evaluated with the memory of the previous segment has
    a lower validation perplexity than the same model without memory;
(b) Table 6 ("attn len" at evaluation > at training): with relative positions the evaluation can use a longer memory
    than training did, and perplexity keeps falling as the evaluation memory grows; absolute positions cannot.
    ``ScratchTransfoXLConfig`` has no absolute-position option, so the absolute-position side is our GPT-1 (learned
    absolute positions) trained on blocks as long as Transformer-XL's training attention (segment + memory) and
    evaluated with a longer recomputed prefix — the "vanilla" model of the paper, not an XL with absolute encodings;
(c) Table 9: evaluating with the memory is faster than recomputing the whole context for every segment, and the
    speed-up grows with the attention length.

Training goes through ``training/run_clm.py`` (Transformer-XL via its ``TransfoXLTrainer``, which streams the corpus
in order and carries the memory); perplexity at several memory lengths is measured here by running each saved model
over the validation text segment by segment with ``mems`` (an inference loop).

    python replications/transfo_xl_memory.py --quick     # CI smoke test: embedded text, a few steps, 1–2 seeds
    python replications/transfo_xl_memory.py             # reported: ../shared/data/shakespeare, 3 seeds, then
                                                         # 2 more per round while a part is undecided, up to 12

Runs single-threaded unless ``--threads`` says otherwise (the machine is shared; one thread is also the fastest for
these tiny models).
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from replications.common import (  # noqa: E402
    ROOT,
    ClaimReport,
    above,
    above_value,
    fmt,
    in_processes,
    machine_note,
    mean_std,
    parse_args,
    plot_loss_curves,
    run_training_script,
    shakespeare_folder,
    torch_threads,
    until_decided,
    weakest_step,
)

SEGMENT = 32  # tokens per segment (Transformer-XL) — the training and evaluation unit of every model here
TRAIN_MEMORY = 32  # Transformer-XL's training memory: attention length 64 = the GPT's training block
GPT_BLOCK = SEGMENT + TRAIN_MEMORY  # GPT_BLOCK - 1: the longest distance XL sees in training (evaluation clamp_len)
TRAIN_WORKS = ("hamlet", "macbeth", "othello", "lear", "romeo_and_juliet", "julius_caesar")
VALIDATION_WORK, VALIDATION_CHARS = "tempest", 20_000
MAX_SEEDS = 12  # the compute budget: about 1.6 min per seed (4.8 min for 3 seeds, shared machine), ≈ 19 min in all


def setting(args):
    """Steps, batch sizes, evaluation contexts and attention lengths of the timing, quick or full."""
    if args.quick:
        return dict(steps=8, batch=8, eval_every=8, contexts=(0, 32, 96), attention=(64, 128), repeats=3)
    return dict(
        steps=3000,
        batch=16,
        eval_every=1000,
        contexts=(0, 32, 96, 224, 480),
        attention=(64, 128, 256, 512, 1024),
        repeats=7,
    )


# ----------------------------------------------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------------------------------------------


def corpus(args, folder: Path) -> tuple[Path, Path]:
    """train/validation text: the embedded excerpt (--quick) or six plays and the opening of The Tempest."""
    if args.quick:
        data = ROOT / "training" / "data" / "shakespeare"
        return data / "train.txt", data / "validation.txt"
    works = shakespeare_folder()
    train = "\n".join((works / f"{work}.txt").read_text(encoding="utf-8").strip() for work in TRAIN_WORKS)
    validation = (works / f"{VALIDATION_WORK}.txt").read_text(encoding="utf-8")
    validation = validation[: validation.index("\n\n", VALIDATION_CHARS)].strip()
    paths = folder / "train.txt", folder / "validation.txt"
    paths[0].write_text(train + "\n", encoding="utf-8")
    paths[1].write_text(validation + "\n", encoding="utf-8")
    return paths


def token_stream(tokenizer, path: Path) -> torch.Tensor:
    """The validation text as run_clm reads it: every line + newline, concatenated, no special tokens."""
    lines = path.read_text(encoding="utf-8").splitlines()
    ids = tokenizer([line + "\n" for line in lines], add_special_tokens=False)["input_ids"]
    return torch.tensor([token for line in ids for token in line], dtype=torch.long)


# ----------------------------------------------------------------------------------------------------------------
# Runs (all through training/run_clm.py)
# ----------------------------------------------------------------------------------------------------------------


def run_arguments(kind: str, train: Path, validation: Path, plan: dict, tokenizer_dir: str | None) -> list[str]:
    """run_clm flags of the three models: Transformer-XL with memory, without memory, GPT (absolute positions)."""
    common = [
        "--train_file",
        str(train),
        "--validation_file",
        str(validation),
        "--model_size",
        "tiny",
        "--max_steps",
        str(plan["steps"]),
        "--learning_rate",
        "2e-3",
        "--warmup_steps",
        str(plan["steps"] // 10),
        "--lr_scheduler_type",
        "cosine",
        "--logging_steps",
        str(max(1, plan["eval_every"] // 2)),
        "--eval_strategy",
        "steps",
        "--eval_steps",
        str(plan["eval_every"]),
        "--per_device_eval_batch_size",
        str(plan["batch"]),
    ]
    # one token per character (nanoGPT's Shakespeare setting): tiny models learn to use context within a few hundred
    # steps; every model reads the same tokens (the first run's tokenizer), so perplexities compare
    common += ["--tokenizer_type", "char"] if tokenizer_dir is None else ["--tokenizer_name", tokenizer_dir]
    if kind == "gpt":  # one block = one XL segment + its training memory; half the rows, the same tokens per step
        return common + [
            "--model_type",
            "scratch-gpt",
            "--max_seq_length",
            str(GPT_BLOCK),
            "--per_device_train_batch_size",
            str(plan["batch"] // 2),
        ]
    # trained as the paper's scripts train: same_length off (it is an evaluation setting)
    memory = f"mem_len={TRAIN_MEMORY if kind == 'xl_memory' else 0},same_length=false"
    return common + [
        "--model_type",
        "scratch-transfo-xl",
        "--max_seq_length",
        str(SEGMENT),
        "--config_overrides",
        memory,
        "--per_device_train_batch_size",
        str(plan["batch"]),
    ]


MODELS = {
    "xl_memory": f"Transformer-XL, trained with memory {TRAIN_MEMORY}",
    "xl_no_memory": "Transformer-XL, trained without memory",
    "gpt": f"GPT (learned absolute positions), trained on blocks of {GPT_BLOCK}",
}


# ----------------------------------------------------------------------------------------------------------------
# Evaluation: perplexity with a given context in front of each segment (inference loops, no training)
# ----------------------------------------------------------------------------------------------------------------


def streams(tokens: torch.Tensor, rows: int) -> torch.Tensor:
    """(rows, length) parallel streams, length a multiple of SEGMENT (what TransfoXLTrainer's sampler does)."""
    length = tokens.numel() // (rows * SEGMENT) * SEGMENT
    if length == 0:
        raise ValueError(
            f"{tokens.numel()} validation tokens cannot fill {rows} streams of one {SEGMENT}-token segment."
        )
    return tokens[: rows * length].view(rows, length)


@torch.no_grad()
def xl_perplexity(model, rows: torch.Tensor, memory: int) -> float:
    """Transformer-XL over consecutive segments carrying ``mems`` of ``memory`` states per layer (read from
    ``config.mem_len`` at every call), with the mask it trained with (``same_length`` off: query i of a segment sees
    the memory and the segment up to i, so at the training memory this is the training condition) and ``clamp_len``
    = GPT_BLOCK - 1, the longest distance seen in training (longer ones share its encoding, as the paper's scripts
    clamp a memory longer than training's). Scores tokens 1…SEGMENT-1 of every segment (the first has no prediction
    without memory)."""
    model.config.mem_len, model.config.same_length, model.config.clamp_len = memory, False, GPT_BLOCK - 1
    mems, total, count = None, 0.0, 0
    for start in range(0, rows.shape[1], SEGMENT):
        segment = rows[:, start : start + SEGMENT]
        out = model(input_ids=segment, labels=segment, mems=mems)
        mems = out.mems
        total += out.loss.item() * segment.shape[0] * (SEGMENT - 1)
        count += segment.shape[0] * (SEGMENT - 1)
    return math.exp(total / count)


@torch.no_grad()
def gpt_perplexity(model, rows: torch.Tensor, context: int) -> float:
    """GPT over the same segments, each read with the ``context`` tokens before it recomputed in front (positions
    0 … context + SEGMENT - 1); scores the same tokens as ``xl_perplexity``."""
    total, count = 0.0, 0
    for start in range(0, rows.shape[1], SEGMENT):
        first = max(0, start - context)
        window = rows[:, first : start + SEGMENT]
        labels = torch.full_like(window, -100)
        labels[:, start - first + 1 :] = window[:, start - first + 1 :]
        out = model(input_ids=window, labels=labels)
        total += out.loss.item() * window.shape[0] * (SEGMENT - 1)
        count += window.shape[0] * (SEGMENT - 1)
    return math.exp(total / count)


@torch.no_grad()
def seconds_per_segment(model, rows: torch.Tensor, attention: int, repeats: int) -> tuple[float, float]:
    """Median seconds per segment at attention length ``attention`` = memory + segment: (with the memory,
    recomputing the whole window without memory). Same model, same mask (each query sees ``attention - SEGMENT``
    keys), batch = the validation streams."""
    model.config.mem_len, model.config.same_length = attention - SEGMENT, True
    needed = attention + repeats * SEGMENT
    if rows.shape[1] < needed:
        rows = rows.repeat(1, needed // rows.shape[1] + 1)
    mems = None
    for start in range(0, attention - SEGMENT, SEGMENT):  # fill the memory
        mems = model(input_ids=rows[:, start : start + SEGMENT], mems=mems).mems
    with_memory, recomputed = [], []
    for step in range(repeats):
        start = attention - SEGMENT + step * SEGMENT
        began = time.perf_counter()
        mems = model(input_ids=rows[:, start : start + SEGMENT], mems=mems).mems
        with_memory.append(time.perf_counter() - began)
        began = time.perf_counter()
        model(input_ids=rows[:, start + SEGMENT - attention : start + SEGMENT])
        recomputed.append(time.perf_counter() - began)
    median = lambda values: sorted(values)[len(values) // 2]  # noqa: E731
    return median(with_memory), median(recomputed)


# ----------------------------------------------------------------------------------------------------------------
# The script
# ----------------------------------------------------------------------------------------------------------------


def main(argv=None) -> Path:
    args = parse_args(
        "Transformer-XL memory and relative positions (Dai et al. 2019, Tables 6 and 9)", argv, max_seeds=MAX_SEEDS
    )
    with torch_threads(args):  # one thread unless --threads says otherwise; restored on exit
        return replicate(args)


def replicate(args) -> Path:
    began, load = time.perf_counter(), os.getloadavg()[0]
    plan = setting(args)
    perplexity = {kind: {c: [] for c in plan["contexts"]} for kind in MODELS}  # kind → context → one per seed
    first_runs, speed = {}, {a: [] for a in plan["attention"]}
    with tempfile.TemporaryDirectory() as scratch:  # open across seed rounds: later rounds reuse the tokenizer
        scratch = Path(scratch)
        train, validation = corpus(args, scratch)

        def run(seeds: list[int]) -> None:
            train_and_measure(args, plan, scratch, train, validation, seeds, perplexity, first_runs, speed)

        page = until_decided(args, run, lambda: judge(args, plan, perplexity, speed))
    page.notes.append(machine_note(load) + ".")
    plots(page, args, plan, perplexity, first_runs, speed_ups(speed, plan["attention"]))
    return page.write(args, time.perf_counter() - began)


def train_and_measure(args, plan, scratch: Path, train, validation, seeds, perplexity, first_runs, speed) -> None:
    """Train the three models on ``seeds`` and add their perplexities (and the memory model's timings) to what the
    script keeps. The very first run trains the character tokenizer that every later run, in this round or a later
    one, reuses (so perplexities compare); the others train side by side; evaluation and timing run here
    afterwards, alone."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    runs = [(kind, seed) for seed in seeds for kind in MODELS]
    tokenizer_dir = scratch / f"xl_memory-{args.first_seed}"  # the very first run's folder
    results = {}
    if not tokenizer_dir.exists():
        tokenizer_run = run_arguments("xl_memory", train, validation, plan, None)
        results[runs[0]] = run_training_script("run_clm", tokenizer_run, tokenizer_dir, seeds[0])
    todo = [run for run in runs if run not in results]
    jobs = [
        ("run_clm", run_arguments(kind, train, validation, plan, str(tokenizer_dir)), scratch / f"{kind}-{seed}", seed)
        for kind, seed in todo
    ]
    results.update(zip(todo, in_processes(run_training_script, jobs, args.processes, args.threads)))
    rows = streams(token_stream(AutoTokenizer.from_pretrained(tokenizer_dir), validation), plan["batch"] // 2)
    for seed in seeds:
        for kind in MODELS:
            first_runs.setdefault(kind, results[kind, seed])
            model = AutoModelForCausalLM.from_pretrained(scratch / f"{kind}-{seed}").eval()
            for context in plan["contexts"]:
                measure = gpt_perplexity if kind == "gpt" else xl_perplexity
                perplexity[kind][context].append(measure(model, rows, context))
            if kind == "xl_memory":
                for attention in plan["attention"]:
                    memory_time, recompute_time = seconds_per_segment(model, rows, attention, plan["repeats"])
                    speed[attention].append((memory_time, recompute_time))


def judge(args, plan, perplexity, speed) -> ClaimReport:
    """The page from every seed run so far (rows, verdicts, notes; the pictures are drawn once, after the rounds)."""
    page = memory_page(args, plan)
    for kind, label in MODELS.items():
        page.add_row(label, *(fmt(perplexity[kind][c]) for c in plan["contexts"]))
    add_context_notes(page)
    memory_verdict(page, perplexity)
    longer_context_verdicts(page, perplexity, plan["contexts"])
    speed_verdict(page, speed, plan["attention"])
    add_history_note(page)
    return page


def memory_page(args, plan) -> ClaimReport:
    contexts = plan["contexts"]
    return ClaimReport(
        name="transfo_xl_memory",
        title="Dai et al. 2019, Tables 6 and 9: Transformer-XL's memory lowers perplexity, reaches past its training "
        "length, and is faster than recomputation",
        claim="With the same segment length, recurrence (memory of the previous segment) lowers perplexity; relative "
        "positional encodings let the evaluation use a longer memory than training (perplexity falls further), "
        "which absolute encodings cannot; evaluating with the memory is up to 1,800× faster than the vanilla "
        "model's recomputation, more so for longer attention.",
        setting=f"run_clm.py, `--model_size tiny` (hidden 64, 2 layers, 2 heads), characters (one tokenizer for "
        f"all), {plan['steps']} steps of {plan['batch'] * SEGMENT} tokens, lr 2e-3 cosine. "
        f"Transformer-XL: segments of {SEGMENT} tokens, memory {TRAIN_MEMORY} (or none). GPT: blocks of "
        f"{GPT_BLOCK} tokens, 512 learned positions. "
        + (
            "Data: the embedded Hamlet / Macbeth excerpts (training/data/shakespeare)."
            if args.quick
            else f"Data: {', '.join(TRAIN_WORKS)} (train), the first {VALIDATION_CHARS // 1000}k characters of "
            f"The Tempest (validation), from ../shared/data/shakespeare."
        )
        + f" Perplexity: validation text in {plan['batch'] // 2} parallel streams, segment by segment; every "
        f"context scores the same tokens (positions 1–{SEGMENT - 1} of every segment).",
        header=["model"] + [f"ppl, context {c}" for c in contexts],
    )


def add_context_notes(page: ClaimReport) -> None:
    page.notes.append(
        f"Context = tokens before each segment: Transformer-XL's memory `mems` (trained and "
        f"evaluated without `same_length`, so query i of a segment sees the memory and the segment up to "
        f"i; evaluated with `clamp_len` = {GPT_BLOCK - 1}, the longest distance seen in training), the GPT's "
        f"recomputed prefix. Trained with: XL memory {TRAIN_MEMORY} / 0; GPT prefixes up to {GPT_BLOCK - SEGMENT}. "
        "Contexts beyond that are longer than training."
    )
    page.notes.append(
        "Transformer-XL here has no absolute-position option (ScratchTransfoXLConfig has none), so "
        "'absolute positions' is the GPT-1 family (learned absolute positions) at the same training "
        "attention length, i.e. the paper's vanilla model rather than XL with absolute encodings."
    )


def memory_verdict(page: ClaimReport, perplexity: dict) -> None:
    """(a) memory vs none at the same segment length: each model in its training condition, paired by seed; the
    effect is perplexity without memory − with it (positive: the memory lowers perplexity)."""
    with_memory, without = perplexity["xl_memory"][TRAIN_MEMORY], perplexity["xl_no_memory"][0]
    lower = sum(a < b for a, b in zip(with_memory, without))
    page.verdict(
        "(a) memory lowers perplexity at the same segment length",
        above(without, with_memory),
        f"ppl without − with memory; {fmt(with_memory)} with memory {TRAIN_MEMORY} vs {fmt(without)} without; "
        f"lower in {lower}/{len(with_memory)} seeds",
        paper="Table 6 (WikiText-103 ablation): at the same encoding and loss, the models with recurrence have a "
        "lower perplexity than those without",
    )


def longer_context_verdicts(page: ClaimReport, perplexity: dict, contexts: list[int]) -> None:
    """(b) longer evaluation memory than training: XL's perplexity keeps falling (every step of the curve, paired
    by seed), GPT's rises above its value at the training prefix (at every longer prefix)."""
    longer = [c for c in contexts if c > TRAIN_MEMORY]
    xl = [TRAIN_MEMORY] + longer
    xl_mean = [mean_std(perplexity["xl_memory"][c])[0] for c in xl]
    steps = [above(perplexity["xl_memory"][a], perplexity["xl_memory"][b]) for a, b in zip(xl, xl[1:])]
    outcome, interval, index = weakest_step(steps)
    page.verdict(
        "(b) relative positions: perplexity falls as the evaluation memory grows past training's",
        outcome,
        "XL (memory-trained) at contexts "
        + ", ".join(map(str, xl))
        + ": "
        + " → ".join(f"{p:.2f}" for p in xl_mean)
        + f"; every step must fall (ppl at the shorter − at the longer context); shown: {xl[index]} → "
        f"{xl[index + 1]}, the deciding step",
        paper="Table 6: with recurrence and the relative encoding, evaluating with a longer attention than "
        "training ('PPL best' at its 'Attn Len') gives a lower perplexity than at training's ('PPL init')",
        interval=interval,
    )
    trained = GPT_BLOCK - SEGMENT
    gpt_mean = mean_std(perplexity["gpt"][trained])[0]
    steps = [above(perplexity["gpt"][c], perplexity["gpt"][trained]) for c in longer]
    outcome, interval, index = weakest_step(steps)
    page.verdict(
        "(b) absolute positions cannot: the GPT gets worse with a prefix longer than its training blocks",
        outcome,
        f"GPT at context {trained}: {gpt_mean:.2f}; at "
        + ", ".join(f"{c}: {mean_std(perplexity['gpt'][c])[0]:.2f}" for c in longer)
        + f"; every longer prefix must be worse (ppl at it − at {trained}); shown: {longer[index]}, the deciding one",
        paper="Table 6: the absolute encodings (Vaswani et al., Al-Rfou et al.) gain nothing from a longer "
        "evaluation attention ('PPL best' = 'PPL init')",
        interval=interval,
    )


def speed_ups(speed: dict, attention: list[int]) -> dict:
    """Attention length → recompute / memory seconds per segment, one per seed."""
    return {a: [recompute / memory for memory, recompute in speed[a]] for a in attention}


def speed_verdict(page: ClaimReport, speed: dict, attention: list[int]) -> None:
    """(c) memory vs recomputation: a speed-up above 1 at every attention length (one-sample), larger at the longest
    than at the shortest (paired by seed)."""
    speedups = speed_ups(speed, attention)
    steps = [above_value(speedups[a], 1.0) for a in attention] + [
        above(speedups[attention[-1]], speedups[attention[0]])
    ]
    outcome, interval, index = weakest_step(steps)
    shown = (
        f"speed-up − 1 at attention {attention[index]}"
        if index < len(attention)
        else f"speed-up at {attention[-1]} − at {attention[0]}"
    )
    page.verdict(
        "(c) memory is faster than recomputation, more so as the attention length grows",
        outcome,
        "speed-up per segment at attention "
        + ", ".join(f"{a}: {mean_std(speedups[a])[0]:.1f}×" for a in attention)
        + f"; every speed-up must exceed 1 and the longest's the shortest's; shown: {shown}, the deciding one",
        paper="Table 9: the vanilla model's evaluation is slower than Transformer-XL's, more so for longer "
        "attention, up to 1,800+× (abstract)",
        interval=interval,
    )
    page.notes.append(
        "Speed: median seconds per segment of the memory-trained XL over the validation streams, with "
        "the memory (segment only) vs recomputing the whole window of `attention` tokens (memory + "
        "segment) without memory, same mask; speed-up mean ± std over seeds: "
        + "; ".join(f"{a}: {fmt(speedups[a], 1)}×" for a in attention)
        + f". The paper's vanilla model slides its window by one token per prediction, which would cost "
        f"about {SEGMENT}× more again than recomputing once per segment (not measured here)."
    )


def add_history_note(page: ClaimReport) -> None:
    page.notes.append(
        "Changed after seeing results (one seed each, not tuned further): (1) byte-level BPE (2,000 "
        "tokens, 400 steps) left every model near unigram level (perplexity 290–400) and the memory model "
        "worse than the one without memory, so the tokens became characters; (2) with characters, training "
        "with `same_length` and evaluating longer memories without `clamp_len` gave 12.43 (memory 32) → "
        "13.19 → 14.35 → 15.95 (memory 480), so training now leaves `same_length` off and evaluation "
        "clamps distances at the longest one trained on (the recipe of the paper's scripts: same_length "
        "and clamp_len are evaluation settings). Steps went from 400 to 300 for time. (3) A full 3-seed run evaluated "
        "those models with `same_length` on, a mask they never trained with: memory-trained XL 13.44 ± "
        "0.32 at memory 32 vs 13.00 ± 0.43 without memory, 13.44 → 13.96 from memory 32 to 480. The "
        "evaluation now uses the training mask (same_length off) at every memory length; that table "
        "was the rerun with only that change. (4) Its models were at the level of a bigram model: "
        "character perplexity 13–15 on the validation text, where add-one smoothed character bigram "
        "counts of the training works give 13.4 (unigram 29.6) — no model used more than the previous "
        "character, so memory could not matter. This table: 3,000 steps instead of 300 (warm-up and "
        "evaluation interval scaled with them), nothing else; the runs train side by side."
    )
    page.notes.append(
        "Trials for part (b) after this table, not adopted (seed 0, the memory-trained XL only; perplexity at "
        "contexts 32 → 64 → 96 → 224 → 480, distances clamped at the longest trained one, then not clamped): "
        "10,000 steps: 7.54 → 7.56 → 7.58 → 7.65 → 7.75, unclamped 7.54 → 7.56 → 7.57 → 7.60 → 7.64; "
        "training memory 96 (6,000 steps): 7.90 → 7.89 → 7.89 → 7.91 → 7.94, unclamped 7.90 → 7.89 → 7.89 → "
        "7.90 → 7.93; byte-level BPE of 1,000 tokens (6,000 steps): 72.9 → 73.1 → 73.5 → 74.1 → 74.7, unclamped "
        "72.9 → 73.1 → 73.4 → 73.8 → 74.6. Longer training lowers perplexity at every context, but none of these "
        "2-layer models gains from context past what training used: the longer memory only adds states it never "
        "learned to use. The paper's gain from a longer evaluation attention (Table 6, 'PPL best') is that of "
        "16-layer models on WikiText-103. The setting above was kept, so (b) stays as the table says."
    )
    page.notes.append(
        "The verdict rule changed in this run (issue 50): 95 % t intervals paired by seed, three outcomes (holds, "
        "does not hold, undecided), and more seeds while a part is undecided, up to the budget of "
        f"{MAX_SEEDS} seeds per setting (≈ 1.6 min per seed on this machine, ≈ {MAX_SEEDS * 1.6:.0f} min in all). The "
        "earlier notes' 'held / not held' (and the old table's yes / no) used the old rules: a mean below another, "
        "lower in every seed, or a curve of means falling at every step."
    )


def plots(page, args, plan, perplexity, first_runs, speedups) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.4, 4.2))
    for kind, label in MODELS.items():
        stats = [mean_std(perplexity[kind][c]) for c in plan["contexts"]]
        axis.errorbar(
            plan["contexts"], [m for m, _ in stats], yerr=[s for _, s in stats], marker="o", capsize=3, label=label
        )
    axis.axvline(TRAIN_MEMORY, color="grey", linestyle=":", label="training context (XL memory, GPT prefix)")
    axis.set(
        xscale="symlog",
        xlabel="context before each segment (tokens)",
        ylabel="validation perplexity",
        title=f"Perplexity vs evaluation context ({len(args.seed_list)} seed(s))",
    )
    axis.legend(fontsize=7)
    page.save_figure(figure, "perplexity", args.output_dir)

    figure, axis = plt.subplots(figsize=(6.4, 4.2))
    attention = list(plan["attention"])
    stats = [mean_std(speedups[a]) for a in attention]
    axis.errorbar(attention, [m for m, _ in stats], yerr=[s for _, s in stats], marker="o", capsize=3)
    axis.set(
        xscale="log",
        xlabel="attention length (memory + segment)",
        ylabel="speed-up (recompute / memory)",
        title="Evaluation speed-up of the memory (per segment)",
    )
    page.save_figure(figure, "speedup", args.output_dir)

    plot_loss_curves(
        page,
        {f"{label} (seed {args.first_seed})": first_runs[kind] for kind, label in MODELS.items()},
        "curves",
        args.output_dir,
    )


if __name__ == "__main__":
    main()

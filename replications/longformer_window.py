"""Beltagy et al. 2020 (Longformer), §3.1, §4 (Table 2) and §6: on a long document, what the classification token
can reach decides the accuracy; a wider window, dilation or global attention on the classification token reach
further, at a memory cost linear in the sequence length.

The task, built here from the corpus (deterministically): which play (Hamlet, Macbeth, Romeo and Juliet) a document
comes from, where each document opens with ~150 characters of *filler* from other plays (independent of the label)
and only then continues with ~850 characters of speeches from the labelled play. The evidence therefore starts
~40 tokens after the classification token <s>. Without global attention, <s> at the top of an L-layer model sees
Σ_l d_l·w_l/2 tokens to its right (window w_l, dilation d_l); with global attention on <s> it sees everything.

Measured here:

1. accuracy (fine-tuning from scratch with ``training/run_classification.py --model_type scratch-longformer``) for
   windows 16 / 64 / 128 without global attention, window 16 with dilation (1, 8), and window 16 with global
   attention on <s> (``--global_attention cls``, the head's default; the runs without it give
   ``--global_attention none``: every batch carries ``global_attention_mask = 0``);
2. memory: the bytes of activations saved for the backward pass by one forward, against the sequence length, for a
   fixed window (w = 64, with and without global <s>) and for a window covering the whole sequence (full attention),
   counted with ``torch.autograd.graph.saved_tensors_hooks`` (every distinct storage once, the weights excluded);
3. receptive field (Table 2 style): Σ_l d_l·w_l/2 computed, and measured as the farthest input position whose
   gradient of <s>'s output is non-zero (plus the share of positions in between that are reached), on untrained
   models.

    python replications/longformer_window.py --quick     # CI smoke test: embedded excerpts, a few steps, 1–2 seeds
    python replications/longformer_window.py             # reported: ../shared/data/shakespeare, 3 seeds, then
                                                         # 2 more per round while a part is undecided, up to 9

Runs single-threaded unless ``--threads`` says otherwise; the full setting trains two runs side by side
(``--processes``).
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from replications.common import (  # noqa: E402
    DOES_NOT_HOLD,
    HOLDS,
    ROOT,
    ClaimReport,
    at_chance_note,
    fmt,
    in_processes,
    machine_note,
    majority_rate,
    mean_std,
    parse_args,
    plot_loss_curves,
    run_training_script,
    shakespeare_folder,
    shown_above,
    torch_threads,
    until_decided,
    weakest_step,
)

LABEL_PLAYS = ("hamlet", "macbeth", "romeo_and_juliet")
FILLER_WORKS = ("tempest", "othello", "lear")  # the other plays of training/data/documents
FILLER_CHARS, EVIDENCE_CHARS, MAX_TOKENS = 150, 850, 256
MAX_SEEDS = 9  # the compute budget: about 5 min per seed (15.4 min for 3 seeds, shared machine), ≈ 46 min in all
# (label, attention_window, attention_dilation, global attention on <s>)
SETTINGS = (
    ("w=16", 16, 1, False),
    ("w=64", 64, 1, False),
    ("w=128", 128, 1, False),
    ("w=16, dilation (1, 8)", 16, [1, 8], False),
    ("w=16 + global <s>", 16, 1, True),
)


def setting(args):
    if args.quick:
        return dict(
            steps=4,
            batch=8,
            train_docs=48,
            validation_docs=24,
            eval_every=4,
            lengths=(256, 512),
            full_lengths=(256, 512),
            rf_length=512,
        )
    return dict(
        steps=960,
        batch=8,
        train_docs=1920,
        validation_docs=240,
        eval_every=240,
        lengths=(512, 1024, 2048, 4096),
        full_lengths=(512, 1024, 2048),
        rf_length=512,
    )


# ----------------------------------------------------------------------------------------------------------------
# The task: filler first, evidence later
# ----------------------------------------------------------------------------------------------------------------


def speeches(text: str) -> list[str]:
    """The speeches of a play as single lines: blocks 'HEADING.\\nline\\nline' (any case of heading; the heading
    itself is dropped, so its spelling cannot give the play away), stage directions skipped."""
    result = []
    for block in re.split(r"\n\s*\n", text):
        lines = [line.strip() for line in block.strip().splitlines() if line.strip()]
        if len(lines) >= 2 and re.fullmatch(r"[A-Za-z][A-Za-z .']{0,30}\.", lines[0]):
            speech = " ".join(line for line in lines[1:] if not line.startswith("["))
            if len(speech) >= 20:
                result.append(speech)
    return result


def sources(args) -> dict[str, str]:
    """Work name → text: excerpts embedded in training/data/documents (--quick) or the whole plays."""
    if args.quick:
        parts = (ROOT / "training" / "data" / "documents" / "train.txt").read_text(encoding="utf-8").split("\n=====\n")
        return dict(zip(LABEL_PLAYS + FILLER_WORKS, parts))  # the order build_data.py writes them in
    folder = shakespeare_folder()
    return {work: (folder / f"{work}.txt").read_text(encoding="utf-8") for work in LABEL_PLAYS + FILLER_WORKS}


def take(rng: random.Random, pool: list[str], chars: int) -> str:
    """Consecutive speeches from a random place in ``pool``, cut to ``chars`` characters at a word boundary."""
    start, text = rng.randrange(len(pool)), ""
    while len(text) < chars:
        text += pool[start % len(pool)] + " "
        start += 1
    return text[:chars].rsplit(" ", 1)[0]


def write_task(args, plan, folder: Path) -> tuple[Path, Path]:
    """{train,validation}.jsonl of {"text", "label", "evidence_char"}: filler from FILLER_WORKS, then the labelled
    play. Each work's speeches are split 80/20 in order, so validation documents are built from passages never seen
    in training."""
    texts = {work: speeches(text) for work, text in sources(args).items()}
    paths = []
    for split, count in (("train", plan["train_docs"]), ("validation", plan["validation_docs"])):
        part = {work: (s[: len(s) * 4 // 5] if split == "train" else s[len(s) * 4 // 5 :]) for work, s in texts.items()}
        filler = [speech for work in FILLER_WORKS for speech in part[work]]
        rng = random.Random(f"{split}-0")
        rows = []
        for index in range(count):
            label = LABEL_PLAYS[index % len(LABEL_PLAYS)]
            lead = take(rng, filler, FILLER_CHARS)
            rows.append(
                {
                    "text": lead + " " + take(rng, part[label], EVIDENCE_CHARS),
                    "label": label,
                    "evidence_char": len(lead) + 1,
                }
            )
        rng.shuffle(rows)
        paths.append(folder / f"{split}.jsonl")
        paths[-1].write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return paths[0], paths[1]


# ----------------------------------------------------------------------------------------------------------------
# Fine-tuning (training/run_classification.py)
# ----------------------------------------------------------------------------------------------------------------


def run_arguments(window, dilation, global_cls: bool, train: Path, validation: Path, plan: dict) -> list[str]:
    overrides = (
        f"attention_window={window},attention_dilation={json.dumps(dilation).replace(' ', '')},"
        f"max_position_embeddings={MAX_TOKENS + 2}"
    )
    return [
        "--model_type",
        "scratch-longformer",
        "--model_size",
        "tiny",
        "--config_overrides",
        overrides,
        "--global_attention",
        "cls" if global_cls else "none",
        "--attn_implementation",
        "eager",
        "--train_file",
        str(train),
        "--validation_file",
        str(validation),
        "--max_seq_length",
        str(MAX_TOKENS),
        "--max_steps",
        str(plan["steps"]),
        "--learning_rate",
        "1e-3",
        "--warmup_steps",
        str(plan["steps"] // 10),
        "--lr_scheduler_type",
        "cosine",
        "--per_device_train_batch_size",
        str(plan["batch"]),
        "--per_device_eval_batch_size",
        "32",
        "--logging_steps",
        str(max(1, plan["eval_every"] // 2)),
        "--eval_strategy",
        "steps",
        "--eval_steps",
        str(plan["eval_every"]),
    ]


def evidence_start(output_dir: Path, validation: Path) -> float:
    """Mean token position (counting <s>) where the labelled play's text begins, with the run's tokenizer."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(output_dir)
    rows = [json.loads(line) for line in validation.read_text(encoding="utf-8").splitlines()]
    starts = [
        1 + len(tokenizer(row["text"][: row["evidence_char"]], add_special_tokens=False)["input_ids"]) for row in rows
    ]
    return sum(starts) / len(starts)


# ----------------------------------------------------------------------------------------------------------------
# Memory against sequence length, receptive field (untrained models; no training)
# ----------------------------------------------------------------------------------------------------------------


def tiny_model(window, dilation, layers=2, positions=4098):
    from hf_scratch import ScratchLongformerConfig, ScratchLongformerForSequenceClassification

    config = ScratchLongformerConfig(
        vocab_size=2000,
        hidden_size=64,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=128,
        attention_window=window,
        attention_dilation=dilation,
        max_position_embeddings=positions,
        num_labels=3,
    )
    torch.manual_seed(0)
    return ScratchLongformerForSequenceClassification._from_config(config, attn_implementation="eager")


def activation_bytes(model, length: int, global_cls: bool) -> int:
    """Bytes of the tensors one training forward saves for backward (each storage once, parameters excluded)."""
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in weights:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    ids = torch.randint(5, 2000, (1, length))
    extra = {} if global_cls else {"global_attention_mask": torch.zeros_like(ids)}
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        model(input_ids=ids, labels=torch.tensor([0]), **extra)
    return sum(saved.values())


def slope(lengths, values) -> float:
    """Exponent k of values ∝ length^k (least squares in log-log)."""
    xs, ys = [math.log(x) for x in lengths], [math.log(y) for y in values]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


RECEPTIVE_FIELDS = (  # (window, dilation, layers)
    (16, 1, 2),
    (64, 1, 2),
    (256, 1, 2),
    (16, [1, 8], 2),
    (16, 8, 2),
    (16, 1, 4),
    (16, [1, 2, 4, 8], 4),
)


def receptive_field(window, dilation, layers, length: int) -> tuple[int, float]:
    """(farthest position whose embedding changes <s>'s output, share of positions 0…farthest that do), measured
    by the gradient of <s>'s last hidden state with respect to the input embeddings; no global token."""
    model = tiny_model(window, dilation, layers).eval()
    embeddings = torch.randn(1, length, 64, requires_grad=True)
    hidden = model.model(inputs_embeds=embeddings, global_attention_mask=torch.zeros(1, length, dtype=torch.long))
    # a random direction: the plain sum of a LayerNorm output (the last sublayer) is constant, its gradient zero
    (hidden.last_hidden_state[0, 0] @ torch.randn(64)).backward()
    reached = (embeddings.grad[0].abs().sum(-1) > 0).nonzero().flatten()
    farthest = int(reached.max())
    return farthest, len(reached) / (farthest + 1)


def computed_field(window, dilation, layers) -> int:
    dilations = dilation if isinstance(dilation, list) else [dilation] * layers
    return sum(d * window // 2 for d in dilations)


# ----------------------------------------------------------------------------------------------------------------
# The script
# ----------------------------------------------------------------------------------------------------------------


def main(argv=None) -> Path:
    args = parse_args(
        "Longformer window, dilation and global attention (Beltagy et al. 2020)", argv, max_seeds=MAX_SEEDS
    )
    with torch_threads(args):  # one thread unless --threads says otherwise; restored on exit
        return replicate(args)


def replicate(args) -> Path:
    began, load = time.perf_counter(), os.getloadavg()[0]
    plan = setting(args)
    accuracy = {label: [] for label, *_ in SETTINGS}  # validation accuracy in %, one per seed
    first_runs, start = {}, []
    memory = {
        name: [activation_bytes(tiny_model(*shape), n, global_cls) for n in lengths]
        for name, shape, global_cls, lengths in memory_settings(plan)
    }
    fields = [
        (w, d, layers, computed_field(w, d, layers), *receptive_field(w, d, layers, plan["rf_length"]))
        for w, d, layers in RECEPTIVE_FIELDS
    ]
    with tempfile.TemporaryDirectory() as scratch:  # the task's files, open across seed rounds
        train, validation = write_task(args, plan, Path(scratch))
        labels = [json.loads(line)["label"] for line in validation.read_text(encoding="utf-8").splitlines()]
        chance = 100 * majority_rate(labels)

        def run(seeds: list[int]) -> None:
            """Fine-tune every setting on ``seeds`` (two runs side by side) and add the accuracies."""
            jobs = [
                (
                    "run_classification",
                    run_arguments(window, dilation, global_cls, train, validation, plan),
                    Path(scratch) / f"setting{index}-seed{seed}",
                    seed,
                )
                for seed in seeds
                for index, (_, window, dilation, global_cls) in enumerate(SETTINGS)
            ]
            results = in_processes(run_training_script, jobs, args.processes, args.threads)
            for (label, *_), result in zip(SETTINGS * len(seeds), results):
                accuracy[label].append(100 * result["eval"]["eval_accuracy"])
                first_runs.setdefault(label, result)
            if not start:
                start.append(evidence_start(jobs[0][2], validation))

        page = until_decided(args, run, lambda: judge(args, plan, accuracy, chance, start[0], memory, fields))
    page.notes.append(machine_note(load) + ".")
    plots(page, args, plan, accuracy, reach_of_cls(), first_runs, memory, fields)
    return page.write(args, time.perf_counter() - began)


def memory_settings(plan):
    """(name, (window, dilation), global <s>, lengths) of the memory measurement."""
    return [("w=64", (64, 1), False, plan["lengths"]), ("w=64 + global <s>", (64, 1), True, plan["lengths"])] + [
        (f"full (w = n = {n})", (n, 1), False, (n,)) for n in plan["full_lengths"]
    ]


def reach_of_cls() -> dict[str, int]:
    """Setting → tokens to the right of <s> that it can reach: Σ_l d_l·w_l/2, or the whole document with global <s>."""
    return {
        label: MAX_TOKENS - 1 if global_cls else computed_field(window, dilation, 2)
        for label, window, dilation, global_cls in SETTINGS
    }


def judge(args, plan, accuracy, chance: float, start: float, memory: dict, fields) -> ClaimReport:
    """The page from every seed run so far (rows, verdicts, notes; the pictures are drawn once, after the rounds)."""
    page = window_page(args, plan, start)
    reach = reach_of_cls()
    for label, *_ in SETTINGS:
        page.add_row(label, "all" if reach[label] == MAX_TOKENS - 1 else reach[label], fmt(accuracy[label], 1))
    accuracy_verdicts(page, accuracy, chance)
    memory_and_receptive_field_verdicts(page, plan, memory, fields)
    add_method_notes(page, plan, memory)
    return page


def window_page(args, plan, start: float) -> ClaimReport:
    return ClaimReport(
        name="longformer_window",
        title="Beltagy et al. 2020, §4 and §6: on long documents, accuracy follows what the classification token can "
        "reach (window, dilation, global attention), at linear memory",
        claim="Longformer's attention is a sliding window (optionally dilated) plus global attention on task tokens "
        "such as the classification token; a wider receptive field and global attention improve long-document "
        "classification, while memory grows linearly with the sequence length (full attention: quadratically).",
        setting=f"run_classification.py `--model_type scratch-longformer --model_size tiny` (hidden 64, 2 layers, 2 "
        f"heads, WordPiece 2,000), from scratch, {plan['steps']} steps of {plan['batch']} documents, lr 1e-3 "
        f"cosine, eager kernel. Task (built by this script): which of {', '.join(LABEL_PLAYS)} a document comes "
        f"from; {plan['train_docs']} / {plan['validation_docs']} documents of {FILLER_CHARS} characters of "
        f"filler ({', '.join(FILLER_WORKS)}) then {EVIDENCE_CHARS} of the labelled play, ≤ {MAX_TOKENS} tokens; "
        f"the evidence begins at token {start:.1f} on average. Chance: 33.3 %. "
        + (
            "Data: the embedded excerpts of training/data/documents."
            if args.quick
            else "Data: whole plays from ../shared/data/shakespeare, split 80/20 in order."
        ),
        header=["attention of <s>", "reach of <s> (tokens)", "validation accuracy (%)"],
    )


def accuracy_verdicts(page: ClaimReport, accuracy: dict, chance: float) -> None:
    """Accuracy (points) against the window, global attention and dilation, paired by seed; a gain counts only when
    the better setting is itself above chance (``shown_above``)."""
    mean = {label: mean_std(values)[0] for label, values in accuracy.items()}
    windows = ["w=16", "w=64", "w=128"]
    steps = [shown_above(accuracy[b], accuracy[a], chance) for a, b in zip(windows, windows[1:])]
    outcome, interval, index = weakest_step(steps)
    page.verdict(
        "accuracy grows with the window",
        outcome,
        " → ".join(f"{w}: {mean[w]:.1f} %" for w in windows)
        + f"; every wider window must be more accurate (points); shown: {windows[index]} → {windows[index + 1]}, "
        "the deciding step",
        paper="Table 4 (text8 character-LM ablation): the window sizes across layers change BPC, growing windows "
        "from the lower to the upper layers did best; no accuracy-against-window table for classification",
        interval=interval,
    )
    page.verdict(
        "global attention on <s> beats the same window without it",
        shown_above(accuracy["w=16 + global <s>"], accuracy["w=16"], chance),
        f"accuracy with − without global <s> (points); w=16: {mean['w=16']:.1f} % → with global <s>: "
        f"{mean['w=16 + global <s>']:.1f} %",
        paper="Table 10 (WikiHop ablation): removing global attention lowers accuracy",
    )
    page.verdict(
        "dilation reaches the evidence at the cost of w=16",
        shown_above(accuracy["w=16, dilation (1, 8)"], accuracy["w=16"], chance),
        f"accuracy with − without dilation (points); w=16: {mean['w=16']:.1f} % → dilation (1, 8): "
        f"{mean['w=16, dilation (1, 8)']:.1f} %",
        paper="Table 4 (text8 ablation): dilation on 2 heads lowers BPC slightly against no dilation",
    )
    flat = at_chance_note(accuracy, lambda _: chance)
    if flat:
        page.notes.append(flat)


def memory_and_receptive_field_verdicts(page: ClaimReport, plan, memory: dict, fields) -> None:
    local = memory["w=64"]
    linear, full = (
        slope(plan["lengths"], local),
        slope(plan["full_lengths"], [memory[f"full (w = n = {n})"][0] for n in plan["full_lengths"]]),
    )
    page.verdict(
        "memory is linear in the sequence length at a fixed window (full attention: quadratic)",
        HOLDS if abs(linear - 1) < 0.15 and full > 1.6 else DOES_NOT_HOLD,
        f"activation bytes ∝ n^{linear:.2f} for w=64 (n = {', '.join(map(str, plan['lengths']))}); "
        f"∝ n^{full:.2f} for w = n; rule: exponent within 0.15 of 1 for w=64, above 1.6 for w = n. Exact byte "
        "counts of one forward, the same for every seed: no spread, no interval",
        paper="Fig. 1: Longformer's memory grows linearly with the sequence length, full self-attention's "
        "quadratically (it runs out of GPU memory on long sequences)",
    )
    matches = all(measured == computed for _, _, _, computed, measured, _ in fields)
    page.verdict(
        "receptive field of <s> = Σ_l d_l·w_l/2 (measured by gradients)",
        HOLDS if matches else DOES_NOT_HOLD,
        "; ".join(
            f"w={w}, d={d}, L={layers}: {c} computed / {m} measured ({100 * s:.0f} % covered)"
            for w, d, layers, c, m, s in fields
        )
        + ". Exact, deterministic: no spread, no interval",
        paper="§3.1: l layers of windows of w tokens (w/2 each side) reach l × w tokens; with dilation d, l × d × w",
    )


def add_method_notes(page: ClaimReport, plan, memory: dict) -> None:
    page.notes.append(
        "Memory: bytes saved for backward by one training forward of an untrained tiny model, batch 1 "
        "(`torch.autograd.graph.saved_tensors_hooks`, each storage once, weights excluded): "
        + "; ".join(
            f"{name}: " + ", ".join(f"n={n}: {b / 2**20:.1f} MiB" for n, b in zip(lengths, memory[name]))
            for name, _, _, lengths in memory_settings(plan)
        )
        + "."
    )
    page.notes.append(
        "Receptive field (Table 2 style): untrained models, n = "
        f"{plan['rf_length']}, no global token; 'covered' = share of positions 0…farthest whose gradient "
        "is non-zero (dilation leaves gaps unless a lower layer fills them)."
    )
    page.notes.append(
        "Without global attention the runs give run_classification `--global_attention none` (every "
        "batch carries global_attention_mask = 0); with it, `--global_attention cls` (the head's default)."
    )
    page.notes.append(
        "Settings (filler length, lr) were chosen before the runs. A one-seed trial with 300 steps gave "
        "83.7 % for w=16 + global <s> and 64.3 % for w=256 without; for time the full setting then became "
        "240 steps and window 128 instead of 256 (not tuned on accuracy). Changed after seeing that "
        "table (3 seeds, 240 steps: every run without global attention at chance, 33.3 ± 0.0 %, w=16 + "
        "global <s> 55.7 ± 2.4 %; 3.7 min on the idle machine, where the first full run had taken 34.5 "
        "min under load): 960 steps (4 epochs of the 1,920 documents), nothing else."
    )
    page.notes.append(
        "The verdict rule changed in this run (issue 50): 95 % t intervals paired by seed, three outcomes (holds, "
        "does not hold, undecided; a gain whose better side is not above chance is undecided at best), and more "
        f"seeds while a part is undecided, up to the budget of {MAX_SEEDS} seeds per setting (≈ 5 min per seed on "
        f"this machine, ≈ {MAX_SEEDS * 5} min in all). The earlier table's yes / no used the old rule: one mean "
        "above another, fixed before the first full run."
    )


def plots(page, args, plan, accuracy, reach, first_runs, memory, fields) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.4, 4.2))
    for label, values in accuracy.items():
        m, s = mean_std(values)
        axis.errorbar([reach[label]], [m], yerr=[s], marker="o", capsize=3, label=label)
    axis.axhline(100 / 3, color="grey", linestyle=":", label="chance")
    axis.set(
        xscale="log",
        xlabel="tokens <s> can reach",
        ylabel="validation accuracy (%)",
        title=f"Which play, evidence after the filler ({len(args.seed_list)} seed(s))",
    )
    axis.legend(fontsize=7)
    page.save_figure(figure, "accuracy", args.output_dir)

    figure, axis = plt.subplots(figsize=(6.4, 4.2))
    for name, _, _, lengths in memory_settings(plan)[:2]:
        axis.plot(lengths, [b / 2**20 for b in memory[name]], marker="o", label=name)
    axis.plot(
        plan["full_lengths"],
        [memory[f"full (w = n = {n})"][0] / 2**20 for n in plan["full_lengths"]],
        marker="s",
        label="full attention (w = n)",
    )
    axis.set(
        xscale="log",
        yscale="log",
        xlabel="sequence length n",
        ylabel="activations saved for backward (MiB)",
        title="Memory vs sequence length (tiny Longformer, batch 1)",
    )
    axis.legend(fontsize=7)
    page.save_figure(figure, "memory", args.output_dir)

    plot_loss_curves(
        page,
        {f"{label} (seed {args.first_seed})": run for label, run in first_runs.items()},
        "curves",
        args.output_dir,
    )


if __name__ == "__main__":
    main()

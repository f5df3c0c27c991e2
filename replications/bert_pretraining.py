"""Devlin et al. 2019 (BERT), §5.1 and Table 5: pre-training pays, and next-sentence prediction helps sentence pairs.

The claim: a Transformer encoder pre-trained with the masked LM (15 % of tokens chosen, 80 % [MASK] / 10 % random /
10 % kept) and next-sentence prediction (NSP), then fine-tuned, is far better than the same model fine-tuned from
random initialisation; and removing NSP (MLM only) hurts the sentence-pair tasks (Table 5: QNLI, MNLI).

Here: a tiny BERT is pre-trained on Shakespeare (``training/run_pretraining.py``, MLM + NSP), then fine-tuned on two
tasks of the same kind as the paper's: a single-text classification (which play a speech comes from,
``training/run_classification.py``) and a sentence-pair task (which of four lines follows a line,
``training/run_multiple_choice.py``, ``[CLS] line [SEP] candidate [SEP]``). The same model from random
initialisation (same tokenizer, same fine-tuning) is the baseline. ``run_pretraining.py`` has no switch to turn NSP
off, so "MLM only" is ``training/run_mlm.py`` on the same corpus with the same tokenizer, model, batch, steps and
learning rate (its examples are contiguous blocks rather than sentence pairs, and its pooler stays untrained).

    python replications/bert_pretraining.py --quick              # seconds: embedded data, a few steps (CI smoke test)
    python replications/bert_pretraining.py --threads 1          # the reported table: 3 seeds, ../shared/data

The full setting pre-trains on every work in ``../shared/data/shakespeare`` except Hamlet, Macbeth and Romeo and
Juliet, the plays the fine-tuning tasks come from (so pre-training never saw the task text), and fine-tunes on larger
versions of the embedded tasks built from those three plays with the recipe of ``training/data/build_data.py``.
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from replications.common import (
    TASK_PLAYS, ClaimReport, clearly_above, fmt, mean_std, parse_args, plot_grouped_bars, plot_loss_curves, quick_threads,
    run_training, shakespeare_folder, write_next_line_task, write_pretraining_corpus,
)

# sizes and steps: both variants of pre-training and every fine-tuning share them
FULL = dict(pretrain_steps=300, finetune_steps=150, pretrain_eval_samples=128, next_line=(2000, 400))
QUICK = dict(pretrain_steps=4, finetune_steps=3, pretrain_eval_samples=16, next_line=None)
MODEL = ["--model_size", "tiny", "--max_seq_length", "64", "--tokenizer_vocab_size", "1000"]  # hidden 64, 2 layers, 2 heads
PRETRAIN = ["--per_device_train_batch_size", "32", "--per_device_eval_batch_size", "64", "--learning_rate", "1e-3",
            "--weight_decay", "0.01"]
FINETUNE = ["--learning_rate", "1e-3", "--weight_decay", "0.01", "--per_device_eval_batch_size", "64", "--eval_strategy", "no"]
VARIANTS = ("random init", "MLM + NSP", "MLM only")
TASKS = {  # name: (training script, batch size, chance accuracy)
    "plays": ("run_classification", 32, 0.5),
    "next line": ("run_multiple_choice", 16, 0.25),
}


def main(argv=None) -> Path:
    args = parse_args("BERT (Devlin et al. 2019, Table 5): pre-trained vs random init, with vs without NSP.", argv)
    setting = QUICK if args.quick else FULL
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as work, quick_threads(args):
        corpus, tasks, data_text = task_data(Path(work), setting)
        runs = [run_seed(seed, setting, corpus, tasks, Path(work)) for seed in range(args.seeds)]
    pretraining = {variant: [run[0][variant] for run in runs] for variant in VARIANTS[1:]}
    accuracy = {key: [run[1][key] for run in runs] for key in runs[0][1]}
    return report(args, setting, data_text, accuracy, pretraining, time.perf_counter() - start)


def run_seed(seed: int, setting: dict, corpus: list[str], tasks: dict[str, list[str]], work: Path) -> tuple[dict, dict]:
    """Pre-train MLM + NSP and MLM only, then fine-tune each start (both pre-trained models and random init) on
    each task: (pre-training results by variant, validation accuracy by (variant, task))."""
    from training import run_classification, run_mlm, run_multiple_choice, run_pretraining

    scripts = {"run_classification": run_classification.main, "run_multiple_choice": run_multiple_choice.main}
    steps = setting["pretrain_steps"]
    schedule = ["--max_steps", str(steps), "--warmup_steps", str(steps // 10), "--logging_steps", str(max(1, steps // 10)),
                "--eval_strategy", "steps", "--eval_steps", str(max(1, steps // 5)), "--max_eval_samples", str(setting["pretrain_eval_samples"])]
    nsp_dir, mlm_dir = work / f"mlm_nsp_{seed}", work / f"mlm_only_{seed}"
    pretraining = {
        "MLM + NSP": run_training(run_pretraining.main, ["--model_type", "scratch-bert", *MODEL, *PRETRAIN, *schedule, *corpus], nsp_dir, seed),
        # the same tokenizer (the one the MLM + NSP run trained), text, model, batch, steps and learning rate
        "MLM only": run_training(run_mlm.main, ["--model_type", "scratch-bert", "--tokenizer_name", str(nsp_dir), *MODEL, *PRETRAIN,
                                                *schedule, *corpus], mlm_dir, seed),
    }
    starts = {
        "random init": ["--model_type", "scratch-bert", "--tokenizer_name", str(nsp_dir), *MODEL],
        "MLM + NSP": ["--model_name_or_path", str(nsp_dir), "--max_seq_length", "64"],
        "MLM only": ["--model_name_or_path", str(mlm_dir), "--max_seq_length", "64"],
    }
    accuracy = {}
    for task, (script, batch, _) in TASKS.items():
        for variant, model in starts.items():
            result = run_training(scripts[script], [
                *model, *FINETUNE, *tasks[task], "--max_steps", str(setting["finetune_steps"]),
                "--warmup_steps", str(setting["finetune_steps"] // 10), "--per_device_train_batch_size", str(batch),
            ], work / f"{task}_{variant}_{seed}".replace(" ", "_"), seed)
            accuracy[variant, task] = result["eval"]["eval_accuracy"]
    return pretraining, accuracy


def task_data(work: Path, setting: dict) -> tuple[list[str], dict[str, list[str]], str]:
    """The data flags of pre-training and of each task, and a sentence saying what they are: embedded data for
    --quick (the tasks' defaults; the embedded play excerpts as pre-training documents), else files written from
    ../shared/data/shakespeare."""
    if setting["next_line"] is None:
        documents = Path(__file__).resolve().parent.parent / "training" / "data" / "documents"
        corpus = ["--train_file", str(documents / "train.txt"), "--validation_file", str(documents / "validation.txt")]
        return corpus, {"plays": [], "next line": []}, "Quick setting: the embedded data, a few steps — the numbers mean nothing."
    train, validation = write_pretraining_corpus(work)
    files = {"plays": write_plays_task(work), "next line": write_next_line_task(work, *setting["next_line"])}
    rows = {task: " / ".join(str(len(path.read_text(encoding="utf-8").splitlines())) for path in paths) for task, paths in files.items()}
    text = ("Pre-training text: ../shared/data/shakespeare without Hamlet, Macbeth, Romeo and Juliet (the task plays), "
            "Julius Caesar and Twelfth Night held out for validation. Tasks from the task plays, train / validation rows: "
            + ", ".join(f"{task} {count}" for task, count in rows.items()) + ".")
    return ["--train_file", str(train), "--validation_file", str(validation)], {
        task: ["--train_file", str(train_file), "--validation_file", str(validation_file)] for task, (train_file, validation_file) in files.items()
    }, text


def write_plays_task(folder: Path, n_validation: int = 280, seed: int = 0) -> tuple[Path, Path]:
    """Every speech of at least 60 characters of the task plays, labelled with its play — the recipe of the
    embedded ``training/data/plays`` (400 / 100 rows) without its cap. Its speech parser finds the speaker headings
    of Hamlet and Romeo and Juliet only (Macbeth's are in capitals), so the task is which of those two plays."""
    from training.data.build_data import speeches

    rows = [{"text": speech[:300], "label": play} for play in TASK_PLAYS
            for _, speech in speeches((shakespeare_folder() / f"{play}.txt").read_text(encoding="utf-8")) if len(speech) >= 60]
    rows = [row for row in rows if row["label"] != "macbeth"]  # one stray speech would make a third class
    random.Random(seed).shuffle(rows)
    paths = (folder / "plays_train.jsonl", folder / "plays_validation.jsonl")
    for path, part in zip(paths, (rows[n_validation:], rows[:n_validation])):
        path.write_text("".join(json.dumps(row) + "\n" for row in part), encoding="utf-8")
    return paths


def report(args, setting: dict, data_text: str, accuracy: dict, pretraining: dict, seconds: float) -> Path:
    report = ClaimReport(
        name="bert_pretraining",
        title="Devlin et al. 2019, §5.1 / Table 5: pre-training pays, and NSP helps sentence pairs (BERT)",
        claim="Fine-tuning a BERT pre-trained with masked LM + next-sentence prediction beats the same model from random "
              "initialisation by a wide margin; pre-training without NSP (MLM only) is worse on sentence-pair tasks.",
        setting=f"BERT hidden 64, 2 layers, 2 heads, FFN 128, 64 tokens, WordPiece 1000 trained on the pre-training text. "
                f"Pre-training {setting['pretrain_steps']} steps × 32 sequences, lr 1e-3 (linear decay, 10 % warm-up): "
                f"MLM + NSP with `training/run_pretraining.py` (sentence pairs, half IsNext), MLM only with "
                f"`training/run_mlm.py` (contiguous blocks), same text, tokenizer, steps, batch and lr. Fine-tuning "
                f"{setting['finetune_steps']} steps, lr 1e-3, for every start: *plays* (which play a speech comes from, "
                f"Hamlet or Romeo and Juliet; `run_classification.py`, batch 32) and *next line* (which of four lines "
                f"follows a line: a sentence-pair task; `run_multiple_choice.py`, batch 16). {data_text}",
        header=["start of fine-tuning", "pre-training val. loss", "NSP val. acc.", "plays acc.", "next-line acc."],
    )
    for variant in VARIANTS:
        runs = pretraining.get(variant, [])
        loss = fmt([r["eval"]["eval_loss"] for r in runs], 3) + (" (MLM+NSP)" if variant == "MLM + NSP" else " (MLM)") if runs else "—"
        nsp = fmt([r["eval"]["eval_nsp_accuracy"] for r in runs], 3) if variant == "MLM + NSP" else "—"
        report.add_row(variant, loss, nsp, *(fmt(accuracy[variant, task], 3) for task in TASKS))
    for task in TASKS:
        held = clearly_above(accuracy["MLM + NSP", task], accuracy["random init", task])
        report.verdict(f"pre-trained (MLM + NSP) ≫ random init on {task}", held, evidence(accuracy, task, "MLM + NSP", "random init"))
    report.verdict("NSP helps the sentence-pair task: MLM + NSP > MLM only on next line",
                   clearly_above(accuracy["MLM + NSP", "next line"], accuracy["MLM only", "next line"]),
                   evidence(accuracy, "next line", "MLM + NSP", "MLM only"))
    report.notes += [
        "held = the gap of the means exceeds two standard errors of the difference over the seeds (Welch); "
        "accuracy is on the validation split after the last fine-tuning step (no checkpoint selection).",
        "`run_pretraining.py` cannot switch NSP off (a flag such as `--next_sentence_prediction false`, keeping its "
        "sentence-pair data and dropping `next_sentence_label`, would be the exact Table 5 ablation); MLM only is "
        "therefore `run_mlm.py`, whose contiguous blocks differ from the pair data and whose pooler is left untrained.",
        "Settings were chosen once before the full run (sizes for the time budget, lr 1e-3 / 5e-4 as usual for "
        "models this small); nothing was tuned on the results.",
    ]
    plot_loss_curves(report, {f"BERT pre-training, {variant} (seed 0)": runs[0] for variant, runs in pretraining.items()},
                     "curves", args.output_dir)
    plot_grouped_bars(report, {variant: {task: accuracy[variant, task] for task in TASKS} for variant in VARIANTS}, "accuracy",
                      args.output_dir, "BERT fine-tuning: validation accuracy (mean ± std over seeds)", "accuracy",
                      reference={task: chance for task, (_, _, chance) in TASKS.items()})
    return report.write(args, seconds)


def evidence(accuracy: dict, task: str, better: str, worse: str) -> str:
    gap = mean_std(accuracy[better, task])[0] - mean_std(accuracy[worse, task])[0]
    return f"{task}: {better} {fmt(accuracy[better, task], 3)} vs {worse} {fmt(accuracy[worse, task], 3)} (gap {gap:+.3f})"


if __name__ == "__main__":
    main()

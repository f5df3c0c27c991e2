"""Devlin et al. 2019 (BERT), §5.1 and Table 5: pre-training pays, and next-sentence prediction helps sentence pairs.

The claim: a Transformer encoder pre-trained with the masked LM (15 % of tokens chosen, 80 % [MASK] / 10 % random /
10 % kept) and next-sentence prediction (NSP), then fine-tuned, is far better than the same model fine-tuned from
random initialisation; and removing NSP (Table 5's "No NSP": MLM only, same data and model) hurts the sentence-pair
tasks (QNLI, MNLI).

Here: for every seed a tiny BERT is pre-trained on Shakespeare with ``training/run_pretraining.py`` twice — MLM + NSP,
and MLM only (``--next_sentence_prediction false``: the same sentence-pair data, tokenizer, model, steps and learning
rate, the NSP loss dropped) — then each pre-trained model and a randomly initialised one are fine-tuned with
``training/run_classification.py`` on two tasks of the kinds the paper uses, each with few labelled rows: a
single-sentence classification (*word order*, CoLA-like: is a line of verse as written, or are its words shuffled —
``replications.common.word_order_rows``) and a sentence-pair classification (*phrase order*, of the kind of
ALBERT's sentence-order prediction: A and B are the two halves of such a line, ``[CLS] A [SEP] B [SEP]``, in their
order or swapped — ``phrase_order_rows``). The random-init baseline is fine-tuned at the fine-tuning learning rate
and at the one that suits training from scratch; the verdicts compare with the better.

    python replications/bert_pretraining.py --quick              # seconds: embedded data, a few steps (CI smoke test)
    python replications/bert_pretraining.py                      # the reported table: 3 seeds, ../shared/data
    python replications/bert_pretraining.py --first_seed 3 --output_dir replications/results/seeds_3_4_5

The full setting pre-trains on every work of ``../shared/data/shakespeare`` except Hamlet, Macbeth and Romeo and
Juliet, the plays the fine-tuning tasks come from (pre-training never sees the task text). The runs of a
seed (two pre-trainings and their fine-tunings, the random-init fine-tunings) go to ``--processes`` workers side by
side (``replications.common.in_processes``).
"""

from __future__ import annotations

import collections
import math
import os
import random
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hf_scratch import ScratchBertConfig  # noqa: E402
from replications.common import (  # noqa: E402
    ROOT,
    ClaimReport,
    above_value,
    at_chance_note,
    fmt,
    higher_mean,
    in_processes,
    machine_note,
    majority_rate,
    parse_args,
    plot_grouped_bars,
    plot_loss_curves,
    run_training,
    shown_above,
    task_lines,
    torch_threads,
    until_decided,
    word_order_rows,
    write_jsonl,
    write_pretraining_corpus,
)

# steps and data sizes; both pre-trainings and every fine-tuning share their settings
FULL = dict(pretrain_steps=5000, finetune_steps=300, pretrain_eval_samples=256, corpus_chars=10_000_000, rows=1000)
QUICK = dict(pretrain_steps=4, finetune_steps=3, pretrain_eval_samples=16, corpus_chars=None, rows=40)
VOCABULARY = 1000  # WordPiece, trained once on the pre-training text and shared by every run
# hidden 64, 2 layers, 2 heads, FFN 128, no dropout (short training underfits; with dropout 0.1 the masked LM never
# left its plateau in the trials)
MODEL = [
    "--model_type",
    "scratch-bert",
    "--model_size",
    "tiny",
    "--config_overrides",
    "hidden_dropout_prob=0,attention_probs_dropout_prob=0",
]
MASKED = 0.4  # share of tokens the masked LM predicts: 40 % (Wettig et al. 2023) gives it more to learn from per step
PRETRAIN = [
    "--mlm_probability",
    str(MASKED),
    "--max_seq_length",
    "64",
    "--per_device_train_batch_size",
    "32",
    "--per_device_eval_batch_size",
    "64",
    "--learning_rate",
    "3e-3",
    "--weight_decay",
    "0.01",
]
FINETUNE_LR = 3e-4  # Devlin et al. 2019 §A.3: 5e-5, 3e-5, 2e-5 for BERT-base; a model this small takes more (trials)
SCRATCH_LR = ScratchBertConfig.learning_rates["tiny"]  # what suits training this size from scratch
FINETUNE = [
    "--weight_decay",
    "0.01",
    "--per_device_train_batch_size",
    "32",
    "--per_device_eval_batch_size",
    "64",
    "--eval_strategy",
    "no",
]
MAX_SEEDS = 10  # the compute budget: about 4.6 min per seed (13.8 min for 3 seeds), so at most ≈ 46 min
VARIANTS = ("random init", "random init, lr 1e-3", "MLM + NSP", "MLM only")  # starts of fine-tuning
RANDOM_INITS = VARIANTS[:2]
LEARNING_RATE = {VARIANTS[1]: SCRATCH_LR}  # the others: FINETUNE_LR
NSP_FLAG = {"MLM + NSP": "true", "MLM only": "false"}
PAIR_TASK = "phrase order"  # the sentence-pair task, on which NSP is claimed to help
TASKS = {  # name: extra flags of run_classification
    "word order": ["--max_seq_length", "32"],
    PAIR_TASK: ["--text_pair_column", "text_pair", "--max_seq_length", "32"],
}


def main(argv=None) -> Path:
    args = parse_args(
        "BERT (Devlin et al. 2019, Table 5): pre-trained vs random init, with vs without NSP.",
        argv,
        max_seeds=MAX_SEEDS,
    )
    setting = QUICK if args.quick else FULL
    start, load = time.perf_counter(), os.getloadavg()[0]
    results: dict[tuple[str, int], dict] = {}  # (variant, seed): run_start's result, over every round of seeds
    # the folder stays open across the rounds of until_decided: a later round's seeds reuse the tokenizer and task data
    with tempfile.TemporaryDirectory() as work, torch_threads(args):
        data = task_data(Path(work), args.quick, setting)

        def run(seeds: list[int]) -> None:
            # the long jobs (pre-training + fine-tuning) first, so the short random-init ones fill the gaps at the end
            jobs = [(variant, seed, setting, data, work) for variant in VARIANTS[2:] for seed in seeds]
            jobs += [(variant, seed, setting, data, work) for variant in RANDOM_INITS for seed in seeds]
            results.update(
                {(job[0], job[1]): result for job, result in zip(jobs, in_processes(run_start, jobs, args.processes))}
            )

        def judge() -> ClaimReport:
            return report(args, setting, data, *collected(results, args.seed_list), machine_note(load))

        page = until_decided(args, run, judge)
    draw(page, args, data, *collected(results, args.seed_list))
    return page.write(args, time.perf_counter() - start)


def collected(results: dict, seeds: list[int]) -> tuple[dict, dict]:
    """The runs of ``seeds``: ``accuracy[variant, task]`` and ``pretraining[variant]``, one entry per seed."""
    pretraining = {variant: [results[variant, seed]["pretraining"] for seed in seeds] for variant in VARIANTS[2:]}
    accuracy = {
        (variant, task): [results[variant, seed]["accuracy"][task] for seed in seeds]
        for variant in VARIANTS
        for task in TASKS
    }
    return accuracy, pretraining


def run_start(variant: str, seed: int, setting: dict, data: dict, work: str) -> dict:
    """One start of fine-tuning for one seed: pre-train (MLM + NSP, or MLM only) unless ``variant`` is random init,
    then fine-tune on every task. Returns ``{"pretraining": run_training's result or None, "accuracy": {task: acc}}``
    (module level: the workers of ``in_processes`` import it)."""
    from training import run_classification, run_pretraining

    work, pretraining = Path(work), None
    if variant in RANDOM_INITS:
        start = [*MODEL, "--tokenizer_name", data["tokenizer"]]
    else:
        steps = setting["pretrain_steps"]
        folder = work / f"{variant}_{seed}".replace(" ", "_").replace("+", "and")
        pretraining = run_training(
            run_pretraining.main,
            [
                *MODEL,
                "--tokenizer_name",
                data["tokenizer"],
                "--next_sentence_prediction",
                NSP_FLAG[variant],
                *PRETRAIN,
                *data["corpus"],
                "--max_steps",
                str(steps),
                "--warmup_steps",
                str(steps // 10),
                "--logging_steps",
                str(max(1, steps // 20)),
                "--eval_strategy",
                "steps",
                "--eval_steps",
                str(max(1, steps // 5)),
                "--max_eval_samples",
                str(setting["pretrain_eval_samples"]),
            ],
            folder,
            seed,
        )
        pretraining = {key: pretraining[key] for key in ("eval", "log_history", "seconds")}
        start = ["--model_name_or_path", str(folder)]
    accuracy = {}
    for task, flags in TASKS.items():
        steps = setting["finetune_steps"]
        result = run_training(
            run_classification.main,
            [
                *start,
                *FINETUNE,
                "--learning_rate",
                str(LEARNING_RATE.get(variant, FINETUNE_LR)),
                *flags,
                *data["tasks"][task],
                "--max_train_samples",
                str(setting["rows"]),
                "--max_steps",
                str(steps),
                "--warmup_steps",
                str(steps // 10),
            ],
            work / f"{task}_{variant}_{seed}".replace(" ", "_").replace("+", "and").replace(",", ""),
            seed,
        )
        accuracy[task] = result["eval"]["eval_accuracy"]
    return {"pretraining": pretraining, "accuracy": accuracy}


def task_data(work: Path, quick: bool, setting: dict) -> dict:
    """Everything the runs share: the pre-training files (``corpus`` flags), the WordPiece ``tokenizer`` folder
    trained on them, each task's data flags, each task's chance level (validation majority class), the unigram
    statistics of the pre-training validation text and a sentence saying what the data are. --quick: the embedded
    play excerpts (``training/data/documents``) and embedded tasks; else text and tasks from ../shared/data."""
    from hf_scratch.tools.tokenization import train_tokenizer

    if quick:
        documents = ROOT / "training" / "data" / "documents"
        train, validation = documents / "train.txt", documents / "validation.txt"
    else:
        train, validation = write_pretraining_corpus(work, setting["corpus_chars"])
    tokenizer = train_tokenizer([train.read_text(encoding="utf-8")], kind="wordpiece", vocab_size=VOCABULARY)
    tokenizer.save_pretrained(work / "tokenizer")
    files = {"word order": word_order_rows(quick), PAIR_TASK: phrase_order_rows(quick)}
    flags = {
        task: [
            "--train_file",
            str(write_jsonl(work / f"{task}_train.jsonl".replace(" ", "_"), rows[0])),
            "--validation_file",
            str(write_jsonl(work / f"{task}_validation.jsonl".replace(" ", "_"), rows[1])),
        ]
        for task, rows in files.items()
    }
    counts = ", ".join(
        f"{task} the first {setting['rows']} of {len(rows[0])} / {len(rows[1])}" for task, rows in files.items()
    )
    text = (
        f"Quick setting: the embedded data (train / validation rows: {counts}), a few steps — the numbers mean nothing."
        if quick
        else "Pre-training text: every work of ../shared/data/shakespeare except Hamlet, Macbeth, Romeo and Juliet "
        f"(the task plays; {train.stat().st_size / 1e6:.1f} M characters); Julius Caesar and Twelfth Night for "
        f"validation. Tasks from the task plays, train / validation rows: {counts}."
    )
    return {
        "corpus": ["--train_file", str(train), "--validation_file", str(validation)],
        "tokenizer": str(work / "tokenizer"),
        "tasks": flags,
        "text": text,
        "chance": {task: majority_rate([row["label"] for row in rows[1]]) for task, rows in files.items()},
        "unigram": unigram_statistics(tokenizer, validation.read_text(encoding="utf-8")),
    }


def phrase_order_rows(quick: bool, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """Training and validation rows ``{"text", "text_pair", "label"}`` of *phrase order*, a sentence-pair task of
    sentence-order prediction's kind (Lan et al. 2020, ALBERT §4.1) at the scale of a line: each line of
    ``replications.common.task_lines`` is cut after a random word into two halves of at least two words each; A is
    the first half and B the second ("in order"), or, by a seeded coin, A the second and B the first ("swapped").
    Both classes hold the same words, so a bag of the pair's words is at chance; what tells is whether B continues
    A."""
    rng = random.Random(seed)
    splits: tuple[list[dict], list[dict]] = ([], [])
    for part in task_lines(quick):
        for lines, rows in zip(part, splits):
            for words in lines:
                cut = rng.randint(2, len(words) - 2)
                first, second = " ".join(words[:cut]), " ".join(words[cut:])
                if rng.random() < 0.5:
                    rows.append({"text": first, "text_pair": second, "label": "in order"})
                else:
                    rows.append({"text": second, "text_pair": first, "label": "swapped"})
    for rows in splits:
        rng.shuffle(rows)
    return splits


def unigram_statistics(tokenizer, text: str) -> dict:
    """What a masked LM that learned only token frequencies scores on ``text``: the unigram entropy (nats: its
    loss) and the most frequent token's share (its accuracy)."""
    counts = collections.Counter(tokenizer(text, add_special_tokens=False)["input_ids"])
    total = sum(counts.values())
    return {
        "entropy": -sum(n / total * math.log(n / total) for n in counts.values()),
        "accuracy": max(counts.values()) / total,
    }


def report(args, setting: dict, data: dict, accuracy: dict, pretraining: dict, machine: str) -> ClaimReport:
    """The page from the seeds run so far (rows, verdicts, notes; ``draw`` adds the pictures once, at the end)."""
    report = bert_page(setting, data, args.max_seeds)
    for variant in VARIANTS:
        runs = pretraining.get(variant)
        metric = lambda name, runs=runs: fmt([run["eval"][name] for run in runs], 3)  # noqa: E731
        report.add_row(
            variant,
            metric("eval_loss") + (" (MLM + NSP)" if variant == "MLM + NSP" else " (MLM)") if runs else "—",
            metric("eval_mlm_accuracy") if runs else "—",
            metric("eval_nsp_accuracy") if variant == "MLM + NSP" else "—",
            *(fmt(accuracy[variant, task], 3) for task in TASKS),
        )
    for task in TASKS:
        baseline, _ = higher_mean(accuracy, [(variant, task) for variant in RANDOM_INITS])
        report.verdict(
            f"pre-trained (MLM + NSP) ≫ random init (at its better lr) on {task}",
            shown_above(accuracy["MLM + NSP", task], accuracy[baseline, task], data["chance"][task]),
            evidence(accuracy, task, "MLM + NSP", baseline, data["chance"][task]),
            paper=PAPER[task],
        )
    report.verdict(
        f"NSP helps the sentence-pair task: MLM + NSP > MLM only on {PAIR_TASK}",
        shown_above(accuracy["MLM + NSP", PAIR_TASK], accuracy["MLM only", PAIR_TASK], data["chance"][PAIR_TASK]),
        evidence(accuracy, PAIR_TASK, "MLM + NSP", "MLM only", data["chance"][PAIR_TASK]),
        paper=PAPER["NSP"],
    )
    add_notes(report, data, accuracy, pretraining, machine)
    return report


def draw(report: ClaimReport, args, data: dict, accuracy: dict, pretraining: dict) -> None:
    """The pictures of the final page: the first seed's pre-training curves, the accuracies over every seed."""
    plot_loss_curves(
        report,
        {f"BERT pre-training, {variant} (first seed)": runs[0] for variant, runs in pretraining.items()},
        "curves",
        args.output_dir,
    )
    plot_grouped_bars(
        report,
        {variant: {task: accuracy[variant, task] for task in TASKS} for variant in VARIANTS},
        "accuracy",
        args.output_dir,
        "BERT fine-tuning: validation accuracy (mean ± std over seeds)",
        "accuracy",
        reference=data["chance"],
    )


# what the paper reported for each part (Devlin et al. 2019; GLUE dev / test numbers as the tables give them)
PAPER = {
    "word order": "no random-init row: the paper compares with earlier systems, e.g. Table 1 CoLA (the kind of "
    "task) 52.1 for BERT-base vs 45.4 for OpenAI GPT",
    PAIR_TASK: "no random-init row: the paper compares with earlier systems (Table 1, GLUE average 79.6 for BERT-base "
    "vs 75.1 for OpenAI GPT)",
    "NSP": "Table 5 (dev): No NSP hurts the sentence-pair tasks, QNLI 88.4 → 84.9, MNLI-m 84.4 → 83.9",
}


def bert_page(setting: dict, data: dict, max_seeds: int) -> ClaimReport:
    return ClaimReport(
        name="bert_pretraining",
        title="Devlin et al. 2019, §5.1 / Table 5: pre-training pays, and NSP helps sentence pairs (BERT)",
        claim="Fine-tuning a BERT pre-trained with masked LM + next-sentence prediction beats the same model from "
        "random initialisation by a wide margin; pre-training without NSP (MLM only) is worse on sentence-pair tasks.",
        setting=f"BERT hidden 64, 2 layers, 2 heads, FFN 128, no dropout, WordPiece {VOCABULARY} trained once on the "
        f"pre-training text. For every seed, two pre-trainings with `training/run_pretraining.py`, "
        f"{setting['pretrain_steps']} steps × 32 sentence pairs of 64 tokens (about half IsNext, "
        f"{MASKED * 100:.0f} % of tokens masked), lr 3e-3 (linear decay, 10 % warm-up): MLM + NSP, and MLM only "
        "(`--next_sentence_prediction "
        "false`: same data, tokenizer, model, steps and lr). Fine-tuning with `training/run_classification.py`, "
        f"{setting['finetune_steps']} steps × 32 on {setting['rows']} labelled rows, lr {FINETUNE_LR:g} (10 % warm-up, "
        f"linear decay), the same for every start (random init also at lr {SCRATCH_LR:g}, the rate that suits this "
        "size from scratch): *word order* (CoLA-like: is a line of 6–14 words, lower-cased and without punctuation, as "
        "written or are its words shuffled; 32 tokens) and *phrase order* (a sentence-pair task of sentence-order "
        "prediction's kind: A and B are the two halves of such a line, cut after a random word, in their order or "
        f"swapped; 32 tokens). {data['text']} Budget: up to {max_seeds} seeds per setting ≈ {max_seeds * 4.6:.0f} min "
        "(4.6 min per seed on this machine's 2 cores).",
        header=[
            "start of fine-tuning",
            "pre-training val. loss",
            "MLM val. acc.",
            "NSP val. acc.",
            *(f"{task} acc." for task in TASKS),
        ],
    )


def add_notes(report: ClaimReport, data: dict, accuracy: dict, pretraining: dict, machine: str) -> None:
    unigram = data["unigram"]
    learned = {variant: [run["eval"]["eval_mlm_accuracy"] for run in runs] for variant, runs in pretraining.items()}
    above_frequencies = {variant: above_value(values, unigram["accuracy"]) for variant, values in learned.items()}
    report.notes += [
        "The verdict rule changed in this run (issue 50): 95 % t intervals paired by seed, three outcomes (holds, does "
        'not hold, undecided), more seeds while a part is undecided; the earlier notes\' "held / not held" (yes / no) '
        "used the old rule, a gap of the means above two standard errors (Welch). Each pre-trained start is compared "
        "with a random init fine-tuned on the same seed, and the better side must itself be above chance "
        "(`shown_above`). Accuracy is on the validation split after the last fine-tuning step (no checkpoint "
        "selection); chance (majority class of the validation split): "
        + ", ".join(f"{task} {level:.3f}" for task, level in data["chance"].items())
        + ".",
        f"A masked LM that learned only token frequencies scores the unigram entropy of the validation text, "
        f"{unigram['entropy']:.3f} nats, as MLM loss and the most frequent token's share, {unigram['accuracy']:.3f}, "
        "as MLM accuracy; the MLM + NSP loss above is the sum of both losses (its NSP part is at most ln 2 = 0.693 at "
        "chance).",
        "Precondition of the comparison, that the masked LM learned more than token frequencies (MLM accuracy above "
        f"the most frequent token's share, {unigram['accuracy']:.3f}, both pre-trainings; one-sample 95 % interval of "
        "the difference): "
        + "; ".join(
            f"{variant} {fmt(learned[variant], 3)}, {interval}: {outcome}"
            for variant, (outcome, interval) in above_frequencies.items()
        )
        + ".",
        "Each seed has its own pre-trainings (seed s pre-trains and fine-tunes with seed s), so the spread includes "
        "pre-training's; the tokenizer and the task data are the same for every seed. " + machine + ".",
    ]
    report.notes += HISTORY
    report.notes += [note for note in [at_chance_note(accuracy, lambda key: data["chance"][key[1]])] if note]


# what changed after results were seen (said on the page, as CONTRIBUTING asks of replications)
HISTORY = [
    "First version (not reproduced): 200 pre-training steps at lr 1e-3, fine-tuning on *plays* (which play a speech "
    "comes from) and *same play*: random init 0.729 vs MLM + NSP 0.554 on plays, every start at 0.500 on same play; "
    "the masked LM had learned token frequencies only (MLM loss 5.85 vs unigram entropy 5.72).",
    "Second version (not reproduced): 1000 pre-training steps at lr 3e-3 on 1.6 M characters (MLM accuracy 0.139), "
    "fine-tuning 300 steps at lr 1e-3 on *plays* (all 933 rows) and *next line* (all 3255 rows): random init 0.590 "
    "± 0.018 vs MLM + NSP 0.439 ± 0.031 on plays — the play is told by its words, which a random-init model learns "
    "as fast as a pre-trained one — and every start at chance on next line.",
    "Third version (not reproduced; 3 seeds): 2000 pre-training steps, 15 % of tokens masked, dropout 0.1, and "
    "*next line* (is B the line after A, or another line of the same play) as the sentence-pair task. The masked "
    "LM stayed on its plateau (MLM accuracy 0.145 ± 0.011 vs 0.052 for the most frequent token); word order 0.540 ± "
    "0.017 vs random init 0.533 ± 0.021 (with seeds 3, 4, 5: a gap of +0.063, so the verdict depended on the "
    "seeds); next line at chance for every start. Its trials (seed 0): MLM accuracy 0.14–0.18 after 1000–6000 steps "
    "at lr 1e-3, 3e-3 or 6e-3, with 15 % or 40 % of tokens masked, at hidden 64 × 2 layers or 128 × 4, with "
    "initializer_range 0.1, or with blocks of 32 tokens, all with dropout 0.1; transformers' own BertForMaskedLM, "
    "trained side by side on the same batches, gave the same losses to three decimals (1000 steps), so it is the "
    "recipe, not our model. Fine-tuning from a 2000-step MLM + NSP model vs random init: *word order* 0.543 at lr "
    "1e-4 and 0.582 at 3e-4 vs 0.495 at 1e-4 and 0.499 at 1e-3 (so lr 3e-4); *next line* 0.496 / 0.492 vs 0.508 / "
    "0.517; *next line* with B from another task play 0.502 / 0.499 vs 0.490 / 0.510.",
    "Trials for this version (seed 0, one run each, before the reported run; every setting below was chosen after "
    "seeing them). A training loop of the masked LM alone (hidden 64 × 2, batches of 32 × 64 tokens, lr 3e-3) stayed "
    "at MLM loss 5.43 after 1000 steps (15 % masked) with dropout 0.1 or 0, and with pre-LN, lr 1e-2, "
    "initializer_range 0.2 or 0.5, or W_q, W_k drawn with std 0.2; its first layer attended uniformly over the "
    "positions. With 40 % masked and no dropout it left the plateau after about 1200 steps (loss 3.87 after 2500, "
    "the first layer's attention on the two neighbouring tokens 22–25 times the uniform weight); the earlier 6000-step "
    "trial with 40 % masked but dropout 0.1 had not. Through this script: 3000 pre-training steps gave MLM + NSP "
    "MLM accuracy 0.180, word order 0.599 vs random init 0.531; 5000 steps gave 0.211 and 0.628 vs 0.530 (NSP delays "
    "the MLM's escape: MLM only reached 0.280), so 5000 steps. The sentence-pair task stayed at chance for every start "
    "both as *next line* with B from another task play (0.517–0.534) and as *next passage* (two lines each side, "
    "0.468–0.509 in two runs); the pre-trained NSP head itself, without fine-tuning, scored 0.499 on next passage's "
    "validation rows while scoring 0.83 on the pre-training validation pairs: at this scale NSP learns which work a "
    "passage comes from (its names and setting), which does not carry over to plays it never saw. *next passage* "
    "(NSP's kind of pair) was kept, and the rules were left as they were.",
    "A first full run of this version printed **yes** for both next passage parts although every start was at "
    "chance (MLM + NSP 0.509 ± 0.001 vs random init 0.484 ± 0.003 and MLM only 0.498 ± 0.006; majority class "
    "0.522): the code did not check what the last note below states. The verdicts now also require the better side "
    "to be clearly above chance (``shown_above``); the table is the rerun with only that change.",
    "Trials for a sentence-pair task the tiny model can learn, after that run (seed 0's 5000-step MLM + NSP model vs "
    "random init, seed 0, one run each; none adopted, the task and rules were left as they were). *Line "
    "continuation* (SWAG's kind: A the first 3 or more words of a line of 6–14 words, B its rest or the rest of "
    "another line of the same play with as many words): 0.522 pre-trained vs 0.517 / 0.532 random init at lr 3e-4 / "
    "1e-3 (1000 rows, 300 steps), 0.526 vs 0.520 on all 6141 rows for 1500 steps. *Cloze pair* (A a line with one "
    "word replaced by [MASK], B that word or a word drawn from another line): 0.522 vs 0.504 (1000 rows), 0.541 vs "
    "0.507 (all rows, 1500 steps). Majority class about 0.52 in each. Even *copy* (is B the line A itself, or "
    "another line) reached only 0.70 pre-trained and 0.62 from random init: at hidden 64 × 2 layers, fine-tuning "
    "learns little that needs A and B together.",
    "Trial of the setting with plenty of unlabelled in-domain text, after those (seed 0, one run each; not adopted): "
    "the pre-training text also held the first three quarters of each task play (4.72 M characters in all; both tasks "
    "take their validation rows from the last fifth, which pre-training never read). MLM + NSP / MLM only / random "
    "init: next passage 0.520 / 0.482 / 0.486, word order 0.636 / 0.633 / 0.521 (MLM accuracy 0.212 and 0.278, NSP "
    "accuracy 0.81). The pre-trained NSP head, without fine-tuning, scored 0.480 on next passage's validation rows and"
    " 0.498 on its training rows, text it had read: it does not tell Hamlet from Macbeth either (the next note says "
    "what its 0.81 rested on).",
    "Changed for this run, after those trials: pre-training builds its NotNext pairs as the reference implementation's"
    " create_pretraining_data.py does (`make_nsp_examples`): B is whole sentences of another document, from a random "
    "one on, until the pair is full, and then the pair is trimmed from a random end of its longer side as an IsNext "
    "pair is. Before, B was cut off at the length left, so a NotNext pair was never trimmed: on the pre-training "
    "validation pairs 92 % of NotNext A ended a sentence (IsNext: 62 %) and 6 % of NotNext B did (IsNext: 41 %). The "
    "NSP accuracy of 0.81–0.83 of the earlier runs came from these boundaries, not from what B says: the same NSP head"
    " scored 0.473 on next passage pairs built from Julius Caesar and Twelfth Night, the two validation works. Trial "
    "with the reference's pairs (seed 0): NSP validation accuracy 0.52 (NotNext pairs are now 56 % of the validation "
    "pairs: the sentences A leaves unused start more pairs), MLM accuracy 0.254 (0.212 before), next passage 0.520 "
    "(MLM + NSP) and 0.468 (MLM only), word order 0.667 and 0.657. Nothing else changed; the rules stayed as they "
    "were.",
    "Changed for this run, after the previous one (1 of 3 parts held with seeds 0, 1, 2 and with 3, 4, 5): the "
    "sentence-pair task is *phrase order* instead of *next passage* (is B, 2 lines of verse, the passage after A, or "
    "a passage of another task play; 1000 rows, 64 tokens), on which every start had stayed at chance: MLM + NSP "
    "0.508 ± 0.030 and 0.510 ± 0.004 (seeds 3, 4, 5), MLM only 0.488 ± 0.009 and 0.491 ± 0.009, random init at most "
    "0.485 ± 0.003 and 0.486 ± 0.016, majority class 0.522. Trials before the change (fine-tuning from seed 0's "
    "pre-trainings of that run; MLM + NSP / MLM only / random init at lr 3e-4 / at 1e-3): next passage on all 3252 "
    "rows for 1500 steps 0.505 / 0.493 / 0.502 / 0.489, the training rows memorised (training loss 0.37–0.47); "
    "*passage order* (two passages that follow each other, as written or swapped: ALBERT's sentence-order "
    "prediction) 0.505 / 0.506 / 0.494 / 0.515. Larger pre-training, run on a GPU (an H200; torch 2.11, "
    "transformers 5.17; MLM + NSP, 3000 steps × 128 pairs, seed 0): hidden 64 × 2 layers, 128 × 4 and 256 × 4 "
    "reached MLM accuracy 0.285 / 0.347 / 0.366 and NSP accuracy 0.60 / 0.59 / 0.63; fine-tuned on next passage "
    "(1000 rows for 300 steps, or all rows for 1500, at lr 1e-4 and 3e-4) every size stayed within 0.5 ± 0.03 "
    "(random init likewise), while on word order the pre-trained models reached 0.63 / 0.78 / 0.77 against 0.54 / "
    "0.55 / 0.56 from random init. So passages of verse that follow each other are not told apart by pre-training "
    "at any size within reach, while the order of words is; *phrase order* asks a sentence-pair question of that "
    "kind: does B continue A? Its trial (seed 0's pre-trainings, fine-tuning seeds 0–3, 1000 rows, 300 steps): MLM "
    "+ NSP 0.634 / 0.668 / 0.642 / 0.665, MLM only 0.622 / 0.622 / 0.649 / 0.631, random init 0.580 / 0.560 / 0.572 "
    "/ 0.564 (lr 3e-4) and 0.578 / 0.548 / 0.563 / 0.556 (lr 1e-3), majority class 0.504; on all 6141 rows for 1500 "
    "steps (seed 0) 0.738 / 0.781 / 0.697 / 0.699. Nothing else changed; the rules stayed as they were.",
]


def evidence(accuracy: dict, task: str, better: str, worse: str, chance: float) -> str:
    return (
        f"{task} accuracy, paired by seed: {better} {fmt(accuracy[better, task], 3)} vs {worse} "
        f"{fmt(accuracy[worse, task], 3)}; {better} above chance ({chance:.3f}): "
        f"{above_value(accuracy[better, task], chance)[0]}"
    )


if __name__ == "__main__":
    main()

"""Bahdanau et al. 2015 ("Neural Machine Translation by Jointly Learning to Align and Translate"), Fig. 2: BLEU by
source-sentence length. An RNN encoder-decoder that squeezes the source into one fixed vector (the paper's baseline
"RNNencdec", Cho et al. 2014, which reads that vector at every decoder step) gets worse as sentences get longer;
with attention over the encoder states (Bahdanau's additive score, §3.1, with the paper's maxout deep output; Luong et
al. 2015's "general" score, §3.1) it holds up.

Six settings — no attention / Bahdanau / Luong-general, each with LSTM and GRU cells — are trained on German→English
with ``training/run_translation.py`` (``--model_type scratch-rnn``); each saved model then translates the validation
set (greedy), the sentences are grouped by source length in tokens, and each group is scored with sacreBLEU through
``evaluate`` (the repository's local metric). ``transformer_ablations.py`` (Vaswani et al. 2017) reuses the
translation helpers defined here and compares the Transformer with the best setting of this claim's table.

    python replications/rnn_attention.py            # full: gettext-de-en, 3 seeds and up to MAX_SEEDS while a
                                                    # part is undecided (about 8 min a seed on 2 cores)
    python replications/rnn_attention.py --quick    # CI smoke test: training/data/de_en, 1 seed, tiny models
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import datasets  # noqa: E402
import torch  # noqa: E402
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, DataCollatorForSeq2Seq, TrainerCallback  # noqa: E402

import hf_scratch  # noqa: E402,F401  (registers the scratch-* Auto classes the saved runs load with)
from hf_scratch.configuration_rnn import BAHDANAU_DECODERS  # noqa: E402
from hf_scratch.tools.tokenization import train_tokenizer  # noqa: E402
from replications.common import (  # noqa: E402
    ROOT,
    SHARED_DATA,
    ClaimReport,
    above,
    cpu_seconds,
    decide,
    fmt,
    in_processes,
    loss_curves,
    mean_interval,
    mean_std,
    parse_args,
    run_training,
    torch_threads,
    until_decided,
)
from training.common import load_metric  # noqa: E402
from training.run_translation import main as run_translation  # noqa: E402

CELLS = ("lstm", "gru")
# without attention: the paper's baseline RNNencdec (Cho et al. 2014), reading the encoder's final state at every step
NO_ATTENTION = "fixed-context"
ATTENTIONS = {NO_ATTENTION: "no attention", "bahdanau": "Bahdanau", "luong-general": "Luong-general"}
SETTINGS = [(cell, attention) for cell in CELLS for attention in ATTENTIONS]
# source length in tokens (without </s>); the gettext strings are short, so the buckets stop at 21+
BUCKETS = ((1, 5), (6, 10), (11, 15), (16, 20), (21, None))
# the two groups the verdict compares; sentences under 6 tokens are left out of "short" because they have few or no
# 4-grams, so BLEU scores them badly whatever the model (set after a trial run, before the first full run)
SHORT, LONG = (6, 15), (21, None)
# one layer each side (set explicitly: the training scripts' default size preset "tiny" has two), embeddings drawn
# with std 0.1 instead of the config's 0.02, no dropout, lr 1e-2: with 0.02 and lr 3e-3 the models had not left the
# unigram plateau (validation loss ≈ 5.7, BLEU 0) after 300 steps in trial runs of this setting
RNN_OVERRIDES = "encoder_layers=1,decoder_layers=1,initializer_range=0.1,hidden_dropout_prob=0.0"
RNN_LEARNING_RATE = 1e-2
# Bahdanau attention predicts from the paper's deep output, g(y_{t-1}, s_t, c_t) (eq. 4, appendix A.2.2), not from
# s_t alone: in 1800-step trials the linear output left it far behind Luong's (BLEU 23 vs 38 with LSTMs); RNNencdec
# predicts through the same deep output, with its fixed c (Cho et al. 2014 appendix A)
BAHDANAU_OUTPUT = "maxout"
RNN_HIDDEN, RNN_STEPS = 128, 1800  # full setting (4.5 epochs); --quick: 16, 8
BATCH = 64  # sentence pairs per step (full setting; --quick: 16)
MAX_LENGTH = 40  # source and target tokens kept (training and generation)
SCORED = 2000  # validation pairs translated and scored (all of them; --quick: all 100)
VOCABULARY = 1000  # one WordPiece vocabulary for both languages and every run of both claims
# beam search (when asked for): a hypothesis scores its log-probability / length^0.6 (transformers' length_penalty;
# Vaswani et al. §6.1 use α = 0.6 in Wu et al. 2016's ((5 + length) / 6)^α)
BEAM_LENGTH_PENALTY = 0.6
# the page's compute budget (``until_decided``): up to 6 seeds per setting, about 50 minutes alone on 2 cores (the
# fifth full run: 48.6 CPU-min for 3 seeds, two single-thread runs side by side, so about 8.1 min a seed)
MAX_SEEDS, MINUTES_PER_SEED = 6, 8.1


def setting_name(cell: str, attention: str) -> str:
    return f"{cell.upper()} + {ATTENTIONS[attention]}"


# --------------------------------------------------------------------------------------------------------------
# Data, tokenizer, training flags and one run: shared with transformer_ablations.py
# --------------------------------------------------------------------------------------------------------------


def translation_files(quick: bool) -> tuple[Path, Path]:
    """(train, validation) jsonl files: the embedded sample for --quick, else the gettext corpus in ../shared/data."""
    folder = ROOT / "training" / "data" / "de_en" if quick else SHARED_DATA / "gettext-de-en"
    files = folder / "train.jsonl", folder / "validation.jsonl"
    missing = [str(path) for path in files if not path.is_file()]
    if missing:
        raise ValueError(
            f"Missing translation data {missing}: the full setting reads ../shared/data/gettext-de-en "
            "beside the checkout (see ../shared/data/README.md); run with --quick to use the embedded "
            "training/data/de_en instead."
        )
    return files


def shared_tokenizer(files: tuple[Path, Path], folder: Path) -> Path:
    """Train the one vocabulary every run uses — as run_translation.py trains its own (``train_tokenizer``'s
    "seq2seq" WordPiece on both sides of the training pairs), once instead of once per run — and save it in
    ``folder`` for ``--tokenizer_name``."""
    texts = [text for pair in read_pairs(files[0]) for text in pair]
    train_tokenizer(texts, kind="seq2seq", vocab_size=VOCABULARY).save_pretrained(folder)
    return folder


def translation_flags(files: tuple[Path, Path], steps: int, quick: bool, tokenizer: Path) -> list[str]:
    """run_translation.py flags every run of both claims shares: data, the shared ``tokenizer``, batch, a
    validation loss every third of training on 100 validation pairs (loss only: BLEU is computed afterwards from the
    saved model), length-grouped batches."""
    evaluate_every = max(1, steps // 3)
    return [
        "--train_file",
        str(files[0]),
        "--validation_file",
        str(files[1]),
        "--tokenizer_name",
        str(tokenizer),
        "--max_source_length",
        str(MAX_LENGTH),
        "--max_target_length",
        str(MAX_LENGTH),
        "--max_steps",
        str(steps),
        "--per_device_train_batch_size",
        str(16 if quick else BATCH),
        "--per_device_eval_batch_size",
        "128",
        "--train_sampling_strategy",
        "group_by_length",
        "--eval_strategy",
        "steps",
        "--eval_steps",
        str(evaluate_every),
        "--logging_steps",
        str(evaluate_every),
        "--prediction_loss_only",
        "true",
        "--max_eval_samples",
        "50" if quick else "100",
    ]


def rnn_flags(cell: str, attention: str, hidden: int) -> list[str]:
    """The model and optimizer flags of one RNN setting (both claims train it the same way)."""
    return [
        "--model_type",
        "scratch-rnn",
        "--learning_rate",
        str(RNN_LEARNING_RATE),
        "--config_overrides",
        f"hidden_size={hidden},cell_type={cell},attention_type={attention},{RNN_OVERRIDES}"
        + (f",bahdanau_output={BAHDANAU_OUTPUT}" if attention in BAHDANAU_DECODERS else ""),
    ]


class StepTimer(TrainerCallback):
    """CPU seconds this process spends in optimizer steps (forward, backward, update), evaluation and logging
    excluded. CPU time rather than wall time: on a shared machine the wall time of a step depends on the other jobs,
    the CPU time (one thread) on the model alone."""

    def __init__(self):
        self.seconds, self._start = 0.0, None

    def on_step_begin(self, args, state, control, **kwargs):
        self._start = time.process_time()

    def on_step_end(self, args, state, control, **kwargs):
        self.seconds += time.process_time() - self._start


def train_and_translate(
    flags: list[str],
    output_dir: str,
    seed: int,
    pairs: Sequence[tuple[str, str]] | None,
    num_beams: int = 1,
    callbacks: Sequence[TrainerCallback] = (),
) -> dict:
    """One run of run_translation.py (``run_training``, with ``callbacks`` besides its own) with ``flags`` into
    ``output_dir``, then the saved model's translations of ``pairs`` (``translate_saved_run``, greedy or with
    ``num_beams``; None: no translating). Adds ``step_seconds`` (CPU seconds of its optimizer steps, ``StepTimer``)
    and ``translations``. Module-level: ``worker_pool``'s worker processes run it."""
    timer = StepTimer()
    run = run_training(run_translation, flags, output_dir, seed, callbacks=[timer, *callbacks])
    run["step_seconds"] = timer.seconds
    run["translations"] = None if pairs is None else translate_saved_run(output_dir, pairs, num_beams=num_beams)
    return run


def load_note(cpu_started: float, load_started: float, processes: int) -> str:
    """The script's CPU time beside its wall time: the machine is shared, so the wall time depends on the load."""
    who = f"itself and its {processes} worker processes" if processes > 1 else "one process"
    return (
        f"CPU time of the script ({who}, one torch thread each): {(cpu_seconds() - cpu_started) / 60:.1f} min. "
        "The wall time above was measured on a "
        f"machine shared with other jobs (load average {load_started:.1f} at the start, {os.getloadavg()[0]:.1f} "
        f"at the end); alone on 2 cores it would be about CPU time / {min(processes, 2)}."
    )


# --------------------------------------------------------------------------------------------------------------
# Evaluation of a saved run: greedy translations, BLEU on any subset, validation perplexity
# --------------------------------------------------------------------------------------------------------------


def read_pairs(path: Path, source: str = "de", target: str = "en") -> list[tuple[str, str]]:
    rows = datasets.load_dataset("json", data_files=str(path), split="train")["translation"]
    return [(row[source], row[target]) for row in rows]


@torch.no_grad()
def translate_saved_run(
    output_dir: str | Path, pairs: Sequence[tuple[str, str]], batch_size: int = 500, num_beams: int = 1
) -> dict:
    """Load the model and tokenizer a run saved, translate ``pairs``' sources (greedily, or with beam search of
    ``num_beams`` and ``BEAM_LENGTH_PENALTY``) and compute the validation cross-entropy of the references (plain,
    without label smoothing). Returns ``{"hypotheses", "references", "source_lengths", "nll"}``; references are
    decoded from the tokenized targets, as run_translation.py scores them, and source lengths are the untruncated
    token counts."""
    tokenizer = AutoTokenizer.from_pretrained(output_dir)
    model = AutoModelForSeq2SeqLM.from_pretrained(output_dir).eval()
    collator = DataCollatorForSeq2Seq(tokenizer, model=model)
    sources = [source for source, _ in pairs]
    features = tokenizer(sources, truncation=True, max_length=MAX_LENGTH)
    labels = tokenizer(text_target=[target for _, target in pairs], truncation=True, max_length=MAX_LENGTH)["input_ids"]
    order = sorted(range(len(pairs)), key=lambda i: len(features["input_ids"][i]))  # little padding per batch
    hypotheses: list[str] = [""] * len(pairs)
    loss_sum, token_count = 0.0, 0
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        batch = collator(
            [
                {
                    "input_ids": features["input_ids"][i],
                    "attention_mask": features["attention_mask"][i],
                    "labels": labels[i],
                }
                for i in chunk
            ]
        )
        tokens = int((batch["labels"] != -100).sum())
        loss_sum += float(model(**batch).loss) * tokens
        token_count += tokens
        generated = model.generate(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            max_length=MAX_LENGTH,
            num_beams=num_beams,
            do_sample=False,
            **({"length_penalty": BEAM_LENGTH_PENALTY} if num_beams > 1 else {}),
        )
        for i, text in zip(chunk, tokenizer.batch_decode(generated, skip_special_tokens=True)):
            hypotheses[i] = text.strip()
    references = [text.strip() for text in tokenizer.batch_decode(labels, skip_special_tokens=True)]
    lengths = [len(ids) for ids in tokenizer(sources, add_special_tokens=False)["input_ids"]]
    return {
        "hypotheses": hypotheses,
        "references": references,
        "source_lengths": lengths,
        "nll": loss_sum / token_count,
    }


def in_range(length: int, bounds: tuple[int, int | None]) -> bool:
    low, high = bounds
    return length >= low and (high is None or length <= high)


def bleu(metric, translations: dict, bounds: tuple[int, int | None] = (1, None)) -> float:
    """Corpus BLEU (sacreBLEU) of the sentences whose source length lies in ``bounds`` (NaN if there are none)."""
    chosen = [i for i, n in enumerate(translations["source_lengths"]) if in_range(n, bounds)]
    if not chosen:
        return float("nan")
    return metric.compute(
        predictions=[translations["hypotheses"][i] for i in chosen],
        references=[[translations["references"][i]] for i in chosen],
    )["score"]


def bucket_label(bounds: tuple[int, int | None]) -> str:
    low, high = bounds
    return f"{low}+" if high is None else f"{low}–{high}"


# --------------------------------------------------------------------------------------------------------------
# The claim
# --------------------------------------------------------------------------------------------------------------


def main(argv=None) -> Path:
    args = parse_args(__doc__.splitlines()[0], argv, max_seeds=MAX_SEEDS)
    with torch_threads(args):
        return claim(args)


def claim(args) -> Path:
    clock = time.perf_counter(), cpu_seconds(), os.getloadavg()[0]  # wall, CPU, load at the start
    files = translation_files(args.quick)
    pairs = read_pairs(files[1])[:SCORED]
    hidden, steps = (16, 8) if args.quick else (RNN_HIDDEN, RNN_STEPS)
    metric = load_metric("sacrebleu")

    # runs: every setting × seed, ``args.processes`` side by side, one shared vocabulary; more seeds for every
    # setting while a part is undecided (``until_decided``), each setting's runs in seed order
    results: dict[tuple[str, str], list[dict]] = {setting: [] for setting in SETTINGS}
    with tempfile.TemporaryDirectory(prefix="rnn_attention_") as scratch:
        tokenizer = shared_tokenizer(files, Path(scratch) / "tokenizer")

        def run(seeds: list[int]) -> None:
            jobs = [
                (
                    rnn_flags(cell, attention, hidden) + translation_flags(files, steps, args.quick, tokenizer),
                    str(Path(scratch) / f"{cell}-{attention}-seed{seed}"),
                    seed,
                    pairs,
                )
                for seed in seeds
                for cell, attention in SETTINGS
            ]
            for (cell, attention), run in zip(
                SETTINGS * len(seeds), in_processes(train_and_translate, jobs, args.processes)
            ):
                results[(cell, attention)].append(run)

        report = until_decided(args, run, lambda: judge(args, results, metric, hidden, steps, len(pairs)))
    # pictures, once, from every seed: BLEU against length (mean ± std band), training curves of the first seed
    counts, bucket_bleu, *_ = bleu_by_length(results, metric)
    plot_bleu_by_length(report, bucket_bleu, counts, args.output_dir)
    plot_training_curves(
        report,
        {setting_name(*s): runs[0]["log_history"] for s, runs in results.items()},
        "RNN seq2seq",
        args.output_dir,
    )
    report.notes.append(load_note(clock[1], clock[2], args.processes))
    return report.write(args, time.perf_counter() - clock[0])


def judge(args, results: dict, metric, hidden: int, steps: int, scored: int) -> ClaimReport:
    """The page (table, verdicts, notes; no pictures) of every seed in ``results``."""
    counts, bucket_bleu, overall, ends, ratio = bleu_by_length(results, metric)
    report = rnn_attention_page(args, hidden, steps, scored, counts)
    for setting in SETTINGS:
        report.add_row(
            setting_name(*setting),
            *(fmt(bucket_bleu[setting][b], 1) for b in BUCKETS),
            fmt(overall[setting], 1),
            fmt(ratio[setting], 2),
            fmt([run["translations"]["nll"] for run in results[setting]], 3),
            fmt([run["step_seconds"] for run in results[setting]], 0),
        )
    attention_verdicts(report, ratio, ends, counts)
    add_rule_and_history_notes(report)
    return report


def bleu_by_length(results: dict, metric) -> tuple[dict, dict, dict, dict, dict]:
    """Sentences per length bucket; per setting, each seed's BLEU per bucket, overall, on the (short, long) ends and
    their long/short ratio."""
    counts = {
        bounds: sum(in_range(n, bounds) for n in results[SETTINGS[0]][0]["translations"]["source_lengths"])
        for bounds in BUCKETS + (SHORT, LONG)
    }
    bucket_bleu = {
        setting: {bounds: [bleu(metric, run["translations"], bounds) for run in runs] for bounds in BUCKETS}
        for setting, runs in results.items()
    }
    overall = {setting: [bleu(metric, run["translations"]) for run in runs] for setting, runs in results.items()}
    ends = {
        setting: [(bleu(metric, run["translations"], SHORT), bleu(metric, run["translations"], LONG)) for run in runs]
        for setting, runs in results.items()
    }
    # (NaN where the short sentences score under 1 BLEU: the ratio of two near-zero scores means nothing)
    ratio = {
        setting: [long / short if short >= 1.0 else float("nan") for short, long in pairs_]
        for setting, pairs_ in ends.items()
    }
    return counts, bucket_bleu, overall, ends, ratio


def rnn_attention_page(args, hidden: int, steps: int, scored: int, counts: dict) -> ClaimReport:
    data = (
        "training/data/de_en (embedded sample)"
        if args.quick
        else "gettext-de-en (25,537 training pairs, 2,000 validation pairs: Debian UI strings)"
    )
    return ClaimReport(
        name="rnn_attention",
        title="Bahdanau et al. 2015, Fig. 2: attention keeps BLEU up on long sentences",
        claim="An RNN encoder-decoder without attention (one fixed-size summary of the source) degrades as source "
        "sentences get longer; with Bahdanau (additive) or Luong (general) attention BLEU holds up.",
        setting=f"German→English, {data}; "
        f"`run_translation.py --model_type scratch-rnn`, one layer each side, hidden size {hidden}, shared "
        f"WordPiece vocabulary ({VOCABULARY:,}, lower-cased), no attention = the paper's RNNencdec (Cho et al. 2014: "
        "the encoder's final state read at every decoder step, `attention_type=fixed-context`), Bahdanau attention "
        f"and RNNencdec with the paper's {BAHDANAU_OUTPUT} "
        f"deep output (appendix A.2.2), embeddings initialised with std 0.1, no dropout, {steps} "
        f"steps of batch {16 if args.quick else BATCH} (Adam, lr {RNN_LEARNING_RATE:g}, linear decay, length-grouped "
        "batches; "
        "'train CPU s': CPU seconds of the optimizer steps of one run, one thread); "
        f"BLEU = sacreBLEU on greedy translations of all {scored} validation pairs, grouped by "
        "source length in tokens (the column header gives the sentence count).",
        header=["setting"]
        + [f"BLEU {bucket_label(b)} tok (n={counts[b]})" for b in BUCKETS]
        + ["BLEU all", "BLEU long/short", "val. loss", "train CPU s"],
    )


# what the papers reported for each part (the ``paper`` cell of the verdict table)
PAPER_NO_ATTENTION = (
    "Bahdanau et al. Fig. 2: RNNencdec-30 and -50 (no attention) lose BLEU steeply as sentences grow longer "
    "(En→Fr, WMT'14 test)"
)
PAPER_ATTENTION = {
    "bahdanau": "Bahdanau et al. Fig. 2 and §5.1: RNNsearch-50 shows no deterioration even on sentences of 50 words "
    "or more, unlike RNNencdec",
    "luong-general": "Luong et al. 2015 Fig. 6 (En→De): the attentional models hold their BLEU better than the "
    "non-attentional one as sentences grow longer",
}


def attention_verdicts(report: ClaimReport, ratio: dict, ends: dict, counts: dict) -> None:
    """Without attention: 1 − long/short BLEU ratio, one-sample interval above 0. With attention: the paired
    (by seed) difference of the ratios, with minus without, above 0."""
    short, long = bucket_label(SHORT), bucket_label(LONG)
    for cell in CELLS:
        plain = ratio[(cell, NO_ATTENTION)]
        loss = mean_interval([1.0 - r for r in plain])
        report.verdict(
            f"{cell.upper()} without attention: BLEU falls on long sentences",
            decide(loss),
            f"effect: 1 − BLEU {long} tok / BLEU {short} tok; ratio {fmt(plain)} (n={counts[LONG]} vs "
            f"{counts[SHORT]} sentences)",
            paper=PAPER_NO_ATTENTION,
            interval=loss,
        )
        for attention in ("bahdanau", "luong-general"):
            attended = ratio[(cell, attention)]
            report.verdict(
                f"{cell.upper()} with {ATTENTIONS[attention]} attention holds up better than without",
                above(attended, plain),
                f"effect: long/short BLEU ratio with − without; {fmt(attended)} vs {fmt(plain)}; BLEU on {long} "
                f"tok {fmt([long_bleu for _, long_bleu in ends[(cell, attention)]], 1)} vs "
                f"{fmt([long_bleu for _, long_bleu in ends[(cell, NO_ATTENTION)]], 1)}",
                paper=PAPER_ATTENTION[attention],
            )


def add_rule_and_history_notes(report: ClaimReport) -> None:
    short, long = bucket_label(SHORT), bucket_label(LONG)
    report.notes.append(
        "Each part's effect: without attention, 1 − the long/short BLEU ratio (one-sample t interval against 0: "
        "BLEU falls on long sentences when it lies above 0); with attention, the long/short ratio with attention − "
        "without, paired by seed (the same seeds fix both runs' data order). A seed whose short sentences score "
        "under 1 BLEU has no ratio (n/a), and a part with one is undecided."
    )
    report.notes.append(
        "Changed in this run (issue 50): the verdict rule. Every part is decided on a 95 % t interval of its effect "
        "(paired by seed where two settings are compared), with three outcomes (holds, does not hold, undecided), "
        "and every setting gets more seeds while a part is undecided, up to the page's budget: up to "
        f"{MAX_SEEDS} seeds per setting ≈ {MAX_SEEDS * MINUTES_PER_SEED:.0f} min alone on 2 cores. The earlier "
        "notes' 'held' / 'not held' used the old rules: without attention, the ratio's mean + std under 1; with "
        "attention, a mean lead larger than the larger of the two seed standard deviations."
    )
    report.notes.append(
        f"'long' = sources of {long} tokens, 'short' = {short} tokens, each scored as one corpus. Sentences under 6 "
        "tokens are left out of 'short': they have few or no 4-grams, so BLEU scores them low whatever the model."
    )
    report.notes.append(
        "Sources and references are cut to 40 tokens (`MAX_LENGTH`) in training and in scoring, and translations end "
        "at 40 tokens: 84 of the 2,000 validation sources are longer (counted with a freshly trained vocabulary; all "
        "in the 21+ bucket, about 15 % of it), and those are translated from, and scored against, their first 40 "
        "tokens. This holds for every setting alike."
    )
    report.notes.append(
        "Changed after trial runs, before the full run: lr 1e-2 (not 3e-3) and embeddings drawn with std 0.1 (not "
        "the config's 0.02), no dropout — the first trials stayed on the unigram plateau (validation loss ≈ 5.7, "
        "BLEU 0) for 300 steps; 'short' starts at 6 tokens (a trial scored 2.6 BLEU on 1–5-token sentences for a "
        "model at 5.3 BLEU overall)."
    )
    report.notes.append(
        "Changed for this second full run, after the first one (200 steps of batch 32, about a quarter of an epoch: "
        "BLEU 2–5, models that barely translated, so the claim could not be tested): 600 steps of batch 64 (1.5 "
        "epochs), all 2,000 validation pairs scored (not the first 1,000), one vocabulary trained before the runs "
        "(as run_translation.py trains its own), runs two at a time in single-thread processes, and one layer each "
        "side set explicitly — the first page said one layer, but the training script's default size preset "
        "('tiny') had given two. Chosen from two 600-step trial runs scored on the first 1,000 validation pairs: "
        "GRU + Luong-general BLEU 28.3 (by length bucket 31 / 40 / 35 / 31 / 24), GRU without attention 10.7 "
        "(3.5 / 10 / 14 / 14 / 8.9) — there the attention model's long/short ratio was the lower one; the verdict "
        "rules were kept as they were. No pairs are filtered (27% of the training pairs hold format placeholders such "
        "as %s; they stay)."
    )
    report.notes.append(
        "Changed for this third full run, after the second (600 steps of batch 64, 1.5 epochs: 2 of 6 parts held, "
        "and 2 parts got other verdicts with seeds 3, 4, 5; the LSTM without attention barely translated, BLEU "
        "2.8 ± 1.1, its long/short ratio 1.56 ± 0.90; overall BLEU of the other settings 8–30): 1800 steps (4.5 "
        "epochs), nothing else. Chosen from one 1800-step trial of every setting (seed 0; overall BLEU, long/short "
        "ratio): LSTM without attention 7.9, 0.61; LSTM + Bahdanau 23.5, 0.57; LSTM + Luong-general 37.6, 0.67; "
        "GRU without attention 14.3, 0.58; GRU + Bahdanau 30.9, 0.56; GRU + Luong-general 29.9, 0.62. Every "
        "setting loses BLEU on long sentences here, with or without attention: long UI strings (help texts) are "
        "harder than short ones whatever the model, so the rule asks attention to lose a clearly smaller share. The "
        "models are still far from converged (Bahdanau et al. trained for days)."
    )
    report.notes.append(
        "Changed for this fourth full run, after the third (3 of 6 parts held, the same verdicts with seeds 3, 4, 5; "
        "BLEU all: LSTM + Bahdanau 22.7 ± 0.3 and GRU + Bahdanau 31.0 ± 0.1, behind Luong-general's 38.6 ± 0.2 and "
        "31.6 ± 1.3; long/short ratios 0.56 ± 0.01 and 0.57 ± 0.02): Bahdanau attention predicts from the paper's "
        "deep output (`bahdanau_output=maxout`: t_t = maxout(U_o s_t + V_o E y_{t-1} + C_o c_t), Bahdanau et al. "
        "eq. 4 and appendix A.2.2) instead of from s_t alone, so the context reaches the prediction directly as in "
        "the paper (and as Luong's s̃_t does); nothing else changed. Trial (seed 0, 1800 steps): BLEU all 35.4 "
        "(LSTM) and 36.7 (GRU), long/short ratio 0.60 and 0.62. The rules stayed as they were."
    )
    report.notes.append(
        "Trial after this run, not adopted: equal training time, as Bahdanau et al. trained every model for about 5 "
        "days (§4.2) — 4200 steps without attention and 3800 with Luong-general, about the CPU time of Bahdanau's "
        "1800 (204–224 CPU s). BLEU all and long/short ratio (seed 0): GRU without attention 16.7, 0.47; LSTM + "
        "Luong-general 41.3, 0.68; GRU + Luong-general 27.1, 0.59; LSTM without attention, seeds 0, 1, 2: 8.7, 11.2, "
        "10.6 and 0.61, 0.65, 0.68 (0.65 ± 0.04). The LSTM without attention still barely translates, and its ratio "
        "is as spread as Luong-general's lead over it, so the LSTM + Luong-general part would still turn on the "
        "seeds; the step counts stayed as they were."
    )
    report.notes.append(
        "Changed for this fifth full run, after the fourth (4 of 6 parts held; LSTM + Luong-general held with seeds "
        "3, 4, 5 only; the LSTM without attention barely translated, BLEU all 7.7 ± 0.2 and 6.1 ± 0.9 with seeds 3, "
        "4, 5, its long/short ratio 0.73 ± 0.07 and 0.59 ± 0.02): the models without attention are the paper's "
        "baseline, RNNencdec (Cho et al. 2014, §2.2 and appendix A; `attention_type=fixed-context`): the "
        "encoder's final state c is read by the decoder at every step, s_t = RNN([y_{t-1}; c], s_{t-1}), and by the "
        "same maxout deep output as Bahdanau attention's, where before (Sutskever et al. 2014) it only started the "
        "decoder. Trial (seed 0, 1800 steps): BLEU all 17.6 (LSTM) and 21.9 (GRU), by length bucket 41.2 / 30.8 / "
        "24.8 / 22.0 / 12.6 and 45.1 / 35.7 / 30.6 / 27.6 / 16.4, long/short ratio 0.48 and 0.51. Nothing else "
        "changed; the rules stayed as they were."
    )


def plot_bleu_by_length(report: ClaimReport, bucket_bleu: dict, counts: dict, output_dir: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 5))
    positions = range(len(BUCKETS))
    colors = {NO_ATTENTION: "tab:red", "bahdanau": "tab:blue", "luong-general": "tab:green"}
    for (cell, attention), per_bucket in bucket_bleu.items():
        stats = [mean_std(per_bucket[b]) for b in BUCKETS]
        means, stds = [m for m, _ in stats], [s for _, s in stats]
        style = "-" if cell == "gru" else "--"
        axis.plot(positions, means, style, marker="o", color=colors[attention], label=setting_name(cell, attention))
        axis.fill_between(
            positions,
            [m - s for m, s in zip(means, stds)],
            [m + s for m, s in zip(means, stds)],
            color=colors[attention],
            alpha=0.12,
        )
    axis.set_xticks(list(positions), [f"{bucket_label(b)}\n(n={counts[b]})" for b in BUCKETS])
    axis.set_xlabel("source sentence length (tokens)")
    axis.set_ylabel("BLEU (greedy, sacreBLEU)")
    axis.set_title("BLEU by source length, German→English (mean ± std over seeds)")
    axis.legend(fontsize=8)
    axis.grid(alpha=0.3)
    report.save_figure(figure, "bleu_by_length", output_dir)


def plot_training_curves(report: ClaimReport, histories: dict[str, list[dict]], family: str, output_dir: str) -> None:
    """One panel per run: training loss and validation loss against the step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = 3
    rows = (len(histories) + columns - 1) // columns
    figure, axes = plt.subplots(rows, columns, figsize=(4 * columns, 3 * rows), squeeze=False)
    for axis, (name, history) in zip(axes.flat, histories.items()):
        train, valid = loss_curves(history)
        if train:
            axis.plot(*zip(*train), label="training loss")
        if valid:
            axis.plot(*zip(*valid), marker="o", label="validation loss")
        axis.set_title(f"{name} (seed 0)", fontsize=9)
        axis.set_xlabel("step")
        axis.legend(fontsize=7)
        axis.grid(alpha=0.3)
    for axis in list(axes.flat)[len(histories) :]:
        axis.set_visible(False)
    figure.suptitle(f"{family}: training vs validation loss")
    report.save_figure(figure, "training_curves", output_dir)


if __name__ == "__main__":
    main()

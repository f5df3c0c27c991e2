"""What every replication shares: its command line (``--quick``, seeds, output folder), running one of the
``training/`` scripts (the only training loop there is), mean ± std over seeds, the Markdown table and the pictures.

A replication script reads top-down: parse the arguments, run each setting for each seed through a training script,
compute the claim's numbers, then ``ClaimReport.write`` the table (with the command that made it, the seeds, the
spread and whether the claim held) and the pictures beside it.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import math
import os
import re
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "replications" / "results"
SHARED_DATA = ROOT.parent / "shared" / "data"  # real text beside the checkout; the quick settings never need it


# --------------------------------------------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------------------------------------------


def parse_args(
    description: str,
    argv: Sequence[str] | None = None,
    extra: Callable[[argparse.ArgumentParser], None] | None = None,
    max_seeds: int = 6,
) -> argparse.Namespace:
    """``--quick`` (tiny settings, one seed, seconds: the CI smoke test), ``--seeds`` (to start with: default 3 for
    the full setting, 1 for --quick), ``--max_seeds`` / ``--seed_step`` (``until_decided``: the cap is the script's
    compute budget, ``max_seeds``), ``--output_dir`` (default replications/results, or a scratch folder under it for
    --quick so a smoke run never overwrites the reported tables), ``--threads``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="tiny settings and one seed (seconds): the CI smoke test")
    parser.add_argument(
        "--seeds", type=int, default=None, help="seeds per setting to start with (default: 3, or 1 with --quick)"
    )
    parser.add_argument(
        "--max_seeds",
        type=int,
        default=None,
        help=f"while a part is undecided, every setting gets --seed_step more seeds, up to this many (default: the "
        f"script's budget, {max_seeds}; 2 with --quick)",
    )
    parser.add_argument(
        "--seed_step", type=int, default=2, help="seeds added per round while a part is undecided (default: 2)"
    )
    parser.add_argument(
        "--first_seed",
        type=int,
        default=0,
        help="the seeds are first_seed, first_seed + 1, …: 3 with --seeds 3 reruns a claim on seeds 3, 4, 5",
    )
    parser.add_argument(
        "--output_dir", default=None, help="where the table and pictures go (default: replications/results)"
    )
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: 1; see torch_threads)")
    parser.add_argument(
        "--processes",
        type=int,
        default=None,
        help="runs trained side by side in separate processes (default: 2, or 1 with --quick; see in_processes)",
    )
    if extra is not None:
        extra(parser)
    args = parser.parse_args(argv)
    if args.seeds is None:
        args.seeds = 1 if args.quick else 3
    if args.seeds < 1:
        raise ValueError(f"--seeds must be at least 1, got {args.seeds}.")
    if args.max_seeds is None:
        args.max_seeds = max(args.seeds, 2 if args.quick else max_seeds)
    if args.max_seeds < args.seeds:
        raise ValueError(f"--max_seeds ({args.max_seeds}) must be at least --seeds ({args.seeds}).")
    if args.seed_step < 1:
        raise ValueError(f"--seed_step must be at least 1, got {args.seed_step}.")
    if args.first_seed < 0:
        raise ValueError(f"--first_seed must be 0 or more, got {args.first_seed}.")
    args.seed_list = list(range(args.first_seed, args.first_seed + args.seeds))
    if args.output_dir is None:
        args.output_dir = str(RESULTS / "quick" if args.quick else RESULTS)
    args.command = "python " + " ".join(
        shlex.quote(part) for part in [_script_path()] + list(sys.argv[1:] if argv is None else argv)
    )
    if args.threads is not None and args.threads < 1:
        raise ValueError(f"--threads must be at least 1, got {args.threads}.")
    if args.processes is None:
        args.processes = 1 if args.quick else 2
    if args.processes < 1:
        raise ValueError(f"--processes must be at least 1, got {args.processes}.")
    Path(args.output_dir).mkdir(parents=True, exist_ok=True)
    return args


def _script_path() -> str:
    script = Path(sys.argv[0]).resolve()
    try:
        return str(script.relative_to(ROOT))
    except ValueError:
        return script.name


# --------------------------------------------------------------------------------------------------------------
# Running a training script
# --------------------------------------------------------------------------------------------------------------


def run_training(
    main: Callable[..., dict],
    arguments: Iterable[str],
    output_dir: str | Path,
    seed: int,
    callbacks: list | None = None,
) -> dict:
    """Run a ``training/run_*.py`` script's ``main`` in-process with ``arguments`` and a fresh ``output_dir``;
    return its results (``{"train": …, "eval": …, "log_history": …, "output_dir": …}``) plus the wall time.
    Logging to files and progress bars are off; everything else is the script's own defaults and flags."""
    arguments = list(arguments) + [
        "--output_dir",
        str(output_dir),
        "--overwrite_output_dir",
        "--seed",
        str(seed),
        "--report_to",
        "none",
        "--disable_tqdm",
        "true",
        "--save_strategy",
        "no",
    ]
    start = time.perf_counter()
    results = main(arguments, callbacks=callbacks)
    results["seconds"] = time.perf_counter() - start
    return results


def run_training_script(script: str, arguments: Iterable[str], output_dir: str | Path, seed: int) -> dict:
    """``run_training`` with the ``main`` of ``training/<script>.py``, named rather than passed, so that
    ``in_processes``' workers can run it."""
    import importlib

    return run_training(importlib.import_module(f"training.{script}").main, arguments, output_dir, seed)


def loss_curves(log_history: list[dict]) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """(step, training loss) and (step, validation loss) points of a Trainer's ``log_history``."""
    train = [(row["step"], row["loss"]) for row in log_history if "loss" in row and "step" in row]
    valid = [(row["step"], row["eval_loss"]) for row in log_history if "eval_loss" in row and "step" in row]
    return train, valid


# --------------------------------------------------------------------------------------------------------------
# Numbers over seeds
# --------------------------------------------------------------------------------------------------------------


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value); (NaN, NaN) when a seed gave no number (an empty
    bucket, a ratio to a near-zero score)."""
    values = [float(v) for v in values]
    if not values:
        raise ValueError("mean_std needs at least one value.")
    if not all(math.isfinite(v) for v in values):
        return math.nan, math.nan
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def fmt(values: Sequence[float], digits: int = 2) -> str:
    """``mean ± std`` of ``values`` with ``digits`` decimals (``n/a`` for non-finite means)."""
    mean, std = mean_std(values)
    if not math.isfinite(mean):
        return "n/a"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


# --------------------------------------------------------------------------------------------------------------
# Verdicts: an interval on the effect a claim is about, and one of three outcomes
# --------------------------------------------------------------------------------------------------------------

CONFIDENCE = 0.95  # two-sided: the interval misses the true effect in 5 % of replications
HOLDS, DOES_NOT_HOLD, UNDECIDED = "holds", "does not hold", "undecided"


@dataclass(frozen=True)
class Interval:
    """A ``confidence`` interval [low, high] around ``estimate`` from ``n`` seeds (per side); ``kind`` says which:
    "paired" (Student's t on the per-seed differences; runs of one seed share their data order and start), "Welch"
    (two independent samples) or "one sample" (against a fixed number such as chance). With one seed it is the
    whole line: one run says nothing about the spread."""

    estimate: float
    low: float
    high: float
    n: int
    kind: str
    confidence: float = CONFIDENCE

    def __str__(self) -> str:
        digits = 3 if max(abs(self.low), abs(self.high), abs(self.estimate)) < 10 else 1
        if not math.isfinite(self.estimate):
            return f"n/a (n={self.n}: a seed gave no number)"
        if not math.isfinite(self.low):
            return f"{self.estimate:+.{digits}f} (n={self.n}: no interval from one seed)"
        return (
            f"{self.estimate:+.{digits}f} [{self.low:+.{digits}f}, {self.high:+.{digits}f}] "
            f"({self.confidence:.0%}, {self.kind}, n={self.n})"
        )


def _t_interval(estimate: float, standard_error: float, freedom: float, n: int, kind: str) -> Interval:
    """estimate ± t_{(1+c)/2, freedom} · standard error; the whole line when there are no degrees of freedom."""
    from scipy import stats

    if not freedom > 0 or not math.isfinite(estimate):
        return Interval(estimate, -math.inf, math.inf, n, kind)
    half = float(stats.t.ppf((1 + CONFIDENCE) / 2, freedom)) * standard_error if standard_error > 0 else 0.0
    return Interval(estimate, estimate - half, estimate + half, n, kind)


def mean_interval(values: Sequence[float], value: float = 0.0) -> Interval:
    """The interval of mean(values) − ``value`` (one-sample t): e.g. accuracy above chance, a ratio under 1."""
    values = [float(v) for v in values]
    mean, std = mean_std(values)
    n = len(values)
    return _t_interval(mean - value, std / math.sqrt(n), n - 1, n, "one sample")


def difference_interval(higher: Sequence[float], lower: Sequence[float], paired: bool = True) -> Interval:
    """The interval of mean(higher) − mean(lower). ``paired`` (the default: every arm of a claim runs on the same
    seeds, which fix the data order and the initialisation where the arms share a shape): Student's t on the per-seed
    differences (``scipy.stats.ttest_rel``'s interval); otherwise Welch's interval with Welch–Satterthwaite degrees
    of freedom (``scipy.stats.ttest_ind(equal_var=False)``'s)."""
    higher, lower = [float(v) for v in higher], [float(v) for v in lower]
    if paired:
        if len(higher) != len(lower):
            raise ValueError(f"paired arms need one value per seed each, got {len(higher)} and {len(lower)}.")
        return replace(mean_interval([a - b for a, b in zip(higher, lower)]), kind="paired")
    (mean_high, std_high), (mean_low, std_low) = mean_std(higher), mean_std(lower)
    n_high, n_low = len(higher), len(lower)
    v_high, v_low = std_high**2 / n_high, std_low**2 / n_low
    if n_high < 2 or n_low < 2:
        freedom = 0.0
    elif v_high + v_low == 0:
        freedom = math.inf
    else:
        freedom = (v_high + v_low) ** 2 / (v_high**2 / (n_high - 1) + v_low**2 / (n_low - 1))
    estimate = mean_high - mean_low
    return _t_interval(estimate, math.sqrt(v_high + v_low), freedom, min(n_high, n_low), "Welch")


def decide(interval: Interval, threshold: float = 0.0, smallest: float | None = None) -> str:
    """The claim is "the effect exceeds ``threshold``" (0: the claimed direction). *holds* when the whole interval
    lies above it; *does not hold* when the whole interval lies below it (the data exclude the claimed direction) or
    below ``smallest``, the least effect that would count as the claim (the data exclude any effect of the claimed
    size); *undecided* otherwise: the interval straddles the threshold."""
    if interval.low > threshold:
        return HOLDS
    least = threshold if smallest is None else max(threshold, smallest)
    if interval.high < least:
        return DOES_NOT_HOLD
    return UNDECIDED


def every(*outcomes: str) -> str:
    """The outcome of a part made of several conditions that must all hold: *does not hold* if any does not,
    *holds* if all do, else *undecided*."""
    if DOES_NOT_HOLD in outcomes:
        return DOES_NOT_HOLD
    return HOLDS if all(outcome == HOLDS for outcome in outcomes) else UNDECIDED


def weakest_step(steps: list[tuple[str, Interval]]) -> tuple[str, Interval, int]:
    """A part made of steps that must all hold (a curve that falls at every step): ``every`` of their outcomes, with
    the interval of the step that decides it and its index — the first step that does not hold, else the first
    undecided one, else the step whose interval comes nearest to its threshold."""
    outcome = every(*(step_outcome for step_outcome, _ in steps))
    if outcome == HOLDS:
        index = min(range(len(steps)), key=lambda i: steps[i][1].low)
    else:
        index = next(i for i, (step_outcome, _) in enumerate(steps) if step_outcome == outcome)
    return outcome, steps[index][1], index


def above(
    higher: Sequence[float], lower: Sequence[float], threshold: float = 0.0, smallest: float | None = None
) -> tuple[str, Interval]:
    """(outcome, interval) of "``higher`` exceeds ``lower`` by more than ``threshold``", paired by seed (``decide``
    for ``smallest``)."""
    interval = difference_interval(higher, lower)
    return decide(interval, threshold, smallest), interval


def above_value(values: Sequence[float], value: float) -> tuple[str, Interval]:
    """(outcome, interval) of "the mean of ``values`` exceeds the fixed number ``value``" (chance, a baseline
    without seeds)."""
    interval = mean_interval(values, value)
    return decide(interval), interval


def shown_above(
    higher: Sequence[float], lower: Sequence[float], chance: float, smallest: float | None = None
) -> tuple[str, Interval]:
    """``above(higher, lower)``, which counts only when ``higher`` is itself above ``chance``: a gap between two runs
    that both stayed at chance (``at_chance_note``) shows nothing at this scale, so it is *undecided* at best."""
    outcome, interval = above(higher, lower, smallest=smallest)
    if outcome == HOLDS and above_value(higher, chance)[0] != HOLDS:
        outcome = UNDECIDED
    return outcome, interval


def until_decided(
    args: argparse.Namespace, run: Callable[[list[int]], None], judge: Callable[[], ClaimReport]
) -> ClaimReport:
    """More seeds where they decide something. ``run(seeds)`` trains every setting on those seeds (adding to what
    the script keeps); ``judge()`` builds the page from every seed run so far (``args.seed_list``). Starting from
    ``args.seed_list``, while a part is *undecided* and fewer than ``args.max_seeds`` seeds ran, every setting gets
    ``args.seed_step`` more seeds (all of them, so the arms stay paired by seed) and the page is judged again. A part
    still undecided at the cap is reported so. The rounds are listed on the page."""
    seeds = list(args.seed_list)
    rounds: list[str] = []
    run(list(seeds))
    while True:
        args.seed_list = list(seeds)
        page = judge()
        undecided = page.undecided()
        room = args.max_seeds - len(seeds)
        if not undecided or room <= 0:
            break
        more = list(range(seeds[-1] + 1, seeds[-1] + 1 + min(args.seed_step, room)))
        added = f"seed {more[0]} was" if len(more) == 1 else f"seeds {', '.join(map(str, more))} were"
        rounds.append(f"{added} added because with {len(seeds)} these parts were undecided: {'; '.join(undecided)}")
        run(more)
        seeds += more
    if rounds:
        page.notes.append("Seed rounds: " + "; ".join(rounds) + ".")
    if undecided:
        page.notes.append(
            f"Still undecided at {len(seeds)} seeds (the cap, --max_seeds {args.max_seeds}): {'; '.join(undecided)}."
        )
    return page


# --------------------------------------------------------------------------------------------------------------
# The report: one table, its pictures, the verdict
# --------------------------------------------------------------------------------------------------------------


RAW_TAG = re.compile(r"(?<!`)(</?[A-Za-z]\w*>)(?!`)")


def as_markdown_text(line: str) -> str:
    """A token such as <s> put in code (outside the line's code spans), so that Markdown, GitHub's and the
    documentation site's alike, shows it instead of reading an HTML tag (``<s>`` strikes the rest of the page
    through)."""
    parts = re.split(r"(`[^`]*`)", line)
    return "".join(part if part.startswith("`") else RAW_TAG.sub(r"`\1`", part) for part in parts)


@dataclass(frozen=True)
class Part:
    """One part of a claim, decided: its name, what the paper reported, the outcome, its interval, the evidence."""

    name: str
    paper: str
    outcome: str
    interval: Interval | None
    evidence: str


VERDICT_HEADER = "| claim | the paper | verdict | effect, 95 % interval | evidence |"
OUTCOME_CELL = {HOLDS: "holds", DOES_NOT_HOLD: "**does not hold**", UNDECIDED: "*undecided*"}
VERDICT_RULE = (
    "Verdicts: *holds* when the whole 95 % interval of the effect lies beyond the part's threshold (0 unless the "
    "evidence names one) in the claimed direction, *does not hold* when it lies wholly on the other side, *undecided* "
    "when it straddles it. Intervals are Student's t on the per-seed differences (every arm runs on the same seeds), "
    "or one-sample t against a fixed number (chance, a baseline without seeds), with n − 1 degrees of freedom; "
    "`replications/common.py` (`difference_interval`, `decide`)."
)


@dataclass
class ClaimReport:
    """One claim's Markdown page: title, the paper's claim, the command, seeds, table rows, verdicts, pictures."""

    name: str  # file stem, e.g. "rnn_attention"
    title: str  # e.g. "Bahdanau et al. 2015, Fig. 2: attention holds up on long sentences"
    claim: str  # what the paper says, one or two sentences
    setting: str  # model sizes, data, steps: what was run
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    verdicts: list[Part] = field(default_factory=list)
    pictures: list[str] = field(default_factory=list)  # file names beside the table
    notes: list[str] = field(default_factory=list)

    def add_row(self, *cells) -> None:
        if len(cells) != len(self.header):
            raise ValueError(f"row has {len(cells)} cells, the table {len(self.header)} columns: {cells}")
        self.rows.append([str(cell) for cell in cells])

    def verdict(
        self,
        part: str,
        outcome: tuple[str, Interval] | str,
        evidence: str,
        paper: str,
        interval: Interval | None = None,
    ) -> None:
        """One row of the verdict table: the claim part, what the paper reported for it, the outcome (``decide``,
        ``above``: *holds*, *does not hold* or *undecided*), the interval it was decided on, the evidence."""
        if isinstance(outcome, tuple):
            outcome, interval = outcome
        if outcome not in (HOLDS, DOES_NOT_HOLD, UNDECIDED):
            raise ValueError(f"a verdict is {HOLDS!r}, {DOES_NOT_HOLD!r} or {UNDECIDED!r}, got {outcome!r}.")
        self.verdicts.append(Part(part, paper, outcome, interval, evidence))

    def undecided(self) -> list[str]:
        return [part.name for part in self.verdicts if part.outcome == UNDECIDED]

    def save_figure(self, figure, stem: str, output_dir: str | Path) -> Path:
        """Save a matplotlib figure as ``<name>_<stem>.png`` beside the table and list it on the page."""
        path = Path(output_dir) / f"{self.name}_{stem}.png"
        figure.tight_layout()
        figure.savefig(path, dpi=110)
        import matplotlib.pyplot as plt

        plt.close(figure)
        self.pictures.append(path.name)
        return path

    def markdown(self, args: argparse.Namespace, seconds: float) -> str:
        lines = [
            f"# {self.title}",
            "",
            f"**Claim.** {self.claim}",
            "",
            f"**Setting.** {self.setting}",
            "",
            "Produced by:",
            "",
            "```bash",
            args.command,
            "```",
            "",
            f"Seeds: {', '.join(str(s) for s in args.seed_list)} ({len(args.seed_list)} per setting; "
            f"{args.seeds} to start with, then up to {args.seed_step} more per round while a part was undecided, up to "
            f"{args.max_seeds}: the page's compute budget). Cells are mean ± sample std over seeds. Wall time: "
            f"{seconds / 60:.1f} min ({os.cpu_count()} CPU cores{', quick setting' if args.quick else ''}).",
            "",
            "| " + " | ".join(self.header) + " |",
            "|" + "---|" * len(self.header),
        ]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        lines += ["", VERDICT_HEADER, "|---|---|---|---|---|"]
        lines += [
            f"| {part.name} | {part.paper} | {OUTCOME_CELL[part.outcome]} | {part.interval or 'n/a'} "
            f"| {part.evidence} |"
            for part in self.verdicts
        ]
        lines += ["", VERDICT_RULE]
        if self.notes:
            lines += [""] + [f"- {note}" for note in self.notes]
        lines += [""] + [f"![{picture}]({picture})" for picture in self.pictures]
        fence = lines.index("```bash")
        lines = [
            *map(as_markdown_text, lines[:fence]),
            *lines[fence : fence + 3],
            *map(as_markdown_text, lines[fence + 3 :]),
        ]
        return "\n".join(lines) + "\n"

    def write(self, args: argparse.Namespace, seconds: float) -> Path:
        """Write ``<output_dir>/<name>.md`` and print it."""
        path = Path(args.output_dir) / f"{self.name}.md"
        text = self.markdown(args, seconds)
        path.write_text(text, encoding="utf-8")
        print(text)
        return path


# --------------------------------------------------------------------------------------------------------------
# Shakespeare data for the pre-training claims (BERT, GPT-1): a corpus disjoint from the fine-tuning plays
# --------------------------------------------------------------------------------------------------------------

TASK_PLAYS = ("hamlet", "macbeth", "romeo_and_juliet")  # the plays of the embedded fine-tuning tasks (training/data)


def shakespeare_folder() -> Path:
    """``../shared/data/shakespeare`` (one .txt per work), or a ValueError saying it is missing."""
    folder = SHARED_DATA / "shakespeare"
    if not folder.is_dir() or not any(folder.glob("*.txt")):
        raise ValueError(
            f"The full setting reads the Shakespeare corpus in {folder} (one .txt per work), which is missing: "
            "put it there, or run with --quick (embedded data only)."
        )
    return folder


def write_pretraining_corpus(
    folder: str | Path,
    max_chars: int,
    validation_works: Sequence[str] = ("julius_caesar", "twelfth_night"),
    held_out: Sequence[str] = TASK_PLAYS,
) -> tuple[Path, Path]:
    """Write ``train.txt`` / ``validation.txt`` under ``folder``: the works of ``shakespeare_folder()`` except
    ``held_out`` (the fine-tuning plays: the pre-training text stays disjoint from the tasks, as BooksCorpus is from
    GLUE), in alphabetical order until the training text holds ``max_chars`` (about what the steps will read: less
    tokenizing), one document per work, separated by a line ``=====`` (run_pretraining's document format; run_mlm
    and run_clm read the same files as plain text)."""
    works = sorted(path for path in shakespeare_folder().glob("*.txt") if path.stem not in held_out)
    texts = {"train": [], "validation": []}
    for path in works:
        split = "validation" if path.stem in validation_works else "train"
        if split == "validation" or sum(map(len, texts["train"])) < max_chars:
            texts[split].append(path.read_text(encoding="utf-8").strip())
    paths = []
    for split in ("train", "validation"):
        text = "\n=====\n".join(texts[split])
        paths.append(Path(folder) / f"{split}.txt")
        paths[-1].write_text(text + "\n", encoding="utf-8")
    return paths[0], paths[1]


def task_lines(quick: bool) -> list[tuple[list[list[str]], list[list[str]]]]:
    """The lines of verse the single-line tasks (*word order*, *phrase order*) are built from, as lists of words:
    one ``(training lines, validation lines)`` pair per task play (``TASK_PLAYS``, never in the pre-training text),
    the first 80 % of each play's lines for training and the rest for validation (no line in both). Lines of 6–14
    words, lower-cased and stripped of punctuation, so that only the order of the words tells. --quick: the
    embedded play excerpts (``training/data/documents``), which come split already."""
    import re

    def verse_lines(text: str) -> list[list[str]]:
        lines = []
        for line in text.splitlines():
            words = [word for word in (word.strip("'") for word in re.findall(r"[a-z']+", line.lower())) if word]
            if 6 <= len(words) <= 14 and not line.strip().isupper():
                lines.append(words)
        return lines

    if quick:
        documents = ROOT / "training" / "data" / "documents"
        train, validation = (
            verse_lines((documents / f"{split}.txt").read_text(encoding="utf-8")) for split in ("train", "validation")
        )
        return [(train, validation)]
    parts = []
    for play in TASK_PLAYS:
        lines = verse_lines((shakespeare_folder() / f"{play}.txt").read_text(encoding="utf-8"))
        parts.append((lines[: len(lines) * 4 // 5], lines[len(lines) * 4 // 5 :]))
    return parts


def word_order_rows(quick: bool, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """Training and validation rows ``{"text", "label"}`` of *word order*, a CoLA-like acceptability task (Warstadt
    et al. 2019, in GLUE, on which both BERT and GPT-1 report): is this line of verse as Shakespeare wrote it
    ("as written"), or are its words in a random order ("shuffled")? Each line of ``task_lines`` appears once, as
    written or shuffled by a seeded coin, and both classes draw their words from the same lines — a bag-of-words
    model is at chance by construction."""
    import random

    rng = random.Random(seed)
    splits: tuple[list[dict], list[dict]] = ([], [])
    for part in task_lines(quick):
        for lines, rows in zip(part, splits):
            for words in lines:
                if rng.random() < 0.5:
                    rows.append({"text": " ".join(words), "label": "as written"})
                    continue
                shuffled = list(words)
                while shuffled == words:
                    rng.shuffle(shuffled)
                rows.append({"text": " ".join(shuffled), "label": "shuffled"})
    for rows in splits:
        rng.shuffle(rows)
    return splits


def write_jsonl(path: str | Path, rows: Sequence[dict]) -> Path:
    """One JSON object per line (the format the training scripts read with ``--train_file``)."""
    import json

    Path(path).write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return Path(path)


def higher_mean(accuracy: dict, keys: Sequence) -> object:
    """The key of ``accuracy`` (one value per seed) among ``keys`` with the higher mean: a baseline at its better
    setting, e.g. random init at its better learning rate."""
    return max(keys, key=lambda key: mean_std(accuracy[key])[0])


def plot_loss_curves(report: ClaimReport, runs: dict[str, dict], stem: str, output_dir: str | Path) -> Path:
    """One panel per run (``{title: run_training's result}``): training and validation loss against the step."""
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(runs), figsize=(5 * len(runs), 3.8), squeeze=False)
    for axis, (title, run) in zip(axes[0], runs.items()):
        train, valid = loss_curves(run["log_history"])
        valid = list(dict(valid).items())  # one point per step: the final evaluation repeats the last step's
        if train:
            axis.plot(*zip(*train), label="training loss")
        if valid:
            axis.plot(*zip(*valid), marker="o", label="validation loss")
        axis.set(title=title, xlabel="step", ylabel="loss")
        axis.legend()
    return report.save_figure(figure, stem, output_dir)


def plot_grouped_bars(
    report: ClaimReport,
    values: dict[str, dict[str, Sequence[float]]],
    stem: str,
    output_dir: str | Path,
    title: str,
    ylabel: str,
    reference: dict[str, float] | None = None,
) -> Path:
    """Bars of mean ± std over seeds: ``values[series][group]`` lists one number per seed; ``reference`` draws a
    dashed line per group (e.g. chance accuracy)."""
    import matplotlib.pyplot as plt

    groups = list(next(iter(values.values())))
    figure, axis = plt.subplots(figsize=(max(7, 3 * len(groups)), 4.2))
    width = 0.8 / len(values)
    for i, (series, by_group) in enumerate(values.items()):
        stats = [mean_std(by_group[group]) for group in groups]
        offsets = [g - 0.4 + (i + 0.5) * width for g in range(len(groups))]
        axis.bar(offsets, [m for m, _ in stats], width, yerr=[s for _, s in stats], capsize=4, label=series)
    for g, group in enumerate(groups):
        if reference and group in reference:
            axis.hlines(
                reference[group],
                g - 0.45,
                g + 0.45,
                colors="grey",
                linestyles="dashed",
                label="chance" if g == 0 else None,
            )
    axis.set_xticks(range(len(groups)), groups)
    axis.set_ylabel(ylabel)
    axis.set_title(title, fontsize="medium")
    axis.legend(fontsize="small")
    return report.save_figure(figure, stem, output_dir)


@contextlib.contextmanager
def torch_threads(args: argparse.Namespace):
    """Run the claim on ``--threads`` torch threads, one by default (tiny models on a shared 2-core machine are
    dominated by thread synchronisation: measured 110 s on two threads vs 24 s on one under load); restores the
    previous count on exit, so a test process is left as it was."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads or 1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def majority_rate(labels: Sequence) -> float:
    """Accuracy of always answering the most frequent label: the chance level of a classification set."""
    labels = list(labels)
    return max(labels.count(label) for label in set(labels)) / len(labels)


def at_chance_note(accuracy: dict, chance: Callable[[object], float]) -> str | None:
    """A note naming the settings (keys of ``accuracy``: one value per seed) whose accuracy is not clearly above
    their ``chance(key)`` level (``above_value`` does not hold), or None when every setting learned."""
    flat = [key for key, values in accuracy.items() if above_value(values, chance(key))[0] != HOLDS]
    if not flat:
        return None
    names = "; ".join(" / ".join(str(part) for part in (key if isinstance(key, tuple) else (key,))) for key in flat)
    return (
        f"Not clearly above chance (majority class), i.e. fine-tuning learned nothing measurable: {names}. A verdict "
        "whose better side is at chance is *undecided*: the claim was not shown at this scale, nor its opposite."
    )


def in_processes(function: Callable, jobs: Sequence[tuple], processes: int, threads: int | None = None) -> list:
    """``[function(*job) for job in jobs]``, computed by ``processes`` worker processes side by side (``worker_pool``)
    — two single-thread runs use a 2-core machine better than one run on two threads. With ``processes == 1`` (or a
    single job) the jobs run here, one by one."""
    with worker_pool(1 if len(jobs) <= 1 else min(processes, len(jobs)), threads) as pool:
        return list(pool.map(function, *zip(*jobs))) if jobs else []


@contextlib.contextmanager
def worker_pool(processes: int, threads: int | None = None):
    """An executor (``submit``, ``map``) of ``processes`` worker processes, one torch thread each unless ``threads``
    says otherwise, for scripts whose later runs depend on earlier results: they submit them as soon as they are
    known, and the workers never wait for a whole batch to finish. Functions must be importable at module level (the
    workers are spawned, not forked: a forked child of a process that already ran OpenMP kernels can hang). With
    ``processes == 1`` every job runs here, in this process, when it is submitted."""
    if processes == 1:
        yield _InThisProcess()
        return
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(
        max_workers=processes, mp_context=context, initializer=_worker_threads, initargs=(threads or 1,)
    ) as pool:
        yield pool


class _InThisProcess(concurrent.futures.Executor):
    """``worker_pool(1)``: runs each submitted job at once, here (an error is raised at once too), and hands back
    its finished future; ``map`` is the Executor's own, built on ``submit``."""

    def submit(self, function: Callable, /, *args, **kwargs) -> concurrent.futures.Future:
        future = concurrent.futures.Future()
        future.set_result(function(*args, **kwargs))
        return future


def _worker_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and of its finished child processes (``in_processes``' workers)."""
    import resource

    return sum(
        getattr(resource.getrusage(who), field)
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        for field in ("ru_utime", "ru_stime")
    )


def machine_note(load_at_start: float) -> str:
    """The script's CPU time and the machine's load beside its wall time: on a shared machine the wall time depends
    on the other jobs, the CPU time much less. ``load_at_start``: ``os.getloadavg()[0]`` when the script began."""
    return (
        f"CPU time {cpu_seconds() / 60:.1f} min (this process and its workers); 1-minute load average "
        f"{load_at_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end on this {os.cpu_count()}-core machine "
        "shared with other jobs"
    )

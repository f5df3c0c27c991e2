"""What every replication shares: its command line (``--quick``, seeds, output folder), running one of the
``training/`` scripts (the only training loop there is), mean ± std over seeds, the Markdown table and the pictures.

A replication script reads top-down: parse the arguments, run each setting for each seed through a training script,
compute the claim's numbers, then ``ClaimReport.write`` the table (with the command that made it, the seeds, the
spread and whether the claim held) and the pictures beside it.
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "replications" / "results"
SHARED_DATA = ROOT.parent / "shared" / "data"  # real text beside the checkout; the quick settings never need it


# --------------------------------------------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------------------------------------------


def parse_args(description: str, argv: Optional[Sequence[str]] = None,
               extra: Optional[Callable[[argparse.ArgumentParser], None]] = None) -> argparse.Namespace:
    """``--quick`` (tiny settings, one seed, seconds: the CI smoke test), ``--seeds`` (default 3 for the full
    setting, 1 for --quick), ``--output_dir`` (default replications/results, or a scratch folder under it for
    --quick so a smoke run never overwrites the reported tables), ``--threads``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="tiny settings and one seed (seconds): the CI smoke test")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per setting (default: 3, or 1 with --quick)")
    parser.add_argument("--output_dir", default=None, help="where the table and pictures go (default: replications/results)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    if extra is not None:
        extra(parser)
    args = parser.parse_args(argv)
    if args.seeds is None:
        args.seeds = 1 if args.quick else 3
    if args.seeds < 1:
        raise ValueError(f"--seeds must be at least 1, got {args.seeds}.")
    if args.output_dir is None:
        args.output_dir = str(RESULTS / "quick" if args.quick else RESULTS)
    args.command = "python " + " ".join(shlex.quote(part) for part in [_script_path()] + list(
        sys.argv[1:] if argv is None else argv))
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
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


def run_training(main: Callable[..., dict], arguments: Iterable[str], output_dir: str | Path, seed: int,
                 callbacks: Optional[list] = None) -> dict:
    """Run a ``training/run_*.py`` script's ``main`` in-process with ``arguments`` and a fresh ``output_dir``;
    return its results (``{"train": …, "eval": …, "log_history": …, "output_dir": …}``) plus the wall time.
    Logging to files and progress bars are off; everything else is the script's own defaults and flags."""
    arguments = list(arguments) + [
        "--output_dir", str(output_dir), "--overwrite_output_dir", "--seed", str(seed), "--report_to", "none",
        "--disable_tqdm", "true", "--save_strategy", "no",
    ]
    start = time.perf_counter()
    results = main(arguments, callbacks=callbacks)
    results["seconds"] = time.perf_counter() - start
    return results


def loss_curves(log_history: list[dict]) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """(step, training loss) and (step, validation loss) points of a Trainer's ``log_history``."""
    train = [(row["step"], row["loss"]) for row in log_history if "loss" in row and "step" in row]
    valid = [(row["step"], row["eval_loss"]) for row in log_history if "eval_loss" in row and "step" in row]
    return train, valid


# --------------------------------------------------------------------------------------------------------------
# Numbers over seeds
# --------------------------------------------------------------------------------------------------------------


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value)."""
    values = [float(v) for v in values]
    if not values:
        raise ValueError("mean_std needs at least one value.")
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def fmt(values: Sequence[float], digits: int = 2) -> str:
    """``mean ± std`` of ``values`` with ``digits`` decimals (``n/a`` for non-finite means)."""
    mean, std = mean_std(values)
    if not math.isfinite(mean):
        return "n/a"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


# --------------------------------------------------------------------------------------------------------------
# The report: one table, its pictures, the verdict
# --------------------------------------------------------------------------------------------------------------


@dataclass
class ClaimReport:
    """One claim's Markdown page: title, the paper's claim, the command, seeds, table rows, verdicts, pictures."""

    name: str  # file stem, e.g. "rnn_attention"
    title: str  # e.g. "Bahdanau et al. 2015, Fig. 2: attention holds up on long sentences"
    claim: str  # what the paper says, one or two sentences
    setting: str  # model sizes, data, steps: what was run
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    verdicts: list[tuple[str, bool, str]] = field(default_factory=list)  # (claim part, held?, evidence)
    pictures: list[str] = field(default_factory=list)  # file names beside the table
    notes: list[str] = field(default_factory=list)

    def add_row(self, *cells) -> None:
        if len(cells) != len(self.header):
            raise ValueError(f"row has {len(cells)} cells, the table {len(self.header)} columns: {cells}")
        self.rows.append([str(cell) for cell in cells])

    def verdict(self, part: str, held: bool, evidence: str) -> None:
        self.verdicts.append((part, bool(held), evidence))

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
        lines = [f"# {self.title}", "", f"**Claim.** {self.claim}", "", f"**Setting.** {self.setting}", "",
                 "Produced by:", "", "```bash", args.command, "```", "",
                 f"Seeds: {', '.join(str(s) for s in range(args.seeds))} ({args.seeds} per setting); cells are "
                 f"mean ± sample std over seeds. Wall time: {seconds / 60:.1f} min"
                 f" ({os.cpu_count()} CPU cores{', quick setting' if args.quick else ''}).", "",
                 "| " + " | ".join(self.header) + " |", "|" + "---|" * len(self.header)]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        lines += ["", "| claim | held? | evidence |", "|---|---|---|"]
        lines += [f"| {part} | {'yes' if held else '**no**'} | {evidence} |" for part, held, evidence in self.verdicts]
        if self.notes:
            lines += [""] + [f"- {note}" for note in self.notes]
        lines += [""] + [f"![{picture}]({picture})" for picture in self.pictures]
        return "\n".join(lines) + "\n"

    def write(self, args: argparse.Namespace, seconds: float) -> Path:
        """Write ``<output_dir>/<name>.md`` and print it."""
        path = Path(args.output_dir) / f"{self.name}.md"
        text = self.markdown(args, seconds)
        path.write_text(text, encoding="utf-8")
        print(text)
        return path

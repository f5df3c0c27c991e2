"""Run every benchmark present (``benchmarks/bench_*.py``), each in its own process, then collect the tables they
wrote (``benchmarks/results/*.md``) and their plots into ``benchmarks/results/README.md``.

    python benchmarks/run_all.py                     # everything (long: minutes per benchmark on 2 cores)
    python benchmarks/run_all.py --only training_step flops
    python benchmarks/run_all.py --collect-only      # rebuild README.md from the tables already there

bench_shakespeare_char.py times karpathy/nanoGPT's own train.py beside ours: set ``NANOGPT_DIR`` to a checkout
(``git clone https://github.com/karpathy/nanoGPT``), or it stops with that message.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def benchmark_scripts(only: list[str] | None) -> list[Path]:
    scripts = sorted(HERE.glob("bench_*.py"))
    if only:
        scripts = [s for s in scripts if any(name in s.stem for name in only)]
    return scripts


def run(script: Path, timeout: float) -> tuple[str, float]:
    """Run one benchmark; returns (status, seconds). Its output streams through."""
    print(f"\n===== {script.name} =====", flush=True)
    start = time.perf_counter()
    try:
        completed = subprocess.run([sys.executable, str(script)], cwd=HERE.parent, timeout=timeout)
        status = "ok" if completed.returncode == 0 else f"failed (exit {completed.returncode})"
    except subprocess.TimeoutExpired:
        status = f"timed out after {timeout:.0f} s"
    return status, time.perf_counter() - start


def collect(statuses: dict[str, tuple[str, float]]) -> Path:
    """Concatenate every results table (with its plot, when there is one) into results/README.md."""
    RESULTS.mkdir(exist_ok=True)
    parts = [
        "# Benchmark results\n",
        "Written by `python benchmarks/run_all.py`. Every number compares hf_scratch with the transformers "
        "implementation at the same configuration, measured side by side in one process; the ratios are what "
        "count (the machine is shared and noisy).\n",
    ]
    if statuses:
        parts.append("| benchmark | status | wall time (s) |\n|---|---|---|")
        parts += [f"| {name} | {status} | {seconds:.0f} |" for name, (status, seconds) in statuses.items()]
        parts.append("")
    for table in sorted(RESULTS.glob("*.md")):
        if table.name == "README.md":
            continue
        parts.append(table.read_text().strip() + "\n")
        plot = table.with_suffix(".png")
        if plot.exists():
            parts.append(f"![{table.stem}]({plot.name})\n")
    path = RESULTS / "README.md"
    path.write_text("\n".join(parts))
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="substrings of benchmark names to run (default: all)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per benchmark")
    parser.add_argument("--collect-only", action="store_true")
    args = parser.parse_args(argv)
    statuses = {}
    if not args.collect_only:
        for script in benchmark_scripts(args.only):
            statuses[script.stem] = run(script, args.timeout)
    path = collect(statuses)
    print(f"\nwrote {path}")
    for name, (status, seconds) in statuses.items():
        print(f"{name:32s} {status} ({seconds:.0f} s)")
    if any(status != "ok" for status, _ in statuses.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()

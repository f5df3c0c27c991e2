"""Helpers every benchmark uses: threads, timing, side-by-side ratio rows, markdown tables, PNG plots and honest
peak-memory measurement on CPU.

The machine is shared and noisy, so absolute seconds mean little: a benchmark times ours and transformers' *in one
process, interleaved* (``compare``), and reports the ratio. A typical benchmark::

    from common import compare, ratio_row, setup_threads, write_table, bar_plot

    threads = setup_threads()
    times = compare({"ours": step_ours, "transformers": step_ref}, warmup=2, repeats=5)
    rows = [ratio_row("bert tiny train step", times["ours"], times["transformers"])]
    write_table("training_step", "Training step", rows, notes=[f"{threads} threads"])
    bar_plot("training_step", rows, value_key="speed-up", ylabel="transformers time / ours")

Run scripts as ``python benchmarks/bench_x.py`` (this directory is then on ``sys.path``); results land in
``benchmarks/results/<name>.md`` / ``.png``.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import platform
import resource
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

RESULTS_DIR = Path(__file__).resolve().parent / "results"
REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


# --------------------------------------------------------------------------------------------------------------
# Threads and the environment line every table carries
# --------------------------------------------------------------------------------------------------------------


def setup_threads(num_threads: int | None = None) -> int:
    """Fix the number of intra-op threads (env ``BENCH_THREADS``, default 1) and return it.

    One thread by default: on a shared, oversubscribed machine OpenMP threads spin-wait for each other, and a
    2-thread step measured 4.5 s against 0.24 s with one thread (a 4-layer GPT, load average 11 on 2 cores).
    On a quiet machine set ``BENCH_THREADS`` to the number of cores."""
    if num_threads is None:
        num_threads = int(os.environ.get("BENCH_THREADS", 1))
    torch.set_num_threads(num_threads)
    os.environ["OMP_NUM_THREADS"] = str(num_threads)  # for the subprocesses a benchmark starts
    return num_threads


def environment() -> str:
    """One line naming what the numbers were measured on."""
    import transformers

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    gpu = f" · {torch.cuda.get_device_name()} (CUDA {torch.version.cuda})" if torch.cuda.is_available() else ""
    return (
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} · {cpu}, {os.cpu_count()} cores{gpu}, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), transformers {transformers.__version__}"
    )


# --------------------------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------------------------


@dataclass
class Timing:
    """Seconds per call of every repeat; ``median`` is what tables report."""

    seconds: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def spread(self) -> float:
        """(max - min) / median: how noisy the repeats were."""
        return (max(self.seconds) - min(self.seconds)) / self.median if self.seconds else float("nan")


def _timed(fn: Callable[[], object], inner: int) -> float:
    start = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - start) / inner


def time_call(fn: Callable[[], object], warmup: int = 2, repeats: int = 5, inner: int = 1) -> Timing:
    """Call ``fn`` ``warmup`` times untimed, then time ``repeats`` rounds of ``inner`` calls each."""
    return compare({"fn": fn}, warmup=warmup, repeats=repeats, inner=inner)["fn"]


def compare(
    fns: dict[str, Callable[[], object]], warmup: int = 2, repeats: int = 5, inner: int = 1
) -> dict[str, Timing]:
    """Time several callables round-robin (A B A B …), so that a slow phase of the shared machine hits all alike."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    timings = {name: Timing() for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            gc.collect()
            timings[name].seconds.append(_timed(fn, inner))
    return timings


def warmed_up(steps: dict[str, Callable[[], object]], warmup: int) -> dict[str, Callable[[], object]]:
    """The steps whose first ``warmup`` calls (compilation among them) succeed, to time with ``compare(…, warmup=0)``.
    A step that raises (out of memory, a kernel that does not build) is printed with its traceback and left out: a
    hole in the table, not a lost run — what a GPU lent for minutes needs."""
    kept = {}
    for name, step in steps.items():
        try:
            for _ in range(warmup):
                step()
            kept[name] = step
        except Exception:
            traceback.print_exc()
            print(f"{name}: failed during warm-up, left out", flush=True)
    return kept


def train_step_fn(
    model: torch.nn.Module, inputs: dict, lr: float = 1e-4, optimizer: torch.optim.Optimizer | None = None
) -> Callable[[], float]:
    """One training step as a callable: forward (the model computes its loss from ``labels``), backward, AdamW
    (``optimizer``, by default AdamW(lr) over the model's parameters)."""
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr) if optimizer is None else optimizer

    def step() -> float:
        optimizer.zero_grad(set_to_none=True)
        loss = model(**inputs).loss
        loss.backward()
        optimizer.step()
        return loss.item()

    return step


# --------------------------------------------------------------------------------------------------------------
# Accelerators: mixed precision, waiting for the device, peak memory
# --------------------------------------------------------------------------------------------------------------


class Autocast(torch.nn.Module):
    """Runs the wrapped model under ``torch.autocast`` (bf16 training on a GPU); its parameters are the model's."""

    def __init__(self, model: torch.nn.Module, device: str, dtype: torch.dtype):
        super().__init__()
        self.model, self.device, self.dtype = model, str(device), dtype

    def forward(self, **inputs):
        with torch.autocast(self.device.split(":")[0], dtype=self.dtype, enabled=self.dtype != torch.float32):
            return self.model(**inputs)


def synchronize(device) -> None:
    """Wait for the work queued on ``device`` (nothing to wait for on the CPU)."""
    if str(device).startswith("cuda"):
        torch.cuda.synchronize(device)


def synchronized(step: Callable[[], object], device) -> Callable[[], object]:
    """``step`` followed by waiting for the device, so that the clock around it (``compare``) times the device."""

    def run():
        result = step()
        synchronize(device)
        return result

    return run


def device_peak_mib(step: Callable[[], object], device) -> float:
    """Run ``step`` once; on a CUDA device return what it added to the allocator's high-water mark (MiB):
    ``torch.cuda.max_memory_allocated`` during the call minus what was allocated before. NaN elsewhere (on the CPU,
    ``peak_memory_mib`` measures in a fresh process)."""
    if not str(device).startswith("cuda"):
        step()
        return float("nan")
    synchronize(device)
    before = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    step()
    synchronize(device)
    return (torch.cuda.max_memory_allocated(device) - before) / 2**20


# --------------------------------------------------------------------------------------------------------------
# PASS / FAIL checks (the GPU check scripts)
# --------------------------------------------------------------------------------------------------------------

CHECKS: list[str] = []


def report(name: str, ok: bool, detail: str) -> None:
    """Record and print one check as ``PASS: name: detail`` or ``FAIL: …``."""
    CHECKS.append(f"{'PASS' if ok else 'FAIL'}: {name}: {detail}")
    print(CHECKS[-1], flush=True)


def guarded(name: str) -> Callable:
    """Decorator: a check that raises is reported as one FAIL (with the exception's last line), not a crash."""

    def wrap(fn):
        def inner(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception:
                trace = traceback.format_exc()
                print(trace, flush=True)
                report(name, False, "exception: " + trace.strip().splitlines()[-1])

        return inner

    return wrap


def check_summary() -> int:
    """Print the PASS / FAIL counts of the checks so far; return the number of failures."""
    failures = sum(line.startswith("FAIL") for line in CHECKS)
    print(f"{len(CHECKS) - failures} PASS, {failures} FAIL", flush=True)
    return failures


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a − b| in fp32, wherever the two tensors live."""
    return (a.detach().float().cpu() - b.detach().float().cpu()).abs().max().item()


def matrix_products_fn(fn: Callable[[], object]) -> Callable[[], None]:
    """Run ``fn`` once, recording the dense matrix products it dispatches (aten ``mm`` / ``addmm``: the linear
    layers, forward and backward — attention kernels and batched products are left out); return a callable that
    runs only those products again, with the same shapes and memory layouts, on fixed random data. Its time is a
    floor under ``fn``'s: what the step would cost if nothing but these products took any time."""
    from torch.utils._python_dispatch import TorchDispatchMode

    products = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default}
    calls = []

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func in products:
                calls.append((func, [_layout(a) for a in args], dict(kwargs or {})))
            return func(*args, **(kwargs or {}))

    with Recorder():
        fn()
    tensors: dict = {}  # one tensor per distinct layout, as a step reuses its weights

    def materialise(spec):
        if not (isinstance(spec, tuple) and spec and spec[0] == "tensor"):
            return spec
        if spec not in tensors:
            _, size, stride, dtype = spec
            extent = 1 + sum((n - 1) * s for n, s in zip(size, stride))
            tensors[spec] = torch.randn(extent).to(dtype).as_strided(size, stride)
        return tensors[spec]

    replayed = [(func, [materialise(a) for a in args], kwargs) for func, args, kwargs in calls]

    def replay() -> None:
        with torch.no_grad():
            for func, args, kwargs in replayed:
                func(*args, **kwargs)

    return replay


def _layout(x):
    return ("tensor", tuple(x.shape), tuple(x.stride()), x.dtype) if isinstance(x, torch.Tensor) else x


def optimizer_step_fn(model: torch.nn.Module, lr: float = 1e-4) -> Callable[[], None]:
    """AdamW's update alone, over copies of the parameters of ``model`` that have a gradient (run a backward pass
    first) and of those gradients: the same update a training step of ``model`` makes, timed on its own."""
    parameters = []
    for p in model.parameters():
        if p.grad is not None:
            copy = p.detach().clone().requires_grad_(True)
            copy.grad = p.grad.detach().clone()
            parameters.append(copy)
    if not parameters:
        raise ValueError("no parameter has a gradient: run a backward pass of the model before optimizer_step_fn")
    return torch.optim.AdamW(parameters, lr=lr).step


def print_cpu_profile(run: Callable[[], object], row_limit: int = 25) -> None:
    """Call ``run`` once untimed, then once under torch.profiler, and print where the CPU time went (by self time)."""
    from torch.profiler import ProfilerActivity, profile

    run()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=row_limit))


def inference_fn(model: torch.nn.Module, inputs: dict) -> Callable[[], object]:
    """A forward pass in eval mode without autograd, as a callable."""
    model.eval()

    def forward():
        with torch.inference_mode():
            return model(**inputs)

    return forward


# --------------------------------------------------------------------------------------------------------------
# Rows and tables
# --------------------------------------------------------------------------------------------------------------


def ratio_row(case: str, ours: Timing, reference: Timing, unit: str = "ms", **extra) -> dict:
    """A side-by-side row: both medians and the speed-up (reference time / our time; > 1 means we are faster)."""
    scale = {"s": 1.0, "ms": 1e3, "us": 1e6}[unit]
    row = {"case": case}
    row.update(extra)
    row[f"ours ({unit})"] = round(ours.median * scale, 2)
    row[f"transformers ({unit})"] = round(reference.median * scale, 2)
    row["speed-up"] = round(reference.median / ours.median, 3)
    row["noise"] = f"{max(ours.spread, reference.spread):.0%}"
    return row


def markdown_table(rows: list[dict]) -> str:
    """Rows (dicts with the same keys, in order) as a GitHub markdown table."""
    if not rows:
        return "_no rows_\n"
    columns = list(rows[0].keys())
    for row in rows[1:]:
        columns += [key for key in row if key not in columns]
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(str(row.get(column, "")) for column in columns) + " |")
    return "\n".join(lines) + "\n"


def write_table(name: str, title: str, rows: list[dict], notes: list[str] | None = None) -> Path:
    """Write ``results/<name>.md`` (title, environment, table, notes), print it, return its path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    text = f"## {title}\n\n_{environment()}_\n\n{markdown_table(rows)}"
    if notes:
        text += "\n" + "\n".join(f"- {note}" for note in notes) + "\n"
    path = RESULTS_DIR / f"{name}.md"
    path.write_text(text)
    print(text, flush=True)
    return path


# --------------------------------------------------------------------------------------------------------------
# Plots (matplotlib, headless)
# --------------------------------------------------------------------------------------------------------------


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def bar_plot(
    name: str,
    rows: list[dict],
    value_key: str = "speed-up",
    label_key: str = "case",
    ylabel: str = "",
    reference_line: float | None = 1.0,
    title: str = "",
) -> Path:
    """One bar per row (e.g. the speed-up of each case), with a dashed line at ``reference_line``."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(4.0, 1.1 * len(rows) + 2), 3.5))
    ax.bar([str(row[label_key]) for row in rows], [row[value_key] for row in rows], color="tab:blue")
    if reference_line is not None:
        ax.axhline(reference_line, color="gray", linestyle="--", linewidth=1)
    ax.set_ylabel(ylabel or value_key)
    ax.set_title(title or name)
    ax.tick_params(axis="x", labelrotation=30)
    fig.tight_layout()
    return _save(fig, name)


def line_plot(
    name: str,
    x: list,
    series: dict[str, list],
    xlabel: str,
    ylabel: str,
    logx: bool = False,
    logy: bool = False,
    title: str = "",
) -> Path:
    """One line per series over ``x`` (e.g. time against sequence length for ours and transformers')."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for label, values in series.items():
        ax.plot(x[: len(values)], values, marker="o", label=label)
    ax.set_xscale("log" if logx else "linear")
    ax.set_yscale("log" if logy else "linear")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title or name)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _save(fig, name)


def _save(fig, name: str) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.png"
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return path


# --------------------------------------------------------------------------------------------------------------
# Peak memory on CPU: a fresh process per measurement, reading the kernel's resident-set high-water mark
# --------------------------------------------------------------------------------------------------------------


def _status_kib(field_name: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field_name + ":"))


def _reset_peak_rss() -> bool:
    """Linux ≥ 4.0: writing 5 to clear_refs resets VmHWM (the peak RSS) to the current RSS."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _memory_child(setup, args, kwargs, threads, connection) -> None:
    try:
        torch.set_num_threads(threads)
        run = setup(*args, **kwargs)  # build the model and inputs: not counted
        gc.collect()
        if _reset_peak_rss():
            baseline = _status_kib("VmRSS")
            run()
            peak = _status_kib("VmHWM")
        else:  # no clear_refs: fall back to ru_maxrss, the peak since the process started
            baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            run()
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        connection.send(("ok", (peak - baseline) / 1024.0))
    except BaseException as error:  # report, the parent raises
        connection.send(("error", f"{type(error).__name__}: {error}"))
    finally:
        connection.close()


def peak_memory_mib(setup: Callable[..., Callable[[], object]], *args, timeout: float = 900, **kwargs) -> float:
    """Peak resident memory (MiB) that ``run()`` adds, where ``run = setup(*args, **kwargs)``, in a fresh process.

    ``setup`` must be a module-level function (it is pickled into a spawned process); it builds the model and inputs
    and returns the zero-argument callable to measure. Only what ``run()`` adds on top of the resident memory after
    ``setup`` counts (model weights are excluded, activations and temporaries included). Returns MiB as a float.
    """
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe(duplex=False)
    process = context.Process(target=_memory_child, args=(setup, args, kwargs, torch.get_num_threads(), child))
    process.start()
    child.close()
    if not parent.poll(timeout):
        process.kill()
        raise TimeoutError(f"peak_memory_mib: no result after {timeout} s")
    status, value = parent.recv()
    process.join()
    if status != "ok":
        raise RuntimeError(f"peak_memory_mib child failed: {value}")
    return value


def in_repo_path() -> None:
    """Make ``import hf_scratch`` work when the package is not installed (scripts run from a clone)."""
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))

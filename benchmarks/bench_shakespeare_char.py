"""Learning quality and speed side by side with nanoGPT: a character-level GPT on Shakespeare in nanoGPT's CPU
configuration, trained with our ``training/run_clm.py`` (the 🤗 Trainer) and with karpathy/nanoGPT's own
``train.py``, in one run, on the same split (all works but Hamlet for training, the held-out ``hamlet.txt`` for
validation) and the same character vocabulary, eager and compiled.

nanoGPT's CPU setting (its README): 4 layers, 4 heads, 128 dims, block 64, batch 12, 2000 iterations, lr 1e-3 with
100 warmup steps and cosine decay to 1e-4, AdamW β₂ = 0.99, weight decay 0.1, gradient clipping 1.0, dropout 0.
Our run uses the same settings (pre-LN GPT-2 blocks with the exact erf GELU nanoGPT uses).

nanoGPT is not copied into this repository: give a checkout (``git clone https://github.com/karpathy/nanoGPT``).
The benchmark copies it into a temporary folder, writes our split there in its data format
(``data/<dataset>/train.bin``, ``val.bin``: uint16 token ids; ``meta.pkl``: vocab_size, itos, stoi — the ids of our
char tokenizer), runs its ``train.py`` with the README's CPU command line as a subprocess, then scores its final
checkpoint and our saved model with one evaluator: mean cross-entropy (nats/char) over the non-overlapping 64-char
blocks of Hamlet that our Trainer evaluates on.

    python benchmarks/bench_shakespeare_char.py --nanogpt_dir ../nanoGPT [--max_steps 2000] [--arms nanogpt,ours]
    NANOGPT_DIR=../nanoGPT python benchmarks/run_all.py      # the same, among every benchmark
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pickle
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from common import REPO_ROOT, SHARED_DATA, setup_threads, write_table

ARMS = ("nanogpt", "ours", "ours-compiled", "nanogpt-compiled")  # ABBA: eager pair, then compiled pair reversed
BLOCK = 64
NANOGPT_FILES = ("train.py", "model.py", "configurator.py", "config/train_shakespeare_char.py")
# nanoGPT README, "I only have a macbook": its CPU command line (the dataset and output folder are added per run)
NANOGPT_CPU = [
    "config/train_shakespeare_char.py",
    "--device=cpu",
    "--eval_iters=20",
    "--log_interval=1",
    f"--block_size={BLOCK}",
    "--batch_size=12",
    "--n_layer=4",
    "--n_head=4",
    "--n_embd=128",
    "--dropout=0.0",
]
OUR_MODEL = (
    "hidden_size=128,num_hidden_layers=4,num_attention_heads=4,intermediate_size=512,"
    f"max_position_embeddings={BLOCK},layer_norm_placement=pre,hidden_act=gelu,hidden_dropout_prob=0.0,"
    "attention_probs_dropout_prob=0.0,embedding_dropout_prob=0.0"
)


# --------------------------------------------------------------------------------------------------------------
# The split, in our files and in nanoGPT's format
# --------------------------------------------------------------------------------------------------------------


def split_corpus(directory: Path, held_out: str = "hamlet.txt") -> tuple[Path, Path]:
    """All works but ``held_out`` concatenated into train.txt; ``held_out`` is the validation file."""
    plays = sorted(p for p in (SHARED_DATA / "shakespeare").glob("*.txt") if p.name != held_out)
    train = directory / "train.txt"
    train.write_text("\n".join(p.read_text() for p in plays))
    return train, SHARED_DATA / "shakespeare" / held_out


def char_stream(text: str) -> str:
    """The characters run_clm.py reads from a .txt file: 🤗 datasets' text rows (lines without their line break),
    each followed by "\\n" (``training.common.tokenize_text_blocks``)."""
    return "".join(line + "\n" for line in text.splitlines())


def write_nanogpt_data(directory: Path, train_text: str, validation_text: str) -> dict:
    """Write nanoGPT's ``train.bin`` / ``val.bin`` / ``meta.pkl`` (its ``data/shakespeare_char/prepare.py`` format)
    for our split, with the ids of the char tokenizer run_clm.py trains on the same lines (3 special tokens, then
    the sorted characters; a validation character unseen in training is ``<unk>``); each split ends with ``<eos>``
    as our grouped stream does. Returns the meta dictionary."""
    from hf_scratch.tools.tokenization import train_tokenizer

    tokenizer = train_tokenizer(train_text.splitlines(), kind="char")
    stoi = tokenizer.get_vocab()
    meta = {"vocab_size": len(stoi), "itos": {i: s for s, i in stoi.items()}, "stoi": stoi}
    directory.mkdir(parents=True, exist_ok=True)
    for split, text in (("train", train_text), ("val", validation_text)):
        ids = [stoi.get(c, tokenizer.unk_token_id) for c in char_stream(text)] + [tokenizer.eos_token_id]
        np.array(ids, dtype=np.uint16).tofile(directory / f"{split}.bin")
    with open(directory / "meta.pkl", "wb") as f:
        pickle.dump(meta, f)
    return meta


def decode(ids, itos: dict) -> str:
    return "".join(itos[int(i)] for i in ids)


# --------------------------------------------------------------------------------------------------------------
# One evaluator for both models
# --------------------------------------------------------------------------------------------------------------


@torch.no_grad()
def block_loss(logits_of, ids: np.ndarray, batch_size: int = 64) -> float:
    """Mean cross-entropy (nats/char) over the non-overlapping ``BLOCK``-token blocks of ``ids`` (the remainder
    dropped), each block's tokens 1..63 predicted from the tokens before them in the block — what the Trainer's
    eval_loss is for run_clm.py's grouped blocks. ``logits_of(x)`` returns logits for every position of ``x``."""
    blocks = torch.from_numpy(ids[: len(ids) // BLOCK * BLOCK].astype(np.int64)).view(-1, BLOCK)
    total, count = 0.0, 0
    for start in range(0, len(blocks), batch_size):
        batch = blocks[start : start + batch_size]
        logits = logits_of(batch[:, :-1].contiguous())
        total += torch.nn.functional.cross_entropy(
            logits.flatten(0, 1).float(), batch[:, 1:].flatten(), reduction="sum"
        ).item()
        count += batch[:, 1:].numel()
    return total / count


def nanogpt_model_module(checkout: Path):
    """nanoGPT's own model.py (``GPTConfig``, ``GPT``), imported from the checkout as it is (and registered in
    ``sys.modules``, where torch.compile looks its code up)."""
    spec = importlib.util.spec_from_file_location("nanogpt_model", checkout / "model.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def nanogpt_logits(checkout: Path, checkpoint: Path):
    """nanoGPT's model (its model.py, loaded from the checkout) with its checkpoint's weights, as ``logits_of``."""
    module = nanogpt_model_module(checkout)
    saved = torch.load(checkpoint, map_location="cpu", weights_only=False)
    model = module.GPT(module.GPTConfig(**saved["model_args"]))
    model.load_state_dict({k.removeprefix("_orig_mod."): v for k, v in saved["model"].items()})
    model.eval()
    return lambda x: model(x, x)[0], saved["iter_num"]  # with targets it returns logits at every position


def our_logits(run_dir: Path):
    from transformers import AutoModelForCausalLM

    import hf_scratch  # noqa: F401  (registers the families with the Auto classes)

    model = AutoModelForCausalLM.from_pretrained(run_dir).eval()
    return lambda x: model(input_ids=x).logits


# --------------------------------------------------------------------------------------------------------------
# The arms
# --------------------------------------------------------------------------------------------------------------


def check_nanogpt_dir(path) -> Path:
    if path is None:
        raise ValueError(
            "--nanogpt_dir is required: the side-by-side runs karpathy/nanoGPT's own train.py. Get it with "
            "`git clone https://github.com/karpathy/nanoGPT` and pass --nanogpt_dir nanoGPT."
        )
    checkout = Path(path).expanduser().resolve()
    missing = [name for name in NANOGPT_FILES if not (checkout / name).is_file()]
    if missing:
        raise ValueError(
            f"--nanogpt_dir {path} is not a nanoGPT checkout (missing {missing}); get one with "
            "`git clone https://github.com/karpathy/nanoGPT`."
        )
    return checkout


def timed(command: list[str], cwd: Path, log: Path, timeout: float) -> dict:
    """Run ``command``, its output into ``log``; wall time and the load average before and after."""
    print(" ".join(command), flush=True)
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    with open(log, "w") as out:
        process = subprocess.run(
            command,
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=timeout,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )
    wall = time.perf_counter() - start
    if process.returncode != 0:
        raise RuntimeError(f"{command[1]} failed (exit {process.returncode}); its output:\n{log.read_text()[-3000:]}")
    return {"wall": wall, "load": f"{load_before:.1f}→{os.getloadavg()[0]:.1f}"}


def run_nanogpt(checkout: Path, scratch: Path, steps: int, compiled: bool, timeout: float) -> dict:
    """nanoGPT's train.py from a temporary copy of the checkout; its final checkpoint scored on val.bin."""
    work = scratch / ("nanogpt-compiled" if compiled else "nanogpt")
    shutil.rmtree(work, ignore_errors=True)  # a kept --output_dir from an earlier run
    shutil.copytree(checkout, work, ignore=shutil.ignore_patterns(".git"))
    shutil.copytree(scratch / "nanogpt-data", work / "data" / "hf_scratch_split")
    eval_interval = 250 if steps % 250 == 0 else steps  # its config's 250, or one evaluation at the last step
    command = [
        sys.executable,
        "train.py",
        *NANOGPT_CPU,
        f"--compile={compiled}",
        f"--max_iters={steps}",
        f"--lr_decay_iters={steps}",
        f"--eval_interval={eval_interval}",
        "--dataset=hf_scratch_split",
        f"--out_dir={work / 'out'}",
        "--always_save_checkpoint=True",
    ]
    result = timed(command, work, scratch / f"{work.name}.log", timeout)
    log = (scratch / f"{work.name}.log").read_text()
    step_ms = [float(ms) for ms in re.findall(r"^iter \d+: loss [\d.]+, time ([\d.]+)ms", log, re.M)]
    own = re.findall(r"^step (\d+): train loss [\d.]+, val loss ([\d.]+)", log, re.M)
    logits_of, iter_num = nanogpt_logits(work, work / "out" / "ckpt.pt")
    if iter_num != steps:
        raise RuntimeError(f"nanoGPT's checkpoint is from iteration {iter_num}, not {steps}.")
    val = np.fromfile(work / "data" / "hf_scratch_split" / "val.bin", dtype=np.uint16)
    return {
        **result,
        "loop": sum(step_ms) / 1e3,
        "step_ms": statistics.median(step_ms),
        "first_step": step_ms[0] / 1e3,
        "own_val": float(own[-1][1]),
        "val": block_loss(logits_of, val),
    }


def run_ours(scratch: Path, train: Path, validation: Path, steps: int, compiled: bool, timeout: float) -> dict:
    """run_clm.py in a subprocess (this script as its wrapper, timing every optimisation step)."""
    run_dir = scratch / ("ours-compiled" if compiled else "ours")
    clock = scratch / f"{run_dir.name}-steps.json"
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--run_clm_timing_steps",
        str(clock),
        "--model_type",
        "scratch-gpt",
        "--tokenizer_type",
        "char",
        "--config_overrides",
        OUR_MODEL,
        "--train_file",
        str(train),
        "--validation_file",
        str(validation),
        "--max_seq_length",
        str(BLOCK),
        "--per_device_train_batch_size",
        "12",
        "--per_device_eval_batch_size",
        "64",
        "--max_steps",
        str(steps),
        "--learning_rate",
        "1e-3",
        "--warmup_steps",
        "100",
        "--lr_scheduler_type",
        "cosine_with_min_lr",
        "--lr_scheduler_kwargs",
        '{"min_lr": 1e-4}',
        "--adam_beta2",
        "0.99",
        "--weight_decay",
        "0.1",
        "--max_grad_norm",
        "1.0",
        "--logging_steps",
        "50",
        "--eval_strategy",
        "no",
        "--save_strategy",
        "no",
        "--report_to",
        "none",
        "--seed",
        "1337",
        "--dataloader_num_workers",
        "0",
        "--output_dir",
        str(run_dir),
        "--overwrite_output_dir",
        *(["--torch_compile"] if compiled else []),
    ]
    result = timed(command, REPO_ROOT, scratch / f"{run_dir.name}.log", timeout)
    trainer = json.loads((run_dir / "all_results.json").read_text())
    ends = json.loads(clock.read_text())
    step_ms = [1e3 * (b - a) for a, b in zip(ends, ends[1:])]
    stored = pickle.loads((scratch / "nanogpt-data" / "meta.pkl").read_bytes())["stoi"]
    from transformers import AutoTokenizer

    if AutoTokenizer.from_pretrained(run_dir).get_vocab() != stored:
        raise RuntimeError("Our run's char vocabulary differs from the one written for nanoGPT.")
    val = np.fromfile(scratch / "nanogpt-data" / "val.bin", dtype=np.uint16)
    return {
        **result,
        "loop": ends[-1] - ends[0],
        "step_ms": statistics.median(step_ms),
        "first_step": step_ms[0] / 1e3,
        "own_val": trainer["eval_loss"],
        "val": block_loss(our_logits(run_dir), val),
        "run_dir": run_dir,
    }


def run_clm_timing_steps(clock: str, run_clm_args: list[str]) -> None:
    """The worker: run_clm.main with a callback writing the time at training start and after every step."""
    from transformers import TrainerCallback

    sys.path.insert(0, str(REPO_ROOT))
    from training import run_clm

    class StepClock(TrainerCallback):
        def __init__(self):
            self.times: list[float] = []

        def on_train_begin(self, args, state, control, **kwargs):
            self.times.append(time.perf_counter())

        def on_step_end(self, args, state, control, **kwargs):
            self.times.append(time.perf_counter())

        def on_train_end(self, args, state, control, **kwargs):
            Path(clock).write_text(json.dumps(self.times))

    run_clm.main(run_clm_args, callbacks=[StepClock()])


# --------------------------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------------------------


def ratio(ours: dict, theirs: dict, case: str) -> dict:
    return {
        "arm": f"**{case}**",
        "wall time (s)": f"{ours['wall'] / theirs['wall']:.2f}×",
        "training loop (s)": f"{ours['loop'] / theirs['loop']:.2f}×",
        "median step (ms)": f"{ours['step_ms'] / theirs['step_ms']:.2f}×",
        "validation loss (nats/char)": f"{ours['val'] / theirs['val']:.3f}×",
    }


def write_results(results: dict, failures: dict, steps: int, threads: int, vocab_size: int) -> None:
    """The table: one row per arm, then ours / nanoGPT ratios; notes say how each figure was measured."""
    rows = [
        {
            "arm": arm,
            "wall time (s)": round(r["wall"]),
            "training loop (s)": round(r["loop"]),
            "median step (ms)": round(r["step_ms"], 1),
            "first step (s)": round(r["first_step"], 1),
            "validation loss (nats/char)": round(r["val"], 3),
            "own validation figure": round(r["own_val"], 3),
            "load average": r["load"],
        }
        for arm, r in results.items()
    ]
    rows += [{"arm": arm, "wall time (s)": f"failed: {reason}"} for arm, reason in failures.items()]
    for ours, theirs in (("ours", "nanogpt"), ("ours-compiled", "nanogpt"), ("ours-compiled", "nanogpt-compiled")):
        if ours in results and theirs in results:
            rows.append(ratio(results[ours], results[theirs], f"{ours} / {theirs}"))
    notes = [
        f"`python benchmarks/bench_shakespeare_char.py --nanogpt_dir nanoGPT --max_steps {steps}`; arms run "
        f"back to back in the order listed, {threads} thread(s) each (OMP_NUM_THREADS); 2 cores shared with other "
        "jobs, so the ratios of this one run are what counts, not the seconds.",
        f"the same split for both: train = the 41 other works of ../shared/data/shakespeare, validation = hamlet.txt; "
        f"the same {vocab_size}-token char vocabulary (our tokenizer's ids, written into nanoGPT's meta.pkl); "
        f"{steps} optimisation steps each (nanoGPT's loop runs one more after its last evaluation).",
        "validation loss: one evaluator for both — mean cross-entropy over the non-overlapping 64-char blocks of "
        "Hamlet (our Trainer's eval set), nanoGPT scored from its final ckpt.pt. own validation figure: what each run "
        "reports — our Trainer's eval_loss (the same blocks), nanoGPT's estimate on 20 random batches of 12 × 64 "
        "from val.bin.",
        "wall time: the whole subprocess (start-up, data, compilation, training, nanoGPT's evaluation every 250 steps "
        "and checkpoints, our tokenization, final evaluation and save). training loop: first to last step; median "
        "step: one optimisation step including its batch (nanoGPT's logged dt; ours timed by a Trainer callback).",
        "nanoGPT runs its README CPU command line plus --dataset/--out_dir and --always_save_checkpoint=True (so "
        "ckpt.pt is the final model); compiled arms: nanoGPT --compile=True, ours --torch_compile (Inductor).",
    ]
    understated = [
        arm
        for arm in ("ours", "ours-compiled")
        if arm in results and abs(results[arm]["own_val"] * BLOCK / (BLOCK - 1) - results[arm]["val"]) < 2e-3
    ]
    if understated:
        notes.append(
            f"{', '.join(understated)}: the Trainer's eval_loss is {BLOCK - 1}/{BLOCK} of the evaluator's — the "
            f"Trainer divides by all {BLOCK} labels of a block (num_items_in_batch) while the model predicts "
            f"{BLOCK - 1}: "
            "transformers counts labels[..., 1:] only for a model whose loss_type maps to ForCausalLMLoss."
        )
    if "ours-compiled" in results and "nanogpt" in results:
        ours, theirs = results["ours-compiled"], results["nanogpt"]
        met = ours["wall"] <= 0.8 * theirs["wall"] and ours["val"] <= theirs["val"]
        notes.append(
            f"goal (issue #15: ours compiled ≤ 0.8× nanoGPT's wall time in its CPU configuration, at ≤ its validation "
            f"loss): {'met' if met else 'not met'} — {ours['wall'] / theirs['wall']:.2f}× the wall time at "
            f"{ours['val'] / theirs['val']:.3f}× the loss. Outside the training loop ours spends "
            f"{ours['wall'] - ours['loop']:.0f} s (nanoGPT {theirs['wall'] - theirs['loop']:.0f} s); the first "
            f"compiled step takes {ours['first_step']:.0f} s; median steps {ours['step_ms']:.0f} ms vs "
            f"{theirs['step_ms']:.0f} ms."
        )
    write_table(
        "shakespeare_char", "Character-level Shakespeare side by side with nanoGPT (its CPU setting)", rows, notes
    )


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--run_clm_timing_steps"]:
        return run_clm_timing_steps(argv[1], argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--nanogpt_dir",
        default=os.environ.get("NANOGPT_DIR"),
        help="a checkout of https://github.com/karpathy/nanoGPT (default: $NANOGPT_DIR, which run_all.py passes on)",
    )
    parser.add_argument("--max_steps", type=int, default=2000, help="optimisation steps, both sides")
    parser.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, in running order, of {ARMS}")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per arm")
    parser.add_argument("--output_dir", default=None, help="keep the runs here (default: a temporary directory)")
    args = parser.parse_args(argv)
    checkout = check_nanogpt_dir(args.nanogpt_dir)
    arms = [arm.strip() for arm in args.arms.split(",") if arm.strip()]
    if not arms or set(arms) - set(ARMS):
        raise ValueError(f"--arms {args.arms!r}: choose among {ARMS}.")
    if args.max_steps < 1:
        raise ValueError(f"--max_steps {args.max_steps}: give a positive number of steps.")
    threads = setup_threads()
    results = {}
    with tempfile.TemporaryDirectory() as temporary:
        scratch = Path(args.output_dir or temporary).resolve()
        scratch.mkdir(parents=True, exist_ok=True)
        train, validation = split_corpus(scratch)
        meta = write_nanogpt_data(scratch / "nanogpt-data", train.read_text(), validation.read_text())
        failures = {}
        for arm in arms:
            try:
                if arm.startswith("nanogpt"):
                    results[arm] = run_nanogpt(
                        checkout, scratch, args.max_steps, arm.endswith("compiled"), args.timeout
                    )
                else:
                    results[arm] = run_ours(
                        scratch, train, validation, args.max_steps, arm.endswith("compiled"), args.timeout
                    )
                print(arm, {k: v for k, v in results[arm].items() if k != "run_dir"}, flush=True)
            except (
                RuntimeError,
                subprocess.TimeoutExpired,
            ) as error:  # recorded in the table, the other arms still run
                failures[arm] = str(error).strip().splitlines()[-1][:300]
                print(f"{arm} failed: {error}", flush=True)
        if "ours" in results:
            from hf_scratch.tools.viz import plot_training_curves

            try:
                plot_training_curves(
                    REPO_ROOT / "benchmarks" / "results" / "shakespeare_char.png", results["ours"]["run_dir"]
                )
            except ValueError as error:  # a run shorter than logging_steps logs no loss
                print(f"no training curves: {error}")
    write_results(results, failures, args.max_steps, threads, meta["vocab_size"])


if __name__ == "__main__":
    main()

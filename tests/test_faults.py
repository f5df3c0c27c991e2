"""Kill -9 anywhere, lose nothing (issue 16): training killed with SIGKILL at random moments — mid-step, mid-save,
mid-evaluation — and rerun with the same command after each kill ends with the uninterrupted run's weights, bit for
bit (a tiny GPT, and Transformer-XL whose memory the checkpoints carry; under DDP with one of two gloo ranks
killed); after every kill each ``checkpoint-N`` is complete (checkpoints are staged and renamed into place,
``hf_scratch.tools.trainer.ScratchTrainer``); an incomplete checkpoint is skipped, never loaded; a save that fails
midway keeps the previous checkpoint (``save_total_limit`` rotates only after a complete save); an unwritable or full
output folder fails with a clear error before training.

The kill moments come from a seeded generator (``kill_plan``), so a failure reproduces. The killed process parks
at its moment (``tests/fault_worker.py``) and is killed there. Single-process runs are forked from a process that
imported everything once (multiprocessing's forkserver: no interpreter start per run); DDP runs are
``accelerate launch`` jobs. CI runs 5 kills per single-process run and 1 under DDP;
``HF_SCRATCH_LONG_FAULTS=1`` runs 20 and 3.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import multiprocessing
import multiprocessing.forkserver
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file
from transformers import TrainerCallback

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import fault_worker  # noqa: E402

from hf_scratch.tools.trainer import STAGING_PREFIX  # noqa: E402
from training import run_clm  # noqa: E402
from training.checkpoints import checkpoint_problem  # noqa: E402

LONG = os.environ.get("HF_SCRATCH_LONG_FAULTS") == "1"
KILLS = 20 if LONG else 5
DDP_KILLS = 3 if LONG else 1
SEED = 16
TIMEOUT = 300

MAX_STEPS, SAVE_STEPS, EVAL_STEPS = 8, 2, 4
# 12 training blocks in batches of 2: the 8 steps cross an epoch boundary (the sampler's next permutation, and
# Transformer-XL's memory reset, must resume too); dropout stays on (the RNG state must be restored)
TINY = [
    "--model_size",
    "tiny",
    "--tokenizer_type",
    "char",
    "--max_seq_length",
    "32",
    "--max_train_samples",
    "12",
    "--max_eval_samples",
    "4",
    "--per_device_train_batch_size",
    "2",
    "--per_device_eval_batch_size",
    "2",
    "--logging_steps",
    "1",
    "--report_to",
    "none",
    "--use_cpu",
    "--seed",
    "0",
    "--dataloader_pin_memory",
    "false",
    "--disable_tqdm",
    "true",
]
COMMAND = [
    *TINY,
    "--max_steps",
    str(MAX_STEPS),
    "--save_strategy",
    "steps",
    "--save_steps",
    str(SAVE_STEPS),
    "--eval_strategy",
    "steps",
    "--eval_steps",
    str(EVAL_STEPS),
]
GPT = ["--model_type", "scratch-gpt", *TINY]  # the in-process tests below set their own schedule
# files a checkpoint writes through torch.save / TrainerState.save_to_json (see fault_worker): training_args.bin,
# optimizer.pt, scheduler.pt, rng_state.pth, trainer_state.json (+ Transformer-XL's memory)
SAVE_FILES = {"scratch-gpt": 5, "scratch-transfo-xl": 6}


def kill_plan(rng: random.Random, count: int, max_steps: int, files: int) -> list[str]:
    """``count`` kill moments in training order: the phases (save, step, eval) take turns in a shuffled order, and
    kill i falls in the i-th of ``count`` consecutive stretches of the run where it can (evaluations and saves
    happen every few steps only), so the kills spread over the run. A save is killed after a random one of its
    ``files``. Each moment is reachable after the kill before it: the rerun resumes from an older checkpoint."""
    valid = {
        "step": list(range(1, max_steps + 1)),
        "eval": list(range(EVAL_STEPS, max_steps + 1, EVAL_STEPS)),
        "save": list(range(SAVE_STEPS, max_steps + 1, SAVE_STEPS)),
    }
    phases = [("save", "step", "eval")[i % 3] for i in range(count)]  # a single kill is mid-save
    rng.shuffle(phases)
    plan = []
    for i, phase in enumerate(phases):
        low, high = 1 + i * max_steps // count, (i + 1) * max_steps // count
        step = rng.choice([s for s in valid[phase] if low <= s <= high] or valid[phase])
        plan.append((step, fault_worker.PHASES.index(phase), rng.randint(1, files) if phase == "save" else 0))
    return [f"{fault_worker.PHASES[phase]}:{step}" + (f":{file}" if file else "") for step, phase, file in sorted(plan)]


def test_kill_plan_spreads_over_the_run():
    """The plans kill mid-step, mid-evaluation and mid-save, the last kill after a checkpoint exists."""
    for model_type, files in SAVE_FILES.items():
        plan = kill_plan(random.Random(f"{SEED}-{model_type}"), KILLS, MAX_STEPS, files)
        assert {moment.split(":")[0] for moment in plan} == set(fault_worker.PHASES), plan
        assert int(plan[-1].split(":")[1]) > SAVE_STEPS, plan


# ---- running and killing ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def forkserver():
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["fault_worker"])  # imported once; each run is a fork of that process
    # the server imports it from its own sys.path (Python 3.11's forkserver drops ours): pass ours in PYTHONPATH
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(
            "PYTHONPATH", os.pathsep.join(filter(None, [str(REPO / "tests"), str(REPO), os.environ.get("PYTHONPATH")]))
        )
        multiprocessing.forkserver.ensure_running()
    return context


def wait_until_parked(fault_dir: Path, alive, moment: str) -> int:
    """The pid of the process parked at ``moment`` (``fault_worker.park``)."""
    marker, deadline = fault_dir / "parked", time.monotonic() + TIMEOUT
    while not marker.exists():
        assert alive(), f"the run ended without reaching {moment}"
        assert time.monotonic() < deadline, f"{moment} not reached in {TIMEOUT} s"
        time.sleep(0.02)
    return int(marker.read_text())


def run_forked(forkserver, args: list[str], moment: str | None = None, fault_dir: Path | None = None) -> None:
    """Run ``run_clm`` with ``args`` in a fork; with ``moment``, SIGKILL it there."""
    if fault_dir is not None:
        shutil.rmtree(fault_dir, ignore_errors=True)
        fault_dir.mkdir()
    process = forkserver.Process(target=fault_worker.main, args=(args, moment, fault_dir and str(fault_dir)))
    process.start()
    try:
        if moment is not None:
            os.kill(wait_until_parked(fault_dir, process.is_alive, moment), signal.SIGKILL)
        process.join(TIMEOUT)
    finally:
        if process.is_alive():  # the test failed: leave nothing behind
            process.kill()
            process.join()
    assert process.exitcode == (-signal.SIGKILL if moment else 0), (
        f"exit code {process.exitcode} ({moment or 'no kill'})"
    )


def check_after_kill(output_dir: Path, moment: str) -> None:
    """Every checkpoint-N is complete; a save killed midway left its staging folder, not checkpoint-N."""
    for checkpoint in output_dir.glob("checkpoint-*"):
        assert checkpoint_problem(checkpoint) is None, (moment, checkpoint, checkpoint_problem(checkpoint))
    phase, step, *_ = moment.split(":")
    if phase == "save":
        assert (output_dir / f"{STAGING_PREFIX}{step}" / f"checkpoint-{step}").is_dir(), moment
        assert not (output_dir / f"checkpoint-{step}").exists(), moment


def assert_same_weights(reference: Path, resumed: Path) -> None:
    expected, actual = load_file(reference / "model.safetensors"), load_file(resumed / "model.safetensors")
    assert expected.keys() == actual.keys()
    for name in expected:
        assert torch.equal(expected[name], actual[name]), name  # bit for bit
    assert json.loads((resumed / "trainer_state.json").read_text())["global_step"] == MAX_STEPS
    assert not list(resumed.glob(f"{STAGING_PREFIX}*"))


# ---- kill -9 anywhere, one process ------------------------------------------------------------------------------


@pytest.mark.parametrize("model_type", ["scratch-gpt", "scratch-transfo-xl"])
def test_killed_anywhere_and_rerun_ends_bit_identical(model_type, forkserver, tmp_path):
    command = ["--model_type", model_type, *COMMAND]
    run_forked(forkserver, [*command, "--output_dir", str(tmp_path / "uninterrupted")])
    output_dir = tmp_path / "killed"
    plan = kill_plan(random.Random(f"{SEED}-{model_type}"), KILLS, MAX_STEPS, SAVE_FILES[model_type])
    for moment in plan:
        run_forked(forkserver, [*command, "--output_dir", str(output_dir)], moment, tmp_path / "fault")
        check_after_kill(output_dir, moment)
    run_forked(forkserver, [*command, "--output_dir", str(output_dir)])  # the same command, once more
    assert_same_weights(tmp_path / "uninterrupted", output_dir)
    expected, actual = (
        json.loads((d / "eval_results.json").read_text()) for d in (tmp_path / "uninterrupted", output_dir)
    )
    assert actual["eval_loss"] == expected["eval_loss"]


# ---- kill -9 one rank of a DDP job ------------------------------------------------------------------------------

DDP_COMMAND = ["--model_type", "scratch-gpt", *COMMAND, "--ddp_find_unused_parameters", "false"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def launched(output_dir: Path, **fault):
    """``accelerate launch`` fault_worker.py over two gloo processes, as users launch a script; the job's processes
    are killed on the way out if still running (a failed test leaves nothing behind)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", **fault)
    job = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "accelerate.commands.accelerate_cli",
            "launch",
            "--multi_gpu",
            "--num_processes",
            "2",
            "--num_machines",
            "1",
            "--mixed_precision",
            "no",
            "--dynamo_backend",
            "no",
            "--main_process_port",
            str(free_port()),
            str(REPO / "tests" / "fault_worker.py"),
            *DDP_COMMAND,
            "--output_dir",
            str(output_dir),
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        yield job
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()


def finish(job: subprocess.Popen, expect_success: bool = True) -> None:
    output, _ = job.communicate(timeout=TIMEOUT)
    assert (job.returncode == 0) == expect_success, output[-4000:]


def test_ddp_rank_killed_and_job_restarted_ends_bit_identical(tmp_path):
    rng = random.Random(f"{SEED}-ddp")
    with launched(tmp_path / "uninterrupted") as job:
        finish(job)
    output_dir = tmp_path / "killed"
    for kill, moment in enumerate(kill_plan(rng, DDP_KILLS, MAX_STEPS, SAVE_FILES["scratch-gpt"])):
        rank = kill % 2  # the main process (it publishes checkpoints) first, then the other
        if rank == 1 and moment.startswith("save"):
            moment = moment.rsplit(":", 1)[0] + ":1"  # rank 1 writes one file: its RNG state
        fault_dir = tmp_path / "fault"
        shutil.rmtree(fault_dir, ignore_errors=True)
        fault_dir.mkdir()
        with launched(
            output_dir, HF_SCRATCH_FAULT_AT=moment, HF_SCRATCH_FAULT_DIR=str(fault_dir), HF_SCRATCH_FAULT_RANK=str(rank)
        ) as job:
            os.kill(wait_until_parked(fault_dir, lambda: job.poll() is None, moment), signal.SIGKILL)
            finish(job, expect_success=False)  # the launcher ends the other rank and fails
        check_after_kill(output_dir, moment)
    with launched(output_dir) as job:  # the job, restarted with the same command
        finish(job)
    assert_same_weights(tmp_path / "uninterrupted", output_dir)


# ---- incomplete checkpoints, failed saves, full or unwritable disks (in process) -------------------------------


class RecordSteps(TrainerCallback):
    """The global steps this invocation trains."""

    def __init__(self):
        self.steps = []

    def on_step_end(self, args, state, control, **kwargs):
        self.steps.append(state.global_step)


@pytest.fixture(scope="module")
def four_steps(tmp_path_factory):
    """A finished run of 4 steps with checkpoint-2 and checkpoint-4, and its command."""
    output_dir = tmp_path_factory.mktemp("four_steps")
    command = [*GPT, "--max_steps", "4", "--save_strategy", "steps", "--save_steps", "2", "--output_dir"]
    run_clm.main([*command, str(output_dir)])
    return output_dir, command


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize("damage", ["no trainer_state.json", "truncated model.safetensors", "truncated optimizer.pt"])
def test_incomplete_checkpoint_is_skipped_never_loaded(damage, four_steps, tmp_path, caplog):
    """A checkpoint-4 left incomplete (written before saves were atomic, or damaged since) is skipped with a
    warning: the rerun resumes from checkpoint-2, trains steps 3-4 again, replaces checkpoint-4 and ends with the
    finished run's weights."""
    finished, command = four_steps
    output_dir = tmp_path / "out"
    shutil.copytree(finished, output_dir)
    checkpoint = output_dir / "checkpoint-4"
    if damage == "no trainer_state.json":
        (checkpoint / "trainer_state.json").unlink()
    else:
        truncate(checkpoint / damage.split()[1])
    assert checkpoint_problem(checkpoint) is not None and checkpoint_problem(output_dir / "checkpoint-2") is None
    steps = RecordSteps()
    with caplog.at_level(logging.WARNING, logger="training.checkpoints"):
        run_clm.main([*command, str(output_dir)], callbacks=[steps])
    assert f"Skipping {checkpoint}: it is incomplete" in caplog.text
    assert f"resuming training from {output_dir / 'checkpoint-2'}" in caplog.text
    assert steps.steps == [3, 4]
    assert checkpoint_problem(checkpoint) is None
    for name in ("model.safetensors", "checkpoint-4/model.safetensors"):
        expected, actual = load_file(finished / name), load_file(output_dir / name)
        assert all(torch.equal(expected[k], actual[k]) for k in expected)


def test_resuming_explicitly_from_an_incomplete_checkpoint_is_refused(four_steps, tmp_path):
    finished, command = four_steps
    checkpoint = tmp_path / "checkpoint-4"
    shutil.copytree(finished / "checkpoint-4", checkpoint)
    truncate(checkpoint / "model.safetensors")
    with pytest.raises(
        ValueError, match=r"--resume_from_checkpoint .*checkpoint-4 is incomplete \(model.safetensors cannot be read"
    ):
        run_clm.main([*command, str(tmp_path / "out"), "--resume_from_checkpoint", str(checkpoint)])


def test_failed_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    """save_total_limit=1: the save of checkpoint-3 fails midway (the disk fills while optimizer.pt is written), so
    checkpoint-2 must stay, and no checkpoint-3 may appear; the rerun resumes from checkpoint-2 and rotation then
    keeps checkpoint-3 only."""
    output_dir = tmp_path / "out"
    command = [
        *GPT,
        "--max_steps",
        "3",
        "--save_strategy",
        "steps",
        "--save_steps",
        "1",
        "--save_total_limit",
        "1",
        "--output_dir",
        str(output_dir),
    ]
    real_save = torch.save

    def save_until_disk_full(obj, f, *args, **kwargs):
        if str(f).endswith("optimizer.pt") and "checkpoint-3" in str(f):
            Path(f).write_bytes(b"half an optimizer")
            raise OSError(28, "No space left on device")
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save_until_disk_full)
    with pytest.raises(OSError, match="No space left"):
        run_clm.main(command)
    assert sorted(p.name for p in output_dir.glob("checkpoint-*")) == ["checkpoint-2"]
    assert checkpoint_problem(output_dir / "checkpoint-2") is None
    monkeypatch.setattr(torch, "save", real_save)
    steps = RecordSteps()
    run_clm.main(command, callbacks=[steps])
    assert steps.steps == [3]
    assert sorted(p.name for p in output_dir.iterdir() if "checkpoint" in p.name) == ["checkpoint-3"]


def test_full_disk_is_refused_before_training(tmp_path, monkeypatch):
    steps = RecordSteps()
    free = 5 * 2**20
    monkeypatch.setattr(shutil, "disk_usage", lambda path: SimpleNamespace(total=2**40, used=2**40 - free, free=free))
    with pytest.raises(
        ValueError, match=r"has 5.0 MiB free, a checkpoint of this model needs about .* MiB .*free some space"
    ):
        run_clm.main([*GPT, "--max_steps", "2", "--output_dir", str(tmp_path / "out")], callbacks=[steps])
    assert steps.steps == []


def test_unwritable_output_dir_is_refused_before_reading_data(tmp_path, monkeypatch):
    def parse(output_dir):
        return run_clm.parse_arguments("run_clm", (run_clm.CLMArguments,), [*GPT, "--output_dir", str(output_dir)])

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(ValueError, match="cannot be created: .*a-file is a file, not a folder"):
        parse(blocker / "out")

    # a read-only mount (the probe file cannot be created; simulated, as root may write anywhere else)
    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "TemporaryFile", read_only)
    with pytest.raises(ValueError, match=r"out is not writable \(Read-only file system in .*\): fix its permissions"):
        parse(tmp_path / "out")


def test_a_run_killed_before_its_first_checkpoint_starts_over(tmp_path, caplog):
    """What a run killed before its first checkpoint leaves (a staging folder, TensorBoard logs) does not make the
    folder 'non-empty': the same command starts over, and removes the staging folder."""
    output_dir = tmp_path / "out"
    (output_dir / f"{STAGING_PREFIX}1" / "checkpoint-1").mkdir(parents=True)
    (output_dir / "runs").mkdir()
    steps = RecordSteps()
    with caplog.at_level(logging.WARNING, logger="training.checkpoints"):
        run_clm.main([*GPT, "--max_steps", "1", "--output_dir", str(output_dir)], callbacks=[steps])
    assert steps.steps == [1] and "interrupted before it completed" in caplog.text
    assert not (output_dir / f"{STAGING_PREFIX}1").exists()


def test_best_checkpoint_and_hub_pushes_name_the_published_checkpoint(tmp_path, monkeypatch):
    """The Trainer records the best checkpoint and pushes checkpoints (hub_strategy checkpoint) from where it saved
    them: both must name the published ``checkpoint-N``, never its staging folder (deleted once published). The hub
    is replaced by a recorder that lists each uploaded folder when asked."""
    from huggingface_hub import HfApi, RepoUrl

    uploads = []  # (folder, path_in_repo, files in the folder then)

    def upload_folder(self, *, folder_path, path_in_repo=None, **kwargs):
        folder = Path(folder_path)
        uploads.append(
            (folder, path_in_repo, sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()))
        )
        done = Future()  # the Trainer uploads with run_as_future=True
        done.set_result(None)
        return done

    monkeypatch.setattr(
        HfApi, "create_repo", lambda self, repo_id, **kwargs: RepoUrl(f"https://huggingface.co/{repo_id}")
    )
    monkeypatch.setattr(HfApi, "upload_folder", upload_folder)
    output_dir = tmp_path / "out"
    run_clm.main(
        [
            *GPT,
            "--max_steps",
            "4",
            "--save_strategy",
            "steps",
            "--save_steps",
            "2",
            "--eval_strategy",
            "steps",
            "--eval_steps",
            "2",
            "--load_best_model_at_end",
            "--metric_for_best_model",
            "loss",
            "--save_total_limit",
            "1",
            "--push_to_hub",
            "--hub_model_id",
            "someone/tiny",
            "--hub_strategy",
            "checkpoint",
            "--output_dir",
            str(output_dir),
        ]
    )
    state = json.loads((output_dir / "trainer_state.json").read_text())
    assert state["best_model_checkpoint"] in (str(output_dir / "checkpoint-2"), str(output_dir / "checkpoint-4"))
    assert Path(state["best_model_checkpoint"]).is_dir()  # kept by rotation, loaded at the end
    checkpoint_pushes = [
        (folder, files) for folder, path_in_repo, files in uploads if path_in_repo == "last-checkpoint"
    ]
    assert [folder for folder, _ in checkpoint_pushes] == [output_dir / "checkpoint-2", output_dir / "checkpoint-4"]
    assert all("trainer_state.json" in files for _, files in checkpoint_pushes)  # complete when pushed
    assert not any(STAGING_PREFIX in file for _, _, files in uploads for file in files)

"""The training process ``tests/test_faults.py`` kills: ``training/run_clm.py``'s ``main`` with a callback (and
wrappers around the checkpoint file writes) that *park* the process at one chosen moment, so that the test can
SIGKILL it exactly there. Test-only: nothing here is product code.

A moment is ``"<phase>:<step>"`` or ``"save:<step>:<file>"``:

- ``step:N`` — mid-step: step N's gradients are computed, the optimizer has not stepped (``on_pre_optimizer_step``);
- ``eval:N`` — mid-evaluation: the evaluation after step N has run its first batch (``on_prediction_step``);
- ``save:N:K`` — mid-save: checkpoint-N has written its K-th file through ``torch.save`` / ``TrainerState.save_to_json``
  (training_args.bin, optimizer.pt, scheduler.pt, rng_state.pth, trainer_state.json, then Transformer-XL's memory),
  the weights already written, the rest not yet.

Parked, the process writes its pid to ``<fault_dir>/parked`` (renamed into place, so the test never reads half a
file) and sleeps until killed. Only the process whose rank is ``fault_rank`` parks; under DDP the other ranks wait in
their next collective, as they would for a slow or hung peer.

The test forks ``main(args, fault_at, fault_dir)`` from a preloaded process (no interpreter start per run), and
``accelerate launch``es this file as a script, the moment in ``HF_SCRATCH_FAULT_AT`` / ``HF_SCRATCH_FAULT_DIR`` /
``HF_SCRATCH_FAULT_RANK``.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
from transformers import TrainerCallback  # noqa: E402
from transformers.trainer_callback import TrainerState  # noqa: E402

import hf_scratch  # noqa: E402,F401  (registers the families)
from training import run_clm  # noqa: E402

PHASES = ("step", "eval", "save")  # their order within one training step


def park(fault_dir: str) -> None:
    marker = Path(fault_dir) / "parked"
    marker.with_suffix(".tmp").write_text(str(os.getpid()))
    os.replace(marker.with_suffix(".tmp"), marker)
    while True:
        time.sleep(1)


class ParkAt(TrainerCallback):
    """Parks this process at the moment ``fault_at`` (see the module docstring)."""

    def __init__(self, fault_at: str, fault_dir: str, rank: int):
        phase, *numbers = fault_at.split(":")
        if phase not in PHASES or len(numbers) != (2 if phase == "save" else 1):
            raise ValueError(f"fault moment {fault_at!r}: expected step:N, eval:N or save:N:K")
        self.phase, self.step = phase, int(numbers[0])
        self.file = int(numbers[1]) if phase == "save" else None
        self.fault_dir, self.rank = fault_dir, rank
        self.files_written = 0  # by the save after the current step
        self.active = False  # the current step is the chosen one
        self.process_index = 0

    def here(self) -> None:
        if self.process_index == self.rank:
            park(self.fault_dir)

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self.process_index = args.process_index
        if self.phase == "step" and state.global_step + 1 == self.step:
            self.here()

    def on_step_end(self, args, state, control, **kwargs):
        self.files_written, self.active = 0, state.global_step == self.step

    def on_prediction_step(self, args, state, control, **kwargs):
        if self.phase == "eval" and self.active:
            self.here()

    def file_written(self) -> None:
        """Called after each checkpoint file write (``watch_checkpoint_writes``)."""
        self.files_written += 1
        if self.phase == "save" and self.active and self.files_written == self.file:
            self.here()


def watch_checkpoint_writes(callback: ParkAt) -> None:
    """Let ``callback`` count the files ``torch.save`` and ``TrainerState.save_to_json`` write (the Trainer calls
    both through their modules, so wrapping the module attributes reaches every call)."""

    def after(write):
        @functools.wraps(write)
        def wrapper(*args, **kwargs):
            result = write(*args, **kwargs)
            callback.file_written()
            return result

        return wrapper

    torch.save = after(torch.save)
    TrainerState.save_to_json = after(TrainerState.save_to_json)


def main(args: list[str], fault_at: str | None = None, fault_dir: str | None = None, fault_rank: int = 0) -> None:
    callbacks = []
    if fault_at:
        callback = ParkAt(fault_at, fault_dir, fault_rank)
        watch_checkpoint_writes(callback)
        callbacks.append(callback)
    run_clm.main(args, callbacks=callbacks)


if __name__ == "__main__":
    main(
        sys.argv[1:],
        os.environ.get("HF_SCRATCH_FAULT_AT"),
        os.environ.get("HF_SCRATCH_FAULT_DIR"),
        int(os.environ.get("HF_SCRATCH_FAULT_RANK", "0")),
    )

"""The ``--output_dir`` of a run and the checkpoints in it:

- what a rerun does with an ``--output_dir`` that holds files (``resolve_output_dir``): resume from its newest
  complete checkpoint, refuse a non-empty folder without one, or start over with ``--overwrite_output_dir``
  (``remove_checkpoints``); an unwritable or too full folder fails before training (``check_output_dir_writable``,
  ``check_disk_space``);
- checkpoints that survive a kill: every script's trainer (``hf_scratch.tools.trainer.ScratchTrainer``) stages each
  in ``_tmp-checkpoint-N`` and renames it into place when complete, rotating only then; a rerun resumes from the
  newest complete one (``last_complete_checkpoint``, ``checkpoint_problem``) and removes the staging folders of
  interrupted saves (``remove_staging_folders``).
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, get_last_checkpoint

from hf_scratch.tools.trainer import STAGING_PREFIX

if TYPE_CHECKING:
    import torch
    from transformers import TrainingArguments

    from training.arguments import DataArguments

logger = logging.getLogger(__name__)

# ----------------------------------------------------------------------------------------------------------------
# The output directory
# ----------------------------------------------------------------------------------------------------------------


def resolve_output_dir(data_args: DataArguments, training_args: TrainingArguments) -> None:
    """What training does with an ``--output_dir`` that already holds files — the contract of transformers'
    example scripts: resume from its newest *complete* ``checkpoint-N`` (``last_complete_checkpoint``; an incomplete
    one is skipped with a warning, never loaded), refuse a non-empty folder without checkpoints, or — with
    ``--overwrite_output_dir`` — start over. transformers 5 removed ``TrainingArguments.overwrite_output_dir`` (and
    its examples the check), so the flag is ours (``DataArguments``). An explicit ``--resume_from_checkpoint`` is
    used as given (``train_evaluate_save`` refuses an incomplete one). What a run killed before its first checkpoint
    leaves (a staging folder, TensorBoard's ``runs``) does not count: rerunning its command starts over. The folder
    must be writable (``check_output_dir_writable``). The log says what happens."""
    assert training_args.output_dir is not None  # TrainingArguments.__post_init__ fills it in
    check_output_dir_writable(training_args.output_dir)
    given = training_args.resume_from_checkpoint
    output_dir = Path(training_args.output_dir)
    if (
        not training_args.do_train
        or not output_dir.is_dir()
        or all(_left_by_a_killed_run(p) for p in output_dir.iterdir())
    ):
        return
    if data_args.overwrite_output_dir:
        if given is not None and Path(given).resolve().is_relative_to(output_dir.resolve()):
            raise ValueError(
                f"--overwrite_output_dir removes the checkpoints in {output_dir}, --resume_from_checkpoint {given} "
                "resumes from one of them: give one of the two."
            )
        logger.warning(
            f"--overwrite_output_dir: training starts from scratch in {output_dir}; its files are overwritten "
            "and its checkpoint-* folders removed."
        )
    elif given is not None:
        logger.warning(f"Resuming training from {given} (--resume_from_checkpoint).")
    else:
        last = last_complete_checkpoint(output_dir)
        if last is None:
            incomplete = "complete " if get_last_checkpoint(str(output_dir)) is not None else ""
            raise ValueError(
                f"--output_dir {output_dir} is not empty and holds no {incomplete}checkpoint-N folder to resume "
                "from: pass --overwrite_output_dir to train from scratch into it (its files are overwritten), "
                "or choose another --output_dir."
            )
        training_args.resume_from_checkpoint = last
        logger.warning(
            f"Checkpoint detected: resuming training from {last}. To train from scratch instead, pass "
            "--overwrite_output_dir or choose another --output_dir."
        )


def check_output_dir_writable(output_dir: str) -> None:
    """Fail before any data is read, not at the first checkpoint, when ``--output_dir`` cannot be written: a
    temporary file is created in it (or, while it does not exist yet, in its nearest existing parent, where it
    will be created) — the test that also holds for read-only mounts and for root."""
    path = Path(output_dir).absolute()
    existing = next(folder for folder in (path, *path.parents) if folder.exists())
    if not existing.is_dir():
        raise ValueError(
            f"--output_dir {output_dir} cannot be created: {existing} is a file, not a folder. "
            "Choose another --output_dir."
        )
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as error:
        raise ValueError(
            f"--output_dir {output_dir} is not writable ({error.strerror} in {existing}): fix its permissions "
            "or choose another --output_dir."
        ) from error


def check_disk_space(model: torch.nn.Module, training_args: TrainingArguments) -> None:
    """Fail before training starts when the disk of ``--output_dir`` cannot hold one more checkpoint: the weights
    plus, unless ``--save_only_model``, the optimizer state (Adam's two moments: about twice the weights again),
    i.e. ≈ 3 × the parameter bytes, and a margin for the tokenizer, config and trainer state. A checkpoint is
    staged in full before the previous one is rotated out (``ScratchTrainer``), so this much must be free."""
    parameter_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    saves_checkpoints = str(getattr(training_args.save_strategy, "value", training_args.save_strategy)) != "no"
    needed = (3 if saves_checkpoints and not training_args.save_only_model else 1) * parameter_bytes
    needed += needed // 10 + 16 * 2**20
    assert training_args.output_dir is not None  # TrainingArguments.__post_init__ fills it in
    path = Path(training_args.output_dir).absolute()
    free = shutil.disk_usage(next(folder for folder in (path, *path.parents) if folder.exists())).free
    if free < needed:
        raise ValueError(
            f"--output_dir {training_args.output_dir} has {free / 2**20:.1f} MiB free, a checkpoint of this model "
            f"needs about {needed / 2**20:.1f} MiB (weights + optimizer state ≈ 3 × {parameter_bytes / 2**20:.1f} "
            "MiB of parameters, plus a margin): free some space or choose another --output_dir."
        )


def remove_checkpoints(output_dir: str) -> None:
    """--overwrite_output_dir: delete the ``checkpoint-N`` folders of the run being overwritten (and the staging
    folders of its interrupted saves), so that neither a later rerun (which resumes from the last checkpoint) nor
    checkpoint rotation picks up one of them."""
    for checkpoint in sorted(Path(output_dir).glob(f"{PREFIX_CHECKPOINT_DIR}-*")):
        if checkpoint.is_dir() and re.fullmatch(rf"{PREFIX_CHECKPOINT_DIR}-\d+", checkpoint.name):
            logger.warning(f"--overwrite_output_dir: removing {checkpoint}")
            shutil.rmtree(checkpoint)
    remove_staging_folders(output_dir)


# ----------------------------------------------------------------------------------------------------------------
# Checkpoints that survive a kill (``ScratchTrainer`` stages them and renames them into place), checked before
# resuming
# ----------------------------------------------------------------------------------------------------------------


def _left_by_a_killed_run(path: Path) -> bool:
    """Whether ``path`` (an entry of --output_dir) is what a run killed before its first checkpoint leaves behind:
    the staging folder of an interrupted save, or TensorBoard's ``runs`` logs."""
    return path.is_dir() and (path.name.startswith(STAGING_PREFIX) or path.name == "runs")


def remove_staging_folders(output_dir: str) -> None:
    """Delete the staging folders that saves interrupted by a crash left in ``output_dir`` (never checkpoints)."""
    for staging in sorted(Path(output_dir).glob(f"{STAGING_PREFIX}*")):
        if staging.is_dir():
            logger.warning(f"Removing {staging}: a checkpoint save that was interrupted before it completed.")
            shutil.rmtree(staging, ignore_errors=True)


def checkpoint_problem(checkpoint: str | Path) -> str | None:
    """Why ``checkpoint`` cannot be resumed from, or None when it is complete. Its ``trainer_state.json`` (written
    last by the Trainer; without it the Trainer would silently restart at step 0) must exist, and every file at its
    top level must read back with the library that wrote it: the trainer state with ``TrainerState``, safetensors
    with ``safe_open`` (which refuses a file its header does not fully cover), torch files (``torch.save`` writes a
    zip archive) with ``zipfile`` checking every member's CRC, JSON with ``json``. Folders inside (FSDP/DeepSpeed
    shards) are their libraries' formats and are left to them."""
    import zipfile

    from safetensors import safe_open
    from transformers.trainer import TRAINER_STATE_NAME
    from transformers.trainer_callback import TrainerState

    folder = Path(checkpoint)
    if not (folder / TRAINER_STATE_NAME).is_file():
        return f"no {TRAINER_STATE_NAME}"
    for path in sorted(p for p in folder.iterdir() if p.is_file()):
        try:
            if path.name == TRAINER_STATE_NAME:
                TrainerState.load_from_json(str(path))
            elif path.suffix == ".safetensors":
                with safe_open(str(path), framework="pt"):
                    pass
            elif path.suffix in (".pt", ".pth", ".bin"):
                with zipfile.ZipFile(path) as archive:
                    damaged = archive.testzip()
                if damaged is not None:
                    return f"{path.name} is damaged (record {damaged})"
            elif path.suffix == ".json":
                json.loads(path.read_text())
        except (
            Exception
        ) as error:  # each library raises its own types (SafetensorError, BadZipFile, JSONDecodeError, …)
            return f"{path.name} cannot be read: {type(error).__name__}: {error}"
    return None


def last_complete_checkpoint(output_dir: str | Path) -> str | None:
    """The newest ``checkpoint-N`` of ``output_dir`` that is complete (``checkpoint_problem``); newer incomplete ones
    are skipped with a warning (a save interrupted by a crash, or damaged files) and never loaded."""
    pattern = re.compile(rf"{PREFIX_CHECKPOINT_DIR}-(\d+)")
    checkpoints = [p for p in Path(output_dir).iterdir() if p.is_dir() and pattern.fullmatch(p.name)]
    for checkpoint in sorted(checkpoints, key=lambda p: int(p.name.rsplit("-", 1)[1]), reverse=True):
        problem = checkpoint_problem(checkpoint)
        if problem is None:
            return str(checkpoint)
        logger.warning(f"Skipping {checkpoint}: it is incomplete ({problem}); an older checkpoint is resumed from.")
    return None

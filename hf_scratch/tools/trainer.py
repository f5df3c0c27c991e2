"""``ScratchTrainer``: the 🤗 ``Trainer`` every training script uses, with three behaviours as method overrides:

- checkpoints that survive a kill (``_save_checkpoint``): each is staged in ``_tmp-checkpoint-N/checkpoint-N`` and
  renamed into place when complete (``publish_checkpoint``), and ``save_total_limit`` rotation runs only then, so
  a save that fails or is killed midway never leaves a ``checkpoint-N`` that is not one, nor deletes the previous
  good checkpoint (a rerun resumes from the newest complete one: ``training/checkpoints.py``);
- the hub folder of a model FSDP shards (``save_model`` outside a checkpoint): the weights are gathered and written
  with the model's hf_scratch class (``unsharded_model``), not with the ``FSDP<Class>`` torch makes of it;
- the model card (``create_model_card``, which ``push_to_hub`` calls before its one upload): the card ``model_card``
  writes (the training scripts: ``training/model_card.py``), or transformers' generic one when it is None.

``ScratchSeq2SeqTrainer`` is the same on top of ``Seq2SeqTrainer`` (``--predict_with_generate``), and
``hf_scratch.tools.training_transfo_xl.TransfoXLTrainer`` extends ``ScratchTrainer`` with Transformer-XL's memory.
They live in the package rather than beside the scripts in ``training/`` (a folder of scripts, not installed with
hf_scratch) because ``TransfoXLTrainer`` is part of the package and extends this class. ``perplexity`` is what they
report from an evaluation loss.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Callable
from typing import Any, cast

import torch
from transformers import PreTrainedModel, Seq2SeqTrainer, Trainer
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

# A checkpoint is written into ``_tmp-checkpoint-N/checkpoint-N`` and renamed to ``checkpoint-N`` when complete.
# The leading underscore keeps it out of hub uploads (the Trainer ignores "_*"), and neither get_last_checkpoint
# nor checkpoint rotation (both look for "checkpoint-*") ever sees it.
STAGING_PREFIX = f"_tmp-{PREFIX_CHECKPOINT_DIR}-"


def _fsync(path: str) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def publish_checkpoint(staged: str, final: str) -> None:
    """Move the complete checkpoint ``staged`` (``<run>/_tmp-checkpoint-N/checkpoint-N``) to ``final``
    (``<run>/checkpoint-N``) in one rename: its files are flushed to disk first, so that after a crash — even a
    power cut — ``checkpoint-N`` is either absent or complete. An older ``checkpoint-N`` (a resumed run saving that
    step again) is moved into the staging folder first and deleted with it."""
    for folder, _, files in os.walk(staged):
        for name in files:
            _fsync(os.path.join(folder, name))
        _fsync(folder)
    staging = os.path.dirname(staged)
    if os.path.lexists(final):
        os.replace(final, os.path.join(staging, "replaced"))
    os.replace(staged, final)
    _fsync(os.path.dirname(final))
    shutil.rmtree(staging)


def saved_class(model: torch.nn.Module) -> type:
    """The class a saved folder names for ``model``: its own, or, when FSDP2's ``fully_shard`` sharded it in place,
    the hf_scratch class behind the ``FSDP<Class>`` subclass torch creates in its own module (saving as that one
    copies torch's ``_fsdp_*.py`` files as the model's code and writes a broken ``auto_map``)."""
    from torch.distributed.fsdp import FSDPModule

    return next(cls for cls in type(model).__mro__ if not issubclass(cls, FSDPModule))


def unsharded_model(model: PreTrainedModel, state_dict: dict[str, torch.Tensor]) -> PreTrainedModel:
    """A ``saved_class(model)`` model holding ``state_dict`` (the gathered weights, used as they are: no copy), with
    ``model``'s config and generation config: what ``save_pretrained`` writes the hub folder from."""
    with torch.device("meta"):  # no memory for the weights about to be replaced
        unsharded = saved_class(model)(model.config)
    unsharded.load_state_dict(state_dict, assign=True)
    unsharded.tie_weights()  # gathered tied weights are separate copies: one tensor again
    if model.can_generate():
        unsharded.generation_config = model.generation_config
    return unsharded


class ScratchTrainer(Trainer):
    """``Trainer`` with atomic checkpoints, an unsharded hub folder under FSDP and the run's own model card (see the
    module docstring). ``model_card``: a callable given the output folder that writes its ``README.md``; None
    (the default) keeps transformers' generic card."""

    _staging: str | None = None  # the staging folder while a checkpoint is being written
    _push_pending = False  # a checkpoint push was asked for before the checkpoint was published

    def __init__(self, *args: Any, model_card: Callable[[str], Any] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.model_card = model_card

    # -- atomic checkpoints ----------------------------------------------------------------------------------
    def _get_output_dir(self, trial: Any) -> str:
        """While a checkpoint is saved, the staging folder: the Trainer's whole save (and what subclasses add to
        it, e.g. ``TransfoXLTrainer``'s memory) writes ``_tmp-checkpoint-N/checkpoint-N``, and its own rotation
        sees only that one checkpoint."""
        return self._staging if self._staging is not None else super()._get_output_dir(trial)

    def _push_from_checkpoint(self, checkpoint_folder: str) -> None:
        """A checkpoint push to the hub (``hub_strategy`` checkpoint / all_checkpoints) waits until it is published."""
        if self._staging is not None:
            self._push_pending = True
            return
        super()._push_from_checkpoint(checkpoint_folder)

    def _save_checkpoint(self, model: torch.nn.Module, trial: Any) -> None:
        """The checkpoint's files written into the staging folder (``_write_checkpoint``); then all processes meet
        (each writes its RNG state), the main one publishes it and rotates, and a push asked for meanwhile goes out."""
        from transformers.trainer import TRAINER_STATE_NAME

        run_dir = self._get_output_dir(trial)
        name = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        staging = os.path.join(run_dir, STAGING_PREFIX + str(self.state.global_step))
        staged, final = os.path.join(staging, name), os.path.join(run_dir, name)
        if self.args.should_save:
            shutil.rmtree(staging, ignore_errors=True)  # left by an earlier attempt at this step that was killed
        self.accelerator.wait_for_everyone()
        self._staging, self._push_pending = staging, False
        try:
            self._write_checkpoint(model, trial)
        finally:
            self._staging = None
        if self.state.best_model_checkpoint == staged:  # the Trainer found the best checkpoint where it wrote it
            self.state.best_model_checkpoint = final
            if self.args.should_save:
                self.state.save_to_json(os.path.join(staged, TRAINER_STATE_NAME))
        self.accelerator.wait_for_everyone()  # every process has written its files
        if self.args.should_save:
            publish_checkpoint(staged, final)
        self.accelerator.wait_for_everyone()  # nobody reads checkpoint-N before it exists
        self._rotate_published(run_dir, final)

    def _write_checkpoint(self, model: torch.nn.Module, trial: Any) -> None:
        """What a checkpoint holds, written into ``<_get_output_dir(trial)>/checkpoint-N`` (the staging folder): the
        Trainer's files. A subclass that adds files of its own extends this, so they are published with the rest."""
        super()._save_checkpoint(model, trial)

    def _rotate_published(self, run_dir: str, final: str) -> None:
        """``save_total_limit`` rotation, once ``final`` is published; then the push that waited for it."""
        from transformers.trainer_utils import rotate_checkpoints

        if self.args.should_save:
            rotate_checkpoints(
                output_dir=run_dir,
                save_total_limit=self.args.save_total_limit,
                best_model_checkpoint=self.state.best_model_checkpoint,
                use_mtime=True,
            )
        if self._push_pending:
            self._push_from_checkpoint(final)

    # -- the hub folder ----------------------------------------------------------------------------------------
    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """As the Trainer's, except for a model FSDP shards outside a checkpoint (the final save, also the one inside
        ``push_to_hub``): that folder is written with the model's hf_scratch class (``_save_unsharded``).
        Checkpoints written during training stay of the plugin's kind, which resuming reads."""
        if not self.is_fsdp_enabled or self._staging is not None:
            return super().save_model(output_dir, _internal_call)
        self._save_unsharded(output_dir if output_dir is not None else str(self.args.output_dir))
        if self.args.push_to_hub and not _internal_call:  # as the Trainer's: a save the user asks for is pushed
            self.push_to_hub(commit_message="Model save", revision=self.args.hub_revision)

    def _save_unsharded(self, output_dir: str) -> None:
        """Every process takes part in gathering the weights (FULL_STATE_DICT: for the sharded kind the Trainer's
        own save writes none), then the main one writes the folder with the model's hf_scratch class
        (``unsharded_model``), the tokenizer and the training arguments, as ``Trainer._save`` does."""
        from transformers.trainer import TRAINING_ARGS_NAME

        self.accelerator.state.fsdp_plugin.set_state_dict_type("FULL_STATE_DICT")
        state_dict = self.accelerator.get_state_dict(self.model)
        if self.args.should_save:
            os.makedirs(output_dir, exist_ok=True)
            unsharded_model(cast(PreTrainedModel, self.model), state_dict).save_pretrained(output_dir)
            if self.processing_class is not None:
                self.processing_class.save_pretrained(output_dir)
            torch.save(self.args, os.path.join(output_dir, TRAINING_ARGS_NAME))

    # -- the model card --------------------------------------------------------------------------------------
    def create_model_card(self, *args: Any, **kwargs: Any) -> None:
        """Write ``model_card``'s card into the output folder (``push_to_hub`` calls this before its upload, so the
        card goes up once, beside the weights); without one, transformers' generic card."""
        if self.model_card is None:
            return super().create_model_card(*args, **kwargs)
        if self.args.should_save:  # where the weights are written
            self.model_card(str(self.args.output_dir))


class ScratchSeq2SeqTrainer(ScratchTrainer, Seq2SeqTrainer):
    """``ScratchTrainer``'s checkpoints, hub folder and card on ``Seq2SeqTrainer`` (generation in evaluation)."""


# Perplexity is exp(loss). math.exp raises OverflowError above ln(max float) ≈ 709.78, which a diverged run's loss can
# reach: the loss is capped just below, so such a run reports a huge but finite perplexity (≈ 1e304) instead of
# failing its evaluation. Every loss a working model has is far below the cap, where the value is exact.
MAX_LOG_PERPLEXITY = 700.0


def perplexity(loss: float) -> float:
    """exp(loss) of a mean cross-entropy in nats, with the loss capped at ``MAX_LOG_PERPLEXITY`` (see there).
    ``TransfoXLTrainer`` and the training scripts (``training/common.py``) report ``eval_perplexity`` with it."""
    return math.exp(min(loss, MAX_LOG_PERPLEXITY))

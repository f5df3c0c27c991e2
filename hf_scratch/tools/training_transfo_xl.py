"""Training and evaluating Transformer-XL with its segment-level memory through the Hugging Face ``Trainer``.

Transformer-XL learns to use the memory only if consecutive batches continue each other: the corpus is laid out as
``batch_size`` parallel streams, and row i of batch k+1 is the segment that follows row i of batch k (Dai et al.
2019 §3.2; the original code's ``LMOrderedIterator``). Three pieces make the Trainer do that:

- ``segment_dataset(token_ids, segment_length)``: the corpus cut into consecutive segments, in order (the layout
  ``run_clm``'s ``group_texts`` also produces — any dataset of in-order segments works);
- ``StreamSampler``: visits those segments stream by stream. Stream s is a contiguous run of the corpus; with
  several data-parallel ranks each rank gets its own ``batch_size`` streams (accelerate hands out whole batches
  round-robin, rank r taking batches r, r+W, …, and the sampler orders the batches so that this gives each rank
  its streams in order);
- ``TransfoXLTrainer``: a small ``ScratchTrainer`` subclass (``trainer.py``: atomic checkpoints) that uses the
  sampler for training and evaluation, feeds the memory of the previous step as ``mems`` and keeps the new one,
  resets it at the start of every epoch and of every evaluation, saves it with each checkpoint
  (``transfo_xl_mems_<rank>.pt``, one file per process) so that ``train(resume_from_checkpoint=...)`` continues
  exactly, and adds ``eval_perplexity`` = exp(eval_loss).

Usage::

    from transformers import TrainingArguments
    from hf_scratch import ScratchTransfoXLConfig, ScratchTransfoXLLMHeadModel
    from hf_scratch.tools.training_transfo_xl import TransfoXLTrainer, segment_dataset

    ids = tokenizer(text)["input_ids"]                       # one long token stream
    train = segment_dataset(ids[: -10_000], segment_length=128)
    valid = segment_dataset(ids[-10_000:], segment_length=128)
    model = ScratchTransfoXLLMHeadModel(ScratchTransfoXLConfig(vocab_size=len(tokenizer), mem_len=128, cutoffs=[]))
    args = TrainingArguments("out", per_device_train_batch_size=8, per_device_eval_batch_size=8, save_steps=500)
    trainer = TransfoXLTrainer(model=model, args=args, train_dataset=train, eval_dataset=valid)
    trainer.train()                                          # or train(resume_from_checkpoint=True)
    print(trainer.evaluate()["eval_perplexity"])             # evaluated with memory

The memory length is ``model.config.mem_len``, read at every step: setting it to 0 evaluates without memory.
Multi-process runs (``accelerate launch`` / ``torchrun``) need nothing else. Leftover segments that do not fill
the last row of streams are skipped.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence, Sized
from typing import TYPE_CHECKING, Any

import torch
from torch.utils.data import Dataset, Sampler
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

if TYPE_CHECKING:  # for the checker only
    from torch.utils.data import DataLoader
    from transformers import TrainerControl, TrainerState, TrainingArguments
    from transformers.trainer_utils import EvalLoopOutput

from .trainer import ScratchTrainer, perplexity

MEMORY_FILE = "transfo_xl_mems_{rank}.pt"


class SegmentDataset(Dataset):
    """Consecutive ``segment_length`` pieces of one token stream, in order, as ``{"input_ids", "labels"}``
    examples (labels = input_ids; the model shifts them). A trailing partial segment is dropped."""

    def __init__(self, token_ids: Sequence[int] | torch.Tensor, segment_length: int):
        ids = torch.as_tensor(token_ids, dtype=torch.long).reshape(-1)
        if segment_length <= 0:
            raise ValueError(f"segment_length must be a positive number of tokens, got {segment_length}.")
        count = ids.numel() // segment_length
        if count == 0:
            raise ValueError(f"The stream has {ids.numel()} tokens, fewer than one segment of {segment_length}.")
        self.segments = ids[: count * segment_length].view(count, segment_length)

    def __len__(self) -> int:
        return self.segments.shape[0]

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.segments[index], "labels": self.segments[index]}


def segment_dataset(token_ids: Sequence[int] | torch.Tensor, segment_length: int) -> SegmentDataset:
    """The corpus (one token stream) cut into consecutive segments, in order."""
    return SegmentDataset(token_ids, segment_length)


class StreamSampler(Sampler[int]):
    """Orders ``num_segments`` consecutive segments as ``batch_size × world_size`` parallel streams.

    Stream s holds segments [s·n, (s+1)·n) with n = num_segments // (batch_size·world_size). Global batch
    g = k·world_size + r holds step k of rank r's streams r·batch_size … (r+1)·batch_size - 1, so that with the
    round-robin batch sharding of accelerate rank r reads its own streams, one step after the other."""

    def __init__(self, num_segments: int, batch_size: int, world_size: int = 1):
        self.num_streams = batch_size * world_size
        if num_segments < self.num_streams:
            raise ValueError(
                f"{num_segments} segments cannot fill {self.num_streams} streams (batch_size {batch_size} × "
                f"{world_size} processes): use more data, shorter segments or a smaller batch."
            )
        self.batch_size, self.world_size = batch_size, world_size
        self.steps = num_segments // self.num_streams

    def __len__(self) -> int:
        return self.steps * self.num_streams

    def __iter__(self) -> Iterator[int]:
        for step in range(self.steps):
            for stream in range(self.num_streams):  # rank r's rows are streams r·batch_size … (r+1)·batch_size-1
                yield stream * self.steps + step


def segment_count(dataset: object) -> int:
    """How many segments the dataset holds: streams are cut from a dataset of known length."""
    if not isinstance(dataset, Sized):
        raise ValueError(
            f"TransfoXLTrainer cuts its data into streams of segments and needs a dataset with a length, got "
            f"{type(dataset).__name__}: make one with segment_dataset(token_ids, segment_length)."
        )
    return len(dataset)


class _ResetMemoryAtEpochStart(TrainerCallback):
    def __init__(self, trainer: TransfoXLTrainer) -> None:
        self.trainer = trainer

    def on_epoch_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.trainer._train_mems = None


class TransfoXLTrainer(ScratchTrainer):
    """``ScratchTrainer`` (atomic checkpoints, unsharded saving, the run's model card) that carries Transformer-XL's
    memory from step to step (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._train_mems: list[torch.Tensor] | None = None
        self._eval_mems: list[torch.Tensor] | None = None
        self._restored_mems: list[torch.Tensor] | None = (
            None  # read from a checkpoint, fed at the first step after resuming
        )
        self._restore_pending = False
        self.add_callback(_ResetMemoryAtEpochStart(self))

    # -- data in streams -------------------------------------------------------------------------------------
    def _get_train_sampler(self, train_dataset: Dataset | None = None) -> StreamSampler:
        dataset = self.train_dataset if train_dataset is None else train_dataset
        return StreamSampler(segment_count(dataset), self._train_batch_size, self.args.world_size)

    def _get_eval_sampler(self, eval_dataset: Dataset) -> StreamSampler:
        return StreamSampler(segment_count(eval_dataset), self.args.eval_batch_size, self.args.world_size)

    # -- the memory ------------------------------------------------------------------------------------------
    def compute_loss(
        self,
        model: torch.nn.Module,
        inputs: dict[str, torch.Tensor | Any],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, Any]:
        training = model.training
        if training and self._restore_pending:
            self._train_mems = (
                None if self._restored_mems is None else [m.to(self.args.device) for m in self._restored_mems]
            )
            self._restore_pending = False
        mems = self._train_mems if training else self._eval_mems
        if mems is not None and mems[0].shape[0] != inputs["input_ids"].shape[0]:
            mems = None  # a batch of another size cannot continue these streams
        loss, outputs = super().compute_loss(
            model, {**inputs, "mems": mems}, return_outputs=True, num_items_in_batch=num_items_in_batch
        )
        if training:
            self._train_mems = outputs.get("mems")
        else:
            self._eval_mems = outputs.get("mems")
        return (loss, outputs) if return_outputs else loss

    def evaluation_loop(
        self,
        dataloader: DataLoader,
        description: str,
        prediction_loss_only: bool | None = None,
        ignore_keys: list[str] | None = None,
        metric_key_prefix: str = "eval",
    ) -> EvalLoopOutput:
        """Evaluate from an empty memory, carrying it across batches; report perplexity = exp(loss)."""
        self._eval_mems = None
        if prediction_loss_only is None and self.compute_metrics is None:
            prediction_loss_only = True  # do not gather (batch, segment, vocab) log-probabilities for nothing
        output = super().evaluation_loop(dataloader, description, prediction_loss_only, ignore_keys, metric_key_prefix)
        self._eval_mems = None
        loss = output.metrics.get(f"{metric_key_prefix}_loss") if output.metrics is not None else None
        if output.metrics is not None and loss is not None:
            output.metrics[f"{metric_key_prefix}_perplexity"] = perplexity(loss)
        return output

    # -- checkpoints -----------------------------------------------------------------------------------------
    def _write_checkpoint(self, model: torch.nn.Module, trial: Any) -> None:
        """The checkpoint's files, and this process's memory (written before the checkpoint is published)."""
        super()._write_checkpoint(model, trial)
        output_dir = os.path.join(
            self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        )
        # At the end of an epoch the next step starts a new epoch, from an empty memory.
        epoch_ended = self.state.epoch is not None and float(self.state.epoch).is_integer()
        mems = None if epoch_ended or self._train_mems is None else [m.detach().cpu() for m in self._train_mems]
        os.makedirs(output_dir, exist_ok=True)
        torch.save(
            {"mems": mems, "global_step": self.state.global_step},
            os.path.join(output_dir, MEMORY_FILE.format(rank=self.args.process_index)),
        )

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: torch.nn.Module | None = None) -> None:
        super()._load_from_checkpoint(resume_from_checkpoint, model)
        path = os.path.join(resume_from_checkpoint, MEMORY_FILE.format(rank=self.args.process_index))
        if not os.path.exists(path):
            raise ValueError(
                f"{resume_from_checkpoint} has no {os.path.basename(path)}: it was not written by TransfoXLTrainer "
                "(or by another number of processes), so the memory to continue from is unknown. Resume from a "
                "TransfoXLTrainer checkpoint with the same number of processes."
            )
        self._restored_mems = torch.load(path, map_location="cpu", weights_only=True)["mems"]
        self._restore_pending = True

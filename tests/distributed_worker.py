"""FSDP2 training on CPU processes over gloo, launched by ``tests/test_distributed.py`` with
``accelerate launch --config_file training/accelerate_configs/fsdp2.yaml`` (one machine, or two "machines" on
localhost); also imported by the test for the single-process reference run on the same data, the world-size-1
wrap check and the consolidation of the checkpoints.

    python -m accelerate.commands.accelerate_cli launch --config_file training/accelerate_configs/fsdp2.yaml \\
        --mixed_precision no tests/distributed_worker.py OUT --families gpt bert

Why a plain loop and not the Trainer: accelerate 1.15 gives an ``AcceleratorState`` the FSDP distributed type only
when it starts from a GPU-like one (``accelerate/state.py``: MULTI_GPU, MULTI_XPU, MULTI_NPU, …). Under this config
on CPU the Trainer runs, with ``--use_cpu``, as DistributedType.MULTI_CPU (DDP: no ``fsdp_plugin``, every
parameter a whole ``torch.Tensor``) and, without it, as DistributedType.NO (each rank trains alone; transformers
warns "process group is initialized, but parallel_mode != ParallelMode.DISTRIBUTED"). So the worker calls the
functions ``Accelerator.prepare`` / ``save_state`` / ``load_state`` call for FSDP2 on GPUs, with the plugin the
launcher built from ``fsdp2.yaml`` (``FullyShardedDataParallelPlugin()`` reads it from the environment):

- ``fsdp2_prepare_model``: ``fully_shard`` on every ``_no_split_modules`` block, on the tied embeddings + head
  (+ final norm), then on the root; with ``fsdp_cpu_ram_efficient_loading`` rank 0's weights are broadcast into
  the other ranks' shards;
- ``save_fsdp_model`` / ``save_fsdp_optimizer`` / ``load_fsdp_model`` / ``load_fsdp_optimizer`` for
  ``SHARDED_STATE_DICT`` (torch.distributed.checkpoint folders, one file per rank) and ``FULL_STATE_DICT`` (rank 0
  writes the gathered tensors);
- ``merge_fsdp_weights`` (what ``accelerate merge-weights`` runs) for consolidation (``consolidate`` below).

The only piece not from accelerate is ``AcceleratorOnCPU``: the handful of attributes those functions read from an
``Accelerator`` (the plugin, the process index and count, a barrier), since a real one cannot carry the plugin on CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from families import FAMILIES  # noqa: E402

import hf_scratch  # noqa: E402

SIZES = {"vocab": 64, "hidden": 32, "heads": 2, "layers": 2, "variant": True}  # variant: GPT pre-LN (a final norm)
GLOBAL_BATCH, LENGTH, STEPS, SAVE_AT = 4, 16, 4, 2
MASKED = [2, 5, 9, 12]  # BERT: the same masked positions in every row, so every rank's loss averages as many tokens
MASK_ID = 1
CHECKPOINT_KINDS = ("SHARDED_STATE_DICT", "FULL_STATE_DICT")


def build_model(family: str, seed: int = 0):
    """The family's main head at ``SIZES``, no dropout, identical on every rank (seeded)."""
    config = FAMILIES[family].config(SIZES)
    torch.manual_seed(seed)
    return getattr(hf_scratch, FAMILIES[family].head)._from_config(config, attn_implementation="eager").train()


def batch(family: str, step: int, rows: slice = slice(None)) -> dict:
    """Rows ``rows`` of the global batch of ``step``: GPT predicts every next token, BERT the ``MASKED`` positions."""
    ids = torch.randint(3, SIZES["vocab"], (GLOBAL_BATCH, LENGTH), generator=torch.Generator().manual_seed(100 + step))
    ids = ids[rows]
    if FAMILIES[family].causal:
        return {"input_ids": ids, "labels": ids}
    labels = torch.full_like(ids, -100)
    labels[:, MASKED] = ids[:, MASKED]
    masked = ids.clone()
    masked[:, MASKED] = MASK_ID
    return {"input_ids": masked, "labels": labels}


def make_optimizer(model) -> torch.optim.Optimizer:
    return torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)


def reference_run(family: str, steps: int = STEPS) -> tuple[list[float], dict]:
    """One process, the whole global batch per step: the losses and final weights the sharded run must give."""
    model = build_model(family)
    optimizer = make_optimizer(model)
    losses = []
    for step in range(steps):
        loss = model(**batch(family, step)).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses, {k: v.detach().clone() for k, v in model.state_dict().items()}


# --------------------------------------------------------------------------------------------------------------
# accelerate's FSDP2 functions on CPU
# --------------------------------------------------------------------------------------------------------------


class AcceleratorOnCPU:
    """What accelerate's FSDP2 helpers read from an ``Accelerator`` (see the module docstring for why a real one
    cannot carry an FSDP plugin on CPU): the plugin, no mixed precision, no extra device mesh, the process index and
    count and a barrier."""

    def __init__(self, plugin, process_index: int, num_processes: int, barrier: Callable[[], None]):
        self.state = SimpleNamespace(fsdp_plugin=plugin)
        self.is_fsdp2 = plugin.fsdp_version == 2
        self.mixed_precision = "no"
        self.torch_device_mesh = None
        self.device = torch.device("cpu")
        self.process_index, self.num_processes = process_index, num_processes
        self.is_main_process = process_index == 0
        self._barrier = barrier

    def wait_for_everyone(self) -> None:
        self._barrier()


def fsdp2_plugin(state_dict_type: str | None = None, wrap: list[str] | None = None, **overrides):
    """accelerate's plugin; what is not given comes from the environment `accelerate launch` built out of the config
    file. One plugin per state-dict type: ``set_state_dict_type`` on an existing plugin keeps the other kind's
    state-dict configs (and loading a FULL checkpoint then fails on ``ShardedOptimStateDictConfig.rank0_only``)."""
    from accelerate.utils import FullyShardedDataParallelPlugin

    return FullyShardedDataParallelPlugin(
        state_dict_type=state_dict_type, transformer_cls_names_to_wrap=wrap, **overrides
    )


def shard(model, accelerator: AcceleratorOnCPU):
    from accelerate.utils import fsdp2_prepare_model

    return fsdp2_prepare_model(accelerator, model)


def fsdp_units(model) -> list:
    """The modules ``fully_shard`` made into units (each all-gathers and frees its parameters as one group)."""
    from torch.distributed.fsdp import FSDPModule

    return [module for module in model.modules() if isinstance(module, FSDPModule)]


def local_bytes(tensors) -> int:
    """Bytes this rank holds for ``tensors``: the local shard of a DTensor, the whole of a plain tensor."""
    from torch.distributed.tensor import DTensor

    total = 0
    for t in tensors:
        local = t.to_local() if isinstance(t, DTensor) else t
        total += local.numel() * local.element_size()
    return total


def sharding_report(model, optimizer) -> dict:
    """What this rank holds: parameter and optimizer-state bytes (local and whole), and how parameters are placed."""
    from torch.distributed.tensor import DTensor

    params = list(model.parameters())
    states = [v for state in optimizer.state.values() for v in state.values() if torch.is_tensor(v) and v.dim() > 0]
    return {
        "param_local_bytes": local_bytes(params),
        "param_full_bytes": sum(p.numel() * p.element_size() for p in params),
        "optim_local_bytes": local_bytes(states),
        "optim_full_bytes": sum(t.numel() * t.element_size() for t in states),
        "optim_tensors": len(states),
        "all_params_dtensor": all(isinstance(p, DTensor) for p in params),
        "all_optim_states_dtensor": all(isinstance(t, DTensor) for t in states),
        "placements": sorted({str(t.placements) for t in params + states if isinstance(t, DTensor)}),
        "mesh_sizes": sorted({t.device_mesh.size() for t in params + states if isinstance(t, DTensor)}),
        "fsdp_units": sorted(type(m).__name__.removeprefix("FSDP") for m in fsdp_units(model)),
    }


def full_state_dict(model) -> dict:
    """The gathered weights on every rank, on CPU (what ``Accelerator.get_state_dict`` does for FSDP2)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


# --------------------------------------------------------------------------------------------------------------
# The distributed run
# --------------------------------------------------------------------------------------------------------------


def train_steps(model, optimizer, family: str, steps: range, rank: int, world: int) -> list[float]:
    """Each rank takes its contiguous slice of every global batch; FSDP2 averages the gradients over the ranks
    (reduce-scatter); the logged loss is the ranks' mean (= the global batch's: every row counts as many tokens)."""
    import torch.distributed as dist

    per_rank = GLOBAL_BATCH // world
    losses = []
    for step in steps:
        loss = model(**batch(family, step, slice(rank * per_rank, (rank + 1) * per_rank))).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        logged = loss.detach().clone()
        dist.all_reduce(logged)
        losses.append((logged / world).item())
    return losses


def run_family(family: str, out: Path, rank: int, world: int, wrap: list[str] | None = None) -> None:
    """Train ``STEPS`` steps sharded, saving both checkpoint kinds after ``SAVE_AT``; then resume from each and
    train to the end again. ``wrap``: block classes to wrap instead of ``_no_split_modules``
    (``fsdp_transformer_layer_cls_to_wrap``). Rank 0 writes ``result.json``, ``final.pt``, ``saved.pt``."""
    import torch.distributed as dist
    from accelerate.utils import load_fsdp_model, load_fsdp_optimizer, save_fsdp_model, save_fsdp_optimizer

    def prepared(state_dict_type=None):
        plugin = fsdp2_plugin(state_dict_type, wrap)
        accelerator = AcceleratorOnCPU(plugin, rank, world, dist.barrier)
        model = shard(build_model(family), accelerator)
        return plugin, accelerator, model, make_optimizer(model)

    out.mkdir(parents=True, exist_ok=True)
    _, _, model, optimizer = prepared()
    losses = train_steps(model, optimizer, family, range(SAVE_AT), rank, world)
    report = sharding_report(model, optimizer)
    checkpoints = {kind: out / f"step{SAVE_AT}" / kind for kind in CHECKPOINT_KINDS}
    for kind, folder in checkpoints.items():
        plugin = fsdp2_plugin(kind, wrap)
        accelerator = AcceleratorOnCPU(plugin, rank, world, dist.barrier)
        save_fsdp_model(plugin, accelerator, model, str(folder))
        save_fsdp_optimizer(plugin, accelerator, optimizer, model, str(folder))
    saved = full_state_dict(model)
    losses += train_steps(model, optimizer, family, range(SAVE_AT, STEPS), rank, world)
    final = full_state_dict(model)

    resumed = {}
    for kind, folder in checkpoints.items():
        plugin, accelerator, model, optimizer = prepared(kind)
        load_fsdp_model(plugin, accelerator, model, str(folder))
        load_fsdp_optimizer(plugin, accelerator, optimizer, model, str(folder))
        resumed_losses = train_steps(model, optimizer, family, range(SAVE_AT, STEPS), rank, world)
        resumed_final = full_state_dict(model)
        resumed[kind] = {
            "losses": resumed_losses,
            "same_final_weights": all(torch.equal(resumed_final[k], final[k]) for k in final),
        }

    reports = [None] * world
    dist.all_gather_object(reports, report)
    if rank == 0:
        torch.save(saved, out / "saved.pt")
        torch.save(final, out / "final.pt")
        files = {
            kind: sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
            for kind, folder in checkpoints.items()
        }
        (out / "result.json").write_text(
            json.dumps(
                {
                    "world_size": world,
                    "losses": losses,
                    "ranks": reports,
                    "resumed": resumed,
                    "checkpoint_files": files,
                },
                indent=1,
            )
        )


def consolidate(checkpoint: Path, kind: str, family: str, out: Path) -> Path:
    """A checkpoint folder → a ``from_pretrained`` folder (safetensors, config, modeling code). SHARDED: the
    torch.distributed.checkpoint shards merged by accelerate's ``merge_fsdp_weights`` (``accelerate merge-weights
    <checkpoint>/pytorch_model_fsdp_0 <out>``); FULL: the gathered file rank 0 wrote. The weights are loaded strictly
    (every key, nothing else) into an unsharded model of the family and saved with ``save_pretrained``."""
    from accelerate.utils import merge_fsdp_weights
    from safetensors.torch import load_file

    if kind == "SHARDED_STATE_DICT":
        merged = out.parent / f"{out.name}-merged"
        merge_fsdp_weights(str(checkpoint / "pytorch_model_fsdp_0"), str(merged))
        state_dict = load_file(merged / "model.safetensors")
    else:
        state_dict = torch.load(checkpoint / "pytorch_model_fsdp.bin", weights_only=True)
    model = build_model(family)
    model.load_state_dict(state_dict, strict=True)
    model.save_pretrained(out)
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--families", nargs="+", default=["gpt", "bert"])
    parser.add_argument(
        "--wrap", nargs="*", default=[], help="FAMILY=Class,Class: wrap these instead of _no_split_modules"
    )
    args = parser.parse_args(argv)
    wrap = {family: classes.split(",") for family, classes in (item.split("=") for item in args.wrap)}
    if os.environ.get("ACCELERATE_USE_FSDP", "false").lower() != "true" or os.environ.get("FSDP_VERSION") != "2":
        raise SystemExit("launch with `accelerate launch --config_file training/accelerate_configs/fsdp2.yaml ...`")
    from accelerate import PartialState

    state = PartialState(cpu=True)  # gloo over the launcher's MASTER_ADDR / MASTER_PORT
    for family in args.families:
        run_family(family, Path(args.out) / family, state.process_index, state.num_processes, wrap.get(family))
    state.wait_for_everyone()
    state.destroy_process_group()


if __name__ == "__main__":
    main()

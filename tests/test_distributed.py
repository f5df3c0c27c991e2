"""Scaling out, on CPU processes over gloo: FSDP2 really shards (DTensor shards, each of two ranks holds half the
parameter and optimizer-state bytes), trains like one process with the same global batch, and its SHARDED and FULL
checkpoints resume identically and consolidate into plain safetensors folders that load with ``from_pretrained``
(and with ``trust_remote_code`` alone where hf_scratch cannot be imported); two "machines" on localhost give the
same run as one machine, bit for bit; every family's ``_no_split_modules`` are its FSDP units.

The sharded runs go through ``tests/distributed_worker.py`` (accelerate's FSDP2 functions in a plain loop; its
docstring says why not the Trainer: accelerate runs no FSDP on CPU), launched as users launch:
``accelerate launch --config_file training/accelerate_configs/fsdp2.yaml --mixed_precision no …``.
"""

from __future__ import annotations

import copy
import json
import os
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import distributed_worker as worker  # noqa: E402
from families import FAMILIES, NAMES, fixed_sizes  # noqa: E402

FSDP2_CONFIG = REPO / "training" / "accelerate_configs" / "fsdp2.yaml"
ENV = dict(
    os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false"
)
TIMEOUT = 300


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(out: Path, *launch_args: str, worker_args: tuple = ()) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "accelerate.commands.accelerate_cli",
        "launch",
        "--config_file",
        str(FSDP2_CONFIG),
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        *launch_args,
        str(Path(worker.__file__)),
        str(out),
        *worker_args,
    ]
    return subprocess.Popen(command, cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(process: subprocess.Popen) -> None:
    output, _ = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 0, output[-6000:]


@pytest.fixture(scope="module")
def fsdp_run(tmp_path_factory) -> Path:
    """GPT and BERT, two processes on one machine (the config's num_processes)."""
    out = tmp_path_factory.mktemp("fsdp2")
    finish(launch(out, "--main_process_port", str(free_port()), worker_args=("--families", "gpt", "bert")))
    return out


def result(run: Path, family: str) -> dict:
    return json.loads((run / family / "result.json").read_text())


# ---- FSDP2: sharded, equal to one process, checkpoints -------------------------------------------------------


@pytest.mark.parametrize("family", ["gpt", "bert"])
def test_fsdp2_shards_parameters_and_optimizer_state(fsdp_run, family):
    run = result(fsdp_run, family)
    assert run["world_size"] == 2
    ranks = run["ranks"]
    full_params, full_optim = ranks[0]["param_full_bytes"], ranks[0]["optim_full_bytes"]
    assert full_params == sum(p.numel() * p.element_size() for p in worker.build_model(family).parameters())
    for rank in ranks:
        assert rank["all_params_dtensor"] and rank["all_optim_states_dtensor"]
        assert rank["placements"] == ["(Shard(dim=0),)"] and rank["mesh_sizes"] == [2]
        # AdamW: exp_avg and exp_avg_sq per parameter, sharded like it
        assert rank["optim_full_bytes"] == full_optim == 2 * full_params
        assert 0.45 < rank["param_local_bytes"] / full_params < 0.55, rank
        assert rank["optim_local_bytes"] == 2 * rank["param_local_bytes"]
    # every byte is held once: the shards add up to the whole, nothing replicated
    assert sum(rank["param_local_bytes"] for rank in ranks) == full_params
    assert sum(rank["optim_local_bytes"] for rank in ranks) == full_optim
    # the blocks are units of their own, besides the root
    block = {"gpt": "ScratchGPTLayer", "bert": "ScratchBertLayer"}[family]
    units = ranks[0]["fsdp_units"]
    assert units.count(block) == worker.SIZES["layers"] and FAMILIES[family].head in units


@pytest.mark.parametrize("family", ["gpt", "bert"])
def test_fsdp2_trains_like_one_process_with_the_same_global_batch(fsdp_run, family):
    run = result(fsdp_run, family)
    losses, weights = worker.reference_run(family)
    assert run["losses"] == pytest.approx(losses, rel=1e-5)
    assert len(set(losses)) == len(losses)  # the steps differ: the comparison is not of one number
    final = torch.load(fsdp_run / family / "final.pt")
    assert final.keys() == weights.keys()
    initial = worker.build_model(family).state_dict()
    moved = max((weights[k] - initial[k]).abs().max() for k in weights)
    assert moved > 1e-2  # training moved the weights well beyond the tolerance below
    for key in weights:
        # reduce-scatter sums in another order than one backward; Adam's normalised step turns the ~1e-7 gradient
        # differences into ~1e-5 weight differences after four steps at lr 1e-2
        torch.testing.assert_close(final[key], weights[key], atol=1e-4, rtol=0, msg=key)


@pytest.mark.parametrize("family", ["gpt", "bert"])
def test_fsdp2_sharded_and_full_checkpoints_resume_exactly(fsdp_run, family):
    run = result(fsdp_run, family)
    files = run["checkpoint_files"]
    for part in ("pytorch_model_fsdp_0", "optimizer_0"):  # torch.distributed.checkpoint: one file per rank
        assert {f"{part}/__0_0.distcp", f"{part}/__1_0.distcp", f"{part}/.metadata"} <= set(files["SHARDED_STATE_DICT"])
    assert files["FULL_STATE_DICT"] == ["optimizer.bin", "pytorch_model_fsdp.bin"]  # gathered, written by rank 0
    for kind, resumed in run["resumed"].items():
        assert resumed["losses"] == run["losses"][worker.SAVE_AT :], kind  # the same steps, bit for bit
        assert resumed["same_final_weights"], kind


@pytest.fixture(scope="module")
def consolidated(fsdp_run, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("consolidated")
    folders = {}
    for family in ("gpt", "bert"):
        for kind in worker.CHECKPOINT_KINDS:
            checkpoint = fsdp_run / family / f"step{worker.SAVE_AT}" / kind
            folders[family, kind] = worker.consolidate(checkpoint, kind, family, out / f"{family}-{kind}")
    return folders


@pytest.mark.parametrize("kind", worker.CHECKPOINT_KINDS)
@pytest.mark.parametrize("family", ["gpt", "bert"])
def test_fsdp2_checkpoints_consolidate_into_from_pretrained_folders(fsdp_run, consolidated, family, kind):
    import transformers

    folder = consolidated[family, kind]
    assert (folder / "model.safetensors").is_file() and not list(folder.glob("*.bin"))
    auto_class = getattr(transformers, "AutoModelForCausalLM" if family == "gpt" else "AutoModelForMaskedLM")
    model, info = auto_class.from_pretrained(folder, output_loading_info=True)
    assert type(model).__name__ == FAMILIES[family].head
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    saved = torch.load(fsdp_run / family / "saved.pt")  # the weights when the checkpoints were written
    state = model.state_dict()
    assert state.keys() == saved.keys()
    for key in saved:
        assert torch.equal(state[key], saved[key]), key


def test_fsdp2_consolidated_checkpoints_load_with_remote_code_alone(consolidated, tmp_path):
    """The consolidated folders, copied away, load with trust_remote_code in a `python -I` process where importing
    hf_scratch fails, and give the logits hf_scratch gives here."""
    import shutil

    import transformers
    from test_training import PADDED, REMOTE_LOADER
    from training_runs import run_without_hf_scratch

    jobs, expected = [], {}
    for (family, _kind), folder in consolidated.items():
        copied = shutil.copytree(folder, tmp_path / folder.name)
        auto_class = "AutoModelForCausalLM" if family == "gpt" else "AutoModelForMaskedLM"
        jobs.append({"folder": str(copied), "auto_class": auto_class, "inputs": PADDED})
        with torch.no_grad():
            model = getattr(transformers, auto_class).from_pretrained(copied).eval()
            expected[str(copied)] = model(**{k: torch.tensor(v) for k, v in PADDED.items()}).logits
    run_without_hf_scratch(REMOTE_LOADER, [json.dumps(jobs), str(tmp_path / "out.pt")], tmp_path, ENV, TIMEOUT)
    loaded = torch.load(tmp_path / "out.pt")
    real = torch.tensor(PADDED["attention_mask"], dtype=torch.bool)
    for folder, logits in expected.items():
        torch.testing.assert_close(loaded[folder][real], logits[real], atol=1e-5, rtol=1e-5)


# ---- multi-node: two machines on localhost -------------------------------------------------------------------


def test_two_machines_on_localhost_match_one_machine(fsdp_run, tmp_path):
    """`--num_machines 2 --machine_rank 0/1` with a static rendezvous at 127.0.0.1: one process per "machine",
    launched as on two real nodes; the same losses and final weights as the two processes of one machine."""
    port = str(free_port())
    machines = [
        launch(
            tmp_path,
            "--num_machines",
            "2",
            "--num_processes",
            "2",
            "--machine_rank",
            str(rank),
            "--main_process_ip",
            "127.0.0.1",
            "--main_process_port",
            port,
            worker_args=("--families", "gpt"),
        )
        for rank in (0, 1)
    ]
    for machine in machines:
        finish(machine)
    two_machines, one_machine = result(tmp_path, "gpt"), result(fsdp_run, "gpt")
    assert two_machines["world_size"] == 2
    assert two_machines["losses"] == one_machine["losses"]
    assert two_machines["ranks"] == one_machine["ranks"]
    final_two, final_one = torch.load(tmp_path / "gpt" / "final.pt"), torch.load(fsdp_run / "gpt" / "final.pt")
    for key in final_one:
        assert torch.equal(final_two[key], final_one[key]), key


# ---- every family's _no_split_modules are its FSDP units -----------------------------------------------------


@pytest.fixture
def one_process_group(monkeypatch):
    """A world-size-1 gloo group in this process (fully_shard needs one), gone after the test; the plugin's
    environment writes are undone too."""
    import torch.distributed as dist

    monkeypatch.setenv("FSDP_CPU_RAM_EFFICIENT_LOADING", "false")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def _inputs(family: str) -> tuple[dict, dict]:
    spec = FAMILIES[family]
    sizes = {**fixed_sizes(), "layers": 2}
    kwargs = spec.inputs(sizes, sizes["ids"], None)
    kwargs["labels"] = kwargs["decoder_input_ids"] if spec.seq2seq else sizes["ids"]
    return sizes, kwargs


# Besides each family's default: the configurations that change what is shared between modules.
WRAP_VARIANTS = {
    "transformer": {
        "shared embedding, untied output": {"tie_word_embeddings": False},
        "separate vocabularies, untied": {"share_encoder_decoder_embeddings": False, "tie_word_embeddings": False},
    },
    "transfo_xl": {
        "shared u and v": {"untie_r": False},
        "projected input, tied projections": {"embedding_size": 4, "tie_projs": [True, False, True]},
        "one table per cluster, untied": {"div_val": 2, "tie_word_embeddings": False, "tie_projs": [False] * 3},
    },
}
# Ties accelerate's FSDP2 preparation cannot place: it puts get_input_embeddings() and get_output_embeddings() in
# one unit only when their ``.weight`` is the same tensor; any other weight the two share ends up in two units, and
# torch refuses at the first forward ("shared with a parameter already managed by another FSDP group"). transformers'
# own models fail the same way (MarianMTModel, whether it shares its embeddings or not). Strict: when accelerate
# learns these ties, the entry must go.
ACCELERATE_TIE_LIMITS = {
    ("transformer", "separate vocabularies, tied output"): (
        {"share_encoder_decoder_embeddings": False},
        "the output projection is tied to the decoder's embedding, not to get_input_embeddings() (the encoder's)",
    ),
    ("transfo_xl", "one table per cluster, tied"): (
        {"div_val": 2},
        "an adaptive input of several tables has no single `.weight` for accelerate to match the softmax's against",
    ),
}


def _wrap_cases():
    for name in NAMES:
        yield pytest.param(name, {}, id=name)
        for label, overrides in WRAP_VARIANTS.get(name, {}).items():
            yield pytest.param(name, overrides, id=f"{name}: {label}")
    for (name, label), (overrides, reason) in ACCELERATE_TIE_LIMITS.items():
        mark = pytest.mark.xfail(strict=True, raises=ValueError, reason=reason)
        yield pytest.param(name, overrides, id=f"{name}: {label}", marks=mark)


@pytest.mark.parametrize("family,overrides", list(_wrap_cases()))
def test_every_family_wraps_its_no_split_modules(one_process_group, family, overrides):
    """accelerate's FSDP2 preparation (``fsdp2_prepare_model`` with the fsdp2.yaml wrap policy) makes every block
    class in ``_no_split_modules`` a unit of its own — the model is never one unit — and the sharded model computes
    the loss and gradients of the unsharded one."""
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor

    sizes, kwargs = _inputs(family)
    model = FAMILIES[family].build(sizes, attn_implementation="eager", **overrides).train()
    reference = copy.deepcopy(model)
    block_classes = set(model._no_split_modules)
    assert block_classes, f"{family} declares no _no_split_modules"
    blocks = [m for m in model.modules() if type(m).__name__ in block_classes]
    assert {type(b).__name__ for b in blocks} == block_classes  # every declared class exists in the model
    plugin = worker.fsdp2_plugin(
        fsdp_version=2, auto_wrap_policy="transformer_based_wrap", cpu_ram_efficient_loading=False
    )
    sharded = worker.shard(model, worker.AcceleratorOnCPU(plugin, 0, 1, dist.barrier))

    units = worker.fsdp_units(sharded)
    assert all(block in units for block in blocks)
    assert len(units) > 1 and sharded in units
    in_blocks = {id(p) for block in blocks for p in block.parameters()}
    assert 0 < len(in_blocks) < len(list(sharded.parameters()))  # the blocks hold parameters, the root others
    assert all(isinstance(p, DTensor) for p in sharded.parameters())

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss, expected = sharded(**kwargs).loss, reference(**kwargs).loss
    # a unit returning a view loses its pre-backward hook to any in-place op on it: FSDP2 warns, naming the unit
    # (torch's own nn.Linear returns one for 3-d inputs: the head units are not checked)
    views = [str(w.message) for w in caught if "returned a view tensor" in str(w.message)]
    assert not [message for message in views if any(f"FSDP{name}" in message for name in block_classes)], views
    loss.backward()
    expected.backward()
    torch.testing.assert_close(loss, expected, atol=1e-6, rtol=1e-6)
    grads = {name: p.grad.full_tensor() for name, p in sharded.named_parameters() if p.grad is not None}
    for name, p in reference.named_parameters():
        if p.grad is not None:
            torch.testing.assert_close(grads[name], p.grad, atol=1e-6, rtol=1e-5, msg=name)


@pytest.mark.parametrize("family", NAMES)
def test_a_sharded_model_saves_as_its_hf_scratch_class(one_process_group, family, tmp_path):
    """The final save of the training scripts under FSDP (``ScratchTrainer.save_model``: ``unsharded_model``, which
    the Trainer reaches only on GPUs) writes the gathered weights with the model's hf_scratch class, not with the
    ``FSDP<Class>`` that ``fully_shard`` makes of the model in place (its ``save_pretrained`` copies torch's
    ``_fsdp_*.py`` files as the model's code and names them in ``auto_map``). Here the model is sharded by
    accelerate's ``fsdp2_prepare_model`` on a world-size-1 group and gathered as ``Accelerator.get_state_dict``
    does; the folder equals the one the unsharded model saves."""
    import torch.distributed as dist
    from safetensors import safe_open

    import hf_scratch
    from hf_scratch.tools.trainer import saved_class, unsharded_model
    from training import common

    hf_class = getattr(hf_scratch, FAMILIES[family].head)
    sizes, kwargs = _inputs(family)
    model = FAMILIES[family].build(sizes, attn_implementation="eager")
    common.prepare_for_saving(model, tokenizer=None)
    model.save_pretrained(tmp_path / "unsharded")
    reference = copy.deepcopy(model)
    plugin = worker.fsdp2_plugin(
        fsdp_version=2, auto_wrap_policy="transformer_based_wrap", cpu_ram_efficient_loading=False
    )
    sharded = worker.shard(model, worker.AcceleratorOnCPU(plugin, 0, 1, dist.barrier))
    assert type(sharded) is not hf_class and isinstance(sharded, hf_class)  # FSDP<Class>, defined in torch
    assert saved_class(sharded) is hf_class and saved_class(reference) is hf_class

    unsharded_model(sharded, worker.full_state_dict(sharded)).save_pretrained(tmp_path / "saved")
    saved, unsharded = tmp_path / "saved", tmp_path / "unsharded"
    config, expected_config = (json.loads((folder / "config.json").read_text()) for folder in (saved, unsharded))
    assert config["architectures"] == [hf_class.__name__] and config["auto_map"] == expected_config["auto_map"]
    assert sorted(p.name for p in saved.glob("*.py")) == sorted(p.name for p in unsharded.glob("*.py"))
    with safe_open(saved / "model.safetensors", "pt") as f, safe_open(unsharded / "model.safetensors", "pt") as g:
        assert sorted(f.keys()) == sorted(g.keys())
        assert all(torch.equal(f.get_tensor(key), g.get_tensor(key)) for key in f.keys())
    loaded = hf_class.from_pretrained(saved, attn_implementation="eager").eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded(**kwargs).logits, reference.eval()(**kwargs).logits, atol=0, rtol=0)


# ---- why the plain loop: accelerate runs no FSDP on CPU ------------------------------------------------------


CPU_STATE_PROBE = """
import json
from accelerate import Accelerator
accelerator = Accelerator(cpu=True)
print(json.dumps({
    "type": str(accelerator.distributed_type),
    "fsdp": getattr(accelerator.state, "fsdp_plugin", None) is not None,
}))
"""


def test_accelerate_gives_cpu_processes_no_fsdp_state():
    """The limitation the worker works around (its docstring): with the launcher's FSDP2 environment, an Accelerator
    on CPU is MULTI_CPU without an FSDP plugin — the Trainer would run plain DDP. When accelerate lifts this, this
    test fails, and the sharded runs above should move to the Trainer."""
    env = dict(
        ENV,
        ACCELERATE_USE_FSDP="true",
        FSDP_VERSION="2",
        FSDP_AUTO_WRAP_POLICY="TRANSFORMER_BASED_WRAP",
        RANK="0",
        LOCAL_RANK="0",
        WORLD_SIZE="1",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(free_port()),
    )
    completed = subprocess.run(
        [sys.executable, "-c", CPU_STATE_PROBE], env=env, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert json.loads(completed.stdout.strip().splitlines()[-1]) == {"type": "DistributedType.MULTI_CPU", "fsdp": False}


def test_fsdp2_config_is_the_one_the_runs_use():
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(FSDP2_CONFIG))
    assert config.distributed_type.value == "FSDP" and config.num_processes == 2 and config.mixed_precision == "bf16"
    fsdp = config.fsdp_config
    assert fsdp["fsdp_version"] == 2 and fsdp["fsdp_auto_wrap_policy"] == "TRANSFORMER_BASED_WRAP"
    assert fsdp["fsdp_state_dict_type"] == "SHARDED_STATE_DICT" and fsdp["fsdp_reshard_after_forward"] is True

"""Checkpoints saved by earlier code load in today's code and give the same outputs. The folders under
tests/fixtures/checkpoints were written once by ``make_checkpoints.py`` (the commit is in each
``expected.safetensors``' metadata) — every head of every family, plus each family's main head with its non-default
switches — and are never regenerated to make this test pass: a rename of a weight or a config field that breaks
users' checkpoints fails here."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors import safe_open

import hf_scratch

CHECKPOINTS = Path(__file__).resolve().parent / "fixtures" / "checkpoints"
FOLDERS = sorted(path.parent for path in CHECKPOINTS.glob("*/*/expected.safetensors"))
# family name (the suffix of configuration_<family>.py) → its config class, for every registered family
FAMILIES = {config.family_name(): config for config in hf_scratch.FAMILY_CONFIGS}


def test_every_family_and_head_has_a_committed_checkpoint():
    saved = {(folder.parent.name.split("-")[0], folder.name) for folder in FOLDERS}
    assert {family for family, _ in saved} == set(FAMILIES)
    for family, config_class in FAMILIES.items():
        heads = {ref.split(".")[1] for key, ref in config_class.default_auto_map.items() if key != "AutoConfig"}
        assert heads <= {head for fam, head in saved if fam == family}, (family, heads)


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_old_checkpoint_loads_and_reproduces_its_outputs(folder):
    with safe_open(folder / "expected.safetensors", framework="pt") as stored:
        tensors = {key: stored.get_tensor(key) for key in stored.keys()}
    inputs = {key.removeprefix("input."): value for key, value in tensors.items() if key.startswith("input.")}
    expected = {key: value for key, value in tensors.items() if key.startswith("out.")}
    model_class = getattr(hf_scratch, folder.name)
    model, info = model_class.from_pretrained(folder, output_loading_info=True)
    assert not any(info.values()), info  # no missing, unexpected or mismatched weight
    model.eval()
    with torch.no_grad():
        actual = _flat(model(**inputs, return_dict=True))
    assert actual.keys() == expected.keys()
    for key in expected:
        torch.testing.assert_close(actual[key], expected[key], atol=1e-5, rtol=1e-5, msg=f"{folder.name} {key}")


def _flat(output, prefix: str = "out") -> dict[str, torch.Tensor]:
    if isinstance(output, torch.Tensor):
        return {prefix: output}
    items = (
        output.items() if hasattr(output, "items") else enumerate(output) if isinstance(output, (tuple, list)) else []
    )
    found = {}
    for key, value in items:
        found.update(_flat(value, f"{prefix}.{key}"))
    return found

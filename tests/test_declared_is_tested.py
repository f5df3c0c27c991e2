"""Declared is tested: the Python, torch and transformers ranges pyproject admits are the ones CI runs, at both ends.

Three places say it and must agree: pyproject's bounds, the README's test block (what CI installs: the newest
environment and the floor environment) and the table under "Tested range" in docs/getting-started.md, the one place
in the docs that states the ranges. In CI, each environment also checks that it is the one the block meant to build
(pip capped below the newest torch once installed an older one without a word)."""

from __future__ import annotations

import os
import re
import sys
import tomllib
from pathlib import Path

import pytest
import torch
import transformers
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def dependency(name: str) -> SpecifierSet:
    requirements = [Requirement(text) for text in pyproject()["project"]["dependencies"]]
    return next(requirement.specifier for requirement in requirements if requirement.name == name)


def lower_and_upper(specifier: SpecifierSet) -> tuple[Version, Version]:
    """The inclusive floor (``>=``) and the exclusive ceiling (``<``) of a range; both must be declared."""
    bounds = {spec.operator: Version(spec.version) for spec in specifier}
    assert set(bounds) == {">=", "<"}, f"{specifier}: declare a floor (>=) and a ceiling (<), as CI tests both ends"
    return bounds[">="], bounds["<"]


def readme_test_block() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    quickstart = re.search(r"^## Quickstart\s*$(.*?)(?=^## )", text, re.S | re.M).group(1)
    return re.findall(r"```bash\n(.*?)```", quickstart, re.S)[1]


def ends_in_ci() -> dict[str, dict[str, Version]]:
    """What the README's test block installs: {"newest": {...}, "floor": {...}} with python, torch, transformers
    (the newest environment takes whatever transformers release is newest: no pin)."""
    block = readme_test_block()
    newest_python = re.search(r"^(?:PYENV_VERSION=\S+ )?python(3\.\d+) -m venv \.venv$", block, re.M)
    floor_python = re.search(r"^(?:PYENV_VERSION=\S+ )?python(3\.\d+) -m venv \.venv-floor$", block, re.M)
    assert newest_python and floor_python, block
    assert re.search(r"^\.venv/bin/pip install -r (\S+)$", block, re.M), "the newest torch comes from a file"
    newest_file = re.search(r"^\.venv/bin/pip install -r (\S+)$", block, re.M).group(1)
    # the package is installed with the same file, so that pip cannot swap the newest torch for another one
    assert re.search(rf'^\.venv/bin/pip install -e "\.\[test,docs\]" -r {re.escape(newest_file)}$', block, re.M)
    pins = dict(re.findall(r"^([\w-]+)==([\d.]+)$", (REPO / newest_file).read_text(encoding="utf-8"), re.M))
    floor_torch = re.search(r"^\.venv-floor/bin/pip install torch==([\d.]+)$", block, re.M)
    floor_transformers = re.search(r'^\.venv-floor/bin/pip install .*"transformers==([\d.]+)"$', block, re.M)
    assert floor_torch and floor_transformers, block
    return {
        "newest": {"python": Version(newest_python.group(1)), "torch": Version(pins["torch"])},
        "floor": {
            "python": Version(floor_python.group(1)),
            "torch": Version(floor_torch.group(1)),
            "transformers": Version(floor_transformers.group(1)),
        },
    }


def documented_range() -> dict[str, tuple[str, str]]:
    """The docs' table: {"Python": (floor, newest), "torch": …, "transformers": …}."""
    text = (REPO / "docs" / "getting-started.md").read_text(encoding="utf-8")
    section = re.search(r"^## Tested range\s*$(.*?)(?=^## )", text, re.S | re.M).group(1)
    rows = re.findall(r"^\| (Python|torch|transformers) \| ([^|]+) \| ([^|]+) \|", section, re.M)
    return {name: (floor.strip(), newest.strip()) for name, floor, newest in rows}


def test_pyproject_admits_exactly_the_tested_ends():
    ends = ends_in_ci()
    python_floor, python_ceiling = lower_and_upper(SpecifierSet(pyproject()["project"]["requires-python"]))
    assert python_floor == ends["floor"]["python"]
    newest = ends["newest"]["python"]
    assert python_ceiling == Version(f"{newest.major}.{newest.minor + 1}"), "the ceiling is just above the newest"
    torch_floor, torch_ceiling = lower_and_upper(dependency("torch"))
    assert torch_floor == ends["floor"]["torch"]
    assert ends["newest"]["torch"] < torch_ceiling
    newest_torch = ends["newest"]["torch"]
    assert torch_ceiling == Version(f"{newest_torch.major}.{newest_torch.minor + 1}"), "no untested minor admitted"
    transformers_floor, _ = lower_and_upper(dependency("transformers"))
    assert transformers_floor == ends["floor"]["transformers"]


def test_the_docs_state_the_same_ranges():
    ends, documented = ends_in_ci(), documented_range()
    assert set(documented) == {"Python", "torch", "transformers"}, documented
    assert documented["Python"] == (str(ends["floor"]["python"]), str(ends["newest"]["python"]))
    assert documented["torch"] == (str(ends["floor"]["torch"]), str(ends["newest"]["torch"]))
    assert documented["transformers"][0] == str(ends["floor"]["transformers"])
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    summary = (
        f"Python {ends['floor']['python']} to {ends['newest']['python']}, torch {ends['floor']['torch']} to "
        f"{ends['newest']['torch']}, transformers {ends['floor']['transformers']} to"
    )
    assert summary in " ".join(readme.split()), summary


@pytest.mark.boundary
@pytest.mark.skipif(not os.environ.get("CI"), reason="a developer's environment may be any admitted one; CI's is not")
def test_ci_runs_in_the_environment_the_block_declares():
    """In CI, the running Python and torch are one end of the block's (the newest or the floor), never something a
    capped or stale pip left behind."""
    ends = ends_in_ci()
    running = {
        "python": Version(f"{sys.version_info.major}.{sys.version_info.minor}"),
        "torch": Version(Version(torch.__version__).base_version),
        "transformers": Version(transformers.__version__),
    }
    end = "floor" if running["transformers"] == ends["floor"]["transformers"] else "newest"
    assert {name: running[name] for name in ends[end]} == ends[end], (end, running)

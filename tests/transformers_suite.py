"""transformers' own common model tests (``ModelTesterMixin``, ``tests/test_modeling_common.py``) of the INSTALLED
release, for ``test_transformers_model_tests.py``.

transformers publishes its test-suite only in the sdist of each release (the wheel has no ``tests/``). This module
downloads that sdist (``pip download --no-binary :all: --no-deps transformers==<installed version>``, about 10 MB)
the first time the tests run, extracts its ``tests/`` folder into a cache keyed by the version (shared by the pytest
workers, under a file lock) and imports it as the package ``transformers_sdist_tests``, so that the module's relative
imports resolve. Nothing of transformers' test code is committed here.

The sdist lacks two helper modules that ``test_modeling_common.py`` imports; only those are stubbed, with the names
imported and nothing else:

- ``tests/generation/test_utils.py`` (``GenerationTesterMixin``): the common tests use the name only to check that
  a tester of a generative model inherits it; our testers run the model tests, not the generation tests.
- ``tests/exporters/test_export.py`` (``ExportTesterMixin``, a base class of ``ModelTesterMixin``): its export
  tests are left out; ``tests/test_export.py`` and ``tests/test_onnx.py`` export every family themselves.

Offline (the download fails), :func:`load_common_tests` raises :class:`SuiteUnavailable` with the reason, and the
test module skips.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import types
from pathlib import Path

import transformers
from filelock import FileLock

PACKAGE = "transformers_sdist_tests"
# where the extracted tests live: one folder per transformers version (HF_SCRATCH_SDIST_CACHE moves it)
CACHE_ROOT = Path(os.environ.get("HF_SCRATCH_SDIST_CACHE", Path(tempfile.gettempdir()) / "hf_scratch_sdist_tests"))
DOWNLOAD_TIMEOUT_S = 300

# helper modules test_modeling_common.py imports that the sdist does not ship: {module: {name: stub class}}
MISSING_HELPERS = {
    "generation.test_utils": ("GenerationTesterMixin",),
    "exporters.test_export": ("ExportTesterMixin",),
}


class SuiteUnavailable(RuntimeError):
    """The installed release's tests could not be had (no network to the package registry, no such sdist)."""


def _download_tests(version: str, target: Path) -> None:
    """Download transformers==version's sdist and extract its ``tests/`` folder to ``target``."""
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        command = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", "--quiet"]
        command += ["--dest", scratch, f"transformers=={version}"]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S)
        except subprocess.TimeoutExpired as error:
            raise SuiteUnavailable(f"pip download of transformers=={version}'s sdist timed out") from error
        archives = list(Path(scratch).glob("transformers-*.tar.gz"))
        if done.returncode != 0 or not archives:
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise SuiteUnavailable(
                f"could not download transformers=={version}'s sdist from the package registry (offline?): {last[0]}"
            )
        extracted = Path(scratch) / "tests"
        with tarfile.open(archives[0]) as archive:
            members = [m for m in archive.getmembers() if m.name.split("/")[1:2] == ["tests"] and m.isreg()]
            for member in members:
                member.name = "/".join(member.name.split("/")[2:])
                # the "data" filter (no links out, no special files) where this Python has it (3.10.12, 3.11.4 on)
                safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
                archive.extract(member, extracted, **safe)
        if not (extracted / "test_modeling_common.py").exists():
            raise SuiteUnavailable(f"transformers=={version}'s sdist has no tests/test_modeling_common.py")
        os.replace(extracted, target)


def tests_folder(version: str = transformers.__version__) -> Path:
    """The extracted ``tests/`` folder of transformers==version's sdist, downloaded on first use."""
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    target = CACHE_ROOT / version
    with FileLock(str(CACHE_ROOT / f"{version}.lock"), timeout=DOWNLOAD_TIMEOUT_S + 60):
        if not (target / "test_modeling_common.py").exists():
            shutil.rmtree(target, ignore_errors=True)
            _download_tests(version, target)
    return target


def _stub_missing_helpers(folder: Path) -> None:
    """Register the helper modules the sdist lacks (``MISSING_HELPERS``), each with empty classes of the names
    imported, under ``PACKAGE``."""
    for dotted, names in MISSING_HELPERS.items():
        if (folder / (dotted.replace(".", "/") + ".py")).exists():
            continue  # this release ships it: the real module is used
        parent = f"{PACKAGE}.{dotted.rsplit('.', 1)[0]}"
        if parent not in sys.modules:
            package = types.ModuleType(parent)
            package.__path__ = []
            sys.modules[parent] = package
        module = types.ModuleType(f"{PACKAGE}.{dotted}")
        for name in names:
            setattr(module, name, type(name, (), {"__doc__": "stub: not in transformers' sdist"}))
        sys.modules[module.__name__] = module


def load_common_tests() -> types.ModuleType:
    """``transformers_sdist_tests.test_modeling_common`` of the installed release (``ModelTesterMixin``,
    ``ids_tensor``, ``random_attention_mask``, ...). Raises :class:`SuiteUnavailable` when it cannot be had."""
    name = f"{PACKAGE}.test_modeling_common"
    if name in sys.modules:
        return sys.modules[name]
    folder = tests_folder()
    if PACKAGE not in sys.modules:
        spec = importlib.util.spec_from_loader(PACKAGE, loader=None, is_package=True)
        package = importlib.util.module_from_spec(spec)
        package.__path__ = [str(folder)]
        sys.modules[PACKAGE] = package
    _stub_missing_helpers(folder)
    return importlib.import_module(name)


def name_our_heads(common: types.ModuleType, config_classes) -> None:
    """List every head of ``config_classes`` (by their ``default_auto_map``) in the model-name tables that
    ``common`` (the loaded ``test_modeling_common``) reads to tell a head's kind: ``MODEL_MAPPING_NAMES`` (base
    models: no loss, no training test), ``MODEL_FOR_MULTIPLE_CHOICE_MAPPING_NAMES`` (inputs expanded per choice),
    ``MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES`` (start/end labels), ... transformers lists its own models there
    by class name; ``AutoModel*.register`` (what ``hf_scratch`` does) reaches the Auto classes but not these name
    tables. The tables of ``common`` are replaced by extended copies: transformers' own stay as they are."""
    tables = {}
    for config_class in config_classes:
        for auto_name, reference in config_class.default_auto_map.items():
            auto_class = getattr(transformers, auto_name)
            names = getattr(getattr(auto_class, "_model_mapping", None), "_model_mapping", None)
            if names is not None:
                tables.setdefault(id(names), {})[config_class.model_type] = reference.rsplit(".", 1)[1]
    for attribute, value in list(vars(common).items()):
        if attribute.endswith("_MAPPING_NAMES") and id(value) in tables:
            setattr(common, attribute, type(value)({**value, **tables[id(value)]}))

"""The GPU benchmarks of issue 27 run on the CPU as dry runs, so that a lent GPU runs them as prepared:
benchmarks/gpu_longformer_flex.py (Longformer through flex_attention against transformers; here with torch's dense
flex_attention reference, as in test_longformer_flex.py) and benchmarks/gpu_gpt2_nanogpt.py (GPT-2 small against
nanoGPT's model.py and transformers). Tiny sizes, nothing compiled, nothing written; nanoGPT's arm only where
$NANOGPT_DIR names a checkout (the tests need nothing beside the repository)."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest
from test_longformer_flex import dense_flex_reference

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture
def benchmark(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return lambda name: importlib.import_module(name)


def test_longformer_flex_benchmark_dry_run(benchmark, capsys):
    script = benchmark("gpu_longformer_flex")
    arms = ["transformers", "ours banded", "ours flex"]
    with dense_flex_reference():  # the checks' comparison is test_longformer_flex.py's: none here
        failures = script.main(["--dry_run", "--check_lengths", "--lengths", "130", "--batches", "1", "--arms", *arms])
    out = capsys.readouterr().out
    assert failures == 0 and "{'batch': 1, 'tokens': 130" in out
    assert all(f"'{arm} (ms)': nan" not in out for arm in arms), out  # every arm was timed


def test_gpt2_nanogpt_benchmark_dry_run(benchmark, capsys):
    """Ours and transformers always; nanoGPT's own model.py too where $NANOGPT_DIR names a checkout, and without
    one the nanoGPT arm is refused with the command that gets it (the tests need nothing beside the repository)."""
    script = benchmark("gpu_gpt2_nanogpt")
    arms = ["ours", "transformers"]
    if os.environ.get("NANOGPT_DIR"):
        arms.insert(0, "nanoGPT")
    else:
        with pytest.raises(ValueError, match="git clone https://github.com/karpathy/nanoGPT"):
            script.main(["--dry_run", "--no_compile", "--arms", "nanoGPT", "ours"])
    script.main(["--dry_run", "--no_compile", "--arms", *arms])
    out = capsys.readouterr().out
    assert "fp32 losses" in out
    assert all(f"'model': '{arm}'" in out for arm in arms), out

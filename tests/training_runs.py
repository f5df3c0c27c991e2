"""What the training-script tests share (test_training.py, test_model_cards.py, test_cli.py): the flags of a tiny,
offline two-step run, and one run of each script (``RUNS``), made once per session by the ``run_outputs`` fixture
of conftest.py; and a process in which hf_scratch cannot be imported, where their hub-ready folders are loaded with
their remote code alone (``run_without_hf_scratch``: test_training.py, test_distributed.py, test_trl.py,
test_example_contract.py)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import hf_scratch  # noqa: E402,F401  (registers the families)
from training import (  # noqa: E402
    run_classification,
    run_clm,
    run_mlm,
    run_multiple_choice,
    run_ner,
    run_pretraining,
    run_qa,
    run_translation,
)

TINY = [
    "--model_size",
    "tiny",
    "--max_steps",
    "2",
    "--per_device_train_batch_size",
    "2",
    "--per_device_eval_batch_size",
    "4",
    "--max_train_samples",
    "16",
    "--max_eval_samples",
    "4",
    "--max_seq_length",
    "32",
    "--tokenizer_vocab_size",
    "300",
    "--logging_steps",
    "1",
    "--save_strategy",
    "no",
    "--report_to",
    "none",
    "--use_cpu",
    "--dataloader_pin_memory",
    "false",
    "--disable_tqdm",
    "true",
    "--seed",
    "0",
]

# (script module, model type, extra arguments, the metrics its evaluation must report)
RUNS = {
    "mlm-bert": (run_mlm, "scratch-bert", [], ["eval_loss", "eval_perplexity"]),
    "pretraining-bert": (run_pretraining, "scratch-bert", [], ["eval_loss", "eval_mlm_accuracy", "eval_nsp_accuracy"]),
    "clm-gpt": (run_clm, "scratch-gpt", [], ["eval_loss", "eval_perplexity"]),
    "clm-gpt-char": (run_clm, "scratch-gpt", ["--tokenizer_type", "char"], ["eval_loss", "eval_perplexity"]),
    "classification-bert": (run_classification, "scratch-bert", [], ["eval_loss", "eval_accuracy", "eval_f1"]),
    "classification-gpt": (run_classification, "scratch-gpt", [], ["eval_loss", "eval_accuracy", "eval_f1"]),
    "ner-bert": (
        run_ner,
        "scratch-bert",
        [],
        ["eval_loss", "eval_f1", "eval_precision", "eval_recall", "eval_accuracy"],
    ),
    # a window holds the question too: the longest of the speakers task is 46 tokens with TINY's 300-word vocabulary
    "qa-bert": (
        run_qa,
        "scratch-bert",
        ["--max_seq_length", "96", "--doc_stride", "16"],
        ["eval_exact_match", "eval_f1"],
    ),
    "multiple-choice-bert": (run_multiple_choice, "scratch-bert", [], ["eval_loss", "eval_accuracy"]),
    "multiple-choice-gpt": (run_multiple_choice, "scratch-gpt", [], ["eval_loss", "eval_accuracy"]),
    "multiple-choice-gpt-lm": (run_multiple_choice, "scratch-gpt", ["--lm_labels"], ["eval_loss", "eval_accuracy"]),
    "translation-transformer": (
        run_translation,
        "scratch-transformer",
        ["--generation_max_length", "8"],
        ["eval_loss", "eval_bleu"],
    ),
    "translation-rnn": (run_translation, "scratch-rnn", ["--generation_max_length", "8"], ["eval_loss", "eval_bleu"]),
    "clm-transfo-xl": (run_clm, "scratch-transfo-xl", [], ["eval_loss", "eval_perplexity"]),
    "mlm-longformer": (run_mlm, "scratch-longformer", [], ["eval_loss", "eval_perplexity"]),
    "classification-longformer": (
        run_classification,
        "scratch-longformer",
        [],
        ["eval_loss", "eval_accuracy", "eval_f1"],
    ),
    "qa-longformer": (
        run_qa,
        "scratch-longformer",
        ["--max_seq_length", "96", "--doc_stride", "16"],
        ["eval_exact_match", "eval_f1"],
    ),
}


def runner(tmp_path_factory):
    """A function running each script of ``RUNS`` once (lazily, the first time it is asked for), giving its results
    and output folder, and under ``"printed"`` what the run printed (its standard output)."""
    cache: dict[str, dict] = {}

    def get(name: str) -> dict:
        if name not in cache:
            module, model_type, extra, _ = RUNS[name]
            output_dir = tmp_path_factory.mktemp(name)
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                results = module.main(["--model_type", model_type, "--output_dir", str(output_dir), *TINY, *extra])
            cache[name] = {**results, "printed": printed.getvalue()}
        return cache[name]

    return get


# ---- a process where hf_scratch cannot be imported ------------------------------------------------------------

# What such a process runs first: importing hf_scratch (or the training package) fails there.
BLOCK_HF_SCRATCH = textwrap.dedent(
    """
    import importlib.abc
    import sys

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if (
                name == "hf_scratch"
                or name.startswith("hf_scratch.")
                or name == "training"
                or name.startswith("training.")
            ):
                raise ImportError(f"{name} is blocked in this process")

    sys.meta_path.insert(0, Blocker())
    try:
        import hf_scratch  # noqa: F401
        raise SystemExit("hf_scratch is importable: the test would prove nothing")
    except ImportError:
        pass
    """
)


def run_without_hf_scratch(
    script: str, args: list[str], tmp_path: Path, env: Mapping[str, str] = os.environ, timeout: int = 300
) -> str:
    """Run ``script`` with ``args`` in a fresh ``python -I`` process (no PYTHONPATH, no user site-packages) where
    importing hf_scratch fails (``BLOCK_HF_SCRATCH`` runs first), offline, with transformers' cache of remote code
    under ``tmp_path``; the test fails with the end of its stderr unless it succeeds. Returns what it printed."""
    path = tmp_path / "without_hf_scratch.py"
    path.write_text(BLOCK_HF_SCRATCH + script)
    env = {key: value for key, value in env.items() if key != "PYTHONPATH"}
    env.update(HF_MODULES_CACHE=str(tmp_path / "modules"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    completed = subprocess.run(
        [sys.executable, "-I", str(path), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout

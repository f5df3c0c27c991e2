"""TRL's trainers on hf_scratch models (issue 47): ``RewardTrainer`` on GPT's and BERT's sequence classifiers (one
label: a reward model started from the language-model folders the training scripts write) and ``DPOTrainer`` on
GPT's language-model head train a few steps — with hf_scratch importable, and from the hub-ready folder alone
(``trust_remote_code=True`` in a ``python -I`` process where hf_scratch cannot be imported). RewardTrainer calls
every model with ``use_cache=False``; DPOTrainer loads its reference model from the folder again
(``trust_remote_code`` reaches it through ``DPOConfig``). What runs is ``trl_worker.py``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import trl_worker
from test_packed_sequences import CHECKPOINTING
from training_runs import run_without_hf_scratch

pytestmark = pytest.mark.boundary

# (trainer, training run whose folder it starts from)
JOBS = [("reward", "clm-gpt"), ("reward", "mlm-bert"), ("dpo", "clm-gpt")]
CLASSES = {
    ("reward", "clm-gpt"): "ScratchGPTForSequenceClassification",
    ("reward", "mlm-bert"): "ScratchBertForSequenceClassification",
    ("dpo", "clm-gpt"): "ScratchGPTLMHeadModel",
}
STEPS = 2
SETTINGS = {
    "max_steps": STEPS,
    "per_device_train_batch_size": 2,
    "learning_rate": 1e-3,
    "logging_steps": 1,
    "save_strategy": "no",
    "report_to": "none",
    "use_cpu": True,
    "bf16": False,
    "disable_tqdm": True,
    "dataloader_pin_memory": False,
    "seed": 0,
    CHECKPOINTING: False,  # TRL's default turns it on through the old name, which warns from transformers 5.x on
}


# The reward model's loss, -log σ(r_chosen - r_rejected), does not depend on a bias added to every reward (BERT's
# classifier has one): its gradient is 0, and it alone does not move.
CANCELLED = {"reward": {"classifier.bias"}, "dpo": set()}


def assert_trained(result: dict, kind: str, run: str) -> None:
    assert result["class"] == CLASSES[kind, run], result
    assert len(result["losses"]) == STEPS and all(math.isfinite(loss) for loss in result["losses"]), result
    unmoved = set(result["unmoved"]) - CANCELLED[kind]
    assert not unmoved, f"{kind} on {run}: these weights did not train: {sorted(unmoved)}"


@pytest.mark.parametrize("kind, run", JOBS, ids=[f"{kind}-{run}" for kind, run in JOBS])
def test_trl_trains_hf_scratch_models(kind, run, run_outputs, tmp_path):
    folder = run_outputs(run)["output_dir"]
    result = trl_worker.train(kind, str(folder), str(tmp_path), SETTINGS, trust_remote_code=False)
    assert result["module"].startswith("hf_scratch.") and result["reference_module"].startswith("hf_scratch.")
    assert_trained(result, kind, run)


def test_trl_trains_the_folders_with_their_remote_code_alone(run_outputs, tmp_path):
    jobs = [
        {
            "kind": kind,
            "folder": str(run_outputs(run)["output_dir"]),
            "output_dir": str(tmp_path / f"{kind}-{run}"),
            "settings": SETTINGS,
        }
        for kind, run in JOBS
    ]
    script = Path(trl_worker.__file__).read_text()
    run_without_hf_scratch(script, [json.dumps(jobs), str(tmp_path / "results.json")], tmp_path)
    results = json.loads((tmp_path / "results.json").read_text())
    for (kind, run), result in zip(JOBS, results):
        assert result["module"].startswith("transformers_modules."), result
        assert result["reference_module"].startswith("transformers_modules."), result
        assert_trained(result, kind, run)

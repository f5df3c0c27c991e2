"""A few steps of TRL's trainers on a hub-ready folder written by ``training/`` (issue 47), for ``tests/test_trl.py``:
``RewardTrainer`` on a sequence classifier with one label (a reward model started from the folder's weights) and
``DPOTrainer`` on the language-model head. Imported by the test where hf_scratch is importable, and run as a script
after ``training_runs.BLOCK_HF_SCRATCH`` where it is not (the folder's remote code alone):

    python -I without_hf_scratch.py JOBS_JSON OUT_JSON

Imports only transformers, TRL, datasets and torch, as a user's script on the hub would (and no ``__future__``:
it runs after the blocker's lines).
"""

import json
import math
import sys
from typing import Any

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

PROMPTS = ["To be, or", "All the world's", "Now is the winter", "If music be"]
CHOSEN = [" not to be", " a stage", " of our discontent", " the food of love"]
REJECTED = [" a fish", " dull", " of green apples", " loud"]


def tokenizer_for(folder: str, trust_remote_code: bool) -> Any:
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=trust_remote_code)
    if tokenizer.pad_token is None:  # GPT's trained tokenizer has no pad token yet (issue 47, item 2: another fix)
        tokenizer.pad_token = tokenizer.eos_token
    if tokenizer.eos_token is None:  # RewardTrainer appends it to each text; BERT's, like bert-base's, has [SEP]
        tokenizer.eos_token = tokenizer.sep_token
    return tokenizer


def train(kind: str, folder: str, output_dir: str, settings: dict[str, Any], trust_remote_code: bool) -> dict:
    """``kind`` "reward" or "dpo" for a few steps on ``folder``; ``settings``: the trainer's arguments. Returns
    the model's class and module, the logged training losses and whether every weight that trains moved."""
    from trl import DPOConfig, DPOTrainer, RewardConfig, RewardTrainer

    tokenizer = tokenizer_for(folder, trust_remote_code)
    if kind == "reward":
        model = AutoModelForSequenceClassification.from_pretrained(
            folder, num_labels=1, trust_remote_code=trust_remote_code
        )
        texts = {
            "chosen": [prompt + answer for prompt, answer in zip(PROMPTS, CHOSEN)],
            "rejected": [prompt + answer for prompt, answer in zip(PROMPTS, REJECTED)],
        }
        trainer: Any = RewardTrainer(
            model=model,
            args=RewardConfig(output_dir=output_dir, **settings),
            train_dataset=Dataset.from_dict(texts),
            processing_class=tokenizer,
        )
    else:
        model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=trust_remote_code)
        trainer = DPOTrainer(  # TRL 1.16 loads the reference model from the folder again: with trust_remote_code
            model=model,
            args=DPOConfig(output_dir=output_dir, trust_remote_code=trust_remote_code, max_length=32, **settings),
            train_dataset=Dataset.from_dict({"prompt": PROMPTS, "chosen": CHOSEN, "rejected": REJECTED}),
            processing_class=tokenizer,
        )
    before = {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}
    trainer.train()
    after = dict(model.named_parameters())
    return {
        "class": type(model).__name__,
        "module": type(model).__module__,
        "reference_module": type(getattr(trainer, "ref_model", None) or model).__module__,
        "losses": [entry["loss"] for entry in trainer.state.log_history if "loss" in entry],
        "unmoved": [name for name, value in before.items() if torch.equal(value, after[name].detach())],
    }


if __name__ == "__main__":
    jobs = json.loads(sys.argv[1])
    results = [train(**job, trust_remote_code=True) for job in jobs]
    assert not any(m == "hf_scratch" or m.startswith("hf_scratch.") for m in sys.modules)
    assert all(math.isfinite(loss) for result in results for loss in result["losses"])
    with open(sys.argv[2], "w") as out:
        json.dump(results, out)

"""The training scripts end to end on tiny data: every script runs a few steps and writes a hub-ready folder whose
model card parses back (hub ids only in its metadata, uploaded once) and whose tokenizer reports the model's input
limit; checkpoints load where hf_scratch cannot be imported; rerunning a killed command resumes from its last
checkpoint and reproduces the uninterrupted run, a non-empty output folder without checkpoints is refused; two gloo
processes under ``accelerate launch`` match one process with the same global batch; bad arguments and unreadable
data fail with clear errors. The command-line flags themselves are tested in ``test_cli.py``."""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from training_runs import (  # (also puts the repository, and its training package, on sys.path)
    REPO,
    RUNS,
    TINY,
    run_without_hf_scratch,
)

from training import (
    run_classification,
    run_clm,
    run_mlm,
    run_multiple_choice,
    run_ner,
    run_pretraining,
    run_qa,
    run_translation,
)
from training.arguments import FAMILIES

# ---- every script end to end ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(RUNS))
def test_script_trains_evaluates_and_writes_a_hub_ready_folder(name, run_outputs):
    from huggingface_hub import ModelCard

    results = run_outputs(name)
    module, model_type, _, expected_metrics = RUNS[name]
    assert math.isfinite(results["train"]["train_loss"]) and results["train"]["train_loss"] > 0
    assert [entry["step"] for entry in results["log_history"] if "loss" in entry] == [1, 2]
    for metric in expected_metrics:
        assert metric in results["eval"] and math.isfinite(results["eval"][metric]), (metric, results["eval"])

    folder = Path(results["output_dir"])
    config = json.loads((folder / "config.json").read_text())
    from transformers import AutoConfig

    config_class = type(AutoConfig.for_model(model_type))
    assert config["model_type"] == model_type
    if name.startswith("multiple-choice-gpt"):  # the standard multiple-choice head, or the double heads for LM + MC
        assert config["architectures"] == [
            "ScratchGPTDoubleHeadsModel" if name.endswith("-lm") else "ScratchGPTForMultipleChoice"
        ]
    assert config["auto_map"] == config_class.default_auto_map  # every head loads with trust_remote_code
    family = FAMILIES[model_type]
    for code in (f"configuration_{family}.py", f"modeling_{family}.py", "configuration_common.py"):
        assert (folder / code).is_file(), code
    assert (folder / "model.safetensors").is_file() and not (folder / "pytorch_model.bin").exists()
    assert (folder / "tokenizer.json").is_file() and (folder / "tokenizer_config.json").is_file()
    if module in (run_clm, run_translation):  # generative heads
        generation = json.loads((folder / "generation_config.json").read_text())

        def ids(value):  # (some releases save the generation config's eos_token_id as a list: 5.10 does)
            return value if isinstance(value, list) else [value]

        assert ids(generation["eos_token_id"]) == ids(config["eos_token_id"])
        assert generation["pad_token_id"] == (
            config.get("pad_token_id") if config.get("pad_token_id") is not None else config["eos_token_id"]
        )

    card = ModelCard.load(folder / "README.md")
    data = card.data
    assert data.library_name == "transformers"
    assert (
        data.pipeline_tag
        == {
            run_mlm: "fill-mask",
            run_pretraining: "fill-mask",
            run_clm: "text-generation",
            run_classification: "text-classification",
            run_ner: "token-classification",
            run_qa: "question-answering",
            run_multiple_choice: "multiple-choice",
            run_translation: "translation",
        }[module]
    )
    assert {"hf_scratch", model_type, "custom_code"} <= set(data.tags)
    # the embedded data has no hub id: no `datasets`, and no model-index (its results need a dataset id)
    assert data.datasets is None and data.eval_results is None and "model-index" not in data.to_dict()
    assert data.base_model is None  # trained from scratch
    assert data.metrics and {f"eval_{metric}" for metric in data.metrics} <= set(expected_metrics)
    assert "## Limitations" in card.text and "## Training procedure" in card.text
    for metric in expected_metrics:  # the evaluation table of the card
        assert f"| {metric} | {round(results['eval'][metric], 4)} |" in card.text, metric


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_run_starts_with_the_defaults_it_changes_from_the_trainers(name, run_outputs):
    """The first lines a run prints are one per default its script changes from the Trainer's
    (``TRAINER_DEFAULT_OVERRIDES``): the value the run has (given, ours, or the Trainer's where ours does not apply),
    then ours and the Trainer's — the Trainer's read from its ``TrainingArguments`` field (5e-5, False, …)."""
    import dataclasses

    from transformers import Seq2SeqTrainingArguments, TrainingArguments

    from training.arguments import override_note, shown, trainer_default_overrides

    module = RUNS[name][0]
    script = module.__name__.rsplit(".", 1)[-1]
    training_class = Seq2SeqTrainingArguments if module is run_translation else TrainingArguments
    changed = list(trainer_default_overrides(training_class))
    assert {"output_dir", "do_train", "do_eval", "learning_rate", "report_to", "use_cpu"} <= set(changed)
    assert ({"predict_with_generate", "generation_max_length"} <= set(changed)) == (module is run_translation)
    lines = run_outputs(name)["printed"].splitlines()[: len(changed)]
    assert [line.split(" ")[:2] for line in lines] == [[f"{script}.py:", f"--{field}"] for field in changed], lines
    line_of = dict(zip(changed, lines))
    trainers = {field.name: field.default for field in dataclasses.fields(training_class)}
    for field, line in line_of.items():
        assert line.endswith(f"({override_note(field, script, training_class)})"), line
        assert line.endswith(f"; Trainer's default: {shown(trainers[field])})"), line
    # this run (TINY): ours where it gives nothing, what it gives where it does
    assert line_of["learning_rate"].startswith(f"{script}.py: --learning_rate 1e-3 (default here: by family and")
    assert line_of["do_train"].startswith(f"{script}.py: --do_train True (default here: true unless --do_eval")
    assert line_of["report_to"].startswith(f"{script}.py: --report_to none, given (default here: tensorboard")
    assert line_of["use_cpu"].startswith(f"{script}.py: --use_cpu True, given (")
    assert "Trainer's default: 5e-5)" in line_of["learning_rate"] and "Trainer's default: False)" in line_of["do_eval"]
    if module is run_translation:
        assert line_of["predict_with_generate"].startswith(f"{script}.py: --predict_with_generate True (default here")
        assert line_of["generation_max_length"].startswith(f"{script}.py: --generation_max_length 8, given (")


def test_tensorboard_logs_by_default(tmp_path):
    args = [a for a in TINY if a not in ("--report_to", "none")]
    run_mlm.main(["--model_type", "scratch-bert", "--output_dir", str(tmp_path), *args])
    assert list(tmp_path.glob("runs/**/events.out.tfevents.*")) or list(tmp_path.glob("**/events.out.tfevents.*"))


# ---- checkpoints load where hf_scratch cannot be imported -----------------------------------------------------

REMOTE_LOADER = textwrap.dedent(  # run by training_runs.run_without_hf_scratch
    """
    import json
    import sys

    import torch

    import transformers
    jobs = json.loads(sys.argv[1])
    outputs = {}
    for job in jobs:
        model = getattr(transformers, job["auto_class"]).from_pretrained(job["folder"], trust_remote_code=True).eval()
        assert not type(model).__module__.startswith("hf_scratch"), type(model).__module__
        inputs = {k: torch.tensor(v) for k, v in job["inputs"].items()}
        with torch.no_grad():
            outputs[job["folder"]] = model(**inputs).logits
    assert not any(m == "hf_scratch" or m.startswith("hf_scratch.") for m in sys.modules)
    torch.save(outputs, sys.argv[2])
    """
)


PADDED = {"input_ids": [[5, 6, 7, 8, 9], [10, 11, 12, 0, 0]], "attention_mask": [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]}
# one checkpoint per family: (run, auto class, inputs)
REMOTE_CASES = [
    ("mlm-bert", "AutoModelForMaskedLM", PADDED),
    ("clm-gpt", "AutoModelForCausalLM", PADDED),
    ("translation-transformer", "AutoModelForSeq2SeqLM", {**PADDED, "decoder_input_ids": [[1, 5, 6], [1, 7, 8]]}),
    ("translation-rnn", "AutoModelForSeq2SeqLM", {**PADDED, "decoder_input_ids": [[1, 5, 6], [1, 7, 8]]}),
    ("clm-transfo-xl", "AutoModelForCausalLM", {"input_ids": [[5, 6, 7, 8, 9], [10, 11, 12, 13, 14]]}),
    ("mlm-longformer", "AutoModelForMaskedLM", PADDED),
]


def test_checkpoints_load_with_remote_code_without_hf_scratch(run_outputs, tmp_path):
    """Every family's saved folder, copied away from the repository, loads with trust_remote_code=True in a fresh
    `python -I` process where importing hf_scratch fails, and gives the same logits as hf_scratch here."""
    import shutil

    import transformers

    jobs, expected = [], {}
    for name, auto_class, inputs in REMOTE_CASES:
        folder = tmp_path / name
        shutil.copytree(run_outputs(name)["output_dir"], folder, ignore=shutil.ignore_patterns("checkpoint-*", "runs"))
        jobs.append({"folder": str(folder), "auto_class": auto_class, "inputs": inputs})
        model = getattr(transformers, auto_class).from_pretrained(folder).eval()
        assert type(model).__module__.startswith("hf_scratch")
        with torch.no_grad():
            logits = model(**{k: torch.tensor(v) for k, v in inputs.items()}).logits
        real = torch.tensor(inputs.get("attention_mask", [[1] * 5] * 2), dtype=torch.bool)
        expected[str(folder)] = (
            logits,
            real if logits.shape[1] == real.shape[1] else torch.ones(logits.shape[:2], dtype=torch.bool),
        )
    run_without_hf_scratch(REMOTE_LOADER, [json.dumps(jobs), str(tmp_path / "out.pt")], tmp_path)
    loaded = torch.load(tmp_path / "out.pt")
    assert set(loaded) == set(expected)
    for folder, (logits, real) in expected.items():  # compared at the non-padding positions
        assert torch.allclose(loaded[folder][real], logits[real], atol=1e-5), folder


# ---- the saved tokenizers pad, with and without hf_scratch ------------------------------------------------------

PAD_CHECK = textwrap.dedent(
    """
    import json, sys
    from transformers import AutoConfig, AutoTokenizer, DataCollatorWithPadding

    # what the saved tokenizer pads two texts of different lengths to, by tokenizer.pad and by
    # DataCollatorWithPadding (what the example scripts' collators call), beside the config's pad id
    def padded(folder):
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
        config = AutoConfig.from_pretrained(folder, trust_remote_code=True)
        features = [tokenizer(text) for text in ("to be", "or not to be, that is the question")]
        by_pad = tokenizer.pad(features, return_tensors="pt")
        by_collator = DataCollatorWithPadding(tokenizer)(features)
        return {
            "pad_token": tokenizer.pad_token,
            "pad_token_id": tokenizer.pad_token_id,
            "config_pad_token_id": config.pad_token_id,
            "unpadded": [feature["input_ids"] for feature in features],
            "input_ids": by_pad["input_ids"].tolist(),
            "attention_mask": by_pad["attention_mask"].tolist(),
            "collated": {key: value.tolist() for key, value in by_collator.items()},
        }

    if __name__ == "__main__":  # where hf_scratch is not installed (run_without_hf_scratch)
        print("PADDED" + json.dumps({name: padded(folder) for name, folder in json.loads(sys.argv[1]).items()}))
    """
)
PAD_CASES = [case[0] for case in REMOTE_CASES]  # one folder per family


def test_saved_tokenizers_pad_with_and_without_hf_scratch(run_outputs, tmp_path):
    """Every family's saved tokenizer has a pad token, whose id is the config's ``pad_token_id``; ``tokenizer.pad``
    and ``DataCollatorWithPadding`` pad the shorter text with it (mask 0) and leave the tokens as they were, the same
    where hf_scratch is installed and where only the folder's code is (a ``python -I`` process)."""
    import shutil

    folders = {}
    for name in PAD_CASES:
        folders[name] = tmp_path / name
        shutil.copytree(run_outputs(name)["output_dir"], folders[name], ignore=shutil.ignore_patterns("checkpoint-*"))
    namespace: dict = {}
    exec(PAD_CHECK, namespace)  # here, where hf_scratch is installed
    here = {name: namespace["padded"](str(folder)) for name, folder in folders.items()}
    jobs = json.dumps({name: str(folder) for name, folder in folders.items()})
    printed = run_without_hf_scratch(PAD_CHECK, [jobs], tmp_path)
    assert json.loads(printed.split("PADDED", 1)[1]) == here
    for name, result in here.items():
        pad = result["pad_token_id"]
        assert result["pad_token"] is not None and pad is not None, name
        assert result["config_pad_token_id"] == pad, name
        short, long = result["unpadded"]
        assert len(short) < len(long), name
        assert result["input_ids"] == [short + [pad] * (len(long) - len(short)), long], name
        assert result["attention_mask"] == [[1] * len(short) + [0] * (len(long) - len(short)), [1] * len(long)], name
        assert result["collated"]["input_ids"] == result["input_ids"], name
        assert result["collated"]["attention_mask"] == result["attention_mask"], name


# ---- the saved tokenizer reports the model's input limit ----------------------------------------------------

NO_LIMIT = int(1e30)  # transformers' VERY_LARGE_INTEGER: what its own Transformer-XL / XLNet tokenizers say
# one run per family: (run, auto class, limit). The tiny Longformer's positions start at pad_token_id + 1 = 1.
LIMIT_CASES = [
    ("mlm-bert", "AutoModelForMaskedLM", 512),
    ("clm-gpt", "AutoModelForCausalLM", 512),
    ("translation-transformer", "AutoModelForSeq2SeqLM", 512),
    ("mlm-longformer", "AutoModelForMaskedLM", 511),
    ("clm-transfo-xl", "AutoModelForCausalLM", NO_LIMIT),
    ("translation-rnn", "AutoModelForSeq2SeqLM", NO_LIMIT),
]


@pytest.mark.parametrize("name, auto_class, limit", LIMIT_CASES, ids=[case[0] for case in LIMIT_CASES])
def test_saved_tokenizer_reports_the_models_input_limit(name, auto_class, limit, run_outputs):
    """Generic code truncates or groups text by tokenizer.model_max_length: it must be the model's real limit. A
    model reads exactly that many tokens and refuses one more; Transformer-XL and the RNN read longer inputs than
    any absolute position table here, so their tokenizer says "no limit", as transformers' own do."""
    import transformers

    folder = run_outputs(name)["output_dir"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    assert tokenizer.model_max_length == limit
    model = getattr(transformers, auto_class).from_pretrained(folder).eval()
    length = limit if limit != NO_LIMIT else 600
    decoder = (
        {"decoder_input_ids": torch.tensor([[model.config.decoder_start_token_id]])}
        if model.config.is_encoder_decoder
        else {}
    )
    ids = lambda n: torch.randint(5, len(tokenizer), (1, n))  # noqa: E731 (no special tokens: no padding positions)
    with torch.no_grad():
        assert model(input_ids=ids(length), **decoder).logits.shape[0] == 1
        if limit != NO_LIMIT:
            with pytest.raises(ValueError, match="positions"):
                model(input_ids=ids(length + 1), **decoder)


# ---- rerunning a command resumes; a non-empty output folder is refused ------------------------------------------


class Killed(RuntimeError):
    pass


def _recording_steps():
    from transformers import TrainerCallback

    class RecordSteps(TrainerCallback):
        """The global steps this invocation trains."""

        def __init__(self):
            self.steps = []

        def on_step_end(self, args, state, control, **kwargs):
            self.steps.append(state.global_step)

    return RecordSteps()


@pytest.mark.parametrize("model_type", ["scratch-gpt", "scratch-transfo-xl"])
def test_rerunning_a_killed_command_resumes_from_its_last_checkpoint(model_type, tmp_path, caplog):
    """Kill right after checkpoint-2 of 4, then run the same command again: it says it resumes from checkpoint-2,
    trains only steps 3-4, and steps 3-4 and the final eval match the uninterrupted run (dropout on, so the RNG
    state is restored too; Transformer-XL's memory is in the checkpoint)."""
    from transformers import TrainerCallback

    class KillAfterCheckpoint(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            if state.global_step == 2:
                raise Killed("simulated kill right after checkpoint-2 was written")

    args = [*TINY, "--max_steps", "4", "--save_strategy", "steps", "--save_steps", "2", "--tokenizer_type", "char"]
    full = run_clm.main(["--model_type", model_type, "--output_dir", str(tmp_path / "full"), *args])
    command = ["--model_type", model_type, "--output_dir", str(tmp_path / "killed"), *args]
    with pytest.raises(Killed):
        run_clm.main(command, callbacks=[KillAfterCheckpoint()])
    checkpoint = tmp_path / "killed" / "checkpoint-2"
    assert (checkpoint / "model.safetensors").is_file() and not (tmp_path / "killed" / "checkpoint-4").exists()
    if model_type == "scratch-transfo-xl":
        assert list(checkpoint.glob("transfo_xl_mems_*.pt"))
    steps = _recording_steps()
    with caplog.at_level(logging.WARNING, logger="training.checkpoints"):
        resumed = run_clm.main(command, callbacks=[steps])
    assert f"resuming training from {checkpoint}" in caplog.text
    assert steps.steps == [3, 4]  # the global step continues from the checkpoint
    assert json.loads((tmp_path / "killed" / "trainer_state.json").read_text())["global_step"] == 4
    losses = lambda results: {e["step"]: e["loss"] for e in results["log_history"] if "loss" in e}  # noqa: E731
    for step in (3, 4):
        assert losses(resumed)[step] == pytest.approx(losses(full)[step], abs=1e-6)
    assert resumed["eval"]["eval_loss"] == pytest.approx(full["eval"]["eval_loss"], abs=1e-6)


def test_explicit_resume_from_checkpoint_is_used(tmp_path, caplog):
    """--resume_from_checkpoint names the checkpoint itself (here: the earlier of two)."""
    args = [
        "--model_type",
        "scratch-gpt",
        "--output_dir",
        str(tmp_path),
        *TINY,
        "--max_steps",
        "2",
        "--save_strategy",
        "steps",
        "--save_steps",
        "1",
        "--tokenizer_type",
        "char",
    ]
    run_clm.main(args)
    steps = _recording_steps()
    with caplog.at_level(logging.WARNING, logger="training.checkpoints"):
        run_clm.main(
            [*args, "--max_steps", "3", "--resume_from_checkpoint", str(tmp_path / "checkpoint-1")], callbacks=[steps]
        )
    assert steps.steps == [2, 3] and f"Resuming training from {tmp_path / 'checkpoint-1'}" in caplog.text


def test_non_empty_output_dir_without_checkpoints_is_refused_unless_overwritten(tmp_path, caplog):
    output_dir = tmp_path / "out"
    output_dir.mkdir()
    (output_dir / "notes.txt").write_text("a file the user keeps here")
    args = ["--model_type", "scratch-gpt", "--output_dir", str(output_dir), *TINY, "--tokenizer_type", "char"]
    with pytest.raises(ValueError, match=r"is not empty and holds no checkpoint-N folder.*--overwrite_output_dir"):
        run_clm.main(args)
    # a stale checkpoint of an earlier run would be resumed from; --overwrite_output_dir starts over and removes it
    (output_dir / "checkpoint-7").mkdir()
    with pytest.raises(ValueError, match="give one of the two"):
        run_clm.main([*args, "--overwrite_output_dir", "--resume_from_checkpoint", str(output_dir / "checkpoint-7")])
    steps = _recording_steps()
    with caplog.at_level(logging.WARNING, logger="training.checkpoints"):
        run_clm.main([*args, "--overwrite_output_dir"], callbacks=[steps])
    assert steps.steps == [1, 2] and "--overwrite_output_dir" in caplog.text
    assert not (output_dir / "checkpoint-7").exists() and (output_dir / "notes.txt").is_file()
    assert (output_dir / "model.safetensors").is_file()
    # evaluation only never trains, so it never refuses nor resumes
    assert "train" not in run_clm.main([*args, "--do_eval"])


# ---- two processes under accelerate launch ------------------------------------------------------------------

DDP_WRAPPER = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, {repo!r})
    import torch
    from transformers import TrainerCallback
    from training import run_clm

    class DumpParameters(TrainerCallback):
        def on_train_end(self, args, state, control, model=None, **kwargs):
            torch.save(
                {{k: v.detach().clone() for k, v in model.state_dict().items()}},
                {out!r} + f"/params-rank{{args.process_index}}.pt",
            )

    results = run_clm.main(sys.argv[1:], callbacks=[DumpParameters()])
    if results.get("train") is not None:
        json.dump([e for e in results["log_history"] if "loss" in e], open({out!r} + "/losses.json", "w"))
    """
)


def test_accelerate_two_processes_match_one_process(run_outputs, tmp_path):
    tokenizer_dir = run_outputs("clm-gpt-char")["output_dir"]
    common = [
        "--model_type",
        "scratch-gpt",
        "--tokenizer_name",
        tokenizer_dir,
        *TINY,
        "--max_steps",
        "3",
        "--config_overrides",
        "hidden_dropout_prob=0,attention_probs_dropout_prob=0,embedding_dropout_prob=0",
        "--ddp_find_unused_parameters",
        "false",
        "--train_sampling_strategy",
        "sequential",
    ]  # the same examples form each global batch in both runs
    single = run_clm.main([*common, "--output_dir", str(tmp_path / "single"), "--per_device_train_batch_size", "4"])
    wrapper = tmp_path / "ddp_wrapper.py"
    wrapper.write_text(DDP_WRAPPER.format(repo=str(REPO), out=str(tmp_path)))
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "accelerate.commands.accelerate_cli",
            "launch",
            "--multi_gpu",
            "--num_processes",
            "2",
            "--num_machines",
            "1",
            "--mixed_precision",
            "no",
            "--dynamo_backend",
            "no",
            "--main_process_port",
            "29533",
            str(wrapper),
            *common,
            "--output_dir",
            str(tmp_path / "ddp"),
            "--per_device_train_batch_size",
            "2",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    rank0, rank1 = (torch.load(tmp_path / f"params-rank{r}.pt") for r in (0, 1))
    assert rank0.keys() == rank1.keys()
    for key in rank0:
        assert torch.equal(rank0[key], rank1[key]), key
    ddp_losses = {e["step"]: e["loss"] for e in json.loads((tmp_path / "losses.json").read_text())}
    single_losses = {e["step"]: e["loss"] for e in single["log_history"] if "loss" in e}
    assert set(ddp_losses) == set(single_losses) == {1, 2, 3}
    for step, loss in single_losses.items():
        assert ddp_losses[step] == pytest.approx(loss, rel=1e-4), (step, ddp_losses, single_losses)


@pytest.mark.parametrize(
    "name, distributed_type",
    [
        ("ddp", "MULTI_GPU"),
        ("cpu_ddp", "MULTI_GPU"),
        ("fsdp", "FSDP"),
        ("deepspeed_zero2", "DEEPSPEED"),
        ("fsdp2", "FSDP"),
    ],
)
def test_accelerate_configs_parse(name, distributed_type):
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(REPO / "training" / "accelerate_configs" / f"{name}.yaml"))
    assert config.distributed_type.value == distributed_type and config.num_processes >= 2 and config.num_machines == 1
    if name == "fsdp":
        assert config.fsdp_config["fsdp_sharding_strategy"] == "FULL_SHARD"
        assert config.fsdp_config["fsdp_auto_wrap_policy"] == "TRANSFORMER_BASED_WRAP"
    if name == "deepspeed_zero2":
        assert config.deepspeed_config["zero_stage"] == 2


# ---- pre-training without next-sentence prediction -------------------------------------------------------------


def test_pretraining_without_nsp_trains_the_masked_lm_alone(tmp_path):
    """--next_sentence_prediction false (Devlin et al. 2019 Table 5, "No NSP"): the model is a masked LM without an
    NSP head, no training or evaluation batch carries ``next_sentence_label``, no output holds next-sentence logits,
    and the evaluation reports masked-token accuracy only. The flag parses in both spellings, default on."""
    from transformers import TrainerCallback

    from training.arguments import parse_arguments

    def parse(*flags):
        return parse_arguments(
            "run_pretraining",
            (run_pretraining.PretrainingArguments,),
            [*flags, "--model_type", "scratch-bert", "--output_dir", str(tmp_path / "parsed")],
        )[2]

    assert parse().next_sentence_prediction is True
    assert parse("--next_sentence_prediction", "false").next_sentence_prediction is False
    assert parse("--no_next_sentence_prediction").next_sentence_prediction is False
    seen = {"inputs": set(), "outputs": set()}

    class WatchForward(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, **kwargs):
            def record(module, inputs, kwargs, output):  # returns None: the output is left as it is
                seen["inputs"].update(kwargs)
                seen["outputs"].update(output.keys())

            model.register_forward_hook(record, with_kwargs=True)

    results = run_pretraining.main(
        [
            "--model_type",
            "scratch-bert",
            "--output_dir",
            str(tmp_path / "out"),
            *TINY,
            "--next_sentence_prediction",
            "false",
        ],
        callbacks=[WatchForward()],
    )
    assert "labels" in seen["inputs"] and "next_sentence_label" not in seen["inputs"], seen
    assert "logits" in seen["outputs"] and "seq_relationship_logits" not in seen["outputs"], seen
    assert {name for name in results["eval"] if name.endswith("accuracy")} == {"eval_mlm_accuracy"}
    assert math.isfinite(results["eval"]["eval_loss"])
    config = json.loads((Path(results["output_dir"]) / "config.json").read_text())
    assert config["architectures"] == ["ScratchBertForMaskedLM"]


# ---- classification switches: Longformer without global attention, GPT's auxiliary LM loss --------------------


def first_batch(script, args: list[str]):
    """(model, first training batch) of a script's run, stopped before its first step: the training loop itself is
    the one every script test runs."""
    from transformers import TrainerCallback

    class FirstBatch(TrainerCallback, Exception):
        def on_train_begin(self, args, state, control, model=None, train_dataloader=None, **kwargs):
            self.model, self.batch = model.eval(), next(iter(train_dataloader))
            raise self

    with pytest.raises(FirstBatch) as stopped:
        script.main(args, callbacks=[FirstBatch()])
    return stopped.value.model, stopped.value.batch


def test_longformer_classification_without_global_attention(tmp_path):
    """--global_attention none: the script's batches carry an all-zero global_attention_mask, which the model obeys
    (its head's default gives the first token global attention, Beltagy et al. 2020 §3.1)."""
    model, batch = first_batch(
        run_classification,
        ["--model_type", "scratch-longformer", "--global_attention", "none", "--output_dir", str(tmp_path), *TINY],
    )
    assert batch["global_attention_mask"].shape == batch["input_ids"].shape and not batch["global_attention_mask"].any()
    with torch.no_grad():
        without = model(**batch, output_attentions=True)
        default = model(**{k: v for k, v in batch.items() if k != "global_attention_mask"}, output_attentions=True)
    assert default.global_attentions[0].shape[-1] == 1 and without.global_attentions is None  # one global token, none
    assert not torch.allclose(without.logits, default.logits)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model_type", "scratch-longformer", "--global_attention", "all"], "'all' is unknown"),
        (["--model_type", "scratch-bert", "--global_attention", "none"], "Longformer setting"),
        (["--model_type", "scratch-gpt", "--global_attention", "cls"], "Longformer setting"),
    ],
)
def test_global_attention_is_checked(args, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        run_classification.main([*args, "--output_dir", str(tmp_path), *TINY[2:]])


def test_gpt_classification_with_the_auxiliary_lm_loss(tmp_path):
    """--lm_labels: every batch carries the framed tokens as lm_labels (padding -100), and the loss the Trainer
    optimises is L3 = L2 + λ·L1 (GPT-1 eq. 5)."""
    model, batch = first_batch(
        run_classification, ["--model_type", "scratch-gpt", "--lm_labels", "--output_dir", str(tmp_path), *TINY]
    )
    lm_labels = batch.pop("lm_labels")
    assert torch.equal(lm_labels, batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100))
    with torch.no_grad():
        task_loss = model(**batch).loss
        combined = model(**batch, lm_labels=lm_labels).loss
        lm_logits = model.lm_head(
            model.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        )
    lm_loss = torch.nn.functional.cross_entropy(
        lm_logits[:, :-1].flatten(0, 1), lm_labels[:, 1:].flatten(), ignore_index=-100
    )
    assert model.config.lm_loss_weight > 0
    assert torch.allclose(combined, task_loss + model.config.lm_loss_weight * lm_loss, atol=1e-5)


def test_lm_labels_is_a_gpt_switch(tmp_path):
    with pytest.raises(ValueError, match="--lm_labels is GPT-1's auxiliary"):
        run_classification.main(
            ["--model_type", "scratch-bert", "--lm_labels", "--output_dir", str(tmp_path), *TINY[2:]]
        )


# ---- a reference checkpoint converted on the fly ------------------------------------------------------------


def test_fine_tune_a_reference_bert_checkpoint(tmp_path, run_outputs):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, BertConfig, BertForMaskedLM

    tokenizer = AutoTokenizer.from_pretrained(run_outputs("mlm-bert")["output_dir"])
    reference = BertForMaskedLM(
        BertConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=64,
        )
    )
    reference.save_pretrained(tmp_path / "bert")
    tokenizer.save_pretrained(tmp_path / "bert")
    results = run_classification.main(
        [
            "--model_name_or_path",
            str(tmp_path / "bert"),
            "--output_dir",
            str(tmp_path / "out"),
            *[a for a in TINY if a not in ("--model_size", "tiny")],
        ]
    )
    model = AutoModelForSequenceClassification.from_pretrained(results["output_dir"])
    assert type(model).__name__ == "ScratchBertForSequenceClassification" and model.config.num_labels == 3
    assert model.config.id2label == {0: "hamlet", 1: "macbeth", 2: "romeo_and_juliet"}
    # the encoder came from the reference weights (two steps at lr 5e-5 move them by ~1e-4), not a fresh init
    delta = (model.model.embeddings.word.weight - reference.bert.embeddings.word_embeddings.weight).abs().max()
    assert delta < 1e-3


def test_reference_gpt2_checkpoint_is_converted_on_the_fly(tmp_path, run_outputs):
    """run_clm --model_name_or_path <a transformers GPT-2 folder>: the folder it writes holds an hf_scratch GPT
    giving the reference logits (eval only, so the weights are the converted ones)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, GPT2Config, GPT2LMHeadModel

    tokenizer = AutoTokenizer.from_pretrained(run_outputs("clm-gpt")["output_dir"])
    reference = GPT2LMHeadModel(
        GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=2, n_positions=64)
    ).eval()
    reference.save_pretrained(tmp_path / "gpt2")
    tokenizer.save_pretrained(tmp_path / "gpt2")
    results = run_clm.main(
        [
            "--model_name_or_path",
            str(tmp_path / "gpt2"),
            "--output_dir",
            str(tmp_path / "out"),
            "--do_eval",
            *[a for a in TINY if a not in ("--model_size", "tiny")],
        ]
    )
    assert "train" not in results and math.isfinite(results["eval"]["eval_loss"])
    ours = AutoModelForCausalLM.from_pretrained(tmp_path / "out").eval()
    assert type(ours).__name__ == "ScratchGPTLMHeadModel"
    ids = torch.randint(0, len(tokenizer), (2, 12))
    with torch.no_grad():
        assert torch.allclose(ours(input_ids=ids).logits, reference(input_ids=ids).logits, atol=1e-4)


# ---- bad arguments and unreadable data ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "--model_type"),
        (["--model_type", "scratch-gpt"], "trains ['scratch-bert', 'scratch-longformer']"),
        (["--model_type", "scratch-bert", "--model_name_or_path", "x"], "not both"),
        (["--model_type", "scratch-bert", "--model_size", "huge"], "preset"),
        (["--model_type", "scratch-bert", "--train_file", "data.parquet"], "unsupported extension"),
        (["--model_type", "scratch-bert", "--train_file", "/nonexistent/train.txt"], "does not exist"),
        (["--model_type", "scratch-bert", "--config_overrides", "hidden_size"], "key=value"),
        (["--model_type", "scratch-bert", "--config_overrides", "no_such_field=3"], "no_such_field"),
        (["--model_type", "scratch-bert", "--config_overrides", "num_attention_heads=3"], "divisible"),
        (["--model_type", "scratch-bert", "--mlm_probability", "1.5"], "mlm_probability"),
        (["--model_type", "scratch-bert", "--no_such_flag", "1"], "no_such_flag"),
    ],
)
def test_bad_arguments_raise_clear_errors(args, message, tmp_path):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        run_mlm.main([*args, "--output_dir", str(tmp_path), *[a for a in TINY if a not in ("--model_size", "tiny")]])


def test_qa_refuses_a_question_that_leaves_no_room_for_overlapping_windows(tmp_path):
    # the embedded speakers task's longest question is 46 tokens with TINY's vocabulary: 48 tokens leave no context
    with pytest.raises(ValueError, match=r"longest question is \d+ tokens.*Raise --max_seq_length to at least"):
        run_qa.main(
            [
                "--model_type",
                "scratch-bert",
                "--output_dir",
                str(tmp_path),
                *TINY,
                "--max_seq_length",
                "48",
                "--doc_stride",
                "8",
            ]
        )


def test_unreadable_or_wrong_data_raises_clear_errors(tmp_path):
    output = str(tmp_path / "out")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"text": "fine", "label": "a"}\n{this is not json\n')
    with pytest.raises(ValueError, match="broken.jsonl"):
        run_classification.main(
            ["--model_type", "scratch-bert", "--train_file", str(broken), "--output_dir", output, *TINY[2:]]
        )
    wrong = tmp_path / "wrong.jsonl"
    wrong.write_text("".join(json.dumps({"review": f"s{i}", "label": i % 2}) + "\n" for i in range(10)))
    with pytest.raises(
        ValueError,
        match=r"no text column \('sentence' or 'text'\); its columns are \['review', 'label'\]: "
        r"name yours with --text_column_names",
    ):
        run_classification.main(
            ["--model_type", "scratch-bert", "--train_file", str(wrong), "--output_dir", output, *TINY[2:]]
        )
    with pytest.raises(ValueError, match="languages"):
        run_translation.main(
            ["--model_type", "scratch-transformer", "--source_lang", "fr", "--output_dir", output, *TINY[2:]]
        )


# ---- the quickstart ------------------------------------------------------------------------------------------


def test_quickstart_runs_end_to_end(tmp_path, capsys):
    from training import quickstart

    outcome = quickstart.main(["--max_steps", "2", "--output_dir", str(tmp_path / "qs"), "--prompt", "HAMLET."])
    printed = capsys.readouterr().out
    for step in ("1. Training", "2. Wrote the hub-ready folder", "3. Reloading", "4. Generating"):
        assert step in printed
    assert outcome["sample"].startswith("HAMLET.") and len(outcome["sample"]) > len("HAMLET.")
    assert (tmp_path / "qs" / "README.md").is_file() and (tmp_path / "qs" / "modeling_gpt.py").is_file()


# ---- size presets, auto_map, the trainer -------------------------------------------------------------------------


def test_size_presets_are_one_table_in_each_familys_own_names():
    """``--model_size`` reads one table (``SIZE_PRESETS``, shared names) that each config writes in its own names: an
    encoder-decoder sizes both sides, a family without a field (the RNN has no heads) leaves it out, and a family's
    own additions (Transformer-XL's memory) come on top; "base" keeps the paper's defaults."""
    import hf_scratch
    from hf_scratch.configuration_common import SIZE_PRESETS

    tiny = SIZE_PRESETS["tiny"]
    sides = lambda name, value: {f"encoder_{name}": value, f"decoder_{name}": value}  # noqa: E731
    assert hf_scratch.ScratchGPTConfig().size_preset("tiny") == tiny
    assert hf_scratch.ScratchTransformerConfig().size_preset("small") == {
        "hidden_size": 256,
        **sides("layers", 4),
        **sides("attention_heads", 4),
        **sides("ffn_dim", 1024),
    }
    assert hf_scratch.ScratchRNNConfig().size_preset("tiny") == {"hidden_size": 64, **sides("layers", 2)}
    transfo_xl = hf_scratch.ScratchTransfoXLConfig
    assert transfo_xl().size_preset("tiny") == {**tiny, **transfo_xl.size_presets["tiny"]}
    assert transfo_xl().size_preset("tiny")["mem_len"] == 32
    assert hf_scratch.ScratchBertConfig().size_preset("base") == {}


def test_auto_map_is_the_familys_full_map_completed_once(tmp_path):
    """A config gets its family's full ``auto_map`` when built (``ScratchConfig.__post_init__``, the one place it
    is set); a saved config whose map lacks heads (an older folder) gets them back when loaded, and an entry it
    names for a class of its own is kept."""
    from hf_scratch import ScratchGPTConfig

    assert ScratchGPTConfig().auto_map == ScratchGPTConfig.default_auto_map
    config = ScratchGPTConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2)
    config.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["auto_map"] == ScratchGPTConfig.default_auto_map
    saved["auto_map"] = {"AutoConfig": saved["auto_map"]["AutoConfig"], "AutoModel": "my_code.MyGPTModel"}
    (tmp_path / "config.json").write_text(json.dumps(saved))
    loaded = ScratchGPTConfig.from_pretrained(tmp_path).auto_map
    assert loaded == {**ScratchGPTConfig.default_auto_map, "AutoModel": "my_code.MyGPTModel"}


def test_train_evaluate_save_needs_a_scratch_trainer(tmp_path):
    """Atomic checkpoints, the unsharded save and the model card are ``ScratchTrainer`` methods: a plain ``Trainer``
    is refused before anything runs."""
    from transformers import Trainer, TrainingArguments

    from hf_scratch import ScratchGPTConfig, ScratchGPTLMHeadModel
    from training.common import train_evaluate_save
    from training.model_card import CardInfo

    model = ScratchGPTLMHeadModel(
        ScratchGPTConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2)
    )
    trainer = Trainer(model=model, args=TrainingArguments(str(tmp_path), report_to=[], use_cpu=True))
    card = CardInfo(task="causal language modelling", pipeline_tag="text-generation", dataset="none")
    with pytest.raises(TypeError, match="ScratchTrainer"):
        train_evaluate_save(trainer, None, None, trainer.args, card)

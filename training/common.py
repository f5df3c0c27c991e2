"""What every training script shares, so nothing is written twice:

- argument dataclasses (``ModelArguments``, ``DataArguments``) parsed with ``HfArgumentParser`` beside
  ``TrainingArguments`` / ``Seq2SeqTrainingArguments`` (``parse_arguments``), with the defaults the scripts agree on,
  from flags or from one JSON file, and with the flag names of transformers' examples (``--block_size``, …) mapped
  onto ours; a rerun into an ``--output_dir`` holding checkpoints resumes from the last one (``resolve_output_dir``);
- data loading (``load_raw_datasets``): local txt/csv/json/jsonl files, a ``datasets`` hub name, or the small
  embedded default dataset in ``training/data/``, loaded or streamed (``--streaming``); unreadable data raises
  ``ValueError`` naming the file;
- tokenizers (``get_tokenizer``): given, taken from the checkpoint, or trained with ``hf_scratch.tokenization`` —
  WordPiece (BERT, Longformer), byte-level BPE (GPT, Transformer-XL), one shared vocabulary for both languages
  (translation) or characters (``--tokenizer_type char``: the nanoGPT Shakespeare setting);
- models (``create_model``): ``--model_type`` + ``--model_size`` preset + ``--config_overrides``, or
  ``--model_name_or_path`` (an hf_scratch checkpoint, or a reference checkpoint — bert, gpt2, openai-gpt, marian,
  longformer, transfo-xl — converted on the fly with ``hf_scratch.convert.load_reference_checkpoint``);
- checkpoints that survive a kill (``AtomicCheckpoints``): staged in ``_tmp-checkpoint-N`` and renamed into place
  when complete, rotated only then; a rerun resumes from the newest complete one (``last_complete_checkpoint``),
  an unwritable or too full ``--output_dir`` fails before training (``check_output_dir_writable``,
  ``check_disk_space``);
- the end of every run (``train_evaluate_save``): train (resuming from the detected or given checkpoint),
  evaluate, save the hub-ready folder (safetensors, config with the full ``auto_map``, the modeling code, tokenizer
  reporting the model's input limit, generation config) and its ``README.md`` model card filled from
  ``model_cards/<family>.md`` (hub ids only in its metadata), push it in one upload if asked.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import math
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import datasets
import transformers
from transformers import AutoConfig, AutoTokenizer, HfArgumentParser, TrainingArguments
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, get_last_checkpoint

import hf_scratch
from hf_scratch.tokenization import TOKENIZER_KINDS, model_max_length, train_tokenizer

logger = logging.getLogger(__name__)

TRAINING_DIR = Path(__file__).resolve().parent
DATA_DIR = TRAINING_DIR / "data"
METRICS_DIR = TRAINING_DIR / "metrics"
MODEL_CARDS_DIR = TRAINING_DIR.parent / "model_cards"

# model_type → family name (the file suffix of its configuration/modeling pair and of its model card template)
FAMILIES = {
    "scratch-bert": "bert",
    "scratch-gpt": "gpt",
    "scratch-transformer": "transformer",
    "scratch-transfo-xl": "transfo_xl",
    "scratch-longformer": "longformer",
    "scratch-rnn": "rnn",
}
# the tokenizer each family trains when none is given
DEFAULT_TOKENIZER = {
    "scratch-bert": "wordpiece",
    "scratch-longformer": "wordpiece",
    "scratch-gpt": "bpe",
    "scratch-transfo-xl": "bpe",
    "scratch-transformer": "seq2seq",
    "scratch-rnn": "seq2seq",
}
# size presets in the shared field names; "base" keeps the family's own defaults (the paper's base size)
SIZE_PRESETS: dict[str, dict[str, int]] = {
    "tiny": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128},
    "small": {"hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 1024},
    "base": {},
}
# what a family needs on top of the shared sizes (a trained tokenizer's small vocabulary has no use for
# Transformer-XL's adaptive-softmax cutoffs, which are sized for WikiText-103's 267k words)
FAMILY_PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "scratch-transfo-xl": {
        "tiny": {"embedding_size": 64, "head_dim": 32, "mem_len": 32, "cutoffs": []},
        "small": {"embedding_size": 256, "head_dim": 64, "mem_len": 128, "cutoffs": []},
        "base": {"cutoffs": []},
    },
    "scratch-longformer": {"tiny": {"attention_window": 16}, "small": {"attention_window": 64}, "base": {}},
}
# encoder-decoder configs size each side with their own names
_SIDE_NAMES = {
    "num_hidden_layers": ("encoder_layers", "decoder_layers"),
    "num_attention_heads": ("encoder_attention_heads", "decoder_attention_heads"),
    "intermediate_size": ("encoder_ffn_dim", "decoder_ffn_dim"),
}
DATA_EXTENSIONS = {"txt": "text", "csv": "csv", "json": "json", "jsonl": "json"}


# ----------------------------------------------------------------------------------------------------------------
# Arguments
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class ModelArguments:
    model_type: Optional[str] = field(
        default=None, metadata={"help": f"Train from scratch: one of {sorted(FAMILIES)} (the script lists the ones it supports)."}
    )
    model_size: str = field(default="tiny", metadata={"help": f"Size preset for --model_type: {sorted(SIZE_PRESETS)}."})
    config_overrides: Optional[str] = field(
        default=None,
        metadata={"help": "Config fields to override when training from scratch, e.g. 'hidden_size=128,hidden_act=relu'."},
    )
    model_name_or_path: Optional[str] = field(
        default=None,
        metadata={"help": "Fine-tune a checkpoint directory (or hub id): an hf_scratch checkpoint, or a reference "
                          "checkpoint (bert, gpt2, openai-gpt, marian, longformer, transfo-xl) converted on the fly."},
    )
    tokenizer_name: Optional[str] = field(default=None, metadata={"help": "A tokenizer directory or hub id to use instead of training one."})
    tokenizer_type: Optional[str] = field(
        default=None, metadata={"help": "Tokenizer to train when none is given: wordpiece, bpe or char (default: the family's)."}
    )
    tokenizer_vocab_size: int = field(default=2000, metadata={"help": "Vocabulary size of a trained WordPiece/BPE tokenizer."})
    attn_implementation: Optional[str] = field(default=None, metadata={"help": "eager or sdpa (default: the model's)."})
    cache_dir: Optional[str] = field(
        default=None, metadata={"help": "Where models, tokenizers and datasets downloaded from the hub are cached (default: the Hugging Face cache)."}
    )
    token: Optional[str] = field(
        default=None, metadata={"help": "Hub token for private or gated models, tokenizers and datasets (default: the one `hf auth login` saved)."}
    )
    trust_remote_code: bool = field(
        default=False,
        metadata={"help": "Run the configuration / modeling / tokenizer code a checkpoint carries (only for repositories "
                          "you trust). datasets no longer runs dataset loading scripts at all."},
    )


@dataclass
class DataArguments:
    dataset_name: Optional[str] = field(default=None, metadata={"help": "A dataset on the hub, read with `datasets`."})
    dataset_config_name: Optional[str] = field(default=None, metadata={"help": "Its configuration name."})
    train_file: Optional[str] = field(default=None, metadata={"help": "A local training file: txt, csv, json or jsonl."})
    validation_file: Optional[str] = field(default=None, metadata={"help": "A local validation file: txt, csv, json or jsonl."})
    validation_split_percentage: int = field(
        default=10, metadata={"help": "Percentage of the training data held out for evaluation when there is no validation set."}
    )
    max_seq_length: int = field(default=128, metadata={"help": "Maximum tokens per example after tokenization."})
    max_train_samples: Optional[int] = field(default=None, metadata={"help": "Keep only this many training examples."})
    max_eval_samples: Optional[int] = field(default=None, metadata={"help": "Keep only this many evaluation examples."})
    preprocessing_num_workers: Optional[int] = field(
        default=None, metadata={"help": "Processes that tokenize the data (the num_proc of datasets' map; default: one)."}
    )
    streaming: bool = field(
        default=False,
        metadata={"help": "Stream the data (datasets' IterableDataset) instead of loading it: run_clm (GPT) and run_mlm; "
                          "needs --max_steps and a tokenizer (--tokenizer_name or --model_name_or_path)."},
    )
    overwrite_output_dir: bool = field(
        default=False,
        metadata={"help": "Train from scratch into a non-empty --output_dir (its files are overwritten and its checkpoint-* "
                          "folders removed when training starts) instead of resuming from its last checkpoint."},
    )


def parse_arguments(script: str, extra_dataclasses: tuple = (), args: Optional[list[str]] = None, training_class=TrainingArguments,
                    aliases: Optional[dict[str, str]] = None, defaults: Optional[dict[str, Any]] = None):
    """Parse ``args`` (default: ``sys.argv[1:]``) into (ModelArguments, DataArguments, *extra, TrainingArguments).

    ``args`` are flags, or — as transformers' example scripts accept — the path of a single ``.json`` file holding
    an object of arguments (``{"model_type": "scratch-gpt", "max_steps": 200}``), read with ``HfArgumentParser``.
    ``aliases`` name integer fields the way transformers' examples do (``{"block_size": "max_seq_length"}``):
    either name sets the field, both at once is an error. ``defaults`` are the script's own defaults for fields of
    the shared dataclasses (e.g. ``predict_with_generate``), used unless given.

    Defaults differ from the Trainer's where a script needs them: with neither ``do_train`` nor ``do_eval`` a
    script does both; logs go to TensorBoard (when installed) unless ``report_to`` says otherwise; ``output_dir``
    defaults to ``outputs/<script>`` and is checked by ``resolve_output_dir`` (a rerun resumes). Bad values raise
    ValueError (unknown flags: the parser's usage error)."""
    args = list(sys.argv[1:] if args is None else args)
    aliases = dict(aliases or {})
    defaults = {"output_dir": str(Path("outputs") / script), **(defaults or {})}
    parser = HfArgumentParser((ModelArguments, DataArguments, *extra_dataclasses, training_class))
    for alias, target in aliases.items():
        parser.add_argument(f"--{alias}", dest=target, type=int, default=argparse.SUPPRESS,
                            help=f"The name transformers' example scripts use for --{target}: give one of the two.")
    if len(args) == 1 and args[0].endswith(".json"):
        values = read_json_arguments(args[0])
        given = set(values)
        values = {aliases.get(name, name): value for name, value in values.items()}
        values.update({name: value for name, value in defaults.items() if name not in given})
        parsed = parser.parse_dict(values)
    else:
        given = {arg[2:].split("=", 1)[0].replace("-", "_") for arg in args if arg.startswith("--")}  # --do-train too
        args += [item for name, value in defaults.items() if name not in given for item in (f"--{name}", str(value))]
        parsed = parser.parse_args_into_dataclasses(args=args)
    for alias, target in aliases.items():
        if alias in given and target in given:
            raise ValueError(f"--{alias} and --{target} are the same setting (the first is the name transformers' examples use): give one of them.")
    model_args, data_args, training_args = parsed[0], parsed[1], parsed[-1]
    if "do_train" not in given and "do_eval" not in given:
        training_args.do_train = training_args.do_eval = True
    if "report_to" not in given:
        from transformers.integrations import is_tensorboard_available

        training_args.report_to = ["tensorboard"] if is_tensorboard_available() else []
    check_common_arguments(model_args, data_args, training_args)
    resolve_output_dir(data_args, training_args)
    transformers.set_seed(training_args.seed)  # before the model is initialised, so runs are reproducible
    return parsed


def read_json_arguments(path: str) -> dict[str, Any]:
    """The object of arguments in the JSON file ``path``."""
    try:
        values = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"Cannot read the arguments file {path!r}: {error}") from error
    if not isinstance(values, dict):
        raise ValueError(f"The arguments file {path!r} must hold a JSON object of arguments, e.g. {{\"max_steps\": 200}}; got {type(values).__name__}.")
    return values


def check_common_arguments(model_args: ModelArguments, data_args: DataArguments, training_args) -> None:
    if model_args.model_type is None and model_args.model_name_or_path is None:
        raise ValueError("Give --model_type (train from scratch, e.g. --model_type scratch-bert) or --model_name_or_path (fine-tune a checkpoint).")
    if model_args.model_type is not None and model_args.model_name_or_path is not None:
        raise ValueError("Give either --model_type (from scratch) or --model_name_or_path (a checkpoint), not both.")
    if model_args.model_size not in SIZE_PRESETS:
        raise ValueError(f"--model_size {model_args.model_size!r} is not a preset: choose one of {sorted(SIZE_PRESETS)}.")
    if model_args.tokenizer_type not in (None, *TOKENIZER_KINDS):
        raise ValueError(f"--tokenizer_type {model_args.tokenizer_type!r} is unknown: choose one of {TOKENIZER_KINDS}.")
    if data_args.dataset_name is not None and (data_args.train_file or data_args.validation_file):
        raise ValueError("Give either --dataset_name or --train_file/--validation_file, not both.")
    for name in ("train_file", "validation_file"):
        path = getattr(data_args, name)
        if path is None:
            continue
        extension = path.rsplit(".", 1)[-1].lower()
        if extension not in DATA_EXTENSIONS:
            raise ValueError(f"--{name} {path!r}: unsupported extension .{extension}; use one of {sorted(DATA_EXTENSIONS)}.")
        if not Path(path).is_file() or not os.access(path, os.R_OK):
            raise ValueError(f"--{name} {path!r} does not exist or cannot be read.")
    if data_args.max_seq_length <= 0:
        raise ValueError(f"--max_seq_length must be positive, got {data_args.max_seq_length}.")
    if data_args.preprocessing_num_workers is not None and data_args.preprocessing_num_workers < 1:
        raise ValueError(f"--preprocessing_num_workers must be at least 1, got {data_args.preprocessing_num_workers}.")
    if data_args.streaming:
        if model_args.tokenizer_name is None and model_args.model_name_or_path is None:
            raise ValueError("--streaming cannot train a tokenizer on a stream: give --tokenizer_name (or --model_name_or_path).")
        if training_args.do_train and training_args.max_steps <= 0:
            raise ValueError("--streaming needs --max_steps: a stream has no length, so the Trainer cannot count epochs.")


def resolve_output_dir(data_args: DataArguments, training_args) -> None:
    """What training does with an ``--output_dir`` that already holds files — the contract of transformers'
    example scripts: resume from its newest *complete* ``checkpoint-N`` (``last_complete_checkpoint``; an incomplete
    one is skipped with a warning, never loaded), refuse a non-empty folder without checkpoints, or — with
    ``--overwrite_output_dir`` — start over. transformers 5 removed ``TrainingArguments.overwrite_output_dir`` (and
    its examples the check), so the flag is ours (``DataArguments``). An explicit ``--resume_from_checkpoint`` is
    used as given (``train_evaluate_save`` refuses an incomplete one). What a run killed before its first checkpoint
    leaves (a staging folder, TensorBoard's ``runs``) does not count: rerunning its command starts over. The folder
    must be writable (``check_output_dir_writable``). The log says what happens."""
    check_output_dir_writable(training_args.output_dir)
    given = training_args.resume_from_checkpoint
    output_dir = Path(training_args.output_dir)
    if not training_args.do_train or not output_dir.is_dir() or all(_left_by_a_killed_run(p) for p in output_dir.iterdir()):
        return
    if data_args.overwrite_output_dir:
        if given is not None and Path(given).resolve().is_relative_to(output_dir.resolve()):
            raise ValueError(f"--overwrite_output_dir removes the checkpoints in {output_dir}, --resume_from_checkpoint {given} "
                             "resumes from one of them: give one of the two.")
        logger.warning(f"--overwrite_output_dir: training starts from scratch in {output_dir}; its files are overwritten "
                       "and its checkpoint-* folders removed.")
    elif given is not None:
        logger.warning(f"Resuming training from {given} (--resume_from_checkpoint).")
    else:
        last = last_complete_checkpoint(output_dir)
        if last is None:
            incomplete = "complete " if get_last_checkpoint(str(output_dir)) is not None else ""
            raise ValueError(f"--output_dir {output_dir} is not empty and holds no {incomplete}checkpoint-N folder to resume "
                             "from: pass --overwrite_output_dir to train from scratch into it (its files are overwritten), "
                             "or choose another --output_dir.")
        training_args.resume_from_checkpoint = last
        logger.warning(f"Checkpoint detected: resuming training from {last}. To train from scratch instead, pass "
                       "--overwrite_output_dir or choose another --output_dir.")


def check_output_dir_writable(output_dir: str) -> None:
    """Fail before any data is read, not at the first checkpoint, when ``--output_dir`` cannot be written: a
    temporary file is created in it (or, while it does not exist yet, in its nearest existing parent, where it
    will be created) — the test that also holds for read-only mounts and for root."""
    path = Path(output_dir).absolute()
    existing = next(folder for folder in (path, *path.parents) if folder.exists())
    if not existing.is_dir():
        raise ValueError(f"--output_dir {output_dir} cannot be created: {existing} is a file, not a folder. Choose another --output_dir.")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as error:
        raise ValueError(f"--output_dir {output_dir} is not writable ({error.strerror} in {existing}): fix its permissions "
                         "or choose another --output_dir.") from error


def check_disk_space(model, training_args) -> None:
    """Fail before training starts when the disk of ``--output_dir`` cannot hold one more checkpoint: the weights
    plus, unless ``--save_only_model``, the optimizer state (Adam's two moments: about twice the weights again),
    i.e. ≈ 3 × the parameter bytes, and a margin for the tokenizer, config and trainer state. A checkpoint is
    staged in full before the previous one is rotated out (``AtomicCheckpoints``), so this much must be free."""
    parameter_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    saves_checkpoints = str(getattr(training_args.save_strategy, "value", training_args.save_strategy)) != "no"
    needed = (3 if saves_checkpoints and not training_args.save_only_model else 1) * parameter_bytes
    needed += needed // 10 + 16 * 2**20
    path = Path(training_args.output_dir).absolute()
    free = shutil.disk_usage(next(folder for folder in (path, *path.parents) if folder.exists())).free
    if free < needed:
        raise ValueError(f"--output_dir {training_args.output_dir} has {free / 2**20:.1f} MiB free, a checkpoint of this model "
                         f"needs about {needed / 2**20:.1f} MiB (weights + optimizer state ≈ 3 × {parameter_bytes / 2**20:.1f} "
                         "MiB of parameters, plus a margin): free some space or choose another --output_dir.")


def check_model_type(model_args: ModelArguments, supported: Iterable[str]) -> str:
    """The hf_scratch model type this run trains (a reference checkpoint's type mapped to ours); the script must
    support it and hf_scratch must register it."""
    supported = list(supported)
    model_type = model_args.model_type or _checkpoint_model_type(model_args)
    scratch_type = model_type if model_type in FAMILIES else _SCRATCH_OF_REFERENCE.get(model_type, model_type)
    if scratch_type not in supported:
        raise ValueError(f"This script trains {supported}; got model type {model_type!r}.")
    try:
        AutoConfig.for_model(scratch_type)
    except ValueError as error:
        raise ValueError(f"{scratch_type} is not registered by this hf_scratch installation ({error}).") from None
    return scratch_type


_SCRATCH_OF_REFERENCE = {
    "bert": "scratch-bert", "gpt2": "scratch-gpt", "openai-gpt": "scratch-gpt", "marian": "scratch-transformer",
    "longformer": "scratch-longformer", "transfo-xl": "scratch-transfo-xl",
}


def hub_options(model_args: ModelArguments) -> dict[str, Any]:
    """--cache_dir and --token, for every download (models, tokenizers, datasets)."""
    return {"cache_dir": model_args.cache_dir, "token": model_args.token}


def checkpoint_folder(model_args: ModelArguments) -> Optional[str]:
    """The local folder of --model_name_or_path: the folder itself, or a hub id downloaded (``snapshot_download``,
    with --cache_dir / --token); conversion of reference checkpoints reads files."""
    name = model_args.model_name_or_path
    if name is None or Path(name).is_dir():
        return name
    from huggingface_hub import snapshot_download

    try:
        return snapshot_download(name, **hub_options(model_args))
    except (OSError, ValueError) as error:  # not found, offline, invalid id
        raise ValueError(f"--model_name_or_path {name!r} is neither a local folder nor a model that can be downloaded from the hub: {error}") from error


def _checkpoint_model_type(model_args: ModelArguments) -> Optional[str]:
    folder = checkpoint_folder(model_args)
    config_file = Path(folder) / "config.json" if folder else None
    if config_file is None:
        return None
    if not config_file.is_file():
        raise ValueError(f"--model_name_or_path {model_args.model_name_or_path!r} has no config.json: give a model folder or hub id.")
    return json.loads(config_file.read_text())["model_type"]


def family_of(model) -> str:
    return FAMILIES[model.config.model_type]


# ----------------------------------------------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------------------------------------------


def load_raw_datasets(model_args: ModelArguments, data_args: DataArguments, default_data: str, text_sample_by: str = "line",
                      seed: int = 42, limit: bool = True, can_stream: bool = False):
    """A DatasetDict with "train" and "validation": from ``--dataset_name``, local files, or the embedded default
    ``training/data/<default_data>/{train,validation}.*`` (downloads honour --cache_dir / --token).
    ``text_sample_by="paragraph"`` makes a txt row a block separated by blank lines (a document). ``limit=False``
    leaves --max_*_samples to the caller (language modelling counts blocks, not lines).

    With --streaming (only where the script says it ``can_stream``; elsewhere a ValueError) the result is an
    IterableDatasetDict read lazily; without a validation split, rows whose index modulo 100 falls below
    --validation_split_percentage are held out (a stream has no length to split by)."""
    if data_args.streaming and not can_stream:
        raise ValueError("--streaming: this script needs the whole dataset at once (it collects labels, counts choices or "
                         "splits contexts into windows); only run_clm.py (GPT) and run_mlm.py stream. Drop --streaming.")
    options = {**hub_options(model_args), **({"streaming": True} if data_args.streaming else {})}
    if data_args.dataset_name is not None:
        try:
            raw = datasets.load_dataset(data_args.dataset_name, data_args.dataset_config_name, **options)
        except Exception as error:  # datasets raises many types (FileNotFoundError, ConnectionError, …)
            raise ValueError(f"Cannot load --dataset_name {data_args.dataset_name!r}: {error}") from error
    else:
        files = {"train": data_args.train_file, "validation": data_args.validation_file}
        if data_args.train_file is None and data_args.validation_file is None:
            folder = DATA_DIR / default_data
            files = {split: str(next(folder.glob(f"{split}.*"))) for split in ("train", "validation")}
        files = {split: path for split, path in files.items() if path is not None}
        extensions = {DATA_EXTENSIONS[p.rsplit(".", 1)[-1].lower()] for p in files.values()}
        if len(extensions) != 1:
            raise ValueError(f"--train_file and --validation_file must have the same format, got {sorted(files.values())}.")
        builder = extensions.pop()
        kwargs = {"sample_by": text_sample_by} if builder == "text" else {}
        try:
            raw = datasets.load_dataset(builder, data_files=files, **kwargs, **options)
        except Exception as error:
            raise ValueError(f"Cannot read {sorted(files.values())} as {builder}: {error}") from error
    if "train" not in raw:
        raise ValueError(f"The data has no 'train' split (splits: {list(raw)}).")
    if "validation" not in raw and data_args.streaming:
        stream, share = raw["train"], data_args.validation_split_percentage

        def rows(validation: bool):
            return stream.filter(lambda _, index: (index % 100 < share) == validation, with_indices=True)

        raw = datasets.IterableDatasetDict(train=rows(validation=False), validation=rows(validation=True))
    elif "validation" not in raw:
        held_out = raw["train"].train_test_split(test_size=data_args.validation_split_percentage / 100, seed=seed)
        raw = datasets.DatasetDict(train=held_out["train"], validation=held_out["test"])
    return limit_samples(raw, data_args) if limit else raw


def limit_samples(data, data_args: DataArguments):
    """Apply --max_train_samples / --max_eval_samples (the first rows of a stream)."""
    for split, limit in (("train", data_args.max_train_samples), ("validation", data_args.max_eval_samples)):
        if limit is None:
            continue
        if isinstance(data[split], datasets.IterableDataset):
            data[split] = data[split].take(limit)
        else:
            data[split] = data[split].select(range(min(limit, len(data[split]))))
    return data


def column_names(dataset) -> list[str]:
    """The columns of a dataset; a stream whose features are unknown until read shows them in its first row."""
    if dataset.column_names is not None:
        return list(dataset.column_names)
    first = next(iter(dataset), None)
    return list(first) if first is not None else []


def map_options(data_args: DataArguments, desc: str) -> dict[str, Any]:
    """Keyword arguments for ``Dataset.map``: --preprocessing_num_workers processes and a progress description
    (a stream maps lazily and takes neither)."""
    return {} if data_args.streaming else {"num_proc": data_args.preprocessing_num_workers, "desc": desc}


def require_columns(raw, columns: Iterable[str], what: str) -> None:
    for split, dataset in raw.items():
        names = column_names(dataset)
        missing = [c for c in columns if c not in names]
        if missing:
            raise ValueError(f"The {split} data lacks the column(s) {missing} needed for {what}; it has {names}.")


def describe_data(data_args: DataArguments, default_data: str) -> str:
    if data_args.dataset_name:
        return data_args.dataset_name
    if data_args.train_file:
        return Path(data_args.train_file).name
    return f"hf_scratch embedded {default_data}"


# ----------------------------------------------------------------------------------------------------------------
# Tokenizers
# ----------------------------------------------------------------------------------------------------------------


def get_tokenizer(model_args: ModelArguments, texts: Callable[[], Iterable[str]], needs_padding: bool = False):
    """The tokenizer given by --tokenizer_name, else the checkpoint's, else one trained on ``texts()``. With
    ``needs_padding`` a tokenizer without a pad token gets one (``<pad>``, appended to the vocabulary).
    ``create_model`` then sets its ``model_max_length`` to the model's input limit."""
    if model_args.tokenizer_name is not None or model_args.model_name_or_path is not None:
        source = model_args.tokenizer_name or checkpoint_folder(model_args)
        try:
            tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=model_args.trust_remote_code, **hub_options(model_args))
        except (OSError, ValueError) as error:
            raise ValueError(f"Cannot load a tokenizer from {source!r}: {error}. Give --tokenizer_name.") from error
    else:
        kind = model_args.tokenizer_type or DEFAULT_TOKENIZER[model_args.model_type]
        tokenizer = train_tokenizer(texts(), kind=kind, vocab_size=model_args.tokenizer_vocab_size)
    if needs_padding and tokenizer.pad_token is None:
        tokenizer.add_special_tokens({"pad_token": "<pad>"})
    return tokenizer


# ----------------------------------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------------------------------


def parse_config_overrides(text: Optional[str]) -> dict[str, Any]:
    """'a=1,b=0.5,c=relu,d=true,e=[1,2]' → {'a': 1, 'b': 0.5, 'c': 'relu', 'd': True, 'e': [1, 2]} (values read
    as JSON, else strings; commas inside [...] belong to the list)."""
    overrides: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in re.split(r",(?![^\[]*\])", text or ""))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--config_overrides: {item!r} is not key=value (write e.g. 'hidden_size=128,hidden_act=relu').")
        try:
            overrides[key.strip()] = json.loads(value.strip().lower() if value.strip().lower() in ("true", "false", "null") else value.strip())
        except json.JSONDecodeError:
            overrides[key.strip()] = value.strip()
    return overrides


def scratch_config(model_args: ModelArguments, tokenizer, **head_kwargs):
    """The from-scratch config: family defaults ← size preset ← tokenizer (vocabulary, special ids) ← head settings
    (labels) ← --config_overrides. Unknown override names raise ValueError."""
    default = AutoConfig.for_model(model_args.model_type)
    has = lambda name: hasattr(default, name)  # noqa: E731 (attribute_map aliases count)
    kwargs: dict[str, Any] = {}
    for name, value in SIZE_PRESETS[model_args.model_size].items():
        if name in _SIDE_NAMES and has(_SIDE_NAMES[name][0]):
            kwargs.update({side: value for side in _SIDE_NAMES[name] if has(side)})
        elif name == "hidden_size" and not has("num_hidden_layers") and has("d_model"):
            kwargs["d_model"] = value
        elif has(name):
            kwargs[name] = value
    kwargs.update(FAMILY_PRESETS.get(model_args.model_type, {}).get(model_args.model_size, {}))
    kwargs["vocab_size"] = len(tokenizer)
    for name in ("pad_token_id", "bos_token_id", "eos_token_id", "sep_token_id", "cls_token_id", "mask_token_id"):
        token_id = getattr(tokenizer, name, None)
        if token_id is not None and has(name):
            kwargs[name] = token_id
    start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.pad_token_id
    if has("decoder_start_token_id") and start is not None:
        kwargs["decoder_start_token_id"] = start
    kwargs.update(head_kwargs)
    overrides = parse_config_overrides(model_args.config_overrides)
    unknown = [name for name in overrides if not has(name)]
    if unknown:
        raise ValueError(f"--config_overrides: {type(default).__name__} has no field(s) {unknown}.")
    kwargs.update(overrides)
    return AutoConfig.for_model(model_args.model_type, **kwargs)


def create_model(model_args: ModelArguments, auto_class, tokenizer, **head_kwargs):
    """The model to train: from scratch (``--model_type``) or from ``--model_name_or_path``. A reference checkpoint
    (model_type bert, gpt2, …) is converted to hf_scratch first, then loaded into the head ``auto_class`` (an Auto
    class, or a model class) asks for
    (a new head is initialised; ``head_kwargs`` such as ``num_labels`` update the config). The tokenizer's
    ``model_max_length`` becomes the model's input limit (``hf_scratch.tokenization.model_max_length``) unless it
    already says less, so the tokenizer saved beside the model reports it."""
    load_kwargs = {"attn_implementation": model_args.attn_implementation} if model_args.attn_implementation else {}
    if model_args.model_name_or_path is None:
        config = scratch_config(model_args, tokenizer, **head_kwargs)
        # an Auto class, or a head no Auto class names (GPT's double heads)
        from_config = getattr(auto_class, "from_config", None) or auto_class._from_config
        model = from_config(config, **load_kwargs)
    elif _checkpoint_model_type(model_args) not in FAMILIES:
        from hf_scratch.convert import load_reference_checkpoint

        converted = load_reference_checkpoint(checkpoint_folder(model_args))
        with tempfile.TemporaryDirectory() as folder:
            converted.save_pretrained(folder)
            model = auto_class.from_pretrained(folder, ignore_mismatched_sizes=True, **head_kwargs, **load_kwargs)
    else:
        model = auto_class.from_pretrained(checkpoint_folder(model_args), ignore_mismatched_sizes=True,
                                           trust_remote_code=model_args.trust_remote_code, **head_kwargs, **load_kwargs)
    tokenizer.model_max_length = min(tokenizer.model_max_length, model_max_length(model.config))
    return model


def prepare_for_saving(model, tokenizer) -> None:
    """Make the saved folder self-describing: the full auto_map of the family, and the tokenizer's special ids in
    the generation config of generative models (padding falls back to the end-of-text token, as for GPT-2)."""
    model.config.auto_map = dict(type(model.config).default_auto_map)
    if model.can_generate():
        generation = model.generation_config
        for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
            if getattr(generation, name, None) is None and getattr(tokenizer, name, None) is not None:
                setattr(generation, name, getattr(tokenizer, name))
        if generation.pad_token_id is None:
            generation.pad_token_id = generation.eos_token_id


def saved_class(model) -> type:
    """The class a saved folder names for ``model``: its own, or, when FSDP2's ``fully_shard`` sharded it in place,
    the hf_scratch class behind the ``FSDP<Class>`` subclass torch creates in its own module (saving as that one
    copies torch's ``_fsdp_*.py`` files as the model's code and writes a broken ``auto_map``)."""
    from torch.distributed.fsdp import FSDPModule

    return next(cls for cls in type(model).__mro__ if not issubclass(cls, FSDPModule))


def unsharded_model(model, state_dict: dict):
    """A ``saved_class(model)`` model holding ``state_dict`` (the gathered weights, used as they are: no copy), with
    ``model``'s config and generation config: what ``save_pretrained`` writes the hub folder from."""
    import torch

    with torch.device("meta"):  # no memory for the weights about to be replaced
        unsharded = saved_class(model)(model.config)
    unsharded.load_state_dict(state_dict, assign=True)
    unsharded.tie_weights()  # gathered tied weights are separate copies: one tensor again
    if model.can_generate():
        unsharded.generation_config = model.generation_config
    return unsharded


def save_unsharded(trainer, output_dir: Optional[str] = None, _internal_call: bool = False) -> None:
    """``Trainer.save_model`` for a model FSDP shards (the final save of ``train_evaluate_save``): every process
    takes part in gathering the weights (FULL_STATE_DICT: for the sharded kind the Trainer's own save writes none),
    then the main one writes the folder with the model's hf_scratch class (``unsharded_model``), the tokenizer and
    the training arguments, as ``Trainer._save`` does."""
    import torch
    from transformers.trainer import TRAINING_ARGS_NAME

    output_dir = output_dir if output_dir is not None else trainer.args.output_dir
    trainer.accelerator.state.fsdp_plugin.set_state_dict_type("FULL_STATE_DICT")
    state_dict = trainer.accelerator.get_state_dict(trainer.model)
    if trainer.args.should_save:
        os.makedirs(output_dir, exist_ok=True)
        unsharded_model(trainer.model, state_dict).save_pretrained(output_dir)
        if trainer.processing_class is not None:
            trainer.processing_class.save_pretrained(output_dir)
        torch.save(trainer.args, os.path.join(output_dir, TRAINING_ARGS_NAME))


# ----------------------------------------------------------------------------------------------------------------
# Metrics
# ----------------------------------------------------------------------------------------------------------------


def load_metric(name: str):
    """An `evaluate` metric module kept in ``training/metrics/<name>/<name>.py`` (the hub is not reachable)."""
    import evaluate

    return evaluate.load(str(METRICS_DIR / name / f"{name}.py"))


# ----------------------------------------------------------------------------------------------------------------
# Train, evaluate, save, card
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class CardInfo:
    """What the model card says about this run besides the config and metrics."""

    task: str  # e.g. "masked language modelling"
    pipeline_tag: str  # e.g. "fill-mask"
    dataset: str  # e.g. "hf_scratch embedded shakespeare"
    metric_names: list[str] = field(default_factory=list)  # e.g. ["perplexity"]
    usage: str = ""  # a short python snippet using the saved model


def train_evaluate_save(trainer, model_args, data_args, training_args, card: CardInfo, extra_metrics: Optional[Callable[[dict], dict]] = None) -> dict:
    """Train (from the checkpoint ``resolve_output_dir`` found or --resume_from_checkpoint gave, if any; with
    atomic checkpoints, after checking the disk has room for one), evaluate, save the hub-ready folder with its
    model card, push it if asked; return the results:
    ``{"train": …, "eval": …, "log_history": …, "output_dir": …}``."""
    results: dict[str, Any] = {"output_dir": training_args.output_dir}
    model, tokenizer = trainer.model, trainer.processing_class
    prepare_for_saving(model, tokenizer)
    write_card = lambda **_: write_model_card(  # noqa: E731
        training_args.output_dir, model, tokenizer, model_args, data_args, training_args, card, results.get("eval", {})
    )
    if training_args.do_train:
        checkpoint = training_args.resume_from_checkpoint
        if checkpoint is not None and not Path(checkpoint).is_dir():
            raise ValueError(f"--resume_from_checkpoint {checkpoint!r} is not a checkpoint directory.")
        if checkpoint is not None and (problem := checkpoint_problem(checkpoint)) is not None:
            raise ValueError(f"--resume_from_checkpoint {checkpoint} is incomplete ({problem}): its save was interrupted "
                             "or its files were damaged since; resume from another checkpoint.")
        check_disk_space(model, training_args)
        if data_args.overwrite_output_dir and training_args.should_save:
            remove_checkpoints(training_args.output_dir)
        elif training_args.should_save:
            remove_staging_folders(training_args.output_dir)
        outcome = use_atomic_checkpoints(trainer).train(resume_from_checkpoint=checkpoint)
        results["train"] = dict(outcome.metrics)
        trainer.log_metrics("train", outcome.metrics)
        trainer.save_metrics("train", outcome.metrics)
        trainer.save_state()
    if training_args.do_eval:
        metrics = trainer.evaluate()
        if "eval_loss" in metrics and "eval_perplexity" not in metrics and card.metric_names[:1] == ["perplexity"]:
            metrics["eval_perplexity"] = math.exp(min(metrics["eval_loss"], 50.0))
        if extra_metrics is not None:
            metrics.update(extra_metrics(metrics))
        results["eval"] = metrics
        trainer.log_metrics("eval", metrics)
        trainer.save_metrics("eval", metrics)
    results["log_history"] = list(trainer.state.log_history)
    if trainer.is_fsdp_enabled:
        # the last save (also the one inside push_to_hub) gathers the weights and writes them with the hf_scratch
        # class; the checkpoints written during training were of the plugin's kind
        trainer.save_model = functools.partial(save_unsharded, trainer)
    if training_args.push_to_hub:
        # Trainer.push_to_hub saves the folder, writes README.md through its create_model_card hook and uploads it
        # all in one commit; the hook writes our card instead of the Trainer's generic one, so the card goes up
        # once, beside the weights (Trainer.save_model would push a second time)
        trainer.create_model_card = write_card
        trainer.push_to_hub(commit_message="End of training")
    elif training_args.should_save:
        trainer.save_model()
        write_card()
    return results


def remove_checkpoints(output_dir: str) -> None:
    """--overwrite_output_dir: delete the ``checkpoint-N`` folders of the run being overwritten (and the staging
    folders of its interrupted saves), so that neither a later rerun (which resumes from the last checkpoint) nor
    checkpoint rotation picks up one of them."""
    for checkpoint in sorted(Path(output_dir).glob(f"{PREFIX_CHECKPOINT_DIR}-*")):
        if checkpoint.is_dir() and re.fullmatch(rf"{PREFIX_CHECKPOINT_DIR}-\d+", checkpoint.name):
            logger.warning(f"--overwrite_output_dir: removing {checkpoint}")
            shutil.rmtree(checkpoint)
    remove_staging_folders(output_dir)


# ----------------------------------------------------------------------------------------------------------------
# Checkpoints that survive a kill: staged and renamed into place, checked before resuming
# ----------------------------------------------------------------------------------------------------------------

# A checkpoint is written into ``_tmp-checkpoint-N/checkpoint-N`` and renamed to ``checkpoint-N`` when complete.
# The leading underscore keeps it out of hub uploads (the Trainer ignores "_*"), and neither get_last_checkpoint
# nor checkpoint rotation (both look for "checkpoint-*") ever sees it.
STAGING_PREFIX = f"_tmp-{PREFIX_CHECKPOINT_DIR}-"


def _left_by_a_killed_run(path: Path) -> bool:
    """Whether ``path`` (an entry of --output_dir) is what a run killed before its first checkpoint leaves behind:
    the staging folder of an interrupted save, or TensorBoard's ``runs`` logs."""
    return path.is_dir() and (path.name.startswith(STAGING_PREFIX) or path.name == "runs")


def remove_staging_folders(output_dir: str) -> None:
    """Delete the staging folders that saves interrupted by a crash left in ``output_dir`` (never checkpoints)."""
    for staging in sorted(Path(output_dir).glob(f"{STAGING_PREFIX}*")):
        if staging.is_dir():
            logger.warning(f"Removing {staging}: a checkpoint save that was interrupted before it completed.")
            shutil.rmtree(staging, ignore_errors=True)


def checkpoint_problem(checkpoint: str | Path) -> Optional[str]:
    """Why ``checkpoint`` cannot be resumed from, or None when it is complete. Its ``trainer_state.json`` (written
    last by the Trainer; without it the Trainer would silently restart at step 0) must exist, and every file at its
    top level must read back with the library that wrote it: the trainer state with ``TrainerState``, safetensors
    with ``safe_open`` (which refuses a file its header does not fully cover), torch files (``torch.save`` writes a
    zip archive) with ``zipfile`` checking every member's CRC, JSON with ``json``. Folders inside (FSDP/DeepSpeed
    shards) are their libraries' formats and are left to them."""
    import zipfile

    from safetensors import safe_open
    from transformers.trainer import TRAINER_STATE_NAME
    from transformers.trainer_callback import TrainerState

    folder = Path(checkpoint)
    if not (folder / TRAINER_STATE_NAME).is_file():
        return f"no {TRAINER_STATE_NAME}"
    for path in sorted(p for p in folder.iterdir() if p.is_file()):
        try:
            if path.name == TRAINER_STATE_NAME:
                TrainerState.load_from_json(str(path))
            elif path.suffix == ".safetensors":
                with safe_open(str(path), framework="pt"):
                    pass
            elif path.suffix in (".pt", ".pth", ".bin"):
                with zipfile.ZipFile(path) as archive:
                    damaged = archive.testzip()
                if damaged is not None:
                    return f"{path.name} is damaged (record {damaged})"
            elif path.suffix == ".json":
                json.loads(path.read_text())
        except Exception as error:  # each library raises its own types (SafetensorError, BadZipFile, JSONDecodeError, …)
            return f"{path.name} cannot be read: {type(error).__name__}: {error}"
    return None


def last_complete_checkpoint(output_dir: str | Path) -> Optional[str]:
    """The newest ``checkpoint-N`` of ``output_dir`` that is complete (``checkpoint_problem``); newer incomplete ones
    are skipped with a warning (a save interrupted by a crash, or damaged files) and never loaded."""
    pattern = re.compile(rf"{PREFIX_CHECKPOINT_DIR}-(\d+)")
    checkpoints = [p for p in Path(output_dir).iterdir() if p.is_dir() and pattern.fullmatch(p.name)]
    for checkpoint in sorted(checkpoints, key=lambda p: int(pattern.fullmatch(p.name).group(1)), reverse=True):
        problem = checkpoint_problem(checkpoint)
        if problem is None:
            return str(checkpoint)
        logger.warning(f"Skipping {checkpoint}: it is incomplete ({problem}); an older checkpoint is resumed from.")
    return None


def _fsync(path: str) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def publish_checkpoint(staged: str, final: str) -> None:
    """Move the complete checkpoint ``staged`` (``<run>/_tmp-checkpoint-N/checkpoint-N``) to ``final``
    (``<run>/checkpoint-N``) in one rename: its files are flushed to disk first, so that after a crash — even a
    power cut — ``checkpoint-N`` is either absent or complete. An older ``checkpoint-N`` (a resumed run saving that
    step again) is moved into the staging folder first and deleted with it."""
    for folder, _, files in os.walk(staged):
        for name in files:
            _fsync(os.path.join(folder, name))
        _fsync(folder)
    staging = os.path.dirname(staged)
    if os.path.lexists(final):
        os.replace(final, os.path.join(staging, "replaced"))
    os.replace(staged, final)
    _fsync(os.path.dirname(final))
    shutil.rmtree(staging)


class AtomicCheckpoints:
    """Trainer mixin: every checkpoint is staged and renamed into place (``publish_checkpoint``), and
    ``save_total_limit`` rotation runs only once the new checkpoint is complete, so a save that fails or is killed
    midway never leaves a ``checkpoint-N`` that is not one, nor deletes the previous good checkpoint.

    transformers 5.23's ``Trainer._save_checkpoint`` writes straight into ``<output_dir>/checkpoint-N`` (weights,
    optimizer, scheduler, RNG states, trainer state last) and rotates right after. Here the whole save —
    including what subclasses add after it, e.g. ``TransfoXLTrainer``'s memory — runs with ``_get_output_dir``
    answering the staging folder, so it writes ``_tmp-checkpoint-N/checkpoint-N`` and its own rotation sees only
    that one checkpoint; all processes then meet (each writes its RNG state), the main one publishes and rotates.
    A checkpoint push to the hub (``hub_strategy`` checkpoint / all_checkpoints) waits until it is published.
    ``train_evaluate_save`` gives every script's trainer this behaviour (``use_atomic_checkpoints``)."""

    _staging: Optional[str] = None
    _push_pending = False

    def _get_output_dir(self, trial) -> str:
        return self._staging if self._staging is not None else super()._get_output_dir(trial)

    def _push_from_checkpoint(self, checkpoint_folder: str) -> None:
        if self._staging is not None:  # not published yet
            self._push_pending = True
            return
        super()._push_from_checkpoint(checkpoint_folder)

    def _save_checkpoint(self, model, trial) -> None:
        from transformers.trainer import TRAINER_STATE_NAME
        from transformers.trainer_utils import rotate_checkpoints

        run_dir = self._get_output_dir(trial)
        name = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        staging = os.path.join(run_dir, STAGING_PREFIX + str(self.state.global_step))
        staged, final = os.path.join(staging, name), os.path.join(run_dir, name)
        if self.args.should_save:
            shutil.rmtree(staging, ignore_errors=True)  # left by an earlier attempt at this step that was killed
        self.accelerator.wait_for_everyone()
        self._staging, self._push_pending = staging, False
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self._staging = None
        if self.state.best_model_checkpoint == staged:  # the Trainer found the best checkpoint where it wrote it
            self.state.best_model_checkpoint = final
            if self.args.should_save:
                self.state.save_to_json(os.path.join(staged, TRAINER_STATE_NAME))
        self.accelerator.wait_for_everyone()  # every process has written its files
        if self.args.should_save:
            publish_checkpoint(staged, final)
        self.accelerator.wait_for_everyone()  # nobody reads checkpoint-N before it exists
        if self.args.should_save:
            rotate_checkpoints(output_dir=run_dir, save_total_limit=self.args.save_total_limit,
                               best_model_checkpoint=self.state.best_model_checkpoint, use_mtime=True)
        if self._push_pending:
            self._push_from_checkpoint(final)


@functools.cache
def _atomic_class(trainer_class: type) -> type:
    return type(f"{trainer_class.__name__}WithAtomicCheckpoints", (AtomicCheckpoints, trainer_class),
                {"__module__": trainer_class.__module__, "__doc__": trainer_class.__doc__})


def use_atomic_checkpoints(trainer):
    """Give ``trainer`` (any ``Trainer`` subclass a script built) the ``AtomicCheckpoints`` behaviour, in place: its
    class becomes the subclass of both. Returns it."""
    if not isinstance(trainer, AtomicCheckpoints):
        trainer.__class__ = _atomic_class(type(trainer))
    return trainer


def is_hub_id(name: Optional[str]) -> bool:
    """Whether ``name`` names a hub repository: not a local path, and a valid repo id ("user/name" or "name")."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if not name or Path(name).exists():
        return False
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def hub_dataset_id(data_args: DataArguments) -> Optional[str]:
    """The hub id of the training data, for the card's ``datasets`` and model-index: --dataset_name when it names a
    hub dataset; None for local files, a local folder or the embedded data (the hub expects dataset ids there, so
    the field is left out; the card's text still says what the data was)."""
    return data_args.dataset_name if is_hub_id(data_args.dataset_name) else None


def base_model_id(model_args: ModelArguments):
    """The hub model this run fine-tunes, for the card's ``base_model`` (the hub's model tree): --model_name_or_path
    when it is a hub id. A local folder has no hub id of its own; it gives the one it records, if any: the repo of a
    hub cache snapshot (``…/models--user--name/snapshots/<commit>``), else the ``base_model`` of its own model card
    (the nearest published ancestor). None otherwise, and when training from scratch."""
    name = model_args.model_name_or_path
    if name is None or is_hub_id(name):
        return name
    folder = Path(name).resolve()
    if folder.parent.name == "snapshots" and folder.parent.parent.name.startswith("models--"):
        return folder.parent.parent.name.removeprefix("models--").replace("--", "/")
    card_file = folder / "README.md"
    if not card_file.is_file():
        return None
    from huggingface_hub import ModelCard

    recorded = ModelCard.load(card_file).data.base_model
    ids = [base for base in ([recorded] if isinstance(recorded, str) else recorded or []) if is_hub_id(base)]
    return (ids[0] if len(ids) == 1 else ids) or None


def model_card_data(model, model_args, data_args, training_args, card: CardInfo, eval_metrics: dict):
    """The card's metadata. ``datasets`` and the model-index (its results need a dataset id, as in transformers'
    own cards) only with a hub dataset; ``base_model`` when fine-tuning a hub model (``base_model_id``)."""
    from huggingface_hub import EvalResult, ModelCardData

    family = family_of(model)
    name = (training_args.hub_model_id or Path(training_args.output_dir).name).split("/")[-1]
    dataset = hub_dataset_id(data_args)
    eval_results = [
        EvalResult(task_type=card.pipeline_tag, dataset_type=dataset, dataset_name=dataset,
                   dataset_config=data_args.dataset_config_name, metric_type=metric, metric_value=float(eval_metrics[f"eval_{metric}"]))
        for metric in card.metric_names
        if f"eval_{metric}" in eval_metrics and dataset is not None
    ]
    return ModelCardData(
        library_name="transformers",
        pipeline_tag=card.pipeline_tag,
        tags=["hf_scratch", model.config.model_type, family, "custom_code", "from-scratch"],
        datasets=[dataset] if dataset is not None else None,
        base_model=base_model_id(model_args),
        metrics=list(card.metric_names),
        license="apache-2.0",
        model_name=name,
        eval_results=eval_results or None,
    )


def write_model_card(output_dir: str, model, tokenizer, model_args, data_args, training_args, card: CardInfo, eval_metrics: dict) -> Path:
    """Fill ``model_cards/<family>.md`` and write ``README.md`` into the output directory."""
    from huggingface_hub import ModelCard

    family = family_of(model)
    hyperparameters = {
        "learning_rate": training_args.learning_rate,
        "train_batch_size (per device)": training_args.per_device_train_batch_size,
        "gradient_accumulation_steps": training_args.gradient_accumulation_steps,
        "num_train_epochs": training_args.num_train_epochs,
        "max_steps": training_args.max_steps,
        "weight_decay": training_args.weight_decay,
        "warmup_steps": training_args.warmup_steps,
        "lr_scheduler_type": str(getattr(training_args.lr_scheduler_type, "value", training_args.lr_scheduler_type)),
        "seed": training_args.seed,
        "world_size": training_args.world_size,
    }
    config = model.config.to_dict()
    architecture = {k: config[k] for k in (
        "vocab_size", "hidden_size", "d_model", "num_hidden_layers", "encoder_layers", "decoder_layers",
        "num_attention_heads", "intermediate_size", "hidden_act", "max_position_embeddings", "attention_window",
        "mem_len", "cell_type", "attention_type") if k in config}
    card_data = model_card_data(model, model_args, data_args, training_args, card, eval_metrics)
    content = ModelCard.from_template(
        card_data,
        model_name=card_data.model_name,
        template_path=str(MODEL_CARDS_DIR / f"{family}.md"),
        model_class=saved_class(model).__name__,
        auto_class=_auto_class_of(model),
        task=card.task,
        dataset=card.dataset,
        num_parameters=f"{model.num_parameters():,}",
        architecture=architecture,
        hyperparameters=hyperparameters,
        eval_metrics={k: round(v, 4) if isinstance(v, float) else v for k, v in eval_metrics.items()},
        usage=card.usage,
        tokenizer_class=type(tokenizer).__name__,
        hf_scratch_version=hf_scratch.__version__,
        transformers_version=transformers.__version__,
    )
    path = Path(output_dir) / "README.md"
    content.save(path)
    return path


def _auto_class_of(model) -> str:
    for auto_name, reference in type(model.config).default_auto_map.items():
        if reference.split(".")[-1] == saved_class(model).__name__:
            return auto_name
    return "AutoModel"


# ----------------------------------------------------------------------------------------------------------------
# Text → token blocks (language modelling)
# ----------------------------------------------------------------------------------------------------------------


def tokenize_text_blocks(raw, tokenizer, text_column: str, data_args: DataArguments, line_by_line: bool, training_args,
                         special_tokens: bool):
    """Language-modelling examples: each non-empty line on its own (``line_by_line``, truncated to ``block_size``),
    or all text concatenated and cut into blocks of ``block_size`` tokens (the remainder is dropped), as in
    transformers' run_clm / run_mlm. ``special_tokens`` adds [CLS]…[SEP] around each block (BERT-style MLM).
    ``block_size`` is --max_seq_length (alias --block_size), at most the model's input limit
    (``tokenizer.model_max_length``); --max_*_samples count examples after grouping. A loaded split is grouped in
    one batch per --preprocessing_num_workers process, a stream a thousand rows at a time."""
    block_size = data_args.max_seq_length
    if block_size > tokenizer.model_max_length:
        raise ValueError(f"--max_seq_length (--block_size) {block_size} exceeds the {tokenizer.model_max_length} positions the "
                         "model reads (tokenizer.model_max_length): lower it, or configure more max_position_embeddings.")
    columns = column_names(raw["train"])
    with training_args.main_process_first(desc="tokenizing"):
        if line_by_line:
            def tokenize(batch):
                lines = [line for line in batch[text_column] if line and not line.isspace()]
                return tokenizer(lines, truncation=True, max_length=block_size, return_special_tokens_mask=special_tokens)

            tokenized = raw.map(tokenize, batched=True, remove_columns=columns, **map_options(data_args, "tokenizing lines"))
            return limit_samples(tokenized, data_args)
        wrap = special_tokens and tokenizer.cls_token_id is not None and tokenizer.sep_token_id is not None
        inner = block_size - (2 if wrap else 0)
        eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None and not special_tokens else []

        def tokenize(batch):
            ids = tokenizer([t + "\n" for t in batch[text_column]], add_special_tokens=False)["input_ids"]
            return {"input_ids": [i for i in ids]}

        def group(batch):
            flat = [token for ids in batch["input_ids"] for token in ids] + eos
            blocks = [flat[i : i + inner] for i in range(0, len(flat) - inner + 1, inner)]
            result = {"input_ids": blocks}
            if wrap:
                result["input_ids"] = [[tokenizer.cls_token_id, *block, tokenizer.sep_token_id] for block in blocks]
                result["special_tokens_mask"] = [[1] + [0] * len(block) + [1] for block in blocks]
            result["attention_mask"] = [[1] * len(ids) for ids in result["input_ids"]]
            return result

        tokenized = raw.map(tokenize, batched=True, remove_columns=columns, **map_options(data_args, "tokenizing"))
        whole_split = {} if data_args.streaming else {"batch_size": None}
        grouped = tokenized.map(group, batched=True, **whole_split, **map_options(data_args, f"grouping into blocks of {block_size}"))
        grouped = limit_samples(grouped, data_args)
    for split, dataset in grouped.items():
        if not data_args.streaming and len(dataset) == 0:
            raise ValueError(f"The {split} text is shorter than one block of {block_size} tokens: lower --max_seq_length or add text.")
    return grouped


def label_list(raw, label_column: str) -> list:
    """The sorted labels seen in the training data (strings or integers)."""
    labels = sorted(set(raw["train"][label_column]))
    if len(labels) < 2:
        raise ValueError(f"Column {label_column!r} has {len(labels)} distinct label(s) in the training data; classification needs at least 2.")
    unseen = set(raw["validation"][label_column]) - set(labels)
    if unseen:
        raise ValueError(f"Validation labels {sorted(unseen)[:5]} never occur in the training data.")
    return labels

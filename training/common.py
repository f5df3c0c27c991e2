"""What every training script shares, so nothing is written twice:

- argument dataclasses (``ModelArguments``, ``DataArguments``) parsed with ``HfArgumentParser`` beside
  ``TrainingArguments`` / ``Seq2SeqTrainingArguments`` (``parse_arguments``), with the defaults the scripts agree on;
- data loading (``load_raw_datasets``): local txt/csv/json/jsonl files, a ``datasets`` hub name, or the small
  embedded default dataset in ``training/data/``; unreadable data raises ``ValueError`` naming the file;
- tokenizers (``get_tokenizer``): given, taken from the checkpoint, or trained with ``hf_scratch.tokenization`` —
  WordPiece (BERT, Longformer), byte-level BPE (GPT, Transformer-XL), one shared vocabulary for both languages
  (translation) or characters (``--tokenizer_type char``: the nanoGPT Shakespeare setting);
- models (``create_model``): ``--model_type`` + ``--model_size`` preset + ``--config_overrides``, or
  ``--model_name_or_path`` (an hf_scratch checkpoint, or a reference checkpoint — bert, gpt2, openai-gpt, marian,
  longformer, transfo-xl — converted on the fly with ``hf_scratch.convert.load_reference_checkpoint``);
- the end of every run (``train_evaluate_save``): train (resuming with ``--resume_from_checkpoint``), evaluate,
  save the hub-ready folder (safetensors, config with the full ``auto_map``, the modeling code, tokenizer,
  generation config) and its ``README.md`` model card filled from ``model_cards/<family>.md``, push if asked.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import datasets
import transformers
from transformers import AutoConfig, AutoTokenizer, HfArgumentParser, TrainingArguments

import hf_scratch
from hf_scratch.tokenization import TOKENIZER_KINDS, train_tokenizer

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


@dataclass
class DataArguments:
    dataset_name: Optional[str] = field(default=None, metadata={"help": "A dataset on the hub, read with `datasets`."})
    dataset_config_name: Optional[str] = field(default=None, metadata={"help": "Its configuration name."})
    train_file: Optional[str] = field(default=None, metadata={"help": "A local training file: txt, csv, json or jsonl."})
    validation_file: Optional[str] = field(default=None, metadata={"help": "A local validation file: txt, csv, json or jsonl."})
    validation_split_percentage: int = field(default=10, metadata={"help": "Held-out % of train when there is no validation set."})
    max_seq_length: int = field(default=128, metadata={"help": "Maximum tokens per example after tokenization."})
    max_train_samples: Optional[int] = field(default=None, metadata={"help": "Keep only this many training examples."})
    max_eval_samples: Optional[int] = field(default=None, metadata={"help": "Keep only this many evaluation examples."})


def parse_arguments(script: str, extra_dataclasses: tuple = (), args: Optional[list[str]] = None, training_class=TrainingArguments):
    """Parse ``args`` (default: ``sys.argv[1:]``) into (ModelArguments, DataArguments, *extra, TrainingArguments).

    Defaults differ from the Trainer's where a script needs them: with neither ``--do_train`` nor ``--do_eval`` a
    script does both; logs go to TensorBoard (when installed) unless ``--report_to`` says otherwise; ``--output_dir`` defaults to
    ``outputs/<script>``. Bad values raise ValueError (unknown flags: the parser's usage error)."""
    args = list(sys.argv[1:] if args is None else args)
    if not any(a == "--output_dir" or a.startswith("--output_dir=") for a in args):
        args += ["--output_dir", str(Path("outputs") / script)]
    parser = HfArgumentParser((ModelArguments, DataArguments, *extra_dataclasses, training_class))
    parsed = parser.parse_args_into_dataclasses(args=args)
    model_args, data_args, training_args = parsed[0], parsed[1], parsed[-1]
    if "--do_train" not in args and "--do_eval" not in args:
        training_args.do_train = training_args.do_eval = True
    if not any(a.startswith("--report_to") for a in args):
        from transformers.integrations import is_tensorboard_available

        training_args.report_to = ["tensorboard"] if is_tensorboard_available() else []
    check_common_arguments(model_args, data_args)
    transformers.set_seed(training_args.seed)  # before the model is initialised, so runs are reproducible
    return parsed


def check_common_arguments(model_args: ModelArguments, data_args: DataArguments) -> None:
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


def check_model_type(model_args: ModelArguments, supported: Iterable[str]) -> str:
    """The hf_scratch model type this run trains (a reference checkpoint's type mapped to ours); the script must
    support it and hf_scratch must register it."""
    supported = list(supported)
    model_type = model_args.model_type or _checkpoint_model_type(model_args.model_name_or_path)
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


def _checkpoint_model_type(path: Optional[str]) -> Optional[str]:
    config_file = Path(path) / "config.json" if path else None
    if config_file is None or not config_file.is_file():
        return AutoConfig.from_pretrained(path).model_type if path else None
    return json.loads(config_file.read_text())["model_type"]


def family_of(model) -> str:
    return FAMILIES[model.config.model_type]


# ----------------------------------------------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------------------------------------------


def load_raw_datasets(data_args: DataArguments, default_data: str, text_sample_by: str = "line", seed: int = 42,
                      limit: bool = True) -> datasets.DatasetDict:
    """A DatasetDict with "train" and "validation": from ``--dataset_name``, local files, or the embedded default
    ``training/data/<default_data>/{train,validation}.*``. ``text_sample_by="paragraph"`` makes a txt row a block
    separated by blank lines (a document). ``limit=False`` leaves --max_*_samples to the caller (language
    modelling counts blocks, not lines)."""
    if data_args.dataset_name is not None:
        try:
            raw = datasets.load_dataset(data_args.dataset_name, data_args.dataset_config_name)
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
            raw = datasets.load_dataset(builder, data_files=files, **kwargs)
        except Exception as error:
            raise ValueError(f"Cannot read {sorted(files.values())} as {builder}: {error}") from error
    if "train" not in raw:
        raise ValueError(f"The data has no 'train' split (splits: {list(raw)}).")
    if "validation" not in raw:
        held_out = raw["train"].train_test_split(test_size=data_args.validation_split_percentage / 100, seed=seed)
        raw = datasets.DatasetDict(train=held_out["train"], validation=held_out["test"])
    return limit_samples(raw, data_args) if limit else raw


def limit_samples(data: datasets.DatasetDict, data_args: DataArguments) -> datasets.DatasetDict:
    """Apply --max_train_samples / --max_eval_samples."""
    for split, limit in (("train", data_args.max_train_samples), ("validation", data_args.max_eval_samples)):
        if limit is not None:
            data[split] = data[split].select(range(min(limit, len(data[split]))))
    return data


def require_columns(raw: datasets.DatasetDict, columns: Iterable[str], what: str) -> None:
    for split, dataset in raw.items():
        missing = [c for c in columns if c not in dataset.column_names]
        if missing:
            raise ValueError(f"The {split} data lacks the column(s) {missing} needed for {what}; it has {dataset.column_names}.")


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
    ``needs_padding`` a tokenizer without a pad token gets one (``<pad>``, appended to the vocabulary)."""
    source = model_args.tokenizer_name or model_args.model_name_or_path
    if source is not None:
        try:
            tokenizer = AutoTokenizer.from_pretrained(source)
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
    (model_type bert, gpt2, …) is converted to hf_scratch first, then loaded into the head ``auto_class`` asks for
    (a new head is initialised; ``head_kwargs`` such as ``num_labels`` update the config)."""
    load_kwargs = {"attn_implementation": model_args.attn_implementation} if model_args.attn_implementation else {}
    if model_args.model_name_or_path is None:
        config = scratch_config(model_args, tokenizer, **head_kwargs)
        return auto_class.from_config(config, **load_kwargs)
    path = model_args.model_name_or_path
    if not Path(path).is_dir():  # a hub id: fetch the folder (conversion reads files)
        from huggingface_hub import snapshot_download

        path = snapshot_download(path)
    if _checkpoint_model_type(path) not in FAMILIES:
        from hf_scratch.convert import load_reference_checkpoint

        converted = load_reference_checkpoint(path)
        with tempfile.TemporaryDirectory() as folder:
            converted.save_pretrained(folder)
            return auto_class.from_pretrained(folder, ignore_mismatched_sizes=True, **head_kwargs, **load_kwargs)
    return auto_class.from_pretrained(path, ignore_mismatched_sizes=True, **head_kwargs, **load_kwargs)


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
    """Train (resuming if asked), evaluate, save the hub-ready folder with its model card; return the results:
    ``{"train": …, "eval": …, "log_history": …, "output_dir": …}``."""
    results: dict[str, Any] = {"output_dir": training_args.output_dir}
    model, tokenizer = trainer.model, trainer.processing_class
    prepare_for_saving(model, tokenizer)
    if training_args.do_train:
        checkpoint = training_args.resume_from_checkpoint
        if checkpoint is not None and not Path(checkpoint).is_dir():
            raise ValueError(f"--resume_from_checkpoint {checkpoint!r} is not a checkpoint directory.")
        outcome = trainer.train(resume_from_checkpoint=checkpoint)
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
    if training_args.should_save:
        trainer.save_model()
        write_model_card(training_args.output_dir, model, tokenizer, training_args, card, results.get("eval", {}))
    if training_args.push_to_hub:
        # Trainer.push_to_hub uploads the folder (weights, code, tokenizer) but first overwrites README.md with its
        # own generic card: write ours again and upload it on top
        trainer.push_to_hub(commit_message="End of training")
        if training_args.should_save:
            from huggingface_hub import upload_file

            card_path = write_model_card(training_args.output_dir, model, tokenizer, training_args, card, results.get("eval", {}))
            upload_file(path_or_fileobj=str(card_path), path_in_repo="README.md", repo_id=trainer.hub_model_id,
                        token=training_args.hub_token, commit_message="Model card")
    return results


def model_card_data(model, training_args, card: CardInfo, eval_metrics: dict):
    from huggingface_hub import EvalResult, ModelCardData

    family = family_of(model)
    name = (training_args.hub_model_id or Path(training_args.output_dir).name).split("/")[-1]
    eval_results = [
        EvalResult(task_type=card.pipeline_tag, dataset_type=card.dataset, dataset_name=card.dataset, metric_type=metric,
                   metric_value=float(eval_metrics[f"eval_{metric}"]))
        for metric in card.metric_names
        if f"eval_{metric}" in eval_metrics
    ]
    return ModelCardData(
        library_name="transformers",
        pipeline_tag=card.pipeline_tag,
        tags=["hf_scratch", model.config.model_type, family, "custom_code", "from-scratch"],
        datasets=[card.dataset],
        metrics=list(card.metric_names),
        license="apache-2.0",
        model_name=name,
        eval_results=eval_results or None,
    )


def write_model_card(output_dir: str, model, tokenizer, training_args, card: CardInfo, eval_metrics: dict) -> Path:
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
    card_data = model_card_data(model, training_args, card, eval_metrics)
    content = ModelCard.from_template(
        card_data,
        model_name=card_data.model_name,
        template_path=str(MODEL_CARDS_DIR / f"{family}.md"),
        model_class=type(model).__name__,
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
        if reference.split(".")[-1] == type(model).__name__:
            return auto_name
    return "AutoModel"


# ----------------------------------------------------------------------------------------------------------------
# Text → token blocks (language modelling)
# ----------------------------------------------------------------------------------------------------------------


def tokenize_text_blocks(raw, tokenizer, text_column: str, data_args: DataArguments, line_by_line: bool, training_args,
                         special_tokens: bool) -> "datasets.DatasetDict":
    """Language-modelling examples: each non-empty line on its own (``line_by_line``, truncated to ``block_size``),
    or all text concatenated and cut into blocks of ``block_size`` tokens (the remainder is dropped), as in
    transformers' run_clm / run_mlm. ``special_tokens`` adds [CLS]…[SEP] around each block (BERT-style MLM).
    ``block_size`` is --max_seq_length; --max_*_samples count examples after grouping."""
    block_size = data_args.max_seq_length
    if block_size > tokenizer.model_max_length:
        raise ValueError(f"--max_seq_length {block_size} exceeds the tokenizer's model_max_length {tokenizer.model_max_length}.")
    columns = raw["train"].column_names
    with training_args.main_process_first(desc="tokenizing"):
        if line_by_line:
            def tokenize(batch):
                lines = [line for line in batch[text_column] if line and not line.isspace()]
                return tokenizer(lines, truncation=True, max_length=block_size, return_special_tokens_mask=special_tokens)

            return limit_samples(raw.map(tokenize, batched=True, remove_columns=columns, desc="tokenizing lines"), data_args)
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

        tokenized = raw.map(tokenize, batched=True, remove_columns=columns, desc="tokenizing")
        grouped = tokenized.map(group, batched=True, batch_size=None, desc=f"grouping into blocks of {block_size}")
        grouped = limit_samples(grouped, data_args)
    for split, dataset in grouped.items():
        if len(dataset) == 0:
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

"""What every training script shares besides its arguments (``arguments.py``), checkpoints (``checkpoints.py``)
and model card (``model_card.py``):

- data loading (``load_raw_datasets``): local txt/csv/json/jsonl files, a ``datasets`` hub name, or the small
  embedded default dataset in ``training/data/``, loaded or streamed (``--streaming``); unreadable data raises
  ``ValueError`` naming the file; language-modelling blocks (``tokenize_text_blocks``) and label lists;
- tokenizers (``get_tokenizer``): given, taken from the checkpoint, or trained with
  ``hf_scratch.tools.tokenization`` — the family config's ``default_tokenizer``: WordPiece (BERT, Longformer),
  byte-level BPE (GPT, Transformer-XL), one shared vocabulary for both languages (translation) — or characters
  (``--tokenizer_type char``: the nanoGPT Shakespeare setting);
- models (``create_model``): ``--model_type`` + ``--model_size`` preset + ``--config_overrides``, or
  ``--model_name_or_path`` (an hf_scratch checkpoint, or a reference checkpoint — bert, gpt2, openai-gpt, marian,
  longformer, transfo-xl — converted on the fly with ``hf_scratch.convert.load_reference_checkpoint``);
- the end of every run (``train_evaluate_save``): train (resuming from the detected or given checkpoint, with
  atomic checkpoints), evaluate, save the hub-ready folder (safetensors, config with the full ``auto_map``, the
  modeling code, tokenizer reporting the model's input limit, generation config; gathered first when FSDP shards
  the model) and its ``README.md`` model card, push it in one upload if asked. The trainer each script builds is a
  ``hf_scratch.tools.trainer.ScratchTrainer``, which does the atomic checkpoints, the unsharded save and the card.
"""

from __future__ import annotations

import functools
import json
import re
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeAlias, cast

import datasets
import torch
from transformers import (
    AutoConfig,
    AutoTokenizer,
    BatchEncoding,
    PreTrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    TrainingArguments,
)

from hf_scratch.convert import load_reference_checkpoint, needs_conversion
from hf_scratch.tools.tokenization import model_max_length, train_tokenizer
from hf_scratch.tools.trainer import ScratchTrainer, perplexity
from training.arguments import (
    DATA_EXTENSIONS,
    DataArguments,
    ModelArguments,
    checkpoint_folder,
    checkpoint_model_type,
    family_config,
    hub_options,
)
from training.checkpoints import (
    check_disk_space,
    checkpoint_problem,
    remove_checkpoints,
    remove_staging_folders,
)
from training.model_card import CardInfo, write_model_card

TRAINING_DIR = Path(__file__).resolve().parent
DATA_DIR = TRAINING_DIR / "data"
METRICS_DIR = TRAINING_DIR / "metrics"
# the splits a script reads: loaded, or streamed (--streaming); a split is a Dataset or an IterableDataset
DatasetSplits: TypeAlias = datasets.DatasetDict | datasets.IterableDatasetDict
# a data collator: the examples of a batch → the batch
Collator: TypeAlias = Callable[[list[dict[str, Any]]], dict[str, Any]]


# ----------------------------------------------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------------------------------------------


def load_raw_datasets(
    model_args: ModelArguments,
    data_args: DataArguments,
    default_data: str,
    text_sample_by: str = "line",
    seed: int = 42,
    limit: bool = True,
    can_stream: bool = False,
) -> DatasetSplits:
    """A DatasetDict with "train" and "validation": from ``--dataset_name``, local files, or the embedded default
    ``training/data/<default_data>/{train,validation}.*`` (downloads honour --cache_dir / --token).
    ``text_sample_by="paragraph"`` makes a txt row a block separated by blank lines (a document). ``limit=False``
    leaves --max_*_samples to the caller (language modelling counts blocks, not lines).

    With --streaming (only where the script says it ``can_stream``; elsewhere a ValueError) the result is an
    IterableDatasetDict read lazily; without a validation split, rows whose index modulo 100 falls below
    --validation_split_percentage are held out (a stream has no length to split by)."""
    if data_args.streaming and not can_stream:
        raise ValueError(
            "--streaming: this script needs the whole dataset at once (it collects labels, counts choices or "
            "splits contexts into windows); only run_clm.py (GPT) and run_mlm.py stream. Drop --streaming."
        )
    options = {**hub_options(model_args), **({"streaming": True} if data_args.streaming else {})}
    if data_args.dataset_name is not None:
        try:
            raw = datasets.load_dataset(data_args.dataset_name, data_args.dataset_config_name, **options)
        except Exception as error:  # datasets raises many types (FileNotFoundError, ConnectionError, …)
            raise ValueError(f"Cannot load --dataset_name {data_args.dataset_name!r}: {error}") from error
    else:
        raw = read_data_files(data_args, default_data, text_sample_by, options)
    if "train" not in raw:
        raise ValueError(f"The data has no 'train' split (splits: {list(raw)}).")
    raw = with_validation_split(raw, data_args, seed)
    return limit_samples(raw, data_args) if limit else raw


def read_data_files(
    data_args: DataArguments, default_data: str, text_sample_by: str, options: dict[str, Any]
) -> DatasetSplits:
    """--train_file / --validation_file, or else the embedded ``training/data/<default_data>``, read by the
    datasets builder of their extension (``DATA_EXTENSIONS``) with the ``load_dataset`` ``options``."""
    given = {"train": data_args.train_file, "validation": data_args.validation_file}
    files = {split: path for split, path in given.items() if path is not None}
    if not files:
        folder = DATA_DIR / default_data
        files = {split: str(next(folder.glob(f"{split}.*"))) for split in ("train", "validation")}
    extensions = {DATA_EXTENSIONS[p.rsplit(".", 1)[-1].lower()] for p in files.values()}
    if len(extensions) != 1:
        raise ValueError(f"--train_file and --validation_file must have the same format, got {sorted(files.values())}.")
    builder = extensions.pop()
    kwargs = {"sample_by": text_sample_by} if builder == "text" else {}
    try:
        return datasets.load_dataset(builder, data_files=files, **kwargs, **options)
    except Exception as error:  # datasets raises many types (FileNotFoundError, DatasetGenerationError, …)
        raise ValueError(f"Cannot read {sorted(files.values())} as {builder}: {error}") from error


def with_validation_split(raw: DatasetSplits, data_args: DataArguments, seed: int) -> DatasetSplits:
    """``raw``, with --validation_split_percentage of its training rows held out as "validation" when it has none
    (a stream: the rows whose index modulo 100 falls below it)."""
    if "validation" in raw:
        return raw
    if data_args.streaming:
        stream, share = raw["train"], data_args.validation_split_percentage

        def rows(validation: bool) -> datasets.IterableDataset:
            return stream.filter(lambda _, index: (index % 100 < share) == validation, with_indices=True)

        return datasets.IterableDatasetDict(train=rows(validation=False), validation=rows(validation=True))
    held_out = raw["train"].train_test_split(test_size=data_args.validation_split_percentage / 100, seed=seed)
    return datasets.DatasetDict(train=held_out["train"], validation=held_out["test"])


def limit_samples(data: DatasetSplits, data_args: DataArguments) -> DatasetSplits:
    """Apply --max_train_samples / --max_eval_samples (the first rows of a stream)."""
    for split, limit in (("train", data_args.max_train_samples), ("validation", data_args.max_eval_samples)):
        if limit is None:
            continue
        if isinstance(data[split], datasets.IterableDataset):
            data[split] = data[split].take(limit)
        else:
            data[split] = data[split].select(range(min(limit, len(data[split]))))
    return data


def column_names(dataset: datasets.Dataset | datasets.IterableDataset) -> list[str]:
    """The columns of a dataset; a stream whose features are unknown until read shows them in its first row."""
    if dataset.column_names is not None:
        return list(dataset.column_names)
    first = next(iter(dataset), None)
    return list(first) if first is not None else []


def map_options(data_args: DataArguments, desc: str) -> dict[str, Any]:
    """Keyword arguments for ``Dataset.map``: --preprocessing_num_workers processes and a progress description
    (a stream maps lazily and takes neither)."""
    return {} if data_args.streaming else {"num_proc": data_args.preprocessing_num_workers, "desc": desc}


def require_columns(raw: DatasetSplits, columns: Iterable[str], what: str, flags: dict[str, str] | None = None) -> None:
    """Every split has ``columns``; else a ValueError naming the missing ones, the columns found and the flag that
    names another column (``flags``: column → flag)."""
    flags = flags or {}
    for split, dataset in raw.items():
        names = column_names(dataset)
        missing = [c for c in columns if c not in names]
        if missing:
            hint = "; ".join(f"name yours with --{flags[c]}" for c in missing if c in flags)
            raise ValueError(
                f"The {split} data lacks the column(s) {missing} needed for {what}; its columns are {names}"
                + (f": {hint}." if hint else ".")
            )


def choose_column(
    raw: DatasetSplits, given: str | None, candidates: Sequence[str], flag: str, what: str, position: int | None = None
) -> str:
    """The column a script reads, as transformers' example scripts choose it: the one ``--<flag>`` names, else the
    first of ``candidates`` the training data has (the examples' default names), else — where the examples do so —
    the column at ``position``. Otherwise a ValueError listing the columns found and naming the flag."""
    names = column_names(raw["train"])
    if given is not None:
        if given not in names:
            raise ValueError(f"--{flag} {given!r}: the training data has no such column; its columns are {names}.")
        return given
    found = next((name for name in candidates if name in names), None)
    if found is None and position is not None and len(names) > position:
        found = names[position]
    if found is None:
        expected = " or ".join(repr(name) for name in candidates)
        raise ValueError(
            f"The training data has no {what} column ({expected}); its columns are {names}: name yours with --{flag}."
        )
    return found


def describe_data(data_args: DataArguments, default_data: str) -> str:
    if data_args.dataset_name:
        return data_args.dataset_name
    if data_args.train_file:
        return Path(data_args.train_file).name
    return f"hf_scratch embedded {default_data}"


# ----------------------------------------------------------------------------------------------------------------
# Tokenizers
# ----------------------------------------------------------------------------------------------------------------


def get_tokenizer(
    model_args: ModelArguments, texts: Callable[[], Iterable[str]], needs_padding: bool = False
) -> PreTrainedTokenizerBase:
    """The tokenizer given by --tokenizer_name, else the checkpoint's, else one trained on ``texts()``. With
    ``needs_padding`` a tokenizer without a pad token gets one (``<pad>``, appended to the vocabulary).
    ``create_model`` then sets its ``model_max_length`` to the model's input limit."""
    if model_args.tokenizer_name is not None or model_args.model_name_or_path is not None:
        source = model_args.tokenizer_name or checkpoint_folder(model_args)
        try:
            tokenizer = AutoTokenizer.from_pretrained(
                source, trust_remote_code=model_args.trust_remote_code, **hub_options(model_args)
            )
        except (OSError, ValueError) as error:
            raise ValueError(f"Cannot load a tokenizer from {source!r}: {error}. Give --tokenizer_name.") from error
    else:
        kind = model_args.tokenizer_type or family_config(model_args.model_type).default_tokenizer
        tokenizer = train_tokenizer(texts(), kind=kind, vocab_size=model_args.tokenizer_vocab_size)
    if needs_padding and tokenizer.pad_token is None:
        tokenizer.add_special_tokens({"pad_token": "<pad>"})
    return tokenizer


# ----------------------------------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------------------------------


def parse_config_overrides(text: str | None) -> dict[str, Any]:
    """'a=1,b=0.5,c=relu,d=true,e=[1,2]' → {'a': 1, 'b': 0.5, 'c': 'relu', 'd': True, 'e': [1, 2]} (values read
    as JSON, else strings; commas inside [...] belong to the list)."""
    overrides: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in re.split(r",(?![^\[]*\])", text or ""))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(
                f"--config_overrides: {item!r} is not key=value (write e.g. 'hidden_size=128,hidden_act=relu')."
            )
        try:
            overrides[key.strip()] = json.loads(
                value.strip().lower() if value.strip().lower() in ("true", "false", "null") else value.strip()
            )
        except json.JSONDecodeError:
            overrides[key.strip()] = value.strip()
    return overrides


def scratch_config(
    model_args: ModelArguments, tokenizer: PreTrainedTokenizerBase, **head_kwargs: Any
) -> PreTrainedConfig:
    """The from-scratch config: family defaults ← size preset ← tokenizer (vocabulary, special ids) ← head settings
    (labels) ← --config_overrides. Unknown override names raise ValueError."""
    model_type = model_args.model_type
    assert model_type is not None  # from scratch: check_common_arguments requires --model_type
    default = AutoConfig.for_model(model_type)
    has = lambda name: hasattr(default, name)  # noqa: E731 (attribute_map aliases count)
    kwargs: dict[str, Any] = default.size_preset(model_args.model_size)
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
    return AutoConfig.for_model(model_type, **kwargs)


def create_model(
    model_args: ModelArguments, auto_class: Any, tokenizer: PreTrainedTokenizerBase, **head_kwargs: Any
) -> PreTrainedModel:
    """The model to train: from scratch (``--model_type``) or from ``--model_name_or_path``. A reference checkpoint
    (model_type bert, gpt2, …) is converted to hf_scratch first, then loaded into the head ``auto_class`` (an Auto
    class, or a model class) asks for (a new head is initialised; ``head_kwargs`` such as ``num_labels`` update the
    config). The tokenizer's ``model_max_length`` becomes the model's input limit
    (``hf_scratch.tools.tokenization.model_max_length``) unless it already says less, so the tokenizer saved beside
    the model reports it."""
    load_kwargs = {"attn_implementation": model_args.attn_implementation} if model_args.attn_implementation else {}
    if model_args.model_name_or_path is None:
        config = scratch_config(model_args, tokenizer, **head_kwargs)
        # an Auto class, or a head no Auto class names (GPT's double heads)
        from_config = getattr(auto_class, "from_config", None) or auto_class._from_config
        model = from_config(config, **load_kwargs)
    else:
        model = from_checkpoint(model_args, auto_class, **head_kwargs, **load_kwargs)
    tokenizer.model_max_length = min(tokenizer.model_max_length, model_max_length(model.config))
    if model_args.model_name_or_path is None:  # built from this tokenizer: its ids are the model's
        align_special_tokens(model, tokenizer)
    return model


def from_checkpoint(model_args: ModelArguments, auto_class: Any, **kwargs: Any) -> PreTrainedModel:
    """--model_name_or_path loaded into the head of ``auto_class`` (``kwargs``: its head settings and load options),
    converted to hf_scratch first when it is a reference checkpoint."""
    folder, model_type = checkpoint_folder(model_args), checkpoint_model_type(model_args)
    assert folder is not None and model_type is not None  # --model_name_or_path is given
    if needs_conversion(model_type):
        converted = load_reference_checkpoint(folder)
        with tempfile.TemporaryDirectory() as converted_folder:
            converted.save_pretrained(converted_folder)
            return auto_class.from_pretrained(converted_folder, ignore_mismatched_sizes=True, **kwargs)
    return auto_class.from_pretrained(
        folder, ignore_mismatched_sizes=True, trust_remote_code=model_args.trust_remote_code, **kwargs
    )


def align_special_tokens(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
    """Give a model built from scratch for ``tokenizer`` the tokenizer's pad/bos/eos ids in its config and generation
    config now — what the Trainer would do when training starts (``transformers.trainer_utils.align_special_tokens``),
    with a warning the user can do nothing about ("The tokenizer has new PAD/BOS/EOS tokens…": Transformer-XL's
    config has no bos id of its own). Done here, the Trainer finds the ids aligned and says nothing. A checkpoint
    being fine-tuned is left to the Trainer, whose warning then says something about the checkpoint."""
    import logging as std_logging

    from transformers.trainer_utils import align_special_tokens as transformers_align
    from transformers.utils import logging as hf_logging

    logger = hf_logging.get_logger("transformers.trainer_utils")
    level = logger.level
    logger.setLevel(std_logging.ERROR)
    try:
        transformers_align(model, tokenizer)
    finally:
        logger.setLevel(level)


def prepare_for_saving(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
    """Make the saved folder self-describing: the tokenizer's special ids in the generation config of generative
    models (padding falls back to the end-of-text token, as for GPT-2). The config carries the full auto_map of its
    family already (``ScratchConfig.__post_init__``)."""
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


def load_metric(name: str) -> Any:
    """An `evaluate` metric module kept in ``training/metrics/<name>/<name>.py`` (the hub is not reachable)."""
    import evaluate

    return evaluate.load(str(METRICS_DIR / name / f"{name}.py"))


# ----------------------------------------------------------------------------------------------------------------
# Train, evaluate, save
# ----------------------------------------------------------------------------------------------------------------


def train_evaluate_save(
    trainer: ScratchTrainer,
    model_args: ModelArguments,
    data_args: DataArguments,
    training_args: TrainingArguments,
    card: CardInfo,
    extra_metrics: Callable[[dict[str, float]], dict[str, float]] | None = None,
) -> dict[str, Any]:
    """Train (from the checkpoint ``resolve_output_dir`` found or --resume_from_checkpoint gave, if any; after
    checking the disk has room for a checkpoint), evaluate, save the hub-ready folder with its model card, push it
    if asked; return the results: ``{"train": …, "eval": …, "log_history": …, "output_dir": …}``. ``trainer`` is a
    ``ScratchTrainer``: atomic checkpoints, the unsharded save under FSDP and the card are its methods."""
    if not isinstance(trainer, ScratchTrainer):
        raise TypeError(
            f"train_evaluate_save needs a hf_scratch.tools.trainer.ScratchTrainer (atomic checkpoints, the unsharded "
            f"save, the model card), got {type(trainer).__name__}."
        )
    results: dict[str, Any] = {"output_dir": training_args.output_dir}
    # the script's model and tokenizer (the Trainer types its attributes as unions of what any Trainer may hold)
    model, tokenizer = cast(PreTrainedModel, trainer.model), cast(PreTrainedTokenizerBase, trainer.processing_class)
    prepare_for_saving(model, tokenizer)
    if training_args.do_train:
        results["train"] = run_training(trainer, data_args, training_args)
    if training_args.do_eval:
        results["eval"] = run_evaluation(trainer, card, extra_metrics)
    results["log_history"] = list(trainer.state.log_history)
    trainer.model_card = functools.partial(  # called with the output folder
        write_model_card,
        model=model,
        tokenizer=tokenizer,
        model_args=model_args,
        data_args=data_args,
        training_args=training_args,
        card=card,
        eval_metrics=results.get("eval", {}),
    )
    if training_args.push_to_hub:
        # Trainer.push_to_hub saves the folder, writes README.md (ScratchTrainer.create_model_card: the card above)
        # and uploads it all in one commit, so the card goes up once, beside the weights
        trainer.push_to_hub(commit_message="End of training")
    else:
        trainer.save_model()  # every process: under FSDP they all gather the weights; the main one writes
        trainer.create_model_card()
    return results


def run_training(
    trainer: ScratchTrainer, data_args: DataArguments, training_args: TrainingArguments
) -> dict[str, float]:
    """The training part of ``train_evaluate_save``: refuse a --resume_from_checkpoint that is not a complete
    checkpoint, check the disk, clear what --overwrite_output_dir or an interrupted save left, train; the metrics."""
    checkpoint = training_args.resume_from_checkpoint
    if checkpoint is not None and not Path(checkpoint).is_dir():
        raise ValueError(f"--resume_from_checkpoint {checkpoint!r} is not a checkpoint directory.")
    if checkpoint is not None and (problem := checkpoint_problem(checkpoint)) is not None:
        raise ValueError(
            f"--resume_from_checkpoint {checkpoint} is incomplete ({problem}): its save was interrupted "
            "or its files were damaged since; resume from another checkpoint."
        )
    check_disk_space(cast(torch.nn.Module, trainer.model), training_args)
    if data_args.overwrite_output_dir and training_args.should_save:
        remove_checkpoints(str(training_args.output_dir))
    elif training_args.should_save:
        remove_staging_folders(str(training_args.output_dir))
    metrics = dict(trainer.train(resume_from_checkpoint=checkpoint).metrics)
    trainer.log_metrics("train", metrics)
    trainer.save_metrics("train", metrics)
    trainer.save_state()
    return metrics


def run_evaluation(
    trainer: ScratchTrainer, card: CardInfo, extra_metrics: Callable[[dict[str, float]], dict[str, float]] | None
) -> dict[str, float]:
    """The evaluation part of ``train_evaluate_save``: the trainer's metrics, with ``eval_perplexity`` for a
    language model's card and the script's ``extra_metrics``, logged and saved."""
    metrics = trainer.evaluate()
    if "eval_loss" in metrics and "eval_perplexity" not in metrics and card.metric_names[:1] == ["perplexity"]:
        metrics["eval_perplexity"] = perplexity(metrics["eval_loss"])  # exp(loss), capped against overflow
    if extra_metrics is not None:
        metrics.update(extra_metrics(metrics))
    trainer.log_metrics("eval", metrics)
    trainer.save_metrics("eval", metrics)
    return metrics


# ----------------------------------------------------------------------------------------------------------------
# Text → token blocks (language modelling)
# ----------------------------------------------------------------------------------------------------------------


def tokenize_text_blocks(
    raw: DatasetSplits,
    tokenizer: PreTrainedTokenizerBase,
    text_column: str,
    data_args: DataArguments,
    line_by_line: bool,
    training_args: TrainingArguments,
    special_tokens: bool,
) -> DatasetSplits:
    """Language-modelling examples: each non-empty line on its own (``line_by_line``, truncated to ``block_size``),
    or all text concatenated and cut into blocks of ``block_size`` tokens (the remainder is dropped), as in
    transformers' run_clm / run_mlm. ``special_tokens`` adds [CLS]…[SEP] around each block (BERT-style MLM).
    ``block_size`` is --max_seq_length (alias --block_size), at most the model's input limit
    (``tokenizer.model_max_length``); --max_*_samples count examples after grouping. A loaded split is grouped in
    one batch per --preprocessing_num_workers process, a stream a thousand rows at a time."""
    block_size = data_args.max_seq_length
    if block_size > tokenizer.model_max_length:
        raise ValueError(
            f"--max_seq_length (--block_size) {block_size} exceeds the {tokenizer.model_max_length} positions the "
            "model reads (tokenizer.model_max_length): lower it, or configure more max_position_embeddings."
        )
    with training_args.main_process_first(desc="tokenizing"):
        if line_by_line:
            return limit_samples(tokenize_lines(raw, tokenizer, text_column, data_args, special_tokens), data_args)
        grouped = limit_samples(concatenated_blocks(raw, tokenizer, text_column, data_args, special_tokens), data_args)
    for split, dataset in grouped.items():
        if not data_args.streaming and len(dataset) == 0:
            raise ValueError(
                f"The {split} text is shorter than one block of {block_size} tokens: "
                "lower --max_seq_length or add text."
            )
    return grouped


def tokenize_lines(
    raw: DatasetSplits,
    tokenizer: PreTrainedTokenizerBase,
    text_column: str,
    data_args: DataArguments,
    special_tokens: bool,
) -> DatasetSplits:
    """``tokenize_text_blocks`` with ``line_by_line``: each non-empty line an example of at most --max_seq_length
    tokens."""

    def tokenize(batch: dict[str, list[str]]) -> BatchEncoding:
        lines = [line for line in batch[text_column] if line and not line.isspace()]
        return tokenizer(
            lines, truncation=True, max_length=data_args.max_seq_length, return_special_tokens_mask=special_tokens
        )

    columns = column_names(raw["train"])
    return raw.map(tokenize, batched=True, remove_columns=columns, **map_options(data_args, "tokenizing lines"))


def concatenated_blocks(
    raw: DatasetSplits,
    tokenizer: PreTrainedTokenizerBase,
    text_column: str,
    data_args: DataArguments,
    special_tokens: bool,
) -> DatasetSplits:
    """``tokenize_text_blocks`` without ``line_by_line``: the text of a split concatenated (an end-of-text token
    after it, unless ``special_tokens``) and cut into blocks of --max_seq_length tokens, [CLS]…[SEP] included."""
    block_size = data_args.max_seq_length
    wrap = special_tokens and tokenizer.cls_token_id is not None and tokenizer.sep_token_id is not None
    inner = block_size - (2 if wrap else 0)
    eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None and not special_tokens else []

    def tokenize(batch: dict[str, list[str]]) -> dict[str, list[list[int]]]:
        ids = tokenizer([t + "\n" for t in batch[text_column]], add_special_tokens=False)["input_ids"]
        return {"input_ids": [i for i in ids]}

    def group(batch: dict[str, list[list[int]]]) -> dict[str, list[list[int]]]:
        flat = [token for ids in batch["input_ids"] for token in ids] + eos
        blocks = [flat[i : i + inner] for i in range(0, len(flat) - inner + 1, inner)]
        result = {"input_ids": blocks}
        if wrap:
            result["input_ids"] = [[tokenizer.cls_token_id, *block, tokenizer.sep_token_id] for block in blocks]
            result["special_tokens_mask"] = [[1] + [0] * len(block) + [1] for block in blocks]
        result["attention_mask"] = [[1] * len(ids) for ids in result["input_ids"]]
        return result

    columns = column_names(raw["train"])
    tokenized = raw.map(tokenize, batched=True, remove_columns=columns, **map_options(data_args, "tokenizing"))
    whole_split = {} if data_args.streaming else {"batch_size": None}
    return tokenized.map(
        group, batched=True, **whole_split, **map_options(data_args, f"grouping into blocks of {block_size}")
    )


def label_list(raw: DatasetSplits, label_column: str) -> list[Any]:
    """The sorted labels seen in the training data (strings or integers)."""
    labels = sorted(set(raw["train"][label_column]))
    if len(labels) < 2:
        raise ValueError(
            f"Column {label_column!r} has {len(labels)} distinct label(s) in the training data; "
            "classification needs at least 2."
        )
    unseen = set(raw["validation"][label_column]) - set(labels)
    if unseen:
        raise ValueError(f"Validation labels {sorted(unseen)[:5]} never occur in the training data.")
    return labels

"""Sequence classification (BERT, GPT, Longformer) with the 🤗 Trainer, in the style of transformers'
run_classification.py.

    python training/run_classification.py --model_type scratch-bert --max_steps 200 --output_dir out/cls
    python training/run_classification.py --model_type scratch-gpt --text_column_names premise,hypothesis \\
        --train_file nli_train.jsonl --validation_file nli_dev.jsonl

Rows hold a text (and optionally a second text) and a label (string or integer), in the columns transformers'
run_classification reads — ``sentence`` (else ``text``, as in the embedded data) and ``label`` — unless
``--text_column_names`` / ``--label_column_name`` say otherwise. BERT/Longformer read
``[CLS] a [SEP] (b [SEP])``; GPT uses GPT-1's input transformations (``hf_scratch.tools.gpt_input_transforms``):
``[<s>; a; ⟨e⟩]`` or ``[<s>; a; $; b; ⟨e⟩]`` with the head on the extract token (``--symmetric_pair`` feeds both
orders of a pair and sums them, GPT-1's similarity setting; ``--lm_labels`` adds GPT-1's auxiliary LM loss).
Longformer's classification head gives the first token global attention (Beltagy et al. 2020 §3.1);
``--global_attention none`` leaves every token to its sliding window. Without data arguments it learns which play
(Hamlet, Macbeth, Romeo and Juliet) a speech comes from (``training/data/plays``). Reports accuracy and macro-F1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from transformers import (
    AutoModelForSequenceClassification,
    DataCollatorWithPadding,
    EvalPrediction,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    TrainerCallback,
    TrainingArguments,
)

from hf_scratch import ScratchBertConfig, ScratchGPTConfig, ScratchLongformerConfig, ScratchRNNConfig
from hf_scratch.tools.trainer import ScratchTrainer
from training.arguments import DataArguments, ModelArguments, check_model_type, parse_arguments, run_script
from training.common import (
    Collator,
    DatasetSplits,
    choose_column,
    column_names,
    create_model,
    describe_data,
    get_tokenizer,
    label_list,
    limit_samples,
    load_metric,
    load_raw_datasets,
    map_options,
    require_columns,
    train_evaluate_save,
)
from training.model_card import CardInfo

if TYPE_CHECKING:
    from hf_scratch.tools.gpt_input_transforms import GPTTaskInputs

SUPPORTED = tuple(
    config.model_type for config in (ScratchBertConfig, ScratchGPTConfig, ScratchLongformerConfig, ScratchRNNConfig)
)
GLOBAL_ATTENTION = ("cls", "none")  # Longformer: global attention on the classification token, or on no token


@dataclass
class ClassificationArguments:
    text_column_names: str | None = field(
        default=None,
        metadata={
            "help": "The text column, or two comma-separated columns for a text pair (transformers' run_classification "
            "flag). Default: 'sentence' (transformers' default), else 'sentence1,sentence2' (GLUE files), else 'text'."
        },
    )
    text_pair_column: str | None = field(
        default=None,
        metadata={
            "help": "Column holding the second text of a pair (the same as a second name in --text_column_names)."
        },
    )
    label_column: str | None = field(
        default=None,
        metadata={
            "help": "Column holding the label, string or integer (default: 'label', "
            "as transformers' run_classification; its name there: "
            "--label_column_name)."
        },
    )
    text_column: str | None = field(
        default=None, metadata={"help": argparse.SUPPRESS}
    )  # the former name of a single --text_column_names
    symmetric_pair: bool = field(
        default=False, metadata={"help": "GPT: feed both orders of a pair and sum (similarity)."}
    )
    lm_labels: bool = field(
        default=False,
        metadata={
            "help": "GPT: add the auxiliary language-modelling loss of GPT-1 "
            "§3.2 (weight: the config's lm_loss_weight, λ)."
        },
    )
    global_attention: str | None = field(
        default=None,
        metadata={
            "help": "Longformer only: 'cls' (the default: the classification token attends, and is attended by, "
            "every token) or 'none' (sliding-window attention only) during this run's training and "
            "evaluation. The saved head still puts global attention on its first token when called "
            "without global_attention_mask."
        },
    )


class GPTClassificationCollator:
    """Frames each example with GPT-1's input transformation at batch time (right-padded) and adds the labels."""

    def __init__(
        self,
        task_inputs: GPTTaskInputs,
        text_column: str,
        text_pair_column: str | None,
        symmetric: bool,
        lm_labels: bool = False,
    ) -> None:
        self.task_inputs, self.text_column, self.text_pair_column, self.symmetric = (
            task_inputs,
            text_column,
            text_pair_column,
            symmetric,
        )
        self.lm_labels = lm_labels

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        first = [f[self.text_column] for f in features]
        if self.text_pair_column is None:
            batch = self.task_inputs.classification(first)
        else:
            second = [f[self.text_pair_column] for f in features]
            batch = (self.task_inputs.similarity if self.symmetric else self.task_inputs.entailment)(first, second)
        batch["labels"] = torch.tensor([f["labels"] for f in features], dtype=torch.long)
        if self.lm_labels:  # L3 = L2 + λ·L1 (GPT-1 eq. 5): the framed tokens are also language-modelled
            from hf_scratch.tools.gpt_input_transforms import language_modeling_labels

            batch["lm_labels"] = language_modeling_labels(batch)
        return batch


def without_global_attention(collate: Collator) -> Collator:
    """A collator giving every batch ``global_attention_mask`` = 0, so that no token of the Longformer gets global
    attention (its classification head otherwise puts it on the first token)."""
    import torch

    def collate_without_global_attention(features: list[dict[str, Any]]) -> dict[str, Any]:
        batch = collate(features)
        batch["global_attention_mask"] = torch.zeros_like(batch["input_ids"])
        return batch

    return collate_without_global_attention


def check_global_attention(global_attention: str | None, model_type: str) -> None:
    if global_attention is None:
        return
    if global_attention not in GLOBAL_ATTENTION:
        raise ValueError(
            f"--global_attention {global_attention!r} is unknown: use 'cls' (the classification token, the "
            "default) or 'none' (no global token)."
        )
    if model_type != ScratchLongformerConfig.model_type:
        raise ValueError(
            f"--global_attention is a Longformer setting; model type {model_type!r} has no global attention: "
            "drop the flag or train --model_type scratch-longformer."
        )


def classification_text_columns(raw: DatasetSplits, cls_args: ClassificationArguments) -> list[str]:
    """The one or two text columns of a run: --text_column_names (or its former name --text_column), plus
    --text_pair_column; by default transformers' 'sentence', else a GLUE file's 'sentence1' and 'sentence2', else
    'text'."""
    if cls_args.text_column_names is not None and cls_args.text_column is not None:
        raise ValueError("--text_column is the former name of --text_column_names: give one of them.")
    given = cls_args.text_column_names or cls_args.text_column
    columns = [name.strip() for name in given.split(",")] if given else []
    if len(columns) > 2 or (len(columns) == 2 and cls_args.text_pair_column) or any(not name for name in columns):
        raise ValueError(
            f"--text_column_names {given!r}: give one text column, or two comma-separated ones for a text pair "
            "(or the second with --text_pair_column)."
        )
    names = column_names(raw["train"])
    if not columns:
        if "sentence" not in names and {"sentence1", "sentence2"} <= set(names) and not cls_args.text_pair_column:
            columns = ["sentence1", "sentence2"]
        else:
            columns = [choose_column(raw, None, ["sentence", "text"], "text_column_names", "text")]
    for name in columns:
        choose_column(raw, name, [], "text_column_names", "text")  # a ValueError naming the columns found
    return columns + ([cls_args.text_pair_column] if cls_args.text_pair_column else [])


def check_classification_flags(cls_args: ClassificationArguments, model_type: str) -> None:
    check_global_attention(cls_args.global_attention, model_type)
    if cls_args.lm_labels and model_type != ScratchGPTConfig.model_type:
        raise ValueError(
            f"--lm_labels is GPT-1's auxiliary language-modelling loss; model type {model_type!r} has no LM "
            "head in its classifier: drop the flag or train --model_type scratch-gpt."
        )


def load_labelled_data(
    model_args: ModelArguments, data_args: DataArguments, cls_args: ClassificationArguments
) -> tuple[DatasetSplits, list[str], list[Any]]:
    """The raw splits, limited to --max_*_samples and given integer ``labels``; their text columns; the label set."""
    raw = load_raw_datasets(model_args, data_args, "plays", limit=False)
    text_columns = classification_text_columns(raw, cls_args)
    cls_args.label_column = choose_column(raw, cls_args.label_column, ["label"], "label_column", "label")
    require_columns(
        raw,
        text_columns + [cls_args.label_column],
        "classification",
        {**{column: "text_column_names" for column in text_columns}, cls_args.label_column: "label_column"},
    )
    labels = label_list(
        raw, cls_args.label_column
    )  # from all the data: the label set must not depend on --max_*_samples
    raw = limit_samples(raw, data_args)
    label_to_id = {label: i for i, label in enumerate(labels)}
    raw = raw.map(lambda row: {"labels": label_to_id[row[cls_args.label_column]]})
    return raw, text_columns, labels


def gpt_model_data_collator(
    model_args: ModelArguments,
    data_args: DataArguments,
    cls_args: ClassificationArguments,
    training_args: TrainingArguments,
    raw: DatasetSplits,
    text_columns: list[str],
    tokenizer: PreTrainedTokenizerBase,
    head: dict[str, Any],
) -> tuple[PreTrainedModel, DatasetSplits, Collator]:
    """GPT: the model, the untokenized data and a collator framing them with GPT-1's input transformations."""
    from hf_scratch.tools.gpt_input_transforms import GPTTaskInputs

    task_inputs = GPTTaskInputs(tokenizer, max_length=data_args.max_seq_length)  # adds ⟨s⟩ $ ⟨e⟩ to the vocabulary
    model = create_model(model_args, AutoModelForSequenceClassification, tokenizer, **head)
    model.resize_token_embeddings(len(tokenizer))
    training_args.remove_unused_columns = False
    data = raw.select_columns(text_columns + ["labels"])
    collator = GPTClassificationCollator(
        task_inputs,
        text_columns[0],
        text_columns[1] if len(text_columns) > 1 else None,
        cls_args.symmetric_pair,
        cls_args.lm_labels,
    )
    return model, data, collator


def encoder_model_data_collator(
    model_args: ModelArguments,
    data_args: DataArguments,
    cls_args: ClassificationArguments,
    raw: DatasetSplits,
    text_columns: list[str],
    tokenizer: PreTrainedTokenizerBase,
    head: dict[str, Any],
) -> tuple[PreTrainedModel, DatasetSplits, Collator]:
    """BERT / Longformer / RNN: the model, the tokenized data and a padding collator."""
    model = create_model(model_args, AutoModelForSequenceClassification, tokenizer, **head)
    data = raw.map(
        lambda batch: tokenizer(
            *(batch[c] for c in text_columns), truncation=True, max_length=data_args.max_seq_length
        ),
        batched=True,
        remove_columns=[c for c in raw["train"].column_names if c != "labels"],
        **map_options(data_args, "tokenizing"),
    )
    collator: Collator = DataCollatorWithPadding(tokenizer)
    if cls_args.global_attention == "none":
        collator = without_global_attention(collator)
    return model, data, collator


def accuracy_f1_metrics() -> Callable[[EvalPrediction], dict[str, float]]:
    metric = load_metric("accuracy_f1")

    def compute_metrics(eval_prediction: EvalPrediction) -> dict[str, float]:
        return metric.compute(
            predictions=np.argmax(eval_prediction.predictions, -1), references=eval_prediction.label_ids
        )

    return compute_metrics


def classification_card(data_args: DataArguments) -> CardInfo:
    return CardInfo(
        task="sequence classification",
        pipeline_tag="text-classification",
        dataset=describe_data(data_args, "plays"),
        metric_names=["accuracy", "f1"],
        usage="```python\nfrom transformers import pipeline\n"
        'classify = pipeline("text-classification", model=model, tokenizer=tokenizer)\n'
        'print(classify("Out, damned spot! out, I say!"))\n```',
    )


def main(args: list[str] | None = None, callbacks: list[TrainerCallback] | None = None) -> dict[str, Any]:
    model_args, data_args, cls_args, training_args = parse_arguments(
        "run_classification",
        (ClassificationArguments,),
        args,
        aliases={"label_column_name": "label_column"},
        doc=__doc__,
        supported=SUPPORTED,
    )
    model_type = check_model_type(model_args, SUPPORTED)
    check_classification_flags(cls_args, model_type)
    raw, text_columns, labels = load_labelled_data(model_args, data_args, cls_args)
    tokenizer = get_tokenizer(
        model_args, lambda: (t for c in text_columns for t in raw["train"][c]), needs_padding=True
    )
    head = dict(
        num_labels=len(labels),
        id2label=dict(enumerate(map(str, labels))),
        label2id={str(label): i for i, label in enumerate(labels)},
    )
    if model_type == ScratchGPTConfig.model_type:
        model, data, collator = gpt_model_data_collator(
            model_args, data_args, cls_args, training_args, raw, text_columns, tokenizer, head
        )
    else:
        model, data, collator = encoder_model_data_collator(
            model_args, data_args, cls_args, raw, text_columns, tokenizer, head
        )
    trainer = ScratchTrainer(
        model=model,
        args=training_args,
        train_dataset=data["train"],
        eval_dataset=data["validation"],
        processing_class=tokenizer,
        data_collator=collator,
        compute_metrics=accuracy_f1_metrics(),
        callbacks=callbacks,
    )
    return train_evaluate_save(trainer, model_args, data_args, training_args, classification_card(data_args))


if __name__ == "__main__":
    run_script(main)

"""Token classification — e.g. named entities — (BERT, Longformer) with the 🤗 Trainer, in the style of
transformers' run_ner.py.

    python training/run_ner.py --model_type scratch-bert --max_steps 200 --output_dir out/ner
    python training/run_ner.py --model_name_or_path path/to/bert-checkpoint --train_file conll_train.json

Rows hold pre-split words (``--tokens_column``) and one tag per word (``--tags_column``, IOB strings or
integers). The first sub-token of a word carries its tag, the others are ignored (-100). Without data arguments it
tags character names (PER) and places (LOC) in Shakespeare speeches (``training/data/names``). Reports seqeval's
entity-level precision / recall / F1 and token accuracy.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from transformers import (
    AutoModelForTokenClassification,
    BatchEncoding,
    DataCollatorForTokenClassification,
    EvalPrediction,
    PreTrainedTokenizerBase,
    TrainerCallback,
    TrainingArguments,
)

from hf_scratch import ScratchBertConfig, ScratchLongformerConfig
from hf_scratch.tools.trainer import ScratchTrainer
from training.arguments import DataArguments, ModelArguments, check_model_type, parse_arguments, run_script
from training.common import (
    DatasetSplits,
    choose_column,
    create_model,
    describe_data,
    get_tokenizer,
    limit_samples,
    load_metric,
    load_raw_datasets,
    map_options,
    require_columns,
    train_evaluate_save,
)
from training.model_card import CardInfo

# the families this script trains
SUPPORTED = tuple(config.model_type for config in (ScratchBertConfig, ScratchLongformerConfig))


@dataclass
class NERArguments:
    tokens_column: str | None = field(
        default=None,
        metadata={
            "help": "Column holding the list of words (default: 'tokens', else the first column, as "
            "transformers' run_ner; its name there: --text_column_name)."
        },
    )
    tags_column: str | None = field(
        default=None,
        metadata={
            "help": "Column holding one tag per word (default: 'ner_tags', else the second column, as "
            "transformers' run_ner; its name there: --label_column_name)."
        },
    )


def load_tagged_data(
    model_args: ModelArguments, data_args: DataArguments, ner_args: NERArguments
) -> tuple[DatasetSplits, list[str]]:
    """The raw splits (limited to --max_*_samples) and the sorted tag set of the training data."""
    raw = load_raw_datasets(model_args, data_args, "names", limit=False)
    ner_args.tokens_column = choose_column(
        raw, ner_args.tokens_column, ["tokens"], "tokens_column", "words", position=0
    )
    ner_args.tags_column = choose_column(raw, ner_args.tags_column, ["ner_tags"], "tags_column", "tags", position=1)
    require_columns(
        raw,
        [ner_args.tokens_column, ner_args.tags_column],
        "token classification",
        {ner_args.tokens_column: "tokens_column", ner_args.tags_column: "tags_column"},
    )
    tags = sorted({tag for row in raw["train"][ner_args.tags_column] for tag in row})
    unseen = {tag for row in raw["validation"][ner_args.tags_column] for tag in row} - set(tags)
    if unseen:
        raise ValueError(f"Validation tags {sorted(unseen)} never occur in the training data.")
    raw = limit_samples(raw, data_args)  # after collecting the tag set, which must not depend on --max_*_samples
    return raw, tags


def tokenize_and_align_tags(
    raw: DatasetSplits,
    tokenizer: PreTrainedTokenizerBase,
    tags: list[str],
    data_args: DataArguments,
    ner_args: NERArguments,
    training_args: TrainingArguments,
) -> DatasetSplits:
    """Tokenized splits whose first sub-token of each word carries the word's tag id (the others -100)."""
    tag_to_id = {tag: i for i, tag in enumerate(tags)}
    tokens_column, tags_column = ner_args.tokens_column, ner_args.tags_column
    assert tokens_column is not None and tags_column is not None  # load_tagged_data chose them

    def tokenize_and_align(batch: dict[str, list[list[str]]]) -> BatchEncoding:
        encoded = tokenizer(
            batch[tokens_column],
            is_split_into_words=True,
            truncation=True,
            max_length=data_args.max_seq_length,
        )
        encoded["labels"] = []
        for row, word_tags in enumerate(batch[tags_column]):
            previous, labels = None, []
            for word in encoded.word_ids(row):
                labels.append(-100 if word is None or word == previous else tag_to_id[word_tags[word]])
                previous = word
            encoded["labels"].append(labels)
        return encoded

    with training_args.main_process_first(desc="tokenizing"):
        return raw.map(
            tokenize_and_align,
            batched=True,
            remove_columns=raw["train"].column_names,
            **map_options(data_args, "tokenizing"),
        )


def seqeval_metrics(names: list[str]) -> Callable[[EvalPrediction], dict[str, float]]:
    metric = load_metric("seqeval")

    def compute_metrics(eval_prediction: EvalPrediction) -> dict[str, float]:
        predictions = np.argmax(eval_prediction.predictions, -1)
        label_ids = np.asarray(eval_prediction.label_ids)
        keep = label_ids != -100
        predicted = [[names[p] for p, k in zip(row, mask) if k] for row, mask in zip(predictions, keep)]
        gold = [[names[g] for g, k in zip(row, mask) if k] for row, mask in zip(label_ids, keep)]
        scores = metric.compute(predictions=predicted, references=gold)
        return {key.removeprefix("overall_"): value for key, value in scores.items() if key.startswith("overall_")}

    return compute_metrics


def ner_card(data_args: DataArguments) -> CardInfo:
    return CardInfo(
        task="token classification",
        pipeline_tag="token-classification",
        dataset=describe_data(data_args, "names"),
        metric_names=["precision", "recall", "f1", "accuracy"],
        usage="```python\nfrom transformers import pipeline\n"
        'tag = pipeline("token-classification", model=model, tokenizer=tokenizer)\n'
        "print(tag(\"Horatio, thou art e'en as just a man as e'er my conversation cop'd withal.\"))\n```",
    )


def main(args: list[str] | None = None, callbacks: list[TrainerCallback] | None = None) -> dict[str, Any]:
    model_args, data_args, ner_args, training_args = parse_arguments(
        "run_ner",
        (NERArguments,),
        args,
        aliases={"text_column_name": "tokens_column", "label_column_name": "tags_column"},
        doc=__doc__,
        supported=SUPPORTED,
    )
    check_model_type(model_args, SUPPORTED)
    raw, tags = load_tagged_data(model_args, data_args, ner_args)
    tokenizer = get_tokenizer(model_args, lambda: (" ".join(words) for words in raw["train"][ner_args.tokens_column]))
    if not tokenizer.is_fast:
        raise ValueError("run_ner needs a fast tokenizer (word_ids() aligns tags to sub-tokens).")
    names = [str(tag) for tag in tags]
    model = create_model(
        model_args,
        AutoModelForTokenClassification,
        tokenizer,
        num_labels=len(tags),
        id2label=dict(enumerate(names)),
        label2id={n: i for i, n in enumerate(names)},
    )
    data = tokenize_and_align_tags(raw, tokenizer, tags, data_args, ner_args, training_args)
    trainer = ScratchTrainer(
        model=model,
        args=training_args,
        train_dataset=data["train"],
        eval_dataset=data["validation"],
        processing_class=tokenizer,
        data_collator=DataCollatorForTokenClassification(tokenizer),
        compute_metrics=seqeval_metrics(names),
        callbacks=callbacks,
    )
    return train_evaluate_save(trainer, model_args, data_args, training_args, ner_card(data_args))


if __name__ == "__main__":
    run_script(main)

"""Extractive question answering (BERT, Longformer) with the 🤗 Trainer, in the style of transformers' run_qa.py.

    python training/run_qa.py --model_type scratch-bert --max_steps 200 --output_dir out/qa
    python training/run_qa.py --model_name_or_path path/to/bert-checkpoint --train_file squad_train.json

Rows are SQuAD-style: ``id``, ``question``, ``context``, ``answers = {"text": [...], "answer_start": [...]}``.
Long contexts are split into overlapping windows (``--doc_stride``); training labels the answer's start/end token
in each window (or [CLS] when the window misses it); evaluation picks the best-scoring valid span over all
windows of an example (``--max_answer_length``). Without data arguments it learns who says a quoted line in a
stretch of Shakespeare dialogue (``training/data/speakers``). Reports SQuAD exact match and F1.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import datasets
import numpy as np
from transformers import (
    AutoModelForQuestionAnswering,
    BatchEncoding,
    DataCollatorWithPadding,
    PreTrainedTokenizerBase,
    TrainerCallback,
    TrainingArguments,
)

from hf_scratch import ScratchBertConfig, ScratchLongformerConfig
from hf_scratch.tools.trainer import ScratchTrainer
from training.arguments import DataArguments, check_model_type, parse_arguments, run_script
from training.common import (
    DatasetSplits,
    create_model,
    describe_data,
    get_tokenizer,
    load_metric,
    load_raw_datasets,
    map_options,
    require_columns,
    train_evaluate_save,
)
from training.model_card import CardInfo

# the families this script trains
SUPPORTED = tuple(config.model_type for config in (ScratchBertConfig, ScratchLongformerConfig))
COLUMNS = ("id", "question", "context", "answers")


@dataclass
class QAArguments:
    doc_stride: int = field(default=32, metadata={"help": "Overlap (tokens) between the windows of a long context."})
    max_answer_length: int = field(default=30, metadata={"help": "Longest answer (tokens) considered at evaluation."})


def windows(
    tokenizer: PreTrainedTokenizerBase, batch: dict[str, list[Any]], max_length: int, stride: int
) -> BatchEncoding:
    return tokenizer(
        [q.lstrip() for q in batch["question"]],
        batch["context"],
        truncation="only_second",
        max_length=max_length,
        stride=stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding=False,
    )


def check_questions_fit(tokenizer: PreTrainedTokenizerBase, raw: DatasetSplits, max_length: int, stride: int) -> None:
    """Each window holds the whole question, the special tokens and more context tokens than ``--doc_stride``
    (else the fast tokenizer cannot make overlapping windows and fails inside its Rust code): a ValueError naming
    the longest question before anything is tokenized for training."""
    questions = [q.lstrip() for split in raw.values() for q in split["question"]]
    longest = max((len(ids) for ids in tokenizer(questions, add_special_tokens=False)["input_ids"]), default=0)
    room = max_length - longest - tokenizer.num_special_tokens_to_add(pair=True)
    if room <= stride:
        raise ValueError(
            f"The longest question is {longest} tokens, which leaves {room} context tokens per window of "
            f"--max_seq_length {max_length}: not more than --doc_stride {stride}. Raise --max_seq_length to at least "
            f"{max_length + stride + 1 - room} or lower --doc_stride below {max(room, 1)}."
        )


def train_features(
    tokenizer: PreTrainedTokenizerBase, max_length: int, stride: int
) -> Callable[[dict[str, list[Any]]], BatchEncoding]:
    """Start/end token positions of the answer in each window; [CLS] (0) when the window does not contain it."""

    def prepare(batch: dict[str, list[Any]]) -> BatchEncoding:
        encoded = windows(tokenizer, batch, max_length, stride)
        starts, ends = [], []
        for i, offsets in enumerate(encoded.pop("offset_mapping")):
            answers = batch["answers"][encoded["overflow_to_sample_mapping"][i]]
            start_char = answers["answer_start"][0]
            end_char = start_char + len(answers["text"][0])
            sequence_ids = encoded.sequence_ids(i)
            context = [k for k, s in enumerate(sequence_ids) if s == 1]
            if offsets[context[0]][0] > start_char or offsets[context[-1]][1] < end_char:
                starts.append(0)
                ends.append(0)
                continue
            starts.append(next(k for k in context if offsets[k][1] > start_char))
            ends.append(next(k for k in reversed(context) if offsets[k][0] < end_char))
        encoded.pop("overflow_to_sample_mapping")
        encoded["start_positions"], encoded["end_positions"] = starts, ends
        return encoded

    return prepare


def eval_features(
    tokenizer: PreTrainedTokenizerBase, max_length: int, stride: int
) -> Callable[[dict[str, list[Any]]], BatchEncoding]:
    """Windows that remember their example id and keep offsets only for context tokens."""

    def prepare(batch: dict[str, list[Any]]) -> BatchEncoding:
        encoded = windows(tokenizer, batch, max_length, stride)
        mapping = encoded.pop("overflow_to_sample_mapping")
        encoded["example_id"] = [batch["id"][m] for m in mapping]
        encoded["offset_mapping"] = [
            [o if s == 1 else None for o, s in zip(offsets, encoded.sequence_ids(i))]
            for i, offsets in enumerate(encoded["offset_mapping"])
        ]
        return encoded

    return prepare


def best_answers(
    examples: datasets.Dataset,
    features: datasets.Dataset,
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    max_answer_length: int,
    n_best: int = 20,
) -> dict[str, str]:
    """For each example, the highest start+end score over all its windows' valid spans (end ≥ start, in context)."""
    by_example: defaultdict[str, list[int]] = defaultdict(list)
    for index, example_id in enumerate(features["example_id"]):
        by_example[example_id].append(index)
    answers: dict[str, str] = {}
    for example in examples:
        best_text, best_score = "", -np.inf
        for index in by_example[example["id"]]:
            offsets = features[index]["offset_mapping"]
            start_scores, end_scores = start_logits[index], end_logits[index]
            for start in np.argsort(start_scores)[::-1][:n_best]:
                for end in np.argsort(end_scores)[::-1][:n_best]:
                    if start >= len(offsets) or end >= len(offsets) or offsets[start] is None or offsets[end] is None:
                        continue
                    if end < start or end - start + 1 > max_answer_length:
                        continue
                    score = start_scores[start] + end_scores[end]
                    if score > best_score:
                        best_score, best_text = score, example["context"][offsets[start][0] : offsets[end][1]]
        answers[example["id"]] = best_text
    return answers


def qa_windows(
    raw: DatasetSplits,
    tokenizer: PreTrainedTokenizerBase,
    data_args: DataArguments,
    qa_args: QAArguments,
    training_args: TrainingArguments,
) -> tuple[datasets.Dataset, datasets.Dataset]:
    """The windows of the training contexts with their answer positions, and those of the validation contexts with
    their example ids and offsets (``train_features``, ``eval_features``)."""
    length, stride = data_args.max_seq_length, qa_args.doc_stride
    check_questions_fit(tokenizer, raw, length, stride)
    with training_args.main_process_first(desc="tokenizing"):
        train = raw["train"].map(
            train_features(tokenizer, length, stride),
            batched=True,
            remove_columns=raw["train"].column_names,
            **map_options(data_args, "training windows"),
        )
        validation = raw["validation"].map(
            eval_features(tokenizer, length, stride),
            batched=True,
            remove_columns=raw["validation"].column_names,
            **map_options(data_args, "evaluation windows"),
        )
    return train, validation


def span_metrics(
    trainer: ScratchTrainer,
    examples: datasets.Dataset,
    windows: datasets.Dataset,
    model_inputs: datasets.Dataset,
    max_answer_length: int,
) -> Callable[[dict[str, float]], dict[str, float]]:
    """Exact match / F1 of the best spans (the Trainer's compute_metrics needs labels; spans need examples): the
    ``extra_metrics`` of ``train_evaluate_save``. ``model_inputs`` are the ``windows`` without their example ids
    and offsets."""
    metric = load_metric("squad")

    def scores(_: dict[str, float]) -> dict[str, float]:
        # a tuple of the head's outputs, start and end logits (transformers types it as a 1-tuple or one array)
        start_logits, end_logits = cast(tuple[np.ndarray, ...], trainer.predict(model_inputs).predictions)[:2]
        predicted = best_answers(examples, windows, start_logits, end_logits, max_answer_length)
        found = metric.compute(
            predictions=[{"id": i, "prediction_text": text} for i, text in predicted.items()],
            references=[{"id": e["id"], "answers": e["answers"]} for e in examples],
        )
        return {f"eval_{name}": value for name, value in found.items()}

    return scores


def qa_card(data_args: DataArguments) -> CardInfo:
    return CardInfo(
        task="extractive question answering",
        pipeline_tag="question-answering",
        dataset=describe_data(data_args, "speakers"),
        metric_names=["exact_match", "f1"],
        usage='```python\nimport hf_scratch  # registers the "scratch-question-answering" pipeline\n'
        "from transformers import pipeline\n"
        'qa = pipeline("scratch-question-answering", model=model, tokenizer=tokenizer)\n'
        'print(qa(question="Who says \\"Not a mouse stirring\\"?", '
        'context="Ber. Have you had quiet guard? Fran. Not a mouse stirring."))\n```',
    )


def main(args: list[str] | None = None, callbacks: list[TrainerCallback] | None = None) -> dict[str, Any]:
    model_args, data_args, qa_args, training_args = parse_arguments(
        "run_qa", (QAArguments,), args, doc=__doc__, supported=SUPPORTED
    )
    check_model_type(model_args, SUPPORTED)
    raw = load_raw_datasets(model_args, data_args, "speakers")
    require_columns(raw, COLUMNS, "extractive question answering")
    if qa_args.doc_stride > data_args.max_seq_length // 2:
        raise ValueError(
            f"--doc_stride {qa_args.doc_stride} must be well below --max_seq_length {data_args.max_seq_length} "
            "(windows would not advance)."
        )
    tokenizer = get_tokenizer(model_args, lambda: (t for c in ("question", "context") for t in raw["train"][c]))
    if not tokenizer.is_fast:
        raise ValueError("run_qa needs a fast tokenizer (offset mappings locate the answer).")
    model = create_model(model_args, AutoModelForQuestionAnswering, tokenizer)
    train, validation = qa_windows(raw, tokenizer, data_args, qa_args, training_args)
    model_inputs = validation.remove_columns(["example_id", "offset_mapping"])
    trainer = ScratchTrainer(
        model=model,
        args=training_args,
        train_dataset=train,
        eval_dataset=model_inputs,
        processing_class=tokenizer,
        data_collator=DataCollatorWithPadding(tokenizer),
        callbacks=callbacks,
    )
    spans = span_metrics(trainer, raw["validation"], validation, model_inputs, qa_args.max_answer_length)
    return train_evaluate_save(trainer, model_args, data_args, training_args, qa_card(data_args), extra_metrics=spans)


if __name__ == "__main__":
    run_script(main)

"""Multiple choice (BERT; GPT, with its double heads for the auxiliary LM loss; Longformer) with the 🤗 Trainer, in the
style of transformers' run_swag.py.

    python training/run_multiple_choice.py --model_type scratch-bert --max_steps 200 --output_dir out/mc
    python training/run_multiple_choice.py --model_type scratch-gpt --lm_labels   # GPT-1: + auxiliary LM loss

Rows hold a ``context``, a list of ``endings`` (the same number in every row) and the index of the right one
(``label``) — or SWAG's columns, which transformers' run_swag reads: ``sent1`` (the context), ``sent2`` (the start
of every ending), ``ending0`` … ``ending3`` and ``label``. BERT/Longformer score ``[CLS] context [SEP] ending [SEP]``
per choice at [CLS]; GPT uses GPT-1's transformation ``[<s>; context; $; ending; ⟨e⟩]`` scored at the extract
token (``ScratchGPTForMultipleChoice``, the head ``AutoModelForMultipleChoice`` gives), or with ``--lm_labels``
``ScratchGPTDoubleHeadsModel``, which adds the auxiliary language-modelling loss on the same text (GPT-1 §3.2).
Without data arguments it picks the line that follows a line of Shakespeare among four
(``training/data/next_line``). Reports accuracy.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from transformers import (
    AutoModelForMultipleChoice,
    DataCollatorForMultipleChoice,
    EvalPrediction,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    TrainerCallback,
    TrainingArguments,
)

from hf_scratch import ScratchBertConfig, ScratchGPTConfig, ScratchLongformerConfig
from hf_scratch.tools.trainer import ScratchTrainer
from training.arguments import DataArguments, ModelArguments, check_model_type, parse_arguments, run_script
from training.common import (
    Collator,
    DatasetSplits,
    column_names,
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

if TYPE_CHECKING:
    import torch

    from hf_scratch.tools.gpt_input_transforms import GPTTaskInputs

SUPPORTED = tuple(config.model_type for config in (ScratchBertConfig, ScratchGPTConfig, ScratchLongformerConfig))


@dataclass
class MultipleChoiceArguments:
    context_column: str | None = field(
        default=None,
        metadata={
            "help": "Column holding the context (default: 'context', or SWAG's 'sent1' as in transformers' run_swag)."
        },
    )
    endings_column: str | None = field(
        default=None,
        metadata={
            "help": "Column holding the list of candidate endings (default: 'endings', or SWAG's 'sent2' + 'ending0'…)."
        },
    )
    label_column: str = field(default="label", metadata={"help": "Column holding the index of the right ending."})
    lm_labels: bool = field(
        default=False, metadata={"help": "GPT: add the auxiliary language-modelling loss (GPT-1 §3.2)."}
    )


class GPTMultipleChoiceCollator:
    """Frames every (context, ending) with GPT-1's transformation at batch time and adds the labels: the right
    ending's index as ``labels`` for ``ScratchGPTForMultipleChoice``, or — with ``--lm_labels`` — as ``mc_labels``
    beside the language-modelling ``labels`` for ``ScratchGPTDoubleHeadsModel``."""

    def __init__(self, task_inputs: GPTTaskInputs, args: MultipleChoiceArguments) -> None:
        self.task_inputs, self.args = task_inputs, args

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        from hf_scratch.tools.gpt_input_transforms import language_modeling_labels

        context, endings = choice_columns(self.args)
        batch = self.task_inputs.multiple_choice([f[context] for f in features], [f[endings] for f in features])
        choices = torch.tensor([f["labels"] for f in features], dtype=torch.long)
        if not self.args.lm_labels:  # the standard contract: the extract token is found from the attention mask
            del batch["mc_token_ids"]
            return {**batch, "labels": choices}
        return {**batch, "mc_labels": choices, "labels": language_modeling_labels(batch)}


def choice_logits(logits: torch.Tensor | tuple[torch.Tensor, ...], labels: torch.Tensor | None) -> torch.Tensor:
    """Keep the (batch, choices) scores: the logits of a multiple-choice head, or the double heads' mc_logits
    beside their LM logits."""
    return logits if not isinstance(logits, tuple) else next(t for t in logits if t.ndim == 2)


SWAG_ENDINGS = re.compile(r"ending(\d+)$")


def with_context_and_endings(raw: DatasetSplits, mc_args: MultipleChoiceArguments) -> DatasetSplits:
    """The data with a context column and a column of endings. Without --context_column / --endings_column: rows in
    SWAG's layout (transformers' run_swag: ``sent1``, ``sent2``, ``ending0``…) become ``context`` = sent1 and
    ``endings`` = [sent2 + " " + ending_i]; other data keeps ``context`` / ``endings``."""
    names = column_names(raw["train"])
    endings = sorted((int(m.group(1)), name) for name in names if (m := SWAG_ENDINGS.match(name)))
    if (
        mc_args.context_column is None
        and mc_args.endings_column is None
        and {"sent1", "sent2"} <= set(names)
        and endings
    ):
        ending_names = [name for _, name in endings]

        def swag(row: dict[str, str]) -> dict[str, Any]:
            return {"context": row["sent1"], "endings": [f"{row['sent2']} {row[name]}" for name in ending_names]}

        raw = raw.map(swag, remove_columns=["sent1", "sent2", *ending_names])
    mc_args.context_column = mc_args.context_column or "context"
    mc_args.endings_column = mc_args.endings_column or "endings"
    return raw


def choice_columns(mc_args: MultipleChoiceArguments) -> tuple[str, str]:
    """The context and endings columns, once ``with_context_and_endings`` has named them."""
    assert mc_args.context_column is not None and mc_args.endings_column is not None  # with_context_and_endings
    return mc_args.context_column, mc_args.endings_column


def load_choice_data(
    model_args: ModelArguments, data_args: DataArguments, mc_args: MultipleChoiceArguments
) -> tuple[DatasetSplits, int]:
    """The raw splits with a context, a list of endings and integer ``labels``; the number of endings per row."""
    raw = load_raw_datasets(model_args, data_args, "next_line")
    raw = with_context_and_endings(raw, mc_args)
    context, endings = choice_columns(mc_args)
    require_columns(
        raw,
        [context, endings, mc_args.label_column],
        "multiple choice",
        {context: "context_column", endings: "endings_column", mc_args.label_column: "label_column"},
    )
    counts = {len(e) for split in raw.values() for e in split[endings]}
    if len(counts) != 1 or 0 in counts:
        raise ValueError(f"Every row needs the same, non-zero number of endings; found {sorted(counts)}.")
    num_choices = counts.pop()
    bad = [
        label for split in raw.values() for label in split[mc_args.label_column] if not 0 <= int(label) < num_choices
    ]
    if bad:
        raise ValueError(f"Labels must index the {num_choices} endings (0…{num_choices - 1}); found {bad[:5]}.")
    raw = raw.map(lambda row: {"labels": int(row[mc_args.label_column])})
    return raw, num_choices


def gpt_model_data_collator(
    model_args: ModelArguments,
    data_args: DataArguments,
    mc_args: MultipleChoiceArguments,
    training_args: TrainingArguments,
    raw: DatasetSplits,
    tokenizer: PreTrainedTokenizerBase,
) -> tuple[PreTrainedModel, DatasetSplits, Collator]:
    """GPT: the model (with double heads under --lm_labels), the untokenized data and a GPT-1 framing collator."""
    from hf_scratch import ScratchGPTDoubleHeadsModel
    from hf_scratch.tools.gpt_input_transforms import GPTTaskInputs

    task_inputs = GPTTaskInputs(tokenizer, max_length=data_args.max_seq_length)  # adds ⟨s⟩ $ ⟨e⟩ to the vocabulary
    model = create_model(
        model_args, ScratchGPTDoubleHeadsModel if mc_args.lm_labels else AutoModelForMultipleChoice, tokenizer
    )
    model.resize_token_embeddings(len(tokenizer))
    training_args.remove_unused_columns = False
    training_args.label_names = ["mc_labels"] if mc_args.lm_labels else ["labels"]
    data = raw.select_columns([mc_args.context_column, mc_args.endings_column, "labels"])
    return model, data, GPTMultipleChoiceCollator(task_inputs, mc_args)


def encoder_model_data_collator(
    model_args: ModelArguments,
    data_args: DataArguments,
    mc_args: MultipleChoiceArguments,
    training_args: TrainingArguments,
    raw: DatasetSplits,
    tokenizer: PreTrainedTokenizerBase,
    num_choices: int,
) -> tuple[PreTrainedModel, DatasetSplits, Collator]:
    """BERT / Longformer: the model, every (context, ending) pair tokenized, grouped per row, and a padding collator."""
    model = create_model(model_args, AutoModelForMultipleChoice, tokenizer)
    context, endings_column = choice_columns(mc_args)

    def tokenize(batch: dict[str, list[Any]]) -> dict[str, list[list[list[int]]]]:
        firsts = [c for c in batch[context] for _ in range(num_choices)]
        seconds = [e for endings in batch[endings_column] for e in endings]
        encoded = tokenizer(firsts, seconds, truncation=True, max_length=data_args.max_seq_length)
        return {k: [v[i : i + num_choices] for i in range(0, len(v), num_choices)] for k, v in encoded.items()}

    with training_args.main_process_first(desc="tokenizing"):
        data = raw.map(
            tokenize,
            batched=True,
            remove_columns=[c for c in raw["train"].column_names if c != "labels"],
            **map_options(data_args, "tokenizing"),
        )
    return model, data, DataCollatorForMultipleChoice(tokenizer)


def accuracy_metric() -> Callable[[EvalPrediction], dict[str, float]]:
    metric = load_metric("accuracy_f1")

    def compute_metrics(eval_prediction: EvalPrediction) -> dict[str, float]:
        scores = metric.compute(
            predictions=np.argmax(eval_prediction.predictions, -1), references=eval_prediction.label_ids
        )
        return {"accuracy": scores["accuracy"]}

    return compute_metrics


def multiple_choice_card(data_args: DataArguments, is_gpt: bool) -> CardInfo:
    return CardInfo(
        task="multiple choice",
        pipeline_tag="multiple-choice",
        dataset=describe_data(data_args, "next_line"),
        metric_names=["accuracy"],
        usage="Score every (context, ending) pair with the model and take the argmax over the choices"
        + (
            " (GPT: frame them with `hf_scratch.tools.gpt_input_transforms.GPTTaskInputs.multiple_choice`)."
            if is_gpt
            else "."
        ),
    )


def main(args: list[str] | None = None, callbacks: list[TrainerCallback] | None = None) -> dict[str, Any]:
    model_args, data_args, mc_args, training_args = parse_arguments(
        "run_multiple_choice", (MultipleChoiceArguments,), args, doc=__doc__, supported=SUPPORTED
    )
    is_gpt = check_model_type(model_args, SUPPORTED) == ScratchGPTConfig.model_type
    raw, num_choices = load_choice_data(model_args, data_args, mc_args)
    texts = lambda: (t for row in raw["train"] for t in [row[mc_args.context_column], *row[mc_args.endings_column]])  # noqa: E731
    tokenizer = get_tokenizer(model_args, texts, needs_padding=True)
    if is_gpt:
        model, data, collator = gpt_model_data_collator(model_args, data_args, mc_args, training_args, raw, tokenizer)
    else:
        model, data, collator = encoder_model_data_collator(
            model_args, data_args, mc_args, training_args, raw, tokenizer, num_choices
        )
    trainer = ScratchTrainer(
        model=model,
        args=training_args,
        train_dataset=data["train"],
        eval_dataset=data["validation"],
        processing_class=tokenizer,
        data_collator=collator,
        compute_metrics=accuracy_metric(),
        preprocess_logits_for_metrics=choice_logits,
        callbacks=callbacks,
    )
    return train_evaluate_save(trainer, model_args, data_args, training_args, multiple_choice_card(data_args, is_gpt))


if __name__ == "__main__":
    run_script(main)

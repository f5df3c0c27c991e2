"""Translation with the encoder-decoder Transformer (or the RNN baselines) and the 🤗 Seq2SeqTrainer, in the
style of transformers' run_translation.py; BLEU with sacreBLEU through `evaluate`.

    python training/run_translation.py --model_type scratch-transformer --max_steps 500 --output_dir out/de-en
    python training/run_translation.py --model_type scratch-rnn --source_lang en --target_lang de
    python training/run_translation.py --model_name_or_path path/to/marian-checkpoint --train_file pairs.jsonl

Rows are ``{"translation": {"de": …, "en": …}}`` (the transformers examples' format). One tokenizer is trained on
both languages (shared vocabulary, ``</s>`` closes every sequence); labels are the target ids, the model builds its
decoder inputs by shifting them right behind the start token. Evaluation generates (greedy, or beam search with
``--generation_num_beams``) and scores corpus BLEU. Without data arguments it translates short German software
messages into English (``training/data/de_en``). Sources are truncated to ``--max_seq_length`` (alias
``--max_source_length``, transformers' name) tokens, targets to ``--max_target_length``.
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
    AutoModelForSeq2SeqLM,
    BatchEncoding,
    DataCollatorForSeq2Seq,
    EvalPrediction,
    PreTrainedTokenizerBase,
    Seq2SeqTrainingArguments,
    TrainerCallback,
    TrainingArguments,
)

from hf_scratch import ScratchRNNConfig, ScratchTransformerConfig
from hf_scratch.tools.trainer import ScratchSeq2SeqTrainer
from training.arguments import DataArguments, ModelArguments, check_model_type, parse_arguments, run_script
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
SUPPORTED = tuple(config.model_type for config in (ScratchTransformerConfig, ScratchRNNConfig))


@dataclass
class TranslationArguments:
    source_lang: str = field(default="de", metadata={"help": "Source language key inside the translation column."})
    target_lang: str = field(default="en", metadata={"help": "Target language key inside the translation column."})
    translation_column: str = field(default="translation", metadata={"help": "Column holding {lang: text} pairs."})
    max_target_length: int = field(default=64, metadata={"help": "Maximum target tokens (labels and generation)."})


def load_translation_pairs(
    model_args: ModelArguments, data_args: DataArguments, tr_args: TranslationArguments
) -> DatasetSplits:
    """The raw splits, once their translation column is checked to hold both --source_lang and --target_lang."""
    raw = load_raw_datasets(model_args, data_args, "de_en")
    require_columns(raw, [tr_args.translation_column], "translation")
    source, target = tr_args.source_lang, tr_args.target_lang
    languages = set(raw["train"][0][tr_args.translation_column])
    if not {source, target} <= languages:
        raise ValueError(
            f"--source_lang {source!r} / --target_lang {target!r}: the data has languages {sorted(languages)}."
        )
    return raw


def tokenize_pairs(
    raw: DatasetSplits,
    tokenizer: PreTrainedTokenizerBase,
    data_args: DataArguments,
    tr_args: TranslationArguments,
    training_args: TrainingArguments,
) -> DatasetSplits:
    """Tokenized sources with the tokenized targets as ``labels``."""
    source, target = tr_args.source_lang, tr_args.target_lang

    def tokenize(batch: dict[str, list[dict[str, str]]]) -> BatchEncoding:
        sources = [p[source] for p in batch[tr_args.translation_column]]
        targets = [p[target] for p in batch[tr_args.translation_column]]
        encoded = tokenizer(sources, truncation=True, max_length=data_args.max_seq_length)
        encoded["labels"] = tokenizer(text_target=targets, truncation=True, max_length=tr_args.max_target_length)[
            "input_ids"
        ]
        return encoded

    with training_args.main_process_first(desc="tokenizing"):
        return raw.map(
            tokenize, batched=True, remove_columns=raw["train"].column_names, **map_options(data_args, "tokenizing")
        )


def bleu_metrics(tokenizer: PreTrainedTokenizerBase) -> Callable[[EvalPrediction], dict[str, float]]:
    metric = load_metric("sacrebleu")

    def compute_metrics(eval_prediction: EvalPrediction) -> dict[str, float]:
        predictions, labels = np.asarray(eval_prediction.predictions), np.asarray(eval_prediction.label_ids)
        predictions = np.where(predictions < 0, tokenizer.pad_token_id, predictions)
        labels = np.where(labels == -100, tokenizer.pad_token_id, labels)
        hypotheses = [t.strip() for t in tokenizer.batch_decode(predictions, skip_special_tokens=True)]
        references = [[t.strip()] for t in tokenizer.batch_decode(labels, skip_special_tokens=True)]
        result = metric.compute(predictions=hypotheses, references=references)
        gen_len = float(np.mean([np.count_nonzero(p != tokenizer.pad_token_id) for p in predictions]))
        return {"bleu": result["score"], "gen_len": gen_len}

    return compute_metrics


def translation_card(data_args: DataArguments, tr_args: TranslationArguments) -> CardInfo:
    return CardInfo(
        task=f"translation {tr_args.source_lang}→{tr_args.target_lang}",
        pipeline_tag="translation",
        dataset=describe_data(data_args, "de_en"),
        metric_names=["bleu"],
        usage='```python\nimport hf_scratch  # registers the "scratch-seq2seq" pipeline\n'
        "from transformers import pipeline\n"
        'translate = pipeline("scratch-seq2seq", model=model, tokenizer=tokenizer)\n'
        'print(translate("Datei nicht gefunden"))\n```',
    )


def main(args: list[str] | None = None, callbacks: list[TrainerCallback] | None = None) -> dict[str, Any]:
    model_args, data_args, tr_args, training_args = parse_arguments(
        "run_translation",
        (TranslationArguments,),
        args,
        training_class=Seq2SeqTrainingArguments,
        aliases={"max_source_length": "max_seq_length"},
        doc=__doc__,
        supported=SUPPORTED,
    )
    if tr_args.max_target_length <= 0:
        raise ValueError(f"--max_target_length must be positive, got {tr_args.max_target_length}.")
    check_model_type(model_args, SUPPORTED)
    raw = load_translation_pairs(model_args, data_args, tr_args)
    source, target = tr_args.source_lang, tr_args.target_lang
    pairs = lambda split: raw[split][tr_args.translation_column]  # noqa: E731
    tokenizer = get_tokenizer(
        model_args, lambda: (p[lang] for p in pairs("train") for lang in (source, target)), needs_padding=True
    )
    model = create_model(model_args, AutoModelForSeq2SeqLM, tokenizer)
    model.generation_config.max_length = training_args.generation_max_length
    data = tokenize_pairs(raw, tokenizer, data_args, tr_args, training_args)
    trainer = ScratchSeq2SeqTrainer(
        model=model,
        args=training_args,
        train_dataset=data["train"],
        eval_dataset=data["validation"],
        processing_class=tokenizer,
        data_collator=DataCollatorForSeq2Seq(tokenizer, model=model),
        compute_metrics=bleu_metrics(tokenizer),
        callbacks=callbacks,
    )
    return train_evaluate_save(trainer, model_args, data_args, training_args, translation_card(data_args, tr_args))


if __name__ == "__main__":
    run_script(main)

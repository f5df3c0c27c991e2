"""BERT pre-training — masked LM + next-sentence prediction (Devlin et al. 2019 §3.1) — with the 🤗 Trainer.

    python training/run_pretraining.py --model_type scratch-bert --model_size tiny --max_steps 200 --output_dir out/pt
    python training/run_pretraining.py --model_type scratch-bert --train_file corpus.txt

Data is document-level text: in a txt file documents are separated by a line ``=====`` (or by two blank lines);
in csv/json data each row of ``--text_column`` is a document. Sentence pairs come from
``hf_scratch.tools.pretraining.make_nsp_examples`` (about half IsNext, the rest sentences of another document) and are
masked by ``DataCollatorForBertPreTraining``. Without data arguments it trains on the embedded play excerpts in
``training/data/documents``. Reports masked-token and next-sentence accuracy (eval_loss is MLM + NSP).

``--next_sentence_prediction false`` is Devlin et al. 2019 §5.1 / Table 5's "No NSP" ablation: the same sentence
pairs (half of them with a random B, the input format kept, as Liu et al. 2019 §4.2 read the original ablation), the
same masking, but no NSP task: the model is a masked LM alone (``AutoModelForMaskedLM``, no NSP head, no pooler),
``next_sentence_label`` is dropped, eval_loss is the MLM loss and only masked-token accuracy is reported.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import datasets
import numpy as np
from transformers import (
    AutoModelForMaskedLM,
    AutoModelForPreTraining,
    DataCollatorForLanguageModeling,
    EvalPrediction,
    PreTrainedTokenizerBase,
    TrainerCallback,
)

from hf_scratch import ScratchBertConfig
from hf_scratch.tools.pretraining import DataCollatorForBertPreTraining, make_nsp_examples, split_documents
from hf_scratch.tools.trainer import ScratchTrainer
from training.arguments import DataArguments, check_model_type, parse_arguments, run_script
from training.common import (
    choose_column,
    create_model,
    describe_data,
    get_tokenizer,
    limit_samples,
    load_raw_datasets,
    require_columns,
    train_evaluate_save,
)
from training.model_card import CardInfo

if TYPE_CHECKING:
    import torch

# the families this script trains
SUPPORTED = tuple(config.model_type for config in (ScratchBertConfig,))


@dataclass
class PretrainingArguments:
    text_column: str | None = field(
        default=None, metadata={"help": "Column holding the documents (default: 'text', else the first column)."}
    )
    mlm_probability: float = field(default=0.15, metadata={"help": "Fraction of tokens to mask."})
    short_seq_prob: float = field(
        default=0.1, metadata={"help": "Probability of a shorter target length (as in BERT)."}
    )
    next_sentence_prediction: bool = field(
        default=True,
        metadata={
            "help": "Train the next-sentence task beside masked LM; false: masked LM only on the same sentence "
            "pairs (Devlin et al. 2019 Table 5, 'No NSP')."
        },
    )


def documents_of(dataset: datasets.Dataset, text_column: str, from_txt: bool) -> list[str]:
    texts = dataset[text_column]
    return (
        [doc for text in texts for doc in split_documents(text)] if from_txt else [t for t in texts if t and t.strip()]
    )


def predicted_ids(
    logits: torch.Tensor | tuple[torch.Tensor, ...], labels: torch.Tensor | tuple[torch.Tensor, ...]
) -> torch.Tensor | tuple[torch.Tensor, ...]:
    """Keep only the argmax of each head, MLM (and NSP when trained): the full MLM logits would fill memory."""
    return tuple(head.argmax(-1) for head in logits) if isinstance(logits, tuple) else logits.argmax(-1)


def pretraining_accuracy(eval_prediction: EvalPrediction) -> dict[str, float]:
    """Masked-token accuracy over the masked positions, and next-sentence accuracy when NSP is trained."""
    predictions, labels = eval_prediction.predictions, eval_prediction.label_ids
    heads = predictions if isinstance(predictions, tuple) else (predictions,)  # MLM, and NSP when trained
    targets = labels if isinstance(labels, tuple) else (labels,)
    masked = targets[0] != -100
    metrics = {"mlm_accuracy": float(np.mean(heads[0][masked] == targets[0][masked])) if masked.any() else 0.0}
    if len(heads) > 1:
        metrics["nsp_accuracy"] = float(np.mean(heads[1] == targets[1]))
    return metrics


def sentence_pairs(
    documents: dict[str, list[str]],
    tokenizer: PreTrainedTokenizerBase,
    data_args: DataArguments,
    pt_args: PretrainingArguments,
    seed: int,
) -> datasets.DatasetDict:
    """BERT's examples (``make_nsp_examples``: sentence pairs, half of them with a random second segment) of each
    split's documents, limited to --max_*_samples; without next-sentence prediction, the pairs without its label."""
    examples = {
        split: make_nsp_examples(
            docs, tokenizer, data_args.max_seq_length, seed=seed, short_seq_prob=pt_args.short_seq_prob
        )
        for split, docs in documents.items()
    }
    data = limit_samples(
        datasets.DatasetDict({split: datasets.Dataset.from_list(rows) for split, rows in examples.items()}), data_args
    )
    return data if pt_args.next_sentence_prediction else data.remove_columns("next_sentence_label")


def pretraining_card(data_args: DataArguments, tokenizer: PreTrainedTokenizerBase, nsp: bool) -> CardInfo:
    return CardInfo(
        task="pre-training (masked LM + next-sentence prediction)"
        if nsp
        else "pre-training (masked LM on sentence pairs, no NSP)",
        pipeline_tag="fill-mask",
        dataset=describe_data(data_args, "documents"),
        metric_names=["mlm_accuracy", "nsp_accuracy"] if nsp else ["mlm_accuracy"],
        usage="```python\nfrom transformers import AutoModelForMaskedLM, pipeline\n"
        'mlm = AutoModelForMaskedLM.from_pretrained("...", trust_remote_code=True)\n'
        f'print(pipeline("fill-mask", model=mlm, tokenizer=tokenizer)("to be or not to {tokenizer.mask_token}"))\n```',
    )


def main(args: list[str] | None = None, callbacks: list[TrainerCallback] | None = None) -> dict[str, Any]:
    model_args, data_args, pt_args, training_args = parse_arguments(
        "run_pretraining", (PretrainingArguments,), args, doc=__doc__, supported=SUPPORTED
    )
    check_model_type(model_args, SUPPORTED)
    raw = load_raw_datasets(model_args, data_args, "documents", text_sample_by="document", limit=False)
    text_column = choose_column(raw, pt_args.text_column, ["text"], "text_column", "document", position=0)
    require_columns(raw, [text_column], "pre-training", {text_column: "text_column"})
    from_txt = raw["train"].info.builder_name == "text" if raw["train"].info else False
    documents = {split: documents_of(raw[split], text_column, from_txt) for split in raw}
    tokenizer = get_tokenizer(model_args, lambda: documents["train"])
    nsp = pt_args.next_sentence_prediction
    model = create_model(model_args, AutoModelForPreTraining if nsp else AutoModelForMaskedLM, tokenizer)
    data = sentence_pairs(documents, tokenizer, data_args, pt_args, seed=training_args.seed)
    training_args.label_names = ["labels", "next_sentence_label"] if nsp else ["labels"]
    collator = DataCollatorForBertPreTraining if nsp else DataCollatorForLanguageModeling
    trainer = ScratchTrainer(
        model=model,
        args=training_args,
        train_dataset=data["train"],
        eval_dataset=data["validation"],
        processing_class=tokenizer,
        data_collator=collator(tokenizer, mlm_probability=pt_args.mlm_probability),
        compute_metrics=pretraining_accuracy,
        preprocess_logits_for_metrics=predicted_ids,
        callbacks=callbacks,
    )
    card = pretraining_card(data_args, tokenizer, nsp)
    return train_evaluate_save(trainer, model_args, data_args, training_args, card)


if __name__ == "__main__":
    run_script(main)

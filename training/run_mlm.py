"""Masked language modelling (BERT, Longformer) with the 🤗 Trainer, in the style of transformers' run_mlm.py.

    python training/run_mlm.py --model_type scratch-bert --model_size tiny --max_steps 200 --output_dir out/mlm
    python training/run_mlm.py --model_name_or_path path/to/bert-checkpoint --train_file my.txt

Text is tokenized and concatenated into blocks of ``--max_seq_length`` (alias ``--block_size``) tokens (or one
example per line with ``--line_by_line``); 15 % of tokens are masked by ``DataCollatorForLanguageModeling``.
Without data arguments it trains on the embedded Shakespeare excerpt in ``training/data/shakespeare``. Reports
perplexity.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from transformers import AutoModelForMaskedLM, DataCollatorForLanguageModeling, TrainerCallback

from hf_scratch import ScratchBertConfig, ScratchLongformerConfig
from hf_scratch.tools.trainer import ScratchTrainer
from training.arguments import check_model_type, parse_arguments, run_script
from training.common import (
    choose_column,
    create_model,
    describe_data,
    get_tokenizer,
    load_raw_datasets,
    require_columns,
    tokenize_text_blocks,
    train_evaluate_save,
)
from training.model_card import CardInfo

# the families this script trains
SUPPORTED = tuple(config.model_type for config in (ScratchBertConfig, ScratchLongformerConfig))


@dataclass
class MLMArguments:
    text_column: str | None = field(
        default=None,
        metadata={
            "help": "Column holding the text (default: 'text', else the first column, as transformers' run_mlm)."
        },
    )
    mlm_probability: float = field(default=0.15, metadata={"help": "Fraction of tokens to mask."})
    line_by_line: bool = field(default=False, metadata={"help": "One example per line instead of concatenated blocks."})


def main(args: list[str] | None = None, callbacks: list[TrainerCallback] | None = None) -> dict[str, Any]:
    model_args, data_args, mlm_args, training_args = parse_arguments(
        "run_mlm", (MLMArguments,), args, aliases={"block_size": "max_seq_length"}, doc=__doc__, supported=SUPPORTED
    )
    check_model_type(model_args, SUPPORTED)
    if not 0.0 < mlm_args.mlm_probability < 1.0:
        raise ValueError(f"--mlm_probability must be in (0, 1), got {mlm_args.mlm_probability}.")
    raw = load_raw_datasets(model_args, data_args, "shakespeare", limit=False, can_stream=True)
    text_column = choose_column(raw, mlm_args.text_column, ["text"], "text_column", "text", position=0)
    require_columns(raw, [text_column], "masked language modelling", {text_column: "text_column"})
    tokenizer = get_tokenizer(model_args, lambda: raw["train"][text_column])
    model = create_model(model_args, AutoModelForMaskedLM, tokenizer)
    data = tokenize_text_blocks(
        raw, tokenizer, text_column, data_args, mlm_args.line_by_line, training_args, special_tokens=True
    )
    trainer = ScratchTrainer(
        model=model,
        args=training_args,
        train_dataset=data["train"],
        eval_dataset=data["validation"],
        processing_class=tokenizer,
        data_collator=DataCollatorForLanguageModeling(tokenizer, mlm_probability=mlm_args.mlm_probability),
        callbacks=callbacks,
    )
    card = CardInfo(
        task="masked language modelling",
        pipeline_tag="fill-mask",
        dataset=describe_data(data_args, "shakespeare"),
        metric_names=["perplexity"],
        usage="```python\nfrom transformers import pipeline\n"
        'fill = pipeline("fill-mask", model=model, tokenizer=tokenizer)\n'
        f'print(fill("to be or not to {tokenizer.mask_token}"))\n```',
    )
    return train_evaluate_save(trainer, model_args, data_args, training_args, card)


if __name__ == "__main__":
    run_script(main)

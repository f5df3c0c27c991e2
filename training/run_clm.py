"""Causal language modelling (GPT; Transformer-XL with its memory) with the 🤗 Trainer, in the style of
transformers' run_clm.py.

    python training/run_clm.py --model_type scratch-gpt --model_size tiny --max_steps 200 --output_dir out/clm
    python training/run_clm.py --model_type scratch-gpt --tokenizer_type char --max_seq_length 256   # nanoGPT setting
    python training/run_clm.py --model_type scratch-transfo-xl --max_seq_length 64                  # with memory

Text is tokenized (byte-level BPE by default, one token per character with ``--tokenizer_type char``),
concatenated and cut into blocks of ``--max_seq_length`` (alias ``--block_size``) tokens; labels are the inputs
(the model shifts them).
Transformer-XL trains through ``hf_scratch.tools.training_transfo_xl.TransfoXLTrainer``: batches stream the corpus in
order so that row i of batch k+1 continues row i of batch k, the memory is carried between steps and saved in every
checkpoint (resume continues exactly), and evaluation runs with memory.
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

from transformers import AutoModelForCausalLM, TrainerCallback, default_data_collator

from hf_scratch import ScratchGPTConfig, ScratchTransfoXLConfig
from hf_scratch.tools.trainer import ScratchTrainer
from training.arguments import check_model_type, parse_arguments, run_script
from training.common import (
    choose_column,
    create_model,
    describe_data,
    get_tokenizer,
    load_raw_datasets,
    map_options,
    require_columns,
    tokenize_text_blocks,
    train_evaluate_save,
)
from training.model_card import CardInfo

# the families this script trains
SUPPORTED = tuple(config.model_type for config in (ScratchGPTConfig, ScratchTransfoXLConfig))


@dataclass
class CLMArguments:
    text_column: str | None = field(
        default=None,
        metadata={
            "help": "Column holding the text (default: 'text', else the first column, as transformers' run_clm)."
        },
    )


def main(args: list[str] | None = None, callbacks: list[TrainerCallback] | None = None) -> dict[str, Any]:
    model_args, data_args, clm_args, training_args = parse_arguments(
        "run_clm", (CLMArguments,), args, aliases={"block_size": "max_seq_length"}, doc=__doc__, supported=SUPPORTED
    )
    if check_model_type(model_args, SUPPORTED) == ScratchTransfoXLConfig.model_type and data_args.streaming:
        raise ValueError(
            "--streaming: Transformer-XL's trainer lays the whole corpus out in parallel streams to carry its memory; "
            "drop --streaming (GPT streams)."
        )
    raw = load_raw_datasets(model_args, data_args, "shakespeare", limit=False, can_stream=True)
    text_column = choose_column(raw, clm_args.text_column, ["text"], "text_column", "text", position=0)
    require_columns(raw, [text_column], "causal language modelling", {text_column: "text_column"})
    tokenizer = get_tokenizer(model_args, lambda: raw["train"][text_column])
    model = create_model(model_args, AutoModelForCausalLM, tokenizer)
    data = tokenize_text_blocks(
        raw, tokenizer, text_column, data_args, line_by_line=False, training_args=training_args, special_tokens=False
    )
    data = data.map(lambda batch: {"labels": batch["input_ids"]}, batched=True, **map_options(data_args, "labels"))
    trainer_class = ScratchTrainer
    if model.config.model_type == ScratchTransfoXLConfig.model_type:
        # blocks are in corpus order; the XL trainer streams them, carries `mems` and checkpoints them
        from hf_scratch.tools.training_transfo_xl import TransfoXLTrainer as trainer_class
    trainer = trainer_class(
        model=model,
        args=training_args,
        train_dataset=data["train"],
        eval_dataset=data["validation"],
        processing_class=tokenizer,
        data_collator=default_data_collator,
        callbacks=callbacks,
    )
    card = CardInfo(
        task="causal language modelling",
        pipeline_tag="text-generation",
        dataset=describe_data(data_args, "shakespeare"),
        metric_names=["perplexity"],
        usage="```python\nfrom transformers import pipeline\n"
        'generate = pipeline("text-generation", model=model, tokenizer=tokenizer)\n'
        'print(generate("To be, or not to be", max_new_tokens=40)[0]["generated_text"])\n```',
    )
    return train_evaluate_save(trainer, model_args, data_args, training_args, card)


if __name__ == "__main__":
    run_script(main)

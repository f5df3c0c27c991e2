"""torch.compile (Inductor) vs eager: training-step time of every family at the small configuration.

hidden 256, 4 layers, 4 heads, FFN 1024, vocabulary 8,000, batch 8 × 128, dropout 0 (the RNN: one 256-unit LSTM
layer per side with Bahdanau attention; Transformer-XL: memory 128). The compiled model is checked against the eager
one (same weights, same loss) before timing; the compile time is reported apart.

    python benchmarks/bench_compile.py [--only bert gpt] [--repeats 5]
"""

from __future__ import annotations

import argparse
import copy
import time

import torch
from common import bar_plot, compare, in_repo_path, ratio_row, setup_threads, train_step_fn, write_table

in_repo_path()

import hf_scratch  # noqa: E402

VOCAB, HIDDEN, LAYERS, HEADS, FFN, BATCH, LENGTH = 8000, 256, 4, 4, 1024, 8, 128
NO_DROPOUT = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
ENCODER = dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
               intermediate_size=FFN, **NO_DROPOUT)

MODELS = {
    "bert": lambda: hf_scratch.ScratchBertForMaskedLM(hf_scratch.ScratchBertConfig(**ENCODER)),
    "gpt": lambda: hf_scratch.ScratchGPTLMHeadModel(
        hf_scratch.ScratchGPTConfig(**ENCODER, embedding_dropout_prob=0.0, layer_norm_placement="pre")),
    "transformer": lambda: hf_scratch.ScratchTransformerForConditionalGeneration(hf_scratch.ScratchTransformerConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, encoder_layers=LAYERS, decoder_layers=LAYERS, encoder_attention_heads=HEADS,
        decoder_attention_heads=HEADS, encoder_ffn_dim=FFN, decoder_ffn_dim=FFN, **NO_DROPOUT)),
    "longformer": lambda: hf_scratch.ScratchLongformerForMaskedLM(hf_scratch.ScratchLongformerConfig(
        **ENCODER, attention_window=32, max_position_embeddings=LENGTH + 2)),
    "transfo_xl": lambda: hf_scratch.ScratchTransfoXLLMHeadModel(hf_scratch.ScratchTransfoXLConfig(
        vocab_size=VOCAB, cutoffs=[2000, 4000], hidden_size=HIDDEN, embedding_size=HIDDEN, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, head_dim=HIDDEN // HEADS, intermediate_size=FFN, mem_len=LENGTH, **NO_DROPOUT)),
    "rnn": lambda: hf_scratch.ScratchRNNForConditionalGeneration(hf_scratch.ScratchRNNConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, hidden_dropout_prob=0.0)),
}


def inputs_for(name: str) -> dict:
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(5, VOCAB, (BATCH, LENGTH), generator=generator)
    inputs = {"input_ids": ids, "labels": ids}
    if name in ("bert", "gpt", "transformer", "longformer", "rnn"):
        inputs["attention_mask"] = torch.ones_like(ids)
    if name in ("transformer", "rnn"):
        inputs["labels"] = torch.randint(5, VOCAB, (BATCH, LENGTH), generator=generator)
    return inputs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=sorted(MODELS), default=[n for n in MODELS])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    threads = setup_threads()
    rows = []
    for name in args.only:
        torch.manual_seed(0)
        eager = MODELS[name]()
        compiled_model = copy.deepcopy(eager)
        inputs = inputs_for(name)
        torch._dynamo.reset()
        compiled = torch.compile(compiled_model)
        start = time.perf_counter()
        with torch.no_grad():  # compile the forward graph and check it before timing
            difference = (compiled(**inputs).loss - eager(**inputs).loss).abs().item()
        if difference > 1e-3:
            raise RuntimeError(f"{name}: compiled loss differs from eager by {difference:.2e}")
        compiled_step = train_step_fn(compiled, inputs)
        compiled_step()  # compiles the training graphs (forward + backward)
        compile_seconds = time.perf_counter() - start
        times = compare({"compiled": compiled_step, "eager": train_step_fn(eager, inputs)}, warmup=1, repeats=args.repeats)
        row = ratio_row(name, times["compiled"], times["eager"], compile_s=round(compile_seconds))
        row = {("compiled (ms)" if k == "ours (ms)" else "eager (ms)" if k == "transformers (ms)" else k): v
               for k, v in row.items()}
        rows.append(row)
        print(row, flush=True)
    notes = [
        f"training step (forward + backward + AdamW), batch {BATCH} × {LENGTH}, {threads} thread(s), Inductor "
        "(torch.compile default); speed-up = eager median / compiled median; compile_s = first compiled step.",
        "compiled and eager start from the same weights; the compiled loss is checked against eager before timing.",
    ]
    write_table("compile", "torch.compile vs eager, training step (hf_scratch models)", rows, notes)
    bar_plot("compile", rows, ylabel="speed-up (eager / compiled)", title="torch.compile training step")


if __name__ == "__main__":
    main()

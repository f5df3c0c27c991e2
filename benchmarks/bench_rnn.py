"""The RNN baselines against the Transformer: the claim of Vaswani et al. 2017 (§4, Table 1: a recurrent layer needs
O(n) sequential operations, self-attention O(1)), measured — RNNs read one token after another, Transformers all at
once — and what that buys in translation quality for the same training time.

1. Training throughput (tokens/s, source + target tokens per second of forward + backward + AdamW) of an LSTM
   seq2seq (bidirectional LSTM encoder, LSTM decoder with additive attention: the model of Bahdanau et al. 2015,
   §3, with LSTM cells; and Luong et al. 2015's "general" attention, whose decoder recurrence runs as one fused call)
   against the encoder-decoder Transformer (``ScratchTransformerForConditionalGeneration``) at equal parameter count,
   for source = target lengths 32 … 512.
   The models are timed round-robin in one process (``common.compare``), so a slow phase of the shared machine hits
   all of them alike; the table reports the Transformer's throughput over each RNN's.
2. BLEU on ``../shared/data/gettext-de-en`` (German→English) after the same wall-clock training time for each model
   (the Trainer stops at the time budget), greedy decoding, sacreBLEU through ``evaluate`` (the repository's metric
   module ``training/metrics/sacrebleu``).

    python benchmarks/bench_rnn.py                                  # a few minutes on 2 CPU cores
    python benchmarks/bench_rnn.py --lengths 32 64 128 256 512 --train-seconds 300 --device cuda
    python benchmarks/bench_rnn.py --skip-bleu                      # throughput only

Writes ``benchmarks/results/rnn_throughput.md`` / ``.png`` and ``benchmarks/results/rnn_translation.md``.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from common import REPO_ROOT, SHARED_DATA, compare, in_repo_path, line_plot, setup_threads, write_table

in_repo_path()


def count_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def build_models(vocab_size: int, ids: dict, args) -> dict[str, torch.nn.Module]:
    """The Transformer of the given size, and LSTM seq2seqs whose hidden size is chosen so that their parameter
    count is the closest to the Transformer's (embeddings included; all share and tie their embeddings)."""
    from hf_scratch import (
        ScratchRNNConfig,
        ScratchRNNForConditionalGeneration,
        ScratchTransformerConfig,
        ScratchTransformerForConditionalGeneration,
    )

    torch.manual_seed(args.seed)
    transformer = ScratchTransformerForConditionalGeneration(
        ScratchTransformerConfig(
            vocab_size=vocab_size,
            d_model=args.d_model,
            encoder_layers=args.layers,
            decoder_layers=args.layers,
            encoder_attention_heads=args.heads,
            decoder_attention_heads=args.heads,
            encoder_ffn_dim=4 * args.d_model,
            decoder_ffn_dim=4 * args.d_model,
            max_position_embeddings=max(args.lengths) + 2,
            hidden_dropout_prob=args.dropout,
            **ids,
        )
    )
    target = count_parameters(transformer)
    models = {"Transformer": transformer}
    for attention in args.rnn_attention:

        def lstm(hidden_size: int, attention=attention):
            torch.manual_seed(args.seed)
            return ScratchRNNForConditionalGeneration(
                ScratchRNNConfig(
                    vocab_size=vocab_size,
                    hidden_size=hidden_size,
                    encoder_layers=args.rnn_layers,
                    decoder_layers=args.rnn_layers,
                    cell_type="lstm",
                    bidirectional_encoder=True,
                    attention_type=attention,
                    hidden_dropout_prob=args.dropout,
                    **ids,
                )
            )

        # the parameter count grows with the hidden size: bisect over even sizes, keep the closer neighbour
        low, high = 4, 4 * args.d_model  # half hidden sizes
        while low < high:
            middle = (low + high) // 2
            low, high = (middle + 1, high) if count_parameters(lstm(2 * middle)) < target else (low, middle)
        best = min((2 * low - 2, 2 * low), key=lambda size: abs(count_parameters(lstm(size)) - target))
        models[f"LSTM + {attention}"] = lstm(best)
    return models


def describe(model: torch.nn.Module) -> str:
    config = model.config
    if config.model_type == "scratch-rnn":
        return (
            f"hidden {config.hidden_size}, {config.encoder_layers}+{config.decoder_layers} layers, "
            f"BiLSTM encoder, {config.attention_type} attention"
        )
    return (
        f"d_model {config.hidden_size}, {config.encoder_layers}+{config.decoder_layers} layers, "
        f"{config.encoder_attention_heads} heads, FFN {config.encoder_ffn_dim}"
    )


# ---- 1. training throughput ----------------------------------------------------------------------------------


def throughput(models: dict, vocab_size: int, args) -> None:
    rows, series = [], {name: [] for name in models}
    device = torch.device(args.device)
    for length in args.lengths:
        generator = torch.Generator().manual_seed(length)
        inputs = {
            "input_ids": torch.randint(4, vocab_size, (args.batch_size, length), generator=generator).to(device),
            "attention_mask": torch.ones(args.batch_size, length, dtype=torch.long, device=device),
            "labels": torch.randint(4, vocab_size, (args.batch_size, length), generator=generator).to(device),
        }
        steps = {}
        for name, model in models.items():
            model.to(device).train()
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

            def step(model=model, optimizer=optimizer, inputs=inputs):
                optimizer.zero_grad(set_to_none=True)
                model(**inputs).loss.backward()
                optimizer.step()
                if device.type == "cuda":
                    torch.cuda.synchronize()

            steps[name] = step
        timings = compare(steps, warmup=1, repeats=args.repeats)
        tokens = 2 * args.batch_size * length  # source + target tokens per step
        row = {"length": length}
        for name, timing in timings.items():
            row[f"{name} (tokens/s)"] = round(tokens / timing.median)
            series[name].append(tokens / timing.median)
        for name in models:
            if name != "Transformer":
                row[f"Transformer / {name}"] = round(timings[name].median / timings["Transformer"].median, 2)
        row["noise"] = f"{max(t.spread for t in timings.values()):.0%}"
        rows.append(row)
        print(row, flush=True)
    notes = [f"{name}: {describe(model)}, {count_parameters(model):,} parameters" for name, model in models.items()]
    notes += [
        f"batch {args.batch_size}, source length = target length, random tokens, vocabulary {vocab_size}; "
        f"one step = forward + backward + AdamW; median of {args.repeats} round-robin repeats on {args.device}",
        "Transformer / X > 1: the Transformer trains that many times more tokens per second",
    ]
    write_table(
        "rnn_throughput", "Training throughput: LSTM seq2seq vs Transformer at equal parameter count", rows, notes
    )
    line_plot(
        "rnn_throughput",
        list(args.lengths),
        series,
        xlabel="sequence length (source = target)",
        ylabel="training tokens / s",
        logx=True,
        logy=True,
        title="LSTM seq2seq vs Transformer",
    )


# ---- 2. BLEU after equal training time -----------------------------------------------------------------------


def read_pairs(path, source: str, target: str, limit: int | None = None):
    pairs = [json.loads(line)["translation"] for line in open(path, encoding="utf-8")]
    pairs = [(p[source], p[target]) for p in pairs if p.get(source) and p.get(target)]
    return pairs[:limit] if limit else pairs


def train_for(seconds: float):
    """A Trainer callback that stops training after ``seconds`` of wall-clock time."""
    from transformers import TrainerCallback

    class StopAfter(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            if time.perf_counter() - self.start >= seconds:
                control.should_training_stop = True

    return StopAfter()


def train_and_score(name, model, tokenizer, train, validation, metric, args) -> dict:
    from transformers import DataCollatorForSeq2Seq, Seq2SeqTrainer, Seq2SeqTrainingArguments

    def encode(pairs):
        return [tokenizer(s, text_target=t, truncation=True, max_length=args.max_length) for s, t in pairs]

    training_args = Seq2SeqTrainingArguments(
        output_dir=str(REPO_ROOT / "benchmarks" / "results" / "_rnn_run"),
        seed=args.seed,
        data_seed=args.seed,
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=64,
        max_steps=1_000_000,
        learning_rate=args.learning_rate,
        warmup_steps=100,
        lr_scheduler_type="constant_with_warmup",
        max_grad_norm=1.0,
        logging_steps=50,
        save_strategy="no",
        report_to=[],
        use_cpu=args.device == "cpu",
        predict_with_generate=True,
        generation_max_length=args.max_length,
        generation_num_beams=1,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = Seq2SeqTrainer(
        model=model,
        args=training_args,
        train_dataset=encode(train),
        processing_class=tokenizer,
        data_collator=DataCollatorForSeq2Seq(tokenizer, model=model),
        callbacks=[train_for(args.train_seconds)],
    )
    start = time.perf_counter()
    trainer.train()
    train_seconds = time.perf_counter() - start
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]

    start = time.perf_counter()
    predictions = trainer.predict(encode(validation)).predictions
    generate_seconds = time.perf_counter() - start
    predictions = np.where(predictions < 0, tokenizer.pad_token_id, predictions)
    hypotheses = [text.strip() for text in tokenizer.batch_decode(predictions, skip_special_tokens=True)]
    bleu = metric.compute(predictions=hypotheses, references=[[t] for _, t in validation])["score"]
    print(
        f"{name}: BLEU {bleu:.2f} after {trainer.state.global_step} steps; e.g. {validation[0][0]!r} → "
        f"{hypotheses[0]!r} (reference {validation[0][1]!r})",
        flush=True,
    )
    return {
        "model": name,
        "parameters": count_parameters(model),
        "steps in the budget": trainer.state.global_step,
        "train (s)": round(train_seconds, 1),
        "last loss": round(losses[-1], 3) if losses else None,
        "sacreBLEU": round(bleu, 2),
        "generate (s)": round(generate_seconds, 1),
    }


def translation(tokenizer, args) -> None:
    import evaluate

    train = read_pairs(f"{args.data}/train.jsonl", "de", "en")
    validation = read_pairs(f"{args.data}/validation.jsonl", "de", "en", args.validation_limit)
    metric = evaluate.load(str(REPO_ROOT / "training" / "metrics" / "sacrebleu"))
    ids = special_ids(tokenizer)
    models = build_models(len(tokenizer), ids, args)
    rows = [
        train_and_score(name, model.to(args.device), tokenizer, train, validation, metric, args)
        for name, model in models.items()
    ]
    notes = [f"{name}: {describe(model)}" for name, model in models.items()]
    notes += [
        f"data: {args.data} (de→en), {len(train)} training pairs, {len(validation)} validation pairs scored; shared "
        f"WordPiece vocabulary of {len(tokenizer)} (cased), at most {args.max_length} tokens per side",
        f"training: {args.train_seconds} s of wall-clock time per model on {args.device}, batch {args.batch_size}, "
        f"AdamW lr {args.learning_rate}, 100 warmup steps, dropout {args.dropout}, seed {args.seed}",
        "decoding: greedy; sacreBLEU (13a) via evaluate.load('training/metrics/sacrebleu')",
    ]
    write_table(
        "rnn_translation", "German→English BLEU after equal training time: LSTM seq2seq vs Transformer", rows, notes
    )


def special_ids(tokenizer) -> dict:
    return dict(
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.bos_token_id,
    )


def main() -> None:
    from hf_scratch.tools.tokenization import train_tokenizer

    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=str(SHARED_DATA / "gettext-de-en"))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--lengths", type=int, nargs="+", default=[32, 64, 128, 256, 512])
    parser.add_argument("--vocab-size", type=int, default=4000)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--rnn-layers", type=int, default=2)
    parser.add_argument("--rnn-attention", nargs="+", default=["bahdanau", "luong-general"])
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-bleu", action="store_true")
    parser.add_argument("--train-seconds", type=float, default=120)
    parser.add_argument("--max-length", type=int, default=40)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--validation-limit", type=int, default=500, help="score the first N validation pairs")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    setup_threads()

    train = read_pairs(f"{args.data}/train.jsonl", "de", "en")
    tokenizer = train_tokenizer(
        [text for pair in train for text in pair], "seq2seq", vocab_size=args.vocab_size, lowercase=False
    )
    if not args.skip_throughput:
        throughput(build_models(len(tokenizer), special_ids(tokenizer), args), len(tokenizer), args)
    if not args.skip_bleu:
        translation(tokenizer, args)


if __name__ == "__main__":
    main()

"""German→English translation on ``../shared/data/gettext-de-en``: the from-scratch Transformer against a
transformers ``MarianMTModel`` of the same size, trained the same way, scored with sacreBLEU on the validation split
through ``evaluate`` (the metric module kept in the repository, ``training/metrics/sacrebleu``).

"The same way": one tokenizer trained on the training pairs (shared vocabulary, ``</s>`` closes every sequence),
the same seed, data order, batch size, optimizer, learning-rate schedule, label smoothing (Trainer's
``label_smoothing_factor``), number of steps and decoding settings — only the model class differs. Both models have
the same shape (post-LN, √d_model-scaled embeddings shared between source, target and output, ReLU FFN); the only
architectural differences are Marian's split sinusoid layout (ours uses the paper's interleaved one) and Marian's
frozen output bias (``final_logits_bias``; ours is a trained bias of the output projection).

    python benchmarks/bench_transformer_translation.py                   # the reported run: ~25 min on 1 busy core
    python benchmarks/bench_transformer_translation.py --max-steps 600 --learning-rate 1e-3   # ~10 min, BLEU ~3
    python benchmarks/bench_transformer_translation.py --max-steps 3000 --num-beams 4 --d-model 256

Writes ``benchmarks/results/transformer_translation.md``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import numpy as np
import torch
from common import REPO_ROOT, SHARED_DATA, in_repo_path, setup_threads, write_table

in_repo_path()


def read_pairs(path, source: str, target: str, limit: int | None = None):
    pairs = [json.loads(line)["translation"] for line in open(path, encoding="utf-8")]
    pairs = [(p[source], p[target]) for p in pairs if p.get(source) and p.get(target)]
    return pairs[:limit] if limit else pairs


def build_models(tokenizer, args):
    from transformers import MarianConfig, MarianMTModel

    from hf_scratch import ScratchTransformerConfig, ScratchTransformerForConditionalGeneration

    ids = dict(
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.bos_token_id,
    )
    shape = dict(
        vocab_size=len(tokenizer),
        d_model=args.d_model,
        encoder_layers=args.layers,
        decoder_layers=args.layers,
        encoder_attention_heads=args.heads,
        decoder_attention_heads=args.heads,
        encoder_ffn_dim=4 * args.d_model,
        decoder_ffn_dim=4 * args.d_model,
        max_position_embeddings=args.max_length + 2,
    )
    torch.manual_seed(args.seed)
    ours = ScratchTransformerForConditionalGeneration(
        ScratchTransformerConfig(
            **shape,
            **ids,
            bos_token_id=tokenizer.bos_token_id,
            hidden_act="relu",
            hidden_dropout_prob=args.dropout,
            scale_embedding=True,
            initializer_range=0.02,
        )
    )
    torch.manual_seed(args.seed)
    marian = MarianMTModel(
        MarianConfig(
            **shape,
            **ids,
            forced_eos_token_id=None,
            activation_function="relu",
            dropout=args.dropout,
            scale_embedding=True,
            init_std=0.02,
            share_encoder_decoder_embeddings=True,
            tie_word_embeddings=True,
        )
    )
    return {"hf_scratch Transformer": ours, "transformers MarianMTModel": marian}


def train_and_score(name, model, tokenizer, train, validation, metric, args):
    from transformers import DataCollatorForSeq2Seq, Seq2SeqTrainer, Seq2SeqTrainingArguments

    def encode(pairs):
        return [tokenizer(s, text_target=t, truncation=True, max_length=args.max_length) for s, t in pairs]

    training_args = Seq2SeqTrainingArguments(
        output_dir=tempfile.mkdtemp(prefix="translation_"),
        seed=args.seed,
        data_seed=args.seed,
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=64,
        max_steps=args.max_steps,
        learning_rate=args.learning_rate,
        adam_beta2=0.98,
        warmup_steps=args.max_steps // 10,
        lr_scheduler_type="linear",
        weight_decay=0.0,
        label_smoothing_factor=0.1,
        max_grad_norm=1.0,
        logging_steps=max(1, args.max_steps // 10),
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        predict_with_generate=True,
        generation_max_length=args.max_length,
        generation_num_beams=args.num_beams,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = Seq2SeqTrainer(
        model=model,
        args=training_args,
        train_dataset=encode(train),
        processing_class=tokenizer,
        data_collator=DataCollatorForSeq2Seq(tokenizer, model=model),
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
        f"{name}: BLEU {bleu:.2f}; e.g. {validation[0][0]!r} → {hypotheses[0]!r} (reference {validation[0][1]!r})",
        flush=True,
    )
    return {
        "model": name,
        "trained parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "first loss": round(losses[0], 3),
        "last loss": round(losses[-1], 3),
        "sacreBLEU": round(bleu, 2),
        "train (s)": round(train_seconds, 1),
        "generate (s)": round(generate_seconds, 1),
    }


def main() -> None:
    import evaluate

    from hf_scratch.tools.tokenization import train_tokenizer

    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=str(SHARED_DATA / "gettext-de-en"))
    parser.add_argument("--source", default="de")
    parser.add_argument("--target", default="en")
    parser.add_argument("--vocab-size", type=int, default=4000)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--max-length", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-steps", type=int, default=1500)
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    parser.add_argument("--num-beams", type=int, default=1)
    parser.add_argument("--validation-limit", type=int, default=None, help="score only the first N validation pairs")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    threads = setup_threads()

    train = read_pairs(f"{args.data}/train.jsonl", args.source, args.target)
    validation = read_pairs(f"{args.data}/validation.jsonl", args.source, args.target, args.validation_limit)
    tokenizer = train_tokenizer(
        [text for pair in train for text in pair], "seq2seq", vocab_size=args.vocab_size, lowercase=False
    )
    metric = evaluate.load(str(REPO_ROOT / "training" / "metrics" / "sacrebleu"))
    rows = [
        train_and_score(name, model, tokenizer, train, validation, metric, args)
        for name, model in build_models(tokenizer, args).items()
    ]
    rows[0]["Δ BLEU vs Marian"] = round(rows[0]["sacreBLEU"] - rows[1]["sacreBLEU"], 2)
    notes = [
        f"data: {args.data} ({args.source}→{args.target}), {len(train)} training pairs, {len(validation)} validation "
        f"pairs scored; shared WordPiece vocabulary of {len(tokenizer)} trained on the training pairs (cased)",
        f"both models: d_model {args.d_model}, {args.layers}+{args.layers} layers, {args.heads} heads, FFN "
        f"{4 * args.d_model}, ReLU, post-LN, dropout {args.dropout}, shared + tied embeddings scaled by √d_model",
        f"training: {args.max_steps} steps × batch {args.batch_size}, AdamW lr {args.learning_rate} (β2 0.98), "
        f"linear warmup 10% then linear decay, label smoothing 0.1, seed {args.seed}, {threads} threads",
        f"decoding: {'greedy' if args.num_beams == 1 else f'beam search, {args.num_beams} beams'}, at most "
        f"{args.max_length} tokens; sacreBLEU (13a tokenization) via evaluate.load('training/metrics/sacrebleu')",
        "train/generate seconds: the two models ran one after the other on a shared machine, so they are no speed "
        "comparison (benchmarks/bench_transformer.py times generation round-robin)",
    ]
    write_table(
        "transformer_translation",
        "German→English translation: hf_scratch Transformer vs MarianMTModel",
        rows,
        notes=notes,
    )


if __name__ == "__main__":
    main()

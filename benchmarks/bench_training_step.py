"""Training step (forward + backward + AdamW) and inference latency, ours vs transformers at equal configuration.

Each case builds the transformers model, converts it with ``hf_scratch.convert.from_transformers`` (so both sides
have the same configuration and the same weights), and times both round-robin in this one process. The issue's
configuration: hidden 256, 4 layers, 4 heads, FFN 1024, vocabulary 8,000, batch 8 × 128 tokens, dropout 0, SDPA
attention on both sides; plus BERT-base. Goal: speed-up (transformers time / ours) ≥ 1.15; floor 1.0.

    python benchmarks/bench_training_step.py                 # every family that has landed, plus BERT-base
    python benchmarks/bench_training_step.py --only bert gpt --repeats 3 --no-base
"""

from __future__ import annotations

import argparse

import torch
from common import (
    bar_plot,
    compare,
    in_repo_path,
    inference_fn,
    matrix_products_fn,
    optimizer_step_fn,
    ratio_row,
    setup_threads,
    train_step_fn,
    write_table,
)

in_repo_path()

SMALL = dict(vocab=8000, hidden=256, layers=4, heads=4, ffn=1024)
BATCH, LENGTH = 8, 128


def _token_batch(vocab: int, batch: int = BATCH, length: int = LENGTH, low: int = 5) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    return torch.randint(low, vocab, (batch, length), generator=generator)


def bert_reference(size: dict):
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(
        vocab_size=size["vocab"],
        hidden_size=size["hidden"],
        num_hidden_layers=size["layers"],
        num_attention_heads=size["heads"],
        intermediate_size=size["ffn"],
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    ids = _token_batch(size["vocab"])
    return BertForMaskedLM(config), {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}


def gpt_reference(size: dict):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=size["vocab"],
        n_embd=size["hidden"],
        n_layer=size["layers"],
        n_head=size["heads"],
        n_inner=size["ffn"],
        n_positions=512,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
    )
    ids = _token_batch(size["vocab"])
    return GPT2LMHeadModel(config), {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}


def transformer_reference(size: dict):
    from transformers import MarianConfig, MarianMTModel

    config = MarianConfig(
        vocab_size=size["vocab"],
        d_model=size["hidden"],
        encoder_layers=size["layers"],
        decoder_layers=size["layers"],
        encoder_attention_heads=size["heads"],
        decoder_attention_heads=size["heads"],
        encoder_ffn_dim=size["ffn"],
        decoder_ffn_dim=size["ffn"],
        max_position_embeddings=512,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
        forced_eos_token_id=1,
    )
    source, target = _token_batch(size["vocab"]), _token_batch(size["vocab"]).flip(0)
    return MarianMTModel(config), {"input_ids": source, "attention_mask": torch.ones_like(source), "labels": target}


def longformer_reference(size: dict, window: int = 32):
    from transformers import LongformerConfig, LongformerForMaskedLM

    config = LongformerConfig(
        vocab_size=size["vocab"],
        hidden_size=size["hidden"],
        num_hidden_layers=size["layers"],
        num_attention_heads=size["heads"],
        intermediate_size=size["ffn"],
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        attention_window=window,
        max_position_embeddings=LENGTH + 2,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
    )
    ids = _token_batch(size["vocab"])
    global_attention = torch.zeros_like(ids)
    global_attention[:, 0] = 1  # the [CLS]-style first token attends everywhere, as in classification
    inputs = {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "global_attention_mask": global_attention,
        "labels": ids,
    }
    return LongformerForMaskedLM(config), inputs


CASES = {
    "bert": bert_reference,
    "gpt": gpt_reference,
    "transformer": transformer_reference,
    "longformer": longformer_reference,
}
BERT_BASE = dict(vocab=30522, hidden=768, layers=12, heads=12, ffn=3072)


def build_pair(family: str, size: dict):
    """(ours, reference, inputs) with identical weights, or a string saying why the family cannot run yet."""
    from hf_scratch.convert import from_transformers

    reference, inputs = CASES[family](size)
    try:
        ours = from_transformers(reference)
    except (ValueError, AttributeError, ImportError) as error:
        return f"{family}: not converted yet ({error})"
    return ours, reference, inputs


def check_same_loss(ours, reference, inputs) -> float:
    """A benchmark of two different computations would be meaningless: compare the losses first."""
    ours.eval(), reference.eval()
    with torch.no_grad():
        difference = abs(float(ours(**inputs).loss) - float(reference(**inputs).loss))
    if difference > 1e-3:
        raise RuntimeError(f"ours and transformers disagree (|Δ loss| = {difference:.2e}): not benchmarking")
    return difference


def run_case(label: str, family: str, size: dict, warmup: int, repeats: int, rows_train: list, rows_infer: list):
    pair = build_pair(family, size)
    if isinstance(pair, str):
        print(pair, flush=True)
        return pair
    ours, reference, inputs = pair
    check_same_loss(ours, reference, inputs)
    inference_inputs = {k: v for k, v in inputs.items() if k != "labels"}
    if family == "transformer":  # no labels → the decoder needs its own inputs
        inference_inputs["decoder_input_ids"] = inputs["labels"]
    # The floor under our step: its own linear layers' matrix products (forward + backward) and AdamW's update,
    # each timed alone. transformers' time over it is the most any rewrite of the rest could gain.
    ours.train()
    products = matrix_products_fn(lambda: ours(**inputs).loss.backward())
    update = optimizer_step_fn(ours)
    train = compare(
        {
            "ours": train_step_fn(ours, inputs),
            "transformers": train_step_fn(reference, inputs),
            "products": products,
            "update": update,
        },
        warmup,
        repeats,
    )
    rows_train.append(ratio_row(label, train["ours"], train["transformers"]))
    rows_train[-1]["ceiling"] = round(
        train["transformers"].median / (train["products"].median + train["update"].median), 2
    )
    infer = compare(
        {"ours": inference_fn(ours, inference_inputs), "transformers": inference_fn(reference, inference_inputs)},
        warmup,
        repeats,
    )
    rows_infer.append(ratio_row(label, infer["ours"], infer["transformers"]))
    print(rows_train[-1], rows_infer[-1], flush=True)
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=sorted(CASES), default=sorted(CASES))
    parser.add_argument("--no-base", action="store_true", help="skip BERT-base (the slowest case)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    threads = setup_threads()
    torch.manual_seed(0)
    rows_train, rows_infer, skipped = [], [], []
    for family in ("bert", "gpt", "transformer", "longformer"):
        if family in args.only:
            skipped.append(
                run_case(f"{family} small", family, SMALL, args.warmup, args.repeats, rows_train, rows_infer)
            )
    if not args.no_base and "bert" in args.only:
        skipped.append(run_case("bert base", "bert", BERT_BASE, 1, max(3, args.repeats // 2), rows_train, rows_infer))

    notes = [
        f"batch {BATCH} × {LENGTH} tokens, dropout 0, SDPA on both sides, {threads} threads; small = hidden 256, "
        "4 layers, 4 heads, FFN 1024, vocabulary 8,000 (the encoder-decoder has 4 + 4 layers; Longformer window 32 "
        "with one global token); base = BERT-base.",
        "speed-up = transformers median / ours median (> 1: ours faster); goal ≥ 1.15, floor 1.0; noise = "
        "(max − min) / median of the repeats. Ours is converted from the transformers model (same weights, "
        "losses checked equal before timing).",
        "compared with: BertForMaskedLM, GPT2LMHeadModel, MarianMTModel, LongformerForMaskedLM.",
    ]
    train_notes = notes + [
        "ceiling = transformers median / (our step's linear-layer matrix products, forward + backward, replayed alone "
        "+ AdamW's update alone), timed in the same round-robin: the speed-up ours would reach if attention, "
        "normalisation, activations, embeddings and the loss took no time at all.",
    ]
    notes += [f"skipped: {reason}" for reason in skipped if reason]
    write_table("training_step", "Training step (forward + backward + AdamW)", rows_train, train_notes)
    write_table("inference", "Inference latency (forward, no grad)", rows_infer, notes)
    if rows_train:
        bar_plot("training_step", rows_train, ylabel="speed-up (transformers / ours)", title="training step")
        bar_plot("inference", rows_infer, ylabel="speed-up (transformers / ours)", title="inference")


if __name__ == "__main__":
    main()

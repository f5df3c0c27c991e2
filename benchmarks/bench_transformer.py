"""Beam-search (and greedy) generation speed of ScratchTransformerForConditionalGeneration against transformers'
MarianMTModel at the same configuration and weights (converted with ``hf_scratch.convert.from_transformers``),
timed round-robin in one process.

Every run produces exactly ``--new-tokens`` tokens per sequence (``min_new_tokens`` = ``max_new_tokens``, so EOS
cannot end a beam early); tokens/s counts the tokens of the returned sequences (batch × new tokens). Sources are a
right-padded batch. Both models produce the same sequences (checked before timing, reported in the table).

    python benchmarks/bench_transformer.py                    # Marian-shaped small model, 3 beams and greedy
    python benchmarks/bench_transformer.py --size opus-mt --new-tokens 32 --repeats 3
    python benchmarks/bench_transformer.py --profile          # torch.profiler table of one beam search of ours
"""

from __future__ import annotations

import argparse

import torch
from common import bar_plot, compare, in_repo_path, print_cpu_profile, setup_threads, write_table

in_repo_path()

SIZES = {
    "small": dict(vocab=8000, d_model=256, layers=3, heads=4, ffn=1024),
    "opus-mt": dict(vocab=58101, d_model=512, layers=6, heads=8, ffn=2048),  # the opus-mt-de-en shape, random weights
}
SOURCE_LENGTH = 24


def build(size: dict):
    from transformers import MarianConfig, MarianMTModel

    from hf_scratch.convert import from_transformers

    pad = size["vocab"] - 1
    config = MarianConfig(
        vocab_size=size["vocab"],
        d_model=size["d_model"],
        encoder_layers=size["layers"],
        decoder_layers=size["layers"],
        encoder_attention_heads=size["heads"],
        decoder_attention_heads=size["heads"],
        encoder_ffn_dim=size["ffn"],
        decoder_ffn_dim=size["ffn"],
        max_position_embeddings=512,
        activation_function="swish",
        scale_embedding=True,
        pad_token_id=pad,
        decoder_start_token_id=pad,
        eos_token_id=0,
        forced_eos_token_id=None,
        dropout=0.0,
    )
    torch.manual_seed(0)
    reference = MarianMTModel(config).eval()
    return from_transformers(reference).eval(), reference


def sources(vocab: int, batch: int):
    """``batch`` sources of up to SOURCE_LENGTH tokens, all but the first right-padded by a few tokens."""
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(1, vocab - 1, (batch, SOURCE_LENGTH), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    for row in range(1, batch):
        attention_mask[row, SOURCE_LENGTH - 3 * row :] = 0
    return input_ids.masked_fill(attention_mask == 0, vocab - 1), attention_mask


def generate_fn(model, inputs, new_tokens: int, num_beams: int):
    def run():
        with torch.inference_mode():
            return model.generate(
                **inputs,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                num_beams=num_beams,
                do_sample=False,
            )

    return run


def tokens_per_second(timing, batch: int, new_tokens: int) -> float:
    return round(batch * new_tokens / timing.median, 1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--beams", type=int, nargs="+", default=[3, 1])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    threads = setup_threads()
    size = SIZES[args.size]
    ours, reference = build(size)
    input_ids, attention_mask = sources(size["vocab"], args.batch)
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask}

    if args.profile:
        print_cpu_profile(generate_fn(ours, inputs, args.new_tokens, args.beams[0]))
        return

    rows = [generation_row(ours, reference, inputs, args, num_beams) for num_beams in args.beams]
    notes = [
        f"size {args.size}: vocab {size['vocab']}, d_model {size['d_model']}, {size['layers']}+{size['layers']} "
        f"layers, {size['heads']} heads, FFN {size['ffn']}; sources of {SOURCE_LENGTH} tokens (rows after the first "
        f"right-padded); {threads} threads",
        "reference: transformers MarianMTModel with the same weights; ratio = our tokens/s ÷ transformers' (> 1: ours "
        "is faster)",
    ]
    write_table(f"transformer_generation_{args.size}", "Encoder-decoder Transformer generation", rows, notes=notes)
    bar_plot(f"transformer_generation_{args.size}", rows, value_key="ratio", ylabel="ratio of tokens/s")


def generation_row(ours, reference, inputs: dict, args, num_beams: int) -> dict:
    """Ours vs transformers generating with ``num_beams`` beams (1: greedy): tokens/s and whether they agree."""
    ours_run = generate_fn(ours, inputs, args.new_tokens, num_beams)
    reference_run = generate_fn(reference, inputs, args.new_tokens, num_beams)
    same = torch.equal(ours_run(), reference_run())
    times = compare({"ours": ours_run, "transformers": reference_run}, warmup=1, repeats=args.repeats)
    ours_tps = tokens_per_second(times["ours"], args.batch, args.new_tokens)
    reference_tps = tokens_per_second(times["transformers"], args.batch, args.new_tokens)
    return {
        "case": f"{'greedy' if num_beams == 1 else f'{num_beams} beams'}, batch {args.batch}, {args.new_tokens} new",
        "ours (tokens/s)": ours_tps,
        "transformers (tokens/s)": reference_tps,
        "ratio": round(ours_tps / reference_tps, 3),
        "same sequences": "yes" if same else "NO",
        "noise": f"{max(times['ours'].spread, times['transformers'].spread):.0%}",
    }


if __name__ == "__main__":
    main()

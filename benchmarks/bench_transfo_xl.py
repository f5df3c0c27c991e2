"""Transformer-XL benchmarks (not tests).

1. Evaluation speed, the paper's Table 9 comparison: evaluating with the segment-level memory against the vanilla
   Transformer evaluation that recomputes the whole window for every predicted token (Al-Rfou et al. 2018), over
   the same attention length. Both sides are this model with the same weights: the vanilla side feeds the last
   ``attention_length`` tokens without memory and reads the prediction for the last one; the XL side feeds
   segments of 128 tokens with the memory of the previous ones and scores every token (the log-probability of each
   target through the adaptive softmax's cheap path, as perplexity evaluation does). Reported per predicted token.
   Rows:
   - "same attention length": memory = window = L, ``same_length=True`` (every query sees exactly L keys, as in the
     paper's evaluation, where the attention length is the memory length);
   - "window = memory + segment": vanilla window 256 against XL with memory 128, segment 128 (the last query of a
     segment sees 256 keys, the first 129).
   (transformers 5 has no Transformer-XL to put beside it; parity with transformers 4.46's is in the tests.)
2. Perplexity with vs without memory on ../shared/data/shakespeare: a tiny character-level model trained with
   ``TransfoXLTrainer`` (memory carried across steps) on several plays, evaluated on a held-out play at the same
   segment length with memory and with ``mem_len = 0``.

    python benchmarks/bench_transfo_xl.py [--quick]          # BENCH_THREADS=n to change the thread count (default 1)

Results: benchmarks/results/transfo_xl_eval_speed.md / .png, transfo_xl_perplexity.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SHARED_DATA, bar_plot, compare, in_repo_path, setup_threads, write_table  # noqa: E402

in_repo_path()
from hf_scratch import ScratchTransfoXLConfig, ScratchTransfoXLLMHeadModel  # noqa: E402

SEGMENT = 128


def speed_model(memory: int, same_length: bool) -> ScratchTransfoXLLMHeadModel:
    """A small word-level model: 4 layers, d 256, adaptive softmax over 10k words."""
    torch.manual_seed(0)
    config = ScratchTransfoXLConfig(
        vocab_size=10000,
        cutoffs=[2000, 5000],
        div_val=2,
        hidden_size=256,
        embedding_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        head_dim=64,
        intermediate_size=1024,
        mem_len=memory,
        clamp_len=-1,
        same_length=same_length,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    return ScratchTransfoXLLMHeadModel._from_config(config, attn_implementation="sdpa").eval()


def evaluation_speed(case: str, window: int, memory: int, same_length: bool, vanilla_tokens: int, repeats: int) -> dict:
    model = speed_model(memory, same_length)
    stream = torch.randint(0, model.config.vocab_size, (1, window + 2 * SEGMENT))

    # XL: a warm memory, then two segments with memory, all 2·SEGMENT tokens predicted
    with torch.inference_mode():
        warm = model(stream[:, :SEGMENT]).mems
        warm = model(stream[:, SEGMENT : 2 * SEGMENT], mems=warm).mems

    def with_memory():
        mems = warm
        with torch.inference_mode():
            for start in range(0, 2 * SEGMENT, SEGMENT):
                segment = stream[:, window + start : window + start + SEGMENT]
                out = model(segment, mems=mems, labels=segment, logits_to_keep=1)  # scores every target
                mems = out.mems
        return out.loss

    # vanilla: for every predicted token, the previous `window` tokens from scratch; only the last one is scored
    def recompute_window():
        with torch.inference_mode():
            for position in range(window, window + vanilla_tokens):
                hidden = model.model(stream[:, position - window : position]).last_hidden_state[:, -1:]
                logits = model.lm_head(hidden)
        return logits

    times = compare({"xl": with_memory, "vanilla": recompute_window}, warmup=1, repeats=repeats)
    xl_per_token = times["xl"].median / (2 * SEGMENT)
    vanilla_per_token = times["vanilla"].median / vanilla_tokens
    return {
        "case": case,
        "attention length": window,
        "XL memory / segment": f"{memory} / {SEGMENT}",
        "XL (ms/token)": round(xl_per_token * 1e3, 4),
        "vanilla (ms/token)": round(vanilla_per_token * 1e3, 3),
        "speed-up": round(vanilla_per_token / xl_per_token, 1),
        "noise": f"{max(times['xl'].spread, times['vanilla'].spread):.0%}",
    }


def perplexity_with_and_without_memory(quick: bool) -> dict:
    from transformers import TrainingArguments

    from hf_scratch.tools.tokenization import train_tokenizer
    from hf_scratch.tools.training_transfo_xl import TransfoXLTrainer, segment_dataset

    plays = sorted((SHARED_DATA / "shakespeare").glob("*.txt"))
    train_plays, valid_play = plays[:-1][: 2 if quick else 6], plays[-1]
    train_text = "\n".join(p.read_text() for p in train_plays)
    valid_text = valid_play.read_text()[: 20000 if quick else 60000]
    tokenizer = train_tokenizer([train_text], kind="char")
    train_ids = tokenizer(train_text, add_special_tokens=False)["input_ids"]
    valid_ids = tokenizer(valid_text, add_special_tokens=False)["input_ids"]
    segment, memory = 32, 64
    torch.manual_seed(0)
    model = ScratchTransfoXLLMHeadModel(
        ScratchTransfoXLConfig(
            vocab_size=len(tokenizer),
            cutoffs=[],
            hidden_size=64,
            embedding_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            head_dim=16,
            intermediate_size=256,
            mem_len=memory,
            clamp_len=-1,
            same_length=False,
            hidden_dropout_prob=0.1,
            attention_probs_dropout_prob=0.0,
        )
    )
    steps = 200 if quick else 1500
    with tempfile.TemporaryDirectory() as output_dir:
        args = TrainingArguments(
            output_dir=output_dir,
            per_device_train_batch_size=16,
            per_device_eval_batch_size=16,
            learning_rate=3e-3,
            max_steps=steps,
            warmup_steps=steps // 20,
            lr_scheduler_type="cosine",
            report_to=[],
            use_cpu=True,
            disable_tqdm=True,
            logging_steps=steps,
            save_strategy="no",
            seed=0,
        )
        trainer = TransfoXLTrainer(
            model=model,
            args=args,
            train_dataset=segment_dataset(train_ids, segment),
            eval_dataset=segment_dataset(valid_ids, segment),
        )
        trainer.train()
        with_memory = trainer.evaluate()["eval_perplexity"]
        model.config.mem_len = 0
        without_memory = trainer.evaluate()["eval_perplexity"]
    return {
        "train": f"{len(train_plays)} plays, {len(train_ids):,} chars, {steps} steps × 16 × {segment}",
        "validation": f"{valid_play.stem}, {len(valid_ids):,} chars",
        "segment": segment,
        "ppl with memory (mem_len 64)": round(with_memory, 3),
        "ppl without memory": round(without_memory, 3),
        "ratio": round(with_memory / without_memory, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer repeats and a shorter training run")
    parser.add_argument("--skip-perplexity", action="store_true")
    options = parser.parse_args()
    threads = setup_threads(int(os.environ.get("BENCH_THREADS", 1)))
    repeats = 3 if options.quick else 5

    rows = [
        evaluation_speed(
            "same attention length", window=128, memory=128, same_length=True, vanilla_tokens=32, repeats=repeats
        ),
        evaluation_speed(
            "window = memory + segment", window=256, memory=128, same_length=False, vanilla_tokens=32, repeats=repeats
        ),
        evaluation_speed(
            "same attention length", window=512, memory=512, same_length=True, vanilla_tokens=16, repeats=repeats
        ),
    ]
    write_table(
        "transfo_xl_eval_speed",
        "Transformer-XL evaluation: memory vs recomputing the window per token (paper Table 9)",
        rows,
        notes=[
            f"{threads} thread(s); model: 4 layers, d 256, 4 heads × 64, FFN 1024, adaptive softmax over 10k words, "
            f"SDPA; XL segment {SEGMENT}; per predicted token, median of {repeats} round-robin repeats.",
            "Goal: ≥ 150× at segment = memory = 128. Paper Table 9 (GPU, much larger model): 363× at attention "
            "length 800 up to 1,874× at 3,800, i.e. about L / 2.1 — which would be ≈ 61× at L = 128. The speed-up "
            "grows with the attention length L: vanilla pays a whole L-token forward per token, XL one forward per "
            "segment whose keys are memory + segment (here ≈ 1.5× a vanilla window's cost: K/V for 256 positions, "
            "the W_R R projection, term (b)+(d)), so at L = 128 the ceiling is ≈ 128 / 1.5 ≈ 85×.",
        ],
    )
    bar_plot(
        "transfo_xl_eval_speed",
        [dict(r, label=f"{r['attention length']} ({r['case'][:6]})") for r in rows],
        label_key="label",
        ylabel="vanilla time / XL time per token",
        title="Transformer-XL eval speed-up",
    )
    if not options.skip_perplexity:
        row = perplexity_with_and_without_memory(options.quick)
        write_table(
            "transfo_xl_perplexity",
            "Transformer-XL: validation perplexity with vs without memory "
            "(../shared/data/shakespeare, character level)",
            [row],
            notes=[f"{threads} thread(s); same model and segments, memory reset at the start of evaluation."],
        )


if __name__ == "__main__":
    main()

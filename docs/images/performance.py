"""Draw ``docs/images/performance.png``, the README's performance plot: hf_scratch's speed against the transformers
implementation at the same configuration (transformers' time / ours: above 1 is faster), as measured by
``python benchmarks/run_all.py`` and collected in ``benchmarks/results/`` (the file each bar comes from is named
below). The numbers are copied from those result files, not measured here.

    python docs/images/performance.py
"""

from __future__ import annotations

from pathlib import Path

# (group, label, speed-up, result file in benchmarks/results/)
MEASURED = [
    ("training step, CPU", "BERT", 1.03, "training_step.md"),
    ("training step, CPU", "GPT", 1.04, "training_step.md"),
    ("training step, CPU", "encoder-decoder", 0.97, "training_step.md"),
    ("training step, CPU", "Longformer", 1.03, "training_step.md"),
    ("inference latency, CPU", "BERT", 0.96, "inference.md"),
    ("inference latency, CPU", "GPT", 1.08, "inference.md"),
    ("inference latency, CPU", "encoder-decoder", 1.03, "inference.md"),
    ("inference latency, CPU", "Longformer", 1.15, "inference.md"),
    ("generation, CPU", "GPT cached, batch 1", 1.06, "gpt_generation_small.md"),
    ("generation, CPU", "beam search vs Marian", 1.05, "transformer_generation_small.md"),
    ("Longformer MLM fwd + bwd", "CPU, 4k tokens", 1.45, "longformer_lengths.md"),
    ("Longformer MLM fwd + bwd", "CPU, 16k tokens", 3.11, "longformer_lengths.md"),
    ("Longformer MLM fwd + bwd", "H100, 4k tokens, bf16", 1.95, "longformer_gpu.md"),
    ("Longformer MLM fwd + bwd", "H100, 16k tokens, bf16", 2.97, "longformer_gpu.md"),
]


PICTURE = Path(__file__).resolve().parent / "performance.png"


def main(path: Path = PICTURE) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = list(dict.fromkeys(group for group, *_ in MEASURED))
    colors = dict(zip(groups, ("tab:blue", "tab:orange", "tab:green", "tab:purple"), strict=True))
    fig, ax = plt.subplots(figsize=(8, 5.2))
    positions = list(range(len(MEASURED)))[::-1]
    ax.barh(positions, [speed for _, _, speed, _ in MEASURED], color=[colors[group] for group, *_ in MEASURED])
    ax.set_yticks(positions, [label for _, label, _, _ in MEASURED], fontsize=8)
    for position, (_, _, speed, _) in zip(positions, MEASURED, strict=True):
        ax.text(speed + 0.03, position, f"{speed:.2f}×", va="center", fontsize=8)
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xlabel("speed-up over transformers at the same configuration (transformers' time / ours)")
    ax.set_xlim(0, 3.5)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[group]) for group in groups]
    ax.legend(handles, groups, loc="upper right", fontsize=8)
    ax.set_title(
        "hf_scratch vs transformers (benchmarks/results/; 1 thread on a shared 2-core CPU, or an H100)", fontsize=9
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


if __name__ == "__main__":
    print(main())

"""Pictures: the positional-encoding heatmap (Vaswani et al. 2017, §3.5), the attention weights of one head for a
sentence, the mask patterns of every family (built from the mask algebra in ``masks.py``; Longformer's relation
is written out densely here, ``longformer_mask``, since its kernel never builds it), and training curves from a
run's logs (``trainer_state.json`` or TensorBoard event files).

matplotlib is an optional extra (``pip install hf_scratch[plots]``) imported only when a picture is drawn.

    python -m hf_scratch.tools.viz OUT_DIR [--run RUN_DIR] [--model MODEL_DIR --sentence "..."]

renders ``positional_encoding.png``, ``attention.png``, ``masks.png`` and, given a run directory,
``training_curves.png`` into OUT_DIR.
"""

from __future__ import annotations

import argparse
import inspect
import json
import textwrap
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import torch

from ..masks import causal_mask, combine_masks, may_attend, padding_mask
from ..positional import sinusoidal_table

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from torch import nn
    from transformers import PreTrainedModel


def _pyplot() -> ModuleType:
    try:
        import matplotlib
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("hf_scratch.tools.viz needs matplotlib: pip install 'hf_scratch[plots]'.") from error
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Figure, path: str | Path, title: str = "") -> Path:
    """Write the PNG; ``title``, what the picture shows, goes into its metadata too (PNG ``Title``), so a caption
    can be checked against it (tests/test_docs_browser.py)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Title": title} if title else None)
    _pyplot().close(fig)
    return path


# --------------------------------------------------------------------------------------------------------------
# Positional encodings
# --------------------------------------------------------------------------------------------------------------


def plot_positional_encoding(
    path: str | Path, num_positions: int = 100, dim: int = 128, layout: str = "interleaved"
) -> Path:
    """Heatmap of PE(pos, i) — positions down, dimensions across — for the sinusoids of Vaswani et al. 2017, §3.5:
    PE(pos, 2i) = sin(pos / 10000^{2i/d}), PE(pos, 2i+1) = cos(pos / 10000^{2i/d})."""
    plt = _pyplot()
    table = sinusoidal_table(num_positions, dim, layout)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    image = ax.pcolormesh(table.numpy(), cmap="RdBu", vmin=-1, vmax=1)
    ax.invert_yaxis()
    ax.set_xlabel("encoding dimension i")
    ax.set_ylabel("position")
    ax.set_title(f"Sinusoidal positional encoding ({layout}, d_model={dim})")
    fig.colorbar(image, ax=ax)
    return _save(fig, path, ax.get_title())


# --------------------------------------------------------------------------------------------------------------
# Attention weights
# --------------------------------------------------------------------------------------------------------------


def attention_weights(model: nn.Module, inputs: dict[str, Any], layer: int = -1) -> torch.Tensor:
    """The attention weights of one layer, (batch, heads, query, key), from ``output_attentions=True``."""
    model.eval()
    with torch.no_grad():
        outputs = model(**inputs, output_attentions=True)
    if not outputs.attentions:
        raise ValueError(f"{type(model).__name__} returned no attention weights for output_attentions=True.")
    return outputs.attentions[layer]


def plot_attention(
    path: str | Path,
    weights: torch.Tensor,
    tokens: Sequence[str],
    title: str = "",
    key_tokens: Sequence[str] | None = None,
) -> Path:
    """Heatmap of a (query, key) weight matrix, labelled with the tokens: ``tokens`` the queries (rows) and, for
    self-attention, the keys too; ``key_tokens`` the keys (columns) when they differ, as in cross-attention, where the
    decoder's tokens attend over the encoder's."""
    plt = _pyplot()
    weights = weights.detach().float().cpu()
    keys = tokens if key_tokens is None else key_tokens
    if tuple(weights.shape) != (len(tokens), len(keys)):
        raise ValueError(
            f"The weights are {tuple(weights.shape)} (query, key) but there are {len(tokens)} query and {len(keys)} "
            "key tokens: pass key_tokens for cross-attention, whose keys are the other sequence's tokens."
        )
    width, height = max(4.0, 0.35 * len(keys) + 2), max(4.0, 0.35 * len(tokens) + 2)
    fig, ax = plt.subplots(figsize=(width, height))
    image = ax.imshow(weights.numpy(), cmap="viridis", vmin=0)
    ax.set_xticks(range(len(keys)), keys, rotation=90)
    ax.set_yticks(range(len(tokens)), tokens)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    title = title or "attention weights"
    ax.set_title("\n".join(textwrap.wrap(title, int(9 * width), break_on_hyphens=False)))  # ~9 characters an inch
    fig.colorbar(image, ax=ax, fraction=0.046)
    return _save(fig, path, title)


def _demo_bert(sentence: str) -> tuple[PreTrainedModel, dict[str, torch.Tensor], list[str]]:
    """A tiny randomly initialised BERT over the sentence's own words: shows the mechanics, not a trained model."""
    from ..configuration_bert import ScratchBertConfig
    from ..modeling_bert import ScratchBertModel

    words = ["[CLS]"] + sentence.split() + ["[SEP]"]
    vocabulary = {word: index for index, word in enumerate(dict.fromkeys(["[PAD]"] + words))}
    torch.manual_seed(0)
    config = ScratchBertConfig(
        vocab_size=len(vocabulary),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=max(64, len(words)),
    )
    model = ScratchBertModel(config)  # output_attentions=True runs the eager kernel
    inputs = {"input_ids": torch.tensor([[vocabulary[w] for w in words]])}
    return model, inputs, words


def plot_attention_for_sentence(
    path: str | Path, sentence: str, model_dir: str | None = None, layer: int = -1, head: int = 0
) -> Path:
    """Attention of one head for ``sentence``: a saved model with its tokenizer, or a tiny random BERT."""
    if model_dir is None:
        model, inputs, tokens = _demo_bert(sentence)
        origin = "random tiny BERT"
    else:
        from transformers import AutoModel, AutoTokenizer

        from ..convert import load_reference_checkpoint, needs_conversion

        try:
            tokenizer = AutoTokenizer.from_pretrained(model_dir)
        except (OSError, ValueError) as error:
            raise ValueError(
                f"No tokenizer could be loaded from {model_dir} ({error}): save the tokenizer beside the model "
                "(tokenizer.save_pretrained(model_dir)) to draw its attention for a sentence."
            ) from None
        model_type = json.loads((Path(model_dir) / "config.json").read_text()).get("model_type", "")
        # an hf_scratch checkpoint loads as is; a reference one (bert, gpt2, …) is converted to ours first
        model = (
            load_reference_checkpoint(model_dir)
            if needs_conversion(model_type)
            else AutoModel.from_pretrained(model_dir)
        )
        inputs = dict(tokenizer(sentence, return_tensors="pt"))
        if "token_type_ids" not in inspect.signature(model.forward).parameters:
            inputs.pop("token_type_ids", None)
        ids = inputs["input_ids"][0].tolist()
        tokens = tokenizer.convert_ids_to_tokens(ids)  # type: ignore[assignment]  # a list of ids: a list of tokens
        origin = "/".join(Path(model_dir).resolve().parts[-2:])
    weights = attention_weights(model, inputs, layer)
    return plot_attention(path, weights[0, head], tokens, title=f"{origin}: layer {layer}, head {head}")


# --------------------------------------------------------------------------------------------------------------
# Mask patterns, from the mask algebra of masks.py
# --------------------------------------------------------------------------------------------------------------


# Longformer's pattern (Beltagy et al. 2020 §3.1 and Figure 2: sliding window, dilation, global tokens) as a dense
# relation, for the pictures and as the tests' oracle (tests/reference.py): the model's kernel (banded_attention.py)
# computes the same relation banded, without ever building an n×n mask, so no model code uses these.


def sliding_window_mask(
    length: int, one_sided_window: int, dilation: int = 1, device: torch.device | None = None
) -> torch.Tensor:
    """(length, length) bool: query i may attend key j iff j = i + k·d for an integer |k| ≤ w, i.e.
    |i - j| ≤ w·d and d divides i - j (w = ``one_sided_window``, half the ``attention_window``; d = ``dilation``,
    1 = the plain sliding window)."""
    if one_sided_window < 0 or dilation < 1:
        raise ValueError(f"one_sided_window must be ≥ 0 and dilation ≥ 1, got {one_sided_window} and {dilation}.")
    offsets = torch.arange(length, device=device)[None, :] - torch.arange(length, device=device)[:, None]
    return (offsets.abs() <= one_sided_window * dilation) & (offsets % dilation == 0)


def longformer_mask(
    key_is_real: torch.Tensor, is_global: torch.Tensor, one_sided_window: int, dilations: tuple[int, ...]
) -> torch.Tensor:
    """(batch, heads, length, length) bool: the Longformer relation

        may_attend(i, j) = [(window ∧ dilation)(i, j) ∨ global(i) ∨ global(j)] ∧ real(i) ∧ real(j)

    with one dilation per head. Padding wins over global: a padded position marked global stays masked, and a
    padded query row may attend nothing (its output is zero)."""
    length = key_is_real.shape[-1]
    is_global = is_global & key_is_real
    window = torch.stack([sliding_window_mask(length, one_sided_window, d, key_is_real.device) for d in dilations])
    pattern = window[None] | is_global[:, None, :, None] | is_global[:, None, None, :]
    return pattern & key_is_real[:, None, :, None] & key_is_real[:, None, None, :]


def mask_patterns(length: int = 16, memory: int = 8) -> dict[str, torch.Tensor]:
    """(query, key) "may attend" relations for each family's mask, as masks.py builds them."""
    is_real = torch.ones(1, length, dtype=torch.bool)
    is_real[:, length - 4 :] = False  # the last four tokens are padding
    patterns = {
        "padding (BERT)": may_attend(length, length, torch.device("cpu"), key_padding=is_real).relation,
        "causal (GPT, decoder)": may_attend(length, length, torch.device("cpu"), causal=True).relation,
        "causal + padding": combine_masks(causal_mask(length, length, torch.device("cpu")), padding_mask(is_real)),
        f"Transformer-XL: {memory} memory + causal": causal_mask(length, memory + length, torch.device("cpu")),
    }
    patterns.update(_longformer_patterns(length))
    return {
        name: relation.expand(1, 1, length, relation.shape[-1])[0, 0]  # type: ignore[union-attr]  # each masks some
        for name, relation in patterns.items()
    }


def _longformer_patterns(length: int, one_sided_window: int = 3) -> dict[str, torch.Tensor]:
    """Window, dilated window and window + global, from ``longformer_mask``."""
    is_real = torch.ones(1, length, dtype=torch.bool)
    is_global = torch.zeros(1, length, dtype=torch.bool)
    is_global[:, 0] = True
    no_global = torch.zeros_like(is_global)
    window = 2 * one_sided_window
    return {
        f"Longformer window {window}": longformer_mask(is_real, no_global, one_sided_window, (1,)),
        f"window {window}, dilation 2": longformer_mask(is_real, no_global, one_sided_window, (2,)),
        f"window {window} + global token 0": longformer_mask(is_real, is_global, one_sided_window, (1,)),
    }


def plot_masks(path: str | Path, length: int = 16, memory: int = 8) -> Path:
    """A grid of the mask patterns (dark = may attend), with a legend."""
    plt = _pyplot()
    patterns = mask_patterns(length, memory)
    columns = min(4, len(patterns))
    rows = -(-len(patterns) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.2 * columns, 3.3 * rows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, (name, relation) in zip(axes.flat, patterns.items()):
        ax.axis("on")
        ax.imshow(relation.float().numpy(), cmap="Greys", vmin=0, vmax=1, interpolation="nearest")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("key", fontsize=8)
        ax.set_ylabel("query", fontsize=8)
        ax.tick_params(labelsize=7)
    from matplotlib.patches import Patch

    legend = [
        Patch(facecolor="black", edgecolor="grey", label="may attend"),
        Patch(facecolor="white", edgecolor="grey", label="masked (score → dtype minimum)"),
    ]
    spare = axes.flat[len(patterns)] if len(patterns) < axes.size else None  # an empty panel of the grid, if any
    if spare is not None:
        spare.legend(handles=legend, loc="center", fontsize=9, frameon=False, title="query row → key column")
    else:
        fig.legend(handles=legend, loc="lower center", ncol=2, fontsize=9, frameon=False)
    fig.tight_layout()
    return _save(fig, path)


# --------------------------------------------------------------------------------------------------------------
# Training curves
# --------------------------------------------------------------------------------------------------------------


def read_training_logs(run_dir: str | Path) -> dict[str, list[tuple[float, float]]]:
    """{metric: [(step, value), …]} from a run's ``trainer_state.json`` (newest checkpoint's, or the run's own), or
    else from its TensorBoard event files."""
    run_dir = Path(run_dir)
    states = sorted(run_dir.glob("**/trainer_state.json"), key=lambda p: p.stat().st_mtime)
    curves: dict[str, list[tuple[float, float]]] = {}
    if states:
        for entry in json.loads(states[-1].read_text()).get("log_history", []):
            step = entry.get("step")
            for name, value in entry.items():
                if name in ("loss", "eval_loss", "learning_rate", "grad_norm") and step is not None:
                    curves.setdefault(name, []).append((float(step), float(value)))
        return curves
    events = sorted(run_dir.glob("**/events.out.tfevents.*"))
    if events:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        for event_file in events:
            accumulator = EventAccumulator(str(event_file))
            accumulator.Reload()
            for tag in accumulator.Tags().get("scalars", []):
                curves.setdefault(tag, []).extend((float(e.step), float(e.value)) for e in accumulator.Scalars(tag))
        return curves
    raise ValueError(f"No trainer_state.json or TensorBoard event file under {run_dir}: pass a Trainer output_dir.")


def plot_training_curves(path: str | Path, run_dir: str | Path) -> Path:
    """Loss curves (training and evaluation) and, beside them, the learning-rate schedule."""
    plt = _pyplot()
    curves = read_training_logs(run_dir)
    loss_names = [name for name in curves if "loss" in name]
    rate_names = [name for name in curves if "learning_rate" in name]
    if not loss_names:
        raise ValueError(f"The logs under {run_dir} have no loss values: set logging_steps in TrainingArguments.")
    fig, axes = plt.subplots(1, 2 if rate_names else 1, figsize=(10 if rate_names else 5.5, 3.8), squeeze=False)
    for name in loss_names:
        steps, values = zip(*sorted(curves[name]))
        axes[0, 0].plot(steps, values, marker="." if len(steps) < 50 else None, label=name)
    axes[0, 0].set_xlabel("step")
    axes[0, 0].set_ylabel("loss")
    axes[0, 0].legend()
    axes[0, 0].grid(alpha=0.3)
    for name in rate_names:
        steps, values = zip(*sorted(curves[name]))
        axes[0, 1].plot(steps, values, label=name)
        axes[0, 1].set_xlabel("step")
        axes[0, 1].set_ylabel("learning rate")
        axes[0, 1].grid(alpha=0.3)
    fig.suptitle(Path(run_dir).name)
    fig.tight_layout()
    return _save(fig, path)


# --------------------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------------------


def render_all(
    out_dir: str | Path,
    run_dir: str | Path | None = None,
    model_dir: str | None = None,
    sentence: str = "the cat sat on the mat because it was tired",
    layer: int = -1,
    head: int = 0,
) -> list[Path]:
    """Render every picture into ``out_dir``; training curves only when a run directory is given."""
    out_dir = Path(out_dir)
    paths = [
        plot_positional_encoding(out_dir / "positional_encoding.png"),
        plot_attention_for_sentence(out_dir / "attention.png", sentence, model_dir, layer, head),
        plot_masks(out_dir / "masks.png"),
    ]
    if run_dir is not None:
        paths.append(plot_training_curves(out_dir / "training_curves.png", run_dir))
    return paths


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m hf_scratch.tools.viz", description="Render hf_scratch's pictures to PNG."
    )
    parser.add_argument("out_dir")
    parser.add_argument(
        "--run", help="a Trainer output_dir (trainer_state.json or TensorBoard logs) for training curves"
    )
    parser.add_argument("--model", help="a saved model directory with its tokenizer for the attention picture")
    parser.add_argument("--sentence", default="the cat sat on the mat because it was tired")
    parser.add_argument("--layer", type=int, default=-1, help="layer of the attention picture (default: the last)")
    parser.add_argument("--head", type=int, default=0, help="head of the attention picture")
    args = parser.parse_args(argv)
    for path in render_all(args.out_dir, args.run, args.model, args.sentence, args.layer, args.head):
        print(path)


if __name__ == "__main__":
    main()

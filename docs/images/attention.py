"""Draw ``docs/images/attention.png``, the Transformer page's attention picture: the encoder-decoder's own
cross-attention (Vaswani et al. 2017 §3.2.3, "encoder-decoder attention"), from a small ``ScratchTransformer`` trained
here with ``training/run_translation.py`` on German→English software messages (``../shared/data/gettext-de-en``,
the data the replications use), for one validation sentence the model never trained on. Each row is the decoder
step that writes the token named on the left (its greedy translation), each column a source token; the weights
are the top decoder layer's, averaged over its heads, drawn by ``hf_scratch.tools.viz.plot_attention``, which
writes the picture's title into the PNG (the page's caption quotes it).

    python docs/images/attention.py                  # trains (24 minutes on one thread of a busy 2-core machine)
    python docs/images/attention.py --model DIR      # draws from a model this script trained before
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data" / "gettext-de-en"
PICTURE = Path(__file__).resolve().parent / "attention.png"
SENTENCE = 3  # the validation pair drawn: the fourth line of validation.jsonl
# d_model 128, 2 + 2 layers of 4 heads, pre-LN (the replications' choice for short training: transformer_ablations.py)
OVERRIDES = (
    "hidden_size=128,encoder_layers=2,decoder_layers=2,encoder_attention_heads=4,decoder_attention_heads=4,"
    "encoder_ffn_dim=512,decoder_ffn_dim=512,pre_norm=true,hidden_dropout_prob=0.0"
)
STEPS = 1500


def train(output_dir: Path) -> None:
    for name in ("train.jsonl", "validation.jsonl"):
        if not (DATA / name).is_file():
            raise SystemExit(f"{DATA / name} is missing: the picture's model trains on gettext-de-en (../shared/data).")
    command = [
        sys.executable,
        str(REPO / "training" / "run_translation.py"),
        "--model_type=scratch-transformer",
        f"--config_overrides={OVERRIDES}",
        f"--train_file={DATA / 'train.jsonl'}",
        f"--validation_file={DATA / 'validation.jsonl'}",
        "--source_lang=de",
        "--target_lang=en",
        "--max_source_length=40",
        "--max_target_length=40",
        f"--max_steps={STEPS}",
        "--per_device_train_batch_size=64",
        "--learning_rate=2e-3",
        "--warmup_steps=100",
        "--adam_beta2=0.98",
        "--label_smoothing_factor=0.1",
        "--max_eval_samples=100",
        "--logging_steps=100",
        "--seed=0",
        f"--output_dir={output_dir}",
    ]
    subprocess.run(command, check=True, cwd=REPO)


def draw(model_dir: Path, path: Path = PICTURE) -> Path:
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    import hf_scratch  # noqa: F401  (registers the model types)
    from hf_scratch.tools.viz import plot_attention

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir).eval()
    lines = (DATA / "validation.jsonl").read_text(encoding="utf-8").splitlines()
    pair = json.loads(lines[SENTENCE])["translation"]
    source = tokenizer(pair["de"], return_tensors="pt")
    with torch.no_grad():
        written = model.generate(**source, max_length=40, num_beams=1, do_sample=False)
        outputs = model(**source, decoder_input_ids=written[:, :-1], output_attentions=True)
    layers = len(outputs.cross_attentions)
    weights = outputs.cross_attentions[-1][0].mean(dim=0)  # (target steps, source tokens), the heads' mean
    heads = outputs.cross_attentions[-1].shape[1]
    rows = tokenizer.convert_ids_to_tokens(written[0, 1:].tolist())  # the token each decoder step writes
    columns = tokenizer.convert_ids_to_tokens(source["input_ids"][0].tolist())
    steps = json.loads((model_dir / "trainer_state.json").read_text())["global_step"]
    title = (
        f"ScratchTransformer de→en, {steps} steps on gettext-de-en: "
        f"cross-attention of decoder layer {layers} of {layers}, mean of {heads} heads"
    )
    translation = tokenizer.decode(written[0], skip_special_tokens=True)
    print(f"source: {pair['de']!r}\nreference: {pair['en']!r}\nwritten: {translation!r}")
    return plot_attention(path, weights, rows, title=title, key_tokens=columns)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="a model this script trained (default: train one into runs/)")
    args = parser.parse_args(argv)
    model_dir = args.model
    if model_dir is None:
        model_dir = REPO / "runs" / "attention-picture"
        train(model_dir)
    print(draw(model_dir))


if __name__ == "__main__":
    main()

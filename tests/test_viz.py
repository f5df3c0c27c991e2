"""hf_scratch.tools.viz: the pictures are produced, are real images with content, and show the right relations."""

import json

import pytest
import torch

pytest.importorskip("matplotlib")

from hf_scratch.tools import viz  # noqa: E402


def _image_has_content(path, min_bytes: int = 5_000) -> None:
    import matplotlib.image

    assert path.exists() and path.stat().st_size > min_bytes, f"{path} missing or tiny"
    pixels = matplotlib.image.imread(path)
    assert pixels.ndim == 3 and pixels.shape[0] > 100 and pixels.shape[1] > 100
    assert float(pixels[..., :3].std()) > 0.05, f"{path} is (nearly) a blank image"


def test_command_renders_every_picture(tmp_path):
    viz.main([str(tmp_path), "--sentence", "the cat sat on the mat"])
    for name in ("positional_encoding.png", "attention.png", "masks.png"):
        _image_has_content(tmp_path / name)


def test_cross_attention_has_its_own_key_tokens_and_records_its_title(tmp_path):
    from PIL import Image

    target, source = ["<s>", "the", "cat"], ["die", "Katze", "schläft", "</s>"]
    weights = torch.softmax(torch.randn(len(target), len(source)), dim=-1)
    path = viz.plot_attention(tmp_path / "cross.png", weights, target, title="cross-attention", key_tokens=source)
    _image_has_content(path, min_bytes=3_000)
    with Image.open(path) as image:
        assert image.info["Title"] == "cross-attention"  # what a caption of the picture must name
    with pytest.raises(ValueError, match="key_tokens"):
        viz.plot_attention(tmp_path / "wrong.png", weights, target)  # 3 × 4 weights, 3 tokens both ways


def test_mask_patterns_are_the_attention_relations():
    patterns = viz.mask_patterns(length=12, memory=4)
    causal = patterns["causal (GPT, decoder)"]
    assert torch.equal(causal, torch.ones(12, 12, dtype=torch.bool).tril())
    padding = patterns["padding (BERT)"]
    assert padding[:, :8].all() and not padding[:, 8:].any()  # the last four keys are padding
    memory = patterns["Transformer-XL: 4 memory + causal"]
    assert memory.shape == (12, 16) and memory[:, :4].all()  # every query sees the whole memory ...
    assert torch.equal(memory[:, 4:], causal)  # ... and the current segment causally
    if "Longformer window 6" in patterns:
        window = patterns["Longformer window 6"]
        assert window[5, 2] and window[5, 8] and not window[5, 1] and not window[5, 9]
        dilated = patterns["window 6, dilation 2"]
        assert dilated[6, 0] and dilated[6, 4] and not dilated[6, 5]
        with_global = patterns["window 6 + global token 0"]
        assert with_global[0].all() and with_global[:, 0].all()


def _trainer_state(directory, steps=20):
    history = [
        {"step": s, "loss": 5.0 / s, "learning_rate": 1e-3 * (1 - s / steps), "epoch": s / steps}
        for s in range(1, steps + 1)
    ]
    history += [{"step": s, "eval_loss": 6.0 / s} for s in (5, 10, 15, 20)]
    (directory / "checkpoint-20").mkdir(parents=True)
    (directory / "checkpoint-20" / "trainer_state.json").write_text(json.dumps({"log_history": history}))


def test_training_curves_from_trainer_state(tmp_path):
    _trainer_state(tmp_path / "run")
    curves = viz.read_training_logs(tmp_path / "run")
    assert [v for _, v in curves["eval_loss"]] == [6.0 / s for s in (5, 10, 15, 20)]
    assert len(curves["loss"]) == 20 and len(curves["learning_rate"]) == 20
    _image_has_content(viz.plot_training_curves(tmp_path / "curves.png", tmp_path / "run"))


def test_training_curves_from_tensorboard(tmp_path):
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "run" / "runs"))
    for step in range(1, 11):
        writer.add_scalar("train/loss", 3.0 / step, step)
    writer.close()
    curves = viz.read_training_logs(tmp_path / "run")
    assert [step for step, _ in curves["train/loss"]] == list(range(1, 11))
    _image_has_content(viz.plot_training_curves(tmp_path / "curves.png", tmp_path / "run"))


def test_no_logs_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="trainer_state.json"):
        viz.read_training_logs(tmp_path)


def test_attention_rows_are_distributions():
    model, inputs, tokens = viz._demo_bert("a b c d")
    weights = viz.attention_weights(model, inputs)
    assert weights.shape[-2:] == (len(tokens), len(tokens))
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))

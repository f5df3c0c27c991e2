"""Robustness across every family: hypothesis properties over random small configurations, and a table of bad
inputs that must each be answered by a ValueError naming the field and the fix.

Properties (each family where it applies): padding invariance, causal / window no-leak, cached ≡ uncached,
memory ≡ full context (Transformer-XL), eager ≡ fast path, save → load ≡, no NaN/inf in fp32, bf16 (and fp16 where
this CPU runs it) including fully masked rows. Families are picked up from ``hf_scratch`` as they exist.
"""

from __future__ import annotations

import copy
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import hf_scratch

FEW = settings(max_examples=4, deadline=None)
ATOL = 1e-4


def _close(actual: torch.Tensor, expected: torch.Tensor, atol: float = ATOL) -> None:
    torch.testing.assert_close(actual, expected, atol=atol, rtol=atol)


def _randomise(model: torch.nn.Module) -> torch.nn.Module:
    """Perturb every parameter (LayerNorm weights, biases, zero-initialised clusters) so every term matters."""
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)
    return model.eval()


# --------------------------------------------------------------------------------------------------------------
# The families, as small random configurations
# --------------------------------------------------------------------------------------------------------------


@dataclass
class Family:
    """How to build a family's main head from drawn sizes, and how to feed it (ids, mask) → model kwargs."""

    name: str
    config: Callable[[dict], object]  # drawn sizes → config
    head: str  # class name in hf_scratch
    seq2seq: bool = False  # padding goes on the source; outputs are per decoder position
    causal: bool = False  # decoder-only causal LM
    padding_side: str = "right"
    fast_switch: Optional[dict] = None  # config change that selects the other kernel (default: eager vs sdpa)
    extra_inputs: Callable[[dict, torch.Tensor], dict] = field(default=lambda sizes, ids: {})

    @property
    def available(self) -> bool:
        return hasattr(hf_scratch, self.head)

    def build(self, sizes: dict, attn_implementation: str = "sdpa", **overrides):
        config = self.config(sizes, **overrides)
        torch.manual_seed(sizes["seed"])
        model = getattr(hf_scratch, self.head)._from_config(config, attn_implementation=attn_implementation)
        return _randomise(model)

    def inputs(self, sizes: dict, ids: torch.Tensor, mask: Optional[torch.Tensor]) -> dict:
        kwargs = {"input_ids": ids, "attention_mask": mask}
        if self.seq2seq:
            kwargs["decoder_input_ids"] = sizes["decoder_ids"][: ids.shape[0]]
        kwargs.update(self.extra_inputs(sizes, ids))
        return kwargs


def _bert(s, **overrides):
    return hf_scratch.ScratchBertConfig(**{**dict(
        vocab_size=s["vocab"], hidden_size=s["hidden"], num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
        intermediate_size=2 * s["hidden"], max_position_embeddings=32, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    ), **overrides})


def _gpt(s, **overrides):
    return hf_scratch.ScratchGPTConfig(**{**dict(
        vocab_size=s["vocab"], hidden_size=s["hidden"], num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
        intermediate_size=2 * s["hidden"], max_position_embeddings=32, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, embedding_dropout_prob=0.0, pad_token_id=0,
        layer_norm_placement="pre" if s["variant"] else "post",
    ), **overrides})


def _transformer(s, **overrides):
    return hf_scratch.ScratchTransformerConfig(**{**dict(
        vocab_size=s["vocab"], hidden_size=s["hidden"], encoder_layers=s["layers"], decoder_layers=s["layers"],
        encoder_attention_heads=s["heads"], decoder_attention_heads=s["heads"], encoder_ffn_dim=2 * s["hidden"],
        decoder_ffn_dim=2 * s["hidden"], max_position_embeddings=32, hidden_dropout_prob=0.0, pre_norm=s["variant"],
    ), **overrides})


def _transfo_xl(s, **overrides):
    vocab = s["vocab"]
    return hf_scratch.ScratchTransfoXLConfig(**{**dict(
        vocab_size=vocab, cutoffs=[vocab // 3, 2 * vocab // 3], div_val=2 if s["variant"] else 1,
        hidden_size=s["hidden"], embedding_size=s["hidden"], num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"], head_dim=s["hidden"] // s["heads"], intermediate_size=2 * s["hidden"],
        mem_len=s["mem_len"], clamp_len=64, same_length=False, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    ), **overrides})


def _longformer(s, **overrides):
    return hf_scratch.ScratchLongformerConfig(**{**dict(
        vocab_size=s["vocab"], hidden_size=s["hidden"], num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
        intermediate_size=2 * s["hidden"], max_position_embeddings=64, attention_window=2 * s["one_sided_window"],
        attention_dilation=s["dilation"], hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, pad_token_id=1,
    ), **overrides})


def _longformer_globals(s, ids):
    is_global = torch.zeros_like(ids)
    if s["variant"]:
        is_global[:, 0] = 1  # a classification-style global first token
    return {"global_attention_mask": is_global}


def _rnn(s, **overrides):
    return hf_scratch.ScratchRNNConfig(**{**dict(
        vocab_size=s["vocab"], hidden_size=s["hidden"], encoder_layers=s["layers"], decoder_layers=s["layers"],
        cell_type=s["cell_type"], attention_type=s["attention_type"], bidirectional_encoder=s["variant"],
        hidden_dropout_prob=0.0,
    ), **overrides})


FAMILIES = {
    "bert": Family("bert", _bert, "ScratchBertForMaskedLM"),
    "gpt": Family("gpt", _gpt, "ScratchGPTLMHeadModel", causal=True, padding_side="left"),
    "transformer": Family("transformer", _transformer, "ScratchTransformerForConditionalGeneration", seq2seq=True),
    "transfo_xl": Family("transfo_xl", _transfo_xl, "ScratchTransfoXLLMHeadModel", causal=True, padding_side="left"),
    "longformer": Family("longformer", _longformer, "ScratchLongformerForMaskedLM", extra_inputs=_longformer_globals),
    "rnn": Family("rnn", _rnn, "ScratchRNNForConditionalGeneration", seq2seq=True,
                  fast_switch={"rnn_implementation": ("cells", "fused")}),
}
PRESENT = [name for name, family in FAMILIES.items() if family.available]
CAUSAL = [name for name in PRESENT if FAMILIES[name].causal or FAMILIES[name].seq2seq]
CACHED = [name for name in PRESENT if name in ("gpt", "transformer", "rnn")]


def test_every_family_of_the_package_is_covered():
    configs = {name for name in dir(hf_scratch) if name.startswith("Scratch") and name.endswith("Config")}
    covered = {type(FAMILIES[name].config(_fixed_sizes())).__name__ for name in PRESENT}
    assert configs - {"ScratchConfig"} <= covered, f"families without robustness coverage: {configs - covered}"


@st.composite
def sizes(draw, family: str):
    heads = draw(st.sampled_from([1, 2, 4]))
    s = {
        "seed": draw(st.integers(0, 2**16)),
        "vocab": draw(st.integers(24, 60)),
        "hidden": heads * draw(st.sampled_from([4, 8])),
        "heads": heads,
        "layers": draw(st.integers(1, 2)),
        "batch": draw(st.integers(1, 2)),
        "length": draw(st.integers(2, 9)),
        "pad": draw(st.integers(1, 4)),
        "variant": draw(st.booleans()),
        "mem_len": draw(st.integers(0, 6)),
        "one_sided_window": draw(st.integers(1, 3)),
        "dilation": draw(st.integers(1, 2)),
        "cell_type": draw(st.sampled_from(["rnn", "lstm", "gru", "gru_cho"])),
        "attention_type": draw(st.sampled_from(["none", "bahdanau", "luong-dot", "luong-general", "luong-concat"])),
    }
    generator = torch.Generator().manual_seed(s["seed"])
    s["ids"] = torch.randint(3, s["vocab"], (s["batch"], s["length"]), generator=generator)
    s["decoder_ids"] = torch.randint(3, s["vocab"], (s["batch"], draw(st.integers(1, 6))), generator=generator)
    return s


def _fixed_sizes() -> dict:
    return {"seed": 0, "vocab": 30, "hidden": 8, "heads": 2, "layers": 1, "batch": 2, "length": 6, "pad": 2,
            "variant": False, "mem_len": 4, "one_sided_window": 1, "dilation": 1, "cell_type": "lstm",
            "attention_type": "bahdanau", "ids": torch.randint(3, 30, (2, 6)), "decoder_ids": torch.randint(3, 30, (2, 3))}


def _logits(model, kwargs) -> torch.Tensor:
    with torch.no_grad():
        return model(**kwargs).logits


def _changed(ids: torch.Tensor, where, vocab: int) -> torch.Tensor:
    """A copy of ``ids`` with the tokens at ``where`` (an index or slice of positions) replaced by other ids ≥ 3."""
    changed = ids.clone()
    changed[:, where] = (changed[:, where] - 2) % (vocab - 3) + 3
    return changed


def _pad_id(model) -> int:
    return model.config.pad_token_id if model.config.pad_token_id is not None else 0


# --------------------------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", PRESENT)
@FEW
@given(data=st.data())
def test_padding_invariance(name, data):
    """Padding the batch (with attention_mask 0) changes nothing at the real tokens."""
    family, s = FAMILIES[name], data.draw(sizes(name))
    model = family.build(s)
    ids, pad = s["ids"], s["pad"]
    padding = torch.full((ids.shape[0], pad), _pad_id(model))
    real, none = torch.ones_like(ids), torch.zeros_like(padding)
    if family.padding_side == "left":
        padded, mask, keep = torch.cat([padding, ids], 1), torch.cat([none, real], 1), slice(pad, None)
    else:
        padded, mask, keep = torch.cat([ids, padding], 1), torch.cat([real, none], 1), slice(0, ids.shape[1])
    alone = _logits(model, family.inputs(s, ids, None))
    batched = _logits(model, family.inputs(s, padded, mask))
    _close(batched if family.seq2seq else batched[:, keep], alone)


@pytest.mark.parametrize("name", CAUSAL)
@FEW
@given(data=st.data())
def test_causal_no_leak(name, data):
    """Changing the token at position t changes no output before t (for seq2seq: decoder positions)."""
    family, s = FAMILIES[name], data.draw(sizes(name))
    model = family.build(s)
    source, targets = s["ids"], s["decoder_ids"] if family.seq2seq else s["ids"]
    assume(targets.shape[1] >= 2)
    t = data.draw(st.integers(1, targets.shape[1] - 1))
    key = "decoder_input_ids" if family.seq2seq else "input_ids"
    before = _logits(model, family.inputs(s, source, None))
    after = _logits(model, {**family.inputs(s, source, None), key: _changed(targets, t, s["vocab"])})
    _close(after[:, :t], before[:, :t])
    assert not torch.allclose(after[:, t:], before[:, t:]), "the changed token had no effect at all"


@pytest.mark.skipif("longformer" not in PRESENT, reason="the Longformer family is not in this checkout")
@FEW
@given(data=st.data())
def test_longformer_window_no_leak(data):
    """Without global tokens, position 0 sees only keys within layers × window × dilation: a change further away
    does not reach it, a change at the edge of that field does."""
    family, s = FAMILIES["longformer"], data.draw(sizes("longformer"))
    s["variant"] = False  # no global tokens
    reach = s["layers"] * s["one_sided_window"] * s["dilation"]
    length = reach + 2 + s["pad"]
    ids = torch.randint(3, s["vocab"], (1, length), generator=torch.Generator().manual_seed(s["seed"]))
    model = family.build(s)
    far = _changed(ids, slice(reach + 1, None), s["vocab"])
    base = _logits(model, family.inputs(s, ids, None))
    _close(_logits(model, family.inputs(s, far, None))[:, 0], base[:, 0])
    near = _changed(ids, reach, s["vocab"])
    assert not torch.allclose(_logits(model, family.inputs(s, near, None))[:, 0], base[:, 0])


@pytest.mark.parametrize("name", CACHED)
@FEW
@given(data=st.data())
def test_cached_equals_uncached(name, data):
    """Decoding the last tokens one at a time with the cache gives the logits of one full forward."""
    family, s = FAMILIES[name], data.draw(sizes(name))
    model = family.build(s)
    targets = s["decoder_ids"] if family.seq2seq else s["ids"]
    assume(targets.shape[1] >= 2)
    start = data.draw(st.integers(1, targets.shape[1] - 1))
    key = "decoder_input_ids" if family.seq2seq else "input_ids"
    full = _logits(model, family.inputs(s, s["ids"], None))
    with torch.no_grad():
        output = model(**{**family.inputs(s, s["ids"], None), key: targets[:, :start]}, use_cache=True)
        steps = [output.logits]
        for t in range(start, targets.shape[1]):
            output = model(**{**family.inputs(s, s["ids"], None), key: targets[:, t : t + 1]},
                           past_key_values=output.past_key_values, use_cache=True)
            steps.append(output.logits)
    _close(torch.cat(steps, dim=1), full)


@pytest.mark.skipif("transfo_xl" not in PRESENT, reason="the Transformer-XL family is not in this checkout")
@FEW
@given(data=st.data())
def test_transfo_xl_memory_equals_full_context(data):
    """Segment B with the memory of segment A scores as the tail of one pass over A + B (mem_len ≥ |A|)."""
    family, s = FAMILIES["transfo_xl"], data.draw(sizes("transfo_xl"))
    assume(s["length"] >= 2)
    split = data.draw(st.integers(1, s["length"] - 1))
    s["mem_len"] = split + data.draw(st.integers(0, 3))
    model = family.build(s)
    ids = s["ids"]
    whole = _logits(model, {"input_ids": ids})
    with torch.no_grad():
        first = model(ids[:, :split])
        second = model(ids[:, split:], mems=first.mems)
    _close(second.logits, whole[:, split:])


@pytest.mark.parametrize("name", PRESENT)
@FEW
@given(data=st.data())
def test_eager_equals_fast_path(name, data):
    """The readable kernel and the fast one agree (eager vs SDPA; for the RNN, per-step cells vs fused), padded."""
    family, s = FAMILIES[name], data.draw(sizes(name))
    if family.fast_switch:
        (option, (slow, fast)), = family.fast_switch.items()
        reference, other = family.build(s, **{option: slow}), family.build(s, **{option: fast})
    else:
        reference, other = family.build(s, "eager"), family.build(s, "sdpa")
    ids = s["ids"]
    mask = torch.ones_like(ids)
    mask[-1, ids.shape[1] // 2 + 1 :] = 0  # the last row is partly padding
    if family.padding_side == "left":
        mask = mask.flip(1)
    kwargs = family.inputs(s, ids, mask)
    _close(_logits(other, kwargs), _logits(reference, kwargs))


@pytest.mark.parametrize("name", PRESENT)
@settings(max_examples=2, deadline=None)
@given(data=st.data())
def test_save_load_roundtrip(name, data):
    family, s = FAMILIES[name], data.draw(sizes(name))
    model = family.build(s)
    kwargs = family.inputs(s, s["ids"], None)
    with tempfile.TemporaryDirectory() as directory:
        model.save_pretrained(directory)
        loaded = type(model).from_pretrained(directory).eval()
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), loaded.state_dict().values()))
    _close(_logits(loaded, kwargs), _logits(model, kwargs), atol=1e-6)  # same weights; BLAS may reorder sums


def _fp16_runs_on_this_cpu() -> bool:
    try:
        torch.nn.functional.scaled_dot_product_attention(*(torch.randn(1, 1, 2, 4, dtype=torch.float16),) * 3)
        return True
    except RuntimeError:
        return False


DTYPES = [torch.float32, torch.bfloat16] + ([torch.float16] if _fp16_runs_on_this_cpu() else [])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", PRESENT)
@settings(max_examples=2, deadline=None)
@given(data=st.data())
def test_no_nan_or_inf_with_fully_masked_rows(name, dtype, data):
    """A batch with a row that is all padding (for seq2seq: an all-padding source) gives finite outputs everywhere."""
    family, s = FAMILIES[name], data.draw(sizes(name))
    model = family.build(s).to(dtype)
    ids = s["ids"].repeat(2, 1)[:2]
    mask = torch.ones_like(ids)
    mask[1] = 0
    kwargs = family.inputs(s, ids, mask)
    if family.seq2seq:
        kwargs["decoder_input_ids"] = s["decoder_ids"].repeat(2, 1)[:2]
    with torch.no_grad():
        logits = model(**kwargs).logits
    assert logits.dtype == dtype or logits.dtype == torch.float32
    assert torch.isfinite(logits).all(), f"{name} in {dtype}: non-finite outputs"


# --------------------------------------------------------------------------------------------------------------
# Bad input: a ValueError naming the field and the fix, before any kernel runs
# --------------------------------------------------------------------------------------------------------------

_MODELS: dict[str, torch.nn.Module] = {}


def tiny(name: str):
    if name not in _MODELS:
        s = _fixed_sizes()
        s["vocab"], s["mem_len"] = 30, 4
        _MODELS[name] = FAMILIES[name].build(s)
    return _MODELS[name]


def call(name: str, ids=None, mask=None, **extra):
    """Run the family's tiny model on ``ids`` (default: a valid 2 × 6 batch) with ``mask`` and ``extra`` inputs."""
    model = tiny(name)
    s = _fixed_sizes()
    ids = s["ids"] if ids is None else ids
    kwargs = FAMILIES[name].inputs(s, ids, mask)
    kwargs.update(extra)
    return model(**kwargs)


def config_with(name: str, **overrides):
    return FAMILIES[name].config(_fixed_sizes(), **overrides)


CONFIG_CASES = [
    ("bert", {"hidden_size": 30, "num_attention_heads": 4}, "num_attention_heads"),
    ("gpt", {"num_hidden_layers": 0}, "num_hidden_layers"),
    ("transformer", {"hidden_dropout_prob": 1.5}, "hidden_dropout_prob"),
    ("transfo_xl", {"mem_len": -1}, "mem_len"),
    ("longformer", {"attention_window": 3}, "attention_window"),
    ("rnn", {"cell_type": "transformer"}, "cell_type"),
    ("bert", {"vocab_size": 0}, "vocab_size"),
]


@pytest.mark.parametrize("name,overrides,field_name", [c for c in CONFIG_CASES if c[0] in PRESENT])
def test_invalid_config_values(name, overrides, field_name):
    with pytest.raises(ValueError, match=field_name):
        config_with(name, **overrides)


def _long(name):
    return torch.randint(3, 30, (1, 70))  # every tiny config has ≤ 64 positions


INPUT_CASES = [
    # (case, families, inputs, words the message must contain)
    ("over-long sequence", ["bert", "gpt", "longformer", "transformer"], lambda n: {"ids": _long(n)}, "max_position_embeddings"),
    ("id ≥ vocab_size", PRESENT, lambda n: {"ids": torch.full((2, 6), 30)}, "vocab"),
    ("negative id", PRESENT, lambda n: {"ids": torch.full((2, 6), -1)}, "vocab"),
    ("float ids", PRESENT, lambda n: {"ids": torch.ones(2, 6)}, "input_ids"),
    ("mask of the wrong shape", PRESENT, lambda n: {"mask": torch.ones(2, 5, dtype=torch.long)}, "attention_mask"),
    ("additive mask instead of 0/1", PRESENT, lambda n: {"mask": torch.full((2, 6), -10000.0)}, "attention_mask"),
    ("mask of complex dtype", PRESENT, lambda n: {"mask": torch.ones(2, 6, dtype=torch.complex64)}, "attention_mask"),
]


@pytest.mark.parametrize(
    "case,name,make,words",
    [(case, name, make, words) for case, names, make, words in INPUT_CASES for name in names if name in PRESENT],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_bad_inputs(case, name, make, words):
    with pytest.raises(ValueError, match=words):
        call(name, **make(name))


@pytest.mark.skipif("transfo_xl" not in PRESENT, reason="the Transformer-XL family is not in this checkout")
@pytest.mark.parametrize(
    "mems",
    [
        [torch.zeros(2, 4, 8)] * 2,  # two layers' memory for a one-layer model
        [torch.zeros(2, 4, 7)],  # wrong hidden size
        [torch.zeros(3, 4, 8)],  # wrong batch
        torch.zeros(1, 2, 4, 8),  # a tensor, not one tensor per layer
    ],
    ids=["layers", "hidden", "batch", "not-a-list"],
)
def test_mems_of_the_wrong_shape(mems):
    assert tiny("transfo_xl").config.num_hidden_layers == 1 and tiny("transfo_xl").config.hidden_size == 8
    with pytest.raises(ValueError, match="mems"):
        call("transfo_xl", mems=mems)


# ---- checkpoints --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def saved_checkpoint(tmp_path_factory):
    directory = tmp_path_factory.mktemp("checkpoint")
    tiny(PRESENT[0]).save_pretrained(directory)
    return directory


def _copy_with_weights(source: Path, target: Path, weights: bytes) -> Path:
    target.mkdir()
    (target / "config.json").write_text((source / "config.json").read_text())
    (target / "model.safetensors").write_bytes(weights)
    return target


@pytest.mark.parametrize(
    "damage",
    [lambda b: b[: len(b) // 2], lambda b: b[:-3], lambda b: b + b"extra", lambda b: b"\0" * len(b), lambda b: b[:5],
     lambda b: (len(b) * 2).to_bytes(8, "little") + b[8:]],
    ids=["half", "last-bytes-cut", "trailing-garbage", "zeros", "five-bytes", "header-length-too-big"],
)
@pytest.mark.parametrize("loader", ["class", "auto"])
def test_truncated_or_corrupted_safetensors(saved_checkpoint, tmp_path, damage, loader):
    import transformers

    weights = (saved_checkpoint / "model.safetensors").read_bytes()
    directory = _copy_with_weights(saved_checkpoint, tmp_path / "damaged", damage(weights))
    model_class = type(tiny(PRESENT[0]))
    load = model_class.from_pretrained if loader == "class" else transformers.AutoModelForMaskedLM.from_pretrained
    with pytest.raises(ValueError, match="safetensors.*(save|download)"):
        load(directory)


def test_intact_checkpoint_still_loads(saved_checkpoint):
    model = tiny(PRESENT[0])
    loaded = type(model).from_pretrained(saved_checkpoint)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), loaded.state_dict().values()))


@pytest.mark.skipif(len(PRESENT) < 2, reason="needs two families")
def test_checkpoint_of_another_model_type(saved_checkpoint):
    other = type(tiny(PRESENT[1]))
    with pytest.raises(ValueError, match="model_type"):
        other.from_pretrained(saved_checkpoint)


def test_failed_save_leaves_no_checkpoint_that_loads(tmp_path, monkeypatch):
    """A save that dies while writing the weights (disk full, killed) must not leave a directory that loads."""
    import transformers.modeling_utils

    real_save = transformers.modeling_utils.safe_save_file

    def dies_halfway(tensors, filename, metadata=None):
        real_save(tensors, filename, metadata=metadata)
        data = Path(filename).read_bytes()
        Path(filename).write_bytes(data[: len(data) // 2])
        raise OSError("No space left on device")

    monkeypatch.setattr(transformers.modeling_utils, "safe_save_file", dies_halfway)
    model = tiny(PRESENT[0])
    with pytest.raises(OSError):
        model.save_pretrained(tmp_path / "out")
    monkeypatch.undo()
    with pytest.raises((ValueError, OSError)):
        type(model).from_pretrained(tmp_path / "out")


@pytest.mark.skipif("transformer" not in PRESENT, reason="the encoder-decoder family is not in this checkout")
def test_missing_tokenizer():
    """(transformers' own ``pipeline()`` factory refuses a model object without a tokenizer before our code runs.)"""
    from hf_scratch import ScratchSeq2SeqPipeline

    translate = ScratchSeq2SeqPipeline(model=tiny("transformer"), tokenizer=None)
    with pytest.raises(ValueError, match="tokenizer=") as error:
        translate("ein kleiner satz")
    assert "tokenizer" in str(error.value)


def test_missing_tokenizer_for_pictures(saved_checkpoint, tmp_path):
    pytest.importorskip("matplotlib")
    from hf_scratch import viz

    with pytest.raises(ValueError, match="tokenizer"):
        viz.plot_attention_for_sentence(tmp_path / "a.png", "a b c", model_dir=str(saved_checkpoint))

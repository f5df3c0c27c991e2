"""Robustness across every family: hypothesis properties over random small configurations, and a table of bad
inputs that must each be answered by a ValueError naming the field and the fix.

Properties (each family where it applies): padding invariance, causal / window no-leak, cached ≡ uncached,
memory ≡ full context (Transformer-XL), eager ≡ fast path, fully masked rows (no NaN/inf in fp32, no attention
weight, bf16 and fp16 within rounding of fp32); for every family of ``tests/families.py``. Each invariant is checked
here once, for every family; the family files keep what only their family has.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from comparing import close as _close
from comparing import close_to_fp32
from dispatch import computing, recording_ops
from families import CACHED, CAUSAL, FAMILIES, NAMES, fixed_sizes, sizes
from families import changed as _changed
from families import logits as _logits
from families import pad_id as _pad_id
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import hf_scratch
from hf_scratch.modeling_common import cache_argument, returned_cache

FEW = settings(max_examples=4, deadline=None)


def for_each(names: list[str], examples: int = 4):
    """Parametrise a hypothesis test ``test(name, data)`` over the families ``names``, ``examples`` draws each."""

    def decorate(test):
        drawing = settings(max_examples=examples, deadline=None)(given(data=st.data())(test))
        return pytest.mark.parametrize("name", names)(drawing)

    return decorate


def drawn(name: str, data) -> tuple:
    """(the family, sizes drawn for it, its main head built from them)."""
    family, s = FAMILIES[name], data.draw(sizes(name))
    return family, s, family.build(s)


KERNELS = ("reference", "fast")  # eager vs SDPA; for the RNN, per-step cells vs torch's fused recurrence


def build_with(family, s: dict, kernel: str):
    """The family's main head on sizes ``s``, running its readable (``"reference"``) or its ``"fast"`` kernel."""
    if family.fast_switch:
        ((option, (slow, fast)),) = family.fast_switch.items()
        return family.build(s, **{option: slow if kernel == "reference" else fast})
    return family.build(s, "eager" if kernel == "reference" else "sdpa")


def padded_mask(family, ids: torch.Tensor, pad: int) -> torch.Tensor:
    """attention_mask for ``ids`` with the last row's ``pad`` first (left-padding families) or last tokens padding."""
    mask = torch.ones_like(ids)
    if pad:
        mask[-1, :pad] = 0
        if family.padding_side == "right":
            mask = mask.flip(1)
    return mask


def test_every_family_of_the_package_is_covered():
    configs = {name for name in dir(hf_scratch) if name.startswith("Scratch") and name.endswith("Config")}
    covered = {type(FAMILIES[name].config(fixed_sizes())).__name__ for name in NAMES}
    assert configs - {"ScratchConfig"} <= covered, f"families without robustness coverage: {configs - covered}"


# --------------------------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------------------------


@for_each(NAMES)
def test_padding_invariance(name, data):
    """Padding the batch (with attention_mask 0) changes nothing at the real tokens, whatever ids the padding holds
    (the pad id, or other tokens: the mask alone decides)."""
    family, s, model = drawn(name, data)
    ids, pad = s["ids"], s["pad"]
    padding = torch.full((ids.shape[0], pad), _pad_id(model))
    garbage = torch.randint(3, s["vocab"], padding.shape, generator=torch.Generator().manual_seed(s["seed"]))
    real, none = torch.ones_like(ids), torch.zeros_like(padding)
    alone = _logits(model, family.inputs(s, ids, None))
    for filler in (padding, garbage):
        if family.padding_side == "left":
            padded, mask, keep = torch.cat([filler, ids], 1), torch.cat([none, real], 1), slice(pad, None)
        else:
            padded, mask, keep = torch.cat([ids, filler], 1), torch.cat([real, none], 1), slice(0, ids.shape[1])
        batched = _logits(model, family.inputs(s, padded, mask))
        _close(batched if family.seq2seq else batched[:, keep], alone)


@for_each(CAUSAL)
def test_causal_no_leak(name, data):
    """Changing the token at position t changes no output before t (for seq2seq: decoder positions)."""
    family, s, model = drawn(name, data)
    source, targets = s["ids"], s["decoder_ids"] if family.seq2seq else s["ids"]
    assume(targets.shape[1] >= 2)
    t = data.draw(st.integers(1, targets.shape[1] - 1))
    key = "decoder_input_ids" if family.seq2seq else "input_ids"
    before = _logits(model, family.inputs(s, source, None))
    after = _logits(model, {**family.inputs(s, source, None), key: _changed(targets, t, s["vocab"])})
    _close(after[:, :t], before[:, :t])
    assert not torch.allclose(after[:, t:], before[:, t:]), "the changed token had no effect at all"


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


@pytest.mark.parametrize("kernel", KERNELS)
@for_each(CACHED, examples=2)
def test_cached_equals_uncached(name, kernel, data):
    """Decoding the last tokens one at a time with the cache gives the logits of one full forward, with either
    kernel, in a batch with a padded row (decoder-only: left padding, the mask growing with the tokens;
    encoder-decoders: a padded source)."""
    family, s = FAMILIES[name], data.draw(sizes(name))
    model = build_with(family, s, kernel)
    targets = s["decoder_ids"] if family.seq2seq else s["ids"]
    assume(targets.shape[1] >= 2)
    start = data.draw(st.integers(1, targets.shape[1] - 1))
    mask = padded_mask(family, s["ids"], data.draw(st.integers(0, s["ids"].shape[1] - 1)))
    key, length = ("decoder_input_ids" if family.seq2seq else "input_ids"), targets.shape[1]

    def feeding(tokens: slice) -> dict:
        """The inputs that feed ``targets[:, tokens]`` (decoder-only: with the mask of the tokens so far)."""
        kwargs = {**family.inputs(s, s["ids"], mask), key: targets[:, tokens]}
        if not family.seq2seq:
            kwargs["attention_mask"] = mask[:, : tokens.stop]
        return kwargs

    full = _logits(model, feeding(slice(0, length)))
    with torch.no_grad():
        output = model(**feeding(slice(0, start)), use_cache=True)
        steps = [output.logits]
        for t in range(start, length):
            output = model(**feeding(slice(t, t + 1)), **cache_argument(returned_cache(output)), use_cache=True)
            steps.append(output.logits)
    real = torch.ones(targets.shape, dtype=torch.bool) if family.seq2seq else mask.bool()
    _close(torch.cat(steps, dim=1)[real], full[real])


# the Transformer-XL options that change how the memory is read
MEMORY_OPTIONS = {
    "plain": {},
    "same_length": {"same_length": True},
    "pre_norm-shared_biases": {"pre_norm": True, "untie_r": False},
    "one_cluster": {"cutoffs": []},
}


@pytest.mark.parametrize("options", MEMORY_OPTIONS.values(), ids=MEMORY_OPTIONS)
@settings(max_examples=2, deadline=None)
@given(data=st.data())
def test_transfo_xl_memory_equals_full_context(options, data):
    """Segment B with the memory of segment A scores as the tail of one pass over A + B (mem_len ≥ |A|), and the
    memory it leaves is the last mem_len inputs of every layer (Dai et al. 2019 §3.2)."""
    family, s = FAMILIES["transfo_xl"], data.draw(sizes("transfo_xl"))
    assume(s["length"] >= 2)
    split = data.draw(st.integers(1, s["length"] - 1))
    s["mem_len"] = split + data.draw(st.integers(0, 3))
    model = family.build(s, **options)
    ids = s["ids"]
    with torch.no_grad():
        whole = model(ids, output_hidden_states=True)
        first = model(ids[:, :split])
        second = model(ids[:, split:], mems=first.mems)
    _close(second.logits, whole.logits[:, split:])
    for memory, layer_input in zip(second.mems, whole.hidden_states[:-1], strict=True):
        _close(memory, layer_input[:, -s["mem_len"] :])


@for_each(NAMES)
def test_eager_equals_fast_path(name, data):
    """The readable kernel and the fast one agree (eager vs SDPA; for the RNN, per-step cells vs fused), on a batch
    whose last row is partly padding (for encoder-decoders: on both sides)."""
    family, s = FAMILIES[name], data.draw(sizes(name))
    reference, other = build_with(family, s, "reference"), build_with(family, s, "fast")
    ids = s["ids"]
    kwargs = family.inputs(s, ids, padded_mask(family, ids, ids.shape[1] // 2))
    if family.seq2seq:
        targets = kwargs["decoder_input_ids"]
        kwargs["decoder_attention_mask"] = padded_mask(family, targets, targets.shape[1] // 2)
    _close(_logits(other, kwargs), _logits(reference, kwargs))


def _fp16_runs_on_this_cpu() -> bool:
    try:
        torch.nn.functional.scaled_dot_product_attention(*(torch.randn(1, 1, 2, 4, dtype=torch.float16),) * 3)
        return True
    except RuntimeError:
        return False


LOW_PRECISION = [torch.bfloat16] + ([torch.float16] if _fp16_runs_on_this_cpu() else [])


def attention_maps_of_the_masked_row(name: str, output) -> list[torch.Tensor]:
    """Every attention map of row 1 (the masked row) whose keys are the masked tokens: encoders' and decoders'
    self-attention, the encoder-decoders' encoder self-attention and cross-attention (the source is masked)."""
    seq2seq = FAMILIES[name].seq2seq
    fields = ("encoder_attentions", "cross_attentions") if seq2seq else ("attentions", "global_attentions")
    return [layer[1] for field in fields for layer in (output.get(field) or ())]


@pytest.mark.parametrize("kernel", KERNELS)
@for_each(NAMES, examples=2)
def test_fully_masked_rows(name, kernel, data):
    """A batch with a row that is all padding (for seq2seq: an all-padding source): finite outputs and gradients
    everywhere in fp32, attention weights of zero on that row (the readable kernel returns them), and in bf16 (and
    fp16 where this CPU runs it) the fp32 outputs within rounding."""
    family, s = FAMILIES[name], data.draw(sizes(name))
    model = build_with(family, s, kernel)
    ids = s["ids"].repeat(2, 1)[:2]
    mask = torch.ones_like(ids)
    mask[1] = 0
    kwargs = family.inputs(s, ids, mask)
    if family.seq2seq:
        kwargs["decoder_input_ids"] = s["decoder_ids"].repeat(2, 1)[:2]
    output = model(**kwargs, output_attentions=kernel == "reference")
    assert torch.isfinite(output.logits).all(), f"{name}: non-finite outputs"
    output.logits.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None), "non-finite gradients"
    assert all((weights == 0).all() for weights in attention_maps_of_the_masked_row(name, output))
    for dtype in LOW_PRECISION:
        with torch.no_grad():
            logits = model.to(dtype)(**kwargs).logits
        assert logits.dtype in (dtype, torch.float32)
        close_to_fp32(logits, output.logits.detach())


# --------------------------------------------------------------------------------------------------------------
# Bad input: a ValueError naming the field and the fix, before any kernel runs
# --------------------------------------------------------------------------------------------------------------

_MODELS: dict[str, torch.nn.Module] = {}


def tiny(name: str):
    if name not in _MODELS:
        s = fixed_sizes()
        s["vocab"], s["mem_len"] = 30, 4
        _MODELS[name] = FAMILIES[name].build(s)
    return _MODELS[name]


def call(name: str, ids=None, mask=None, **extra):
    """Run the family's tiny model on ``ids`` (default: a valid 2 × 6 batch) with ``mask`` and ``extra`` inputs."""
    model = tiny(name)
    s = fixed_sizes()
    ids = s["ids"] if ids is None else ids
    kwargs = FAMILIES[name].inputs(s, ids, mask)
    kwargs.update(extra)
    return model(**kwargs)


def _long(name):
    return torch.randint(3, 30, (1, 70))  # every tiny config has ≤ 64 positions


INPUT_CASES = [
    # (case, families, inputs, words the message must contain)
    (
        "over-long sequence",
        ["bert", "gpt", "longformer", "transformer"],
        lambda n: {"ids": _long(n)},
        "max_position_embeddings",
    ),
    ("id ≥ vocab_size", NAMES, lambda n: {"ids": torch.full((2, 6), 30)}, "vocab"),
    ("negative id", NAMES, lambda n: {"ids": torch.full((2, 6), -1)}, "vocab"),
    ("float ids", NAMES, lambda n: {"ids": torch.ones(2, 6)}, "input_ids"),
    ("mask of the wrong shape", NAMES, lambda n: {"mask": torch.ones(2, 5, dtype=torch.long)}, "attention_mask"),
    ("additive mask instead of 0/1", NAMES, lambda n: {"mask": torch.full((2, 6), -10000.0)}, "attention_mask"),
    ("mask of complex dtype", NAMES, lambda n: {"mask": torch.ones(2, 6, dtype=torch.complex64)}, "attention_mask"),
]


@pytest.mark.parametrize(
    "case,name,make,words",
    [(case, name, make, words) for case, names, make, words in INPUT_CASES for name in names],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_bad_inputs(case, name, make, words):
    inputs = make(name)
    with pytest.raises(ValueError, match=words), recording_ops() as ops:
        call(name, **inputs)
    assert not computing(ops), f"refused only after {computing(ops)} ran"


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
    with pytest.raises(ValueError, match="mems"), recording_ops() as ops:
        call("transfo_xl", mems=mems)
    assert not computing(ops), f"refused only after {computing(ops)} ran"


# ---- checkpoints --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def saved_checkpoint(tmp_path_factory):
    directory = tmp_path_factory.mktemp("checkpoint")
    tiny("bert").save_pretrained(directory)
    return directory


def _copy_with_weights(source: Path, target: Path, weights: bytes) -> Path:
    target.mkdir()
    (target / "config.json").write_text((source / "config.json").read_text())
    (target / "model.safetensors").write_bytes(weights)
    return target


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[: len(b) // 2],
        lambda b: b[:-3],
        lambda b: b + b"extra",
        lambda b: b"\0" * len(b),
        lambda b: b[:5],
        lambda b: (len(b) * 2).to_bytes(8, "little") + b[8:],
    ],
    ids=["half", "last-bytes-cut", "trailing-garbage", "zeros", "five-bytes", "header-length-too-big"],
)
@pytest.mark.parametrize("loader", ["class", "auto"])
def test_truncated_or_corrupted_safetensors(saved_checkpoint, tmp_path, damage, loader):
    import transformers

    weights = (saved_checkpoint / "model.safetensors").read_bytes()
    directory = _copy_with_weights(saved_checkpoint, tmp_path / "damaged", damage(weights))
    model_class = type(tiny("bert"))
    load = model_class.from_pretrained if loader == "class" else transformers.AutoModelForMaskedLM.from_pretrained
    with pytest.raises(ValueError, match="safetensors.*(save|download)"):
        load(directory)


def test_config_loading_does_not_read_the_weights(saved_checkpoint, tmp_path):
    """Reading a checkpoint's config (to inspect it, or before building the model) leaves the weights alone: a
    damaged weight file is reported when the weights are loaded, by safetensors, not on every config load."""
    import transformers

    weights = (saved_checkpoint / "model.safetensors").read_bytes()
    directory = _copy_with_weights(saved_checkpoint, tmp_path / "damaged", weights[: len(weights) // 2])
    config_class = type(tiny("bert").config)
    assert config_class.from_pretrained(directory).to_dict() == tiny("bert").config.to_dict()
    assert type(transformers.AutoConfig.from_pretrained(directory)) is config_class
    with pytest.raises(ValueError, match="safetensors.*(save|download)"):
        type(tiny("bert")).from_pretrained(directory)


def test_intact_checkpoint_still_loads(saved_checkpoint):
    model = tiny("bert")
    loaded = type(model).from_pretrained(saved_checkpoint)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), loaded.state_dict().values()))


def test_checkpoint_of_another_model_type(saved_checkpoint):
    other = type(tiny("gpt"))  # the saved checkpoint is a BERT
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
    model = tiny("bert")
    with pytest.raises(OSError):
        model.save_pretrained(tmp_path / "out")
    monkeypatch.undo()
    with pytest.raises((ValueError, OSError)):
        type(model).from_pretrained(tmp_path / "out")


def test_missing_tokenizer():
    """(transformers' own ``pipeline()`` factory refuses a model object without a tokenizer before our code runs.)"""
    from hf_scratch import ScratchSeq2SeqPipeline

    translate = ScratchSeq2SeqPipeline(model=tiny("transformer"), tokenizer=None)
    with pytest.raises(ValueError, match="tokenizer=") as error:
        translate("ein kleiner satz")
    assert "tokenizer" in str(error.value)


def test_missing_tokenizer_for_pictures(saved_checkpoint, tmp_path):
    pytest.importorskip("matplotlib")
    from hf_scratch.tools import viz

    with pytest.raises(ValueError, match="tokenizer"):
        viz.plot_attention_for_sentence(tmp_path / "a.png", "a b c", model_dir=str(saved_checkpoint))


def test_sharded_checkpoint_loads_and_a_missing_shard_is_named(tmp_path):
    model = tiny("bert")
    model.save_pretrained(tmp_path, max_shard_size="1KB")
    shards = sorted(tmp_path.glob("model-*.safetensors"))
    assert len(shards) > 1
    loaded = type(model).from_pretrained(tmp_path)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), loaded.state_dict().values()))
    shards[-1].unlink()
    with pytest.raises(ValueError, match=shards[-1].name):
        type(model).from_pretrained(tmp_path)

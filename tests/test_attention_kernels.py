"""Kernels of transformers' attention registry (``AttentionInterface``) on the families whose attention is standard
scaled dot-product attention — BERT, GPT, the encoder-decoder: ``flex_attention`` (on CPU it runs compiled, here
through Dynamo + AOTAutograd, and inference only: torch has no FlexAttention backward on CPU) and a kernel a user
registers (training step included) give the outputs of SDPA on a padded batch; the other families refuse them with a
ValueError when the model is built. And on every family, ``set_attn_implementation`` takes effect at the next call.
"""

from __future__ import annotations

import pytest
import torch
from dispatch import dispatched_ops
from families import FAMILIES, FLEX_COMPILES_WHOLE_MODELS, FLEX_ON_TORCH_2_7, NAMES, close, fixed_sizes
from transformers import AttentionInterface

import hf_scratch
from hf_scratch.attention import mask_to_bias
from hf_scratch.banded_attention import ATTENTION_KERNELS

ATOL = 1e-5
STANDARD = ["bert", "gpt", "transformer"]
OTHERS = [name for name in NAMES if name not in STANDARD]


def padded(name: str) -> dict:
    family, s = FAMILIES[name], fixed_sizes()
    mask = torch.ones_like(s["ids"])
    mask[1, 4:] = 0
    kwargs = family.inputs(s, s["ids"], mask.flip(1) if family.padding_side == "left" else mask)
    labels = kwargs.get("decoder_input_ids", kwargs["input_ids"])
    return {**kwargs, "labels": labels}


def written_out(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """A kernel as users register them: softmax(Q Kᵀ·scaling + mask) V, output (batch, length, heads, head_dim)."""
    scores = torch.matmul(query, key.transpose(-1, -2)) * scaling
    if attention_mask is not None:
        scores = scores + attention_mask
    return torch.matmul(torch.softmax(scores, dim=-1), value).transpose(1, 2), None


@pytest.fixture
def registered_kernel():
    AttentionInterface.register("written_out", written_out)
    yield "written_out"
    del AttentionInterface._global_mapping["written_out"]


def training_step(model, kwargs) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    output = model(**kwargs)
    output.loss.backward()
    return output.loss, output.logits, [p.grad for p in model.parameters()]


def same_training_step(actual_model, expected_model, kwargs) -> None:
    loss, logits, grads = training_step(actual_model, kwargs)
    expected_loss, expected_logits, expected_grads = training_step(expected_model, kwargs)
    close(loss, expected_loss, atol=ATOL)
    close(logits, expected_logits, atol=ATOL)
    for grad, expected in zip(grads, expected_grads, strict=True):
        close(grad, expected, atol=ATOL)


@pytest.mark.skipif(not FLEX_COMPILES_WHOLE_MODELS, reason=FLEX_ON_TORCH_2_7)
@pytest.mark.parametrize("name", STANDARD)
def test_flex_attention_compiled_equals_sdpa(name):
    """Inference: torch's FlexAttention has no backward pass on CPU."""
    torch._dynamo.reset()
    family, s = FAMILIES[name], fixed_sizes()
    model = family.build(s, "flex_attention")
    assert model.config._attn_implementation == "flex_attention"
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    kwargs = padded(name)
    with torch.no_grad():
        actual, expected = compiled(**kwargs), family.build(s, "sdpa")(**kwargs)
    close(actual.logits, expected.logits, atol=ATOL)
    close(actual.loss, expected.loss, atol=ATOL)


@pytest.mark.parametrize("name", STANDARD)
def test_a_registered_kernel_equals_sdpa(name, registered_kernel):
    family, s = FAMILIES[name], fixed_sizes()
    same_training_step(family.build(s, registered_kernel).train(), family.build(s, "sdpa").train(), padded(name))


def masks_seen_by(kernel: str, kwargs: dict) -> list[torch.Tensor]:
    """The mask M the registered ``kernel`` gets in each layer of the GPT family's model called with ``kwargs``."""
    seen = []

    def spy(module, query, key, value, attention_mask, **kwargs):
        seen.append(attention_mask)
        return written_out(module, query, key, value, attention_mask, **kwargs)

    AttentionInterface.register(kernel, spy)
    FAMILIES["gpt"].build(fixed_sizes(), kernel)(**kwargs)
    assert len(seen) == fixed_sizes()["layers"]
    return seen


def test_a_registered_kernel_sees_the_additive_mask_of_the_equation(registered_kernel):
    """The kernel gets M = 0 / finfo.min, 4-D (batch, 1, query, key): causal ∧ padding for GPT."""
    kwargs = padded("gpt")
    seen = masks_seen_by(registered_kernel, kwargs)
    batch, length = kwargs["input_ids"].shape
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    allowed = causal[None, None] & kwargs["attention_mask"].bool()[:, None, None, :]
    torch.testing.assert_close(seen[0], mask_to_bias(allowed, torch.float32), atol=0, rtol=0)


def test_a_registered_kernel_sees_packed_sequences_in_the_additive_mask(registered_kernel):
    """A padding-free GPT batch (position_ids that restart, no mask, no cache): M = causal ∧ same sequence."""
    kwargs = {"input_ids": torch.tensor([[5, 6, 7, 8, 9, 10]]), "position_ids": torch.tensor([[0, 1, 2, 0, 1, 0]])}
    seen = masks_seen_by(registered_kernel, {**kwargs, "use_cache": False})
    sequence = torch.tensor([0, 0, 0, 1, 1, 2])
    allowed = torch.ones(6, 6, dtype=torch.bool).tril() & (sequence[:, None] == sequence[None, :])
    torch.testing.assert_close(seen[0], mask_to_bias(allowed[None, None], torch.float32), atol=0, rtol=0)


@pytest.mark.parametrize("name", OTHERS)
def test_families_with_their_own_score_functions_refuse_registered_kernels(name, registered_kernel):
    with pytest.raises(ValueError, match="attn"):
        FAMILIES[name].build(fixed_sizes(), registered_kernel)


def test_unknown_kernel_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="flex_attention"):
        FAMILIES[STANDARD[0]].build(fixed_sizes(), "no_such_kernel")


def test_models_say_which_families_run_registered_kernels():
    for name in NAMES:
        model_class = getattr(hf_scratch, FAMILIES[name].head)
        assert model_class._supports_attention_backend is (name in STANDARD)


@pytest.mark.parametrize("name", [name for name in NAMES if not FAMILIES[name].fast_switch])
def test_set_attn_implementation_takes_effect_at_the_next_call(name):
    """The kernel is read from the config at every call: after ``set_attn_implementation("eager")`` no SDPA kernel
    runs, after ``set_attn_implementation("sdpa")`` it runs again (the two agree: test_robustness.py)."""
    model = FAMILIES[name].build(fixed_sizes(), "sdpa")
    kwargs = {key: value for key, value in padded(name).items() if key != "labels"}

    def sdpa_runs() -> bool:
        with torch.no_grad():
            return any(op in ATTENTION_KERNELS for op in dispatched_ops(lambda: model(**kwargs)))

    assert sdpa_runs()
    model.set_attn_implementation("eager")
    assert model.config._attn_implementation == "eager" and not sdpa_runs()
    model.set_attn_implementation("sdpa")
    assert sdpa_runs()

"""The one dispatcher, ``kernels.attend``: every family's attention runs through it, and its kernels agree with the
equation written out, with and without an additive score term, a row that may attend nothing giving zeros.

Kernels of transformers' attention registry (``AttentionInterface``) on the families whose attention is standard
scaled dot-product attention — BERT, GPT, the encoder-decoder: ``flex_attention`` (on CPU it runs compiled, here
through Dynamo + AOTAutograd, and inference only: torch has no FlexAttention backward on CPU) and a kernel a user
registers (training step included) give the outputs of SDPA on a padded batch; the other families refuse them with a
ValueError when the model is built. And on every family, ``set_attn_implementation`` takes effect at the next call.
"""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest
import torch
from comparing import close
from dispatch import dispatched_ops
from families import FAMILIES, FLEX_COMPILES_WHOLE_MODELS, FLEX_ON_TORCH_2_7, NAMES, fixed_sizes
from torch.nn.attention.flex_attention import flex_attention
from transformers import AttentionInterface

import hf_scratch
from hf_scratch import kernels, layers, modeling_longformer, modeling_transfo_xl
from hf_scratch.banded_attention import ATTENTION_KERNELS
from hf_scratch.kernels import attend, mask_to_bias
from hf_scratch.masks import AttentionMask

ATOL = 1e-5
STANDARD = ["bert", "gpt", "transformer"]
OTHERS = [name for name in NAMES if name not in STANDARD]


def written_out_equation(query, key, value, allowed, score_bias) -> torch.Tensor:
    """softmax(Q Kᵀ/√d + B + M) V in float64 with M = -inf where a key may not be attended, rows that may attend
    nothing set to zeros (the softmax of an all -inf row is NaN)."""
    query, key, value = query.double(), key.double(), value.double()
    scores = query @ key.transpose(-1, -2) / query.shape[-1] ** 0.5
    scores = scores + (0.0 if score_bias is None else score_bias.double())
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1).nan_to_num(0.0)
    return (weights @ value).float()


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("with_score_bias", [False, True], ids=["plain", "score_bias"])
def test_the_dispatcher_computes_the_equation_and_zeros_where_nothing_may_be_attended(implementation, with_score_bias):
    generator = torch.Generator().manual_seed(0)
    query, key, value = (torch.randn(2, 3, n, 5, generator=generator, requires_grad=True) for n in (4, 8, 8))
    score_bias = torch.randn(2, 3, 4, 8, generator=generator) * 3 if with_score_bias else None
    allowed = torch.rand(2, 1, 4, 8, generator=generator) > 0.4
    allowed[1, :, 2] = False  # this query may attend nothing
    output, weights = attend(
        query, key, value, AttentionMask(relation=allowed), score_bias=score_bias, implementation=implementation
    )
    assert weights is None
    close(output, written_out_equation(query, key, value, allowed, score_bias))
    assert torch.equal(output[1, :, 2], torch.zeros_like(output[1, :, 2]))
    output.sum().backward()
    assert all(torch.isfinite(x.grad).all() for x in (query, key, value))


def test_the_dispatcher_refuses_a_score_term_for_a_registered_kernel(registered_kernel):
    query = torch.randn(1, 2, 3, 4)
    with pytest.raises(ValueError, match="score_bias"):
        attend(query, query, query, score_bias=torch.zeros(1, 2, 3, 3), implementation=registered_kernel)


# Each family's calls of ``kernels.attend`` in one layer: (the mask's form, whether a score term B is given)
CALLS_PER_LAYER = {
    "bert": (layers, [("dense", False)]),  # MultiHeadAttention
    "transfo_xl": (modeling_transfo_xl, [("dense", True)]),  # its relative-position terms (b) + (d) as B
    "longformer": (modeling_longformer, [("block-sparse", False), ("dense", False)]),  # its band, its global rows
}


@pytest.mark.parametrize(
    "name, implementation",
    [(name, implementation) for name in CALLS_PER_LAYER for implementation in ("eager", "sdpa")]
    + [("longformer", "flex_attention")],
)
def test_every_family_calls_the_one_dispatcher_once_per_attention(name, implementation, monkeypatch):
    """MultiHeadAttention, Transformer-XL's attention and Longformer's — its band, then its global tokens' rows with
    their own projections — each call ``kernels.attend`` once per layer, with the configured kernel; ``attend``
    alone chooses what runs (``test_no_module_but_the_dispatcher_chooses_a_kernel``). Longformer's flex_attention
    runs here as torch's uncompiled reference (inference: torch has no FlexAttention backward on the CPU)."""
    module, per_layer = CALLS_PER_LAYER[name]
    calls = []

    def counted(query, key, value, mask=None, **kwargs):
        form = "block-sparse" if isinstance(mask, kernels.BlockSparseMask) else "dense"
        calls.append((kwargs["implementation"], form, kwargs.get("score_bias") is not None))
        return kernels.attend(query, key, value, mask, **kwargs)

    monkeypatch.setattr(module, "attend", counted)
    monkeypatch.setattr(kernels, "flex_kernel", lambda device_type: flex_attention)
    s = {**fixed_sizes(), "layers": 2, "variant": name == "longformer"}  # (Longformer's: the first token is global)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
        FAMILIES[name].build(s, implementation)(**padded(name, s))
    assert calls == [(implementation, form, score_bias) for form, score_bias in per_layer] * s["layers"]


# What only kernels.py does: compare the name of an attention implementation (or switch on it), call a kernel.
# config._attn_implementation is read there, by the check when a model is built (modeling_common.py) and by
# layers.kernel_settings, which hands it to ``attend``.
KERNEL_NAMES = {"eager", "sdpa", "flex_attention"}
KERNEL_CONSTANTS = {"FLEX_ATTENTION", "ATTENTION_IMPLEMENTATIONS", "_attn_implementation"}
KERNELS = {
    "scaled_dot_product_attention",
    "flex_attention",
    "flex_kernel",
    "compiled_flex_attention",
    "block_sparse_flex",
    "eager_attention",
    "sdpa_attention",
    "sdpa_with_score_bias",
    "registered_attention",
    "masked_softmax",
}
# The RNN baselines' own score functions, additive and multiplicative (not scaled dot-product attention:
# ARCHITECTURE.md), normalise their scores with the masked softmax.
OWN_SCORE_FUNCTIONS = {"modeling_rnn.py": {"masked_softmax"}}
READ_IMPLEMENTATION = {"kernels.py", "modeling_common.py", "layers.py"}


def kernel_choices(path: Path) -> list[str]:
    """Where the module at ``path`` compares or switches on a kernel's name, calls a kernel, or reads the config's
    implementation where it may not."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        parts = list(ast.walk(node))
        constants = {part.value for part in parts if isinstance(part, ast.Constant)}
        names = {part.id for part in parts if isinstance(part, ast.Name)}
        names |= {part.attr for part in parts if isinstance(part, ast.Attribute)}
        if isinstance(node, (ast.Compare, ast.match_case)) and (constants & KERNEL_NAMES or names & KERNEL_CONSTANTS):
            found.append(f"{path.name}:{node.lineno}: chooses by the kernel's name")
        if isinstance(node, ast.Dict) and {k.value for k in node.keys if isinstance(k, ast.Constant)} & KERNEL_NAMES:
            found.append(f"{path.name}:{node.lineno}: a table of kernels")
        if isinstance(node, ast.Call):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if called in KERNELS - OWN_SCORE_FUNCTIONS.get(path.name, set()):
                found.append(f"{path.name}:{node.lineno}: calls the kernel {called}")
        if isinstance(node, ast.Attribute) and node.attr == "_attn_implementation":
            if path.name not in READ_IMPLEMENTATION:
                found.append(f"{path.name}:{node.lineno}: reads _attn_implementation")
    return found


def test_no_module_but_the_dispatcher_chooses_a_kernel():
    """Only ``kernels.attend`` chooses a kernel: no other module of the package compares (or matches, or looks up)
    the name of an attention implementation, calls a kernel, or reads ``config._attn_implementation`` but to check
    it or hand it to ``attend``."""
    package = Path(hf_scratch.__file__).parent
    found = [
        where for path in sorted(package.rglob("*.py")) if path.name != "kernels.py" for where in kernel_choices(path)
    ]
    assert not found


def padded(name: str, s: dict | None = None) -> dict:
    family, s = FAMILIES[name], s or fixed_sizes()
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

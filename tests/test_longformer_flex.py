"""Longformer's attention through torch's flex_attention (``attn_implementation="flex_attention"``, issue 27): the
same outputs and gradients as the banded kernel over random windows, dilations per head, global tokens and padding;
a block mask that visits every tile holding an allowed pair and skips the mask only on tiles every pair of which is
allowed; no n×n tensor built by our code; selection the transformers way.

What torch 2.13 does on the CPU: flex_attention refuses inputs that require gradients ("FlexAttention does not
support backward on CPU"). Called uncompiled it runs a dense reference (``math_attention``: the n×n scores, with
autograd through them) that evaluates only the ``mask_mod`` and ignores the block mask's tiles; compiled, Inductor's
C++ template runs the tiles of the block mask (inference only; a first compile takes ~10 s). The property tests
therefore run the dense reference with torch's CPU refusal lifted (``flex_reference``: the reference's backward is
ordinary autograd) and check the tiles apart; one test runs the compiled CPU kernel on three tiles of 128.
"""

from __future__ import annotations

import contextlib
import warnings

import pytest
import torch
import torch.nn.attention.flex_attention as torch_flex
from batches import longformer_batch
from comparing import max_diff_on_real
from families import FAMILIES, FLEX_COMPILES_WHOLE_MODELS, FLEX_ON_TORCH_2_7
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import longformer_mask
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import AutoModelForMaskedLM

from hf_scratch import ScratchLongformerConfig, ScratchLongformerForMaskedLM, ScratchLongformerModel, kernels
from hf_scratch.banded_attention import GlobalTokens, flex_block_mask
from hf_scratch.modeling_longformer import ScratchLongformerSelfAttention

ATOL = 1e-5
tiny_config = FAMILIES["longformer"].tiny_config


@contextlib.contextmanager
def dense_flex_reference():
    """flex_attention uncompiled (torch's dense reference, which differentiates on the CPU too) instead of the
    compiled kernel, with torch's refusal of CPU gradients lifted for it."""
    with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings():
        patch.setattr(kernels, "flex_kernel", lambda device_type: torch_flex.flex_attention)
        patch.setattr(torch_flex, "_validate_device", lambda query, key, value: None)
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
        yield


@pytest.fixture
def flex_reference():
    with dense_flex_reference():
        yield


@st.composite
def attention_problems(draw):
    heads = draw(st.sampled_from([1, 2, 3]))
    batch = draw(st.integers(1, 2))
    length = draw(st.integers(1, 40))
    window = 2 * draw(st.integers(1, 5))
    dilations = tuple(draw(st.sampled_from([1, 1, 2, 3])) for _ in range(heads))
    real_lengths = [draw(st.integers(0 if b else 1, length)) for b in range(batch)]
    is_global = [[draw(st.booleans()) and draw(st.booleans()) for _ in range(length)] for _ in range(batch)]
    tile = draw(st.sampled_from([4, 8, 16]))
    return heads, length, window, dilations, real_lengths, torch.tensor(is_global, dtype=torch.bool), tile


def forward_and_gradients(attention, hidden, upstream, key_is_real, is_global, implementation):
    attention.config._attn_implementation = implementation
    attention.zero_grad()
    hidden.grad = None
    output = attention(hidden, key_is_real, GlobalTokens.from_masks(key_is_real, is_global))[0]
    (output * upstream).sum().backward()
    grads = [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in attention.parameters()]
    return output.detach(), hidden.grad.clone(), grads


@settings(max_examples=8)
@given(attention_problems())
def test_flex_equals_the_banded_kernel_with_gradients(problem):
    heads, length, window, dilations, real_lengths, is_global, _ = problem
    config = ScratchLongformerConfig(
        hidden_size=4 * heads,
        num_attention_heads=heads,
        num_hidden_layers=1,
        intermediate_size=8,
        vocab_size=10,
        attention_window=window,
        attention_dilation=[list(dilations)],
        attention_probs_dropout_prob=0.0,
    )
    attention = ScratchLongformerSelfAttention(config, 0).train()
    key_is_real = torch.arange(length)[None, :] < torch.tensor(real_lengths)[:, None]
    hidden = torch.randn(len(real_lengths), length, 4 * heads, requires_grad=True)
    upstream = torch.randn(len(real_lengths), length, 4 * heads)
    with dense_flex_reference():
        flex = forward_and_gradients(attention, hidden, upstream, key_is_real, is_global, "flex_attention")
    banded = forward_and_gradients(attention, hidden, upstream, key_is_real, is_global, "sdpa")
    torch.testing.assert_close(flex[0], banded[0], atol=ATOL, rtol=0, msg="forward")
    torch.testing.assert_close(flex[1], banded[1], atol=ATOL, rtol=0, msg="gradient of the input")
    for a, b in zip(flex[2], banded[2], strict=True):
        torch.testing.assert_close(a, b, atol=ATOL, rtol=0, msg="gradient of a weight")


def tiles_of(block_mask) -> tuple[torch.Tensor, torch.Tensor]:
    """(visited, full): the tiles of a BlockMask as (batch, heads, query tiles, key tiles) bool."""
    full = torch_flex.BlockMask.from_kv_blocks(block_mask.full_kv_num_blocks, block_mask.full_kv_indices)
    return block_mask.to_dense().bool(), full.to_dense().bool()


@settings(max_examples=12)
@given(attention_problems())
def test_block_mask_tiles_and_relation(problem):
    """The mask_mod is Longformer's relation (``reference.longformer_mask``) on every row but the global tokens' own
    (computed apart, with their projections); every tile holding an allowed pair is visited, and a tile skips the
    mask only when every pair in it is allowed — compared with torch's ``create_block_mask``, which evaluates the
    mask_mod densely."""
    heads, length, window, dilations, real_lengths, is_global, tile = problem
    key_is_real = torch.arange(length)[None, :] < torch.tensor(real_lengths)[:, None]
    is_global = is_global & key_is_real
    batch = len(real_lengths)
    ours = flex_block_mask(key_is_real, is_global, window // 2, dilations, tile=tile)
    relation = torch_flex.create_mask(ours.mask_mod, batch, heads, length, length, device="cpu")
    expected = longformer_mask(key_is_real, is_global, window // 2, dilations)
    local_rows = ~is_global[:, None, :, None]
    assert torch.equal(relation & local_rows, expected & local_rows)

    dense = torch_flex.create_block_mask(ours.mask_mod, batch, heads, length, length, device="cpu", BLOCK_SIZE=tile)
    visited, full = (t.expand(batch, heads, -1, -1) for t in tiles_of(ours))
    holds_a_pair, truly_full = tiles_of(dense)
    assert not (holds_a_pair & ~visited).any(), "a tile with an allowed pair is not visited"
    assert not (full & ~truly_full).any(), "a tile skips the mask but holds a pair that is not allowed"


def flex_and_sdpa(**overrides) -> tuple[ScratchLongformerForMaskedLM, ScratchLongformerForMaskedLM]:
    """The tiny masked LM with the flex_attention kernel and with SDPA, same weights, in eval mode (each on its own
    config: ``_from_config`` sets the implementation on the config it is given)."""
    flex, sdpa = (
        ScratchLongformerForMaskedLM._from_config(tiny_config(**overrides), attn_implementation=implementation).eval()
        for implementation in ("flex_attention", "sdpa")
    )
    sdpa.load_state_dict(flex.state_dict())
    assert (flex.config._attn_implementation, sdpa.config._attn_implementation) == ("flex_attention", "sdpa")
    return flex, sdpa


def test_compiled_cpu_kernel_runs_the_tiles_and_equals_the_banded_kernel():
    """torch.compile(flex_attention) on the CPU (Inductor's C++ template, inference): 300 tokens are three tiles
    of 128, and a window of 8 leaves tiles unvisited, so the kernel's use of the block mask is exercised. Both layers
    have the same pattern, so that the kernel is compiled once (~10 s)."""
    pattern = dict(attention_window=8, attention_dilation=[[1, 2, 1, 3]] * 2)
    flex, sdpa = flex_and_sdpa(max_position_embeddings=310, **pattern)
    input_ids = torch.randint(3, 97, (2, 300))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 211:] = 0
    global_attention_mask = torch.zeros_like(input_ids)
    global_attention_mask[0, [0, 150, 299]] = 1
    global_attention_mask[1, [4, 250]] = 1  # the second on padding
    inputs = dict(input_ids=input_ids, attention_mask=attention_mask, global_attention_mask=global_attention_mask)
    with torch.no_grad():
        assert max_diff_on_real(sdpa(**inputs).logits, flex(**inputs).logits, attention_mask) <= 1e-4


class RecordingKernel:
    """Stands in for flex_attention: records the block masks it gets and returns zeros."""

    def __init__(self):
        self.block_masks = []

    def __call__(self, query, key, value, block_mask=None, scale=None):
        self.block_masks.append(block_mask)
        return torch.zeros_like(query)


class LargestTensor(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(tensor, torch.Tensor):
                self.largest = max(self.largest, tensor.numel())
        return out


@pytest.mark.parametrize("attention_dilation", [1, [[1, 4], [1, 4]]])
def test_flex_path_builds_no_quadratic_tensor_and_passes_a_sparse_block_mask(attention_dilation, monkeypatch):
    """At n = 2048, window 16: everything our code runs around the kernel stays below n²/16 elements, and the
    kernel gets a BlockMask whose visited tiles per query tile are the band's (≤ 3 + a dilated head's reach) plus
    the global tokens' tiles — not all 16."""
    kernel = RecordingKernel()
    monkeypatch.setattr(kernels, "flex_kernel", lambda device_type: kernel)
    config = ScratchLongformerConfig(
        vocab_size=50,
        hidden_size=8,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=8,
        attention_window=16,
        attention_dilation=attention_dilation,
        max_position_embeddings=2100,
    )
    model = ScratchLongformerModel._from_config(config, attn_implementation="flex_attention").eval()
    length = 2048
    input_ids = torch.randint(3, 50, (1, length))
    global_attention_mask = torch.zeros_like(input_ids)
    global_attention_mask[0, [0, 1000]] = 1
    with torch.no_grad(), LargestTensor() as mode:
        model(input_ids=input_ids, global_attention_mask=global_attention_mask)
    assert mode.largest < length * length // 16, mode.largest
    assert len(kernel.block_masks) == 2 and kernel.block_masks[0] is kernel.block_masks[1]  # built once, shared
    block_mask = kernel.block_masks[0]
    assert isinstance(block_mask, torch_flex.BlockMask) and block_mask.BLOCK_SIZE == (128, 128)
    visited = block_mask.kv_num_blocks + block_mask.full_kv_num_blocks
    assert visited.max() <= 3 + 2  # own and neighbouring tiles, and the two global tokens' tiles


def test_flex_attention_is_chosen_the_transformers_way(flex_reference):
    model = AutoModelForMaskedLM.from_config(tiny_config(), attn_implementation="flex_attention")
    assert type(model) is ScratchLongformerForMaskedLM and model.config._attn_implementation == "flex_attention"
    assert ScratchLongformerForMaskedLM._supports_flex_attn  # transformers' own gate for "flex_attention"
    assert not ScratchLongformerForMaskedLM._supports_attention_backend  # the other registered kernels: refused
    eager = ScratchLongformerForMaskedLM._from_config(tiny_config(), attn_implementation="eager").eval()
    eager.load_state_dict(model.state_dict())
    input_ids, attention_mask, global_attention_mask = longformer_batch()
    inputs = dict(input_ids=input_ids, attention_mask=attention_mask, global_attention_mask=global_attention_mask)
    with torch.no_grad():
        expected, flex = eager(**inputs, output_attentions=True), model.eval()(**inputs)
        with_weights = model(**inputs, output_attentions=True)  # weights asked for: the eager kernel gives them
    assert max_diff_on_real(expected.logits, flex.logits, attention_mask) <= ATOL
    for a, b in zip(expected.attentions, with_weights.attentions, strict=True):
        torch.testing.assert_close(a, b, atol=ATOL, rtol=0)


def test_families_with_other_score_functions_refuse_flex_attention():
    with pytest.raises(ValueError, match="flex_attention"):
        FAMILIES["transfo_xl"].tiny_model(attn_implementation="flex_attention")


def test_attention_dropout_while_training_is_refused(flex_reference):
    model = ScratchLongformerForMaskedLM._from_config(
        tiny_config(attention_probs_dropout_prob=0.1), attn_implementation="flex_attention"
    ).train()
    input_ids, attention_mask, global_attention_mask = longformer_batch()
    with pytest.raises(ValueError, match="dropout"):
        model(input_ids=input_ids, attention_mask=attention_mask, global_attention_mask=global_attention_mask)


@pytest.mark.skipif(not FLEX_COMPILES_WHOLE_MODELS, reason=FLEX_ON_TORCH_2_7)
def test_whole_model_compiles_as_one_graph(flex_reference):
    """torch.compile(fullgraph=True) traces the block mask and flex_attention into the graph (AOTAutograd here;
    Inductor's CPU template in torch 2.13 cannot lower a block mask built inside the graph: NoValidChoicesError)."""
    torch._dynamo.reset()
    flex, sdpa = flex_and_sdpa(attention_dilation=[[1, 2, 1, 3], 2])
    input_ids, attention_mask, global_attention_mask = longformer_batch()
    inputs = dict(input_ids=input_ids, attention_mask=attention_mask, global_attention_mask=global_attention_mask)
    with torch.no_grad():
        actual = torch.compile(flex, backend="aot_eager", fullgraph=True)(**inputs).logits
        assert max_diff_on_real(sdpa(**inputs).logits, actual, attention_mask) <= ATOL

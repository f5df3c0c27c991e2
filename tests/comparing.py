"""Numeric comparison for the tests: the tolerance of fp32 parity (``ATOL``), closeness in fp32 and in bf16/fp16
rounding, the largest difference over real tokens, and the parity assertions against the reference implementations
(conversion back to the reference's weights, multiple-choice heads)."""

from __future__ import annotations

import torch

ATOL = 1e-4


def close(actual: torch.Tensor, expected: torch.Tensor, atol: float = ATOL) -> None:
    torch.testing.assert_close(actual, expected, atol=atol, rtol=atol)


def close_to_fp32(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """``actual`` (computed in bf16 or fp16) within rounding of ``expected`` (fp32). bf16 keeps 8 significant bits
    (eps = 2⁻⁷ ≈ 0.008: two to three decimal digits), and the tiny models round some twenty times between the ids
    and logits of order 1–10, so a few eps of error are expected: measured over 60 random configurations per family
    and kernel, at most 0.026 (3.3 eps) in bf16 and 0.015 in fp16 (whose CPU kernels accumulate in half precision:
    it does not get its own eps of 2⁻¹⁰). 8 bf16 eps absolute + 2 eps relative, for both formats, leaves more than
    twice the worst seen, and still fails an overflow (inf) or a mask that leaks in low precision."""
    eps = torch.finfo(torch.bfloat16).eps
    torch.testing.assert_close(actual.float(), expected.float(), atol=8 * eps, rtol=2 * eps)


def max_diff_on_real(expected: torch.Tensor, actual: torch.Tensor, attention_mask: torch.Tensor) -> float:
    """The largest |expected − actual| over the real tokens (where ``attention_mask`` is 1) of per-token outputs;
    over every entry of outputs that are not per token (pooled, per sequence)."""
    if expected.shape[: attention_mask.dim()] == attention_mask.shape:
        expected, actual = expected[attention_mask.bool()], actual[attention_mask.bool()]
    return (expected - actual).abs().max().item()


def assert_converts_back(ours, reference):
    """``to_transformers(ours)`` is the reference's class again, with exactly the reference's weights."""
    from hf_scratch.convert import to_transformers

    back = to_transformers(ours)
    assert type(back) is type(reference)
    reference_state, back_state = reference.state_dict(), back.state_dict()
    assert set(reference_state) == set(back_state)
    for key in reference_state:
        assert torch.equal(reference_state[key], back_state[key]), key
    return back


def assert_multiple_choice_parity(reference, inputs: dict) -> None:
    """Our conversion of a reference multiple-choice head gives its logits and loss on ``inputs`` (two questions of
    two choices each: (2, 2, length)), and converts back to its weights."""
    from hf_scratch.convert import from_transformers, to_transformers

    ours = from_transformers(reference).eval()
    labels = torch.tensor([0, 1])
    with torch.no_grad():
        expected, actual = reference(**inputs, labels=labels), ours(**inputs, labels=labels)
    assert actual.logits.shape == (2, 2)
    assert (expected.logits - actual.logits).abs().max() <= 1e-4
    assert abs(expected.loss.item() - actual.loss.item()) <= 1e-4
    back = to_transformers(ours)
    assert all(torch.equal(back.state_dict()[k], v) for k, v in reference.state_dict().items())

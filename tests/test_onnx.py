"""ONNX as the serving path for BERT and GPT: ``torch.onnx.export(..., dynamo=True)`` (through torch.export, with
a dynamic batch and sequence dimension) and onnxruntime reproduce the eager logits (≤ 1e-5) at the real tokens of
padded batches of other shapes than the example.

Needs the ``onnx`` extra (onnx, onnxscript, onnxruntime), which the ``test`` extra includes.
What differs from PyTorch, by design of the formats: a padding *query* (left padding in GPT) attends nothing; our
kernels give it zeros, the ONNX graph some other finite value — padding outputs are never read, so they are left
out of the comparison. The in-graph assertions on values (ids in the vocabulary, ``torch._assert_async``) have no
ONNX operator and are dropped: onnxruntime's Gather still refuses an id ≥ vocab_size, but takes a negative id as
counted from the end (validate ids before serving).
"""

from __future__ import annotations

import warnings

import numpy as np
import onnxruntime
import pytest
import torch
from families import FAMILIES, fixed_sizes
from torch.export import Dim

ATOL = 1e-5
SERVED = ["bert", "gpt"]


class Logits(torch.nn.Module):
    """(input_ids, attention_mask) → logits: the serving signature."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        extra = {"use_cache": False} if "use_cache" in self.model.config else {}  # (no cache in the served graph)
        return self.model(input_ids=input_ids, attention_mask=attention_mask, **extra).logits


def batch(name: str, size: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(3, fixed_sizes()["vocab"], (size, length), generator=torch.Generator().manual_seed(size))
    mask = torch.ones_like(ids)
    mask[-1, length - 2 :] = 0
    return ids, mask.flip(1) if FAMILIES[name].padding_side == "left" else mask


@pytest.fixture(scope="module", params=SERVED)
def served(request, tmp_path_factory):
    name = request.param
    served_model = Logits(FAMILIES[name].build(fixed_sizes())).eval()
    dims = {0: Dim("batch", min=1, max=16), 1: Dim("length", min=2, max=30)}  # the same two axes in both inputs
    with warnings.catch_warnings():
        # the exporter names each shared axis once and says so for the second input ("# The axis name: batch will
        # not be used, since it shares the same shape constraints with another axis: batch"): nothing is lost
        warnings.filterwarnings("ignore", message="# The axis name", category=UserWarning)
        program = torch.onnx.export(
            served_model,
            batch(name, 2, 6),
            dynamo=True,
            dynamic_shapes=(dims, dims),
            input_names=["input_ids", "attention_mask"],
            output_names=["logits"],
        )
        path = tmp_path_factory.mktemp("onnx") / f"{name}.onnx"
        program.save(str(path))
    return name, served_model, onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def test_onnxruntime_reproduces_eager_logits_at_other_shapes(served):
    name, served_model, session = served
    for size, length in [(2, 6), (3, 9), (1, 5)]:
        ids, mask = batch(name, size, length)
        (actual,) = session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})
        with torch.no_grad():
            expected = served_model(ids, mask).numpy()
        real = mask.bool().numpy()
        np.testing.assert_allclose(actual[real], expected[real], atol=ATOL, rtol=ATOL)


def test_onnxruntime_refuses_an_id_past_the_vocabulary(served):
    name, _, session = served
    ids, mask = batch(name, 2, 6)
    ids[0, 1] = fixed_sizes()["vocab"]
    with pytest.raises(Exception, match="out of data bounds|indices"):
        session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})

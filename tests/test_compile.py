"""torch.compile on every family: a tiny model compiled with TorchDynamo + AOTAutograd (the ``aot_eager`` backend)
gives the eager model's outputs on a padded batch, and its gradients.

Inductor's C++ code generation (the default backend) takes minutes per model on the shared 2-core machine, so it
runs in ``benchmarks/bench_compile.py`` (compiled vs eager training-step speed), not here.
"""

import pytest
import torch
from families import FAMILIES, PRESENT, close, fixed_sizes


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def padded_inputs(name):
    family, sizes = FAMILIES[name], fixed_sizes()
    mask = torch.ones_like(sizes["ids"])
    mask[1, 4:] = 0
    if family.padding_side == "left":
        mask = mask.flip(1)
    return family, sizes, family.inputs(sizes, sizes["ids"], mask)


@pytest.mark.parametrize("name", PRESENT)
def test_compiled_forward_matches_eager(name):
    family, sizes, inputs = padded_inputs(name)
    model = family.build(sizes)
    compiled = torch.compile(model, backend="aot_eager")
    with torch.no_grad():
        expected = model(**inputs).logits
        actual = compiled(**inputs).logits
    close(actual, expected, atol=1e-5)


def test_compiled_training_step_matches_eager():
    """Forward + backward through the compiled graph give the eager loss and gradients (GPT: causal + padding)."""
    name = "gpt" if "gpt" in PRESENT else PRESENT[0]
    family, sizes, inputs = padded_inputs(name)
    labels = inputs["input_ids"].masked_fill(inputs["attention_mask"] == 0, -100)
    eager, compiled_model = family.build(sizes).train(), family.build(sizes).train()
    compiled = torch.compile(compiled_model, backend="aot_eager")
    eager(**inputs, labels=labels).loss.backward()
    compiled(**inputs, labels=labels).loss.backward()
    for (parameter_name, a), b in zip(eager.named_parameters(), compiled_model.parameters()):
        if a.grad is not None:
            close(b.grad, a.grad, atol=1e-5)

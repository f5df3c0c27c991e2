"""torch.export of every family's inference forward (the main head, eval mode, padded batch, no cache) with a
dynamic batch and sequence dimension (``torch.export.Dim``): the exported program reproduces the eager outputs
(≤ 1e-5) at other batch sizes and lengths than the example it was traced with.

Checks on values (ids in the vocabulary, 0/1 masks, positions in the table) are assertions inside the exported
graph: bad input stops the exported program too. Limits, each for a reason of the architecture:
- Transformer-XL keeps the last ``mem_len`` inputs of each layer as the next memory, and Longformer cuts the
  sequence into blocks of w/2 with windows of 3·w/2: the program takes segments longer than the memory
  (here ≥ mem_len + 1 = 5 tokens), which covers the windows too;
- the RNN baselines: the recurrence unrolls one step per token, so the length is fixed when the graph is traced —
  the batch stays dynamic, and each sequence length is its own export.
"""

from __future__ import annotations

import pytest
import torch
from comparing import close
from families import CACHED, FAMILIES, NAMES, fixed_sizes
from torch.export import Dim

ATOL = 1e-5
MIN_LENGTH = 5  # > mem_len of fixed_sizes(); see the module docstring
UNROLLED = ("rnn",)  # the length is a constant of the graph


def inputs(name: str, batch: int, length: int, target: int = 3, seed: int = 0) -> dict:
    """A batch whose last row ends (or, left-padded, starts) with two padding tokens; for Longformer a global first
    token in the first row; no cache."""
    family, s = FAMILIES[name], {**fixed_sizes(), "variant": True}
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, s["vocab"], (batch, length), generator=generator)
    mask = torch.ones_like(ids)
    mask[-1, length - 2 :] = 0
    s["decoder_ids"] = torch.randint(3, s["vocab"], (batch, target), generator=generator)
    kwargs = family.inputs(s, ids, mask.flip(1) if family.padding_side == "left" else mask)
    if "global_attention_mask" in kwargs:
        kwargs["global_attention_mask"] = torch.zeros_like(ids)
        kwargs["global_attention_mask"][0, 0] = 1
    if name in CACHED:
        kwargs["use_cache"] = False
    return kwargs


def dynamic_shapes(name: str, kwargs: dict) -> dict:
    batch = Dim("batch", min=1, max=16)
    length = None if name in UNROLLED else Dim("length", min=MIN_LENGTH, max=30)
    target = None if name in UNROLLED else Dim("target", min=1, max=30)

    def dims(key):
        second = target if key.startswith("decoder_") else length
        return {0: batch} if second is None else {0: batch, 1: second}

    return {key: dims(key) if isinstance(value, torch.Tensor) else None for key, value in kwargs.items()}


@pytest.fixture(scope="module", params=NAMES)
def exported(request):
    name = request.param
    s = {**fixed_sizes(), "variant": True}
    model = FAMILIES[name].build(s)
    example = inputs(name, batch=2, length=6)
    return name, model, torch.export.export(model, (), example, dynamic_shapes=dynamic_shapes(name, example))


def test_exported_program_reproduces_eager_outputs_at_other_shapes(exported):
    name, model, program = exported
    shapes = [(2, 6, 3), (3, 9, 4), (1, MIN_LENGTH, 2)]
    if name in UNROLLED:
        shapes = [(batch, 6, 3) for batch, _, _ in shapes]
    for batch, length, target in shapes:
        kwargs = inputs(name, batch, length, target, seed=batch)
        with torch.no_grad():
            close(program.module()(**kwargs).logits, model(**kwargs).logits, atol=ATOL)


def test_exported_program_stops_ids_outside_the_vocabulary(exported):
    name, model, program = exported
    kwargs = inputs(name, batch=2, length=6)
    kwargs["input_ids"] = kwargs["input_ids"].clone()
    kwargs["input_ids"][0, 1] = model.config.vocab_size
    with pytest.raises(RuntimeError, match="vocabulary"):
        program.module()(**kwargs)

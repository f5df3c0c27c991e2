"""torch.compile with ``fullgraph=True`` on every family: no graph break, the eager model's outputs and gradients
(≤ 1e-5), no recompilation when only the batch content changes (padding or not, other ids, other global tokens),
at most one when the sequence length changes under ``dynamic=True``, and bad input still stopped.

The graphs go through TorchDynamo + AOTAutograd (the ``aot_eager`` backend: forward and backward graphs, eager
kernels) or through Dynamo alone (``eager``) where only the capture is in question. Inductor's C++ code generation
takes minutes per model on the shared 2-core machine: it runs in ``benchmarks/bench_compile.py``, not here.

The RNN baselines keep their weights in ``torch.nn.LSTM/GRU/RNN`` modules, which Dynamo refuses by default
(``torch._dynamo.config.allow_rnn``), so they declare ``_can_compile_fullgraph = False``; with ``allow_rnn=True``
their forward compiles as one graph too (the per-step cell equations run), checked here. Their recurrence unrolls
one step per token: every new length is a new graph, so the length test leaves them out.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
from comparing import close
from families import FAMILIES, NAMES, fixed_sizes, randomise
from test_conformance import HEAD_IDS, HEADS, inputs_for, loss_of
from test_robustness import INPUT_CASES
from test_robustness import call as robustness_call
from test_robustness import tiny as robustness_model
from torch._dynamo.testing import CompileCounterWithBackend

ATOL = 1e-5
KERNELS = ("eager", "sdpa")
FULLGRAPH_BY_DEFAULT = [name for name in NAMES if name != "rnn"]
# ``_can_compile_fullgraph`` also tells transformers that generate can decode with a static cache and compile its
# step: Transformer-XL's forward compiles as one graph, but its memory is no transformers Cache
# (test_generation_conventions.py), so it declares False
FULLGRAPH_FLAG = [name for name in FULLGRAPH_BY_DEFAULT if name != "transfo_xl"]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def allow_rnn(name: str):
    """The RNN family compiles only with Dynamo's opt-in for torch.nn's recurrent modules (see the docstring)."""
    return torch._dynamo.config.patch(allow_rnn=True) if name == "rnn" else contextlib.nullcontext()


def build(name: str, cls, attn_implementation: str = "sdpa"):
    """The head on its family's richer variant (tests/test_conformance.py) with one layer — compile time grows with
    depth — every dropout off, every parameter perturbed."""
    config = FAMILIES[name].config({**fixed_sizes(), "variant": True})
    for key, value in config.to_dict().items():
        if "dropout" in key and isinstance(value, float):
            setattr(config, key, 0.0)
    torch.manual_seed(0)
    return randomise(cls._from_config(config, attn_implementation=attn_implementation))


def gradients(model) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def step(run, model, kwargs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Output and gradients of one training step of ``run`` (the model, or its compiled form)."""
    model.zero_grad()
    output = run(**kwargs)
    loss_of(output).backward()
    return output, gradients(model)


def main_output(output) -> torch.Tensor:
    """The head's first output after the loss (logits), or a base model's last hidden state."""
    return output[1] if output.get("loss") is not None else output[0]


def same_step(compiled, model, kwargs) -> None:
    """The compiled step gives the eager loss, logits and gradients (the compiled module shares the parameters)."""
    actual, actual_grads = step(compiled, model, kwargs)
    expected, expected_grads = step(model, model, kwargs)
    close(loss_of(actual), loss_of(expected), atol=ATOL)
    close(main_output(actual), main_output(expected), atol=ATOL)
    assert actual_grads.keys() == expected_grads.keys()
    for name, grad in expected_grads.items():
        close(actual_grads[name], grad, atol=ATOL)


# --------------------------------------------------------------------------------------------------------------
# Every head, fullgraph
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,cls", HEADS, ids=HEAD_IDS)
def test_every_head_compiles_as_one_graph(name, cls):
    """Forward with the head's labels (its loss) on a padded batch as one Dynamo graph, and the backward through
    it: loss, logits and gradients as in eager mode. ``_can_compile_fullgraph`` says so (but for Transformer-XL)."""
    assert cls._can_compile_fullgraph is (name in FULLGRAPH_FLAG)
    model = build(name, cls).train()
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    with allow_rnn(name):
        same_step(compiled, model, inputs_for(name, cls, labels=True))


def test_rnn_needs_dynamos_opt_in_for_torch_nn_recurrent_modules():
    """Why the RNN family says ``_can_compile_fullgraph = False``: with Dynamo's defaults the graph breaks at the
    torch.nn recurrent module, and with Dynamo's opt-in (``allow_rnn``) the same call is one graph. torch up to 2.14
    names the module in its message ("RNN, GRU, or LSTM"); 2.15 breaks where the cells read the module's weights,
    which Dynamo holds back as a ``DelayGraphBreakVariable`` (its stand-in for a recurrent module it will not trace)."""
    name, cls = next((n, c) for n, c in HEADS if n == "rnn")
    model = build(name, cls)
    with pytest.raises(torch._dynamo.exc.Unsupported, match=r"RNN, GRU, or LSTM|DelayGraphBreakVariable\(\), weight_"):
        torch.compile(model, backend="eager", fullgraph=True)(**inputs_for(name, cls))
    torch._dynamo.reset()
    with allow_rnn(name):
        torch.compile(model, backend="eager", fullgraph=True)(**inputs_for(name, cls))


# --------------------------------------------------------------------------------------------------------------
# Forward and backward graphs, both kernels; no recompilation when only the batch content changes
# --------------------------------------------------------------------------------------------------------------


def other_batch(name: str, cls, kwargs: dict) -> dict:
    """The same shapes with other content: other ids, no padding at all (an all-ones mask), and for Longformer
    another number of global tokens (a size the graph reads from the mask, not a shape of the inputs)."""
    ids = torch.randint(3, FAMILIES[name].config(fixed_sizes()).vocab_size, kwargs["input_ids"].shape)
    other = inputs_for(name, cls, labels=True, ids=ids)
    other["attention_mask"] = torch.ones_like(other["attention_mask"])
    if "global_attention_mask" in other:
        other["global_attention_mask"] = torch.zeros_like(other["global_attention_mask"])
        other["global_attention_mask"][0, :3] = 1
    return other


@pytest.mark.parametrize(
    "name,kernel", [(name, kernel) for name in NAMES for kernel in KERNELS if name != "rnn" or kernel == "sdpa"]
)  # (the RNN's attention has one kernel: attn_implementation changes nothing there)
def test_training_step_is_one_graph_for_any_batch_content(name, kernel):
    """The main head's training step through AOTAutograd (a forward and a backward graph) with each attention
    kernel: eager loss, logits and gradients on a padded batch, then on a batch of other ids without padding —
    compiled once."""
    cls = next(c for n, c in HEADS if n == name and c.__name__ == FAMILIES[name].head)
    model = build(name, cls, attn_implementation=kernel).train()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(model, backend=counter, fullgraph=True)
    kwargs = inputs_for(name, cls, labels=True)
    with allow_rnn(name):
        same_step(compiled, model, kwargs)
        compilations = counter.frame_count
        with torch._dynamo.config.patch(error_on_recompile=True):
            same_step(compiled, model, other_batch(name, cls, kwargs))
    assert counter.frame_count == compilations


@pytest.mark.parametrize("name", FULLGRAPH_BY_DEFAULT)
def test_new_sequence_length_compiles_at_most_once_more(name):
    """``dynamic=True``: lengths 6, 9 and 7 (padded) share the graph of the first call, or one more."""
    family, s = FAMILIES[name], fixed_sizes()
    model = family.build(s)
    counter = CompileCounterWithBackend("eager")  # (what is counted is Dynamo's capture)
    compiled = torch.compile(model, backend=counter, fullgraph=True, dynamic=True)
    first = None
    for length in (6, 9, 7):
        ids = torch.randint(3, s["vocab"], (2, length))
        mask = torch.ones_like(ids)
        mask[1, length - 2 :] = 0
        kwargs = family.inputs(s, ids, mask.flip(1) if family.padding_side == "left" else mask)
        with torch.no_grad():
            close(compiled(**kwargs).logits, model(**kwargs).logits, atol=ATOL)
        first = counter.frame_count if first is None else first
    assert counter.frame_count <= first + 1


def test_longformer_checkpointed_attention_runs_no_in_place_op(monkeypatch):
    """Compiling Longformer's training step logs torch's "Detected that context_fn is passed to
    torch.utils.checkpoint under torch.compile. Please make sure the checkpointed region does not contain in-place
    ops": torch says it for every selective checkpoint it compiles, whatever the region holds. What it asks is
    checked here: the checkpointed local attention (``BandedPattern.attend``, run in the forward pass and again in
    the backward pass) dispatches no op that mutates a tensor. (Compiled ≡ eager loss, logits and gradients through
    that checkpoint: ``test_training_step_is_one_graph_for_any_batch_content[longformer-sdpa]``.)"""
    from torch.utils._python_dispatch import TorchDispatchMode

    from hf_scratch.banded_attention import BandedPattern

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            ops.append(func)
            return func(*args, **(kwargs or {}))

    ops, calls, attend = [], [], BandedPattern.attend

    def recorded_attend(*args, **kwargs):
        calls.append(torch.is_grad_enabled())
        with Record():
            return attend(*args, **kwargs)

    monkeypatch.setattr(BandedPattern, "attend", recorded_attend)
    cls = next(c for n, c in HEADS if n == "longformer" and c.__name__ == FAMILIES["longformer"].head)
    model = build("longformer", cls).train()
    step(model, model, inputs_for("longformer", cls, labels=True))
    assert len(calls) == 2 * model.config.num_hidden_layers  # each layer's forward, then its recomputation
    assert ops and not [op for op in ops if op._schema.is_mutable]


def test_transfo_xl_memory_compiles_once_it_is_full():
    """Segments with the recurrent memory: the first segment (no memory) and the following ones (a full memory of
    mem_len) are two graphs; every later segment reuses the second. Outputs and memories as in eager mode."""
    family, s = FAMILIES["transfo_xl"], fixed_sizes()
    s["variant"] = True  # adaptive clusters of different widths
    model = family.build(s)
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(model, backend=counter, fullgraph=True)
    ids = torch.randint(3, s["vocab"], (2, 4 * s["length"]))
    compiled_mems = eager_mems = None
    with torch.no_grad():
        for segment in ids.split(s["length"], dim=1):
            actual, expected = compiled(segment, mems=compiled_mems), model(segment, mems=eager_mems)
            close(actual.logits, expected.logits, atol=ATOL)
            for a, e in zip(actual.mems, expected.mems):
                close(a, e, atol=ATOL)
            compiled_mems, eager_mems = actual.mems, expected.mems
    assert counter.frame_count == 2


def test_transfo_xl_target_only_loss_compiles():
    """The adaptive softmax's cheap loss (``logits_to_keep``: only each target's log-probability) as one graph."""
    family, s = FAMILIES["transfo_xl"], fixed_sizes()
    s["variant"] = True
    model = family.build(s)
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    ids = torch.randint(3, s["vocab"], (2, 8))
    close(compiled(ids, labels=ids, logits_to_keep=1).loss, model(ids, labels=ids, logits_to_keep=1).loss, atol=ATOL)


# --------------------------------------------------------------------------------------------------------------
# Bad input under torch.compile
# --------------------------------------------------------------------------------------------------------------

# Checks on values (ids in the vocabulary, 0/1 masks, positions in the table) become assertions inside the graph:
# a RuntimeError carrying the same words. Checks on shapes and dtypes raise while Dynamo traces: torch.compile's
# default (fullgraph=False) runs that frame eagerly and the ValueError reaches the caller; with fullgraph=True
# Dynamo reports it as an error whose message quotes the ValueError.
VALUE_CASES = {"over-long sequence", "id ≥ vocab_size", "negative id", "additive mask instead of 0/1"}


@pytest.mark.parametrize(
    "case,name,make,words",
    [(case, name, make, words) for case, names, make, words in INPUT_CASES for name in names],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_bad_inputs_are_stopped_under_compile(case, name, make, words, monkeypatch):
    model = robustness_model(name)
    monkeypatch.setattr(model, "forward", torch.compile(model.forward, backend="eager"))
    expected = RuntimeError if case in VALUE_CASES else ValueError
    with pytest.raises(expected, match=words), allow_rnn(name):
        robustness_call(name, **make(name))
    monkeypatch.undo()
    with pytest.raises(ValueError, match=words):  # and eager mode still says it with a ValueError
        robustness_call(name, **make(name))

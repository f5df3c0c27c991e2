"""Inputs are normalised once, at the public edge (issue 41, item 1).

``@normalise_inputs`` decorates every public ``forward``, base models and encoders/decoders included. A head's public
forward normalises its inputs (binds them, refuses unknown keywords, resolves the flags from the config) and hands
them to its base model with ``already_normalised()``, through the module's ``__call__``: the base model's decorator
then runs the forward body as it is. So one public call resolves its flags once, refuses unknown keywords once, and
checks each input once (``check_one_input``, the token ids, the 0/1 masks), for every family and every head, found by
reflection (``test_conformance.heads_of``). Module hooks still see the base model's call, and a base model called
directly still binds positional arguments, warns on the old cache name and refuses unknown keywords.
"""

from __future__ import annotations

import inspect
import sys
import warnings
from collections import Counter

import pytest
import torch
from families import FAMILIES
from test_conformance import HEAD_IDS, HEADS, build, inputs_for, labels_for

import hf_scratch
from hf_scratch import checks, modeling_common

# The input checks a family's forward runs on what the user passed: the argument each one checks
CHECKS = {"check_one_input": (0, 1), "check_input_ids": (0,), "check_attention_mask": (0,)}
NORMALISATION = ("resolve_flags", "refuse_unknown")


def storage_of(tensor) -> int | None:
    """Which user tensor a check reads: views (the flattened choices of a multiple-choice head) share its storage."""
    return tensor.untyped_storage().data_ptr() if isinstance(tensor, torch.Tensor) else None


@pytest.fixture
def calls(monkeypatch) -> Counter:
    """Counts every call of the normalisation steps, and every check by (check, the tensor it reads), through a
    wrapping spy on each function object the modules call (each module binds its own name at import)."""
    counted: Counter = Counter()

    def spy(name: str, function, checked: tuple):
        def wrapper(*args, **kwargs):
            if checked:
                tensor = next((args[i] for i in checked if i < len(args) and args[i] is not None), None)
                if tensor is not None:
                    counted[(name, storage_of(tensor))] += 1
            else:
                counted[name] += 1
            return function(*args, **kwargs)

        return wrapper

    spied = {**{name: () for name in NORMALISATION}, **CHECKS}
    originals = {name: getattr(modeling_common if name in NORMALISATION else checks, name) for name in spied}
    for module_name, module in list(sys.modules.items()):
        if module_name == "hf_scratch" or module_name.startswith("hf_scratch."):
            for name, checked in spied.items():
                if getattr(module, name, None) is originals[name]:
                    monkeypatch.setattr(module, name, spy(name, originals[name], checked))
    return counted


def twice(calls: Counter) -> dict:
    return {key: count for key, count in calls.items() if count > 1}


heads = pytest.mark.parametrize("name,cls", HEADS, ids=HEAD_IDS)


@heads
def test_one_public_call_normalises_and_checks_its_inputs_once(name, cls, calls):
    model = build(name, cls)
    kwargs = inputs_for(name, cls)
    kwargs.update(labels_for(name, cls, kwargs))
    with torch.no_grad():
        model(**kwargs, output_hidden_states=None, return_dict=True)
    assert calls["resolve_flags"] == 1, dict(calls)
    assert calls["refuse_unknown"] == 1, dict(calls)
    assert any(key[0] == "check_one_input" for key in calls if isinstance(key, tuple)), dict(calls)
    assert not twice(calls), f"checked more than once: {twice(calls)}"


def test_the_spy_counts_a_second_normalisation(calls):
    """The count can fail: a base model called the public way from a head's forward normalises a second time."""
    model = build("gpt", hf_scratch.ScratchGPTLMHeadModel)
    ids = inputs_for("gpt", hf_scratch.ScratchGPTLMHeadModel)["input_ids"]
    with torch.no_grad():
        model(input_ids=ids)
        once = Counter(calls)
        model.model(input_ids=ids, return_dict=True)  # what the heads did before, inside their forward
    assert calls["resolve_flags"] == once["resolve_flags"] + 1, dict(calls)
    assert calls[("check_one_input", storage_of(ids))] == once[("check_one_input", storage_of(ids))] + 1, dict(calls)


def calls_into(model) -> torch.nn.Module:
    """The submodule a head hands its inputs to: the base model (the RNN classifier: the base model's encoder)."""
    if isinstance(model, hf_scratch.ScratchRNNForSequenceClassification):
        return model.model.encoder
    return model.model


BASE_MODELS = {type(build(name, getattr(hf_scratch, FAMILIES[name].head)).model) for name in FAMILIES}
ON_A_BASE_MODEL = [(name, cls) for name, cls in HEADS if cls not in BASE_MODELS]


@pytest.mark.parametrize("name,cls", ON_A_BASE_MODEL, ids=[cls.__name__ for _, cls in ON_A_BASE_MODEL])
def test_forward_hooks_on_the_base_model_fire_when_the_head_is_called(name, cls):
    model = build(name, cls)
    seen = []
    handle = calls_into(model).register_forward_hook(
        lambda module, args, kwargs, output: seen.append(output), with_kwargs=True
    )
    try:
        with torch.no_grad():
            model(**inputs_for(name, cls))
    finally:
        handle.remove()
    assert len(seen) == 1 and not isinstance(seen[0], tuple), seen


def base_model_of(name: str) -> torch.nn.Module:
    """The family's base model, as its main head holds it."""
    return build(name, getattr(hf_scratch, FAMILIES[name].head)).model


families = pytest.mark.parametrize("name", list(FAMILIES))


@families
def test_a_base_model_called_directly_is_still_normalised(name, calls):
    """What a user calling the base model gets: positional arguments bound, unknown keywords refused, flags from the
    config (output_hidden_states=None), and the inputs checked."""
    base = base_model_of(name)
    kwargs = inputs_for(name, type(base))
    with torch.no_grad():
        expected = base(**kwargs, output_hidden_states=None)
        ids = kwargs.pop("input_ids")
        assert calls["resolve_flags"] == 1 and calls[("check_one_input", storage_of(ids))] == 1, dict(calls)
        positional = base(ids, **kwargs)
        torch.testing.assert_close(positional.last_hidden_state, expected.last_hidden_state, atol=0, rtol=0)
        hidden = [field for field in ("hidden_states", "encoder_hidden_states") if expected.get(field) is not None]
        assert base.config.output_hidden_states is False and not hidden, hidden
        with pytest.raises(TypeError, match=r"'atention_mask'.*Did you mean 'attention_mask'"):
            base(ids, **kwargs, atention_mask=ids)


def signature(cls) -> inspect.Signature:
    return inspect.signature(cls.forward)


CACHED_BASES = [name for name in FAMILIES if "cache" in signature(getattr(hf_scratch, FAMILIES[name].head)).parameters]


@pytest.mark.parametrize("name", CACHED_BASES)
def test_the_old_cache_name_warns_only_when_the_user_types_it(name):
    """From transformers 5.24 on, ``past_key_values=`` typed by the user warns (once, from the callee the user
    called); the head handing the cache on to its base model does not warn; before 5.24 nothing warns."""
    head = build(name, getattr(hf_scratch, FAMILIES[name].head))
    kwargs = inputs_for(name, type(head))
    expect_warning = modeling_common.CACHE_NAME == "cache"
    for model in (head, head.model):
        with warnings.catch_warnings(record=True) as caught, torch.no_grad():
            warnings.simplefilter("always")
            model(**kwargs, use_cache=True)
            model(**kwargs, past_key_values=None, use_cache=True)
        deprecations = [w for w in caught if "`past_key_values` is deprecated" in str(w.message)]
        assert len(deprecations) == (1 if expect_warning else 0), [str(w.message) for w in caught]
        if expect_warning:
            assert deprecations[0].category is FutureWarning and type(model).__name__ in str(deprecations[0].message)


@heads
def test_the_callers_key_is_not_in_the_signature(name, cls):
    """The Trainer's label names and generate's checks read ``inspect.signature(forward)``: the key a head adds is not
    there."""
    assert modeling_common.NORMALISED_BY_CALLER not in signature(cls).parameters

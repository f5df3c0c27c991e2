"""One rule for arguments (issue 47; ``hf_scratch/modeling_common.py``'s docstring): every head accepts every name
its transformers counterpart accepts in the installed release, with the same meaning, and still refuses a name
transformers does not know.

The names are derived from the release, whichever is installed (the newest and the floor): the parameters of the
counterpart's ``forward``; where that forward takes ``**kwargs``, also the parameters of its base model's forward
(transformers' heads hand their ``**kwargs`` on to it), the fields of the release's kwargs TypedDicts
(``TransformersKwargs``, ``FlashAttentionKwargs``) and ``CALLERS_PASS``. The counterpart is the class the converters
map to; a class transformers 5 has no counterpart of takes the nearest class of its task (``NEAREST``). A name a new
release adds fails here, not in a user's run.

Checked for every head: each name with a value that asks for nothing (None; ``use_cache=False``, which TRL's
trainers pass to every model) is accepted and changes nothing; a misspelt one is a TypeError naming the nearest
name; each name whose meaning the head does not implement is a ValueError when its value asks for something.
"""

from __future__ import annotations

import inspect

import pytest
import torch
import transformers
from dispatch import computing, recording_ops
from test_conformance import HEADS, build, inputs_for, run
from transformers import DynamicCache
from transformers.modeling_flash_attention_utils import FlashAttentionKwargs
from transformers.utils import TransformersKwargs

from hf_scratch.convert import REFERENCE_TO_SCRATCH, _conversion_for_reference

pytestmark = pytest.mark.boundary

# A forward with **kwargs takes any name; besides the TypedDicts' fields, transformers itself passes these to every
# model (generate's use_cache; return_dict, which its can_return_tuple decorator takes), and TRL's RewardTrainer,
# DPOTrainer and SFTTrainer pass use_cache=False to every model they train.
CALLERS_PASS = {"use_cache", "return_dict"}

# Our classes whose family transformers 5 no longer ships (Transformer-XL) or never did (the RNN baselines), and
# GPT's head for the AutoModelForMultipleChoice contract (GPT-2 has none): the release's nearest class of the task.
NEAREST = {
    "ScratchTransfoXLModel": ["GPT2Model"],
    "ScratchTransfoXLLMHeadModel": ["GPT2LMHeadModel"],
    "ScratchRNNModel": ["MarianModel"],
    "ScratchRNNForConditionalGeneration": ["MarianMTModel"],
    "ScratchRNNForSequenceClassification": ["BertForSequenceClassification"],
    "ScratchGPTForMultipleChoice": ["BertForMultipleChoice"],
}

# A value for each name whose meaning some head does not implement, that asks for it.
ASKING = {
    "encoder_hidden_states": lambda ids: torch.zeros(*ids.shape, 8),
    "encoder_attention_mask": torch.ones_like,
    "cache": lambda ids: DynamicCache(),
    "past_key_values": lambda ids: DynamicCache(),
    "token_type_ids": torch.zeros_like,
    "position_ids": lambda ids: torch.zeros_like(ids),
    "is_causal": lambda ids: True,
    "output_router_logits": lambda ids: True,
}


def counterparts(cls: type) -> list[type]:
    """The transformers classes the converters map ``cls`` to (GPT: GPT-2's and OpenAI GPT's), else ``NEAREST``."""
    mapped = [
        reference
        for model_type in REFERENCE_TO_SCRATCH
        for reference, ours in _conversion_for_reference(model_type).heads.items()
        if ours == cls.__name__ and hasattr(transformers, reference)
    ]
    return [getattr(transformers, name) for name in mapped or NEAREST[cls.__name__]]


def parameters(forward) -> tuple[set[str], bool]:
    """The named parameters of ``forward`` (without self), and whether it takes ``**kwargs``."""
    listed = inspect.signature(forward).parameters.values()
    named = {p.name for p in listed if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)} - {"self"}
    return named, any(p.kind is p.VAR_KEYWORD for p in listed)


def typed_kwargs() -> set[str]:
    """The fields of the kwargs TypedDicts transformers' models take through ``**kwargs``."""
    typed = (TransformersKwargs, FlashAttentionKwargs)
    return {name for fields in typed for name in fields.__required_keys__ | fields.__optional_keys__}


def transformers_names(reference: type) -> set[str]:
    """Every name ``reference``'s forward accepts in the installed release (see the module docstring)."""
    names, takes_kwargs = parameters(reference.forward)
    if takes_kwargs:
        base_model = transformers.MODEL_MAPPING[reference.config_class]
        names |= parameters(base_model.forward)[0] | typed_kwargs() | CALLERS_PASS
    return names


def accepted_names(cls: type) -> list[str]:
    return sorted(set().union(*(transformers_names(reference) for reference in counterparts(cls))))


HEAD_IDS = [cls.__name__.removeprefix("Scratch") for _, cls in HEADS]
heads = pytest.mark.parametrize("name,cls", HEADS, ids=HEAD_IDS)


def test_the_derivation_reads_the_release():
    """The derived names hold what transformers' own classes take: BERT's heads the cache flag they hand on to
    BertModel, GPT-2's classifier its own, every head the typed kwargs (num_items_in_batch, the padding-free batch's
    description)."""
    for reference in (transformers.BertForSequenceClassification, transformers.GPT2ForSequenceClassification):
        assert {"use_cache", "num_items_in_batch", "cu_seq_lens_q", "position_ids"} <= transformers_names(reference)
    assert "encoder_hidden_states" in transformers_names(transformers.BertForQuestionAnswering)
    assert {reference.__name__ for reference in counterparts(our_class("ScratchGPTModel"))} == {
        "GPT2Model",
        "OpenAIGPTModel",
    }


def our_class(name: str) -> type:
    return next(cls for _, cls in HEADS if cls.__name__ == name)


@heads
def test_every_name_transformers_takes_is_accepted_and_changes_nothing(name, cls):
    """Each name of the counterpart with a value that asks for nothing, one at a time: accepted (no TypeError) and
    the output as without it. ``use_cache=False`` is the call of TRL's RewardTrainer that issue 47 starts from."""
    model = build(name, cls).eval()
    inputs = inputs_for(name, cls)
    expected = run(model, inputs).to_tuple()[0]
    refused = {}
    for argument in accepted_names(cls):
        if argument in inputs:
            continue
        value = False if argument == "use_cache" else None
        try:
            output = run(model, inputs, **{argument: value})
        except TypeError as error:
            refused[argument] = str(error)
            continue
        torch.testing.assert_close(output.to_tuple()[0], expected, atol=0, rtol=0, msg=f"{argument}={value}")
    assert not refused, f"{cls.__name__} refuses names {counterparts(cls)} take: {refused}"


@heads
def test_a_name_transformers_does_not_know_is_still_a_type_error(name, cls):
    model = build(name, cls)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'use_cach'.*Did you mean 'use_cache'"):
        run(model, inputs_for(name, cls), use_cach=False)


@heads
def test_a_name_whose_meaning_is_not_implemented_is_a_value_error_when_it_asks_for_it(name, cls):
    """What the head's own forward does not take, among the counterpart's names: a value asking for it (a tensor,
    a cache, True) is refused with a ValueError that names it, before any kernel runs — never silently dropped."""
    model = build(name, cls)
    inputs = inputs_for(name, cls)
    own = set(inspect.signature(model.forward).parameters)
    not_taken = [argument for argument in accepted_names(cls) if argument in ASKING and argument not in own]
    for argument in not_taken:
        value = ASKING[argument](inputs["input_ids"])
        with pytest.raises(ValueError, match=rf"does not support {argument}="), recording_ops() as ops:
            run(model, inputs, **{argument: value})
        assert not computing(ops), f"{argument} refused only after {computing(ops)} ran"


def test_use_cache_true_does_what_the_counterpart_does(tmp_path):
    """transformers' BERT keeps no cache and ignores use_cache=True, so ours does too. GPT-2's classifier returns its
    decoder's cache; ours returns none, so it refuses use_cache=True (ValueError) rather than drop it."""
    ids = torch.tensor([[5, 6, 7]])
    small = {"vocab_size": 50, "num_hidden_layers": 1, "num_attention_heads": 2}
    bert = transformers.BertForSequenceClassification(
        transformers.BertConfig(hidden_size=8, intermediate_size=16, **small)
    ).eval()
    gpt2 = transformers.GPT2ForSequenceClassification(transformers.GPT2Config(n_embd=8, n_positions=8, **small)).eval()
    with torch.no_grad():
        assert not any(isinstance(value, DynamicCache) for value in bert(ids, use_cache=True).values())
        assert any(isinstance(value, DynamicCache) for value in gpt2(ids, use_cache=True).values())

    for family, head in (
        ("bert", "ScratchBertForSequenceClassification"),
        ("gpt", "ScratchGPTForSequenceClassification"),
    ):
        cls = our_class(head)
        model = build(family, cls).eval()
        inputs = inputs_for(family, cls)
        if family == "bert":
            torch.testing.assert_close(run(model, inputs, use_cache=True).logits, run(model, inputs).logits)
        else:
            with pytest.raises(ValueError, match="does not support use_cache=True.*returns it"):
                run(model, inputs, use_cache=True)

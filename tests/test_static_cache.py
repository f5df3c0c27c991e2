"""Decoding with transformers' ``StaticCache`` (GPT) and an ``EncoderDecoderCache`` whose self-attention part is
static (the encoder-decoder): ``generate(cache_implementation="static")`` gives the tokens and scores of the
growing ``DynamicCache``, greedy and sampling, on padded batches; a compiled forward (``compile_config``, or
``torch.compile(model.forward)`` over a hand-written loop) decodes with one graph per step shape and recompiles
neither as the sequence grows nor for a new prompt.

A static cache holds ``max_cache_len`` key slots, written or not: the models mask by key slot (``cache_layout``),
the new tokens' positions come from the cache, and ``generate`` hands them the 0/1 padding mask widened to every
slot (``create_masks_for_generate``). Transformer-XL's memory and the RNN's recurrent state are not transformers
caches: ``generate`` refuses ``cache_implementation`` and ``compile_config`` for them (test_generation_conventions.py).
"""

from __future__ import annotations

import pytest
import torch
from comparing import close
from families import FAMILIES, fixed_sizes
from torch._dynamo.testing import CompileCounterWithBackend
from torch._dynamo.utils import counters
from transformers import CompileConfig, EncoderDecoderCache, StaticCache

from hf_scratch.modeling_common import cache_argument

ATOL = 1e-5
STATIC = ["gpt", "transformer"]
NEW_TOKENS = 5


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()


def model_and_prompt(name: str, seed: int = 0):
    """Two layers; a batch of two prompts of 5 tokens, the second with 2 padding tokens on the family's side."""
    family, s = FAMILIES[name], fixed_sizes()
    s["layers"] = 2
    model = family.build(s)
    ids = torch.randint(3, s["vocab"], (2, 5), generator=torch.Generator().manual_seed(seed))
    mask = torch.ones_like(ids)
    mask[1, :2] = 0
    if family.padding_side == "right":
        mask = mask.flip(1)
    return model, {"input_ids": ids, "attention_mask": mask}


def generate(model, prompt: dict, **settings):
    settings = dict(
        max_new_tokens=NEW_TOKENS,
        pad_token_id=0,
        eos_token_id=None,
        decoder_start_token_id=1,
        return_dict_in_generate=True,
        output_scores=True,
        **settings,
    )
    if not model.config.is_encoder_decoder:
        settings.pop("decoder_start_token_id")
    torch.manual_seed(7)  # the same draws for sampling
    return model.generate(**prompt, **settings)


def same_generation(actual, expected) -> None:
    torch.testing.assert_close(actual.sequences, expected.sequences, atol=0, rtol=0)
    for a, e in zip(actual.scores, expected.scores, strict=True):
        close(a, e, atol=ATOL)


@pytest.mark.parametrize("do_sample", [False, True], ids=["greedy", "sampling"])
@pytest.mark.parametrize("name", STATIC)
def test_static_cache_generates_what_the_dynamic_cache_does(name, do_sample):
    model, prompt = model_and_prompt(name)
    expected = generate(model, prompt, do_sample=do_sample)
    actual = generate(model, prompt, do_sample=do_sample, cache_implementation="static")
    same_generation(actual, expected)


@pytest.mark.parametrize("name", STATIC)
def test_compiled_static_decoding_through_generate(name):
    """``compile_config`` (fullgraph, AOTAutograd): generate compiles the decoding step once; a second call with
    another prompt of the same shape reuses it."""
    model, prompt = model_and_prompt(name)
    expected = generate(model, prompt)
    compile_config = CompileConfig(fullgraph=True, backend="aot_eager", mode=None)
    compile_config._compile_all_devices = True  # transformers compiles on accelerators only unless told so
    actual = generate(model, prompt, cache_implementation="static", compile_config=compile_config)
    same_generation(actual, expected)
    assert counters["stats"]["unique_graphs"] == 1
    _, other_prompt = model_and_prompt(name, seed=1)
    with torch._dynamo.config.patch(error_on_recompile=True):
        actual = generate(model, other_prompt, cache_implementation="static", compile_config=compile_config)
    same_generation(actual, generate(model, other_prompt))


def static_cache(model, prompt: dict, max_cache_len: int):
    cache = StaticCache(config=model.config, max_cache_len=max_cache_len)
    if model.config.is_encoder_decoder:
        source_length = prompt["input_ids"].shape[1]
        return EncoderDecoderCache(cache, StaticCache(config=model.config, max_cache_len=source_length))
    return cache


@pytest.mark.parametrize("name", STATIC)
def test_compiled_forward_decodes_step_by_step(name):
    """``model.forward = torch.compile(model.forward, fullgraph=True)`` and a loop over a static cache: one graph
    for the prompt, one for every following step (same shapes: the mask spans every slot), and the logits of one
    uncached forward over the whole sequence."""
    model, prompt = model_and_prompt(name)
    seq2seq = model.config.is_encoder_decoder
    targets = torch.randint(3, model.config.vocab_size, (2, 6))
    max_cache_len = targets.shape[1] if seq2seq else prompt["input_ids"].shape[1] + targets.shape[1]
    counter = CompileCounterWithBackend("aot_eager")
    model.forward = torch.compile(model.forward, backend=counter, fullgraph=True)
    cache = static_cache(model, prompt, max_cache_len)
    if seq2seq:  # the source mask stays; the decoder reads the targets one at a time after a 2-token start
        steps = [targets[:, :2]] + list(targets[:, 2:].split(1, dim=1))
        fixed = {"input_ids": prompt["input_ids"], "attention_mask": prompt["attention_mask"]}
        full = {**fixed, "decoder_input_ids": targets}
        key = "decoder_input_ids"
    else:  # the prompt, then the targets one at a time; one 0/1 mask over every slot
        steps = [prompt["input_ids"]] + list(targets.split(1, dim=1))
        padding = torch.ones_like(targets)
        fixed = {"attention_mask": torch.cat([prompt["attention_mask"], padding], dim=1)}
        full = {"input_ids": torch.cat([prompt["input_ids"], targets], dim=1), **fixed}
        key = "input_ids"
    with torch.no_grad():
        logits = []
        for index, tokens in enumerate(steps):
            with torch._dynamo.config.patch(error_on_recompile=index > 1):
                logits.append(model(**fixed, **{key: tokens}, **cache_argument(cache), use_cache=True).logits)
        del model.forward  # the uncompiled forward again
        expected = model(**full, use_cache=False).logits
    close(torch.cat(logits, dim=1), expected, atol=ATOL)
    assert counter.frame_count == 2


def test_static_cache_takes_the_running_mask_of_the_tokens_so_far():
    """A 0/1 mask over the tokens so far (as with a DynamicCache) instead of every slot: the slots after it count
    as padding; the logits are those of one uncached forward."""
    model, prompt = model_and_prompt("gpt")
    targets = torch.randint(3, model.config.vocab_size, (2, 3))
    ids = torch.cat([prompt["input_ids"], targets], dim=1)
    mask = torch.cat([prompt["attention_mask"], torch.ones_like(targets)], dim=1)
    cache = static_cache(model, prompt, max_cache_len=ids.shape[1] + 2)
    length = prompt["input_ids"].shape[1]
    with torch.no_grad():
        logits = [model(input_ids=ids[:, :length], attention_mask=mask[:, :length], **cache_argument(cache)).logits]
        for end in range(length + 1, ids.shape[1] + 1):
            logits.append(
                model(input_ids=ids[:, end - 1 : end], attention_mask=mask[:, :end], **cache_argument(cache)).logits
            )
        close(torch.cat(logits, dim=1), model(input_ids=ids, attention_mask=mask, use_cache=False).logits, atol=ATOL)
        with pytest.raises(ValueError, match="static cache"):  # a mask that stops before the new tokens
            model(input_ids=targets[:, :1], attention_mask=mask[:, :2], **cache_argument(cache))

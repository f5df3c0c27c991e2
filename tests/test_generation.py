"""Decoding with a cache is decoding without one, for every generative family and every decoding strategy.

``generate`` hands the cache (``DynamicCache``, ``EncoderDecoderCache``, the RNN's recurrent state, Transformer-XL's
memory) back to ``forward`` under the name the installed transformers release uses (``past_key_values`` up to 5.23,
``cache`` from 5.24 on); a model that misses it decodes each step without its past, silently. So each strategy —
greedy, beam search, sampling, and the static cache where a family supports it — is compared with decoding that
recomputes the whole prefix at every step: a plain loop for greedy, ``generate(use_cache=False)`` for the others (a
hook checks that it really feeds the whole prefix, and that the cached run feeds one token per step).
"""

from __future__ import annotations

import warnings

import pytest
import torch
from families import FAMILIES

from hf_scratch.modeling_common import CACHE_NAME, returned_cache

PROMPT_LENGTH, NEW_TOKENS = 4, 6

GENERATIVE = {
    "gpt-pre-ln": ("gpt", {"layer_norm_placement": "pre"}),
    "gpt-post-ln": ("gpt", {"layer_norm_placement": "post"}),
    "transformer": ("transformer", {}),
    "rnn": ("rnn", {"cell_type": "lstm", "attention_type": "bahdanau"}),
    "transfo_xl": ("transfo_xl", {"mem_len": 16}),  # the memory covers the whole sequence: nothing is forgotten
}
STATIC = ["gpt-pre-ln", "gpt-post-ln", "transformer"]


def tiny(key: str):
    family, overrides = GENERATIVE[key]
    model = FAMILIES[family].tiny_model(**overrides)
    model.generation_config.pad_token_id = 0
    model.generation_config.eos_token_id = None  # every run decodes all NEW_TOKENS
    return family, model


def prompt(family: str, model) -> dict:
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(3, model.config.vocab_size, (2, PROMPT_LENGTH), generator=generator)
    mask = torch.ones_like(ids)
    if family == "gpt":  # left padding: the first row starts later
        mask[0, :2] = 0
    elif FAMILIES[family].seq2seq:  # a padded source
        mask[1, -1] = 0
    return {"input_ids": ids, "attention_mask": mask}


def decoder_lengths(model, run) -> list[int]:
    """The length of the (decoder) input of each forward call ``run`` makes."""
    lengths = []

    def record(module, args, kwargs):
        ids = kwargs.get("decoder_input_ids") if module.config.is_encoder_decoder else kwargs.get("input_ids")
        lengths.append(ids.shape[1])

    hook = model.register_forward_pre_hook(record, with_kwargs=True)
    try:
        run()
    finally:
        hook.remove()
    return lengths


def recomputing_greedy_loop(family: str, model, inputs: dict) -> torch.Tensor:
    """Greedy decoding by hand: the whole prefix through the model at every step, no cache anywhere."""
    if model.config.is_encoder_decoder:
        sequence = torch.full((inputs["input_ids"].shape[0], 1), model.config.decoder_start_token_id)
        for _ in range(NEW_TOKENS):
            logits = model(**inputs, decoder_input_ids=sequence, use_cache=False).logits
            sequence = torch.cat([sequence, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        return sequence
    sequence, mask = inputs["input_ids"], inputs["attention_mask"]
    for _ in range(NEW_TOKENS):
        no_cache = {} if family == "transfo_xl" else {"use_cache": False}  # (Transformer-XL: no mems passed)
        logits = model(input_ids=sequence, attention_mask=mask, **no_cache).logits
        sequence = torch.cat([sequence, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
    return sequence


@pytest.mark.parametrize("key", list(GENERATIVE))
def test_greedy_with_the_cache_equals_recomputing_the_prefix(key):
    family, model = tiny(key)
    inputs = prompt(family, model)
    with torch.no_grad():
        cached_lengths = decoder_lengths(
            model, lambda: model.generate(**inputs, max_new_tokens=NEW_TOKENS, do_sample=False)
        )
        generated = model.generate(**inputs, max_new_tokens=NEW_TOKENS, do_sample=False)
        expected = recomputing_greedy_loop(family, model, inputs)
    first = 1 if model.config.is_encoder_decoder else PROMPT_LENGTH
    assert cached_lengths == [first] + [1] * (NEW_TOKENS - 1), "the cache did not reach forward"
    assert torch.equal(generated, expected)


@pytest.mark.parametrize("strategy", ["beam", "sampling"])
@pytest.mark.parametrize("key", list(GENERATIVE))
def test_beam_search_and_sampling_with_the_cache_equal_recomputing_the_prefix(key, strategy):
    family, model = tiny(key)
    inputs = prompt(family, model)
    settings = dict(max_new_tokens=NEW_TOKENS, num_beams=3, num_return_sequences=2, do_sample=False)
    if strategy == "sampling":
        settings = dict(max_new_tokens=NEW_TOKENS, do_sample=True, top_k=0)

    def generate(**extra):
        torch.manual_seed(0)
        with torch.no_grad():
            return model.generate(**inputs, **settings, **extra)

    uncached_lengths = decoder_lengths(model, lambda: generate(use_cache=False))
    first = 1 if model.config.is_encoder_decoder else PROMPT_LENGTH
    assert uncached_lengths == list(range(first, first + NEW_TOKENS)), "use_cache=False did not recompute the prefix"
    cached_lengths = decoder_lengths(model, generate)
    assert cached_lengths == [first] + [1] * (NEW_TOKENS - 1), "the cache did not reach forward"
    assert torch.equal(generate(), generate(use_cache=False))


@pytest.mark.parametrize("key", STATIC)
def test_static_cache_equals_recomputing_the_prefix(key):
    family, model = tiny(key)
    inputs = prompt(family, model)
    with torch.no_grad():
        generated = model.generate(**inputs, max_new_tokens=NEW_TOKENS, do_sample=False, cache_implementation="static")
        expected = recomputing_greedy_loop(family, model, inputs)
    assert torch.equal(generated, expected)


@pytest.mark.parametrize("name", ["past_key_values", "cache"])
def test_forward_takes_the_cache_under_either_name(name):
    """A decoding step by hand, with the cache passed as ``past_key_values`` (up to transformers 5.23) or ``cache``
    (5.24 on): the next token's logits equal the whole sequence's. From 5.24 on the old name warns that it is
    deprecated, as transformers' own models do (``@deprecate_kwarg("past_key_values", "5.40.0", new_name="cache")``);
    before the rename nothing warns."""
    _, model = tiny("gpt-pre-ln")
    ids = torch.randint(3, model.config.vocab_size, (2, 5), generator=torch.Generator().manual_seed(0))
    old_name = name == "past_key_values" and CACHE_NAME == "cache"
    with torch.no_grad():
        first = model(input_ids=ids[:, :4], use_cache=True)
        cache = returned_cache(first)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            step = model(input_ids=ids[:, 4:], use_cache=True, **{name: cache})
        whole = model(input_ids=ids, use_cache=False)
    deprecations = [w for w in caught if "`past_key_values` is deprecated" in str(w.message)]
    assert [w.category for w in deprecations] == ([FutureWarning] if old_name else [])
    assert all(w.category is not FutureWarning for w in caught if w not in deprecations)
    torch.testing.assert_close(step.logits[:, -1], whole.logits[:, -1], atol=1e-5, rtol=1e-5)
    with pytest.raises(TypeError, match="cache twice"):
        model(input_ids=ids[:, 4:], past_key_values=cache, cache=cache)


def test_a_cache_passed_by_position_does_not_warn():
    """``model(ids, cache)``: the caller typed no name, so nothing warns of the old one (transformers' GPT-2 takes its
    second positional argument as the cache on every release), and it decodes as the named cache does."""
    _, model = tiny("gpt-pre-ln")
    ids = torch.randint(3, model.config.vocab_size, (2, 5), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        cache = returned_cache(model(input_ids=ids[:, :4], use_cache=True))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            step = model(ids[:, 4:], cache, use_cache=True)
        whole = model(input_ids=ids, use_cache=False)
    assert not [w for w in caught if "is deprecated" in str(w.message)]
    torch.testing.assert_close(step.logits[:, -1], whole.logits[:, -1], atol=1e-5, rtol=1e-5)

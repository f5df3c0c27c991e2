"""What ``generate`` expects of a model, held against what transformers' own models do (issue 39; transformers'
``GenerationTesterMixin`` is not in its sdist, so these behaviours are tested here), family by family:

- every keyword ``generate`` does not consume reaches ``forward`` (``prepare_inputs_for_generation``): with
  ``return_dict_in_generate=True`` the attentions and hidden states come per step, shaped as ``GPT2LMHeadModel``'s
  (decoder-only: GPT, Transformer-XL) or ``MarianMTModel``'s (encoder-decoders: the Transformer, the RNN) for the
  same call; ``use_cache=False`` returns no cache (Transformer-XL: no memory either);
- a decoder prefix continues with a ``decoder_attention_mask`` that covers the past and the new tokens, as
  ``generate`` grows it (the Transformer, the RNN);
- a decoding state that is not a transformers ``Cache`` (Transformer-XL's memory, the RNN's recurrent state) is
  declared with transformers' flags, and ``generate`` refuses assisted decoding, a cache implementation and
  compiled decoding with a ValueError before any forward runs;
- a second ``generate`` continues from the state a first one returned (the RNN's and Transformer-XL's too), given
  the whole sequence so far, as ``GPT2LMHeadModel`` and ``MarianMTModel`` do;
- every config carries the special-token fields (``None`` allowed), and ``generate()`` without a prompt gives
  transformers' own error where there is no ``bos_token_id`` (or starts from it where there is).
"""

from __future__ import annotations

import pytest
import torch
from families import FAMILIES, NAMES
from transformers import CompileConfig, GPT2Config, GPT2LMHeadModel, MarianConfig, MarianMTModel

from hf_scratch.modeling_common import cache_argument, returned_cache

pytestmark = pytest.mark.boundary  # generation touches the boundary with transformers (conftest.BOUNDARY_FILES)

DECODERS = ["gpt", "transfo_xl"]
SEQ2SEQ = ["transformer", "rnn"]
GENERATIVE = DECODERS + SEQ2SEQ
NOT_A_CACHE = ["transfo_xl", "rnn"]  # decoding states of their own
PROMPT_LENGTH, NEW_TOKENS = 4, 3


def tiny(name: str):
    """The family's tiny model with eager attention (the kernel that returns attention weights); Transformer-XL's
    memory is long enough to keep every token of these runs, so its keys are the tokens so far, as GPT-2's."""
    overrides = {"mem_len": 16} if name == "transfo_xl" else {}
    model = FAMILIES[name].tiny_model(attn_implementation="eager", **overrides)
    model.generation_config.pad_token_id = 0
    return model


def prompt_ids(vocab_size: int) -> torch.Tensor:
    return torch.randint(3, vocab_size, (2, PROMPT_LENGTH), generator=torch.Generator().manual_seed(0))


def reference_for(model):
    """transformers' model of the same shape: GPT-2 for a decoder, Marian for an encoder-decoder (eager attention)."""
    config = model.config
    if config.is_encoder_decoder:
        heads = getattr(config, "decoder_attention_heads", 2)
        reference = MarianConfig(
            vocab_size=config.vocab_size,
            d_model=config.hidden_size,
            encoder_layers=config.encoder_layers,
            decoder_layers=config.decoder_layers,
            encoder_attention_heads=heads,
            decoder_attention_heads=heads,
            encoder_ffn_dim=2 * config.hidden_size,
            decoder_ffn_dim=2 * config.hidden_size,
            pad_token_id=0,
            eos_token_id=2,
            decoder_start_token_id=config.decoder_start_token_id,
            forced_eos_token_id=None,
        )
        return MarianMTModel._from_config(reference, attn_implementation="eager").eval()
    reference = GPT2Config(
        vocab_size=config.vocab_size,
        n_embd=config.hidden_size,
        n_layer=config.num_hidden_layers,
        n_head=config.num_attention_heads,
        pad_token_id=0,
    )
    return GPT2LMHeadModel._from_config(reference, attn_implementation="eager").eval()


def generate_everything(model, ids: torch.Tensor, **settings):
    with torch.no_grad():
        return model.generate(
            input_ids=ids,
            max_new_tokens=NEW_TOKENS,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=0,
            return_dict_in_generate=True,
            output_attentions=True,
            output_hidden_states=True,
            output_scores=True,
            **settings,
        )


def shapes(per_step) -> list[list[tuple]]:
    """The shape of every tensor of every step: [[layer 0, layer 1, …] of step 0, …]."""
    return [[tuple(tensor.shape) for tensor in step] for step in per_step]


# --------------------------------------------------------------------------------------------------------------
# 1. generate passes on every keyword it does not consume
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", GENERATIVE)
def test_prepare_inputs_for_generation_passes_on_every_keyword(name):
    """What transformers' generation tests check of every model: keywords it does not know reach the model
    inputs unchanged (``forward`` then accepts them or refuses them by name)."""
    model = tiny(name)
    ids = prompt_ids(model.config.vocab_size)
    passed = {"output_attentions": True, "output_hidden_states": True, "custom_arg": "test_value", "numeric_arg": 42}
    inputs = model.prepare_inputs_for_generation(ids, **passed)
    assert ("decoder_input_ids" if model.config.is_encoder_decoder else "input_ids") in inputs
    assert {key: inputs.get(key) for key in passed} == passed


def test_transfo_xl_prepare_inputs_for_generation_feeds_the_memory_and_the_keywords():
    """Transformer-XL: the memory ``generate`` carries (under the cache's name) is fed as ``mems``, with the
    newest token only, and every other keyword still goes on."""
    model = tiny("transfo_xl")
    ids = prompt_ids(model.config.vocab_size)
    with torch.no_grad():
        memory = model(input_ids=ids[:, :-1]).mems
    inputs = model.prepare_inputs_for_generation(
        ids, next_sequence_length=1, cache=memory, use_cache=True, output_attentions=True, logits_to_keep=1
    )
    assert inputs["mems"] is memory and torch.equal(inputs["input_ids"], ids[:, -1:])
    assert inputs["output_attentions"] is True and inputs["logits_to_keep"] == 1


@pytest.mark.parametrize("use_cache", [True, False], ids=["cache", "no_cache"])
def test_transfo_xl_generate_continues_from_a_given_memory(use_cache):
    """Transformer-XL: ``mems`` given to ``generate`` (a keyword it does not consume) is the context before the
    prompt: the tokens are those generated from the whole text, with or without the cache."""
    model = tiny("transfo_xl")
    ids = torch.randint(3, model.config.vocab_size, (2, 5), generator=torch.Generator().manual_seed(0))
    settings = dict(max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=None, pad_token_id=0)
    with torch.no_grad():
        whole = model.generate(input_ids=ids, **settings)
        memory = model(input_ids=ids[:, :3]).mems
        continued = model.generate(input_ids=ids[:, 3:], mems=memory, use_cache=use_cache, **settings)
    assert torch.equal(continued, whole[:, 3:])


@pytest.mark.parametrize("use_cache", [True, False], ids=["cache", "no_cache"])
@pytest.mark.parametrize("name", DECODERS)
def test_decoder_attentions_and_hidden_states_per_step_as_gpt2(name, use_cache):
    """GPT, Transformer-XL: one tuple per generated token, one tensor per layer (hidden states: the embeddings and
    every layer), shaped as GPT-2's for the same call: the whole prompt first, then one token per step over the
    tokens so far with a cache; the whole sequence at every step without one."""
    model = tiny(name)
    ids = prompt_ids(model.config.vocab_size)
    ours = generate_everything(model, ids, use_cache=use_cache)
    expected = generate_everything(reference_for(model), ids, use_cache=use_cache)
    assert shapes(ours.attentions) == shapes(expected.attentions)
    assert shapes(ours.hidden_states) == shapes(expected.hidden_states)
    assert len(ours.attentions) == NEW_TOKENS


@pytest.mark.parametrize("use_cache", [True, False], ids=["cache", "no_cache"])
@pytest.mark.parametrize("name", SEQ2SEQ)
def test_encoder_decoder_outputs_per_step_as_marian(name, use_cache):
    """The Transformer: encoder attentions and hidden states once, decoder self-attentions, cross-attentions and
    hidden states per step, shaped as Marian's. The RNN has no self-attention and attends to the source with one
    map from its top layer: its hidden states are shaped as Marian's, its cross-attention per step as Marian's last
    layer's with one head."""
    model = tiny(name)
    ids = prompt_ids(model.config.vocab_size)
    ours = generate_everything(model, ids, use_cache=use_cache)
    expected = generate_everything(reference_for(model), ids, use_cache=use_cache)
    assert shapes([ours.encoder_hidden_states]) == shapes([expected.encoder_hidden_states])
    assert shapes(ours.decoder_hidden_states) == shapes(expected.decoder_hidden_states)
    assert len(ours.cross_attentions) == NEW_TOKENS
    if name == "rnn":
        one_map = [[(batch, 1, query, source)] for *_, (batch, _, query, source) in shapes(expected.cross_attentions)]
        assert shapes(ours.cross_attentions) == one_map
        return
    assert shapes([ours.encoder_attentions]) == shapes([expected.encoder_attentions])
    assert shapes(ours.decoder_attentions) == shapes(expected.decoder_attentions)
    assert shapes(ours.cross_attentions) == shapes(expected.cross_attentions)


@pytest.mark.parametrize("name", GENERATIVE)
def test_use_cache_false_returns_no_cache(name):
    """``generate(use_cache=False)`` returns no cache, as transformers' models; with the cache it returns the
    decoding state (Transformer-XL: its memory)."""
    model = tiny(name)
    ids = prompt_ids(model.config.vocab_size)
    assert returned_cache(generate_everything(model, ids, use_cache=False)) is None
    assert returned_cache(generate_everything(model, ids, use_cache=True)) is not None


@pytest.mark.parametrize("name", DECODERS)
def test_generate_from_inputs_embeds_continues_as_from_ids(name):
    """GPT, Transformer-XL: the prompt's embeddings reach ``forward`` on the first step (a keyword generate passes
    on); the new tokens are those generated from the ids."""
    model = tiny(name)
    ids = prompt_ids(model.config.vocab_size)
    embeddings = model.get_input_embeddings()(ids).detach()
    settings = dict(max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=None, pad_token_id=0)
    with torch.no_grad():
        from_ids = model.generate(input_ids=ids, **settings)
        from_embeddings = model.generate(inputs_embeds=embeddings, **settings)
    assert torch.equal(from_embeddings, from_ids[:, PROMPT_LENGTH:])


# --------------------------------------------------------------------------------------------------------------
# 2. A decoder prefix continues with a mask over the past and the new tokens
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SEQ2SEQ)
def test_continuing_a_decoder_prefix_with_its_attention_mask(name):
    """The Transformer, the RNN: ``generate`` grows ``decoder_attention_mask`` over the cached and the new tokens at
    every step; the tokens and scores equal those without the mask, and those of recomputing the whole prefix at
    every step (``use_cache=False``)."""
    model = tiny(name)
    source = prompt_ids(model.config.vocab_size)
    prefix = torch.tensor([[model.config.decoder_start_token_id, 8, 9]] * 2)
    with_mask = {"decoder_input_ids": prefix, "decoder_attention_mask": torch.ones_like(prefix)}
    masked = generate_everything(model, source, **with_mask)
    for other in (
        generate_everything(model, source, decoder_input_ids=prefix),
        generate_everything(model, source, **with_mask, use_cache=False),
    ):
        assert torch.equal(masked.sequences, other.sequences)
        torch.testing.assert_close(torch.stack(masked.scores), torch.stack(other.scores), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", SEQ2SEQ)
def test_decoder_mask_with_a_cache_must_cover_the_past(name):
    """With a cache the mask covers the cached tokens too (what generate passes): one over the new tokens only is
    refused with a ValueError naming it."""
    model = tiny(name)
    source = prompt_ids(model.config.vocab_size)
    prefix = torch.tensor([[model.config.decoder_start_token_id, 8, 9]] * 2)
    with torch.no_grad():
        first = model(input_ids=source, decoder_input_ids=prefix[:, :2], use_cache=True)
        step = {"input_ids": source, "decoder_input_ids": prefix[:, 2:], **cache_argument(returned_cache(first))}
        with pytest.raises(ValueError, match="decoder_attention_mask has shape"):
            model(**step, decoder_attention_mask=torch.ones(2, 1, dtype=torch.long))


# --------------------------------------------------------------------------------------------------------------
# 3. A decoding state that is not a transformers Cache
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", GENERATIVE)
def test_transformers_flags_declare_what_the_decoding_state_supports(name):
    """Transformer-XL, the RNN: stateful (no assisted decoding), no transformers cache made for them, and — what
    transformers' generation tests read as "static cache and compiled generate work" — no full-graph claim. GPT
    and the Transformer decode with transformers' caches: all three the other way."""
    cls = type(FAMILIES[name].tiny_model())
    own_state = name in NOT_A_CACHE
    assert cls._is_stateful is own_state
    assert cls._supports_default_dynamic_cache() is not own_state
    assert cls._can_compile_fullgraph is not own_state


REFUSED = {
    "assisted decoding": ({"assistant_model": "self"}, "assisted generation is not supported with stateful models"),
    "prompt lookup": ({"prompt_lookup_num_tokens": 2}, "assisted generation is not supported with stateful models"),
    "static cache": ({"cache_implementation": "static"}, "cache_implementation='static'"),
    "offloaded cache": ({"cache_implementation": "offloaded"}, "cache_implementation='offloaded'"),
    "compiled decoding": ({"compile_config": CompileConfig()}, "compile_config=CompileConfig"),
}


@pytest.mark.parametrize("mode", list(REFUSED))
@pytest.mark.parametrize("name", NOT_A_CACHE)
def test_generate_refuses_what_needs_a_transformers_cache_before_it_starts(name, mode):
    """Transformer-XL, the RNN: a ValueError saying what cannot work, before any module runs (the encoder
    included)."""
    model = tiny(name)
    settings, message = REFUSED[mode]
    settings = {key: model if value == "self" else value for key, value in settings.items()}
    calls = []
    hooks = [module.register_forward_pre_hook(lambda *_: calls.append(1)) for module in model.modules()]
    try:
        with pytest.raises(ValueError, match=message):
            model.generate(input_ids=prompt_ids(model.config.vocab_size)[:1], max_new_tokens=2, **settings)
    finally:
        for hook in hooks:
            hook.remove()
    assert calls == []


# --------------------------------------------------------------------------------------------------------------
# 4. Continuing a generation from the state it returned
# --------------------------------------------------------------------------------------------------------------

# New tokens of a first call and of a second one that continues from its state: Transformer-XL's tiny memory keeps
# mem_len=8 tokens, fewer than the first call reads, so the memory's length cannot stand for the tokens read.
FIRST, THEN = 6, 3
# transformers' own models, which show the convention: the reference for GPT (GPT-2), for the Transformer (Marian)
REFERENCES = {"GPT2LMHeadModel": "gpt", "MarianMTModel": "transformer"}


def generate_then_continue(model, ids: torch.Tensor):
    """FIRST + THEN new tokens in one call, and FIRST tokens then THEN more from the state the first call returned:
    the whole sequence so far goes in again with that state, and generate feeds only the tokens the state has not
    read — as GPT2LMHeadModel takes it. An encoder-decoder gets the source again and the decoder sequence with its
    decoder_attention_mask: without the mask MarianMTModel reads the whole decoder sequence again."""
    settings = dict(do_sample=False, eos_token_id=None, pad_token_id=0)
    with torch.no_grad():
        whole = model.generate(input_ids=ids, max_new_tokens=FIRST + THEN, **settings)
        first = model.generate(input_ids=ids, max_new_tokens=FIRST, return_dict_in_generate=True, **settings)
        so_far = first.sequences
        if model.config.is_encoder_decoder:
            continued = {
                "input_ids": ids,
                "decoder_input_ids": so_far,
                "decoder_attention_mask": torch.ones_like(so_far),
            }
        else:
            continued = {"input_ids": so_far}
        state = returned_cache(first)
        read = state.get_seq_length()  # (transformers' caches grow in place as the second call reads on)
        second = model.generate(**continued, **cache_argument(state), max_new_tokens=THEN, **settings)
    return whole, so_far, state, read, second


@pytest.mark.parametrize("name", GENERATIVE + list(REFERENCES))
def test_generate_continues_from_the_state_it_returned(name):
    """Greedy generation of n + m tokens equals n tokens followed by a second ``generate`` that continues from the
    state the first returned (``return_dict_in_generate=True``): GPT and the Transformer with transformers' caches,
    Transformer-XL with its memory, the RNN with its recurrent state (``DecodingState``: what transformers reads of
    a cache it is handed). Every state has read every token but the last generated one, as GPT-2's and Marian's
    caches (which run the same test)."""
    model = reference_for(tiny(REFERENCES[name])) if name in REFERENCES else FAMILIES[name].tiny_model().eval()
    ids = prompt_ids(model.config.vocab_size)
    whole, so_far, state, read, second = generate_then_continue(model, ids)
    assert read == so_far.shape[1] - 1
    if name == "transfo_xl":
        assert state.mems[0].shape[1] == model.config.mem_len < read
    assert torch.equal(second, whole)


# --------------------------------------------------------------------------------------------------------------
# 5. Special tokens
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_every_config_declares_the_special_tokens(name):
    """Every family's config (default and tiny) has transformers' special-token fields — ``bos_token_id``,
    ``eos_token_id``, ``pad_token_id``, and ``decoder_start_token_id`` for the encoder-decoders — each None or a
    token id, and writes them to config.json."""
    fields = ["bos_token_id", "eos_token_id", "pad_token_id"]
    if FAMILIES[name].seq2seq:
        fields.append("decoder_start_token_id")
    config_class = FAMILIES[name].tiny_config().__class__
    for config in (config_class(), FAMILIES[name].tiny_config()):
        for field in fields:
            value = getattr(config, field)
            assert value is None or 0 <= value < config.vocab_size, (field, value)
            assert field in config.to_dict()


def bos_error_of_gpt2() -> str:
    """transformers' own message for ``generate()`` without a prompt on a model without ``bos_token_id``."""
    gpt2 = GPT2LMHeadModel(GPT2Config(n_embd=16, n_layer=1, n_head=2, vocab_size=20, bos_token_id=None)).eval()
    with pytest.raises(ValueError) as error:
        gpt2.generate(max_new_tokens=1)
    return str(error.value)


@pytest.mark.parametrize("name", DECODERS)
def test_generate_without_a_prompt(name):
    """GPT, Transformer-XL (no ``bos_token_id`` by default): transformers' own error, as GPT-2 without one gives;
    with a ``bos_token_id`` in the config, generation starts from it."""
    model = tiny(name)
    assert model.config.bos_token_id is None
    with pytest.raises(ValueError) as error:
        model.generate(max_new_tokens=2)
    assert str(error.value) == bos_error_of_gpt2()
    model = FAMILIES[name].tiny_model(bos_token_id=3)
    with torch.no_grad():
        generated = model.generate(max_new_tokens=2, do_sample=False, eos_token_id=None, pad_token_id=0)
    assert generated.shape == (1, 3) and generated[0, 0] == 3


@pytest.mark.parametrize("name", SEQ2SEQ)
def test_encoder_decoder_generates_without_a_prompt(name):
    """The Transformer, the RNN (``bos_token_id`` set): the source is the bos token alone, as transformers makes it,
    and the output starts with ``decoder_start_token_id``."""
    model = tiny(name)
    with torch.no_grad():
        generated = model.generate(max_new_tokens=2, do_sample=False, eos_token_id=None)
        from_bos = model.generate(
            input_ids=torch.tensor([[model.config.bos_token_id]]), max_new_tokens=2, do_sample=False, eos_token_id=None
        )
    assert torch.equal(generated, from_bos) and generated[0, 0] == model.config.decoder_start_token_id

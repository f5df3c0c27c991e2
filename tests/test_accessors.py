"""The accessors scripts call — ``get_input_embeddings`` / ``set_input_embeddings``, ``get_output_embeddings`` /
``set_output_embeddings``, ``get_encoder``, ``get_decoder`` — give the modules they are meant to give, on every head.

transformers 5's ``PreTrainedModel`` finds most of them by name: the input embeddings at ``_input_embed_layer`` (on
the model, or on its base model ``self.model``), the output embeddings at ``lm_head``, the encoder and decoder at
``encoder`` / ``decoder`` (or the base model's). The families write out only the ones it cannot find (e.g. an
embedding nested inside the encoder); this table is the contract both kinds keep."""

from __future__ import annotations

from operator import attrgetter

import pytest
from torch import nn

import hf_scratch


def transformer(**overrides):
    return hf_scratch.ScratchTransformerConfig(
        **{
            **dict(
                vocab_size=30,
                hidden_size=8,
                encoder_layers=1,
                decoder_layers=1,
                encoder_attention_heads=2,
                decoder_attention_heads=2,
                encoder_ffn_dim=16,
                decoder_ffn_dim=16,
                max_position_embeddings=16,
            ),
            **overrides,
        }
    )


def rnn(**overrides):
    return hf_scratch.ScratchRNNConfig(vocab_size=30, hidden_size=8, **overrides)


def transfo_xl(**overrides):
    return hf_scratch.ScratchTransfoXLConfig(
        **{
            **dict(
                vocab_size=30,
                cutoffs=[10, 20],
                div_val=2,
                hidden_size=8,
                embedding_size=8,
                num_hidden_layers=1,
                num_attention_heads=2,
                head_dim=4,
                intermediate_size=16,
                mem_len=4,
                same_length=False,
            ),
            **overrides,
        }
    )


SEPARATE = dict(share_encoder_decoder_embeddings=False, tie_word_embeddings=False, decoder_vocab_size=20)

# (head, config, {accessor: the attribute path it must give, "self", or None})
CASES = [
    (
        "ScratchTransformerModel",
        transformer(),
        dict(input="encoder.embeddings.tokens", output=None, encoder="encoder", decoder="decoder"),
    ),
    (
        "ScratchTransformerModel",
        transformer(**SEPARATE),
        dict(input="encoder.embeddings.tokens", output=None, encoder="encoder", decoder="decoder"),
    ),
    (
        "ScratchTransformerForConditionalGeneration",
        transformer(),
        dict(
            input="model.encoder.embeddings.tokens", output="lm_head", encoder="model.encoder", decoder="model.decoder"
        ),
    ),
    (
        "ScratchTransformerForConditionalGeneration",
        transformer(**SEPARATE),
        dict(
            input="model.encoder.embeddings.tokens", output="lm_head", encoder="model.encoder", decoder="model.decoder"
        ),
    ),
    ("ScratchRNNModel", rnn(), dict(input="encoder.embed_tokens", output=None, encoder="encoder", decoder="decoder")),
    (
        "ScratchRNNForConditionalGeneration",
        rnn(),
        dict(input="model.encoder.embed_tokens", output="lm_head", encoder="model.encoder", decoder="model.decoder"),
    ),
    (
        "ScratchRNNForSequenceClassification",
        rnn(),
        dict(input="model.encoder.embed_tokens", output=None, encoder="model.encoder", decoder=None),
    ),
    ("ScratchTransfoXLModel", transfo_xl(), dict(input="word_embeddings", output=None, encoder="self", decoder="self")),
    (
        "ScratchTransfoXLModel",
        transfo_xl(div_val=1, cutoffs=[]),
        dict(input="word_embeddings", output=None, encoder="self", decoder="self"),
    ),
    (
        "ScratchTransfoXLLMHeadModel",
        transfo_xl(),
        dict(input="model.word_embeddings", output="lm_head", encoder="self", decoder="model"),
    ),
]
IDS = [f"{head}-{index}" for index, (head, _, _) in enumerate(CASES)]


def resolve(model: nn.Module, path):
    if path is None:
        return None
    return model if path == "self" else attrgetter(path)(model)


@pytest.mark.parametrize("head,config,expected", CASES, ids=IDS)
def test_getters_give_the_named_modules(head, config, expected):
    model = getattr(hf_scratch, head)(config)
    found = {
        "input": model.get_input_embeddings(),
        "output": model.get_output_embeddings(),
        "encoder": model.get_encoder(),
        "decoder": model.get_decoder(),
    }
    for accessor, path in expected.items():
        assert found[accessor] is resolve(model, path), (accessor, path)


@pytest.mark.parametrize("head,config,expected", CASES, ids=IDS)
def test_setters_replace_the_named_modules(head, config, expected):
    model = getattr(hf_scratch, head)(config)
    old_input = model.get_input_embeddings()
    new_input = nn.Embedding(40, 8) if isinstance(old_input, nn.Embedding) else type(old_input)(config)
    model.set_input_embeddings(new_input)
    assert model.get_input_embeddings() is new_input and resolve(model, expected["input"]) is new_input
    if getattr(config, "share_encoder_decoder_embeddings", False):  # the target side shares the source module
        decoder = model.get_decoder()
        assert decoder.embeddings.tokens is new_input
    if expected["output"] is not None:
        old_output = model.get_output_embeddings()
        new_output = nn.Linear(8, 40) if isinstance(old_output, nn.Linear) else type(old_output)(config)
        model.set_output_embeddings(new_output)
        assert model.get_output_embeddings() is new_output and resolve(model, expected["output"]) is new_output

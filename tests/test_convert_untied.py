"""Untied output layers (``tie_word_embeddings=False``) convert both ways: the reference's own decoder / LM head
becomes ours and goes back, logits within 1e-4 of the reference at every real position. transformers 5 ties only
what the config asks for, so an untied BERT or Longformer decoder also reads its own bias, and an untied Marian
configured to share its embeddings reads one matrix per side (``shared`` is unused). Also: checkpoints written before
transformers 5 (one copy of those tensors only), a config that no longer describes its weights, and Transformer-XL's
untied softmax settings."""

import json

import pytest
import torch
import transformers
from batches import bert_batch, gpt_batch, longformer_batch, transformer_sources
from comparing import max_diff_on_real
from families import FAMILIES
from safetensors.torch import load_file, save_file

from hf_scratch.convert import _conversion_for_reference, from_transformers, load_reference_checkpoint, to_transformers

GPT_TINY = dict(
    vocab_size=97, n_embd=32, n_layer=2, n_head=4, n_positions=48, pad_token_id=0, bos_token_id=1, eos_token_id=2
)
MARIAN_PAD = 98  # Marian's convention: pad = decoder start = the last id
MARIAN_TINY = dict(
    vocab_size=99,
    d_model=32,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=48,
    decoder_ffn_dim=40,
    max_position_embeddings=40,
    activation_function="swish",
    scale_embedding=True,
    pad_token_id=MARIAN_PAD,
    decoder_start_token_id=MARIAN_PAD,
    eos_token_id=0,
    forced_eos_token_id=None,
)


def _bert():
    input_ids, attention_mask, token_type_ids = bert_batch()
    config = transformers.BertConfig(**FAMILIES["bert"].tiny, tie_word_embeddings=False)
    return transformers.BertForMaskedLM(config), dict(
        input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
    )


def _gpt(reference_class, config_class):
    def build():
        input_ids, attention_mask = gpt_batch()
        config = config_class(**GPT_TINY, tie_word_embeddings=False)
        return reference_class(config), dict(input_ids=input_ids, attention_mask=attention_mask)

    return build


def _marian(share: bool):
    def build():
        input_ids, attention_mask = transformer_sources(vocab=MARIAN_PAD, pad=MARIAN_PAD)
        decoder_input_ids = torch.randint(1, MARIAN_PAD, (3, 7))
        decoder_input_ids[:, 0] = MARIAN_PAD
        config = transformers.MarianConfig(
            **MARIAN_TINY, tie_word_embeddings=False, share_encoder_decoder_embeddings=share
        )
        return transformers.MarianMTModel(config), dict(
            input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids
        )

    return build


def _longformer():
    input_ids, attention_mask, global_attention_mask = longformer_batch()
    config = transformers.LongformerConfig(**FAMILIES["longformer"].tiny, tie_word_embeddings=False)
    return transformers.LongformerForMaskedLM(config), dict(
        input_ids=input_ids, attention_mask=attention_mask, global_attention_mask=global_attention_mask
    )


REFERENCES = {
    "bert": _bert,
    "gpt2": _gpt(transformers.GPT2LMHeadModel, transformers.GPT2Config),
    "openai-gpt": _gpt(transformers.OpenAIGPTLMHeadModel, transformers.OpenAIGPTConfig),
    "marian-shared": _marian(share=True),
    "marian-per-side": _marian(share=False),
    "longformer": _longformer,
}


def untied_reference(name: str):
    """(reference, inputs): the tiny untied reference ``name`` with every parameter moved off its initial value
    (Marian's fixed sinusoid tables excepted), so the untied output layer differs from the embeddings and every
    bias matters."""
    torch.manual_seed(0)
    reference, inputs = REFERENCES[name]()
    with torch.no_grad():
        for key, parameter in reference.named_parameters():
            if "embed_positions" not in key:
                parameter.add_(torch.randn_like(parameter) * 0.1)
    output, embeddings = reference.get_output_embeddings().weight, reference.get_input_embeddings().weight
    assert output.data_ptr() != embeddings.data_ptr() and not torch.equal(output, embeddings)
    return reference.eval(), inputs


def real_positions(inputs: dict) -> torch.Tensor:
    """Where outputs are compared: the real (non-padding) tokens; for Marian every decoder position."""
    if "decoder_input_ids" in inputs:
        return torch.ones_like(inputs["decoder_input_ids"])
    return inputs["attention_mask"]


def logits_difference(expected_model, actual_model, inputs: dict) -> float:
    with torch.no_grad():
        expected, actual = expected_model(**inputs).logits, actual_model(**inputs).logits
    return max_diff_on_real(expected, actual, real_positions(inputs))


@pytest.mark.parametrize("name", REFERENCES)
def test_untied_model_converts_both_ways(name):
    reference, inputs = untied_reference(name)
    ours = from_transformers(reference).eval()
    assert not ours.config.tie_word_embeddings
    assert ours.get_output_embeddings().weight is not ours.get_input_embeddings().weight
    assert logits_difference(reference, ours, inputs) <= 1e-4
    back = to_transformers(ours).eval()
    assert type(back) is type(reference) and not back.config.tie_word_embeddings
    assert logits_difference(reference, back, inputs) <= 1e-4


def test_untied_mlm_decoder_reads_its_own_bias():
    """transformers 5 ties BERT's ``cls.predictions.decoder.bias`` to ``cls.predictions.bias`` only with tied
    embeddings: untied, the decoder's bias is the one that counts, and both come back as that one."""
    reference, _ = untied_reference("bert")
    predictions = reference.cls.predictions
    assert not torch.equal(predictions.bias, predictions.decoder.bias)
    ours = from_transformers(reference)
    assert torch.equal(ours.mlm_head.decoder.bias, predictions.decoder.bias)
    back = to_transformers(ours).cls.predictions
    assert torch.equal(back.decoder.bias, predictions.decoder.bias) and torch.equal(back.bias, predictions.decoder.bias)


def test_untied_marian_with_shared_embeddings_converts_to_per_side_embeddings():
    reference, _ = untied_reference("marian-shared")
    encoder, decoder = reference.model.encoder.embed_tokens.weight, reference.model.decoder.embed_tokens.weight
    assert not torch.equal(encoder, decoder)  # transformers 5 ties nothing here: the two sides have drifted apart
    ours = from_transformers(reference)
    assert not ours.config.share_encoder_decoder_embeddings and ours.config.decoder_vocab_size == 99
    assert torch.equal(ours.model.encoder.embeddings.tokens.weight, encoder)
    assert torch.equal(ours.model.decoder.embeddings.tokens.weight, decoder)


@pytest.mark.parametrize("name", REFERENCES)
def test_untied_checkpoint_directory_converts(name, tmp_path):
    reference, inputs = untied_reference(name)
    reference.save_pretrained(tmp_path)
    ours = load_reference_checkpoint(tmp_path)
    assert logits_difference(reference, ours, inputs) <= 1e-4


def _strip(directory, keys) -> None:
    weights = load_file(str(directory / "model.safetensors"))
    assert all(key in weights for key in keys)
    save_file(
        {k: v for k, v in weights.items() if k not in keys},
        str(directory / "model.safetensors"),
        metadata={"format": "pt"},
    )


def test_checkpoints_written_before_transformers_5_load(tmp_path):
    """Before transformers 5, BERT's decoder bias and Marian's per-side embeddings were the very tensors
    ``cls.predictions.bias`` and ``model.shared`` even when untied, and checkpoints held only those: both load."""
    bert, bert_inputs = untied_reference("bert")
    marian, marian_inputs = untied_reference("marian-shared")
    with torch.no_grad():
        bert.cls.predictions.bias.copy_(bert.cls.predictions.decoder.bias)
        marian.model.encoder.embed_tokens.weight.copy_(marian.model.shared.weight)
        marian.model.decoder.embed_tokens.weight.copy_(marian.model.shared.weight)
    bert.save_pretrained(tmp_path / "bert")
    _strip(tmp_path / "bert", ["cls.predictions.decoder.bias"])
    marian.save_pretrained(tmp_path / "marian")
    _strip(tmp_path / "marian", ["model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"])
    assert logits_difference(bert, load_reference_checkpoint(tmp_path / "bert"), bert_inputs) <= 1e-4
    assert logits_difference(marian, load_reference_checkpoint(tmp_path / "marian"), marian_inputs) <= 1e-4


def test_config_that_no_longer_describes_the_weights_is_refused():
    """An untied model whose config is switched to tied afterwards: converting it would drop its output layer."""
    reference, _ = untied_reference("gpt2")
    ours = from_transformers(reference)
    reference.config.tie_word_embeddings = True
    with pytest.raises(ValueError, match="hold different values"):
        from_transformers(reference)
    ours.config.tie_word_embeddings = True
    with pytest.raises(ValueError, match="hold different values"):
        to_transformers(ours)


# ---- Transformer-XL: its own path (transformers 5 has no class; reference checkpoints load from directories) ----


@pytest.mark.parametrize(
    "overrides",
    [
        {"tie_word_embeddings": False},  # one table per cluster, projections tied but the first
        {"tie_word_embeddings": False, "tie_projs": [False, False, False]},
        {
            "div_val": 1,
            "embedding_size": 12,
            "tie_word_embeddings": False,
            "tie_projs": [True, False, True],
            "pre_norm": True,
        },  # one projected table
    ],
)
def test_transfo_xl_untied_softmax_loads_from_the_reference_layout(overrides, tmp_path):
    """Our untied model written in the reference's names (config and weights, as the converter maps them) loads back
    with the same config and log-probabilities: no untied table or projection is dropped, and ``pre_norm`` is the
    reference's ``pre_lnorm``."""
    model = FAMILIES["transfo_xl"].tiny_model(**overrides)
    conversion = _conversion_for_reference("transfo-xl")
    reference_config = conversion.config_to_reference(model.config)
    assert reference_config["pre_lnorm"] == model.config.pre_norm
    (tmp_path / "config.json").write_text(
        json.dumps({"model_type": "transfo-xl", "architectures": ["TransfoXLLMHeadModel"], **reference_config})
    )
    untied = {k: v for k, v in model.state_dict().items() if k not in model.all_tied_weights_keys}
    save_file(conversion.weight_map(model.config).to_reference(untied), str(tmp_path / "model.safetensors"))
    loaded = load_reference_checkpoint(tmp_path)
    for name in ("tie_word_embeddings", "tie_projs", "pre_norm", "div_val", "cutoffs"):
        assert getattr(loaded.config, name) == getattr(model.config, name), name
    assert loaded.lm_head.weights[0] is not loaded.model.word_embeddings.embeddings[0].weight
    ids = torch.randint(0, model.config.vocab_size, (2, 6))
    with torch.no_grad():
        assert (loaded(ids).logits - model(ids).logits).abs().max() <= 1e-4

"""Custom 4-D attention masks (issue 39) where transformers' counterpart takes them — BERT (``BertModel``: the
encoder's ``attention_mask``) and the encoder-decoder (``MarianMTModel``: the decoder's ``decoder_attention_mask``,
and the encoder's own ``attention_mask`` when the encoder runs alone) — through the shared mask code
(``checks.check_padding_or_relation``, ``check_decoder_mask``): a (batch, 1, query, key) mask, boolean
(True = attend) or additive float (0 / a large negative value), is the whole relation. It equals the 2-D mask it
expresses, and the reference's output with the same mask. GPT's 4-D masks: tests/test_gpt.py.

Longformer takes no 4-D mask (transformers' ``LongformerModel`` cuts its mask back to (batch, length) and reads the
global tokens from it), nor do Transformer-XL and the RNN (no transformers counterpart takes one): they refuse it
with a ValueError.
"""

from __future__ import annotations

import pytest
import torch
import transformers
from batches import bert_batch as bert_padded_batch
from batches import transformer_sources
from comparing import max_diff_on_real
from families import FAMILIES
from test_transformer import marian_reference

from hf_scratch.convert import from_transformers

pytestmark = pytest.mark.boundary  # 4-D masks held to BertModel and Marian: the boundary with transformers

KERNELS = ["eager", "sdpa"]


def forms(relation: torch.Tensor) -> dict[str, torch.Tensor]:
    """The bool relation and its additive float forms."""
    additive = torch.zeros(relation.shape)
    return {
        "bool": relation,
        "finfo.min": additive.masked_fill(~relation, torch.finfo(torch.float32).min),
        "-10000": additive.masked_fill(~relation, -1e4),
    }


def reference_reads(form: str, attn_implementation: str) -> bool:
    """transformers' eager kernels add a 4-D mask as it is (a bool mask would add 1 where it attends)."""
    return form != "bool" or attn_implementation == "sdpa"


@pytest.mark.parametrize("attn_implementation", KERNELS)
def test_bert_4d_mask_equals_the_2d_mask_and_bert(attn_implementation):
    torch.manual_seed(0)
    config = transformers.BertConfig(**FAMILIES["bert"].tiny, attn_implementation=attn_implementation)
    reference = transformers.BertModel(config).eval()
    ours = from_transformers(reference).eval()
    input_ids, attention_mask, token_type_ids = bert_padded_batch()
    length = input_ids.shape[1]
    padding = attention_mask.bool()[:, None, None, :].expand(-1, 1, length, length)
    segments = token_type_ids[0]  # another relation: each segment reads only itself
    own_segment = (segments[:, None] == segments[None, :])[None, None] & padding
    with torch.no_grad():
        expected = ours(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        for relation, equals_2d in ((padding, True), (own_segment, False)):
            for form, mask in forms(relation).items():
                actual = ours(input_ids=input_ids, attention_mask=mask, token_type_ids=token_type_ids)
                if equals_2d:
                    diff = max_diff_on_real(expected.last_hidden_state, actual.last_hidden_state, attention_mask)
                    assert diff <= 1e-5, form
                if reference_reads(form, attn_implementation):
                    bert = reference(input_ids=input_ids, attention_mask=mask, token_type_ids=token_type_ids)
                    diff = max_diff_on_real(bert.last_hidden_state, actual.last_hidden_state, attention_mask)
                    assert diff <= 1e-4, (form, equals_2d)


@pytest.mark.parametrize("attn_implementation", KERNELS)
def test_transformer_4d_decoder_mask_equals_the_2d_mask_and_marian(attn_implementation):
    """The decoder's mask: causal ∧ target padding as a 4-D relation; and the encoder alone with a 4-D mask."""
    reference = marian_reference(attn_implementation=attn_implementation)
    ours = from_transformers(reference).eval()
    source, source_mask = transformer_sources()
    target = torch.randint(1, 98, (3, 5))
    target_mask = torch.ones_like(target)
    target_mask[2, 3:] = 0
    causal = torch.ones(5, 5, dtype=torch.bool).tril()[None, None] & target_mask.bool()[:, None, None, :]
    source_relation = source_mask.bool()[:, None, None, :].expand(-1, 1, 9, 9)
    inputs = {"input_ids": source, "attention_mask": source_mask, "decoder_input_ids": target}
    with torch.no_grad():
        expected = ours(**inputs, decoder_attention_mask=target_mask).logits
        expected_encoder = ours.get_encoder()(input_ids=source, attention_mask=source_mask).last_hidden_state
        for form, mask in forms(causal).items():
            actual = ours(**inputs, decoder_attention_mask=mask).logits
            assert max_diff_on_real(expected, actual, target_mask) <= 1e-5, form
            if reference_reads(form, attn_implementation):
                marian = reference(**inputs, decoder_attention_mask=mask).logits
                assert max_diff_on_real(marian, actual, target_mask) <= 1e-4, form
        for form, mask in forms(source_relation).items():
            actual = ours.get_encoder()(input_ids=source, attention_mask=mask).last_hidden_state
            assert max_diff_on_real(expected_encoder, actual, source_mask) <= 1e-5, form
            if reference_reads(form, attn_implementation):
                marian = reference.get_encoder()(input_ids=source, attention_mask=mask).last_hidden_state
                assert max_diff_on_real(marian, actual, source_mask) <= 1e-4, form


def test_4d_mask_of_the_wrong_shape_is_a_value_error():
    ids = torch.randint(3, 40, (2, 6))
    with pytest.raises(ValueError, match="4-D mask must be"):
        FAMILIES["bert"].tiny_model()(input_ids=ids, attention_mask=torch.ones(2, 1, 6, 7, dtype=torch.bool))
    with pytest.raises(ValueError, match="4-D mask must be"):
        FAMILIES["transformer"].tiny_model()(
            input_ids=ids, decoder_input_ids=ids[:, :4], decoder_attention_mask=torch.ones(2, 1, 4, 5, dtype=torch.bool)
        )


@pytest.mark.parametrize("name", ["longformer", "transfo_xl", "rnn"])
def test_families_without_4d_masks_refuse_them(name):
    family = FAMILIES[name]
    ids = torch.randint(3, 30, (2, 6))
    kwargs = {"input_ids": ids, "attention_mask": torch.ones(2, 1, 6, 6, dtype=torch.bool)}
    if family.seq2seq:
        kwargs["decoder_input_ids"] = ids[:, :4]
    with pytest.raises(ValueError, match="attention_mask has shape"):
        family.tiny_model()(**kwargs)

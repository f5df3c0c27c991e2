"""``FieldNames``: the conversions' reference-name ↔ field-name translation starts from the config's
``attribute_map``."""

from __future__ import annotations

from hf_scratch import ScratchGPTConfig, ScratchTransfoXLConfig
from hf_scratch.convert import FieldNames


def test_field_names_start_from_the_attribute_map():
    names = FieldNames.of(ScratchGPTConfig, same=("vocab_size",), without=("afn",)).names
    assert {k: v for k, v in names.items() if k != "vocab_size"} == {
        k: v for k, v in ScratchGPTConfig.attribute_map.items() if k != "afn"
    }
    assert names["vocab_size"] == "vocab_size"


def test_a_fields_own_name_wins_over_an_alias_both_ways():
    names = FieldNames.of(
        ScratchTransfoXLConfig, other={"tie_weight": "tie_word_embeddings"}, same=("vocab_size", "tie_word_embeddings")
    )
    assert names.to_ours({"n_token": 5, "vocab_size": 7, "tie_weight": False}) == {
        "vocab_size": 7,
        "tie_word_embeddings": False,
    }
    assert names.to_ours({"n_token": 5, "d_model": 8, "dropatt": None}) == {"vocab_size": 5, "hidden_size": 8}
    assert names.to_reference({"vocab_size": 7, "tie_word_embeddings": True, "pre_norm": True, "head_dim": None}) == {
        "vocab_size": 7,
        "tie_word_embeddings": True,
        "pre_lnorm": True,
    }

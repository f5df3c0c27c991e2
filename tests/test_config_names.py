"""Config names across families (CONTRIBUTING.md, "Names across families"): a config written under a former or
reference name (``attribute_map``) loads into the field, is saved under the field's own name and loads back, and the
other name keeps reading the same value; the pre-LN switch is ``pre_norm`` in every family that has one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import transformers

import hf_scratch

CHECKPOINTS = Path(__file__).resolve().parent / "fixtures" / "checkpoints"

# (config class, the other name, the field it sets, a value other than the field's default)
ALIASES = [
    (hf_scratch.ScratchTransfoXLConfig, "pre_lnorm", "pre_norm", True),  # the field's name before the rename
    (hf_scratch.ScratchTransfoXLConfig, "dropatt", "attention_probs_dropout_prob", 0.2),
    (hf_scratch.ScratchGPTConfig, "n_embd", "hidden_size", 96),  # 12 heads of 8
    (hf_scratch.ScratchGPTConfig, "summary_first_dropout", "multiple_choice_dropout", 0.3),
    (hf_scratch.ScratchGPTConfig, "summary_activation", "multiple_choice_activation", "tanh"),
    (hf_scratch.ScratchTransformerConfig, "dropout", "hidden_dropout_prob", 0.3),
    (hf_scratch.ScratchTransformerConfig, "attention_dropout", "attention_probs_dropout_prob", 0.2),
    (hf_scratch.ScratchTransformerConfig, "init_std", "initializer_range", 0.05),
]


@pytest.mark.parametrize("config_class,other,field,value", ALIASES, ids=lambda x: x if isinstance(x, str) else None)
def test_an_old_name_loads_into_the_field_and_round_trips(config_class, other, field, value, tmp_path):
    assert getattr(config_class(), field) != value  # the value really comes from the old name
    config = config_class.from_dict({"model_type": config_class.model_type, other: value})
    assert getattr(config, field) == value and getattr(config, other) == value

    config.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved[field] == value and other not in saved  # written under the field's own name only
    for loader in (config_class, transformers.AutoConfig):
        reloaded = loader.from_pretrained(tmp_path)
        assert type(reloaded) is config_class
        assert getattr(reloaded, field) == value and getattr(reloaded, other) == value

    default = getattr(config_class(), field)
    setattr(reloaded, other, default)  # the old name also writes the field after construction
    assert getattr(reloaded, field) == default


def test_a_committed_checkpoint_with_pre_lnorm_loads_as_pre_norm_blocks():
    folder = CHECKPOINTS / "transfo_xl-pre_lnorm" / "ScratchTransfoXLLMHeadModel"
    assert json.loads((folder / "config.json").read_text())["pre_lnorm"] is True  # written before the rename
    model = hf_scratch.ScratchTransfoXLLMHeadModel.from_pretrained(folder)
    assert model.config.pre_norm is True and model.config.pre_lnorm is True
    block = model.model.layers[0]
    assert block.attention_residual.pre_norm and block.feed_forward_residual.pre_norm


@pytest.mark.parametrize(
    "config_class",
    [hf_scratch.ScratchGPTConfig, hf_scratch.ScratchTransformerConfig, hf_scratch.ScratchTransfoXLConfig],
)
def test_pre_norm_is_the_pre_ln_switch_of_every_family_that_has_one(config_class, tmp_path):
    assert config_class().pre_norm is False
    config = config_class(pre_norm=True)
    assert config.pre_norm is True
    config.save_pretrained(tmp_path)
    assert config_class.from_pretrained(tmp_path).pre_norm is True


def test_gpt_keeps_layer_norm_placement_in_config_json_and_pre_norm_is_its_bool_view(tmp_path):
    config = hf_scratch.ScratchGPTConfig(pre_norm=True)
    assert config.layer_norm_placement == "pre"
    config.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["layer_norm_placement"] == "pre" and "pre_norm" not in saved
    config.pre_norm = False
    assert config.layer_norm_placement == "post"
    assert hf_scratch.ScratchGPTConfig(layer_norm_placement="pre").pre_norm is True
    with pytest.raises(ValueError, match="pre_norm"):
        hf_scratch.ScratchGPTConfig(pre_norm="pre")


def test_an_other_name_is_applied_before_the_defaults_that_depend_on_it():
    # GPT2Config's n_inner=None means 4 × n_embd: with n_embd given, the FFN is 4 × 64, not 4 × the default 768
    assert hf_scratch.ScratchGPTConfig(n_embd=64, n_head=4).intermediate_size == 256
    assert hf_scratch.ScratchGPTConfig.from_dict({"n_embd": 32, "n_head": 4, "n_inner": None}).intermediate_size == 128

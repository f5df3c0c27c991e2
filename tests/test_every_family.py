"""The checks every family's own tests make, written once and run for each family on its fixed tiny model
(``families.py``): impossible configurations and bad inputs are refused with a ValueError naming the field, the loss
honours ``num_items_in_batch`` and ``shift_labels``, a bf16 autocast training step is the fp32 one within rounding,
the Trainer reports the model's loss and resumes without missing keys, and save → load through the Auto classes
gives the same model. What only one family has stays in its own file (``test_<family>.py``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import torch
import transformers
from batches import bert_batch, gpt_batch, longformer_batch, rnn_batch, transformer_sources
from comparing import close_to_fp32
from dispatch import computing, recording_ops
from families import FAMILIES, MODEL_TEST_HEADS, NAMES
from test_conformance import HEADS, build, inputs_for, labels_for
from transformers import (
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForMultipleChoice,
    AutoModelForSeq2SeqLM,
    AutoModelForSequenceClassification,
)

import hf_scratch
from hf_scratch.modeling_common import CACHE_NAME, cache_argument

# --------------------------------------------------------------------------------------------------------------
# Each family's padded batch, with the labels of its main head
# --------------------------------------------------------------------------------------------------------------


def masked(input_ids: torch.Tensor, attention_mask: torch.Tensor, **extra) -> dict:
    """Labels = the ids, -100 on padding (masked and causal language modelling)."""
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        **extra,
        "labels": input_ids.masked_fill(attention_mask == 0, -100),
    }


def translation(input_ids: torch.Tensor, attention_mask: torch.Tensor, low: int) -> dict:
    """Target labels of another length than the source, the second one shorter (-100 after three tokens)."""
    labels = torch.randint(low, 61, (3, 5))
    labels[1, 3:] = -100
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def longformer_inputs() -> dict:
    input_ids, attention_mask, global_attention_mask = longformer_batch()
    return masked(input_ids, attention_mask, global_attention_mask=global_attention_mask)


def transfo_xl_stream() -> dict:
    input_ids = torch.randint(0, 40, (2, 6))
    labels = input_ids.clone()
    labels[1, :2] = -100
    return {"input_ids": input_ids, "labels": labels}


BATCHES: dict[str, Callable[[], dict]] = {
    "bert": lambda: masked(*bert_batch()[:2]),
    "gpt": lambda: masked(*gpt_batch()),
    "transformer": lambda: translation(*transformer_sources(vocab=61, pad=0), low=3),
    "transfo_xl": transfo_xl_stream,
    "longformer": longformer_inputs,
    "rnn": lambda: translation(*rnn_batch(), low=4),
}


# a non-default option per family, that the checks below run with (and that must survive save → load)
VARIANTS = {
    "gpt": {"layer_norm_placement": "post"},
    "transformer": {"sinusoidal_layout": "split"},
    "longformer": {"attention_dilation": [1, [1, 2, 2, 1]]},
    "rnn": {"bidirectional_encoder": True},
}


def tiny(name: str, **overrides):
    """The family's main head on its tiny configuration and variant, every parameter perturbed, in eval mode."""
    return FAMILIES[name].tiny_model(**{**VARIANTS.get(name, {}), **overrides})


def without_dropout(name: str) -> dict:
    """Overrides that set every dropout probability of the family's configuration to zero."""
    config = FAMILIES[name].tiny_config().to_dict()
    return {key: 0.0 for key, value in config.items() if "dropout" in key and isinstance(value, float)}


# --------------------------------------------------------------------------------------------------------------
# Bad configurations and bad inputs: a ValueError naming the field, before any kernel runs
# --------------------------------------------------------------------------------------------------------------

CONFIG_CASES = [  # (family, overrides of the tiny configuration, words the message must contain)
    ("bert", dict(hidden_size=30, num_attention_heads=4), "num_attention_heads"),
    ("bert", dict(vocab_size=0), "vocab_size"),
    ("gpt", dict(num_hidden_layers=0), "num_hidden_layers"),
    ("gpt", dict(hidden_size=30), "num_attention_heads"),
    ("gpt", dict(layer_norm_placement="middle"), "layer_norm_placement"),
    ("gpt", dict(lm_loss_weight=-1.0), "lm_loss_weight"),
    ("gpt", dict(embedding_dropout_prob=1.5), "embedding_dropout_prob"),
    ("transformer", dict(d_model=30, encoder_attention_heads=4), "encoder_attention_heads"),
    ("transformer", dict(hidden_dropout_prob=1.5), "hidden_dropout_prob"),
    ("transformer", dict(decoder_attention_heads=5), "decoder_attention_heads"),
    ("transformer", dict(sinusoidal_layout="rotary"), "sinusoidal_layout"),
    ("transformer", dict(decoder_vocab_size=50), "share_encoder_decoder_embeddings"),
    ("transformer", dict(label_smoothing=1.5), "label_smoothing"),
    ("transformer", dict(decoder_start_token_id=None), "decoder_start_token_id"),
    ("transfo_xl", dict(cutoffs=[20, 10]), "increase strictly"),
    ("transfo_xl", dict(cutoffs=[10, 50]), "increase strictly"),
    ("transfo_xl", dict(tie_projs=[True]), "one flag per cluster"),
    ("transfo_xl", dict(mem_len=-1), "mem_len"),
    ("transfo_xl", dict(same_length=True, mem_len=0), "same_length"),
    ("transfo_xl", dict(div_val=8, cutoffs=[10, 20]), "no dimensions"),
    ("transfo_xl", dict(hidden_dropout_prob=1.5), "dropout"),
    ("longformer", dict(attention_window=5), "even"),
    ("longformer", dict(attention_window=[4, 8, 8]), "one window per layer"),
    ("longformer", dict(attention_dilation=0), "≥ 1"),
    ("longformer", dict(attention_dilation=[1, 2, 3]), "one entry per layer"),
    ("longformer", dict(attention_dilation=[[1, 2], 1]), "one value per head"),
    ("longformer", dict(hidden_size=30), "num_attention_heads"),
    ("longformer", dict(pad_token_id=None), "pad_token_id"),
    ("rnn", dict(cell_type="transformer"), "cell_type"),
    ("rnn", dict(attention_type="luong-cosine"), "attention_type"),
    ("rnn", dict(bidirectional_encoder=True, hidden_size=15), "even"),
    ("rnn", dict(rnn_implementation="cudnn"), "rnn_implementation"),
    ("rnn", dict(decoder_start_token_id=None), "decoder_start_token_id"),
    ("rnn", dict(pad_token_id=99), "pad_token_id"),
    ("rnn", dict(hidden_dropout_prob=1.5), "dropout"),
]


@pytest.mark.parametrize("name,overrides,message", CONFIG_CASES, ids=[f"{c[0]}-{c[2]}" for c in CONFIG_CASES])
def test_config_rejects_impossible_values(name, overrides, message):
    with pytest.raises(ValueError, match=message):
        FAMILIES[name].tiny_config(**overrides)


def _ids(*rows):
    return torch.tensor(rows)


# What each family's inputs can get wrong beyond the mistakes every family refuses alike (a sequence longer than the
# positions, an id outside the vocabulary, a mask of the wrong shape or values, Transformer-XL memory of the wrong
# shape: test_robustness.py)
INPUT_CASES = [  # (family, the inputs, words the message must contain)
    ("bert", lambda: dict(input_ids=_ids([1, 2, 3]), attention_mask=torch.ones(3)), "attention_mask"),
    ("bert", lambda: dict(input_ids=_ids([1, 2, 3]), token_type_ids=_ids([0, 1, 2])), "token_type_ids"),
    ("gpt", lambda: dict(input_ids=_ids([1, 2, 3]), attention_mask=torch.full((1, 3), 2)), "0 and 1"),
    ("gpt", lambda: dict(input_ids=_ids([1, 2, 3]), inputs_embeds=torch.zeros(1, 3, 32)), "exactly one"),
    ("transformer", lambda: dict(input_ids=_ids([3, 4]), decoder_input_ids=_ids([1, 70])), "decoder_input_ids"),
    (
        "transformer",
        lambda: dict(input_ids=_ids([3, 4]), decoder_input_ids=_ids([1, 3]), decoder_attention_mask=torch.ones(1, 5)),
        "decoder_attention_mask",
    ),
    ("transformer", lambda: dict(input_ids=_ids([3, 4])), "decoder_input_ids"),
    ("transformer", lambda: dict(input_ids=_ids([3, 4]), labels=torch.tensor([1, 2])), "labels"),
    (
        "transformer",
        lambda: dict(
            input_ids=_ids([3, 4]), decoder_input_ids=_ids([1]), **cache_argument(transformers.DynamicCache())
        ),
        f"{CACHE_NAME} is a DynamicCache; .*EncoderDecoderCache",
    ),
    (
        "transfo_xl",
        lambda: dict(input_ids=torch.randint(0, 40, (2, 5)), labels=torch.randint(0, 40, (2, 3))),
        "labels has shape",
    ),
    ("transfo_xl", lambda: dict(), "exactly one"),
    (
        "longformer",
        lambda: dict(input_ids=_ids([3, 4, 5]), global_attention_mask=torch.ones(1, 2)),
        "global_attention_mask",
    ),
    (
        "longformer",
        lambda: dict(input_ids=_ids([3, 4, 5]), global_attention_mask=torch.full((1, 3), 2)),
        "global_attention_mask",
    ),
    ("rnn", lambda: dict(input_ids=_ids([1, 2]), decoder_input_ids=_ids([1, 70])), "decoder_input_ids"),
    (
        "rnn",
        lambda: dict(input_ids=_ids([0, 2, 3]), attention_mask=_ids([0, 1, 1]), decoder_input_ids=_ids([1])),
        "padding_side",
    ),
    (
        "rnn",
        lambda: dict(input_ids=_ids([1, 2]), decoder_input_ids=_ids([1]), **cache_argument((torch.zeros(1),))),
        f"{CACHE_NAME} must be the ScratchRNNDecoderState",
    ),
]
# the model each family's inputs go to: the encoders' base model, the generative families' main head
INPUT_MODELS = {"bert": "ScratchBertModel", "longformer": "ScratchLongformerModel"}


@pytest.mark.parametrize("name,make_inputs,message", INPUT_CASES, ids=[f"{c[0]}-{c[2]}" for c in INPUT_CASES])
def test_bad_inputs_raise_value_error(name, make_inputs, message):
    model = FAMILIES[name].tiny_model(INPUT_MODELS.get(name))
    inputs = make_inputs()
    with pytest.raises(ValueError, match=message), recording_ops() as ops:
        model(**inputs)
    assert not computing(ops), f"refused only after {computing(ops)} ran"


# What each head's loss reads, checked like the inputs: before any kernel runs
LABELLED_HEADS = [(name, cls, label) for name, cls in HEADS for label in labels_for(name, cls, inputs_for(name, cls))]
SPAN_POSITIONS = ("start_positions", "end_positions")  # positions outside the sequence are ignored, as in transformers


def labelled_call(name: str, cls, label: str, wrong: Callable[[torch.Tensor], torch.Tensor]) -> tuple:
    """The head on its padded batch with its labels, ``label`` replaced by ``wrong(label)``."""
    model = build(name, cls).eval()
    kwargs = inputs_for(name, cls)
    kwargs.update(labels_for(name, cls, kwargs))
    kwargs[label] = wrong(kwargs[label])
    return model, kwargs


@pytest.mark.parametrize(
    "mistake,wrong,message",
    [
        ("one too few", lambda labels: labels[..., :-1], "has shape"),
        ("out of range", lambda labels: torch.full_like(labels, 10**6), "not a class index"),
        ("floats", lambda labels: labels.float(), "integer class indices|value\\(s\\) per example"),
    ],
    ids=["one too few", "out of range", "floats"],
)
@pytest.mark.parametrize(
    "name,cls,label",
    LABELLED_HEADS,
    ids=[f"{cls.__name__.removeprefix('Scratch')}-{label}" for _, cls, label in LABELLED_HEADS],
)
def test_bad_labels_are_refused_before_any_kernel_runs(name, cls, label, mistake, wrong, message):
    model, kwargs = labelled_call(name, cls, label, wrong)
    if label in SPAN_POSITIONS and mistake == "out of range":
        assert model(**kwargs).loss is not None  # ignored, not refused (every position here: a NaN mean, as there)
        return
    with pytest.raises(ValueError, match=message), recording_ops() as ops:
        model(**kwargs)
    assert not computing(ops), f"refused only after {computing(ops)} ran"


# --------------------------------------------------------------------------------------------------------------
# Training: gradient checkpointing, gradient accumulation
# --------------------------------------------------------------------------------------------------------------


# The RNN on each of torch's cells: its fused CPU recurrence has no bf16 kernel (it raises under autocast), so the
# recurrence runs in fp32 while the projections around it run in bf16.
AUTOCAST_CASES = [(name, {}) for name in NAMES if name != "rnn"]
AUTOCAST_CASES += [("rnn", {"cell_type": cell}) for cell in ("lstm", "gru", "rnn")]
AUTOCAST_IDS = [(name + "-" + overrides.get("cell_type", "")).rstrip("-") for name, overrides in AUTOCAST_CASES]


def training_step(model, batch: dict, bf16: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss, every gradient flattened) of one forward (under bf16 autocast if asked) and backward pass."""
    model.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = model(**batch).loss
    loss.backward()
    return loss.detach(), torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


@pytest.mark.parametrize("name,overrides", AUTOCAST_CASES, ids=AUTOCAST_IDS)
def test_bf16_autocast_training_step_is_the_fp32_one_within_rounding(name, overrides):
    """A training step under ``torch.autocast("cpu", torch.bfloat16)`` runs in bf16 (the loss is not the fp32 one to
    the bit) and gives the fp32 step's loss within bf16 rounding (``comparing.close_to_fp32``), and its gradients
    within 25% of their norm: the gradients chain about twice as many rounded operations as the loss, and where
    softmaxes saturate they amplify the rounding (measured: 0.2–3.5%, and 12% for the encoder-decoder, whose tiny
    configuration is initialised with std 0.2); a gradient that is lost, doubled or flipped is off by 100%."""
    model = tiny(name, **without_dropout(name), **overrides).train()
    batch = BATCHES[name]()
    loss, gradients = training_step(model, batch, bf16=False)
    bf16_loss, bf16_gradients = training_step(model, batch, bf16=True)
    assert not torch.equal(bf16_loss, loss), "autocast did not run in bf16"
    close_to_fp32(bf16_loss, loss)
    assert (bf16_gradients - gradients).norm() <= 0.25 * gradients.norm()


@pytest.mark.parametrize("name", NAMES)
def test_loss_honours_num_items_in_batch(name):
    """Under gradient accumulation the Trainer passes the label count of the whole accumulated batch: the loss is
    the sum over this batch divided by it (a causal LM's labels count from the second position on)."""
    model = tiny(name)
    batch = BATCHES[name]()
    labels = batch["labels"][:, 1:] if FAMILIES[name].causal else batch["labels"]
    count = int((labels != -100).sum())
    with torch.no_grad():
        mean = model(**batch).loss
        summed = model(**batch, num_items_in_batch=2 * count).loss
    assert torch.allclose(summed, mean / 2, atol=1e-6)


@pytest.mark.parametrize("name", [name for name in NAMES if FAMILIES[name].causal])
def test_causal_lm_loss_honours_shift_labels(name):
    """transformers passes labels already shifted (``shift_labels``, under context parallelism): they are used as
    they are, in place of shifting ``labels`` — also with the adaptive softmax's target-only path."""
    model = tiny(name)
    batch = BATCHES[name]()
    labels = batch["labels"]
    shifted = torch.nn.functional.pad(labels[:, 1:], (0, 1), value=-100)
    other = shifted.clone()
    other[:, 0] = -100  # a different target set: the loss must follow it
    with torch.no_grad():
        expected = model(**batch).loss
        assert torch.allclose(model(**{**batch, "labels": None}, shift_labels=shifted).loss, expected, atol=1e-6)
        moved = model(**batch, shift_labels=other).loss
        reference = model(**{**batch, "labels": torch.cat([labels[:, :1], other[:, :-1]], dim=1)}).loss
        assert torch.allclose(moved, reference, atol=1e-6) and not torch.allclose(moved, expected)
        if name == "transfo_xl":
            cheap = model(**batch, shift_labels=other, logits_to_keep=1).loss
            assert torch.allclose(cheap, reference, atol=1e-5)


@pytest.mark.parametrize("name", [name for name in NAMES if FAMILIES[name].causal or FAMILIES[name].seq2seq])
def test_cache_position_from_older_generate_is_accepted_and_changes_nothing(name):
    """``generate`` before transformers 5.24 passes ``cache_position``; the models read the positions off the cache."""
    model = tiny(name)
    batch = BATCHES[name]()
    length = batch["labels"].shape[1]  # the (decoder) inputs' length
    with torch.no_grad():
        expected = model(**batch).logits
        given = model(**batch, cache_position=torch.arange(length)).logits
    assert torch.equal(given, expected)


@pytest.mark.parametrize("name", NAMES)
def test_trainer_reports_the_loss_the_model_computes(name, tmp_path):
    """The Trainer divides the summed loss by the label count it makes itself (``num_items_in_batch``): for a causal
    LM it must count from the second position on, which it does only when ``loss_type`` names a shifting loss — or
    every evaluation (and gradient-accumulated training) loss is (n − 1)/n of the true one."""
    model = tiny(name, **without_dropout(name)).eval()
    batch = {key: value for key, value in BATCHES[name]().items() if isinstance(value, torch.Tensor)}
    rows = [{key: value[i] for key, value in batch.items()} for i in range(len(batch["labels"]))]
    arguments = transformers.TrainingArguments(
        str(tmp_path), per_device_eval_batch_size=len(rows), report_to="none", use_cpu=True, disable_tqdm=True
    )
    reported = transformers.Trainer(model=model, args=arguments).evaluate(rows)["eval_loss"]
    with torch.no_grad():
        assert reported == pytest.approx(float(model(**batch).loss), rel=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_resuming_from_weights_saved_without_tied_copies_reports_nothing_missing(name, tmp_path):
    """The Trainer resumes with ``model.load_state_dict(weights of save_pretrained, strict=False)`` and warns about
    every missing key: the tied copies save_pretrained leaves out are tied again instead, and not reported."""
    from safetensors.torch import load_file

    saved = FAMILIES[name].tiny_model()
    saved.save_pretrained(tmp_path)
    weights = load_file(tmp_path / "model.safetensors")
    resumed = FAMILIES[name].tiny_model()
    with torch.no_grad():
        for parameter in resumed.parameters():
            parameter.add_(1.0)
    result = resumed.load_state_dict(weights, strict=False)
    assert result.missing_keys == [] and result.unexpected_keys == []
    for target, source in resumed.all_tied_weights_keys.items():
        assert resumed.get_parameter(target) is resumed.get_parameter(source), f"{target} is no longer {source}"
    for key, value in saved.state_dict().items():
        assert torch.equal(resumed.state_dict()[key], value), key
    resumed.load_state_dict(weights)  # strict loading accepts it too


# --------------------------------------------------------------------------------------------------------------
# Save → load through the Auto classes
# --------------------------------------------------------------------------------------------------------------


@dataclass
class Saved:
    """What a family's checkpoint must give back through the Auto classes."""

    auto_class: type  # loads the main head
    base: str  # what AutoModel loads
    tied: Callable | None = None  # reloaded model → (output weight, input weight) that must stay one tensor
    also_loads_as: dict = field(default_factory=dict)  # other Auto classes the checkpoint serves: {auto class: head}


def mlm_tie(model):
    return model.mlm_head.decoder.weight, model.model.embeddings.word.weight


SAVED = {
    "bert": Saved(AutoModelForMaskedLM, "ScratchBertModel", tied=mlm_tie),
    "gpt": Saved(
        AutoModelForCausalLM,
        "ScratchGPTModel",
        tied=lambda model: (model.lm_head.weight, model.model.embeddings.word.weight),
        also_loads_as={AutoModelForMultipleChoice: "ScratchGPTForMultipleChoice"},
    ),
    "transformer": Saved(AutoModelForSeq2SeqLM, "ScratchTransformerModel"),
    "transfo_xl": Saved(AutoModelForCausalLM, "ScratchTransfoXLModel"),
    "longformer": Saved(AutoModelForMaskedLM, "ScratchLongformerModel", tied=mlm_tie),
    "rnn": Saved(
        AutoModelForSeq2SeqLM,
        "ScratchRNNModel",
        tied=lambda model: (model.lm_head.weight, model.model.encoder.embed_tokens.weight),
        also_loads_as={AutoModelForSequenceClassification: "ScratchRNNForSequenceClassification"},
    ),
}


def module_files(name: str) -> list[str]:
    """The code a checkpoint carries for trust_remote_code: the family's pair and the core they import."""
    core = [
        "configuration_common.py",
        "remote_code.py",
        "modeling_common.py",
        "masks.py",
        "kernels.py",
        "checks.py",
        "inputs.py",
        "layers.py",
        "heads.py",
    ]
    own = {
        "rnn": ["recurrent.py"],
        "transformer": ["positional.py"],
        "transfo_xl": ["adaptive_softmax.py", "positional.py"],
        "longformer": ["banded_attention.py"],
    }
    return [f"modeling_{name}.py", f"configuration_{name}.py", *core, *own.get(name, [])]


@pytest.mark.parametrize("name", NAMES)
def test_save_load_roundtrip_through_auto_classes(name, tmp_path):
    saved = SAVED[name]
    model = tiny(name)
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["auto_map"] == type(model.config).default_auto_map  # every head loads as remote code
    for module_file in module_files(name):
        assert (tmp_path / module_file).exists(), module_file
    assert (tmp_path / "model.safetensors").exists()
    reloaded = saved.auto_class.from_pretrained(tmp_path).eval()
    assert type(reloaded) is type(model)
    for key, value in VARIANTS.get(name, {}).items():
        assert getattr(reloaded.config, key) == value, key
    if saved.tied:
        output_weight, input_weight = saved.tied(reloaded)
        assert output_weight is input_weight  # the tie survives loading
    assert all(torch.equal(value, reloaded.state_dict()[key]) for key, value in model.state_dict().items())
    batch = BATCHES[name]()
    with torch.no_grad():
        assert torch.equal(model(**batch).logits, reloaded(**batch).logits)
    assert type(AutoModel.from_pretrained(tmp_path)) is getattr(hf_scratch, saved.base)
    for auto_class, head in saved.also_loads_as.items():  # (the RNN's classifier reuses the encoder)
        other = auto_class.from_pretrained(tmp_path)
        assert type(other) is getattr(hf_scratch, head)
        assert torch.equal(other.get_input_embeddings().weight, model.get_input_embeddings().weight)


def test_every_head_of_every_family_runs_transformers_model_tests():
    """Each head a family registers (its ``default_auto_map``) is in the ``all_model_classes`` of a test class of
    test_transformers_model_tests.py (``MODEL_TEST_HEADS``, which that module's test classes read; checked here so
    that it holds offline too, where that module skips): a new family or head gets a tester too."""
    tested = {model_class for heads in MODEL_TEST_HEADS.values() for model_class in heads}
    heads = {
        getattr(hf_scratch, reference.rsplit(".", 1)[1])
        for config_class in hf_scratch.FAMILY_CONFIGS
        for auto_class, reference in config_class.default_auto_map.items()
        if auto_class != "AutoConfig"
    }
    assert heads - tested == set()
    assert {model_class.config_class for model_class in tested} == set(hf_scratch.FAMILY_CONFIGS)

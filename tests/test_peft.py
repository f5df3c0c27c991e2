"""peft on every family, as users run it: LoRA through ``get_peft_model`` with the module names each model card
documents and with ``target_modules="all-linear"``. The adapter changes the outputs; the adapted model equals its
merged copy (``merge_and_unload``) in train mode, in eval mode, under ``no_grad`` and in ``generate()``; one
optimiser step lowers the loss and moves only the adapter; adapters save and load onto a fresh base model."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch
from comparing import close
from families import FAMILIES, NAMES, fixed_sizes
from peft import LoraConfig, PeftModel, get_peft_model

import hf_scratch

ROOT = Path(__file__).parent.parent
TASK_TYPES = {"gpt": "CAUSAL_LM", "transfo_xl": "CAUSAL_LM", "transformer": "SEQ_2_SEQ_LM", "rnn": "SEQ_2_SEQ_LM"}
GENERATIVE = [name for name in NAMES if name in TASK_TYPES]


def documented_targets(family: str) -> list[str]:
    """The ``target_modules=[...]`` of the "LoRA" section of ``model_cards/<family>.md``."""
    card = (ROOT / "model_cards" / f"{family}.md").read_text()
    section = card.split("## LoRA", 1)[1].split("\n## ", 1)[0]
    return ast.literal_eval(re.search(r"target_modules=(\[[^\]]*\])", section).group(1))


def sizes() -> dict:
    """Small sizes with every optional path on: Longformer global tokens, Transformer-XL's adaptive tables
    (div_val 2), GPT-2's pre-LN, the pre-LN Transformer, a bidirectional LSTM encoder with Luong's concat
    attention (every linear layer an RNN can have)."""
    generator = torch.Generator().manual_seed(1)
    return {
        **fixed_sizes(),
        "variant": True,
        "attention_type": "luong-concat",
        "ids": torch.randint(3, 30, (2, 6), generator=generator),
        "decoder_ids": torch.randint(3, 30, (2, 3), generator=generator),
    }


def build(family: str):
    return FAMILIES[family].build(sizes())


def model_inputs(family: str) -> dict:
    """A padded batch (one row shorter, padded on the family's side) and labels."""
    s, spec = sizes(), FAMILIES[family]
    mask = torch.ones_like(s["ids"])
    if spec.padding_side == "left":
        mask[1, :2] = 0
    else:
        mask[1, -2:] = 0
    ids = s["ids"].masked_fill(mask == 0, 0)
    kwargs = spec.inputs(s, ids, mask)
    if family == "transfo_xl":  # no padding in Transformer-XL streams
        kwargs.pop("attention_mask")
        kwargs["input_ids"] = s["ids"]
    kwargs["labels"] = kwargs["decoder_input_ids"] if spec.seq2seq else kwargs["input_ids"]
    return kwargs


def lora(family: str, targets) -> LoraConfig:
    """LoRA with random (not zero) B, so the adapter changes the outputs from the start."""
    return LoraConfig(
        r=4,
        lora_alpha=8,
        lora_dropout=0.0,
        target_modules=targets,
        init_lora_weights=False,
        task_type=TASK_TYPES.get(family),
    )


def outputs(model, family: str) -> dict:
    """Logits in train mode (with autograd), eval mode (with autograd), under no_grad, and generate()'s tokens
    and scores for the generative heads."""
    kwargs = {k: v for k, v in model_inputs(family).items() if k != "labels"}
    results = {}
    model.train()
    results["train"] = model(**kwargs).logits.detach()
    model.eval()
    results["eval"] = model(**kwargs).logits.detach()
    with torch.no_grad():
        results["no_grad"] = model(**kwargs).logits
        if family in GENERATIVE:
            prompt = {k: kwargs[k] for k in ("input_ids", "attention_mask") if k in kwargs}
            generated = model.generate(
                **prompt,
                max_new_tokens=4,
                min_new_tokens=4,
                do_sample=False,
                output_scores=True,
                return_dict_in_generate=True,
            )
            results["generate"] = generated.sequences
            results["generate_scores"] = torch.stack(generated.scores)
    return results


def lora_layers(model) -> set[str]:
    return {name for name, module in model.named_modules() if hasattr(module, "lora_A")}


@pytest.mark.parametrize("targets", ["documented", "all-linear"])
@pytest.mark.parametrize("family", NAMES)
def test_adapter_equals_merged_model(family, targets):
    model = build(family)
    base = outputs(model, family)
    targets = documented_targets(family) if targets == "documented" else targets
    adapted = get_peft_model(model, lora(family, targets))
    assert lora_layers(adapted)
    with_adapter = outputs(adapted, family)
    assert (with_adapter["no_grad"] - base["no_grad"]).abs().max() > 1e-3  # the adapter does something
    merged = outputs(adapted.merge_and_unload(), family)
    for key in with_adapter:
        if key == "generate":
            assert torch.equal(with_adapter[key], merged[key]), key
        else:
            close(with_adapter[key], merged[key])


@pytest.mark.parametrize("family", NAMES)
def test_documented_targets_are_the_linear_layers(family):
    """The card's names adapt the same layers as "all-linear" (every nn.Linear but the output embeddings), and each
    is a module that hf_scratch defines."""
    documented = documented_targets(family)
    assert lora_layers(get_peft_model(build(family), lora(family, documented))) == lora_layers(
        get_peft_model(build(family), lora(family, "all-linear"))
    )
    source = "\n".join(path.read_text() for path in (ROOT / "hf_scratch").glob("*.py"))
    assert all(re.search(rf"self\.{name} = ", source) for name in documented), documented


@pytest.mark.parametrize("family", NAMES)
def test_one_training_step_lowers_the_loss_and_moves_only_the_adapter(family):
    adapted = get_peft_model(build(family), lora(family, "all-linear")).train()
    frozen = {name: p.detach().clone() for name, p in adapted.named_parameters() if not p.requires_grad}
    trainable = [p for p in adapted.parameters() if p.requires_grad]
    assert trainable and all("lora_" in name for name, p in adapted.named_parameters() if p.requires_grad)
    optimizer = torch.optim.AdamW(trainable, lr=1e-2)
    kwargs = model_inputs(family)
    before = adapted(**kwargs).loss
    before.backward()
    optimizer.step()
    with torch.no_grad():
        after = adapted(**kwargs).loss
    assert after < before
    assert all(torch.equal(p, frozen[name]) for name, p in adapted.named_parameters() if name in frozen)


@pytest.mark.parametrize("family", NAMES)
def test_adapter_saves_and_loads_onto_a_fresh_base(family, tmp_path):
    adapted = get_peft_model(build(family), lora(family, "all-linear")).eval()
    adapted.save_pretrained(tmp_path)
    assert (tmp_path / "adapter_model.safetensors").exists() and (tmp_path / "adapter_config.json").exists()
    loaded = PeftModel.from_pretrained(build(family), tmp_path).eval()
    kwargs = {k: v for k, v in model_inputs(family).items() if k != "labels"}
    with torch.no_grad():
        close(loaded(**kwargs).logits, adapted(**kwargs).logits)


def test_lora_on_the_gpt_lm_head_steers_generate():
    """An adapter on lm_head itself is seen by every decoding step: generate() with it differs from the base model
    and equals greedy decoding read off the adapted model's full forward passes."""
    # lm_head shares its weight with the token embeddings: ensure_weight_tying keeps the two tied under the adapter
    config = lora("gpt", ["lm_head"])
    config.ensure_weight_tying = True
    adapted = get_peft_model(build("gpt"), config).eval()
    prompt = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():
        generated = adapted.generate(input_ids=prompt, max_new_tokens=5, min_new_tokens=5, do_sample=False)
        with adapted.disable_adapter():
            base = adapted.generate(input_ids=prompt, max_new_tokens=5, min_new_tokens=5, do_sample=False)
        greedy = prompt
        for _ in range(5):
            greedy = torch.cat([greedy, adapted(input_ids=greedy).logits[:, -1:].argmax(-1)], dim=1)
    assert not torch.equal(generated, base)
    assert torch.equal(generated, greedy)
    assert isinstance(adapted.get_base_model(), hf_scratch.ScratchGPTLMHeadModel)

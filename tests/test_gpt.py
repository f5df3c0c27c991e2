"""GPT-1 / GPT-2: parity with transformers' GPT2* and OpenAIGPT* classes on converted weights (left padding, greedy
generation), checkpoint directories, the task heads' bad input, the HF contract (remote code, pipelines), the fused
tanh GELU and multiple choice.

What every family shares is checked once, in the cross-family files (test_robustness.py, test_every_family.py,
test_conformance.py, test_generation.py, …: CONTRIBUTING.md, "A family, step by step", 6. Tests)."""

import json

import pytest
import torch
import transformers
from batches import gpt_batch as right_padded_batch
from comparing import assert_converts_back, close, max_diff_on_real
from families import FAMILIES
from safetensors.torch import save_file
from transformers import AutoModelForMultipleChoice, AutoModelForSequenceClassification

import hf_scratch
from hf_scratch import (
    ScratchGPTConfig,
    ScratchGPTDoubleHeadsModel,
    ScratchGPTForMultipleChoice,
    ScratchGPTForSequenceClassification,
    ScratchGPTLMHeadModel,
    ScratchGPTModel,
)
from hf_scratch.convert import from_transformers, load_reference_checkpoint, to_transformers
from hf_scratch.modeling_common import cache_argument, returned_cache

GPT = FAMILIES["gpt"]
VOCAB = GPT.tiny["vocab_size"]
REFERENCE_TINY = dict(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=48, pad_token_id=0)
# the reference model types: {model_type: (transformers class prefix, config class)}
REFERENCES = {"gpt2": ("GPT2", transformers.GPT2Config), "openai-gpt": ("OpenAIGPT", transformers.OpenAIGPTConfig)}


def tiny_config(placement="pre", **overrides) -> ScratchGPTConfig:
    return GPT.tiny_config(layer_norm_placement=placement, **overrides)


def reference_model(family: str, head: str, **overrides):
    prefix, config_class = REFERENCES[family]
    config = config_class(**{**REFERENCE_TINY, "bos_token_id": 1, "eos_token_id": 2, **overrides})
    torch.manual_seed(0)
    return getattr(transformers, prefix + head)(config).eval()


def left_pad(rows: list[list[int]], pad: int = 0):
    length = max(len(r) for r in rows)
    input_ids = torch.tensor([[pad] * (length - len(r)) + r for r in rows])
    attention_mask = torch.tensor([[0] * (length - len(r)) + [1] * len(r) for r in rows])
    return input_ids, attention_mask


# ---- parity with transformers on converted weights -----------------------------------------------------------


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("family", REFERENCES)
def test_lm_and_base_parity_padded_batch_and_round_trip(family, attn_implementation):
    input_ids, attention_mask = right_padded_batch()
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    for head, field in (("Model", "last_hidden_state"), ("LMHeadModel", "logits")):
        # OpenAIGPT has only the eager kernel; GPT-2 runs the same kernel as ours
        reference = reference_model(
            family, head, **({"attn_implementation": attn_implementation} if family == "gpt2" else {})
        )
        ours = from_transformers(reference).eval()
        ours.set_attn_implementation(attn_implementation)
        assert ours.config._attn_implementation == attn_implementation
        assert type(ours) is (ScratchGPTModel if head == "Model" else ScratchGPTLMHeadModel)
        assert ours.config.layer_norm_placement == ("pre" if family == "gpt2" else "post")
        extra = {"labels": labels} if head == "LMHeadModel" else {}
        with torch.no_grad():
            expected = reference(input_ids=input_ids, attention_mask=attention_mask, **extra)
            actual = ours(input_ids=input_ids, attention_mask=attention_mask, **extra)
        assert max_diff_on_real(expected[field], actual[field], attention_mask) <= 1e-4
        if extra:
            assert abs(expected.loss.item() - actual.loss.item()) <= 1e-5

        back = assert_converts_back(ours, reference)
        assert back.config.model_type == family


@pytest.mark.parametrize("family", REFERENCES)
def test_double_heads_parity_lm_and_multiple_choice_logits(family):
    reference = reference_model(family, "DoubleHeadsModel")
    ours = from_transformers(reference).eval()
    assert isinstance(ours, ScratchGPTDoubleHeadsModel)
    ids, mask = right_padded_batch(batch=4, length=9)
    input_ids, attention_mask = ids.view(2, 2, 9), mask.view(2, 2, 9)
    mc_token_ids = attention_mask.sum(-1) - 1  # each choice's last real token
    labels, mc_labels = input_ids.masked_fill(attention_mask == 0, -100), torch.tensor([1, 0])
    # OpenAIGPTDoubleHeadsModel does not flatten a 3-D mask itself: hand it the flat one it can broadcast
    reference_mask = attention_mask.view(-1, 9) if family == "openai-gpt" else attention_mask
    with torch.no_grad():
        expected = reference(
            input_ids=input_ids,
            attention_mask=reference_mask,
            mc_token_ids=mc_token_ids,
            labels=labels,
            mc_labels=mc_labels,
        )
        actual = ours(
            input_ids=input_ids,
            attention_mask=attention_mask,
            mc_token_ids=mc_token_ids,
            labels=labels,
            mc_labels=mc_labels,
        )
    assert actual.logits.shape == (2, 2, 9, VOCAB) and actual.mc_logits.shape == (2, 2)
    assert max_diff_on_real(expected.logits, actual.logits, attention_mask) <= 1e-4
    assert (expected.mc_logits - actual.mc_logits).abs().max() <= 1e-4
    # the reference's `loss` is the LM loss alone; ours keeps both parts and combines them as GPT-1 eq. 5
    assert abs(expected.loss.item() - actual.lm_loss.item()) <= 1e-5
    assert abs(expected.mc_loss.item() - actual.mc_loss.item()) <= 1e-5
    assert torch.allclose(actual.loss, actual.mc_loss + ours.config.lm_loss_weight * actual.lm_loss)

    back = to_transformers(ours)
    assert type(back) is type(reference)
    assert all(torch.equal(back.state_dict()[k], v) for k, v in reference.state_dict().items())


@pytest.mark.parametrize("family", REFERENCES)
def test_sequence_classification_parity_reads_last_real_token(family):
    reference = reference_model(family, "ForSequenceClassification", num_labels=3)
    ours = from_transformers(reference).eval()
    assert isinstance(ours, ScratchGPTForSequenceClassification)
    input_ids, attention_mask = right_padded_batch()
    labels = torch.tensor([0, 2, 1])
    with torch.no_grad():
        expected = reference(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        actual = ours(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        without_mask = ours(input_ids=input_ids)  # falls back on pad_token_id like the reference
    assert (expected.logits - actual.logits).abs().max() <= 1e-4
    assert (expected.logits - without_mask.logits).abs().max() <= 1e-4
    assert abs(expected.loss.item() - actual.loss.item()) <= 1e-5
    back = to_transformers(ours)
    assert all(torch.equal(back.state_dict()[k], v) for k, v in reference.state_dict().items())


@pytest.mark.parametrize("family", REFERENCES)
def test_left_padded_parity_positions_from_attention_mask(family):
    """Left padding: our positions come from the mask; the reference gets the same positions explicitly."""
    reference = reference_model(family, "LMHeadModel")
    ours = from_transformers(reference).eval()
    input_ids, attention_mask = left_pad([[5, 6, 7, 8, 9, 10], [11, 12, 13], [14]])
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        expected = reference(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids).logits
        actual = ours(input_ids=input_ids, attention_mask=attention_mask).logits
    assert max_diff_on_real(expected, actual, attention_mask) <= 1e-4


@pytest.mark.parametrize("family", REFERENCES)
def test_greedy_generate_matches_transformers(family):
    reference = reference_model(family, "LMHeadModel")
    ours = from_transformers(reference).eval()
    input_ids, attention_mask = left_pad([[5, 6, 7, 8, 9], [11, 12, 13]])
    settings = dict(max_new_tokens=12, do_sample=False, pad_token_id=0, eos_token_id=None)
    with torch.no_grad():
        expected = reference.generate(input_ids=input_ids, attention_mask=attention_mask, **settings)
        actual = ours.generate(input_ids=input_ids, attention_mask=attention_mask, **settings)
    assert torch.equal(expected, actual)
    assert len(set(actual[0, 5:].tolist())) > 1  # a real continuation, not one token repeated


# ---- real checkpoint directories -----------------------------------------------------------------------------


@pytest.mark.parametrize("family", REFERENCES)
def test_load_reference_checkpoint_directory(family, tmp_path):
    reference = reference_model(family, "LMHeadModel")
    reference.save_pretrained(tmp_path / "saved")
    ours = load_reference_checkpoint(tmp_path / "saved")
    assert isinstance(ours, ScratchGPTLMHeadModel)
    assert ours.lm_head.weight is ours.model.embeddings.word.weight
    input_ids, attention_mask = right_padded_batch()
    with torch.no_grad():
        expected = reference(input_ids=input_ids, attention_mask=attention_mask).logits
        actual = ours(input_ids=input_ids, attention_mask=attention_mask).logits
    assert max_diff_on_real(expected, actual, attention_mask) <= 1e-4


def test_hub_style_gpt2_checkpoint_without_prefix_and_with_mask_buffers(tmp_path):
    """The gpt2 checkpoints on the hub store `h.0.attn.c_attn.weight` (no `transformer.`) plus old mask buffers."""
    reference = reference_model("gpt2", "LMHeadModel")
    state = {
        k.removeprefix("transformer."): v.contiguous()
        for k, v in reference.state_dict().items()
        if k != "lm_head.weight"
    }
    for i in range(2):
        state[f"h.{i}.attn.bias"] = torch.tril(torch.ones(1, 1, 48, 48))
        state[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    (tmp_path / "hub").mkdir()
    save_file(state, str(tmp_path / "hub" / "model.safetensors"))
    config = reference.config.to_dict()
    config["architectures"] = ["GPT2LMHeadModel"]
    (tmp_path / "hub" / "config.json").write_text(json.dumps(config))
    ours = load_reference_checkpoint(tmp_path / "hub")
    input_ids, _ = right_padded_batch()
    with torch.no_grad():
        assert (reference(input_ids=input_ids).logits - ours(input_ids=input_ids).logits).abs().max() <= 1e-4


def test_convert_command_line_and_auto_loading(tmp_path):
    reference = reference_model("openai-gpt", "ForSequenceClassification", num_labels=2)
    reference.save_pretrained(tmp_path / "reference")
    hf_scratch.convert.main([str(tmp_path / "reference"), str(tmp_path / "ours")])
    saved = json.loads((tmp_path / "ours" / "config.json").read_text())
    assert saved["model_type"] == "scratch-gpt" and saved["layer_norm_placement"] == "post"
    assert saved["auto_map"] == ScratchGPTConfig.default_auto_map
    ours = AutoModelForSequenceClassification.from_pretrained(tmp_path / "ours").eval()
    input_ids, attention_mask = right_padded_batch()
    with torch.no_grad():
        expected = reference(input_ids=input_ids, attention_mask=attention_mask).logits
        assert (expected - ours(input_ids=input_ids, attention_mask=attention_mask).logits).abs().max() <= 1e-4


# ---- bad input -----------------------------------------------------------------------------------------------


def test_task_heads_reject_bad_shapes():
    double = ScratchGPTDoubleHeadsModel(tiny_config()).eval()
    with pytest.raises(ValueError, match="num_choices"):
        double(input_ids=torch.tensor([[1, 2, 3]]))
    with pytest.raises(ValueError, match="mc_token_ids"):
        double(input_ids=torch.tensor([[[1, 2, 3], [4, 5, 6]]]), mc_token_ids=torch.tensor([[0, 3]]))
    classifier = ScratchGPTForSequenceClassification(tiny_config(pad_token_id=None, num_labels=2)).eval()
    with pytest.raises(ValueError, match="attention_mask"):
        classifier(input_ids=torch.tensor([[1, 2, 3], [4, 5, 6]]))


def test_conversion_rejects_what_it_cannot_represent():
    with pytest.raises(ValueError, match="scale_attn_by_inverse_layer_idx"):
        from_transformers(reference_model("gpt2", "Model", scale_attn_by_inverse_layer_idx=True))
    with pytest.raises(ValueError, match="intermediate_size"):
        to_transformers(ScratchGPTModel(tiny_config("post", intermediate_size=40)))


# ---- pipelines -----------------------------------------------------------------------------------------------


def test_text_generation_and_classification_pipelines(fixtures_dir, tmp_path):
    from transformers import pipeline

    from hf_scratch.tools.tokenization import train_tokenizer

    lines = [line for line in (fixtures_dir / "shakespeare.txt").read_text().splitlines() if line.strip()]
    tokenizer = train_tokenizer(lines, "bpe", vocab_size=300)
    config = tiny_config(
        "post",
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        num_labels=2,
        id2label={0: "NEG", 1: "POS"},
        label2id={"NEG": 0, "POS": 1},
    )
    lm = ScratchGPTLMHeadModel(config).eval()
    lm.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    generate = pipeline("text-generation", model=str(tmp_path))
    assert isinstance(generate.model, ScratchGPTLMHeadModel)
    text = generate("to be or not", max_new_tokens=8, do_sample=False)[0]["generated_text"]
    assert text.startswith("to be or not") and len(text) > len("to be or not")
    # the pipeline's continuation is the model's own greedy continuation
    prompt = tokenizer("to be or not", return_tensors="pt")
    with torch.no_grad():
        ids = lm.generate(**prompt, max_new_tokens=8, do_sample=False, pad_token_id=config.pad_token_id)
    assert text == tokenizer.decode(ids[0], skip_special_tokens=True)

    classify = pipeline(
        "text-classification", model=ScratchGPTForSequenceClassification(config).eval(), tokenizer=tokenizer
    )
    results = classify(["my lord", "to be or not to be, that is the question"])
    assert [set(r) for r in results] == [{"label", "score"}] * 2 and all(r["label"] in {"NEG", "POS"} for r in results)


def test_generate_goes_through_the_lm_head_module():
    """Every decoding step calls lm_head itself (no cached copy of its weight): a forward hook on it — what peft
    adapters, quantized replacements and instrumentation rely on — steers generate()."""
    model = ScratchGPTLMHeadModel(tiny_config()).eval()
    prompt = torch.tensor([[5, 6, 7]])
    with torch.no_grad():
        plain = model.generate(prompt, max_new_tokens=4, do_sample=False, pad_token_id=0)
    favourite = int(plain[0, -1] + 1) % VOCAB

    def prefer_one_token(module, inputs, output):
        return output + 100.0 * torch.nn.functional.one_hot(torch.tensor(favourite), VOCAB)

    calls = []
    handles = [
        model.lm_head.register_forward_hook(prefer_one_token),
        model.lm_head.register_forward_hook(lambda module, inputs, output: calls.append(inputs[0].shape)),
    ]
    with torch.no_grad():
        steered = model.generate(prompt, max_new_tokens=4, do_sample=False, pad_token_id=0)
    for handle in handles:
        handle.remove()
    assert steered[0, 3:].tolist() == [favourite] * 4
    assert len(calls) == 4  # one call per generated token


def test_remote_code_loads_every_head_from_the_copied_files(tmp_path):
    """save_pretrained copies the modeling code; loaded as a dynamic module (what trust_remote_code=True does where
    hf_scratch is not installed) every head in auto_map comes from those copies and gives the same logits."""
    import ast
    import sys

    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    model = ScratchGPTLMHeadModel(tiny_config("post")).eval()
    model.save_pretrained(tmp_path)
    for module_file in tmp_path.glob("*.py"):  # only relative imports of siblings, torch and transformers
        for node in ast.walk(ast.parse(module_file.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                relative = isinstance(node, ast.ImportFrom) and node.level == 1
                allowed = set(sys.stdlib_module_names) | {"torch", "transformers", "safetensors", "huggingface_hub"}
                assert relative or all(n.split(".")[0] in allowed for n in names), (module_file.name, names)
    loaded = {}
    for auto_class, reference in ScratchGPTConfig.default_auto_map.items():
        cls = get_class_from_dynamic_module(reference, str(tmp_path))
        assert cls.__module__.startswith("transformers_modules"), cls.__module__
        loaded[auto_class] = cls
    remote = loaded["AutoModelForCausalLM"].from_pretrained(tmp_path).eval()
    input_ids, attention_mask = right_padded_batch()
    with torch.no_grad():
        assert torch.equal(
            remote(input_ids=input_ids, attention_mask=attention_mask).logits,
            model(input_ids=input_ids, attention_mask=attention_mask).logits,
        )
    assert loaded["AutoModelForMultipleChoice"].__name__ == "ScratchGPTForMultipleChoice"


@pytest.mark.parametrize("name", ["gelu_new", "gelu_fast"])
def test_tanh_gelu_runs_as_one_fused_kernel_with_the_same_values(name):
    """GPT-2's tanh-approximate GELU: our feed-forward computes transformers' formula with torch's single fused
    kernel (forward and backward), to float rounding."""
    from dispatch import dispatched_ops
    from transformers.activations import ACT2FN

    from hf_scratch.layers import get_activation

    x = (torch.randn(64, 48) * 3).requires_grad_(True)
    upstream = torch.randn(64, 48)
    activation = get_activation(name)
    ops = dispatched_ops(lambda: torch.autograd.grad(activation(x), x, upstream))
    assert [op.__name__.split(".")[0] for op in ops] == ["gelu", "gelu_backward"]
    ours = activation(x)
    (grad,) = torch.autograd.grad(ours, x, upstream)
    reference = ACT2FN[name](x)
    (reference_grad,) = torch.autograd.grad(reference, x, upstream)
    assert torch.allclose(ours, reference, atol=1e-6) and torch.allclose(grad, reference_grad, atol=1e-5)


def test_gpt_feed_forward_uses_the_fused_tanh_gelu():
    """hidden_act="gelu_new" (GPT-2's checkpoints) reaches the feed-forward as torch's fused kernel through
    ``layers.get_activation`` alone, in every block."""
    from transformers.activations import ACT2FN

    model = ScratchGPTModel(tiny_config(hidden_act="gelu_new"))
    fused = type(ACT2FN["gelu_pytorch_tanh"])
    assert fused is not type(ACT2FN["gelu_new"])
    assert all(type(layer.feed_forward.activation) is fused for layer in model.layers)


# ---- the auxiliary LM of the classifier and the multiple-choice head -----------------------------------------


def test_classifier_auxiliary_lm_goes_through_the_tied_lm_head(tmp_path):
    """λ·L1 of the classifier is computed by its lm_head module (tied to the token embeddings), so a hook or an
    adapter on it takes effect; checkpoints hold no lm_head.weight (tied), so those saved before it existed load."""
    from safetensors.torch import load_file

    model = ScratchGPTForSequenceClassification(tiny_config(num_labels=2)).eval()
    assert model.lm_head.weight is model.get_input_embeddings().weight
    input_ids, attention_mask = right_padded_batch()
    lm_labels = input_ids.masked_fill(attention_mask == 0, -100)
    with torch.no_grad():
        loss = model(input_ids=input_ids, attention_mask=attention_mask, lm_labels=lm_labels).loss
        hidden = model.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        expected = torch.nn.functional.cross_entropy(  # GPT-1 eq. 1 with W_e, written out
            (hidden @ model.get_input_embeddings().weight.T)[:, :-1].reshape(-1, VOCAB), lm_labels[:, 1:].reshape(-1)
        )
        assert torch.allclose(loss, expected, atol=1e-5)
        handle = model.lm_head.register_forward_hook(lambda module, inputs, output: output * 0.0)
        hooked = model(input_ids=input_ids, attention_mask=attention_mask, lm_labels=lm_labels).loss
        handle.remove()
    assert torch.allclose(hooked, torch.tensor(VOCAB, dtype=torch.float).log(), atol=1e-5)  # uniform logits

    model.save_pretrained(tmp_path)
    keys = set(load_file(tmp_path / "model.safetensors"))
    assert "lm_head.weight" not in keys and "score.weight" in keys  # the keys an older classifier saved
    reloaded, info = ScratchGPTForSequenceClassification.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert reloaded.lm_head.weight is reloaded.get_input_embeddings().weight
    with torch.no_grad():
        assert torch.equal(
            reloaded.eval()(input_ids=input_ids, attention_mask=attention_mask, lm_labels=lm_labels).loss, loss
        )


@pytest.mark.parametrize("family", REFERENCES)
def test_multiple_choice_scores_each_choice_at_its_last_real_token(family):
    """ScratchGPTForMultipleChoice with the double-heads reference's weights gives its mc_logits read at each
    choice's last real token, and the standard loss: cross-entropy of the softmax over the choices."""
    reference = reference_model(family, "DoubleHeadsModel")
    ours = ScratchGPTForMultipleChoice(from_transformers(reference).config).eval()
    missing, unexpected = ours.load_state_dict(from_transformers(reference).state_dict(), strict=False)
    assert not missing and unexpected == ["lm_head.weight"]
    ids, mask = right_padded_batch(batch=6, length=9)
    input_ids, attention_mask = ids.view(2, 3, 9), mask.view(2, 3, 9)
    labels = torch.tensor([2, 0])
    reference_mask = attention_mask.view(-1, 9) if family == "openai-gpt" else attention_mask
    with torch.no_grad():
        expected = reference(
            input_ids=input_ids,
            attention_mask=reference_mask,
            mc_token_ids=attention_mask.sum(-1) - 1,
            mc_labels=labels,
        )
        actual = ours(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    assert isinstance(actual, transformers.modeling_outputs.MultipleChoiceModelOutput)
    assert list(actual.keys())[0] == "loss" and actual.logits.shape == (2, 3)
    assert (actual.logits - expected.mc_logits).abs().max() <= 1e-4
    assert abs(actual.loss.item() - expected.mc_loss.item()) <= 1e-5


def test_multiple_choice_trains_with_the_trainer_through_the_auto_class(fixtures_dir, tmp_path):
    """What generic multiple-choice code does: AutoModelForMultipleChoice.from_config, DataCollatorForMultipleChoice
    (labels of shape (batch,)), Trainer — the loss is the choice cross-entropy and training lowers it."""
    from transformers import DataCollatorForMultipleChoice, Trainer, TrainingArguments

    from hf_scratch.tools.tokenization import train_tokenizer

    lines = [line for line in (fixtures_dir / "shakespeare.txt").read_text().splitlines() if line.strip()]
    tokenizer = train_tokenizer(lines, "bpe", vocab_size=300)
    config = tiny_config(
        "post",
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        embedding_dropout_prob=0.0,
        multiple_choice_dropout=0.0,
    )
    model = AutoModelForMultipleChoice.from_config(config)
    assert type(model) is ScratchGPTForMultipleChoice
    contexts = ["to be or not", "my lord", "the king", "what light"]
    endings = [
        ["to be", "a horse", "the sea"],
        ["is here", "no", "yes indeed"],
        ["is dead", "lives", "sleeps"],
        ["through yonder", "is that", "breaks"],
    ]
    features = []
    for index, (context, choices) in enumerate(zip(contexts, endings)):
        encoded = tokenizer([f"{context} {choice}" for choice in choices])
        features.append({**{k: v for k, v in encoded.items()}, "label": index % 3})
    collate = DataCollatorForMultipleChoice(tokenizer)
    batch = collate([dict(feature) for feature in features])  # (5.10's collator pops the labels from them)
    assert batch["input_ids"].dim() == 3 and batch["labels"].shape == (4,)
    with torch.no_grad():
        output = model.eval()(**batch)
    expected = torch.nn.functional.cross_entropy(output.logits, batch["labels"])
    assert torch.allclose(output.loss, expected, atol=1e-6)

    args = TrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        max_steps=8,
        learning_rate=1e-2,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        logging_steps=1,
        disable_tqdm=True,
    )
    trainer = Trainer(model=model.train(), args=args, train_dataset=features, data_collator=collate)
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert losses[-1] < losses[0]


def test_multiple_choice_rejects_language_modelling_labels():
    model = ScratchGPTForMultipleChoice(tiny_config()).eval()
    input_ids = torch.randint(3, VOCAB, (2, 3, 5))
    with pytest.raises(ValueError, match="ScratchGPTDoubleHeadsModel"):
        model(input_ids=input_ids, labels=input_ids)
    with pytest.raises(ValueError, match="num_choices"):
        model(input_ids=input_ids[0])


def test_double_heads_checkpoint_carries_its_code(tmp_path):
    """ScratchGPTDoubleHeadsModel is outside the auto_map (AutoModelForMultipleChoice is the standard head), yet its
    checkpoint carries modeling_gpt.py, and the checkpoint's AutoModelForMultipleChoice is the standard head."""
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    ScratchGPTDoubleHeadsModel(tiny_config()).save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["auto_map"]["AutoModelForMultipleChoice"] == "modeling_gpt.ScratchGPTForMultipleChoice"
    remote = get_class_from_dynamic_module("modeling_gpt.ScratchGPTDoubleHeadsModel", str(tmp_path))
    assert remote.__module__.startswith("transformers_modules")
    assert type(remote.from_pretrained(tmp_path)).__name__ == "ScratchGPTDoubleHeadsModel"


# ---- custom 4-D attention masks (issue 39) -------------------------------------------------------------------
# transformers' GPT2LMHeadModel takes a prepared (batch, 1, query, key) mask as the whole relation (causality included):
# boolean (True = attend; its sdpa kernel) or additive float (0 / a large negative value; both kernels).


def expressed(attention_mask: torch.Tensor, query_length: int | None = None) -> torch.Tensor:
    """The 4-D bool relation a (batch, key_length) 0/1 mask expresses for a decoder: key padding ∧ causal, the
    queries being the last ``query_length`` keys."""
    key_length = attention_mask.shape[1]
    query_length = key_length if query_length is None else query_length
    causal = torch.ones(key_length, key_length, dtype=torch.bool).tril()[-query_length:]
    return causal[None, None] & attention_mask.bool()[:, None, None, :]


def additive(relation: torch.Tensor, masked: float) -> torch.Tensor:
    return torch.zeros(relation.shape).masked_fill(~relation, masked)


def four_d_forms(relation: torch.Tensor) -> dict:
    return {
        "bool": relation,
        "finfo.min": additive(relation, torch.finfo(torch.float32).min),
        "-inf": additive(relation, float("-inf")),
        "-10000": additive(relation, -1e4),
    }


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_4d_mask_equals_the_2d_mask_it_expresses_and_gpt2(attn_implementation):
    """Left-padded batch: the bool and the additive float 4-D masks give the logits of the 2-D mask they express
    (positions given: a 4-D relation does not say which tokens are padding) — and GPT-2's with the same 4-D mask."""
    reference = reference_model("gpt2", "LMHeadModel", attn_implementation=attn_implementation)
    ours = from_transformers(reference).eval()
    ours.set_attn_implementation(attn_implementation)
    input_ids, attention_mask = left_pad([[5, 6, 7, 8, 9, 10], [11, 12, 13], [14]])
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        expected = ours(input_ids=input_ids, attention_mask=attention_mask).logits
        for form, mask in four_d_forms(expressed(attention_mask)).items():
            actual = ours(input_ids=input_ids, attention_mask=mask, position_ids=position_ids).logits
            assert max_diff_on_real(expected, actual, attention_mask) <= 1e-5, form
            # GPT-2's eager kernel adds the mask as it is: a bool mask adds 1, -inf gives NaN on padding rows (and
            # from there on, 0·NaN, everywhere); ours takes both
            if form in ("finfo.min", "-10000") or attn_implementation == "sdpa":
                gpt2 = reference(input_ids=input_ids, attention_mask=mask, position_ids=position_ids).logits
                assert max_diff_on_real(gpt2, actual, attention_mask) <= 1e-4, form


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_4d_mask_over_the_cache_equals_the_2d_mask(attn_implementation):
    """Decoding with a cache: the step's 4-D mask (batch, 1, 1, past + 1) covers the cached keys and the new one."""
    model = GPT.tiny_model(attn_implementation=attn_implementation)
    input_ids, attention_mask = left_pad([[5, 6, 7, 8, 9], [11, 12, 13]])
    step_ids, full_mask = torch.tensor([[20], [21]]), torch.cat([attention_mask, torch.ones(2, 1, dtype=torch.long)], 1)
    step_positions = full_mask.sum(-1, keepdim=True) - 1
    outputs = []
    for step_mask in (full_mask, expressed(full_mask, query_length=1), additive(expressed(full_mask, 1), -1e9)):
        with torch.no_grad():
            prefill = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=True)
            cache = cache_argument(returned_cache(prefill))  # (under the installed release's name)
            step = model(input_ids=step_ids, attention_mask=step_mask, position_ids=step_positions, **cache)
        assert returned_cache(step).get_seq_length() == 6
        outputs.append(step.logits)
    close(outputs[1], outputs[0], atol=1e-5)
    close(outputs[2], outputs[0], atol=1e-5)


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_a_4d_mask_is_the_whole_relation_as_in_gpt2(attn_implementation):
    """A relation that is not causal (a prefix the model reads both ways, then causal) is taken as given, as GPT-2
    takes it — the model does not add its causal mask on top."""
    reference = reference_model("gpt2", "LMHeadModel", attn_implementation=attn_implementation)
    ours = from_transformers(reference).eval()
    ours.set_attn_implementation(attn_implementation)
    input_ids = torch.randint(3, VOCAB, (2, 7))
    relation = torch.ones(7, 7, dtype=torch.bool).tril()
    relation[:3, :3] = True
    mask = additive(relation[None, None], torch.finfo(torch.float32).min)  # (1, 1, 7, 7): shared by the batch
    with torch.no_grad():
        expected = reference(input_ids=input_ids, attention_mask=mask).logits
        actual = ours(input_ids=input_ids, attention_mask=mask).logits
        causal = ours(input_ids=input_ids).logits
    assert (expected - actual).abs().max() <= 1e-4
    assert (causal[:, :2] - actual[:, :2]).abs().max() > 1e-3  # the prefix did read ahead


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_4d_mask_row_that_attends_nothing_gives_zeros_not_nan(attn_implementation):
    model = GPT.tiny_model(attn_implementation=attn_implementation)
    relation = expressed(torch.ones(1, 5))
    relation[0, 0, 2] = False  # query 2 may attend nothing
    with torch.no_grad():
        output = model(input_ids=torch.tensor([[5, 6, 7, 8, 9]]), attention_mask=relation, output_attentions=True)
    assert torch.isfinite(output.logits).all()
    assert all((weights[0, :, 2] == 0).all() for weights in output.attentions)


def test_sequence_classification_takes_a_4d_mask():
    """The extract token then comes from pad_token_id, as in transformers' GPT2ForSequenceClassification."""
    model = GPT.tiny_model("ScratchGPTForSequenceClassification", num_labels=3)
    input_ids, attention_mask = right_padded_batch()
    with torch.no_grad():
        expected = model(input_ids=input_ids, attention_mask=attention_mask).logits
        actual = model(input_ids=input_ids, attention_mask=expressed(attention_mask)).logits
    close(actual, expected, atol=1e-5)


@pytest.mark.parametrize(
    "mask,message",
    [
        (torch.ones(2, 2, 5, 5, dtype=torch.bool), "4-D mask must be"),  # one mask per head
        (torch.ones(2, 1, 5, 6, dtype=torch.bool), "4-D mask must be"),  # a key too many
        (torch.ones(3, 1, 5, 5, dtype=torch.bool), "4-D mask must be"),  # another batch
        (torch.ones(2, 1, 5, 5, dtype=torch.long), "must be bool"),  # 0/1 integers: which convention?
        (torch.full((2, 1, 5, 5), 0.5), "additive"),  # not a mask
        (torch.ones(2, 5, 5, dtype=torch.bool), "has shape"),  # 3-D
    ],
)
def test_4d_mask_with_wrong_shape_or_values_is_a_value_error(mask, message):
    with pytest.raises(ValueError, match=message):
        GPT.tiny_model()(input_ids=torch.randint(3, VOCAB, (2, 5)), attention_mask=mask)

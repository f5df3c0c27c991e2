"""The encoder-decoder Transformer (scratch-transformer): the paper's pieces (sinusoids, shifted labels, label
smoothing, shared embeddings), parity with transformers' Marian, the options, a toy German → English
translation (tests/fixtures/de_en_toy.jsonl) trained with the Trainer, and the scratch-seq2seq pipeline.

What every family shares is checked once, in the cross-family files (test_robustness.py, test_every_family.py,
test_conformance.py, test_generation.py, …: CONTRIBUTING.md, "A family, step by step", 6. Tests)."""

import json

import pytest
import torch
import transformers
from batches import transformer_sources as padded_sources
from families import FAMILIES
from safetensors.torch import load_file
from transformers import AutoModelForSeq2SeqLM, MarianConfig, pipeline

import hf_scratch
from hf_scratch import (
    ScratchTransformerForConditionalGeneration,
    ScratchTransformerModel,
)
from hf_scratch.convert import from_transformers, load_reference_checkpoint, to_transformers
from hf_scratch.inputs import shift_tokens_right
from hf_scratch.positional import sinusoidal_table
from hf_scratch.tools.tokenization import train_tokenizer

PAD = 98  # Marian's convention: pad = decoder start = the last id, eos = 0
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
    pad_token_id=PAD,
    decoder_start_token_id=PAD,
    eos_token_id=0,
    forced_eos_token_id=None,
    init_std=0.3,  # large weights: outputs depend clearly on the input
)
tiny_config = FAMILIES["transformer"].tiny_config


def marian_reference(head="MarianMTModel", **overrides):
    """A tiny random MarianMTModel whose LayerNorms and output bias are not at their (trivial) initial values."""
    torch.manual_seed(0)
    model = getattr(transformers, head)(MarianConfig(**{**MARIAN_TINY, **overrides})).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "layer_norm" in name:
                parameter.normal_(mean=1.0 if name.endswith("weight") else 0.0, std=0.3)
        if hasattr(model, "final_logits_bias"):
            model.final_logits_bias.normal_(std=0.3)
    return model


def targets(start=PAD, vocab=PAD, length=7):
    decoder_input_ids = torch.randint(1, vocab, (3, length))
    decoder_input_ids[:, 0] = start
    return decoder_input_ids


# ---- the paper's pieces --------------------------------------------------------------------------------------


def test_sinusoidal_table_is_the_papers_and_marians():
    d = 16
    table = sinusoidal_table(50, d, "interleaved")
    for pos in (0, 7, 49):
        for i in range(d // 2):
            angle = torch.tensor(pos / 10000 ** (2 * i / d), dtype=torch.float64)
            assert abs(table[pos, 2 * i] - torch.sin(angle)) < 1e-6
            assert abs(table[pos, 2 * i + 1] - torch.cos(angle)) < 1e-6
    marian = transformers.MarianMTModel(MarianConfig(**MARIAN_TINY))
    stored = marian.model.encoder.embed_positions.weight
    assert (stored - sinusoidal_table(*stored.shape, "split")).abs().max() < 1e-6


def test_shifting_labels_branches_on_no_value():
    """``shift_tokens_right`` runs inside forwards: it fills the ignored positions without reading the labels, so it
    compiles into one graph; without a pad_token_id an ignored position is a ValueError."""
    labels = torch.tensor([[4, 5, -100, -100], [4, 5, 6, 7]])
    compiled = torch.compile(shift_tokens_right, backend="eager", fullgraph=True)
    for given in (labels, labels.clamp(min=0)):  # with and without ignored positions
        assert torch.equal(compiled(given, 0, 1), shift_tokens_right(given, 0, 1))
    assert shift_tokens_right(labels, 0, 1).tolist() == [[1, 4, 5, 0], [1, 4, 5, 6]]
    assert shift_tokens_right(labels[:, :3], None, 1).tolist() == [[1, 4, 5], [1, 4, 5]]  # -100 shifted out
    with pytest.raises(ValueError, match="pad_token_id"):
        shift_tokens_right(labels, None, 1)


def test_labels_shift_right_behind_the_start_token():
    # the output embeddings are offset by one position (Vaswani et al. 2017, §3.1): target "i want a beer E" →
    # decoder input "S i want a beer"
    S, i, want, a, beer, E, P = 1, 4, 5, 6, 7, 2, 0
    labels = torch.tensor([[i, want, a, beer, E], [i, want, E, -100, -100]])
    shifted = shift_tokens_right(labels, pad_token_id=P, decoder_start_token_id=S)
    assert shifted.tolist() == [[S, i, want, a, beer], [S, i, want, E, P]]
    model = ScratchTransformerForConditionalGeneration(tiny_config(bos_token_id=S, decoder_start_token_id=S))
    assert torch.equal(model.prepare_decoder_input_ids_from_labels(labels), shifted)
    # DataCollatorForSeq2Seq pads the labels with -100 and builds the decoder inputs through the model
    from transformers import DataCollatorForSeq2Seq

    tokenizer = train_tokenizer(["i want a beer"], "seq2seq", vocab_size=30)
    features = [
        {"input_ids": [5, 6, 2], "labels": [i, want, a, beer, E]},
        {"input_ids": [5, 2], "labels": [i, want, E]},
    ]
    batch = DataCollatorForSeq2Seq(tokenizer, model=model)(features)
    assert batch["labels"].tolist()[1] == [i, want, E, -100, -100]
    assert batch["decoder_input_ids"].tolist() == shifted.tolist()


def test_loss_is_non_shifted_cross_entropy_with_label_smoothing():
    model = ScratchTransformerForConditionalGeneration(tiny_config()).eval()
    input_ids = torch.randint(3, 61, (2, 6))
    labels = torch.randint(3, 61, (2, 5))
    labels[1, 3:] = -100
    with torch.no_grad():
        out = model(input_ids=input_ids, labels=labels)
        expected = torch.nn.functional.cross_entropy(out.logits.reshape(-1, 61), labels.reshape(-1), ignore_index=-100)
        assert torch.allclose(out.loss, expected, atol=1e-6)
        # the same logits come from explicit decoder inputs: labels are only shifted to build them
        explicit = model(input_ids=input_ids, decoder_input_ids=model.prepare_decoder_input_ids_from_labels(labels))
        assert torch.allclose(explicit.logits, out.logits, atol=1e-6)
        smoothed = ScratchTransformerForConditionalGeneration(tiny_config(label_smoothing=0.1)).eval()
        smoothed.load_state_dict(model.state_dict())
        smooth_loss = smoothed(input_ids=input_ids, labels=labels).loss
        expected_smooth = torch.nn.functional.cross_entropy(
            out.logits.reshape(-1, 61), labels.reshape(-1), ignore_index=-100, label_smoothing=0.1
        )
        assert torch.allclose(smooth_loss, expected_smooth, atol=1e-6) and not torch.allclose(smooth_loss, out.loss)


def test_embeddings_shared_and_tied_as_configured(tmp_path):
    model = ScratchTransformerForConditionalGeneration(tiny_config())
    source, target = model.model.encoder.embeddings.tokens.weight, model.model.decoder.embeddings.tokens.weight
    assert source.data_ptr() == target.data_ptr() == model.lm_head.weight.data_ptr()
    separate = ScratchTransformerForConditionalGeneration(
        tiny_config(share_encoder_decoder_embeddings=False, decoder_vocab_size=45, tie_word_embeddings=True)
    )
    assert separate.model.decoder.embeddings.tokens.weight.data_ptr() == separate.lm_head.weight.data_ptr()
    assert separate.model.encoder.embeddings.tokens.weight.data_ptr() != separate.lm_head.weight.data_ptr()
    assert separate.lm_head.weight.shape[0] == 45
    untied = ScratchTransformerForConditionalGeneration(tiny_config(tie_word_embeddings=False))
    assert (
        untied.model.decoder.embeddings.tokens.weight.data_ptr()
        == untied.model.encoder.embeddings.tokens.weight.data_ptr()
    )
    assert untied.lm_head.weight.data_ptr() != untied.model.decoder.embeddings.tokens.weight.data_ptr()
    untied.save_pretrained(tmp_path)
    reloaded = ScratchTransformerForConditionalGeneration.from_pretrained(tmp_path)
    assert (
        reloaded.model.decoder.embeddings.tokens.weight.data_ptr()
        == reloaded.model.encoder.embeddings.tokens.weight.data_ptr()
    )
    assert torch.equal(reloaded.lm_head.weight, untied.lm_head.weight)


@pytest.mark.parametrize("tie_word_embeddings", [True, False])
def test_shared_embeddings_are_one_module_and_both_checkpoint_layouts_load(tmp_path, tie_word_embeddings):
    """Shared source/target embeddings are one nn.Embedding, called by the encoder and the decoder (as BART's
    ``shared``; a second module tied to the same weight is split from it by FSDP). The state dict names it under
    both paths: ``save_pretrained`` writes the source key alone, a plain state-dict dump holds both; both load."""
    from safetensors.torch import save_file

    torch.manual_seed(0)
    model = ScratchTransformerForConditionalGeneration(tiny_config(tie_word_embeddings=tie_word_embeddings)).eval()
    encoder, decoder = model.model.encoder.embeddings, model.model.decoder.embeddings
    assert decoder.tokens is encoder.tokens
    calls = []
    encoder.tokens.register_forward_hook(lambda *_: calls.append(1))
    ids, decoder_ids = torch.tensor([[5, 9, 3, 17]]), torch.tensor([[1, 7, 8]])
    with torch.no_grad():
        logits = model(input_ids=ids, decoder_input_ids=decoder_ids).logits
    assert len(calls) == 2  # source and target tokens through the one module
    separate = ScratchTransformerForConditionalGeneration(tiny_config(share_encoder_decoder_embeddings=False))
    assert separate.model.decoder.embeddings.tokens is not separate.model.encoder.embeddings.tokens

    model.save_pretrained(tmp_path / "saved")
    saved = set(load_file(str(tmp_path / "saved" / "model.safetensors")))
    assert "model.encoder.embeddings.tokens.weight" in saved and "model.decoder.embeddings.tokens.weight" not in saved
    dump = tmp_path / "dump"  # every key, each its own tensor (as torch.save of a state dict, or older exports)
    dump.mkdir()
    save_file({k: v.clone() for k, v in model.state_dict().items()}, str(dump / "model.safetensors"), {"format": "pt"})
    model.config.save_pretrained(dump)
    assert "model.decoder.embeddings.tokens.weight" in set(load_file(str(dump / "model.safetensors")))
    for folder in (tmp_path / "saved", dump):
        loaded, info = ScratchTransformerForConditionalGeneration.from_pretrained(folder, output_loading_info=True)
        assert not any(info.values()), info
        assert loaded.model.decoder.embeddings.tokens is loaded.model.encoder.embeddings.tokens
        with torch.no_grad():
            torch.testing.assert_close(loaded.eval()(input_ids=ids, decoder_input_ids=decoder_ids).logits, logits)


def test_resize_token_embeddings_keeps_sharing_and_ties():
    model = ScratchTransformerForConditionalGeneration(tiny_config()).eval()
    model.resize_token_embeddings(70, mean_resizing=False)
    assert model.config.vocab_size == model.config.decoder_vocab_size == 70
    assert model.lm_head.bias.shape == (70,)
    assert model.lm_head.weight.data_ptr() == model.model.decoder.embeddings.tokens.weight.data_ptr()
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([[65, 3]]), decoder_input_ids=torch.tensor([[1, 69]])).logits
    assert logits.shape == (1, 2, 70)
    untied = ScratchTransformerForConditionalGeneration(
        tiny_config(share_encoder_decoder_embeddings=False, tie_word_embeddings=False)
    )
    with pytest.raises(ValueError, match="resize"):
        untied.resize_token_embeddings(70)


# ---- parity with transformers' Marian ------------------------------------------------------------------------


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_parity_with_marian_mt_model(attn_implementation):
    reference = marian_reference()
    ours = from_transformers(reference).eval()
    ours.config._attn_implementation = attn_implementation
    assert type(ours) is ScratchTransformerForConditionalGeneration
    assert ours.config.sinusoidal_layout == "split" and ours.config.hidden_act == "swish" and not ours.config.pre_norm
    input_ids, attention_mask = padded_sources()
    decoder_input_ids = targets()
    labels = torch.randint(1, PAD, (3, 7))
    with torch.no_grad():
        expected = reference(
            input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids, labels=labels
        )
        actual = ours(
            input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids, labels=labels
        )
    assert expected.logits.std() > 0.5  # not a trivial output
    assert (expected.logits - actual.logits).abs().max() <= 1e-4
    real = attention_mask.bool()
    assert (expected.encoder_last_hidden_state - actual.encoder_last_hidden_state)[real].abs().max() <= 1e-4
    assert abs(expected.loss - actual.loss) <= 1e-4


def test_parity_with_marian_model_base_and_untied_vocabularies():
    reference = marian_reference("MarianModel", share_encoder_decoder_embeddings=False, decoder_vocab_size=120)
    ours = from_transformers(reference).eval()
    assert type(ours) is ScratchTransformerModel and ours.config.decoder_vocab_size == 120
    input_ids, attention_mask = padded_sources()
    decoder_input_ids = targets(start=PAD, vocab=120)
    with torch.no_grad():
        expected = reference(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids)
        actual = ours(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids)
    assert (expected.last_hidden_state - actual.last_hidden_state).abs().max() <= 1e-4


def test_round_trip_back_to_marian():
    reference = marian_reference()
    back = to_transformers(from_transformers(reference)).eval()
    assert type(back) is transformers.MarianMTModel
    input_ids, attention_mask = padded_sources()
    decoder_input_ids = targets()
    with torch.no_grad():
        expected = reference(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids)
        actual = back(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids)
    assert (expected.logits - actual.logits).abs().max() <= 1e-4
    assert torch.equal(back.final_logits_bias, reference.final_logits_bias)


def test_marian_unlike_configs_refuse_conversion():
    with pytest.raises(ValueError, match="pre_norm"):
        to_transformers(
            ScratchTransformerForConditionalGeneration(tiny_config(sinusoidal_layout="split", pre_norm=True))
        )
    with pytest.raises(ValueError, match="sinusoidal_layout"):
        to_transformers(ScratchTransformerForConditionalGeneration(tiny_config()))


@pytest.mark.parametrize("num_beams", [1, 3])
def test_generation_matches_marian_exactly(num_beams):
    reference = marian_reference()
    ours = from_transformers(reference).eval()
    # fixed sources (not whatever the random stream holds after the models' initialisation): the tiny reference's
    # greedy translations of about half of all random sources are one repeated token, the same for every row
    torch.manual_seed(4)
    input_ids, attention_mask = padded_sources()
    settings = dict(num_beams=num_beams, max_new_tokens=12, do_sample=False, num_return_sequences=num_beams)
    expected = reference.generate(input_ids=input_ids, attention_mask=attention_mask, **settings)
    actual = ours.generate(input_ids=input_ids, attention_mask=attention_mask, **settings)
    assert torch.equal(expected, actual)
    assert len({tuple(row) for row in expected.tolist()}) > 1  # the sequences differ: the test can tell them apart


def test_marian_checkpoint_directory_loads_and_translates(tmp_path):
    """A checkpoint in Marian's on-disk layout (as the opus-mt ones) converts through the directory loader and the
    command line; the stored sinusoidal tables are checked against ours."""
    reference = marian_reference()
    reference.generation_config.num_beams = 3
    reference.save_pretrained(tmp_path / "marian")
    tokenizer = train_tokenizer(["ich mochte ein bier", "i want a beer"], "seq2seq", vocab_size=40)
    tokenizer.save_pretrained(tmp_path / "marian")
    input_ids, attention_mask = padded_sources()
    expected = reference.generate(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=10)

    loaded = load_reference_checkpoint(tmp_path / "marian")
    assert loaded.generation_config.num_beams == 3
    assert torch.equal(loaded.generate(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=10), expected)

    hf_scratch.convert.main([str(tmp_path / "marian"), str(tmp_path / "ours")])
    assert json.loads((tmp_path / "ours" / "config.json").read_text())["model_type"] == "scratch-transformer"
    assert (tmp_path / "ours" / "tokenizer.json").exists()
    reloaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "ours").eval()
    assert torch.equal(
        reloaded.generate(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=10), expected
    )


def test_opus_mt_style_pickle_checkpoint_loads(tmp_path):
    """Older opus-mt checkpoints: pytorch_model.bin with every key (the tied per-side embedding copies, lm_head,
    the sinusoidal tables) and a config.json with legacy BART-family keys and generation settings."""
    reference = marian_reference()
    directory = tmp_path / "opus-mt-de-en"
    directory.mkdir()
    torch.save(reference.state_dict(), directory / "pytorch_model.bin")
    config = reference.config.to_dict()
    config.update(
        architectures=["MarianMTModel"],
        static_position_embeddings=True,
        normalize_before=False,
        normalize_embedding=False,
        add_final_layer_norm=False,
        add_bias_logits=False,
        extra_pos_embeddings=PAD + 1,
    )
    (directory / "config.json").write_text(json.dumps(config))
    ours = load_reference_checkpoint(directory)
    input_ids, attention_mask = padded_sources()
    expected = reference.generate(input_ids=input_ids, attention_mask=attention_mask, num_beams=3, max_new_tokens=10)
    assert torch.equal(
        ours.generate(input_ids=input_ids, attention_mask=attention_mask, num_beams=3, max_new_tokens=10), expected
    )
    config["normalize_before"] = True
    (directory / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="normalize_before"):
        load_reference_checkpoint(directory)


def test_checkpoint_with_other_position_table_is_refused():
    reference = marian_reference()
    state = {k: v for k, v in reference.state_dict().items()}
    state["model.encoder.embed_positions.weight"] = state["model.encoder.embed_positions.weight"] + 0.5
    conversion = hf_scratch.convert._conversion_for_reference("marian")
    config = conversion.config_to_ours(reference.config.to_dict())
    with pytest.raises(ValueError, match="embed_positions"):
        conversion.weight_map(config).to_ours(state)


# ---- the options ---------------------------------------------------------------------------------------------


def test_pre_norm_and_interleaved_layout_are_real_options():
    input_ids, attention_mask = padded_sources(vocab=61, pad=0)
    decoder_input_ids = targets(start=1, vocab=61)
    post = ScratchTransformerForConditionalGeneration(tiny_config()).eval()
    outputs = {}
    for name, overrides in {"post": {}, "pre": {"pre_norm": True}, "split": {"sinusoidal_layout": "split"}}.items():
        model = ScratchTransformerForConditionalGeneration(tiny_config(**overrides)).eval()
        model.load_state_dict(post.state_dict(), strict=name != "pre")  # pre-LN adds the two final LayerNorms
        with torch.no_grad():
            outputs[name] = model(
                input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids
            ).logits
    assert hasattr(ScratchTransformerModel(tiny_config(pre_norm=True)).encoder, "final_norm")
    assert (outputs["post"] - outputs["pre"]).abs().max() > 1e-3
    assert (outputs["post"] - outputs["split"]).abs().max() > 1e-3


def test_split_sinusoid_table_is_rebuilt_on_loading(tmp_path):
    """The checkpoint holds no position table (a buffer): loading rebuilds it in the saved layout."""
    ScratchTransformerForConditionalGeneration(tiny_config(sinusoidal_layout="split")).save_pretrained(tmp_path)
    reloaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    assert torch.equal(reloaded.model.decoder.embeddings.position.table, sinusoidal_table(32, 32, "split"))


# ---- the toy German → English pairs with the Trainer, then the pipeline ---------------------------------------


@pytest.fixture(scope="module")
def toy_translator(fixtures_dir, tmp_path_factory):
    """Train the toy pairs (tests/fixtures/de_en_toy.jsonl) from scratch with Seq2SeqTrainer +
    DataCollatorForSeq2Seq."""
    from transformers import DataCollatorForSeq2Seq, Seq2SeqTrainer, Seq2SeqTrainingArguments

    pairs = [json.loads(line)["translation"] for line in (fixtures_dir / "de_en_toy.jsonl").read_text().splitlines()]
    tokenizer = train_tokenizer([p["de"] for p in pairs] + [p["en"] for p in pairs], "seq2seq", vocab_size=60)
    examples = [tokenizer(p["de"], text_target=p["en"]) for p in pairs]
    config = tiny_config(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.bos_token_id,
        initializer_range=0.02,
        hidden_dropout_prob=0.0,
        label_smoothing=0.1,
    )
    torch.manual_seed(0)
    model = ScratchTransformerForConditionalGeneration(config)
    output_dir = tmp_path_factory.mktemp("toy")
    args = Seq2SeqTrainingArguments(
        output_dir=str(output_dir),
        per_device_train_batch_size=6,
        per_device_eval_batch_size=6,
        max_steps=50,
        learning_rate=1e-2,
        lr_scheduler_type="constant",
        logging_steps=10,
        disable_tqdm=True,
        save_strategy="no",
        report_to=[],
        seed=0,
        use_cpu=True,
        predict_with_generate=True,
        generation_max_length=8,
    )
    trainer = Seq2SeqTrainer(
        model=model,
        args=args,
        train_dataset=examples,
        eval_dataset=examples,
        data_collator=DataCollatorForSeq2Seq(tokenizer, model=model),
        processing_class=tokenizer,
    )
    trainer.train()
    return trainer, tokenizer, pairs


def test_toy_translation_is_learned_with_the_trainer(toy_translator):
    trainer, tokenizer, pairs = toy_translator
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert losses[-1] < losses[0] / 2
    prediction = trainer.predict(trainer.eval_dataset)  # predict_with_generate: greedy decoding
    predictions = prediction.predictions
    predictions[predictions == -100] = tokenizer.pad_token_id
    decoded = tokenizer.batch_decode(predictions, skip_special_tokens=True)
    assert decoded == [p["en"] for p in pairs]


def test_seq2seq_pipeline_translates(toy_translator, tmp_path):
    trainer, tokenizer, pairs = toy_translator
    model = trainer.model.eval()
    translate = pipeline("scratch-seq2seq", model=model, tokenizer=tokenizer)
    assert translate("ich mochte ein bier") == [{"generated_text": "i want a beer"}]
    assert translate(["ich trinke ein cola", "du mochtest ein bier"], num_beams=3) == [  # v4: one dict per input
        {"generated_text": "i drink a coke"},
        {"generated_text": "you want a beer"},
    ]
    two = translate("ich mochte ein wasser", num_beams=3, num_return_sequences=2)
    assert len(two) == 2 and two[0]["generated_text"] == "i want a water"
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    from_directory = pipeline("scratch-seq2seq", model=str(tmp_path))
    assert from_directory("ich trinke ein bier")[0]["generated_text"] == "i drink a beer"
    with pytest.raises(ValueError, match="string"):
        translate({"de": "ich"})

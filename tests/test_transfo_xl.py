"""Transformer-XL: reference parity (side-environment fixtures), the memory (detached, mem_len, same_length,
clamp_len; with checkpointing and both kernels), the adaptive softmax, checkpoint conversion and generation with
mems. (Memory ≡ full context is in test_robustness.py.)

What every family shares is checked once, in the cross-family files (test_robustness.py, test_every_family.py,
test_conformance.py, test_generation.py, …: CONTRIBUTING.md, "A family, step by step", 6. Tests)."""

from __future__ import annotations

import json

import pytest
import torch
from families import FAMILIES
from safetensors.torch import load_file

import hf_scratch
from hf_scratch import ScratchTransfoXLLMHeadModel
from hf_scratch.convert import load_reference_checkpoint, to_transformers

REFERENCE_FIXTURES = ("adaptive_div2", "adaptive_div1_preln")


def tiny_model(attn_implementation: str = "eager", **overrides) -> ScratchTransfoXLLMHeadModel:
    """Biases and cluster weights start at zero: every parameter is perturbed so that every term matters."""
    return FAMILIES["transfo_xl"].tiny_model(attn_implementation=attn_implementation, **overrides)


def zero_memory(config, batch: int) -> list[torch.Tensor]:
    """The reference's default start: mem_len zero vectors per layer (ours starts empty)."""
    return [torch.zeros(batch, config.mem_len, config.hidden_size) for _ in range(config.num_hidden_layers)]


# ---- parity with transformers 4.46's TransfoXLLMHeadModel (outputs saved by benchmarks/transfo_xl_reference.py) --


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("name", REFERENCE_FIXTURES)
def test_reference_parity_two_segments_with_memory(fixtures_dir, name, implementation):
    directory = fixtures_dir / "transfo_xl" / name
    reference = load_file(str(directory / "reference_outputs.safetensors"))
    model = load_reference_checkpoint(directory)
    model.config._attn_implementation = implementation
    first, second = reference["first_input_ids"], reference["second_input_ids"]
    with torch.no_grad():
        out1 = model(first, mems=zero_memory(model.config, first.shape[0]))
        out2 = model(second, mems=out1.mems)
        loss1 = model(first, mems=zero_memory(model.config, first.shape[0]), labels=first).loss
        loss2 = model(second, mems=out1.mems, labels=second).loss
    assert (out1.logits - reference["first_log_probs"]).abs().max() <= 1e-4
    assert (out2.logits - reference["second_log_probs"]).abs().max() <= 1e-4
    for index, memory in enumerate(out2.mems):
        assert (memory - reference[f"second_mems_{index}"]).abs().max() <= 1e-4
    assert abs(loss1 - reference["first_loss"][0]) <= 1e-4 and abs(loss2 - reference["second_loss"][0]) <= 1e-4
    # our loss is the mean of the reference's per-token losses
    assert abs(loss2 - reference["second_losses"].mean()) <= 1e-4


def test_reference_config_translation(fixtures_dir):
    reference = json.loads((fixtures_dir / "transfo_xl" / "adaptive_div1_preln" / "config.json").read_text())
    config = load_reference_checkpoint(fixtures_dir / "transfo_xl" / "adaptive_div1_preln").config
    assert config.hidden_size == reference["d_model"] and config.embedding_size == reference["d_embed"]
    assert config.head_dim == reference["d_head"] and config.pre_lnorm and not config.untie_r
    assert config.tie_projs == reference["tie_projs"] and config.cutoffs == reference["cutoffs"]
    assert config.d_model == reference["d_model"]  # reference names still read


# ---- memory ---------------------------------------------------------------------------------------------------


def test_memory_is_detached_from_the_graph():
    model = tiny_model().train()
    ids = torch.randint(0, 40, (2, 6))
    first = model(ids, labels=ids)
    assert all(not m.requires_grad for m in first.mems)
    model(ids, mems=first.mems, labels=ids).loss.backward()  # no error: nothing flows into the first segment


def test_activation_checkpointing_with_memory_gives_the_same_gradients():
    """The cross-family check (test_conformance.py) runs one segment; here the checkpointed layers also read the
    previous segment's memory."""
    model = tiny_model().train()
    ids = torch.randint(0, 40, (2, 6))
    memory = model(ids).mems
    model(ids, mems=memory, labels=ids).loss.backward()
    plain = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model.activation_checkpointing_enable()
    assert model.model.layers[0].gradient_checkpointing
    model(ids, mems=memory, labels=ids).loss.backward()
    assert max((a - p.grad).abs().max().item() for a, p in zip(plain, model.parameters())) <= 1e-6


def test_mem_len_is_read_at_call_time():
    model = tiny_model(mem_len=4)
    ids = torch.randint(0, 40, (1, 6))
    assert model(ids).mems[0].shape[1] == 4
    model.config.mem_len = 10  # evaluate with a longer memory than trained with
    out = model(ids)
    assert out.mems[0].shape[1] == 6 and model(ids, mems=out.mems).mems[0].shape[1] == 10
    model.config.mem_len = 0
    assert model(ids).mems is None


def test_same_length_limits_every_query_to_mem_len_keys():
    model = tiny_model(same_length=True, mem_len=3)
    ids = torch.randint(0, 40, (1, 5))
    with torch.no_grad():
        memory = model(ids).mems
        weights = model(ids, mems=memory, output_attentions=True).attentions[0]
    visible = (weights[0, 0] > 0).sum(-1)
    assert visible.tolist() == [3] * 5  # 3 memory + 5 current keys, but each query sees exactly mem_len keys


def test_clamp_len_shares_far_distances():
    model = tiny_model(clamp_len=2)
    far = model.model._relative_positions(6, torch.device("cpu"), torch.float32)
    assert torch.equal(far[0], far[3]) and not torch.equal(far[3], far[4])


# ---- kernels and the adaptive softmax ---------------------------------------------------------------------------


def test_eager_equals_sdpa_with_memory_and_padding():
    """The cross-family check (test_robustness.py) runs one segment; here the queries also attend the memory, under
    same_length's window, with left padding."""
    eager, sdpa = tiny_model("eager", same_length=True), tiny_model("sdpa", same_length=True)
    ids = torch.randint(0, 40, (2, 5))
    mask = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]])
    with torch.no_grad():
        memory = eager(ids).mems
        a = eager(ids, mems=memory, attention_mask=mask).logits
        b = sdpa(ids, mems=memory, attention_mask=mask).logits
    assert (a - b).abs().max() <= 1e-5


def test_adaptive_softmax_is_a_distribution_and_loss_is_mean_of_token_losses():
    model = tiny_model(div_val=1, embedding_size=12, tie_word_embeddings=False)
    ids = torch.randint(0, 40, (2, 7))
    labels = ids.clone()
    labels[0, 3] = -100
    with torch.no_grad():
        out = model(ids, labels=labels)
    assert torch.allclose(out.logits.exp().sum(-1), torch.ones(2, 7), atol=1e-5)
    targets = labels[:, 1:]
    token_losses = -out.logits[:, :-1].gather(-1, targets.clamp(min=0)[..., None])[..., 0]
    assert torch.allclose(out.loss, token_losses[targets != -100].mean(), atol=1e-6)


@pytest.mark.parametrize(
    "overrides", [{}, {"cutoffs": []}, {"div_val": 1, "embedding_size": 12, "tie_word_embeddings": False}]
)
def test_target_only_loss_equals_full_softmax_loss(overrides):
    model = tiny_model(**overrides)
    ids = torch.randint(0, 40, (2, 9))
    labels = ids.clone()
    labels[1, :4] = -100
    with torch.no_grad():
        full = model(ids, labels=labels)
        last = model(ids, labels=labels, logits_to_keep=1)
        summed = model(ids, labels=labels, logits_to_keep=1, num_items_in_batch=5)
    assert last.logits.shape == (2, 1, 40) and torch.allclose(last.logits, full.logits[:, -1:], atol=1e-6)
    assert torch.allclose(last.loss, full.loss, atol=1e-5)
    assert torch.allclose(summed.loss, full.loss * (labels[:, 1:] != -100).sum() / 5, atol=1e-5)


@pytest.mark.parametrize(
    "overrides",
    [{}, {"cutoffs": []}, {"div_val": 1, "embedding_size": 12, "tie_word_embeddings": False}],
    ids=["adaptive", "plain-softmax", "one-table-untied"],
)
def test_resize_token_embeddings_grows_the_rarest_cluster(tmp_path, overrides):
    """New tokens (tokenizer.add_tokens + resize_token_embeddings) join the last cluster of the adaptive input and
    softmax: the old tokens keep their log-probabilities' inputs, the new ones can be fed, scored and trained, and
    the resized model saves and loads."""
    model = tiny_model(**overrides)
    ids = torch.tensor([[1, 9, 17, 25, 33, 39]])
    with torch.no_grad():
        old_embedded = model.model.word_embeddings(ids)
    model.resize_token_embeddings(43)
    assert model.config.vocab_size == 43 and model.get_input_embeddings().num_embeddings == 43
    new_ids = torch.tensor([[1, 9, 42, 17, 41, 40]])
    with torch.no_grad():
        torch.testing.assert_close(model.model.word_embeddings(ids), old_embedded, atol=0, rtol=0)
        log_probs = model(new_ids).logits
    assert log_probs.shape[-1] == 43
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(1, 6), atol=1e-5, rtol=0)
    model.train()
    loss = model(new_ids, labels=new_ids).loss
    loss.backward()
    assert model.model.word_embeddings.embeddings[-1].weight.grad[-1].abs().sum() > 0
    if not model.config.tie_word_embeddings:
        assert model.lm_head.weights[-1].shape[0] == model.model.word_embeddings.embeddings[-1].num_embeddings
    model.save_pretrained(tmp_path)
    loaded = ScratchTransfoXLLMHeadModel.from_pretrained(tmp_path).eval()
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded(new_ids).logits, model(new_ids).logits)
    with pytest.raises(ValueError, match="cutoff"):
        loaded.resize_token_embeddings(max(loaded.config.cutoffs, default=0))


@pytest.mark.parametrize(
    "overrides",
    [
        {},  # one table per cluster, tied, tie_projs: all but the first
        {"div_val": 1, "embedding_size": 12, "tie_projs": [True, False, True]},  # one projected table
        {"tie_word_embeddings": False},
        {"untie_r": False},
    ],
)
def test_softmax_computes_with_its_own_tied_parameters(tmp_path, overrides):
    """The adaptive softmax reads no other module's weights: its output tables and projections are its own
    parameters, the input's very tensors where tied (``_tied_weights_keys``, as transformers' TransfoXL tied
    ``crit.out_layers``), so a call with the hidden states alone gives the model's log-probabilities; u and v are
    read by each attention in its forward. Checkpoints keep the keys they had: tied tensors are saved once, under
    the input's names, and come back tied."""
    model = tiny_model(**overrides)
    config, embedding, softmax = model.config, model.model.word_embeddings, model.lm_head
    tables = len(embedding.embeddings)
    for table in range(tables):
        assert (softmax.weights[table] is embedding.embeddings[table].weight) == config.tie_word_embeddings
    for cluster, tied in enumerate(config.tie_projs):
        input_projection = embedding.projections[0 if config.div_val == 1 else cluster]
        assert (softmax.projections[str(cluster)] is input_projection) == tied
    ids = torch.randint(0, 40, (2, 6))
    with torch.no_grad():
        output = model(ids)
        torch.testing.assert_close(softmax(model.model(ids).last_hidden_state), output.logits, atol=0, rtol=0)
    model.save_pretrained(tmp_path)
    saved = set(load_file(str(tmp_path / "model.safetensors")))
    tied = set(model._tied_weights_keys)
    assert saved == set(model.state_dict()) - tied and tied == {
        *(f"lm_head.weights.{t}" for t in range(tables) if config.tie_word_embeddings),
        *(f"lm_head.projections.{c}" for c, tied in enumerate(config.tie_projs) if tied),
    }
    loaded = ScratchTransfoXLLMHeadModel.from_pretrained(tmp_path, attn_implementation="eager").eval()
    assert all(
        loaded.get_parameter(target) is loaded.get_parameter(source)
        for target, source in loaded._tied_weights_keys.items()
    )
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, output.logits, atol=0, rtol=0)


def test_one_table_embeddings_have_a_weight_as_transformers_scripts_read_it():
    """transformers' run_clm reads ``get_input_embeddings().weight.shape[0]`` (the vocabulary size) and accelerate's
    FSDP recognises tied output embeddings by ``.weight``: one table has one; one table per cluster has none."""
    model = tiny_model(div_val=1)
    embedding, softmax = model.get_input_embeddings(), model.get_output_embeddings()
    assert embedding.weight.shape == (40, 16) and embedding.weight is embedding.embeddings[0].weight
    assert softmax is model.lm_head and softmax.weight is embedding.weight
    with pytest.raises(AttributeError):
        embedding.weight = torch.zeros(40, 16)  # read-only: the table is the module to replace
    several = tiny_model(div_val=2)
    assert getattr(several.get_input_embeddings(), "weight", None) is None
    assert getattr(several.get_output_embeddings(), "weight", None) is None


def test_to_transformers_explains_that_transformers_5_has_no_transfo_xl():
    with pytest.raises(ValueError, match="no longer ships Transformer-XL"):
        to_transformers(tiny_model())


# ---- a transfo-xl checkpoint built by hand in the reference layout ---------------------------------------------


def _hand_made_reference(tie: bool) -> tuple[dict, dict]:
    """A wt103-style config (div_val 4, three cutoffs, per-layer u/v, same_length) and a state dict with the
    reference key names, including the tied duplicates that pickled hub checkpoints carry."""
    config = {
        "architectures": ["TransfoXLLMHeadModel"],
        "model_type": "transfo-xl",
        "vocab_size": 64,
        "cutoffs": [8, 16, 32],
        "d_model": 16,
        "d_embed": 16,
        "n_head": 2,
        "d_head": 8,
        "d_inner": 24,
        "div_val": 2,
        "pre_lnorm": False,
        "n_layer": 2,
        "mem_len": 8,
        "clamp_len": 100,
        "same_length": True,
        "proj_share_all_but_first": True,
        "attn_type": 0,
        "sample_softmax": -1,
        "adaptive": True,
        "dropout": 0.1,
        "dropatt": 0.0,
        "untie_r": True,
        "init": "normal",
        "init_range": 0.01,
        "proj_init_std": 0.01,
        "init_std": 0.02,
        "layer_norm_epsilon": 1e-5,
        "eos_token_id": 0,
        "tie_word_embeddings": tie,
    }
    g = torch.Generator().manual_seed(3)
    rand = lambda *shape: torch.randn(*shape, generator=g) * 0.2  # noqa: E731
    state = {"transformer.pos_emb.inv_freq": 1 / (10000 ** (torch.arange(0.0, 16, 2.0) / 16))}
    bounds = [0, 8, 16, 32, 64]
    for i in range(4):
        size, width = bounds[i + 1] - bounds[i], 16 // 2**i
        state[f"transformer.word_emb.emb_layers.{i}.weight"] = rand(size, width)
        state[f"transformer.word_emb.emb_projs.{i}"] = rand(16, width)
        state[f"crit.out_layers.{i}.weight"] = (
            state[f"transformer.word_emb.emb_layers.{i}.weight"].clone() if tie else rand(size, width)
        )
        state[f"crit.out_layers.{i}.bias"] = rand(size)
        state[f"crit.out_projs.{i}"] = state[f"transformer.word_emb.emb_projs.{i}"].clone() if i else rand(16, width)
    state["crit.cluster_weight"], state["crit.cluster_bias"] = rand(3, 16), rand(3)
    for layer in range(2):
        p = f"transformer.layers.{layer}."
        state.update(
            {
                p + "dec_attn.qkv_net.weight": rand(48, 16),
                p + "dec_attn.o_net.weight": rand(16, 16),
                p + "dec_attn.r_net.weight": rand(16, 16),
                p + "dec_attn.r_w_bias": rand(2, 8),
                p + "dec_attn.r_r_bias": rand(2, 8),
                p + "dec_attn.layer_norm.weight": 1 + rand(16),
                p + "dec_attn.layer_norm.bias": rand(16),
                p + "pos_ff.CoreNet.0.weight": rand(24, 16),
                p + "pos_ff.CoreNet.0.bias": rand(24),
                p + "pos_ff.CoreNet.3.weight": rand(16, 24),
                p + "pos_ff.CoreNet.3.bias": rand(16),
                p + "pos_ff.layer_norm.weight": 1 + rand(16),
                p + "pos_ff.layer_norm.bias": rand(16),
            }
        )
    return config, state


@pytest.mark.parametrize("tie", [True, False])
def test_hand_made_reference_checkpoint_loads_and_scores(tmp_path, tie):
    config, state = _hand_made_reference(tie)
    (tmp_path / "config.json").write_text(json.dumps(config))
    torch.save(state, tmp_path / "pytorch_model.bin")
    model = load_reference_checkpoint(tmp_path)
    assert isinstance(model, ScratchTransfoXLLMHeadModel) and not model.training
    assert model.config.tie_projs == [False, True, True, True] and model.config.same_length
    # weights land where they belong; tied softmax tensors are the input embedding's
    assert torch.equal(
        model.model.word_embeddings.embeddings[2].weight, state["transformer.word_emb.emb_layers.2.weight"]
    )
    assert torch.equal(model.model.layers[1].attention.position_bias, state["transformer.layers.1.dec_attn.r_r_bias"])
    for cluster in range(4):
        weight, bias, projection = model.lm_head.cluster_parameters(cluster)
        assert torch.equal(weight, state[f"crit.out_layers.{cluster}.weight"]) and torch.equal(
            bias, state[f"crit.out_layers.{cluster}.bias"]
        )
        assert torch.equal(projection, state[f"crit.out_projs.{cluster}"])
    ids = torch.tensor([[1, 9, 17, 40, 63, 2], [5, 5, 30, 31, 0, 12]])
    with torch.no_grad():
        out = model(ids, labels=ids)
        log_probs = out.logits
    assert torch.allclose(log_probs.exp().sum(-1), torch.ones(2, 6), atol=1e-5)
    assert torch.isfinite(out.loss) and out.loss > 0
    # a tail word's log-probability = log p(cluster) + log p(word | cluster), computed by hand from the weights
    hidden = model.model(ids).last_hidden_state[0, 0]
    head = torch.log_softmax(
        torch.cat([state["crit.out_layers.0.weight"], state["crit.cluster_weight"]])
        @ (state["crit.out_projs.0"].t() @ hidden)
        + torch.cat([state["crit.out_layers.0.bias"], state["crit.cluster_bias"]]),
        -1,
    )
    tail = torch.log_softmax(
        state["crit.out_layers.3.weight"] @ (state["crit.out_projs.3"].t() @ hidden) + state["crit.out_layers.3.bias"],
        -1,
    )
    assert torch.allclose(log_probs[0, 0, 40], head[8 + 2] + tail[40 - 32], atol=1e-5)


def test_original_hub_config_names_are_understood(tmp_path):
    """transfo-xl-wt103's config.json predates vocab_size/tie_word_embeddings: n_token, tie_weight, no architectures."""
    config, state = _hand_made_reference(True)
    del config["architectures"], config["tie_word_embeddings"]
    config["n_token"], config["tie_weight"] = config.pop("vocab_size"), True
    (tmp_path / "config.json").write_text(json.dumps(config))
    torch.save(state, tmp_path / "pytorch_model.bin")
    model = load_reference_checkpoint(tmp_path)
    assert isinstance(model, ScratchTransfoXLLMHeadModel)
    assert model.config.vocab_size == 64 and model.config.tie_word_embeddings


def test_reference_checkpoint_with_foreign_weights_is_refused(tmp_path):
    config, state = _hand_made_reference(True)
    state["transformer.layers.0.dec_attn.extra.weight"] = torch.zeros(2)
    (tmp_path / "config.json").write_text(json.dumps(config))
    torch.save(state, tmp_path / "pytorch_model.bin")
    with pytest.raises(ValueError, match="no place in the hf_scratch model"):
        load_reference_checkpoint(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**config, "attn_type": 2}))
    with pytest.raises(ValueError, match="attn_type"):
        load_reference_checkpoint(tmp_path)


# ---- generation -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("same_length", "mem_len"), [(False, 16), (True, 16), (False, 0)])
def test_greedy_generation_with_mems_equals_recomputing(same_length, mem_len):
    model = tiny_model(same_length=same_length, mem_len=mem_len)
    prompt = torch.randint(0, 40, (2, 4))
    fed_lengths = []
    hook = model.model.register_forward_pre_hook(
        lambda module, args, kwargs: fed_lengths.append(kwargs["input_ids"].shape[1]), with_kwargs=True
    )
    generated = model.generate(prompt, max_new_tokens=8, do_sample=False, pad_token_id=0, eos_token_id=None)
    hook.remove()
    if mem_len:  # the prompt once, then one token per step: the rest is in the memory
        assert fed_lengths == [4] + [1] * 7
    else:  # no memory is kept: every step reads the whole sequence again
        assert fed_lengths == list(range(4, 12))
    sequence = prompt
    with torch.no_grad():
        for _ in range(8):  # recompute the whole window from scratch for every token
            next_token = model(sequence).logits[:, -1].argmax(-1, keepdim=True)
            sequence = torch.cat([sequence, next_token], dim=1)
    assert torch.equal(generated, sequence)
    without_memory = model.generate(
        prompt, max_new_tokens=8, do_sample=False, use_cache=False, pad_token_id=0, eos_token_id=None
    )
    assert torch.equal(without_memory, sequence)


def test_generation_without_memory_keeps_the_context_given_as_mems_and_refuses_a_prompt_of_embeddings():
    """mem_len=0: the list given as ``mems`` (the context before the prompt) is read again at every step, and a
    prompt given as embeddings, which generate feeds only on the first step, is refused before any step runs."""
    model = tiny_model(mem_len=0)
    context, prompt = torch.randint(0, 40, (1, 5)), torch.randint(0, 40, (1, 3))
    with torch.no_grad():
        mems = model.model(context, output_hidden_states=True).hidden_states[:-1]  # each layer's input
    generated = model.generate(
        prompt, mems=list(mems), max_new_tokens=5, do_sample=False, pad_token_id=0, eos_token_id=None
    )
    sequence = prompt
    with torch.no_grad():
        for _ in range(5):
            next_token = model(sequence, mems=list(mems)).logits[:, -1].argmax(-1, keepdim=True)
            sequence = torch.cat([sequence, next_token], dim=1)
    assert torch.equal(generated, sequence)
    with pytest.raises(ValueError, match="mem_len=0"):
        model.generate(inputs_embeds=torch.randn(1, 3, model.config.hidden_size), max_new_tokens=2, pad_token_id=0)


def test_left_padded_batch_generation_equals_one_by_one():
    model = tiny_model(mem_len=16)
    short, long = torch.randint(1, 40, (1, 3)), torch.randint(1, 40, (1, 5))
    batch = torch.cat([torch.cat([torch.zeros(1, 2, dtype=torch.long), short], dim=1), long])
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    together = model.generate(
        batch, attention_mask=mask, max_new_tokens=6, do_sample=False, pad_token_id=0, eos_token_id=None
    )
    for row, prompt in enumerate((short, long)):
        alone = model.generate(prompt, max_new_tokens=6, do_sample=False, pad_token_id=0, eos_token_id=None)
        assert torch.equal(together[row, -6:], alone[0, -6:])


def test_beam_search_runs_with_mems():
    model = tiny_model()
    out = model.generate(
        torch.randint(0, 40, (1, 3)), max_new_tokens=4, num_beams=3, do_sample=False, pad_token_id=0, eos_token_id=None
    )
    assert out.shape == (1, 7)


def test_package_exports():
    assert hf_scratch.ScratchTransfoXLConfig.model_type == "scratch-transfo-xl"


@pytest.mark.parametrize("untie_r", [False, True], ids=["shared", "untied"])
def test_u_and_v_have_one_owner_that_every_layer_reads(untie_r):
    """u and v live in one module — the model when every layer shares them, each attention with ``untie_r`` —
    saved once under their names, and read by the attention from that module (none is handed down the layers)."""
    model = tiny_model(untie_r=untie_r)
    layers = model.model.layers
    owners = [layer.attention for layer in layers] if untie_r else [model.model]
    names = sorted(key for key in model.state_dict() if key.endswith(("content_bias", "position_bias")))
    prefixes = [f"model.layers.{i}.attention." for i in range(len(layers))] if untie_r else ["model."]
    assert names == sorted(f"{p}{n}" for p in prefixes for n in ("content_bias", "position_bias"))
    assert all(layer.attention.biases is (layer.attention if untie_r else model.model) for layer in layers)
    ids = torch.tensor([[3, 5, 7, 9]])
    with torch.no_grad():
        before = model(ids).logits
        for owner in owners:
            owner.position_bias.add_(1.0)
        assert not torch.allclose(model(ids).logits, before)

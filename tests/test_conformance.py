"""transformers' model conventions, checked the same way over every family and every head — what a script written
for the built-in models relies on:

- ``output_hidden_states`` / ``output_attentions``: layers + 1 hidden states (the embedding output, then one per
  layer), one attention map per layer shaped (batch, heads, query_length, key_length), and nothing without the
  flags. Where a family's attention differs, what it gives is checked as documented:
  Longformer: (batch, heads, n, G + attention_window + 1) — weights on the G global tokens, then on the key
  offsets −w/2 … w/2 — and ``global_attentions`` (batch, heads, n, G) when some token is global (transformers'
  LongformerModel layout); Transformer-XL: key_length = memory + segment; RNN seq2seq: no self-attention, one
  cross-attention map (batch, 1, target, source) from the top layer (none with ``attention_type="none"``), hidden
  states = the embeddings + one per recurrent layer on each side.
- ``return_dict=False`` (argument or config) gives the tuple ``ModelOutput.to_tuple()`` gives;
- ``resize_token_embeddings`` keeps ties (same storage), and a new token can be fed and trained on;
- ``num_parameters``, ``get_input_embeddings`` / ``set_input_embeddings``, ``tie_weights``;
- ``save_pretrained(max_shard_size=…)`` writes several shards and round-trips; ``from_pretrained(dtype=bf16)``,
  ``device_map="auto"``; ``model.config`` edits after loading take effect;
- gradient checkpointing on every head: the layers are recomputed and the gradients equal the plain ones.

Heads are discovered from the modeling modules, so a new head is checked without being listed here.
"""

from __future__ import annotations

import inspect
import json
import warnings
from copy import deepcopy

import pytest
import torch
from comparing import close_to_fp32
from families import FAMILIES, NAMES, changed, fixed_sizes, randomise
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.modeling_layers import GradientCheckpointingLayer

import hf_scratch

LAYERS = 2
CHOICES = 2


def family_sizes() -> dict:
    """Two layers; each family's richer variant: GPT-2's pre-LN with a final LayerNorm, the pre-LN encoder-decoder,
    Transformer-XL's adaptive clusters of different widths (div_val 2), Longformer with a global first token and
    per-head dilations, the RNN with a bidirectional encoder."""
    s = fixed_sizes()
    s["layers"], s["variant"] = LAYERS, True
    s["dilation"] = [1, [1, 2]]  # Longformer: the second layer's two heads with their own dilations
    generator = torch.Generator().manual_seed(1)
    s["ids"] = torch.randint(3, s["vocab"], (s["batch"], s["length"]), generator=generator)
    s["decoder_ids"] = torch.randint(3, s["vocab"], (s["batch"], 3), generator=generator)
    return s


def heads_of(name: str) -> list[type]:
    """Every model class of a family's modeling module (its base model and every head)."""
    config_class = type(FAMILIES[name].config(family_sizes()))
    module = inspect.getmodule(getattr(hf_scratch, FAMILIES[name].head))
    return [
        cls
        for cls in vars(module).values()
        if isinstance(cls, type)
        and issubclass(cls, PreTrainedModel)
        and cls.__module__ == module.__name__
        and getattr(cls, "config_class", None) is config_class
        and not cls.__name__.endswith("PreTrainedModel")
    ]


HEADS = [(name, cls) for name in NAMES for cls in heads_of(name)]
HEAD_IDS = [cls.__name__.removeprefix("Scratch") for _, cls in HEADS]
GENERATIVE = [(name, cls) for name, cls in HEADS if issubclass(cls, GenerationMixin)]


def is_multiple_choice(cls) -> bool:
    return "MultipleChoice" in cls.__name__ or "DoubleHeads" in cls.__name__


def is_seq2seq(name: str, cls) -> bool:
    return FAMILIES[name].seq2seq and "SequenceClassification" not in cls.__name__


def config_for(name: str):
    """The family's tiny configuration with every dropout off (gradients with and without checkpointing compare)."""
    config = FAMILIES[name].config(family_sizes())
    for key, value in list(config.to_dict().items()):
        if "dropout" in key and isinstance(value, float):
            setattr(config, key, 0.0)
    return config


def build(name: str, cls, attn_implementation: str = "sdpa"):
    torch.manual_seed(0)
    return randomise(cls._from_config(config_for(name), attn_implementation=attn_implementation))


def inputs_for(name: str, cls, labels: bool = False, ids: torch.Tensor | None = None) -> dict:
    """A padded batch for the head (choices stacked for multiple choice), with the head's labels if asked."""
    family, s = FAMILIES[name], family_sizes()
    ids = s["ids"] if ids is None else ids
    mask = torch.ones_like(ids)
    mask[-1, -2:] = 0
    if family.padding_side == "left":
        mask = mask.flip(1)
    kwargs = family.inputs(s, ids, mask)
    if not is_seq2seq(name, cls):  # (the RNN classifier reads the source only)
        kwargs.pop("decoder_input_ids", None)
    if is_multiple_choice(cls):
        other = changed(ids, slice(1, 3), s["vocab"])
        kwargs = {
            key: torch.stack([value, other if key == "input_ids" else value], dim=1) for key, value in kwargs.items()
        }
    if labels:
        kwargs.update(labels_for(name, cls, kwargs))
    return kwargs


def labels_for(name: str, cls, kwargs: dict) -> dict:
    head, ids = cls.__name__, kwargs["input_ids"]
    batch = ids.shape[0]
    two_classes = torch.arange(batch) % 2
    if "DoubleHeads" in head:
        return {"labels": ids, "mc_labels": two_classes}
    if "MultipleChoice" in head or "SequenceClassification" in head or "NextSentence" in head:
        return {"labels": two_classes}
    if "TokenClassification" in head:
        return {"labels": ids % 2}
    if "QuestionAnswering" in head:
        return {"start_positions": torch.tensor([1, 2])[:batch], "end_positions": torch.tensor([2, 3])[:batch]}
    if "PreTraining" in head:
        return {"labels": ids, "next_sentence_label": two_classes}
    if "ConditionalGeneration" in head:
        return {"labels": kwargs["decoder_input_ids"]}
    if "MaskedLM" in head or "LMHead" in head:
        return {"labels": ids}
    return {}  # a base model: no loss of its own


def loss_of(output) -> torch.Tensor:
    """The head's loss, or for a base model a scalar of its last hidden state."""
    loss = output.get("loss")
    return loss if loss is not None else output[0].float().pow(2).mean()


def assert_same(actual, expected, where: str = "output") -> None:
    """Equal tensors at every position of two (nested) outputs; other objects (caches) of the same type."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{where}: {type(actual).__name__} instead of a tensor"
        torch.testing.assert_close(actual, expected, atol=0, rtol=0, msg=where)
    elif isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected), f"{where}: {actual!r}"
        for index, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{where}[{index}]")
    else:
        assert type(actual) is type(expected), f"{where}: {type(actual).__name__} vs {type(expected).__name__}"


def run(model, kwargs, **extra):
    with torch.no_grad():
        return model(**kwargs, **extra)


heads = pytest.mark.parametrize("name,cls", HEADS, ids=HEAD_IDS)


def test_every_head_of_every_family_is_checked():
    for name in NAMES:
        config_class = type(FAMILIES[name].config(family_sizes()))
        registered = {
            reference.split(".")[1] for auto, reference in config_class.default_auto_map.items() if auto != "AutoConfig"
        }
        assert registered <= {cls.__name__ for family, cls in HEADS if family == name}, name


# --------------------------------------------------------------------------------------------------------------
# Arguments: nothing a caller passes is lost
# --------------------------------------------------------------------------------------------------------------


@heads
def test_a_misspelled_keyword_is_a_type_error_naming_it(name, cls):
    model = build(name, cls)
    kwargs = inputs_for(name, cls)
    with pytest.raises(TypeError, match=r"'atention_mask'.*Did you mean 'attention_mask'"):
        run(model, kwargs, atention_mask=kwargs["input_ids"])
    with pytest.raises(TypeError, match="'output_attention'"):
        run(model, kwargs, output_attention=True)


@heads
def test_positional_arguments_bind_to_the_forward_parameters(name, cls):
    model = build(name, cls)
    kwargs = inputs_for(name, cls)
    expected = run(model, kwargs)
    assert list(inspect.signature(model.forward).parameters)[0] == "input_ids"
    ids = kwargs.pop("input_ids")
    with torch.no_grad():
        assert_same(model(ids, **kwargs), expected)
        with pytest.raises(TypeError, match="multiple values for argument 'input_ids'"):
            model(ids, input_ids=ids, **kwargs)


@heads
def test_inputs_embeds_from_the_input_embeddings_equal_input_ids(name, cls):
    """What soft prompts (peft's prompt tuning) rely on: ``get_input_embeddings()(ids)`` as ``inputs_embeds`` gives
    what ``input_ids=ids`` gives (the encoder-decoder's √d_model scale is inside that module, as in Bart)."""
    model = build(name, cls)
    kwargs = inputs_for(name, cls)
    expected = run(model, kwargs)
    kwargs["inputs_embeds"] = model.get_input_embeddings()(kwargs.pop("input_ids"))
    assert_same(run(model, kwargs), expected)


# --------------------------------------------------------------------------------------------------------------
# Outputs: return_dict=False, hidden states and attentions
# --------------------------------------------------------------------------------------------------------------


@heads
def test_return_dict_false_gives_the_tuple(name, cls):
    model = build(name, cls)
    kwargs = inputs_for(name, cls, labels=True)
    as_dict = run(model, kwargs)
    expected = as_dict.to_tuple()
    as_tuple = run(model, kwargs, return_dict=False)
    assert type(as_tuple) is tuple, f"return_dict=False gave a {type(as_tuple).__name__}"
    assert_same(as_tuple, expected)
    if as_dict.get("loss") is not None:  # `loss, logits = model(..., return_dict=False)` binds tensors
        loss, first = as_tuple[:2]
        assert loss.dim() == 0 and isinstance(first, torch.Tensor)
    model.config.return_dict = False
    assert_same(run(model, kwargs), expected, "config.return_dict=False")
    assert type(run(model, kwargs, return_dict=True)).__name__ == type(as_dict).__name__


@pytest.mark.parametrize(
    "name,cls", [(n, c) for n, c in HEADS if is_seq2seq(n, c)], ids=lambda v: getattr(v, "__name__", v)
)
def test_encoder_of_a_seq2seq_model_returns_the_tuple_too(name, cls):
    """``get_encoder()`` is called on its own (generate does, with return_dict=True); it follows the same contract."""
    model = build(name, cls)
    kwargs = {key: value for key, value in inputs_for(name, cls).items() if key in ("input_ids", "attention_mask")}
    encoder = model.get_encoder()
    as_dict = run(encoder, kwargs)
    assert_same(run(encoder, kwargs, return_dict=False), as_dict.to_tuple())
    model.config.return_dict = False
    assert type(run(encoder, kwargs)) is tuple


@pytest.mark.parametrize("name,cls", GENERATIVE, ids=[cls.__name__.removeprefix("Scratch") for _, cls in GENERATIVE])
def test_generate_with_config_return_dict_false(name, cls):
    model = build(name, cls)
    kwargs = inputs_for(name, cls)
    kwargs.pop("decoder_input_ids", None)
    settings = dict(max_new_tokens=3, do_sample=False, pad_token_id=0)
    expected = model.generate(**kwargs, **settings)
    model.config.return_dict = False
    torch.testing.assert_close(model.generate(**kwargs, **settings), expected, atol=0, rtol=0)


def expected_maps(name: str, cls, model, kwargs: dict) -> dict:
    """{output field: [shape of each entry]} that the flags must add, as documented in the module docstring."""
    config, s = model.config, family_sizes()
    rows = s["batch"] * (CHOICES if is_multiple_choice(cls) else 1)
    length, hidden, heads_ = s["length"], config.hidden_size, s["heads"]
    if is_seq2seq(name, cls):
        target = kwargs["decoder_input_ids"].shape[1]
        if name == "rnn":
            maps = {
                "encoder_hidden_states": [(rows, length, hidden)] * (config.encoder_layers + 1),
                "decoder_hidden_states": [(rows, target, hidden)] * (config.decoder_layers + 1),
            }
            if config.attention_type != "none":
                maps["cross_attentions"] = [(rows, 1, target, length)]
            return maps
        return {
            "encoder_hidden_states": [(rows, length, hidden)] * (config.encoder_layers + 1),
            "decoder_hidden_states": [(rows, target, hidden)] * (config.decoder_layers + 1),
            "encoder_attentions": [(rows, heads_, length, length)] * config.encoder_layers,
            "decoder_attentions": [(rows, heads_, target, target)] * config.decoder_layers,
            "cross_attentions": [(rows, heads_, target, length)] * config.decoder_layers,
        }
    if name == "rnn":  # the classifier reads the encoder: hidden states, no attention
        return {"hidden_states": [(rows, length, hidden)] * (config.encoder_layers + 1)}
    maps = {"hidden_states": [(rows, length, hidden)] * (config.num_hidden_layers + 1)}
    if name == "longformer":
        num_global = (
            int(kwargs["global_attention_mask"].reshape(rows, length).sum(-1).max())
            if "global_attention_mask" in kwargs
            else 0
        )
        maps["attentions"] = [
            (rows, heads_, length, num_global + config.attention_window + 1)
        ] * config.num_hidden_layers
        if num_global:
            maps["global_attentions"] = [(rows, heads_, length, num_global)] * config.num_hidden_layers
    else:  # BERT, GPT, Transformer-XL (first segment: no memory)
        maps["attentions"] = [(rows, heads_, length, length)] * config.num_hidden_layers
    return maps


def assert_no_weight_on_padding_or_the_future(name: str, cls, kwargs: dict, output, maps: dict) -> None:
    """The weights a model returns are the ones it applied: none on padded keys (self-attention over the tokens,
    cross-attention over the source), none on later positions in causal self-attention, so none at all for a
    left-padded query. (Longformer's maps are per key offset; their layout is checked in test_longformer.py.)"""
    if name == "longformer":
        return
    mask = kwargs["attention_mask"]
    padded_key = (mask.reshape(-1, mask.shape[-1]) == 0)[:, None, None, :]
    over_the_tokens = [field for field in ("attentions", "encoder_attentions", "cross_attentions") if field in maps]
    for field in over_the_tokens:
        assert all((weights.masked_select(padded_key) == 0).all() for weights in output[field]), f"{field}: padding"
    causal = "decoder_attentions" if is_seq2seq(name, cls) else "attentions" if FAMILIES[name].causal else None
    if causal in maps:
        assert all((weights.triu(diagonal=1) == 0).all() for weights in output[causal]), f"{causal}: the future"
    if causal == "attentions" and FAMILIES[name].padding_side == "left":  # a padded query has no real key before it
        padded_query = padded_key.transpose(-1, -2)
        assert all((weights.masked_select(padded_query) == 0).all() for weights in output[causal]), "padded query"


@heads
def test_hidden_states_and_attentions(name, cls):
    model = build(name, cls)
    kwargs = inputs_for(name, cls)
    plain = run(model, kwargs)
    maps = expected_maps(name, cls, model, kwargs)
    for field in maps:
        assert plain.get(field) is None, f"{field} returned without being asked for"
    full = run(model, kwargs, output_hidden_states=True, output_attentions=True)
    for field, shapes in maps.items():
        got = full.get(field)
        assert got is not None, f"{field} missing"
        assert [tuple(t.shape) for t in got] == shapes, field
        assert all(torch.isfinite(t).all() for t in got), field
    for field in ("attentions", "encoder_attentions", "decoder_attentions", "cross_attentions"):
        if field not in maps:
            assert full.get(field) is None, f"{field}: the family documents none"
        elif name != "longformer":  # a softmax row per query (Longformer's rows split local / global weights)
            sums = torch.stack([t.sum(-1) for t in full[field]])
            real = sums[sums != 0]
            torch.testing.assert_close(real, torch.ones_like(real), atol=1e-5, rtol=0)
    assert_no_weight_on_padding_or_the_future(name, cls, kwargs, full, maps)
    torch.testing.assert_close(full[0], plain[0])  # asking for them changes nothing else
    if full.get("last_hidden_state") is not None and "hidden_states" in maps:  # a base model's last one is its output
        torch.testing.assert_close(full.hidden_states[-1], full.last_hidden_state)
    if full.get("encoder_last_hidden_state") is not None:
        torch.testing.assert_close(full.encoder_hidden_states[-1], full.encoder_last_hidden_state)
    if name == "transformer" and full.get("last_hidden_state") is not None:  # (the RNN's Luong output is s̃_t)
        torch.testing.assert_close(full.decoder_hidden_states[-1], full.last_hidden_state)


def test_transfo_xl_attentions_cover_the_memory():
    name = "transfo_xl"
    cls = getattr(hf_scratch, FAMILIES[name].head)
    model = build(name, cls)
    ids = family_sizes()["ids"]
    first = run(model, {"input_ids": ids[:, :4]})
    second = run(model, {"input_ids": ids[:, 4:]}, mems=first.mems, output_attentions=True, output_hidden_states=True)
    memory = first.mems[0].shape[1]
    assert [tuple(a.shape) for a in second.attentions] == [(2, 2, 2, memory + 2)] * LAYERS
    assert len(second.hidden_states) == LAYERS + 1


# --------------------------------------------------------------------------------------------------------------
# Embeddings: get / set, tie_weights, resize_token_embeddings, num_parameters
# --------------------------------------------------------------------------------------------------------------


def output_weight(model):
    """The output embedding matrix (for Transformer-XL's adaptive softmax: that of its last, rarest table)."""
    output = model.get_output_embeddings()
    return output.weights[-1] if hasattr(output, "weights") else output.weight


def output_rows(model) -> int:
    """The rows of the output embeddings (of all the adaptive softmax's tables)."""
    output = model.get_output_embeddings()
    return sum(w.shape[0] for w in output.weights) if hasattr(output, "weights") else output.weight.shape[0]


def embedding_rows(embedding: nn.Module) -> int:
    return embedding.num_embeddings


def same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def is_tied(model) -> bool:
    """Does the head tie its output projection to its input embeddings (transformers' ``_tied_weights_keys``)?"""
    return (
        model.get_output_embeddings() is not None
        and bool(model.config.tie_word_embeddings)
        and bool(model._tied_weights_keys)
    )


def input_table(model) -> torch.Tensor:
    embedding = model.get_input_embeddings()
    return embedding.embeddings[-1].weight if hasattr(embedding, "embeddings") else embedding.weight


@heads
def test_get_and_set_input_embeddings(name, cls):
    model = build(name, cls)
    kwargs = inputs_for(name, cls)
    embedding = model.get_input_embeddings()
    assert isinstance(embedding, nn.Module) and embedding_rows(embedding) == model.config.vocab_size
    before = run(model, kwargs)[0]
    if isinstance(embedding, nn.Embedding):  # a larger table: the id check follows the module now in place
        replacement = nn.Embedding(
            embedding_rows(embedding) + 4, embedding.embedding_dim, padding_idx=embedding.padding_idx
        )
    else:  # Transformer-XL's adaptive input: a perturbed copy
        replacement = randomised_copy(embedding)
    calls = []
    replacement.register_forward_hook(lambda *args: calls.append(1))
    model.set_input_embeddings(replacement)
    assert model.get_input_embeddings() is replacement
    run(model, inputs_for(name, cls, ids=torch.full_like(family_sizes()["ids"], embedding_rows(replacement) - 1)))
    assert calls, "the model did not call the embedding module it was given"
    assert not torch.equal(run(model, kwargs)[0], before)


# The families whose embedding accessors are transformers' own (``PreTrainedModel.get_input_embeddings`` finds
# ``embeddings.word`` by ``_input_embed_layer``; ``get/set_output_embeddings`` use ``lm_head``): they must reach the
# modules the weights are named after, as the families' own accessors did. {family: (input, output or None)}
BUILT_IN_ACCESSORS = {
    "bert": ("embeddings.word", "mlm_head.decoder"),
    "longformer": ("embeddings.word", "mlm_head.decoder"),
    "gpt": ("embeddings.word", "lm_head"),
}


@pytest.mark.parametrize(
    "name,cls",
    [(n, c) for n, c in HEADS if n in BUILT_IN_ACCESSORS],
    ids=[i for (n, _), i in zip(HEADS, HEAD_IDS) if n in BUILT_IN_ACCESSORS],
)
def test_built_in_embedding_accessors_reach_the_named_modules(name, cls):
    model = build(name, cls)
    base = "" if model is model.base_model else "model."
    input_path, output_path = BUILT_IN_ACCESSORS[name]
    assert model.get_input_embeddings() is model.get_submodule(base + input_path)
    replacement = nn.Embedding(model.config.vocab_size, model.config.hidden_size)
    model.set_input_embeddings(replacement)
    assert model.get_submodule(base + input_path) is replacement
    has_output = output_path.split(".")[0] in dict(model.named_children())
    if not has_output:
        assert model.get_output_embeddings() is None
        return
    assert model.get_output_embeddings() is model.get_submodule(output_path)
    projection = nn.Linear(model.config.hidden_size, model.config.vocab_size)
    model.set_output_embeddings(projection)
    assert model.get_submodule(output_path) is projection


def randomised_copy(module: nn.Module) -> nn.Module:
    copy = deepcopy(module)
    with torch.no_grad():
        for parameter in copy.parameters():
            parameter.add_(torch.randn_like(parameter))
    return copy


@heads
def test_tie_weights(name, cls):
    model = build(name, cls)
    if not is_tied(model):
        state = {key: value.clone() for key, value in model.state_dict().items()}
        model.tie_weights()
        assert_same(list(model.state_dict().values()), list(state.values()), "tie_weights on an untied head")
        return
    output = model.get_output_embeddings()
    untied = nn.Parameter(output_weight(model).detach().clone())
    if hasattr(output, "weights"):  # Transformer-XL's adaptive softmax: one output table per cluster
        output.weights[-1] = untied
    else:
        output.weight = untied
    assert output_weight(model).data_ptr() != input_table(model).data_ptr()
    model.tie_weights()
    assert output_weight(model) is input_table(model)


@heads
def test_resize_token_embeddings_keeps_ties_and_trains_the_new_token(name, cls):
    model = build(name, cls).train()
    old = model.config.vocab_size
    new = old + 3
    returned = model.resize_token_embeddings(new)
    assert returned is model.get_input_embeddings()
    assert model.config.vocab_size == new and embedding_rows(model.get_input_embeddings()) == new
    if is_tied(model):  # the output embeddings are the input ones: same storage, also after the resize
        assert same_storage(output_weight(model), input_table(model))
    if model.get_output_embeddings() is not None:
        assert output_rows(model) == new

    ids = family_sizes()["ids"].clone()
    ids[:, 1] = new - 1  # the newest token, in every row
    kwargs = inputs_for(name, cls, labels=True, ids=ids)
    if is_seq2seq(name, cls):
        kwargs["decoder_input_ids"] = kwargs["decoder_input_ids"].clone()
        kwargs["decoder_input_ids"][:, -1] = new - 1
        if "labels" in kwargs:
            kwargs["labels"] = kwargs["decoder_input_ids"]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = loss_of(model(**kwargs))
    loss.backward()
    assert torch.isfinite(loss)
    gradient = input_table(model).grad
    assert gradient is not None and gradient[-1].abs().sum() > 0, "the new token's embedding got no gradient"
    optimizer.step()


@pytest.mark.parametrize("name", ["bert", "longformer"])
def test_token_type_check_follows_the_live_table(name):
    """A model given a larger segment table (the usual recipe for more token types) accepts the new types."""
    cls = getattr(hf_scratch, FAMILIES[name].head)
    model = build(name, cls)
    model.model.embeddings.token_type = nn.Embedding(3, model.config.hidden_size)
    model.config.type_vocab_size = 3
    kwargs = inputs_for(name, cls)
    kwargs["token_type_ids"] = torch.full_like(kwargs["input_ids"], 2)
    assert torch.isfinite(run(model, kwargs)[0]).all()
    kwargs["token_type_ids"] = torch.full_like(kwargs["input_ids"], 3)
    with pytest.raises(ValueError, match="token_type_ids"):
        run(model, kwargs)


@heads
def test_num_parameters(name, cls):
    model = build(name, cls)
    unique = {id(p): p for p in model.parameters()}
    assert model.num_parameters() == sum(p.numel() for p in unique.values())
    embedding_parameters = {id(m.weight): m.weight.numel() for m in model.modules() if isinstance(m, nn.Embedding)}
    assert model.num_parameters(exclude_embeddings=True) == model.num_parameters() - sum(embedding_parameters.values())
    model.get_input_embeddings().requires_grad_(False)
    frozen = sum(p.numel() for p in model.get_input_embeddings().parameters())
    assert model.num_parameters(only_trainable=True) == model.num_parameters() - frozen


# --------------------------------------------------------------------------------------------------------------
# Checkpoints: sharded save, dtype, device_map, config edits after loading
# --------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory):
    """Each head saved once, in shards of at most 2 kB: {class name: (directory, the saved model)}."""
    saved = {}

    def checkpoint(name, cls):
        if cls.__name__ not in saved:
            model = build(name, cls)
            directory = tmp_path_factory.mktemp(cls.__name__)
            model.save_pretrained(directory, max_shard_size="2KB")
            saved[cls.__name__] = (directory, model)
        return saved[cls.__name__]

    return checkpoint


@heads
def test_sharded_save_round_trips(name, cls, checkpoints):
    directory, model = checkpoints(name, cls)
    shards = sorted(directory.glob("model-*.safetensors"))
    index = json.loads((directory / "model.safetensors.index.json").read_text())
    assert len(shards) > 1 and set(index["weight_map"].values()) == {shard.name for shard in shards}
    loaded = cls.from_pretrained(directory).eval()
    kwargs = inputs_for(name, cls, labels=True)
    assert_same(run(loaded, kwargs).to_tuple(), run(model, kwargs).to_tuple())
    if is_tied(loaded):
        assert same_storage(output_weight(loaded), input_table(loaded))


@heads
def test_from_pretrained_in_bfloat16(name, cls, checkpoints):
    """Loaded in bf16, every output (loss, logits, hidden states) is the fp32 model's within bf16 rounding
    (``comparing.close_to_fp32`` says why that tolerance)."""
    directory, model = checkpoints(name, cls)
    loaded = cls.from_pretrained(directory, dtype=torch.bfloat16).eval()
    assert {p.dtype for p in loaded.parameters()} == {torch.bfloat16}
    assert loaded.dtype == torch.bfloat16
    kwargs = inputs_for(name, cls, labels=True)
    output, expected = run(loaded, kwargs), run(model, kwargs)
    for key, value in expected.items():
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            close_to_fp32(output[key], value)


@heads
def test_device_map_auto(name, cls, checkpoints):
    directory, model = checkpoints(name, cls)
    loaded = cls.from_pretrained(directory, device_map="auto").eval()
    assert loaded.device.type == "cpu"  # (on one CPU, transformers sets no hf_device_map, for built-in models too)
    kwargs = inputs_for(name, cls)
    torch.testing.assert_close(run(loaded, kwargs)[0], run(model, kwargs)[0], atol=1e-6, rtol=1e-6)


@heads
def test_config_edits_after_loading_take_effect(name, cls, checkpoints):
    directory, _ = checkpoints(name, cls)
    # (transformers' config refuses output_attentions=True under SDPA, for built-in models too: load eager)
    loaded = cls.from_pretrained(directory, attn_implementation="eager").eval()
    kwargs = inputs_for(name, cls)
    maps = expected_maps(name, cls, loaded, kwargs)
    loaded.config.output_hidden_states = True
    loaded.config.output_attentions = True
    output = run(loaded, kwargs)
    for field, shapes in maps.items():
        assert output.get(field) is not None and len(output[field]) == len(shapes), field
    loaded.config.return_dict = False
    assert type(run(loaded, kwargs)) is tuple
    loaded.config.output_hidden_states = False
    loaded.config.output_attentions = False
    loaded.config.return_dict = True
    assert all(run(loaded, kwargs).get(field) is None for field in maps)


def test_transfo_xl_mem_len_edit_after_loading(checkpoints):
    cls = getattr(hf_scratch, FAMILIES["transfo_xl"].head)
    directory, _ = checkpoints("transfo_xl", cls)
    loaded = cls.from_pretrained(directory).eval()
    loaded.config.mem_len = 2
    assert run(loaded, {"input_ids": family_sizes()["ids"]}).mems[0].shape[1] == 2


# --------------------------------------------------------------------------------------------------------------
# Gradient checkpointing
# --------------------------------------------------------------------------------------------------------------


def gradients(model, kwargs) -> tuple[dict, int]:
    """(gradient of every parameter after one loss.backward(), how many times the first checkpointable layer's
    sub-modules ran in the forward and backward pass — more often when the backward pass recomputes them; torch
    stops recomputing once it has what the backward needs, so not necessarily twice as often)."""
    layer = next(m for m in model.modules() if isinstance(m, GradientCheckpointingLayer))
    calls = []
    handles = [m.register_forward_hook(lambda *args: calls.append(1)) for m in layer.modules() if m is not layer]
    model.zero_grad()
    loss_of(model(**kwargs)).backward()
    for handle in handles:
        handle.remove()
    return {key: p.grad.clone() for key, p in model.named_parameters() if p.grad is not None}, len(calls)


@heads
def test_gradient_checkpointing(name, cls):
    model = build(name, cls).train()
    kwargs = inputs_for(name, cls, labels=True)
    plain, plain_calls = gradients(model, kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # transformers 5 renamed it activation_checkpointing_enable
        model.activation_checkpointing_enable()
    assert model.is_activation_checkpointing
    layers = [module for module in model.modules() if isinstance(module, GradientCheckpointingLayer)]
    assert all(layer.gradient_checkpointing for layer in layers), "a layer is not checkpointed"
    checkpointed, checkpointed_calls = gradients(model, kwargs)
    assert plain_calls > 0 and checkpointed_calls > plain_calls, "the layers were not recomputed"
    assert checkpointed.keys() == plain.keys()
    for key in plain:
        torch.testing.assert_close(checkpointed[key], plain[key], atol=1e-6, rtol=1e-5, msg=key)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    optimizer.step()
    assert torch.isfinite(loss_of(model(**kwargs)))

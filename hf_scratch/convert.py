"""The bridge to reference checkpoints: weight maps between hf_scratch models and the transformers (or original)
implementations.

    from_transformers(model)          a transformers model → the hf_scratch model with the same head and weights
    to_transformers(model)            the way back, where transformers still ships the class
    load_reference_checkpoint(path)   a reference checkpoint directory (config.json + weights) → hf_scratch model,
                                      without importing the reference class (transfo-xl has none in transformers 5)
    python -m hf_scratch.convert SRC_DIR OUT_DIR    the same on the command line; also copies tokenizer files

Each family registers one ``Conversion``: how to translate the config (as a plain dict, so no reference class is
needed), which reference head becomes which hf_scratch head, and a ``WeightMap`` — a list of ``WeightRule``s
pairing a key template of ours with one or more reference key templates (``{i}`` matches a layer number). Several
reference keys are concatenated along dim 0 (e.g. separate Q, K, V into our fused ``qkv_proj``); ``transpose``
handles GPT-2's Conv1D (in, out) layout. The same rules run both ways.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

import torch

# --------------------------------------------------------------------------------------------------------------
# Weight maps
# --------------------------------------------------------------------------------------------------------------


def _template_regex(template: str) -> re.Pattern:
    pattern = re.escape(template)
    pattern = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>\\d+)", pattern)
    return re.compile(f"^{pattern}$")


@dataclass(frozen=True)
class WeightRule:
    """``ours`` ← ``reference`` (several reference tensors are concatenated along ``dim``; ``transpose`` swaps the
    two dimensions of a 2-D weight). ``{name}`` placeholders match integers and must appear on both sides."""

    ours: str
    reference: tuple[str, ...]
    transpose: bool = False
    dim: int = 0
    # optional value transforms, applied after transposition/concatenation (ref→ours) and before (ours→ref)
    to_ours_fn: Optional[Callable[[torch.Tensor], torch.Tensor]] = None
    to_reference_fn: Optional[Callable[[torch.Tensor], torch.Tensor]] = None

    def __post_init__(self):
        if isinstance(self.reference, str):
            object.__setattr__(self, "reference", (self.reference,))


def rule(ours: str, *reference: str, transpose: bool = False, dim: int = 0, to_ours_fn=None, to_reference_fn=None) -> WeightRule:
    return WeightRule(ours, tuple(reference), transpose, dim, to_ours_fn, to_reference_fn)


def weight_and_bias(ours: str, *reference: str, transpose: bool = False) -> list[WeightRule]:
    """Two rules for a Linear/LayerNorm-like pair: ``ours.weight`` ← ``ref.weight`` and ``ours.bias`` ← ``ref.bias``."""
    return [
        rule(f"{ours}.weight", *(f"{r}.weight" for r in reference), transpose=transpose),
        rule(f"{ours}.bias", *(f"{r}.bias" for r in reference)),
    ]


@dataclass
class WeightMap:
    rules: list[WeightRule]
    # reference keys that carry nothing we need (e.g. a registered buffer such as position_ids)
    ignore_reference: Sequence[str] = ()
    # our keys that are rebuilt from the config (e.g. a non-persistent table) and so never come from the reference
    ignore_ours: Sequence[str] = ()

    def _match(self, key: str, templates: Sequence[str]):
        for index, template in enumerate(templates):
            found = _template_regex(template).match(key)
            if found:
                return index, found.groupdict()
        return None, None

    def to_ours(self, reference_state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        ignored = [_template_regex(t) for t in self.ignore_reference]
        pending = {k: v for k, v in reference_state.items() if not any(p.match(k) for p in ignored)}
        ours: dict[str, torch.Tensor] = {}
        for weight_rule in self.rules:
            first = _template_regex(weight_rule.reference[0])
            for key in [k for k in pending if first.match(k)]:
                names = first.match(key).groupdict()
                reference_keys = [t.format(**names) for t in weight_rule.reference]
                if not all(k in pending for k in reference_keys):
                    continue
                tensors = [pending.pop(k) for k in reference_keys]
                if weight_rule.transpose:
                    tensors = [t.t() for t in tensors]
                value = tensors[0] if len(tensors) == 1 else torch.cat(tensors, dim=weight_rule.dim)
                if weight_rule.to_ours_fn is not None:
                    value = weight_rule.to_ours_fn(value)
                ours[weight_rule.ours.format(**names)] = value.contiguous()
        if pending:
            raise ValueError(
                f"These reference weights have no place in the hf_scratch model: {sorted(pending)[:10]}"
                f"{' …' if len(pending) > 10 else ''}. The checkpoint does not match the architecture its config "
                "describes, or the weight map lacks a rule for them."
            )
        return ours

    def to_reference(self, our_state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        ignored = [_template_regex(t) for t in self.ignore_ours]
        pending = {k: v for k, v in our_state.items() if not any(p.match(k) for p in ignored)}
        reference: dict[str, torch.Tensor] = {}
        for weight_rule in self.rules:
            pattern = _template_regex(weight_rule.ours)
            for key in [k for k in pending if pattern.match(k)]:
                names = pattern.match(key).groupdict()
                value = pending.pop(key)
                if weight_rule.to_reference_fn is not None:
                    value = weight_rule.to_reference_fn(value)
                parts = (
                    [value]
                    if len(weight_rule.reference) == 1
                    else list(value.chunk(len(weight_rule.reference), dim=weight_rule.dim))
                )
                for template, part in zip(weight_rule.reference, parts):
                    reference[template.format(**names)] = (part.t() if weight_rule.transpose else part).contiguous()
        if pending:
            raise ValueError(f"These hf_scratch weights have no reference counterpart: {sorted(pending)[:10]}.")
        return reference


# --------------------------------------------------------------------------------------------------------------
# Registry of family conversions
# --------------------------------------------------------------------------------------------------------------


@dataclass
class Conversion:
    """How one reference model type maps onto one hf_scratch family."""

    reference_model_type: str  # e.g. "bert"
    reference_prefix: str  # the reference base_model_prefix, e.g. "bert"
    heads: dict[str, str]  # reference class name → hf_scratch class name, e.g. {"BertForMaskedLM": "ScratchBertForMaskedLM"}
    config_to_ours: Callable[[dict], object]  # reference config dict → hf_scratch config
    config_to_reference: Callable[[object], dict]  # hf_scratch config → kwargs of the reference config
    weight_map: Callable[[object], WeightMap]  # hf_scratch config → its WeightMap (layouts may depend on it)
    # for families with several reference types (scratch-gpt ← gpt2, openai-gpt): does this conversion produce
    # the given hf_scratch config when going back?
    accepts: Callable[[object], bool] = field(default=lambda config: True)

    def our_head(self, reference_class_name: str) -> str:
        if reference_class_name not in self.heads:
            raise ValueError(
                f"No hf_scratch counterpart for {reference_class_name}: supported {self.reference_model_type} "
                f"classes are {sorted(self.heads)}."
            )
        return self.heads[reference_class_name]

    def reference_head(self, our_class_name: str) -> str:
        for reference_name, ours in self.heads.items():
            if ours == our_class_name:
                return reference_name
        raise ValueError(f"{our_class_name} has no {self.reference_model_type} counterpart in transformers.")


_BY_REFERENCE: dict[str, Conversion] = {}
_BY_SCRATCH: dict[str, list[Conversion]] = {}


def register_conversion(conversion: Conversion, scratch_model_type: str) -> None:
    _BY_REFERENCE[conversion.reference_model_type] = conversion
    _BY_SCRATCH.setdefault(scratch_model_type, []).append(conversion)


def _conversion_for_reference(model_type: str) -> Conversion:
    if model_type not in _BY_REFERENCE:
        raise ValueError(
            f"Cannot convert model_type {model_type!r}: hf_scratch converts {sorted(_BY_REFERENCE)}."
        )
    return _BY_REFERENCE[model_type]


def _conversion_for_scratch(config) -> Conversion:
    for conversion in _BY_SCRATCH.get(config.model_type, []):
        if conversion.accepts(config):
            return conversion
    raise ValueError(f"hf_scratch model_type {config.model_type!r} has no transformers counterpart to convert to.")


def _scratch_class(name: str):
    import hf_scratch

    return getattr(hf_scratch, name)


def _is_base_model(model) -> bool:
    return not hasattr(model, model.base_model_prefix)


def _with_prefix(state: dict, prefix: str) -> dict:
    return {k if k.startswith(prefix + ".") else f"{prefix}.{k}": v for k, v in state.items()}


def _without_prefix(state: dict, prefix: str) -> dict:
    return {k[len(prefix) + 1 :] if k.startswith(prefix + ".") else k: v for k, v in state.items()}


def _tied_targets(model) -> set[str]:
    """State-dict keys that are tied to (the same tensor as) another key: they are never converted separately."""
    return set(getattr(model, "all_tied_weights_keys", None) or {}) | set(getattr(model, "_tied_weights_keys", None) or {})


def _untied_state(model) -> dict[str, torch.Tensor]:
    tied = _tied_targets(model)
    return {k: v for k, v in model.state_dict().items() if k not in tied}


def _load_exactly(model, state: dict[str, torch.Tensor]) -> None:
    """Load ``state`` into ``model``; everything must fit, except keys tied to another weight."""
    expected = model.state_dict()
    unexpected = sorted(set(state) - set(expected))
    tied = _tied_targets(model)
    missing = sorted(k for k in set(expected) - set(state) if k not in tied)
    if unexpected or missing:
        raise ValueError(
            f"Converted weights do not fit {type(model).__name__}: missing {missing[:8]}, unexpected {unexpected[:8]}."
        )
    for key, value in state.items():
        if tuple(value.shape) != tuple(expected[key].shape):
            raise ValueError(
                f"Weight {key} has shape {tuple(value.shape)} but {type(model).__name__} expects "
                f"{tuple(expected[key].shape)}: the config and the weights disagree."
            )
    model.load_state_dict(state, strict=False)
    model.tie_weights()


def _build_ours(conversion: Conversion, reference_config: dict, reference_class: str, reference_state: dict):
    config = conversion.config_to_ours(reference_config)
    model_class = _scratch_class(conversion.our_head(reference_class))
    model = model_class(config)
    if _is_base_model(model):
        reference_state = _with_prefix(reference_state, conversion.reference_prefix)
    state = conversion.weight_map(config).to_ours(reference_state)
    if _is_base_model(model):
        state = _without_prefix(state, model.base_model_prefix)
    dtype = next((v.dtype for v in reference_state.values() if v.is_floating_point()), torch.float32)
    _load_exactly(model, {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()})
    return model.to(dtype)


def from_transformers(model):
    """A transformers model → the hf_scratch model with the same head, config and weights (same train/eval mode,
    device and dtype)."""
    conversion = _conversion_for_reference(model.config.model_type)
    reference_state = _untied_state(model)
    if _is_base_model(model):
        reference_state = _with_prefix(reference_state, conversion.reference_prefix)
    ours = _build_ours(conversion, model.config.to_dict(), type(model).__name__, reference_state)
    if getattr(model, "generation_config", None) is not None and getattr(ours, "generation_config", None) is not None:
        ours.generation_config = model.generation_config
    parameter = next(model.parameters())
    return ours.to(device=parameter.device, dtype=parameter.dtype).train(model.training)


def to_transformers(model):
    """An hf_scratch model → the transformers model with the same head and weights (same train/eval mode, device
    and dtype)."""
    import transformers

    conversion = _conversion_for_scratch(model.config)
    reference_class = getattr(transformers, conversion.reference_head(type(model).__name__))
    reference_config = transformers.AutoConfig.for_model(
        conversion.reference_model_type, **conversion.config_to_reference(model.config)
    )
    reference = reference_class(reference_config)
    state = _untied_state(model)
    if _is_base_model(model):
        state = _with_prefix(state, model.base_model_prefix)
    reference_state = conversion.weight_map(model.config).to_reference(state)
    if _is_base_model(reference):
        reference_state = _without_prefix(reference_state, conversion.reference_prefix)
    dtype = next(model.parameters()).dtype
    _load_exactly(reference, {k: v.to(dtype) if v.is_floating_point() else v for k, v in reference_state.items()})
    if getattr(model, "generation_config", None) is not None and getattr(reference, "generation_config", None) is not None:
        reference.generation_config = model.generation_config
    return reference.to(device=next(model.parameters()).device, dtype=dtype).train(model.training)


# --------------------------------------------------------------------------------------------------------------
# Checkpoint directories
# --------------------------------------------------------------------------------------------------------------

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "source.spm",
    "target.spm",
    "spiece.model",
    "vocab.pkl",
    "vocab.bin",
)


def read_reference_weights(path: Path) -> dict[str, torch.Tensor]:
    """All weights of a checkpoint directory: safetensors (single or sharded) or a PyTorch pickle loaded with
    ``weights_only=True``."""
    from safetensors.torch import load_file

    path = Path(path)
    if (path / "model.safetensors").exists():
        return load_file(str(path / "model.safetensors"))
    if (path / "model.safetensors.index.json").exists():
        index = json.loads((path / "model.safetensors.index.json").read_text())
        state: dict[str, torch.Tensor] = {}
        for shard in sorted(set(index["weight_map"].values())):
            state.update(load_file(str(path / shard)))
        return state
    if (path / "pytorch_model.bin").exists():
        return torch.load(path / "pytorch_model.bin", map_location="cpu", weights_only=True)
    raise ValueError(
        f"No weights in {path}: expected model.safetensors, model.safetensors.index.json or pytorch_model.bin."
    )


def load_reference_checkpoint(path):
    """Read a reference checkpoint directory (``config.json`` + weights) and return the hf_scratch model for the
    head its ``architectures`` names. The reference class is never imported."""
    path = Path(path)
    config_file = path / "config.json"
    if not config_file.exists():
        raise ValueError(f"{path} is not a checkpoint directory: it has no config.json.")
    reference_config = json.loads(config_file.read_text())
    model_type = reference_config.get("model_type")
    if model_type is None:
        raise ValueError(f"{config_file} has no model_type: cannot tell which architecture it holds.")
    conversion = _conversion_for_reference(model_type)
    architectures = reference_config.get("architectures") or []
    reference_class = architectures[0] if architectures else next(iter(conversion.heads))
    model = _build_ours(conversion, reference_config, reference_class, read_reference_weights(path))
    if (path / "generation_config.json").exists() and getattr(model, "generation_config", None) is not None:
        from transformers import GenerationConfig

        model.generation_config = GenerationConfig.from_pretrained(str(path))
    return model.eval()


def convert_directory(source, output) -> Path:
    """Convert a reference checkpoint directory into an hf_scratch one, with its tokenizer files."""
    model = load_reference_checkpoint(source)
    output = Path(output)
    model.save_pretrained(output)
    for name in TOKENIZER_FILES:
        if (Path(source) / name).exists():
            shutil.copyfile(Path(source) / name, output / name)
    return output

# ==============================================================================================================
# Family weight maps. Each family adds one section: config translation both ways, its WeightMap, and
# register_conversion(...). Sections follow the order of the families in ARCHITECTURE.md.
# ==============================================================================================================

# ---- BERT (bert → scratch-bert) ------------------------------------------------------------------------------

# Fields whose names and meanings are the same in transformers' BertConfig and ours.
_BERT_SHARED_FIELDS = (
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "hidden_act",
    "hidden_dropout_prob", "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
    "initializer_range", "layer_norm_eps", "classifier_dropout", "pad_token_id", "tie_word_embeddings",
)
# Fields every reference config may carry that change behaviour of a head.
_TASK_FIELDS = ("id2label", "label2id", "problem_type", "bos_token_id", "eos_token_id")


def _copy_fields(source: dict, names: Sequence[str]) -> dict:
    return {name: source[name] for name in names if name in source and source[name] is not None}


def _bert_config_to_ours(reference: dict):
    from .configuration_bert import ScratchBertConfig

    if reference.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError("Only BERT with absolute position embeddings can be converted (position_embedding_type).")
    return ScratchBertConfig(**_copy_fields(reference, _BERT_SHARED_FIELDS + _TASK_FIELDS))


def _bert_config_to_reference(config) -> dict:
    return _copy_fields(config.to_dict(), _BERT_SHARED_FIELDS + _TASK_FIELDS)


def _bert_weight_map(config) -> WeightMap:
    layer, ref = "model.layers.{i}", "bert.encoder.layer.{i}"
    rules = [
        rule("model.embeddings.word.weight", "bert.embeddings.word_embeddings.weight"),
        rule("model.embeddings.position.weight", "bert.embeddings.position_embeddings.weight"),
        rule("model.embeddings.token_type.weight", "bert.embeddings.token_type_embeddings.weight"),
        *weight_and_bias("model.embeddings.norm", "bert.embeddings.LayerNorm"),
        *weight_and_bias(f"{layer}.attention.qkv_proj", f"{ref}.attention.self.query", f"{ref}.attention.self.key",
                         f"{ref}.attention.self.value"),
        *weight_and_bias(f"{layer}.attention.out_proj", f"{ref}.attention.output.dense"),
        *weight_and_bias(f"{layer}.attention_residual.norm", f"{ref}.attention.output.LayerNorm"),
        *weight_and_bias(f"{layer}.feed_forward.fc_in", f"{ref}.intermediate.dense"),
        *weight_and_bias(f"{layer}.feed_forward.fc_out", f"{ref}.output.dense"),
        *weight_and_bias(f"{layer}.feed_forward_residual.norm", f"{ref}.output.LayerNorm"),
        *weight_and_bias("model.pooler.dense", "bert.pooler.dense"),
        # heads
        *weight_and_bias("mlm_head.dense", "cls.predictions.transform.dense"),
        *weight_and_bias("mlm_head.norm", "cls.predictions.transform.LayerNorm"),
        rule("mlm_head.decoder.bias", "cls.predictions.bias"),
        *weight_and_bias("nsp_head", "cls.seq_relationship"),
        *weight_and_bias("classifier", "classifier"),
        *weight_and_bias("qa_outputs", "qa_outputs"),
    ]
    # The decoder bias is stored once (cls.predictions.bias); its alias and, when tied, the decoder weight are not.
    ignore = ["bert.embeddings.position_ids", "bert.embeddings.token_type_ids", "cls.predictions.decoder.bias"]
    if config.tie_word_embeddings:
        ignore.append("cls.predictions.decoder.weight")
    else:
        rules.append(rule("mlm_head.decoder.weight", "cls.predictions.decoder.weight"))
    return WeightMap(rules, ignore_reference=ignore)


register_conversion(
    Conversion(
        reference_model_type="bert",
        reference_prefix="bert",
        heads={
            "BertModel": "ScratchBertModel",
            "BertForPreTraining": "ScratchBertForPreTraining",
            "BertForMaskedLM": "ScratchBertForMaskedLM",
            "BertForNextSentencePrediction": "ScratchBertForNextSentencePrediction",
            "BertForSequenceClassification": "ScratchBertForSequenceClassification",
            "BertForTokenClassification": "ScratchBertForTokenClassification",
            "BertForQuestionAnswering": "ScratchBertForQuestionAnswering",
            "BertForMultipleChoice": "ScratchBertForMultipleChoice",
        },
        config_to_ours=_bert_config_to_ours,
        config_to_reference=_bert_config_to_reference,
        weight_map=_bert_weight_map,
    ),
    scratch_model_type="scratch-bert",
)

# ---- GPT (gpt2, openai-gpt → scratch-gpt) --------------------------------------------------------------------

# reference name → ours, shared by GPT2Config and OpenAIGPTConfig (the activation is translated separately)
_GPT_RENAMED_FIELDS = {
    "vocab_size": "vocab_size",
    "n_embd": "hidden_size",
    "n_layer": "num_hidden_layers",
    "n_head": "num_attention_heads",
    "n_positions": "max_position_embeddings",
    "resid_pdrop": "hidden_dropout_prob",
    "attn_pdrop": "attention_probs_dropout_prob",
    "embd_pdrop": "embedding_dropout_prob",
    "layer_norm_epsilon": "layer_norm_eps",
    "initializer_range": "initializer_range",
    "summary_activation": "multiple_choice_activation",
    "summary_first_dropout": "multiple_choice_dropout",
    "pad_token_id": "pad_token_id",
    "tie_word_embeddings": "tie_word_embeddings",
}
# OpenAI GPT's afn="gelu" is the tanh approximation (transformers' gelu_new), as in GPT-2.
_OPENAI_ACTIVATIONS = {"gelu": "gelu_new", "relu": "relu", "silu": "silu", "swish": "silu"}


def _check_gpt_reference_config(reference: dict) -> None:
    """Reject reference settings our single GPT implementation does not have, instead of loading them wrongly."""
    unsupported = {
        "add_cross_attention": (False, "cross-attention layers"),
        "scale_attn_weights": (True, "unscaled attention scores"),
        "scale_attn_by_inverse_layer_idx": (False, "attention scaled by 1/layer"),
        "summary_type": ("cls_index", "a multiple-choice summary other than the extract token"),
        "summary_use_proj": (True, "a multiple-choice head without projection"),
        "summary_proj_to_labels": (True, "a multiple-choice projection to hidden_size"),
    }
    for name, (expected, what) in unsupported.items():
        if reference.get(name, expected) != expected:
            raise ValueError(
                f"The reference config sets {name}={reference[name]!r} ({what}); hf_scratch's GPT supports only "
                f"{name}={expected!r}."
            )


def _gpt_config_to_ours(reference: dict, layer_norm_placement: str):
    from .configuration_gpt import ScratchGPTConfig

    _check_gpt_reference_config(reference)
    fields = {ours: reference[name] for name, ours in _GPT_RENAMED_FIELDS.items() if name in reference}
    if layer_norm_placement == "pre":  # GPT-2
        fields["hidden_act"] = reference.get("activation_function", "gelu_new")
        fields["intermediate_size"] = reference.get("n_inner")
        fields["use_cache"] = reference.get("use_cache", True)
    else:  # OpenAI GPT: the MLP is always 4 × hidden
        afn = reference.get("afn", "gelu")
        if afn not in _OPENAI_ACTIVATIONS:
            raise ValueError(f"Unknown OpenAI GPT activation afn={afn!r}: expected one of {sorted(_OPENAI_ACTIVATIONS)}.")
        fields["hidden_act"] = _OPENAI_ACTIVATIONS[afn]
    defaults = {"vocab_size": 50257, "hidden_size": 768, "max_position_embeddings": 1024} if layer_norm_placement == "pre" else {}
    return ScratchGPTConfig(
        **{**defaults, **fields},
        **_copy_fields(reference, _TASK_FIELDS),
        layer_norm_placement=layer_norm_placement,
    )


def _gpt_config_to_reference(config, layer_norm_placement: str) -> dict:
    values = config.to_dict()
    reference = {name: values[ours] for name, ours in _GPT_RENAMED_FIELDS.items() if ours in values}
    reference.update(_copy_fields(values, _TASK_FIELDS))
    if layer_norm_placement == "pre":
        reference.update(activation_function=config.hidden_act, n_inner=config.intermediate_size, use_cache=config.use_cache)
        return reference
    if config.intermediate_size != 4 * config.hidden_size:
        raise ValueError(
            f"OpenAI GPT has no intermediate size setting (its MLP is 4 × hidden = {4 * config.hidden_size}); this "
            f"model has intermediate_size={config.intermediate_size} and cannot be converted to OpenAIGPT classes."
        )
    back = {"gelu_new": "gelu", "relu": "relu", "silu": "silu"}
    if config.hidden_act not in back:
        raise ValueError(f"OpenAI GPT supports the activations {sorted(back)}, not hidden_act={config.hidden_act!r}.")
    reference["afn"] = back[config.hidden_act]
    return reference


@dataclass
class _GPTWeightMap(WeightMap):
    """Two quirks of the reference checkpoints on top of the rules:

    - GPT-2 checkpoints on the hub store the base model without its ``transformer.`` prefix (``h.0.attn.c_attn…``)
      even when ``architectures`` names a head class, and old ones carry the causal-mask buffers: both load.
    - ``OpenAIGPTDoubleHeadsModel`` ties the other way round (the token embeddings follow ``lm_head.weight``), so
      with tied weights its untied state holds only ``lm_head.weight``, and it expects that key back.
    """

    word_embeddings: str = "transformer.wte.weight"
    tied: bool = True

    head_prefixes = ("transformer.", "lm_head.", "multiple_choice_head.", "score.")

    def to_ours(self, reference_state):
        state = {k if k.startswith(self.head_prefixes) else f"transformer.{k}": v for k, v in reference_state.items()}
        if self.tied and self.word_embeddings not in state and "lm_head.weight" in state:
            state[self.word_embeddings] = state["lm_head.weight"]
        return super().to_ours(state)

    def to_reference(self, our_state):
        reference = super().to_reference(our_state)
        has_lm_head = any(k.startswith("multiple_choice_head.") for k in reference)
        if self.tied and has_lm_head and "lm_head.weight" not in reference:
            reference["lm_head.weight"] = reference[self.word_embeddings]
        return reference


def _gpt_weight_map(embeddings: tuple[str, str], final_norm: bool):
    def build(config) -> WeightMap:
        layer, ref = "model.layers.{i}", "transformer.h.{i}"
        word, position = embeddings
        rules = [
            rule("model.embeddings.word.weight", f"transformer.{word}.weight"),
            rule("model.embeddings.position.weight", f"transformer.{position}.weight"),
            # GPT's Conv1D stores (in, out): transpose into nn.Linear's (out, in); c_attn is already [Q | K | V].
            *weight_and_bias(f"{layer}.attention.qkv_proj", f"{ref}.attn.c_attn", transpose=True),
            *weight_and_bias(f"{layer}.attention.out_proj", f"{ref}.attn.c_proj", transpose=True),
            # ln_1 / ln_2 sit before the sub-layer in GPT-2 and after it in GPT-1: the same ResidualNorm either way.
            *weight_and_bias(f"{layer}.attention_residual.norm", f"{ref}.ln_1"),
            *weight_and_bias(f"{layer}.feed_forward.fc_in", f"{ref}.mlp.c_fc", transpose=True),
            *weight_and_bias(f"{layer}.feed_forward.fc_out", f"{ref}.mlp.c_proj", transpose=True),
            *weight_and_bias(f"{layer}.feed_forward_residual.norm", f"{ref}.ln_2"),
            # heads (a tied lm_head.weight is present in state dicts, absent from saved checkpoints: both load)
            rule("lm_head.weight", "lm_head.weight"),
            *weight_and_bias("multiple_choice_head.summary", "multiple_choice_head.summary"),
            rule("score.weight", "score.weight"),
        ]
        if final_norm:  # GPT-2's LayerNorm after the last block
            rules.extend(weight_and_bias("model.final_norm", "transformer.ln_f"))
        ignore = ["transformer.h.{i}.attn.bias", "transformer.h.{i}.attn.masked_bias", "transformer.position_ids"]
        return _GPTWeightMap(
            rules, ignore_reference=ignore, word_embeddings=f"transformer.{word}.weight", tied=config.tie_word_embeddings
        )

    return build


for _reference_type, _placement, _prefix, _embeddings in (
    ("gpt2", "pre", "GPT2", ("wte", "wpe")),
    ("openai-gpt", "post", "OpenAIGPT", ("tokens_embed", "positions_embed")),
):
    register_conversion(
        Conversion(
            reference_model_type=_reference_type,
            reference_prefix="transformer",
            heads={
                f"{_prefix}Model": "ScratchGPTModel",
                f"{_prefix}LMHeadModel": "ScratchGPTLMHeadModel",
                f"{_prefix}DoubleHeadsModel": "ScratchGPTDoubleHeadsModel",
                f"{_prefix}ForSequenceClassification": "ScratchGPTForSequenceClassification",
            },
            config_to_ours=lambda reference, placement=_placement: _gpt_config_to_ours(reference, placement),
            config_to_reference=lambda config, placement=_placement: _gpt_config_to_reference(config, placement),
            weight_map=_gpt_weight_map(_embeddings, final_norm=_placement == "pre"),
            accepts=lambda config, placement=_placement: config.layer_norm_placement == placement,
        ),
        scratch_model_type="scratch-gpt",
    )

# ---- encoder-decoder Transformer (marian → scratch-transformer) ----------------------------------------------

# (Marian field, our field) pairs with the same meaning; Marian is post-LN with split sinusoids and LayerNorm eps 1e-5.
_MARIAN_FIELDS = (
    ("vocab_size", "vocab_size"), ("decoder_vocab_size", "decoder_vocab_size"), ("d_model", "hidden_size"),
    ("encoder_layers", "encoder_layers"), ("decoder_layers", "decoder_layers"),
    ("encoder_attention_heads", "encoder_attention_heads"), ("decoder_attention_heads", "decoder_attention_heads"),
    ("encoder_ffn_dim", "encoder_ffn_dim"), ("decoder_ffn_dim", "decoder_ffn_dim"),
    ("activation_function", "hidden_act"), ("dropout", "hidden_dropout_prob"),
    ("attention_dropout", "attention_probs_dropout_prob"), ("activation_dropout", "activation_dropout"),
    ("init_std", "initializer_range"), ("max_position_embeddings", "max_position_embeddings"),
    ("scale_embedding", "scale_embedding"), ("share_encoder_decoder_embeddings", "share_encoder_decoder_embeddings"),
    ("tie_word_embeddings", "tie_word_embeddings"), ("pad_token_id", "pad_token_id"), ("bos_token_id", "bos_token_id"),
    ("eos_token_id", "eos_token_id"), ("decoder_start_token_id", "decoder_start_token_id"),
)
_MARIAN_LAYER_NORM_EPS = 1e-5  # Marian's nn.LayerNorm default


def _marian_config_to_ours(reference: dict):
    from .configuration_transformer import ScratchTransformerConfig

    for name in ("encoder_layerdrop", "decoder_layerdrop"):
        if reference.get(name, 0.0):
            raise ValueError(f"Marian {name}={reference[name]} (LayerDrop) has no counterpart in scratch-transformer.")
    # Legacy BART-family switches some opus-mt config.json files still carry; all False in Marian's architecture.
    for name in ("normalize_before", "add_final_layer_norm", "normalize_embedding", "add_bias_logits"):
        if reference.get(name):
            raise ValueError(f"Marian config has {name}=True, which transformers' Marian (and scratch-transformer) "
                             "does not implement: this checkpoint needs a different architecture.")
    fields = {ours: reference[theirs] for theirs, ours in _MARIAN_FIELDS if reference.get(theirs) is not None}
    # Marian: one vocabulary unless stated otherwise; no separate flag means shared (its default).
    fields.setdefault("share_encoder_decoder_embeddings", True)
    fields.setdefault("tie_word_embeddings", True)
    return ScratchTransformerConfig(
        **fields, sinusoidal_layout="split", pre_norm=False, layer_norm_eps=_MARIAN_LAYER_NORM_EPS,
        **_copy_fields(reference, ("id2label", "label2id")),
    )


def _marian_config_to_reference(config) -> dict:
    differences = {
        "sinusoidal_layout": (config.sinusoidal_layout, "split"),
        "pre_norm": (config.pre_norm, False),
        "layer_norm_eps": (config.layer_norm_eps, _MARIAN_LAYER_NORM_EPS),
    }
    for name, (value, marian) in differences.items():
        if value != marian:
            raise ValueError(
                f"Marian has {name}={marian!r} built in but this model has {name}={value!r}: only models configured "
                f"like Marian (sinusoidal_layout='split', pre_norm=False, layer_norm_eps=1e-5) convert to MarianMTModel."
            )
    values = config.to_dict()
    return {theirs: values[ours] for theirs, ours in _MARIAN_FIELDS if values.get(ours) is not None}


class _MarianWeightMap(WeightMap):
    """Marian stores its fixed sinusoidal tables as ``embed_positions.weight``; ours are rebuilt from the config.
    Coming in, the stored tables are checked against ours (a checkpoint with other positions would silently
    translate worse); going out, ours are written in Marian's place."""

    position_keys = ("model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight")

    def __init__(self, rules, config, **kwargs):
        super().__init__(rules, **kwargs)
        self.config = config

    def _table(self) -> torch.Tensor:
        from .positional import sinusoidal_table

        return sinusoidal_table(self.config.max_position_embeddings, self.config.hidden_size, "split")

    def to_ours(self, reference_state):
        reference_state = dict(reference_state)
        for key in self.position_keys:
            stored = reference_state.pop(key, None)
            if stored is None:
                continue
            expected = self._table()
            if stored.shape != expected.shape or (stored.float() - expected).abs().max() > 1e-4:
                raise ValueError(
                    f"{key} in the checkpoint is not the split sinusoidal table of {tuple(expected.shape)} that "
                    "scratch-transformer rebuilds from the config: the checkpoint uses other position encodings."
                )
        return super().to_ours(reference_state)

    def to_reference(self, our_state):
        reference = super().to_reference(our_state)
        for key in self.position_keys:
            reference[key] = self._table()
        return reference


def _marian_weight_map(config) -> WeightMap:
    ours, ref = "model.encoder.layers.{i}", "model.encoder.layers.{i}"
    rules = [
        *weight_and_bias(f"{ours}.self_attention.qkv_proj", f"{ref}.self_attn.q_proj", f"{ref}.self_attn.k_proj",
                         f"{ref}.self_attn.v_proj"),
        *weight_and_bias(f"{ours}.self_attention.out_proj", f"{ref}.self_attn.out_proj"),
        *weight_and_bias(f"{ours}.self_attention_residual.norm", f"{ref}.self_attn_layer_norm"),
        *weight_and_bias(f"{ours}.feed_forward.fc_in", f"{ref}.fc1"),
        *weight_and_bias(f"{ours}.feed_forward.fc_out", f"{ref}.fc2"),
        *weight_and_bias(f"{ours}.feed_forward_residual.norm", f"{ref}.final_layer_norm"),
    ]
    ours, ref = "model.decoder.layers.{i}", "model.decoder.layers.{i}"
    rules += [
        *weight_and_bias(f"{ours}.self_attention.qkv_proj", f"{ref}.self_attn.q_proj", f"{ref}.self_attn.k_proj",
                         f"{ref}.self_attn.v_proj"),
        *weight_and_bias(f"{ours}.self_attention.out_proj", f"{ref}.self_attn.out_proj"),
        *weight_and_bias(f"{ours}.self_attention_residual.norm", f"{ref}.self_attn_layer_norm"),
        *weight_and_bias(f"{ours}.cross_attention.q_proj", f"{ref}.encoder_attn.q_proj"),
        *weight_and_bias(f"{ours}.cross_attention.kv_proj", f"{ref}.encoder_attn.k_proj", f"{ref}.encoder_attn.v_proj"),
        *weight_and_bias(f"{ours}.cross_attention.out_proj", f"{ref}.encoder_attn.out_proj"),
        *weight_and_bias(f"{ours}.cross_attention_residual.norm", f"{ref}.encoder_attn_layer_norm"),
        *weight_and_bias(f"{ours}.feed_forward.fc_in", f"{ref}.fc1"),
        *weight_and_bias(f"{ours}.feed_forward.fc_out", f"{ref}.fc2"),
        *weight_and_bias(f"{ours}.feed_forward_residual.norm", f"{ref}.final_layer_norm"),
        # Marian's output bias is a (1, vocab) buffer; ours is the bias of the output projection.
        rule("lm_head.bias", "final_logits_bias", to_ours_fn=lambda t: t.reshape(-1),
             to_reference_fn=lambda t: t.reshape(1, -1)),
    ]
    # Embeddings: one shared matrix (model.shared; Marian's per-side copies are tied to it) or one per side.
    ignore = []
    if config.share_encoder_decoder_embeddings:
        rules.append(rule("model.encoder.embeddings.tokens.weight", "model.shared.weight"))
        ignore += ["model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"]
    else:
        rules.append(rule("model.encoder.embeddings.tokens.weight", "model.encoder.embed_tokens.weight"))
        rules.append(rule("model.decoder.embeddings.tokens.weight", "model.decoder.embed_tokens.weight"))
    if config.tie_word_embeddings:
        ignore.append("lm_head.weight")
    else:
        rules.append(rule("lm_head.weight", "lm_head.weight"))
    return _MarianWeightMap(rules, config, ignore_reference=ignore)


register_conversion(
    Conversion(
        reference_model_type="marian",
        reference_prefix="model",
        heads={
            "MarianModel": "ScratchTransformerModel",
            "MarianMTModel": "ScratchTransformerForConditionalGeneration",
        },
        config_to_ours=_marian_config_to_ours,
        config_to_reference=_marian_config_to_reference,
        weight_map=_marian_weight_map,
    ),
    scratch_model_type="scratch-transformer",
)


# ---- Transformer-XL (transfo-xl → scratch-transfo-xl) --------------------------------------------------------

# reference field → ours (the reference config is read as a plain dict: transformers 5 has no TransfoXLConfig)
_TRANSFO_XL_FIELDS = {
    "vocab_size": "vocab_size", "d_model": "hidden_size", "d_embed": "embedding_size", "n_head": "num_attention_heads",
    "d_head": "head_dim", "d_inner": "intermediate_size", "n_layer": "num_hidden_layers", "div_val": "div_val",
    "pre_lnorm": "pre_lnorm", "mem_len": "mem_len", "clamp_len": "clamp_len", "same_length": "same_length",
    "untie_r": "untie_r", "cutoffs": "cutoffs", "tie_projs": "tie_projs", "dropout": "hidden_dropout_prob",
    "dropatt": "attention_probs_dropout_prob", "layer_norm_epsilon": "layer_norm_eps", "init_std": "initializer_range",
    "proj_init_std": "proj_init_std", "eos_token_id": "eos_token_id", "pad_token_id": "pad_token_id",
    "tie_word_embeddings": "tie_word_embeddings",
}


def _transfo_xl_config_to_ours(reference: dict):
    from .configuration_transfo_xl import ScratchTransfoXLConfig

    if reference.get("attn_type", 0) != 0:
        raise ValueError(
            f"Only Transformer-XL's relative attention (attn_type=0) can be converted, got attn_type="
            f"{reference['attn_type']} (the original code's absolute-position variants)."
        )
    if reference.get("sample_softmax", -1) > 0:
        raise ValueError("Transformer-XL checkpoints with a sampled softmax (sample_softmax > 0) are not supported.")
    fields = {ours: reference[name] for name, ours in _TRANSFO_XL_FIELDS.items() if reference.get(name) is not None}
    # the original hub configs (e.g. transfo-xl-wt103) name these n_token and tie_weight
    if "vocab_size" not in fields and reference.get("n_token") is not None:
        fields["vocab_size"] = reference["n_token"]
    if "tie_word_embeddings" not in fields and reference.get("tie_weight") is not None:
        fields["tie_word_embeddings"] = reference["tie_weight"]
    if "tie_projs" not in fields and "cutoffs" in fields:  # configs that only carry proj_share_all_but_first
        share = reference.get("proj_share_all_but_first", True)
        fields["tie_projs"] = [False] + [share] * len(fields["cutoffs"])
    return ScratchTransfoXLConfig(**fields, **_copy_fields(reference, ("id2label", "label2id", "bos_token_id")))


def _transfo_xl_config_to_reference(config) -> dict:
    return {name: getattr(config, ours) for name, ours in _TRANSFO_XL_FIELDS.items()}


def _transfo_xl_has_no_transformers_class(config) -> bool:
    raise ValueError(
        "transformers 5 no longer ships Transformer-XL (TransfoXLLMHeadModel was removed), so to_transformers cannot "
        "build one: share the hf_scratch model itself (save_pretrained carries its code for trust_remote_code=True). "
        "Reference checkpoints load the other way with hf_scratch.convert.load_reference_checkpoint(path)."
    )


def _transfo_xl_weight_map(config) -> WeightMap:

    layer, ref = "model.layers.{i}", "transformer.layers.{i}"
    rules = [
        rule("model.word_embeddings.embeddings.{i}.weight", "transformer.word_emb.emb_layers.{i}.weight"),
        rule("model.word_embeddings.projections.{i}", "transformer.word_emb.emb_projs.{i}"),
        rule(f"{layer}.attention.qkv_proj.weight", f"{ref}.dec_attn.qkv_net.weight"),
        rule(f"{layer}.attention.position_proj.weight", f"{ref}.dec_attn.r_net.weight"),
        rule(f"{layer}.attention.out_proj.weight", f"{ref}.dec_attn.o_net.weight"),
        *weight_and_bias(f"{layer}.attention_residual.norm", f"{ref}.dec_attn.layer_norm"),
        *weight_and_bias(f"{layer}.feed_forward.fc_in", f"{ref}.pos_ff.CoreNet.0"),
        *weight_and_bias(f"{layer}.feed_forward.fc_out", f"{ref}.pos_ff.CoreNet.3"),
        *weight_and_bias(f"{layer}.feed_forward_residual.norm", f"{ref}.pos_ff.layer_norm"),
        rule("lm_head.biases.{i}", "crit.out_layers.{i}.bias"),
        rule("lm_head.cluster_weight", "crit.cluster_weight"),
        rule("lm_head.cluster_bias", "crit.cluster_bias"),
    ]
    ignore = ["transformer.pos_emb.inv_freq"]  # a buffer rebuilt from hidden_size
    if config.untie_r:  # u, v per layer
        rules += [
            rule(f"{layer}.attention.content_bias", f"{ref}.dec_attn.r_w_bias"),
            rule(f"{layer}.attention.position_bias", f"{ref}.dec_attn.r_r_bias"),
        ]
    else:  # shared u, v; pickled checkpoints also hold each layer's alias of them
        rules += [rule("model.content_bias", "transformer.r_w_bias"), rule("model.position_bias", "transformer.r_r_bias")]
        ignore += [f"{ref}.dec_attn.r_w_bias", f"{ref}.dec_attn.r_r_bias"]
    # Tied softmax tensors are the input embedding's (the model ties them); checkpoints may still hold their copies.
    if config.tie_word_embeddings:
        ignore.append("crit.out_layers.{i}.weight")
    else:
        rules.append(rule("lm_head.weights.{i}", "crit.out_layers.{i}.weight"))
    for cluster, tied in enumerate(config.tie_projs):
        if config.has_projection and not tied:
            rules.append(rule(f"lm_head.projections.{cluster}", f"crit.out_projs.{cluster}"))
        else:
            ignore.append(f"crit.out_projs.{cluster}")
    return WeightMap(rules, ignore_reference=ignore)


register_conversion(
    Conversion(
        reference_model_type="transfo-xl",
        reference_prefix="transformer",
        heads={"TransfoXLLMHeadModel": "ScratchTransfoXLLMHeadModel", "TransfoXLModel": "ScratchTransfoXLModel"},
        config_to_ours=_transfo_xl_config_to_ours,
        config_to_reference=_transfo_xl_config_to_reference,
        weight_map=_transfo_xl_weight_map,
        accepts=_transfo_xl_has_no_transformers_class,
    ),
    scratch_model_type="scratch-transfo-xl",
)

# ---- Longformer (longformer → scratch-longformer) ------------------------------------------------------------

_LONGFORMER_SHARED_FIELDS = _BERT_SHARED_FIELDS + ("attention_window", "sep_token_id")
_LONGFORMER_SHARED_FIELDS = tuple(f for f in _LONGFORMER_SHARED_FIELDS if f != "classifier_dropout")


def _longformer_config_to_ours(reference: dict):
    from .configuration_longformer import ScratchLongformerConfig

    return ScratchLongformerConfig(**_copy_fields(reference, _LONGFORMER_SHARED_FIELDS + _TASK_FIELDS))


def _longformer_config_to_reference(config) -> dict:
    dilations = {d for layer in range(config.num_hidden_layers) for d in config.dilations_for_layer(layer)}
    if dilations != {1}:
        raise ValueError(
            f"This model uses dilated attention (attention_dilation={config.attention_dilation}), which transformers' "
            "Longformer does not have: only models with attention_dilation=1 convert to transformers."
        )
    return _copy_fields(config.to_dict(), _LONGFORMER_SHARED_FIELDS + _TASK_FIELDS)


def _longformer_weight_map(config) -> WeightMap:
    layer, ref = "model.layers.{i}", "longformer.encoder.layer.{i}"
    attention = f"{ref}.attention.self"
    rules = [
        rule("model.embeddings.word.weight", "longformer.embeddings.word_embeddings.weight"),
        rule("model.embeddings.position.weight", "longformer.embeddings.position_embeddings.weight"),
        rule("model.embeddings.token_type.weight", "longformer.embeddings.token_type_embeddings.weight"),
        *weight_and_bias("model.embeddings.norm", "longformer.embeddings.LayerNorm"),
        *weight_and_bias(f"{layer}.attention.qkv_proj", f"{attention}.query", f"{attention}.key", f"{attention}.value"),
        *weight_and_bias(f"{layer}.attention.query_global", f"{attention}.query_global"),
        *weight_and_bias(f"{layer}.attention.key_global", f"{attention}.key_global"),
        *weight_and_bias(f"{layer}.attention.value_global", f"{attention}.value_global"),
        *weight_and_bias(f"{layer}.attention.out_proj", f"{ref}.attention.output.dense"),
        *weight_and_bias(f"{layer}.attention_residual.norm", f"{ref}.attention.output.LayerNorm"),
        *weight_and_bias(f"{layer}.feed_forward.fc_in", f"{ref}.intermediate.dense"),
        *weight_and_bias(f"{layer}.feed_forward.fc_out", f"{ref}.output.dense"),
        *weight_and_bias(f"{layer}.feed_forward_residual.norm", f"{ref}.output.LayerNorm"),
        *weight_and_bias("model.pooler.dense", "longformer.pooler.dense"),
        # heads
        *weight_and_bias("mlm_head.dense", "lm_head.dense"),
        *weight_and_bias("mlm_head.norm", "lm_head.layer_norm"),
        rule("mlm_head.decoder.bias", "lm_head.bias"),
        *weight_and_bias("classifier.dense", "classifier.dense"),
        *weight_and_bias("classifier.out_proj", "classifier.out_proj"),
        *weight_and_bias("classifier", "classifier"),
        *weight_and_bias("qa_outputs", "qa_outputs"),
    ]
    # lm_head.decoder.bias is tied to lm_head.bias (stored once); old checkpoints may still carry it.
    ignore = ["longformer.embeddings.position_ids", "lm_head.decoder.bias"]
    if config.tie_word_embeddings:
        ignore.append("lm_head.decoder.weight")
    else:
        rules.append(rule("mlm_head.decoder.weight", "lm_head.decoder.weight"))
    return WeightMap(rules, ignore_reference=ignore)


register_conversion(
    Conversion(
        reference_model_type="longformer",
        reference_prefix="longformer",
        heads={
            "LongformerModel": "ScratchLongformerModel",
            "LongformerForMaskedLM": "ScratchLongformerForMaskedLM",
            "LongformerForSequenceClassification": "ScratchLongformerForSequenceClassification",
            "LongformerForTokenClassification": "ScratchLongformerForTokenClassification",
            "LongformerForQuestionAnswering": "ScratchLongformerForQuestionAnswering",
            "LongformerForMultipleChoice": "ScratchLongformerForMultipleChoice",
        },
        config_to_ours=_longformer_config_to_ours,
        config_to_reference=_longformer_config_to_reference,
        weight_map=_longformer_weight_map,
    ),
    scratch_model_type="scratch-longformer",
)


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m hf_scratch.convert",
        description="Convert a reference checkpoint directory (bert, gpt2, openai-gpt, marian, longformer, "
        "transfo-xl) into an hf_scratch checkpoint directory.",
    )
    parser.add_argument("source", help="reference checkpoint directory (config.json + weights)")
    parser.add_argument("output", help="directory to write the hf_scratch checkpoint to")
    args = parser.parse_args(argv)
    try:
        out = convert_directory(args.source, args.output)
    except ValueError as error:
        parser.exit(2, f"error: {error}\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

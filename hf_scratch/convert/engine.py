"""The conversion engine: weight rules that run both ways, the registry of family conversions, the model-level
``from_transformers`` / ``to_transformers``, reading and converting reference checkpoint directories, and the
command line (``python -m hf_scratch.convert SRC_DIR OUT_DIR``).

A ``WeightMap`` is a list of ``WeightRule``s, each pairing a key template of ours with one or more reference key
templates (``{i}`` matches a layer number). Several reference keys are concatenated along dim 0 (e.g. separate
Q, K, V into our fused ``qkv_proj``); ``transpose`` handles GPT-2's Conv1D (in, out) layout. The same rules run
both ways. Each family module of this package (``bert.py``, ``gpt.py``, …) registers one ``Conversion`` per
reference model type with ``register_conversion``.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from transformers import PreTrainedConfig, PreTrainedModel

# a value transform of one weight (reshaping, reordering rows), applied on the way in or out
TensorFn = Callable[[torch.Tensor], torch.Tensor]

# --------------------------------------------------------------------------------------------------------------
# Weight maps
# --------------------------------------------------------------------------------------------------------------


def _template_regex(template: str) -> re.Pattern[str]:
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
    to_ours_fn: TensorFn | None = None
    to_reference_fn: TensorFn | None = None

    def __post_init__(self) -> None:
        if isinstance(self.reference, str):
            object.__setattr__(self, "reference", (self.reference,))


def rule(
    ours: str,
    *reference: str,
    transpose: bool = False,
    dim: int = 0,
    to_ours_fn: TensorFn | None = None,
    to_reference_fn: TensorFn | None = None,
) -> WeightRule:
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
    # {alias: reference key}: reference keys holding a second copy of another one (BERT's output bias, stored both as
    # cls.predictions.bias and as the decoder's bias). Coming in, an alias stands in for its key when only the alias
    # is present and is dropped otherwise; going out, it is written as a copy of its key.
    reference_aliases: Mapping[str, str] = field(default_factory=dict)

    def to_ours(self, reference_state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        ignored = [_template_regex(t) for t in self.ignore_reference]
        pending = {k: v for k, v in reference_state.items() if not any(p.match(k) for p in ignored)}
        for alias, key in self.reference_aliases.items():
            if alias in pending:
                pending.setdefault(key, pending.pop(alias))
        ours: dict[str, torch.Tensor] = {}
        for weight_rule in self.rules:
            first = _template_regex(weight_rule.reference[0])
            matches = [match for k in pending if (match := first.match(k)) is not None]
            for match in matches:
                names = match.groupdict()
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
            matches = {k: match for k in pending if (match := pattern.match(k)) is not None}
            for key, match in matches.items():
                names = match.groupdict()
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
        for alias, key in self.reference_aliases.items():
            if key in reference:
                reference[alias] = reference[key]
        return reference


# --------------------------------------------------------------------------------------------------------------
# Registry of family conversions
# --------------------------------------------------------------------------------------------------------------


@dataclass
class Conversion:
    """How one reference model type maps onto one hf_scratch family."""

    reference_model_type: str  # e.g. "bert"
    reference_prefix: str  # the reference base_model_prefix, e.g. "bert"
    heads: dict[
        str, str
    ]  # reference class name → hf_scratch class name, e.g. {"BertForMaskedLM": "ScratchBertForMaskedLM"}
    # (the callables take the family's own config class: Any, as Callable's parameters cannot narrow in a subclass)
    config_to_ours: Callable[[dict[str, Any]], PreTrainedConfig]  # reference config dict → hf_scratch config
    config_to_reference: Callable[[Any], dict[str, Any]]  # hf_scratch config → kwargs of the reference config
    weight_map: Callable[[Any], WeightMap]  # hf_scratch config → its WeightMap (layouts may depend on it)
    # for families with several reference types (scratch-gpt ← gpt2, openai-gpt): does this conversion produce
    # the given hf_scratch config when going back?
    accepts: Callable[[Any], bool] = field(default=lambda config: True)

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


def scratch_heads(*reference_classes: str) -> dict[str, str]:
    """``Conversion.heads`` for a family whose heads are named after the reference classes with the prefix
    ``Scratch`` (``BertForMaskedLM`` → ``ScratchBertForMaskedLM``)."""
    return {name: f"Scratch{name}" for name in reference_classes}


_BY_REFERENCE: dict[str, Conversion] = {}
_BY_SCRATCH: dict[str, list[Conversion]] = {}
# The reference model_type → hf_scratch model_type table, e.g. {"bert": "scratch-bert", "gpt2": "scratch-gpt",
# "openai-gpt": "scratch-gpt", …}: one row per registered conversion.
REFERENCE_TO_SCRATCH: dict[str, str] = {}


def register_conversion(conversion: Conversion, scratch_model_type: str) -> None:
    """Make ``conversion`` known, from its reference model type (to ours) and from ``scratch_model_type`` (back)."""
    _BY_REFERENCE[conversion.reference_model_type] = conversion
    _BY_SCRATCH.setdefault(scratch_model_type, []).append(conversion)
    REFERENCE_TO_SCRATCH[conversion.reference_model_type] = scratch_model_type


def needs_conversion(model_type: str) -> bool:
    """Whether a checkpoint whose ``config.json`` names ``model_type`` must be converted
    (``load_reference_checkpoint``) rather than loaded as it is (``from_pretrained``): every model type that is not
    hf_scratch's own. hf_scratch's own are named ``scratch-<family>``; any other type is a reference checkpoint —
    one of ``REFERENCE_TO_SCRATCH``, or one ``load_reference_checkpoint`` refuses with a ValueError naming those."""
    return not model_type.startswith("scratch-")


def _conversion_for_reference(model_type: str) -> Conversion:
    if model_type not in _BY_REFERENCE:
        raise ValueError(f"Cannot convert model_type {model_type!r}: hf_scratch converts {sorted(_BY_REFERENCE)}.")
    return _BY_REFERENCE[model_type]


def _conversion_for_scratch(config: PreTrainedConfig) -> Conversion:
    for conversion in _BY_SCRATCH.get(config.model_type, []):
        if conversion.accepts(config):
            return conversion
    raise ValueError(f"hf_scratch model_type {config.model_type!r} has no transformers counterpart to convert to.")


# --------------------------------------------------------------------------------------------------------------
# Config translation helpers the families share
# --------------------------------------------------------------------------------------------------------------

# Fields every reference config may carry that change the behaviour of a head.
TASK_FIELDS = ("id2label", "label2id", "problem_type", "bos_token_id", "eos_token_id")


def copy_fields(source: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """The fields ``names`` of the config dict ``source`` that are set (present and not None)."""
    return {name: source[name] for name in names if name in source and source[name] is not None}


@dataclass(frozen=True)
class FieldNames:
    """Reference config name → our field name, both ways. Built by ``of`` from the config class's ``attribute_map``
    (the reference names our config already accepts), so a family lists only what that map lacks. Where several
    reference names give one field, the last one listed wins: a field's own name (``same``) over an alias."""

    names: Mapping[str, str]

    @classmethod
    def of(
        cls,
        config_class: type[PreTrainedConfig],
        same: Sequence[str] = (),
        other: Mapping[str, str] | None = None,
        without: Sequence[str] = (),
    ) -> FieldNames:
        """``config_class.attribute_map`` less ``without`` (aliases the reference does not have, or a family
        translates itself), then ``other`` (reference names the map lacks), then ``same`` (fields named alike)."""
        names = {name: ours for name, ours in config_class.attribute_map.items() if name not in without}
        names.update(other or {})
        names.update({name: name for name in same})
        return cls(names)

    def to_ours(self, reference: Mapping[str, Any]) -> dict[str, Any]:
        """The fields set (not None) in the reference config dict ``reference``, under our names."""
        return {ours: reference[name] for name, ours in self.names.items() if reference.get(name) is not None}

    def to_reference(self, ours: Mapping[str, Any]) -> dict[str, Any]:
        """Our config dict's fields that are set (not None), under the reference's names (one name per field)."""
        reference_name = {field_name: name for name, field_name in self.names.items()}
        return {name: ours[field] for field, name in reference_name.items() if ours.get(field) is not None}


# --------------------------------------------------------------------------------------------------------------
# Models, both ways
# --------------------------------------------------------------------------------------------------------------


def _scratch_class(name: str) -> type[PreTrainedModel]:
    import hf_scratch

    return getattr(hf_scratch, name)


def _is_base_model(model: PreTrainedModel) -> bool:
    return not hasattr(model, model.base_model_prefix)


def _with_prefix(state: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k if k.startswith(prefix + ".") else f"{prefix}.{k}": v for k, v in state.items()}


def _without_prefix(state: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k[len(prefix) + 1 :] if k.startswith(prefix + ".") else k: v for k, v in state.items()}


def _tied_targets(model: PreTrainedModel) -> dict[str, str]:
    """{target: source} of the state-dict keys tied to (the same tensor as) another key in this model: targets are
    never converted separately. These are the ties the instance's config switches on (what ``model.tie_weights()``
    applies; transformers' ``all_tied_weights_keys`` once built), not the class's ``_tied_weights_keys``, which
    lists ties that e.g. ``tie_word_embeddings=False`` turns off: an untied decoder is a weight of its own."""
    return dict(model.get_expanded_tied_weights_keys(all_submodels=True))


def _untied_state(model: PreTrainedModel) -> dict[str, torch.Tensor]:
    """The state dict without tied targets; each target must hold its source's values (else the config, changed
    after the model was built, no longer describes the weights, and dropping the target would lose them)."""
    state = model.state_dict()
    tied = _tied_targets(model)
    for target, source in tied.items():
        if target in state and source in state and not torch.equal(state[target], state[source]):
            raise ValueError(
                f"{type(model).__name__} ties {target} to {source} (its config: tie_word_embeddings="
                f"{getattr(model.config, 'tie_word_embeddings', None)}), but the two hold different values. Call "
                "model.tie_weights() to tie them, or set the config to match the weights (e.g. "
                "tie_word_embeddings=False) before converting."
            )
    return {k: v for k, v in state.items() if k not in tied}


def _load_exactly(model: PreTrainedModel, state: dict[str, torch.Tensor]) -> None:
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


def _build_ours(
    conversion: Conversion,
    reference_config: dict[str, Any],
    reference_class: str,
    reference_state: dict[str, torch.Tensor],
) -> PreTrainedModel:
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
    # (transformers declares PreTrainedModel.to with functools.wraps(nn.Module.to), which mypy reads as unbound)
    return model.to(dtype)  # type: ignore[arg-type]


def from_transformers(model: PreTrainedModel) -> PreTrainedModel:
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
    # (PreTrainedModel.to: see _build_ours)
    return ours.to(device=parameter.device, dtype=parameter.dtype).train(model.training)  # type: ignore[call-arg]


def to_transformers(model: PreTrainedModel) -> PreTrainedModel:
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
    if (
        getattr(model, "generation_config", None) is not None
        and getattr(reference, "generation_config", None) is not None
    ):
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


def load_reference_checkpoint(path: str | Path) -> PreTrainedModel:
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


# a sentence-transformers checkpoint: the transformer sits at the root of the folder, the modules after it (pooling,
# normalisation, dense layers) in the sub-folders modules.json names, each with its own config
SENTENCE_TRANSFORMERS_FILES = (
    "modules.json",
    "config_sentence_transformers.json",
    "sentence_bert_config.json",
    "data_config.json",
)
MODEL_CARD = "README.md"
CONVERSION_NOTE = """

## Converted with hf_scratch
The weights of this folder were converted with `python -m hf_scratch.convert` into hf_scratch's `{model_class}`, a
from-scratch implementation of the same architecture that gives the same outputs. The folder carries its modeling code:
load it with `trust_remote_code=True` (no hf_scratch install needed), or with hf_scratch imported.
"""


def convert_directory(source: str | Path, output: str | Path) -> Path:
    """Convert a reference checkpoint directory into an hf_scratch one, with everything else that makes it the same
    model for its users: the tokenizer files, the model card (``README.md``, with a note on the conversion added at
    its end) and — for a sentence-transformers checkpoint — ``modules.json``, its configuration files and the module
    folders it names (pooling, normalisation, dense layers), so that ``SentenceTransformer(output,
    trust_remote_code=True)`` computes the original's embeddings."""
    source, output = Path(source), Path(output)
    model = load_reference_checkpoint(source)
    model.save_pretrained(output)
    for name in (*TOKENIZER_FILES, *SENTENCE_TRANSFORMERS_FILES):
        if (source / name).exists():
            shutil.copyfile(source / name, output / name)
    for folder in _sentence_transformers_module_folders(source):
        shutil.copytree(source / folder, output / folder, dirs_exist_ok=True)
    if (source / MODEL_CARD).exists():
        card = (source / MODEL_CARD).read_text(encoding="utf-8")
        (output / MODEL_CARD).write_text(
            card.rstrip("\n") + "\n" + CONVERSION_NOTE.format(model_class=type(model).__name__), encoding="utf-8"
        )
    return output


def _sentence_transformers_module_folders(source: Path) -> list[str]:
    """The sub-folders of the modules that ``modules.json`` lists (``1_Pooling``, ``2_Normalize``, …); the module at
    the root (``path`` "") is the transformer itself, converted above."""
    modules_file = source / "modules.json"
    if not modules_file.exists():
        return []
    try:
        modules = json.loads(modules_file.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{modules_file} is not valid JSON ({error}): cannot tell which sentence-transformers modules to keep."
        ) from error
    folders = [str(module.get("path", "")) for module in modules if isinstance(module, dict)]
    for folder in folders:
        if folder and (Path(folder).is_absolute() or ".." in Path(folder).parts):
            raise ValueError(f"{modules_file} names the module folder {folder!r} outside the checkpoint.")
    return [folder for folder in folders if folder and (source / folder).is_dir()]


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m hf_scratch.convert SRC_DIR OUT_DIR``: ``convert_directory`` on the command line."""
    parser = argparse.ArgumentParser(
        prog="python -m hf_scratch.convert",
        description="Convert a reference checkpoint directory (bert, gpt2, openai-gpt, marian, longformer, "
        "transfo-xl) into an hf_scratch checkpoint directory, with its tokenizer files, its model card and, for a "
        "sentence-transformers checkpoint, its modules (pooling, normalisation, …).",
    )
    parser.add_argument("source", help="reference checkpoint directory (config.json + weights)")
    parser.add_argument("output", help="directory to write the hf_scratch checkpoint to")
    args = parser.parse_args(argv)
    try:
        out = convert_directory(args.source, args.output)
    except ValueError as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    print(f"wrote {out}")

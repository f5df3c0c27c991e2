"""What the hf_scratch configurations share.

- ``ScratchConfig``, the base of every family: the full ``auto_map`` written into each saved config (so every head
  of a family loads with ``trust_remote_code=True`` where hf_scratch is not installed), other names of a field
  (``attribute_map``) applied before the defaults that depend on them, and self-validation with ValueErrors that
  name the field and the fix.
- ``BertShapedConfig``: the fields of a BERT-shaped encoder under transformers' ``BertConfig`` names (BERT, Longformer).
- ``Seq2SeqConfig``: the special tokens and checks of the encoder-decoders (the Transformer, the RNN baselines).

The names every family shares, the pre-LN switch ``pre_norm`` and the other names each family accepts are listed in
CONTRIBUTING.md ("Names across families")."""

from __future__ import annotations

import os
from collections.abc import Collection
from typing import Any, ClassVar, Self

from transformers import PreTrainedConfig

from .remote_code import copy_code, forget_registered_pipelines, served_pipelines

# The sizes of ``--model_size`` (the training scripts), in the names every family shares; "base" keeps the family's
# own defaults (the paper's base size). ``ScratchConfig.size_preset`` gives them in a family's own names, with what
# the family adds (its ``size_presets``).
SIZE_PRESETS: dict[str, dict[str, int]] = {
    "tiny": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128},
    "small": {"hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 1024},
    "base": {},
}


class ScratchConfig(PreTrainedConfig):
    """Base of the family configs. Subclasses set ``model_type``, ``default_auto_map``, fill the defaults that depend
    on other fields in ``derive_defaults()`` and implement ``check()``.

    A name of ``attribute_map`` (a reference implementation's name such as ``n_embd``, or a field's former name such
    as Transformer-XL's ``pre_lnorm``) reads and writes its field. Given to ``__init__`` (or found in a config.json),
    it sets the field before ``derive_defaults()`` runs, so ``ScratchGPTConfig(n_embd=64)`` gets the FFN size of a
    64-wide model; ``to_dict``/``save_pretrained`` write the field's own name only."""

    default_auto_map: ClassVar[dict[str, str]] = {}
    # What generic code (tokenizers, pipelines, the training scripts) knows about a family, read from its class:
    # the tokenizer kind it trains when none is given (tokenization.TOKENIZER_KINDS), what it needs on top of the
    # shared size presets (SIZE_PRESETS, in its own field names), and its learning rate per size when training from
    # scratch: tiny and small models learn in a few hundred steps at 1e-3 / 5e-4, base uses the paper's value
    # (BERT 1e-4, Devlin et al. 2019 §A.2).
    default_tokenizer: ClassVar[str] = "wordpiece"
    size_presets: ClassVar[dict[str, dict]] = {}
    learning_rates: ClassVar[dict[str, float]] = {"tiny": 1e-3, "small": 5e-4, "base": 1e-4}

    def __post_init__(self, **kwargs: Any) -> None:
        for other_name in [name for name in kwargs if name in self.attribute_map]:
            setattr(self, other_name, kwargs.pop(other_name))  # PreTrainedConfig.__setattr__ writes the field
        self.derive_defaults()
        super().__post_init__(**kwargs)
        # the one place auto_map is set: every head of the family, and what a loaded or given map adds or changes
        self.auto_map = {**self.default_auto_map, **(getattr(self, "auto_map", None) or {})}
        forget_registered_pipelines(self)
        self.check()

    @classmethod
    def family_name(cls) -> str:
        """The suffix of the family's own files: ``bert`` for ``configuration_bert.py`` / ``modeling_bert.py``."""
        return cls.__module__.rsplit(".configuration_", 1)[1]

    @property
    def max_input_tokens(self) -> int | None:
        """The longest input the model reads: the size of its position table, or None where positions set no limit
        (relative encodings, no positions at all). Families whose positions start later override it."""
        return getattr(self, "max_position_embeddings", None)

    def size_preset(self, size: str) -> dict[str, Any]:
        """The fields of the ``size`` preset (a key of ``SIZE_PRESETS``) for this family: each shared name under the
        family's own (``attribute_map``; an encoder-decoder sizes its ``encoder_*`` and ``decoder_*`` sides alike),
        those it lacks left out, then what the family adds (``size_presets``)."""
        preset: dict[str, Any] = {}
        for shared_name, value in SIZE_PRESETS[size].items():
            name = self.attribute_map.get(shared_name, shared_name)
            sides = [name, "decoder_" + name.removeprefix("encoder_")] if name.startswith("encoder_") else [name]
            preset.update({side: value for side in sides if hasattr(self, side)})
        return {**preset, **self.size_presets.get(size, {})}

    def derive_defaults(self) -> None:
        """Fill the fields left None whose default depends on other fields. Families extend this."""

    def check(self) -> None:
        """Raise ValueError for impossible values. Families extend this."""

    # loading: a config of another model type is refused ----------------------------------------------------
    @classmethod
    def from_dict(cls, config_dict: dict[str, Any], **kwargs: Any) -> Self:
        """Refuse another model type's config instead of building a model of this type with random weights
        (transformers only warns). Whether the weights beside the config are whole is the model's business:
        safetensors checks them when they are loaded (``ScratchPreTrainedModel.from_pretrained``)."""
        found = config_dict.get("model_type")
        if cls.model_type and found and found != cls.model_type:
            raise ValueError(
                f"This checkpoint is a {found!r} model (config.json model_type) but {cls.__name__} loads "
                f"{cls.model_type!r} models: load it with the matching class, or with AutoModel/AutoConfig, which "
                "pick the class from the checkpoint."
            )
        return super().from_dict(config_dict, **kwargs)

    # saving: the checkpoint carries the code of every head and pipeline it names -----------------------------
    def save_pretrained(self, save_directory: str | os.PathLike[str], push_to_hub: bool = False, **kwargs: Any) -> None:
        """As transformers', plus what a checkpoint needs where hf_scratch is not installed (``remote_code``):
        ``custom_pipelines`` for the pipelines that serve the saved head, and the code of every head and pipeline
        that ``auto_map`` and ``custom_pipelines`` name."""
        served = served_pipelines(self)
        if served:
            self.custom_pipelines = served
        elif "custom_pipelines" in self.__dict__:
            del self.custom_pipelines
        copy_code(self, served, save_directory)
        return super().save_pretrained(save_directory, push_to_hub=push_to_hub, **kwargs)

    # helpers for check() -----------------------------------------------------------------------------------
    def require_positive(self, *names: str) -> None:
        for name in names:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{type(self).__name__}.{name} must be a positive integer, got {value!r}.")

    def require_probability(self, *names: str) -> None:
        for name in names:
            value = getattr(self, name)
            if value is not None and not 0.0 <= float(value) <= 1.0:
                raise ValueError(
                    f"{type(self).__name__}.{name} is a dropout probability: use a value in [0, 1], got {value!r}."
                )

    def require_divisible(self, hidden_name: str, heads_name: str) -> None:
        hidden, heads = getattr(self, hidden_name), getattr(self, heads_name)
        if hidden % heads != 0:
            raise ValueError(
                f"{type(self).__name__}: {hidden_name}={hidden} is not divisible by {heads_name}={heads}; each head "
                f"gets {hidden_name}/{heads_name} dimensions, so choose a {heads_name} that divides {hidden_name} "
                f"(e.g. {next(h for h in range(min(heads, hidden), 0, -1) if hidden % h == 0)})."
            )

    def require_choice(self, name: str, choices: Collection[object]) -> None:
        value = getattr(self, name)
        if value not in choices:
            raise ValueError(
                f"{type(self).__name__}.{name}={value!r} is not supported: choose one of {tuple(choices)}."
            )


class BertShapedConfig(ScratchConfig):
    """An encoder shaped like BERT (Devlin et al. 2019, §3 "Model Architecture"), under transformers' ``BertConfig``
    names and with BERT-base's defaults: 12 layers, hidden 768, 12 heads, FFN 3072, GELU, 512 learned positions, two
    segments, dropout 0.1. BERT and Longformer (RoBERTa's shape with sparse attention) declare only what differs."""

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    tie_word_embeddings: bool = True
    bos_token_id: int | None = None  # BertConfig's: the token ids a family does not set are declared, None
    eos_token_id: int | None = None

    def check(self) -> None:
        self.require_positive(
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "type_vocab_size",
        )
        self.require_divisible("hidden_size", "num_attention_heads")
        self.require_probability("hidden_dropout_prob", "attention_probs_dropout_prob")


class Seq2SeqConfig(ScratchConfig):
    """What the encoder-decoders share: the special tokens of the seq2seq tokenizer (``tools/tokenization.py``:
    ``<pad>`` 0, ``<s>`` 1, ``</s>`` 2), a decoder whose first input is ``decoder_start_token_id`` (the target
    shifted right by one position, Vaswani et al. 2017 §3.1; y_0 of the RNN decoders), an output projection tied to
    the target embeddings, and a cache for generation."""

    tie_word_embeddings: bool = True
    is_encoder_decoder: bool = True
    use_cache: bool = True
    pad_token_id: int | None = 0
    bos_token_id: int | None = 1
    eos_token_id: int | None = 2
    decoder_start_token_id: int | None = 1

    def require_target_token_ids(self, target_vocab_name: str) -> None:
        """The decoder has a start token, and it and the pad token are ids of the target vocabulary."""
        if self.decoder_start_token_id is None:
            raise ValueError(
                f"{type(self).__name__}.decoder_start_token_id is None: the decoder needs a start token (its first "
                "input, before the first target token); set it, e.g. to bos_token_id or pad_token_id (Marian uses "
                "the pad id)."
            )
        size = getattr(self, target_vocab_name)
        for name in ("pad_token_id", "decoder_start_token_id"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < size:
                raise ValueError(
                    f"{type(self).__name__}.{name}={value} is outside the target vocabulary of {size} tokens "
                    f"({target_vocab_name}): use an id of the tokenizer's vocabulary."
                )

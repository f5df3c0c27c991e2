"""What every hf_scratch configuration shares: the full ``auto_map`` written into each saved config (so every
head of a family loads with ``trust_remote_code=True`` where hf_scratch is not installed) and self-validation
with ValueErrors that name the field and the fix."""

from __future__ import annotations

import json
import math
import os
from typing import ClassVar

from transformers import PreTrainedConfig


class ScratchConfig(PreTrainedConfig):
    """Base of the family configs. Subclasses set ``model_type``, ``default_auto_map`` and implement ``check()``."""

    default_auto_map: ClassVar[dict[str, str]] = {}

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        if getattr(self, "auto_map", None) is None:
            self.auto_map = dict(self.default_auto_map)
        self.check()

    def check(self) -> None:
        """Raise ValueError for impossible values. Families extend this."""

    # loading: the config is the first thing every from_pretrained reads ------------------------------------
    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, **kwargs):
        """As transformers', but a local checkpoint directory must hold whole safetensors files
        (``check_checkpoint_files``) and a config of this model type."""
        if os.path.isdir(str(pretrained_model_name_or_path)):
            check_checkpoint_files(pretrained_model_name_or_path)
        return super().from_pretrained(pretrained_model_name_or_path, **kwargs)

    @classmethod
    def from_dict(cls, config_dict, **kwargs):
        """Refuse another model type's config instead of building a model of this type with random weights
        (transformers only warns); the Auto classes pass the checkpoint directory as ``name_or_path``."""
        found = config_dict.get("model_type")
        if cls.model_type and found and found != cls.model_type:
            raise ValueError(
                f"This checkpoint is a {found!r} model (config.json model_type) but {cls.__name__} loads "
                f"{cls.model_type!r} models: load it with the matching class, or with AutoModel/AutoConfig, which "
                "pick the class from the checkpoint."
            )
        source = kwargs.get("name_or_path")
        if source is not None and os.path.isdir(str(source)):
            check_checkpoint_files(source)
        return super().from_dict(config_dict, **kwargs)

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
                raise ValueError(f"{type(self).__name__}.{name} is a dropout probability: use a value in [0, 1], got {value!r}.")

    def require_divisible(self, hidden_name: str, heads_name: str) -> None:
        hidden, heads = getattr(self, hidden_name), getattr(self, heads_name)
        if hidden % heads != 0:
            raise ValueError(
                f"{type(self).__name__}: {hidden_name}={hidden} is not divisible by {heads_name}={heads}; each head "
                f"gets {hidden_name}/{heads_name} dimensions, so choose a {heads_name} that divides {hidden_name} "
                f"(e.g. {next(h for h in range(min(heads, hidden), 0, -1) if hidden % h == 0)})."
            )

    def require_choice(self, name: str, choices) -> None:
        value = getattr(self, name)
        if value not in choices:
            raise ValueError(f"{type(self).__name__}.{name}={value!r} is not supported: choose one of {tuple(choices)}.")


# --------------------------------------------------------------------------------------------------------------
# Checkpoint integrity: a truncated or corrupted safetensors file is a ValueError, never a half-loaded model
# --------------------------------------------------------------------------------------------------------------

_SAFETENSORS_ITEM_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
                           "U16": 2, "U32": 4, "U64": 8, "F8_E4M3": 1, "F8_E5M2": 1}


def check_safetensors_file(path) -> None:
    """Read a safetensors file's header and check that it is whole: the header parses, every tensor's byte range
    matches its dtype and shape, and the ranges cover the file exactly. Raises ValueError otherwise."""

    def corrupted(reason: str) -> ValueError:
        return ValueError(
            f"{path} is not a complete safetensors file ({reason}): the checkpoint was truncated or corrupted, e.g. "
            "by an interrupted save or download. Save the model again (save_pretrained) or download it again."
        )

    size = os.path.getsize(path)
    with open(path, "rb") as f:
        prefix = f.read(8)
        if len(prefix) < 8:
            raise corrupted(f"{size} bytes, shorter than the 8-byte header length")
        header_length = int.from_bytes(prefix, "little")
        if header_length <= 0 or 8 + header_length > size:
            raise corrupted(f"header of {header_length} bytes does not fit in {size} bytes")
        try:
            header = json.loads(f.read(header_length))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise corrupted(f"unreadable header: {error}") from None
    if not isinstance(header, dict):
        raise corrupted("header is not a JSON object")
    data_end = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            start, end = entry["data_offsets"]
            expected = math.prod(entry["shape"]) * _SAFETENSORS_ITEM_BYTES.get(entry["dtype"], 0)
        except (KeyError, TypeError, ValueError):
            raise corrupted(f"malformed entry for tensor {name!r}") from None
        if end - start != expected and entry["dtype"] in _SAFETENSORS_ITEM_BYTES:
            raise corrupted(f"tensor {name!r} spans {end - start} bytes but its shape and dtype need {expected}")
        data_end = max(data_end, end)
    if 8 + header_length + data_end != size:
        raise corrupted(f"the header describes {8 + header_length + data_end} bytes, the file has {size}")


def check_checkpoint_files(directory) -> None:
    """Every safetensors file of a checkpoint directory is whole, and a sharded checkpoint's index names only shards
    that exist. Raises ValueError naming the file and the fix."""
    names = sorted(name for name in os.listdir(directory) if name.endswith(".safetensors"))
    index_path = os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(index_path):
        try:
            shards = set(json.loads(open(index_path).read())["weight_map"].values())
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            raise ValueError(f"{index_path} is not a valid shard index ({error}): save or download the checkpoint again.") from None
        missing = sorted(shards - set(names))
        if missing:
            raise ValueError(f"{index_path} names shards that are not there: {missing}. Save or download the checkpoint again.")
    for name in names:
        check_safetensors_file(os.path.join(directory, name))

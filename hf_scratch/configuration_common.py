"""What every hf_scratch configuration shares: the full ``auto_map`` written into each saved config (so every
head of a family loads with ``trust_remote_code=True`` where hf_scratch is not installed) and self-validation
with ValueErrors that name the field and the fix."""

from __future__ import annotations

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

"""What every hf_scratch configuration shares: the full ``auto_map`` written into each saved config (so every
head of a family loads with ``trust_remote_code=True`` where hf_scratch is not installed) and self-validation
with ValueErrors that name the field and the fix."""

from __future__ import annotations

import copy
import os
import shutil
import sys
from typing import ClassVar

from transformers import PreTrainedConfig
from transformers.dynamic_module_utils import get_relative_import_files


class ScratchConfig(PreTrainedConfig):
    """Base of the family configs. Subclasses set ``model_type``, ``default_auto_map`` and implement ``check()``."""

    default_auto_map: ClassVar[dict[str, str]] = {}

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        if getattr(self, "auto_map", None) is None:
            self.auto_map = dict(self.default_auto_map)
        self._drop_registered_pipelines()
        self.check()

    def _drop_registered_pipelines(self) -> None:
        """Forget the ``custom_pipelines`` of a loaded config that this process has registered already
        (``import hf_scratch`` does): transformers' ``pipeline()`` would otherwise insist on ``trust_remote_code=True``
        for them. Where hf_scratch is not installed nothing is registered and the entries stay (see save_pretrained)."""
        custom = getattr(self, "custom_pipelines", None)
        registry = getattr(sys.modules.get("transformers.pipelines"), "PIPELINE_REGISTRY", None)
        if not custom or registry is None:
            return
        remaining = {task: info for task, info in custom.items() if task not in registry.supported_tasks}
        if remaining:
            self.custom_pipelines = remaining
        else:
            del self.custom_pipelines

    def check(self) -> None:
        """Raise ValueError for impossible values. Families extend this."""

    # loading: a config of another model type is refused ----------------------------------------------------
    @classmethod
    def from_dict(cls, config_dict, **kwargs):
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
    def save_pretrained(self, save_directory, push_to_hub: bool = False, **kwargs):
        """As transformers', with two additions for users who load the checkpoint with ``trust_remote_code=True``
        where hf_scratch is not installed:

        - ``custom_pipelines``: the pipelines of ``pipelines.SCRATCH_PIPELINES`` that serve the saved head — the
          class in ``architectures`` (``model.save_pretrained`` sets it) is the one ``auto_map`` gives for the
          pipeline's Auto class — so ``pipeline(task, model=..., trust_remote_code=True)`` knows the task;
        - every module that ``auto_map`` and ``custom_pipelines`` name is copied beside config.json with its
          relative imports (transformers copies only the saved head's own module).
        """
        from .pipelines import SCRATCH_PIPELINES  # a relative import: remote loading fetches pipelines.py with this file

        heads = set(getattr(self, "architectures", None) or ())
        served = {
            task: copy.deepcopy(info) for task, info in SCRATCH_PIPELINES.items()
            if any(str(self.auto_map.get(auto_class, "")).split(".")[-1] in heads for auto_class in info["pt"])
        }
        if served:
            self.custom_pipelines = served
        elif "custom_pipelines" in self.__dict__:
            del self.custom_pipelines
        os.makedirs(save_directory, exist_ok=True)
        references = [*self.auto_map.values(), *(info["impl"] for info in served.values())]
        modules = {ref.split(".")[0] for ref in references if isinstance(ref, str) and "--" not in ref}
        here = os.path.dirname(os.path.abspath(__file__))
        for module in sorted(modules):
            source = os.path.join(here, f"{module}.py")
            if os.path.exists(source):  # a config loaded as remote code has only the modules fetched so far
                for path in [source, *get_relative_import_files(source)]:
                    target = os.path.join(save_directory, os.path.basename(path))
                    if not os.path.exists(target) or not os.path.samefile(path, target):
                        shutil.copyfile(path, target)
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

"""What travels with a checkpoint, in one place: everything that lets a saved folder load with
``trust_remote_code=True`` where hf_scratch is not installed, and what ``import hf_scratch`` registers instead.

- the code: every module a config's ``auto_map`` (the whole family, every head) and its ``custom_pipelines`` name,
  with the flat siblings it imports (transformers copies only the saved head's own module);
- the pipelines transformers v5 no longer ships (``pipelines.SCRATCH_PIPELINES``): written into config.json as
  ``custom_pipelines`` for the heads they serve, and registered with transformers' ``PIPELINE_REGISTRY`` when
  hf_scratch is imported (then a loaded config forgets them, or ``pipeline()`` would insist on trust_remote_code);
- the Auto classes: each family's config and the heads of its ``default_auto_map``, registered on import and marked
  for ``register_for_auto_class`` so that ``save_pretrained`` writes the full ``auto_map``.

This file travels too (configuration_common.py imports it), so it imports only torch, transformers and flat siblings.
"""

from __future__ import annotations

import copy
import importlib
import os
import shutil
import sys
from typing import TYPE_CHECKING, Any

import transformers
from transformers import PreTrainedConfig
from transformers.dynamic_module_utils import get_relative_import_files

if TYPE_CHECKING:
    from transformers import Pipeline

    from .configuration_common import ScratchConfig


def register_auto_classes(config_class: type[ScratchConfig], package: str) -> None:
    """Register ``config_class`` and every head of its ``default_auto_map`` (modules of ``package``) with the Auto
    classes, and mark each for ``register_for_auto_class`` (what makes ``save_pretrained`` copy its code)."""
    transformers.AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
    config_class.register_for_auto_class()
    for auto_class_name, reference in config_class.default_auto_map.items():
        if auto_class_name == "AutoConfig":
            continue
        module_name, class_name = reference.split(".")
        model_class = getattr(importlib.import_module(f".{module_name}", package), class_name)
        getattr(transformers, auto_class_name).register(config_class, model_class, exist_ok=True)
        if model_class._auto_class is None:
            model_class.register_for_auto_class(auto_class_name)


def register_pipelines(pipeline_classes: dict[str, type[Pipeline]]) -> None:
    """Register every pipeline of ``SCRATCH_PIPELINES`` (``pipeline_classes``: class name → class) for models built
    in memory; saved checkpoints carry them instead (``served_pipelines``)."""
    from transformers.pipelines import PIPELINE_REGISTRY

    from .pipelines import SCRATCH_PIPELINES

    for task, info in SCRATCH_PIPELINES.items():
        PIPELINE_REGISTRY.register_pipeline(
            task,
            pipeline_class=pipeline_classes[info["impl"].split(".")[1]],
            pt_model=tuple(getattr(transformers, name) for name in info["pt"]),
            type=info["type"],
        )


def served_pipelines(config: PreTrainedConfig) -> dict[str, dict[str, Any]]:
    """The pipelines of ``SCRATCH_PIPELINES`` that serve the saved head: the class in ``architectures``
    (``model.save_pretrained`` sets it) is the one ``auto_map`` gives for the pipeline's Auto class."""
    from .pipelines import SCRATCH_PIPELINES  # a relative import: remote loading fetches pipelines.py with this file

    heads = set(getattr(config, "architectures", None) or ())
    return {
        task: copy.deepcopy(info)
        for task, info in SCRATCH_PIPELINES.items()
        if any(str(config.auto_map.get(auto_class, "")).split(".")[-1] in heads for auto_class in info["pt"])
    }


def forget_registered_pipelines(config: PreTrainedConfig) -> None:
    """Drop the ``custom_pipelines`` of a loaded config that this process has registered already (``import
    hf_scratch`` does): transformers' ``pipeline()`` would otherwise insist on ``trust_remote_code=True`` for them.
    Where hf_scratch is not installed nothing is registered and the entries stay."""
    custom = getattr(config, "custom_pipelines", None)
    registry = getattr(sys.modules.get("transformers.pipelines"), "PIPELINE_REGISTRY", None)
    if not custom or registry is None:
        return
    remaining = {task: info for task, info in custom.items() if task not in registry.supported_tasks}
    if remaining:
        config.custom_pipelines = remaining
    else:
        del config.custom_pipelines


def copy_code(
    config: PreTrainedConfig, served: dict[str, dict[str, Any]], save_directory: str | os.PathLike[str]
) -> None:
    """Copy every module that ``config.auto_map`` and the ``served`` pipelines name, with the flat siblings each
    imports, beside config.json (a config loaded as remote code has only the modules fetched so far)."""
    os.makedirs(save_directory, exist_ok=True)
    references = [*config.auto_map.values(), *(info["impl"] for info in served.values())]
    modules = {ref.split(".")[0] for ref in references if isinstance(ref, str) and "--" not in ref}
    here = os.path.dirname(os.path.abspath(__file__))
    for module in sorted(modules):
        source = os.path.join(here, f"{module}.py")
        if os.path.exists(source):
            for path in [source, *get_relative_import_files(source)]:
                target = os.path.join(save_directory, os.path.basename(path))
                if not os.path.exists(target) or not os.path.samefile(path, target):
                    shutil.copyfile(path, target)

"""The reader's path (issue 49), traced in one call of each family's main head.

The modules a reader crosses: the package modules whose code runs in the call, in the order the call first enters
them, are the ones docs/contributing.md lists for the family ("The reader's path"), so that the page and the code
cannot drift apart.

A public forward validates its inputs at the edge, then builds its masks once, then attends: followed from the head's
public forward, each mask the user passes enters the validation module (``checks.py``) and the mask module
(``masks.py``) at most once — no back and forth between checking and building, and no layer rebuilding the mask.

The trace is ``sys.setprofile``: every Python frame whose code is written in a file of the package is attributed to
that module. A mask is followed by data flow: a frame is on its path when one of its arguments is the user's tensor
or a mask derived from it (a bool tensor or an ``AttentionMask`` that a frame on the path returned); the path is the
sequence of modules those frames run in and return to, and a module's visits are its runs in that sequence.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch
from families import FAMILIES, NAMES
from test_conformance import build, inputs_for, labels_for

import hf_scratch
from hf_scratch.masks import AttentionMask

PACKAGE = Path(hf_scratch.__file__).resolve().parent
CONTRIBUTING = PACKAGE.parent / "docs" / "contributing.md"


def module_of(frame) -> str | None:
    """The package module whose code the frame runs (``checks``, ``tools/viz``…), None outside the package (and for
    code generated at run time, such as a dataclass's ``__init__``)."""
    path = Path(frame.f_code.co_filename)
    if not path.is_absolute() or PACKAGE not in path.resolve().parents:
        return None
    return path.resolve().relative_to(PACKAGE).with_suffix("").as_posix()


def arguments(frame) -> list:
    """The values a frame was called with (those of ``*args`` and ``**kwargs`` too)."""
    code = frame.f_code
    count = code.co_argcount + code.co_kwonlyargcount
    names = list(code.co_varnames[:count])
    if code.co_flags & 0x04:  # *args
        names.append(code.co_varnames[count])
        count += 1
    if code.co_flags & 0x08:  # **kwargs
        names.append(code.co_varnames[count])
    values = []
    for name in names:
        value = frame.f_locals.get(name)
        if isinstance(value, (tuple, list)):
            values.extend(value)
        elif isinstance(value, dict):
            values.extend(value.values())
        else:
            values.append(value)
    return values


def derived_masks(value) -> list:
    """What a frame on the mask's path returns that carries the mask on: bool tensors and ``AttentionMask``s."""
    values = value if isinstance(value, (tuple, list)) else [value]
    return [
        v for v in values if isinstance(v, AttentionMask) or (isinstance(v, torch.Tensor) and v.dtype == torch.bool)
    ]


def mask_path(model, kwargs: dict, name: str) -> list[str]:
    """The modules the mask ``kwargs[name]`` runs through in one call of ``model``, consecutive repeats merged."""
    followed = [kwargs[name]]  # (kept alive: identities are compared)
    on_path: set = set()
    path: list[str] = []

    def is_followed(value) -> bool:
        return any(value is mask for mask in followed)

    def profile(frame, event, returned):
        if event not in ("call", "return"):
            return
        module = module_of(frame)
        if module is None:
            return
        if event == "call" and any(is_followed(value) for value in arguments(frame)):
            on_path.add(frame)
            path.append(module)
        elif event == "return" and frame in on_path:
            on_path.discard(frame)
            followed.extend(derived_masks(returned))
            caller = frame.f_back
            while caller is not None and module_of(caller) is None:
                caller = caller.f_back
            if caller is not None:
                path.append(module_of(caller))

    sys.setprofile(profile)
    try:
        model(**kwargs)
    finally:
        sys.setprofile(None)
    return [module for i, module in enumerate(path) if i == 0 or path[i - 1] != module]


def main_head_call(name: str, attn_implementation: str = "sdpa"):
    """The family's main head on its tiny configuration (eval), and a padded batch with labels: a training call."""
    cls = getattr(hf_scratch, FAMILIES[name].head)
    model = build(name, cls, attn_implementation=attn_implementation).eval()
    kwargs = inputs_for(name, cls)
    kwargs.update(labels_for(name, cls, kwargs))
    if FAMILIES[name].seq2seq:  # the target's padding mask too
        decoder_mask = torch.ones_like(kwargs["decoder_input_ids"])
        decoder_mask[0, -1] = 0
        kwargs["decoder_attention_mask"] = decoder_mask
    return model, kwargs


@pytest.mark.parametrize("attn_implementation", ["sdpa", "eager"])
@pytest.mark.parametrize("name", NAMES)
def test_each_mask_is_checked_once_then_built_once(name, attn_implementation):
    model, kwargs = main_head_call(name, attn_implementation)
    masks = [key for key in kwargs if key.endswith("attention_mask")]
    assert "attention_mask" in masks
    for mask in masks:
        with torch.no_grad():
            path = mask_path(model, kwargs, mask)
        visits = Counter(path)
        assert visits["checks"] <= 1 and visits["masks"] <= 1, (mask, " → ".join(path))
        if "checks" in visits and "masks" in visits:  # validated at the edge, then built
            assert path.index("checks") < path.index("masks"), (mask, " → ".join(path))


def modules_run(model, kwargs: dict) -> list[str]:
    """The package modules whose code runs in one call of ``model``, in the order the call first enters them."""
    seen: dict[str, None] = {}

    def profile(frame, event, _):
        if event == "call" and (module := module_of(frame)) is not None:
            seen.setdefault(module)

    sys.setprofile(profile)
    try:
        model(**kwargs)
    finally:
        sys.setprofile(None)
    return list(seen)


def documented_paths() -> dict[str, list[str]]:
    """The table of docs/contributing.md's "The reader's path": main head → its modules (and their stated count)."""
    section = CONTRIBUTING.read_text().split("## The reader's path\n", 1)[1].split("\n## ", 1)[0]
    paths = {}
    for row in re.findall(r"^\|(.+)\|$", section, re.M)[2:]:  # after the header and its rule
        family, head, count, modules = (cell.strip() for cell in row.split("|"))
        paths[head.strip("`")] = re.findall(r"`(\w+)`", modules)
        assert int(count) == len(paths[head.strip("`")]), (family, count, modules)
    return paths


@pytest.mark.parametrize("name", NAMES)
def test_the_modules_a_main_head_runs_are_the_documented_ones(name):
    model, kwargs = main_head_call(name)
    with torch.no_grad():
        modules = modules_run(model, kwargs)
    assert modules == documented_paths().get(FAMILIES[name].head), (
        f"{FAMILIES[name].head} runs {len(modules)} modules: {', '.join(modules)}; update the table of "
        "docs/contributing.md's \"The reader's path\" (or shorten the path)"
    )


def test_gpt_is_read_in_at_most_six_modules():
    """Issue 49's goal: nanoGPT is read in one file; GPT's LM head here crossed nine modules, now at most six."""
    assert len(documented_paths()[FAMILIES["gpt"].head]) <= 6


@pytest.mark.parametrize("name", NAMES)
def test_each_read_the_forward_page_names_the_documented_modules(name):
    """docs/read/<family>.md opens with the modules its call crosses: the table's list, in its order."""
    page = CONTRIBUTING.parent / "read" / f"{name.replace('_', '-')}.md"
    opening = " ".join(page.read_text().split("\n\n", 2)[1].split())
    crossed = re.search(r"crosses the modules (.+?) \(", opening)
    assert crossed, f"{page.name} does not say which modules the call crosses"
    assert re.findall(r"`(\w+)`", crossed.group(1)) == documented_paths()[FAMILIES[name].head]

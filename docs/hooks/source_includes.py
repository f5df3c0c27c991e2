"""MkDocs hook (mkdocs.yml, ``hooks``): a page shows live code by naming it. A line of its own

    [[source: hf_scratch.modeling_gpt.ScratchGPTModel.forward]]

becomes a Python code block holding that object's source as the package has it now (``inspect.getsource``; a
decorated forward shows the function it wraps), under a line naming its file and lines. The "Read the forward"
pages (docs/read/) are written this way, so their code cannot drift from the package: a name that no longer
resolves fails the build (``mkdocs build --strict``) and ``tests/test_docs_api.py``."""

from __future__ import annotations

import importlib
import inspect
import re
import textwrap
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

REPO = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^\[\[source: ([\w.]+)\]\]$", re.M)


def resolve(dotted: str) -> object:
    """The object a dotted name points at: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[split:]:
            if not hasattr(target, attribute):
                raise PluginError(f"[[source: {dotted}]]: {target!r} has no attribute {attribute!r}")
            target = getattr(target, attribute)
        return target
    raise PluginError(f"[[source: {dotted}]]: no module of that name can be imported")


def source_block(dotted: str) -> str:
    """The Markdown that replaces one marker: where the code lives, then the code."""
    target = inspect.unwrap(resolve(dotted))  # type: ignore[arg-type]
    lines, first = inspect.getsourcelines(target)  # type: ignore[arg-type]
    path = Path(inspect.getsourcefile(target) or "").resolve().relative_to(REPO)  # type: ignore[arg-type]
    code = textwrap.dedent("".join(lines)).rstrip()
    where = f"`{path.as_posix()}`, lines {first}–{first + len(lines) - 1}"
    return f"*{where}:*\n\n```python\n{code}\n```"


def markers(markdown: str) -> list[str]:
    return MARKER.findall(markdown)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    return MARKER.sub(lambda match: source_block(match.group(1)), markdown)

"""The API reference of the documentation site covers the package: every public name of ``hf_scratch`` (each class
and function ``import hf_scratch`` exports) has a ``::: identifier`` entry in docs/, directly or through the module
that defines it, every entry names something that exists, and every family has its page with its classes. (``mkdocs
build --strict`` fails on an entry that names nothing; this test also catches a public name with no entry.)"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
from pathlib import Path

import pytest

import hf_scratch

REPO = Path(__file__).resolve().parents[1]
ENTRY = re.compile(r"^:::\s+([\w.]+)\s*$", re.M)


def entries() -> dict[str, str]:
    """``::: identifier`` → the page that holds it, over every Markdown page of docs/."""
    found = {}
    for page in sorted((REPO / "docs").rglob("*.md")):
        for identifier in ENTRY.findall(page.read_text(encoding="utf-8")):
            found[identifier] = page.relative_to(REPO / "docs").as_posix()
    return found


def resolve(identifier: str):
    """The object an entry names: a module, or an attribute reached from the longest importable module prefix."""
    parts = identifier.split(".")
    for split in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for name in parts[split:]:
            target = getattr(target, name)
        return target
    raise ImportError(identifier)


def public_names() -> dict[str, object]:
    """What ``import hf_scratch`` exports: ``__all__`` when the package declares it, else every public class and
    function defined in hf_scratch."""
    names = getattr(hf_scratch, "__all__", None) or [
        name
        for name, value in vars(hf_scratch).items()
        if not name.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and value.__module__.startswith("hf_scratch")
    ]
    return {name: getattr(hf_scratch, name) for name in names}


def documented() -> set[int]:
    """The ids of the objects the entries render: each entry's object, and a module entry's own public members."""
    objects = set()
    for identifier in entries():
        target = resolve(identifier)
        objects.add(id(target))
        if inspect.ismodule(target):
            objects.update(
                id(value)
                for name, value in vars(target).items()
                if not name.startswith("_") and getattr(value, "__module__", None) == target.__name__
            )
    return objects


def test_every_entry_names_something():
    for identifier, page in entries().items():
        assert identifier.startswith("hf_scratch"), (page, identifier)
        resolve(identifier)  # raises for a name that does not exist


def test_every_public_name_has_an_api_entry():
    names = public_names()
    assert len(names) > 40 and "ScratchBertModel" in names
    covered = documented()
    missing = sorted(name for name, value in names.items() if id(value) not in covered)
    assert not missing, f"no '::: hf_scratch.…' entry in docs/ documents {missing}"


def test_every_public_class_of_a_family_is_on_its_family_page():
    """The classes of a family (its config, models and heads: those named after it) are documented on its page."""
    pages = {identifier.rsplit(".", 1)[-1]: page for identifier, page in entries().items()}
    for config in hf_scratch.FAMILY_CONFIGS:
        prefix = config.__name__.removesuffix("Config")
        page = pages.get(config.__name__)
        assert page is not None and page.startswith("families/"), (config.__name__, page)
        for name in public_names():
            if name.startswith(prefix):
                assert pages.get(name) == page, (name, pages.get(name), page)


READ_THE_FORWARD = ["gpt", "bert", "transformer", "transfo-xl", "longformer", "rnn"]


def source_includes():
    """docs/hooks/source_includes.py, the hook that turns a ``[[source: name]]`` line into that object's live code."""
    spec = importlib.util.spec_from_file_location("source_includes", REPO / "docs" / "hooks" / "source_includes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_source_marker_names_code_of_the_package():
    """A renamed or moved function fails here, not only in the strict build: every ``[[source: …]]`` line of docs/
    resolves to a function, method or class of ``hf_scratch`` whose source the hook can show."""
    hook = source_includes()
    found = {}
    for page in sorted((REPO / "docs").rglob("*.md")):
        for name in hook.markers(page.read_text(encoding="utf-8")):
            found[name] = page.relative_to(REPO / "docs").as_posix()
    assert found, "no [[source: …]] marker in docs/"
    for name, page in found.items():
        assert name.startswith("hf_scratch."), (page, name)
        target = inspect.unwrap(hook.resolve(name))
        assert inspect.isfunction(target) or inspect.ismethod(target) or inspect.isclass(target), (page, name, target)
        assert inspect.getsourcelines(target)[0], (page, name)


@pytest.mark.parametrize("family", READ_THE_FORWARD)
def test_each_family_has_its_read_the_forward_page(family):
    """docs/read/<family>.md exists, shows live code (at least one marker), is in the site's nav, and the family's
    page links to it."""
    page = REPO / "docs" / "read" / f"{family}.md"
    assert page.exists(), page
    assert source_includes().markers(page.read_text(encoding="utf-8")), f"{page.name} shows no [[source: …]] code"
    nav = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(rf"^ +- [^:\n]+: read/{family}\.md$", nav, re.M), f"read/{family}.md is not in mkdocs.yml's nav"
    family_page = (REPO / "docs" / "families" / f"{family}.md").read_text(encoding="utf-8")
    assert f"../read/{family}.md" in family_page, f"families/{family}.md does not link to read/{family}.md"


def test_readme_and_contributing_links_resolve():
    """The README and CONTRIBUTING.md link into docs/ as files (GitHub shows them; ``mkdocs build --strict`` checks the
    site's own links, not these): every relative link names a file that exists, and every #anchor a heading there."""
    for document in ("README.md", "CONTRIBUTING.md"):
        text = (REPO / document).read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            linked = REPO / (path or document)
            assert linked.exists(), (document, target)
            if anchor:
                headings = re.findall(r"^#+ (.+)$", linked.read_text(encoding="utf-8"), re.M)
                slugs = {re.sub(r"[^\w\- ]", "", heading).strip().lower().replace(" ", "-") for heading in headings}
                assert anchor in slugs, (document, target, sorted(slugs))

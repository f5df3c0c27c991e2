"""The documents that say where things live agree with the code: the contributing page of the documentation site
(docs/contributing.md; CONTRIBUTING.md points there) writes the layout once and its "A family, step by step" names
every place a new family must touch, found from the code rather than from a list kept here."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import hf_scratch

REPO = Path(__file__).resolve().parents[1]
CONTRIBUTING = "docs/contributing.md"  # the one place the layout and the steps are written
SEARCHED_FOR_TABLES = ("hf_scratch", "training", "tests", "benchmarks", "replications")


def section(document: str, title: str) -> str:
    """The text of the ``## title`` section of a Markdown file of the repository."""
    text = (REPO / document).read_text()
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def names_of_family(config_class) -> set[str]:
    """The three names code uses for a family: its config class, its model_type and its file suffix."""
    return {config_class.__name__, config_class.model_type, config_class.family_name()}


def string_keys(node: ast.AST) -> set[str]:
    """The string keys of a dict literal, or the strings of a tuple / list / set literal."""
    if isinstance(node, ast.Dict):
        items = node.keys
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = node.elts
    else:
        return set()
    return {item.value for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str)}


def family_tables() -> set[str]:
    """The files holding a literal keyed by every registered family: each needs a row for a new one."""
    families = [names_of_family(config) for config in hf_scratch.FAMILY_CONFIGS]
    found = set()
    for folder in SEARCHED_FOR_TABLES:
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                keys = string_keys(node)
                if keys and all(names & keys for names in families):
                    found.add(path.relative_to(REPO).as_posix())
    return found


def places_a_family_touches() -> set[str]:
    """Its own files (written with ``<family>``), the registry, its conversion, the committed checkpoints, and every
    file with a table of all families."""
    registry = Path(inspect.getsourcefile(hf_scratch)).relative_to(REPO / "hf_scratch").as_posix()
    return {
        "configuration_<family>.py",
        "modeling_<family>.py",
        registry,
        "convert/<family>.py",
        "model_cards/<family>.md",
        "tests/test_<family>.py",
        "tests/fixtures/checkpoints/make_checkpoints.py",
        *family_tables(),
    }


def test_family_tables_are_found():
    assert "tests/families.py" in family_tables()
    assert not any(path.startswith(("training/", "hf_scratch/")) for path in family_tables()), (
        "generic code keeps no table of families: put the fact on the config class (see ScratchConfig)"
    )


def test_contributing_steps_name_every_place_a_new_family_touches():
    steps = section(CONTRIBUTING, "A family, step by step")
    missing = sorted(place for place in places_a_family_touches() if f"`{place}`" not in steps)
    assert not missing, f"CONTRIBUTING's 'A family, step by step' does not name {missing}"


def test_family_files_exist_for_every_registered_family():
    for config in hf_scratch.FAMILY_CONFIGS:
        family = config.family_name()
        for place in (
            "hf_scratch/configuration_<family>.py",
            "hf_scratch/modeling_<family>.py",
            "model_cards/<family>.md",
        ):
            assert (REPO / place.replace("<family>", family)).is_file(), (config.__name__, place)
        assert re.fullmatch(r"scratch-[a-z-]+", config.model_type), config.model_type


# ---- the layout list of the contributing page --------------------------------------------------------------------
PACKAGE = REPO / "hf_scratch"


def layout_entries(document: str) -> dict[str, str]:
    """The entries under ``hf_scratch/`` in the code block of a document's "Layout" section: name → its text (the
    entry's line and the indented lines that continue it)."""
    block = section(document, "Layout").split("```")[1]
    package = block.split("\nhf_scratch/", 1)[1]
    entries: dict[str, str] = {}
    name = None
    for line in package.splitlines()[1:]:
        if re.match(r"\S", line):  # the next top-level folder
            break
        if re.match(r"  \S", line):
            name = line.split()[0]
            entries[name] = line
        elif name is not None:
            entries[name] += " " + line.strip()
    return entries


def carried_files() -> set[str]:
    """The files a checkpoint carries: every configuration and modeling file, and what they import relatively."""
    from transformers.dynamic_module_utils import get_relative_import_files

    sources = [*PACKAGE.glob("configuration_*.py"), *PACKAGE.glob("modeling_*.py")]
    return {Path(path).name for source in sources for path in [source, *get_relative_import_files(str(source))]}


def test_flat_files_are_exactly_the_carried_ones():
    flat = {path.name for path in PACKAGE.glob("*.py")} - {"__init__.py"}
    assert flat == carried_files(), "a flat file no checkpoint carries belongs in a sub-package (tools/, convert/)"


def test_no_carried_file_imports_a_sub_package():
    sub_packages = [path.parent.name for path in PACKAGE.glob("*/__init__.py")]
    for name in carried_files():
        text = (PACKAGE / name).read_text()
        for sub_package in sub_packages:
            assert not re.search(rf"^\s*from \.+{sub_package}\b", text, re.M), (name, sub_package)


def test_layout_lists_name_exactly_the_files_that_exist():
    flat = {path.name for path in PACKAGE.glob("*.py")}
    sub_packages = {path.parent.name: path.parent for path in PACKAGE.glob("*/__init__.py")}
    for document in (CONTRIBUTING,):
        entries = layout_entries(document)
        patterns = [re.sub(r"\*|<family>", "*", name) for name in entries if not name.endswith("/")]
        for pattern in patterns:
            assert any(Path(name).match(pattern) for name in flat), (document, pattern, "names no file")
        unlisted = sorted(name for name in flat if not any(Path(name).match(pattern) for pattern in patterns))
        assert not unlisted, (document, "does not list", unlisted)
        assert {name.rstrip("/") for name in entries if name.endswith("/")} == set(sub_packages), document
        for name, folder in sub_packages.items():
            named = set(re.findall(r"\b\w+\.py\b", entries[f"{name}/"]))
            assert named == {path.name for path in folder.glob("*.py")} - {"__init__.py"}, (document, name)


def test_the_layout_is_written_once():
    """Only the contributing page lists the layout: the README and CONTRIBUTING.md link to it."""
    assert "\nhf_scratch/" in section(CONTRIBUTING, "Layout")
    for document in ("README.md", "CONTRIBUTING.md"):
        text = (REPO / document).read_text()
        assert "## Layout" not in text and "\nhf_scratch/ " not in text, document
        assert "docs/contributing.md" in text, document

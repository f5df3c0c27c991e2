"""The documents that say where things live agree with the code: CONTRIBUTING's "A family, step by step" names
every place a new family must touch, found from the code rather than from a list kept here."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import hf_scratch

REPO = Path(__file__).resolve().parents[1]
SEARCHED_FOR_TABLES = ("hf_scratch", "training", "tests", "benchmarks", "replications")


def section(document: str, title: str) -> str:
    """The text of the ``## title`` section of a Markdown file of the repository."""
    text = (REPO / document).read_text()
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def family_name(config_class) -> str:
    """``bert`` for ``hf_scratch.configuration_bert``: the suffix of a family's own files."""
    return config_class.__module__.rsplit(".configuration_", 1)[1]


def names_of_family(config_class) -> set[str]:
    """The three names code uses for a family: its config class, its model_type and its file suffix."""
    return {config_class.__name__, config_class.model_type, family_name(config_class)}


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
    steps = section("CONTRIBUTING.md", "A family, step by step")
    missing = sorted(place for place in places_a_family_touches() if f"`{place}`" not in steps)
    assert not missing, f"CONTRIBUTING's 'A family, step by step' does not name {missing}"


def test_family_files_exist_for_every_registered_family():
    for config in hf_scratch.FAMILY_CONFIGS:
        family = family_name(config)
        for place in ("hf_scratch/configuration_<family>.py", "hf_scratch/modeling_<family>.py", "model_cards/<family>.md"):
            assert (REPO / place.replace("<family>", family)).is_file(), (config.__name__, place)
        assert re.fullmatch(r"scratch-[a-z-]+", config.model_type), config.model_type

"""House habits the code keeps, checked over the whole package (``hf_scratch/`` and its sub-packages) and the
training scripts (``training/``, its data and metric scripts too).

- Every function and method is at most ``MAX_FUNCTION_LINES`` lines long, counted over its whole span — from the
  ``def`` line (its decorators not included) to its last line, docstring and comments included — as Python's
  ``ast`` reports it (``lineno`` … ``end_lineno``). Nested functions count on their own and inside their parent.
- No module is registered or found under a name computed at run time (``add_module(self.name, …)``,
  ``getattr(self, self.name)``, ``getattr(self, f"…")``): a reader finds every sub-module as an attribute written out
  where it is built; weights keep their checkpoint names through the checkpoint key mapping
  (``ScratchPreTrainedModel.checkpoint_weight_names``).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "hf_scratch"
TRAINING = PACKAGE.parent / "training"
MAX_FUNCTION_LINES = 50


def long_functions(root: Path = PACKAGE, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int, str, int]]:
    """``(path relative to the repository, line, qualified name, length)`` of every function or method under
    ``root`` longer than ``limit`` lines."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, name in _functions(tree):
            length = node.end_lineno - node.lineno + 1
            if length > limit:
                found.append((str(path.relative_to(root.parent)), node.lineno, name, length))
    return found


def _functions(tree: ast.AST, prefix: str = ""):
    """Every (function node, qualified name) in ``tree``: ``Class.method``, ``outer.<locals>.inner``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node, prefix + node.name
            yield from _functions(node, f"{prefix}{node.name}.<locals>.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def test_every_package_and_training_function_is_at_most_50_lines():
    offenders = [found for root in (PACKAGE, TRAINING) for found in long_functions(root)]
    assert not offenders, (
        f"{len(offenders)} function(s) of hf_scratch/ or training/ are longer than {MAX_FUNCTION_LINES} lines (def to "
        "last line, docstring included); split them into helpers that say what each part does:\n"
        + "\n".join(f"  {path}:{line} {name} ({length} lines)" for path, line, name, length in offenders)
    )


def test_the_count_sees_a_long_function(tmp_path):
    """The check can fail: a 51-line function in a nested sub-package and a 51-line method are found, with their
    qualified names; a 50-line one is not."""
    body = "\n".join(f"    x{i} = {i}" for i in range(49))
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "sub" / "mod.py").write_text(
        f"def fits():\n{body}\n\n\ndef too_long():\n{body}\n    return x0\n\n\n"
        f"class A:\n    def method(self):\n{body.replace('    ', '        ')}\n        return x0\n"
    )
    found = long_functions(tmp_path / "pkg")
    assert [(path, name, length) for path, _, name, length in found] == [
        ("pkg/sub/mod.py", "too_long", 51),
        ("pkg/sub/mod.py", "A.method", 51),
    ]


def computed_attribute_names(root: Path = PACKAGE) -> list[tuple[str, int, str]]:
    """``(path, line, call)`` of every ``add_module`` whose name is not written out, and every ``getattr(self, …)``
    whose name is an attribute or an f-string, under ``root``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            function = node.func
            name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", None)
            computed = (name == "add_module" and not isinstance(node.args[0], ast.Constant)) or (
                name == "getattr"
                and len(node.args) > 1
                and isinstance(node.args[0], ast.Name)
                and node.args[0].id == "self"
                and isinstance(node.args[1], ast.Attribute | ast.JoinedStr)
            )
            if computed:
                found.append((str(path.relative_to(root.parent)), node.lineno, ast.unparse(node)))
    return found


def test_no_module_is_named_at_run_time():
    offenders = computed_attribute_names()
    assert not offenders, "sub-modules under computed names; write the attribute out:\n" + "\n".join(
        f"  {path}:{line} {call}" for path, line, call in offenders
    )


def test_the_computed_names_are_found(tmp_path):
    """The check can fail: both forms a block used to name its attention are found, a config field lookup is not."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(
        "class Block:\n"
        "    def __init__(self, attention):\n"
        "        self.add_module(self.attention_name, attention)\n"
        "    def forward(self, name):\n"
        "        return getattr(self, f'{self.attention_name}_residual'), getattr(self, name)\n"
    )
    found = computed_attribute_names(tmp_path / "pkg")
    assert [line for _, line, _ in found] == [3, 5]

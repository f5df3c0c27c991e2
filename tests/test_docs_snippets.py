"""Every ```python and ```bash snippet of the README and the documentation site (docs/**/*.md) runs here, so the
documents cannot drift from the code. A page's snippets run in order in one fresh folder (a bash snippet's output
folder is there for the next Python snippet), the Python ones in one namespace with ``exec``, the bash ones with
``bash -e -o pipefail`` and the test's Python first on PATH. The settings are the ones written in the snippet (tiny
sizes, a few steps), so a reader sees what runs. A snippet that cannot run here (a GPU, an upload, a fresh install)
is preceded by ``<!-- snippet: skip — why -->`` and must say why; the skipped ones are listed in the test's output.
Offline."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])
LANGUAGES = ("python", "bash")
SKIP = re.compile(r"^\s*<!--\s*snippet:\s*skip\s*(?:[—–:-]+\s*(?P<reason>.*?))?\s*-->\s*$")  # a line of its own
# what a snippet's folder links to: the repository's scripts and data, as when a reader runs it from the root
LINKED = ("training", "benchmarks", "replications", "docs", "model_cards")


@dataclass
class Snippet:
    document: str
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    skip_reason: str | None  # None: it runs

    def __str__(self) -> str:
        return f"{self.document}:{self.line} ({self.language})"


def snippets(path: Path) -> list[Snippet]:
    """The fenced python / bash blocks of a Markdown file, with the skip mark on the line before each (if any)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found, index = [], 0
    while index < len(lines):
        fence = re.match(r"^( *)(`{3,})(\w*)\s*$", lines[index])  # indented: a step of a numbered list
        if not fence:
            index += 1
            continue
        indent, ticks, language = fence.groups()
        end = next(i for i in range(index + 1, len(lines)) if lines[i].strip() == ticks)
        if language in LANGUAGES:
            before = next((line for line in reversed(lines[:index]) if line.strip()), "")
            mark = SKIP.search(before)
            reason = None if mark is None else (mark.group("reason") or "").strip()
            code = textwrap.dedent("\n".join(lines[index + 1 : end])) + "\n"
            found.append(Snippet(path.relative_to(REPO).as_posix(), index + 1, language, code, reason))
        index = end + 1
    return found


ALL = [snippet for path in DOCUMENTS for snippet in snippets(path)]
PAGES = sorted({snippet.document for snippet in ALL if snippet.skip_reason is None})


def test_the_documents_have_snippets_and_every_skip_says_why():
    assert len(ALL) > 20 and "README.md" in {snippet.document for snippet in ALL}
    skipped = [snippet for snippet in ALL if snippet.skip_reason is not None]
    without_reason = [str(snippet) for snippet in skipped if len(snippet.skip_reason) < 10]
    assert not without_reason, f"a skipped snippet must say why: {without_reason}"
    print(f"\n{len(ALL) - len(skipped)} snippets run, {len(skipped)} skipped:")
    for snippet in skipped:
        print(f"  {snippet}: {snippet.skip_reason}")


def test_skip_marks_stand_before_a_snippet():
    """A skip mark that is not right before a python / bash block marks nothing (a typo in the fence, a moved block)."""
    for path in DOCUMENTS:
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            if line.lstrip().startswith("<!-- snippet"):
                assert SKIP.search(line), (path.name, number + 1, "not a skip mark: <!-- snippet: skip — why -->")
                after = next((later for later in lines[number + 1 :] if later.strip()), "")
                assert re.match(r"^ *`{3,}(python|bash)\s*$", after), (path.name, number + 1, after)


def environment(bin_dir: Path) -> dict[str, str]:
    return dict(
        os.environ,
        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        OMP_NUM_THREADS="1",
        PYTHONWARNINGS="ignore",
    )


@pytest.mark.parametrize("document", PAGES)
def test_snippets_run(document, tmp_path, monkeypatch):
    """A page's snippets, in order, in one folder: Python with exec in one namespace, bash as a script."""
    for name in LINKED:
        (tmp_path / name).symlink_to(REPO / name, target_is_directory=True)
    env = environment(Path(sys.executable).parent)  # `python`, `accelerate`: this test's environment's
    monkeypatch.chdir(tmp_path)
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(key, "1")
    namespace: dict = {"__name__": "__snippet__"}
    for snippet in (s for s in ALL if s.document == document and s.skip_reason is None):
        if snippet.language == "python":
            try:
                exec(compile(snippet.code, str(snippet), "exec"), namespace)
            except Exception as error:
                raise AssertionError(f"{snippet} failed: {error!r}\n{snippet.code}") from error
        else:
            run = subprocess.run(
                ["bash", "-e", "-o", "pipefail", "-c", snippet.code],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
            )
            assert run.returncode == 0, f"{snippet} failed ({run.returncode}):\n{snippet.code}\n{run.stderr[-3000:]}"

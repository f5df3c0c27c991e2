"""Smoke test of the paper-claim replications (replications/README.md): every claim's ``--quick`` setting runs
and writes its table (with the verdict rows) and its pictures. The numbers of a quick run mean nothing; the reported
tables come from the full settings."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

REPLICATIONS = Path(__file__).resolve().parent.parent / "replications"
SCRIPTS = sorted(path for path in REPLICATIONS.glob("*.py") if path.stem not in ("common", "collect"))


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"replication_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_there_is_a_replication_per_claim():
    assert len(SCRIPTS) >= 6, [path.name for path in SCRIPTS]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.stem)
def test_quick_setting_writes_its_table_and_pictures(script, tmp_path):
    table = load(script).main(["--quick", "--output_dir", str(tmp_path)])
    text = Path(table).read_text(encoding="utf-8")
    assert text.startswith("# "), text[:200]
    assert "--quick" in text  # the command that produced it is written above the table
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(rows) >= 4, text  # a header, at least one result row, the verdict header and one verdict
    assert re.search(r"\| (yes|\*\*no\*\*) \|", text), text
    pictures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert pictures, text
    for picture in pictures:
        assert (tmp_path / picture).stat().st_size > 1000, picture

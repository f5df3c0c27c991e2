"""Gather the claim pages (``replications/results/*.md``, each written by its script's full setting) into
``replications/README.md``: one section per claim with the command, the verdict table and the pictures.

    python replications/collect.py
"""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
ORDER = [
    "rnn_attention",
    "transformer_ablations",
    "bert_pretraining",
    "gpt_pretraining",
    "transfo_xl_memory",
    "longformer_window",
]

INTRO = """# Paper claims, reproduced at laptop scale

Parity tests show that each family computes what the reference implementation computes; these replications show
whether each paper's headline idea *works* when the model is small enough to train on a 2-core CPU in minutes. One
script per claim, built on the `training/` scripts (no second training loop), each with a `--quick` setting (seconds,
run by `tests/test_replications.py` in CI) and a full setting (3 seeds to start, more while a part is undecided;
mean ± sample std) whose table and pictures are committed in `results/`. A claim that did not reproduce at this scale
is reported as such, with what was tried; every setting changed after seeing results is listed on its page.

Rebuild this page with `python replications/collect.py` after running a script.

Each part of a claim gets a 95 % interval on the effect it is about (Student's t on the per-seed differences: every
arm of a claim runs on the same seeds) and one of three verdicts: *holds* (the interval lies wholly in the claimed
direction), *does not hold* (it lies wholly on the other side, or below the least effect that would count as the
claim) or *undecided* (it straddles the threshold). A page starts with 3 seeds per setting; while a part is undecided,
every setting gets 2 more seeds, up to the page's compute budget (`--max_seeds`, each page states it), so a part near
its threshold is not decided by the luck of three seeds. The rule is in `replications/common.py` (`difference_interval`,
`decide`, `until_decided`) and is tested against `scipy.stats.ttest_rel` / `ttest_ind` in `tests/test_replications.py`.
A page still showing the old rule (mean gap over two standard errors, yes/no, 3 seeds) has not been re-run since the
rule changed; the summary says so.

Rerunning a command gives the same table up to the seeds' spread, not digit for digit: the scripts that train their
own WordPiece vocabulary get a slightly different one in each process, because the `tokenizers` trainer breaks ties
in hash-map order (huggingface/tokenizers#1794, open; `PYTHONHASHSEED` does not fix it). The vocabulary is saved with
every run, so a trained model always reloads with its own.

"""
TABLE_HEADER = """| # | paper | claim | script | holds | does not hold | undecided | seeds per setting |
|---|---|---|---|---|---|---|---|
"""
PARTS_HEADER = """
Every part, with what the paper reported for it:

| # | part | the paper | verdict | effect, 95 % interval |
|---|---|---|---|---|
"""


NEW_TABLE = "| claim | the paper | verdict | effect, 95 % interval | evidence |"
OLD_TABLE = "| claim | held? | evidence |"  # pages from before the three-valued rule


def verdicts(text: str) -> list[dict[str, str]]:
    """The rows of a page's verdict table: {"part", "paper", "verdict", "interval"}; a page written with the old
    yes/no rule gives its part and "held (old rule)" / "not held (old rule)"."""
    if NEW_TABLE in text:
        table = text.split(NEW_TABLE, 1)[1]
        rows = re.findall(r"^\| (.+?) \| (.+?) \| (holds|\*\*does not hold\*\*|\*undecided\*) \| (.+?) \|", table, re.M)
        return [
            {"part": part, "paper": paper, "verdict": verdict.strip("*"), "interval": interval}
            for part, paper, verdict, interval in rows
        ]
    table = text.split(OLD_TABLE, 1)[-1]
    return [
        {
            "part": part,
            "paper": "—",
            "verdict": f"{'held' if held == 'yes' else 'not held'} (old rule)",
            "interval": "—",
        }
        for part, held in re.findall(r"^\| (.+?) \| (yes|\*\*no\*\*) \|", table, re.M)
    ]


def seeds_per_setting(text: str) -> str:
    """The "Seeds: …" line's count ("5 per setting" → "5"), or the old pages' "3 (old rule)"."""
    match = re.search(r"^Seeds: .*?\((\d+) per setting", text, re.M)
    if match is None:
        return "?"
    return match.group(1) if NEW_TABLE in text else f"{match.group(1)} (old rule, not re-run)"


def summary(pages: list[Path]) -> tuple[str, str]:
    """The per-claim counts table and the per-part table (with what the paper reported)."""
    rows, part_rows, totals = [], [], {"holds": 0, "does not hold": 0, "undecided": 0}
    for number, page in enumerate(pages, 1):
        text = page.read_text(encoding="utf-8")
        paper, _, claim = text.splitlines()[0].removeprefix("# ").partition(": ")
        parts = verdicts(text)
        counts = {outcome: sum(part["verdict"] == outcome for part in parts) for outcome in totals}
        for outcome in totals:
            totals[outcome] += counts[outcome]
        cells = [str(counts[o]) for o in totals] if NEW_TABLE in text else ["—", "—", "—"]
        if NEW_TABLE not in text:
            cells[0] = f"{sum(part['verdict'].startswith('held') for part in parts)} of {len(parts)} held (old rule)"
        rows.append(
            f"| {number} | {paper} | {claim} | [`{page.stem}.py`]({page.stem}.py) ([table](results/{page.name})) | "
            + " | ".join(cells)
            + f" | {seeds_per_setting(text)} |"
        )
        part_rows += [
            f"| {number} | {part['part']} | {part['paper']} | {part['verdict']} | {part['interval']} |"
            for part in parts
        ]
    table = "\n".join(rows) + "\n\n"
    table += (
        f"In all, parts of the pages re-run with the three-valued rule: holds {totals['holds']}, does not hold "
        f"{totals['does not hold']}, undecided {totals['undecided']}.\n"
    )
    return table, PARTS_HEADER + "\n".join(part_rows) + "\n"


def main() -> Path:
    pages = [RESULTS / f"{name}.md" for name in ORDER if (RESULTS / f"{name}.md").exists()]
    table, parts = summary(pages)
    sections = []
    for number, page in enumerate(pages, 1):
        text = page.read_text(encoding="utf-8")
        title = text.splitlines()[0].removeprefix("# ")
        body = re.sub(r"!\[([^\]]*)\]\(([^)]+)\)", r"![\1](results/\2)", text.split("\n", 1)[1])
        sections.append(f"## {number}. {title}\n{body}")
    path = HERE / "README.md"
    path.write_text(INTRO + TABLE_HEADER + table + parts + "\n" + "\n".join(sections), encoding="utf-8")
    write_docs_summary(table, parts)
    return path


DOCS = HERE.parent / "docs" / "benchmarks.md"
BEGIN, END = "<!-- claims summary: written by replications/collect.py -->", "<!-- end of the claims summary -->"


def write_docs_summary(table: str, parts: str, docs: Path = DOCS) -> None:
    """The same two tables on the docs' claims page, between its markers: links to the result pages made relative to
    the docs (the site holds them: docs/hooks/result_pages.py), the scripts named in code (it does not hold those)."""
    text = docs.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    body = TABLE_HEADER + table + parts
    body = re.sub(r"\[(`[a-z_]+\.py`)\]\([a-z_]+\.py\)", r"\1", body)  # the site has the result pages, not the scripts
    body = re.sub(r"\]\((results/[a-z_]+\.md)\)", r"](replications/\1)", body)
    docs.write_text(head + BEGIN + "\n" + body + END + tail, encoding="utf-8")


if __name__ == "__main__":
    print(main())

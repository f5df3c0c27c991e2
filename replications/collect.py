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
run by `tests/test_replications.py` in CI) and a full setting (3 seeds, mean ± sample std) whose table and pictures are
committed in `results/`. A claim that did not reproduce at this scale is reported as such, with what was tried; every
setting changed after seeing results is listed on its page.

Rebuild this page with `python replications/collect.py` after running a script.

Rerunning a command gives the same table up to the seeds' spread, not digit for digit: the scripts that train their
own WordPiece vocabulary get a slightly different one in each process, because the `tokenizers` trainer breaks ties
in hash-map order (huggingface/tokenizers#1794, open; `PYTHONHASHSEED` does not fix it). The vocabulary is saved with
every run, so a trained model always reloads with its own.

| # | paper | claim | script | held |
|---|---|---|---|---|
"""


def verdicts(text: str) -> list[tuple[str, str]]:
    """(claim part, held?) rows of a page's verdict table."""
    table = text.split("| claim | held? | evidence |", 1)[-1]
    return re.findall(r"^\| (.+?) \| (yes|\*\*no\*\*) \|", table, re.M)


def main() -> Path:
    pages = [RESULTS / f"{name}.md" for name in ORDER if (RESULTS / f"{name}.md").exists()]
    rows, sections = [], []
    for number, page in enumerate(pages, 1):
        text = page.read_text(encoding="utf-8")
        title = text.splitlines()[0].removeprefix("# ")
        paper, _, claim = title.partition(": ")
        parts = verdicts(text)
        held = f"{sum(h == 'yes' for _, h in parts)} of {len(parts)} parts"
        rows.append(
            f"| {number} | {paper} | {claim} | [`{page.stem}.py`]({page.stem}.py) | "
            f"{held} ([table](results/{page.name})) |"
        )
        body = text.split("\n", 1)[1]
        body = re.sub(r"!\[([^\]]*)\]\(([^)]+)\)", r"![\1](results/\2)", body)
        sections.append(f"## {number}. {title}\n{body}")
    path = HERE / "README.md"
    path.write_text(INTRO + "\n".join(rows) + "\n\n" + "\n".join(sections), encoding="utf-8")
    return path


if __name__ == "__main__":
    print(main())

"""Gather the claim pages (``replications/results/*.md``, each written by its script's full setting) into
``replications/README.md``: one section per claim with the command, the verdict table and the pictures.

    python replications/collect.py
"""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
RERUN = RESULTS / "seeds_3_4_5"  # the same commands with --first_seed 3 --output_dir replications/results/seeds_3_4_5
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

The verdicts must not depend on the seeds chosen: each command is rerun with seeds 3, 4, 5
(`--first_seed 3 --output_dir replications/results/seeds_3_4_5`), and the last column says whether every part got
the same verdict there (the rerun's pages are in [`results/seeds_3_4_5/`](results/seeds_3_4_5)).

Rerunning a command gives the same table up to the seeds' spread, not digit for digit: the scripts that train their
own WordPiece vocabulary get a slightly different one in each process, because the `tokenizers` trainer breaks ties
in hash-map order (huggingface/tokenizers#1794, open; `PYTHONHASHSEED` does not fix it). The vocabulary is saved with
every run, so a trained model always reloads with its own.

| # | paper | claim | script | held (seeds 0, 1, 2) | same verdicts with seeds 3, 4, 5 |
|---|---|---|---|---|---|
"""


def verdicts(text: str) -> list[tuple[str, str]]:
    """(claim part, held?) rows of a page's verdict table."""
    table = text.split("| claim | held? | evidence |", 1)[-1]
    return re.findall(r"^\| (.+?) \| (yes|\*\*no\*\*) \|", table, re.M)


def rerun_agreement(name: str, parts: list[tuple[str, str]], rerun_folder: Path = RERUN) -> str:
    """Whether the rerun with seeds 3, 4, 5 (``rerun_folder/<name>.md``) gave every part the same verdict as
    ``parts``: "yes", "no: …" naming the parts that differ, or "not rerun"."""
    page = rerun_folder / f"{name}.md"
    if not page.exists():
        return "not rerun"
    again = dict(verdicts(page.read_text(encoding="utf-8")))
    differ = [part for part, held in parts if again.get(part) != held]
    if not differ and len(again) == len(parts):
        return f"yes ([page](results/{rerun_folder.name}/{name}.md))"
    return f"**no**: {'; '.join(differ) or 'different parts'} ([page](results/{rerun_folder.name}/{name}.md))"


def main() -> Path:
    pages = [RESULTS / f"{name}.md" for name in ORDER if (RESULTS / f"{name}.md").exists()]
    rows, sections, counts = [], [], []
    for number, page in enumerate(pages, 1):
        text = page.read_text(encoding="utf-8")
        title = text.splitlines()[0].removeprefix("# ")
        paper, _, claim = title.partition(": ")
        parts = verdicts(text)
        counts.append((sum(h == "yes" for _, h in parts), len(parts)))
        held = f"{counts[-1][0]} of {counts[-1][1]} parts"
        rows.append(
            f"| {number} | {paper} | {claim} | [`{page.stem}.py`]({page.stem}.py) | "
            f"{held} ([table](results/{page.name})) | {rerun_agreement(page.stem, parts)} |"
        )
        body = text.split("\n", 1)[1]
        body = re.sub(r"!\[([^\]]*)\]\(([^)]+)\)", r"![\1](results/\2)", body)
        sections.append(f"## {number}. {title}\n{body}")
    path = HERE / "README.md"
    total = (
        f"In all, {sum(held for held, _ in counts)} of {sum(parts for _, parts in counts)} parts held; claims holding "
        f"at least half of their parts: {sum(2 * held >= parts for held, parts in counts)} of {len(counts)}.\n"
    )
    path.write_text(INTRO + "\n".join(rows) + "\n\n" + total + "\n" + "\n".join(sections), encoding="utf-8")
    return path


if __name__ == "__main__":
    print(main())

"""MkDocs hook (mkdocs.yml, ``hooks``): the result pages the benchmarks and the replications write into the
repository (``benchmarks/results/``, ``replications/results/``: Markdown tables beside their plots) join the site at
the same paths, so the Benchmarks page links each file and a reader of the site opens it there. They stay out of the
navigation; the site builds them from the repository's files, copying nothing into docs/."""

from __future__ import annotations

from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files, InclusionLevel

REPO = Path(__file__).resolve().parents[2]
FOLDERS = ("benchmarks/results", "replications/results")
KINDS = (".md", ".png")
SMOKE_RUNS = "quick"  # replications/results/quick/: the --quick runs of a clone (gitignored), not results


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*")):
            relative = path.relative_to(REPO)
            if path.suffix in KINDS and path.is_file() and SMOKE_RUNS not in relative.parts:
                files.append(
                    File.generated(
                        config,
                        relative.as_posix(),
                        abs_src_path=str(path),
                        inclusion=InclusionLevel.NOT_IN_NAV,
                    )
                )
    return files

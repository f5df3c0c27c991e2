"""Corpus BLEU with sacreBLEU (Post 2018), a thin `evaluate` module over the `sacrebleu` package kept in the
repository (load it by path: ``evaluate.load("training/metrics/sacrebleu/sacrebleu.py")``)."""

from typing import Any

import datasets
import evaluate

_DESCRIPTION = "sacreBLEU: reproducible corpus-level BLEU with standard tokenisation (13a by default)."
_KWARGS_DESCRIPTION = """
Args:
    predictions (list of str): system outputs.
    references (list of list of str): one or more references per output (the same number for every output).
    tokenize (str): sacreBLEU tokenizer, default "13a". lowercase (bool): default False.
Returns:
    score (float, 0-100), counts, totals, precisions, bp, sys_len, ref_len
Examples:
    >>> metric = evaluate.load("training/metrics/sacrebleu/sacrebleu.py")
    >>> metric.compute(predictions=["i want a beer"], references=[["i want a beer"]])["score"]
    100.00000000000004
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Sacrebleu(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "predictions": datasets.Value("string"),
                    "references": datasets.Sequence(datasets.Value("string")),
                }
            ),
        )

    def _compute(
        self, predictions: list[str], references: list[list[str]], tokenize: str = "13a", lowercase: bool = False
    ) -> dict[str, Any]:
        import sacrebleu

        counts = {len(r) for r in references}
        if len(counts) > 1:
            raise ValueError("sacrebleu needs the same number of references for every prediction.")
        streams = [list(stream) for stream in zip(*references)]
        result = sacrebleu.corpus_bleu(predictions, streams, tokenize=tokenize, lowercase=lowercase)
        return {
            "score": result.score,
            "counts": result.counts,
            "totals": result.totals,
            "precisions": result.precisions,
            "bp": result.bp,
            "sys_len": result.sys_len,
            "ref_len": result.ref_len,
        }

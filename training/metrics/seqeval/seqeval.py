"""Entity-level precision / recall / F1 and token accuracy for token classification (IOB tags), a thin `evaluate`
module over the `seqeval` package, kept in the repository (load it by path:
``evaluate.load("training/metrics/seqeval/seqeval.py")``)."""

from typing import Any

import datasets
import evaluate

_DESCRIPTION = "seqeval: entity-level scores of IOB-tagged sequences (CoNLL-style), plus per-type scores."
_KWARGS_DESCRIPTION = """
Args:
    predictions (list of list of str): predicted tags per sequence.
    references (list of list of str): gold tags per sequence.
Returns:
    overall_precision, overall_recall, overall_f1, overall_accuracy, and {TYPE: {precision, recall, f1, number}}.
Examples:
    >>> metric = evaluate.load("training/metrics/seqeval/seqeval.py")
    >>> metric.compute(predictions=[["B-PER", "O"]], references=[["B-PER", "O"]])["overall_f1"]
    1.0
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Seqeval(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "predictions": datasets.Sequence(datasets.Value("string")),
                    "references": datasets.Sequence(datasets.Value("string")),
                }
            ),
        )

    def _compute(self, predictions: list[list[str]], references: list[list[str]]) -> dict[str, Any]:
        from seqeval.metrics import accuracy_score, classification_report

        report = classification_report(y_true=references, y_pred=predictions, output_dict=True, zero_division=0)
        report.pop("macro avg", None)
        report.pop("weighted avg", None)
        overall = report.pop("micro avg")
        scores: dict[str, Any] = {
            entity: {
                "precision": float(s["precision"]),
                "recall": float(s["recall"]),
                "f1": float(s["f1-score"]),
                "number": int(s["support"]),
            }
            for entity, s in report.items()
        }
        scores.update(
            overall_precision=float(overall["precision"]),
            overall_recall=float(overall["recall"]),
            overall_f1=float(overall["f1-score"]),
            overall_accuracy=float(accuracy_score(y_true=references, y_pred=predictions)),
        )
        return scores

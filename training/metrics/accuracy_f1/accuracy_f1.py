"""Accuracy and F1 for classification, as an `evaluate` module kept in the repository (load it by path:
``evaluate.load("training/metrics/accuracy_f1/accuracy_f1.py")``). F1 is macro-averaged over the classes that
occur in references or predictions; ``average="binary"`` gives the F1 of class ``pos_label``."""

import datasets
import evaluate
import numpy as np

_DESCRIPTION = (
    "Accuracy (fraction of exact matches) and F1 (harmonic mean of precision and recall), computed with numpy."
)
_KWARGS_DESCRIPTION = """
Args:
    predictions (list of int): predicted labels.
    references (list of int): gold labels.
    average (str): "macro" (default) or "binary".
    pos_label (int): the positive class for average="binary" (default 1).
Returns:
    accuracy (float), f1 (float)
Examples:
    >>> metric = evaluate.load("training/metrics/accuracy_f1/accuracy_f1.py")
    >>> metric.compute(predictions=[0, 1, 1], references=[0, 1, 0])
    {'accuracy': 0.6666666666666666, 'f1': 0.6666666666666666}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class AccuracyF1(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("int64"), "references": datasets.Value("int64")}),
        )

    def _compute(
        self, predictions: list[int], references: list[int], average: str = "macro", pos_label: int = 1
    ) -> dict[str, float]:
        guessed, gold = np.asarray(predictions), np.asarray(references)
        if average not in ("macro", "binary"):
            raise ValueError(f"average={average!r} is not supported: use 'macro' or 'binary'.")
        classes = [pos_label] if average == "binary" else np.union1d(guessed, gold)
        scores = []
        for label in classes:
            true_positive = np.sum((guessed == label) & (gold == label))
            predicted, actual = np.sum(guessed == label), np.sum(gold == label)
            precision = true_positive / predicted if predicted else 0.0
            recall = true_positive / actual if actual else 0.0
            scores.append(2 * precision * recall / (precision + recall) if precision + recall else 0.0)
        return {
            "accuracy": float(np.mean(guessed == gold)) if len(gold) else 0.0,
            "f1": float(np.mean(scores)),
        }

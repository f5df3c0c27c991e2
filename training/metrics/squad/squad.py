"""SQuAD-style exact match and token F1 for extractive question answering (the official v1.1 normalisation:
lower case, no punctuation, no articles, single spaces), as an `evaluate` module kept in the repository (load it
by path: ``evaluate.load("training/metrics/squad/squad.py")``). Scores are percentages, as in SQuAD."""

import collections
import re
import string
from typing import Any

import datasets
import evaluate

_DESCRIPTION = "Exact match and F1 over normalised answer tokens, best over the gold answers of each question."
_KWARGS_DESCRIPTION = """
Args:
    predictions (list of {"id": str, "prediction_text": str})
    references (list of {"id": str, "answers": {"text": list of str, "answer_start": list of int}})
Returns:
    exact_match (float, 0-100), f1 (float, 0-100)
Examples:
    >>> metric = evaluate.load("training/metrics/squad/squad.py")
    >>> metric.compute(predictions=[{"id": "1", "prediction_text": "the Ham"}],
    ...                references=[{"id": "1", "answers": {"text": ["Ham"], "answer_start": [0]}}])
    {'exact_match': 100.0, 'f1': 100.0}
"""


def normalize_answer(text: str) -> str:
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def token_f1(prediction: str, truth: str) -> float:
    predicted, gold = normalize_answer(prediction).split(), normalize_answer(truth).split()
    common = sum((collections.Counter(predicted) & collections.Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(gold)
    return 2 * precision * recall / (precision + recall)


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Squad(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "predictions": {"id": datasets.Value("string"), "prediction_text": datasets.Value("string")},
                    "references": {
                        "id": datasets.Value("string"),
                        "answers": datasets.Sequence(
                            {"text": datasets.Value("string"), "answer_start": datasets.Value("int32")}
                        ),
                    },
                }
            ),
        )

    def _compute(self, predictions: list[dict[str, Any]], references: list[dict[str, Any]]) -> dict[str, float]:
        predicted = {p["id"]: p["prediction_text"] for p in predictions}
        exact, f1 = 0.0, 0.0
        for reference in references:
            if reference["id"] not in predicted:
                raise ValueError(f"No prediction for question id {reference['id']!r}.")
            answer = predicted[reference["id"]]
            golds = reference["answers"]["text"] or [""]
            exact += max(float(normalize_answer(answer) == normalize_answer(g)) for g in golds)
            f1 += max(token_f1(answer, g) for g in golds)
        count = max(len(references), 1)
        return {"exact_match": 100.0 * exact / count, "f1": 100.0 * f1 / count}

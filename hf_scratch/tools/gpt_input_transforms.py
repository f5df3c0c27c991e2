"""GPT-1's task-specific input transformations (Radford et al. 2018, "Improving Language Understanding by Generative
Pre-Training", §3.3 and Figure 1).

GPT-1 fine-tunes one pre-trained decoder on structured tasks without changing its architecture: each task's input is
turned into token sequences framed by three new tokens — a start token ⟨s⟩, a delimiter ($) and an extract token
⟨e⟩ whose final hidden state h_l^m the task head reads:

    classification   [⟨s⟩; text; ⟨e⟩]
    entailment       [⟨s⟩; premise; $; hypothesis; ⟨e⟩]
    similarity       [⟨s⟩; a; $; b; ⟨e⟩] and [⟨s⟩; b; $; a; ⟨e⟩] — no inherent order, so both orderings are fed and
                     their final states summed (``ScratchGPTForSequenceClassification`` with 3-D inputs)
    multiple choice  [⟨s⟩; context; question; $; answer_k; ⟨e⟩] for every answer k, each scored, softmax over the
                     choices (``ScratchGPTDoubleHeadsModel`` with ``mc_token_ids`` at the extract tokens)

The three tokens are added to the tokenizer as special tokens; the model needs embedding rows for them:
``model.resize_token_embeddings(len(tokenizer))`` after building ``GPTTaskInputs``. Sequences are right-padded, so
the extract token is each row's last real token. Only a tokenizer is needed (no model, nothing but torch).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

START_TOKEN, DELIMITER_TOKEN, EXTRACT_TOKEN = "<|start|>", "<|delimiter|>", "<|extract|>"


class GPTTaskInputs:
    """Builds GPT-1 fine-tuning inputs from a (transformers) tokenizer; returns dicts of tensors for the models.

    Example:
    ```python
    >>> inputs = GPTTaskInputs(tokenizer)
    >>> model.resize_token_embeddings(len(tokenizer))
    >>> batch = inputs.entailment(["a man sleeps"], ["a person rests"])
    >>> logits = classifier(**batch).logits
    ```
    """

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        start: str = START_TOKEN,
        delimiter: str = DELIMITER_TOKEN,
        extract: str = EXTRACT_TOKEN,
        max_length: int | None = None,
    ) -> None:
        if len({start, delimiter, extract}) != 3:
            raise ValueError("The start, delimiter and extract tokens must be three different strings.")
        self.tokenizer = tokenizer
        tokenizer.add_tokens([start, delimiter, extract], special_tokens=True)
        ids = tokenizer.convert_tokens_to_ids([start, delimiter, extract])
        self.start_id, self.delimiter_id, self.extract_id = ids  # type: ignore[misc]  # a list for a list; typed int | list[int]
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        if max_length is not None and max_length < 4:
            raise ValueError(
                f"max_length={max_length} leaves no room for text next to the start, delimiter and extract tokens."
            )
        self.max_length = max_length

    # ---- one sequence: [⟨s⟩; piece₁; $; piece₂; …; ⟨e⟩] ------------------------------------------------------
    def _tokens(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise ValueError(f"GPT task inputs are strings; got {type(text).__name__}.")
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _sequence(self, *groups: Sequence[str]) -> list[int]:
        """Groups of texts: texts inside a group are concatenated, groups are separated by the delimiter.
        Over ``max_length`` the longest text is shortened from its end until the sequence fits."""
        pieces = [[self._tokens(text) for text in group] for group in groups]
        framing = 2 + len(groups) - 1  # start, extract and the delimiters
        if self.max_length is not None:
            while framing + sum(len(p) for group in pieces for p in group) > self.max_length:
                longest = max((p for group in pieces for p in group), key=len)
                longest.pop()
        ids = [self.start_id]
        for index, group in enumerate(pieces):
            if index:
                ids.append(self.delimiter_id)
            for piece in group:
                ids.extend(piece)
        ids.append(self.extract_id)
        return ids

    def _pad(self, rows: list[list[int]]) -> dict[str, torch.Tensor]:
        length = max(len(row) for row in rows)
        input_ids = torch.full((len(rows), length), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(rows), length), dtype=torch.long)
        for i, row in enumerate(rows):
            input_ids[i, : len(row)] = torch.tensor(row)
            attention_mask[i, : len(row)] = 1
        return {"input_ids": input_ids, "attention_mask": attention_mask}

    @staticmethod
    def _same_length(**columns: Sequence) -> int:
        lengths = {name: len(values) for name, values in columns.items()}
        if len(set(lengths.values())) != 1 or 0 in lengths.values():
            raise ValueError(f"Pass one entry per example in every argument (non-empty), got lengths {lengths}.")
        return next(iter(lengths.values()))

    # ---- the four tasks ------------------------------------------------------------------------------------
    def classification(self, texts: Sequence[str]) -> dict[str, torch.Tensor]:
        """[⟨s⟩; text; ⟨e⟩] → input_ids, attention_mask (batch, length)."""
        self._same_length(texts=texts)
        return self._pad([self._sequence([text]) for text in texts])

    def entailment(self, premises: Sequence[str], hypotheses: Sequence[str]) -> dict[str, torch.Tensor]:
        """[⟨s⟩; premise; $; hypothesis; ⟨e⟩] → input_ids, attention_mask (batch, length)."""
        self._same_length(premises=premises, hypotheses=hypotheses)
        return self._pad([self._sequence([p], [h]) for p, h in zip(premises, hypotheses)])

    def similarity(self, texts_a: Sequence[str], texts_b: Sequence[str]) -> dict[str, torch.Tensor]:
        """Both orderings, [⟨s⟩; a; $; b; ⟨e⟩] and [⟨s⟩; b; $; a; ⟨e⟩] → input_ids, attention_mask
        (batch, 2, length) for ``ScratchGPTForSequenceClassification``, which sums their final states."""
        batch = self._same_length(texts_a=texts_a, texts_b=texts_b)
        rows = [row for a, b in zip(texts_a, texts_b) for row in (self._sequence([a], [b]), self._sequence([b], [a]))]
        return {name: value.view(batch, 2, -1) for name, value in self._pad(rows).items()}

    def multiple_choice(
        self, contexts: Sequence[str], choices: Sequence[Sequence[str]], questions: Sequence[str] | None = None
    ) -> dict[str, torch.Tensor]:
        """[⟨s⟩; context; question; $; answer_k; ⟨e⟩] for every answer → input_ids, attention_mask
        (batch, choices, length) and mc_token_ids (batch, choices), the position of each extract token, for
        ``ScratchGPTDoubleHeadsModel``. Every example needs the same number of choices."""
        batch = self._same_length(
            contexts=contexts, choices=choices, **({"questions": questions} if questions is not None else {})
        )
        num_choices = {len(answers) for answers in choices}
        if len(num_choices) != 1 or 0 in num_choices:
            raise ValueError(f"Every example needs the same, non-zero number of choices; got {sorted(num_choices)}.")
        rows: list[list[int]] = []
        for index, (context, answers) in enumerate(zip(contexts, choices)):
            prefix = [context] if questions is None else [context, questions[index]]
            rows.extend(self._sequence(prefix, [answer]) for answer in answers)
        padded = self._pad(rows)
        mc_token_ids = padded["attention_mask"].sum(-1) - 1  # the extract token closes every (right-padded) row
        shape = (batch, num_choices.pop(), -1)
        return {
            "input_ids": padded["input_ids"].view(shape),
            "attention_mask": padded["attention_mask"].view(shape),
            "mc_token_ids": mc_token_ids.view(shape[:2]),
        }


def language_modeling_labels(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Labels for the auxiliary LM objective λ·L1 on the task's own text: the input ids, padding ignored (-100).
    Pass them as ``labels`` to ``ScratchGPTDoubleHeadsModel`` or ``lm_labels`` to the sequence classifier."""
    return batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)

"""BERT pre-training data (Devlin et al. 2019 §3.1 and Appendix A.1-A.2): next-sentence pairs from document-level text
and masked-LM masking.

1. ``make_nsp_examples`` walks each document's sentences and builds ``[CLS] A [SEP] B [SEP]`` pairs with segment
   ids: half the time B is the text that really follows A (label 0, IsNext), half the time B is whole sentences of
   another document, from a random one on, until the pair is full (label 1, NotNext; the chunk's sentences A left
   unused start the next pair). Either pair, if longer than ``max_length``, is trimmed one token at a time from a
   random end of its longer side. All as in the reference implementation's ``create_pretraining_data.py``
   (github.com/google-research/bert): a NotNext B cut off at the remaining length instead would nearly always end
   mid-sentence after an untrimmed A, a cue a small model learns in place of the next sentence.
2. ``DataCollatorForBertPreTraining`` pads a batch and applies MLM masking with transformers' own
   ``DataCollatorForLanguageModeling``: 15 % of the (non-special) tokens are selected; of those 80 % become
   [MASK], 10 % a random token, 10 % stay unchanged; labels are -100 everywhere else.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DataCollatorForLanguageModeling, PreTrainedTokenizerBase

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def split_documents(text: str, separator: str = "=====") -> list[str]:
    """Documents separated by a line holding only ``separator`` (or, without any, by blank-line runs of 2+)."""
    if re.search(rf"^{re.escape(separator)}\s*$", text, flags=re.M):
        parts = re.split(rf"^{re.escape(separator)}\s*$", text, flags=re.M)
    else:
        parts = re.split(r"\n\s*\n\s*\n", text)
    return [p.strip() for p in parts if p.strip()]


def split_sentences(document: str) -> list[str]:
    """A light sentence splitter: breaks after . ! ? and joins wrapped lines."""
    flat = " ".join(document.split())
    return [s for s in _SENTENCE_END.split(flat) if s]


def _trim_pair(first: list[int], second: list[int], max_tokens: int, rng: random.Random) -> None:
    while len(first) + len(second) > max_tokens:
        longer = first if len(first) > len(second) else second
        longer.pop(0 if rng.random() < 0.5 else -1)


def make_nsp_examples(
    documents: Sequence[str],
    tokenizer: PreTrainedTokenizerBase,
    max_length: int = 128,
    seed: int = 0,
    short_seq_prob: float = 0.1,
) -> list[dict]:
    """Sentence-pair examples with ``input_ids``, ``token_type_ids`` and ``next_sentence_label``: each document's
    sentences gathered into chunks of a target length (``max_length`` - 3, or with probability ``short_seq_prob`` a
    random shorter one), each chunk making one pair (``_sentence_pair``) trimmed to ``max_length``."""
    tokenized = _tokenized_sentences(documents, tokenizer)
    rng = random.Random(seed)
    max_tokens = max_length - 3  # [CLS] A [SEP] B [SEP]
    draw_target = lambda: rng.randint(2, max_tokens) if rng.random() < short_seq_prob else max_tokens  # noqa: E731
    examples = []
    for doc_index, sentences in enumerate(tokenized):
        others = [other for i, other in enumerate(tokenized) if i != doc_index and other]
        target = draw_target()
        chunk: list[list[int]] = []
        index = 0
        while index < len(sentences):
            chunk.append(sentences[index])
            if index < len(sentences) - 1 and sum(map(len, chunk)) < target:
                index += 1
                continue
            first, second, label, unused = _sentence_pair(chunk, others, target, rng)
            _trim_pair(first, second, max_tokens, rng)
            if first and second:
                encoded = [tokenizer.cls_token_id, *first, tokenizer.sep_token_id, *second, tokenizer.sep_token_id]
                token_type_ids = [0] * (len(first) + 2) + [1] * (len(second) + 1)
                examples.append({"input_ids": encoded, "token_type_ids": token_type_ids, "next_sentence_label": label})
            chunk = []
            target = draw_target()
            index += 1 - unused  # the chunk's sentences A left unused start the next chunk
    return examples


def _tokenized_sentences(documents: Sequence[str], tokenizer: PreTrainedTokenizerBase) -> list[list[list[int]]]:
    """Each document's sentences as token ids (no special tokens; empty ones dropped), after checking that there
    are two documents with text and that the tokenizer has [CLS] and [SEP]."""
    sentences_of = [split_sentences(document) for document in documents]
    if sum(map(bool, sentences_of)) < 2:
        raise ValueError(
            "Next-sentence prediction needs at least two documents with text (random B comes from another one); "
            f"got {len(documents)} document(s)."
        )
    if tokenizer.cls_token_id is None or tokenizer.sep_token_id is None:
        raise ValueError("The tokenizer needs [CLS] and [SEP] tokens for BERT pre-training pairs.")
    return [
        [ids for ids in tokenizer(sentences, add_special_tokens=False)["input_ids"] if ids] if sentences else []
        for sentences in sentences_of
    ]


def _sentence_pair(
    chunk: list[list[int]], others: list[list[list[int]]], target: int, rng: random.Random
) -> tuple[list[int], list[int], int, int]:
    """(A, B, label, sentences of the chunk left unused) for one chunk: A is its first sentences (a random split),
    B the rest (label 0, IsNext) or, half the time and always for a one-sentence chunk, whole sentences of another
    document from a random one on, until B reaches the target length (label 1, NotNext; trimmed as an IsNext pair
    is, since a B cut at the length left would nearly always end mid-sentence)."""
    split = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
    first = [t for s in chunk[:split] for t in s]
    if len(chunk) > 1 and rng.random() >= 0.5:
        return first, [t for s in chunk[split:] for t in s], 0, 0
    other, second = rng.choice(others), []
    for sentence in other[rng.randrange(len(other)) :]:
        second += sentence
        if len(second) >= target - len(first):
            break
    return first, second, 1, len(chunk) - split


@dataclass
class DataCollatorForBertPreTraining(DataCollatorForLanguageModeling):
    """Pads, masks for MLM (80 % [MASK] / 10 % random / 10 % unchanged of 15 %), and carries the NSP labels."""

    def torch_call(self, examples: list[Any]) -> dict[str, Any]:
        labels = torch.tensor([example["next_sentence_label"] for example in examples], dtype=torch.long)
        batch = super().torch_call([{k: v for k, v in e.items() if k != "next_sentence_label"} for e in examples])
        batch["next_sentence_label"] = labels
        return batch

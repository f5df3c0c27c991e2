"""Pipelines that transformers v5 no longer ships, registered with ``PIPELINE_REGISTRY`` under task names of ours:

- ``"scratch-question-answering"``: extractive question answering (BERT, Longformer);
- ``"scratch-seq2seq"``: sequence-to-sequence generation, e.g. translation (the encoder-decoder Transformer, RNNs).
"""

from __future__ import annotations

import torch
from transformers import AutoModelForQuestionAnswering, Pipeline
from transformers.pipelines import PIPELINE_REGISTRY

# ---- extractive question answering ---------------------------------------------------------------------------


class ScratchQuestionAnsweringPipeline(Pipeline):
    """``qa(question=..., context=...)`` → ``{"answer", "score", "start", "end"}`` (character offsets in context).

    Long contexts are split into overlapping windows (``max_seq_len``, ``doc_stride``) rather than truncated; the
    best span over all windows wins. Score = p(start) · p(end) with the softmax taken over context tokens.
    """

    def _sanitize_parameters(self, max_seq_len=None, doc_stride=None, max_answer_len=None, **kwargs):
        preprocess, postprocess = {}, {}
        if max_seq_len is not None:
            preprocess["max_seq_len"] = max_seq_len
        if doc_stride is not None:
            preprocess["doc_stride"] = doc_stride
        if max_answer_len is not None:
            postprocess["max_answer_len"] = max_answer_len
        return preprocess, {}, postprocess

    def __call__(self, inputs=None, question=None, context=None, **kwargs):
        if inputs is None:
            if question is None or context is None:
                raise ValueError("Pass question=... and context=... (or a dict / list of dicts with both keys).")
            inputs = {"question": question, "context": context}
        return super().__call__(inputs, **kwargs)

    def preprocess(self, inputs, max_seq_len=None, doc_stride=128):
        if not isinstance(inputs, dict) or not {"question", "context"} <= set(inputs):
            raise ValueError("Each question-answering input must be a dict with 'question' and 'context'.")
        limit = getattr(self.model.config, "max_position_embeddings", 512)
        max_seq_len = min(max_seq_len or 384, limit)
        encoded = self.tokenizer(
            inputs["question"],
            inputs["context"],
            truncation="only_second",
            max_length=max_seq_len,
            stride=min(doc_stride, max_seq_len // 2),
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
            padding=True,
            return_tensors="pt",
        )
        context_token = torch.tensor(
            [[sid == 1 for sid in encoded.sequence_ids(i)] for i in range(len(encoded["input_ids"]))]
        )
        model_inputs = {k: v for k, v in encoded.items() if k in self.tokenizer.model_input_names}
        return {"model_inputs": model_inputs, "offsets": encoded["offset_mapping"], "context_token": context_token,
                "context": inputs["context"]}

    def _forward(self, inputs):
        outputs = self.model(**inputs["model_inputs"])
        return {"start_logits": outputs.start_logits, "end_logits": outputs.end_logits, **inputs}

    def postprocess(self, outputs, max_answer_len=30):
        best = None
        for window in range(outputs["start_logits"].shape[0]):
            allowed = outputs["context_token"][window]
            if not bool(allowed.any()):
                continue
            start = outputs["start_logits"][window].float().masked_fill(~allowed, float("-inf")).softmax(-1)
            end = outputs["end_logits"][window].float().masked_fill(~allowed, float("-inf")).softmax(-1)
            # p(start=i) · p(end=j) for i ≤ j < i + max_answer_len
            scores = torch.triu(torch.tril(start[:, None] * end[None, :], diagonal=max_answer_len - 1))
            index = int(scores.argmax())
            i, j = divmod(index, scores.shape[1])
            score = float(scores[i, j])
            if best is None or score > best[0]:
                offsets = outputs["offsets"][window]
                best = (score, int(offsets[i][0]), int(offsets[j][1]))
        if best is None:
            raise ValueError("The context is empty after tokenization: there is nothing to extract an answer from.")
        score, start_char, end_char = best
        return {"score": score, "start": start_char, "end": end_char, "answer": outputs["context"][start_char:end_char]}


PIPELINE_REGISTRY.register_pipeline(
    "scratch-question-answering",
    pipeline_class=ScratchQuestionAnsweringPipeline,
    pt_model=AutoModelForQuestionAnswering,
)

# ---- sequence-to-sequence generation -------------------------------------------------------------------------

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
            start = outputs["start_logits"][window].float().masked_fill(~allowed, torch.finfo(torch.float32).min).softmax(-1)
            end = outputs["end_logits"][window].float().masked_fill(~allowed, torch.finfo(torch.float32).min).softmax(-1)
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

from transformers import AutoModelForSeq2SeqLM  # noqa: E402


class ScratchSeq2SeqPipeline(Pipeline):
    """``translate("ich mochte ein bier")`` → ``[{"generated_text": "i want a beer"}]`` (a list of such lists for a
    list of inputs; ``num_return_sequences`` > 1 gives several dicts per input).

    Model-agnostic: any model with ``generate`` (the encoder-decoder Transformer, the RNN baselines, …) and a
    tokenizer. The source is tokenized (truncated to ``max_source_length`` if given), ``generate`` runs with the
    model's generation config plus the call's generation parameters (``num_beams``, ``max_new_tokens``, …), and
    the output ids are decoded without special tokens.
    """

    _pipeline_calls_generate = True
    _load_tokenizer = True
    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False

    def _sanitize_parameters(self, max_source_length=None, skip_special_tokens=None, clean_up_tokenization_spaces=None,
                             **generate_kwargs):
        preprocess, postprocess = {}, {}
        if max_source_length is not None:
            preprocess["max_source_length"] = max_source_length
        if skip_special_tokens is not None:
            postprocess["skip_special_tokens"] = skip_special_tokens
        if clean_up_tokenization_spaces is not None:
            postprocess["clean_up_tokenization_spaces"] = clean_up_tokenization_spaces
        return preprocess, generate_kwargs, postprocess

    def preprocess(self, inputs, max_source_length=None):
        if not isinstance(inputs, str):
            raise ValueError(f"scratch-seq2seq takes a string (or a list of strings), got {type(inputs).__name__}.")
        if self.tokenizer is None:
            raise ValueError("scratch-seq2seq needs a tokenizer: pass tokenizer=... to pipeline().")
        limit = max_source_length or getattr(self.model.config, "max_position_embeddings", None)
        return self.tokenizer(inputs, return_tensors="pt", truncation=limit is not None, max_length=limit)

    def _forward(self, model_inputs, **generate_kwargs):
        if not hasattr(self.model, "generate"):
            raise ValueError(f"{type(self.model).__name__} has no generate(): scratch-seq2seq needs a generative model.")
        if getattr(self, "_generate_kwargs", None) is not None:  # set by Pipeline.__init__ for models that can_generate
            generate_kwargs = self._prepare_generate_kwargs(generate_kwargs)
        return {"output_ids": self.model.generate(**model_inputs, **generate_kwargs)}

    def postprocess(self, model_outputs, skip_special_tokens=True, clean_up_tokenization_spaces=True):
        return [
            {"generated_text": self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens,
                                                     clean_up_tokenization_spaces=clean_up_tokenization_spaces)}
            for ids in model_outputs["output_ids"]
        ]


PIPELINE_REGISTRY.register_pipeline(
    "scratch-seq2seq",
    pipeline_class=ScratchSeq2SeqPipeline,
    pt_model=AutoModelForSeq2SeqLM,
    type="text",
)

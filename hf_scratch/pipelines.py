"""Pipelines that transformers v5 no longer ships, as drop-in replacements of the v4 ones (same arguments, same
outputs), under task names of ours:

- ``"scratch-question-answering"``: extractive question answering (v4 ``QuestionAnsweringPipeline``), for the
  ``…ForQuestionAnswering`` heads (BERT, Longformer);
- ``"scratch-seq2seq"``: sequence-to-sequence generation (v4 ``Text2TextGenerationPipeline`` /
  ``TranslationPipeline``), for the ``…ForConditionalGeneration`` heads (encoder-decoder Transformer, RNNs).

Both travel with the checkpoints of the heads they serve: ``save_pretrained`` writes ``custom_pipelines`` into
``config.json`` (``SCRATCH_PIPELINES`` below, picked by ``remote_code.served_pipelines``) and copies this file
beside the modeling files, so ``pipeline(task, model=directory_or_hub_id, trust_remote_code=True)`` works where
hf_scratch is not installed. That is why this file imports only torch and transformers. ``import hf_scratch``
registers both tasks with ``PIPELINE_REGISTRY`` for models built in memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch
from transformers.pipelines.base import ChunkPipeline, Pipeline

if TYPE_CHECKING:  # (no tokenizers import even here: transformers' remote-code check reads every import)
    from transformers.tokenization_utils_base import PreTrainedTokenizerBase

# (transformers types the preprocess / _forward / postprocess hooks as taking only **kwargs, and the _load_* flags as
# None: the "type: ignore"s below are for those)

# task → what transformers' pipeline() reads from config.json's "custom_pipelines": the class ("file.Class",
# resolved in the checkpoint's directory), the Auto class that loads the model ("pt") and the input type.
SCRATCH_PIPELINES: dict[str, dict[str, Any]] = {
    "scratch-question-answering": {
        "impl": "pipelines.ScratchQuestionAnsweringPipeline",
        "pt": ["AutoModelForQuestionAnswering"],
        "type": "text",
    },
    "scratch-seq2seq": {"impl": "pipelines.ScratchSeq2SeqPipeline", "pt": ["AutoModelForSeq2SeqLM"], "type": "text"},
}


def _refuse_unknown(pipeline_name: str, unknown: dict[str, Any], known: str) -> None:
    if unknown:
        raise ValueError(f"{pipeline_name} got unknown arguments {sorted(unknown)}: it takes {known}.")


def _positive_int(name: str, value: object, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer ≥ {minimum}, got {value!r}.")
    return value


# ---- extractive question answering ---------------------------------------------------------------------------


def _question_answering_example(item: Any) -> dict[str, str]:
    """A {"question", "context"} dict from a dict with those keys or a SquadExample-like object
    (``question_text`` / ``context_text``), with both fields non-empty strings."""
    if isinstance(item, dict):
        missing = {"question", "context"} - set(item)
        if missing:
            raise ValueError(
                f"A question-answering input dict needs the keys 'question' and 'context'; {sorted(missing)} missing."
            )
        question, context = item["question"], item["context"]
    elif hasattr(item, "question_text") and hasattr(item, "context_text"):
        question, context = item.question_text, item.context_text
    else:
        raise ValueError(
            f"Cannot read a question and a context from {type(item).__name__}: pass question=... and context=..., a "
            "dict {'question': ..., 'context': ...}, a SquadExample, or a list of those."
        )
    for name, value in (("question", question), ("context", context)):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"The {name} must be a non-empty string, got {value!r}.")
    return {"question": question, "context": context}


class ScratchQuestionAnsweringPipeline(ChunkPipeline):
    """Extractive question answering, with the arguments and outputs of transformers v4's
    ``QuestionAnsweringPipeline``.

    Inputs: ``qa(question=..., context=...)`` (each a string, or lists: one context for several questions, or
    pairs), ``qa({"question": ..., "context": ...})``, a SquadExample-like object (``question_text`` /
    ``context_text``), or a list of those; ``X=`` / ``data=`` as in v4.

    Long contexts are split into windows of ``max_seq_len`` tokens (default min(384, the model's limit)) that
    overlap by ``doc_stride`` tokens (default min(max_seq_len // 2, 128)); the question is cut to
    ``max_question_len`` tokens (default 64). For each window p(start) and p(end) are softmaxes over the context
    tokens and the [CLS] token; a span (i, j) with i ≤ j < i + ``max_answer_len`` (default 15) scores
    p(start=i)·p(end=j). The ``top_k`` best spans over all windows are returned (default 1); with
    ``handle_impossible_answer`` the empty answer, scored p(start=CLS)·p(end=CLS), competes with them.
    ``align_to_words`` (default True) widens spans to whole words.

    Output: ``{"score", "start", "end", "answer"}`` (character offsets into the context) — a list of them when
    ``top_k`` > 1, and one result per input for a list of inputs.
    """

    _load_tokenizer = True  # type: ignore[assignment]
    _load_processor = False  # type: ignore[assignment]
    _load_image_processor = False  # type: ignore[assignment]
    _load_feature_extractor = False  # type: ignore[assignment]

    def _sanitize_parameters(
        self,
        top_k: int | None = None,
        topk: int | None = None,
        doc_stride: int | None = None,
        max_answer_len: int | None = None,
        max_seq_len: int | None = None,
        max_question_len: int | None = None,
        handle_impossible_answer: bool | None = None,
        align_to_words: bool | None = None,
        padding: bool | str | None = None,
        **unknown: Any,
    ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        _refuse_unknown(
            "scratch-question-answering",
            unknown,
            "top_k, doc_stride, max_answer_len, max_seq_len, max_question_len, handle_impossible_answer, "
            "align_to_words, padding (and batch_size, num_workers)",
        )
        if topk is not None and top_k is None:  # v4's deprecated spelling
            top_k = topk
        preprocess: dict[str, Any] = {}
        postprocess: dict[str, Any] = {}
        if max_seq_len is not None:
            preprocess["max_seq_len"] = _positive_int("max_seq_len", max_seq_len, 2)
        if doc_stride is not None:
            preprocess["doc_stride"] = _positive_int("doc_stride", doc_stride, 0)
        if max_question_len is not None:
            preprocess["max_question_len"] = _positive_int("max_question_len", max_question_len)
        if padding is not None:
            preprocess["padding"] = padding
        if top_k is not None:
            postprocess["top_k"] = _positive_int("top_k", top_k)
        if max_answer_len is not None:
            postprocess["max_answer_len"] = _positive_int("max_answer_len", max_answer_len)
        if handle_impossible_answer is not None:
            postprocess["handle_impossible_answer"] = bool(handle_impossible_answer)
        if align_to_words is not None:
            postprocess["align_to_words"] = bool(align_to_words)
        return preprocess, {}, postprocess

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Answer the question(s) from the context(s): see the class docstring for the inputs and arguments."""
        if len(args) == 2 and all(isinstance(a, str) for a in args):
            items = [{"question": args[0], "context": args[1]}]
        elif len(args) == 1:
            items = args[0]
        elif args:
            items = list(args)
        elif "X" in kwargs or "data" in kwargs:
            items = kwargs.pop("X") if "X" in kwargs else kwargs.pop("data")
        elif "question" in kwargs and "context" in kwargs:
            question, context = kwargs.pop("question"), kwargs.pop("context")
            if isinstance(question, list) and isinstance(context, list):
                if len(question) != len(context):
                    raise ValueError(
                        f"Got {len(question)} questions but {len(context)} contexts: "
                        "pass one context per question, or a single context."
                    )
                items = [{"question": q, "context": c} for q, c in zip(question, context)]
            elif isinstance(question, list):
                items = [{"question": q, "context": context} for q in question]
            else:
                items = [{"question": question, "context": context}]
        else:
            raise ValueError("Pass question=... and context=... (or a dict / SquadExample / list of them).")
        items = [items] if isinstance(items, dict) or not isinstance(items, (list, tuple)) else list(items)
        if not items:
            raise ValueError("No question to answer: the list of inputs is empty.")
        examples = [_question_answering_example(item) for item in items]
        return super().__call__(examples[0] if len(examples) == 1 else examples, **kwargs)

    def _fast_tokenizer(self) -> PreTrainedTokenizerBase:
        """The pipeline's tokenizer, which must be a fast one (character offsets)."""
        tokenizer = self.tokenizer
        if tokenizer is None or not tokenizer.is_fast:
            raise ValueError(
                "scratch-question-answering needs a fast tokenizer (character offsets): pass tokenizer=...."
            )
        return tokenizer

    def _window_length(self) -> int:
        """The default window: 384 tokens (transformers' default), or less where the tokenizer or the model reads
        less (ours know their input limit; transformers' configs, their position table)."""
        config = self.model.config
        positions = getattr(config, "max_input_tokens", getattr(config, "max_position_embeddings", None))
        limits = [384, self._fast_tokenizer().model_max_length, positions]
        return min(limit for limit in limits if limit is not None)

    def _cut_question(self, question: str, max_question_len: int) -> tuple[str, int]:
        """The question cut after its ``max_question_len``-th token, and its length in tokens."""
        tokens = self._fast_tokenizer()(question, add_special_tokens=False, return_offsets_mapping=True)
        if len(tokens["input_ids"]) > max_question_len:
            question = question[: tokens["offset_mapping"][max_question_len - 1][1]]
        return question, min(len(tokens["input_ids"]), max_question_len)

    def preprocess(  # type: ignore[override]
        self,
        example: dict[str, str],
        padding: bool | str = "do_not_pad",
        doc_stride: int | None = None,
        max_question_len: int = 64,
        max_seq_len: int | None = None,
    ) -> Iterator[dict[str, Any]]:
        tokenizer = self._fast_tokenizer()
        if max_seq_len is None:
            max_seq_len = self._window_length()
        if doc_stride is None:
            doc_stride = min(max_seq_len // 2, 128)
        question, question_length = self._cut_question(example["question"], max_question_len)
        room = max_seq_len - question_length - tokenizer.num_special_tokens_to_add(pair=True)
        if room < 1:
            raise ValueError(
                f"max_seq_len={max_seq_len} leaves no room for the context after the question and special tokens: "
                "raise max_seq_len or lower max_question_len."
            )
        if doc_stride >= room:
            raise ValueError(
                f"doc_stride={doc_stride} must be smaller than the {room} context tokens that fit in a window "
                f"(max_seq_len={max_seq_len} less the question and special tokens): lower doc_stride."
            )
        encoded = tokenizer(
            question,
            example["context"],
            padding=padding,
            truncation="only_second",
            max_length=max_seq_len,
            stride=doc_stride,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
        )
        windows = len(encoded["input_ids"])
        for window in range(windows):
            model_inputs = {
                name: torch.tensor([encoded[name][window]]) for name in tokenizer.model_input_names if name in encoded
            }
            yield {
                "example": example,
                "encoding": encoded.encodings[window],
                "is_last": window == windows - 1,
                **model_inputs,
            }

    def _forward(self, inputs: dict[str, Any]) -> dict[str, Any]:  # type: ignore[override]
        model_inputs = {name: inputs[name] for name in self._fast_tokenizer().model_input_names if name in inputs}
        outputs = self.model(**model_inputs)
        return {
            "start_logits": outputs.start_logits,
            "end_logits": outputs.end_logits,
            "example": inputs["example"],
            "encoding": inputs["encoding"],
            "is_last": inputs["is_last"],
        }

    def postprocess(  # type: ignore[override]
        self,
        all_outputs: list[dict[str, Any]],
        top_k: int = 1,
        handle_impossible_answer: bool = False,
        max_answer_len: int = 15,
        align_to_words: bool = True,
    ) -> dict[str, Any] | list[dict[str, Any]]:
        tokenizer = self._fast_tokenizer()
        answers: dict[tuple[int, int], dict[str, Any]] = {}
        null_score: float | None = None
        for output in all_outputs:
            encoding, context = output["encoding"], output["example"]["context"]
            length = len(encoding.ids)
            shift = output["start_logits"].shape[-1] - length if tokenizer.padding_side == "left" else 0
            start_logits = output["start_logits"][0, shift : shift + length].float()
            end_logits = output["end_logits"][0, shift : shift + length].float()
            in_context = torch.tensor([sequence == 1 for sequence in encoding.sequence_ids])
            cls_token_id = tokenizer.cls_token_id
            cls = encoding.ids.index(cls_token_id) if cls_token_id in encoding.ids else None
            in_softmax = in_context.clone()
            if cls is not None:  # [CLS] takes part in the normalisation (the "no answer" position), as in v4
                in_softmax[cls] = True
            excluded = torch.finfo(start_logits.dtype).min  # the project's mask constant: no overflow, no NaN
            p_start = start_logits.masked_fill(~in_softmax, excluded).softmax(-1)
            p_end = end_logits.masked_fill(~in_softmax, excluded).softmax(-1)
            if handle_impossible_answer and cls is not None:
                window_null = float(p_start[cls] * p_end[cls])
                null_score = window_null if null_score is None else min(null_score, window_null)
            # spans inside the context, start ≤ end < start + max_answer_len
            scores = p_start[:, None] * p_end[None, :]
            allowed = torch.triu(torch.tril(in_context[:, None] & in_context[None, :], diagonal=max_answer_len - 1))
            candidates = int(allowed.sum())
            if candidates == 0:
                continue
            best = scores.masked_fill(~allowed, -1.0).flatten().topk(min(top_k, candidates))
            for score, index in zip(best.values.tolist(), best.indices.tolist()):
                start_token, end_token = divmod(index, length)
                start, end = self._characters(encoding, start_token, end_token, align_to_words)
                if (start, end) not in answers or answers[(start, end)]["score"] < score:  # windows overlap
                    answers[(start, end)] = {"score": score, "start": start, "end": end, "answer": context[start:end]}
        results = list(answers.values())
        if handle_impossible_answer and null_score is not None:
            results.append({"score": null_score, "start": 0, "end": 0, "answer": ""})
        results.sort(key=lambda answer: answer["score"], reverse=True)  # stable: the empty answer last among equals
        if not results:
            raise ValueError("The context is empty after tokenization: there is nothing to extract an answer from.")
        results = results[:top_k]
        return results[0] if len(results) == 1 else results

    @staticmethod
    def _characters(encoding: Any, start_token: int, end_token: int, align_to_words: bool) -> tuple[int, int]:
        """Character span of tokens start..end in the context (``encoding``: a tokenizers ``Encoding``); with
        ``align_to_words``, widened to whole words."""
        if align_to_words:
            start_word, end_word = encoding.token_to_word(start_token), encoding.token_to_word(end_token)
            if start_word is not None and end_word is not None:
                start_chars, end_chars = encoding.word_to_chars(start_word, 1), encoding.word_to_chars(end_word, 1)
                if start_chars is not None and end_chars is not None:  # (words of the context: never None)
                    return start_chars[0], end_chars[1]
        return encoding.offsets[start_token][0], encoding.offsets[end_token][1]


# ---- sequence-to-sequence generation -------------------------------------------------------------------------


class ScratchSeq2SeqPipeline(Pipeline):
    """Sequence-to-sequence generation (translation, summarisation, …) with the arguments and outputs of
    transformers v4's ``Text2TextGenerationPipeline``.

    ``translate("ich mochte ein bier")`` → ``[{"generated_text": "i want a beer"}]``; a list of inputs gives one
    dict per input (a list of dicts per input when ``num_return_sequences`` > 1); ``batch_size`` runs several
    inputs per ``generate`` call. Arguments: every generation parameter (``num_beams``, ``max_new_tokens``,
    ``do_sample``, ``generation_config``, …) on top of the model's generation config; ``return_tensors=True``
    (``{"generated_token_ids": ...}``) or ``return_text`` (default); ``clean_up_tokenization_spaces`` (default
    False) and ``skip_special_tokens`` (default True) for decoding; ``truncation`` of the source (default: none)
    or ``max_source_length`` (truncate to that many tokens); ``stop_sequence`` (its first token ends generation).
    The model config's ``prefix``, if set, is put before every input, as in v4.
    """

    _pipeline_calls_generate = True
    _load_tokenizer = True  # type: ignore[assignment]
    _load_processor = False  # type: ignore[assignment]
    _load_image_processor = False  # type: ignore[assignment]
    _load_feature_extractor = False  # type: ignore[assignment]
    return_name = "generated"

    def _tokenizer(self) -> PreTrainedTokenizerBase:
        """The pipeline's tokenizer (ValueError without one)."""
        if self.tokenizer is None:
            raise ValueError("scratch-seq2seq needs a tokenizer: pass tokenizer=... to pipeline().")
        return self.tokenizer

    def _sanitize_parameters(
        self,
        return_tensors: bool | None = None,
        return_text: bool | None = None,
        return_type: Any = None,
        clean_up_tokenization_spaces: bool | None = None,
        skip_special_tokens: bool | None = None,
        truncation: bool | str | None = None,
        max_source_length: int | None = None,
        stop_sequence: str | None = None,
        **generate_kwargs: Any,
    ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        preprocess: dict[str, Any] = {}
        postprocess: dict[str, Any] = {}
        if truncation is not None:
            preprocess["truncation"] = truncation
        if max_source_length is not None:
            preprocess["max_source_length"] = _positive_int("max_source_length", max_source_length)
        if return_type is None and return_tensors is not None:
            return_type = "tensors" if return_tensors else "text"
        elif return_type is None and return_text is not None:
            return_type = "text" if return_text else "tensors"
        if return_type is not None:
            return_type = getattr(return_type, "name", return_type).lower()  # v4's ReturnType enum or a string
            if return_type not in ("text", "tensors"):
                raise ValueError(f"return_type must be 'text' or 'tensors', got {return_type!r}.")
            postprocess["return_type"] = return_type
        if clean_up_tokenization_spaces is not None:
            postprocess["clean_up_tokenization_spaces"] = clean_up_tokenization_spaces
        if skip_special_tokens is not None:
            postprocess["skip_special_tokens"] = skip_special_tokens
        if stop_sequence is not None:
            stop_ids = self._tokenizer().encode(stop_sequence, add_special_tokens=False)
            if not stop_ids:
                raise ValueError(f"stop_sequence {stop_sequence!r} encodes to no token.")
            generate_kwargs["eos_token_id"] = stop_ids[0]
        return preprocess, generate_kwargs, postprocess

    def __call__(self, inputs: str | list[str] | tuple[str, ...] | None = None, *args: Any, **kwargs: Any) -> Any:
        """Generate from one string or a list of strings: see the class docstring."""
        if inputs is None:
            inputs = kwargs.pop("text_inputs", None) or kwargs.pop("text", None)
        if isinstance(inputs, tuple):
            inputs = list(inputs)
        if not isinstance(inputs, (str, list)) or (
            isinstance(inputs, list) and not all(isinstance(i, str) for i in inputs)
        ):
            raise ValueError(f"scratch-seq2seq takes a string or a list of strings, got {type(inputs).__name__}.")
        if isinstance(inputs, list) and not inputs:
            raise ValueError("scratch-seq2seq got an empty list of inputs.")
        result = super().__call__(inputs, *args, **kwargs)
        if isinstance(inputs, list) and all(len(one) == 1 for one in result):  # v4: one dict per input
            return [one[0] for one in result]
        return result

    def preprocess(  # type: ignore[override]
        self, inputs: str, truncation: bool | str = False, max_source_length: int | None = None
    ) -> dict[str, Any]:
        tokenizer = self._tokenizer()
        prefix = getattr(self, "prefix", None) or ""
        if max_source_length is not None:
            truncation = True
        encoded = tokenizer(prefix + inputs, return_tensors="pt", truncation=truncation, max_length=max_source_length)
        encoded.pop("token_type_ids", None)  # encoder-decoders take none (as v4)
        return encoded

    def _forward(self, model_inputs: dict[str, Any], **generate_kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        generate = getattr(self.model, "generate", None)
        if generate is None:
            raise ValueError(
                f"{type(self.model).__name__} has no generate(): scratch-seq2seq needs a generative model."
            )
        if getattr(self, "_generate_kwargs", None) is not None:  # set by Pipeline.__init__ for models that can_generate
            generate_kwargs = self._prepare_generate_kwargs(generate_kwargs)
        inputs_batch = model_inputs["input_ids"].shape[0]
        generate_kwargs = self._new_tokens_as_max_length(generate_kwargs)
        output_ids = generate(**model_inputs, **generate_kwargs)
        # (batch · sequences, length) → (batch, sequences, length): the pipeline unbatches along dimension 0
        return {"output_ids": output_ids.reshape(inputs_batch, -1, output_ids.shape[-1])}

    def _new_tokens_as_max_length(self, generate_kwargs: dict[str, Any]) -> dict[str, Any]:
        """``max_new_tokens`` (and no ``max_length``) as the same limit in ``max_length``: the decoder starts from its
        one start token, so N new tokens are a length of N + 1. A checkpoint trained by the scripts saves
        ``max_length`` in its generation config, and generate() warns "Both `max_new_tokens` and `max_length` seem
        to have been set" when a call passes ``max_new_tokens``, although it takes precedence as asked."""
        new_tokens = generate_kwargs.get("max_new_tokens")
        if (
            new_tokens is None
            or generate_kwargs.get("max_length") is not None
            or "generation_config" in generate_kwargs
            or "decoder_input_ids" in generate_kwargs
            or not self.model.config.is_encoder_decoder
        ):
            return generate_kwargs
        generate_kwargs = {key: value for key, value in generate_kwargs.items() if key != "max_new_tokens"}
        generate_kwargs["max_length"] = new_tokens + 1
        return generate_kwargs

    def postprocess(  # type: ignore[override]
        self,
        model_outputs: dict[str, Any],
        return_type: str = "text",
        clean_up_tokenization_spaces: bool = False,
        skip_special_tokens: bool = True,
    ) -> list[dict[str, Any]]:
        records = []
        for ids in model_outputs["output_ids"][0]:
            if return_type == "tensors":
                records.append({f"{self.return_name}_token_ids": ids})
            else:
                text = self._tokenizer().decode(
                    ids,
                    skip_special_tokens=skip_special_tokens,
                    clean_up_tokenization_spaces=clean_up_tokenization_spaces,
                )
                records.append({f"{self.return_name}_text": text})
        return records

"""The two pipelines hf_scratch ships (transformers v5 removed them): they travel with every checkpoint of the heads
they serve and load with only ``trust_remote_code=True`` where hf_scratch is not installed, and they honour the
arguments and outputs of the v4 ``QuestionAnsweringPipeline`` / ``Text2TextGenerationPipeline`` they replace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest
import torch
from transformers import pipeline

import hf_scratch
from hf_scratch.tools.tokenization import train_tokenizer

CONTEXT = "the players shall laugh when the king is welcome and the queen shall weep"
QUESTION = "who laughs?"
LONG_CONTEXT = " ".join(["the king is welcome", "the queen shall weep", "the players shall laugh", "my lord"] * 3)


@pytest.fixture(scope="module")
def wordpiece(fixtures_dir):
    return train_tokenizer((fixtures_dir / "shakespeare.txt").read_text().splitlines(), "wordpiece", vocab_size=300)


@pytest.fixture(scope="module")
def seq2seq_tokenizer(fixtures_dir):
    pairs = [json.loads(line)["translation"] for line in (fixtures_dir / "de_en_toy.jsonl").read_text().splitlines()]
    return train_tokenizer([p["de"] for p in pairs] + [p["en"] for p in pairs], "seq2seq", vocab_size=60)


def randomised(model):
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.5)
    return model.eval()


def bert_qa(tokenizer):
    config = hf_scratch.ScratchBertConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
    )
    return randomised(hf_scratch.ScratchBertForQuestionAnswering(config))


def longformer_qa(tokenizer):
    config = hf_scratch.ScratchLongformerConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=72,
        attention_window=4,
        pad_token_id=tokenizer.pad_token_id,
        sep_token_id=tokenizer.sep_token_id,
    )
    return randomised(hf_scratch.ScratchLongformerForQuestionAnswering(config))


def seq2seq_config(family: str, tokenizer):
    ids = dict(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.bos_token_id,
        hidden_size=16,
    )
    if family == "transformer":
        return hf_scratch.ScratchTransformerConfig(
            **ids,
            encoder_layers=1,
            decoder_layers=1,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=32,
            decoder_ffn_dim=32,
            max_position_embeddings=64,
        )
    return hf_scratch.ScratchRNNConfig(**ids, cell_type="gru", attention_type="bahdanau")


def translator(family: str, tokenizer):
    head = {
        "transformer": hf_scratch.ScratchTransformerForConditionalGeneration,
        "rnn": hf_scratch.ScratchRNNForConditionalGeneration,
    }[family]
    return randomised(head(seq2seq_config(family, tokenizer)))


# ---- the pipelines travel with the checkpoints ---------------------------------------------------------------

SERVED = {  # head: (how to build it from the two tokenizers, the task it serves)
    "bert-qa": (lambda wordpiece, _: bert_qa(wordpiece), "scratch-question-answering"),
    "longformer-qa": (lambda wordpiece, _: longformer_qa(wordpiece), "scratch-question-answering"),
    "transformer": (lambda _, seq2seq: translator("transformer", seq2seq), "scratch-seq2seq"),
    "rnn": (lambda _, seq2seq: translator("rnn", seq2seq), "scratch-seq2seq"),
    "bert-mlm": (lambda wordpiece, _: hf_scratch.ScratchBertForMaskedLM(bert_qa(wordpiece).config), None),
    "gpt-lm": (
        lambda *_: hf_scratch.ScratchGPTLMHeadModel(
            hf_scratch.ScratchGPTConfig(
                vocab_size=40, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, max_position_embeddings=16
            )
        ),
        None,
    ),
}


@pytest.mark.parametrize("head", SERVED)
def test_checkpoints_name_the_pipeline_of_their_head(head, wordpiece, seq2seq_tokenizer, tmp_path):
    build, task = SERVED[head]
    model = build(wordpiece, seq2seq_tokenizer)
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    if task is None:
        assert "custom_pipelines" not in saved
    else:
        assert saved["custom_pipelines"] == {task: hf_scratch.pipelines.SCRATCH_PIPELINES[task]}
        assert (tmp_path / "pipelines.py").exists()
    # a reloaded and re-saved model keeps (or still lacks) the entry
    type(model).from_pretrained(tmp_path).save_pretrained(tmp_path / "again")
    assert json.loads((tmp_path / "again" / "config.json").read_text()).get("custom_pipelines") == saved.get(
        "custom_pipelines"
    )


def test_pipelines_load_with_only_trust_remote_code(wordpiece, seq2seq_tokenizer, tmp_path):
    """In a separate Python where ``import hf_scratch`` fails, ``pipeline(task, model=dir, trust_remote_code=True)``
    builds both pipelines from the files the checkpoints carry, and answers as the installed ones do."""
    checkpoints = {
        "bert": (bert_qa(wordpiece), wordpiece, "scratch-question-answering"),
        "longformer": (longformer_qa(wordpiece), wordpiece, "scratch-question-answering"),
        "transformer": (translator("transformer", seq2seq_tokenizer), seq2seq_tokenizer, "scratch-seq2seq"),
        "rnn": (translator("rnn", seq2seq_tokenizer), seq2seq_tokenizer, "scratch-seq2seq"),
    }
    calls = {
        "scratch-question-answering": dict(question=QUESTION, context=CONTEXT, top_k=2),
        "scratch-seq2seq": dict(inputs=["ich mochte ein bier", "du trinkst"], max_new_tokens=4, min_new_tokens=2),
    }
    expected = {}
    for name, (model, tokenizer, task) in checkpoints.items():
        model.save_pretrained(tmp_path / name)
        tokenizer.save_pretrained(tmp_path / name)
        expected[name] = pipeline(task, model=str(tmp_path / name))(**calls[task])

    script = textwrap.dedent(f"""
        import json, sys
        sys.modules["hf_scratch"] = None  # hf_scratch is installed in this environment: make it unimportable
        try:
            import hf_scratch
        except ImportError:
            pass
        else:
            raise SystemExit("hf_scratch is importable")
        from transformers import pipeline
        results = {{}}
        for name, task in {json.dumps({name: task for name, (_, _, task) in checkpoints.items()})}.items():
            runner = pipeline(task, model={str(tmp_path)!r} + "/" + name, trust_remote_code=True)
            results[name] = {{"pipeline": type(runner).__module__, "model": type(runner.model).__module__,
                              "output": runner(**{json.dumps(calls)}[task])}}
        print(json.dumps(results))
    """)
    environment = {**os.environ, "HF_HOME": str(tmp_path / "hf_home"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(run.stdout.strip().splitlines()[-1])
    for name, result in results.items():
        assert result["pipeline"].startswith("transformers_modules.") and result["pipeline"].endswith(".pipelines")
        assert result["model"].startswith("transformers_modules.")
        assert result["output"] == expected[name]


# ---- question answering: the v4 arguments -------------------------------------------------------------------


@pytest.fixture(scope="module")
def qa(wordpiece):
    torch.manual_seed(0)  # the same weights whichever test files ran before in this process
    return pipeline("scratch-question-answering", model=bert_qa(wordpiece), tokenizer=wordpiece)


def brute_force_spans(qa, question, context, max_answer_len=15, **window):
    """Every allowed span of every window, scored p(start)·p(end) with softmaxes over the context tokens and [CLS],
    as (score, start_char, end_char), best first — the definition, written as loops."""
    encoded = qa.tokenizer(
        question,
        context,
        truncation="only_second",
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        **window,
    )
    spans = {}
    for w in range(len(encoded["input_ids"])):
        inputs = {k: torch.tensor([encoded[k][w]]) for k in ("input_ids", "token_type_ids", "attention_mask")}
        with torch.no_grad():
            out = qa.model(**inputs)
        sequence_ids = encoded.sequence_ids(w)
        context_tokens = [i for i, s in enumerate(sequence_ids) if s == 1]
        normalised = context_tokens + [0]  # [CLS] is token 0
        p_start = torch.zeros(len(sequence_ids))
        p_end = torch.zeros(len(sequence_ids))
        p_start[normalised] = out.start_logits[0, normalised].softmax(-1)
        p_end[normalised] = out.end_logits[0, normalised].softmax(-1)
        for i in context_tokens:
            for j in context_tokens:
                if i <= j < i + max_answer_len:
                    key = (encoded["offset_mapping"][w][i][0], encoded["offset_mapping"][w][j][1])
                    spans[key] = max(spans.get(key, 0.0), float(p_start[i] * p_end[j]))
        null = float(p_start[0] * p_end[0])
    return sorted(((score, *key) for key, score in spans.items()), reverse=True), null


def test_qa_top_k_returns_the_k_best_spans(qa):
    expected, _ = brute_force_spans(qa, QUESTION, CONTEXT)
    answers = qa(question=QUESTION, context=CONTEXT, top_k=3, align_to_words=False)
    assert isinstance(answers, list) and len(answers) == 3
    assert [(a["start"], a["end"]) for a in answers] == [(s, e) for _, s, e in expected[:3]]
    assert [a["score"] for a in answers] == pytest.approx([score for score, _, _ in expected[:3]], rel=1e-5)
    assert all(a["answer"] == CONTEXT[a["start"] : a["end"]] for a in answers)
    single = qa(question=QUESTION, context=CONTEXT, align_to_words=False)
    assert isinstance(single, dict) and single == answers[0]


def test_qa_max_answer_len_and_handle_impossible_answer(qa):
    expected, null = brute_force_spans(qa, QUESTION, CONTEXT, max_answer_len=1)
    answers = qa(
        question=QUESTION,
        context=CONTEXT,
        top_k=len(expected) + 5,
        max_answer_len=1,
        align_to_words=False,
        handle_impossible_answer=True,
    )
    assert len(answers) == len(expected) + 1  # every single-token span, and the empty answer
    empty = [a for a in answers if a["answer"] == ""]
    assert len(empty) == 1 and empty[0]["score"] == pytest.approx(null, rel=1e-5) and empty[0]["start"] == 0
    assert all(" " not in a["answer"] for a in answers)  # one token each
    assert [a["score"] for a in answers] == sorted((a["score"] for a in answers), reverse=True)


def test_qa_long_contexts_are_read_in_overlapping_windows(qa):
    expected, _ = brute_force_spans(qa, QUESTION, LONG_CONTEXT, max_length=24, stride=6)
    answers = qa(question=QUESTION, context=LONG_CONTEXT, max_seq_len=24, doc_stride=6, top_k=4, align_to_words=False)
    assert len(qa.tokenizer(QUESTION, LONG_CONTEXT)["input_ids"]) > 24  # it needs several windows
    assert [(a["start"], a["end"]) for a in answers] == [(s, e) for _, s, e in expected[:4]]
    assert [a["score"] for a in answers] == pytest.approx([score for score, _, _ in expected[:4]], rel=1e-5)


def test_qa_aligns_answers_to_words(qa):
    answers = qa(question=QUESTION, context="the playerships shall laughingly welcome", top_k=5)
    # (one dict where word alignment leaves a single distinct span, as transformers' pipeline returns it)
    for answer in answers if isinstance(answers, list) else [answers]:
        text, start, end = answer["answer"], answer["start"], answer["end"]
        assert text == "the playerships shall laughingly welcome"[start:end]
        assert start == 0 or "the playerships shall laughingly welcome"[start - 1] == " "
        assert (
            end == len("the playerships shall laughingly welcome")
            or "the playerships shall laughingly welcome"[end] == " "
        )


def same_answers(actual, expected) -> bool:
    """Equal answers and spans, scores equal to float rounding (batching pads, which changes summation order)."""

    def strip(results):
        return [{k: v for k, v in r.items() if k != "score"} for r in results]

    actual, expected = (r if isinstance(r, list) else [r] for r in (actual, expected))
    return strip(actual) == strip(expected) and [r["score"] for r in actual] == pytest.approx(
        [r["score"] for r in expected], rel=1e-5
    )


def test_qa_batch_inputs(qa):
    one = qa(question=QUESTION, context=CONTEXT)
    other = qa(question="who weeps?", context=CONTEXT)
    assert qa([{"question": QUESTION, "context": CONTEXT}, {"question": "who weeps?", "context": CONTEXT}]) == [
        one,
        other,
    ]
    assert qa(question=[QUESTION, "who weeps?"], context=CONTEXT) == [one, other]
    assert same_answers(qa(question=[QUESTION, "who weeps?"], context=[CONTEXT, CONTEXT], batch_size=2), [one, other])
    squad_like = SimpleNamespace(question_text=QUESTION, context_text=CONTEXT)
    assert qa(squad_like) == one and qa(X=[squad_like]) == one and qa(QUESTION, CONTEXT) == one
    long_batch = qa(
        question=[QUESTION, "who weeps?"], context=[LONG_CONTEXT, CONTEXT], max_seq_len=24, doc_stride=6, batch_size=3
    )  # windows of both examples share batches
    windows = dict(max_seq_len=24, doc_stride=6)
    assert same_answers(
        long_batch,
        [qa(question=QUESTION, context=LONG_CONTEXT, **windows), qa(question="who weeps?", context=CONTEXT, **windows)],
    )


def test_qa_question_is_cut_to_max_question_len(qa):
    long_question = "who shall laugh when the king is welcome and the queen shall weep?"
    cut = qa.tokenizer(long_question, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"][3][1]
    assert qa(question=long_question, context=CONTEXT, max_question_len=4) == qa(
        question=long_question[:cut], context=CONTEXT
    )


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(question=QUESTION, context=CONTEXT, top_k=0), "top_k"),
        (dict(question=QUESTION, context=CONTEXT, max_answer_len=0), "max_answer_len"),
        (dict(question=QUESTION, context=CONTEXT, topp=3), "unknown arguments"),
        (dict(question=QUESTION, context=""), "context"),
        (dict(question=[QUESTION, QUESTION], context=[CONTEXT]), "contexts"),
        (dict(question=QUESTION, context=LONG_CONTEXT, max_seq_len=24, doc_stride=20), "doc_stride"),
        (dict(question=QUESTION, context=CONTEXT, max_seq_len=4), "max_seq_len"),
    ],
)
def test_qa_bad_arguments_raise_value_error(qa, kwargs, message):
    with pytest.raises(ValueError, match=message):
        qa(**kwargs)


# ---- sequence-to-sequence generation: the v4 arguments --------------------------------------------------------


@pytest.fixture(scope="module", params=["transformer", "rnn"])
def translate(request, seq2seq_tokenizer):
    return pipeline("scratch-seq2seq", model=translator(request.param, seq2seq_tokenizer), tokenizer=seq2seq_tokenizer)


def direct(translate, text, **generate_kwargs):
    encoded = translate.tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        return translate.model.generate(**encoded, **generate_kwargs)


def test_seq2seq_passes_generate_kwargs_and_returns_text_or_ids(translate):
    kwargs = dict(max_new_tokens=5, min_new_tokens=3, num_beams=2, num_return_sequences=2)
    ids = direct(translate, "ich mochte ein bier", **kwargs)
    texts = translate.tokenizer.batch_decode(ids, skip_special_tokens=True)
    assert translate("ich mochte ein bier", **kwargs) == [{"generated_text": t} for t in texts]
    tensors = translate("ich mochte ein bier", return_tensors=True, **kwargs)
    assert [set(r) for r in tensors] == [{"generated_token_ids"}] * 2
    assert all(torch.equal(r["generated_token_ids"], i) for r, i in zip(tensors, ids))
    with_special = translate("ich mochte ein bier", skip_special_tokens=False, max_new_tokens=3, min_new_tokens=3)
    assert with_special[0]["generated_text"] == translate.tokenizer.decode(
        direct(translate, "ich mochte ein bier", max_new_tokens=3, min_new_tokens=3)[0], skip_special_tokens=False
    )


def test_seq2seq_batch_inputs(translate):
    sources = ["ich mochte ein bier", "du trinkst", "ich trinke ein cola"]
    one_by_one = [translate(text, max_new_tokens=4, min_new_tokens=2)[0] for text in sources]
    assert translate(sources, max_new_tokens=4, min_new_tokens=2) == one_by_one  # v4: one dict per input
    assert translate(sources, max_new_tokens=4, min_new_tokens=2, batch_size=2) == one_by_one
    several = translate(sources[:2], max_new_tokens=4, num_beams=2, num_return_sequences=2)
    assert [len(r) for r in several] == [2, 2]


def test_seq2seq_truncates_the_source_when_asked(translate):
    long_source = " ".join(["ich mochte ein bier"] * 8)
    encoded = translate.tokenizer(long_source, truncation=True, max_length=5, return_tensors="pt")
    assert encoded["input_ids"].shape[-1] == 5 < len(translate.tokenizer(long_source)["input_ids"])
    with torch.no_grad():
        ids = translate.model.generate(**encoded, max_new_tokens=4, min_new_tokens=2)
    expected = [{"generated_text": translate.tokenizer.decode(ids[0], skip_special_tokens=True)}]
    assert translate(long_source, max_source_length=5, max_new_tokens=4, min_new_tokens=2) == expected


@pytest.mark.parametrize(
    "inputs,kwargs,message",
    [({"de": "ich"}, {}, "string"), ([], {}, "empty"), ("ich", {"return_type": "logits"}, "return_type")],
)
def test_seq2seq_bad_arguments_raise_value_error(translate, inputs, kwargs, message):
    with pytest.raises(ValueError, match=message):
        translate(inputs, **kwargs)

"""The contract transformers' official example scripts (run_clm, run_mlm, run_classification / run_glue, run_qa,
run_translation, run_swag) rely on, checked with our own code on tiny hub-ready folders, where hf_scratch is
installed and where it is not (a subprocess in which ``import hf_scratch`` fails, so every class comes from the
folder's own modeling code through ``trust_remote_code=True``).

What those scripts do with a model, and what is checked here:
- ``AutoConfig`` / ``AutoTokenizer`` / ``AutoModelFor<task>.from_pretrained(folder, trust_remote_code=True)`` for
  every head the config's ``auto_map`` names; ``run_qa`` refuses a tokenizer that is not a fast one;
- run_classification: ``AutoConfig.from_pretrained(folder, num_labels=…, finetuning_task=…)``, then the head with
  that config, ``label2id`` / ``id2label`` written into ``model.config``, ``--ignore_mismatched_sizes`` to reload a
  head trained with another number of labels;
- run_clm / run_mlm / run_translation: ``model.get_input_embeddings().weight.shape[0]`` against ``len(tokenizer)``,
  then ``model.resize_token_embeddings(len(tokenizer))`` and training on the new tokens;
- run_clm / run_mlm / run_swag / run_qa / run_classification cut or truncate to ``tokenizer.model_max_length``;
  run_clm and run_translation read ``config.max_position_embeddings`` when the config has it: a sequence of that
  many tokens must run, one more must be refused with a clear error;
- run_translation: ``config.decoder_start_token_id``, ``DataCollatorForSeq2Seq(tokenizer, model=model)`` building
  ``decoder_input_ids`` with ``prepare_decoder_input_ids_from_labels``, ``generate(max_length=…, num_beams=…)``;
- Trainer keeps the dataset columns the forward signature names and finds the label names from it
  (``start_positions`` / ``end_positions`` for QA, ``labels`` elsewhere); a loss comes back first.
"""

from __future__ import annotations

import copy
import inspect
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    DataCollatorForSeq2Seq,
)
from transformers.utils import find_labels

import hf_scratch
from hf_scratch.tools.tokenization import train_tokenizer

ROOT = Path(__file__).resolve().parents[1]
TEXTS = [line for line in (ROOT / "training/data/shakespeare/train.txt").read_text().splitlines() if line.strip()][:300]

# family → (checkpoint head the training scripts save, tokenizer kind, config)
HIDDEN = dict(hidden_size=16, num_attention_heads=2, intermediate_size=32)


def _configs(tokenizer, family: str):
    ids = {name: getattr(tokenizer, name) for name in ("pad_token_id", "bos_token_id", "eos_token_id")}
    vocab = len(tokenizer)
    if family == "bert":
        return hf_scratch.ScratchBertConfig(
            vocab_size=vocab,
            num_hidden_layers=1,
            max_position_embeddings=64,
            pad_token_id=tokenizer.pad_token_id,
            **HIDDEN,
        )
    if family == "gpt":
        return hf_scratch.ScratchGPTConfig(
            vocab_size=vocab,
            num_hidden_layers=1,
            max_position_embeddings=64,
            **ids,
            **HIDDEN,
        )
    if family == "transfo_xl":
        return hf_scratch.ScratchTransfoXLConfig(
            vocab_size=vocab,
            cutoffs=[],
            div_val=1,
            hidden_size=16,
            embedding_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            head_dim=8,
            intermediate_size=32,
            mem_len=8,
            pad_token_id=tokenizer.pad_token_id,
        )
    if family == "longformer":
        return hf_scratch.ScratchLongformerConfig(
            vocab_size=vocab,
            num_hidden_layers=1,
            max_position_embeddings=64,
            attention_window=4,
            pad_token_id=tokenizer.pad_token_id,
            **HIDDEN,
        )
    seq2seq = dict(
        ids,
        vocab_size=vocab,
        decoder_start_token_id=tokenizer.bos_token_id,
        hidden_size=16,
        encoder_layers=1,
        decoder_layers=1,
    )
    if family == "transformer":
        return hf_scratch.ScratchTransformerConfig(
            **seq2seq,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=32,
            decoder_ffn_dim=32,
            max_position_embeddings=64,
        )
    return hf_scratch.ScratchRNNConfig(**seq2seq, cell_type="lstm", attention_type="bahdanau")


FAMILIES = {
    "bert": ("ScratchBertForMaskedLM", "wordpiece"),
    "gpt": ("ScratchGPTLMHeadModel", "bpe"),
    "transformer": ("ScratchTransformerForConditionalGeneration", "seq2seq"),
    "transfo_xl": ("ScratchTransfoXLLMHeadModel", "bpe"),
    "longformer": ("ScratchLongformerForMaskedLM", "wordpiece"),
    "rnn": ("ScratchRNNForConditionalGeneration", "seq2seq"),
}
CLASSIFIERS = ["bert", "gpt", "longformer", "rnn"]  # families with AutoModelForSequenceClassification


def input_limit(config) -> int | None:
    """The longest input the model reads, as every tokenizer saved beside it must report it (``None``: no limit)."""
    from transformers.tokenization_utils_base import VERY_LARGE_INTEGER

    from hf_scratch.tools.tokenization import model_max_length

    limit = model_max_length(config)
    return None if limit >= VERY_LARGE_INTEGER else limit


@pytest.fixture(scope="session")
def folders(tmp_path_factory) -> dict[str, Path]:
    """One hub-ready folder per family, as the training scripts write it: the checkpoint head with the family's
    full ``auto_map`` (so every head loads with ``trust_remote_code=True``), its modeling code, and a tokenizer
    that says the model's input limit."""
    root = tmp_path_factory.mktemp("example_contract")
    tokenizers = {kind: train_tokenizer(TEXTS, kind=kind, vocab_size=150) for kind in ("wordpiece", "bpe", "seq2seq")}
    result = {}
    for family, (head, kind) in FAMILIES.items():
        tokenizer = copy.deepcopy(tokenizers[kind])
        config = _configs(tokenizer, family)
        config.auto_map = dict(type(config).default_auto_map)
        torch.manual_seed(0)
        model = getattr(hf_scratch, head)(config)
        limit = input_limit(config)
        if limit is not None:
            tokenizer.model_max_length = limit
        folder = root / family
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        result[family] = folder
    return result


# ----------------------------------------------------------------------------------------------------------------
# Where hf_scratch is not installed: everything from the folder's own code
# ----------------------------------------------------------------------------------------------------------------

REMOTE_CHECK = textwrap.dedent('''
    import importlib.abc, json, sys

    class NoHfScratch(importlib.abc.MetaPathFinder):
        """Make the package (and the repository's training helpers) unimportable, as on a machine without them."""
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("hf_scratch", "training"):
                raise ModuleNotFoundError(f"No module named {name!r} (blocked for this check)")
            return None

    sys.meta_path.insert(0, NoHfScratch())
    import torch
    import transformers
    from transformers import (AutoConfig, AutoTokenizer, DataCollatorForLanguageModeling,
                              DataCollatorForMultipleChoice, DataCollatorForSeq2Seq, PreTrainedTokenizerFast)

    TEXTS = ["the king is dead", "long live the queen of the night", "to be or not to be"]
    LABEL_HEADS = {"AutoModelForSequenceClassification", "AutoModelForTokenClassification"}

    def loss_of(auto_name, folder, tokenizer):
        """Load the head the way the example scripts do and run one batch the way they build it."""
        auto = getattr(transformers, auto_name)
        extra = {"num_labels": 3} if auto_name in LABEL_HEADS else {}
        config = AutoConfig.from_pretrained(folder, trust_remote_code=True, **extra)
        model = auto.from_pretrained(folder, config=config, trust_remote_code=True)
        assert tokenizer.pad_token is not None, "our tokenizers carry a pad token (GPT-2's has none)"
        batch = tokenizer(TEXTS, padding=True, return_tensors="pt")
        if auto_name == "AutoModelForMaskedLM":
            features = [tokenizer(text, return_special_tokens_mask=True) for text in TEXTS]
            batch = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.5)(features)
        elif auto_name == "AutoModelForCausalLM":
            batch["labels"] = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        elif auto_name == "AutoModelForSequenceClassification":
            batch["labels"] = torch.tensor([0, 2, 1])
        elif auto_name == "AutoModelForTokenClassification":
            batch["labels"] = torch.zeros_like(batch["input_ids"])
        elif auto_name == "AutoModelForQuestionAnswering":
            batch["start_positions"], batch["end_positions"] = torch.tensor([1, 2, 1]), torch.tensor([2, 3, 1])
        elif auto_name == "AutoModelForMultipleChoice":
            features = [{**{k: [v] * 4 for k, v in tokenizer(text, TEXTS[0]).items()}, "label": i % 4}
                        for i, text in enumerate(TEXTS)]
            batch = DataCollatorForMultipleChoice(tokenizer)(features)
        elif auto_name == "AutoModelForSeq2SeqLM":
            features = [tokenizer(text, text_target=text[::-1]) for text in TEXTS]
            batch = DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100)(features)
            generated = model.generate(batch["input_ids"][:2], attention_mask=batch["attention_mask"][:2],
                                       max_length=6, num_beams=2)
            assert generated.shape[0] == 2, generated.shape
        else:
            return None
        model.train()
        output = model(**batch)
        loss = output[0]
        loss.backward()
        return {"loss": float(loss), "logits_shape": list(output.logits.shape) if "logits" in output else None}

    report = {"hf_scratch_imported": False}
    for family, folder in json.loads(sys.argv[1]).items():
        config = AutoConfig.from_pretrained(folder, trust_remote_code=True)
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
        heads = {}
        for auto_name in sorted(config.auto_map):
            if auto_name == "AutoConfig":
                continue
            try:
                model = getattr(transformers, auto_name).from_pretrained(folder, trust_remote_code=True)
                heads[auto_name] = {"class": type(model).__name__, "module": type(model).__module__,
                                    "run": loss_of(auto_name, folder, tokenizer)}
            except Exception as error:  # reported per head, so each family's test names what broke
                heads[auto_name] = {"error": f"{type(error).__name__}: {error}"[:2000]}
        report[family] = {"config_module": type(config).__module__, "fast_tokenizer":
                          isinstance(tokenizer, PreTrainedTokenizerFast), "auto_map": config.auto_map, "heads": heads}
    report["hf_scratch_imported"] = any(name.split(".")[0] == "hf_scratch" for name in sys.modules)
    print("REPORT" + json.dumps(report))
''')


@pytest.fixture(scope="session")
def remote_report(folders, tmp_path_factory) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path_factory.mktemp("modules"))}
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        [sys.executable, "-c", REMOTE_CHECK, json.dumps({name: str(path) for name, path in folders.items()})],
        cwd=tmp_path_factory.mktemp("elsewhere"),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.split("REPORT", 1)[1])


def test_the_check_really_runs_without_hf_scratch(remote_report):
    assert remote_report["hf_scratch_imported"] is False


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_head_of_the_auto_map_loads_from_the_folder_code(remote_report, family):
    report = remote_report[family]
    assert report["config_module"].startswith("transformers_modules.")
    assert report["fast_tokenizer"], "run_qa refuses slow tokenizers"
    for auto_name, reference in report["auto_map"].items():
        if auto_name == "AutoConfig":
            continue
        head = report["heads"][auto_name]
        assert "error" not in head, (auto_name, head.get("error"))
        assert head["class"] == reference.split(".")[-1], (auto_name, head)
        assert head["module"].startswith("transformers_modules."), head


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_task_head_trains_on_the_batch_its_script_builds(remote_report, family):
    """One forward + backward per head with the batch the matching example script builds (its collator, its label
    names and shapes): a finite loss first, logits shaped as the script's metrics read them."""
    heads = remote_report[family]["heads"]
    errors = {name: head["error"] for name, head in heads.items() if "error" in head}
    assert not errors, errors
    runs = {name: head["run"] for name, head in heads.items() if head["run"] is not None}
    assert runs, f"{family}: no task head ran"
    for auto_name, run in runs.items():
        assert torch.isfinite(torch.tensor(run["loss"])), (auto_name, run)
        if auto_name == "AutoModelForSequenceClassification":
            assert run["logits_shape"] == [3, 3], run  # batch × num_labels from AutoConfig(num_labels=3)
        if auto_name == "AutoModelForMultipleChoice":
            assert run["logits_shape"] == [3, 4], run  # batch × choices; labels (batch,) as run_swag passes them


def test_multiple_choice_follows_the_standard_contract(remote_report):
    """run_swag passes ``labels`` of shape (batch,) to ``AutoModelForMultipleChoice``: every family that maps the
    class must map it to a head with that contract (GPT's double-heads model takes LM labels there)."""
    for family, report in remote_report.items():
        if family == "hf_scratch_imported" or "AutoModelForMultipleChoice" not in report["auto_map"]:
            continue
        head = report["heads"]["AutoModelForMultipleChoice"]
        assert head.get("class", "").endswith("ForMultipleChoice"), (family, head)


# ----------------------------------------------------------------------------------------------------------------
# Where hf_scratch is installed (in-process): labels, resizing, limits, seq2seq collation, Trainer's signature
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", CLASSIFIERS)
def test_labels_round_trip_and_a_head_with_other_labels_reloads(folders, family, tmp_path):
    folder = folders[family]
    label2id = {"comedy": 0, "history": 1, "tragedy": 2}
    config = AutoConfig.from_pretrained(
        folder, num_labels=3, finetuning_task="text-classification", trust_remote_code=True
    )
    model = AutoModelForSequenceClassification.from_pretrained(folder, config=config, trust_remote_code=True)
    model.config.label2id, model.config.id2label = label2id, {i: label for label, i in label2id.items()}
    model.save_pretrained(tmp_path / "classifier")

    reloaded = AutoModelForSequenceClassification.from_pretrained(tmp_path / "classifier", trust_remote_code=True)
    assert reloaded.config.num_labels == 3
    assert reloaded.config.label2id == label2id and reloaded.config.id2label == {
        0: "comedy",
        1: "history",
        2: "tragedy",
    }

    # run_classification --ignore_mismatched_sizes: the same checkpoint with two labels gets a new 2-way head
    two = AutoConfig.from_pretrained(tmp_path / "classifier", num_labels=2, trust_remote_code=True)
    with pytest.raises((RuntimeError, ValueError)):
        AutoModelForSequenceClassification.from_pretrained(tmp_path / "classifier", config=two, trust_remote_code=True)
    model2 = AutoModelForSequenceClassification.from_pretrained(
        tmp_path / "classifier", config=two, ignore_mismatched_sizes=True, trust_remote_code=True
    )
    ids = torch.tensor([[5, 6, 7, 8]])
    assert model2(input_ids=ids, attention_mask=torch.ones_like(ids)).logits.shape == (1, 2)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_resize_for_added_tokens_then_train_on_them(folders, family):
    """run_clm / run_mlm / run_translation: ``if len(tokenizer) > model.get_input_embeddings().weight.shape[0]:
    model.resize_token_embeddings(len(tokenizer))`` and the new ids must then train. (Transformer-XL's adaptive
    input has a ``weight`` when it is one table, as here; with several clusters it has none: see docs/training.md.)"""
    folder = folders[family]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = hf_scratch.__dict__[FAMILIES[family][0]].from_pretrained(folder)
    assert model.get_input_embeddings().weight.shape[0] == len(tokenizer)
    tokenizer.add_tokens(["<speaker>", "<scene>"])
    assert len(tokenizer) > model.get_input_embeddings().weight.shape[0]
    model.resize_token_embeddings(len(tokenizer))
    assert model.get_input_embeddings().weight.shape[0] == len(tokenizer)
    new_id = len(tokenizer) - 1
    ids = torch.tensor([[4, new_id, 5, new_id]])
    kwargs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}
    output = model(**kwargs)
    output.loss.backward()
    assert model.get_input_embeddings().weight.grad[new_id].abs().sum() > 0


@pytest.mark.parametrize("family", list(FAMILIES))
def test_model_max_length_is_the_input_limit(folders, family):
    """Scripts cut text into blocks of ``tokenizer.model_max_length`` (capped at 1024) or truncate to it: that many
    tokens must run and, where the model has a limit, one more must be refused before any kernel runs. run_clm and
    run_translation also read ``config.max_position_embeddings`` when the config has it: it must be the same limit
    (Longformer's RoBERTa-style position ids start at pad_token_id + 1, so it reads two fewer)."""
    folder = folders[family]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = hf_scratch.__dict__[FAMILIES[family][0]].from_pretrained(folder).eval()
    limit = input_limit(model.config)
    if limit is None:  # Transformer-XL (relative positions + memory), RNN (no positions): transformers' "no limit"
        assert not hasattr(model.config, "max_position_embeddings")
        assert tokenizer.model_max_length > 10**20
        limit = 96  # longer than any table a tiny config would have
    else:
        assert tokenizer.model_max_length == limit
        assert limit <= model.config.max_position_embeddings
    ids = torch.full((1, limit), 5)
    extra = {"decoder_input_ids": ids[:, :limit]} if model.config.is_encoder_decoder else {}
    with torch.no_grad():
        model(input_ids=ids, attention_mask=torch.ones_like(ids), **extra)
        if input_limit(model.config) is not None:
            longer = torch.full((1, limit + 1), 5)
            with pytest.raises(ValueError, match="position"):
                model(
                    input_ids=longer,
                    attention_mask=torch.ones_like(longer),
                    **({"decoder_input_ids": ids[:, :2]} if extra else {}),
                )


@pytest.mark.parametrize("family", ["transformer", "rnn"])
def test_seq2seq_collator_builds_decoder_inputs_from_labels(folders, family):
    """run_translation: DataCollatorForSeq2Seq(tokenizer, model=model) asks the model for decoder inputs, which must
    be the labels shifted right after ``config.decoder_start_token_id`` with -100 turned into padding."""
    folder = folders[family]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = hf_scratch.__dict__[FAMILIES[family][0]].from_pretrained(folder)
    start = model.config.decoder_start_token_id
    assert start is not None
    features = [tokenizer("ich bin", text_target="i am here now"), tokenizer("ja", text_target="yes")]
    batch = DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100)(features)
    labels, decoder_input_ids = batch["labels"], batch["decoder_input_ids"]
    assert (decoder_input_ids[:, 0] == start).all()
    expected = labels[:, :-1].masked_fill(labels[:, :-1] == -100, model.config.pad_token_id)
    assert torch.equal(decoder_input_ids[:, 1:], expected)
    assert torch.isfinite(model(**batch).loss)


@pytest.mark.parametrize("family", CLASSIFIERS)
def test_trainer_evaluation_reports_loss_and_metrics_for_classifiers(folders, family, tmp_path):
    """run_classification's evaluation: Trainer computes the loss and hands the labels to compute_metrics only when
    every label name it found in the forward signature is in the batch. A classifier whose forward also takes
    another ``…label…`` argument evaluates silently without loss or accuracy."""
    from transformers import Trainer, TrainingArguments

    folder = folders[family]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    config = AutoConfig.from_pretrained(folder, num_labels=2, trust_remote_code=True)
    model = AutoModelForSequenceClassification.from_pretrained(folder, config=config, trust_remote_code=True)
    texts = ["the king is dead", "long live the queen", "to be or not to be", "a horse"]
    dataset = [
        {**tokenizer(text, padding="max_length", max_length=8, truncation=True), "label": i % 2}
        for i, text in enumerate(texts)
    ]
    seen = {}

    def compute_metrics(prediction):
        seen["labels"] = prediction.label_ids
        return {"accuracy": float((prediction.predictions.argmax(-1) == prediction.label_ids).mean())}

    args = TrainingArguments(output_dir=str(tmp_path), report_to="none", per_device_eval_batch_size=2, use_cpu=True)
    metrics = Trainer(model=model, args=args, eval_dataset=dataset, compute_metrics=compute_metrics).evaluate()
    assert "eval_loss" in metrics and "eval_accuracy" in metrics, metrics
    assert list(seen["labels"]) == [0, 1, 0, 1]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_trainer_keeps_the_columns_the_scripts_produce(folders, family):
    """Trainer drops every dataset column the forward signature does not name, and takes the label names from it:
    each head must name its tokenizer's outputs and the label columns the matching script writes."""
    folder = folders[family]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    config = AutoConfig.from_pretrained(folder)
    expected_labels = {"AutoModelForQuestionAnswering": ["start_positions", "end_positions"]}
    for auto_name, reference in config.auto_map.items():
        if auto_name in ("AutoConfig", "AutoModel"):
            continue
        cls = getattr(hf_scratch, reference.split(".")[-1])
        parameters = inspect.signature(cls.forward).parameters
        assert set(tokenizer.model_input_names) <= set(parameters), (cls.__name__, tokenizer.model_input_names)
        if auto_name in ("AutoModelForPreTraining", "AutoModelForNextSentencePrediction"):
            continue  # not driven by an example script (BERT's own pre-training labels)
        assert find_labels(cls) == expected_labels.get(auto_name, ["labels"]), cls.__name__


# ----------------------------------------------------------------------------------------------------------------
# Clients that train: run_swag on GPT's multiple-choice head, sentence-transformers' trainer on BERT
# ----------------------------------------------------------------------------------------------------------------

CLIENTS = textwrap.dedent('''
    import json, math, sys
    from itertools import chain

    import numpy as np
    import torch
    from datasets import Dataset
    from transformers import (AutoConfig, AutoModelForMultipleChoice, AutoTokenizer, DataCollatorForMultipleChoice,
                              Trainer, TrainingArguments)

    LINES = ["to be or not to be", "that is the question", "whether tis nobler in the mind to suffer",
             "the slings and arrows", "of outrageous fortune", "or to take arms", "against a sea of troubles",
             "and by opposing end them"]
    QUIET = dict(report_to="none", save_strategy="no", use_cpu=True, disable_tqdm=True, dataloader_pin_memory=False,
                 logging_steps=1, max_steps=2, per_device_train_batch_size=4, per_device_eval_batch_size=4, seed=0)

    def trained(model, step):
        """(the parameters a training step changed, of all of them), around ``step()``."""
        before = {name: p.detach().clone() for name, p in model.named_parameters()}
        result = step()
        changed = sum(not torch.equal(before[name], p) for name, p in model.named_parameters())
        return result, changed, len(before)

    def run_swag(folder, trust_remote_code, output_dir):
        """What transformers' examples/pytorch/multiple-choice/run_swag.py does with --model_name_or_path folder
        (and --trust_remote_code where hf_scratch is not installed): SWAG's columns, its preprocess_function (the
        context four times, paired with header + ending, truncated, not padded), transformers'
        DataCollatorForMultipleChoice (which pads with the tokenizer's pad token), Trainer with the accuracy of
        argmax over the choices, train then evaluate."""
        config = AutoConfig.from_pretrained(folder, trust_remote_code=trust_remote_code)
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=trust_remote_code)
        model = AutoModelForMultipleChoice.from_pretrained(folder, config=config, trust_remote_code=trust_remote_code)
        raw = Dataset.from_dict({
            "sent1": LINES, "sent2": ["and"] * len(LINES), "label": [i % 4 for i in range(len(LINES))],
            **{f"ending{j}": [LINES[(i + j + 1) % len(LINES)] for i in range(len(LINES))] for j in range(4)},
        })
        ending_names = [f"ending{i}" for i in range(4)]
        max_seq_length = min(64, tokenizer.model_max_length)

        def preprocess_function(examples):
            first_sentences = [[context] * 4 for context in examples["sent1"]]
            question_headers = examples["sent2"]
            second_sentences = [
                [f"{header} {examples[end][i]}" for end in ending_names] for i, header in enumerate(question_headers)
            ]
            first_sentences = list(chain(*first_sentences))
            second_sentences = list(chain(*second_sentences))
            tokenized_examples = tokenizer(
                first_sentences, second_sentences, truncation=True, max_length=max_seq_length, padding=False
            )
            return {k: [v[i : i + 4] for i in range(0, len(v), 4)] for k, v in tokenized_examples.items()}

        data = raw.map(preprocess_function, batched=True)
        lengths = {len(ids) for choices in data["input_ids"] for ids in choices}

        def compute_metrics(eval_predictions):
            predictions, label_ids = eval_predictions
            preds = np.argmax(predictions, axis=1)
            return {"accuracy": (preds == label_ids).astype(np.float32).mean().item()}

        trainer = Trainer(
            model=model,
            args=TrainingArguments(output_dir=output_dir, **QUIET),
            train_dataset=data,
            eval_dataset=data,
            processing_class=tokenizer,
            data_collator=DataCollatorForMultipleChoice(tokenizer=tokenizer, return_tensors="pt"),
            compute_metrics=compute_metrics,
        )
        result, changed, total = trained(model, trainer.train)
        metrics = trainer.evaluate()
        return {"class": type(model).__name__, "module": type(model).__module__, "padded": len(lengths) > 1,
                "train_loss": result.training_loss, "eval_loss": metrics["eval_loss"],
                "eval_accuracy": metrics["eval_accuracy"], "changed": changed, "parameters": total}

    def sentence_transformers_trainer(folder, trust_remote_code, output_dir):
        """sentence-transformers' SentenceTransformerTrainer on the folder: SentenceTransformer(folder) makes the
        encoder + mean pooling; (anchor, positive) pairs with MultipleNegativesRankingLoss, two steps."""
        from sentence_transformers import (SentenceTransformer, SentenceTransformerTrainer,
                                           SentenceTransformerTrainingArguments)
        from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

        model = SentenceTransformer(folder, trust_remote_code=trust_remote_code, device="cpu")
        pairs = Dataset.from_dict({"anchor": LINES[0::2], "positive": LINES[1::2]})
        trainer = SentenceTransformerTrainer(
            model=model,
            args=SentenceTransformerTrainingArguments(output_dir=output_dir, **QUIET),
            train_dataset=pairs,
            loss=MultipleNegativesRankingLoss(model),
        )
        result, changed, total = trained(model, trainer.train)
        encoder = model[0].auto_model
        return {"class": type(encoder).__name__, "module": type(encoder).__module__,
                "train_loss": result.training_loss, "changed": changed, "parameters": total,
                "embedding": list(model.encode(["to be"]).shape)}

    def train_clients(folders, trust_remote_code, output_dir):
        return {"run_swag": run_swag(folders["gpt"], trust_remote_code, output_dir + "/swag"),
                "sentence_transformers": sentence_transformers_trainer(folders["bert"], trust_remote_code,
                                                                       output_dir + "/st")}

    if __name__ == "__main__":  # where hf_scratch is not installed (training_runs.run_without_hf_scratch)
        report = train_clients(json.loads(sys.argv[1]), True, sys.argv[2])
        report["hf_scratch_imported"] = any(name.split(".")[0] == "hf_scratch" for name in sys.modules)
        print("CLIENTS" + json.dumps(report))
''')


@pytest.fixture(scope="session")
def clients(folders, tmp_path_factory) -> dict:
    """The clients' runs where hf_scratch is installed (its classes, without trust_remote_code) and where it is not
    (a ``python -I`` process: the folders' own code, with trust_remote_code=True)."""
    from training_runs import run_without_hf_scratch

    paths = {name: str(folders[name]) for name in ("gpt", "bert")}
    namespace: dict = {}
    exec(CLIENTS, namespace)
    here = namespace["train_clients"](paths, False, str(tmp_path_factory.mktemp("clients_here")))
    elsewhere = tmp_path_factory.mktemp("clients_elsewhere")
    printed = run_without_hf_scratch(CLIENTS, [json.dumps(paths), str(elsewhere / "out")], elsewhere)
    return {"installed": here, "not installed": json.loads(printed.split("CLIENTS", 1)[1])}


@pytest.mark.parametrize("where", ["installed", "not installed"])
def test_run_swag_trains_gpts_multiple_choice_head(clients, where):
    """run_swag on a GPT folder: the multiple-choice head (labels of shape (batch,)), choices of different lengths
    padded by the collator with the tokenizer's own pad token, two training steps that change the weights, and an
    evaluation with loss and accuracy — with hf_scratch installed and with only the folder's code."""
    run = clients[where]["run_swag"]
    assert run["class"] == "ScratchGPTForMultipleChoice"
    assert run["module"].startswith("hf_scratch." if where == "installed" else "transformers_modules."), run
    assert run["padded"], "the choices should have different lengths, so that the collator pads"
    assert all(math.isfinite(run[key]) for key in ("train_loss", "eval_loss")), run
    assert 0.0 <= run["eval_accuracy"] <= 1.0
    assert run["changed"] > run["parameters"] // 2, run


@pytest.mark.parametrize("where", ["installed", "not installed"])
def test_sentence_transformers_trainer_trains_a_bert_folder(clients, where):
    """sentence-transformers' trainer on a BERT folder: BERT + mean pooling, two steps of
    MultipleNegativesRankingLoss that change the encoder, sentence embeddings of the hidden size — with hf_scratch
    installed and with only the folder's code."""
    run = clients[where]["sentence_transformers"]
    assert run["class"] == "ScratchBertModel"
    assert run["module"].startswith("hf_scratch." if where == "installed" else "transformers_modules."), run
    assert math.isfinite(run["train_loss"]) and run["train_loss"] > 0, run
    assert run["changed"] > run["parameters"] // 2, run
    assert run["embedding"] == [1, HIDDEN["hidden_size"]]


def test_the_clients_really_ran_without_hf_scratch(clients):
    assert clients["not installed"]["hf_scratch_imported"] is False

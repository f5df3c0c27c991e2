"""What the training scripts report: the metric modules compute known values; the model card templates render
valid metadata; a hub dataset or a fine-tuned hub model is named in the card's metadata (hub ids only); the card is
uploaded once, with the folder. (The card of every script's run is checked in test_training.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from training_runs import REPO, TINY

from training import run_classification, run_mlm
from training.arguments import FAMILIES


def test_metric_modules_compute_known_values():
    import sacrebleu

    from training.common import load_metric

    scores = load_metric("accuracy_f1").compute(predictions=[0, 1, 1, 2], references=[0, 1, 0, 2])
    # class 0: p=1 r=.5 f=2/3; class 1: p=.5 r=1 f=2/3; class 2: f=1
    assert scores["accuracy"] == 0.75 and scores["f1"] == pytest.approx((2 / 3 + 2 / 3 + 1) / 3)
    tags = load_metric("seqeval").compute(predictions=[["B-PER", "O", "B-LOC"]], references=[["B-PER", "O", "O"]])
    assert (
        tags["overall_precision"] == 0.5
        and tags["overall_recall"] == 1.0
        and tags["overall_accuracy"] == pytest.approx(2 / 3)
    )
    squad = load_metric("squad").compute(
        predictions=[{"id": "a", "prediction_text": "the Ham."}, {"id": "b", "prediction_text": "lord Polonius"}],
        references=[
            {"id": "a", "answers": {"text": ["Ham"], "answer_start": [0]}},
            {"id": "b", "answers": {"text": ["Polonius"], "answer_start": [3]}},
        ],
    )
    assert squad["exact_match"] == 50.0 and squad["f1"] == pytest.approx(100 * (1 + 2 / 3) / 2)
    hypotheses, references = ["i want a beer", "the cat sat on a mat"], ["i want a beer", "the cat sat on the mat"]
    bleu = load_metric("sacrebleu").compute(predictions=hypotheses, references=[[r] for r in references])
    assert bleu["score"] == pytest.approx(sacrebleu.corpus_bleu(hypotheses, [references]).score)


@pytest.mark.parametrize("family", sorted(set(FAMILIES.values())))
def test_model_card_template_renders_valid_metadata(family, tmp_path):
    from huggingface_hub import EvalResult, ModelCard, ModelCardData

    from training.model_card import MODEL_CARDS_DIR

    data = ModelCardData(
        library_name="transformers",
        pipeline_tag="text-generation",
        tags=["hf_scratch", family],
        datasets=["tiny"],
        metrics=["perplexity"],
        model_name="demo",
        eval_results=[
            EvalResult(
                task_type="text-generation",
                dataset_type="tiny",
                dataset_name="tiny",
                metric_type="perplexity",
                metric_value=12.5,
            )
        ],
    )
    card = ModelCard.from_template(
        data,
        template_path=str(MODEL_CARDS_DIR / f"{family}.md"),
        model_name="demo",
        model_class="X",
        auto_class="AutoModel",
        task="language modelling",
        dataset="tiny",
        num_parameters="1,000",
        architecture={"hidden_size": 64},
        hyperparameters={"learning_rate": 0.001},
        eval_metrics={"eval_perplexity": 12.5},
        usage="",
        tokenizer_class="T",
        hf_scratch_version="0",
        transformers_version="5",
    )
    card.save(tmp_path / "README.md")
    parsed = ModelCard.load(tmp_path / "README.md").data
    assert parsed.library_name == "transformers" and parsed.pipeline_tag == "text-generation"
    assert parsed.tags == ["hf_scratch", family] and parsed.datasets == ["tiny"] and parsed.metrics == ["perplexity"]
    assert parsed.eval_results[0].metric_value == 12.5
    text = (tmp_path / "README.md").read_text()
    for section in (
        "## Architecture and paper",
        "## Training data",
        "## Training procedure",
        "## Evaluation results",
        "## Intended use",
        "## Limitations",
        "| hidden_size | 64 |".replace("hidden_size", "`hidden_size`"),
        "| eval_perplexity | 12.5 |",
    ):
        assert section in text, section
    assert "{{" not in text and "{%" not in text


@pytest.mark.parametrize("family", sorted(set(FAMILIES.values())))
def test_model_card_says_the_tokenizer_needs_trust_remote_code_too(family):
    """Where hf_scratch is not installed, ``AutoTokenizer.from_pretrained(repo)`` without trust_remote_code=True stops
    to ask whether to run the repository's code (tests/test_first_hour.py runs a card's code, and the plain call):
    every card's "How to use" passes the flag to the tokenizer as to the model, and says why."""
    import re

    from training.model_card import MODEL_CARDS_DIR

    template = (MODEL_CARDS_DIR / f"{family}.md").read_text()
    how_to_use = re.search(r"## How to use\n```python\n(.*?)```", template, re.S).group(1)
    calls = re.findall(r"^\w+ = (.+?)\.from_pretrained\((.*)\)$", how_to_use, re.M)
    assert [auto for auto, _ in calls] == ["{{ auto_class }}", "AutoTokenizer"], calls
    assert all(arguments.endswith(", trust_remote_code=True") for _, arguments in calls), calls
    assert '"Do you wish to run the custom code? [y/N]"' in how_to_use


def test_push_to_hub_uploads_the_folder_with_our_model_card_once(tmp_path, monkeypatch):
    """The upload itself needs the hub: every way huggingface_hub can upload is replaced by a recorder. One upload
    carries the finished folder and our card (not the Trainer's generic one); no second upload of README.md."""
    import huggingface_hub
    from huggingface_hub import HfApi, ModelCard, RepoUrl

    uploads = []  # (how, repo_id, {path_in_repo: text of README.md or None})

    def record(how):
        def upload(*args, **kwargs):
            api_args = args[1:] if args and isinstance(args[0], HfApi) else args
            repo_id = kwargs.get("repo_id")
            if how == "upload_folder":
                folder = Path(kwargs.get("folder_path") or api_args[0])
                files = {p.relative_to(folder).as_posix(): None for p in folder.rglob("*") if p.is_file()}
                files["README.md"] = (folder / "README.md").read_text() if (folder / "README.md").is_file() else None
            elif how == "upload_file":
                source = kwargs.get("path_or_fileobj") or api_args[0]
                files = {kwargs.get("path_in_repo"): Path(source).read_text()}
            else:  # create_commit
                files = {op.path_in_repo: None for op in kwargs.get("operations") or api_args[1]}
            uploads.append((how, repo_id, files))

        return upload

    monkeypatch.setattr(
        HfApi, "create_repo", lambda self, repo_id, **kwargs: RepoUrl(f"https://huggingface.co/{repo_id}")
    )
    for how in ("upload_folder", "upload_file", "create_commit"):
        monkeypatch.setattr(HfApi, how, record(how))
        monkeypatch.setattr(huggingface_hub, how, record(how))
    run_mlm.main(
        [
            "--model_type",
            "scratch-bert",
            "--output_dir",
            str(tmp_path / "out"),
            *TINY,
            "--push_to_hub",
            "--hub_model_id",
            "someone/tiny-scratch-bert",
        ]
    )
    assert len(uploads) == 1, [(how, sorted(files)) for how, _, files in uploads]
    how, repo_id, files = uploads[0]
    assert how == "upload_folder" and repo_id == "someone/tiny-scratch-bert"
    assert {"model.safetensors", "config.json", "modeling_bert.py", "tokenizer.json", "README.md"} <= set(files)
    card = ModelCard(files["README.md"])
    assert card.data.library_name == "transformers" and card.data.model_name == "tiny-scratch-bert"
    assert "hf_scratch" in card.data.tags and "## Training procedure" in card.text  # ours, not the Trainer's
    assert files["README.md"] == (tmp_path / "out" / "README.md").read_text()


def _plays_from_the_hub(monkeypatch, hub_id):
    """datasets.load_dataset answers ``hub_id`` with the embedded plays (the hub is not reachable)."""
    import datasets

    load_dataset = datasets.load_dataset
    plays = str(REPO / "training" / "data" / "plays")
    monkeypatch.setattr(
        datasets,
        "load_dataset",
        lambda path, *args, **kwargs: load_dataset(plays if path == hub_id else path, *args, **kwargs),
    )


def test_card_names_hub_datasets_only(tmp_path, monkeypatch):
    """--dataset_name of a hub dataset fills the card's `datasets` and model-index (the hub expects dataset ids
    there); a local folder given as --dataset_name, like local files and the embedded data, leaves both out."""
    from huggingface_hub import ModelCard

    _plays_from_the_hub(monkeypatch, "someone/plays")
    results = run_classification.main(
        [
            "--model_type",
            "scratch-bert",
            "--dataset_name",
            "someone/plays",
            "--output_dir",
            str(tmp_path / "hub"),
            *TINY,
        ]
    )
    data = ModelCard.load(tmp_path / "hub" / "README.md").data
    assert data.datasets == ["someone/plays"]
    assert {(r.dataset_type, r.dataset_name, r.task_type) for r in data.eval_results} == {
        ("someone/plays", "someone/plays", "text-classification")
    }
    assert {r.metric_type: r.metric_value for r in data.eval_results} == pytest.approx(
        {"accuracy": results["eval"]["eval_accuracy"], "f1": results["eval"]["eval_f1"]}
    )

    local = str(REPO / "training" / "data" / "plays")
    results = run_classification.main(
        ["--model_type", "scratch-bert", "--dataset_name", local, "--output_dir", str(tmp_path / "local"), *TINY]
    )
    assert results["eval"]["eval_accuracy"] >= 0.0  # read through datasets.load_dataset
    card = ModelCard.load(tmp_path / "local" / "README.md")
    assert card.data.datasets is None and card.data.eval_results is None
    assert local in card.text  # the text still says what the data was


def test_card_base_model_is_the_fine_tuned_hub_model(tmp_path, monkeypatch, run_outputs):
    """Fine-tuning a hub model sets base_model to its id; fine-tuning a local folder sets the hub id it records
    (its own card's base_model, or the repo of a hub cache snapshot) or nothing."""
    import shutil

    import huggingface_hub
    from huggingface_hub import ModelCard

    published = tmp_path / "published"
    shutil.copytree(
        run_outputs("mlm-bert")["output_dir"], published, ignore=shutil.ignore_patterns("checkpoint-*", "runs")
    )
    monkeypatch.setattr(
        huggingface_hub,
        "snapshot_download",
        lambda repo_id, **kwargs: str(published) if repo_id == "someone/tiny-bert" else None,
    )
    args = [*[a for a in TINY if a not in ("--model_size", "tiny")], "--max_steps", "1"]
    run_mlm.main(["--model_name_or_path", "someone/tiny-bert", "--output_dir", str(tmp_path / "a"), *args])
    assert ModelCard.load(tmp_path / "a" / "README.md").data.base_model == "someone/tiny-bert"
    run_mlm.main(["--model_name_or_path", str(tmp_path / "a"), "--output_dir", str(tmp_path / "b"), *args])
    assert ModelCard.load(tmp_path / "b" / "README.md").data.base_model == "someone/tiny-bert"  # recorded by a's card

    from training.arguments import ModelArguments
    from training.model_card import base_model_id

    assert base_model_id(ModelArguments(model_name_or_path=str(published))) is None  # trained from scratch, unpublished
    snapshot = tmp_path / "hub" / "models--someone--tiny-bert" / "snapshots" / "0123abcd"
    shutil.copytree(published, snapshot)
    assert base_model_id(ModelArguments(model_name_or_path=str(snapshot))) == "someone/tiny-bert"
    assert base_model_id(ModelArguments(model_type="scratch-bert")) is None

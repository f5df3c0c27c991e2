"""The model card a run writes beside its weights (``README.md``): ``model_cards/<family>.md`` filled with the
config, hyperparameters and metrics (``write_model_card``), with hub metadata that names only hub ids — the
training data (``hub_dataset_id``) and the model fine-tuned (``base_model_id``) — and the class the saved folder
names (``hf_scratch.tools.trainer.saved_class``). ``CardInfo`` is what each script says about its task.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import transformers
from transformers import PreTrainedModel, PreTrainedTokenizerBase, TrainingArguments

import hf_scratch
from hf_scratch.tools.trainer import saved_class
from training.arguments import DataArguments, ModelArguments, family_config, family_of

if TYPE_CHECKING:
    from huggingface_hub import ModelCardData

MODEL_CARDS_DIR = Path(__file__).resolve().parent.parent / "model_cards"


@dataclass
class CardInfo:
    """What the model card says about this run besides the config and metrics."""

    task: str  # e.g. "masked language modelling"
    pipeline_tag: str  # e.g. "fill-mask"
    dataset: str  # e.g. "hf_scratch embedded shakespeare"
    metric_names: list[str] = field(default_factory=list)  # e.g. ["perplexity"]
    usage: str = ""  # a short python snippet using the saved model


def is_hub_id(name: str | None) -> bool:
    """Whether ``name`` names a hub repository: not a local path, and a valid repo id ("user/name" or "name")."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if not name or Path(name).exists():
        return False
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def hub_dataset_id(data_args: DataArguments) -> str | None:
    """The hub id of the training data, for the card's ``datasets`` and model-index: --dataset_name when it names a
    hub dataset; None for local files, a local folder or the embedded data (the hub expects dataset ids there, so
    the field is left out; the card's text still says what the data was)."""
    return data_args.dataset_name if is_hub_id(data_args.dataset_name) else None


def base_model_id(model_args: ModelArguments) -> str | list[str] | None:
    """The hub model this run fine-tunes, for the card's ``base_model`` (the hub's model tree): --model_name_or_path
    when it is a hub id. A local folder has no hub id of its own; it gives the one it records, if any: the repo of a
    hub cache snapshot (``…/models--user--name/snapshots/<commit>``), else the ``base_model`` of its own model card
    (the nearest published ancestor). None otherwise, and when training from scratch."""
    name = model_args.model_name_or_path
    if name is None or is_hub_id(name):
        return name
    folder = Path(name).resolve()
    if folder.parent.name == "snapshots" and folder.parent.parent.name.startswith("models--"):
        return folder.parent.parent.name.removeprefix("models--").replace("--", "/")
    card_file = folder / "README.md"
    if not card_file.is_file():
        return None
    from huggingface_hub import ModelCard

    recorded = ModelCard.load(card_file).data.base_model
    ids = [base for base in ([recorded] if isinstance(recorded, str) else recorded or []) if is_hub_id(base)]
    return (ids[0] if len(ids) == 1 else ids) or None


def model_card_data(
    model: PreTrainedModel,
    model_args: ModelArguments,
    data_args: DataArguments,
    training_args: TrainingArguments,
    card: CardInfo,
    eval_metrics: dict[str, float],
) -> ModelCardData:
    """The card's metadata. ``datasets`` and the model-index (its results need a dataset id, as in transformers'
    own cards) only with a hub dataset; ``base_model`` when fine-tuning a hub model (``base_model_id``)."""
    from huggingface_hub import EvalResult, ModelCardData

    family = family_of(model)
    name = (training_args.hub_model_id or Path(str(training_args.output_dir)).name).split("/")[-1]
    dataset = hub_dataset_id(data_args)
    eval_results = [
        EvalResult(
            task_type=card.pipeline_tag,
            dataset_type=dataset,
            dataset_name=dataset,
            dataset_config=data_args.dataset_config_name,
            metric_type=metric,
            metric_value=float(eval_metrics[f"eval_{metric}"]),
        )
        for metric in card.metric_names
        if f"eval_{metric}" in eval_metrics and dataset is not None
    ]
    return ModelCardData(
        library_name="transformers",
        pipeline_tag=card.pipeline_tag,
        tags=["hf_scratch", model.config.model_type, family, "custom_code", "from-scratch"],
        datasets=[dataset] if dataset is not None else None,
        base_model=base_model_id(model_args),
        metrics=list(card.metric_names),
        license="apache-2.0",
        model_name=name,
        eval_results=eval_results or None,
    )


def write_model_card(
    output_dir: str,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    model_args: ModelArguments,
    data_args: DataArguments,
    training_args: TrainingArguments,
    card: CardInfo,
    eval_metrics: dict[str, float],
) -> Path:
    """Fill ``model_cards/<family>.md`` and write ``README.md`` into the output directory."""
    from huggingface_hub import ModelCard

    card_data = model_card_data(model, model_args, data_args, training_args, card, eval_metrics)
    content = ModelCard.from_template(
        card_data,
        model_name=card_data.model_name,
        template_path=str(MODEL_CARDS_DIR / f"{family_of(model)}.md"),
        model_class=saved_class(model).__name__,
        auto_class=_auto_class_of(model),
        task=card.task,
        dataset=card.dataset,
        num_parameters=f"{model.num_parameters():,}",
        architecture=architecture(model),
        hyperparameters=hyperparameters(training_args),
        eval_metrics={k: round(v, 4) if isinstance(v, float) else v for k, v in eval_metrics.items()},
        usage=card.usage,
        tokenizer_class=type(tokenizer).__name__,
        hf_scratch_version=hf_scratch.__version__,
        transformers_version=transformers.__version__,
    )
    path = Path(output_dir) / "README.md"
    content.save(path)
    return path


def hyperparameters(training_args: TrainingArguments) -> dict[str, Any]:
    """The card's table of training hyperparameters."""
    return {
        "learning_rate": training_args.learning_rate,
        "train_batch_size (per device)": training_args.per_device_train_batch_size,
        "gradient_accumulation_steps": training_args.gradient_accumulation_steps,
        "num_train_epochs": training_args.num_train_epochs,
        "max_steps": training_args.max_steps,
        "weight_decay": training_args.weight_decay,
        "warmup_steps": training_args.warmup_steps,
        "lr_scheduler_type": str(getattr(training_args.lr_scheduler_type, "value", training_args.lr_scheduler_type)),
        "seed": training_args.seed,
        "world_size": training_args.world_size,
    }


def architecture(model: PreTrainedModel) -> dict[str, Any]:
    """The card's table of the model's size: the config fields of its family that say it."""
    config = model.config.to_dict()
    names = (
        "vocab_size",
        "hidden_size",
        "d_model",
        "num_hidden_layers",
        "encoder_layers",
        "decoder_layers",
        "num_attention_heads",
        "intermediate_size",
        "hidden_act",
        "max_position_embeddings",
        "attention_window",
        "mem_len",
        "cell_type",
        "attention_type",
    )
    return {k: config[k] for k in names if k in config}


def _auto_class_of(model: PreTrainedModel) -> str:
    """The Auto class of the family's ``default_auto_map`` that loads the saved class (``AutoModel`` if none)."""
    for auto_name, reference in family_config(model.config.model_type).default_auto_map.items():
        if reference.split(".")[-1] == saved_class(model).__name__:
            return auto_name
    return "AutoModel"

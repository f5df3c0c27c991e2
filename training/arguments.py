"""The command line of every training script: the argument dataclasses (``ModelArguments``, ``DataArguments``)
parsed with ``HfArgumentParser`` beside ``TrainingArguments`` / ``Seq2SeqTrainingArguments`` (``parse_arguments``),
with the defaults the scripts change from the Trainer's (one table, ``TRAINER_DEFAULT_OVERRIDES``, which ``--help``
and a run's first lines say), from flags or from one JSON file, and with the flag names of transformers'
examples (``--block_size``, …) mapped onto ours; the checks that fail before any data is read
(``check_common_arguments``, ``check_model_type``); and where ``--model_name_or_path`` is (``checkpoint_folder``:
a local folder, or a hub id downloaded). The ``--output_dir`` rules (resume, overwrite) are in ``checkpoints.py``.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import logging
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import transformers
from transformers import AutoConfig, HfArgumentParser, PreTrainedModel, TrainingArguments
from transformers.hf_argparser import DataClassType

from hf_scratch import FAMILY_CONFIGS
from hf_scratch.configuration_common import SIZE_PRESETS, ScratchConfig
from hf_scratch.convert import REFERENCE_TO_SCRATCH
from hf_scratch.tools.tokenization import TOKENIZER_KINDS
from training.checkpoints import resolve_output_dir

logger = logging.getLogger(__name__)
# model_type → family name (the file suffix of its configuration/modeling pair and of its model card template),
# from the registered config classes
FAMILIES = {config.model_type: config.family_name() for config in FAMILY_CONFIGS}
# extension of --train_file / --validation_file → the datasets builder that reads it
DATA_EXTENSIONS = {"txt": "text", "csv": "csv", "json": "json", "jsonl": "json"}


@dataclass
class ModelArguments:
    _argument_group_name = "model (train from scratch, or fine-tune a checkpoint)"

    model_type: str | None = field(
        default=None,
        metadata={"help": f"Train from scratch: one of {sorted(FAMILIES)} (the script lists the ones it supports)."},
    )
    model_size: str = field(default="tiny", metadata={"help": f"Size preset for --model_type: {sorted(SIZE_PRESETS)}."})
    config_overrides: str | None = field(
        default=None,
        metadata={
            "help": "Config fields to override when training from scratch, e.g. 'hidden_size=128,hidden_act=relu'."
        },
    )
    model_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "Fine-tune a checkpoint directory (or hub id): an hf_scratch checkpoint, or a reference "
            "checkpoint (bert, gpt2, openai-gpt, marian, longformer, transfo-xl) converted on the fly."
        },
    )
    tokenizer_name: str | None = field(
        default=None, metadata={"help": "A tokenizer directory or hub id to use instead of training one."}
    )
    tokenizer_type: str | None = field(
        default=None,
        metadata={"help": "Tokenizer to train when none is given: wordpiece, bpe or char (default: the family's)."},
    )
    tokenizer_vocab_size: int = field(
        default=2000, metadata={"help": "Vocabulary size of a trained WordPiece/BPE tokenizer."}
    )
    attn_implementation: str | None = field(default=None, metadata={"help": "eager or sdpa (default: the model's)."})
    cache_dir: str | None = field(
        default=None,
        metadata={
            "help": "Where models, tokenizers and datasets downloaded from the hub are cached "
            "(default: the Hugging Face cache)."
        },
    )
    token: str | None = field(
        default=None,
        metadata={
            "help": "Hub token for private or gated models, tokenizers and datasets "
            "(default: the one `hf auth login` saved)."
        },
    )
    trust_remote_code: bool = field(
        default=False,
        metadata={
            "help": "Run the configuration / modeling / tokenizer code a checkpoint carries (only for repositories "
            "you trust). datasets no longer runs dataset loading scripts at all."
        },
    )


@dataclass
class DataArguments:
    _argument_group_name = "data (local files, a hub dataset, or the small dataset embedded for this script)"

    dataset_name: str | None = field(default=None, metadata={"help": "A dataset on the hub, read with `datasets`."})
    dataset_config_name: str | None = field(default=None, metadata={"help": "Its configuration name."})
    train_file: str | None = field(default=None, metadata={"help": "A local training file: txt, csv, json or jsonl."})
    validation_file: str | None = field(
        default=None, metadata={"help": "A local validation file: txt, csv, json or jsonl."}
    )
    validation_split_percentage: int = field(
        default=10,
        metadata={"help": "Percentage of the training data held out for evaluation when there is no validation set."},
    )
    max_seq_length: int = field(default=128, metadata={"help": "Maximum tokens per example after tokenization."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep only this many training examples."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Keep only this many evaluation examples."})
    preprocessing_num_workers: int | None = field(
        default=None,
        metadata={"help": "Processes that tokenize the data (the num_proc of datasets' map; default: one)."},
    )
    streaming: bool = field(
        default=False,
        metadata={
            "help": "Stream the data (datasets' IterableDataset) instead of loading it: run_clm (GPT) and run_mlm; "
            "needs --max_steps and a tokenizer (--tokenizer_name or --model_name_or_path)."
        },
    )
    overwrite_output_dir: bool = field(
        default=False,
        metadata={
            "help": "Train from scratch into a non-empty --output_dir (its files are overwritten and its checkpoint-* "
            "folders removed when training starts) instead of resuming from its last checkpoint."
        },
    )


# --learning_rate when none is given. From scratch: the family's rate for --model_size (its config's
# ``learning_rates``: the Trainer's 5e-5 leaves a 60-step tiny run at ln(vocabulary)). A checkpoint given by
# --model_name_or_path is fine-tuned at 5e-5 (BERT's fine-tuning range 2e-5 – 5e-5, the Trainer's default).
FINE_TUNING_LEARNING_RATE = 5e-5
TRACEBACK_FLAG = "--traceback"  # the CLI (``run_script``) shows the traceback of an error only with this flag


def default_learning_rate(model_type: str | None, model_size: str) -> float:
    """The learning rate of a run that gives no --learning_rate (the family config's ``learning_rates``)."""
    if model_type not in FAMILIES:
        return FINE_TUNING_LEARNING_RATE
    return family_config(model_type).learning_rates.get(model_size, FINE_TUNING_LEARNING_RATE)


def family_config(model_type: str | None) -> type[ScratchConfig]:
    """The registered config class of an hf_scratch ``model_type`` (``hf_scratch.FAMILY_CONFIGS``)."""
    for config in FAMILY_CONFIGS:
        if config.model_type == model_type:
            return config
    raise ValueError(f"{model_type!r} is not an hf_scratch model type: the registered ones are {sorted(FAMILIES)}.")


def short_float(value: float) -> str:
    """1e-3, 2.5e-4 (not 0.001, 0.00025)."""
    mantissa, exponent = f"{value:e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


# ----------------------------------------------------------------------------------------------------------------
# The defaults the scripts change from the Trainer's
# ----------------------------------------------------------------------------------------------------------------

TRAINERS = object()  # what an override's ``value`` gives for a run that keeps the Trainer's default


@dataclass(frozen=True)
class Run:
    """What the scripts' defaults depend on: the script, the flags the run gives and — once parsed — the values of
    its model, data and script arguments, by field name."""

    script: str
    given: frozenset[str]
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Override:
    """A default of the scripts that differs from the Trainer's (its ``TrainingArguments`` field default). ``ours``
    says it in words (``{script}``: the script's name) for ``--help`` and the run's first lines; ``value`` gives it
    for a run, or ``TRAINERS`` where that run keeps the Trainer's. ``before_parsing``: ``TrainingArguments``'s
    ``__post_init__`` must see it (it sets up the device and fills in the output folder), so the parser gets it as if
    given; the others are set on the parsed arguments."""

    ours: str
    value: Callable[[Run], object]
    before_parsing: bool = False


# Every default the scripts change from the Trainer's: field → ours. A flag the run gives wins. --help says ours and
# the Trainer's in the flag's help (``describe_overrides``) and every run prints one line per entry in its first lines
# (``changed_default_lines``). The fields only Seq2SeqTrainingArguments has count for run_translation alone.
TRAINER_DEFAULT_OVERRIDES: dict[str, Override] = {
    "output_dir": Override("outputs/{script}", lambda run: str(Path("outputs") / run.script), before_parsing=True),
    "do_train": Override(
        "true unless --do_eval alone is given", lambda run: TRAINERS if "do_eval" in run.given else True
    ),
    "do_eval": Override(
        "true unless --do_train alone is given", lambda run: TRAINERS if "do_train" in run.given else True
    ),
    "learning_rate": Override(
        "by family and --model_size when training from scratch, "
        f"{short_float(FINE_TUNING_LEARNING_RATE)} when fine-tuning --model_name_or_path",
        lambda run: default_learning_rate(run.arguments["model_type"], run.arguments["model_size"]),
    ),
    "report_to": Override(
        "tensorboard when it is installed, else none", lambda run: ["tensorboard"] if tensorboard_installed() else []
    ),
    "dataloader_pin_memory": Override(  # torch warns that pinning needs an accelerator
        "false without an accelerator", lambda run: TRAINERS if accelerator_available() else False, before_parsing=True
    ),
    "use_cpu": Override(  # the Trainer makes CPU processes one DDP run (over gloo) only with use_cpu
        "true when several processes are launched without an accelerator",
        lambda run: True if launched_processes() > 1 and not accelerator_available() else TRAINERS,
        before_parsing=True,
    ),
    "predict_with_generate": Override("true", lambda run: True, before_parsing=True),
    "generation_max_length": Override(
        "--max_target_length", lambda run: run.arguments.get("max_target_length", TRAINERS)
    ),
}


def trainer_default_overrides(training_class: type[TrainingArguments]) -> dict[str, Override]:
    """The entries of ``TRAINER_DEFAULT_OVERRIDES`` that are fields of ``training_class``."""
    fields = {declared.name for declared in dataclasses.fields(training_class)}
    return {name: override for name, override in TRAINER_DEFAULT_OVERRIDES.items() if name in fields}


def our_defaults(training_class: type[TrainingArguments], run: Run, before_parsing: bool) -> dict[str, object]:
    """Our default of each field of ``training_class`` that the run does not give, where ours applies to the run (its
    ``value`` is not ``TRAINERS``): those the parser must get (``before_parsing``), or those set on the parsed
    arguments."""
    ours = {}
    for name, override in trainer_default_overrides(training_class).items():
        if override.before_parsing == before_parsing and name not in run.given:
            value = override.value(run)
            if value is not TRAINERS:
                ours[name] = value
    return ours


def trainer_default(training_class: type[TrainingArguments], name: str) -> object:
    """The default of the field ``name`` as ``training_class`` declares it, read at run time (``output_dir``'s is
    None: the Trainer then writes to ``trainer_output``)."""
    declared = next(declared for declared in dataclasses.fields(training_class) if declared.name == name)
    if declared.default_factory is not dataclasses.MISSING:
        return declared.default_factory()
    return declared.default


def shown(value: object) -> str:
    """A value as it is typed on the command line: 1e-3 (not 0.001), tensorboard (not ['tensorboard']), none for
    an empty --report_to."""
    if isinstance(value, list):
        return " ".join(str(item) for item in value) or "none"
    if isinstance(value, float):
        return short_float(value)
    return str(value)


def override_note(name: str, script: str, training_class: type[TrainingArguments]) -> str:
    """The words "default here: …; Trainer's default: …" for the field ``name`` of ``TRAINER_DEFAULT_OVERRIDES``."""
    ours = TRAINER_DEFAULT_OVERRIDES[name].ours.format(script=script)
    return f"default here: {ours}; Trainer's default: {shown(trainer_default(training_class, name))}"


def changed_default_lines(
    script: str, training_args: TrainingArguments, given: Iterable[str], ours: Iterable[str]
) -> list[str]:
    """One line per default the script changes from the Trainer's: the value this run has, whether the run gave it,
    got ours (``ours``: the fields set from ``TRAINER_DEFAULT_OVERRIDES``) or kept the Trainer's, and both
    defaults."""
    training_class = type(training_args)
    lines = []
    for name in trainer_default_overrides(training_class):
        how = ", given" if name in given else "" if name in ours else ", the Trainer's default in this run"
        value = shown(getattr(training_args, name))
        lines.append(f"{script}.py: --{name} {value}{how} ({override_note(name, script, training_class)})")
    return lines


def tensorboard_installed() -> bool:
    """Whether the Trainer can log to TensorBoard (``transformers.integrations.is_tensorboard_available``)."""
    from transformers.integrations import is_tensorboard_available

    return bool(is_tensorboard_available())


# ----------------------------------------------------------------------------------------------------------------
# The parser and its --help
# ----------------------------------------------------------------------------------------------------------------


class ScriptHelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The script's docstring as written (its examples stay lines), and each flag's default — unless its help
    already says what the default is."""

    def _format_action_invocation(self, action: argparse.Action) -> str:
        """One spelling per flag (HfArgumentParser also accepts --max-steps for --max_steps: not listed twice)."""
        if len(action.option_strings) > 1:
            action = copy.copy(action)
            action.option_strings = [s for s in action.option_strings if "-" not in s[2:]] or action.option_strings[:1]
        return super()._format_action_invocation(action)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if "default:" in (action.help or "") or "(default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class ScriptArgumentParser(HfArgumentParser):
    """``HfArgumentParser`` whose errors are ValueErrors (``run_script`` prints them as one line and exits with
    status 2, as argparse does; a caller of ``main(args)`` gets the ValueError)."""

    def error(self, message: str) -> NoReturn:
        raise ValueError(message)


def build_parser(
    script: str,
    extra_dataclasses: tuple[type[Any], ...] = (),
    training_class: type[TrainingArguments] = TrainingArguments,
    aliases: dict[str, str] | None = None,
    doc: str | None = None,
    supported: Iterable[str] | None = None,
) -> ScriptArgumentParser:
    """The parser of a training script, laid out for ``--help``: a short usage line, the script's docstring (what it
    does and example commands), then its own flags, the model and data flags, and last the ~150 flags of
    ``TrainingArguments`` in a group of their own. ``supported`` model types show in ``--model_type``'s metavar;
    ``aliases`` are the flag names of transformers' examples for one of our fields (``{"block_size":
    "max_seq_length"}``), shown with their own metavar. Each default of ``TRAINER_DEFAULT_OVERRIDES`` is in its
    flag's help, with the Trainer's."""
    for dtype in extra_dataclasses:  # the script's own flags get a group of their own (listed first)
        if not hasattr(dtype, "_argument_group_name"):
            dtype._argument_group_name = f"{script}"
    parser = ScriptArgumentParser(
        [DataClassType(dtype) for dtype in (*extra_dataclasses, ModelArguments, DataArguments, training_class)],
        prog=f"{script}.py",
        usage=f"python training/{script}.py (--model_type TYPE | --model_name_or_path PATH) [flags]\n"
        f"       python training/{script}.py args.json",
        description=(doc or "").strip() + f"\n\nBad input stops the script with a one-line error (exit status 2); "
        f"{TRACEBACK_FLAG} shows where it failed.",
        formatter_class=ScriptHelpFormatter,
    )
    describe_model_flags(parser, None if supported is None else list(supported))
    add_aliases(parser, aliases or {})
    describe_overrides(parser, script, training_class)
    put_trainer_flags_last(parser, training_class)
    return parser


def describe_model_flags(parser: ScriptArgumentParser, supported: list[str] | None) -> None:
    """The metavars of the model flags (the choices), the ``supported`` model types, and the learning rates by
    family and size (of the ``supported`` families)."""
    actions = {action.dest: action for action in parser._actions}
    actions["model_size"].metavar = "{" + ",".join(SIZE_PRESETS) + "}"
    actions["tokenizer_type"].metavar = "{" + ",".join(TOKENIZER_KINDS) + "}"
    actions["attn_implementation"].metavar = "{eager,sdpa}"
    if supported is not None:
        actions["model_type"].metavar = "{" + ",".join(supported) + "}"
        actions["model_type"].help = f"Train from scratch: {', '.join(supported)}."
    rates = "; ".join(
        f"{model_type}: "
        + ", ".join(f"{size} {short_float(rate)}" for size, rate in family_config(model_type).learning_rates.items())
        for model_type in (supported or FAMILIES)
        if model_type in FAMILIES
    )
    actions["learning_rate"].help = f"The initial learning rate of AdamW. Rates by family and size: {rates}."


def add_aliases(parser: ScriptArgumentParser, aliases: dict[str, str]) -> None:
    """The flag names of transformers' examples (``{"block_size": "max_seq_length"}``), in the data flags."""
    actions = {action.dest: action for action in parser._actions}
    data_group = next(group for group in parser._action_groups if group.title == DataArguments._argument_group_name)
    for alias, target in aliases.items():
        data_group.add_argument(
            f"--{alias}",
            dest=target,
            type=actions[target].type,  # type: ignore[arg-type]  # a field's type (HfArgumentParser always sets it)
            metavar=alias.upper(),
            default=argparse.SUPPRESS,
            help=f"The name transformers' example scripts use for --{target}: give one of the two.",
        )


def describe_overrides(parser: ScriptArgumentParser, script: str, training_class: type[TrainingArguments]) -> None:
    """Each flag whose default ``TRAINER_DEFAULT_OVERRIDES`` changes says so in its help, with the Trainer's."""
    for name in trainer_default_overrides(training_class):
        action = next(action for action in parser._actions if f"--{name}" in action.option_strings)
        action.help = f"{(action.help or '').rstrip()} ({override_note(name, script, training_class)})"


def put_trainer_flags_last(parser: ScriptArgumentParser, training_class: type[TrainingArguments]) -> None:
    """Our groups first with -h and --traceback, the Trainer's flags (argparse's default "options" group) last."""
    first = parser._action_groups[2] if len(parser._action_groups) > 2 else parser._optionals
    first.add_argument(
        TRACEBACK_FLAG,
        action="store_true",
        default=argparse.SUPPRESS,
        help="On an error, show the Python traceback instead of the one-line message.",
    )
    trainer_group = parser._optionals
    trainer_group.title = f"Trainer arguments (transformers.{training_class.__name__})"
    trainer_group.description = (
        "The ones most runs set: --output_dir, --max_steps, --learning_rate, --per_device_train_batch_size, "
        "--eval_strategy, --save_steps, --use_cpu."
    )
    help_action = next(action for action in parser._actions if action.dest == "help")
    trainer_group._group_actions.remove(help_action)
    first._group_actions.insert(0, help_action)
    parser._action_groups.remove(trainer_group)
    parser._action_groups.append(trainer_group)


# ----------------------------------------------------------------------------------------------------------------
# Parsing
# ----------------------------------------------------------------------------------------------------------------


def parse_arguments(
    script: str,
    extra_dataclasses: tuple[type[Any], ...] = (),
    args: list[str] | None = None,
    training_class: type[TrainingArguments] = TrainingArguments,
    aliases: dict[str, str] | None = None,
    doc: str | None = None,
    supported: Iterable[str] | None = None,
) -> tuple[Any, ...]:
    """Parse ``args`` (default: ``sys.argv[1:]``) into (ModelArguments, DataArguments, *extra, TrainingArguments).

    ``args`` are flags, or — as transformers' example scripts accept — the path of a single ``.json`` file holding
    an object of arguments (``{"model_type": "scratch-gpt", "max_steps": 200}``), read with ``HfArgumentParser``.
    ``aliases`` name fields the way transformers' examples do (``{"block_size": "max_seq_length"}``): either name
    sets the field, both at once is an error. ``doc`` (the script's docstring) and ``supported`` (its model types)
    make its ``--help`` (``build_parser``). Where the run does not give them, the defaults of
    ``TRAINER_DEFAULT_OVERRIDES`` replace the Trainer's; the main process prints one line about each. Several CPU
    processes that our ``--use_cpu`` joins into one DDP run say so; ``--output_dir`` is checked by
    ``resolve_output_dir`` (a rerun resumes). Bad values raise ValueError, the parser's own errors (unknown flags, a
    value of the wrong type) too."""
    args = [arg for arg in (sys.argv[1:] if args is None else args) if arg != TRACEBACK_FLAG]
    aliases = dict(aliases or {})
    values = read_json_arguments(args[0]) if len(args) == 1 and args[0].endswith(".json") else None
    given = frozenset(values) if values is not None else flags_given(args)
    ours = our_defaults(training_class, Run(script, given), before_parsing=True)
    parser = build_parser(script, extra_dataclasses, training_class, aliases, doc, supported)
    parsed = parse_with_defaults(parser, args, values, aliases, ours)
    check_aliases(aliases, given)
    n_extra = len(extra_dataclasses)
    parsed = (parsed[n_extra], parsed[n_extra + 1], *parsed[:n_extra], parsed[-1])
    model_args, data_args, training_args = parsed[0], parsed[1], parsed[-1]
    arguments = {name: value for namespace in parsed[:-1] for name, value in vars(namespace).items()}
    for name, value in our_defaults(training_class, Run(script, given, arguments), before_parsing=False).items():
        setattr(training_args, name, value)
        ours[name] = value
    check_common_arguments(model_args, data_args, training_args)
    check_distributed(training_args)
    if "use_cpu" in ours and training_args.process_index == 0:
        logger.warning(
            f"{script}.py: {launched_processes()} processes on a machine without an accelerator: training them as one "
            f"{launched_processes()}-process DDP run on CPU over gloo (--use_cpu, turned on for you)."
        )
    resolve_output_dir(data_args, training_args)
    if training_args.process_index == 0:
        print("\n".join(changed_default_lines(script, training_args, given, ours)), flush=True)
    transformers.set_seed(training_args.seed)  # before the model is initialised, so runs are reproducible
    return parsed


def flags_given(args: list[str]) -> frozenset[str]:
    """The fields a command line gives: ``--max_steps 5``, ``--max-steps=5`` and ``--do_train`` name theirs."""
    return frozenset(arg[2:].split("=", 1)[0].replace("-", "_") for arg in args if arg.startswith("--"))


def parse_with_defaults(
    parser: ScriptArgumentParser,
    args: list[str],
    values: dict[str, Any] | None,
    aliases: dict[str, str],
    defaults: dict[str, object],
) -> tuple[Any, ...]:
    """The dataclasses of the flags ``args``, or of ``values`` (the object of a JSON file) when given, with the
    ``defaults`` the run does not give added as if given."""
    if values is not None:
        values = {aliases.get(name, name): value for name, value in values.items()}
        return parser.parse_dict({**values, **defaults})
    args = args + [item for name, value in defaults.items() for item in (f"--{name}", str(value))]
    *parsed, unknown = parser.parse_args_into_dataclasses(args=args, return_remaining_strings=True)
    if unknown:
        raise ValueError(f"unrecognized arguments: {' '.join(unknown)} (--help lists the flags)")
    return tuple(parsed)


def check_aliases(aliases: dict[str, str], given: frozenset[str]) -> None:
    """A field named twice, by its name and by the name transformers' examples use, is refused."""
    for alias, target in aliases.items():
        if alias in given and target in given:
            raise ValueError(
                f"--{alias} and --{target} are the same setting (the first is the name transformers' examples use): "
                "give one of them."
            )


def accelerator_available() -> bool:
    """Whether torch sees a GPU (CUDA/ROCm, or another accelerator torch knows), where pinned memory helps."""
    import torch

    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and hasattr(accelerator, "is_available"):
        return bool(accelerator.is_available())
    return torch.cuda.is_available()


def launched_processes() -> int:
    """How many processes the launcher started for this run (``WORLD_SIZE``: ``accelerate launch``, ``torchrun``)."""
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def check_distributed(training_args: TrainingArguments) -> None:
    """Refuse a run launched as several processes that the Trainer would not join into one distributed run: each
    process would train its own copy of the model and write it into the same folder. On a machine without an
    accelerator, the Trainer joins the processes (DDP over gloo) only with ``use_cpu``, which ``parse_arguments``
    turns on there unless ``--use_cpu false`` is given."""
    from transformers.training_args import ParallelMode

    world_size = launched_processes()
    if world_size <= 1 or training_args.parallel_mode == ParallelMode.DISTRIBUTED:
        return
    fix = (
        "drop --use_cpu false (without an accelerator the Trainer makes the processes one DDP run over gloo only "
        "with --use_cpu)"
        if not accelerator_available()
        else "check that the launcher and the Trainer agree on the devices"
    )
    raise ValueError(
        f"This run was launched as {world_size} processes, but the Trainer would not make them one distributed "
        f"run (parallel mode {training_args.parallel_mode.value}): each process would train its own copy into "
        f"the same --output_dir. To train with {world_size} processes, {fix}; to train with one, run the script "
        "without the launcher."
    )


def run_script(main: Callable[[list[str]], object], argv: list[str] | None = None) -> None:
    """``python training/<script>.py …``: run the script's ``main``. Bad input (a ValueError: the scripts raise one
    naming the flag and the fix, the parser raises one for unknown flags and malformed values) ends the run with
    that message on one line of stderr and exit status 2, as argparse does; ``--traceback`` (or
    ``HF_SCRATCH_TRACEBACK=1``) shows the traceback instead."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        main(argv)
    except ValueError as error:
        if TRACEBACK_FLAG in argv or os.environ.get("HF_SCRATCH_TRACEBACK", "") not in ("", "0"):
            raise
        message = " ".join(str(error).split())
        print(f"{Path(sys.argv[0]).name}: error: {message}", file=sys.stderr)
        raise SystemExit(2) from None


def read_json_arguments(path: str) -> dict[str, Any]:
    """The object of arguments in the JSON file ``path``."""
    try:
        values = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"Cannot read the arguments file {path!r}: {error}") from error
    if not isinstance(values, dict):
        raise ValueError(
            f'The arguments file {path!r} must hold a JSON object of arguments, e.g. {{"max_steps": 200}}; '
            f"got {type(values).__name__}."
        )
    return values


def check_common_arguments(
    model_args: ModelArguments, data_args: DataArguments, training_args: TrainingArguments
) -> None:
    if model_args.model_type is None and model_args.model_name_or_path is None:
        raise ValueError(
            "Give --model_type (train from scratch, e.g. --model_type scratch-bert) "
            "or --model_name_or_path (fine-tune a checkpoint)."
        )
    if model_args.model_type is not None and model_args.model_name_or_path is not None:
        raise ValueError("Give either --model_type (from scratch) or --model_name_or_path (a checkpoint), not both.")
    if model_args.model_size not in SIZE_PRESETS:
        raise ValueError(
            f"--model_size {model_args.model_size!r} is not a preset: choose one of {sorted(SIZE_PRESETS)}."
        )
    if model_args.tokenizer_type not in (None, *TOKENIZER_KINDS):
        raise ValueError(f"--tokenizer_type {model_args.tokenizer_type!r} is unknown: choose one of {TOKENIZER_KINDS}.")
    if data_args.dataset_name is not None and (data_args.train_file or data_args.validation_file):
        raise ValueError("Give either --dataset_name or --train_file/--validation_file, not both.")
    for name in ("train_file", "validation_file"):
        path = getattr(data_args, name)
        if path is None:
            continue
        extension = path.rsplit(".", 1)[-1].lower()
        if extension not in DATA_EXTENSIONS:
            raise ValueError(
                f"--{name} {path!r}: unsupported extension .{extension}; use one of {sorted(DATA_EXTENSIONS)}."
            )
        if not Path(path).is_file() or not os.access(path, os.R_OK):
            raise ValueError(f"--{name} {path!r} does not exist or cannot be read.")
    if data_args.max_seq_length <= 0:
        raise ValueError(f"--max_seq_length must be positive, got {data_args.max_seq_length}.")
    if data_args.preprocessing_num_workers is not None and data_args.preprocessing_num_workers < 1:
        raise ValueError(f"--preprocessing_num_workers must be at least 1, got {data_args.preprocessing_num_workers}.")
    if data_args.streaming:
        if model_args.tokenizer_name is None and model_args.model_name_or_path is None:
            raise ValueError(
                "--streaming cannot train a tokenizer on a stream: give --tokenizer_name (or --model_name_or_path)."
            )
        if training_args.do_train and training_args.max_steps <= 0:
            raise ValueError(
                "--streaming needs --max_steps: a stream has no length, so the Trainer cannot count epochs."
            )


def check_model_type(model_args: ModelArguments, supported: Iterable[str]) -> str:
    """The hf_scratch model type this run trains (a reference checkpoint's type mapped to ours); the script must
    support it and hf_scratch must register it. ``--model_type`` names one of ours (``--model_type gpt2``, the
    reference's name, is refused with the flag that converts the reference: ``--model_name_or_path gpt2``)."""
    supported = list(supported)
    if model_args.model_type is not None and model_args.model_type not in supported:
        raise ValueError(unsupported_model_type(model_args.model_type, supported))
    model_type = model_args.model_type or checkpoint_model_type(model_args)
    scratch_type = REFERENCE_TO_SCRATCH.get(model_type or "", model_type)
    if scratch_type is None or scratch_type not in supported:
        raise ValueError(f"This script trains {supported}; got model type {model_type!r}.")
    try:
        AutoConfig.for_model(scratch_type)
    except ValueError as error:
        raise ValueError(f"{scratch_type} is not registered by this hf_scratch installation ({error}).") from None
    return scratch_type


def unsupported_model_type(model_type: str, supported: list[str]) -> str:
    """The error for a ``--model_type`` that is not one of the script's: our types, and how to start from a reference
    checkpoint instead (``--model_name_or_path``, converted on the fly)."""
    converts = REFERENCE_TO_SCRATCH.get(model_type) in supported
    return (
        f"--model_type {model_type!r} is not one of this script's model types: it trains {supported} from scratch. "
        f"To fine-tune {f'the reference {model_type}' if converts else 'a checkpoint'} instead, give "
        f"--model_name_or_path {model_type if converts else 'PATH'} (a folder or hub id; reference checkpoints — "
        f"{', '.join(REFERENCE_TO_SCRATCH)} — are converted to hf_scratch on the fly)."
    )


def hub_options(model_args: ModelArguments) -> dict[str, Any]:
    """--cache_dir and --token, for every download (models, tokenizers, datasets)."""
    return {"cache_dir": model_args.cache_dir, "token": model_args.token}


def checkpoint_folder(model_args: ModelArguments) -> str | None:
    """The local folder of --model_name_or_path: the folder itself, or a hub id downloaded (``snapshot_download``,
    with --cache_dir / --token); conversion of reference checkpoints reads files."""
    name = model_args.model_name_or_path
    if name is None or Path(name).is_dir():
        return name
    from huggingface_hub import snapshot_download

    try:
        return snapshot_download(name, **hub_options(model_args))
    except (OSError, ValueError) as error:  # not found, offline, invalid id
        raise ValueError(
            f"--model_name_or_path {name!r} is neither a local folder nor a model that can be downloaded "
            f"from the hub: {error}"
        ) from error


def checkpoint_model_type(model_args: ModelArguments) -> str | None:
    """The ``model_type`` in the config.json of --model_name_or_path (None when training from scratch)."""
    folder = checkpoint_folder(model_args)
    if not folder:
        return None
    config_file = Path(folder) / "config.json"
    if not config_file.is_file():
        raise ValueError(
            f"--model_name_or_path {model_args.model_name_or_path!r} has no config.json: give a model folder or hub id."
        )
    check_weights_file(model_args.model_name_or_path, Path(folder))
    return json.loads(config_file.read_text())["model_type"]


def check_weights_file(name: str | None, folder: Path) -> None:
    """A checkpoint folder must hold its weights in one of the files ``from_pretrained`` reads (safetensors or
    PyTorch, single or sharded)."""
    from transformers.utils import SAFE_WEIGHTS_INDEX_NAME, SAFE_WEIGHTS_NAME, WEIGHTS_INDEX_NAME, WEIGHTS_NAME

    names = (SAFE_WEIGHTS_NAME, SAFE_WEIGHTS_INDEX_NAME, WEIGHTS_NAME, WEIGHTS_INDEX_NAME)
    if not any((folder / weights).is_file() for weights in names):
        raise ValueError(
            f"--model_name_or_path {name!r} has a config.json but no weights file ({', '.join(names)}): the save or "
            "download did not finish. Save the model again (save_pretrained, or rerun the training script) or "
            "download it again."
        )


def family_of(model: PreTrainedModel) -> str:
    """The family name of an hf_scratch model (``FAMILIES``)."""
    return FAMILIES[model.config.model_type]

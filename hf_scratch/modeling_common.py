"""The boundary with transformers: everything that depends on how a transformers release calls a model, in one place.

transformers renames what it passes to ``forward`` and which hooks ``generate`` calls from one minor release to the
next (5.24, for instance, passes the cache as ``cache=`` where 5.0–5.23 passed ``past_key_values=``, names the output
field ``cache`` instead of ``past_key_values`` and changed the signature of ``create_masks_for_generate``). The
family files keep the papers' code and go through this module for:

- ``ScratchPreTrainedModel``: the base class of every family (attention kernels checked when the model is built,
  readable errors for broken checkpoints);
- ``normalise_inputs``: the decorator on every public ``forward``. It binds positional arguments to their names,
  takes the cache under either release's name (from 5.24 on, the old name ``past_key_values`` warns that it is
  deprecated, as transformers' own models do), fills ``output_attentions`` / ``output_hidden_states`` /
  ``use_cache`` from the config when they are not given, applies ``return_dict``, and applies the one rule for
  arguments below — nothing a caller passes is silently lost;
- ``already_normalised``: inputs are normalised once, at the public edge. A head's public forward has normalised its
  inputs when it calls its base model (or an encoder-decoder its encoder and decoder), so it says so:
  ``self.model(input_ids=…, past_key_values=…, use_cache=use_cache, …, **already_normalised())``. The callee's
  decorator then runs the forward body as it is — no binding, refusal, flag resolution, cache renaming or warning —
  while the call still goes through the module's ``__call__``, so that hooks (FSDP's unshard, accelerate's device
  map, forward hooks, peft) see it. The caller passes every argument by keyword under the forward's own names (the
  cache as ``past_key_values``), the flags as bools, and gets a ``ModelOutput`` back; what the head has validated
  (``check_one_input``, the vocabulary, the mask) the body does not validate again;
- ``cache_output`` / ``returned_cache``: the output field holding the cache, under the installed release's name;
- ``ScratchGenerationMixin``: the hooks ``generate`` calls (the static cache's mask, carrying a family's own decoding
  state such as Transformer-XL's memory between steps), for whichever supported release is installed;
- ``DecodingState``: what ``generate`` reads of such a state, so that it carries it as a cache and a later call
  continues from the state an earlier one returned;
- ``DecoderInputsFromLabelsMixin``: the hook ``DataCollatorForSeq2Seq`` calls on the encoder-decoders to build the
  decoder inputs from the labels.

The encoder-decoders' generation head is ``heads.Seq2SeqLMHead``.

The one rule for arguments. Every public forward accepts every name its transformers counterpart accepts in the
installed release, with the same meaning: the parameters of the counterpart's forward, of its base model's forward
(transformers' heads hand their ``**kwargs`` on to it) and the fields of the release's ``TransformersKwargs``. The
counterpart is the class the converters map to (``ScratchBertForMaskedLM`` ↔ ``BertForMaskedLM``, ``ScratchGPT*`` ↔
``GPT2*`` and ``OpenAIGPT*``, the encoder-decoder ↔ ``Marian*``); for the classes transformers 5 has none of, the
release's nearest class of the same task (Transformer-XL ↔ ``GPT2Model`` / ``GPT2LMHeadModel``, the RNN ↔
``MarianModel`` / ``MarianMTModel`` and ``BertForSequenceClassification``, GPT's multiple choice ↔
``BertForMultipleChoice``, the ``AutoModelForMultipleChoice`` contract). ``tests/test_argument_parity.py`` derives
the names from the release. A forward lists the names it implements as its parameters; for each other name:

- a name transformers passes that a forward may drop whatever its value (``DROPPED_FROM_TRANSFORMERS``, with why:
  ``cache_position``, ``num_items_in_batch`` for a loss that is a mean over examples, a padding-free batch's
  flash-attention description where position_ids carry the same boundaries) is dropped;
- a name whose meaning the forward does not implement (``UNSUPPORTED_FROM_TRANSFORMERS``: a cache, ``use_cache``,
  cross-attention's ``encoder_hidden_states``, ``token_type_ids``, ``position_ids``, ``is_causal``,
  ``output_router_logits``) is dropped when its value asks for nothing — None, False for a flag, ``use_cache=True``
  where the counterpart keeps no cache either, as transformers' models drop what they do not use — and is a
  ``ValueError`` saying what it asks for when it asks for more;
- any other name is a ``TypeError`` naming it and the nearest accepted name.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import os
import re
import warnings
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Self, TypeVar, overload

import torch
from safetensors import SafetensorError
from torch import nn
from transformers import GenerationConfig, GenerationMixin, PreTrainedConfig, PreTrainedModel
from transformers.conversion_mapping import register_checkpoint_conversion_mapping
from transformers.core_model_loading import WeightConverter, WeightRenaming
from transformers.modeling_outputs import CausalLMOutputWithPast

from .inputs import shift_tokens_right
from .kernels import check_attn_implementation

# The name the installed release gives the cache in model inputs and outputs: "cache" from transformers 5.24 on,
# "past_key_values" before. Read off transformers' own output class, so that nothing depends on version numbers.
OUTPUT_FIELDS = {field.name for field in dataclasses.fields(CausalLMOutputWithPast)}
CACHE_NAME = "cache" if "cache" in OUTPUT_FIELDS else "past_key_values"
CACHE_ALIASES = ("cache", "past_key_values")
# The release that removes the old name, as transformers' own models declare it
# (``@deprecate_kwarg("past_key_values", "5.40.0", new_name="cache")``).
OLD_CACHE_NAME_REMOVED_IN = "5.40.0"

# The one rule for arguments (module docstring): a forward lists the names it implements as parameters; every other
# name transformers knows is in one of the two tables below; a name in neither is a TypeError (``refuse_unknown``).

# The flash-attention description of a padding-free batch: dropped only where the position_ids beside it carry the
# same sequence boundaries to the model (``packed_boundaries_kept``).
VARLEN_DESCRIPTION = ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k", "seq_idx")

# Names transformers passes that a forward not taking them drops whatever their value: {name: why that is safe}.
DROPPED_FROM_TRANSFORMERS = {
    "cache_position": "generate() before 5.24 passes the new tokens' positions; the models read them off the cache "
    "(masks.cache_layout), from which those positions are computed",
    "num_items_in_batch": "a loss that is a mean over the batch's examples (a classifier's, a span's) does not use "
    "it, as in transformers' own heads; the Trainer passes it only to the heads that declare it "
    "(accepts_loss_kwargs)",
    **dict.fromkeys(
        VARLEN_DESCRIPTION,
        "a padding-free batch (DataCollatorWithFlattening(return_flash_attn_kwargs=True), TRL's packing and "
        "padding_free) describes its sequences for flash attention's variable-length kernels next to position_ids; "
        "GPT reads the same boundaries off position_ids (masks.packed_sequences); every other model refuses it "
        "(packed_boundaries_kept)",
    ),
}

# Names transformers' counterparts take for something a forward not taking them does not do: {name: what a value
# asks for}. Such a name is dropped when its value asks for nothing (``asks_for_something``: None, and False for the
# flags), as transformers' models drop what they do not use, and is a ValueError saying so when it asks for more.
UNSUPPORTED_FROM_TRANSFORMERS = {
    **dict.fromkeys(
        CACHE_ALIASES, "a cache to continue from, and this model keeps none (Transformer-XL carries its memory as mems)"
    ),
    "use_cache": "the cache its decoder keeps, as transformers' counterpart returns it, and this head does not return "
    "it (the family's base model and language-model head do)",
    **dict.fromkeys(
        ("encoder_hidden_states", "encoder_attention_mask"),
        "cross-attention to an encoder's states (GPT-2, or BERT built as a decoder with add_cross_attention=True), and "
        "no model here has it: use the encoder-decoder Transformer",
    ),
    "token_type_ids": "segment (token type) embeddings, and this model has none",
    "position_ids": "positions chosen by the caller, and this model computes its own",
    "is_causal": "attention switched between causal and bidirectional, and each model's attention is fixed by its "
    "architecture",
    "output_router_logits": "a mixture-of-experts router's logits, and no layer here has a router",
}
FLAGS_FROM_TRANSFORMERS = ("use_cache", "output_router_logits")  # False asks for nothing either
FROM_TRANSFORMERS = set(DROPPED_FROM_TRANSFORMERS) | set(UNSUPPORTED_FROM_TRANSFORMERS)

# Arguments the wrapper handles itself: they are accepted by every decorated forward.
RETURN_DICT = "return_dict"
CONFIG_FLAGS = ("output_attentions", "output_hidden_states", "use_cache")

# The keyword a head adds (``already_normalised()``) when it calls a submodule with inputs its own public forward has
# normalised; the decorator pops it first, and ``inspect.signature`` never shows it.
NORMALISED_BY_CALLER = "_inputs_normalised_by_caller"


# --------------------------------------------------------------------------------------------------------------
# The input normaliser
# --------------------------------------------------------------------------------------------------------------


def returned_cache(outputs: object) -> Any:
    """The cache a model output carries, whatever the installed release calls the field."""
    return getattr(outputs, CACHE_NAME, None)


def cache_output(cache: object) -> dict[str, Any]:
    """``{field: cache}`` for building a transformers output: ``Output(logits=…, **cache_output(cache))``."""
    return {CACHE_NAME: cache}


def cache_argument(cache: object) -> dict[str, Any]:
    """``{name: cache}`` for passing a cache to a model: ``model(input_ids, **cache_argument(cache))`` — under the
    installed release's name, the one that does not warn."""
    return {CACHE_NAME: cache}


def warn_old_cache_name(owner: str) -> None:
    """From 5.24 on (where the installed release names the cache ``cache``), the old name still works and warns
    that it is deprecated, in the words of transformers' ``deprecate_kwarg`` (its models' bc test looks for
    "`past_key_values` is deprecated"). Releases before the rename take ``past_key_values`` silently. Nothing is
    raised while compiling (a warning would break the graph; transformers stays silent there too)."""
    if CACHE_NAME == "past_key_values" or torch.compiler.is_compiling():
        return
    message = (
        f"`past_key_values` is deprecated and will be removed in version {OLD_CACHE_NAME_REMOVED_IN} for `{owner}`."
        f" Use `{CACHE_NAME}` instead."
    )
    warnings.warn(message, FutureWarning, stacklevel=3)  # the forward's caller


def take_cache(arguments: dict[str, Any], cache_parameter: str | None, owner: str) -> None:
    """Move the cache, given under either release's name, to the forward's own parameter ``cache_parameter``."""
    given = [name for name in CACHE_ALIASES if name in arguments and name != cache_parameter]
    if not given or cache_parameter is None:  # (a forward keeping no cache: the one rule, take_from_transformers)
        return
    if cache_parameter in arguments or len(given) > 1:
        raise TypeError(f"{owner} got the cache twice (as {' and '.join(CACHE_ALIASES)}): pass it once.")
    arguments[cache_parameter] = arguments.pop(given[0])


def packed_boundaries_kept(
    model: nn.Module, given: list[str], arguments: dict[str, Any], cache_parameter: str | None, owner: str
) -> None:
    """A padding-free batch's flash-attention description (``VARLEN_DESCRIPTION``) may be dropped only where the
    model reads the same boundaries off ``position_ids`` (``accepts_padding_free_batches``: GPT), and only when it
    does — position_ids given, no attention mask, no cache (``masks.decoder_self_attention_mask``). Anywhere
    else the sequences would silently attend to each other: a ValueError. ``given``: the names of the description
    the caller passed; ``arguments``: as resolved (``use_cache`` from the config)."""
    if not given:
        return
    what = f"{owner} got {given[0]!r}, the sequence boundaries of a padding-free batch (for flash attention)"
    if not getattr(model, "accepts_padding_free_batches", False):
        raise ValueError(
            f"{what}, but {type(model).__name__} attends across the whole row and would mix the sequences: pad the "
            "batch instead (one sequence per row, with its attention_mask)."
        )
    cached = arguments.get("use_cache") or (cache_parameter is not None and arguments.get(cache_parameter) is not None)
    if arguments.get("position_ids") is None or arguments.get("attention_mask") is not None or cached:
        raise ValueError(
            f"{what}: this model reads the boundaries off position_ids that restart at 0 for each sequence, with no "
            "attention_mask, no cache and use_cache=False (the Trainer and TRL set it). Pass the batch that way "
            "(DataCollatorWithFlattening and TRL's packing / padding_free make it), or pad it."
        )


def refuse_unknown(arguments: dict[str, Any], parameters: set[str], owner: str) -> None:
    """A TypeError naming the first keyword that is neither one of the forward's ``parameters`` nor a name
    transformers knows (``FROM_TRANSFORMERS``), the nearest accepted name, and the parameters."""
    accepted = parameters | FROM_TRANSFORMERS
    unknown = sorted(set(arguments) - accepted)
    if not unknown:
        return
    name = unknown[0]
    nearest = difflib.get_close_matches(name, sorted(accepted), n=1)
    hint = f" Did you mean {nearest[0]!r}?" if nearest else ""
    raise TypeError(
        f"{owner} got an unexpected keyword argument {name!r}.{hint} It takes: {', '.join(sorted(parameters))}."
    )


def asks_for_something(model: nn.Module, name: str, value: Any) -> bool:
    """Whether ``value``, given for ``name`` of ``UNSUPPORTED_FROM_TRANSFORMERS`` to a forward that does not take
    it, asks that forward for something. None never does, nor does False for a flag (``FLAGS_FROM_TRANSFORMERS``).
    ``use_cache=True`` asks only a head whose transformers counterpart would return the cache its decoder keeps
    (GPT-2's classifiers: ``counterparts_return_the_cache``); a model with no cache at all ignores it, as
    transformers' BERT, Longformer and OpenAI GPT do."""
    if name == "use_cache":
        return bool(value) and getattr(model, "counterparts_return_the_cache", False)
    return bool(value) if name in FLAGS_FROM_TRANSFORMERS else value is not None


def described(value: Any) -> str:
    """A value as an error message names it: a tensor by its shape, anything else by its repr."""
    return f"a tensor of shape {tuple(value.shape)}" if torch.is_tensor(value) else repr(value)


def take_from_transformers(model: nn.Module, arguments: dict[str, Any], taken: list[str], owner: str) -> None:
    """The one rule, for the names transformers knows that the forward does not take (not in ``taken``): each is
    dropped, unless its value asks for something the forward does not do (``asks_for_something``): a ValueError."""
    for name in [name for name in arguments if name not in taken]:
        value = arguments.pop(name)
        if name in UNSUPPORTED_FROM_TRANSFORMERS and asks_for_something(model, name, value):
            nothing = "False" if name in FLAGS_FROM_TRANSFORMERS else "None"
            raise ValueError(
                f"{owner} does not support {name}={described(value)}: it asks for "
                f"{UNSUPPORTED_FROM_TRANSFORMERS[name]}. Leave {name} out, or pass {nothing}."
            )


def already_normalised() -> dict[str, bool]:
    """``{NORMALISED_BY_CALLER: True}``, for a head calling its base model (or an encoder-decoder its encoder and
    decoder) with inputs its own public forward has normalised: ``self.model(…, **already_normalised())``. The
    callee's forward body then runs as it is (see the module docstring for what the caller passes)."""
    return {NORMALISED_BY_CALLER: True}


def checkpointing_activations(model: nn.Module) -> bool:
    """Whether activation (gradient) checkpointing is on (also for the encoders and decoders that are plain modules)."""
    return any(getattr(module, "gradient_checkpointing", False) for module in model.modules())


def resolve_flags(model: nn.Module, arguments: dict[str, Any]) -> None:
    """``output_attentions``, ``output_hidden_states``, ``use_cache`` left at None take the config's value; the cache
    is off while checkpointed layers are trained (they are run twice)."""
    for name in CONFIG_FLAGS:
        if name in arguments and arguments[name] is None:
            arguments[name] = bool(getattr(model.config, name, False))
    if arguments.get("use_cache") and model.training and checkpointing_activations(model):
        arguments["use_cache"] = False


def visible_signature(
    signature: inspect.Signature, cache_parameter: str | None, unlisted: tuple[str, ...]
) -> inspect.Signature:
    """What ``inspect.signature(forward)`` shows transformers (the Trainer's label names, ``generate``'s checks): the
    forward's own parameters without the ``unlisted`` ones, plus ``return_dict`` and the cache's other name."""
    parameters = [p for name, p in signature.parameters.items() if name not in unlisted]
    extra = [RETURN_DICT] + [name for name in CACHE_ALIASES if cache_parameter and name != cache_parameter]
    parameters += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None) for name in extra]
    return signature.replace(parameters=parameters)


Forward = TypeVar("Forward", bound=Callable[..., Any])


@overload
def normalise_inputs(forward: Forward, *, unlisted: tuple[str, ...] = ()) -> Forward: ...
@overload
def normalise_inputs(forward: None = None, *, unlisted: tuple[str, ...] = ()) -> Callable[[Forward], Forward]: ...
def normalise_inputs(
    forward: Callable[..., Any] | None = None, *, unlisted: tuple[str, ...] = ()
) -> Callable[..., Any]:
    """Decorator for every public ``forward`` (see the module docstring). The forward lists every name it takes;
    the cache parameter is the one named ``past_key_values`` (the other release's name, ``cache``, is accepted too).
    ``unlisted``: parameters the forward takes but hides from ``inspect.signature`` (a second label tensor the
    Trainer must not take for a label name)."""
    if forward is None:
        return functools.partial(normalise_inputs, unlisted=unlisted)
    signature = inspect.signature(forward)
    names = [name for name in signature.parameters if name != "self"]
    positional = [name for name, p in signature.parameters.items() if p.kind is p.POSITIONAL_OR_KEYWORD][1:]
    cache_parameter = next((name for name in CACHE_ALIASES if name in names), None)
    parameters = set(names) | {RETURN_DICT} | (set(CACHE_ALIASES) if cache_parameter else set())

    @functools.wraps(forward)
    def normalised_forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.pop(NORMALISED_BY_CALLER, False):  # a head's public forward has normalised these: run the body
            return forward(self, *args, **kwargs)
        owner = f"{type(self).__name__}.forward()"
        old_cache_name_typed = "past_key_values" in kwargs and "cache" not in kwargs  # by the caller, by name
        if len(args) > len(positional):
            raise TypeError(f"{owner} takes {len(positional)} positional arguments but {len(args)} were given.")
        for name, value in zip(positional, args):
            if name in kwargs:
                raise TypeError(f"{owner} got multiple values for argument {name!r}.")
            kwargs[name] = value
        refuse_unknown(kwargs, parameters, owner)
        take_cache(kwargs, cache_parameter, owner)
        varlen_given = [name for name in VARLEN_DESCRIPTION if kwargs.get(name) is not None]
        if old_cache_name_typed and cache_parameter:  # (our heads hand it on with cache_argument: no warning)
            warn_old_cache_name(owner)
        return_dict = kwargs.pop(RETURN_DICT, None)
        take_from_transformers(self, kwargs, names, owner)
        if return_dict is None:
            return_dict = getattr(self.config, "return_dict", True)
        for name in CONFIG_FLAGS:
            if name in names:
                kwargs.setdefault(name, None)
        resolve_flags(self, kwargs)
        packed_boundaries_kept(self, varlen_given, kwargs, cache_parameter, owner)
        output = forward(self, **kwargs)
        return output if return_dict else output.to_tuple()

    normalised_forward.__signature__ = visible_signature(signature, cache_parameter, unlisted)  # type: ignore[attr-defined]  # read by inspect.signature
    return normalised_forward


# --------------------------------------------------------------------------------------------------------------
# The base class
# --------------------------------------------------------------------------------------------------------------


class ScratchPreTrainedModel(PreTrainedModel):
    """What every family's ``PreTrainedModel`` shares: the base model sits under ``model``, gradient checkpointing
    and both attention kernels (``"eager"``, ``"sdpa"``) are supported — and, for the families that set
    ``_supports_attention_backend``, the kernels of transformers' ``AttentionInterface``
    (``kernels.registered_kernels``) — and any other ``attn_implementation`` is refused with a ValueError when
    the model is built. Each family adds ``config_class``, ``_no_split_modules`` and its weight initialisation."""

    base_model_prefix = "model"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    # Whether transformers' counterparts of every head return the cache the family's decoder keeps (GPT-2's
    # classifiers do): then a head here that returns none refuses use_cache=True (asks_for_something).
    counterparts_return_the_cache = False
    # A family whose modules are named otherwise than the weights its checkpoints hold: {the checkpoint's name, a
    # regex: the module's name, its replacement (``\1`` for a group)}. Registered as the family's checkpoint key
    # mapping in transformers (``from_pretrained`` renames the checkpoint's keys to the modules', ``save_pretrained``
    # writes them under the checkpoint's names again), and applied by ``load_state_dict`` (the Trainer's resume).
    checkpoint_weight_names: ClassVar[dict[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "checkpoint_weight_names" in cls.__dict__:
            assert cls.config_class is not None, f"{cls.__name__} declares checkpoint_weight_names: set config_class"
            renamings: list[WeightConverter | WeightRenaming] = [
                WeightRenaming(saved, name) for saved, name in cls.checkpoint_weight_names.items()
            ]
            register_checkpoint_conversion_mapping(cls.config_class.model_type, renamings, overwrite=True)

    def __init__(self, config: PreTrainedConfig, *inputs: Any, **kwargs: Any) -> None:
        super().__init__(config, *inputs, **kwargs)
        check_attn_implementation(config._attn_implementation, registry=self._supports_attention_backend)

    @classmethod
    def _can_set_attn_implementation(cls) -> bool:
        """Whether ``set_attn_implementation`` may switch the kernel of a built model: yes, every family reads
        ``config._attn_implementation`` at each call. (transformers guesses from the modeling file's source, and
        would keep Transformer-XL and Longformer, whose attention does not go through its AttentionInterface, on the
        kernel they were built with, logging a warning.)"""
        return True

    if not hasattr(PreTrainedModel, "activation_checkpointing_enable"):  # releases before the rename (5.10): both names

        def activation_checkpointing_enable(  # type: ignore[override]  # defined only where transformers lacks it
            self, activation_checkpointing_kwargs: dict[str, Any] | None = None
        ) -> None:
            self.gradient_checkpointing_enable(activation_checkpointing_kwargs)

        def activation_checkpointing_disable(self) -> None:
            self.gradient_checkpointing_disable()

        @property
        def is_activation_checkpointing(self) -> bool:
            return self.is_gradient_checkpointing

    @property
    def accepts_loss_kwargs(self) -> bool:
        """Whether the Trainer passes ``num_items_in_batch`` (and leaves the loss of accumulated steps to the model):
        for the heads whose forward takes it. The Trainer would otherwise decide from a ``**kwargs`` parameter,
        which our forwards do not have."""
        return "num_items_in_batch" in inspect.signature(self.forward).parameters

    # -- tied weights ------------------------------------------------------------------------------------------
    def configured_ties(self) -> dict | None:
        """{target: source} weights this configuration ties, for the families whose ties depend on more than
        ``tie_word_embeddings`` (the encoder-decoder's shared embeddings, Transformer-XL's per-cluster projections);
        None: the class's ``_tied_weights_keys``, applied when ``tie_word_embeddings`` is set (transformers' rule)."""
        return None

    def post_init(self) -> None:
        ties = self.configured_ties()
        if ties is not None:  # accelerate (FSDP) and peft read the attribute itself
            self._tied_weights_keys = ties
        super().post_init()

    def get_expanded_tied_weights_keys(self, all_submodels: bool = False) -> dict:
        ties = None if all_submodels else self.configured_ties()
        return super().get_expanded_tied_weights_keys(all_submodels=all_submodels) if ties is None else ties

    def mark_tied_weights_as_initialized(self, loading_info: Any) -> None:
        """transformers flags every tied target as loaded, so that it is not initialised before the tie. Where two
        names are one module (the encoder-decoder's shared embeddings), that flag also marks the source, and a source
        absent from the checkpoint stayed on the meta device, neither initialised nor reported missing. A source
        whose names are all absent is put back among the missing keys: it is initialised and reported."""
        missing_before = set(getattr(loading_info, "missing_keys", None) or ())
        super().mark_tied_weights_as_initialized(loading_info)
        ties = getattr(self, "all_tied_weights_keys", None) or {}
        for source in set(ties.values()) & missing_before - set(loading_info.missing_keys):
            names = [source] + [target for target, tied_to in ties.items() if tied_to == source]
            if all(name in missing_before for name in names):
                self.get_parameter(source)._is_hf_initialized = False  # type: ignore[attr-defined]  # transformers' flag
                loading_info.missing_keys.add(source)

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False) -> Any:
        """``torch.nn.Module.load_state_dict`` for a state dict saved without the tied copies (what
        ``save_pretrained`` writes, and the Trainer loads when it resumes): a tied target left out is tied to its
        source again and is not reported missing (the Trainer would warn "There were missing keys in the checkpoint
        model loaded: ['lm_head.weight']" on every resume). Keys under a checkpoint's names are renamed to the
        modules' (``checkpoint_weight_names``)."""
        for saved, name in self.checkpoint_weight_names.items():
            state_dict = {re.sub(saved, name, key): value for key, value in state_dict.items()}
        result = super().load_state_dict(state_dict, strict=False, assign=assign)
        ties = getattr(self, "all_tied_weights_keys", None) or {}
        left_out = [key for key in result.missing_keys if key in ties and ties[key] in state_dict]
        if left_out:
            self.tie_weights()
            for key in left_out:
                if self.get_parameter(key) is self.get_parameter(ties[key]):
                    result.missing_keys.remove(key)
        if strict and (result.missing_keys or result.unexpected_keys):
            raise RuntimeError(
                f"Error(s) in loading state_dict for {type(self).__name__}: missing keys {result.missing_keys}, "
                f"unexpected keys {result.unexpected_keys}."
            )
        return result

    @classmethod
    def from_pretrained(
        cls, pretrained_model_name_or_path: str | os.PathLike[str] | None, *args: Any, **kwargs: Any
    ) -> Self:
        """transformers' ``from_pretrained``; a checkpoint whose weights cannot be read — a safetensors file that
        safetensors refuses (truncated, corrupted) or a shard its index names that is not there — is a ValueError
        saying what happened and how to fix it, instead of safetensors' bare error."""
        try:
            return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        except SafetensorError as error:
            raise ValueError(
                f"The weights of {pretrained_model_name_or_path} are not a complete safetensors file (safetensors: "
                f"{error}): the checkpoint was truncated or corrupted, e.g. by an interrupted save or download. Save "
                "the model again (save_pretrained) or download it again."
            ) from error
        except FileNotFoundError as error:
            missing = error.filename or str(error).rsplit(": ", 1)[-1]
            if not str(missing).endswith(".safetensors"):
                raise
            raise ValueError(
                f"The checkpoint {pretrained_model_name_or_path} lacks the safetensors shard "
                f"{os.path.basename(str(missing))} that its index names (an interrupted save or download): save the "
                "model again (save_pretrained) or download it again."
            ) from error


# --------------------------------------------------------------------------------------------------------------
# generate()
# --------------------------------------------------------------------------------------------------------------


class DecodingState:
    """A decoding state of a family's own (the RNN's recurrent state, Transformer-XL's memory) as ``generate``
    carries a transformers cache: between steps, out of the call (``return_dict_in_generate=True``), and into a
    later call that continues from it (``generate(sequences, cache=state)``: the whole sequence so far, as for
    ``GPT2LMHeadModel``; an encoder-decoder also takes the ``decoder_attention_mask`` over it, as ``MarianMTModel``
    does).

    It is no ``transformers.Cache``: a ``Cache`` is a list of key/value layers, and the methods it would inherit
    (crop, offload, early initialisation, …) would run on layers this state does not have. It gives ``generate``
    what ``generate`` reads of a cache it is handed, on every supported release:

    - ``get_seq_length()``: the number of tokens read so far. ``generate`` feeds only the tokens of a continued
      sequence after them;
    - ``is_linear`` (read from 5.24 on): ``False`` for every layer. transformers asks it to know whether it may
      slice a continued sequence by ``get_seq_length()``: a Mamba layer counts no tokens and says ``True``; this
      state counts them;
    - ``is_compileable`` and ``is_croppable``: ``False``. ``generate`` compiles its step only over a static cache,
      and cannot roll the state back to fewer tokens (the models also say so with ``_is_stateful``);
    - ``reorder_cache(beam_idx)``: beam search keeps the states of the surviving beams, in place.
    """

    is_compileable = False
    is_croppable = False

    def __init__(self, seen_tokens: int, layer_count: int) -> None:
        self.seen_tokens, self.layer_count = seen_tokens, layer_count

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.seen_tokens

    @property
    def is_linear(self) -> list[bool]:
        return [False] * self.layer_count

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define reorder_cache (beam search).")


class ScratchGenerationMixin(GenerationMixin):
    """transformers' ``GenerationMixin`` with the hooks our models need, for every supported release.

    A family whose decoding state is not the cache field of its outputs (Transformer-XL's memory, ``mems``)
    overrides ``decoding_state``; its ``prepare_inputs_for_generation`` takes the state under both releases' names.

    A family whose decoding state is not a transformers ``Cache`` but a ``DecodingState`` (Transformer-XL's memory,
    the RNN's recurrent state) says so with transformers' flags: ``_supports_default_dynamic_cache() -> False``
    (``generate`` makes no cache for it), ``_is_stateful`` (``generate`` refuses assisted decoding) and
    ``_can_compile_fullgraph = False``. ``generate`` then refuses ``cache_implementation`` and ``compile_config``
    too, before it starts (``refuse_cache_settings``): transformers would only log that it ignores them.
    """

    def decoding_state(self, outputs: Any) -> Any:
        """What the next decoding step continues from: the output's cache."""
        return returned_cache(outputs)

    # (transformers types GenerationMixin's self as its GenerativePreTrainedModel protocol, which our heads are)
    def _validate_generation_mode(
        self, generation_mode: Any, generation_config: GenerationConfig, *args: Any, **kwargs: Any
    ) -> None:
        super()._validate_generation_mode(generation_mode, generation_config, *args, **kwargs)  # type: ignore[misc]
        if not self._supports_default_dynamic_cache():  # type: ignore[misc]
            refuse_cache_settings(type(self).__name__, generation_config)

    def _update_model_kwargs_for_generation(
        self, outputs: Any, model_kwargs: dict[str, Any], *args: Any, **kwargs: Any
    ) -> dict[str, Any]:
        """The decoding state goes back under the cache's name this release reads (and beam search reorders); with
        ``use_cache=False`` none is carried (releases before 5.24 would keep an output's ``mems`` as the cache)."""
        model_kwargs = super()._update_model_kwargs_for_generation(outputs, model_kwargs, *args, **kwargs)
        use_cache = model_kwargs.get("use_cache", True)
        state = self.decoding_state(outputs) if use_cache else None
        if state is not None or not use_cache:
            for name in CACHE_ALIASES:
                model_kwargs.pop(name, None)
        if state is not None:
            model_kwargs[CACHE_NAME] = state
        return model_kwargs

    def create_masks_for_generate(
        self,
        config: PreTrainedConfig | None = None,
        inputs_embeds: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> torch.Tensor | None:
        """What ``generate`` passes as the attention mask when it decodes with a compilable cache
        (``cache_implementation="static"``). transformers would build its own 4-D mask here; our models build
        their relation from the 0/1 padding mask (``checks.check_decoder_mask``), so they get that mask, widened
        with zeros to all the cache's slots (slots not yet written are no real tokens, and the causal mask hides
        them anyway): every decoding step then has the same shapes, and a compiled forward is not recompiled as
        the sequence grows. (Releases name the embeddings ``input_embeds`` or ``inputs_embeds``, the cache
        ``past_key_values`` or ``cache``.)"""
        inputs_embeds = kwargs.get("input_embeds") if inputs_embeds is None else inputs_embeds
        cache = next((kwargs[name] for name in CACHE_ALIASES if kwargs.get(name) is not None), None)
        if attention_mask is None or attention_mask.dim() != 2 or cache is None:
            return attention_mask
        key_length, _ = cache.get_mask_sizes(inputs_embeds.shape[1], 0)  # type: ignore[union-attr]  # generate passes it
        missing = key_length - attention_mask.shape[1]
        if missing <= 0:
            return attention_mask
        return torch.cat([attention_mask, attention_mask.new_zeros(attention_mask.shape[0], missing)], dim=1)


def refuse_cache_settings(owner: str, generation_config: GenerationConfig) -> None:
    """The ``generate`` settings that need a transformers ``Cache``, refused with a ValueError for a model whose
    decoding state is its own: a ``cache_implementation`` (static, offloaded, quantized, …) and a ``compile_config``
    (``generate`` compiles its decoding step only over a static cache)."""
    for setting, why in (
        ("cache_implementation", "a transformers cache cannot hold it"),
        ("compile_config", "generate compiles its decoding step only over a static transformers cache"),
    ):
        value = getattr(generation_config, setting, None)
        if value is not None:
            raise ValueError(
                f"{owner} decodes with its own state, not a transformers Cache, so generate() cannot honour "
                f"{setting}={value!r} ({why}): leave {setting} unset (in the call and in model.generation_config)."
            )


# --------------------------------------------------------------------------------------------------------------
# Encoder-decoders: the collator's hook
# --------------------------------------------------------------------------------------------------------------


class DecoderInputsFromLabelsMixin:
    """For the encoder-decoders' generation heads: the decoder inputs that go with ``labels`` are the labels shifted
    right (``inputs.shift_tokens_right``). ``DataCollatorForSeq2Seq`` calls this method by name to build them in the
    collator; the heads call it when given labels without decoder inputs."""

    config: PreTrainedConfig  # the model's

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)

    def decoder_inputs_for(
        self,
        labels: torch.Tensor | None,
        decoder_input_ids: torch.Tensor | None,
        decoder_inputs_embeds: torch.Tensor | None,
    ) -> torch.Tensor | None:
        """The decoder inputs a head runs on: as given, or — with ``labels`` and no decoder inputs — the labels
        shifted right. ``labels`` must be (batch, target_length)."""
        if labels is not None and labels.dim() != 2:
            raise ValueError(f"labels must have shape (batch, target_length), got {tuple(labels.shape)}.")
        if labels is None or decoder_input_ids is not None or decoder_inputs_embeds is not None:
            return decoder_input_ids
        return self.prepare_decoder_input_ids_from_labels(labels)

"""hf_scratch: the classic Transformer family written from scratch as Hugging Face models.

Importing the package registers every configuration and head with the matching transformers Auto class, so
``AutoModelForMaskedLM.from_config(ScratchBertConfig(...))``, ``from_pretrained(directory)`` and ``pipeline(...)``
work. Each configuration carries the full ``auto_map`` of its family (``default_auto_map``): that map is also the
single list this module registers from, and every class in it is marked for ``register_for_auto_class`` so that
``save_pretrained`` copies the modeling code beside the weights (``trust_remote_code=True`` then loads it where
hf_scratch is not installed).
"""

from __future__ import annotations

import importlib

import transformers

from .configuration_common import ScratchConfig

__version__ = "0.1.0"

# every family's config class, in registration order: the one list generic code (training, tests) reads families from
FAMILY_CONFIGS: list[type[ScratchConfig]] = []


def _register_family(config_class: type[ScratchConfig]) -> None:
    """Register a family's config and every head named in its ``default_auto_map``; list it in ``FAMILY_CONFIGS``."""
    FAMILY_CONFIGS.append(config_class)
    transformers.AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
    config_class.register_for_auto_class()
    for auto_class_name, reference in config_class.default_auto_map.items():
        if auto_class_name == "AutoConfig":
            continue
        module_name, class_name = reference.split(".")
        model_class = getattr(importlib.import_module(f".{module_name}", __name__), class_name)
        getattr(transformers, auto_class_name).register(config_class, model_class, exist_ok=True)
        if model_class._auto_class is None:
            model_class.register_for_auto_class(auto_class_name)


# ---- families: public names, then registration (one block per family) ---------------------------------------

# BERT
from .configuration_bert import ScratchBertConfig
from .modeling_bert import (
    ScratchBertForMaskedLM,
    ScratchBertForMultipleChoice,
    ScratchBertForNextSentencePrediction,
    ScratchBertForPreTraining,
    ScratchBertForQuestionAnswering,
    ScratchBertForSequenceClassification,
    ScratchBertForTokenClassification,
    ScratchBertModel,
    ScratchBertPreTrainedModel,
)

_register_family(ScratchBertConfig)

# GPT
from .configuration_gpt import ScratchGPTConfig
from .modeling_gpt import (
    ScratchGPTDoubleHeadsModel,
    ScratchGPTForMultipleChoice,
    ScratchGPTForSequenceClassification,
    ScratchGPTLMHeadModel,
    ScratchGPTModel,
    ScratchGPTPreTrainedModel,
)
from .tools.gpt_input_transforms import GPTTaskInputs, language_modeling_labels

_register_family(ScratchGPTConfig)

# encoder-decoder Transformer
from .configuration_transformer import ScratchTransformerConfig
from .modeling_transformer import (
    ScratchTransformerForConditionalGeneration,
    ScratchTransformerModel,
    ScratchTransformerPreTrainedModel,
)

_register_family(ScratchTransformerConfig)

# Transformer-XL
from .configuration_transfo_xl import ScratchTransfoXLConfig
from .modeling_transfo_xl import ScratchTransfoXLLMHeadModel, ScratchTransfoXLModel, ScratchTransfoXLPreTrainedModel

_register_family(ScratchTransfoXLConfig)

# Longformer
from .configuration_longformer import ScratchLongformerConfig
from .modeling_longformer import (
    ScratchLongformerForMaskedLM,
    ScratchLongformerForMultipleChoice,
    ScratchLongformerForQuestionAnswering,
    ScratchLongformerForSequenceClassification,
    ScratchLongformerForTokenClassification,
    ScratchLongformerModel,
    ScratchLongformerPreTrainedModel,
)

_register_family(ScratchLongformerConfig)

# RNN seq2seq baselines
from .configuration_rnn import ScratchRNNConfig
from .modeling_rnn import (
    ScratchRNNDecoderState,
    ScratchRNNForConditionalGeneration,
    ScratchRNNForSequenceClassification,
    ScratchRNNModel,
    ScratchRNNPreTrainedModel,
)

_register_family(ScratchRNNConfig)

# ---- pipelines transformers v5 no longer ships ---------------------------------------------------------------
# Registered here for models built in memory; saved checkpoints of the heads they serve carry them
# (config.json "custom_pipelines" + pipelines.py, see ScratchConfig.save_pretrained).
from transformers.pipelines import PIPELINE_REGISTRY  # noqa: E402

from .pipelines import SCRATCH_PIPELINES, ScratchQuestionAnsweringPipeline, ScratchSeq2SeqPipeline  # noqa: E402

for _task, _info in SCRATCH_PIPELINES.items():
    PIPELINE_REGISTRY.register_pipeline(
        _task,
        pipeline_class=globals()[_info["impl"].split(".")[1]],
        pt_model=tuple(getattr(transformers, name) for name in _info["pt"]),
        type=_info["type"],
    )

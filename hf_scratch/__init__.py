"""hf_scratch: the classic Transformer family written from scratch as Hugging Face models.

Importing the package registers every configuration and head with the matching transformers Auto class, so
``AutoModelForMaskedLM.from_config(ScratchBertConfig(...))``, ``from_pretrained(directory)`` and ``pipeline(...)``
work. Each configuration carries the full ``auto_map`` of its family (``default_auto_map``): that map is also the
single list this module registers from, and every class in it is marked for ``register_for_auto_class`` so that
``save_pretrained`` copies the modeling code beside the weights (``trust_remote_code=True`` then loads it where
hf_scratch is not installed).
"""

from __future__ import annotations

from .configuration_common import ScratchConfig
from .remote_code import register_auto_classes, register_pipelines

__version__ = "0.1.0"

# every family's config class, in registration order: the one list generic code (training, tests) reads families from
FAMILY_CONFIGS: list[type[ScratchConfig]] = []


def _register_family(config_class: type[ScratchConfig]) -> None:
    """Register a family's config and every head named in its ``default_auto_map``; list it in ``FAMILY_CONFIGS``."""
    FAMILY_CONFIGS.append(config_class)
    register_auto_classes(config_class, __name__)


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
from .modeling_transfo_xl import (
    ScratchTransfoXLLMHeadModel,
    ScratchTransfoXLMemory,
    ScratchTransfoXLModel,
    ScratchTransfoXLPreTrainedModel,
)

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
# Registered here for models built in memory; saved checkpoints of the heads they serve carry them (remote_code).
from .pipelines import ScratchQuestionAnsweringPipeline, ScratchSeq2SeqPipeline  # noqa: E402

register_pipelines({cls.__name__: cls for cls in (ScratchQuestionAnsweringPipeline, ScratchSeq2SeqPipeline)})

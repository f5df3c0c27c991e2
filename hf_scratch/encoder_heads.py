"""The task heads of the BERT-style encoders, shared by BERT (Devlin et al. 2019 §3.1, §4) and Longformer (Beltagy
et al. 2020 §6, which fine-tunes RoBERTa's heads, BERT's own): masked LM, sequence classification, token
classification, extractive question answering and multiple choice.

Each head is a mixin that a family combines with its pre-trained model class and names its base model class:

    class ScratchBertForTokenClassification(EncoderForTokenClassification, ScratchBertPreTrainedModel):
        base_model_class = ScratchBertModel

The base model sits under ``model`` (weights ``model.*``) and is called through the module with the inputs the
head's public forward has normalised (``EncoderHead.encode``: ``modeling_common.already_normalised``). Each head's
``forward`` is written once, here, for every family: it names the head's own arguments (labels, the output flags)
and takes the base model's inputs as ``**inputs`` — BERT's, or Longformer's with ``global_attention_mask``. The
signature it shows (``inspect.signature``: what positional arguments bind to, which dataset columns the Trainer
keeps) lists the base model's inputs in the base model's order, then the head's own (``public_forward``). The head's
output is ``output_class``, which carries every field of the base model's output it declares (``hidden_states``,
``attentions``, Longformer's ``global_attentions``).

Imports no family file.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, cast

import torch
from torch import nn
from transformers import PreTrainedConfig
from transformers.modeling_outputs import (
    BaseModelOutputWithPooling,
    MaskedLMOutput,
    MultipleChoiceModelOutput,
    NextSentencePredictorOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.utils import ModelOutput

from .checks import check_class_labels, choice_dimensions, scored_classes
from .heads import (
    check_sequence_labels,
    flatten_choices,
    label_count,
    sequence_classification_loss,
    span_loss,
    token_cross_entropy,
)
from .layers import MaskedLMHead, MaskedLMOutputEmbeddings
from .modeling_common import already_normalised, normalise_inputs


def public_forward(head_forward: Callable[..., Any], base_model_class: type[nn.Module]) -> Callable[..., Any]:
    """``head_forward`` (self, the head's own arguments…, ``**inputs``) as a family's public forward, normalised
    (``normalise_inputs``), whose signature lists after ``self`` the base model's inputs that the head does not name
    itself, in the base model's order, then the head's own arguments: BERT's masked LM shows (input_ids,
    attention_mask, token_type_ids, position_ids, inputs_embeds, labels, output_attentions, output_hidden_states,
    num_items_in_batch), Longformer's the same with ``global_attention_mask`` third, as transformers' models do."""
    own = inspect.signature(head_forward)
    base = inspect.signature(base_model_class.forward).parameters.values()
    inputs = [p for p in base if p.kind is p.POSITIONAL_OR_KEYWORD and p.name not in own.parameters]
    self_parameter, *arguments = (p for p in own.parameters.values() if p.kind is not p.VAR_KEYWORD)

    @functools.wraps(head_forward)
    def forward(self: Any, **given: Any) -> Any:
        return head_forward(self, **given)

    forward.__signature__ = own.replace(parameters=[self_parameter, *inputs, *arguments])  # type: ignore[attr-defined]  # read by inspect.signature
    return normalise_inputs(forward)


def takes_base_model_inputs(forward: Callable[..., Any]) -> bool:
    """Whether ``forward`` takes its base model's inputs as ``**inputs`` (a head's forward written here)."""
    return any(p.kind is p.VAR_KEYWORD for p in inspect.signature(forward).parameters.values())


class EncoderHead:
    """What every head of a BERT-style encoder does around its base model: build it (``base_model_class``, with or
    without the pooler), call it once per public call with normalised inputs, and hand its hidden states and
    attentions on in the head's ``output_class``. A family's head class, which names its ``base_model_class``, gets
    its public ``forward`` from the head's (``public_forward``) unless it writes its own."""

    base_model_class: ClassVar[type[nn.Module]]
    output_class: ClassVar[type[ModelOutput]]
    config: Any
    model: nn.Module

    if TYPE_CHECKING:  # the family's pre-trained model class, listed after the head among the bases, defines them

        def __init__(self, config: PreTrainedConfig) -> None: ...

        def post_init(self) -> None: ...

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "base_model_class" not in vars(cls):  # a head (mixin) itself, or a subclass of a family's head class
            return
        head_forward = inspect.unwrap(cls.forward)  # type: ignore[attr-defined]  # (nn.Module, a later base, has it)
        if takes_base_model_inputs(head_forward):
            cls.forward = public_forward(head_forward, cls.base_model_class)  # type: ignore[attr-defined]  # (as above)

    def build_base_model(self, config: PreTrainedConfig, add_pooling_layer: bool) -> None:
        self.model = self.base_model_class(config, add_pooling_layer=add_pooling_layer)

    @staticmethod
    def input_shape(inputs: dict[str, Any]) -> tuple[int, ...]:
        """The leading shape of the given ids or embeddings, (batch, length) — or (batch, choices, length) — what
        the labels are checked against; () when neither is given (the base model refuses the call then)."""
        input_ids, inputs_embeds = inputs.get("input_ids"), inputs.get("inputs_embeds")
        if input_ids is not None:
            return tuple(input_ids.shape)
        return tuple(inputs_embeds.shape[:-1]) if inputs_embeds is not None else ()

    def encode(self, **inputs: Any) -> BaseModelOutputWithPooling:
        """The base model's output for ``inputs`` (its own parameter names, the flags as bools) that this head's
        public forward has normalised: its decorator does not normalise them again. Every base model returns a
        ``BaseModelOutputWithPooling`` (Longformer's adds ``global_attentions``)."""
        return self.model(**inputs, **already_normalised())

    def head_output(self, outputs: ModelOutput, **head_fields: Any) -> ModelOutput:
        """``output_class(**head_fields, …)`` with the fields of the base model's ``outputs`` that it declares.
        Each head's forward casts it to the output class it declares (``output_class`` or a subclass)."""
        # (dataclasses.fields() breaks torch.compile's graph)
        declared = self.output_class.__dataclass_fields__  # type: ignore[attr-defined]  # transformers' outputs are dataclasses
        carried = {name: getattr(outputs, name) for name in declared if hasattr(outputs, name)}
        return self.output_class(**head_fields, **carried)


class EncoderForMaskedLM(MaskedLMOutputEmbeddings, EncoderHead):
    """Predict the original token at masked positions (Devlin et al. 2019 §3.1, Task #1): logits = W_e ·
    LN(act(W h + b)) + b_vocab, the decoder tied to the word embeddings. ``mlm_activation``: act, None for the
    config's ``hidden_act``."""

    output_class = MaskedLMOutput
    mlm_activation: ClassVar[str | None] = None
    _tied_weights_keys = {"mlm_head.decoder.weight": "model.embeddings.word.weight"}

    def __init__(self, config: PreTrainedConfig) -> None:
        super().__init__(config)
        self.build_base_model(config, add_pooling_layer=False)
        activation = self.mlm_activation or config.hidden_act
        self.mlm_head = MaskedLMHead(config.hidden_size, config.vocab_size, activation, config.layer_norm_eps)
        self.post_init()

    def forward(
        self,
        labels: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        num_items_in_batch: int | None = None,
        **inputs: Any,
    ) -> MaskedLMOutput:
        if labels is not None and (shape := self.input_shape(inputs)):
            check_class_labels(labels, shape, scored_classes(self.mlm_head.decoder))
        outputs = self.encode(output_attentions=output_attentions, output_hidden_states=output_hidden_states, **inputs)
        logits = self.mlm_head(outputs.last_hidden_state)
        loss = token_cross_entropy(logits, labels, num_items_in_batch) if labels is not None else None
        return cast(MaskedLMOutput, self.head_output(outputs, loss=loss, logits=logits))


class EncoderForSequenceClassification(EncoderHead):
    """One label (or value) per sequence — regression, single- or multi-label by ``config.problem_type`` (Devlin et
    al. 2019 §4.1). The family builds the layers in ``__init__`` and reads the logits off the base model's output
    in ``sequence_logits``: BERT from the pooled [CLS], Longformer with RoBERTa's head on ``<s>``; BERT's next-sentence
    prediction is the two-class case with its own loss (``sequence_loss``) and output class."""

    output_class: ClassVar[type[ModelOutput]] = SequenceClassifierOutput  # BERT's NSP: NextSentencePredictorOutput

    def forward(
        self,
        labels: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        **inputs: Any,
    ) -> SequenceClassifierOutput | NextSentencePredictorOutput:
        if labels is not None and (shape := self.input_shape(inputs)):
            self.check_sequence_labels(labels, shape[0])
        outputs = self.encode(output_attentions=output_attentions, output_hidden_states=output_hidden_states, **inputs)
        logits = self.sequence_logits(outputs)
        loss = self.sequence_loss(logits, labels) if labels is not None else None
        output = self.head_output(outputs, loss=loss, logits=logits)
        return cast("SequenceClassifierOutput | NextSentencePredictorOutput", output)

    def sequence_logits(self, outputs: BaseModelOutputWithPooling) -> torch.Tensor:
        raise NotImplementedError

    def check_sequence_labels(self, labels: torch.Tensor, batch: int) -> None:
        check_sequence_labels(labels, batch, label_count(self.config), self.config)

    def sequence_loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return sequence_classification_loss(logits, labels, self.config)


class EncoderForTokenClassification(EncoderHead):
    """A label per token, e.g. named entities (Devlin et al. 2019 §5.3): logits_t = W · Dropout(h_t)."""

    output_class = TokenClassifierOutput

    def __init__(self, config: PreTrainedConfig, dropout: float) -> None:
        super().__init__(config)
        self.num_labels = label_count(config)
        self.build_base_model(config, add_pooling_layer=False)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(config.hidden_size, self.num_labels)
        self.post_init()

    def forward(
        self,
        labels: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        num_items_in_batch: int | None = None,
        **inputs: Any,
    ) -> TokenClassifierOutput:
        if labels is not None and (shape := self.input_shape(inputs)):
            check_class_labels(labels, shape, self.num_labels)
        outputs = self.encode(output_attentions=output_attentions, output_hidden_states=output_hidden_states, **inputs)
        logits = self.classifier(self.dropout(outputs.last_hidden_state))
        loss = token_cross_entropy(logits, labels, num_items_in_batch) if labels is not None else None
        return cast(TokenClassifierOutput, self.head_output(outputs, loss=loss, logits=logits))


class EncoderForQuestionAnswering(EncoderHead):
    """Extractive QA (Devlin et al. 2019 §4.2): a start and an end score per token, (start, end) = W · h_t; the loss
    is the mean of the start and end cross-entropies."""

    output_class = QuestionAnsweringModelOutput

    def __init__(self, config: PreTrainedConfig) -> None:
        super().__init__(config)
        self.build_base_model(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.post_init()

    def forward(
        self,
        start_positions: torch.Tensor | None = None,
        end_positions: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        **inputs: Any,
    ) -> QuestionAnsweringModelOutput:
        if shape := self.input_shape(inputs):  # positions outside the sequence are ignored (span_loss)
            check_class_labels(start_positions, shape[:1], None, "start_positions")
            check_class_labels(end_positions, shape[:1], None, "end_positions")
        outputs = self.encode(output_attentions=output_attentions, output_hidden_states=output_hidden_states, **inputs)
        start_logits, end_logits = self.qa_outputs(outputs.last_hidden_state).unbind(dim=-1)
        loss = None
        if start_positions is not None and end_positions is not None:
            loss = span_loss(start_logits, end_logits, start_positions, end_positions)
        output = self.head_output(
            outputs, loss=loss, start_logits=start_logits.contiguous(), end_logits=end_logits.contiguous()
        )
        return cast(QuestionAnsweringModelOutput, output)


class EncoderForMultipleChoice(EncoderHead):
    """Inputs (batch, choices, length): each choice runs as its own sequence, its pooled vector gets a score
    W · Dropout(pooled), and a softmax over the choices gives P(choice) (SWAG, Devlin et al. 2019 §4.4)."""

    output_class = MultipleChoiceModelOutput

    def __init__(self, config: PreTrainedConfig, dropout: float) -> None:
        super().__init__(config)
        self.build_base_model(config, add_pooling_layer=True)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.post_init()

    def forward(
        self,
        labels: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        **inputs: Any,
    ) -> MultipleChoiceModelOutput:
        """``inputs``: the tensors shaped (batch, choices, …), flattened here to (batch·choices, …)."""
        batch, num_choices, _ = choice_dimensions(inputs.get("input_ids"), inputs.get("inputs_embeds"))
        check_class_labels(labels, (batch,), num_choices)
        flat = {name: flatten_choices(value) if torch.is_tensor(value) else value for name, value in inputs.items()}
        outputs = self.encode(output_attentions=output_attentions, output_hidden_states=output_hidden_states, **flat)
        logits = self.classifier(self.dropout(outputs.pooler_output)).view(-1, num_choices)
        loss = token_cross_entropy(logits, labels) if labels is not None else None
        return cast(MultipleChoiceModelOutput, self.head_output(outputs, loss=loss, logits=logits))

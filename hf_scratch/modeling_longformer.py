"""Longformer (Beltagy et al. 2020), from scratch, read top-down in the order of the paper (§3, "Longformer"):

1. input representation: RoBERTa's embeddings — token + learned position (ids start at pad_token_id + 1, padding
   keeps pad_token_id) + segment, LayerNorm, dropout;
2. the attention pattern (§3.1), computed banded in time and memory linear in the length — never an n×n matrix:
   - sliding window: token i attends the w/2 tokens on each side (w = ``attention_window`` of the layer);
   - dilated sliding window: head h attends i + k·d_h for |k| ≤ w/2 (``attention_dilation``, per layer and head);
   - global attention on the tokens of ``global_attention_mask``: they attend every token and every token attends
     them, through their own projections ``query_global`` / ``key_global`` / ``value_global`` (§3.1 "Linear
     Projections for Global Attention"); padding wins over global;
3. a stack of post-LN encoder layers (attention, then the position-wise feed-forward network);
4. heads, BERT's (``encoder_heads``, shared with BERT), which take ``global_attention_mask`` with the base model's
   inputs, and its defaults: masked LM
   (RoBERTa's head, tied to the word embeddings), sequence classification (RoBERTa's classification head; global
   attention on the first token by default), token classification, extractive QA (global attention on the question
   by default), multiple choice (global attention on the choice by default); the outputs add ``global_attentions``
   (one dataclass mixin, ``GlobalAttentions``).

The banded kernel — residue classes for dilation, blocks of w/2 queries against 3·w/2 keys — is in
``banded_attention``; this file holds the layer that runs it with its weights. Both the band and the global rows go
through the one dispatcher, ``kernels.attend``, which chooses the kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutputWithPooling,
    MaskedLMOutput,
    MultipleChoiceModelOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)

from .banded_attention import BandedMask, BandedPattern, GlobalTokens
from .checks import check_attention_mask, check_one_input, values_pass
from .configuration_longformer import ScratchLongformerConfig
from .encoder_heads import (
    EncoderForMaskedLM,
    EncoderForMultipleChoice,
    EncoderForQuestionAnswering,
    EncoderForSequenceClassification,
    EncoderForTokenClassification,
    EncoderHead,
)
from .heads import label_count
from .kernels import attend
from .layers import (
    EncoderEmbeddings,
    FeedForward,
    Pooler,
    ResidualNorm,
    feed_forward_recomputing_activation,
    kernel_settings,
    run_layers,
    split_heads,
)
from .modeling_common import ScratchPreTrainedModel, normalise_inputs

# ---- 1. input representation ---------------------------------------------------------------------------------


class ScratchLongformerEmbeddings(EncoderEmbeddings):
    """BERT's E = LayerNorm(E_token + E_segment + E_position), then dropout, with RoBERTa's positions: real tokens
    count from pad_token_id + 1, padding tokens keep position pad_token_id."""

    def __init__(self, config: ScratchLongformerConfig) -> None:
        if config.pad_token_id is None:  # (check() refuses None; this catches a config changed after it ran)
            raise ValueError("ScratchLongformerConfig.pad_token_id is None: positions start at pad_token_id + 1.")
        super().__init__(config, position_padding_idx=config.pad_token_id)
        self.padding_idx: int = config.pad_token_id

    def default_position_ids(self, input_ids: torch.Tensor | None, given: torch.Tensor) -> torch.Tensor:
        if input_ids is not None:
            is_token = input_ids.ne(self.padding_idx).long()
            return torch.cumsum(is_token, dim=1) * is_token + self.padding_idx
        length = given.shape[1]  # no ids: padding cannot be told apart, count every position
        return torch.arange(self.padding_idx + 1, self.padding_idx + 1 + length, device=given.device)[None, :]


# ---- 2. the attention pattern (its banded kernel: banded_attention.py) ----------------------------------


class ScratchLongformerSelfAttention(nn.Module):
    """One layer's Longformer attention: (dilated) sliding window + global attention, then the output projection.

    Local rows: softmax over {j : |i - j| ≤ w/2·d_h, d_h | i - j} ∪ {global j}, with Q, K, V = ``qkv_proj``(x).
    Global rows: softmax over every real j, with ``query_global``, ``key_global``, ``value_global`` (§3.1).
    """

    def __init__(self, config: ScratchLongformerConfig, layer_idx: int) -> None:
        super().__init__()
        self.config = config
        hidden = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_dim = hidden // self.num_heads
        self.pattern = BandedPattern(config.window_for_layer(layer_idx) // 2, config.dilations_for_layer(layer_idx))
        self.dropout = config.attention_probs_dropout_prob
        self.qkv_proj = nn.Linear(hidden, 3 * hidden)
        self.query_global = nn.Linear(hidden, hidden)
        self.key_global = nn.Linear(hidden, hidden)
        self.value_global = nn.Linear(hidden, hidden)
        self.out_proj = nn.Linear(hidden, hidden)

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_is_real: torch.Tensor,
        globals_: GlobalTokens,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        # Longformer runs no kernel of transformers' registry: its "flex_attention" is torch's, on the band
        settings = {**kernel_settings(self), "registry": False, "output_attentions": output_attentions}
        query, key, value = (split_heads(x, self.num_heads) for x in self.qkv_proj(hidden_states).chunk(3, dim=-1))
        band = BandedMask(self.pattern, key_is_real, globals_)
        output, local_weights = attend(query, key, value, band, **settings)
        output = output.transpose(1, 2)  # (batch, n, heads, d)
        global_weights = None
        if globals_.present:
            global_output, global_weights = self._global(hidden_states, key_is_real, globals_, settings)
            output = globals_.scatter(output, global_output.transpose(1, 2))
            if local_weights is not None and global_weights is not None:  # (asked for)
                # as in transformers: a global row's local weights are not used, zero them
                local_weights = local_weights.masked_fill(globals_.is_global[:, None, :, None], 0.0)
                global_weights = global_weights.transpose(2, 3)  # (batch, heads, n, G)
        output = self.out_proj(output.reshape(*output.shape[:2], -1))
        return output, local_weights, global_weights

    def _global(
        self, hidden_states: torch.Tensor, key_is_real: torch.Tensor, globals_: GlobalTokens, settings: dict[str, Any]
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The global tokens' rows: softmax(q_g K_gᵀ/√d) V_g over every real token, with the global projections
        (§3.1), each called as a module so that hooks, adapters and quantized replacements see it. q_g is scaled
        before the product, as in transformers' Longformer (so the kernel's scale is 1). Returns (output (batch,
        heads, G, d), weights (batch, heads, G, n) or None)."""
        query = split_heads(self.query_global(globals_.gather(hidden_states)), self.num_heads) * self.head_dim**-0.5
        key = split_heads(self.key_global(hidden_states), self.num_heads)  # (batch, heads, n, d)
        value = split_heads(self.value_global(hidden_states), self.num_heads)
        return attend(query, key, value, globals_.global_rows, scale=1.0, queries_from_data=True, **settings)


# ---- 3. the encoder ------------------------------------------------------------------------------------------


class ScratchLongformerLayer(GradientCheckpointingLayer):
    """h = LN(x + LongformerAttention(x)), out = LN(h + FFN(h)) (Vaswani et al. 2017 §3.1, with the sparse
    attention of Beltagy et al. 2020 §3.1)."""

    def __init__(self, config: ScratchLongformerConfig, layer_idx: int) -> None:
        super().__init__()
        self.attention = ScratchLongformerSelfAttention(config, layer_idx)
        self.attention_residual = ResidualNorm(config.hidden_size, config.layer_norm_eps, config.hidden_dropout_prob)
        self.feed_forward = FeedForward(config.hidden_size, config.intermediate_size, config.hidden_act)
        self.feed_forward_residual = ResidualNorm(config.hidden_size, config.layer_norm_eps, config.hidden_dropout_prob)

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_is_real: torch.Tensor,
        globals_: GlobalTokens,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        attended, local_weights, global_weights = self.attention(
            hidden_states, key_is_real, globals_, output_attentions
        )
        hidden_states = self.attention_residual.after(hidden_states, attended)
        transformed = feed_forward_recomputing_activation(self.feed_forward, hidden_states)
        return self.feed_forward_residual.after(hidden_states, transformed), local_weights, global_weights


@dataclass
class GlobalAttentions:
    """The field Longformer's outputs add to transformers' (a dataclass mixin, placed first so that the field comes
    last): ``global_attentions``, per layer (batch, heads, n, G), the global tokens' weights on every token; None
    when no token is global. ``attentions`` are then, per layer, (batch, heads, n, G + w + 1) — weights on the G
    global tokens, then on key offsets -w/2 … w/2 (times the head's dilation)."""

    global_attentions: tuple[torch.Tensor, ...] | None = None


@dataclass
class ScratchLongformerModelOutput(GlobalAttentions, BaseModelOutputWithPooling):
    """transformers' ``BaseModelOutputWithPooling`` with ``global_attentions``."""


class ScratchLongformerPreTrainedModel(ScratchPreTrainedModel):
    """Compiles as one graph: the number of global tokens G, a size read from the mask, is a symbol of the graph
    (one read from the device per forward, no recompilation when it changes; see ``GlobalTokens.present``)."""

    config_class = ScratchLongformerConfig
    _input_embed_layer = "word"  # get/set_input_embeddings (transformers' own) find embeddings.word by this name
    _can_compile_fullgraph = True
    _supports_flex_attn = True  # "flex_attention": the band through torch's flex_attention (kernels.attend's table)
    _no_split_modules = ["ScratchLongformerLayer"]


class ScratchLongformerModel(ScratchLongformerPreTrainedModel):
    """The Longformer encoder: embeddings → L layers of sliding-window + global attention → (optional) pooler."""

    def __init__(self, config: ScratchLongformerConfig, add_pooling_layer: bool = True) -> None:
        super().__init__(config)
        self.embeddings = ScratchLongformerEmbeddings(config)
        self.layers = nn.ModuleList(ScratchLongformerLayer(config, i) for i in range(config.num_hidden_layers))
        self.pooler = Pooler(config.hidden_size) if add_pooling_layer else None  # (used by multiple choice)
        self.post_init()

    @normalise_inputs
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        global_attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
    ) -> ScratchLongformerModelOutput:
        given = check_one_input(input_ids, inputs_embeds)
        (batch, length), device = given.shape[:2], given.device
        key_is_real = check_attention_mask(attention_mask, batch, length)
        if key_is_real is None:
            key_is_real = torch.ones(batch, length, dtype=torch.bool, device=device)
        is_global = check_attention_mask(global_attention_mask, batch, length, name="global_attention_mask")
        if is_global is None:
            is_global = torch.zeros(batch, length, dtype=torch.bool, device=device)
        globals_ = GlobalTokens.from_masks(key_is_real, is_global)  # padding wins over global

        hidden_states = self.embeddings(input_ids, token_type_ids, position_ids, inputs_embeds)
        hidden_states, all_hidden_states, (all_attentions, all_global_attentions) = run_layers(
            self.layers,
            hidden_states,
            lambda layer, x: layer(x, key_is_real, globals_, output_attentions),
            output_hidden_states,
            output_attentions,
            kinds=2,
        )
        if not globals_.present:  # no global token: no global attentions (as in transformers)
            all_global_attentions = None
        pooled = self.pooler(hidden_states) if self.pooler is not None else None
        return ScratchLongformerModelOutput(
            last_hidden_state=hidden_states,
            pooler_output=pooled,
            hidden_states=all_hidden_states,
            attentions=all_attentions,
            global_attentions=all_global_attentions,
        )


# ---- 4. heads ------------------------------------------------------------------------------------------------


def tokens_before_first(input_ids: torch.Tensor | None, token_id: int | None, what: str) -> torch.Tensor:
    """(batch, n) bool: True before the first ``token_id`` of each row (the question, for QA)."""
    if input_ids is None or token_id is None:
        raise ValueError(
            f"Cannot place the default global attention ({what}) without input_ids and config.sep_token_id: pass "
            "global_attention_mask explicitly."
        )
    is_sep = input_ids == token_id
    message = (
        f"Every row needs a separator token (sep_token_id={token_id}) to place the default global attention "
        f"({what}); encode question and context as a pair, or pass global_attention_mask explicitly."
    )
    if not values_pass(is_sep.any(dim=-1), message):
        raise ValueError(message)
    first_sep = is_sep.long().argmax(dim=-1, keepdim=True)
    return torch.arange(input_ids.shape[-1], device=input_ids.device)[None, :] < first_sep


def tokens_after_first_pair(input_ids: torch.Tensor | None, token_id: int | None) -> torch.Tensor:
    """(…, n) bool: True after the first pair of separators of each row (the choice, for multiple choice: positions
    > first separator + 1, as in transformers)."""
    before_pair = tokens_before_first(input_ids, token_id, "on the choice")
    return ~F.pad(before_pair, (2, 0), value=True)[..., :-2]


@dataclass
class ScratchLongformerMaskedLMOutput(GlobalAttentions, MaskedLMOutput):
    """transformers' ``MaskedLMOutput`` with ``global_attentions``."""


@dataclass
class ScratchLongformerSequenceClassifierOutput(GlobalAttentions, SequenceClassifierOutput):
    """transformers' ``SequenceClassifierOutput`` with ``global_attentions``."""


@dataclass
class ScratchLongformerTokenClassifierOutput(GlobalAttentions, TokenClassifierOutput):
    """transformers' ``TokenClassifierOutput`` with ``global_attentions``."""


@dataclass
class ScratchLongformerQuestionAnsweringOutput(GlobalAttentions, QuestionAnsweringModelOutput):
    """transformers' ``QuestionAnsweringModelOutput`` with ``global_attentions``."""


@dataclass
class ScratchLongformerMultipleChoiceOutput(GlobalAttentions, MultipleChoiceModelOutput):
    """transformers' ``MultipleChoiceModelOutput`` with ``global_attentions``."""


# The heads are the BERT-style encoders' shared ones (encoder_heads.py): their forward takes the base model's
# inputs, ``global_attention_mask`` third as in transformers' Longformer. Where the task has one, the head places
# the default global attention (``TaskGlobalAttention``).


class TaskGlobalAttention(EncoderHead):
    """A head whose task says which tokens attend globally when no ``global_attention_mask`` is given (Beltagy et
    al. 2020 §3.1: the classification token, the question, the choice): ``default_global_attention``."""

    def default_global_attention(
        self, input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None
    ) -> torch.Tensor | None:
        raise NotImplementedError

    def encode(self, **inputs: Any) -> BaseModelOutputWithPooling:
        if inputs.get("global_attention_mask") is None:
            given = inputs.get("input_ids"), inputs.get("inputs_embeds")
            inputs["global_attention_mask"] = self.default_global_attention(*given)
        return super().encode(**inputs)


class ScratchLongformerForMaskedLM(EncoderForMaskedLM, ScratchLongformerPreTrainedModel):
    """Masked LM with RoBERTa's head: logits = W_e · LN(gelu(W h + b)) + b_vocab."""

    base_model_class = ScratchLongformerModel
    output_class = ScratchLongformerMaskedLMOutput
    mlm_activation = "gelu"


class ScratchLongformerClassificationHead(nn.Module):
    """logits = W_out · Dropout(tanh(W · Dropout(h_``<s>``)))."""

    def __init__(self, config: ScratchLongformerConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.out_proj = nn.Linear(config.hidden_size, label_count(config))

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        pooled = torch.tanh(self.dense(self.dropout(hidden_states[:, 0])))
        return self.out_proj(self.dropout(pooled))


class ScratchLongformerForSequenceClassification(
    TaskGlobalAttention, EncoderForSequenceClassification, ScratchLongformerPreTrainedModel
):
    """Classification/regression from the first token, which gets global attention unless told otherwise."""

    base_model_class = ScratchLongformerModel
    output_class = ScratchLongformerSequenceClassifierOutput

    def __init__(self, config: ScratchLongformerConfig) -> None:
        super().__init__(config)
        self.num_labels = label_count(config)
        self.build_base_model(config, add_pooling_layer=False)
        self.classifier = ScratchLongformerClassificationHead(config)
        self.post_init()

    def default_global_attention(
        self, input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None
    ) -> torch.Tensor | None:
        given = input_ids if input_ids is not None else inputs_embeds  # (the base model checks the one-of rule)
        if given is None:
            return None
        first = torch.arange(given.shape[1], device=given.device) == 0
        return first.expand(given.shape[:2]).long()

    def sequence_logits(self, outputs: BaseModelOutputWithPooling) -> torch.Tensor:
        return self.classifier(outputs.last_hidden_state)


class ScratchLongformerForTokenClassification(EncoderForTokenClassification, ScratchLongformerPreTrainedModel):
    """A label per token: logits_t = W · Dropout(h_t)."""

    base_model_class = ScratchLongformerModel
    output_class = ScratchLongformerTokenClassifierOutput

    def __init__(self, config: ScratchLongformerConfig) -> None:
        super().__init__(config, dropout=config.hidden_dropout_prob)


class ScratchLongformerForQuestionAnswering(
    TaskGlobalAttention, EncoderForQuestionAnswering, ScratchLongformerPreTrainedModel
):
    """Extractive QA: (start, end) = W · h_t; the question (tokens before the first separator) is global by default."""

    base_model_class = ScratchLongformerModel
    output_class = ScratchLongformerQuestionAnsweringOutput

    def default_global_attention(
        self, input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None
    ) -> torch.Tensor | None:
        return tokens_before_first(input_ids, self.config.sep_token_id, "on the question")


class ScratchLongformerForMultipleChoice(
    TaskGlobalAttention, EncoderForMultipleChoice, ScratchLongformerPreTrainedModel
):
    """Inputs (batch, choices, n); each choice's pooled vector gets a score. By default (as in transformers) the
    tokens after the first separator pair — the choice — get global attention."""

    base_model_class = ScratchLongformerModel
    output_class = ScratchLongformerMultipleChoiceOutput

    def __init__(self, config: ScratchLongformerConfig) -> None:
        super().__init__(config, dropout=config.hidden_dropout_prob)

    def default_global_attention(
        self, input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None
    ) -> torch.Tensor | None:
        return tokens_after_first_pair(input_ids, self.config.sep_token_id)


__all__ = [
    "ScratchLongformerPreTrainedModel",
    "ScratchLongformerModel",
    "ScratchLongformerForMaskedLM",
    "ScratchLongformerForSequenceClassification",
    "ScratchLongformerForTokenClassification",
    "ScratchLongformerForQuestionAnswering",
    "ScratchLongformerForMultipleChoice",
]

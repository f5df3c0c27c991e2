"""Building blocks shared by the families: input checks, the position-wise
feed-forward network, the residual + LayerNorm wrapper (post-LN and pre-LN), the input representation and pooler of
the BERT-style encoders, and the task heads, multiple-choice helpers and losses several families use."""

from __future__ import annotations

import functools
from typing import Optional

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts
from transformers.activations import ACT2FN

from .attention import values_pass
from .positional import LearnedPositionalEmbedding


# The tanh approximation of GELU, 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) — GPT-2's "gelu_new" — is written in
# transformers as six elementwise operations; torch's fused kernel computes the same formula (|Δ| ≈ 2e-7) in about
# half the time, forward + backward. transformers itself names it as the equivalent ("gelu_pytorch_tanh").
SAME_FUNCTION_FUSED = {"gelu_new": "gelu_pytorch_tanh", "gelu_fast": "gelu_pytorch_tanh"}


def get_activation(name: str) -> nn.Module:
    """The activation called ``name`` in transformers (``"gelu"``, ``"gelu_new"``, ``"relu"``, ``"swish"``…), as
    its fused kernel where torch has one (``SAME_FUNCTION_FUSED``)."""
    if name not in ACT2FN:
        raise ValueError(f"Unknown activation {name!r} (hidden_act): choose one of {sorted(ACT2FN.keys())}.")
    return ACT2FN[SAME_FUNCTION_FUSED.get(name, name)]


# --------------------------------------------------------------------------------------------------------------
# Input checks: bad input gets a ValueError before any kernel runs
# --------------------------------------------------------------------------------------------------------------


def embedding_rows(embedding: nn.Module) -> int:
    """How many ids the live embedding module accepts — its ``num_embeddings`` now, so that the id check follows
    ``resize_token_embeddings`` and ``set_input_embeddings``. A wrapper without that attribute (a peft adapter
    around the embedding) is asked for the layer it wraps (``get_base_layer()``)."""
    while not hasattr(embedding, "num_embeddings") and hasattr(embedding, "get_base_layer"):
        base = embedding.get_base_layer()
        if base is embedding:
            break
        embedding = base
    return embedding.num_embeddings


def check_input_ids(input_ids: torch.Tensor, vocab_size: int, name: str = "input_ids") -> None:
    """Ids must index the embedding table: 0 ≤ id < vocab_size (pass ``embedding_rows`` of the live table)."""
    if input_ids.dim() != 2:
        raise ValueError(f"{name} must have shape (batch, length), got {tuple(input_ids.shape)}.")
    if input_ids.dtype.is_floating_point:
        raise ValueError(f"{name} must hold integer token ids, got dtype {input_ids.dtype}.")
    if input_ids.numel() == 0:
        raise ValueError(f"{name} is empty: pass at least one token.")
    fix = "use the tokenizer that belongs to this model, or resize the embeddings (model.resize_token_embeddings)."
    in_vocabulary = (input_ids >= 0) & (input_ids < vocab_size)
    if not values_pass(in_vocabulary, f"{name} contains an id outside the vocabulary of {vocab_size} tokens: {fix}"):
        bad = input_ids[~in_vocabulary][0].item()
        raise ValueError(f"{name} contains id {bad}, outside the vocabulary of {vocab_size} tokens (vocab_size): {fix}")


def check_one_input(input_ids: Optional[torch.Tensor], inputs_embeds: Optional[torch.Tensor]) -> torch.Tensor:
    """The one of ``input_ids`` / ``inputs_embeds`` that is given (its leading dimensions are the batch's shape);
    a ValueError unless exactly one is."""
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError("Pass exactly one of input_ids or inputs_embeds.")
    return input_ids if input_ids is not None else inputs_embeds


# --------------------------------------------------------------------------------------------------------------
# Blocks
# --------------------------------------------------------------------------------------------------------------


class FeedForward(nn.Module):
    """Position-wise feed-forward network (Vaswani et al. 2017 §3.3, eq. 2): FFN(x) = act(x W₁ + b₁) W₂ + b₂."""

    def __init__(self, hidden_size: int, intermediate_size: int, activation: str, activation_dropout: float = 0.0):
        super().__init__()
        self.fc_in = nn.Linear(hidden_size, intermediate_size)
        self.activation = get_activation(activation)
        self.activation_dropout = nn.Dropout(activation_dropout)
        self.fc_out = nn.Linear(intermediate_size, hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.output(self.fc_in(hidden_states))

    def output(self, inner: torch.Tensor) -> torch.Tensor:
        """The second half, from ``inner`` = x W₁ + b₁: act(inner) W₂ + b₂."""
        return self.fc_out(self.activation_dropout(self.activation(inner)))


MATMULS = frozenset(getattr(torch.ops.aten, name).default for name in ("mm", "addmm", "bmm"))


def keep_matmuls(ctx, op, *args, **kwargs) -> CheckpointPolicy:
    """Selective-checkpoint policy: save the matrix products' outputs, recompute the elementwise ops."""
    return CheckpointPolicy.MUST_SAVE if op in MATMULS else CheckpointPolicy.PREFER_RECOMPUTE


def feed_forward_recomputing_activation(feed_forward: FeedForward, hidden_states: torch.Tensor) -> torch.Tensor:
    """``feed_forward(hidden_states)`` (Vaswani et al. 2017 eq. 2: act(x W₁ + b₁) W₂ + b₂) with act(x) recomputed
    in the backward pass instead of kept (Longformer's layers use it): ``fc_out`` runs as a module under a selective
    checkpoint that keeps the products, so only the elementwise activation runs twice."""
    inner = feed_forward.fc_in(hidden_states)
    if not (torch.is_grad_enabled() and inner.requires_grad) or torch.is_autocast_enabled(inner.device.type):
        return feed_forward.output(inner)
    if torch.compiler.is_compiling():  # the compiler's partitioner chooses what to keep (Inductor recomputes act(x))
        return feed_forward.output(inner)
    return checkpoint(feed_forward.output, inner, use_reentrant=False,
                      context_fn=functools.partial(create_selective_checkpoint_contexts, keep_matmuls))


class ResidualNorm(nn.Module):
    """The residual connection around a sub-layer, with its LayerNorm placed after or before (Vaswani et al. 2017
    §3.1, with the residual dropout of §5.4).

    post-LN (the paper, BERT, GPT-1):  y = LayerNorm(x + Dropout(Sublayer(x)))
    pre-LN  (GPT-2, many later models): y = x + Dropout(Sublayer(LayerNorm(x)))

    Use as ``out = res.after(x, sublayer(res.before(x)))``.
    """

    def __init__(self, hidden_size: int, eps: float, dropout: float, pre_norm: bool = False):
        super().__init__()
        self.pre_norm = pre_norm
        self.norm = nn.LayerNorm(hidden_size, eps=eps)
        self.dropout = nn.Dropout(dropout)

    def before(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x) if self.pre_norm else x

    def after(self, residual: torch.Tensor, sublayer_output: torch.Tensor) -> torch.Tensor:
        out = residual + self.dropout(sublayer_output)
        return out if self.pre_norm else self.norm(out)


def run_layers(
    layers, hidden_states, call, output_hidden_states: bool, output_attentions: bool, final_norm=None, kinds: int = 1
):
    """The stack of N identical layers (Vaswani et al. 2017 §3.1): ``hidden_states`` through each layer in turn —
    ``call(layer, hidden_states)`` returns the layer's output and its attention weights, one tensor per kind (self,
    cross, global…: ``kinds``) — then through ``final_norm`` (pre-LN stacks). Returns (hidden_states,
    all_hidden_states, attentions): what transformers' ``output_hidden_states`` asks for — each layer's input, then
    the stack's output — and, for ``output_attentions``, per kind a tuple with one tensor per layer; None for what is
    not asked."""
    all_hidden_states = () if output_hidden_states else None
    attentions = tuple(() if output_attentions else None for _ in range(kinds))
    for layer in layers:
        if output_hidden_states:
            all_hidden_states += (hidden_states,)
        hidden_states, *weights = call(layer, hidden_states)
        if output_attentions:
            attentions = tuple(kind + (w,) for kind, w in zip(attentions, weights))
    if final_norm is not None:
        hidden_states = final_norm(hidden_states)
    if output_hidden_states:
        all_hidden_states += (hidden_states,)
    return hidden_states, all_hidden_states, attentions


class MaskedLMHead(nn.Module):
    """BERT's (and RoBERTa/Longformer's) MLM head: vocab logits = W_e · LayerNorm(act(W h + b)) + b_vocab.

    ``decoder.weight`` is tied to the word embeddings by the model's ``_tied_weights_keys``.
    """

    def __init__(self, hidden_size: int, vocab_size: int, activation: str, eps: float):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.activation = get_activation(activation)
        self.norm = nn.LayerNorm(hidden_size, eps=eps)
        self.decoder = nn.Linear(hidden_size, vocab_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.norm(self.activation(self.dense(hidden_states))))


class MaskedLMOutputEmbeddings:
    """``get/set_output_embeddings`` for the heads whose output projection is ``mlm_head.decoder`` (transformers'
    own look for ``lm_head``): what ``resize_token_embeddings`` and weight tying use."""

    def get_output_embeddings(self):
        return self.mlm_head.decoder

    def set_output_embeddings(self, value):
        self.mlm_head.decoder = value


# --------------------------------------------------------------------------------------------------------------
# The BERT-style encoders' input representation and pooler (BERT; RoBERTa's, in Longformer)
# --------------------------------------------------------------------------------------------------------------


class EncoderEmbeddings(nn.Module):
    """E = LayerNorm(E_token + E_segment + E_position), then dropout: BERT's input representation (Devlin et al.
    2019 §3, Figure 2), kept by RoBERTa and Longformer. Positions count 0, 1, 2, … unless the family overrides
    ``default_position_ids`` (Longformer counts RoBERTa's way); ``position_padding_idx`` is the position row that
    padding keeps (RoBERTa's pad_token_id), None for BERT."""

    def __init__(self, config, position_padding_idx: Optional[int] = None):
        super().__init__()
        self.word = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position = LearnedPositionalEmbedding(
            config.max_position_embeddings, config.hidden_size, padding_idx=position_padding_idx
        )
        self.token_type = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def default_position_ids(self, input_ids: Optional[torch.Tensor], inputs_embeds: torch.Tensor) -> torch.Tensor:
        """(1, length): 0, 1, 2, … — the positions when the caller passes none."""
        return torch.arange(inputs_embeds.shape[1], device=inputs_embeds.device)[None, :]

    def forward(self, input_ids, token_type_ids, position_ids, inputs_embeds) -> torch.Tensor:
        if inputs_embeds is None:
            check_input_ids(input_ids, embedding_rows(self.word))
            inputs_embeds = self.word(input_ids)
        batch, length = inputs_embeds.shape[:2]
        if position_ids is None:
            position_ids = self.default_position_ids(input_ids, inputs_embeds)
        if token_type_ids is None:
            token_type_ids = torch.zeros(batch, length, dtype=torch.long, device=inputs_embeds.device)
        else:
            check_input_ids(token_type_ids, embedding_rows(self.token_type), name="token_type_ids")
        # (.to: with device_map="auto" over several devices the three tables may sit on different ones)
        device = inputs_embeds.device
        embeddings = inputs_embeds + self.token_type(token_type_ids).to(device) + self.position(position_ids).to(device)
        return self.dropout(self.norm(embeddings))


class Pooler(nn.Module):
    """pooled = tanh(W h_0 + b): the first token's ([CLS], <s>) final state C (Devlin et al. 2019 §3) through a
    dense layer and tanh — the dense + tanh layer is the reference implementation's addition, which the BERT
    checkpoints carry. The sequence summary that next-sentence prediction, classification and multiple choice read."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(hidden_states[:, 0]))


def classifier_dropout(config) -> float:
    """The dropout before a classification layer: ``config.classifier_dropout`` when set, else
    ``hidden_dropout_prob`` (transformers' convention)."""
    dropout = getattr(config, "classifier_dropout", None)
    return config.hidden_dropout_prob if dropout is None else dropout


# --------------------------------------------------------------------------------------------------------------
# Multiple choice: each choice is its own sequence
# --------------------------------------------------------------------------------------------------------------


def flatten_choices(x: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """(batch, choices, length[, hidden]) → (batch·choices, length[, hidden]): each choice is its own sequence."""
    return None if x is None else x.reshape(-1, *x.shape[2:])


def choice_dimensions(input_ids: Optional[torch.Tensor], inputs_embeds: Optional[torch.Tensor]) -> tuple[int, int, int]:
    """(batch, num_choices, length) of multiple-choice inputs, or a ValueError if they are not shaped that way."""
    reference = check_one_input(input_ids, inputs_embeds)
    if reference.dim() != (3 if input_ids is not None else 4):
        raise ValueError(
            f"Multiple-choice inputs must be shaped (batch, num_choices, length), got {tuple(reference.shape)}: "
            "put each example's choices along dimension 1 (for GPT, gpt_input_transforms.multiple_choice_inputs does)."
        )
    batch, num_choices, length = reference.shape[:3]
    return batch, num_choices, length


# --------------------------------------------------------------------------------------------------------------
# Losses shared by the task heads (transformers' conventions: -100 labels are ignored)
# --------------------------------------------------------------------------------------------------------------


def token_cross_entropy(
    logits: torch.Tensor, labels: torch.Tensor, num_items_in_batch: Optional[int] = None, label_smoothing: float = 0.0
) -> torch.Tensor:
    """Mean cross-entropy over labels ≠ -100; with ``num_items_in_batch`` (gradient accumulation, from Trainer)
    the sum is divided by that count instead, so accumulated steps add up to the full-batch loss."""
    logits = logits.reshape(-1, logits.shape[-1]).float()
    labels = labels.reshape(-1).to(logits.device)
    if num_items_in_batch is None:
        return F.cross_entropy(logits, labels, ignore_index=-100, label_smoothing=label_smoothing)
    total = F.cross_entropy(logits, labels, ignore_index=-100, reduction="sum", label_smoothing=label_smoothing)
    if isinstance(num_items_in_batch, torch.Tensor):
        num_items_in_batch = num_items_in_batch.to(total.device)
    return total / num_items_in_batch


def causal_lm_loss(
    logits: torch.Tensor,
    labels: Optional[torch.Tensor],
    num_items_in_batch: Optional[int] = None,
    shift_labels: Optional[torch.Tensor] = None,
) -> Optional[torch.Tensor]:
    """The language-modelling loss L1 (Radford et al. 2018 eq. 1) as a mean negative log-likelihood: the logits at
    position i predict the label at i + 1, -100 labels are ignored. ``labels`` are the inputs, shifted inside;
    ``shift_labels`` are labels already shifted (transformers passes them under context parallelism) and are used
    as they are. None when neither is given. Works for any leading shape (batch[, choices], length).

    The labels are shifted left and end in -100, so the logits are used as they are — slicing them would copy the
    largest tensor of the step, and the zero-filled gradient of a slice costs as much."""
    if shift_labels is None:
        if labels is None:
            return None
        shift_labels = F.pad(labels[..., 1:], (0, 1), value=-100)
    return token_cross_entropy(logits, shift_labels.to(logits.device), num_items_in_batch)


def sequence_classification_loss(logits: torch.Tensor, labels: torch.Tensor, config) -> torch.Tensor:
    """Regression (MSE), single-label (cross-entropy) or multi-label (BCE) by ``config.problem_type``, inferred from
    ``num_labels`` and the label dtype when unset — the rule transformers' heads follow."""
    num_labels = logits.shape[-1]
    if config.problem_type is None:
        if num_labels == 1:
            config.problem_type = "regression"
        elif labels.dtype in (torch.long, torch.int):
            config.problem_type = "single_label_classification"
        else:
            config.problem_type = "multi_label_classification"
    if config.problem_type == "regression":
        return F.mse_loss(logits.squeeze(-1).float(), labels.squeeze(-1).float()) if num_labels == 1 else F.mse_loss(logits.float(), labels.float())
    if config.problem_type == "single_label_classification":
        return F.cross_entropy(logits.view(-1, num_labels).float(), labels.view(-1))
    if config.problem_type == "multi_label_classification":
        return F.binary_cross_entropy_with_logits(logits.float(), labels.float())
    raise ValueError(
        f"Unknown problem_type {config.problem_type!r}: use 'regression', 'single_label_classification' or "
        "'multi_label_classification'."
    )


def span_loss(
    start_logits: torch.Tensor, end_logits: torch.Tensor, start_positions: torch.Tensor, end_positions: torch.Tensor
) -> torch.Tensor:
    """Extractive QA: mean of the start and end cross-entropies; positions outside the sequence are ignored."""
    length = start_logits.shape[1]
    start = start_positions.reshape(-1).clamp(0, length)
    end = end_positions.reshape(-1).clamp(0, length)
    start_loss = F.cross_entropy(start_logits.float(), start, ignore_index=length)
    end_loss = F.cross_entropy(end_logits.float(), end, ignore_index=length)
    return (start_loss + end_loss) / 2


# --------------------------------------------------------------------------------------------------------------
# Sequence-to-sequence helpers
# --------------------------------------------------------------------------------------------------------------


def shift_tokens_right(labels: torch.Tensor, pad_token_id: Optional[int], decoder_start_token_id: int) -> torch.Tensor:
    """Decoder inputs from labels: [start, y_1 … y_{n-1}], the outputs "offset by one position" of Vaswani et al.
    2017 §3.1 (the decoder reads "<s> i want a beer" to predict "i want a beer </s>"). Ignored label positions
    (-100) become padding."""
    shifted = labels.new_zeros(labels.shape)
    shifted[:, 1:] = labels[:, :-1]
    shifted[:, 0] = decoder_start_token_id
    if (shifted == -100).any():
        if pad_token_id is None:
            raise ValueError(
                "labels contain -100 (ignored positions) but config.pad_token_id is None: set pad_token_id so the "
                "shifted decoder inputs can be padded there."
            )
        shifted = shifted.masked_fill(shifted == -100, pad_token_id)
    return shifted


class DecoderInputsFromLabelsMixin:
    """For the encoder-decoders' generation heads: the decoder inputs that go with ``labels`` are the labels shifted
    right (``shift_tokens_right``). ``DataCollatorForSeq2Seq`` calls this method by name to build them in the
    collator; the heads call it when given labels without decoder inputs."""

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)

"""Train a small tokenizer with 🤗 tokenizers and wrap it as a transformers ``PreTrainedTokenizerFast``.

Four kinds (``TOKENIZER_KINDS``), matching the families:

- ``"wordpiece"``: BERT / Longformer style — [CLS] A [SEP] (B [SEP]) with segment ids, [MASK] for MLM;
- ``"bpe"``: byte-level BPE for GPT and Transformer-XL (``<|endoftext|>`` as bos/eos/unk, ``<pad>`` last);
- ``"char"``: one token per character (the nanoGPT-style character-level LM), plus ``<pad>``/``<unk>``/``<eos>``;
- ``"seq2seq"``: a WordPiece-like vocabulary shared by source and target for the encoder-decoders (Transformer, RNN
  baselines), ``<pad>``/``<s>``/``</s>``/``<unk>`` (ids 0-3), with ``</s>`` appended to every sequence as Marian does.

Every kind has a pad token, so that ``tokenizer.pad`` and every collator that pads (``DataCollatorWithPadding``,
``DataCollatorForMultipleChoice``, …) work on the folders our scripts save, and the configs they build take its id as
``pad_token_id``.

``model_max_length(config)`` is the input limit of a model, which every tokenizer saved beside it should report.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokenizers import Tokenizer
    from tokenizers.normalizers import Normalizer
    from transformers import PreTrainedTokenizerFast

    from ..configuration_common import ScratchConfig

TOKENIZER_KINDS = ("wordpiece", "bpe", "char", "seq2seq")


def model_max_length(config: ScratchConfig) -> int:
    """The longest input the model built from ``config`` reads: what ``tokenizer.model_max_length`` says for
    transformers' own checkpoints (512 for bert-base), so that generic code which truncates or cuts text into blocks
    of ``tokenizer.model_max_length`` tokens never feeds the model more positions than it has.

    The config says it (``ScratchConfig.max_input_tokens``): the position table's size, less what a family reserves
    (Longformer's RoBERTa positions). Transformer-XL (relative sinusoidal encodings, computed for any distance, plus
    the memory of earlier segments) and the RNN baselines (no positions at all) have no limit. They keep
    transformers' "no limit" value ``VERY_LARGE_INTEGER`` (int(1e30)), as transformers' own Transformer-XL and XLNet
    tokenizers do (their positional size is ``None``): truncating to ``model_max_length`` then keeps the whole text,
    which these models can read. A Transformer-XL user picks the segment length with ``max_length=`` and carries
    ``mems``.
    """
    from transformers.tokenization_utils_base import VERY_LARGE_INTEGER

    limit = config.max_input_tokens
    return VERY_LARGE_INTEGER if limit is None else limit


def train_tokenizer(
    texts: Iterable[str], kind: str = "wordpiece", vocab_size: int = 1000, lowercase: bool = True
) -> PreTrainedTokenizerFast:
    """Train a tokenizer of ``kind`` (``TOKENIZER_KINDS``) on ``texts`` and return it as a
    ``PreTrainedTokenizerFast``."""
    if kind not in TOKENIZER_KINDS:
        raise ValueError(f"Unknown tokenizer kind {kind!r}: choose one of {TOKENIZER_KINDS}.")
    texts = list(texts)
    if not any(t.strip() for t in texts):
        raise ValueError("Cannot train a tokenizer on empty text: pass at least one non-empty string.")
    build = {"wordpiece": _wordpiece, "bpe": _byte_level_bpe, "char": _characters, "seq2seq": _seq2seq_wordpiece}
    return build[kind](texts, vocab_size, lowercase)


def _show_progress() -> bool:
    """The progress bars of 🤗 tokenizers only on a terminal: in a log file they are blank lines."""
    return sys.stderr.isatty()


def _trained_wordpiece(
    texts: list[str], vocab_size: int, special: list[str], unknown: str, normalizer: Normalizer
) -> Tokenizer:
    """A WordPiece model (BERT's pre-tokenizer and decoder) trained on ``texts`` with ``special`` tokens first."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordPiece(unk_token=unknown))
    tokenizer.normalizer = normalizer
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=special, show_progress=_show_progress())
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


def _wordpiece(texts: list[str], vocab_size: int, lowercase: bool) -> PreTrainedTokenizerFast:
    """BERT / Longformer: [CLS] A [SEP] (B [SEP]) with segment ids, [MASK] for masked-LM."""
    from tokenizers import normalizers, processors
    from transformers import PreTrainedTokenizerFast

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer = _trained_wordpiece(texts, vocab_size, special, "[UNK]", normalizers.BertNormalizer(lowercase=lowercase))
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_input_names=["input_ids", "token_type_ids", "attention_mask"],
    )


def _byte_level_bpe(texts: list[str], vocab_size: int, lowercase: bool) -> PreTrainedTokenizerFast:
    """GPT / Transformer-XL: byte-level BPE, ``<|endoftext|>`` as bos/eos/unk, and ``<pad>`` (``lowercase`` does not
    apply).

    GPT-2's tokenizer has no pad token, and its users set ``pad_token = eos_token``. This one has a token of its
    own, because padding with end-of-text loses the end of every text: ``DataCollatorForLanguageModeling`` (and TRL's
    collators) ignore the label wherever the input is the pad id, so a model trained that way is never taught to end
    a text, and GPT's classifiers, which find the last real token from ``pad_token_id`` when no attention mask is
    given, would skip a final end-of-text. ``<pad>`` is the vocabulary's last id, after ``vocab_size - 1`` trained
    tokens (the vocabulary keeps the size asked for, as GPT-2 put ``<|endoftext|>`` last): every other token keeps
    the id it has in a vocabulary trained without it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - 1,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=_show_progress(),
    )
    tokenizer.train_from_iterator(texts, trainer)
    tokenizer.add_special_tokens(["<pad>"])
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        pad_token="<pad>",
        model_input_names=["input_ids", "attention_mask"],
    )


def _characters(texts: list[str], vocab_size: int, lowercase: bool) -> PreTrainedTokenizerFast:
    """nanoGPT-style character level: one token per character of ``texts`` (``vocab_size`` and ``lowercase`` do
    not apply), plus ``<pad>``/``<unk>``/``<eos>``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    special = ["<pad>", "<unk>", "<eos>"]
    alphabet = sorted(set("".join(texts)) | {"\n"})  # lines passed without their newline still need it
    vocab = {token: index for index, token in enumerate(special + alphabet)}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    tokenizer.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token="<pad>",
        unk_token="<unk>",
        eos_token="<eos>",
        model_input_names=["input_ids", "attention_mask"],
    )


def _seq2seq_wordpiece(texts: list[str], vocab_size: int, lowercase: bool) -> PreTrainedTokenizerFast:
    """The encoder-decoders: a WordPiece vocabulary shared by source and target, ``<pad>``/``<s>``/``</s>``/``<unk>``
    (ids 0-3), ``</s>`` appended to every sequence as Marian does."""
    from tokenizers import normalizers, processors
    from transformers import PreTrainedTokenizerFast

    special = ["<pad>", "<s>", "</s>", "<unk>"]
    normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=False)
    tokenizer = _trained_wordpiece(texts, vocab_size, special, "<unk>", normalizer)
    eos_id = tokenizer.token_to_id("</s>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", eos_id)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        model_input_names=["input_ids", "attention_mask"],
    )

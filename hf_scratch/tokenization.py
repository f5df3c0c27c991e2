"""Train a small tokenizer with 🤗 tokenizers and wrap it as a transformers ``PreTrainedTokenizerFast``.

Three kinds, matching the families:
- ``"wordpiece"``: BERT / Longformer style — [CLS] A [SEP] (B [SEP]) with segment ids, [MASK] for MLM;
- ``"bpe"``: byte-level BPE for GPT and Transformer-XL (``<|endoftext|>`` as bos/eos/unk);
- ``"char"``: one token per character (the nanoGPT-style character-level LM), plus ``<pad>``/``<unk>``/``<eos>``.
- ``"seq2seq"``: a shared WordPiece-like vocabulary for translation, ``<pad>``/``<s>``/``</s>``/``<unk>``, with
  ``</s>`` appended to every sequence as Marian does.
"""

from __future__ import annotations

from typing import Iterable

TOKENIZER_KINDS = ("wordpiece", "bpe", "char", "seq2seq")


def train_tokenizer(texts: Iterable[str], kind: str = "wordpiece", vocab_size: int = 1000, lowercase: bool = True):
    """Train a tokenizer of ``kind`` on ``texts`` and return it as a ``PreTrainedTokenizerFast``."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    if kind not in TOKENIZER_KINDS:
        raise ValueError(f"Unknown tokenizer kind {kind!r}: choose one of {TOKENIZER_KINDS}.")
    texts = list(texts)
    if not any(t.strip() for t in texts):
        raise ValueError("Cannot train a tokenizer on empty text: pass at least one non-empty string.")

    if kind == "wordpiece":
        special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tokenizer.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tokenizer.decoder = decoders.WordPiece()
        tokenizer.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=special))
        cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
        tokenizer.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
        )
        return PreTrainedTokenizerFast(
            tokenizer_object=tokenizer, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
            sep_token="[SEP]", mask_token="[MASK]", model_input_names=["input_ids", "token_type_ids", "attention_mask"],
        )

    if kind == "bpe":
        special = ["<|endoftext|>"]
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        tokenizer.train_from_iterator(
            texts,
            trainers.BpeTrainer(
                vocab_size=vocab_size, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
            ),
        )
        return PreTrainedTokenizerFast(
            tokenizer_object=tokenizer, bos_token="<|endoftext|>", eos_token="<|endoftext|>", unk_token="<|endoftext|>",
            model_input_names=["input_ids", "attention_mask"],
        )

    if kind == "char":
        special = ["<pad>", "<unk>", "<eos>"]
        alphabet = sorted(set("".join(texts)) | {"\n"})  # lines passed without their newline still need it
        vocab = {token: index for index, token in enumerate(special + alphabet)}
        tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
        tokenizer.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
        tokenizer.decoder = decoders.Fuse()
        return PreTrainedTokenizerFast(
            tokenizer_object=tokenizer, pad_token="<pad>", unk_token="<unk>", eos_token="<eos>",
            model_input_names=["input_ids", "attention_mask"],
        )

    # seq2seq
    special = ["<pad>", "<s>", "</s>", "<unk>"]
    tokenizer = Tokenizer(models.WordPiece(unk_token="<unk>"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=False)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    tokenizer.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=special))
    eos_id = tokenizer.token_to_id("</s>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", eos_id)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="<pad>", bos_token="<s>", eos_token="</s>", unk_token="<unk>",
        model_input_names=["input_ids", "attention_mask"],
    )

"""The family tests' hand-made batches: right-padded ids and masks drawn from a seeded generator, and each family's
padded batch on its fixed tiny configuration (``families.TINY``)."""

from __future__ import annotations

import torch
from families import FAMILIES


def right_padded(
    low: int, high: int, batch: int, length: int, real_lengths: dict, pad: int = 0, seed: int | None = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask): ids drawn from [low, high) by a generator seeded with ``seed`` (None: from the
    global random stream), the rows of ``real_lengths`` ({row: number of real tokens}) right-padded with ``pad``."""
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    input_ids = torch.randint(low, high, (batch, length), generator=generator)
    attention_mask = torch.ones(batch, length, dtype=torch.long)
    for row, real in real_lengths.items():
        attention_mask[row, real:] = 0
    return input_ids.masked_fill(attention_mask == 0, pad), attention_mask


def bert_batch(batch=3, length=11, vocab=97):
    """(input_ids, attention_mask, token_type_ids): rows 1 and 2 padded; the second segment from position 5."""
    input_ids, attention_mask = right_padded(5, vocab, batch, length, {1: 7, 2: 4})
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[:, 5:] = 1
    return input_ids, attention_mask, token_type_ids


def gpt_batch(batch=3, length=10):
    """(input_ids, attention_mask), rows 1 and 2 right-padded."""
    return right_padded(3, FAMILIES["gpt"].tiny["vocab_size"], batch, length, {1: 7, 2: 4})


def longformer_batch(batch=3, length=13):
    """(input_ids, attention_mask, global_attention_mask). Length 13 is no window multiple; row 1 and 2 are padded;
    three separators per row (transformers' QA needs exactly three); global tokens include one on padding (row 2,
    position 6), which must stay masked."""
    tiny = FAMILIES["longformer"].tiny
    input_ids, attention_mask = right_padded(
        3, tiny["vocab_size"], batch, length, {1: 9, 2: 6}, pad=tiny["pad_token_id"]
    )
    input_ids[:, 3] = tiny["sep_token_id"]
    input_ids[:, 4] = tiny["sep_token_id"]
    for row in range(batch):
        input_ids[row, int(attention_mask[row].sum()) - 1] = tiny["sep_token_id"]
    global_attention_mask = torch.zeros_like(input_ids)
    global_attention_mask[0, [0, 5, 11]] = 1
    global_attention_mask[1, 2] = 1
    global_attention_mask[2, 6] = 1
    return input_ids, attention_mask, global_attention_mask


def transformer_sources(vocab=98, pad=98):
    """Three sources of lengths 9, 6 and 3, right-padded like a tokenizer does (ids from the global random
    stream; the defaults are the Marian reference's: pad = the last id)."""
    return right_padded(1, vocab, 3, 9, {1: 6, 2: 3}, pad=pad, seed=None)


def rnn_batch(batch=3, length=9, vocab=61):
    """(input_ids, attention_mask), rows 1 and 2 right-padded."""
    return right_padded(4, vocab, batch, length, {1: 6, 2: 3})

"""The nanoGPT side-by-side benchmark's data and evaluator (benchmarks/bench_shakespeare_char.py; the benchmark itself
runs minutes and is not a test): the files it writes in nanoGPT's format hold our split with our char tokenizer's
ids, and its evaluator is the mean next-character cross-entropy over non-overlapping blocks."""

import importlib
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("bench_shakespeare_char")


def test_nanogpt_files_round_trip_with_our_char_ids(bench, tmp_path):
    train_text, validation_text = "First Citizen:\nBefore we proceed,\n\nhear me speak.", "HAMLET. Who's there~\n"
    meta = bench.write_nanogpt_data(tmp_path, train_text, validation_text)
    train = np.fromfile(tmp_path / "train.bin", dtype=np.uint16)
    val = np.fromfile(tmp_path / "val.bin", dtype=np.uint16)
    assert pickle.loads((tmp_path / "meta.pkl").read_bytes()) == meta
    assert bench.decode(train, meta["itos"]) == "First Citizen:\nBefore we proceed,\n\nhear me speak.\n<eos>"
    # "HAMLET", "W", "'" and "~" never occur in training: <unk>, as our tokenizer maps them
    assert bench.decode(val, meta["itos"]) == "<unk>" * 6 + ". <unk>ho<unk>s there<unk>\n<eos>"

    from hf_scratch.tools.tokenization import train_tokenizer

    tokenizer = train_tokenizer(train_text.splitlines(), kind="char")
    assert meta["stoi"] == tokenizer.get_vocab() and meta["vocab_size"] == len(tokenizer)
    stream = bench.char_stream(validation_text)
    assert tokenizer(stream, add_special_tokens=False)["input_ids"] == val[:-1].tolist()


def test_block_loss_is_next_token_cross_entropy_over_whole_blocks(bench):
    ids = np.random.default_rng(0).integers(0, 7, size=3 * bench.BLOCK + 5).astype(np.uint16)
    bigram = torch.nn.Embedding(7, 7)
    # the 5 trailing ids are dropped, as the Trainer's grouping drops them
    expected = torch.nn.functional.cross_entropy(
        bigram(torch.from_numpy(ids[: 3 * bench.BLOCK].astype(np.int64)).view(3, -1)[:, :-1]).flatten(0, 1),
        torch.from_numpy(ids[: 3 * bench.BLOCK].astype(np.int64)).view(3, -1)[:, 1:].flatten(),
    )
    assert bench.block_loss(bigram, ids, batch_size=2) == pytest.approx(expected.item(), rel=1e-6)


def test_side_by_side_needs_a_nanogpt_checkout(bench, tmp_path):
    with pytest.raises(ValueError, match="git clone https://github.com/karpathy/nanoGPT"):
        bench.check_nanogpt_dir(None)
    with pytest.raises(ValueError, match="not a nanoGPT checkout"):
        bench.check_nanogpt_dir(tmp_path)

"""Tokenizers pickle by source (profile name, file) or by model and tables, and work in worker processes."""

from __future__ import annotations

import multiprocessing
import pickle


import crayon

TEXT = "Pickled tokenizers: naïve café, 中文, 12345 and <|endoftext|> as text.\r\n"


def round_trip(tok: crayon.Tokenizer) -> crayon.Tokenizer:
    copy = pickle.loads(pickle.dumps(tok))
    assert copy.name == tok.name and copy.n_vocab == tok.n_vocab and copy.backend == tok.backend
    assert copy.encode_ordinary(TEXT) == tok.encode_ordinary(TEXT)
    assert copy.encode(TEXT, allowed_special="all") == tok.encode(TEXT, allowed_special="all")
    return copy


def test_profile_pickles_by_name():
    tok = crayon.load("cl100k_base")
    assert len(pickle.dumps(tok)) < 1000  # the name, not the tables
    round_trip(tok)
    round_trip(tok.with_backend("reference"))


def test_cartridge_and_tokenizer_json_pickle_by_path(tmp_path, monkeypatch):
    tok = crayon.load("lite")
    tok.save(tmp_path / "lite.crayon")
    tok.export(tmp_path / "tokenizer.json", format="hf")
    monkeypatch.chdir(tmp_path)
    for name in ("lite.crayon", "tokenizer.json"):
        loaded = crayon.load(name)
        assert len(pickle.dumps(loaded)) < 1000
        monkeypatch.chdir("/")  # a worker in another folder finds the file by its absolute path
        round_trip(loaded)
        monkeypatch.chdir(tmp_path)


def test_tokenizer_trained_in_memory_pickles_with_its_model():
    tok = crayon.train(texts=[TEXT * 20], vocab_size=300, progress=False, name="tiny", backend="reference")
    copy = round_trip(tok)
    assert copy.special_tokens == tok.special_tokens


def _encode_in_worker(args):
    tok, text = args
    return tok.encode_ordinary(text)


def test_multiprocessing_pool_spawn():
    tok = crayon.load("cl100k_base")
    texts = [TEXT * i for i in range(1, 5)]
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        assert pool.map(_encode_in_worker, [(tok, text) for text in texts]) == [tok.encode_ordinary(t) for t in texts]

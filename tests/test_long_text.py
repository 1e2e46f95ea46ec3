"""One long text on every core (crayon.jit.long_text): cut at the pipeline's exact cuts, the parts encoded on a
thread pool; the tokens must equal the whole text's, for BPE and longest match, with and without special tokens."""

import functools

import pytest
from conftest import corpus_text, tiktoken_encoding
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import tokenizer_text

import crayon

CASES = [("cl100k_base", "bpe"), ("o200k_base", "bpe"), ("gpt2", "bpe"), ("lite", "longest")]


@functools.lru_cache(maxsize=None)
def tokenizers(name: str, algorithm: str) -> tuple[crayon.Tokenizer, crayon.Tokenizer]:
    """(a tokenizer that cuts every text at every allowed position on 2 threads, one that never cuts)."""
    cutting, whole = crayon.load(name, algorithm=algorithm), crayon.load(name, algorithm=algorithm)
    long_texts = cutting.engine.long_texts
    long_texts.min_bytes, long_texts.part_bytes, long_texts.threads = 1, 1, 2
    whole.engine.long_texts.min_bytes = 1 << 62
    return cutting, whole


@pytest.mark.parametrize("name, algorithm", CASES)
@settings(max_examples=60, deadline=None)
@given(st.lists(tokenizer_text, min_size=2, max_size=6).map(" \n".join))
def test_cut_text_gives_the_whole_texts_tokens(name, algorithm, text):
    cutting, whole = tokenizers(name, algorithm)
    assert cutting.encode_ordinary(text) == whole.encode_ordinary(text)
    assert cutting.encode(text, allowed_special="all") == whole.encode(text, allowed_special="all")
    assert cutting.encode_to_numpy(text, disallowed_special=()).tolist() == whole.encode_ordinary(text)


@pytest.mark.parametrize("name, algorithm", CASES)
def test_cut_corpora_give_the_whole_texts_tokens(name, algorithm):
    cutting, whole = tokenizers(name, algorithm)
    for corpus in ("big.txt", "multilingual.txt", "python_code.py", "enwik8_head.xml"):
        text = corpus_text(corpus, limit=12000)
        assert len(cutting.engine.long_texts.parts(text.encode("utf-8"), 2)) > 50  # cut for real, many times
        assert cutting.encode_ordinary(text) == whole.encode_ordinary(text)
    if algorithm == "bpe":
        assert cutting.encode_ordinary(text) == tiktoken_encoding(name).encode_ordinary(text)


def test_texts_are_cut_only_where_a_rule_is_proven():
    words = crayon.load("cl100k_base", pattern=r"\S+|\s+")  # no proven cut rule for this pattern
    long_texts = words.engine.long_texts
    long_texts.min_bytes, long_texts.part_bytes, long_texts.threads = 1, 1, 2
    text = "a b\nc " * 50
    assert long_texts.threads_for(len(text)) == 1
    assert "no proven rule" in long_texts.refusal
    assert words.encode(text) == crayon.load("cl100k_base", pattern=r"\S+|\s+").encode(text)


def test_short_texts_and_one_thread_are_not_cut():
    long_texts = crayon.load("cl100k_base").engine.long_texts
    assert long_texts.min_bytes == 1 << 20  # the default
    assert long_texts.threads_for((1 << 20) - 1) == 1
    long_texts.threads = 2
    assert long_texts.threads_for(1 << 20) == 2
    assert long_texts.encode_parts(b"hello world " * 10, lambda part: pytest.fail("must not be cut"), list, 2) is None
    long_texts.min_bytes, long_texts.threads = 1, 1
    assert long_texts.threads_for(100) == 1


def test_the_threshold_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("CRAYON_LONG_TEXT_BYTES", "4096")
    assert crayon.load("cl100k_base").engine.long_texts.min_bytes == 4096
    monkeypatch.setenv("CRAYON_LONG_TEXT_BYTES", "1MB")
    with pytest.raises(ValueError, match="CRAYON_LONG_TEXT_BYTES must be a whole number"):
        crayon.load("cl100k_base").engine

"""One long text on every core (crayon.jit.long_text): cut at the pipeline's exact cuts, the parts encoded on a
thread pool; the tokens must equal the whole text's, for BPE and longest match, with and without special tokens."""

import functools
import threading

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
        assert len(cutting.engine.long_texts.cuts(text, 2)) > 50  # cut for real, many times
        assert cutting.encode_ordinary(text) == whole.encode_ordinary(text)
    if algorithm == "bpe":
        assert cutting.encode_ordinary(text) == tiktoken_encoding(name).encode_ordinary(text)


def test_texts_are_cut_only_where_a_rule_is_proven():
    words = crayon.load("cl100k_base", pattern=r"\S+|\s+")  # no proven cut rule for this pattern
    long_texts = words.engine.long_texts
    long_texts.min_bytes, long_texts.part_bytes, long_texts.threads = 1, 1, 2
    text = "a b\nc " * 50
    assert long_texts.encode_text(text, lambda part: pytest.fail("must not be cut"), list) is None
    assert "no proven rule" in long_texts.refusal
    assert words.encode(text) == crayon.load("cl100k_base", pattern=r"\S+|\s+").encode(text)


def test_short_texts_are_not_cut_and_one_thread_encodes_the_parts_in_turn():
    tok = crayon.load("cl100k_base")
    long_texts = tok.engine.long_texts
    assert long_texts.min_bytes == 1 << 20  # the default
    long_texts.threads = 2
    assert long_texts.encode_text("hello world " * 10, lambda part: pytest.fail("must not be cut"), list) is None
    long_texts.min_bytes, long_texts.part_bytes, long_texts.threads = 1, 1, 1
    text = corpus_text("big.txt", limit=3000)
    threads = []
    parts = long_texts.encode_text(text, lambda part: threads.append(threading.get_ident()) or bytes(part), list)
    assert len(parts) > 50 and b"".join(parts) == text.encode("utf-8")
    assert set(threads) == {threading.get_ident()}  # one after the other, on the calling thread
    assert tok.encode_ordinary(text) == tiktoken_encoding("cl100k_base").encode_ordinary(text)


def test_the_threshold_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("CRAYON_LONG_TEXT_BYTES", "4096")
    assert crayon.load("cl100k_base").engine.long_texts.min_bytes == 4096
    monkeypatch.setenv("CRAYON_LONG_TEXT_BYTES", "1MB")
    with pytest.raises(ValueError, match="CRAYON_LONG_TEXT_BYTES must be a whole number"):
        crayon.load("cl100k_base").engine


def test_cuts_searched_around_the_wanted_places_are_exact():
    """Parts longer than the search window: each cut is found in a few kilobytes around its wanted place (the
    calling thread never encodes the whole text), widening past a run without spaces or line starts; every cut
    is one the rule accepts in the whole text, and lone surrogates are repaired part by part as in the whole."""
    from crayon.jit.long_text import SEARCH_CHARS

    part = 2 * SEARCH_CHARS + 1
    text = "".join(corpus_text(name, limit=40000) for name in ("multilingual.txt", "python_code.py", "big.txt"))
    run_start = 6 * part - 3 * SEARCH_CHARS // 2  # no cut within the first window around the 6th wanted place
    text = (text[:run_start] + "x" * (3 * SEARCH_CHARS) + "\r\n\r\nword\ud800 \udc00\ud83d\ude00 end\n"
            + text[run_start:])
    tok = crayon.load("cl100k_base")
    long_texts = tok.engine.long_texts
    long_texts.min_bytes, long_texts.part_bytes, long_texts.threads = 1, part, 2
    cuts = long_texts.cuts(text, 2)
    assert len(cuts) > 10 and cuts == sorted(set(cuts))
    assert any(run_start - 1000 < cut <= run_start for cut in cuts)  # found by the widened search
    repaired = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    assert len(repaired) == len(text) - 1  # one surrogate pair became one character
    data = text.encode("utf-8", "surrogatepass")
    rule = long_texts.cut_rule()
    for cut in cuts:
        assert rule.is_cut(data, len(text[:cut].encode("utf-8", "surrogatepass")))
    expected = tiktoken_encoding("cl100k_base").encode_ordinary(text)
    assert tok.encode_ordinary(text) == expected == tok.encode(text)
    assert tok.encode_to_numpy(text).tolist() == expected == tok.encode_to_numpy(repaired).tolist()

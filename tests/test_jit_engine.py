"""The jit engine through the public API against tiktoken: every corpus, generated text, specials, batches, the
flat form, crayon.jit.encode, other patterns (reference pre-tokenizer + jit span encoder), long inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import crayon
import crayon.jit
from conftest import CORPUS_FILES, corpus_text, mergeable_ranks, tiktoken_encoding
from crayon.errors import UnknownTokenError
from crayon.jit.engine import JitEngine
from crayon.jit.kernels import ENCODERS
from crayon.reference.bpe import BytePairModel
from crayon.tokenizer import Tokenizer
from strategies import tokenizer_text

ENCODINGS = ["cl100k_base", "o200k_base"]


@pytest.fixture(scope="module", params=ENCODINGS)
def pair(request):
    """(crayon tokenizer on the jit backend, tiktoken encoder) for one vocabulary."""
    tok = crayon.load(request.param, backend="jit")
    assert tok.backend == "jit"
    return tok, tiktoken_encoding(request.param)


@pytest.mark.parametrize("corpus", CORPUS_FILES)
def test_corpus_matches_tiktoken(pair, corpus):
    tok, reference = pair
    text = corpus_text(corpus)
    tokens = tok.encode_ordinary(text)
    assert tokens == reference.encode_ordinary(text)
    assert crayon.jit.encode(tok, text).tolist() == tokens


@settings(max_examples=200, deadline=None)
@given(text=tokenizer_text)
def test_generated_text_matches_tiktoken(pair, text):
    tok, reference = pair
    assert tok.encode_ordinary(text) == reference.encode_ordinary(text)
    assert tok.encode(text, allowed_special="all") == reference.encode(text, allowed_special="all")
    assert tok.encode(text, disallowed_special=()) == reference.encode(text, disallowed_special=())


@settings(max_examples=100, deadline=None)
@given(text=st.text(st.characters(), max_size=40))
def test_any_unicode_matches_tiktoken(pair, text):
    """Every category, lone surrogates included (replaced by U+FFFD as tiktoken does)."""
    tok, reference = pair
    assert tok.encode_ordinary(text) == reference.encode_ordinary(text)


def test_specials_and_numpy_encode(pair):
    tok, reference = pair
    text = "hi <|endoftext|> there<|endofprompt|>!"
    with pytest.raises(ValueError, match="disallowed special token"):
        tok.encode(text)
    with pytest.raises(ValueError, match="disallowed special token"):
        crayon.jit.encode(tok, text)
    for allowed in ("all", {"<|endoftext|>"}):
        expected = reference.encode(text, allowed_special=allowed, disallowed_special=())
        assert tok.encode(text, allowed_special=allowed, disallowed_special=()) == expected
        encoded = crayon.jit.encode(tok, text, allowed_special=allowed, disallowed_special=())
        assert encoded.dtype == np.uint32 and encoded.tolist() == expected
    assert crayon.jit.encode(tok, "").tolist() == [] == tok.encode("")


def test_batches_and_flat_form_equal_a_loop(pair):
    tok, reference = pair
    texts = [line for line in corpus_text("english_web.txt", 40_000).splitlines()] + ["", "日本語 text", " " * 50]
    expected = [reference.encode_ordinary(text) for text in texts]
    for threads in (1, 2, 3):
        assert tok.encode_ordinary_batch(texts, num_threads=threads) == expected
        assert tok.encode_batch(texts, num_threads=threads) == expected
        tokens, offsets = tok.engine.encode_ordinary_flat(texts, num_threads=threads)
        assert tokens.dtype == np.uint32 and offsets.dtype == np.int64 and len(offsets) == len(texts) + 1
        assert [tokens[offsets[i] : offsets[i + 1]].tolist() for i in range(len(texts))] == expected
    assert tok.encode_batch(["a<|endoftext|>b"], allowed_special="all") == reference.encode_batch(
        ["a<|endoftext|>b"], allowed_special="all")
    assert tok.encode_ordinary_batch([]) == []


@pytest.mark.parametrize("name", ENCODINGS)
def test_every_span_encoder_gives_the_same_tokens(name):
    reference = tiktoken_encoding(name)
    text = corpus_text("multilingual.txt", 60_000) + corpus_text("enwik8_head.xml", 60_000)
    expected = reference.encode_ordinary(text)
    tok = crayon.load(name, backend="jit")
    for encoder in ENCODERS:
        engine = JitEngine(tok, encoder=encoder, tables=tok.engine.tables)
        assert engine.encode_ordinary(text) == expected, encoder


@pytest.mark.parametrize("name", ENCODINGS)
def test_long_single_word_inputs(name):
    """A run of one letter is one span; every encoder stays exact (and linear: see bench/peers.py)."""
    tok = crayon.load(name, backend="jit")
    plain = BytePairModel(mergeable_ranks(name), ignore_merges=False)
    for text in ["a" * 5000, "ab" * 2500, "好" * 2000, " " * 4000 + "x"]:
        expected = tiktoken_encoding(name).encode_ordinary(text)
        assert tok.encode_ordinary(text) == expected
        if len(text) <= 4000:
            assert expected == [t for span in crayon.reference.pretokenize.split(text, name)
                                for t in plain.encode_span(span.encode())]
    long_text = "a" * 200_000
    encoded = {encoder: JitEngine(tok, encoder=encoder, tables=tok.engine.tables).encode_ordinary(long_text)
               for encoder in ("backtrack", "heap")}
    assert encoded["backtrack"] == encoded["heap"]
    assert tok.decode(encoded["backtrack"]) == long_text


def test_other_patterns_use_the_reference_spanner_exactly():
    """A pattern without a jit pre-tokenizer: the regex splits, the jit span encoders encode."""
    ranks = mergeable_ranks("cl100k_base")
    pattern = r"\w+|\s+|[^\w\s]+"
    jit_tok = Tokenizer("custom", BytePairModel(ranks), pattern=pattern, backend="jit")
    ref_tok = Tokenizer("custom", BytePairModel(ranks), pattern=pattern, backend="reference")
    assert jit_tok.engine.pattern_id is None
    text = corpus_text("python_code.py", 50_000) + corpus_text("multilingual.txt", 20_000)
    assert jit_tok.encode_ordinary(text) == ref_tok.encode_ordinary(text)
    texts = text.splitlines()[:200]
    assert jit_tok.encode_ordinary_batch(texts) == [ref_tok.encode_ordinary(t) for t in texts]


def test_a_byte_without_a_token_raises_a_typed_error():
    ranks = {bytes([b]): b for b in range(128)}
    tok = Tokenizer("ascii", BytePairModel(ranks), pattern="cl100k_base", backend="jit")
    assert tok.encode_ordinary("plain ascii") == [ord(c) for c in "plain ascii"]
    with pytest.raises(UnknownTokenError, match="has no token"):
        tok.encode_ordinary("café")


def test_remembered_short_texts_keep_the_special_token_contract(pair):
    """``encode`` and ``encode_ordinary`` remember short texts' tokens: a text remembered by one never skips the
    other's special-token check, a caller's change to a returned list changes nothing, the memory stays bounded."""
    tok, reference = pair
    tok = tok.with_backend("jit")  # a memory of its own
    special = "hi <|endoftext|>"
    assert tok.encode_ordinary(special) == tok.encode_ordinary(special) == reference.encode_ordinary(special)
    for _ in range(2):
        with pytest.raises(ValueError, match="disallowed special token"):
            tok.encode(special)
    assert tok.encode(special, allowed_special="all") == reference.encode(special, allowed_special="all")
    first = tok.encode("hello world")
    first.append(-1)
    assert tok.encode("hello world") == reference.encode("hello world")
    for i in range(crayon.tokenizer.SHORT_TEXTS_KEPT + 10):
        tok.encode(f"w{i}")
    assert tok.encode("w5") == reference.encode("w5")
    assert len(tok._short_encode) <= crayon.tokenizer.SHORT_TEXTS_KEPT


def test_short_calls_equal_the_array_path(pair):
    """One short text is encoded through reusable per-thread arrays; a span longer than the thread's scratch
    falls back to the general path: both give the general path's tokens."""
    tok, reference = pair
    engine = JitEngine(tok, tables=tok.engine.tables)
    for text in ["", "x", " é" * 40, "a" * 255, "a" * 257 + " b", "好" * 1024, "日本 " * 204, "z" * 1025]:
        expected = reference.encode_ordinary(text)
        assert engine.encode_ordinary(text) == expected
        assert engine.encode_ordinary_array(text).tolist() == expected

"""BPE training: naive == fast reference == jit, merge for merge; tiktoken reproduces the training merges."""

from __future__ import annotations

import random

import numpy as np
import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import corpus_text
from strategies import tokenizer_text
from crayon.jit.train import (
    CUT_SEARCH_BLOCK,
    _merged_token,
    _token_store,
    byte_vocabulary,
    count_words_jit,
    iter_chunks,
    safe_cuts,
    train_bpe_jit,
)
from crayon.reference.bpe import BytePairModel
from crayon.reference.pretokenize import compile_pattern, split_specials
from crayon.reference.train import Vocabulary, count_words, train_bpe, train_bpe_naive
from crayon.reference.unicode16 import pin_unicode_classes

tiktoken = pytest.importorskip("tiktoken")

PATTERNS = ["cl100k_base", "o200k_base", "r50k_base"]
# Few distinct characters make many repeated pairs (so many merges and ties), plus the places patterns differ.
FRAGMENTS = [
    "a", "b", "ab", "aa", " ", "  ", "\n", "\n\n", "\r\n", " \n", "'s", "1", "23", "é", "中", "😀", "!", "/", "X",
    "<|eot|>",
]
corpus_texts = st.lists(st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join), min_size=1, max_size=4)
unicode_texts = st.lists(tokenizer_text, min_size=1, max_size=3)


def assert_same_training(texts, vocab_size, pattern, special_tokens=()):
    fast = train_bpe(texts, vocab_size, pattern=pattern, special_tokens=special_tokens)
    assert train_bpe_naive(texts, vocab_size, pattern=pattern, special_tokens=special_tokens) == fast
    assert train_bpe_jit(texts, vocab_size, pattern=pattern, special_tokens=special_tokens, workers=1) == fast
    return fast


def encode_with_training_merges(result, text):
    """Encode ``text`` by applying the learned merges to each span in training order (HF's merge-list rule)."""
    model = BytePairModel(result.ranks, result.merges, ignore_merges=False)
    span_regex = compile_pattern(result.pattern)
    encoded_spans = {}
    ids = []
    for piece, is_special in split_specials(text, result.special_tokens):
        if is_special:
            ids.append(result.special_tokens[piece])
            continue
        for span in span_regex.findall(piece):
            if span not in encoded_spans:
                encoded_spans[span] = model.encode_span(span.encode())
            ids.extend(encoded_spans[span])
    return ids


def assert_tiktoken_reproduces_training(result, texts):
    """tiktoken's rule (merge the adjacent pair whose concatenation has the lowest rank) gives the training
    segmentation of the training text, so ``ranks`` work as tiktoken mergeable ranks."""
    encoding = tiktoken.Encoding(
        "trained", pat_str=result.pattern, mergeable_ranks=result.ranks, special_tokens=result.special_tokens
    )
    for text in texts:
        assert encoding.encode(text, allowed_special="all") == encode_with_training_merges(result, text)


# ------------------------------------------------------------------------------------------ known answers


def test_known_merges_and_tie_break():
    # "aaabdaaabac": (a, a) occurs 4 times (overlaps count) and is merged left to right, leaving "aa a b d aa
    # a b a c"; then (a, b) and (aa, a) both occur twice: the tie goes to the smaller left id, a = 97 < 256.
    result = assert_same_training(["aaabdaaabac"], 259, r"\S+")
    assert result.merges == [(b"a", b"a"), (b"a", b"b"), (b"aa", b"ab")]
    assert result.ranks[b"aa"] == 256 and result.ranks[b"ab"] == 257 and result.ranks[b"aaab"] == 258
    assert [result.ranks[bytes([byte])] for byte in range(256)] == list(range(256))


def test_a_merge_making_existing_bytes_reuses_their_id():
    # Never seen in training so far, but defined: "abc" made from (ab, c) and again from (a, bc) is one token.
    a, b, c = b"abc"
    vocab = Vocabulary()
    ab, bc = vocab.merge(a, b), vocab.merge(b, c)
    abc = vocab.merge(ab, c)
    assert (ab, bc, abc) == (256, 257, 258) and vocab.merge(a, bc) == abc and len(vocab.ranks) == 259

    token_bytes, token_spans, token_hashes, token_table = _token_store(*byte_vocabulary(), 300)
    n_tokens = 256
    ids = []
    for left, right in [(a, b), (b, c), (ab, c), (a, bc)]:
        new_id, n_tokens = _merged_token(left, right, token_bytes, token_spans, token_hashes, token_table, n_tokens)
        ids.append(new_id)
    assert ids == [ab, bc, abc, abc] and n_tokens == 259


def test_special_tokens_are_reserved_and_numbered_after_the_learned_tokens():
    texts = ["<|endoftext|>hello<|endoftext|>hello world<|endoftext|>"] * 3
    result = assert_same_training(texts, 256 + 5 + 1, "cl100k_base", special_tokens=("<|endoftext|>",))
    assert len(result.ranks) == 261
    assert result.special_tokens == {"<|endoftext|>": 261}
    assert not any(b"<" in left + right or b"|" in left + right for left, right in result.merges)


def test_training_stops_when_no_pair_is_left():
    result = assert_same_training(["ab ab"], 1000, "cl100k_base", special_tokens=["<s>", "</s>"])
    assert result.merges == [(b"a", b"b"), (b" ", b"ab")]
    assert result.special_tokens == {"<s>": 258, "</s>": 259}


def test_empty_corpus_gives_the_byte_tokens():
    for texts in ([], [""], ["<|endoftext|>"]):
        result = assert_same_training(texts, 300, "cl100k_base", special_tokens="<|endoftext|>")
        assert result.merges == [] and len(result.ranks) == 256
        assert result.special_tokens == {"<|endoftext|>": 256}


@pytest.mark.parametrize("train", [train_bpe_naive, train_bpe, train_bpe_jit])
def test_bad_settings_are_refused(train, tmp_path):
    with pytest.raises(ValueError, match="smaller than the 256 byte tokens plus 2 special"):
        train(["hello"], 257, special_tokens=["<a>", "<b>"])
    with pytest.raises(ValueError, match="distinct"):
        train(["hello"], 300, special_tokens=["<a>", "<a>"])
    with pytest.raises(ValueError, match="non-empty"):
        train(["hello"], 300, special_tokens=[""])
    with pytest.raises(TypeError, match="bytes"):
        train([b"hello"], 300)
    with pytest.raises(TypeError):
        train(["hello"], 300.0)
    with pytest.raises(ValueError, match="lone surrogate"):
        train(["ok \ud800 no"], 300)


def test_jit_reads_files_and_refuses_non_utf8_files(tmp_path):
    text = corpus_text("shakespeare.txt", 50_000)
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8")
    assert train_bpe_jit(path, 600, workers=1) == train_bpe([text], 600)
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"x" * 10_000 + "caf\u00e9 ol\u00e9\n".encode("latin-1"))
    with pytest.raises(ValueError, match="latin1.txt is not UTF-8 text: invalid continuation byte at byte 10003"):
        train_bpe_jit([bad], 300, workers=1)
    truncated = tmp_path / "truncated.txt"
    truncated.write_bytes("ok \u00e9".encode()[:-1])
    with pytest.raises(ValueError, match="truncated.txt is not UTF-8 text: unexpected end of data at byte 3"):
        train_bpe_jit([truncated], 300, workers=1)


# ---------------------------------------------------------------------------------- naive == fast == jit


@settings(max_examples=150, deadline=None)
@given(corpus_texts, st.integers(257, 300), st.sampled_from(PATTERNS + [r"\S+|\s+"]))
def test_trainers_agree_on_repetitive_text(texts, vocab_size, pattern):
    assert_same_training(texts, vocab_size, pattern, special_tokens=["<|eot|>"])


@settings(max_examples=60, deadline=None)
@given(unicode_texts, st.integers(256, 400), st.sampled_from(PATTERNS))
def test_trainers_agree_on_unicode_text(texts, vocab_size, pattern):
    assert_same_training(texts, vocab_size, pattern)


@settings(max_examples=100, deadline=None)
@given(corpus_texts, st.integers(257, 320))
def test_tiktoken_reproduces_the_training_merges(texts, vocab_size):
    assert_tiktoken_reproduces_training(train_bpe(texts, vocab_size, special_tokens=["<|eot|>"]), texts)


def test_trainers_agree_on_a_corpus_slice():
    text = corpus_text("big.txt", 60_000)
    assert_same_training([text], 256 + 120, "cl100k_base")


def test_reference_and_jit_agree_on_1mb_with_tiktoken():
    names = ["big.txt", "multilingual.txt", "python_code.py", "enwik8_head.xml", "english_web.txt"]
    texts = [corpus_text(name, 200_000) for name in names]
    assert sum(map(len, texts)) >= 1_000_000
    result = train_bpe(texts, 256 + 1500, special_tokens=["<|endoftext|>"])
    assert train_bpe_jit(texts, 256 + 1500, special_tokens=["<|endoftext|>"], workers=2) == result
    assert len(result.ranks) == 256 + 1500 - 1
    assert_tiktoken_reproduces_training(result, texts)


def test_training_is_deterministic():
    texts = [corpus_text("shakespeare.txt", 100_000), corpus_text("python_code.py", 100_000)]
    first = train_bpe_jit(texts, 1000, workers=2)
    assert train_bpe_jit(texts, 1000, workers=2) == first
    assert train_bpe_jit(texts[::-1], 1000, workers=1, progress=True) == first
    assert train_bpe(texts[::-1], 1000) == first


# ------------------------------------------------------------------------------------ counting, chunking


@settings(max_examples=150, deadline=None)
@given(
    st.lists(unicode_texts.map("".join) | corpus_texts.map("".join), min_size=1, max_size=6),
    st.sampled_from(PATTERNS + [r"\S+|\s+"]),
    st.integers(1, 3),
    st.integers(1, 40),
)
def test_jit_word_counts_are_the_reference_counts(texts, pattern, workers, chunk_size):
    specials = ["<|eot|>", "x\ny"]
    symbols, lengths, counts = count_words_jit(texts, pattern, specials, workers=workers, chunk_size=chunk_size)
    ends = np.cumsum(lengths)
    words = [symbols[end - length : end].tobytes() for end, length in zip(ends, lengths)]
    assert dict(zip(words, counts.tolist())) == count_words(texts, pattern, specials)
    assert len(set(words)) == len(words)


def test_jit_word_counts_on_corpus_files():
    texts = [corpus_text(name, 300_000) for name in ["enwik8_head.xml", "multilingual.txt"]]
    symbols, lengths, counts = count_words_jit(texts, "o200k_base", ["<|endoftext|>"], workers=2, chunk_size=10_000)
    ends = np.cumsum(lengths)
    words = [symbols[end - length : end].tobytes() for end, length in zip(ends, lengths)]
    assert dict(zip(words, counts.tolist())) == count_words(texts, "o200k_base", ["<|endoftext|>"])




def spans(texts, pattern, special_tokens):
    span_regex = compile_pattern(pattern)
    return [
        span
        for text in texts
        for piece, is_special in split_specials(text, special_tokens)
        if not is_special
        for span in span_regex.findall(piece)
    ]


CUT_FRAGMENTS = [
    "a", "Bc", "é", "ǅ", "A\u0301", "中", "1", "'s", "'l", "'ve", "x'", "!", "/", " a", " ", "  ", "\t", "\n",
    "\r\n", "\n\n", "\u00a0", "\x0b", "\x1c", "\x85", "\u2028", "<x\ny>",
]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(CUT_FRAGMENTS), max_size=60).map("".join),
    st.integers(1, 12),
    st.sampled_from(PATTERNS),
)
def test_chunks_pre_tokenize_exactly_as_the_whole_text(text, chunk_size, pattern):
    specials = ["<x\ny>", "Bc\n", "a "]
    chunks = list(iter_chunks([text], pattern, specials, chunk_size))
    assert "".join(chunks) == text
    assert spans(chunks, pattern, specials) == spans([text], pattern, specials)


def test_corpus_file_chunks_pre_tokenize_exactly_as_the_whole_files(tmp_path):
    rng = random.Random(0)
    for name in ["big.txt", "enwik8_head.xml", "multilingual.txt", "python_code.py"]:
        text = corpus_text(name, 300_000)
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        for pattern in PATTERNS:
            chunk_size = rng.randint(500, 5_000)
            chunks = list(iter_chunks(path, pattern, (), chunk_size))
            assert "".join(chunks) == text
            assert max(map(len, chunks)) <= 2 * chunk_size  # streaming: memory bounded by the chunk size
            assert spans(chunks, pattern, ()) == spans([text], pattern, ())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(tokenizer_text, st.sampled_from(CUT_FRAGMENTS)), max_size=8).map("".join))
def test_safe_cuts_are_a_letter_then_whitespace_in_unicode_16(text):
    """The cuts read the jit pre-tokenizer's tables: the places where the pinned regex \\p{L}\\s matches."""
    letter_then_space = regex.compile(pin_unicode_classes(r"(?=\p{L}\s)"))
    expected = [match.start() + 1 for match in letter_then_space.finditer(text)]
    assert safe_cuts(text, 1, len(text)).tolist() == expected


def test_a_long_piece_is_cut_at_its_last_safe_cut():
    """The search runs back from the end a block at a time: a cut far from the end, or none, is found."""
    for tail in (CUT_SEARCH_BLOCK // 3, 3 * CUT_SEARCH_BLOCK + 5):
        text = "word " + "0x12," * tail
        chunks = list(iter_chunks([text + text], "cl100k_base", (), chunk_size=len(text)))
        assert chunks == [text[:4], text[4:] + text]  # the second piece holds no cut: it is kept whole
    assert list(iter_chunks(["0x12," * 10_000], "cl100k_base", (), chunk_size=1000)) == ["0x12," * 10_000]


def test_custom_patterns_are_not_cut():
    text = "ab\ncd\nef " * 1000
    assert list(iter_chunks([text], r"[^\n]+\n[a-z]|.", (), chunk_size=10)) == [text]

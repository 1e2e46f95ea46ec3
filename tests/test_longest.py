"""Greedy longest match: reference and jit give identical ids; byte fallback makes every round trip lossless."""

import functools
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import CORPUS_FILES, corpus_text, mergeable_ranks
from hypothesis import given, settings
from hypothesis import strategies as st

import crayon
from crayon.errors import CartridgeError
from crayon.jit import longest as jit_longest
from crayon.jit.dat import compile_dat
from crayon.jit.pretokenize import PATTERN_IDS, unicode_tables
from crayon.reference import longest as ref_longest
from crayon.reference.pretokenize import split

FIRST_RESERVED = 100277  # cl100k's n_vocab: above every ordinary and special id


@functools.lru_cache(maxsize=None)
def vocabulary(kind: str) -> dict[int, bytes]:
    """"full": all of cl100k. "sparse": every 3rd multi-byte cl100k token, no single bytes, so fallback fires."""
    ranks = mergeable_ranks("cl100k_base")
    if kind == "sparse":
        return {rank: token for token, rank in ranks.items() if len(token) > 1 and rank % 3 == 0}
    return {rank: token for token, rank in ranks.items()}


@functools.lru_cache(maxsize=None)
def model(kind: str) -> ref_longest.LongestMatchModel:
    tokens = vocabulary(kind)
    return ref_longest.LongestMatchModel(tokens, *compile_dat(list(tokens.values()), list(tokens)), FIRST_RESERVED)


def span_ends(text: str, pattern: str = "cl100k_base") -> list[int]:
    """Byte offsets where the pattern's pre-tokenizer spans end."""
    ends, position = [], 0
    for span in split(text, pattern):
        position += len(span.encode("utf-8"))
        ends.append(position)
    return ends


def encode_both(data: bytes, ends: list[int], kind: str) -> list[int]:
    """Reference ids, after checking that jit (with and without the ASCII fast path) gives the same."""
    dat, fallback = dat_of(model(kind)), model(kind).fallback
    expected = ref_longest.encode_spans(data, ends, *dat, fallback)
    for fast in (False, True):
        text, span_ends_array = np.frombuffer(data, np.uint8), np.array(ends, np.int64)
        ids = jit_longest.encode_spans(text, span_ends_array, *dat, fallback, ascii_fast_path=fast)
        assert ids.dtype == np.int32 and ids.tolist() == expected
    return expected


def dat_of(longest_match: ref_longest.LongestMatchModel):
    return longest_match.base, longest_match.check, longest_match.values


def decode(ids: list[int], kind: str) -> bytes:
    return b"".join(model(kind).token_bytes[i] for i in ids)


@pytest.mark.parametrize("kind", ["full", "sparse"])
@pytest.mark.parametrize("corpus", CORPUS_FILES)
def test_reference_and_jit_agree_on_corpora_and_round_trip(corpus, kind):
    text = corpus_text(corpus, limit=6000)
    data = text.encode("utf-8")
    for ends in (span_ends(text), [len(data)]):
        ids = encode_both(data, ends, kind)
        assert decode(ids, kind) == data
    if kind == "sparse":
        assert any(i >= FIRST_RESERVED for i in ids), "the sparse vocabulary should need byte fallback"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=120), st.sampled_from(["full", "sparse"]))
def test_reference_and_jit_agree_on_any_text(text, kind):
    data = text.encode("utf-8")
    assert decode(encode_both(data, span_ends(text), kind), kind) == data


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=100), st.lists(st.integers(0, 100)), st.sampled_from(["full", "sparse"]))
def test_reference_and_jit_agree_on_any_bytes_and_spans(data, cuts, kind):
    ends = sorted({min(cut, len(data)) for cut in cuts} | {len(data)})
    assert decode(encode_both(data, ends, kind), kind) == data


def test_matches_are_longest_and_stay_inside_spans():
    ids = encode_both(b"hello world", [11], "full")
    assert [vocabulary("full")[i] for i in ids] == [b"hello", b" world"]
    ids = encode_both(b"hello world", [3, 11], "full")
    assert [vocabulary("full")[i] for i in ids] == [b"hel", b"lo", b" world"]


def test_byte_fallback_ids_and_their_bytes():
    ranks = mergeable_ranks("cl100k_base")
    assert model("full").fallback.tolist() == [ranks[bytes([b])] for b in range(256)]
    assert model("full").token_bytes == vocabulary("full")  # every byte is a token: no fallback id needed
    assert model("sparse").fallback.tolist() == [FIRST_RESERVED + b for b in range(256)]
    assert model("sparse").token_bytes == {**vocabulary("sparse"), **{FIRST_RESERVED + b: bytes([b]) for b in range(256)}}
    with pytest.raises(ValueError, match="first_reserved_id"):
        ref_longest.byte_fallback_ids(*dat_of(model("full")), 2**31 - 200)
    with pytest.raises(ValueError, match="below first_reserved_id"):
        ref_longest.LongestMatchModel({5: b"a"}, *compile_dat([b"a"], [5]), first_reserved_id=5)


@pytest.mark.parametrize(
    "data, ends, message",
    [(b"abc", [2], "bytes would be lost"), (b"abc", [2, 1, 3], "decrease|rise"), (b"abc", [4], "lost|rise")],
)
def test_bad_span_ends_are_refused(data, ends, message):
    dat, fallback = dat_of(model("full")), model("full").fallback
    with pytest.raises(ValueError, match=message):
        ref_longest.encode_spans(data, ends, *dat, fallback)
    with pytest.raises(ValueError, match=message):
        jit_longest.encode_spans(np.frombuffer(data, np.uint8), np.array(ends), *dat, fallback)


def test_jit_refuses_malformed_dat_arrays():
    dat, fallback = dat_of(model("full")), model("full").fallback
    with pytest.raises(ValueError, match="length"):
        jit_longest.encode_spans(np.zeros(3, np.uint8), np.array([3]), dat[0][:-1], dat[1], dat[2], fallback)
    with pytest.raises(ValueError, match="256"):
        jit_longest.encode_spans(np.zeros(3, np.uint8), np.array([3]), *dat, fallback[:255])


@pytest.mark.parametrize("scale", [3, 300, 2**31 - 1])
def test_hostile_dat_arrays_give_ids_not_crashes(scale):
    rng = np.random.default_rng(scale)
    data = corpus_text("multilingual.txt", limit=3000).encode("utf-8")
    fallback = np.arange(256, dtype=np.int32)
    for size in (1, 7, 500):
        base, check, values = rng.integers(-scale, scale, size=(3, size), dtype=np.int64).astype(np.int32)
        for fast in (False, True):
            text = np.frombuffer(data, np.uint8)
            ends = np.array([len(data)])
            ids = jit_longest.encode_spans(text, ends, base, check, values, fallback, ascii_fast_path=fast)
            assert 1 <= len(ids) <= len(data)
        tables = jit_longest.match_tables(SimpleNamespace(base=base, check=check, values=values, fallback=fallback))
        count = jit_longest.encode_text_kernel(text, PATTERN_IDS["cl100k_base"], unicode_tables(), tables,
                                               np.empty(len(data), np.uint8), np.empty(64, np.int64),
                                               np.empty(len(data), np.int32))
        assert 1 <= count <= len(data)


def encode_text(data: bytes, pattern: str, kind: str) -> list[int]:
    """The fused kernel (pre-tokenizer and match in one pass) on UTF-8 ``data``."""
    out = np.empty(len(data), np.int32)
    count = jit_longest.encode_text_kernel(np.frombuffer(data, np.uint8), PATTERN_IDS[pattern], unicode_tables(),
                                           jit_longest.match_tables(model(kind)), np.empty(len(data), np.uint8),
                                           np.empty(64, np.int64), out)
    return out[:count].tolist()


@pytest.mark.parametrize("kind", ["full", "sparse"])
def test_engine_kernel_agrees_with_reference_on_corpora(kind):
    for corpus in CORPUS_FILES:
        text = corpus_text(corpus, limit=20000)
        for pattern in ("cl100k_base", "o200k_base", "gpt2"):
            expected = ref_longest.encode_spans(text.encode("utf-8"), span_ends(text, pattern), *dat_of(model(kind)),
                                                model(kind).fallback)
            assert encode_text(text.encode("utf-8"), pattern, kind) == expected


ASCII_WORDS = st.lists(st.sampled_from(["hello", "Hello", "HELLO", "HTMLparser", "camelCase", " ", "  ", "'s", "'T",
                                        "'ll", "'", "é", "\u0301", "ʰ", "日本", "1", "12345", "½", "٣", ",", ".\n",
                                        "\r\n", "\n", "\r", "/", "//", "(", "A", "a", "_", "\t", "\x0b", "\x1c", "\x7f",
                                        "\x00", "—", "...", "$", "\u00a0", "'S", "'Re", "'LL", "'lx", "'v", "'\u017f", "ſ", "\u0085",
                                        "\u2028", " \n", "\n\n", "  \n ", "\r\n\r\n", "\x0c", "\x1f", "1234", "/\n",
                                        "\t(", "x", "'d", "-", "\nA", "\nb"]), max_size=30).map("".join)


@settings(max_examples=300, deadline=None)
@given(ASCII_WORDS, st.sampled_from(["cl100k_base", "o200k_base", "gpt2"]))
def test_engine_kernel_agrees_with_reference_around_ascii_spans(text, pattern):
    """Where the kernel's ASCII shortcut ends a span (the reference's end), and where it leaves it to the
    pre-tokenizer (-1)."""
    data = text.encode("utf-8")
    ends = span_ends(text, pattern)
    array = np.frombuffer(data, np.uint8)
    for start, end in zip([0, *ends], ends):
        shortcut = jit_longest.ascii_span_end(array, start, len(data), PATTERN_IDS[pattern])
        assert shortcut in (-1, end), (data[start:end], data[start:shortcut])
    expected = ref_longest.encode_spans(data, ends, *dat_of(model("full")), model("full").fallback)
    assert encode_text(data, pattern, "full") == expected


def test_a_corrupt_dat_id_raises_instead_of_a_wrong_list():
    engine = crayon.load("lite", algorithm="longest", backend="jit").engine
    with pytest.raises(CartridgeError, match="outside the vocabulary"):
        engine.as_list(np.array([3, engine._n_ids], np.uint32))
    assert engine.as_list(np.array([], np.uint32)) == []


@settings(max_examples=300, deadline=None)
@given(ASCII_WORDS, st.sampled_from(["cl100k_base", "o200k_base"]), st.integers(0, 40))
def test_span_boundary_after_cuts_where_spans_end_and_stay_the_same(text, pattern, offset):
    """The kernel classifies characters only up to ``span_boundary_after`` and runs the pre-tokenizer on the text cut
    there: that offset must end a span of the whole text, and the spans before it must be those of the cut text."""
    data = text.encode("utf-8")
    cut = jit_longest.span_boundary_after(np.frombuffer(data, np.uint8), offset, PATTERN_IDS[pattern])
    assert cut == len(data) or (max(offset, 1) <= cut < len(data) and data[cut - 1:cut] == b"\n")
    ends = span_ends(text, pattern)
    assert cut in [0, *ends] or cut == len(data)
    cut_text = data[:cut].decode("utf-8")
    assert span_ends(cut_text, pattern) == [end for end in ends if end <= cut]


@functools.lru_cache(maxsize=None)
def lite_longest(engine: str):
    """"reference", "jit", or "cut": the jit engine cutting every text at every allowed place, parts in turn."""
    tok = crayon.load("lite", algorithm="longest", backend="reference" if engine == "reference" else "jit")
    if engine == "cut":
        long_texts = tok.engine.long_texts
        long_texts.min_bytes, long_texts.part_bytes, long_texts.threads = 1, 1, 1
    return tok


UNICODE_PIECES = st.lists(st.sampled_from(["hello", " World", "\ud800", "\udfff", "\ud83d\ude00", "é", " 日本", " ",
                                           "\n", "'s", "—", "½", "\u0301", "12"]), max_size=25).map("".join)


@settings(max_examples=150, deadline=None)
@given(UNICODE_PIECES)
def test_public_calls_repair_lone_surrogates_as_the_reference(text):
    """The jit engine makes the UTF-8 once (``prepare`` repairs only a text or part with none): every public call
    gives the reference engine's ids, lone surrogates as U+FFFD, whole or cut, long (over SHORT_TEXT) or short."""
    reference = lite_longest("reference")
    for piece in (text, text * 3):
        expected = reference.encode(piece)
        assert reference.encode_ordinary(piece) == expected
        for engine in ("jit", "cut"):
            tok = lite_longest(engine)
            assert tok.encode(piece) == expected
            assert tok.encode_ordinary(piece) == expected
            assert tok.encode_to_numpy(piece).tolist() == expected
            assert tok.encode_batch([piece, "x", piece]) == [expected, tok.encode("x"), expected]

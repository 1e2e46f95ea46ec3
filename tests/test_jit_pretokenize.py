"""The jit pre-tokenizers against their reference (regex.findall): tables, every short tuple of character
classes (wordchipper's combinatorial equivalence), hypothesis text, invalid UTF-8 and the shared corpora."""

import itertools
from importlib import resources

import numpy as np
import pytest
from conftest import CORPUS_FILES, corpus_text
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit
from strategies import FRAGMENTS, tokenizer_text

from crayon.errors import UnsupportedComponentError
from crayon.jit.pretokenize import (
    APOSTROPHE,
    BLOCK_SHIFT,
    BLOCK_SIZE,
    CODE_POINTS,
    CR,
    LETTER,
    LF,
    LOWER_LIKE,
    NUMBER,
    PATTERN_IDS,
    SLASH,
    TABLE_FILE,
    UPPER_LIKE,
    WINDOW,
    ascii_masks,
    classify_characters,
    fill_span_ends,
    split_spans,
    split_spans_kernel,
    span_ends,
    unicode_tables,
)
from crayon.jit import pretokenize as jit_pretokenize
from crayon.patterns import PATTERNS, VARIANT_PATTERNS
from crayon.reference.pretokenize import compile_pattern, split
from tools.gen_unicode_tables import build_tables

PATTERN_NAMES = ["r50k_base", "cl100k_base", "o200k_base", "llama3", "qwen2"]
REGEXES = {**PATTERNS, **VARIANT_PATTERNS}


def reference_ends(text: str, pattern: str, errors: str = "strict") -> np.ndarray:
    """End byte offsets of the reference spans; ``errors="surrogateescape"`` maps escaped bytes back to one byte."""
    pieces = split(text, REGEXES[pattern])
    assert "".join(pieces) == text, "the reference lost characters"
    return np.cumsum([len(piece.encode("utf-8", errors)) for piece in pieces], dtype=np.int64)


def assert_same_spans(text: str, pattern: str) -> None:
    actual = span_ends(text.encode(), pattern)
    expected = reference_ends(text, pattern)
    assert np.array_equal(actual, expected), (pattern, text, split(text, REGEXES[pattern]), actual, expected)


def class_of_every_code_point() -> np.ndarray:
    block_index, block_classes, _ = unicode_tables()
    code_points = np.arange(CODE_POINTS)
    blocks = block_index[code_points >> BLOCK_SHIFT].astype(np.int64)
    return block_classes[(blocks << BLOCK_SHIFT) | (code_points & (BLOCK_SIZE - 1))]


def representatives() -> list[str]:
    """For each character class: its first ASCII member and its first member of each longer UTF-8 length."""
    classes = class_of_every_code_point()
    chosen = []
    for cls in np.unique(classes):
        members = np.flatnonzero(classes == cls)
        for low, high in [(0, 0x80), (0x80, 0x800), (0x800, 0x10000), (0x10000, CODE_POINTS)]:
            in_range = members[(members >= low) & (members < high)]
            if in_range.size and not 0xD800 <= in_range[0] <= 0xDFFF:
                chosen.append(chr(in_range[0]))
    return chosen


def test_tables_match_the_regex_module():
    with np.load(resources.files("crayon").joinpath("data", TABLE_FILE).open("rb")) as shipped:
        for name, array in build_tables().items():
            assert np.array_equal(shipped[name], array), f"{name} is stale: run python -m tools.gen_unicode_tables"


def test_representatives_cover_every_class_and_the_tricky_letters():
    chosen = representatives()
    classes = class_of_every_code_point()
    assert {classes[ord(char)] for char in chosen} == set(np.unique(classes))
    assert {" ", "\r", "\n", "'", "/", "d", "D", "\u017f", "l", "L", "v", "r", "e", "E", "\u0300"} <= set(chosen)


@njit  # not cached: a cached caller would keep the compiled kernels of the day it was cached
def spans_of_each_text(classes, bounds, pattern_id, tables):
    """The span ends of each text classes[bounds[i]:bounds[i + 1]] (each its own text), concatenated."""
    ends = np.empty(classes.size, np.int64)
    count = 0
    for text in range(bounds.size - 1):
        count += fill_span_ends(classes, bounds[text], bounds[text + 1], pattern_id, tables, ends[count:])
    return ends[:count]


def utf8_offsets(text: str) -> np.ndarray:
    """Byte offset of each character boundary of text (len(text) + 1 of them)."""
    code_points = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    widths = 1 + (code_points >= 0x80) + (code_points >= 0x800) + (code_points >= 0x10000)
    return np.concatenate([[0], np.cumsum(widths)])


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
def test_every_short_tuple_of_classes(pattern):
    """All texts of up to 3 representatives, and of 4 from one representative per class, each split alone."""
    chosen = representatives()
    one_per_class = list({class_of_every_code_point()[ord(char)]: char for char in reversed(chosen)}.values())
    texts = [
        "".join(characters)
        for characters in itertools.chain(
            *(itertools.product(chosen, repeat=length) for length in (1, 2, 3)),
            itertools.product(one_per_class, repeat=4),
        )
    ]
    assert len(texts) > 300_000
    offsets = utf8_offsets("".join(texts))
    data = np.frombuffer("".join(texts).encode(), dtype=np.uint8)
    bounds = offsets[np.cumsum([0, *map(len, texts)])]
    tables = unicode_tables()
    classes = np.empty(data.size, np.uint8)
    classify_characters(data, 0, data.size, tables, classes)
    actual = spans_of_each_text(classes, bounds, PATTERN_IDS[pattern], tables)

    compiled = compile_pattern(REGEXES[pattern])
    pieces = [piece for text in texts for piece in compiled.findall(text)]
    expected = offsets[np.cumsum(np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces)))]
    if not np.array_equal(actual, expected):
        size = min(actual.size, expected.size)
        first = np.flatnonzero(actual[:size] != expected[:size])
        byte = min(actual[first[0]], expected[first[0]]) if first.size else size
        text = texts[np.searchsorted(bounds, byte, side="right") - 1]
        pytest.fail(f"{pattern} {text!r}: jit {span_ends(text.encode(), pattern)} vs regex {compiled.findall(text)}")


WHITESPACE = [" ", "  ", "\t", "\n", "\r", "\r\n", "\x0b", "\x0c", "\x85", "\u00a0", "\u2009", "\u3000", "\u2028"]
tricky_text = st.lists(
    st.one_of(
        st.sampled_from(WHITESPACE),
        st.sampled_from(["'", "'s", "'S", "'ſ", "'lL", "'Ve", "'rE", "'D", "'M", "'t", "'x", "/", "!", "\n/"]),
        st.sampled_from(["a", "Z", "ǅ", "ʰ", "中", "0", "١", "½", "😀", "AB", "aB", "Ab", "e\u0301", "A\u0301"]),
        st.characters(codec="utf-8"),
    ),
    max_size=30,
).map("".join)


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
@settings(max_examples=300, deadline=None)
@given(text=st.one_of(tokenizer_text, tricky_text))
def test_hypothesis_text(pattern, text):
    assert_same_spans(text, pattern)


malformed_bytes = st.lists(
    st.one_of(
        st.binary(max_size=4),
        st.sampled_from([b"\xc0\xaf", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xf5", b"\xff",
                         b"\xe2\x82", b"\xf0\x9f\x98", b"\x80", b"\xc2", b"\xcc\x81"]),
        st.sampled_from(FRAGMENTS + WHITESPACE).map(str.encode),
    ),
    max_size=20,
).map(b"".join)


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
@settings(max_examples=200, deadline=None)
@given(data=malformed_bytes)
def test_invalid_utf8_acts_like_surrogateescape(pattern, data):
    text = data.decode("utf-8", "surrogateescape")
    assert np.array_equal(span_ends(data, pattern), reference_ends(text, pattern, "surrogateescape"))


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
@pytest.mark.parametrize("corpus", CORPUS_FILES)
def test_corpora(pattern, corpus):
    assert_same_spans(corpus_text(corpus, limit=400_000), pattern)


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
def test_kernel_on_a_range_treats_stop_as_the_end_of_text(pattern):
    text = "a  b \n\n  <|endoftext|>x's  \r\n  "
    data = np.frombuffer(text.encode(), dtype=np.uint8)
    for start, stop in [(0, 8), (3, 12), (12, 25), (0, data.size), (5, 5)]:
        ends = split_spans_kernel(data, start, stop, PATTERN_IDS[pattern], unicode_tables())
        assert np.array_equal(ends - start, reference_ends(text.encode()[start:stop].decode(), pattern))


def test_long_runs_and_empty_input():
    for text in ["a" * 100_000, " " * 100_000, "1" * 100_000, "\u0301" * 50_000, "!" * 100_000, ""]:
        for pattern in PATTERN_NAMES:
            assert_same_spans(text, pattern)


def test_pattern_names_and_regexes_resolve():
    text = b"Hello world's 123"
    for name, regex_text in REGEXES.items():
        assert np.array_equal(span_ends(text, name), span_ends(text, regex_text))


def test_bad_arguments_raise():
    with pytest.raises(UnsupportedComponentError, match="no jit pre-tokenizer"):
        span_ends(b"abc", r"\w+")
    with pytest.raises(ValueError, match="pattern id"):
        split_spans(np.zeros(3, np.uint8), 7)
    with pytest.raises(TypeError, match="uint8"):
        split_spans(np.zeros(3, np.int32), PATTERN_IDS["cl100k_base"])
    with pytest.raises(ValueError, match="outside"):
        split_spans_kernel(np.frombuffer(b"abc", np.uint8), 0, 4, PATTERN_IDS["cl100k_base"], unicode_tables())


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
def test_fill_span_ends_in_small_chunks(pattern):
    data = np.frombuffer(corpus_text("multilingual.txt", limit=20_000).encode()[1000:], dtype=np.uint8)
    tables = unicode_tables()
    classes = np.empty(data.size, np.uint8)
    classify_characters(data, 0, data.size, tables, classes)
    buffer = np.empty(7, np.int64)
    ends = []
    pos = 0
    while pos < data.size:
        count = fill_span_ends(classes, pos, data.size, PATTERN_IDS[pattern], tables, buffer)
        ends.extend(buffer[:count])
        pos = ends[-1]
    assert np.array_equal(ends, split_spans_kernel(data, 0, data.size, PATTERN_IDS[pattern], tables))


@njit  # not cached, as above
def window_masks(data):
    return ascii_masks(data, 0)


def test_ascii_masks_agree_with_the_tables():
    """The fast path's classes of ASCII bytes are the tables' (and every byte >= 0x80 is non-ASCII)."""
    block_index, block_classes, class_properties = unicode_tables()
    ascii_block = int(block_index[0]) << BLOCK_SHIFT
    properties = class_properties[block_classes[ascii_block : ascii_block + 128]]
    bits = [None, LETTER, UPPER_LIKE, LOWER_LIKE, NUMBER, jit_pretokenize.WHITESPACE, CR | LF, APOSTROPHE, SLASH]
    for first in range(0, 256, WINDOW):
        data = np.arange(first, first + WINDOW, dtype=np.uint8)
        for mask, bit in zip(window_masks(data), bits):
            for i, byte in enumerate(data):
                expected = byte >= 0x80 if bit is None else byte < 0x80 and bool(int(properties[byte]) & bit)
                assert bool((int(mask) >> i) & 1) == expected, (hex(byte), bit)


long_text = st.lists(
    st.one_of(
        st.sampled_from(FRAGMENTS + WHITESPACE),
        st.sampled_from(["'", "'s", "'ſ", "'lL", "'Ve", "'x", "/", "\n/", "ab", "AB", "Ab", "aB", "12", "1234"]),
        st.text(alphabet="aZ1 '\n\r\t!/", min_size=1, max_size=70),
        st.characters(codec="utf-8"),
    ),
    min_size=20, max_size=80,
).map("".join)


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
@settings(max_examples=300, deadline=None)
@given(text=long_text)
def test_ascii_fast_path_on_long_text(pattern, text):
    """Texts long enough for the 64-byte window of the fast path, which hands every doubtful span to the state
    machine: ASCII and non-ASCII mixed at every distance."""
    assert_same_spans(text, pattern)


@pytest.mark.parametrize("pattern", ["cl100k_base", "o200k_base", "llama3", "qwen2"])
def test_ascii_fast_path_beside_every_class(pattern):
    """One or two representatives of every class between ASCII contexts, followed by enough text for the fast
    path's window (a run of 64 letters, spaces ... also fills the window)."""
    chosen = representatives()
    befores, afters = ["", "a", "A", " ", "1", "'", "!", "\n"], ["a" * 70, " x" * 35, "!" * 70, "\n " * 35, "1" * 70]
    texts = [before + char + after for char in chosen for before in befores for after in afters]
    texts += [first + second + after for first in chosen for second in chosen for after in afters[:2]]
    compiled = compile_pattern(REGEXES[pattern])
    for text in texts:
        expected = np.cumsum([len(piece.encode()) for piece in compiled.findall(text)])
        actual = span_ends(text.encode(), pattern)
        assert np.array_equal(actual, expected), (pattern, text, compiled.findall(text))

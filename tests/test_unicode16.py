"""Spans pinned to Unicode 16 whatever ``regex`` release is installed (crayon.reference.unicode16).

With a Unicode 17 ``regex`` (what current transformers requires), the new letters below are letters to the
regex module but not to tiktoken; these tests fail if any pattern Crayon compiles lets them through.
"""

from __future__ import annotations

import numpy as np
import pytest
import regex
from conftest import tiktoken_encoding
from hypothesis import given, settings
from hypothesis import strategies as st

import crayon
from crayon.jit.pretokenize import span_ends
from crayon.formats.hf_pretokenize import compile_hf_regex
from crayon.reference.pretokenize import split
from crayon.reference.unicode16 import (
    CODE_POINTS,
    UNICODE_VERSION,
    WHITE_SPACE,
    complement,
    escape_end,
    pin_unicode_classes,
    property_ranges,
    scan_class,
)

SIDETIC_N01 = "\U00010940"  # a letter since Unicode 17, unassigned in 16
CJK_EXT_J = "\U000323b0"  # an ideograph since Unicode 17
TAI_YO = "\U0001e6c0"  # a letter since Unicode 17
TOLONG_SIKI_DIGIT = "\U00011de0"  # a digit since Unicode 17
NEW_IN_UNICODE_16 = "\u1c89"  # CYRILLIC CAPITAL LETTER TJE
UNICODE17_TEXT = f"ab{SIDETIC_N01}cd {CJK_EXT_J}{CJK_EXT_J}x {TAI_YO}'s 12{TOLONG_SIKI_DIGIT}3 {NEW_IN_UNICODE_16}a"
EVERY_CODE_POINT = np.arange(CODE_POINTS, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")


def matched_code_points(pattern: str) -> np.ndarray:
    matched = np.zeros(CODE_POINTS, dtype=bool)
    for match in regex.finditer(f"(?:{pattern})+", EVERY_CODE_POINT):
        matched[match.start() : match.end()] = True
    return matched


def expected(ranges: np.ndarray) -> np.ndarray:
    members = np.zeros(CODE_POINTS, dtype=bool)
    for first, last in ranges.tolist():
        members[first : last + 1] = True
    return members


@pytest.mark.parametrize(
    "escape, ranges",
    [
        (r"\p{L}", lambda: property_ranges("L")),
        (r"\p{N}", lambda: property_ranges("N")),
        (r"\p{Lu}", lambda: property_ranges("Lu")),
        (r"\p{Lowercase_Letter}", lambda: property_ranges("Ll")),
        (r"\P{M}", lambda: complement(property_ranges("M"))),
        (r"\p{^N}", lambda: complement(property_ranges("N"))),
        (r"\s", lambda: property_ranges(WHITE_SPACE)),
        (r"\S", lambda: complement(property_ranges(WHITE_SPACE))),
        (r"\d", lambda: property_ranges("Nd")),
        (r"\p{White_Space}", lambda: property_ranges(WHITE_SPACE)),
    ],
)
def test_pinned_escapes_match_unicode16_on_every_code_point(escape, ranges):
    assert np.array_equal(matched_code_points(pin_unicode_classes(escape)), expected(ranges()))


def test_pinned_negated_class_matches_unicode16_on_every_code_point():
    members = expected(property_ranges(WHITE_SPACE)) | expected(property_ranges("L")) | expected(property_ranges("N"))
    members[[ord("\r"), ord("x")]] = True
    assert np.array_equal(matched_code_points(pin_unicode_classes(r"[^\s\p{L}\p{N}\rx]")), ~members)


def test_shipped_categories_are_unicode16():
    assert UNICODE_VERSION == "16.0.0"
    assert regex.fullmatch(pin_unicode_classes(r"\p{Lu}"), NEW_IN_UNICODE_16)
    for char in (SIDETIC_N01, CJK_EXT_J, TAI_YO, TOLONG_SIKI_DIGIT):
        assert not regex.fullmatch(pin_unicode_classes(r"[\p{L}\p{N}]"), char)
        assert regex.fullmatch(pin_unicode_classes(r"\p{Cn}"), char)


def test_unicode17_letters_split_as_unicode16():
    assert split(UNICODE17_TEXT, "cl100k_base") == [
        "ab", f"{SIDETIC_N01}cd", f" {CJK_EXT_J}{CJK_EXT_J}", "x", f" {TAI_YO}'", "s", " ", "12",
        TOLONG_SIKI_DIGIT, "3", f" {NEW_IN_UNICODE_16}a",
    ]
    assert split(UNICODE17_TEXT, "r50k_base")[:3] == ["ab", SIDETIC_N01, "cd"]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_unicode17_text_encodes_like_tiktoken(name):
    expected_ids = tiktoken_encoding(name).encode(UNICODE17_TEXT)
    for backend in ("reference", "jit"):
        assert crayon.load(name, backend=backend).encode(UNICODE17_TEXT) == expected_ids


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab '1\n" + SIDETIC_N01 + CJK_EXT_J + TAI_YO + TOLONG_SIKI_DIGIT + "\u0295\u05c8")))
def test_pinned_patterns_split_like_the_unicode16_tables(text):
    """The reference spanner (pinned regex) against the jit state machines (the shipped Unicode 16 tables)."""
    for name in ("r50k_base", "cl100k_base", "o200k_base"):
        ends = np.cumsum([len(span.encode()) for span in split(text, name)])
        assert np.array_equal(ends, span_ends(text.encode(), name))


def test_hf_regexes_are_pinned():
    assert compile_hf_regex(r"\p{L}+").findall(f"a{SIDETIC_N01}b") == ["a", "b"]


@pytest.mark.parametrize(("pattern", "expected"), [
    ("[a-z]+", (5, -1)),
    ("[^]a]", (5, -1)),  # a "]" first is a member
    (r"[\]x]", (5, -1)),
    (r"[\x5d]", (6, -1)),  # the hex escape of "]" does not close the class
    (r"[\p{L}\d]", (9, -1)),
    ("[[:alpha:]x]", (12, -1)),  # a POSIX class is not a nested "["
    ("[a[b]", (5, 2)),  # a literal for regex, a nested class for Oniguruma
    ("[abc", (-1, -1)),
])
def test_scan_class_finds_the_end_and_a_nested_bracket(pattern, expected):
    assert scan_class(pattern, 0) == expected


@pytest.mark.parametrize(("escape", "length"), [
    (r"\p{Lu}", 6), (r"\pL", 3), (r"\x41", 4), (r"\x{263a}", 8), (r"\u00e9", 6), (r"\N{DASH}", 8),
    (r"\k<name>", 8), (r"\s", 2),
])
def test_escape_end_spans_the_whole_escape(escape, length):
    assert escape_end(escape + "rest", 0) == length

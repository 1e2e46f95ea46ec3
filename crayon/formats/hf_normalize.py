"""HF tokenizers' normalizers, written to be read: each one is a function from text to text.

HF normalizes the text between added tokens piece by piece, before pre-tokenization; a Crayon Tokenizer calls
its normalizer the same way. Each class here does what the HF normalizer of the same name does and writes
itself back with ``to_hf``; ``normalizer_from_hf`` builds one from a tokenizer.json object and refuses types it
does not know (BertNormalizer, Precompiled, ...) with ``UnsupportedComponentError``.

Unicode versions: HF's NFC/NFD/NFKC/NFKD and StripAccents use Unicode 9.0 tables, Python's ``unicodedata`` is
newer. The code points below, found by comparing the two on every code point, are where they differ: HF leaves
them as they are. Lowercase uses Rust's newer tables; characters Python's database does not know yet are left
as they are here.
"""

from __future__ import annotations

import functools
import unicodedata
from typing import Callable

import numpy as np
import regex

from crayon.errors import UnsupportedComponentError
from crayon.formats.hf_pretokenize import (
    compile_hf_regex,
    find_matches,
    pattern_from_hf,
    string_pattern,
    to_byte_chars,
)
from crayon.reference.unicode16 import pin_unicode_classes


def _code_point_class(ranges: str) -> str:
    """A regex character class from "07FD 0898-089F ..." (hex code points and ranges)."""
    parts = []
    for item in ranges.split():
        first, _, last = item.partition("-")
        parts.append(f"\\U{int(first, 16):08X}" + (f"-\\U{int(last, 16):08X}" if last else ""))
    return "[" + "".join(parts) + "]"


# Characters HF's Unicode 9.0 tables do not decompose, compose or reorder (assigned or given a decomposition or
# combining class since): to HF they are starters with no decomposition, so normalization stops at them.
_NOT_NORMALIZED_BY_HF = regex.compile(
    "(" + _code_point_class(
        "07FD 0898-089F 08CA-08D3 09FE 0C3C 0D3B-0D3C 0EBA 1715 1ABF-1ACE 1DF6-1DFA 32FF A7F2-A7F4 A82C AB69 "
        "10781-10785 10787-107B0 107B2-107BA 10D24-10D27 10EAB-10EAC 10F46-10F50 10F82-10F85 11070 1133B 1145E "
        "11839-1183A 11930 11935 11938 1193D-1193E 11943 119E0 11A34 11A47 11A99 11D42 11D44-11D45 11D97 "
        "16FF0-16FF1 1E130-1E136 1E2AE 1E2EC-1E2EF 1F16C 1FBF0-1FBF9"
    ) + ")"
)
# Marks (category M) in Python's database that HF's tables do not know as combining marks ...
_NOT_MARKS_TO_HF = regex.compile(
    _code_point_class(
        "07FD 0898-089F 08CA-08D3 09FE 0AFA-0AFF 0B55 0C04 0C3C 0D00 0D3B-0D3C 0D81 0EBA 1715 180F 1ABF-1ACE "
        "1CF7 1DF6-1DFA A82C A8FF 10D24-10D27 10EAB-10EAC 10F46-10F50 10F82-10F85 11070 11073-11074 110C2 "
        "11145-11146 111C9 111CE-111CF 1133B 1145E 1182C-1183A 11930-11935 11937-11938 1193B-1193E 11940 "
        "11942-11943 119D1-119D7 119DA-119E0 119E4 11A01-11A0A 11A33-11A39 11A3B-11A3E 11A47 11A51-11A5B "
        "11A8A-11A99 11D31-11D36 11D3A 11D3C-11D3D 11D3F-11D45 11D47 11D8A-11D8E 11D90-11D91 11D93-11D97 "
        "11EF3-11EF6 16F4F 16F7F-16F87 16FE4 16FF0-16FF1 1CF00-1CF2D 1CF30-1CF46 1E130-1E136 1E2AE 1E2EC-1E2EF"
    )
)
# ... and the two letters (Lo since Unicode 10) that HF's tables still call marks.
_MARKS_ONLY_TO_HF = frozenset("\u1cf2\u1cf3")


class Normalizer:
    """One HF normalizer: call it on text; ``to_hf`` is its tokenizer.json object."""

    maps_to_byte_chars = False  # True when the output is GPT-2 byte-level text

    def __call__(self, text: str) -> str:
        raise NotImplementedError

    def is_inert(self, char: str) -> bool:
        """Whether normalizing leaves ``char`` alone in every text: it is never changed, made from other
        characters or merged with them, nothing next to it is removed, and the text on each side of it normalizes
        on its own. An added token made of such characters matches the same before and after normalization."""
        return False

    def to_hf(self) -> dict:
        raise NotImplementedError


@functools.lru_cache(maxsize=None)
def _characters_made_by(mapping: str) -> frozenset[str]:
    """Every character that ``mapping`` ("NFD", "NFKD" or "lower") writes for some other character."""
    made = set()
    for code_point in range(0x110000):
        char = chr(code_point)
        mapped = char.lower() if mapping == "lower" else unicodedata.normalize(mapping, char)
        if mapped != char:
            made.update(mapped)
    return frozenset(made)


QUICK_CHECK_CHARS = 0x30000  # code points in the quick check's table; a text with a higher one is normalized
TABLE_CHECK_LENGTH = 512  # texts this long or longer are checked with the table, shorter ones by unicodedata
MAY_CHANGE = 0x100  # in the table: the character is not "Yes" to the quick check (low byte: combining class)


@functools.lru_cache(maxsize=None)
def _quick_check_table(form: str) -> np.ndarray:
    """Unicode's quick check (UAX #15) of ``form`` as a uint16 per code point below ``QUICK_CHECK_CHARS``: its
    canonical combining class, | ``MAY_CHANGE`` where the character is not "Yes" (the form changes it on its
    own, or, composing forms, it may compose with the character before it) or HF's tables do not know it.
    Built from ``unicodedata`` at first use (a fraction of a second)."""
    table = np.zeros(QUICK_CHECK_CHARS, np.uint16)
    composes = form in ("NFC", "NFKC")
    for code_point in range(QUICK_CHECK_CHARS):
        char = chr(code_point)
        table[code_point] |= unicodedata.combining(char)
        if 0xD800 <= code_point < 0xE000 or unicodedata.normalize(form, char) != char:
            table[code_point] |= MAY_CHANGE
        decomposition = unicodedata.decomposition(char).split()
        if composes and len(decomposition) == 2 and not decomposition[0].startswith("<"):
            table[int(decomposition[1], 16)] |= MAY_CHANGE  # it may compose with the character before it
    if composes:
        table[0x1161:0x1176] |= MAY_CHANGE  # Hangul vowels and trailing consonants compose algorithmically
        table[0x11A8:0x11C3] |= MAY_CHANGE
    for match in _NOT_NORMALIZED_BY_HF.finditer("".join(map(chr, range(0xD800))) + "".join(
            map(chr, range(0xE000, QUICK_CHECK_CHARS)))):
        table[ord(match.group())] |= MAY_CHANGE
    table.flags.writeable = False
    return table


def _changing_ranges(form: str, text: str) -> list[tuple[int, int]] | None:
    """The stretches ``(start, end)`` of ``text`` that HF's ``form`` may change, each normalizable on its own:
    the rest passes Unicode's quick check ("Yes" characters, combining classes in canonical order), and each
    stretch runs from a "Yes" character of class 0 (or the text's start) to the next one (or its end), where
    normalization never looks across. None where the table does not cover the text."""
    try:
        code_points = np.frombuffer(text.encode("utf-32-le"), np.uint32)
    except UnicodeEncodeError:  # a lone surrogate
        return None
    if code_points.max(initial=0) >= QUICK_CHECK_CHARS:
        return None
    entries = _quick_check_table(form)[code_points]
    classes = entries & 0xFF
    changing = (entries & MAY_CHANGE) != 0
    changing[1:] |= (classes[1:] != 0) & (classes[:-1] > classes[1:])
    if not changing.any():
        return []
    stable = np.flatnonzero(entries == 0)  # starts of stretches normalization never looks across
    bounds = np.append(stable, len(text)) if len(stable) and stable[0] == 0 else np.concatenate(
        ([0], stable, [len(text)]))
    stretch = np.unique(np.searchsorted(bounds, np.flatnonzero(changing), side="right") - 1)
    ranges: list[tuple[int, int]] = []
    for start, end in zip(bounds[stretch].tolist(), bounds[stretch + 1].tolist()):
        if ranges and ranges[-1][1] == start:
            ranges[-1] = (ranges[-1][0], end)
        else:
            ranges.append((start, end))
    return ranges


class UnicodeNormalizer(Normalizer):
    """HF ``NFC``, ``NFD``, ``NFKC``, ``NFKD``: Unicode normalization with HF's Unicode 9.0 tables."""

    FORMS = ("NFC", "NFD", "NFKC", "NFKD")

    def __init__(self, form: str):
        if form not in self.FORMS:
            raise ValueError(f"unknown normalization form {form!r}")
        self.form = form

    def __call__(self, text: str) -> str:
        if text.isascii():  # every form leaves ASCII as it is
            return text
        if len(text) < TABLE_CHECK_LENGTH:
            # A quick-check "Yes" of the whole text is one of each piece between the characters HF does not know.
            return text if unicodedata.is_normalized(self.form, text) else self._normalized_pieces(text)
        ranges = _changing_ranges(self.form, text)
        if ranges is None:
            return self._normalized_pieces(text)
        parts, done = [], 0
        for start, end in ranges:
            parts += [text[done:start], self._normalized_pieces(text[start:end])]
            done = end
        return "".join(parts) + text[done:]

    def _normalized_pieces(self, text: str) -> str:
        # Splitting keeps the characters HF does not normalize (odd indices) and normalizes the text between.
        pieces = _NOT_NORMALIZED_BY_HF.split(text)
        return "".join(piece if i % 2 else unicodedata.normalize(self.form, piece) for i, piece in enumerate(pieces))

    def is_inert(self, char: str) -> bool:
        # A starter with no decomposition that no decomposition contains: it never composes or reorders.
        decomposition = "NFD" if self.form in ("NFC", "NFD") else "NFKD"
        return (
            unicodedata.normalize(decomposition, char) == char
            and unicodedata.combining(char) == 0
            and char not in _characters_made_by(decomposition)
            and not _NOT_NORMALIZED_BY_HF.match(char)
        )

    def to_hf(self) -> dict:
        return {"type": self.form}


class Lowercase(Normalizer):
    """HF ``Lowercase``: each character's full lowercase mapping, with no context (so no final sigma)."""

    def __call__(self, text: str) -> str:
        if "\u03a3" not in text:  # str.lower is per character except for the final sigma rule of capital sigma
            return text.lower()
        return "".join(char.lower() for char in text)

    def is_inert(self, char: str) -> bool:
        return char.lower() == char and char not in _characters_made_by("lower")

    def to_hf(self) -> dict:
        return {"type": "Lowercase"}


class Strip(Normalizer):
    """HF ``Strip``: remove white space (the Unicode White_Space property) on the left and/or right."""

    def __init__(self, left: bool = True, right: bool = True):
        self.left = left
        self.right = right
        self._pattern = regex.compile(pin_unicode_classes(
            "|".join(([r"^\p{White_Space}+"] if left else []) + ([r"\p{White_Space}+\Z"] if right else [])) or "(?!)"
        ))

    def __call__(self, text: str) -> str:
        return self._pattern.sub("", text)

    def to_hf(self) -> dict:
        return {"type": "Strip", "strip_left": self.left, "strip_right": self.right}


class StripAccents(Normalizer):
    """HF ``StripAccents``: remove every combining mark (category M, by HF's Unicode 9.0 tables)."""

    def __call__(self, text: str) -> str:
        return "".join(char for char in text if not self.is_combining_mark(char))

    @staticmethod
    def is_combining_mark(char: str) -> bool:
        if char in _MARKS_ONLY_TO_HF:
            return True
        return unicodedata.category(char).startswith("M") and not _NOT_MARKS_TO_HF.match(char)

    def to_hf(self) -> dict:
        return {"type": "StripAccents"}


class Replace(Normalizer):
    """HF ``Replace``: replace every match of a string or (Oniguruma) regex with ``content``, taken literally."""

    def __init__(self, pattern: str, content: str, *, is_regex: bool = False):
        self.pattern = pattern
        self.content = content
        self.is_regex = is_regex
        self._regex = compile_hf_regex(pattern) if is_regex else string_pattern(pattern)

    def __call__(self, text: str) -> str:
        return "".join(
            self.content if is_match else text[start:end] for start, end, is_match in find_matches(self._regex, text)
        )

    def to_hf(self) -> dict:
        pattern = {"Regex" if self.is_regex else "String": self.pattern}
        return {"type": "Replace", "pattern": pattern, "content": self.content}


class Prepend(Normalizer):
    """HF ``Prepend``: put a string in front of non-empty text."""

    def __init__(self, prepend: str):
        self.prepend = prepend

    def __call__(self, text: str) -> str:
        return self.prepend + text if text else text

    def to_hf(self) -> dict:
        return {"type": "Prepend", "prepend": self.prepend}


_NMT_REMOVED = regex.compile(r"[\x01-\x08\x0B\x0E-\x1F\x7F\x8F\x9F]")
_NMT_TO_SPACE = regex.compile(r"[\t\n\x0C\r\u1680\u200B-\u200F\u2028\u2029\u2581\uFEFF\uFFFD]")


class Nmt(Normalizer):
    """HF ``Nmt``: drop ASCII control characters, turn other space-like characters into a space."""

    def __call__(self, text: str) -> str:
        return _NMT_TO_SPACE.sub(" ", _NMT_REMOVED.sub("", text))

    def to_hf(self) -> dict:
        return {"type": "Nmt"}


class ByteLevelNormalizer(Normalizer):
    """HF's ``ByteLevel`` normalizer: the text's UTF-8 bytes as GPT-2 byte-level characters."""

    maps_to_byte_chars = True

    def __call__(self, text: str) -> str:
        return to_byte_chars(text.encode("utf-8"))

    def to_hf(self) -> dict:
        return {"type": "ByteLevel"}


class NormalizerSequence(Normalizer):
    """HF ``Sequence``: the normalizers one after the other."""

    def __init__(self, normalizers: list[Normalizer]):
        self.normalizers = list(normalizers)
        byte_level_steps = sum(normalizer.maps_to_byte_chars for normalizer in self.normalizers)
        if byte_level_steps > 1:
            raise UnsupportedComponentError("ByteLevel is applied twice")
        self.maps_to_byte_chars = byte_level_steps == 1

    def __call__(self, text: str) -> str:
        for normalizer in self.normalizers:
            text = normalizer(text)
        return text

    def is_inert(self, char: str) -> bool:
        return all(normalizer.is_inert(char) for normalizer in self.normalizers)

    def to_hf(self) -> dict:
        return {"type": "Sequence", "normalizers": [normalizer.to_hf() for normalizer in self.normalizers]}


def _replace_from_hf(spec: dict) -> Replace:
    pattern, is_regex = pattern_from_hf(spec["pattern"], "Replace")
    return Replace(pattern, spec["content"], is_regex=is_regex)


_NORMALIZERS_BY_TYPE: dict[str, Callable[[dict], Normalizer]] = {
    **{form: (lambda spec: UnicodeNormalizer(spec["type"])) for form in UnicodeNormalizer.FORMS},
    "Lowercase": lambda spec: Lowercase(),
    "Strip": lambda spec: Strip(spec.get("strip_left", True), spec.get("strip_right", True)),
    "StripAccents": lambda spec: StripAccents(),
    "Replace": _replace_from_hf,
    "Prepend": lambda spec: Prepend(spec["prepend"]),
    "Nmt": lambda spec: Nmt(),
    "ByteLevel": lambda spec: ByteLevelNormalizer(),
    "Sequence": lambda spec: NormalizerSequence([normalizer_from_hf(inner) for inner in spec["normalizers"]]),
}


def normalizer_from_hf(spec: dict) -> Normalizer:
    """Build a normalizer from its tokenizer.json object; an unknown type raises naming it."""
    kind = spec.get("type")
    if kind not in _NORMALIZERS_BY_TYPE:
        raise UnsupportedComponentError(f"normalizer {kind!r} is not supported")
    return _NORMALIZERS_BY_TYPE[kind](spec)

"""HF tokenizers' normalizers, written to be read: each one is a function from text to text.

HF normalizes the text between added tokens piece by piece, before pre-tokenization; a Crayon Tokenizer calls
its normalizer the same way. ``align`` does the same to an ``AlignedText`` (``crayon.reference.alignments``),
keeping each character's original span as HF's ``NormalizedString`` does, for the offsets of tokens. Each class here does what the HF normalizer of the same name does and writes
itself back with ``to_hf``; ``normalizer_from_hf`` builds one from a tokenizer.json object and refuses types it
does not know with ``UnsupportedComponentError`` naming the type. ``Precompiled`` (SentencePiece's character
map) lives in ``crayon.formats.precompiled_charsmap``.

Unicode versions: HF's NFC/NFD/NFKC/NFKD and StripAccents use Unicode 9.0 tables, Python's ``unicodedata`` is
newer. The code points below, found by comparing the two on every code point, are where they differ: HF leaves
them as they are. Lowercase uses Rust's newer tables; characters Python's database does not know yet are left
as they are here.
"""

from __future__ import annotations

import functools
import unicodedata
from typing import Callable, Sequence

import numpy as np
import regex

from crayon.errors import UnsupportedComponentError
from crayon.formats.character_table import CharacterTable
from crayon.formats.hf_pretokenize import (
    as_byte_chars,
    compile_hf_regex,
    find_matches,
    pattern_from_hf,
    string_pattern,
    to_byte_chars,
)
from crayon.formats.precompiled_charsmap import CharsMap, charsmap_from_base64, charsmap_to_base64
from crayon.reference.alignments import AlignedText
from crayon.reference.regex_vm import Alt, Anchor, Atomic, Look, Repeat, Seq, compile_regex, parse
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


def code_point_mask(predicate: Callable[[str], bool], candidates: str) -> np.ndarray:
    """A bool per code point (0 .. 0x10FFFF): ``predicate(chr(code_point))``, asked of the characters the regex
    ``candidates`` matches (the others are False)."""
    mask = np.zeros(0x110000, bool)
    for match in regex.finditer(candidates, _every_character()):
        if predicate(match.group()):
            mask[ord(match.group())] = True
    return mask


@functools.lru_cache(maxsize=1)
def _every_character() -> str:
    return "".join(map(chr, range(0xD800))) + "".join(map(chr, range(0xE000, 0x110000)))


def remove_code_points(text: str, mask: np.ndarray) -> str:
    """``text`` without the characters whose code points ``mask`` marks (vectorized over UTF-32)."""
    code_points = np.frombuffer(text.encode("utf-32-le"), np.uint32)
    removed = mask[code_points]
    return code_points[~removed].tobytes().decode("utf-32-le") if removed.any() else text


# NUL: a starter, a grapheme cluster of its own, neither cased nor a mark, no charsmap key (a NUL ends the search)
BATCH_SEPARATOR = "\x00"


class Normalizer:
    """One HF normalizer: call it on text; ``to_hf`` is its tokenizer.json object."""

    maps_to_byte_chars = False  # True when the output is GPT-2 byte-level text
    # a character the normalizer keeps, normalizing the text on each side of it as that text alone; None: none
    batch_separator: str | None = None
    per_character = False  # whether it rewrites each character on its own (see ``character_table``)

    def __call__(self, text: str) -> str:
        raise NotImplementedError

    def align(self, text: AlignedText) -> AlignedText:
        """``self(text.text)`` with each character's original span, as HF's alignments give it."""
        raise UnsupportedComponentError(f"the character offsets of tokens after the {type(self).__name__} "
                                        "normalizer are not implemented")

    def utf8_rewrite(self) -> tuple | None:
        """The normalizer as a rewrite of UTF-8 bytes that ``crayon.jit.precompiled_normalizer`` runs (a kind, then
        its arguments), or None where it is not one."""
        return None

    def normalize_batch(self, texts: Sequence[str]) -> list[str]:
        """``[self(text) for text in texts]``, in one call on the texts joined by the ``batch_separator`` where
        the normalizer has one and no text holds it."""
        separator = self.batch_separator
        if separator is not None and len(texts) > 1:
            joined = separator.join(texts)
            if joined.count(separator) == len(texts) - 1:
                return self(joined).split(separator)
        return [self(text) for text in texts]

    def character_table(self) -> CharacterTable | None:
        """What the normalizer makes of each character alone, where it rewrites text character by character
        (``crayon.formats.character_table``; built on each call, in a fraction of a second); None where not."""
        return CharacterTable.of(self, self.batch_separator) if self.per_character else None

    def to_hf(self) -> dict:
        raise NotImplementedError


@functools.lru_cache(maxsize=1)
def _not_normalized_by_hf_mask() -> np.ndarray:
    return code_point_mask(bool, _NOT_NORMALIZED_BY_HF.pattern)


class UnicodeNormalizer(Normalizer):
    """HF ``NFC``, ``NFD``, ``NFKC``, ``NFKD``: Unicode normalization with HF's Unicode 9.0 tables."""

    batch_separator = BATCH_SEPARATOR

    FORMS = ("NFC", "NFD", "NFKC", "NFKD")

    def __init__(self, form: str):
        if form not in self.FORMS:
            raise ValueError(f"unknown normalization form {form!r}")
        self.form = form

    def __call__(self, text: str) -> str:
        # HF's older tables decompose and compose a subset of what Python's do, so text Python finds normalized
        # HF leaves alone too (ASCII text is normalized in every form).
        # A line break, like the batch separator, is a starter nothing composes with and no character becomes, so
        # each piece between them normalizes alone: only the pieces that are not normalized are, in one call
        # (is_normalized normalizes all of a text that holds a "maybe" character, piece by piece only such pieces).
        if text.isascii():
            return text
        separator = BATCH_SEPARATOR if BATCH_SEPARATOR in text else "\n"
        pieces = text.split(separator)
        changing = [i for i, is_normalized in enumerate(map(functools.partial(unicodedata.is_normalized, self.form),
                                                            pieces)) if not is_normalized]
        if not changing:
            return text
        rewritten = self._normalized(separator.join([pieces[i] for i in changing])).split(separator)
        for i, piece in zip(changing, rewritten, strict=True):
            pieces[i] = piece
        return separator.join(pieces)

    def _normalized(self, text: str) -> str:
        if not _not_normalized_by_hf_mask()[np.frombuffer(text.encode("utf-32-le"), np.uint32)].any():
            return unicodedata.normalize(self.form, text)
        # Splitting keeps the characters HF does not normalize (odd indices) and normalizes the text between.
        pieces = _NOT_NORMALIZED_BY_HF.split(text)
        return "".join(piece if i % 2 else unicodedata.normalize(self.form, piece) for i, piece in enumerate(pieces))

    def align(self, text: AlignedText) -> AlignedText:
        if text.text.isascii():
            return text
        changes = _decomposed(text.text, compatibility=self.form.startswith("NFK"))
        return text.transform(_recomposed(changes) if self.form in ("NFC", "NFKC") else changes)

    def normalize_batch(self, texts: Sequence[str]) -> list[str]:
        """``[self(text) for text in texts]``: text by text, where most texts are ASCII or normalized and pass at
        once, is faster than joining them."""
        return [self(text) for text in texts]

    def to_hf(self) -> dict:
        return {"type": self.form}


# The alignments of HF's NFC/NFD/NFKC/NFKD are those of the Rust crate unicode-normalization-alignments: each
# character's decomposition is its first character (change 0) and the others inserted (change 1); the marks
# are put in canonical order (a stable sort of each run of non-starters, the changes moving with them); a
# composition of a character with a later one is the first with the change ``first + later - 1``.


def _hf_combining_class(char: str) -> int:
    return 0 if _not_normalized_by_hf_mask()[ord(char)] else unicodedata.combining(char)


_HANGUL_BASE, _L_BASE, _V_BASE, _T_BASE = 0xAC00, 0x1100, 0x1161, 0x11A7
_V_COUNT, _T_COUNT, _HANGUL_COUNT = 21, 28, 11172


@functools.lru_cache(maxsize=1 << 14)
def _full_decomposition(char: str, compatibility: bool) -> str:
    """The character's full canonical (or compatibility) decomposition, by HF's tables, not reordered."""
    code = ord(char)
    if 0 <= code - _HANGUL_BASE < _HANGUL_COUNT:
        index = code - _HANGUL_BASE
        trailing = index % _T_COUNT
        return (chr(_L_BASE + index // (_V_COUNT * _T_COUNT)) + chr(_V_BASE + index % (_V_COUNT * _T_COUNT) // _T_COUNT)
                + (chr(_T_BASE + trailing) if trailing else ""))
    mapping = unicodedata.decomposition(char)
    if not mapping or _not_normalized_by_hf_mask()[code] or (mapping.startswith("<") and not compatibility):
        return char
    parts = mapping.split(">")[-1].split()
    return "".join(_full_decomposition(chr(int(part, 16)), compatibility) for part in parts)


def _decomposed(text: str, *, compatibility: bool) -> list[tuple[str, int]]:
    """(character, change) of the decomposition of ``text``, marks in canonical order."""
    changes = [(part, int(i > 0)) for char in text
               for i, part in enumerate(_full_decomposition(char, compatibility))]
    start = 0
    while start < len(changes):
        if not _hf_combining_class(changes[start][0]):
            start += 1
            continue
        end = start
        while end < len(changes) and _hf_combining_class(changes[end][0]):
            end += 1
        changes[start:end] = sorted(changes[start:end], key=lambda change: _hf_combining_class(change[0]))
        start = end
    return changes


@functools.lru_cache(maxsize=1)
def _compositions() -> dict[tuple[str, str], str]:
    """(first, second) -> the primary composite of the pair (Hangul aside), by HF's tables."""
    pairs = {}
    mask = _not_normalized_by_hf_mask()
    for code in range(0x110000):
        if 0xD800 <= code < 0xE000 or mask[code]:
            continue
        mapping = unicodedata.decomposition(chr(code))
        if not mapping or mapping.startswith("<") or len(mapping.split()) != 2:
            continue
        first, second = (chr(int(part, 16)) for part in mapping.split())
        if unicodedata.normalize("NFC", chr(code)) == chr(code) and not mask[ord(first)] and not mask[ord(second)]:
            pairs[first, second] = chr(code)
    return pairs


def _composed(first: str, second: str) -> str | None:
    l_index, v_index = ord(first) - _L_BASE, ord(second) - _V_BASE
    if 0 <= l_index < 19 and 0 <= v_index < _V_COUNT:
        return chr(_HANGUL_BASE + (l_index * _V_COUNT + v_index) * _T_COUNT)
    s_index, t_index = ord(first) - _HANGUL_BASE, ord(second) - _T_BASE
    if 0 <= s_index < _HANGUL_COUNT and s_index % _T_COUNT == 0 and 0 < t_index < _T_COUNT:
        return chr(ord(first) + t_index)
    return _compositions().get((first, second))


def _recomposed(changes: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Canonical composition of decomposed (character, change) pairs: a starter takes each later character not
    blocked from it that it composes with."""
    out: list[tuple[str, int]] = []
    starter: tuple[str, int] | None = None
    blocked: list[tuple[str, int]] = []  # the characters after the starter that it did not take
    last_class: int | None = None  # the combining class of the last of them
    for char, change in changes:
        combining_class = _hf_combining_class(char)
        if starter is None:
            if combining_class:
                out.append((char, change))
            else:
                starter = (char, change)
            continue
        if last_class is None or last_class < combining_class:
            composite = _composed(starter[0], char)
            if composite is not None:
                starter = (composite, starter[1] + change - 1)
                continue
        if combining_class == 0:
            out.append(starter)
            out.extend(blocked)
            starter, blocked, last_class = (char, change), [], None
            continue
        blocked.append((char, change))
        last_class = combining_class
    if starter is not None:
        out.append(starter)
    return out + blocked


class Lowercase(Normalizer):
    """HF ``Lowercase``: each character's full lowercase mapping, with no context (so no final sigma)."""

    batch_separator = BATCH_SEPARATOR
    per_character = True

    def __call__(self, text: str) -> str:
        # str.lower is per character except for the final sigma rule of capital sigma, which HF lowers to σ
        return "\u03c3".join(part.lower() for part in text.split("\u03a3"))

    def align(self, text: AlignedText) -> AlignedText:
        if text.text.isascii() and not any("A" <= char <= "Z" for char in text.text):
            return text
        return text.replace_each(char.lower() for char in text.text)  # a lone Σ lowers to σ

    def to_hf(self) -> dict:
        return {"type": "Lowercase"}


_NFD = UnicodeNormalizer("NFD")
_LOWERCASE = Lowercase()


_WHITE_SPACE_RUN = regex.compile(pin_unicode_classes(r"\p{White_Space}+"))


@functools.lru_cache(maxsize=1)
def _white_space_code_points() -> np.ndarray:
    return np.flatnonzero(code_point_mask(bool, pin_unicode_classes(r"\p{White_Space}")))


class Strip(Normalizer):
    """HF ``Strip``: remove white space (the Unicode White_Space property) on the left and/or right."""

    def __init__(self, left: bool = True, right: bool = True):
        self.left = left
        self.right = right
        self._pattern = regex.compile(pin_unicode_classes(
            "|".join(([r"^\p{White_Space}+"] if left else []) + ([r"\p{White_Space}+\Z"] if right else [])) or "(?!)"
        ))

    def __call__(self, text: str) -> str:
        # White_Space characters are all str.isspace ones: text whose ends are not has nothing to strip
        if not text or not ((self.left and text[0].isspace()) or (self.right and text[-1].isspace())):
            return text
        return self._pattern.sub("", text)

    def utf8_rewrite(self) -> tuple:
        return "strip", self.left, self.right, _white_space_code_points()

    def align(self, text: AlignedText) -> AlignedText:
        stripped = self(text.text)
        if stripped == text.text:
            return text
        leading = _WHITE_SPACE_RUN.match(text.text) if self.left else None
        start = leading.end() if leading else 0
        return text[start : start + len(stripped)]

    def to_hf(self) -> dict:
        return {"type": "Strip", "strip_left": self.left, "strip_right": self.right}


class StripAccents(Normalizer):
    """HF ``StripAccents``: remove every combining mark (category M, by HF's Unicode 9.0 tables)."""

    batch_separator = BATCH_SEPARATOR
    per_character = True

    def __call__(self, text: str) -> str:
        if text.isascii():
            return text
        return remove_code_points(text, _combining_marks_mask())

    def align(self, text: AlignedText) -> AlignedText:
        return text if text.text.isascii() else _without_code_points(text, _combining_marks_mask())

    @staticmethod
    def is_combining_mark(char: str) -> bool:
        if char in _MARKS_ONLY_TO_HF:
            return True
        return unicodedata.category(char).startswith("M") and not _NOT_MARKS_TO_HF.match(char)

    def to_hf(self) -> dict:
        return {"type": "StripAccents"}


# BertNormalizer's tables, found by comparing with HF on every code point: the control characters (Cc, Cf, Co) HF
# removes (its older tables do not know the Cf characters excepted here; to them unassigned is not a control),
# and the nonspacing marks (Mn) its strip_accents removes (marks assigned or recategorized since are excepted).
_BERT_REMOVED = regex.compile(
    "(?![\t\n\r]|" + _code_point_class("0890-0891 08E2 110CD 13430-1343F") + ")" + pin_unicode_classes(r"[\x00\uFFFD\p{Cc}\p{Cf}\p{Co}]")
)
_BERT_TO_SPACE = regex.compile("(?! )" + pin_unicode_classes(r"\p{White_Space}"))
_BERT_MN = regex.compile(
    "(?!" + _code_point_class(
        "07FD 0897-089F 08CA-08E1 09FE 0AFA-0AFF 0B55 0C04 0C3C 0D00 0D3B-0D3C 0D81 0EBA 0ECE 180F 1885-1886 "
        "1ABF-1ACE 1DF6-1DFB A82C A8C5 A8FF A9BD 10D24-10D27 10D69-10D6D 10EAB-10EAC 10EFC-10EFF 10F46-10F50 "
        "10F82-10F85 11070 11073-11074 110C2 111C9 111CF 1123E 11241 1133B 113BB-113C0 113CE 113D0 113D2 "
        "113E1-113E2 11438-1143F 11442-11444 11446 1145E 1182F-11837 11839-1183A 1193B-1193C 1193E 11943 "
        "119D4-119D7 119DA-119DB 119E0 11A01-11A0A 11A33-11A38 11A3B-11A3E 11A47 11A51-11A56 11A59-11A5B "
        "11A8A-11A96 11A98-11A99 11C30-11C36 11C38-11C3D 11C3F 11C92-11CA7 11CAA-11CB0 11CB2-11CB3 11CB5-11CB6 "
        "11D31-11D36 11D3A 11D3C-11D3D 11D3F-11D45 11D47 11D90-11D91 11D95 11D97 11EF3-11EF4 11F00-11F01 "
        "11F36-11F3A 11F40 11F42 11F5A 13440 13447-13455 1611E-16129 1612D-1612F 16F4F 16FE4 1CF00-1CF2D "
        "1CF30-1CF46 1E000-1E006 1E008-1E018 1E01B-1E021 1E023-1E024 1E026-1E02A 1E08F 1E130-1E136 1E2AE "
        "1E2EC-1E2EF 1E4EC-1E4EF 1E5EE-1E5EF 1E944-1E94A"
    ) + ")" + pin_unicode_classes(r"[\p{Mn}]|" + _code_point_class("1734 1171E"))
)
_CJK_IDEOGRAPH = regex.compile(
    "(" + _code_point_class("3400-4DBF 4E00-9FFF F900-FAFF 20000-2A6DF 2A700-2B81F 2B920-2CEAF 2F800-2FA1F") + ")"
)


@functools.lru_cache(maxsize=1)
def _bert_clean_masks() -> tuple[np.ndarray, np.ndarray]:
    return code_point_mask(bool, _BERT_REMOVED.pattern), code_point_mask(bool, _BERT_TO_SPACE.pattern)


@functools.lru_cache(maxsize=1)
def _cjk_ideograph_mask() -> np.ndarray:
    return code_point_mask(bool, _CJK_IDEOGRAPH.pattern)


def _spaced_ideographs(code_points: np.ndarray) -> np.ndarray:
    """The code points with a space on each side of every CJK ideograph (``handle_chinese_chars``)."""
    ideographs = _cjk_ideograph_mask()[code_points]
    if not ideographs.any():
        return code_points
    ends = np.cumsum(np.where(ideographs, 3, 1))
    spaced = np.repeat(code_points, np.where(ideographs, 3, 1))
    spaced[ends[ideographs] - 3] = ord(" ")
    spaced[ends[ideographs] - 1] = ord(" ")
    return spaced


@functools.lru_cache(maxsize=1)
def _bert_marks_mask() -> np.ndarray:
    return code_point_mask(bool, _BERT_MN.pattern)


@functools.lru_cache(maxsize=4)
def _decomposes_to_kept_reordered_marks(form: str, removed_marks: Callable[[], np.ndarray]) -> np.ndarray:
    """The characters whose decomposition (``form``: NFD or NFKD) holds a mark that the decomposition reorders (a
    nonzero combining class, by HF's tables; every such character is a mark) and that is kept (not in the mask
    ``removed_marks()``). The decomposition sorts each run of such marks: where every mark of the run is removed,
    as nearly all are, the order is lost with them and each character's text is that of the character alone; a
    text holding one of these characters is taken whole."""
    marks = removed_marks()
    kept = code_point_mask(lambda char: _hf_combining_class(char) != 0 and not marks[ord(char)], r"\p{M}")
    decomposition = UnicodeNormalizer(form)
    return CharacterTable.of(decomposition, decomposition.batch_separator).any_output(kept)


class BertNormalizer(Normalizer):
    """HF ``BertNormalizer``: ``clean_text`` removes control characters (and U+0000, U+FFFD) and turns other
    white space into a space, ``handle_chinese_chars`` puts a space on each side of a CJK ideograph,
    ``strip_accents`` (default: ``lowercase``) decomposes (NFD) and removes nonspacing marks, ``lowercase``
    lowercases as ``Lowercase`` does."""

    # a noncharacter (unassigned, a starter, no mark, not white space or a control): each step keeps it and works
    # character by character (NUL, a control, clean_text removes)
    batch_separator = "\ufdd0"
    per_character = True

    def __init__(self, clean_text: bool = True, handle_chinese_chars: bool = True, strip_accents: bool | None = None,
                 lowercase: bool = True):
        self.clean_text = clean_text
        self.handle_chinese_chars = handle_chinese_chars
        self.strip_accents = strip_accents
        self.lowercase = lowercase
        self._strips = lowercase if strip_accents is None else strip_accents

    def __call__(self, text: str) -> str:
        spaces_ideographs = self.handle_chinese_chars and not text.isascii()
        if self.clean_text or spaces_ideographs:
            code_points = np.frombuffer(text.encode("utf-32-le"), np.uint32)
            if self.clean_text:
                removed, to_space = _bert_clean_masks()
                code_points = code_points[~removed[code_points]]
                code_points[to_space[code_points]] = ord(" ")
            if spaces_ideographs:
                code_points = _spaced_ideographs(code_points)
            text = code_points.tobytes().decode("utf-32-le")
        if self._strips and not text.isascii():
            text = remove_code_points(_NFD(text), _bert_marks_mask())
        return _LOWERCASE(text) if self.lowercase else text

    def align(self, text: AlignedText) -> AlignedText:
        if self.clean_text:
            removed, to_space = _bert_clean_masks()
            text = _without_code_points(text, removed)
            text = AlignedText("".join(" " if to_space[ord(char)] else char for char in text.text), text.spans)
        if self.handle_chinese_chars and not text.text.isascii():
            text = text.transform((part, int(i > 0)) for char in text.text
                                  for i, part in enumerate(f" {char} " if _CJK_IDEOGRAPH.match(char) else char))
        if self._strips and not text.text.isascii():
            text = _without_code_points(_NFD.align(text), _bert_marks_mask())
        return _LOWERCASE.align(text) if self.lowercase else text

    def character_table(self) -> CharacterTable:
        whole_text = _decomposes_to_kept_reordered_marks("NFD", _bert_marks_mask) if self._strips else None
        return CharacterTable.of(self, self.batch_separator, whole_text)

    def to_hf(self) -> dict:
        return {"type": "BertNormalizer", "clean_text": self.clean_text,
                "handle_chinese_chars": self.handle_chinese_chars, "strip_accents": self.strip_accents,
                "lowercase": self.lowercase}


def _without_code_points(text: AlignedText, mask: np.ndarray) -> AlignedText:
    """``remove_code_points`` of an aligned text (each character left keeps its span)."""
    return text.kept(not mask[ord(char)] for char in text.text)


@functools.lru_cache(maxsize=1)
def _combining_marks_mask() -> np.ndarray:
    # Python's marks are marks to the regex module too (its tables are as new or newer)
    return code_point_mask(StripAccents.is_combining_mark, "[\\p{M}" + "".join(sorted(_MARKS_ONLY_TO_HF)) + "]")


def _context_free(node) -> bool:
    """Whether a parsed regex (``crayon.reference.regex_vm.parse``) has no anchor and no lookaround: whether it
    matches at a position depends on the text from there on alone."""
    if isinstance(node, (Look, Anchor)):
        return False
    if isinstance(node, (Seq, Alt)):
        return all(map(_context_free, node.items if isinstance(node, Seq) else node.options))
    if isinstance(node, (Repeat, Atomic)):
        return _context_free(node.item)
    return True  # a character set, an empty group


class Replace(Normalizer):
    """HF ``Replace``: replace every match of a string or (Oniguruma) regex with ``content``, taken literally."""

    def __init__(self, pattern: str, content: str, *, is_regex: bool = False):
        self.pattern = pattern
        self.content = content
        self.is_regex = is_regex
        self._regex = compile_hf_regex(pattern) if is_regex else string_pattern(pattern)
        if not is_regex and pattern and BATCH_SEPARATOR not in pattern + content:
            self.batch_separator = BATCH_SEPARATOR
        # a regex that cannot match the empty string (one the compiler takes) finds HF's matches with sub; one
        # without anchors and lookarounds finds the same in texts joined at BATCH_SEPARATOR, where no match
        # takes a separator
        self._template, self._joins_as_regex = None, False
        if is_regex:
            try:
                compile_regex(self._regex.pattern, multiline=True)
                self._template = content.replace("\\", "\\\\")
                self._joins_as_regex = (_context_free(parse(self._regex.pattern, multiline=True))
                                        and BATCH_SEPARATOR not in content)
            except UnsupportedComponentError:
                pass

    def __call__(self, text: str) -> str:
        if not self.is_regex and self.pattern:  # leftmost, non-overlapping occurrences, as HF finds them
            return text.replace(self.pattern, self.content)
        if self._template is not None:
            return self._regex.sub(self._template, text)
        return "".join(
            self.content if is_match else text[start:end] for start, end, is_match in find_matches(self._regex, text)
        )

    def utf8_rewrite(self) -> tuple | None:
        if not self.is_regex:
            return ("replace", self.pattern, self.content) if self.pattern else None
        # runs of one character: "x+" or "x{n,}" (greedy, so each whole run of at least n)
        runs = regex.fullmatch(r"([ !\"#%&',\-/0-9:;<=>@A-Z_`a-z~])(?:\+|\{([1-9][0-9]*),\})", self.pattern)
        return None if runs is None else ("replace_runs", runs[1], int(runs[2] or 1), self.content)

    def align(self, text: AlignedText) -> AlignedText:
        """Each match's characters removed and ``content`` put in their place, each of its characters with the
        span of the match's last character (of the one before an empty match; ``(0, 0)`` at the start)."""
        chars: list[str] = []
        spans: list[tuple[int, int]] = []
        for start, end, is_match in find_matches(self._regex, text.text):
            if not is_match:
                chars.append(text.text[start:end])
                spans.extend(text.spans[start:end])
                continue
            chars.append(self.content)
            spans.extend([text.spans[end - 1] if end else (0, 0)] * len(self.content))
        return AlignedText("".join(chars), spans)

    def normalize_batch(self, texts: Sequence[str]) -> list[str]:
        if self._joins_as_regex and len(texts) > 1:
            joined = BATCH_SEPARATOR.join(texts)
            if joined.count(BATCH_SEPARATOR) == len(texts) - 1:
                replaced = self._regex.sub(self._template, joined)
                if replaced.count(BATCH_SEPARATOR) == len(texts) - 1:  # else a match took a separator
                    return replaced.split(BATCH_SEPARATOR)
        return super().normalize_batch(texts)

    def to_hf(self) -> dict:
        pattern = {"Regex" if self.is_regex else "String": self.pattern}
        return {"type": "Replace", "pattern": pattern, "content": self.content}


class Prepend(Normalizer):
    """HF ``Prepend``: put a string in front of non-empty text."""

    def __init__(self, prepend: str):
        self.prepend = prepend

    def __call__(self, text: str) -> str:
        return self.prepend + text if text else text

    def align(self, text: AlignedText) -> AlignedText:
        return text.prepended(self.prepend)

    def to_hf(self) -> dict:
        return {"type": "Prepend", "prepend": self.prepend}


_NMT_REMOVED = regex.compile(r"[\x01-\x08\x0B\x0E-\x1F\x7F\x8F\x9F]")
_NMT_TO_SPACE = regex.compile(r"[\t\n\x0C\r\u1680\u200B-\u200F\u2028\u2029\u2581\uFEFF\uFFFD]")


class Nmt(Normalizer):
    """HF ``Nmt``: drop ASCII control characters, turn other space-like characters into a space."""

    batch_separator = BATCH_SEPARATOR
    per_character = True

    def __call__(self, text: str) -> str:
        return _NMT_TO_SPACE.sub(" ", _NMT_REMOVED.sub("", text))

    def align(self, text: AlignedText) -> AlignedText:
        text = text.kept(not _NMT_REMOVED.match(char) for char in text.text)
        return AlignedText(_NMT_TO_SPACE.sub(" ", text.text), text.spans)

    def to_hf(self) -> dict:
        return {"type": "Nmt"}


class Precompiled(Normalizer):
    """HF ``Precompiled``: SentencePiece's precompiled character map (``crayon.formats.precompiled_charsmap``)."""

    batch_separator = BATCH_SEPARATOR

    def __init__(self, charsmap: CharsMap):
        self.charsmap = charsmap

    def __call__(self, text: str) -> str:
        return self.charsmap.rewrite(text)

    def utf8_rewrite(self) -> tuple:
        charsmap = self.charsmap
        return "precompiled", charsmap.units, charsmap.replacement_bytes, charsmap.starts_key, charsmap.first_bytes

    def align(self, text: AlignedText) -> AlignedText:
        changes = self.charsmap.rewrite_changes(text.text)
        return text if changes is None else text.transform(changes)

    def to_hf(self) -> dict:
        return {"type": "Precompiled", "precompiled_charsmap": charsmap_to_base64(self.charsmap)}


class ByteLevelNormalizer(Normalizer):
    """HF's ``ByteLevel`` normalizer: the text's UTF-8 bytes as GPT-2 byte-level characters."""

    maps_to_byte_chars = True

    def __call__(self, text: str) -> str:
        return to_byte_chars(text.encode("utf-8"))

    def align(self, text: AlignedText) -> AlignedText:
        return as_byte_chars(text)

    def to_hf(self) -> dict:
        return {"type": "ByteLevel"}


class StrippedDecomposition(Normalizer):
    """HF ``NFD`` or ``NFKD`` followed by ``StripAccents``, as one normalizer of each character on its own: the
    decomposition puts the marks after a character in order, and StripAccents removes them (a text holding a
    character whose decomposition has a mark it keeps, none in HF's tables, is normalized whole:
    ``character_table``). ``NormalizerSequence`` makes the pair one of its ``steps``."""

    batch_separator = BATCH_SEPARATOR
    per_character = True

    def __init__(self, decomposition: UnicodeNormalizer, strip: StripAccents):
        if decomposition.form not in ("NFD", "NFKD"):
            raise ValueError(f"{decomposition.form} is not a decomposition")
        self.decomposition = decomposition
        self.strip = strip

    def __call__(self, text: str) -> str:
        return self.strip(self.decomposition(text))

    def align(self, text: AlignedText) -> AlignedText:
        return self.strip.align(self.decomposition.align(text))

    def character_table(self) -> CharacterTable:
        whole_text = _decomposes_to_kept_reordered_marks(self.decomposition.form, _combining_marks_mask)
        return CharacterTable.of(self, self.batch_separator, whole_text)

    def to_hf(self) -> dict:
        return {"type": "Sequence", "normalizers": [self.decomposition.to_hf(), self.strip.to_hf()]}


def _fused_steps(normalizers: Sequence[Normalizer]) -> list[Normalizer]:
    """The normalizers, each NFD or NFKD followed by StripAccents as one ``StrippedDecomposition``."""
    steps: list[Normalizer] = []
    for normalizer in normalizers:
        previous = steps[-1] if steps else None
        if (isinstance(normalizer, StripAccents) and isinstance(previous, UnicodeNormalizer)
                and previous.form in ("NFD", "NFKD")):
            steps[-1] = StrippedDecomposition(previous, normalizer)
        else:
            steps.append(normalizer)
    return steps


class NormalizerSequence(Normalizer):
    """HF ``Sequence``: the normalizers one after the other. ``steps`` are the same normalizers with each NFD or
    NFKD followed by StripAccents as one ``StrippedDecomposition``, which rewrites each character on its own."""

    def __init__(self, normalizers: list[Normalizer]):
        self.normalizers = list(normalizers)
        byte_level_steps = sum(normalizer.maps_to_byte_chars for normalizer in self.normalizers)
        if byte_level_steps > 1:
            raise UnsupportedComponentError("ByteLevel is applied twice")
        self.maps_to_byte_chars = byte_level_steps == 1
        self.steps = _fused_steps(self.normalizers)
        self.per_character = bool(self.steps) and all(step.per_character for step in self.steps)

    def __call__(self, text: str) -> str:
        for normalizer in self.normalizers:
            text = normalizer(text)
        return text

    def align(self, text: AlignedText) -> AlignedText:
        for normalizer in self.normalizers:
            text = normalizer.align(text)
        return text

    def normalize_batch(self, texts: Sequence[str]) -> list[str]:
        for normalizer in self.normalizers:
            texts = normalizer.normalize_batch(texts)
        return list(texts)

    @property
    def whitespace_options(self) -> dict | None:
        """Llama 2's normalizer (Prepend "▁", then Replace " " with "▁") as SentencePiece's whitespace rules that
        give the same text, for ``crayon.jit.whitespace_normalizer.normalize_utf8``; None for any other sequence."""
        if [type(normalizer) for normalizer in self.normalizers] != [Prepend, Replace]:
            return None
        prepend, replace = self.normalizers
        if prepend.prepend != "\u2581" or replace.is_regex or (replace.pattern, replace.content) != (" ", "\u2581"):
            return None
        return {"escape_whitespaces": True, "remove_extra_whitespaces": False, "add_dummy_prefix": True}

    def character_table(self) -> CharacterTable | None:
        if not self.per_character:
            return None
        return functools.reduce(CharacterTable.then, (step.character_table() for step in self.steps))

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
    "BertNormalizer": lambda spec: BertNormalizer(spec.get("clean_text", True), spec.get("handle_chinese_chars", True),
                                                  spec.get("strip_accents"), spec.get("lowercase", True)),
    "ByteLevel": lambda spec: ByteLevelNormalizer(),
    "Precompiled": lambda spec: Precompiled(  # a cartridge hands the map over as bytes (see crayon.saving)
        CharsMap(spec["charsmap_bytes"]) if "charsmap_bytes" in spec else charsmap_from_base64(spec["precompiled_charsmap"])
    ),
    "Sequence": lambda spec: NormalizerSequence([normalizer_from_hf(inner) for inner in spec["normalizers"]]),
}


def normalizer_from_hf(spec: dict) -> Normalizer:
    """Build a normalizer from its tokenizer.json object; an unknown type raises naming it."""
    kind = spec.get("type")
    if kind not in _NORMALIZERS_BY_TYPE:
        raise UnsupportedComponentError(f"normalizer {kind!r} is not supported")
    return _NORMALIZERS_BY_TYPE[kind](spec)


# Where a normalized text starts: HF's Metaspace prepend_scheme "first" -------------------------------------------

START_MARGIN = 16  # characters after the first normalized character's span that decide it (see ``start_is_local``)


def start_is_local(normalizer: Normalizer) -> None:
    """Refuse (``UnsupportedComponentError``, naming the step) a normalizer whose first normalized character could
    depend on text far beyond it: a regex ``Replace`` other than a run of one character (``x+``, ``x{n,}``), a
    literal one longer than ``START_MARGIN``, or a step without alignments. Every other step decides a character
    from the next few (a literal, a short grapheme cluster, a run it replaces whole: its replacement takes the span
    of its last character)."""
    for step in _steps(normalizer):
        if type(step).align is Normalizer.align:
            raise UnsupportedComponentError(f"{type(step).__name__} before Metaspace prepend_scheme 'first': where "
                                            "its text starts is not tracked")
        if isinstance(step, Replace) and (step.utf8_rewrite() is None or len(step.pattern) > START_MARGIN):
            raise UnsupportedComponentError(
                f"Replace of {step.pattern!r} before Metaspace prepend_scheme 'first': whether it rewrites the text's "
                "start can depend on text far after it")


def starts_at_first_character(normalizer: Normalizer, text: str) -> bool:
    """Whether ``normalizer(text)`` starts with a character that stands for the original text from its first
    character on: HF's ``offsets_original().0 == 0`` of the normalized text, which Metaspace's prepend_scheme
    "first" asks before it puts its ``▁``. False where the normalizer removed the text's first characters (a
    control character, a mark, leading white space ...), rewrote several of them into characters that take the
    span of the last (``Replace``), or left nothing. At once where the second character is printable ASCII and
    the first one is kept (``_first_character_kept``); else from the alignments of a prefix long enough that
    ``START_MARGIN`` characters follow the first normalized character's span (``start_is_local``), about 0.1 ms."""
    if len(text) == 1 or " " <= text[1:2] <= "~":
        if _first_character_kept(normalizer, text[0]):
            return True
    length = 2 * START_MARGIN
    while True:
        prefix = text[:length]
        aligned = normalizer.align(AlignedText.of(prefix))
        whole = len(prefix) == len(text)
        if aligned.text and (whole or aligned.spans[0][1] + START_MARGIN <= len(prefix)):
            return aligned.spans[0][0] == 0
        if whole:
            return False
        length *= 4


def _steps(normalizer: Normalizer) -> list[Normalizer]:
    return normalizer.normalizers if isinstance(normalizer, NormalizerSequence) else [normalizer]


@functools.lru_cache(maxsize=1 << 16)
def _first_character_kept(normalizer: Normalizer, char: str) -> bool:
    """Whether every step keeps ``char``'s image as the start of a text whose next character is printable ASCII
    (which combines with no character before it): no step removes its first character, no ``Replace`` pattern
    (or run) starts with it, ``Precompiled`` rewrites its first grapheme cluster to something, and no step inserts
    before it. False is no answer: the caller then looks at the alignments."""
    image = char
    for step in _steps(normalizer):
        if not image or _CLUSTER_OF_FIRST.match(image + "a").end() > len(image):  # a Prepend character
            return False
        if isinstance(step, Replace):
            rewrite = step.utf8_rewrite()
            if rewrite is None or image.startswith(rewrite[1][:1]):
                return False
        elif isinstance(step, Precompiled):
            if not step.charsmap.rewrite_cluster(_CLUSTER_OF_FIRST.match(image + "a").group()):
                return False
        elif isinstance(step, Strip):
            if step.left and image[0].isspace():
                return False
        elif isinstance(step, BertNormalizer):
            if step.handle_chinese_chars and _cjk_ideograph_mask()[ord(image[0])]:
                return False  # a space goes before it
        elif not isinstance(step, (UnicodeNormalizer, StripAccents, Nmt, Lowercase)):
            return False
        kept = step(image)
        if not kept or (not isinstance(step, (Replace, Precompiled)) and not step(image[0])):
            return False
        image = kept
    return bool(image)


_CLUSTER_OF_FIRST = regex.compile(r"(?s)\X")

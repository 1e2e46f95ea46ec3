"""HF's ``Precompiled`` normalizer (SentencePiece's character map, applied HF's way: the twin of
``crayon.formats.precompiled_charsmap.CharsMap.rewrite``) and the byte rewrites that follow it in HF files
(``Strip``, ``Replace`` of a string or of runs of one character) in Numba, over the UTF-8 bytes of many texts at
once. ``precompiled_normalizer_of`` takes a normalizer (an HF ``Sequence`` or one step) whose last steps are such
rewrites, one of them ``Precompiled``, from each step's ``utf8_rewrite``, and steps of each character on its own
among them (ALBERT's NFKD and StripAccents, Lowercase), which run as ``crayon.jit.character_normalizer``; the steps
before them run in Python.

HF walks the text one extended grapheme cluster at a time (a cluster of fewer than 6 bytes that starts a key
becomes the replacement of the shortest key it starts with, the rest of it dropped; any other cluster is
rewritten character by character). The kernel finds the clusters with UAX #29's rules, as HF and the reference
do, on the ``regex`` module's Grapheme_Cluster_Break, Extended_Pictographic and Indic_Conjunct_Break properties
(``grapheme_classes``); the rules that look further back than one character (GB9c, GB11, GB12-13) follow them with
a small state."""

from __future__ import annotations

import functools
from typing import Sequence

import numpy as np
import regex

from crayon.jit.character_normalizer import character_normalizer_of
from crayon.jit.lazy import njit
from crayon.jit.pretokenize import decode_multibyte
from crayon.jit.whitespace_normalizer import bytes_at, key_at, replacement_span, write_bytes

# A character's grapheme class: its Grapheme_Cluster_Break in the low 4 bits, flags above; the kernel's table adds
# STARTS_KEY, whether some key of the character map may start with the character.
GRAPHEME_CLUSTER_BREAKS = ("Other", "Control", "CR", "LF", "Extend", "ZWJ", "Regional_Indicator", "Prepend",
                           "SpacingMark", "L", "V", "T", "LV", "LVT")
OTHER, CONTROL, CR, LF, EXTEND, ZWJ, REGIONAL_INDICATOR, PREPEND, SPACING_MARK, L, V, T, LV, LVT = range(14)
EXTENDED_PICTOGRAPHIC, CONJUNCT_CONSONANT, CONJUNCT_LINKER, CONJUNCT_EXTEND, STARTS_KEY = 16, 32, 64, 128, 256
_FLAG_PROPERTIES = ((EXTENDED_PICTOGRAPHIC, "Extended_Pictographic"), (CONJUNCT_CONSONANT, "InCB=Consonant"),
                    (CONJUNCT_LINKER, "InCB=Linker"), (CONJUNCT_EXTEND, "InCB=Extend"))

# The state after a character: its class's break (bits 0-3), whether it ends a run of an odd number of regional
# indicators (bit 4), how far an emoji ZWJ sequence has come (bits 5-6: GB11), and an Indic conjunct (bits 7-8:
# GB9c). A text starts as after a control: a cluster starts at its first character.
ODD_INDICATOR_RUN = 16
AFTER_PICTOGRAPH, AFTER_PICTOGRAPH_ZWJ = 1, 2
AFTER_CONSONANT, AFTER_LINKER = 1, 2
TEXT_START = CONTROL

SHORT_CLUSTER_BYTES = 6  # HF looks a cluster up whole when it is shorter than this
GROWS = -1  # a kernel's answer where its output array is too small


@functools.lru_cache(maxsize=1)
def grapheme_classes() -> np.ndarray:
    """Per code point (surrogates: ``OTHER``), its grapheme class (uint8), by the ``regex`` module's tables."""
    code_points = np.arange(0x110000, dtype=np.uint32)
    code_points[0xD800:0xE000] = ord(" ")  # surrogates, which no text holds, stand in as spaces (OTHER)
    every = code_points.tobytes().decode("utf-32-le")
    classes = np.zeros(0x110000, np.uint8)
    for value, name in enumerate(GRAPHEME_CLUSTER_BREAKS[1:], 1):
        for run in regex.finditer(rf"\p{{Grapheme_Cluster_Break={name}}}+", every):
            classes[run.start() : run.end()] |= value
    for flag, name in _FLAG_PROPERTIES:
        for run in regex.finditer(rf"\p{{{name}}}+", every):
            classes[run.start() : run.end()] |= flag
    return classes


@njit(cache=True, nogil=True, inline="always")
def _joins_previous(state, char_class):
    """Whether a character of ``char_class`` goes on the cluster of the characters before it (UAX #29's rules;
    ``state`` is ``_state_after`` the one before it)."""
    before, kind = state & 15, char_class & 15
    if before == CR and kind == LF:  # GB3
        return True
    if CONTROL <= before <= LF or CONTROL <= kind <= LF:  # GB4, GB5
        return False
    if before == L and (kind == L or kind == V or kind == LV or kind == LVT):  # GB6
        return True
    if (before == LV or before == V) and (kind == V or kind == T):  # GB7
        return True
    if (before == LVT or before == T) and kind == T:  # GB8
        return True
    if kind == EXTEND or kind == ZWJ or kind == SPACING_MARK or before == PREPEND:  # GB9, GB9a, GB9b
        return True
    if char_class & CONJUNCT_CONSONANT and state >> 7 == AFTER_LINKER:  # GB9c
        return True
    if char_class & EXTENDED_PICTOGRAPHIC and (state >> 5) & 3 == AFTER_PICTOGRAPH_ZWJ:  # GB11
        return True
    return kind == REGIONAL_INDICATOR and before == REGIONAL_INDICATOR and state & ODD_INDICATOR_RUN != 0  # GB12-13


@njit(cache=True, nogil=True, inline="always")
def _state_after(state, char_class):
    """The state after a character of ``char_class`` that follows ``state``."""
    kind = char_class & 15
    odd_run = ODD_INDICATOR_RUN if kind == REGIONAL_INDICATOR and state & ODD_INDICATOR_RUN == 0 else 0
    emoji = (state >> 5) & 3
    if char_class & EXTENDED_PICTOGRAPHIC:
        emoji = AFTER_PICTOGRAPH
    elif emoji == AFTER_PICTOGRAPH and kind == ZWJ:
        emoji = AFTER_PICTOGRAPH_ZWJ
    elif not (emoji == AFTER_PICTOGRAPH and kind == EXTEND):
        emoji = 0
    conjunct = state >> 7
    if char_class & CONJUNCT_CONSONANT:
        conjunct = AFTER_CONSONANT
    elif conjunct != 0 and char_class & CONJUNCT_LINKER:
        conjunct = AFTER_LINKER
    elif not char_class & CONJUNCT_EXTEND:
        conjunct = 0
    return kind | odd_run | emoji << 5 | conjunct << 7


@njit(cache=True, nogil=True, inline="always")
def _code_point(data, pos, end):
    """(code point, byte length) of the character at data[pos]; (0, 0) where it is not UTF-8."""
    if data[pos] < 0x80:
        return np.int64(data[pos]), 1
    return decode_multibyte(data, pos, end)


@njit(cache=True, nogil=True, inline="always")
def _cluster_end(data, pos, end, state, classes, limit):
    """(where the cluster going on at data[pos] ends, the state there), looking no further than ``limit``."""
    while pos < end and pos < limit:
        code_point, width = _code_point(data, pos, end)
        char_class = classes[code_point]
        if width == 0 or not _joins_previous(state, char_class):
            break
        state = _state_after(state, char_class)
        pos += width
    return pos, state


@njit(cache=True, nogil=True, inline="always")
def _write_replacement(out, n, units, leaf, replacements):
    start, stop = replacement_span(units, leaf, replacements)
    for i in range(start, stop):
        out[n] = replacements[i]
        n += 1
    return n


@njit(cache=True, nogil=True)
def _precompiled_kernel(data, text_ends, units, replacements, classes, out, out_ends):
    """Write each text rewritten by the character map (HF's way) to ``out`` and its end to ``out_ends``; returns
    the bytes written, ``GROWS`` where ``out`` is too small, or -2 - the offset of a byte that is not UTF-8."""
    # the key that is each ASCII character alone (the trie position of its leaf, 0 for none): an ASCII character
    # before ASCII (or the text's end), CR aside, is rewritten by it, as the cluster it is or as part of one
    ascii_leaves = np.zeros(0x80, np.int64)
    probe = np.zeros(1, np.uint8)
    for byte in range(1, 0x80):
        probe[0] = byte
        length, ascii_leaves[byte], _ = key_at(probe, 0, 1, units, True)
    longest_replacement = 0
    for leaf in ascii_leaves:
        if leaf:
            start, stop = replacement_span(units, leaf, replacements)
            longest_replacement = max(longest_replacement, stop - start)
    n = 0
    start = 0
    for text in range(text_ends.shape[0]):
        end = text_ends[text]
        state = TEXT_START
        pos = start
        while pos < end:
            byte = data[pos]
            if byte < 0x80 and byte != 0x0D and (pos + 1 == end or data[pos + 1] < 0x80):
                state = classes[byte] & 15  # the state after an ASCII character is its break
                if ascii_leaves[byte]:
                    if n + longest_replacement + data.shape[0] - pos > out.shape[0]:
                        return GROWS
                    n = _write_replacement(out, n, units, ascii_leaves[byte], replacements)
                else:
                    out[n] = byte
                    n += 1
                pos += 1
                continue
            code_point, width = _code_point(data, pos, end)
            if width == 0:
                return -2 - pos
            char_class = classes[code_point]
            stop = pos + width
            if char_class == OTHER:  # no flag: no key starts with it, and the state after it is OTHER
                state = OTHER
            elif char_class & STARTS_KEY:
                starts_cluster = not _joins_previous(state, char_class)
                state = _state_after(state, char_class)
                length, leaf, walked = key_at(data, pos, stop, units, True)
                if starts_cluster and (length or walked == width):  # the cluster, looked up whole where short
                    cluster_end, cluster_state = _cluster_end(data, stop, end, state, classes,
                                                              pos + SHORT_CLUSTER_BYTES)
                    if stop < cluster_end < pos + SHORT_CLUSTER_BYTES:
                        if not length:
                            length, leaf, _ = key_at(data, pos, cluster_end, units, True)
                        if length:
                            stop, state = cluster_end, cluster_state
                if length:
                    piece_start, piece_stop = replacement_span(units, leaf, replacements)
                    if n + piece_stop - piece_start + data.shape[0] - stop > out.shape[0]:
                        return GROWS
                    n = _write_replacement(out, n, units, leaf, replacements)
                    pos = stop
                    continue
            else:
                state = _state_after(state, char_class)
            for i in range(pos, stop):  # kept (alone, or as the first of a cluster that no key starts)
                out[n] = data[i]
                n += 1
            pos = stop
        out_ends[text] = n
        start = end
    return n


@njit(cache=True, nogil=True, inline="always")
def _white_space_width(data, pos, end, white_space):
    """The byte length of the character at data[pos] where it is one of the code points ``white_space``, else 0."""
    code_point, width = _code_point(data, pos, end)
    for space in white_space:
        if space == code_point:
            return width
    return 0


@njit(cache=True, nogil=True)
def _strip_kernel(data, text_ends, left, right, white_space, out, out_ends):
    """Write each text without its white space (the code points ``white_space``) on the left and/or right."""
    n = 0
    start = 0
    for text in range(text_ends.shape[0]):
        end = text_ends[text]
        first, last = start, end
        while left and first < last:
            width = _white_space_width(data, first, last, white_space)
            if width == 0:
                break
            first += width
        while right and last > first:
            char_start = last - 1
            while char_start > first and data[char_start] & 0xC0 == 0x80:
                char_start -= 1
            if _white_space_width(data, char_start, last, white_space) == 0:
                break
            last = char_start
        out[n : n + last - first] = data[first:last]
        n += last - first
        out_ends[text] = n
        start = end
    return n


@njit(cache=True, nogil=True)
def _replace_kernel(data, text_ends, pattern, content, out, out_ends):
    """Write each text with every occurrence of ``pattern`` (leftmost first, not overlapping) made ``content``."""
    first = pattern[0]
    n = 0
    start = 0
    for text in range(text_ends.shape[0]):
        end = text_ends[text]
        pos = start
        while pos < end:
            byte = data[pos]
            if byte != first:
                out[n] = byte
                n += 1
                pos += 1
                continue
            if bytes_at(data, pos, end, pattern):
                if n + content.shape[0] + data.shape[0] - pos > out.shape[0]:
                    return GROWS
                n = write_bytes(out, n, content)
                pos += pattern.shape[0]
            else:
                out[n] = byte
                n += 1
                pos += 1
        out_ends[text] = n
        start = end
    return n


@njit(cache=True, nogil=True)
def _replace_runs_kernel(data, text_ends, byte, shortest, content, out, out_ends):
    """Write each text with every run of at least ``shortest`` bytes ``byte`` made ``content``."""
    n = 0
    start = 0
    for text in range(text_ends.shape[0]):
        end = text_ends[text]
        pos = start
        while pos < end:
            if data[pos] != byte:
                out[n] = data[pos]
                n += 1
                pos += 1
                continue
            run_end = pos + 1
            while run_end < end and data[run_end] == byte:
                run_end += 1
            if run_end - pos >= shortest:
                if n + content.shape[0] + data.shape[0] - run_end > out.shape[0]:
                    return GROWS
                n = write_bytes(out, n, content)
            else:
                for _ in range(pos, run_end):  # bytes one at a time: most runs are one byte, shorter than a slice
                    out[n] = byte
                    n += 1
            pos = run_end
        out_ends[text] = n
        start = end
    return n


def _kernel_classes(starts_key: np.ndarray | None, first_bytes: np.ndarray) -> np.ndarray:
    """``grapheme_classes`` with ``STARTS_KEY`` where a key starts with the character (``starts_key``), or where
    that is not known, with its first byte (``first_bytes``)."""
    if starts_key is None:
        code_points = np.arange(0x110000)
        first_byte = np.select([code_points < 0x80, code_points < 0x800, code_points < 0x10000],
                               [code_points, 0xC0 | code_points >> 6, 0xE0 | code_points >> 12],
                               0xF0 | code_points >> 18)
        starts_key = first_bytes[first_byte]
    classes = grapheme_classes().astype(np.uint16)
    classes[1:][starts_key[1:]] |= STARTS_KEY  # a NUL ends the key search: it starts none
    return classes


def _as_bytes(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-8"), np.uint8)


class PrecompiledNormalizer:
    """A normalizer whose last steps rewrite UTF-8 bytes, ``Precompiled`` among them: ``normalize_before`` runs
    the steps before them in Python, ``normalize_utf8`` the rewrites over the bytes of many texts, in order. The
    rewrites, as the steps' ``utf8_rewrite`` gives them: ("precompiled", the trie's units, the replacements,
    whether a key starts with each code point or None, whether one starts with each byte), ("strip", left, right,
    the white space code points), ("replace", string, content), ("replace_runs", character, shortest run,
    content); and ("characters", a ``CharacterNormalizer``) for steps of each character on its own."""

    def __init__(self, python_steps: Sequence, rewrites: Sequence[tuple]):
        self.python_steps = list(python_steps)
        self.character_normalizers = []
        self._steps = []
        for kind, *arguments in rewrites:
            if kind == "precompiled":
                units, replacements, starts_key, first_bytes = arguments
                classes = _kernel_classes(starts_key, first_bytes)
                self._steps.append(functools.partial(_rewritten, _precompiled_kernel, (units, replacements, classes)))
            elif kind == "strip":
                left, right, white_space = arguments
                white_space = np.asarray(white_space, np.int64)
                self._steps.append(functools.partial(_rewritten, _strip_kernel, (left, right, white_space)))
            elif kind == "replace":
                pattern, content = arguments
                self._steps.append(functools.partial(_rewritten, _replace_kernel, (_as_bytes(pattern),
                                                                                   _as_bytes(content))))
            elif kind == "replace_runs":
                char, shortest, content = arguments
                self._steps.append(functools.partial(_rewritten, _replace_runs_kernel, (ord(char), shortest,
                                                                                        _as_bytes(content))))
            elif kind == "characters":
                (character_normalizer,) = arguments
                self.character_normalizers.append(character_normalizer)
                self._steps.append(character_normalizer.normalize_utf8)
            else:
                raise ValueError(f"unknown UTF-8 rewrite {kind!r}")

    def normalize_before(self, texts: Sequence[str]) -> Sequence[str]:
        """The texts after the steps that run in Python."""
        for step in self.python_steps:
            texts = step.normalize_batch(texts)
        return texts

    def normalize_utf8(self, data: np.ndarray, text_ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rewritten bytes, their text ends) of the texts (after ``normalize_before``) whose UTF-8 bytes are
        data[text_ends[i - 1]:text_ends[i]] (from 0)."""
        text_ends = text_ends.astype(np.int64)
        for step in self._steps:
            data, text_ends = step(data, text_ends)
        return data, text_ends


def _rewritten(kernel, tables: tuple, data: np.ndarray, text_ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bytes, text ends) of the texts rewritten by one of the kernels above, its output grown until it fits."""
    size = len(data) + len(data) // 2 + 16
    while True:
        out = np.empty(size, np.uint8)
        out_ends = np.empty(len(text_ends), np.int64)
        n = kernel(data, text_ends, *tables, out, out_ends)
        if n >= 0:
            return out[:n], out_ends
        if n != GROWS:
            raise ValueError(f"the bytes at {-2 - n} are not UTF-8")
        size *= 2


def precompiled_normalizer_of(normalizer) -> PrecompiledNormalizer | None:
    """The twin of ``normalizer`` (an HF normalizer or ``Sequence`` of them) whose last steps rewrite bytes or
    each character on its own (its ``steps``: NFD or NFKD followed by StripAccents is one), one of them
    ``Precompiled``; None where it has none."""
    if normalizer is None:
        return None
    steps = list(getattr(normalizer, "steps", [normalizer]))
    rewrites: list[tuple] = []
    while steps:
        rewrite = steps[-1].utf8_rewrite()
        if rewrite is not None:
            steps.pop()
        elif steps[-1].per_character:
            character_steps = []
            while steps and steps[-1].per_character and steps[-1].utf8_rewrite() is None:
                character_steps.insert(0, steps.pop())
            # several as a Sequence of their own (the normalizer is one where it has them): one table, stored once
            joined = character_steps[0] if len(character_steps) == 1 else type(normalizer)(character_steps)
            rewrite = ("characters", character_normalizer_of(joined))
        else:
            break
        rewrites.insert(0, rewrite)
    if not any(kind == "precompiled" for kind, *_ in rewrites):
        return None
    return PrecompiledNormalizer(steps, rewrites)

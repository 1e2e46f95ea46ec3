"""One long text on every core: cut where the dataset pipeline's ``CutRule`` proves a cut exact (see
``crayon.reference.pipeline``: the tokens of A + B are those of A then those of B), the parts encoded on
``worker_map``'s threads by a GIL-free kernel, their tokens concatenated: exactly the whole text's tokens.

The engines (``crayon.jit.engine.JitEngine``, ``crayon.jit.longest.LongestMatchEngine``) cut every ordinary text
of at least ``LongTexts.min_bytes`` characters (default ``LONG_TEXT_BYTES``, 1 MB, or the environment variable
``CRAYON_LONG_TEXT_BYTES``) with ``LongTexts.encode_text``: the calling thread finds the cuts in a few kilobytes
around each of the evenly spaced places where it wants one, each worker takes its part of the str, makes its
UTF-8 (``utf8_of``, with the caller's ``prepare`` as its repair) and encodes it, and the caller appends each part's ids to one
list as they come. With one core a text of at least 1.5 ``ONE_THREAD_PART_BYTES`` is cut too and its parts encoded
one after the other: a part's UTF-8 and tokens are alive at a time, not the whole text's, and on 100 MB measured
here that was faster too.
The engines see ordinary text only (``Tokenizer`` cuts special and added tokens out first), so the rule is the
pre-tokenizer's alone; a tokenizer it does not cover (no known pattern, a normalizer) keeps encoding on one
thread, as does a text with no cut in it.
"""

from __future__ import annotations

import math
import os
from types import SimpleNamespace
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from crayon.jit.cores import available_cores, worker_map

LONG_TEXT_BYTES = 1 << 20
PARTS_PER_THREAD = 8  # parts per thread: the last part, whose ids are appended after the others, is small
MIN_PART_BYTES = 1 << 16
# With one thread, parts only bound the memory a text takes at once (its UTF-8, the kernels' arrays): a text of
# 1-4 MB cut in eight took 3-8 ns a token more than whole with longest match (``bench/longest.py``), so parts are
# this long at least, and a text under 1.5 times this stays whole.
ONE_THREAD_PART_BYTES = 1 << 23
SEARCH_CHARS = 1 << 12  # encode_text looks for a cut this far around each place it wants one; then wider
WIDEST_SEARCH_CHARS = 1 << 20  # ... up to this far (a text without spaces or line starts is cut less)
RULE_READS = 8  # is_cut(data, p) reads data[p - 7 : p + 4]: a cut searched in a window keeps this far from its ends


class LongTexts:
    """Cuts and encodes long texts for one engine.

    ``min_bytes``: texts at least this long are cut (characters of a str, bytes of UTF-8). ``threads``: how many
    (None: ``available_cores()`` at each call, the CPU affinity capped by a cgroup quota, as everywhere in
    Crayon). ``part_bytes``: the size parts are cut to, in the same unit (None: the text split evenly,
    ``PARTS_PER_THREAD`` parts per thread, none under ``MIN_PART_BYTES``, with one thread none under
    ``ONE_THREAD_PART_BYTES``; tests set 1 to cut at every allowed position)."""

    def __init__(self, tokenizer, *, min_bytes: int | None = None, threads: int | None = None,
                 part_bytes: int | None = None):
        self.min_bytes = long_text_bytes() if min_bytes is None else min_bytes
        self.threads = threads
        self.part_bytes = part_bytes
        # what the cut rule reads of the tokenizer, whose added tokens are cut out before the engine's text
        self._spec = SimpleNamespace(name=tokenizer.name, pattern=tokenizer.pattern, normalizer=tokenizer.normalizer,
                                     pretokenizer=tokenizer.pretokenizer)
        self._rule = None  # CutRule, made at the first long text (it imports the regex module)
        self.refusal: str | None = None  # why texts of this tokenizer are not cut, once known

    def cut_rule(self):
        """The pipeline's ``CutRule`` for this pre-tokenizer, or None (``refusal`` says why)."""
        if self._rule is None and self.refusal is None:
            from crayon.errors import UnsupportedComponentError
            from crayon.reference.pipeline import CutRule

            try:
                self._rule = CutRule(self._spec, added_tokens_removed=True)
            except UnsupportedComponentError as error:
                self.refusal = str(error)
        return self._rule

    def part_size(self, size: int, threads: int) -> int:
        """How long the parts of a text of ``size`` are cut for ``threads`` threads (see the class)."""
        least = MIN_PART_BYTES if threads > 1 else ONE_THREAD_PART_BYTES
        return self.part_bytes or max(least, math.ceil(size / (threads * PARTS_PER_THREAD)))

    def parts(self, data: bytes, threads: int) -> list[tuple[int, int]]:
        """(start, end) byte ranges of ``data`` cut by the rule into parts of about ``part_bytes``."""
        from crayon.reference.pipeline import Document, cut_document

        part = self.part_size(len(data), threads)
        return list(cut_document(Document("text", data, 0, len(data)), self.cut_rule(), part))

    def cuts(self, text: str, threads: int) -> list[int]:
        """Character offsets where ``text`` is cut by the rule, about every ``part_bytes`` characters, in order
        (0 < cut < len(text)). Each cut is searched in the text around the place it is wanted, widening from
        ``SEARCH_CHARS`` to ``WIDEST_SEARCH_CHARS``; with parts shorter than that, the cuts of the whole text's
        UTF-8 (``parts``) are taken instead."""
        part = self.part_size(len(text), threads)
        if part < 2 * SEARCH_CHARS:
            data = text.encode("utf-8", "surrogatepass")  # lone surrogates: 3 bytes, never a cut's neighbours
            return _char_offsets(data, [start for start, _ in self.parts(data, threads)[1:]])
        cuts: list[int] = []
        for wanted in range(part, len(text) - part // 2, part):
            cut = self._cut_near(text, wanted, cuts[-1] if cuts else 0)
            if cut is not None:
                cuts.append(cut)
        return cuts

    def _cut_near(self, text: str, wanted: int, after: int) -> int | None:
        """A cut of ``text`` after character ``after``: the last one at or before ``wanted``, else the first one
        after it, in a window around ``wanted``; None if none is found up to ``WIDEST_SEARCH_CHARS`` away."""
        rule, width = self.cut_rule(), SEARCH_CHARS
        while width <= WIDEST_SEARCH_CHARS:
            low, high = max(after, wanted - width), min(len(text), wanted + width)
            data = text[low:high].encode("utf-8", "surrogatepass")
            wanted_byte = _byte_offsets(data)[wanted - low]
            # the rule judges data as if it began a document: keep RULE_READS bytes from a window end that is not
            # the text's (a cut at a window's start would pass for one at the document's start)
            first = 0 if low == 0 else RULE_READS
            last = len(data) if high == len(text) else len(data) - RULE_READS
            cut = None
            if first < wanted_byte < last:
                cut = rule.last_cut(data, first, wanted_byte, 0)
            if cut is None:
                cut = rule.next_cut(data, max(first, wanted_byte), last, 0)
            if cut is not None:
                return low + _char_offsets(data, [cut])[0]
            width *= 16
        return None

    def encode_text(self, text: str, encode_part: Callable[[np.ndarray], Any], join: Callable[[Iterator], Any],
                    prepare: Callable[[str], str] | None = None) -> Any:
        """``join`` of the iterator of ``encode_part`` (a read-only uint8 array of UTF-8 -> its tokens) of each part
        of ``text``, in order, the parts' UTF-8 made (``utf8_of``: ``prepare``, where given, repairs a part that has none)
        and encoded on ``threads`` threads at once, or one after the other on the calling thread where there is
        one (``join`` takes each part as soon as it and the ones before it are done); None where the text is not
        cut (shorter than ``min_bytes`` characters, no proven rule for this tokenizer, or no cut in it): the
        caller encodes it whole."""
        if len(text) < self.min_bytes or self.cut_rule() is None:
            return None
        threads = max(1, available_cores() if self.threads is None else self.threads)
        cuts = self.cuts(text, threads)
        if not cuts:
            return None
        bounds = [0, *cuts, len(text)]

        def encode(i: int):
            part = text[bounds[i] : bounds[i + 1]]
            encoded = utf8_of(part, prepare)
            return encode_part(np.frombuffer(encoded, np.uint8))

        return join(worker_map(encode, range(len(bounds) - 1), threads))


def _byte_offsets(data: bytes) -> np.ndarray:
    """The offset of each character's first byte in UTF-8 ``data``, then len(data)."""
    return np.append(np.flatnonzero((np.frombuffer(data, np.uint8) & 0xC0) != 0x80), len(data))


def _char_offsets(data: bytes, byte_offsets: list[int]) -> list[int]:
    """The character offsets of byte offsets that start characters of UTF-8 ``data``."""
    return np.searchsorted(_byte_offsets(data), byte_offsets).tolist()


def utf8_of(text: str, repair: Callable[[str], str] | None = None,
            normalize: Callable[[str], str] | None = None) -> bytes:
    """``text.encode("utf-8")``, or, for a text with no UTF-8 encoding (lone surrogates), that of ``repair(text)``
    where ``repair`` is given: a text that has one is encoded once, not checked first. ``normalize`` (a
    normalizer) then applies to the repaired text, as the reference engine applies it after the Tokenizer's
    repair; a text it returns as is (the same str: already normalized) is still encoded once."""
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError:
        if repair is None:
            raise
        text = repair(text)
        encoded = text.encode("utf-8")
    if normalize is None:
        return encoded
    normalized = normalize(text)
    return encoded if normalized is text else normalized.encode("utf-8")


def joined_arrays(parts: Iterable[np.ndarray]) -> np.ndarray:
    """The arrays one after the other."""
    return np.concatenate(list(parts))


def long_text_bytes() -> int:
    """The default ``min_bytes``: ``CRAYON_LONG_TEXT_BYTES`` where it is set, else ``LONG_TEXT_BYTES``."""
    value = os.environ.get("CRAYON_LONG_TEXT_BYTES")
    if value is None:
        return LONG_TEXT_BYTES
    if not value.strip().isdigit() or int(value) < 1:
        raise ValueError(f"CRAYON_LONG_TEXT_BYTES must be a whole number of bytes (at least 1), not {value!r}")
    return int(value)

"""One long text on every core: cut where the dataset pipeline's ``CutRule`` proves a cut exact (see
``crayon.reference.pipeline``: the tokens of A + B are those of A then those of B), the parts encoded on a
thread pool by a GIL-free kernel, their tokens concatenated: exactly the whole text's tokens.

The engines (``crayon.jit.engine.JitEngine``, ``crayon.jit.longest.LongestMatchEngine``) cut every ordinary text
of at least ``LongTexts.min_bytes`` UTF-8 bytes (default ``LONG_TEXT_BYTES``, 1 MB, or the environment variable
``CRAYON_LONG_TEXT_BYTES``) with ``LongTexts.encode_parts``; each part's list of ids is made on the thread that
encoded it (building lists holds the GIL, so it overlaps with another thread's kernel), and the caller only joins
them. The engines see ordinary text only (``Tokenizer`` cuts
special and added tokens out first), so the rule is the pre-tokenizer's alone; a tokenizer it does not cover
(no known pattern, a normalizer) keeps encoding on one thread, as does a text with no cut in it.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from crayon.jit.cores import available_cores

LONG_TEXT_BYTES = 1 << 20
PARTS_PER_THREAD = 8  # parts per thread: the last part, whose list is joined after the others, is small
MIN_PART_BYTES = 1 << 16


class LongTexts:
    """Cuts and encodes long texts for one engine.

    ``min_bytes``: texts at least this long are cut. ``threads``: how many (None: ``available_cores()`` at each
    call, the CPU affinity capped by a cgroup quota, as everywhere in Crayon). ``part_bytes``: the size parts are
    cut to (None: the text split evenly, ``PARTS_PER_THREAD`` parts per thread, none under ``MIN_PART_BYTES``;
    tests set 1 to cut at every allowed position)."""

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

    def parts(self, data: bytes, threads: int) -> list[tuple[int, int]]:
        """(start, end) byte ranges of ``data`` cut by the rule into parts of about ``part_bytes``."""
        from crayon.reference.pipeline import Document, cut_document

        part = self.part_bytes or max(MIN_PART_BYTES, math.ceil(len(data) / (threads * PARTS_PER_THREAD)))
        return list(cut_document(Document("text", data, 0, len(data)), self.cut_rule(), part))

    def threads_for(self, size: int) -> int:
        """How many threads a text of at most ``size`` UTF-8 bytes is cut for: 1 where it is not cut (shorter than
        ``min_bytes``, one core, or no proven rule for this tokenizer)."""
        if size < self.min_bytes:
            return 1
        threads = available_cores() if self.threads is None else self.threads
        return threads if threads > 1 and self.cut_rule() is not None else 1

    def encode_parts(self, encoded: bytes, encode_part: Callable[[np.ndarray], Any], join: Callable[[Iterator], Any],
                     threads: int) -> Any:
        """``join`` of the iterator of ``encode_part`` (a uint8 array -> its tokens, called on ``threads`` threads at
        once) of each part of the UTF-8 text ``encoded``, in order (``join`` takes each part as soon as it and the
        ones before it are done, while the threads encode the rest); None where the text is not cut (shorter than
        ``min_bytes`` or no cut in it): the caller encodes it whole."""
        if len(encoded) < self.min_bytes or threads < 2:
            return None
        ranges = self.parts(encoded, threads)
        if len(ranges) < 2:
            return None
        data = np.frombuffer(encoded, np.uint8)
        with ThreadPoolExecutor(min(threads, len(ranges))) as pool:
            return join(pool.map(lambda bounds: encode_part(data[bounds[0] : bounds[1]]), ranges))


def joined_lists(parts: Iterable[list[int]]) -> list[int]:
    """The lists one after the other, in the first one."""
    parts = iter(parts)
    joined = next(parts)
    for part in parts:
        joined += part
    return joined


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

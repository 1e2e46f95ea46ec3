"""Numba greedy longest match over a DAT: the same ids as ``crayon.reference.longest`` (see it for the rules).

``encode_spans`` encodes a whole text, cut into spans by an array of span ends, in one call; ``LongestMatchEngine``
is the jit engine of a longest-match ``Tokenizer`` (its ``model`` a ``LongestMatchModel``). The kernel reads
the DAT arrays only at indices it has checked (``0 <= t < min(len(base), len(check), len(values))``), so a
corrupt or hostile DAT gives wrong ids, never a crash.

ASCII fast path (an 8-bytes-at-a-time ASCII check, as SIMD code does it), off by default: when the 8 bytes at the walk's
start are all ASCII and inside the span, the first 8 steps of the walk skip the per-byte span-end test.
Byte-level matching needs no UTF-8 boundary logic, so that test is all it can skip, and measured it costs more
than it saves (``bench/longest.py`` prints both; the ids are the same either way).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np

from crayon.jit.cores import available_cores
from crayon.jit.dat import check_dat_arrays
from crayon.jit.lazy import njit
from crayon.jit.pretokenize import jit_pattern_of, span_ends
from crayon.reference.engine import flat_from_arrays


class LongestMatchEngine:
    """Encodes ordinary text of a longest-match tokenizer: pre-tokenize (the jit spanner for a known pattern),
    then ``encode_spans`` over the whole text."""

    name = "jit"
    capabilities = frozenset({"threads", "compiled"})

    def __init__(self, tokenizer):
        model = tokenizer.model
        check_dat_arrays(model.base, model.check, model.values)
        self._dat = (model.base, model.check, model.values)
        self._fallback = np.ascontiguousarray(model.fallback, dtype=np.int32)
        self._normalizer = tokenizer.normalizer
        self._pretokenizer = tokenizer.pretokenizer
        self._pattern_name = jit_pattern_of(tokenizer)

    def encode_ordinary_array(self, text: str) -> np.ndarray:
        """Ids of ordinary text (no special tokens) as a uint32 array."""
        if self._pattern_name is not None:
            data = text.encode("utf-8")
            ends = span_ends(data, self._pattern_name)
        else:
            if self._normalizer is not None:
                text = self._normalizer(text)
            spans = [span.encode("utf-8") for span in self._pretokenizer(text)]
            data = b"".join(spans)
            ends = np.cumsum(np.fromiter(map(len, spans), np.int64, len(spans)))
        return encode_spans(np.frombuffer(data, np.uint8), ends, *self._dat, self._fallback).view(np.uint32)

    def encode_ordinary(self, text: str) -> list[int]:
        return self.encode_ordinary_array(text).tolist()

    def encode_ordinary_batch(self, texts: Sequence[str], num_threads: int | None = None) -> list[list[int]]:
        """Ids of each text; ``num_threads`` threads (default: ``available_cores()``) share the texts."""
        threads = available_cores() if num_threads is None else num_threads
        if threads < 1:
            raise ValueError(f"num_threads must be at least 1, not {num_threads}")
        if threads == 1 or len(texts) < 2:
            return [self.encode_ordinary(text) for text in texts]
        with ThreadPoolExecutor(min(threads, len(texts))) as pool:  # the kernel releases the GIL
            return list(pool.map(self.encode_ordinary, texts))

    def encode_ordinary_flat(self, texts: Sequence[str], num_threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """All texts' ids in one uint32 array and int64 offsets: text i is tokens[offsets[i]:offsets[i + 1]]."""
        return flat_from_arrays([np.array(ids, np.uint32) for ids in self.encode_ordinary_batch(texts, num_threads)])


def encode_spans(
    text: np.ndarray,
    span_ends: np.ndarray,
    base: np.ndarray,
    check: np.ndarray,
    values: np.ndarray,
    fallback: np.ndarray,
    *,
    ascii_fast_path: bool = False,
) -> np.ndarray:
    """int32 ids of ``text`` (uint8) cut into spans ``[previous end, end)``; the last end must be ``len(text)``.

    ``fallback`` is the 256-entry table from ``crayon.reference.longest.byte_fallback_ids``.
    """
    check_dat_arrays(base, check, values)
    text = np.ascontiguousarray(text, dtype=np.uint8)
    span_ends = np.ascontiguousarray(span_ends, dtype=np.int64)
    fallback = np.ascontiguousarray(fallback, dtype=np.int32)
    if text.ndim != 1 or span_ends.ndim != 1 or fallback.shape != (256,):
        raise ValueError("text and span_ends must be 1-D and fallback must hold 256 ids")
    if len(span_ends) and (span_ends[0] < 0 or (span_ends[1:] < span_ends[:-1]).any()):
        raise ValueError("span ends must not decrease")
    if (span_ends[-1] if len(span_ends) else 0) != len(text):
        raise ValueError(f"the spans must end at the text's end ({len(text)} bytes): bytes would be lost")
    out = np.empty(len(text), dtype=np.int32)
    count = _encode_spans(text, span_ends, base, check, values, fallback, out, ascii_fast_path)
    return out[:count]


@njit(cache=True, nogil=True)
def _encode_spans(text, span_ends, base, check, values, fallback, out, ascii_fast_path):
    count = 0
    start = 0
    for end in span_ends:
        count = encode_span_into(text, start, end, base, check, values, fallback, out, count, ascii_fast_path)
        start = end
    return count


@njit(cache=True, inline="always")
def _is_ascii8(text, position):
    combined = text[position]
    for k in range(1, 8):
        combined |= text[position + k]
    return combined < 128


@njit(cache=True, nogil=True, inline="always")
def encode_span_into(text, start, end, base, check, values, fallback, out, count, ascii_fast_path):
    """Append the ids of ``text[start:end]`` to ``out`` from index ``count``; return the new count.

    The caller checks once what does not come from a cartridge: ``0 <= start <= end <= len(text)``,
    ``len(fallback) == 256``, room in ``out`` for ``end - start`` more ids, and DAT arrays of length >= 1.
    Every DAT read is bounds-checked here.
    """
    size = min(len(base), len(check), len(values))
    position = start
    while position < end:
        best_id, best_length = -1, 0
        state = 0
        walked = 0
        if ascii_fast_path and end - position >= 8 and _is_ascii8(text, position):
            while walked < 8:  # no span-end test: these 8 bytes are known to lie in the span
                target = np.int64(base[state]) + np.int64(text[position + walked])
                if target < 0 or target >= size or check[target] != state:
                    break
                state = target
                walked += 1
                if values[state] >= 0:
                    best_id, best_length = values[state], walked
        while position + walked < end:  # after a failed fast step this fails again at once
            target = np.int64(base[state]) + np.int64(text[position + walked])
            if target < 0 or target >= size or check[target] != state:
                break
            state = target
            walked += 1
            if values[state] >= 0:
                best_id, best_length = values[state], walked
        if best_length == 0:
            best_id, best_length = fallback[text[position]], 1
        out[count] = best_id
        count += 1
        position += best_length
    return count

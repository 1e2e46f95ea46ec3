"""Numba greedy longest match over a DAT: the same ids as ``crayon.reference.longest`` (see it for the rules).

``encode_spans`` encodes a whole text, cut into spans by an array of span ends, in one call; ``LongestMatchEngine``
is the jit engine of a longest-match ``Tokenizer`` (its ``model`` a ``LongestMatchModel``), which for a known
pattern runs ``encode_text_kernel``: the spans found and matched in one pass over the text. A span that ASCII
bytes alone decide (``ascii_span_end``: words, symbols, digits; 93-97% of the spans of English text) ends
without the pre-tokenizer's state machine, any other span comes from ``fill_span_ends``; the match walks the
interleaved DAT of ``crayon.jit.backtrack``. Measured on big.txt with ``lite`` on one core, the walk is about half
the kernel's time; a whole-span lookup before it (a table of short tokens or a per-thread span cache, as the BPE
kernels have) measured no faster. The kernels read the DAT only at indices they have checked, so a corrupt or
hostile DAT gives wrong ids (the engine refuses ids outside the vocabulary), never a crash.

``encode_spans`` has an ASCII fast path (an 8-bytes-at-a-time ASCII check, as SIMD code does it), off by default:
when the 8 bytes at the walk's start are all ASCII and inside the span, the first 8 steps of the walk skip the
per-byte span-end test. Measured, it costs more than it saves (``bench/longest.py`` prints both; the ids are the
same either way).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np

from crayon.errors import CartridgeError
from crayon.jit.backtrack import interleave_dat, prefix_states
from crayon.jit.cores import available_cores
from crayon.jit.dat import check_dat_arrays
from crayon.jit.kernels import SPAN_BATCH
from crayon.jit.lazy import njit
from crayon.jit.long_text import LongTexts, joined_arrays, joined_lists
from crayon.jit.pretokenize import (CL100K, O200K, PATTERN_IDS, classify_characters, fill_span_ends, jit_pattern_of,
                                    unicode_tables)
from crayon.jit.status import NO_PROGRESS, raise_for_status
from crayon.jit.tables import id_list
from crayon.reference.engine import flat_from_arrays


class LongestMatchEngine:
    """Encodes ordinary text of a longest-match tokenizer. With a known pattern, ``encode_text_kernel`` runs the
    jit pre-tokenizer and the match over the text in one pass; otherwise the pre-tokenizer (and normalizer) run
    in Python, then ``encode_spans``. Lists are built by ``id_list`` (one shared Python int per id)."""

    name = "jit"
    capabilities = frozenset({"threads", "compiled"})

    def __init__(self, tokenizer):
        model = tokenizer.model
        check_dat_arrays(model.base, model.check, model.values)
        self._dat = (model.base, model.check, model.values)
        self._model = model
        self._fallback = np.ascontiguousarray(model.fallback, dtype=np.int32)
        self._n_ids = max(model.token_bytes, default=-1) + 1  # every id a sound DAT or the fallback can give
        self._normalizer = tokenizer.normalizer
        self._pretokenizer = tokenizer.pretokenizer
        self._pattern_name = jit_pattern_of(tokenizer)
        self._walk_tables = None  # match_tables(model), built at the first encode
        self.long_texts = LongTexts(tokenizer)  # a text of 1 MB or more is cut and encoded on every core

    def _tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._walk_tables is None:
            self._walk_tables = match_tables(self._model)
        return self._walk_tables

    def encode_ordinary_array(self, text: str) -> np.ndarray:
        """Ids of ordinary text (no special tokens) as a uint32 array."""
        if self._pattern_name is not None:
            encoded = text.encode("utf-8")
            tokens = self.long_texts.encode_parts(encoded, self._encode_text, joined_arrays,
                                                  self.long_texts.threads_for(len(encoded)))
            return self._encode_text(np.frombuffer(encoded, np.uint8)) if tokens is None else tokens
        if self._normalizer is not None:
            text = self._normalizer(text)
        spans = [span.encode("utf-8") for span in self._pretokenizer(text)]
        data = b"".join(spans)
        ends = np.cumsum(np.fromiter(map(len, spans), np.int64, len(spans)))
        return encode_spans(np.frombuffer(data, np.uint8), ends, *self._dat, self._fallback).view(np.uint32)

    def _encode_text(self, data: np.ndarray) -> np.ndarray:
        """Ids (uint32) of one UTF-8 text (uint8) with ``encode_text_kernel``, on the calling thread."""
        out = np.empty(len(data), np.int32)
        count = encode_text_kernel(data, PATTERN_IDS[self._pattern_name], unicode_tables(), self._tables(),
                                   np.empty(len(data), np.uint8), np.empty(SPAN_BATCH, np.int64), out)
        if count < 0:
            raise_for_status(count, data, self._fallback)
        return out[:count].view(np.uint32)

    def encode_ordinary(self, text: str) -> list[int]:
        threads = 1 if self._pattern_name is None else self.long_texts.threads_for(4 * len(text))
        if threads > 1:
            tokens = self.long_texts.encode_parts(text.encode("utf-8"), lambda part: self.as_list(self._encode_text(part)),
                                                  joined_lists, threads)
            if tokens is not None:
                return tokens
        return self.as_list(self.encode_ordinary_array(text))

    def as_list(self, ids: np.ndarray) -> list[int]:
        """``ids.tolist()`` through ``id_list``; CartridgeError for an id no token has (a corrupt DAT)."""
        try:
            return id_list(ids, self._n_ids)
        except IndexError:
            raise CartridgeError("the DAT is corrupt: an id outside the vocabulary came out") from None

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


def match_tables(model) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What ``encode_text_kernel`` reads of a ``LongestMatchModel``: ``(dat_rows, starts, fallback)``, the
    interleaved DAT (``interleave_dat``), its ``prefix_states`` and the byte fallback ids."""
    check_dat_arrays(model.base, model.check, model.values)
    dat_rows = interleave_dat(model.base, model.check, model.values)
    return dat_rows, prefix_states(dat_rows), np.ascontiguousarray(model.fallback, dtype=np.int32)


@njit(cache=True, nogil=True, _nrt=False)
def encode_text_kernel(data, pattern_id, char_tables, tables, classes, ends, out):
    """Ids of the UTF-8 text ``data`` into ``out`` (room for ``len(data)``): its spans (``ascii_span_end``, else the
    jit pre-tokenizer, with ``classes`` of ``len(data)`` bytes and room in ``ends`` for at least one span end), each
    matched as it is found, with ``tables`` from ``match_tables``. The count, or NO_PROGRESS."""
    dat_rows, starts, fallback = tables
    stop = data.shape[0]
    classify_characters(data, 0, stop, char_tables, classes)
    count = 0
    position = 0
    batch = 1  # spans asked of the pre-tokenizer at once: doubled while the shortcut keeps failing (non-ASCII text)
    while position < stop:
        end = ascii_span_end(data, position, stop, pattern_id)
        if end >= 0:
            count = match_span_rows(data, position, end, dat_rows, starts, fallback, out, count)
            position = end
            batch = 1
            continue
        found = fill_span_ends(classes, position, stop, pattern_id, char_tables, ends[:batch])
        for i in range(found):
            end = ends[i]
            if end <= position or end > stop:
                return NO_PROGRESS
            count = match_span_rows(data, position, end, dat_rows, starts, fallback, out, count)
            position = end
        if found == 0:
            return NO_PROGRESS
        batch = min(2 * batch, ends.shape[0])
    return count


@njit(cache=True, _nrt=False, inline="always")
def _is_lower(byte):
    return 0x61 <= byte <= 0x7A


@njit(cache=True, _nrt=False, inline="always")
def _is_upper(byte):
    return 0x41 <= byte <= 0x5A


@njit(cache=True, _nrt=False, inline="always")
def _is_digit(byte):
    return 0x30 <= byte <= 0x39


@njit(cache=True, _nrt=False, inline="always")
def _is_symbol(byte):
    """Printable ASCII other than the space, letters and digits: certainly [^\\s\\p{L}\\p{N}]."""
    return 0x21 <= byte <= 0x7E and not (_is_lower(byte) or _is_upper(byte) or _is_digit(byte))


@njit(cache=True, _nrt=False, inline="always")
def ascii_span_end(data, start, stop, pattern_id):
    """The end of the span at ``start`` where ASCII bytes alone decide it, else -1 (``fill_span_ends`` answers).

    For o200k and cl100k (r50k: always -1), the first alternative of the pattern that matches, on ASCII:
    a word, an optional prefix (the space or a symbol; not an apostrophe for cl100k, where it starts a
    contraction) then ``[A-Z]*[a-z]+`` (o200k; not followed by an apostrophe, which may start its suffix) or
    ``[A-Za-z]+`` (cl100k); else 1 to 3 digits; else an optional space, symbols, then ``[\\r\\n/]*`` (o200k) or
    ``[\\r\\n]*`` (cl100k). Wherever a byte >= 0x80 (a letter, digit, mark or symbol outside ASCII) or a control
    byte could change the answer, and for spans starting with whitespace otherwise, it is -1."""
    if pattern_id != O200K and pattern_id != CL100K:
        return -1
    first = data[start]
    if pattern_id == CL100K and first == 0x27:
        return -1
    position = start + 1 if first == 0x20 or _is_symbol(first) else start  # the word's optional prefix
    if position < stop:
        word = position
        if pattern_id == O200K:
            while position < stop and _is_upper(data[position]):
                position += 1
            uppers = position
            while position < stop and _is_lower(data[position]):
                position += 1
            if position > uppers:
                if position < stop and (data[position] >= 0x80 or data[position] == 0x27):
                    return -1  # a letter or mark may go on with the word, an apostrophe start its suffix
                return position
            if position > word or data[position] >= 0x80:
                return -1  # capitals alone (the second alternative) or maybe a letter: the state machine decides
        else:
            while position < stop and (_is_lower(data[position]) or _is_upper(data[position])):
                position += 1
            if position > word:
                return -1 if position < stop and data[position] >= 0x80 else position
            if data[position] >= 0x80:
                return -1
    if _is_digit(first):
        position = start + 1
        while position < stop and position < start + 3 and _is_digit(data[position]):
            position += 1
        if position < start + 3 and position < stop and data[position] >= 0x80:
            return -1  # maybe a digit outside ASCII
        return position
    position = start + 1 if first == 0x20 else start
    symbols = position
    while position < stop and _is_symbol(data[position]):
        position += 1
    if position == symbols:
        return -1
    if position < stop and not (_is_lower(data[position]) or _is_upper(data[position]) or _is_digit(data[position])
                                or data[position] == 0x20 or 0x09 <= data[position] <= 0x0D):
        return -1  # a byte that may be another symbol (outside ASCII, or a control byte)
    while position < stop and (data[position] == 0x0A or data[position] == 0x0D or (
            pattern_id == O200K and data[position] == 0x2F)):
        position += 1
    return position


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def match_span_rows(data, start, end, dat_rows, starts, fallback, out, count):
    """``encode_span_into`` over the interleaved DAT: one 16-byte row per step, the first two steps one read of
    ``starts``. ``fallback`` must be ``byte_fallback_ids`` of the same DAT: it is the one-byte match too. Every
    row index read is checked or comes from ``starts``."""
    size = dat_rows.shape[0]
    position = start
    while position < end:
        byte = np.int64(data[position])
        best_id, best_length = np.int64(fallback[byte]), 1  # the byte's own token where it has one
        if position + 1 < end:
            state = np.int64(starts[256 + (byte << 8) + np.int64(data[position + 1])])
            walked = 2
            while state >= 0:
                if dat_rows[state, 2] >= 0:
                    best_id, best_length = dat_rows[state, 2], walked
                if position + walked >= end:
                    break
                target = np.int64(dat_rows[state, 0]) + np.int64(data[position + walked])
                if target < 0 or target >= size or dat_rows[target, 1] != state:
                    break
                state = target
                walked += 1
        out[count] = best_id
        count += 1
        position += best_length
    return count

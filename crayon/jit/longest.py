"""Numba greedy longest match over a DAT: the same ids as ``crayon.reference.longest`` (see it for the rules).

``encode_spans`` encodes a whole text, cut into spans by an array of span ends, in one call; ``LongestMatchEngine``
is the jit engine of a longest-match ``Tokenizer`` (its ``model`` a ``LongestMatchModel``), which for a known
pattern runs ``encode_text_kernel``: the spans found and matched in one pass over the text.

* Spans: ``ascii_span_end`` decides every span of ASCII text for o200k and cl100k (words, capitals, contractions,
  digits, symbols, whitespace runs; 99.9-100% of the spans of the shared English corpora), the letters of a word 8
  bytes at a time (SWAR: a word's length is hard to predict, a branch per letter is not). Any other span comes
  from the pre-tokenizer (``fill_span_ends``), whose character classes are written only from there to the next
  ``span_boundary_after``, not over the rest of the text.
* Match: the walk of the interleaved DAT of ``crayon.jit.backtrack``, its first two steps one read of
  ``prefix_states``.

Measured on the shared English corpora with ``lite`` on one core (``bench/longest.py``, a loaded 2-core machine),
the kernel went from 38-42 to 32-36 ns a token, as the public call runs it. A whole-span lookup before the walk
(tables of the tokens of 1-16 bytes, 768 kB) made the kernel 1-3 ns a token faster but the list building after it
slower by as much (the tables pushed the shared ints out of the cache): no faster end to end, so there is none.
The kernels read the DAT only at indices they have checked, so a corrupt or hostile DAT gives wrong ids (the engine
refuses ids outside the vocabulary), never a crash.

``encode_spans`` has an ASCII fast path (an 8-bytes-at-a-time ASCII check, as SIMD code does it), off by default:
when the 8 bytes at the walk's start are all ASCII and inside the span, the first 8 steps of the walk skip the
per-byte span-end test. Measured, it costs more than it saves (``bench/longest.py`` prints both; the ids are the
same either way).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator, Sequence

import numpy as np

from crayon.jit.cache import LITTLE_ENDIAN, load_word
from crayon.jit.cores import available_cores
from crayon.jit.dat import check_dat_arrays, interleave_dat, prefix_states
from crayon.jit.id_lists import id_list, id_list_extend_kernel, id_list_kernel, joined_ids, shared_ids
from crayon.jit.kernels import SPAN_BATCH
from crayon.jit.lazy import njit
from crayon.jit.long_text import LongTexts, joined_arrays, utf8_of
from crayon.jit.pretokenize import (CL100K, O200K, PATTERN_IDS, classify_characters, fill_span_ends, jit_pattern_of,
                                    trailing_zeros, unicode_tables)
from crayon.jit.status import NO_PROGRESS, raise_for_status
from crayon.reference.engine import flat_from_arrays


class LongestMatchEngine:
    """Encodes ordinary text of a longest-match tokenizer. With a known pattern, ``encode_text_kernel`` runs the
    jit pre-tokenizer and the match over the text in one pass; otherwise the pre-tokenizer (and normalizer) run
    in Python, then ``encode_spans``. Lists are built by ``id_list`` (one shared Python int per id)."""

    name = "jit"
    capabilities = frozenset({"threads", "compiled", "prepare"})

    def __init__(self, tokenizer):
        model = tokenizer.model
        check_dat_arrays(model.base, model.check, model.values)
        self._dat = (model.base, model.check, model.values)
        self._model = model
        self._fallback = np.ascontiguousarray(model.fallback, dtype=np.int32)
        self._n_ids = max(model.token_bytes, default=-1) + 1  # every id a sound DAT or the fallback can give
        self._ids = None  # shared_ids(self._n_ids), taken at the first encode
        self._normalizer = tokenizer.normalizer
        self._pretokenizer = tokenizer.pretokenizer
        self._pattern_name = jit_pattern_of(tokenizer)
        self._walk_tables = None  # match_tables(model), built at the first encode
        self.long_texts = LongTexts(tokenizer)  # a text of 1 MB or more is cut and encoded on every core

    def _tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._walk_tables is None:
            self._walk_tables = match_tables(self._model)
        return self._walk_tables

    def encode_ordinary_array(self, text: str, prepare: Callable[[str], str] | None = None) -> np.ndarray:
        """Ids of ordinary text (no special tokens) as a uint32 array; ``prepare`` as in ``encode_ordinary``."""
        if self._pattern_name is not None:
            tokens = self.long_texts.encode_text(text, self._encode_text, joined_arrays, prepare)
            return self._encode_text(np.frombuffer(utf8_of(text, prepare), np.uint8)) if tokens is None else tokens
        if prepare is not None:
            text = prepare(text)
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

    def encode_ordinary(self, text: str, prepare: Callable[[str], str] | None = None) -> list[int]:
        """Ids of ordinary text. ``prepare`` (the caller's repair of a str with no UTF-8 encoding) is applied where
        the text's UTF-8 is made (``utf8_of``: only to a text, or a long text's part, that has none)."""
        if self._pattern_name is None:
            return self.as_list(self.encode_ordinary_array(text, prepare))
        tokens = self.long_texts.encode_text(text, self._encode_text, self._joined_ids, prepare)
        if tokens is not None:
            return tokens
        return self.as_list(self._encode_text(np.frombuffer(utf8_of(text, prepare), np.uint8)))

    def _joined_ids(self, parts: Iterator[np.ndarray]) -> list[int]:
        return joined_ids(id_list_extend_kernel, parts, self._shared_ids())

    def _shared_ids(self) -> tuple[np.ndarray, np.ndarray]:
        if self._ids is None:
            self._ids = shared_ids(self._n_ids)
        return self._ids

    def as_list(self, ids: np.ndarray) -> list[int]:
        """``ids.tolist()`` through ``id_list``; CartridgeError for an id no token has (a corrupt DAT)."""
        return id_list(id_list_kernel, ids, self._shared_ids())

    def encode_ordinary_batch(self, texts: Sequence[str], num_threads: int | None = None,
                              prepare: Callable[[Sequence[str]], Sequence[str]] | None = None) -> list[list[int]]:
        """Ids of each text; ``num_threads`` threads (default: ``available_cores()``) share the texts. ``prepare``
        (the caller's checks and repairs of the texts) maps the texts first."""
        if prepare is not None:
            texts = prepare(texts)
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
    classified = 0  # classes[position:classified] are written, and classified is the end of a span
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
        if position >= classified:
            classified = span_boundary_after(data, position + CLASSIFIED_BYTES, pattern_id)
            classify_characters(data, position, classified, char_tables, classes)
        found = fill_span_ends(classes, position, classified, pattern_id, char_tables, ends[:batch])
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


CLASSIFIED_BYTES = 256  # the least the pre-tokenizer's character classes are written for at once


@njit(cache=True, _nrt=False)
def span_boundary_after(data, position, pattern_id):
    """The first offset from ``position`` on where, for o200k and cl100k, a span surely ends: just after a \\n
    followed by an ASCII letter (no alternative of either pattern matches across them, and none before them
    reads past the newline, so the spans up to there are the same in the text cut there); else ``len(data)``.
    Always ``len(data)`` for r50k."""
    stop = data.shape[0]
    if pattern_id != O200K and pattern_id != CL100K:
        return stop
    position = max(position, 1)
    while position < stop and not (data[position - 1] == 0x0A and ASCII_KINDS[data[position]] & LETTER_BYTE):
        position += 1
    return min(position, stop)


# What each byte is to the ASCII shortcut of the o200k and cl100k patterns; 0 (a control byte other than \t \n
# \v \f \r, DEL, any byte >= 0x80): the shortcut leaves the span to the pre-tokenizer.
LOWER, UPPER, DIGIT, SYMBOL, BLANK, NEWLINE_BYTE = 1, 2, 4, 8, 16, 32
LETTER_BYTE = LOWER | UPPER
APOSTROPHE_BYTE, SPACE_BYTE, SLASH_BYTE = 0x27, 0x20, 0x2F
ASCII_KINDS = np.zeros(256, np.uint8)
ASCII_KINDS[0x21:0x7F] = SYMBOL  # printable ASCII other than letters and digits: certainly [^\s\p{L}\p{N}]
ASCII_KINDS[ord("a"):ord("z") + 1] = LOWER
ASCII_KINDS[ord("A"):ord("Z") + 1] = UPPER
ASCII_KINDS[ord("0"):ord("9") + 1] = DIGIT
ASCII_KINDS[[0x09, 0x0B, 0x0C, 0x20]] = BLANK  # \s other than \r \n
ASCII_KINDS[[0x0A, 0x0D]] = NEWLINE_BYTE
HIGH_BITS = np.uint64(0x8080808080808080)


@njit(cache=True, _nrt=False, inline="always")
def _kind(data, position, stop):
    """``ASCII_KINDS`` of the byte at ``position``; 0 at ``stop``."""
    return ASCII_KINDS[data[position]] if position < stop else 0


@njit(cache=True, _nrt=False, inline="always")
def _skip(data, position, stop, kinds):
    """The end of the run of bytes whose kind has a bit of ``kinds``, from ``position``."""
    while position < stop and ASCII_KINDS[data[position]] & kinds:
        position += 1
    return position


@njit(cache=True, _nrt=False, inline="always")
def _letter_bits(word, kinds):
    """The top bit of each byte of ``word`` (8 bytes, little-endian) that is a lower-case (``kinds`` LOWER), an
    upper-case (UPPER) or any (LETTER_BYTE) ASCII letter, found for all 8 bytes at once (SWAR)."""
    tops = word | HIGH_BITS  # each byte + 0x80: the subtractions below borrow from no other byte
    lower = (tops - np.uint64(0x6161616161616161)) & ~(tops - np.uint64(0x7B7B7B7B7B7B7B7B))  # 0x61 <= b < 0x7B
    upper = (tops - np.uint64(0x4141414141414141)) & ~(tops - np.uint64(0x5B5B5B5B5B5B5B5B))  # 0x41 <= b < 0x5B
    if kinds == LOWER:
        found = lower
    elif kinds == UPPER:
        found = upper
    else:
        found = lower | upper
    return found & ~word & HIGH_BITS  # & ~word: no byte >= 0x80


@njit(cache=True, _nrt=False, inline="always")
def _letters_at(data, position, kinds):
    """How many of the 8 bytes at ``position`` (which must lie in ``data``) are letters of ``kinds`` before the
    first that is not: 0-8, with no branch."""
    return trailing_zeros(~_letter_bits(load_word(data, position), kinds) & HIGH_BITS) >> 3


@njit(cache=True, _nrt=False, inline="always")
def _skip_letters(data, position, stop, kinds):
    """``_skip`` for a run of letters (``kinds`` LOWER, UPPER or LETTER_BYTE), 8 bytes at a time (``stop`` at most
    ``len(data)``): no branch per letter, a word's length being hard to predict."""
    while LITTLE_ENDIAN and position + 8 <= stop:
        length = _letters_at(data, position, kinds)
        position += length
        if length < 8:
            return position
    return _skip(data, position, stop, kinds)


@njit(cache=True, _nrt=False)
def _contraction_end(data, position, stop):
    """(?i:[sdmt]|ll|ve|re) at ``position`` (just after an apostrophe) on ASCII: its end; -1 where it does not
    match; -2 where a byte >= 0x80 leaves it open (``ſ`` folds to ``s``)."""
    if position >= stop:
        return -1
    first = data[position]
    if first >= 0x80:
        return -2
    if not ASCII_KINDS[first] & LETTER_BYTE:
        return -1
    first |= 0x20  # lower case
    if first == 0x73 or first == 0x64 or first == 0x6D or first == 0x74:  # s d m t
        return position + 1
    if first != 0x6C and first != 0x76 and first != 0x72:  # l v r
        return -1
    if position + 1 >= stop:
        return -1
    second = data[position + 1]
    if second >= 0x80:
        return -2
    wanted = 0x6C if first == 0x6C else 0x65  # ll, ve, re
    return position + 2 if ASCII_KINDS[second] & LETTER_BYTE and second | 0x20 == wanted else -1


@njit(cache=True, _nrt=False, inline="always")
def _o200k_word_end(data, word, stop):
    """The end of o200k's word at ``word`` (an ASCII letter), its (?i:'s|'t|'re|'ve|'m|'ll|'d)? included, or -1:
    ``[A-Z]*[a-z]+`` (the first alternative) or, with no lower-case letter after the capitals, ``[A-Z]+`` (the
    second), where a byte >= 0x80 after it cannot go on with the word."""
    uppers = _letters_at(data, word, UPPER) if LITTLE_ENDIAN and word + 16 <= stop else 8
    if uppers < 8:  # the common case in straight code: both runs read with one load each
        position = word + uppers
        lowers = _letters_at(data, position, LOWER)
        position += lowers
        if lowers == 8:
            position = _skip_letters(data, position, stop, LOWER)
    else:
        position = _skip_letters(data, _skip_letters(data, word, stop, UPPER), stop, LOWER)
    if position < stop and data[position] >= 0x80:
        return -1  # a letter or mark may go on with the word
    if position < stop and data[position] == APOSTROPHE_BYTE:
        end = _contraction_end(data, position + 1, stop)
        if end != -1:
            return end if end >= 0 else -1
    return position


@njit(cache=True, _nrt=False, inline="always")
def _word_end(data, word, stop, pattern_id):
    """The end of the word at ``word`` (an ASCII letter): ``_o200k_word_end``, or cl100k's ``\\p{L}+``; -1 where a
    byte >= 0x80 after it could go on with it."""
    if pattern_id == O200K:
        return _o200k_word_end(data, word, stop)
    end = _skip_letters(data, word, stop, LETTER_BYTE)
    return -1 if end < stop and data[end] >= 0x80 else end


@njit(cache=True, _nrt=False, inline="always")
def ascii_span_end(data, start, stop, pattern_id):
    """The end of the span at ``start`` where ASCII bytes alone decide it, else -1 (``fill_span_ends`` answers).

    For o200k and cl100k (r50k: always -1), the alternative of the pattern that matches, on ASCII: for cl100k a
    contraction first; then a word, with an optional prefix (a blank or a symbol), ``[A-Z]*[a-z]+`` or
    ``[A-Z]+`` and its contraction (o200k) or ``[A-Za-z]+`` (cl100k); else 1 to 3 digits; else an optional space,
    symbols, then ``[\\r\\n/]*`` (o200k) or ``[\\r\\n]*`` (cl100k); else a run of whitespace, cut as the pattern's
    whitespace alternatives cut it. Wherever a byte >= 0x80 or a control byte could change the answer (a letter,
    digit, mark, symbol or space outside ASCII), it is -1."""
    if pattern_id != O200K and pattern_id != CL100K or stop > data.shape[0]:
        return -1
    first = ASCII_KINDS[data[start]]
    if first & LETTER_BYTE:
        return _word_end(data, start, stop, pattern_id)
    if first & (SYMBOL | BLANK) and _kind(data, start + 1, stop) & LETTER_BYTE:
        if pattern_id == CL100K and data[start] == APOSTROPHE_BYTE:  # a contraction comes first
            end = _contraction_end(data, start + 1, stop)
            if end != -1:
                return end if end >= 0 else -1
        return _word_end(data, start + 1, stop, pattern_id)  # after the word's prefix
    if first == 0:
        return -1
    if first & DIGIT:
        end = start + 1
        while end < stop and end < start + 3 and ASCII_KINDS[data[end]] & DIGIT:
            end += 1
        return -1 if end < start + 3 and end < stop and data[end] >= 0x80 else end  # maybe a digit outside ASCII
    symbols = start + 1 if data[start] == SPACE_BYTE and _kind(data, start + 1, stop) & SYMBOL else start
    if ASCII_KINDS[data[symbols]] & SYMBOL:
        end = _skip(data, symbols, stop, SYMBOL)
        if end < stop and ASCII_KINDS[data[end]] == 0:
            return -1  # maybe another symbol
        while end < stop and (ASCII_KINDS[data[end]] & NEWLINE_BYTE or (
                pattern_id == O200K and data[end] == SLASH_BYTE)):
            end += 1
        return end
    end = start  # a run of whitespace
    newline_end = -1
    while end < stop and ASCII_KINDS[data[end]] & (BLANK | NEWLINE_BYTE):
        end += 1
        if ASCII_KINDS[data[end - 1]] & NEWLINE_BYTE:
            newline_end = end
    if end < stop and ASCII_KINDS[data[end]] == 0:
        return -1  # maybe more whitespace
    if end == stop and (pattern_id == CL100K or newline_end == -1):
        return end  # cl100k's \s++$; o200k's \s+(?!\S) at the end of the text
    if newline_end != -1:
        return newline_end  # \s*[\r\n]+ (o200k), \s*[\r\n] (cl100k): up to the run's last newline
    return end if end - start == 1 else end - 1  # \s of one character, else \s+(?!\S)


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

"""The span -> ids caches of the kernels of the models over characters (Unigram, BPE over characters): the words
of a text repeat, and a span's ids depend on its bytes alone.

A span of 2 to 16 bytes with 1 to 3 ids is kept in the calling thread's piece cache (``crayon.jit.cache``, the
byte-level engine's: ids inline, one cache line per lookup, kept from call to call); any other span of up to 64
bytes in the call's word cache. The word cache holds no ids of its own: a slot points at the span's first
occurrence in the data and at that span's ids in the kernel's output, which only grows. ``new_word_cache`` sizes
it for a call; a full word cache (half its slots used) takes no more spans and the kernels encode the others as
usual, so neither cache ever changes an id.

The character-BPE kernel also keeps the spans the piece cache does not (17 to 256 bytes, and shorter ones with a
non-ASCII byte and more than 3 ids) in the thread's long-piece caches (``new_long_piece_caches``, the byte-level
engine's, by the rules of ``crayon.reference.cache``: direct-mapped, a new entry replaces the row's old one), from
call to call: ``find_long_cached`` before ``find_cached``, ``remember_long`` beside ``remember``.
"""

from __future__ import annotations

import numpy as np

from crayon.jit.byte_ranges import FNV_OFFSET, fnv1a, same_bytes
from crayon.jit.cache import (cache_lookup, cache_store, is_ascii, long_cache_keeps, long_cache_lookup, long_cache_store,
                              long_piece_row, new_long_piece_cache, piece_key, piece_row)
from crayon.jit.lazy import njit
from crayon.reference.cache import (DEFAULT_LONG_ROWS, DEFAULT_LONGER_ROWS, LONG_PIECE_BYTES, LONG_ROW_WORDS,
                                    LONGER_PIECE_BYTES, LONGER_ROW_WORDS, MAX_PIECE_BYTES, MAX_PIECE_TOKENS,
                                    MIN_PIECE_BYTES)

MAX_CACHED_BYTES = 64  # longer spans (SentencePiece Unigram's whole texts) are encoded without the cache
MAX_SLOTS = 1 << 17
SPAN_START, SPAN_LENGTH, IDS_START, IDS_COUNT = range(4)
EMPTY = -1
SMALL_LONG_ROWS = 1 << 8  # a thread's first long-piece cache (32 KB; its longer-piece cache: an eighth as many rows)


def new_long_piece_caches(full_size: bool) -> tuple[np.ndarray, np.ndarray]:
    """A thread's empty (long-piece cache, longer-piece cache): full-size ones (8 and 4 MB, the byte-level
    engine's) or small ones (a tokenizer loaded for a few short calls allocates little)."""
    rows = DEFAULT_LONG_ROWS if full_size else SMALL_LONG_ROWS
    longer_rows = DEFAULT_LONGER_ROWS if full_size else SMALL_LONG_ROWS // 8
    return new_long_piece_cache(rows, LONG_ROW_WORDS), new_long_piece_cache(longer_rows, LONGER_ROW_WORDS)


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _looked_up_long(data, start, end):
    """Whether data[start:end] is looked up in a long-piece cache: whether one may keep it (``long_cache_keeps``),
    its ids unknown yet; a span of 2 to 16 ASCII bytes is looked up in the piece cache only."""
    length = end - start
    if length < MIN_PIECE_BYTES or length > LONGER_PIECE_BYTES:
        return False
    if length > MAX_PIECE_BYTES:
        return True
    low, high = piece_key(data, start, end)
    return not is_ascii(low, high)


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _long_rows(long_caches, length):
    return long_caches[0] if length <= LONG_PIECE_BYTES else long_caches[1]


@njit(cache=True, nogil=True, _nrt=False)
def find_long_cached(long_caches, data, start, end, out, n):
    """Copy the ids of data[start:end] kept in the thread's ``long_caches`` (long-piece cache, longer-piece cache)
    to out[n:] and return their count, else -1."""
    if not _looked_up_long(data, start, end):
        return -1
    rows = _long_rows(long_caches, end - start)
    found = long_cache_lookup(rows, data, start, end, long_piece_row(data, start, end, rows.shape[0]), out, n)
    return found - n if found >= 0 else -1


@njit(cache=True, nogil=True, _nrt=False)
def remember_long(long_caches, data, start, end, out, ids_start, ids_count):
    """Keep data[start:end] -> out[ids_start:ids_start + ids_count] in its long-piece cache where that keeps it
    and the piece cache does not."""
    length = end - start
    if MIN_PIECE_BYTES <= length <= MAX_PIECE_BYTES and 1 <= ids_count <= MAX_PIECE_TOKENS:
        return
    if MIN_PIECE_BYTES <= length <= LONGER_PIECE_BYTES:
        rows = _long_rows(long_caches, length)
        if long_cache_keeps(rows, data, start, end, ids_count):
            long_cache_store(rows, data, start, end, long_piece_row(data, start, end, rows.shape[0]), out, ids_start,
                             ids_count)


def new_word_cache(n_spans: int) -> np.ndarray:
    """An empty cache for a call over ``n_spans`` spans: rows of (span start, span length, ids start, ids count),
    a power of two of them, at least twice the spans (up to ``MAX_SLOTS``)."""
    slots = 16
    while slots < 2 * n_spans and slots < MAX_SLOTS:
        slots *= 2
    return np.full((slots, 4), EMPTY, np.int64)


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _span_hash(data, start, end):
    return np.int64(fnv1a(data, start, end, FNV_OFFSET) >> np.uint64(16))


@njit(cache=True, nogil=True, _nrt=False)
def find_cached(pieces, cache, data, start, end, out, n):
    """Copy the cached ids of data[start:end] (from the piece cache ``pieces`` or the word cache ``cache``) to
    out[n:] and return their count; on a miss, return -1 - the word cache slot to ``remember`` the span in
    (-1 - len(cache) when it is not to be kept there)."""
    length = end - start
    if MIN_PIECE_BYTES <= length <= MAX_PIECE_BYTES:
        low, high = piece_key(data, start, end)
        found = cache_lookup(pieces, low, high, length, piece_row(low, high, length, pieces.shape[0]), out, n)
        if found >= 0:
            return found - n
    slots = cache.shape[0]
    if length > MAX_CACHED_BYTES or length == 0:
        return -1 - slots
    slot = _span_hash(data, start, end) & (slots - 1)
    while cache[slot, SPAN_LENGTH] != EMPTY:
        if cache[slot, SPAN_LENGTH] == length:
            if same_bytes(data, cache[slot, SPAN_START], data, start, length):
                first, count = cache[slot, IDS_START], cache[slot, IDS_COUNT]
                for i in range(count):
                    out[n + i] = out[first + i]
                return count
        slot = (slot + 1) & (slots - 1)
    return -1 - slot


@njit(cache=True, nogil=True, _nrt=False)
def remember(pieces, cache, miss, data, start, end, out, ids_start, ids_count, used):
    """Record the span data[start:end] whose ids are out[ids_start:ids_start + ids_count]: in the piece cache
    where it fits, else in the word cache slot ``find_cached`` named (``miss``, its return value); returns the new
    number of used word cache slots."""
    length = end - start
    if MIN_PIECE_BYTES <= length <= MAX_PIECE_BYTES and 1 <= ids_count <= MAX_PIECE_TOKENS:
        low, high = piece_key(data, start, end)
        cache_store(pieces, low, high, length, piece_row(low, high, length, pieces.shape[0]), out, ids_start, ids_count)
        return used
    slot = -1 - miss
    if slot >= cache.shape[0] or 2 * (used + 1) > cache.shape[0]:
        return used
    cache[slot, SPAN_START], cache[slot, SPAN_LENGTH] = start, end - start
    cache[slot, IDS_START], cache[slot, IDS_COUNT] = ids_start, ids_count
    return used + 1

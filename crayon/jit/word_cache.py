"""The span -> ids caches of the kernels of the models over characters (Unigram, BPE over characters): the words
of a text repeat, and a span's ids depend on its bytes alone.

A span of 2 to 16 bytes with 1 to 3 ids is kept in the calling thread's piece cache (``crayon.jit.cache``, the
byte-level engine's: ids inline, one cache line per lookup, kept from call to call); any other span of up to 64
bytes in the call's word cache. The word cache holds no ids of its own: a slot points at the span's first
occurrence in the data and at that span's ids in the kernel's output, which only grows. ``new_word_cache`` sizes
it for a call; a full word cache (half its slots used) takes no more spans and the kernels encode the others as
usual, so neither cache ever changes an id.
"""

from __future__ import annotations

import numpy as np

from crayon.jit.byte_ranges import FNV_OFFSET, fnv1a, same_bytes
from crayon.jit.cache import cache_lookup, cache_store, piece_key, piece_row
from crayon.jit.lazy import njit
from crayon.reference.cache import MAX_PIECE_BYTES, MAX_PIECE_TOKENS, MIN_PIECE_BYTES

MAX_CACHED_BYTES = 64  # longer spans (SentencePiece Unigram's whole texts) are encoded without the cache
MAX_SLOTS = 1 << 17
SPAN_START, SPAN_LENGTH, IDS_START, IDS_COUNT = range(4)
EMPTY = -1


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

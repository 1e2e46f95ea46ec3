"""A per-call cache of span -> ids for the kernels of the models over characters (WordPiece, WordLevel, Unigram,
BPE over characters): the words of a text repeat, and a span's ids depend on its bytes alone.

The cache holds no ids of its own: a slot points at the span's first occurrence in the data and at that span's
ids in the kernel's output, which only grows. ``new_word_cache`` sizes it for a call; a full cache (half its slots
used) takes no more spans and the kernels encode the others as usual, so the cache never changes an id.
"""

from __future__ import annotations

import numpy as np

from crayon.jit.byte_ranges import FNV_OFFSET, fnv1a, same_bytes
from crayon.jit.lazy import njit

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
def find_cached(cache, data, start, end, out, n):
    """Copy the cached ids of data[start:end] to out[n:] and return their count; on a miss, return -1 - the slot
    to ``remember`` the span in (-1 - len(cache) when it is not to be cached)."""
    length = end - start
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
def remember(cache, miss, start, end, ids_start, ids_count, used):
    """Record the span data[start:end] whose ids are out[ids_start:ids_start + ids_count] in the slot
    ``find_cached`` named (``miss``, its return value); returns the new number of used slots."""
    slot = -1 - miss
    if slot >= cache.shape[0] or 2 * (used + 1) > cache.shape[0]:
        return used
    cache[slot, SPAN_START], cache[slot, SPAN_LENGTH] = start, end - start
    cache[slot, IDS_START], cache[slot, IDS_COUNT] = ids_start, ids_count
    return used + 1

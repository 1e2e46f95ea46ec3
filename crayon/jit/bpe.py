"""Byte-level BPE span encoders as Numba kernels: the jit twin of ``crayon.reference.bpe``.

A span's bytes become their byte tokens, written straight into the output buffer, and merge there in place.
Two merge encoders, identical tokens (the backtracking encoder is in ``crayon.jit.backtrack``):

* ``merge_loop``: the reference's loop (merge the lowest-ranked adjacent pair, the leftmost on ties) with the
  merge of every adjacent pair kept in a buffer, so that a merge looks up only its two new pairs. O(n^2) in
  the span's length, and the fastest on the short spans most text is made of.
* ``heap_merge``: the same merges popped from a binary min-heap of ``(rank, position)`` over a linked list of
  parts; an entry whose pair has changed since it was pushed is skipped when popped. O(n log n).

Their tables are built and checked by ``crayon.jit.tables``.

Kernels check every index they take from a table, so corrupt tables give an error code or wrong tokens,
never a read outside an array (``crayon.jit.status``).
"""

from __future__ import annotations

import numpy as np

from crayon.jit.byte_ranges import FNV_OFFSET, fnv1a, same_bytes
from crayon.jit.lazy import njit

NO_MERGE = np.int64(0x7FFFFFFFFFFFFFFF)  # the packed merge of a pair that never merges
ID_MASK = np.int64(0xFFFFFFFF)
EMPTY = -1

FIBONACCI = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xFF51AFD7ED558CCD)
_MIX_2 = np.uint64(0xC4CEB9FE1A85EC53)
U32 = np.uint64(32)
_U33 = np.uint64(33)



@njit(cache=True, _nrt=False, inline="always")
def pair_slot(left, right, mask):
    """Home slot of the pair ``(left, right)`` in a pair table of ``mask + 1`` slots."""
    key = (np.uint64(left) << U32) | np.uint64(right)
    return np.int64(((key * FIBONACCI) >> U32) & np.uint64(mask))


@njit(cache=True, _nrt=False)
def pair_merge(pair_table, left, right):
    """The packed merge ``rank << 32 | merged_id`` of two adjacent tokens, or NO_MERGE."""
    key = (np.int64(left) << 32) | np.int64(right)
    mask = pair_table.shape[0] - 1
    slot = pair_slot(left, right, mask)
    for _ in range(pair_table.shape[0]):
        stored = pair_table[slot, 0]
        if stored == key:
            return pair_table[slot, 1]
        if stored == EMPTY:
            return NO_MERGE
        slot = (slot + 1) & mask
    return NO_MERGE


@njit(cache=True, _nrt=False)
def bytes_hash(data, start, end):
    """64-bit hash of data[start:end] (FNV-1a, then a final avalanche)."""
    h = fnv1a(data, start, end, FNV_OFFSET)
    h ^= h >> _U33
    h *= _MIX_1
    h ^= h >> _U33
    h *= _MIX_2
    h ^= h >> _U33
    return h


@njit(cache=True, _nrt=False)
def vocab_lookup(vocab_index, token_offsets, token_bytes, data, start, end):
    """The id of the token spelled exactly by data[start:end], or -1."""
    h = bytes_hash(data, start, end)
    tag = np.int64(h >> _U33)
    mask = vocab_index.shape[0] - 1
    slot = np.int64(h & np.uint64(mask))
    n_ids = token_offsets.shape[0] - 1
    length = end - start
    for _ in range(vocab_index.shape[0]):
        entry = vocab_index[slot]
        if entry == EMPTY:
            return -1
        token_id = entry & ID_MASK
        if entry >> 32 == tag and token_id < n_ids:
            first = token_offsets[token_id]
            if (token_offsets[token_id + 1] - first == length and 0 <= first and first + length <= token_bytes.shape[0]
                    and same_bytes(token_bytes, first, data, start, length)):
                return token_id
        slot = (slot + 1) & mask
    return -1


@njit(cache=True, _nrt=False)
def write_byte_tokens(byte_tokens, data, start, end, out, n):
    """Write the byte token of each of data[start:end] to out[n:]; False if a byte has no token."""
    for i in range(start, end):
        token = byte_tokens[data[i]]
        if token < 0:
            return False
        out[n + i - start] = token
    return True


@njit(cache=True, _nrt=False)
def merge_loop(parts, start, count, pair_table, merges):
    """Merge parts[start:start + count] in place, lowest rank first; ``merges`` is int64 scratch (>= count).

    Returns (new count, packed value of the last merge or NO_MERGE, its left token, its right token).
    """
    for i in range(count - 1):
        merges[i] = pair_merge(pair_table, parts[start + i], parts[start + i + 1])
    last, last_left, last_right = NO_MERGE, -1, -1
    while count > 1:
        best, at = NO_MERGE, -1
        for i in range(count - 1):
            if merges[i] < best:
                best, at = merges[i], i
        if at < 0:
            break
        last, last_left, last_right = best, np.int64(parts[start + at]), np.int64(parts[start + at + 1])
        parts[start + at] = best & ID_MASK
        for i in range(at + 1, count - 1):
            parts[start + i] = parts[start + i + 1]
        for i in range(at + 1, count - 2):
            merges[i] = merges[i + 1]
        count -= 1
        if at > 0:
            merges[at - 1] = pair_merge(pair_table, parts[start + at - 1], parts[start + at])
        if at < count - 1:
            merges[at] = pair_merge(pair_table, parts[start + at], parts[start + at + 1])
    return count, last, last_left, last_right


@njit(cache=True, _nrt=False)
def _heap_push(heap, size, key):
    i = size
    heap[i] = key
    while i > 0:
        parent = (i - 1) >> 1
        if heap[parent] <= key:
            break
        heap[i] = heap[parent]
        i = parent
    heap[i] = key
    return size + 1


@njit(cache=True, _nrt=False)
def _heap_pop(heap, size):
    """Remove the smallest key; returns (key, new size)."""
    top = heap[0]
    size -= 1
    key = heap[size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and heap[child + 1] < heap[child]:
            child += 1
        if heap[child] >= key:
            break
        heap[i] = heap[child]
        i = child
    if size > 0:
        heap[i] = key
    return top, size


@njit(cache=True, _nrt=False)
def heap_merge(parts, start, count, pair_table, scratch):
    """Merge parts[start:start + count] in place with a heap and a linked list; ``scratch`` is int64 (>= 5 * count).

    Returns the new count.
    """
    n = count
    previous = scratch[:n]  # -2 marks a part merged into its left neighbour
    following = scratch[n : 2 * n]  # n marks the end
    heap = scratch[2 * n : 5 * n]  # keys rank << 32 | position: lowest rank, then leftmost, first
    size = 0
    for i in range(n):
        previous[i] = i - 1
        following[i] = i + 1
    for i in range(n - 1):
        merge = pair_merge(pair_table, parts[start + i], parts[start + i + 1])
        if merge != NO_MERGE:
            size = _heap_push(heap, size, ((merge >> 32) << 32) | i)
    while size > 0:
        key, size = _heap_pop(heap, size)
        i = key & ID_MASK
        right = following[i]
        if previous[i] == -2 or right >= n:
            continue
        merge = pair_merge(pair_table, parts[start + i], parts[start + right])
        if merge == NO_MERGE or merge >> 32 != key >> 32:
            continue  # stale: this pair changed after the entry was pushed
        parts[start + i] = merge & ID_MASK
        after = following[right]
        following[i] = after
        if after < n:
            previous[after] = i
        previous[right] = -2
        left = previous[i]
        if left >= 0:
            merge = pair_merge(pair_table, parts[start + left], parts[start + i])
            if merge != NO_MERGE:
                size = _heap_push(heap, size, ((merge >> 32) << 32) | left)
        if after < n:
            merge = pair_merge(pair_table, parts[start + i], parts[start + after])
            if merge != NO_MERGE:
                size = _heap_push(heap, size, ((merge >> 32) << 32) | i)
    written = 0
    i = 0
    while i < n:
        parts[start + written] = parts[start + i]
        written += 1
        i = following[i]
    return written


# ------------------------------------------------------------------------------------------------------------
# building the tables


@njit(cache=True)
def fill_vocab_index(vocab_index, token_offsets, token_bytes):
    mask = vocab_index.shape[0] - 1
    for token_id in range(token_offsets.shape[0] - 1):
        first, last = token_offsets[token_id], token_offsets[token_id + 1]
        if first == last:
            continue
        h = bytes_hash(token_bytes, first, last)
        slot = np.int64(h & np.uint64(mask))
        while vocab_index[slot] != EMPTY:
            slot = (slot + 1) & mask
        vocab_index[slot] = (np.int64(h >> _U33) << 32) | token_id


@njit(cache=True)
def tiktoken_pairs(vocab_index, token_offsets, token_bytes):
    """Every (left, right, rank, merged) of a tiktoken vocabulary: a cut of a token into two tokens."""
    found = []
    for token_id in range(token_offsets.shape[0] - 1):
        first, last = token_offsets[token_id], token_offsets[token_id + 1]
        for cut in range(first + 1, last):
            left = vocab_lookup(vocab_index, token_offsets, token_bytes, token_bytes, first, cut)
            if left >= 0:
                right = vocab_lookup(vocab_index, token_offsets, token_bytes, token_bytes, cut, last)
                if right >= 0:
                    found.append((left, right, token_id, token_id))
    merges = np.empty((len(found), 4), np.int64)
    for i in range(len(found)):
        merges[i, 0], merges[i, 1], merges[i, 2], merges[i, 3] = found[i]
    return merges


@njit(cache=True)
def fill_pair_table(pair_table, merges):
    """Insert (left, right, rank, merged) rows; a pair listed twice keeps its last row, as the reference's dict."""
    mask = pair_table.shape[0] - 1
    for row in range(merges.shape[0]):
        left, right, rank, merged = merges[row, 0], merges[row, 1], merges[row, 2], merges[row, 3]
        key = (left << 32) | right
        value = (rank << 32) | merged
        slot = pair_slot(left, right, mask)
        while pair_table[slot, 0] != EMPTY and pair_table[slot, 0] != key:
            slot = (slot + 1) & mask
        pair_table[slot, 0] = key
        pair_table[slot, 1] = value


def table_capacity(count: int) -> int:
    """A power of two with room for ``count`` entries at a load of at most 1/2."""
    return 1 << max(4, (2 * count).bit_length())

"""Numba double-array trie: the same arrays as ``crayon.reference.dat`` (same contract, same packing), fast.

``compile_dat`` builds the trie from the tokens sorted by bytes (so nodes come out in DFS preorder, the
reference's tie-break order) and packs it with the same first-fit rule, scanning a bitmap of claimed slots 64
bases at a time from a "last free slot" cache (and from a per-gap cache for nodes with two or more
children), so ``(base, check, values)`` are identical to the reference's.

``transition``, ``longest_prefix`` and ``lookup`` are ``@njit`` helpers other kernels (the JIT BPE encoders)
call to walk a DAT. They bounds-check every read, so a corrupt DAT gives wrong answers, never a crash; the
only precondition is ``len(base) == len(check) == len(values) >= 1`` (see ``check_dat_arrays``).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from crayon.jit import aot
from crayon.jit.lazy import njit
from crayon.reference.dat import FREE, PACKING_ORDERS, validate_vocabulary


def compile_dat(
    tokens: Sequence[bytes],
    ids: Sequence[int] | None = None,
    *,
    order: str = "out_degree",
    weights: Sequence[int] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pack ``tokens`` into ``(base, check, values)``; see ``crayon.reference.dat.compile_dat``."""
    if order not in PACKING_ORDERS:
        raise ValueError(f"unknown packing order {order!r}; expected one of {PACKING_ORDERS}")
    tokens = list(tokens)
    ids_array = np.arange(len(tokens), dtype=np.int64) if ids is None else np.asarray(ids, dtype=np.int64)
    lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
    ids_in_range = not len(ids_array) or 0 <= ids_array.min() <= ids_array.max() < 2**31 - 1
    if len(ids_array) != len(tokens) or not lengths.all() or not ids_in_range:
        validate_vocabulary(tokens, ids_array.tolist())  # raises, saying what is wrong
    starts = np.zeros(len(tokens) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    blob = np.frombuffer(b"".join(tokens), dtype=np.uint8)
    by_bytes = aot.call_kernel(aot.TABLES, sorted_tokens, blob, starts)
    parent, label, depth, node_token = aot.call_kernel(aot.TABLES, build_trie, blob, starts, by_bytes)
    if len(parent) == 0:
        validate_vocabulary(tokens, ids_array.tolist())  # raises: two tokens are equal
    degree = np.bincount(parent[1:], minlength=len(parent))
    internal = np.flatnonzero(degree)
    if order == "out_degree":
        key = -degree[internal]
    elif order == "bfs":
        key = depth[internal]
    else:
        if weights is None or len(weights) != len(tokens):
            raise ValueError('order="frequency" needs one weight per token')
        key = -_subtree_weights(parent, node_token, np.asarray(weights, dtype=np.int64))[internal]
    packing_order = internal[np.argsort(key, kind="stable")]
    return aot.call_kernel(aot.TABLES, pack_trie, parent, label, degree, node_token, ids_array, packing_order)


@njit(cache=True)
def _bytes_less(blob, starts, a, b):
    """Whether token ``a`` sorts before token ``b`` (bytewise, a prefix first)."""
    length_a, length_b = starts[a + 1] - starts[a], starts[b + 1] - starts[b]
    for k in range(min(length_a, length_b)):
        byte_a, byte_b = blob[starts[a] + k], blob[starts[b] + k]
        if byte_a != byte_b:
            return byte_a < byte_b
    return length_a < length_b


@njit(cache=True)
def sorted_tokens(blob, starts):
    """Token indices in byte order (bottom-up merge sort)."""
    n = len(starts) - 1
    order = np.arange(n, dtype=np.int64)
    scratch = np.empty(n, dtype=np.int64)
    width = 1
    while width < n:
        for low in range(0, n, 2 * width):
            middle, high = min(low + width, n), min(low + 2 * width, n)
            i, j = low, middle
            for k in range(low, high):
                if j >= high or (i < middle and not _bytes_less(blob, starts, order[j], order[i])):
                    scratch[k] = order[i]
                    i += 1
                else:
                    scratch[k] = order[j]
                    j += 1
        order, scratch = scratch, order
        width *= 2
    return order


@njit(cache=True)
def build_trie(blob, starts, sorted_order):
    """Trie nodes in DFS preorder: parent, label byte, depth, token index (-1 for a prefix only).

    Tokens are non-empty and visited in byte order; returns empty arrays if two tokens are equal.
    """
    capacity = len(blob) + 1
    parent = np.empty(capacity, dtype=np.int64)
    label = np.zeros(capacity, dtype=np.int64)
    depth = np.zeros(capacity, dtype=np.int64)
    node_token = np.full(capacity, -1, dtype=np.int64)
    parent[0] = -1
    longest = 0
    for token in range(len(starts) - 1):
        longest = max(longest, starts[token + 1] - starts[token])
    path = np.zeros(longest + 1, dtype=np.int64)  # path[d]: the node at depth d on the current path
    n_nodes = 1
    previous_start, previous_end = 0, 0
    for token in sorted_order:
        start, end = starts[token], starts[token + 1]
        common = 0
        while (
            common < end - start
            and common < previous_end - previous_start
            and blob[start + common] == blob[previous_start + common]
        ):
            common += 1
        if common == end - start:  # equal to the previous token (a proper prefix would sort first)
            return parent[:0], label[:0], depth[:0], node_token[:0]
        for d in range(common, end - start):
            parent[n_nodes] = path[d]
            label[n_nodes] = blob[start + d]
            depth[n_nodes] = d + 1
            path[d + 1] = n_nodes
            n_nodes += 1
        node_token[path[end - start]] = token
        previous_start, previous_end = start, end
    return parent[:n_nodes], label[:n_nodes], depth[:n_nodes], node_token[:n_nodes]


@njit(cache=True)
def _subtree_weights(parent, node_token, weights):
    total = np.zeros(len(parent), dtype=np.int64)
    for node in range(len(parent) - 1, -1, -1):  # reverse preorder: children before parents
        if node_token[node] >= 0:
            total[node] += weights[node_token[node]]
        if node > 0:
            total[parent[node]] += total[node]
    return total


@njit(cache=True)
def _claimed_bits(claimed, slot):
    """64 claim bits of slots ``slot .. slot + 63`` (bit i for slot + i); slots past the end are free."""
    word, shift = slot >> 6, slot & 63
    low = claimed[word] >> np.uint64(shift) if word < len(claimed) else np.uint64(0)
    if shift == 0 or word + 1 >= len(claimed):
        return low
    return low | (claimed[word + 1] << np.uint64(64 - shift))


@njit(cache=True)
def _lowest_bit(bits):
    offset = 0
    while not (bits >> np.uint64(offset)) & np.uint64(1):
        offset += 1
    return offset


@njit(cache=True)
def _first_fit(claimed, labels, lowest_slot, pair_start):
    """The smallest base >= 1 whose slots ``base + label`` are all free, 64 bases at a time.

    No child slot can lie below ``lowest_slot``. ``pair_start[d]`` is a slot below which no slot f has both f
    and f + d free; slots are only ever claimed, so it stays true, and a scan for labels whose first two are d
    apart moves it up to the first such pair it meets (when the scan started exactly at it).
    """
    block = max(1, lowest_slot - labels[0])
    track_pair = len(labels) > 1 and block == lowest_slot - labels[0]
    while True:
        fitting = ~_claimed_bits(claimed, block + labels[0])
        if len(labels) > 1:
            fitting &= ~_claimed_bits(claimed, block + labels[1])
            if track_pair and fitting != 0:
                pair_start[labels[1] - labels[0]] = block + labels[0] + _lowest_bit(fitting)
                track_pair = False
        for label in labels[2:]:
            if fitting == 0:
                break
            fitting &= ~_claimed_bits(claimed, block + label)
        if fitting != 0:
            return block + _lowest_bit(fitting)
        block += 64


@njit(cache=True)
def _grown(claimed):
    """``claimed`` with twice the room (new slots free); a loop, as slice assignment is slow to compile."""
    larger = np.zeros(2 * len(claimed) + 8, dtype=np.uint64)
    for word in range(len(claimed)):
        larger[word] = claimed[word]
    return larger


@njit(cache=True)
def pack_trie(parent, label, degree, node_token, ids, packing_order):
    n_nodes = len(parent)
    child_start = np.zeros(n_nodes + 1, dtype=np.int64)
    for node in range(n_nodes):  # a loop: np.cumsum takes seconds to compile
        child_start[node + 1] = child_start[node] + degree[node]
    child_labels = np.empty(max(n_nodes - 1, 0), dtype=np.int64)
    filled = child_start.copy()
    for node in range(1, n_nodes):  # preorder: each parent's children arrive in byte order
        child_labels[filled[parent[node]]] = label[node]
        filled[parent[node]] += 1

    node_base = np.zeros(n_nodes, dtype=np.int64)
    claimed = np.zeros((n_nodes + 256) // 64 + 2, dtype=np.uint64)  # bit i: slot i is taken
    claimed[0] = 1  # the root's slot
    first_free = 1  # every slot below it is taken (the "last free slot" cache)
    pair_start = np.zeros(256, dtype=np.int64)
    end = 1
    for node in packing_order:
        labels = child_labels[child_start[node] : child_start[node + 1]]
        lowest_slot = first_free
        if len(labels) > 1:
            lowest_slot = max(lowest_slot, pair_start[labels[1] - labels[0]])
        base = _first_fit(claimed, labels, lowest_slot, pair_start)
        end = max(end, base + labels[-1] + 1)
        if (end >> 6) + 1 >= len(claimed):
            claimed = _grown(claimed)
        for child_label in labels:
            slot = base + child_label
            claimed[slot >> 6] |= np.uint64(1) << np.uint64(slot & 63)
        while (claimed[first_free >> 6] >> np.uint64(first_free & 63)) & np.uint64(1):
            first_free += 1
        node_base[node] = base

    base_array = np.zeros(end, dtype=np.int32)
    check_array = np.empty(end, dtype=np.int32)
    check_array[:] = FREE
    values_array = check_array.copy()
    slot_of = np.zeros(n_nodes, dtype=np.int64)
    for node in range(n_nodes):  # preorder: a parent's slot is known before its children's
        if node > 0:
            slot_of[node] = node_base[parent[node]] + label[node]
            check_array[slot_of[node]] = slot_of[parent[node]]
        if degree[node] > 0:
            base_array[slot_of[node]] = node_base[node]
        if node_token[node] >= 0:
            values_array[slot_of[node]] = ids[node_token[node]]
    return base_array, check_array, values_array


def check_dat_arrays(base: np.ndarray, check: np.ndarray, values: np.ndarray) -> None:
    """The one precondition of the njit walkers: three int32 arrays of one length >= 1."""
    if not (len(base) == len(check) == len(values) >= 1):
        raise ValueError(f"DAT arrays must share one length >= 1, got {len(base)}, {len(check)}, {len(values)}")
    if not (base.dtype == check.dtype == values.dtype == np.int32):
        raise ValueError("DAT arrays must be int32")


def interleave_dat(base: np.ndarray, check: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The DAT as int32[n, 4] rows ``(base, check, value, 0)``: a step of the walk reads one 16-byte row, not
    three arrays (on the cold path of a rare word, a third of the cache misses)."""
    rows = np.zeros((len(base), 4), np.int32)
    rows[:, 0], rows[:, 1], rows[:, 2] = base, check, values
    return rows


def prefix_states(dat_rows: np.ndarray) -> np.ndarray:
    """int32[256 + 65536]: the DAT state after one byte b (entry b) and after two bytes b1 b2 (entry
    256 + (b1 << 8 | b2)), or -1: a walk starts two steps down with loads that do not wait on each other (for a
    CJK character, one table read and one step instead of three steps)."""
    labels = np.arange(256)
    first = dat_rows[0, 0] + labels
    first_ok = (first >= 0) & (first < len(dat_rows))
    first_ok[first_ok] = dat_rows[first[first_ok], 1] == 0
    states = np.full(256 + 65536, -1, np.int32)
    states[:256][first_ok] = first[first_ok]
    second = dat_rows[np.where(first_ok, first, 0), 0][:, None].astype(np.int64) + labels[None, :]
    second_ok = first_ok[:, None] & (second >= 0) & (second < len(dat_rows))
    second_ok[second_ok] = dat_rows[second[second_ok], 1] == np.broadcast_to(first[:, None], second.shape)[second_ok]
    states[256:][second_ok.reshape(-1)] = second[second_ok]
    return states


@njit(cache=True, inline="always")
def transition(base, check, state, byte):
    """The state reached from ``state`` on ``byte``, or -1; ``state`` must be a valid index (the root or a
    state returned by an earlier call)."""
    target = np.int64(base[state]) + np.int64(byte)
    if target >= 0 and target < len(check) and check[target] == state:
        return target
    return -1


@njit(cache=True, _nrt=False)
def longest_prefix(base, check, values, data, start, end):
    """``(token id, length)`` of the longest token that ``data[start:end]`` starts with, or ``(-1, 0)``."""
    state = 0
    best_id, best_length = -1, 0
    for position in range(start, end):
        state = transition(base, check, state, data[position])
        if state < 0:
            break
        if values[state] >= 0:
            best_id, best_length = values[state], position + 1 - start
    return best_id, best_length


@njit(cache=True, _nrt=False)
def lookup(base, check, values, data, start, end):
    """The id of exactly ``data[start:end]``, or -1 when it is not a token."""
    state = 0
    for position in range(start, end):
        state = transition(base, check, state, data[position])
        if state < 0:
            return -1
    if end <= start or values[state] < 0:
        return -1
    return values[state]

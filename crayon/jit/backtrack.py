"""BPE by backtracking as a Numba kernel: the jit twin of ``crayon.reference.backtrack`` (read that first).

Tables (``build_backtrack_tables``, added to the BPE tables of ``crayon.jit.bpe``):

* ``token_rows`` int32[n_ids, 8], one 32-byte row per token, what the search reads about a token together:
  ``LENGTH`` (bytes), ``NEXT_PREFIX`` (the longest reachable token that is a proper prefix of it, or -1),
  ``SPLIT_LEFT``, ``SPLIT_RIGHT`` (its canonical split: the last merge BPE makes on its own bytes; the token
  itself twice for a single byte; -1 twice for a token BPE never produces from its bytes, "unreachable", and
  for an id that is no token), ``FORMED_AT`` (the rank of that last merge; -1 for single bytes and
  unreachable tokens); the other columns are 0.
* ``dat_base``, ``dat_check``, ``dat_values`` int32: a double-array trie of the reachable tokens
  (``crayon.reference.dat`` describes the format), and the same trie as the kernels walk it for longest-prefix
  matches: ``dat_rows`` and ``prefix_states`` (``crayon.jit.dat.interleave_dat``, ``crayon.jit.dat.prefix_states``).
* ``encoder_flags`` int64[2]: ``[whole_spans, late_token]``: whole_spans 1 where the whole-span lookup can return
  a token BPE never produces (so the kernels look whole spans up), late_token the first token breaking the
  exactness condition of ``backtracking_violation``, or -1.

A cartridge stores them all, so an engine derives nothing at load.

The splits here come from running the merge loop on every token (the ground truth); the reference derives
them the way the ``bpe`` crate does, and the tests check that both agree. Each thread keeps a memo of
``is_valid_pair`` answers (``new_validity_memo``), as quicktok does: the same pairs recur throughout a text.
"""

from __future__ import annotations

import numpy as np

from crayon.errors import CartridgeError
from crayon.jit import aot
from crayon.jit.bpe import FIBONACCI, NO_MERGE, U32, merge_loop, pair_merge, write_byte_tokens
from crayon.jit.cache import zeroed_table
from crayon.jit.dat import compile_dat, interleave_dat, prefix_states
from crayon.jit.lazy import njit
from crayon.jit.status import CORRUPT_TABLES, UNKNOWN_BYTE

BACKTRACK_TABLE_NAMES = ("token_rows", "dat_base", "dat_check", "dat_values", "dat_rows", "prefix_states", "encoder_flags")
LENGTH, NEXT_PREFIX, SPLIT_LEFT, SPLIT_RIGHT, FORMED_AT = range(5)
ROW_WIDTH = 8


@njit(cache=True)
def canonical_splits(byte_tokens, pair_table, token_offsets, token_bytes, rows):
    """Fill LENGTH, SPLIT_* and FORMED_AT: the last merge of the merge loop on each token's bytes."""
    n_ids = token_offsets.shape[0] - 1
    longest = 1
    for token in range(n_ids):
        longest = max(longest, token_offsets[token + 1] - token_offsets[token])
    parts = np.empty(longest, np.uint32)
    merges = np.empty(longest, np.int64)
    for token in range(n_ids):
        first, last = token_offsets[token], token_offsets[token + 1]
        rows[token, LENGTH] = last - first
        rows[token, SPLIT_LEFT] = rows[token, SPLIT_RIGHT] = rows[token, FORMED_AT] = -1
        if last - first == 1:
            if byte_tokens[token_bytes[first]] == token:
                rows[token, SPLIT_LEFT] = rows[token, SPLIT_RIGHT] = token
        elif last - first > 1 and write_byte_tokens(byte_tokens, token_bytes, first, last, parts, 0):
            count, merge, left, right = merge_loop(parts, 0, last - first, pair_table, merges)
            if count == 1 and parts[0] == token:
                rows[token, SPLIT_LEFT], rows[token, SPLIT_RIGHT] = left, right
                rows[token, FORMED_AT] = merge >> 32


@njit(cache=True, _nrt=False, inline="always")
def longest_token(dat_rows, data, start, end, starts):
    """The longest token of the interleaved DAT that data[start:end] starts with, or -1 (the walk of
    ``crayon.jit.dat.longest_prefix`` over ``interleave_dat`` rows); ``starts`` is ``prefix_states(dat_rows)``."""
    if end - start < 2:
        if start >= end or starts[data[start]] < 0:
            return -1
        return np.int64(dat_rows[starts[data[start]], 2])
    first = starts[data[start]]
    if first < 0:
        return -1
    best = np.int64(dat_rows[first, 2])
    state = np.int64(starts[256 + (np.int64(data[start]) << 8) + np.int64(data[start + 1])])
    if state < 0:
        return best
    if dat_rows[state, 2] >= 0:
        best = dat_rows[state, 2]
    for i in range(start + 2, end):
        target = np.int64(dat_rows[state, 0]) + np.int64(data[i])
        if target < 0 or target >= dat_rows.shape[0] or dat_rows[target, 1] != state:
            break
        state = target
        if dat_rows[state, 2] >= 0:
            best = dat_rows[state, 2]
    return best


@njit(cache=True)
def next_prefixes(dat_rows, starts, token_offsets, token_bytes, rows):
    for token in range(token_offsets.shape[0] - 1):
        first, last = token_offsets[token], token_offsets[token + 1]
        rows[token, NEXT_PREFIX] = -1
        if last - first > 1:
            rows[token, NEXT_PREFIX] = longest_token(dat_rows, token_bytes, first, last - 1, starts)


def build_backtrack_tables(model_tables: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The backtracking encoder's tables for the BPE tables of ``crayon.jit.tables.build_bpe_tables``."""
    offsets, token_bytes = model_tables["token_offsets"], model_tables["token_bytes"]
    rows = np.zeros((len(offsets) - 1, ROW_WIDTH), np.int32)
    aot.call_kernel(aot.TABLES, canonical_splits, model_tables["byte_tokens"], model_tables["pair_table"], offsets,
                    token_bytes, rows)
    reachable = np.flatnonzero(rows[:, SPLIT_LEFT] >= 0)
    spelled = token_bytes.tobytes()
    base, check, values = compile_dat([spelled[offsets[t] : offsets[t + 1]] for t in reachable], reachable.tolist())
    base, check, values = (np.ascontiguousarray(array, dtype=np.int32) for array in (base, check, values))
    dat_rows = interleave_dat(base, check, values)
    starts = prefix_states(dat_rows)
    aot.call_kernel(aot.TABLES, next_prefixes, dat_rows, starts, offsets, token_bytes, rows)
    tables = {"token_rows": rows, "dat_base": base, "dat_check": check, "dat_values": values, "dat_rows": dat_rows,
              "prefix_states": starts}
    whole_spans = bool((whole_span_tokens({**tables, **model_tables}) & ~(rows[:, SPLIT_LEFT] >= 0)).any())
    tables["encoder_flags"] = np.array([whole_spans, late_token(rows)], np.int64)
    return tables


def whole_span_tokens(tables: dict[str, np.ndarray]) -> np.ndarray:
    """Which tokens a span spelling them encodes to: the reachable ones, and all of them under tiktoken's
    whole-span lookup."""
    reachable = tables["token_rows"][:, SPLIT_LEFT] >= 0
    return reachable | (bool(tables["settings"][0]) & (np.diff(tables["token_offsets"]) > 0))


def check_backtrack_tables(tables: dict[str, np.ndarray]) -> None:
    """Refuse backtracking tables the kernels cannot index safely (CartridgeError)."""
    n_ids = len(tables["token_offsets"]) - 1
    rows = tables.get("token_rows")
    if not isinstance(rows, np.ndarray) or rows.dtype != np.int32 or rows.shape != (n_ids, ROW_WIDTH):
        raise CartridgeError(f"table 'token_rows' is missing or not int32[{n_ids}, {ROW_WIDTH}]")
    arrays = [tables.get(name) for name in ("dat_base", "dat_check", "dat_values")]
    if not all(isinstance(a, np.ndarray) and a.dtype == np.int32 and a.ndim == 1 for a in arrays):
        raise CartridgeError("the DAT tables are missing or not 1-D int32 arrays")
    if not len(arrays[0]) == len(arrays[1]) == len(arrays[2]) >= 1:
        raise CartridgeError("the DAT tables differ in length")
    dat_rows, starts, flags = (tables.get(name) for name in ("dat_rows", "prefix_states", "encoder_flags"))
    if not isinstance(dat_rows, np.ndarray) or dat_rows.dtype != np.int32 or dat_rows.shape != (len(arrays[0]), 4):
        raise CartridgeError(f"table 'dat_rows' is missing or not int32[{len(arrays[0])}, 4]")
    if not isinstance(starts, np.ndarray) or starts.dtype != np.int32 or starts.shape != (256 + 65536,):
        raise CartridgeError("table 'prefix_states' is missing or not int32[65792]")
    if starts.min() < -1 or starts.max() >= len(dat_rows):  # the walk indexes dat_rows with these unchecked
        raise CartridgeError("table 'prefix_states' holds states outside the DAT")
    if not isinstance(flags, np.ndarray) or flags.dtype != np.int64 or flags.shape != (2,) or not -1 <= flags[1] < n_ids:
        raise CartridgeError("table 'encoder_flags' is missing, not int64[2] or names no token")
    for name in ("token_rows", "dat_rows", "prefix_states", "encoder_flags"):
        if not tables[name].flags.c_contiguous:
            raise CartridgeError(f"table {name!r} is not contiguous")


def late_token(rows: np.ndarray) -> int:
    """The first token formed no later than a half of its canonical split (see ``backtracking_violation``), or -1."""
    left, right, formed_at = rows[:, SPLIT_LEFT], rows[:, SPLIT_RIGHT], rows[:, FORMED_AT]
    composite = np.flatnonzero((left >= 0) & (left != np.arange(len(rows))))
    late = (formed_at[composite] <= formed_at[left[composite]]) | (formed_at[composite] <= formed_at[right[composite]])
    return int(composite[np.argmax(late)]) if late.any() else -1


def backtracking_violation(tables: dict[str, np.ndarray]) -> str | None:
    """Why backtracking would not reproduce the merge loop on this vocabulary, or None when it does.

    The condition: every token BPE can produce is formed after both halves of its canonical split
    (``FORMED_AT`` of the token > ``FORMED_AT`` of its left and of its right half), so that a token's rank is the
    time at which it appears. Merge ranks learnt by BPE training satisfy it; a hand-edited vocabulary may not.
    The token breaking it is found when the tables are built (``encoder_flags``), so this reads one row.
    """
    token = int(tables["encoder_flags"][1])
    if token < 0:
        return None
    rows = tables["token_rows"]
    left, right, formed_at = rows[token, SPLIT_LEFT], rows[token, SPLIT_RIGHT], rows[:, FORMED_AT]
    return (
        f"token {token} is formed at rank {formed_at[token]} from tokens {left} and {right}, "
        f"formed at ranks {formed_at[left]} and {formed_at[right]}: its rank is not the time it appears"
    )


@njit(cache=True, _nrt=False)
def is_valid_pair(pair_table, rows, left, right):
    """Whether BPE encodes the bytes of ``left`` followed by those of ``right`` as exactly these two tokens.

    Undo the two tokens' merges, latest first, checking at each step that no merge across the boundary
    would have come earlier (a tie goes to the leftmost merge).
    """
    n_ids = rows.shape[0]
    if left < 0 or left >= n_ids or right < 0 or right >= n_ids:
        return False
    limit = NO_MERGE
    for _ in range(rows[left, LENGTH] + rows[right, LENGTH]):  # each step shortens a token; more: corrupt rows
        merge = pair_merge(pair_table, left, right)
        if merge != NO_MERGE and merge >> 32 < limit:
            return False
        left_formed, right_formed = rows[left, FORMED_AT], rows[right, FORMED_AT]
        if left_formed > right_formed:
            limit = left_formed
            left = rows[left, SPLIT_RIGHT]
        elif right_formed < 0:
            return True
        else:
            limit = right_formed + 1
            right = rows[right, SPLIT_LEFT]
        if left < 0 or left >= n_ids or right < 0 or right >= n_ids:
            return False
    return False


def new_validity_memo(slots: int = 1 << 18) -> np.ndarray:
    """An empty memo of ``is_valid_pair`` answers (``slots`` a power of two), one per thread."""
    if slots < 1 or slots & (slots - 1):
        raise ValueError(f"slots must be a power of two, not {slots}")
    return zeroed_table((slots,))


@njit(cache=True, _nrt=False, inline="always")
def memoized_valid_pair(memo, pair_table, rows, left, right):
    """``is_valid_pair`` through a direct-mapped memo whose slots hold ``((left << 32 | right) + 1) << 1 | answer``."""
    key = ((np.uint64(left) << U32) | np.uint64(right)) + np.uint64(1)
    slot = np.int64(((key * FIBONACCI) >> U32) & np.uint64(memo.shape[0] - 1))
    entry = memo[slot]
    if entry >> np.uint64(1) == key:
        return entry & np.uint64(1) == np.uint64(1)
    valid = is_valid_pair(pair_table, rows, left, right)
    memo[slot] = (key << np.uint64(1)) | np.uint64(valid)
    return valid


@njit(cache=True, _nrt=False, inline="always")
def backtrack_span(data, start, end, out, n, tables, alive, memo):
    """Encode data[start:end] into out[n:] by backtracking; returns the new n, or a negative status.

    ``tables`` is ``(pair_table, token_rows, dat_rows, prefix_states(dat_rows))``; ``alive`` is uint8 scratch of at least
    end - start + 1 entries; ``memo`` the thread's ``new_validity_memo``.
    """
    pair_table, rows, dat_rows, starts = tables
    n_ids = rows.shape[0]
    length = end - start
    alive[: length + 1] = 1
    pos = 0
    count = 0
    token = longest_token(dat_rows, data, start, end, starts)
    while pos < length:
        if token < 0 or token >= n_ids:
            return UNKNOWN_BYTE if token < 0 else CORRUPT_TABLES
        last = np.int64(out[n + count - 1]) if count > 0 else -1
        while True:
            token_length = rows[token, LENGTH]
            if 0 < token_length <= length - pos and alive[pos + token_length] and (
                last < 0 or memoized_valid_pair(memo, pair_table, rows, last, token)
            ):
                out[n + count] = token
                count += 1
                pos += token_length
                token = longest_token(dat_rows, data, start + pos, end, starts)
                break
            shorter = rows[token, NEXT_PREFIX]
            if 0 <= shorter < n_ids and rows[shorter, LENGTH] < token_length:
                token = shorter
                continue
            if count == 0 or shorter >= 0:
                return CORRUPT_TABLES  # a single byte always fits after a valid token; or a prefix chain is bad
            alive[pos] = 0
            count -= 1
            pos -= rows[last, LENGTH]
            token = last
            break
    return n + count

"""BPE by backtracking as a Numba kernel: the jit twin of ``crayon.reference.backtrack`` (read that first).

Tables (``build_backtrack_tables``, added to the BPE tables of ``crayon.jit.bpe``):

* ``split`` int32[n_ids, 2]: the canonical split ``(left, right)`` of each token, the last merge BPE makes on
  the token's own bytes; ``(t, t)`` for a single-byte token; ``(-1, -1)`` for a token BPE never produces
  (its bytes merge to other tokens) and for an id that is no token.
* ``formed_at`` int64[n_ids]: the rank of that last merge (-1 for single bytes and unreachable tokens).
* ``next_prefix`` int32[n_ids]: the longest reachable token that is a proper prefix of the token, or -1.
* ``dat_base``, ``dat_check``, ``dat_values`` int32: a double-array trie of the reachable tokens
  (``crayon.reference.dat`` describes the format), walked for longest-prefix matches.

The splits here come from running the merge loop on every token (the ground truth); the reference derives
them the way the ``bpe`` crate does, and the tests check that both agree.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from crayon.jit.dat import compile_dat, longest_prefix
from crayon.jit.bpe import CORRUPT_TABLES, NO_MERGE, UNKNOWN_BYTE, merge_loop, pair_merge, write_byte_tokens

BACKTRACK_TABLE_NAMES = ("split", "formed_at", "next_prefix", "dat_base", "dat_check", "dat_values")


@njit(cache=True)
def _canonical_splits(byte_tokens, pair_table, token_offsets, token_bytes):
    """(split, formed_at): the last merge of the merge loop on each token's bytes, where it gives the token."""
    n_ids = token_offsets.shape[0] - 1
    split = np.full((n_ids, 2), -1, np.int32)
    formed_at = np.full(n_ids, -1, np.int64)
    longest = 1
    for token in range(n_ids):
        longest = max(longest, token_offsets[token + 1] - token_offsets[token])
    parts = np.empty(longest, np.uint32)
    merges = np.empty(longest, np.int64)
    for token in range(n_ids):
        first, last = token_offsets[token], token_offsets[token + 1]
        if last - first == 1:
            if byte_tokens[token_bytes[first]] == token:
                split[token, 0] = split[token, 1] = token
        elif last - first > 1 and write_byte_tokens(byte_tokens, token_bytes, first, last, parts, 0):
            count, merge, left, right = merge_loop(parts, 0, last - first, pair_table, merges)
            if count == 1 and parts[0] == token:
                split[token, 0], split[token, 1] = left, right
                formed_at[token] = merge >> 32
    return split, formed_at


@njit(cache=True)
def _next_prefixes(dat_base, dat_check, dat_values, token_offsets, token_bytes):
    n_ids = token_offsets.shape[0] - 1
    next_prefix = np.full(n_ids, -1, np.int32)
    for token in range(n_ids):
        first, last = token_offsets[token], token_offsets[token + 1]
        if last - first > 1:
            next_prefix[token] = longest_prefix(dat_base, dat_check, dat_values, token_bytes, first, last - 1)[0]
    return next_prefix


def build_backtrack_tables(tables: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The backtracking encoder's tables for the BPE tables of ``crayon.jit.bpe.build_bpe_tables``."""
    offsets, token_bytes = tables["token_offsets"], tables["token_bytes"]
    split, formed_at = _canonical_splits(tables["byte_tokens"], tables["pair_table"], offsets, token_bytes)
    reachable = np.flatnonzero(split[:, 0] >= 0)
    spelled = token_bytes.tobytes()
    base, check, values = compile_dat([spelled[offsets[t] : offsets[t + 1]] for t in reachable], reachable.tolist())
    base, check, values = (np.ascontiguousarray(array, dtype=np.int32) for array in (base, check, values))
    return {
        "split": split,
        "formed_at": formed_at,
        "next_prefix": _next_prefixes(base, check, values, offsets, token_bytes),
        "dat_base": base,
        "dat_check": check,
        "dat_values": values,
    }


def backtracking_violation(tables: dict[str, np.ndarray]) -> str | None:
    """Why backtracking would not reproduce the merge loop on this vocabulary, or None when it does.

    The condition: every token BPE can produce is formed after both halves of its canonical split
    (``formed_at[t] > formed_at[left]`` and ``> formed_at[right]``), so that a token's rank is the time at which
    it appears. Merge ranks trained by BPE always satisfy it; a hand-edited vocabulary may not.
    """
    split, formed_at = tables["split"], tables["formed_at"]
    composite = np.flatnonzero((split[:, 0] >= 0) & (split[:, 0] != np.arange(len(split))))
    late = (formed_at[composite] <= formed_at[split[composite, 0]]) | (formed_at[composite] <= formed_at[split[composite, 1]])
    if late.any():
        token = int(composite[np.argmax(late)])
        left, right = (int(side) for side in split[token])
        return (
            f"token {token} is formed at rank {formed_at[token]} from tokens {left} and {right}, formed at ranks "
            f"{formed_at[left]} and {formed_at[right]}: its rank is not the time it appears"
        )
    return None


@njit(cache=True, _nrt=False)
def is_valid_pair(pair_table, split, formed_at, token_offsets, left, right):
    """Whether BPE encodes the bytes of ``left`` followed by those of ``right`` as exactly these two tokens.

    Undo the two tokens' merges, latest first, checking at each step that no merge across the boundary
    would have come earlier (a tie goes to the leftmost merge).
    """
    n_ids = split.shape[0]
    limit = NO_MERGE
    steps = token_offsets[-1]  # every step shortens a token: more means corrupt tables
    for _ in range(steps + 2):
        if left < 0 or left >= n_ids or right < 0 or right >= n_ids:
            return False
        merge = pair_merge(pair_table, left, right)
        if merge != NO_MERGE and merge >> 32 < limit:
            return False
        left_formed, right_formed = formed_at[left], formed_at[right]
        if left_formed > right_formed:
            limit = left_formed
            left = split[left, 1]
        elif right_formed < 0:
            return True
        else:
            limit = right_formed + 1
            right = split[right, 0]
    return False


@njit(cache=True, _nrt=False)
def backtrack_span(data, start, end, out, n, tables, alive):
    """Encode data[start:end] into out[n:] by backtracking; returns the new n, or a negative status.

    ``tables`` is ``(pair_table, token_offsets, split, formed_at, next_prefix, dat_base, dat_check,
    dat_values)``; ``alive`` is uint8 scratch of at least end - start + 1 entries.
    """
    pair_table, token_offsets, split, formed_at, next_prefix, dat_base, dat_check, dat_values = tables
    n_ids = split.shape[0]
    length = end - start
    alive[: length + 1] = 1
    pos = 0
    count = 0
    token, _ = longest_prefix(dat_base, dat_check, dat_values, data, start, end)
    while pos < length:
        if token < 0 or token >= n_ids:
            return UNKNOWN_BYTE if token < 0 else CORRUPT_TABLES
        last = np.int64(out[n + count - 1]) if count > 0 else -1
        while True:
            token_end = pos + token_offsets[token + 1] - token_offsets[token]
            if 0 < token_end - pos and token_end <= length and alive[token_end] and (
                last < 0 or is_valid_pair(pair_table, split, formed_at, token_offsets, last, token)
            ):
                out[n + count] = token
                count += 1
                pos = token_end
                token, _ = longest_prefix(dat_base, dat_check, dat_values, data, start + pos, end)
                break
            shorter = next_prefix[token]
            if 0 <= shorter < n_ids and token_offsets[shorter + 1] - token_offsets[shorter] < token_end - pos:
                token = shorter
                continue
            if count == 0 or shorter >= 0:
                return CORRUPT_TABLES  # a single byte always fits after a valid token; or a prefix chain is bad
            alive[pos] = 0
            count -= 1
            pos -= token_offsets[last + 1] - token_offsets[last]
            token = last
            break
    return n + count

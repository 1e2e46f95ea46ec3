"""BPE over characters in Numba: the jit twin of ``crayon.reference.char_bpe`` (identical ids), over UTF-8 bytes.

The first symbols are the user-defined tokens (the longest found in their DAT) and, elsewhere, an exact DAT lookup
of each character (byte fallback and unknown token as in the reference), then ``crayon.jit.bpe``'s merge loop
(short spans) or heap (long spans) merges them by rank."""

from __future__ import annotations

import numpy as np

from crayon.errors import UnknownTokenError
from crayon.jit.bpe import EMPTY, fill_pair_table, heap_merge, merge_loop, table_capacity
from crayon.jit.cache import SMALL_CACHE_BUCKETS, load_word, new_piece_cache
from crayon.jit.dat import longest_prefix, lookup
from crayon.jit.lazy import njit
from crayon.jit.pretokenize import trailing_zeros
from crayon.jit.word_cache import (find_cached, find_long_cached, new_long_piece_caches, new_word_cache, remember,
                                   remember_long)
from crayon.reference.char_bpe import CharBytePairModel
from crayon.reference.dat import compile_dat

SHORT_SPAN = 16  # symbols; longer spans are merged with the heap
SPACE = "\u2581"  # ▁
NO_TOKEN = -1  # status: a character has no token and there is no unknown token
ONE_PER_BYTE = np.uint64(0x0101010101010101)
HIGH_BITS = np.uint64(0x8080808080808080)


@njit(cache=True, nogil=True, _nrt=False)
def _first_symbols(data, start, end, dat, user_defined, byte_ids, unk_id, fuse_unk, out, n):
    """Write the first symbols of data[start:end] from out[n]; returns the new n or NO_TOKEN."""
    pending_unknown = False
    pos = start
    while pos < end:
        token_id, length = longest_prefix(user_defined[0], user_defined[1], user_defined[2], data, pos, end)
        if length == 0:
            lead = data[pos]
            length = 1 if lead < 0xC0 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
            token_id = lookup(dat[0], dat[1], dat[2], data, pos, pos + length)
        if token_id >= 0:
            if pending_unknown:
                out[n] = unk_id
                n += 1
                pending_unknown = False
            out[n] = token_id
            n += 1
        else:
            all_bytes = byte_ids[0] != -2
            for inside in range(pos, pos + length):
                all_bytes = all_bytes and byte_ids[data[inside]] >= 0
            if all_bytes:
                for inside in range(pos, pos + length):
                    out[n] = byte_ids[data[inside]]
                    n += 1
            elif unk_id < 0:
                return NO_TOKEN
            else:
                if pending_unknown and not fuse_unk:
                    out[n] = unk_id
                    n += 1
                pending_unknown = True
        pos += length
    if pending_unknown:
        out[n] = unk_id
        n += 1
    return n


@njit(cache=True, nogil=True, inline="always")
def _next_cut(data, start, end, cut):
    """The first position after ``start`` and before ``end`` where the bytes ``cut`` begin, else ``end``; eight
    bytes at a time, the lowest byte equal to cut[0] found by a carry-free compare (exact for the lowest)."""
    if len(cut) == 0:
        return end
    first = cut[0]
    pattern = np.uint64(first) * ONE_PER_BYTE
    pos = start + 1
    last = end - len(cut)  # where a cut can begin at the latest
    while pos <= last:
        if pos + 8 <= data.shape[0]:
            differ = load_word(data, pos) ^ pattern
            equal = (differ - ONE_PER_BYTE) & ~differ & HIGH_BITS
            if equal == 0:
                pos += 8
                continue
            pos += trailing_zeros(equal) >> 3
            if pos > last:
                break
        if data[pos] == first:
            found = True
            for i in range(1, len(cut)):
                found = found and data[pos + i] == cut[i]
            if found:
                return pos
        pos += 1
    return end


@njit(cache=True, nogil=True)
def encode_spans_kernel(data, span_ends, dat, user_defined, byte_ids, unk_id, fuse_unk, pair_table, cut, pieces,
                        long_caches, cache, out, counts):
    """Encode the spans data[span_ends[i - 1]:span_ends[i]] (from 0) into ``out`` (room for one id per byte);
    returns the number of ids or NO_TOKEN and writes each span's into ``counts``. ``user_defined`` is the DAT of
    the user-defined tokens; ``byte_ids[0] == -2`` means no byte fallback; each span is encoded in parts cut
    before each occurrence of the bytes ``cut`` (none if empty; see ``CharBytePairModel.merges_never_cross``);
    ``pieces`` (the piece cache), ``long_caches`` (the long-piece caches) and ``cache`` (the word cache) are
    ``crayon.jit.word_cache``'s."""
    longest = 0
    start = 0
    for end in span_ends:
        longest = max(longest, end - start)
        start = end
    scratch = np.empty(5 * longest + 5, np.int64)
    n = 0
    start = 0
    used = 0
    for span, span_end in enumerate(span_ends):
        span_first = n
        while start < span_end:
            end = _next_cut(data, start, span_end, cut)
            found = find_long_cached(long_caches, data, start, end, out, n)
            if found < 0:
                found = find_cached(pieces, cache, data, start, end, out, n)
            if found >= 0:
                n += found
                start = end
                continue
            first = _first_symbols(data, start, end, dat, user_defined, byte_ids, unk_id, fuse_unk, out, n)
            if first < 0:
                return NO_TOKEN
            count = first - n
            if count > SHORT_SPAN:
                count = heap_merge(out, n, count, pair_table, scratch)
            else:
                count, _, _, _ = merge_loop(out, n, count, pair_table, scratch)
            used = remember(pieces, cache, found, data, start, end, out, n, count, used)
            remember_long(long_caches, data, start, end, out, n, count)
            n += count
            start = end
        counts[span] = n - span_first
    return n


class CharBytePairTables:
    """The arrays the kernel takes for one model: the DAT of its tokens and that of its user-defined tokens, the
    byte tokens, the pair table."""

    def __init__(self, model: CharBytePairModel):
        self.dat = model.dat
        self.user_defined = compile_dat([token.encode("utf-8") for token in model.user_defined],
                                        [model.vocab[token] for token in model.user_defined])
        self.byte_ids = (np.array(model.byte_ids, np.int64) if model.byte_fallback else np.full(256, -2, np.int64))
        rows = np.array([(left, right, rank, merged) for (left, right), (rank, merged) in model.merges.items()],
                        np.int64).reshape(-1, 4)
        # at most a quarter full (half, elsewhere): most adjacent characters never merge, and a lookup that finds
        # nothing then stops at its first slot (measured: merges 20% faster)
        self.pair_table = np.full((table_capacity(2 * len(rows)), 2), EMPTY, np.int64)
        fill_pair_table(self.pair_table, rows)
        self.unk_id = -1 if model.unk_id is None else model.unk_id
        self.fuse_unk = model.fuse_unk
        # SentencePiece's word boundary: spans are encoded a word at a time where that gives the same ids
        self.cut = np.frombuffer(SPACE.encode("utf-8") if model.merges_never_cross(SPACE) else b"", np.uint8)


def encode_spans(tables: CharBytePairTables, data: np.ndarray, span_ends: np.ndarray,
                 pieces: np.ndarray | None = None,
                 long_caches: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(ids (int64), the number of ids of each span) of the spans of UTF-8 ``data`` ending at ``span_ends``, as
    ``CharBytePairModel.encode_span`` gives them; ``pieces`` and ``long_caches``: the thread's piece cache and
    long-piece caches (``crayon.jit.word_cache.new_long_piece_caches``) to use (default: new small ones)."""
    out = np.empty(len(data) + 1, np.int64)
    counts = np.empty(len(span_ends), np.int64)
    parts = len(span_ends) if len(tables.cut) == 0 else max(len(span_ends), len(data) // 6)  # ~ words, if cut
    count = encode_spans_kernel(data, span_ends.astype(np.int64), tables.dat, tables.user_defined, tables.byte_ids,
                                tables.unk_id, tables.fuse_unk, tables.pair_table, tables.cut,
                                new_piece_cache(SMALL_CACHE_BUCKETS) if pieces is None else pieces,
                                new_long_piece_caches(False) if long_caches is None else long_caches,
                                new_word_cache(parts), out, counts)
    if count == NO_TOKEN:
        raise UnknownTokenError("a character has no token and the model has no unk_token")
    return out[:count], counts

"""The piece caches as numpy arrays and Numba kernels: the jit twin of ``crayon.reference.cache`` (read that first).

A piece cache is a uint64 array of ``2 * n_buckets`` rows of 4 words, a bucket's two slots in one 64-byte cache
line: ``[bytes 0-7, bytes 8-15, length | count << 8 | token 0 << 32, token 1 | token 2 << 32]``; a zero length is
an empty slot. A lookup costs one cache line, where the line's latency is most of its cost.

A long-piece cache is a uint64 array of ``n_rows`` rows of ``row_words`` words: ``[length | count << 16, the
span's bytes in ceil(length / 8) words, then its tokens, token 2i in the low half of a word, token 2i + 1 in its
high half]``; a zero first word is an empty row. The long-piece cache (spans of up to 32 bytes) and the
longer-piece cache (33 to 256 bytes) differ only in their number and width of rows.

Each thread uses its own caches. They hold the same entries as the reference's after the same lookups and inserts.
"""

from __future__ import annotations

import sys

import numpy as np

from crayon.jit import aot
from crayon.jit.lazy import intrinsic, njit

from crayon.jit.bpe import table_capacity
from crayon.reference.cache import (DEFAULT_BUCKETS, DEFAULT_LONG_ROWS, LONG_PIECE_BYTES, LONG_ROW_WORDS, LONGER_PIECE_BYTES,
                                    MAX_PIECE_BYTES, MAX_PIECE_TOKENS, MIN_PIECE_BYTES)

ROW_WORDS = 4
_MULTIPLIER_LOW = np.uint64(0x9E3779B97F4A7C15)
_MULTIPLIER_HIGH = np.uint64(0xC2B2AE3D27D4EB4F)
_U16 = np.uint64(16)
_U29 = np.uint64(29)
_HIGH_BITS = np.uint64(0x8080808080808080)
_U8 = np.uint64(8)
_U32 = np.uint64(32)
_LOW32 = np.uint64(0xFFFFFFFF)
_ALL_BITS = np.uint64(0xFFFFFFFFFFFFFFFF)
LITTLE_ENDIAN = sys.byteorder == "little"


# a thread's first piece cache has this many buckets (64 KB); it gets a full-size one (DEFAULT_BUCKETS, 4 MB) once
# the thread has encoded GROW_AFTER_BYTES, so a tokenizer loaded for a few short calls allocates little
SMALL_CACHE_BUCKETS, GROW_AFTER_BYTES = 1 << 10, 1 << 16


def zeroed_table(shape: tuple[int, ...]) -> np.ndarray:
    """A uint64 table of zeros whose pages are written now. A cache's first access to a slot is a read: from a
    page never written, that maps the kernel's shared zero page, and the first store then takes a copy-on-write
    fault whose TLB flush interrupts every CPU running a thread of the process (measured: 2 pipeline workers spent
    12% more CPU per MB than one)."""
    table = np.empty(shape, np.uint64)
    table.fill(0)
    return table


def new_piece_cache(n_buckets: int = DEFAULT_BUCKETS) -> np.ndarray:
    """An empty cache of ``n_buckets`` buckets (a power of two) of two slots."""
    if n_buckets < 1 or n_buckets & (n_buckets - 1):
        raise ValueError(f"n_buckets must be a power of two, not {n_buckets}")
    return zeroed_table((2 * n_buckets, ROW_WORDS))


@njit(cache=True, _nrt=False, inline="always")
def piece_key(data, start, end):
    """data[start:end] (at most 16 bytes) as two little-endian words."""
    if LITTLE_ENDIAN and start >= 0 and start + 16 <= data.shape[0]:  # two loads and masks, no branch on the length
        length = end - start
        low = load_word(data, start) & (_ALL_BITS >> np.uint64(64 - 8 * min(length, 8)))
        high = load_word(data, start + 8) & (_ALL_BITS >> np.uint64(128 - 8 * max(length, 9)))
        return low, high if length > 8 else np.uint64(0)
    low = np.uint64(0)
    high = np.uint64(0)
    for i in range(min(end, start + 8) - 1, start - 1, -1):
        low = (low << _U8) | np.uint64(data[i])
    for i in range(end - 1, start + 7, -1):
        high = (high << _U8) | np.uint64(data[i])
    return low, high


@njit(cache=True, _nrt=False, inline="always")
def piece_hash(low, high, length):
    """32 mixed bits of a span's key (the reference's ``piece_bucket`` before the mask)."""
    mixed = (low * _MULTIPLIER_LOW) ^ (high * _MULTIPLIER_HIGH) ^ np.uint64(length)
    return np.int64((mixed * _MULTIPLIER_LOW) >> _U32)


@njit(cache=True, _nrt=False, inline="always")
def piece_row(low, high, length, n_rows):
    """The first row of the span's bucket."""
    return 2 * (piece_hash(low, high, length) & ((n_rows >> 1) - 1))


@njit(cache=True, _nrt=False, inline="always")
def cache_lookup(cache, low, high, length, row, out, n):
    """Copy the cached tokens of the span to out[n:] and return the new n, or -1 on a miss."""
    for slot in range(row, row + 2):
        meta = cache[slot, 2]
        if cache[slot, 0] == low and cache[slot, 1] == high and (meta & np.uint64(0xFF)) == np.uint64(length):
            count = np.int64((meta >> _U8) & np.uint64(0xFF))
            if count > MAX_PIECE_TOKENS:
                return -1
            out[n] = meta >> _U32
            if n + MAX_PIECE_TOKENS <= out.shape[0]:  # all three words, whatever the count: no branch on it
                out[n + 1] = cache[slot, 3] & _LOW32
                out[n + 2] = cache[slot, 3] >> _U32
                return n + count
            if count > 1:
                out[n + 1] = cache[slot, 3] & _LOW32
            if count > 2:
                out[n + 2] = cache[slot, 3] >> _U32
            return n + count
    return -1


@njit(cache=True, _nrt=False, inline="always")
def cache_store(cache, low, high, length, row, tokens, first, count):
    """Insert the span's tokens[first:first + count] into the first slot of its bucket (1 <= count <= 3)."""
    for word in range(ROW_WORDS):
        cache[row + 1, word] = cache[row, word]
    cache[row, 0] = low
    cache[row, 1] = high
    cache[row, 2] = np.uint64(length) | (np.uint64(count) << _U8) | ((np.uint64(tokens[first]) & _LOW32) << _U32)
    following = np.uint64(0)
    if count > 1:
        following = np.uint64(tokens[first + 1]) & _LOW32
    if count > 2:
        following |= (np.uint64(tokens[first + 2]) & _LOW32) << _U32
    cache[row, 3] = following


def new_long_piece_cache(n_rows: int = DEFAULT_LONG_ROWS, row_words: int = LONG_ROW_WORDS) -> np.ndarray:
    """An empty long-piece cache of ``n_rows`` rows (a power of two) of ``row_words`` words."""
    if n_rows < 1 or n_rows & (n_rows - 1):
        raise ValueError(f"n_rows must be a power of two, not {n_rows}")
    return zeroed_table((n_rows, row_words))


@njit(cache=True, _nrt=False, inline="always")
def span_word(data, start, end, at):
    """The little-endian word of data[at:min(at + 8, end)] (start <= at < end): bytes past the span are zero."""
    if LITTLE_ENDIAN and at >= 0 and at + 8 <= data.shape[0]:
        word = load_word(data, at)
        if end - at < 8:
            word &= _ALL_BITS >> np.uint64(64 - 8 * (end - at))
        return word
    word = np.uint64(0)
    for i in range(min(end, at + 8) - 1, at - 1, -1):
        word = (word << _U8) | np.uint64(data[i])
    return word


@njit(cache=True, _nrt=False, inline="always")
def long_piece_row(data, start, end, n_rows):
    """The row of data[start:end] in a long-piece cache of ``n_rows`` rows (the reference's ``long_piece_row``)."""
    mixed = np.uint64(end - start)
    for at in range(start, end, 8):
        mixed = (mixed ^ span_word(data, start, end, at)) * _MULTIPLIER_LOW
        mixed ^= mixed >> _U29
    return np.int64(((mixed * _MULTIPLIER_HIGH) >> _U32) & np.uint64(n_rows - 1))


@njit(cache=True, _nrt=False, inline="always")
def fits_long_row(row_words, length, count):
    """Whether a row of ``row_words`` words holds a span of ``length`` bytes and ``count`` tokens."""
    return 1 + (length + 7) // 8 + (count + 1) // 2 <= row_words


@njit(cache=True, _nrt=False, inline="always")
def long_cache_lookup(cache, data, start, end, row, out, n):
    """Copy the cached tokens of data[start:end] (in ``row``) to out[n:] and return the new n, or -1 on a miss."""
    length = end - start
    meta = cache[row, 0]
    if (meta & np.uint64(0xFFFF)) != np.uint64(length):
        return -1
    word = 1
    for at in range(start, end, 8):
        if cache[row, word] != span_word(data, start, end, at):
            return -1
        word += 1
    count = np.int64(meta >> _U16)
    if count < 1 or not fits_long_row(cache.shape[1], length, count):
        return -1
    for i in range(count):
        pair = cache[row, word + (i >> 1)]
        out[n + i] = (pair >> _U32) if i & 1 else (pair & _LOW32)
    return n + count


@njit(cache=True, _nrt=False, inline="always")
def long_cache_store(cache, data, start, end, row, tokens, first, count):
    """Put data[start:end] -> tokens[first:first + count] in ``row`` (the caller checked that it fits)."""
    cache[row, 0] = np.uint64(end - start) | (np.uint64(count) << _U16)
    word = 1
    for at in range(start, end, 8):
        cache[row, word] = span_word(data, start, end, at)
        word += 1
    for i in range(0, count, 2):
        pair = np.uint64(tokens[first + i]) & _LOW32
        if i + 1 < count:
            pair |= (np.uint64(tokens[first + i + 1]) & _LOW32) << _U32
        cache[row, word + (i >> 1)] = pair


@njit(cache=True, _nrt=False, inline="always")
def long_cache_keeps(cache, data, start, end, count):
    """Whether a long-piece cache keeps data[start:end] with ``count`` tokens, the span being one the piece cache
    does not keep (the reference's ``LongPieceCache.keeps`` without its length range, which picks the cache)."""
    length = end - start
    if count < 1 or not fits_long_row(cache.shape[1], length, count):
        return False
    if length > MAX_PIECE_BYTES:
        return True
    low, high = piece_key(data, start, end)
    return count > MAX_PIECE_TOKENS and not is_ascii(low, high)


@njit(cache=True)
def cached_long_get(cache, data, start, end, out, n):
    """Lookup of data[start:end] in a long-piece cache: the new n, or -1 on a miss."""
    return long_cache_lookup(cache, data, start, end, long_piece_row(data, start, end, cache.shape[0]), out, n)


@njit(cache=True)
def cached_long_put(cache, data, start, end, tokens, first, count):
    """Insert data[start:end] -> tokens[first:first + count] if a long-piece cache for spans of this length keeps it."""
    if long_cache_keeps(cache, data, start, end, count):
        long_cache_store(cache, data, start, end, long_piece_row(data, start, end, cache.shape[0]), tokens, first, count)


@intrinsic
def load_word(typingctx, data, index):
    """The 8 bytes data[index:index + 8] of a uint8 array as one native-endian uint64, read with one unaligned
    load; the caller checks that index + 8 <= len(data)."""
    from llvmlite import ir
    from numba.core import cgutils, types

    def codegen(context, builder, signature, args):
        array_type, index_type = signature.args
        array = context.make_array(array_type)(context, builder, args[0])
        index = context.cast(builder, args[1], index_type, types.intp)
        pointer = cgutils.get_item_pointer(context, builder, array_type, array, [index])
        word = builder.load(builder.bitcast(pointer, ir.IntType(64).as_pointer()), align=1)
        return word

    return types.uint64(data, index), codegen


def emit_prefetch(builder, byte_pointer, for_writing: bool) -> None:
    """Emit LLVM's prefetch of the cache line at ``byte_pointer`` (an i8*), for reading or writing, kept in all
    levels of the cache (the codegen of the prefetch intrinsics)."""
    import llvmlite.binding as llvm
    from llvmlite import ir
    from numba.core import cgutils

    name = "llvm.prefetch.p0" if llvm.llvm_version_info >= (15,) else "llvm.prefetch.p0i8"
    i32 = ir.IntType(32)
    function = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(ir.VoidType(), [byte_pointer.type, i32, i32, i32]), name)
    builder.call(function, [byte_pointer, i32(int(for_writing)), i32(3), i32(1)])  # rw, keep in all levels, data


@intrinsic
def prefetch(typingctx, table, row):
    """Start loading the cache line that holds table[row] (LLVM's prefetch, for reading); nothing waits for it."""
    from llvmlite import ir
    from numba.core import cgutils, types

    def codegen(context, builder, signature, args):
        table_type, row_type = signature.args
        array = context.make_array(table_type)(context, builder, args[0])
        indices = [context.cast(builder, args[1], row_type, types.intp)]
        indices += [context.get_constant(types.intp, 0)] * (table_type.ndim - 1)
        byte_pointer = builder.bitcast(cgutils.get_item_pointer(context, builder, table_type, array, indices),
                                       ir.IntType(8).as_pointer())
        emit_prefetch(builder, byte_pointer, for_writing=False)
        return context.get_dummy_value()

    return types.void(table, row), codegen


@intrinsic
def prefetch_object(typingctx, address):
    """Start loading the cache line at ``address`` (an object about to be written: its reference count); nothing
    waits for it."""
    from llvmlite import ir
    from numba.core import types

    def codegen(context, builder, signature, args):
        emit_prefetch(builder, builder.inttoptr(args[0], ir.IntType(8).as_pointer()), for_writing=True)
        return context.get_dummy_value()

    return types.void(types.uint64), codegen


@njit(cache=True, _nrt=False, inline="always")
def prefetch_piece(caches, short_tokens, data, start, end):
    """Start loading what looking data[start:end] up will read first (its piece-cache bucket and its row of the
    short-token table, or its row of a long-piece cache), so that the lookup, a few spans later, does not wait for
    memory. ``caches`` is (piece cache, long-piece cache, longer-piece cache). Out-of-range spans are ignored."""
    length = end - start
    if MIN_PIECE_BYTES <= length <= LONGER_PIECE_BYTES and start >= 0 and end <= data.shape[0]:
        cache, long_cache, longer_cache = caches
        if length <= MAX_PIECE_BYTES:
            low, high = piece_key(data, start, end)
            prefetch(cache, piece_row(low, high, length, cache.shape[0]))
            prefetch(short_tokens, piece_hash(low, high, length) & (short_tokens.shape[0] - 1))
            if is_ascii(low, high):
                return
        rows = long_cache if length <= LONG_PIECE_BYTES else longer_cache
        prefetch(rows, long_piece_row(data, start, end, rows.shape[0]))


@njit(cache=True, _nrt=False, inline="always")
def is_ascii(low, high):
    """Whether the bytes of a piece key are all ASCII."""
    return ((low | high) & _HIGH_BITS) == np.uint64(0)


@njit(cache=True)
def cached_get(cache, data, start, end, out, n):
    """Lookup of data[start:end] (a cacheable length): the new n, or -1 on a miss."""
    low, high = piece_key(data, start, end)
    return cache_lookup(cache, low, high, end - start, piece_row(low, high, end - start, cache.shape[0]), out, n)


@njit(cache=True)
def cached_put(cache, data, start, end, tokens, first, count):
    """Insert data[start:end] -> tokens[first:first + count] if cacheable."""
    if MIN_PIECE_BYTES <= end - start <= MAX_PIECE_BYTES and 1 <= count <= MAX_PIECE_TOKENS:
        low, high = piece_key(data, start, end)
        cache_store(cache, low, high, end - start, piece_row(low, high, end - start, cache.shape[0]), tokens, first, count)


# The vocabulary's short tokens, keyed like the cache: a read-only table shared by all threads, so that a span
# that is a token costs one probe even the first time it is seen (one cache line, where a trie walk costs one a byte). Rows of 4 words: [bytes 0-7, bytes 8-15,
# length | id << 8, 0]; a zero third word is an empty row; linear probing from the row piece_hash picks.


def build_short_tokens(token_offsets: np.ndarray, token_bytes: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The short-token table of the tokens with ``keep[token]`` (at most half full)."""
    table = np.zeros((table_capacity(int(np.count_nonzero(keep))), 4), np.uint64)
    aot.call_kernel(aot.TABLES, fill_short_tokens, table, token_offsets, token_bytes, keep)
    return table


@njit(cache=True)
def fill_short_tokens(table, token_offsets, token_bytes, keep):
    """Insert every token with ``keep[token]`` of MIN..MAX_PIECE_BYTES bytes into ``table`` (rows a power of two)."""
    mask = table.shape[0] - 1
    for token in range(token_offsets.shape[0] - 1):
        first, last = token_offsets[token], token_offsets[token + 1]
        if keep[token] and MIN_PIECE_BYTES <= last - first <= MAX_PIECE_BYTES:
            low, high = piece_key(token_bytes, first, last)
            row = piece_hash(low, high, last - first) & mask
            while table[row, 2] != 0:
                row = (row + 1) & mask
            table[row, 0], table[row, 1] = low, high
            table[row, 2] = np.uint64(last - first) | (np.uint64(token) << _U8)


@njit(cache=True, _nrt=False, inline="always")
def short_token_lookup(table, low, high, length):
    """The id of the token spelled by a span of MIN..MAX_PIECE_BYTES bytes with this key, or -1."""
    mask = table.shape[0] - 1
    row = piece_hash(low, high, length) & mask
    for _ in range(table.shape[0]):
        meta = table[row, 2]
        if meta == 0:
            return -1
        if table[row, 0] == low and table[row, 1] == high and (meta & np.uint64(0xFF)) == np.uint64(length):
            return np.int64(meta >> _U8)
        row = (row + 1) & mask
    return -1

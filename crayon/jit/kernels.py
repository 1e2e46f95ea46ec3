"""The jit engine's kernels: a whole text (or batch) -> tokens, and pre-tokenized spans -> tokens.

Before a span reaches an encoder: a one-byte span is its byte's token; a span of 2 to 16 bytes is looked up in
the thread's piece cache, then in the table of the vocabulary's short tokens (a span that is a token is that token);
a longer span of up to 256 bytes, or a shorter one with a non-ASCII byte, in the thread's long-piece caches; only then is it encoded, and cached in the cache that
keeps it (``crayon.reference.cache``). Both lookups are prefetched ``PREFETCH_DISTANCE`` spans ahead: on text seen
for the first time they are mostly cache misses (first sight +6-15% on enwik8 and multilingual, -3 to -7% on
Python code).

Span encoders (``ENCODERS``), identical tokens: ``backtrack`` (``crayon.jit.backtrack``, the default), ``heap``
and ``merge_loop`` (``crayon.jit.bpe``). The heap encoder hands spans of up to ``SHORT_SPAN`` bytes to the merge
loop, and so does the backtracking encoder for such a span that ends in an ASCII byte: on those (English words,
markup, code) the merge loop was measured 20% faster first sight (no validity memo to fill), while backtracking
is faster on non-ASCII text (multilingual.txt: 1.6x the heap encoder; its spans are long and rarely repeat) and
O(n) on a long span. The engine uses the heap encoder, with a note in ``backtrack_violation``, for a vocabulary
where backtracking is not exact.

``encode_docs_kernel``, ``encode_spans_kernel``, ``utf8_error_kernel`` (``crayon.jit.pretokenize``) and
``id_list_kernel``, ``id_lists_kernel``, ``id_list_extend_kernel`` (``crayon.jit.id_lists``: the tokens as a Python list) are the entry kernels: ``crayon.jit.engine`` calls them, as numba dispatchers or compiled ahead of time from this module
by ``crayon.jit.aot``. The GPU engine runs ``encode_span_into`` per thread.
"""

from __future__ import annotations

from crayon.jit.backtrack import backtrack_span
from crayon.jit.bpe import heap_merge, merge_loop, vocab_lookup, write_byte_tokens
from crayon.jit.cache import (cache_lookup, cache_store, is_ascii, long_cache_keeps, long_cache_lookup, long_cache_store,
                              long_piece_row, piece_key, piece_row, prefetch_piece, short_token_lookup)
from crayon.jit.id_lists import id_list_extend_kernel, id_list_kernel, id_lists_kernel
from crayon.jit.lazy import njit
from crayon.jit.pretokenize import fill_span_ends_fast, utf8_error_kernel
from crayon.jit.status import NEED_SCRATCH, NO_PROGRESS, UNKNOWN_BYTE
from crayon.reference.cache import LONG_PIECE_BYTES, LONGER_PIECE_BYTES, MAX_PIECE_BYTES, MAX_PIECE_TOKENS

__all__ = ["ENCODERS", "encode_span_into", "encode_docs_kernel", "encode_spans_kernel", "utf8_error_kernel",
           "id_list_kernel", "id_lists_kernel", "id_list_extend_kernel"]

MERGE_LOOP, HEAP, BACKTRACK = 0, 1, 2
ENCODERS = {"merge_loop": MERGE_LOOP, "heap": HEAP, "backtrack": BACKTRACK}
SHORT_SPAN = 16
SPAN_BATCH = 256  # span ends found per call of the pre-tokenizer
PREFETCH_DISTANCE = 8  # prefetch the lookups of the span this far ahead (of 3, 8 and 16, 8 measured best)


@njit(cache=True, _nrt=False)
def encode_span_into(data, start, end, out, n, bpe, encoder, scratch, alive, memo):
    """Encode the span data[start:end] into out[n:]; returns the new n or a negative status.

    ``bpe`` is ``crayon.jit.tables.kernel_tables(tables)``.
    ``scratch`` (int64) and ``alive`` (uint8) hold at least 5 * (end - start) and end - start + 1 entries.
    """
    byte_tokens, pair_table, token_offsets, token_bytes, vocab_index, whole_spans, token_rows, dat_rows, _, starts = bpe
    length = end - start
    if whole_spans[0] and length > 1:
        whole = vocab_lookup(vocab_index, token_offsets, token_bytes, data, start, end)
        if whole >= 0:
            out[n] = whole
            return n + 1
    if encoder == BACKTRACK and (length > SHORT_SPAN or data[end - 1] >= 0x80):  # else merge loop (module doc)
        return backtrack_span(data, start, end, out, n, (pair_table, token_rows, dat_rows, starts), alive, memo)
    if not write_byte_tokens(byte_tokens, data, start, end, out, n):
        return UNKNOWN_BYTE
    if encoder == HEAP and length > SHORT_SPAN:
        return n + heap_merge(out, n, length, pair_table, scratch)
    count, _, _, _ = merge_loop(out, n, length, pair_table, scratch)
    return n + count


@njit(cache=True, _nrt=False, inline="always")
def encode_piece(data, start, end, out, n, bpe, encoder, caches, scratch, alive, memo):
    """``encode_span_into`` through the thread's ``caches`` (piece cache, long-piece cache, longer-piece cache);
    inlined: a cache hit makes no call."""
    cache, long_cache, longer_cache = caches
    length = end - start
    if length == 1:
        token = bpe[0][data[start]]
        if token < 0:
            return UNKNOWN_BYTE
        out[n] = token
        return n + 1
    if length > LONGER_PIECE_BYTES:
        return encode_span_into(data, start, end, out, n, bpe, encoder, scratch, alive, memo)
    if length <= MAX_PIECE_BYTES:
        low, high = piece_key(data, start, end)
        row = piece_row(low, high, length, cache.shape[0])
        found = cache_lookup(cache, low, high, length, row, out, n)
        if found >= 0:
            return found
        whole = short_token_lookup(bpe[8], low, high, length)
        if whole >= 0:
            out[n] = whole
            cache_store(cache, low, high, length, row, out, n, 1)
            return n + 1
        if is_ascii(low, high):  # the long-piece cache keeps no short ASCII span
            written = encode_span_into(data, start, end, out, n, bpe, encoder, scratch, alive, memo)
            if n < written <= n + MAX_PIECE_TOKENS:
                cache_store(cache, low, high, length, row, out, n, written - n)
            return written
    rows = long_cache if length <= LONG_PIECE_BYTES else longer_cache
    long_row = long_piece_row(data, start, end, rows.shape[0])
    found = long_cache_lookup(rows, data, start, end, long_row, out, n)
    if found >= 0:
        return found
    written = encode_span_into(data, start, end, out, n, bpe, encoder, scratch, alive, memo)
    count = written - n
    if length <= MAX_PIECE_BYTES and 1 <= count <= MAX_PIECE_TOKENS:
        low, high = piece_key(data, start, end)
        cache_store(cache, low, high, length, piece_row(low, high, length, cache.shape[0]), out, n, count)
    elif written > n and long_cache_keeps(rows, data, start, end, count):
        long_cache_store(rows, data, start, end, long_row, out, n, count)
    return written


@njit(cache=True, nogil=True, _nrt=False)
def encode_docs_kernel(data, doc_offsets, last_doc, pattern_id, char_tables, bpe, encoder, buffers, out, counts, resume):
    """Encode the texts data[doc_offsets[d]:doc_offsets[d + 1]] for d in [resume[0], last_doc) into ``out``.

    Spans come from the jit pre-tokenizer. ``buffers`` is ``(cache, long_cache, longer_cache, memo, scratch, alive,
    classes, ends)``: the thread's piece caches (``crayon.jit.cache``) and validity memo, encoder scratch (``scratch_capacity``), character classes for the longest text, and
    SPAN_BATCH span ends. ``resume`` is ``[doc, pos, n, n at the doc's start, 0, first doc]`` to start from; counts[d -
    first doc] receives each text's number of tokens. Returns the total, or a negative status; on NEED_SCRATCH
    ``resume`` says where to go on and resume[4] how long a span the scratch must hold. Allocation-free
    (``_nrt=False``), so no reference counting slows the loop.
    """
    cache, long_cache, longer_cache, memo, scratch, alive, classes, ends = buffers
    first_doc = resume[5]
    doc, pos, n, before = resume[0], resume[1], resume[2], resume[3]
    while doc < last_doc:
        text = data[doc_offsets[doc] : doc_offsets[doc + 1]]
        classified = text.shape[0]
        while pos < text.shape[0]:
            found, classified = fill_span_ends_fast(text, classes, pos, text.shape[0], pattern_id, char_tables, ends,
                                                    classified)
            for i in range(found):
                if i + PREFETCH_DISTANCE < found:
                    ahead = i + PREFETCH_DISTANCE
                    prefetch_piece((cache, long_cache, longer_cache), bpe[8], text, ends[ahead - 1], ends[ahead])
                end = ends[i]
                if end <= pos or end > text.shape[0]:
                    return NO_PROGRESS
                if end - pos >= alive.shape[0]:
                    resume[0], resume[1], resume[2], resume[3], resume[4] = doc, pos, n, before, end - pos
                    return NEED_SCRATCH
                n = encode_piece(text, pos, end, out, n, bpe, encoder, (cache, long_cache, longer_cache), scratch, alive, memo)
                if n < 0:
                    return n
                pos = end
        counts[doc - first_doc] = n - before
        doc += 1
        pos = 0
        before = n
    return n


@njit(cache=True, nogil=True, _nrt=False)
def encode_spans_kernel(data, span_ends, bpe, encoder, cache, long_cache, longer_cache, memo, scratch, alive, out):
    """Encode the spans data[span_ends[i - 1]:span_ends[i]] (from 0) into ``out``; the count or a negative status.

    ``scratch`` and ``alive`` must hold the longest span (``scratch_capacity``).
    """
    n = 0
    pos = 0
    for i, end in enumerate(span_ends):
        if i + PREFETCH_DISTANCE < span_ends.shape[0]:
            ahead = i + PREFETCH_DISTANCE
            prefetch_piece((cache, long_cache, longer_cache), bpe[8], data, span_ends[ahead - 1], span_ends[ahead])
        if end < pos or end > data.shape[0] or end - pos >= alive.shape[0]:
            return NO_PROGRESS
        n = encode_piece(data, pos, end, out, n, bpe, encoder, (cache, long_cache, longer_cache), scratch, alive, memo)
        if n < 0:
            return n
        pos = end
    return n

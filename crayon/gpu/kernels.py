"""CUDA kernels of the GPU engine (numba-cuda).

The algorithms are not rewritten for the GPU: the kernels call the JIT engine's ``@njit`` functions
(``classify_characters`` and ``fill_span_ends`` of ``crayon.jit.pretokenize``, ``encode_span_into`` of
``crayon.jit.kernels`` with its merge loop, heap and backtracking encoders), which numba-cuda compiles for the
GPU from the same source. What is GPU-specific is how a batch (many documents in one UTF-8 buffer) is split
over threads:

1. Spanner (``classify_chunks``, ``span_chunks``, ``fix_chunks``). Documents are cut into chunks of about
   256 bytes at character boundaries, one thread each. Character classes are per character, so chunks
   classify independently. Spans form a chain (each starts where the last ended), so one thread per document
   would leave the GPU idle behind a few long documents. Instead each chunk thread
   follows the chain from its chunk's first byte, marking span starts. That byte is usually inside a span,
   but chains re-synchronize: once two chains share a position they are equal from there on, and on real
   text they meet within a span or two. ``fix_chunks`` re-walks every chunk from where the previous chunk's
   chain entered it until the walk meets the chunk's own marks, and is repeated while some chain left its
   chunk at a new place (a run of digits longer than a chunk, say); one pass suffices on ordinary text.
   The marks are then exactly the sequential spans.
2. Model (``encode_chunks``, ``encode_long_spans``). One thread per chunk encodes the spans that start in it,
   with scratch in per-thread local arrays: spans up to ``local_limit`` bytes (merge loop up to 64 bytes, or
   backtracking up to 256 where it is exact). Longer spans are queued and encoded one per thread by
   ``encode_long_spans`` with global scratch sized from their length, so no length is ever too long. Tokens
   are written at the span's own byte offset (a span of n bytes has at most n tokens) and the token count at
   ``counts[span start]``. The backtracking encoder's memo of pair checks is one direct-mapped table in
   global memory shared by all threads: each entry carries its key, so a racing write can only cost a
   recomputation, never a wrong answer. Greedy longest match (``longest_chunks``) is the other model; a text
   without pre-tokenization is then one chain of tokens, which step 1 follows with ``longest_prefix`` as its
   step (``LONGEST_CHAIN``), so each span is one token.
3. Compaction (``chunk_token_totals``, ``exclusive_scan``, ``compact_chunks``): per-chunk token totals, a
   prefix sum, and every chunk copies its tokens to their final place.

The encoders bounds-check every table read (a corrupt table gives a status or wrong tokens, never an illegal
address, which on a GPU would kill the CUDA context). A negative status is kept in ``status[0]``.

Under numba's CUDA simulator kernels see wrapped arrays that ``@njit`` functions cannot take; ``host_view``
unwraps them there (so the simulator runs the compiled CPU encoders) and is the identity on a GPU.
"""

from __future__ import annotations

import numpy as np
from numba import config, cuda, int64, uint8

from crayon.gpu.capacity import BACKTRACK_LOCAL_BYTES, MERGE_LOOP_LOCAL_BYTES
from crayon.jit import longest
from crayon.jit.dat import longest_prefix
from crayon.jit.kernels import encode_span_into
from crayon.jit.lazy import use_numba
from crayon.jit.pretokenize import classify_characters, fill_span_ends

use_numba()  # numba-cuda compiles the @njit functions called here only if they are numba dispatchers

LONGEST_CHAIN = -1  # the "pattern" of texts without pre-tokenization under longest match: tokens are the spans
# The simulator runs every thread of a block as a Python thread: small blocks keep the tests fast (and make
# them take the scan's multi-level path); the kernels are the same.
THREADS_PER_BLOCK = 32 if config.ENABLE_CUDASIM else 128
SCAN_THREADS = 32 if config.ENABLE_CUDASIM else 256
SCAN_ITEMS = 8  # values per scan thread: a block scans SCAN_THREADS * SCAN_ITEMS values
LOCAL_SCRATCH = MERGE_LOOP_LOCAL_BYTES  # int64 merge-loop scratch of a thread
LOCAL_ALIVE = BACKTRACK_LOCAL_BYTES + 1  # uint8 backtracking scratch of a thread

if config.ENABLE_CUDASIM:

    def host_view(arrays):
        """The numpy arrays behind simulator arrays (one, or a tuple), which ``@njit`` functions accept."""
        if isinstance(arrays, tuple):
            return tuple(getattr(array, "_ary", array) for array in arrays)
        return getattr(arrays, "_ary", arrays)

else:

    @cuda.jit(device=True, inline=True)
    def host_view(arrays):
        """On a GPU, device arrays are what ``@njit`` functions compiled for it take."""
        return arrays


def blocks_for(count: int, threads: int = THREADS_PER_BLOCK) -> int:
    return (count + threads - 1) // threads


# --- spanner -----------------------------------------------------------------------------------------


@cuda.jit(cache=True)
def classify_chunks(data, starts, stops, char_tables, classes):
    """Character classes of every byte; chunks start and stop at character boundaries."""
    chunk = cuda.grid(1)
    if chunk < starts.shape[0]:
        classify_characters(host_view(data), starts[chunk], stops[chunk], host_view(char_tables), host_view(classes))


@cuda.jit(device=True, inline=True)
def next_span_start(data, classes, position, doc_stop, pattern_id, char_tables, dat, found):
    """Where the span that starts at ``position`` ends (``found`` is one int64 of scratch). Under
    LONGEST_CHAIN a span is one longest-match token (or one fallback byte)."""
    if pattern_id == LONGEST_CHAIN:
        base, check, values = host_view(dat)
        _, length = longest_prefix(base, check, values, host_view(data), position, doc_stop)
        return position + max(length, 1)
    fill_span_ends(host_view(classes), position, doc_stop, pattern_id, host_view(char_tables), host_view(found))
    return found[0]


@cuda.jit(cache=True)
def span_chunks(data, classes, starts, stops, doc_stops, pattern_id, char_tables, dat, marks, entries, exits):
    """Each chunk follows the span chain from its first byte: mark span starts (the chunk's marks are cleared
    first), record where it leaves."""
    chunk = cuda.grid(1)
    if chunk >= starts.shape[0]:
        return
    found = cuda.local.array(1, int64)
    position = starts[chunk]
    stop, doc_stop = stops[chunk], doc_stops[chunk]
    for cleared in range(position, stop):
        marks[cleared] = 0
    while position < stop:
        marks[position] = 1
        position = next_span_start(data, classes, position, doc_stop, pattern_id, char_tables, dat, found)
    entries[chunk] = starts[chunk]
    exits[chunk] = position


@cuda.jit(cache=True)
def fix_chunks(data, classes, starts, stops, doc_stops, first_of_doc, pattern_id, char_tables, dat, marks, entries,
               exits, changed):
    """Re-walk each chunk from where the previous chunk's chain entered it until the walk meets the chunk's
    own chain; flag ``changed`` when a chain now leaves its chunk elsewhere (the next chunk needs a pass)."""
    chunk = cuda.grid(1)
    if chunk >= starts.shape[0] or first_of_doc[chunk]:
        return
    entry = exits[chunk - 1]
    if entry == entries[chunk]:
        return
    found = cuda.local.array(1, int64)
    start, stop, doc_stop = starts[chunk], stops[chunk], doc_stops[chunk]
    met = entry
    while met < stop and marks[met] == 0:
        met = next_span_start(data, classes, met, doc_stop, pattern_id, char_tables, dat, found)
    for position in range(start, min(met, stop)):
        marks[position] = 0
    position = entry
    while position < met and position < stop:
        marks[position] = 1
        position = next_span_start(data, classes, position, doc_stop, pattern_id, char_tables, dat, found)
    entries[chunk] = entry
    if met >= stop and exits[chunk] != met:
        exits[chunk] = met
        changed[0] = 1


# --- model -------------------------------------------------------------------------------------------


@cuda.jit(device=True, inline=True)
def span_stop(marks, position, doc_stop):
    """End of the span that starts at ``position``: the next mark, or the end of its document."""
    position += 1
    while position < doc_stop and marks[position] == 0:
        position += 1
    return position


@cuda.jit(cache=True)
def encode_chunks(data, starts, stops, doc_stops, marks, bpe, memo, local_encoder, local_limit, tokens, counts,
                  long_spans, long_count, status):
    """Encode the spans that start in each chunk (its counts are cleared first); queue those longer than
    ``local_limit`` bytes."""
    chunk = cuda.grid(1)
    if chunk >= starts.shape[0]:
        return
    scratch = cuda.local.array(LOCAL_SCRATCH, int64)
    alive = cuda.local.array(LOCAL_ALIVE, uint8)
    text, tables, out = host_view(data), host_view(bpe), host_view(tokens)
    doc_stop = doc_stops[chunk]
    for position in range(starts[chunk], stops[chunk]):
        counts[position] = 0
    for position in range(starts[chunk], stops[chunk]):
        if marks[position] == 0:
            continue
        stop = span_stop(marks, position, doc_stop)
        if stop - position > local_limit:
            slot = cuda.atomic.add(long_count, 0, 1)
            long_spans[slot, 0] = position
            long_spans[slot, 1] = stop
            continue
        written = encode_span_into(text, position, stop, out, position, tables, local_encoder,
                                   host_view(scratch), host_view(alive), host_view(memo))
        if written < 0:
            cuda.atomic.min(status, 0, written)
        else:
            counts[position] = written - position


@cuda.jit(cache=True)
def encode_long_spans(data, long_spans, scratch_offsets, alive_offsets, bpe, memo, encoder, scratch, alive, tokens,
                      counts, status):
    """One long span per thread, with scratch[scratch_offsets[i]:scratch_offsets[i+1]] and likewise alive."""
    index = cuda.grid(1)
    if index >= long_spans.shape[0]:
        return
    start, stop = long_spans[index, 0], long_spans[index, 1]
    own_scratch = host_view(scratch)[scratch_offsets[index] : scratch_offsets[index + 1]]
    own_alive = host_view(alive)[alive_offsets[index] : alive_offsets[index + 1]]
    written = encode_span_into(host_view(data), start, stop, host_view(tokens), start, host_view(bpe), encoder,
                               own_scratch, own_alive, host_view(memo))
    if written < 0:
        cuda.atomic.min(status, 0, written)
    else:
        counts[start] = written - start


@cuda.jit(cache=True)
def longest_chunks(data, starts, stops, doc_stops, marks, dat, fallback, tokens, counts):
    """Greedy longest match over the DAT of the spans that start in each chunk (byte fallback)."""
    chunk = cuda.grid(1)
    if chunk >= starts.shape[0]:
        return
    base, check, values = host_view(dat)
    text, out, fallback_ids = host_view(data), host_view(tokens), host_view(fallback)
    doc_stop = doc_stops[chunk]
    for position in range(starts[chunk], stops[chunk]):
        if marks[position]:
            stop = span_stop(marks, position, doc_stop)
            counts[position] = longest.encode_span_into(text, position, stop, base, check, values, fallback_ids, out,
                                                        position, False) - position
        else:
            counts[position] = 0


# --- compaction --------------------------------------------------------------------------------------


@cuda.jit(cache=True)
def chunk_token_totals(starts, stops, counts, totals):
    """Tokens of the spans that start in each chunk."""
    chunk = cuda.grid(1)
    if chunk >= starts.shape[0]:
        return
    total = 0
    for position in range(starts[chunk], stops[chunk]):
        total += counts[position]
    totals[chunk] = total


@cuda.jit(cache=True)
def compact_chunks(starts, stops, counts, tokens, offsets, out):
    """Copy each chunk's tokens (at their spans' byte offsets) to ``out[offsets[chunk]:]``."""
    chunk = cuda.grid(1)
    if chunk >= starts.shape[0]:
        return
    target = offsets[chunk]
    for position in range(starts[chunk], stops[chunk]):
        for i in range(counts[position]):
            out[target] = tokens[position + i]
            target += 1


@cuda.jit(cache=True)
def scan_blocks(values, count, prefix, block_totals):
    """Exclusive prefix sums of values[0:count] (zero past the end) within blocks of
    SCAN_THREADS * SCAN_ITEMS values; each block's total goes to block_totals."""
    shared = cuda.shared.array(SCAN_THREADS, int64)
    thread = cuda.threadIdx.x
    first = (cuda.blockIdx.x * SCAN_THREADS + thread) * SCAN_ITEMS
    own = int64(0)
    for i in range(first, min(first + SCAN_ITEMS, count)):
        own += values[i]
    shared[thread] = own
    cuda.syncthreads()
    step = 1
    while step < SCAN_THREADS:
        earlier = shared[thread - step] if thread >= step else int64(0)
        cuda.syncthreads()
        shared[thread] += earlier
        cuda.syncthreads()
        step *= 2
    running = shared[thread] - own
    for i in range(first, min(first + SCAN_ITEMS, prefix.shape[0])):
        prefix[i] = running
        if i < count:
            running += values[i]
    if thread == SCAN_THREADS - 1:
        block_totals[cuda.blockIdx.x] = shared[thread]


@cuda.jit(cache=True)
def add_block_offsets(prefix, block_offsets):
    index = cuda.grid(1)
    if index < prefix.shape[0]:
        prefix[index] += block_offsets[index // (SCAN_THREADS * SCAN_ITEMS)]


def exclusive_scan(values):
    """Device array ``prefix`` of ``len(values) + 1`` int64: prefix[i] = sum(values[:i])."""
    count = values.shape[0]
    prefix = cuda.device_array(count + 1, dtype=np.int64)
    per_block = SCAN_THREADS * SCAN_ITEMS
    blocks = (count + per_block) // per_block
    block_totals = cuda.device_array(blocks, dtype=np.int64)
    scan_blocks[blocks, SCAN_THREADS](values, count, prefix, block_totals)
    if blocks > 1:
        block_offsets = exclusive_scan(block_totals)
        add_block_offsets[blocks_for(count + 1), THREADS_PER_BLOCK](prefix, block_offsets)
    return prefix

"""Capacity planning for the GPU engine: every buffer is sized from the input, never from a fixed cap.

A fixed output slot per document (say 4096 tokens) would silently drop the rest of a longer one. Here
nothing is truncated because every size follows from one fact: a token spans at least one byte, so a text of
``n`` bytes has at most ``n`` tokens. A batch of ``n`` bytes therefore needs at most

    DEVICE_BYTES_PER_TEXT_BYTE * n + CHUNK_TABLE_BYTES * n / chunk_bytes

bytes of device memory, whatever it contains. Batches are cut under a memory budget (configurable), so any
number of documents fits; a document larger than one batch is cut into pieces at span boundaries (the host
finds them), so any document length fits. Spans too long for a thread's local scratch get global scratch
sized from their length (``long_span_scratch``), planned once the spans are known, in groups under the
budget; a span whose scratch alone exceeds the budget is encoded by the CPU engine.

This module imports no numba: ``should_use_gpu`` answers cheaply where CUDA is absent.
"""

from __future__ import annotations

import ctypes.util
import functools
import os
from dataclasses import dataclass

import numpy as np

# Device bytes per text byte of a batch: the text (1), character classes (1), span-start marks (1),
# per-span token counts (4), token scratch (4) and the compacted output tokens (4).
DEVICE_BYTES_PER_TEXT_BYTE = 15
# Per chunk: start, stop, document stop, entry, exit, token offset (int64 each) and a first-of-document flag.
CHUNK_TABLE_BYTES = 6 * 8 + 1
# A queued long span: (start, stop) and its two scratch offsets, int64.
LONG_SPAN_ENTRY_BYTES = 4 * 8
# Longest span a thread encodes in its local scratch: with the merge loop, and by backtracking.
MERGE_LOOP_LOCAL_BYTES = 64
BACKTRACK_LOCAL_BYTES = 256
# Global scratch of a longer span, per byte: the heap encoder's five int64 (links and heap), or the
# backtracking encoder's one uint8 (plus one per span).
HEAP_SCRATCH_BYTES = 5 * 8
# Bytes of text per GPU thread in the spanner and model kernels.
DEFAULT_CHUNK_BYTES = 256
# The share of the budget kept for long-span scratch (the rest sizes the batches).
LONG_SCRATCH_SHARE = 0.25
# 512M int32 elements, about 2 GiB: the device memory one batch may use where the free
# device memory is unknown; else half the free memory, at most MAX_DEFAULT_BUDGET.
DEFAULT_MEMORY_BUDGET = 2 << 30
MAX_DEFAULT_BUDGET = 8 << 30
# Below this many bytes the host-device round trip costs more than the GPU saves ("auto" stays on the CPU).
DEFAULT_MIN_GPU_BATCH_BYTES = 4 << 20
MAX_BATCH_BYTES = (1 << 31) - 1  # positions in a batch fit int32 counts and scratch offsets


def memory_budget(free_device_bytes: int | None = None) -> int:
    """Device bytes a batch may use: ``$CRAYON_GPU_MEMORY_BUDGET`` if set, else half of ``free_device_bytes``
    (at most ``MAX_DEFAULT_BUDGET``), else ``DEFAULT_MEMORY_BUDGET``."""
    default = DEFAULT_MEMORY_BUDGET if free_device_bytes is None else min(MAX_DEFAULT_BUDGET, free_device_bytes // 2)
    return _positive_int_from_env("CRAYON_GPU_MEMORY_BUDGET", default)


def min_gpu_batch_bytes() -> int:
    """The batch size from which ``backend="auto"`` picks the GPU (``$CRAYON_GPU_MIN_BATCH_BYTES``)."""
    return _positive_int_from_env("CRAYON_GPU_MIN_BATCH_BYTES", DEFAULT_MIN_GPU_BATCH_BYTES)


def _positive_int_from_env(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"${name} must be a positive integer, not {value!r}") from None
    if number <= 0:
        raise ValueError(f"${name} must be a positive integer, not {value!r}")
    return number


def batch_device_bytes(text_bytes: int, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> int:
    """Upper bound of the device memory a batch of ``text_bytes`` needs (long-span scratch apart)."""
    chunks = -(-text_bytes // chunk_bytes) + 1
    long_spans = text_bytes // (MERGE_LOOP_LOCAL_BYTES + 1) + 1
    return DEVICE_BYTES_PER_TEXT_BYTE * text_bytes + CHUNK_TABLE_BYTES * chunks + LONG_SPAN_ENTRY_BYTES * long_spans


def max_batch_bytes(budget: int, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> int:
    """The largest batch (in text bytes) whose buffers fit in ``budget`` device bytes (the batch share)."""
    per_byte = (
        DEVICE_BYTES_PER_TEXT_BYTE + CHUNK_TABLE_BYTES / chunk_bytes + LONG_SPAN_ENTRY_BYTES / MERGE_LOOP_LOCAL_BYTES
    )
    largest = min(int((budget - 2 * (CHUNK_TABLE_BYTES + LONG_SPAN_ENTRY_BYTES)) / per_byte), MAX_BATCH_BYTES)
    if largest < 1:
        raise ValueError(f"a GPU memory budget of {budget} bytes cannot hold even a one-byte batch")
    return largest


def long_span_scratch(lengths: np.ndarray, heap: bool) -> tuple[np.ndarray, np.ndarray]:
    """Sizes (int64 elements, uint8 elements) of the global scratch of spans of ``lengths`` bytes encoded by
    the heap encoder (``heap``) or by backtracking."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if heap:
        return 5 * lengths, np.zeros_like(lengths)
    return np.zeros_like(lengths), lengths + 1


def plan_long_groups(scratch_bytes: np.ndarray, budget: int) -> tuple[list[tuple[int, int]], np.ndarray]:
    """Consecutive groups ``(first, stop)`` of long spans whose scratch (``scratch_bytes`` each) fits in
    ``budget`` together, and the indices of spans too big to fit alone (for the CPU)."""
    groups: list[tuple[int, int]] = []
    too_big = np.flatnonzero(np.asarray(scratch_bytes) > budget)
    first, total = 0, 0
    for index, size in enumerate(np.asarray(scratch_bytes, dtype=np.int64).tolist()):
        if size > budget:
            if index > first:
                groups.append((first, index))
            first, total = index + 1, 0
        elif total + size > budget:
            groups.append((first, index))
            first, total = index, size
        else:
            total += size
    if first < len(scratch_bytes):
        groups.append((first, len(scratch_bytes)))
    return groups, too_big


@dataclass(frozen=True)
class Batch:
    """Documents ``first .. stop-1`` of the input, encoded in one pass; ``oversized`` when that is one
    document larger than a batch, to be cut into pieces at span boundaries."""

    first: int
    stop: int
    text_bytes: int
    oversized: bool = False


def plan_batches(doc_bytes: np.ndarray, batch_bytes: int) -> list[Batch]:
    """Cut documents (UTF-8 lengths ``doc_bytes``, in order) into consecutive batches of at most
    ``batch_bytes`` text bytes; a larger document is a batch of its own, marked ``oversized``."""
    if batch_bytes < 1:
        raise ValueError("batch_bytes must be positive")
    batches: list[Batch] = []
    first, total = 0, 0
    for index, size in enumerate(np.asarray(doc_bytes, dtype=np.int64).tolist()):
        if size > batch_bytes:
            if index > first:
                batches.append(Batch(first, index, total))
            batches.append(Batch(index, index + 1, size, oversized=True))
            first, total = index + 1, 0
        elif total + size > batch_bytes:
            batches.append(Batch(first, index, total))
            first, total = index, size
        else:
            total += size
    if first < len(doc_bytes) or not batches:
        batches.append(Batch(first, len(doc_bytes), total))
    return batches


def plan_pieces(span_ends: np.ndarray, piece_bytes: int) -> list[tuple[int, int]]:
    """Cut a document with span end offsets ``span_ends`` (ascending, from 0) into pieces of whole spans,
    each at most ``piece_bytes`` long unless it is a single longer span. Returns ``(first, stop)`` span
    index ranges."""
    ends = np.asarray(span_ends, dtype=np.int64)
    pieces: list[tuple[int, int]] = []
    first, piece_start = 0, 0
    while first < len(ends):
        stop = int(np.searchsorted(ends, piece_start + piece_bytes, side="right"))
        stop = max(stop, first + 1)  # a span longer than a piece is a piece of its own
        pieces.append((first, stop))
        piece_start = int(ends[stop - 1])
        first = stop
    return pieces


@dataclass(frozen=True)
class ChunkLayout:
    """Documents cut into chunks of at most ``chunk_bytes``: the unit of work of one GPU thread.

    Chunk ``k`` covers bytes ``starts[k] .. stops[k]-1`` of document bytes ending at ``doc_stops[k]``;
    ``first_of_doc[k]`` says whether it starts a document. Document ``d``'s chunks are
    ``doc_first_chunk[d] .. doc_first_chunk[d+1]-1`` (none for an empty document).
    """

    starts: np.ndarray
    stops: np.ndarray
    doc_stops: np.ndarray
    first_of_doc: np.ndarray
    doc_first_chunk: np.ndarray

    @property
    def count(self) -> int:
        return len(self.starts)


def chunk_layout(data: np.ndarray, doc_offsets: np.ndarray, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> ChunkLayout:
    """The chunks of the documents ``data[doc_offsets[d]:doc_offsets[d+1]]`` (valid UTF-8): every
    ``chunk_bytes`` bytes, moved forward to the next character boundary."""
    if chunk_bytes < 4:
        raise ValueError("chunk_bytes must be at least 4 (the longest UTF-8 character)")
    offsets = np.asarray(doc_offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    chunks_per_doc = -(-lengths // chunk_bytes)
    doc_of_chunk = np.repeat(np.arange(len(lengths), dtype=np.int64), chunks_per_doc)
    first_chunk = np.zeros(len(offsets), dtype=np.int64)
    np.cumsum(chunks_per_doc, out=first_chunk[1:])
    index_in_doc = np.arange(int(first_chunk[-1]), dtype=np.int64) - first_chunk[doc_of_chunk]
    starts = offsets[doc_of_chunk] + index_in_doc * chunk_bytes
    doc_stops = offsets[doc_of_chunk + 1]
    for _ in range(3):  # a character has at most three continuation bytes (10xxxxxx)
        inside = starts < doc_stops
        inside[inside] = (data[starts[inside]] & 0xC0) == 0x80
        starts += inside
    keep = starts < doc_stops  # a cut moved to the document's end leaves no chunk
    starts, doc_stops = starts[keep], doc_stops[keep]
    doc_of_chunk, index_in_doc = doc_of_chunk[keep], index_in_doc[keep]
    stops = np.append(starts[1:], 0)
    last_of_doc = np.append(doc_of_chunk[1:] != doc_of_chunk[:-1], True)
    stops[last_of_doc] = doc_stops[last_of_doc]
    doc_first_chunk = np.searchsorted(doc_of_chunk, np.arange(len(offsets)), side="left").astype(np.int64)
    return ChunkLayout(starts, stops, doc_stops, (index_in_doc == 0).astype(np.uint8), doc_first_chunk)


@functools.cache
def cuda_status() -> tuple[bool, str]:
    """Whether numba-cuda finds a CUDA GPU (the simulator counts), and why not."""
    simulated = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
    if not simulated and ctypes.util.find_library("cuda") is None:
        return False, "no CUDA driver (libcuda) is installed"
    try:
        from numba import cuda
    except ImportError as missing:
        return False, f"numba-cuda is not installed ({missing}); pip install 'crayon-tokenizer[gpu]'"
    if not cuda.is_available():
        return False, "numba-cuda finds no usable CUDA GPU"
    return True, "the CUDA simulator (NUMBA_ENABLE_CUDASIM=1)" if simulated else "a CUDA GPU"


def should_use_gpu(batch_bytes: int) -> tuple[bool, str]:
    """The ``backend="auto"`` policy: use the GPU for a batch of ``batch_bytes`` UTF-8 bytes? With the reason."""
    available, device = cuda_status()
    if not available:
        return False, f"CPU: {device}"
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return False, "CPU: only the CUDA simulator is available (for tests; it is never faster)"
    threshold = min_gpu_batch_bytes()
    if batch_bytes < threshold:
        return False, f"CPU: {batch_bytes} bytes is below the {threshold}-byte batch that pays for the transfer"
    return True, f"GPU: {batch_bytes} bytes >= {threshold}-byte threshold ($CRAYON_GPU_MIN_BATCH_BYTES)"

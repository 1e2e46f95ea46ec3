"""The CUDA engine (backend "cuda"): the JIT engine's exact BPE, run over a batch on the GPU.

``crayon.gpu.kernels`` explains how a batch is split over GPU threads and ``crayon.gpu.capacity`` how
buffers are sized: from the input, under a memory budget, so no document is ever truncated. The engine keeps
a ``JitEngine`` of the same tokenizer for what the GPU reuses (its tables and encoder choice) and for the one
thing it hands back to the CPU: a span whose scratch alone would exceed the memory budget.

Where the tokenizer has no jit pre-tokenizer (a normalizer, a custom pre-tokenizer or an unknown regex), its
own pre-tokenizer splits on the host and the GPU encodes the spans.
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from numba import cuda

from crayon.errors import BackendUnavailableError
from crayon.gpu import capacity, kernels
from crayon.gpu.kernels import THREADS_PER_BLOCK, blocks_for
from crayon.jit.engine import BACKTRACK, HEAP, MERGE_LOOP, TABLE_NAMES, JitEngine, _raise_status, tables_for
from crayon.jit.pretokenize import split_spans, unicode_tables


@dataclass
class BatchStats:
    """What the last ``encode_ordinary_flat`` did, for benchmarks and tests."""

    batches: int = 0
    oversized_documents: int = 0
    fix_passes: list[int] = field(default_factory=list)
    long_spans: int = 0
    long_span_groups: int = 0
    cpu_spans: int = 0


_DEVICE_TABLES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def device_tables(model) -> tuple:
    """Device copies of a BPE model's jit tables (in ``TABLE_NAMES`` order), copied once per model."""
    tables = _DEVICE_TABLES.get(model)
    if tables is None:
        host = tables_for(model)
        tables = _DEVICE_TABLES[model] = tuple(cuda.to_device(host[name]) for name in TABLE_NAMES)
    return tables


@functools.cache
def device_char_tables() -> tuple:
    """Device copies of the pre-tokenizer's character tables."""
    return tuple(cuda.to_device(table) for table in unicode_tables())


def _zeros(count: int, dtype) -> "cuda.devicearray.DeviceNDArray":
    array = cuda.device_array(max(count, 1), dtype=dtype)
    kernels.zero_fill[blocks_for(array.shape[0]), THREADS_PER_BLOCK](array)
    return array


def _launch(kernel, count: int, *args) -> None:
    if count:
        kernel[blocks_for(count), THREADS_PER_BLOCK](*args)


class CudaEngine:
    """Encodes batches of ordinary text on a CUDA GPU; the same tokens as the JIT engine."""

    name = "cuda"

    def __init__(self, tokenizer, *, memory_budget: int | None = None,
                 chunk_bytes: int = capacity.DEFAULT_CHUNK_BYTES):
        self.cpu = JitEngine(tokenizer)
        self.pattern_id = self.cpu.pattern_id  # None: the host pre-tokenizer splits
        self._normalizer = tokenizer.normalizer
        self._pretokenizer = tokenizer.pretokenizer
        self.memory_budget = capacity.memory_budget() if memory_budget is None else memory_budget
        self.chunk_bytes = chunk_bytes
        batch_share = int(self.memory_budget * (1 - capacity.LONG_SCRATCH_SHARE))
        self.batch_bytes = capacity.max_batch_bytes(batch_share, chunk_bytes)
        self.long_scratch_budget = self.memory_budget - batch_share
        backtrack = self.cpu.encoder == "backtrack"
        self.local_encoder = BACKTRACK if backtrack else MERGE_LOOP
        self.local_limit = capacity.BACKTRACK_LOCAL_BYTES if backtrack else capacity.MERGE_LOOP_LOCAL_BYTES
        self.long_encoder = BACKTRACK if backtrack else HEAP
        self._bpe = device_tables(tokenizer.model)
        self._char_tables = device_char_tables() if self.pattern_id is not None else None
        self.stats = BatchStats()

    # public API ------------------------------------------------------------------------------------------

    def encode_ordinary(self, text: str) -> list[int]:
        tokens, _ = self.encode_ordinary_flat([text])
        return tokens.tolist()

    def encode_ordinary_batch(self, texts: Sequence[str], num_threads: int | None = None) -> list[list[int]]:
        """Token lists of many texts (``num_threads`` is accepted for the engine interface; the GPU ignores it)."""
        tokens, offsets = self.encode_ordinary_flat(texts)
        flat = tokens.tolist()
        return [flat[offsets[i] : offsets[i + 1]] for i in range(len(texts))]

    def encode_ordinary_flat(self, texts: Sequence[str], num_threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """All texts' tokens in one uint32 array and int64 offsets: text i is tokens[offsets[i]:offsets[i + 1]]."""
        self.stats = BatchStats()
        if self.pattern_id is None:
            encoded, marks = self._host_spans(texts)
        else:
            encoded, marks = [text.encode("utf-8") for text in texts], None
        data = np.frombuffer(b"".join(encoded), np.uint8)
        doc_offsets = np.zeros(len(encoded) + 1, np.int64)
        np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)), out=doc_offsets[1:])
        token_arrays, counts = [], []
        for batch in capacity.plan_batches(np.diff(doc_offsets), self.batch_bytes):
            start, stop = int(doc_offsets[batch.first]), int(doc_offsets[batch.stop])
            batch_marks = None if marks is None else marks[start:stop]
            if batch.oversized:
                tokens = self._encode_oversized(data[start:stop], batch_marks)
                offsets = np.array([0, len(tokens)], np.int64)
            else:
                tokens, offsets = self._encode_batch(
                    data[start:stop], doc_offsets[batch.first : batch.stop + 1] - start, batch_marks
                )
            token_arrays.append(tokens)
            counts.append(np.diff(offsets))
        offsets = np.zeros(len(encoded) + 1, np.int64)
        if counts:
            np.cumsum(np.concatenate(counts), out=offsets[1:])
        tokens = np.concatenate(token_arrays) if token_arrays else np.empty(0, np.uint32)
        return tokens, offsets

    def plan(self, texts: Sequence[str]) -> list[capacity.Batch]:
        """The batches ``encode_ordinary_flat`` would run for ``texts`` under this engine's memory budget."""
        sizes = np.fromiter((len(text.encode("utf-8")) for text in texts), np.int64, len(texts))
        return capacity.plan_batches(sizes, self.batch_bytes)

    # host side -------------------------------------------------------------------------------------------

    def _host_spans(self, texts: Sequence[str]) -> tuple[list[bytes], np.ndarray]:
        """Pre-tokenize on the host: each text's bytes, and span-start marks over all of them."""
        encoded, span_lengths = [], []
        for text in texts:
            if self._normalizer is not None:
                text = self._normalizer(text)
            spans = [span.encode("utf-8") for span in self._pretokenizer(text)]
            encoded.append(b"".join(spans))
            span_lengths.extend(len(span) for span in spans)
        starts = np.cumsum(np.array([0, *span_lengths], np.int64))[:-1]
        marks = np.zeros(int(starts[-1]) + span_lengths[-1] if span_lengths else 0, np.uint8)
        marks[starts] = 1
        return encoded, marks

    def _encode_oversized(self, data: np.ndarray, marks: np.ndarray | None) -> np.ndarray:
        """A document larger than a batch: its spans (found on the host), cut into pieces of whole spans."""
        self.stats.oversized_documents += 1
        if marks is None:
            ends = split_spans(data, self.pattern_id)
            marks = np.zeros(len(data), np.uint8)
            marks[np.concatenate(([0], ends[:-1]))] = 1
        else:
            ends = np.append(np.flatnonzero(marks[1:]) + 1, len(data))
        pieces = []
        for first, stop in capacity.plan_pieces(ends, self.batch_bytes):
            start, end = (int(ends[first - 1]) if first else 0), int(ends[stop - 1])
            if end - start > self.batch_bytes:  # one span longer than a whole batch
                self.stats.cpu_spans += 1
                pieces.append(self.cpu.encode_spans([data[start:end].tobytes()]))
            else:
                piece, _ = self._encode_batch(data[start:end], np.array([0, end - start], np.int64), marks[start:end])
                pieces.append(piece)
        return np.concatenate(pieces)

    # device side -----------------------------------------------------------------------------------------

    def _encode_batch(self, data: np.ndarray, doc_offsets: np.ndarray,
                      marks: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(tokens, per-document token offsets) of documents ``data[doc_offsets[d]:doc_offsets[d + 1]]``."""
        self.stats.batches += 1
        size = len(data)
        if size == 0:
            return np.empty(0, np.uint32), np.zeros(len(doc_offsets), np.int64)
        layout = capacity.chunk_layout(data, doc_offsets, self.chunk_bytes)
        chunks = layout.count
        d_data = cuda.to_device(data)
        d_starts, d_stops, d_doc_stops = (cuda.to_device(a) for a in (layout.starts, layout.stops, layout.doc_stops))
        if marks is None:
            d_marks = self._span_marks(d_data, layout, d_starts, d_stops, d_doc_stops)
        else:
            d_marks = cuda.to_device(marks)

        d_tokens = cuda.device_array(size, np.uint32)
        d_counts = _zeros(size, np.int32)
        d_long_spans = cuda.device_array((size // (self.local_limit + 1) + 1, 2), np.int64)
        d_long_count = _zeros(1, np.int64)
        d_status = _zeros(1, np.int64)
        _launch(kernels.encode_chunks, chunks, d_data, d_starts, d_stops, d_doc_stops, d_marks, self._bpe,
                self.local_encoder, self.local_limit, d_tokens, d_counts, d_long_spans, d_long_count, d_status)
        long_count = int(d_long_count.copy_to_host()[0])
        if long_count:
            self._encode_long_spans(data, d_data, d_long_spans[:long_count].copy_to_host(), d_tokens, d_counts,
                                    d_status)
        status = int(d_status.copy_to_host()[0])
        if status < 0:
            _raise_status(status, data, self.cpu.tables)

        d_totals = cuda.device_array(chunks, np.int64)
        _launch(kernels.chunk_token_totals, chunks, d_starts, d_stops, d_counts, d_totals)
        chunk_offsets = kernels.exclusive_scan(d_totals).copy_to_host()
        total = int(chunk_offsets[-1])
        d_out = cuda.device_array(max(total, 1), np.uint32)
        _launch(kernels.compact_chunks, chunks, d_starts, d_stops, d_counts, d_tokens,
                cuda.to_device(chunk_offsets), d_out)
        tokens = d_out[:total].copy_to_host() if total else np.empty(0, np.uint32)
        return tokens, chunk_offsets[layout.doc_first_chunk]

    def _span_marks(self, d_data, layout: capacity.ChunkLayout, d_starts, d_stops, d_doc_stops):
        """Span-start marks of every document, by the chunked spanner (see ``crayon.gpu.kernels``)."""
        chunks = layout.count
        d_classes = cuda.device_array(d_data.shape[0], np.uint8)
        _launch(kernels.classify_chunks, chunks, d_data, d_starts, d_stops, self._char_tables, d_classes)
        d_marks = _zeros(d_data.shape[0], np.uint8)
        d_entries = cuda.device_array(chunks, np.int64)
        d_exits = cuda.device_array(chunks, np.int64)
        _launch(kernels.span_chunks, chunks, d_classes, d_starts, d_stops, d_doc_stops, self.pattern_id,
                self._char_tables, d_marks, d_entries, d_exits)
        d_first_of_doc = cuda.to_device(layout.first_of_doc)
        passes = 0
        while True:
            d_changed = _zeros(1, np.int32)
            _launch(kernels.fix_chunks, chunks, d_classes, d_starts, d_stops, d_doc_stops, d_first_of_doc,
                    self.pattern_id, self._char_tables, d_marks, d_entries, d_exits, d_changed)
            passes += 1
            if not d_changed.copy_to_host()[0]:
                break
        self.stats.fix_passes.append(passes)
        return d_marks

    def _encode_long_spans(self, data, d_data, long_spans, d_tokens, d_counts, d_status) -> None:
        """Spans longer than a thread's local scratch: one thread each, in groups whose global scratch fits the
        long-span budget; a span that alone exceeds it goes to the CPU engine."""
        heap = self.long_encoder == HEAP
        long_spans = long_spans[np.argsort(long_spans[:, 0])]
        lengths = long_spans[:, 1] - long_spans[:, 0]
        scratch_sizes, alive_sizes = capacity.long_span_scratch(lengths, heap)
        scratch_bytes = scratch_sizes * 8 + alive_sizes
        groups, too_big = capacity.plan_long_groups(scratch_bytes, self.long_scratch_budget)
        self.stats.long_spans += len(long_spans)
        self.stats.long_span_groups += len(groups)
        for first, stop in groups:
            scratch_offsets = np.zeros(stop - first + 1, np.int64)
            alive_offsets = np.zeros(stop - first + 1, np.int64)
            np.cumsum(scratch_sizes[first:stop], out=scratch_offsets[1:])
            np.cumsum(alive_sizes[first:stop], out=alive_offsets[1:])
            d_scratch = cuda.device_array(max(int(scratch_offsets[-1]), 1), np.int64)
            d_alive = cuda.device_array(max(int(alive_offsets[-1]), 1), np.uint8)
            _launch(kernels.encode_long_spans, stop - first, d_data, cuda.to_device(long_spans[first:stop]),
                    cuda.to_device(scratch_offsets), cuda.to_device(alive_offsets), self._bpe, self.long_encoder,
                    d_scratch, d_alive, d_tokens, d_counts, d_status)
        for index in too_big:
            start, stop = (int(x) for x in long_spans[index])
            tokens = self.cpu.encode_spans([data[start:stop].tobytes()])
            self.stats.cpu_spans += 1
            d_tokens[start : start + len(tokens)].copy_to_device(tokens)
            d_counts[start : start + 1].copy_to_device(np.array([len(tokens)], np.int32))


def make_engine(tokenizer, **options) -> CudaEngine:
    """The CUDA engine of a tokenizer (``crayon.tokenizer.make_engine`` calls this for backend "cuda").

    ``options``: ``memory_budget`` (device bytes per batch, default ``$CRAYON_GPU_MEMORY_BUDGET`` or 2 GiB)
    and ``chunk_bytes`` (text bytes per GPU thread)."""
    available, reason = capacity.cuda_status()
    if not available:
        raise BackendUnavailableError(
            f"backend 'cuda' is unavailable: {reason}. Use backend='jit' (or 'auto'), or run on a machine "
            "with an NVIDIA GPU and numba-cuda (pip install 'crayon[gpu]')"
        )
    return CudaEngine(tokenizer, **options)

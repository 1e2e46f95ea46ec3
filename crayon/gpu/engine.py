"""The CUDA engine (backend "cuda"): the JIT engine's exact BPE, and greedy longest match, over batches on the GPU.

``crayon.gpu.kernels`` explains how a batch is split over GPU threads and ``crayon.gpu.capacity`` how buffers
are sized: from the input, under a memory budget, so no document is ever truncated.

``CudaEngine`` (BPE) keeps a ``JitEngine`` of the same tokenizer for what the GPU reuses (its tables and
encoder choice) and for the one thing it hands back to the CPU: a span whose scratch alone would exceed the
memory budget. Where the tokenizer has no jit pre-tokenizer (a custom pre-tokenizer, another regex), its own
pre-tokenizer splits on the host and the GPU encodes the spans; a normalizer runs on the host first.
``LongestMatchGpu`` is the GPU twin of ``crayon.jit.longest.encode_spans``.

A document larger than a whole batch is cut into pieces of whole spans, found on the host by the jit
pre-tokenizer (one CPU pass; with the default budget that is a document of hundreds of megabytes).
"""

from __future__ import annotations

import functools
import time
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from numba import cuda

from crayon.errors import BackendUnavailableError, UnsupportedComponentError
from crayon.gpu import capacity, kernels
from crayon.gpu.kernels import LONGEST_CHAIN, THREADS_PER_BLOCK, blocks_for
from crayon.jit import longest
from crayon.jit.dat import check_dat_arrays
from crayon.jit.backtrack import new_validity_memo
from crayon.jit.engine import JitEngine
from crayon.jit.kernels import BACKTRACK, HEAP, MERGE_LOOP
from crayon.jit.status import raise_for_status
from crayon.jit.pretokenize import pattern_id_of, split_spans, unicode_tables
from crayon.jit.regex_vm import normalized_texts
from crayon.reference.pretokenize import PatternSpanner, WholeText


@dataclass
class BatchStats:
    """What the last ``encode_ordinary_flat`` did, for benchmarks and tests."""

    batches: int = 0
    oversized_documents: int = 0
    fix_passes: list[int] = field(default_factory=list)
    long_spans: int = 0
    long_span_groups: int = 0
    cpu_spans: int = 0
    seconds: dict[str, float] = field(default_factory=dict)  # per stage, when the engine profiles


MEMO_SLOTS = 1 << 20  # the backtracking encoder's pair-check memo, shared by all GPU threads (8 MiB)
_DEVICE_TABLES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def device_tables(model, jit_engine: JitEngine) -> tuple[tuple, "cuda.devicearray.DeviceNDArray"]:
    """Device copies of the JIT engine's kernel tables of a BPE model, and a memo, made once per model."""
    tables = _DEVICE_TABLES.get(model)
    if tables is None:
        bpe = tuple(cuda.to_device(array) for array in jit_engine.kernel_tables)
        tables = _DEVICE_TABLES[model] = bpe, cuda.to_device(new_validity_memo(MEMO_SLOTS))
    return tables


@functools.cache
def device_char_tables() -> tuple:
    """Device copies of the pre-tokenizer's character tables."""
    return tuple(cuda.to_device(table) for table in unicode_tables())


@functools.cache
def _placeholder(dtype) -> "cuda.devicearray.DeviceNDArray":
    """A one-element device array standing for an argument a kernel mode does not read."""
    return cuda.to_device(np.zeros(1, dtype))


def _zero(dtype):
    """A one-element device counter or flag, zeroed."""
    return cuda.to_device(np.zeros(1, dtype))


def _launch(kernel, count: int, *args) -> None:
    if count:
        kernel[blocks_for(count), THREADS_PER_BLOCK](*args)


def default_memory_budget() -> int:
    """``capacity.memory_budget()`` where set; else the default, raised up to half the device's free memory."""
    free, _ = cuda.current_context().get_memory_info()
    return capacity.memory_budget(free_device_bytes=None if free == float("inf") else int(free))


class _GpuPipeline:
    """Batches, chunks, spans and compaction; subclasses supply the model stage (``_encode_marked_spans``)."""

    token_dtype = np.uint32

    def __init__(self, pattern_id: int | None, memory_budget: int | None, chunk_bytes: int, profile: bool):
        self.profile = profile  # time each stage (waiting for the GPU after each) into stats.seconds
        self.pattern_id = pattern_id  # None: marks come from the host; LONGEST_CHAIN: tokens are the spans
        self.memory_budget = default_memory_budget() if memory_budget is None else memory_budget
        self.chunk_bytes = chunk_bytes
        batch_share = int(self.memory_budget * (1 - capacity.LONG_SCRATCH_SHARE))
        self.batch_bytes = capacity.max_batch_bytes(batch_share, chunk_bytes)
        self.long_scratch_budget = self.memory_budget - batch_share
        self._char_tables = device_char_tables() if pattern_id is not None and pattern_id >= 0 else None
        self._dat = None  # the DAT a LONGEST_CHAIN spanner walks
        self.stats = BatchStats()

    @contextmanager
    def _stage(self, name: str):
        if not self.profile:
            yield
            return
        started = time.perf_counter()
        yield
        cuda.synchronize()
        self.stats.seconds[name] = self.stats.seconds.get(name, 0.0) + time.perf_counter() - started

    def plan(self, texts: Sequence[str]) -> list[capacity.Batch]:
        """The batches an encode of ``texts`` runs under this engine's memory budget."""
        sizes = np.fromiter((len(text.encode("utf-8")) for text in texts), np.int64, len(texts))
        return capacity.plan_batches(sizes, self.batch_bytes)

    def _encode_flat(self, encoded: Sequence[bytes], marks: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Tokens and int64 offsets of UTF-8 texts; ``marks``: span starts found on the host, if any."""
        self.stats = BatchStats()
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
        tokens = np.concatenate(token_arrays) if token_arrays else np.empty(0, self.token_dtype)
        return tokens, offsets

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
                pieces.append(self._encode_span_on_cpu(data[start:end]))
            else:
                piece, _ = self._encode_batch(data[start:end], np.array([0, end - start], np.int64), marks[start:end])
                pieces.append(piece)
        return np.concatenate(pieces)

    def _encode_batch(self, data: np.ndarray, doc_offsets: np.ndarray,
                      marks: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(tokens, per-document token offsets) of documents ``data[doc_offsets[d]:doc_offsets[d + 1]]``."""
        self.stats.batches += 1
        size = len(data)
        if size == 0:
            return np.empty(0, self.token_dtype), np.zeros(len(doc_offsets), np.int64)
        with self._stage("layout and upload"):
            layout = capacity.chunk_layout(data, doc_offsets, self.chunk_bytes)
            chunks = layout.count
            d_data = cuda.to_device(data)
            d_chunks = tuple(cuda.to_device(a) for a in (layout.starts, layout.stops, layout.doc_stops))
            d_marks = None if marks is None else cuda.to_device(marks)
        if d_marks is None:
            with self._stage("pre-tokenize"):
                d_marks = self._span_marks(d_data, layout, d_chunks)
        with self._stage("model"):
            d_tokens = cuda.device_array(size, self.token_dtype)
            d_counts = cuda.device_array(size, np.int32)  # the model kernel zeroes each chunk's counts
            self._encode_marked_spans(data, d_data, chunks, d_chunks, d_marks, d_tokens, d_counts)
        with self._stage("compact"):
            d_totals = cuda.device_array(chunks, np.int64)
            _launch(kernels.chunk_token_totals, chunks, d_chunks[0], d_chunks[1], d_counts, d_totals)
            chunk_offsets = kernels.exclusive_scan(d_totals).copy_to_host()
            total = int(chunk_offsets[-1])
            d_out = cuda.device_array(max(total, 1), self.token_dtype)
            _launch(kernels.compact_chunks, chunks, d_chunks[0], d_chunks[1], d_counts, d_tokens,
                    cuda.to_device(chunk_offsets), d_out)
        with self._stage("download"):
            tokens = d_out[:total].copy_to_host() if total else np.empty(0, self.token_dtype)
        return tokens, chunk_offsets[layout.doc_first_chunk]

    def _span_marks(self, d_data, layout: capacity.ChunkLayout, d_chunks):
        """Span-start marks of every document, by the chunked spanner (see ``crayon.gpu.kernels``)."""
        chunks = layout.count
        d_starts, d_stops, d_doc_stops = d_chunks
        char_tables = self._char_tables or (_placeholder(np.uint16), _placeholder(np.uint8), _placeholder(np.uint16))
        dat = self._dat or (_placeholder(np.int32),) * 3
        if self._char_tables is None:
            d_classes = _placeholder(np.uint8)
        else:
            d_classes = cuda.device_array(d_data.shape[0], np.uint8)
            _launch(kernels.classify_chunks, chunks, d_data, d_starts, d_stops, char_tables, d_classes)
        d_marks = cuda.device_array(d_data.shape[0], np.uint8)  # span_chunks clears each chunk's marks
        d_entries = cuda.device_array(chunks, np.int64)
        d_exits = cuda.device_array(chunks, np.int64)
        _launch(kernels.span_chunks, chunks, d_data, d_classes, d_starts, d_stops, d_doc_stops, self.pattern_id,
                char_tables, dat, d_marks, d_entries, d_exits)
        d_first_of_doc = cuda.to_device(layout.first_of_doc)
        passes = 0
        while True:
            d_changed = _zero(np.int32)
            _launch(kernels.fix_chunks, chunks, d_data, d_classes, d_starts, d_stops, d_doc_stops, d_first_of_doc,
                    self.pattern_id, char_tables, dat, d_marks, d_entries, d_exits, d_changed)
            passes += 1
            if not d_changed.copy_to_host()[0]:
                break
        self.stats.fix_passes.append(passes)
        return d_marks

    def _encode_marked_spans(self, data, d_data, chunks, d_chunks, d_marks, d_tokens, d_counts) -> None:
        raise NotImplementedError

    def _encode_span_on_cpu(self, span: np.ndarray) -> np.ndarray:
        raise NotImplementedError


class CudaEngine(_GpuPipeline):
    """Encodes batches of ordinary text with exact BPE on a CUDA GPU; the same tokens as the JIT engine."""

    name = "cuda"
    capabilities = frozenset({"gpu", "compiled"})

    def __init__(self, tokenizer, *, memory_budget: int | None = None,
                 chunk_bytes: int = capacity.DEFAULT_CHUNK_BYTES, encoder: str | None = None, profile: bool = False):
        self.cpu = JitEngine(tokenizer, encoder=encoder)
        super().__init__(self.cpu.pattern_id, memory_budget, chunk_bytes, profile)
        self._normalizer = tokenizer.normalizer
        self._pretokenizer = tokenizer.pretokenizer
        backtrack = self.cpu.encoder == "backtrack"
        self.local_encoder = BACKTRACK if backtrack else MERGE_LOOP
        self.local_limit = capacity.BACKTRACK_LOCAL_BYTES if backtrack else capacity.MERGE_LOOP_LOCAL_BYTES
        self.long_encoder = BACKTRACK if backtrack else HEAP
        self._bpe, self._memo = device_tables(tokenizer.model, self.cpu)

    def encode_ordinary(self, text: str) -> list[int]:
        return self.encode_ordinary_array(text).tolist()

    def encode_ordinary_array(self, text: str) -> np.ndarray:
        tokens, _ = self.encode_ordinary_flat([text])
        return tokens

    def encode_ordinary_batch(self, texts: Sequence[str], num_threads: int | None = None) -> list[list[int]]:
        """Token lists of many texts (``num_threads`` is accepted for the engine interface; the GPU ignores it)."""
        tokens, offsets = self.encode_ordinary_flat(texts)
        flat = tokens.tolist()
        return [flat[offsets[i] : offsets[i + 1]] for i in range(len(texts))]

    def encode_ordinary_flat(self, texts: Sequence[str],
                             num_threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """All texts' tokens in one uint32 array and int64 offsets: text i is tokens[offsets[i]:offsets[i + 1]]."""
        if (self.cpu.tables["byte_tokens"] < 0).any():  # a byte without a token: the CPU engine's exact path
            return self.cpu.encode_ordinary_flat(texts)
        if self.pattern_id is not None:
            return self._encode_flat([text.encode("utf-8") for text in normalized_texts(self._normalizer, texts)], None)
        return self._encode_flat(*self._host_spans(texts))

    def _host_spans(self, texts: Sequence[str]) -> tuple[list[bytes], np.ndarray]:
        """Pre-tokenize on the host: each text's bytes, and span-start marks over all of them."""
        encoded, span_lengths = [], []
        for text in texts:
            if self._normalizer is not None:
                text = self._normalizer(text)
            spans = [span.encode("utf-8") for span in self._pretokenizer(text)]
            encoded.append(b"".join(spans))
            span_lengths.extend(len(span) for span in spans)
        lengths = np.array(span_lengths, np.int64)
        marks = np.zeros(int(lengths.sum()), np.uint8)
        marks[np.cumsum(lengths) - lengths] = 1
        return encoded, marks

    def _encode_span_on_cpu(self, span: np.ndarray) -> np.ndarray:
        return self.cpu.encode_spans([span.tobytes()])

    def _encode_marked_spans(self, data, d_data, chunks, d_chunks, d_marks, d_tokens, d_counts) -> None:
        size = len(data)
        d_long_spans = cuda.device_array((size // (self.local_limit + 1) + 1, 2), np.int64)
        d_long_count = _zero(np.int64)
        d_status = _zero(np.int64)
        _launch(kernels.encode_chunks, chunks, d_data, *d_chunks, d_marks, self._bpe, self._memo, self.local_encoder,
                self.local_limit, d_tokens, d_counts, d_long_spans, d_long_count, d_status)
        long_count = int(d_long_count.copy_to_host()[0])
        if long_count:
            self._encode_long_spans(data, d_data, d_long_spans[:long_count].copy_to_host(), d_tokens, d_counts,
                                    d_status)
        status = int(d_status.copy_to_host()[0])
        if status < 0:
            raise_for_status(status, data, self.cpu.tables["byte_tokens"])

    def _encode_long_spans(self, data, d_data, long_spans, d_tokens, d_counts, d_status) -> None:
        """Spans longer than a thread's local scratch: one thread each, in groups whose global scratch fits the
        long-span budget; a span that alone exceeds it goes to the CPU engine."""
        long_spans = long_spans[np.argsort(long_spans[:, 0])]
        lengths = long_spans[:, 1] - long_spans[:, 0]
        scratch_sizes, alive_sizes = capacity.long_span_scratch(lengths, heap=self.long_encoder == HEAP)
        groups, too_big = capacity.plan_long_groups(scratch_sizes * 8 + alive_sizes, self.long_scratch_budget)
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
                    cuda.to_device(scratch_offsets), cuda.to_device(alive_offsets), self._bpe, self._memo,
                    self.long_encoder,
                    d_scratch, d_alive, d_tokens, d_counts, d_status)
        for index in too_big:
            start, stop = (int(x) for x in long_spans[index])
            tokens = self._encode_span_on_cpu(data[start:stop])
            self.stats.cpu_spans += 1
            d_tokens[start : start + len(tokens)].copy_to_device(tokens)
            d_counts[start : start + 1].copy_to_device(np.array([len(tokens)], np.int32))


class LongestMatchGpu(_GpuPipeline):
    """Greedy longest match over a DAT with byte fallback on the GPU: ``crayon.jit.longest.encode_spans`` of
    each text cut by ``pattern`` (a jit pre-tokenizer name or regex), or of each whole text when ``pattern``
    is None (then the chunked spanner follows the chain of tokens itself)."""

    token_dtype = np.int32

    def __init__(self, base: np.ndarray, check: np.ndarray, values: np.ndarray, fallback: np.ndarray, *,
                 pattern: str | None = None, memory_budget: int | None = None,
                 chunk_bytes: int = capacity.DEFAULT_CHUNK_BYTES, profile: bool = False):
        check_dat_arrays(base, check, values)
        if np.asarray(fallback).shape != (256,):
            raise ValueError("fallback must hold 256 ids")
        pattern_id = LONGEST_CHAIN if pattern is None else pattern_id_of(pattern)
        super().__init__(pattern_id, memory_budget, chunk_bytes, profile)
        self._host_dat = (base, check, values, np.ascontiguousarray(fallback, np.int32))
        self._dat = tuple(cuda.to_device(np.ascontiguousarray(array)) for array in (base, check, values))
        self._fallback = cuda.to_device(self._host_dat[3])

    def encode_flat(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """All texts' ids in one int32 array and int64 offsets: text i is ids[offsets[i]:offsets[i + 1]]."""
        return self._encode_flat([text.encode("utf-8") for text in texts], None)

    def _encode_oversized(self, data: np.ndarray, marks: np.ndarray | None) -> np.ndarray:
        if self.pattern_id == LONGEST_CHAIN:  # no spans to cut at: the CPU encodes the whole text
            self.stats.oversized_documents += 1
            self.stats.cpu_spans += 1
            return self._encode_span_on_cpu(data)
        return super()._encode_oversized(data, marks)

    def _encode_span_on_cpu(self, span: np.ndarray) -> np.ndarray:
        return longest.encode_spans(span, np.array([len(span)], np.int64), *self._host_dat)

    def _encode_marked_spans(self, data, d_data, chunks, d_chunks, d_marks, d_tokens, d_counts) -> None:
        _launch(kernels.longest_chunks, chunks, d_data, *d_chunks, d_marks, self._dat, self._fallback, d_tokens,
                d_counts)


def make_engine(tokenizer, **options) -> CudaEngine:
    """The CUDA engine of a tokenizer (``crayon.tokenizer.make_engine`` calls this for backend "cuda").

    ``options``: ``memory_budget`` (device bytes per batch; default ``$CRAYON_GPU_MEMORY_BUDGET``, else half
    the free device memory, at most 8 GiB), ``chunk_bytes`` (text bytes per GPU thread), ``profile`` (time
    each stage into ``engine.stats.seconds``) and ``encoder`` (the JIT span encoder: "backtrack" where it is
    exact, else "heap"; the GPU runs the heap for long spans when "merge_loop" is asked)."""
    available, reason = capacity.cuda_status()
    if not available:
        raise BackendUnavailableError(
            f"backend 'cuda' is unavailable: {reason}. Use backend='jit' (or 'auto'), or run on a machine "
            "with an NVIDIA GPU and numba-cuda (pip install 'crayon-tokenizer[gpu]')"
        )
    if tokenizer.algorithm == "longest":
        return LongestMatchCudaEngine(tokenizer, **options)
    return CudaEngine(tokenizer, **options)


class LongestMatchCudaEngine:
    """The CUDA engine of a longest-match tokenizer: ``LongestMatchGpu`` over the model's DAT, cut by the
    tokenizer's pattern (or following the chain of tokens over the whole text when it has no pattern)."""

    name = "cuda"
    capabilities = frozenset({"gpu", "compiled"})

    def __init__(self, tokenizer, **options):
        if tokenizer.normalizer is not None:
            raise UnsupportedComponentError("the CUDA longest-match engine has no normalizer; use backend='jit'")
        if isinstance(tokenizer.pretokenizer, WholeText):
            pattern = None
        elif isinstance(tokenizer.pretokenizer, PatternSpanner):
            pattern = tokenizer.pretokenizer.pattern
        else:
            raise UnsupportedComponentError(
                f"the CUDA longest-match engine cannot run pre-tokenizer {tokenizer.pretokenizer!r}; use backend='jit'")
        model = tokenizer.model
        self._gpu = LongestMatchGpu(model.base, model.check, model.values, model.fallback, pattern=pattern, **options)

    def encode_ordinary_flat(self, texts: Sequence[str], num_threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """All texts' ids in one uint32 array and int64 offsets (``num_threads`` is ignored on the GPU)."""
        ids, offsets = self._gpu.encode_flat(texts)
        return ids.astype(np.uint32, copy=False), offsets

    def encode_ordinary_batch(self, texts: Sequence[str], num_threads: int | None = None) -> list[list[int]]:
        ids, offsets = self.encode_ordinary_flat(texts)
        return [ids[offsets[i] : offsets[i + 1]].tolist() for i in range(len(texts))]

    def encode_ordinary_array(self, text: str) -> np.ndarray:
        return self.encode_ordinary_flat([text])[0]

    def encode_ordinary(self, text: str) -> list[int]:
        return self.encode_ordinary_array(text).tolist()

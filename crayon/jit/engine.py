"""The jit engine: ordinary text -> tokens in Numba kernels, exactly the reference engine's tokens.

For a tokenizer whose pattern has a jit pre-tokenizer (cl100k_base, o200k_base, r50k_base) and that has no
normalizer or custom pre-tokenizer, one kernel walks the whole UTF-8 text: it finds each span with the state
machine of ``crayon.jit.pretokenize``, looks the span up in the thread's piece cache and, on a miss, encodes it
with the span encoder. Any other tokenizer is split by its own (reference) pre-tokenizer and only the span
encoding runs in the kernel. Both are exact; the second is bounded by the Python pre-tokenizer's speed.

Before a span reaches an encoder: a one-byte span is its byte's token; a span of 2 to 16 bytes is looked up in
the thread's piece cache, then in the table of the vocabulary's short tokens (a span that is a token is that token);
only then is it encoded, and cached. Both lookups are prefetched ``PREFETCH_DISTANCE`` spans ahead: on text seen
for the first time they are mostly cache misses (first sight +6-15% on enwik8 and multilingual, -3 to -7% on
Python code).

Span encoders (``ENCODERS``), identical tokens: ``backtrack`` (``crayon.jit.backtrack``, the default), ``heap``
and ``merge_loop`` (``crayon.jit.bpe``). The heap encoder hands spans of up to ``SHORT_SPAN`` bytes to the merge
loop, and so does the backtracking encoder for such a span that ends in an ASCII byte: on those (English words,
markup, code) the merge loop was measured 20% faster first sight (no validity memo to fill), while backtracking
is faster on non-ASCII text (multilingual.txt: 1.6x the heap encoder; its spans are long and rarely repeat) and
O(n) on a long span. The engine uses the heap encoder, with a note in ``backtrack_violation``, for a vocabulary
where backtracking is not exact.

``encode_docs_kernel`` and ``encode_spans_kernel`` run from the ahead-of-time compiled extension of
``crayon.jit.aot`` where it can be built (``JitEngine.kernels``), else as numba dispatchers: the same functions.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np

from crayon.errors import BackendUnavailableError, CartridgeError, UnknownTokenError, UnsupportedComponentError
from crayon.jit import aot
from crayon.jit.backtrack import (
    BACKTRACK_TABLE_NAMES,
    SPLIT_LEFT,
    backtrack_span,
    backtracking_violation,
    check_backtrack_tables,
    interleave_dat,
    new_validity_memo,
    prefix_states,
    whole_span_tokens,
)
from crayon.jit.bpe import (
    BPE_TABLE_NAMES,
    UNKNOWN_BYTE,
    build_bpe_tables,
    check_bpe_tables,
    heap_merge,
    merge_loop,
    vocab_lookup,
    write_byte_tokens,
)
from crayon.jit.cache import (
    cache_lookup,
    cache_store,
    new_piece_cache,
    piece_key,
    piece_row,
    prefetch_piece,
    short_token_lookup,
)
from crayon.jit.lazy import njit
from crayon.jit.pretokenize import PATTERN_IDS, classify_characters, fill_span_ends, jit_pattern_of, unicode_tables
from crayon.reference.cache import DEFAULT_BUCKETS, MAX_PIECE_BYTES, MAX_PIECE_TOKENS

MERGE_LOOP, HEAP, BACKTRACK = 0, 1, 2
ENCODERS = {"merge_loop": MERGE_LOOP, "heap": HEAP, "backtrack": BACKTRACK}
DEFAULT_ENCODER = "backtrack"
SHORT_SPAN = 16
MEMO_SLOTS = 1 << 18
SPAN_BATCH = 256  # span ends found per call of the pre-tokenizer
PREFETCH_DISTANCE = 3  # prefetch the lookups of the span this far ahead (of 1, 2 and 3, 3 measured best)
NO_PROGRESS = -3  # the pre-tokenizer returned a span that is empty or past the text
NEED_SCRATCH = -4  # a span is longer than the scratch buffers: grow them and resume
TABLE_NAMES = BPE_TABLE_NAMES + BACKTRACK_TABLE_NAMES
KERNEL_CHOICES = ("auto", "aot", "numba")


@njit(cache=True, _nrt=False)
def encode_span_into(data, start, end, out, n, bpe, encoder, scratch, alive, memo):
    """Encode the span data[start:end] into out[n:]; returns the new n or a negative status.

    ``bpe`` is ``JitEngine.kernel_tables``.
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
def encode_piece(data, start, end, out, n, bpe, encoder, cache, scratch, alive, memo):
    """``encode_span_into`` through the piece cache (inlined: a cache hit makes no call)."""
    length = end - start
    if length == 1:
        token = bpe[0][data[start]]
        if token < 0:
            return UNKNOWN_BYTE
        out[n] = token
        return n + 1
    if length > MAX_PIECE_BYTES:
        return encode_span_into(data, start, end, out, n, bpe, encoder, scratch, alive, memo)
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
    written = encode_span_into(data, start, end, out, n, bpe, encoder, scratch, alive, memo)
    if n < written <= n + MAX_PIECE_TOKENS:
        cache_store(cache, low, high, length, row, out, n, written - n)
    return written


@njit(cache=True, nogil=True, _nrt=False)
def encode_docs_kernel(data, doc_offsets, last_doc, pattern_id, char_tables, bpe, encoder, buffers, out, counts, resume):
    """Encode the texts data[doc_offsets[d]:doc_offsets[d + 1]] for d in [resume[0], last_doc) into ``out``.

    Spans come from the jit pre-tokenizer. ``buffers`` is ``(cache, memo, scratch, alive, classes, ends)``: the
    thread's piece cache and validity memo, encoder scratch (``scratch_capacity``), character classes for the longest text, and
    SPAN_BATCH span ends. ``resume`` is ``[doc, pos, n, n at the doc's start, 0, first doc]`` to start from; counts[d -
    first doc] receives each text's number of tokens. Returns the total, or a negative status; on NEED_SCRATCH
    ``resume`` says where to go on and resume[4] how long a span the scratch must hold. Allocation-free
    (``_nrt=False``), so no reference counting slows the loop.
    """
    cache, memo, scratch, alive, classes, ends = buffers
    first_doc = resume[5]
    doc, pos, n, before = resume[0], resume[1], resume[2], resume[3]
    while doc < last_doc:
        text = data[doc_offsets[doc] : doc_offsets[doc + 1]]
        classify_characters(text, 0, text.shape[0], char_tables, classes)
        while pos < text.shape[0]:
            found = fill_span_ends(classes, pos, text.shape[0], pattern_id, char_tables, ends)
            for i in range(found):
                if i + PREFETCH_DISTANCE < found:
                    ahead = i + PREFETCH_DISTANCE
                    prefetch_piece(cache, bpe[8], text, ends[ahead - 1], ends[ahead])
                end = ends[i]
                if end <= pos or end > text.shape[0]:
                    return NO_PROGRESS
                if end - pos >= alive.shape[0]:
                    resume[0], resume[1], resume[2], resume[3], resume[4] = doc, pos, n, before, end - pos
                    return NEED_SCRATCH
                n = encode_piece(text, pos, end, out, n, bpe, encoder, cache, scratch, alive, memo)
                if n < 0:
                    return n
                pos = end
        counts[doc - first_doc] = n - before
        doc += 1
        pos = 0
        before = n
    return n


@njit(cache=True, nogil=True, _nrt=False)
def encode_spans_kernel(data, span_ends, bpe, encoder, cache, memo, scratch, alive, out):
    """Encode the spans data[span_ends[i - 1]:span_ends[i]] (from 0) into ``out``; the count or a negative status.

    ``scratch`` and ``alive`` must hold the longest span (``scratch_capacity``).
    """
    n = 0
    pos = 0
    for i, end in enumerate(span_ends):
        if i + PREFETCH_DISTANCE < span_ends.shape[0]:
            ahead = i + PREFETCH_DISTANCE
            prefetch_piece(cache, bpe[8], data, span_ends[ahead - 1], span_ends[ahead])
        if end < pos or end > data.shape[0] or end - pos >= alive.shape[0]:
            return NO_PROGRESS
        n = encode_piece(data, pos, end, out, n, bpe, encoder, cache, scratch, alive, memo)
        if n < 0:
            return n
        pos = end
    return n


def kernel_tables(tables: dict[str, np.ndarray]) -> tuple:
    """The tuple the kernels take: (byte_tokens, pair_table, token_offsets, token_bytes, vocab_index, whole_spans,
    token_rows, dat_rows, short_tokens, prefix_states(dat_rows)).

    A span that is a reachable token encodes to that token anyway, so ``whole_spans[0]`` (look whole spans up in
    ``vocab_index``) is set only where the model has the whole-span lookup and some token is unreachable; spans of
    up to 16 bytes are looked up in ``short_tokens``, which holds the tokens the lookup may return.
    """
    reachable = tables["token_rows"][:, SPLIT_LEFT] >= 0
    whole_spans = np.array([bool((whole_span_tokens(tables) & ~reachable).any())], np.int64)
    dat_rows = interleave_dat(tables["dat_base"], tables["dat_check"], tables["dat_values"])
    arrays = tuple(tables[name] for name in BPE_TABLE_NAMES[:5]) + (
        whole_spans, tables["token_rows"], dat_rows, tables["short_tokens"], prefix_states(dat_rows))
    return tuple(_read_only(array) for array in arrays)


def _read_only(array: np.ndarray) -> np.ndarray:
    """A read-only view: tables built here and tables mapped from a cartridge then share one compiled kernel."""
    view = np.ascontiguousarray(array).view()
    view.flags.writeable = False
    return view


def scratch_capacity(scratch: np.ndarray, alive: np.ndarray) -> int:
    """The longest span that encoder scratch of these sizes can encode."""
    return min(len(scratch) // 5, len(alive) - 1)


_TABLES_OF_MODEL: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def tables_for(model) -> dict[str, np.ndarray]:
    """The jit tables of a BPE model, built once per model object."""
    tables = _TABLES_OF_MODEL.get(model)
    if tables is None:
        tables = _TABLES_OF_MODEL[model] = build_bpe_tables(model)
    return tables


def _raise_status(status: int, data: np.ndarray, tables: dict[str, np.ndarray]) -> None:
    if status == NO_PROGRESS:
        raise RuntimeError("the jit pre-tokenizer returned an empty span (a stale numba cache? clear __pycache__)")
    missing = [int(byte) for byte in np.unique(data) if tables["byte_tokens"][byte] < 0]
    if status == UNKNOWN_BYTE and missing:
        raise UnknownTokenError(f"byte {bytes(missing[:1])!r} has no token in this vocabulary")
    raise CartridgeError("the BPE tables are corrupt: a kernel found an index outside its arrays")


class JitEngine:
    """Encodes ordinary text with Numba kernels; see the module docstring."""

    name = "jit"

    def __init__(self, tokenizer, *, encoder: str | None = None, tables: dict[str, np.ndarray] | None = None,
                 cache_buckets: int = DEFAULT_BUCKETS, memo_slots: int = MEMO_SLOTS, kernels: str = "auto"):
        self.tables = tables_for(tokenizer.model) if tables is None else tables
        check_bpe_tables(self.tables)
        check_backtrack_tables(self.tables)
        self.backtrack_violation = backtracking_violation(self.tables)
        if encoder is None:
            encoder = "heap" if self.backtrack_violation else DEFAULT_ENCODER
        if encoder not in ENCODERS:
            raise ValueError(f"unknown span encoder {encoder!r}; choose one of {', '.join(ENCODERS)}")
        if encoder == "backtrack" and self.backtrack_violation:
            raise UnsupportedComponentError(f"backtracking is not exact for this vocabulary: {self.backtrack_violation}")
        self.encoder = encoder
        self.kernel_tables = kernel_tables(self.tables)
        self._encoder_id = ENCODERS[encoder]
        self._cache_buckets, self._memo_slots = cache_buckets, memo_slots
        self._local = threading.local()
        self._id_objects = None
        known = jit_pattern_of(tokenizer)
        self.pattern_id = None if known is None else PATTERN_IDS[known]
        self._char_tables = None if known is None else unicode_tables()
        self._normalizer = tokenizer.normalizer
        self._pretokenizer = tokenizer.pretokenizer
        if kernels not in KERNEL_CHOICES:
            raise ValueError(f"unknown kernels {kernels!r}; choose one of {', '.join(KERNEL_CHOICES)}")
        self._kernel_choice = kernels
        self._kernels = None

    @property
    def kernels(self):
        """The module whose ``encode_docs_kernel`` and ``encode_spans_kernel`` run, chosen at the first encode:
        the ahead-of-time compiled extension of ``crayon.jit.aot`` (``kernels="auto"`` or ``"aot"``), else this
        module, whose kernels are numba dispatchers (``"numba"``, or where the extension cannot be built)."""
        if self._kernels is None:
            compiled = None if self._kernel_choice == "numba" else aot.load_kernels()
            if compiled is None and self._kernel_choice == "aot":
                reason = "CRAYON_AOT=0" if os.environ.get("CRAYON_AOT") == "0" else "it could not be built"
                raise BackendUnavailableError(f"the ahead-of-time compiled kernels are unavailable: {reason}")
            if compiled is not None and (aot.argument_spec(self.kernel_tables) != aot.BPE_TABLES or (
                    self._char_tables is not None and aot.argument_spec(self._char_tables) != aot.CHAR_TABLES)):
                raise CartridgeError("the BPE tables do not have the types the compiled kernels take")
            self._kernels = compiled or sys.modules[__name__]
        return self._kernels

    @property
    def kernels_kind(self) -> str:
        """"aot" (the compiled extension) or "numba" (the dispatchers): which kernels ``kernels`` is."""
        return "numba" if self.kernels is sys.modules[__name__] else "aot"

    def _buffers(self, longest_span: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """This thread's (piece cache, validity memo, scratch, alive), the scratch grown to hold ``longest_span``."""
        local = self._local
        if not hasattr(local, "cache"):
            local.cache, local.memo = new_piece_cache(self._cache_buckets), new_validity_memo(self._memo_slots)
            local.scratch, local.alive = np.empty(5 * 256, np.int64), np.empty(256 + 1, np.uint8)
        if longest_span > scratch_capacity(local.scratch, local.alive):
            capacity = max(longest_span, 2 * scratch_capacity(local.scratch, local.alive))
            local.scratch, local.alive = np.empty(5 * capacity, np.int64), np.empty(capacity + 1, np.uint8)
        return local.cache, local.memo, local.scratch, local.alive

    def clear_caches(self) -> None:
        """Empty this thread's piece cache and validity memo (benchmarks time a text as if seen for the first time)."""
        for table in self._buffers()[:2]:
            table[:] = 0

    def _encode_docs(self, data: np.ndarray, doc_offsets: np.ndarray, first: int, last: int):
        """(tokens, counts) of texts first..last-1 of ``data``, with the fused kernel."""
        out = np.empty(int(doc_offsets[last] - doc_offsets[first]), np.uint32)
        counts = np.zeros(last - first, np.int64)
        classes = np.empty(int(np.diff(doc_offsets[first : last + 1]).max(initial=0)), np.uint8)
        ends = np.empty(SPAN_BATCH, np.int64)
        resume = np.array([first, 0, 0, 0, 0, first], np.int64)
        needed = 0
        while True:
            buffers = self._buffers(needed) + (classes, ends)
            status = self.kernels.encode_docs_kernel(data, doc_offsets, last, self.pattern_id, self._char_tables,
                                                     self.kernel_tables, self._encoder_id, buffers, out, counts, resume)
            if status != NEED_SCRATCH:
                break
            needed = int(resume[4])
        if status < 0:
            _raise_status(status, data, self.tables)
        return out[:status], counts

    def _split(self, text: str) -> list[bytes]:
        if self._normalizer is not None:
            text = self._normalizer(text)
        return [span.encode("utf-8") for span in self._pretokenizer(text)]

    def encode_spans(self, spans: Sequence[bytes]) -> np.ndarray:
        """Tokens (uint32) of already pre-tokenized spans."""
        data = np.frombuffer(b"".join(spans), np.uint8)
        ends = np.cumsum(np.fromiter(map(len, spans), np.int64, len(spans)))
        out = np.empty(len(data), np.uint32)
        status = self.kernels.encode_spans_kernel(data, ends, self.kernel_tables, self._encoder_id,
                                                  *self._buffers(int(np.diff(ends, prepend=0).max(initial=0))), out)
        if status < 0:
            _raise_status(status, data, self.tables)
        return out[:status]

    def encode_ordinary_array(self, text: str) -> np.ndarray:
        """Tokens of ordinary text as a uint32 array."""
        if self.pattern_id is None:
            return self.encode_spans(self._split(text))
        encoded = text.encode("utf-8")
        tokens, _ = self._encode_docs(np.frombuffer(encoded, np.uint8), np.array([0, len(encoded)], np.int64), 0, 1)
        return tokens

    def encode_ordinary(self, text: str) -> list[int]:
        return self.as_list(self.encode_ordinary_array(text))

    def as_list(self, tokens: np.ndarray) -> list[int]:
        """``tokens.tolist()``, twice as fast: the list shares one Python int per id instead of making each anew."""
        if self._id_objects is None:
            self._id_objects = np.array(range(len(self.tables["token_offsets"]) - 1), dtype=object)
        try:
            return self._id_objects.take(tokens).tolist()
        except IndexError:
            raise CartridgeError("the BPE tables are corrupt: a token id outside the vocabulary came out") from None

    def encode_ordinary_flat(self, texts: Sequence[str], num_threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """All texts' tokens in one uint32 array and int64 offsets: text i is tokens[offsets[i]:offsets[i + 1]]."""
        if self.pattern_id is None:
            arrays = [self.encode_ordinary_array(text) for text in texts]
            offsets = np.zeros(len(arrays) + 1, np.int64)
            np.cumsum(np.fromiter(map(len, arrays), np.int64, len(arrays)), out=offsets[1:])
            return (np.concatenate(arrays) if arrays else np.empty(0, np.uint32)), offsets
        encoded = [text.encode("utf-8") for text in texts]
        data = np.frombuffer(b"".join(encoded), np.uint8)
        doc_offsets = np.zeros(len(encoded) + 1, np.int64)
        np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)), out=doc_offsets[1:])
        bounds = _chunk_bounds(doc_offsets, _threads(num_threads, len(encoded)))
        if len(bounds) <= 2:
            results = [self._encode_docs(data, doc_offsets, 0, len(encoded))]
        else:
            with ThreadPoolExecutor(len(bounds) - 1) as pool:
                results = list(pool.map(lambda i: self._encode_docs(data, doc_offsets, bounds[i], bounds[i + 1]),
                                        range(len(bounds) - 1)))
        tokens = np.concatenate([chunk for chunk, _ in results]) if results else np.empty(0, np.uint32)
        offsets = np.zeros(len(encoded) + 1, np.int64)
        if results:
            np.cumsum(np.concatenate([counts for _, counts in results]), out=offsets[1:])
        return tokens, offsets

    def encode_ordinary_batch(self, texts: Sequence[str], num_threads: int | None = None) -> list[list[int]]:
        tokens, offsets = self.encode_ordinary_flat(texts, num_threads)
        flat = self.as_list(tokens)
        return [flat[offsets[i] : offsets[i + 1]] for i in range(len(texts))]


def _threads(num_threads: int | None, n_texts: int) -> int:
    wanted = (os.cpu_count() or 1) if num_threads is None else num_threads
    if wanted < 1:
        raise ValueError(f"num_threads must be at least 1, not {num_threads}")
    return max(1, min(wanted, n_texts))


def _chunk_bounds(doc_offsets: np.ndarray, n_chunks: int) -> list[int]:
    """Doc indexes cutting the texts into at most ``n_chunks`` runs of about equal bytes."""
    total = int(doc_offsets[-1])
    cuts = np.searchsorted(doc_offsets, [total * k // n_chunks for k in range(1, n_chunks)])
    return sorted({0, len(doc_offsets) - 1, *(int(cut) for cut in cuts)})


def make_engine(tokenizer) -> JitEngine:
    """The jit engine of a tokenizer (``crayon.tokenizer.make_engine`` calls this for backend "jit")."""
    if tokenizer.algorithm == "longest":
        from crayon.jit.longest import LongestMatchEngine

        return LongestMatchEngine(tokenizer)
    return JitEngine(tokenizer, tables=tokenizer.tables)

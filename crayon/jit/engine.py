"""The jit engine: ordinary text -> tokens in Numba kernels, exactly the reference engine's tokens.

For a tokenizer whose pattern has a jit pre-tokenizer (cl100k_base, o200k_base, r50k_base) and that has no
normalizer or custom pre-tokenizer, one kernel walks the whole UTF-8 text: it finds each span with the state
machine of ``crayon.jit.pretokenize``, looks the span up in the thread's piece cache and, on a miss, encodes it
with the span encoder. Any other tokenizer is split by its own (reference) pre-tokenizer and only the span
encoding runs in the kernel. Both are exact; the second is bounded by the Python pre-tokenizer's speed.

Span encoders (``ENCODERS``): ``merge_loop`` and ``heap`` (``crayon.jit.bpe``), ``backtrack``
(``crayon.jit.backtrack``). They give identical tokens; ``DEFAULT_ENCODER`` was picked by measurement
(bench/peers.py and the note in the report): spans up to ``SHORT_SPAN`` bytes, nearly all of them, go to the
merge loop whatever the encoder, since on them it beats both; the encoder decides the longer spans.
"""

from __future__ import annotations

import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np
from numba import njit

from crayon.errors import CartridgeError, UnknownTokenError, UnsupportedComponentError
from crayon.jit.backtrack import BACKTRACK_TABLE_NAMES, backtrack_span, backtracking_violation
from crayon.jit.bpe import (
    BPE_TABLE_NAMES,
    CORRUPT_TABLES,
    UNKNOWN_BYTE,
    build_bpe_tables,
    check_bpe_tables,
    heap_merge,
    merge_loop,
    vocab_lookup,
    write_byte_tokens,
)
from crayon.jit.cache import cache_lookup, cache_store, new_piece_cache, piece_key, piece_row
from crayon.jit.pretokenize import PATTERN_IDS, classify_characters, fill_span_ends, unicode_tables
from crayon.patterns import pattern_name
from crayon.reference.cache import MAX_PIECE_BYTES, MAX_PIECE_TOKENS, MIN_PIECE_BYTES
from crayon.reference.pretokenize import PatternSpanner

MERGE_LOOP, HEAP, BACKTRACK = 0, 1, 2
ENCODERS = {"merge_loop": MERGE_LOOP, "heap": HEAP, "backtrack": BACKTRACK}
DEFAULT_ENCODER = "backtrack"
SHORT_SPAN = 16
SPAN_BATCH = 256  # span ends found per call of the pre-tokenizer
NO_PROGRESS = -3  # the pre-tokenizer returned a span that is empty or past the text
TABLE_NAMES = BPE_TABLE_NAMES + BACKTRACK_TABLE_NAMES


@njit(cache=True, _nrt=False)
def encode_span_into(data, start, end, out, n, bpe, encoder, scratch, alive):
    """Encode the span data[start:end] into out[n:]; returns the new n or a negative status.

    ``scratch`` (int64) and ``alive`` (uint8) hold at least 5 * (end - start) and end - start + 1 entries.
    """
    byte_tokens, pair_table, token_offsets, token_bytes, vocab_index, settings = bpe[:6]
    length = end - start
    if settings[0] and length > 1:
        whole = vocab_lookup(vocab_index, token_offsets, token_bytes, data, start, end)
        if whole >= 0:
            out[n] = whole
            return n + 1
    if encoder == BACKTRACK and length > SHORT_SPAN:
        return backtrack_span(data, start, end, out, n, (pair_table, token_offsets) + bpe[6:], alive)
    if not write_byte_tokens(byte_tokens, data, start, end, out, n):
        return UNKNOWN_BYTE
    if encoder == HEAP and length > SHORT_SPAN:
        return n + heap_merge(out, n, length, pair_table, scratch)
    count, _, _, _ = merge_loop(out, n, length, pair_table, scratch)
    return n + count


@njit(cache=True, _nrt=False)
def encode_piece(data, start, end, out, n, bpe, encoder, cache, scratch, alive):
    """``encode_span_into`` through the piece cache."""
    length = end - start
    if length < MIN_PIECE_BYTES or length > MAX_PIECE_BYTES:
        return encode_span_into(data, start, end, out, n, bpe, encoder, scratch, alive)
    low, high = piece_key(data, start, end)
    row = piece_row(low, high, length, cache.shape[0])
    found = cache_lookup(cache, low, high, length, row, out, n)
    if found >= 0:
        return found
    written = encode_span_into(data, start, end, out, n, bpe, encoder, scratch, alive)
    if n <= written <= n + MAX_PIECE_TOKENS:
        cache_store(cache, low, high, length, row, out, n, written - n)
    return written


@njit(cache=True, nogil=True)
def encode_docs_kernel(data, doc_offsets, first_doc, last_doc, pattern_id, char_tables, bpe, encoder, cache, out, counts):
    """Encode the texts data[doc_offsets[d]:doc_offsets[d + 1]] for d in [first_doc, last_doc) into ``out``.

    Spans come from the jit pre-tokenizer; counts[d - first_doc] receives each text's number of tokens.
    Returns the total, or a negative status.
    """
    longest = 0
    for doc in range(first_doc, last_doc):
        longest = max(longest, doc_offsets[doc + 1] - doc_offsets[doc])
    classes = np.empty(longest, np.uint8)
    ends = np.empty(SPAN_BATCH, np.int64)
    scratch = np.empty(5 * 64, np.int64)
    alive = np.empty(64 + 1, np.uint8)
    n = 0
    for doc in range(first_doc, last_doc):
        before = n
        text = data[doc_offsets[doc] : doc_offsets[doc + 1]]
        classify_characters(text, 0, text.shape[0], char_tables, classes)
        pos = 0
        while pos < text.shape[0]:
            found = fill_span_ends(classes, pos, text.shape[0], pattern_id, char_tables, ends)
            for i in range(found):
                end = ends[i]
                if end <= pos or end > text.shape[0]:
                    return NO_PROGRESS
                if end - pos >= alive.shape[0]:
                    scratch = np.empty(5 * (end - pos), np.int64)
                    alive = np.empty(end - pos + 1, np.uint8)
                n = encode_piece(text, pos, end, out, n, bpe, encoder, cache, scratch, alive)
                if n < 0:
                    return n
                pos = end
        counts[doc - first_doc] = n - before
    return n


@njit(cache=True, nogil=True)
def encode_spans_kernel(data, span_ends, bpe, encoder, cache, out):
    """Encode the spans data[span_ends[i - 1]:span_ends[i]] (from 0) into ``out``; the count or a negative status."""
    scratch = np.empty(5 * 64, np.int64)
    alive = np.empty(64 + 1, np.uint8)
    n = 0
    pos = 0
    for end in span_ends:
        if end < pos or end > data.shape[0]:
            return CORRUPT_TABLES
        if end - pos >= alive.shape[0]:
            scratch = np.empty(5 * (end - pos), np.int64)
            alive = np.empty(end - pos + 1, np.uint8)
        n = encode_piece(data, pos, end, out, n, bpe, encoder, cache, scratch, alive)
        if n < 0:
            return n
        pos = end
    return n


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
    if status == UNKNOWN_BYTE:
        missing = next((int(byte) for byte in np.unique(data) if tables["byte_tokens"][byte] < 0), None)
        raise UnknownTokenError(f"byte {bytes([missing])!r} has no token in this vocabulary")
    raise CartridgeError("the BPE tables are corrupt: a kernel found an index outside its arrays")


class JitEngine:
    """Encodes ordinary text with Numba kernels; see the module docstring."""

    name = "jit"

    def __init__(self, tokenizer, *, encoder: str | None = None, tables: dict[str, np.ndarray] | None = None,
                 cache_buckets: int = 8192):
        self.tables = tables_for(tokenizer.model) if tables is None else tables
        check_bpe_tables(self.tables)
        self.backtrack_violation = backtracking_violation(self.tables)
        if encoder is None:
            encoder = "heap" if self.backtrack_violation else DEFAULT_ENCODER
        if encoder not in ENCODERS:
            raise ValueError(f"unknown span encoder {encoder!r}; choose one of {', '.join(ENCODERS)}")
        if encoder == "backtrack" and self.backtrack_violation:
            raise UnsupportedComponentError(f"backtracking is not exact for this vocabulary: {self.backtrack_violation}")
        self.encoder = encoder
        self._bpe = tuple(self.tables[name] for name in TABLE_NAMES)
        self._encoder_id = ENCODERS[encoder]
        self._cache_buckets = cache_buckets
        self._local = threading.local()
        known = pattern_name(tokenizer.pattern) if tokenizer.pattern is not None else None
        fused = (
            known is not None
            and tokenizer.normalizer is None
            and isinstance(tokenizer.pretokenizer, PatternSpanner)
            and tokenizer.pretokenizer.pattern == tokenizer.pattern
        )
        self.pattern_id = PATTERN_IDS[known] if fused else None
        self._char_tables = unicode_tables() if fused else None
        self._normalizer = tokenizer.normalizer
        self._pretokenizer = tokenizer.pretokenizer

    def _cache(self) -> np.ndarray:
        cache = getattr(self._local, "cache", None)
        if cache is None:
            cache = self._local.cache = new_piece_cache(self._cache_buckets)
        return cache

    def _encode_docs(self, data: np.ndarray, doc_offsets: np.ndarray, first: int, last: int):
        """(tokens, counts) of texts first..last-1 of ``data``, with the fused kernel."""
        out = np.empty(int(doc_offsets[last] - doc_offsets[first]), np.uint32)
        counts = np.zeros(last - first, np.int64)
        status = encode_docs_kernel(data, doc_offsets, first, last, self.pattern_id, self._char_tables,
                                    self._bpe, self._encoder_id, self._cache(), out, counts)
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
        status = encode_spans_kernel(data, ends, self._bpe, self._encoder_id, self._cache(), out)
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
        return self.encode_ordinary_array(text).tolist()

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
        flat = tokens.tolist()
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
    return JitEngine(tokenizer)

"""The jit engine: ordinary text -> tokens in Numba kernels, exactly the reference engine's tokens.

For a tokenizer whose pattern has a jit pre-tokenizer (cl100k_base, o200k_base, r50k_base, Llama 3's, Qwen 2's)
and no custom pre-tokenizer, one kernel walks the whole UTF-8 text: it finds each span with the state machine of
``crayon.jit.pretokenize``, looks the span up in the thread's piece cache and, on a miss, encodes it with the
span encoder. A normalizer (Qwen's NFC) runs first, in Python, on the thread that encodes the text; a text it
returns as is (already normalized) is not copied. Any other pre-tokenizer that can be written as regex splits (any
pattern, HF pipelines of Split, ByteLevel, Digits, Punctuation, Whitespace ...: ``regex_splits()``) runs compiled
by ``crayon.jit.regex_vm`` (after the normalizer, in Python), then the span encoder kernel; one that cannot runs in
Python, with a one-time warning naming the reason. All are exact.

The kernels and the span encoders they choose between are in ``crayon.jit.kernels``.

``encode_docs_kernel`` and ``encode_spans_kernel`` run from the ahead-of-time compiled extension of
``crayon.jit.aot`` where it can be built (``JitEngine.kernels``), else as numba dispatchers: the same functions.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Callable, Iterator, Sequence

import numpy as np

from crayon.errors import BackendUnavailableError, CartridgeError, UnknownTokenError, UnsupportedComponentError
from crayon.jit import aot
from crayon.jit import kernels as jit_kernels
from crayon.jit.backtrack import backtracking_violation, check_backtrack_tables, new_validity_memo
from crayon.jit.cache import GROW_AFTER_BYTES, SMALL_CACHE_BUCKETS, new_long_piece_cache, new_piece_cache
from crayon.jit.cores import available_cores, worker_map
from crayon.jit.id_lists import id_list, id_lists, joined_ids, shared_ids
from crayon.jit.kernels import ENCODERS, SPAN_BATCH
from crayon.jit.long_text import LongTexts, joined_arrays, utf8_of
from crayon.jit.pretokenize import PATTERN_IDS, jit_pattern_of, unicode_tables
from crayon.jit.regex_vm import compiled_splits_of, kept_text, longest_slice, normalized_texts, text_token_offsets
from crayon.jit.status import NEED_SCRATCH, raise_for_status
from crayon.jit.tables import build_bpe_tables, check_bpe_tables, kernel_tables
from crayon.reference.cache import DEFAULT_BUCKETS, DEFAULT_LONG_ROWS, DEFAULT_LONGER_ROWS, LONGER_ROW_WORDS
from crayon.reference.char_bpe import CharBytePairModel
from crayon.reference.engine import flat_from_arrays
from crayon.reference.unigram import UnigramModel
from crayon.reference.wordlevel import SentencePieceWordModel, WordLevelModel
from crayon.reference.wordpiece import WordPieceModel

__all__ = ["JitEngine", "make_engine", "tables_for", "DEFAULT_ENCODER", "KERNEL_CHOICES"]

DEFAULT_ENCODER = "backtrack"
MEMO_SLOTS = 1 << 18
# a thread's first caches and memo: 64 KB (SMALL_CACHE_BUCKETS), 32 KB (and 32 rows of the longer-piece cache, 32 KB),
# 32 KB; full-size ones once it has encoded GROW_AFTER_BYTES: piece cache 4 MB, long-piece caches 8 and 4 MB, memo 2 MB
SMALL_LONG_ROWS, SMALL_MEMO_SLOTS = 1 << 8, 1 << 12
FEW_TOKENS = 32  # as_list converts this many tokens or fewer directly (measured faster than through id_objects)
SHORT_CALL_BYTES = 4096  # one text up to this long is encoded in reusable per-thread arrays
PIECES_PER_THREAD = 4  # a batch on several threads is cut into this many runs of texts per thread
KERNEL_CHOICES = ("auto", "aot", "numba")


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


class JitEngine:
    """Encodes ordinary text with Numba kernels; see the module docstring."""

    name = "jit"
    capabilities = frozenset({"threads", "compiled", "prepare"})

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
        self._clearings = 0  # clear_caches calls so far: a thread whose buffers saw fewer empties them
        self._ids = None  # shared_ids(self._token_count), taken at the first encode of many tokens
        self._token_count = len(self.tables["token_offsets"]) - 1
        self._lengths = None  # _token_lengths, made at the first batch
        known = jit_pattern_of(tokenizer, normalizes_first=True)
        self.pattern_id = None if known is None else PATTERN_IDS[known]
        self._char_tables = None if known is None else unicode_tables()
        self._normalizer = tokenizer.normalizer
        self._pretokenizer = tokenizer.pretokenizer
        self._reference_model = lambda: tokenizer.model  # built on first use for a cartridge's tokenizer
        self.compiled_splits = None if known is not None else compiled_splits_of(tokenizer.pretokenizer)
        if kernels not in KERNEL_CHOICES:
            raise ValueError(f"unknown kernels {kernels!r}; choose one of {', '.join(KERNEL_CHOICES)}")
        self._kernel_choice = kernels
        self._kernels = None
        self.long_texts = LongTexts(tokenizer)  # a text of 1 MB or more is cut and encoded on every core

    @property
    def kernels(self):
        """The module whose ``encode_docs_kernel`` and ``encode_spans_kernel`` run, chosen at the first encode:
        the ahead-of-time compiled extension of ``crayon.jit.aot`` (``kernels="auto"`` or ``"aot"``), else
        ``crayon.jit.kernels``, whose kernels are numba dispatchers (``"numba"``, or where the extension cannot be built)."""
        if self._kernels is None:
            compiled = None if self._kernel_choice == "numba" else aot.load_kernels()
            if compiled is None and self._kernel_choice == "aot":
                reason = "CRAYON_AOT=0" if os.environ.get("CRAYON_AOT") == "0" else "it could not be built"
                raise BackendUnavailableError(f"the ahead-of-time compiled kernels are unavailable: {reason}")
            if compiled is not None and (aot.argument_spec(self.kernel_tables) != aot.BPE_TABLES or (
                    self._char_tables is not None and aot.argument_spec(self._char_tables) != aot.CHAR_TABLES)):
                raise CartridgeError("the BPE tables do not have the types the compiled kernels take")
            self._kernels = compiled or jit_kernels
        return self._kernels

    @property
    def kernels_kind(self) -> str:
        """"aot" (the compiled extension) or "numba" (the dispatchers): which kernels ``kernels`` is."""
        return "numba" if self.kernels is jit_kernels else "aot"

    def _buffers(self, longest_span: int = 0, text_bytes: int = 0) -> tuple[np.ndarray, ...]:
        """This thread's (piece cache, long-piece cache, longer-piece cache, validity memo, scratch, alive), the
        scratch grown to hold ``longest_span``.

        A thread starts with small caches and memo (a tokenizer loaded for a few short calls allocates little)
        and gets full-size ones, empty, once it has encoded ``GROW_AFTER_BYTES`` with this engine."""
        local = self._local
        if not hasattr(local, "cache"):
            local.encoded, local.full_size, local.clearings = 0, False, self._clearings
            local.cache = new_piece_cache(min(self._cache_buckets, SMALL_CACHE_BUCKETS))
            local.long_cache = new_long_piece_cache(SMALL_LONG_ROWS)
            local.longer_cache = new_long_piece_cache(SMALL_LONG_ROWS // 8, LONGER_ROW_WORDS)
            local.memo = new_validity_memo(min(self._memo_slots, SMALL_MEMO_SLOTS))
            local.scratch, local.alive = np.empty(5 * 256, np.int64), np.empty(256 + 1, np.uint8)
        local.encoded += text_bytes
        if local.encoded >= GROW_AFTER_BYTES and not local.full_size:
            local.cache, local.memo = new_piece_cache(self._cache_buckets), new_validity_memo(self._memo_slots)
            local.long_cache = new_long_piece_cache(DEFAULT_LONG_ROWS)
            local.longer_cache = new_long_piece_cache(DEFAULT_LONGER_ROWS, LONGER_ROW_WORDS)
            local.full_size = True
        if local.clearings != self._clearings:
            for table in (local.cache, local.long_cache, local.longer_cache, local.memo):
                table[:] = 0
            local.clearings = self._clearings
        if longest_span > 256 and longest_span > scratch_capacity(local.scratch, local.alive):
            capacity = max(longest_span, 2 * scratch_capacity(local.scratch, local.alive))
            local.scratch, local.alive = np.empty(5 * capacity, np.int64), np.empty(capacity + 1, np.uint8)
        return local.cache, local.long_cache, local.longer_cache, local.memo, local.scratch, local.alive

    def clear_caches(self) -> None:
        """Empty every thread's piece caches and validity memo (benchmarks time a text as if seen for the first
        time): this thread's now, another's before its next encode (a thread's short calls, which keep their
        buffers, see it at the thread's next text over ``SHORT_CALL_BYTES``)."""
        self._clearings += 1
        self._buffers()

    def _encode_docs(self, data: np.ndarray, doc_offsets: np.ndarray, first: int, last: int):
        """(tokens, counts) of texts first..last-1 of ``data``, with the fused kernel."""
        out = np.empty(int(doc_offsets[last] - doc_offsets[first]), np.uint32)
        counts = np.zeros(last - first, np.int64)
        classes = np.empty(int(np.diff(doc_offsets[first : last + 1]).max(initial=0)), np.uint8)
        ends = np.empty(SPAN_BATCH, np.int64)
        resume = np.array([first, 0, 0, 0, 0, first], np.int64)
        needed, text_bytes = 0, len(out)
        while True:
            buffers = self._buffers(needed, text_bytes) + (classes, ends)
            text_bytes = 0
            status = self.kernels.encode_docs_kernel(data, doc_offsets, last, self.pattern_id, self._char_tables,
                                                     self.kernel_tables, self._encoder_id, buffers, out, counts, resume)
            if status != NEED_SCRATCH:
                break
            needed = int(resume[4])
        if status < 0:
            raise_for_status(status, data, self.tables["byte_tokens"])
        return out[:status], counts

    def _encode_short(self, encoded: bytes) -> list[int] | None:
        """Tokens of one text of at most ``SHORT_CALL_BYTES`` through this thread's reusable arrays (a call
        allocates only its list), or None where the general path must answer (a span longer than the thread's
        scratch holds, a byte without a token)."""
        call = getattr(self._local, "short_call", None)
        if call is None:  # until the thread's caches are full-size, whose buffers then serve every short call
            call = self._short_call(len(encoded))
        text, data, doc_offsets, counts, resume, out, buffers = call
        text[: len(encoded)] = encoded  # the kernel reads data[0:doc_offsets[1]], data a read-only view of text
        doc_offsets[1] = len(encoded)
        resume.fill(0)
        status = (self._kernels or self.kernels).encode_docs_kernel(
            data, doc_offsets, 1, self.pattern_id, self._char_tables, self.kernel_tables, self._encoder_id, buffers,
            out, counts, resume)
        return None if status < 0 else self.as_list(out[:status])

    def _short_call(self, text_bytes: int) -> tuple:
        """``_encode_short``'s arrays and this thread's buffers for a call of ``text_bytes``, the buffers kept for
        every later call once full-size (a scratch grown later stays unused there: a long span returns None)."""
        local = self._local
        if getattr(local, "short_arrays", None) is None:
            text = bytearray(SHORT_CALL_BYTES)
            data = np.frombuffer(text, np.uint8)
            data.flags.writeable = False  # the kernels' text type; written through ``text`` only
            local.short_arrays = (memoryview(text), data, np.zeros(2, np.int64), np.zeros(1, np.int64),
                                  np.zeros(6, np.int64), np.empty(SHORT_CALL_BYTES, np.uint32),
                                  np.empty(SHORT_CALL_BYTES, np.uint8), np.empty(SPAN_BATCH, np.int64))
        *arrays, classes, ends = local.short_arrays
        call = (*arrays, self._buffers(0, text_bytes) + (classes, ends))
        local.short_call = call if local.full_size else None
        return call
    def _split(self, text: str) -> list[bytes]:
        if self._normalizer is not None:
            text = self._normalizer(text)
        return [span.encode("utf-8") for span in self._pretokenizer(text)]

    def encode_spans(self, spans: Sequence[bytes]) -> np.ndarray:
        """Tokens (uint32) of already pre-tokenized spans."""
        data = np.frombuffer(b"".join(spans), np.uint8)
        return self.encode_span_ends(data, np.cumsum(np.fromiter(map(len, spans), np.int64, len(spans))))

    def encode_span_ends(self, data: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Tokens (uint32) of the spans data[ends[i - 1]:ends[i]] (from 0) of read-only UTF-8 ``data``."""
        out = np.empty(len(data), np.uint32)
        status = self.kernels.encode_spans_kernel(data, ends, self.kernel_tables, self._encoder_id,
                                                  *self._buffers(int(longest_slice(ends)), len(data)), out)
        if status < 0:
            raise_for_status(status, data, self.tables["byte_tokens"])
        return out[:status]

    def encode_ordinary_array(self, text: str, prepare: Callable[[str], str] | None = None) -> np.ndarray:
        """Tokens of ordinary text as a uint32 array; ``prepare`` as in ``encode_ordinary``."""
        if self.pattern_id is not None:
            try:
                tokens = self.long_texts.encode_text(text, self._encode_text, joined_arrays, prepare)
            except UnknownTokenError:
                tokens = None  # the whole text answers, below
            if tokens is not None:
                return tokens
        return self._encode_whole(text, prepare)

    def _encode_whole(self, text: str, prepare: Callable[[str], str] | None) -> np.ndarray:
        """``encode_ordinary_array`` of a text not cut into parts."""
        try:
            if self.pattern_id is not None:
                return self._encode_text(np.frombuffer(utf8_of(text, prepare, self._normalizer), np.uint8))
            if prepare is not None:
                text = prepare(text)
            if self.compiled_splits is not None:
                normalized = text if self._normalizer is None else self._normalizer(text)
                return self.encode_span_ends(*self.compiled_splits(self.compiled_splits.prepare(normalized)))
            return self.encode_spans(self._split(text))
        except UnknownTokenError:
            return self._encode_without_byte_tokens(text if prepare is None else prepare(text))

    def _encode_text(self, data: np.ndarray) -> np.ndarray:
        """Tokens of one UTF-8 text (uint8) with the fused kernel, on the calling thread."""
        tokens, _ = self._encode_docs(data, np.array([0, len(data)], np.int64), 0, 1)
        return tokens

    def _encode_without_byte_tokens(self, text: str) -> np.ndarray:
        """A text holding a byte that is no token of its own (the kernels start every span from byte tokens):
        the reference model's merges, which give tiktoken's tokens or raise where tiktoken fails too."""
        model = self._reference_model()
        return np.array([token for span in self._split(text) for token in model.encode_span(span)], np.uint32)

    def encode_ordinary(self, text: str, prepare: Callable[[str], str] | None = None) -> list[int]:
        """Tokens of ordinary text. ``prepare`` is the caller's repair of a str that has no UTF-8 encoding (lone
        surrogates), which must leave any other text unchanged: it is applied where the text, or, where a long
        text is cut, a part on the thread that encodes it, fails to encode (``utf8_of``)."""
        if self.pattern_id is not None and len(text) <= SHORT_CALL_BYTES // 4:  # so at most SHORT_CALL_BYTES bytes
            encoded = utf8_of(text, prepare, self._normalizer)
            tokens = self._encode_short(encoded) if len(encoded) <= SHORT_CALL_BYTES else None  # NFC may lengthen it
            if tokens is not None:
                return tokens
        if self.pattern_id is not None:
            try:
                tokens = self.long_texts.encode_text(text, self._encode_text, self._joined_ids, prepare)
            except UnknownTokenError:
                tokens = None  # encode_ordinary_array answers
            if tokens is not None:
                return tokens
        return self.as_list(self._encode_whole(text, prepare))

    def encode_utf8_flat(self, data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(tokens, counts) of the valid UTF-8 texts data[offsets[i]:offsets[i + 1]] (uint8 data, int64 offsets),
        on the calling thread with its own buffers: the tokens of ``encode_ordinary_array`` of each text, in one
        uint32 array; counts[i] is text i's number of tokens. The kernel reads ``data`` in place (a mapped file); a
        tokenizer with a normalizer decodes each text to normalize it first."""
        if self.pattern_id is None or self._normalizer is not None or (self.tables["byte_tokens"] < 0).any():
            tokens, token_offsets = flat_from_arrays([
                self.encode_ordinary_array(bytes(data[offsets[i] : offsets[i + 1]]).decode("utf-8"))
                for i in range(len(offsets) - 1)])
            return tokens, np.diff(token_offsets)
        return self._encode_docs(data, offsets, 0, len(offsets) - 1)

    def utf8_error(self, data: np.ndarray) -> int:
        """The offset of the first byte of read-only uint8 ``data`` that starts no valid UTF-8 sequence, or -1:
        Python's strict decoder's verdict, checked without the GIL."""
        return int(self.kernels.utf8_error_kernel(data))

    def as_list(self, tokens: np.ndarray) -> list[int]:
        """``tokens.tolist()``, checked: a few tokens are converted directly; more are the shared ints of
        ``id_list`` in one compiled pass, the list sharing one Python int per id instead of making each anew."""
        if len(tokens) <= FEW_TOKENS:
            ids = tokens.tolist()
            if ids and max(ids) >= self._token_count:
                raise CartridgeError("the BPE tables are corrupt: a token id outside the vocabulary came out")
            return ids
        return id_list(self.kernels.id_list_kernel, tokens, self._shared_ids())

    def _joined_ids(self, parts: Iterator[np.ndarray]) -> list[int]:
        return joined_ids(self.kernels.id_list_extend_kernel, parts, self._shared_ids())

    def _shared_ids(self) -> tuple[np.ndarray, np.ndarray]:
        if self._ids is None:
            self._ids = shared_ids(self._token_count)
        return self._ids

    def _encode_compiled_flat(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``encode_ordinary_flat`` with the compiled pre-tokenizer: all texts split at once, then one span kernel
        call on all their spans. A span never crosses a text and each token's bytes are its span's, so text i's
        tokens are those whose bytes end within its kept text (``text_token_offsets``)."""
        splits = self.compiled_splits
        data, text_ends = splits.prepare_batch(normalized_texts(self._normalizer, texts))
        ends, kept = splits.split(data, text_ends)
        kept_text_ends = text_ends
        if not kept.all():
            starts = np.concatenate(([0], ends[:-1])) if len(ends) else ends
            kept_bytes = np.zeros(len(ends) + 1, np.int64)
            np.cumsum(np.where(kept != 0, ends - starts, 0), out=kept_bytes[1:])
            kept_text_ends = kept_bytes[np.searchsorted(ends, text_ends, side="right")]
            data, ends = kept_text(data, ends, kept)
            data.flags.writeable = False
        tokens = self.encode_span_ends(data, ends)
        offsets = np.empty(len(texts) + 1, np.int64)
        if not text_token_offsets(tokens, self._token_lengths(), kept_text_ends, offsets):
            raise CartridgeError("the BPE tables are corrupt: a token id outside the vocabulary came out")
        return tokens, offsets

    def _token_lengths(self) -> np.ndarray:
        """Each token's length in bytes (int64)."""
        if self._lengths is None:
            self._lengths = np.diff(self.tables["token_offsets"]).astype(np.int64)
        return self._lengths

    def encode_ordinary_flat(self, texts: Sequence[str], num_threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """All texts' tokens in one uint32 array and int64 offsets: text i is tokens[offsets[i]:offsets[i + 1]]."""
        threads = _threads(num_threads, len(texts))
        if self.pattern_id is None and self.compiled_splits is not None and (self.tables["byte_tokens"] >= 0).all():
            return self._encode_compiled_flat(texts)
        if self.pattern_id is None or (self.tables["byte_tokens"] < 0).any():  # text by text, as encode_ordinary_array
            return flat_from_arrays([self.encode_ordinary_array(text) for text in texts])
        results = list(self._in_pieces(texts, threads, self._encode_texts))
        offsets = np.zeros(len(texts) + 1, np.int64)
        np.cumsum(np.concatenate([counts for _, counts in results]), out=offsets[1:])
        return np.concatenate([tokens for tokens, _ in results]), offsets

    def encode_ordinary_batch(self, texts: Sequence[str], num_threads: int | None = None,
                              prepare: Callable[[Sequence[str]], Sequence[str]] | None = None) -> list[list[int]]:
        """Each text's tokens as a list. ``prepare`` (the caller's per-text work: checks, repairs) maps a run of
        the texts to what is encoded; it runs on the thread that encodes the run, beside the other threads'
        kernels, and may raise (the first run's exception in order is raised)."""
        threads = _threads(num_threads, len(texts))
        if self.pattern_id is None or (self.tables["byte_tokens"] < 0).any():
            tokens, offsets = self.encode_ordinary_flat(texts if prepare is None else prepare(texts), threads)
            return id_lists(self.kernels.id_lists_kernel, tokens, offsets, self._shared_ids())
        work = self._token_lists if prepare is None else (lambda piece: self._token_lists(prepare(piece)))
        try:
            pieces = self._in_pieces(texts, threads, work)
        except TypeError:  # a text without a length: prepare, where given, names it as encode would
            if prepare is not None:
                prepare(texts)
            raise
        lists: list[list[int]] = []
        for piece in pieces:  # joined as the pieces come, while others encode
            lists += piece
        return lists

    def _encode_texts(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(tokens, counts) of texts with the fused kernel, their normalization and UTF-8 encoding included, so
        that a thread does all the work of its piece."""
        encoded = [text.encode("utf-8") for text in normalized_texts(self._normalizer, texts)]
        doc_offsets = np.zeros(len(encoded) + 1, np.int64)
        np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)), out=doc_offsets[1:])
        return self._encode_docs(np.frombuffer(b"".join(encoded), np.uint8), doc_offsets, 0, len(encoded))

    def _token_lists(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's tokens as a list, the lists built by the thread that encoded the piece."""
        tokens, counts = self._encode_texts(texts)
        bounds = np.zeros(len(counts) + 1, np.int64)
        np.cumsum(counts, out=bounds[1:])
        return id_lists(self.kernels.id_lists_kernel, tokens, bounds, self._shared_ids())

    def _in_pieces(self, texts: Sequence[str], threads: int, work) -> Iterator:
        """``work(piece)`` for runs of the texts, in order: all of them at once on one thread; else
        ``PIECES_PER_THREAD`` runs of about equal length per thread on ``worker_map``'s threads, so that while one
        thread holds the GIL (UTF-8 encoding, building lists) another runs a kernel, which releases it."""
        if threads == 1:
            return iter([work(texts)])
        lengths = np.zeros(len(texts) + 1, np.int64)
        np.cumsum(np.fromiter(map(len, texts), np.int64, len(texts)), out=lengths[1:])
        bounds = _chunk_bounds(lengths, threads * PIECES_PER_THREAD)
        return worker_map(lambda i: work(texts[bounds[i] : bounds[i + 1]]), range(len(bounds) - 1), threads)


def _threads(num_threads: int | None, n_texts: int) -> int:
    wanted = available_cores() if num_threads is None else num_threads
    if wanted < 1:
        raise ValueError(f"num_threads must be at least 1, not {num_threads}")
    return max(1, min(wanted, n_texts))


def _chunk_bounds(doc_offsets: np.ndarray, n_chunks: int) -> list[int]:
    """Doc indexes cutting the texts into at most ``n_chunks`` runs of about equal size (``doc_offsets``: the
    running total of the texts' sizes, from 0)."""
    total = int(doc_offsets[-1])
    cuts = np.searchsorted(doc_offsets, [total * k // n_chunks for k in range(1, n_chunks)])
    return sorted({0, len(doc_offsets) - 1, *(int(cut) for cut in cuts)})


def make_engine(tokenizer, **options) -> JitEngine:
    """The jit engine of a tokenizer (``crayon.tokenizer.make_engine`` calls this for backend "jit"); ``options``
    are ``JitEngine``'s (``encoder``, ``kernels``, ...). A longest-match tokenizer takes no options."""
    if tokenizer.algorithm == "longest":
        from crayon.jit.longest import LongestMatchEngine

        if options:
            raise TypeError(f"the longest-match jit engine takes no options, not {', '.join(options)}")
        return LongestMatchEngine(tokenizer)
    if issubclass(tokenizer.model_class, (WordPieceModel, WordLevelModel, UnigramModel, CharBytePairModel,
                                          SentencePieceWordModel)):
        from crayon.jit.vocab_models import VocabModelEngine

        if options:
            raise TypeError(f"the jit engine of a {type(tokenizer.model).__name__} takes no options, "
                            f"not {', '.join(options)}")
        return VocabModelEngine(tokenizer)
    return JitEngine(tokenizer, tables=tokenizer.tables, **options)

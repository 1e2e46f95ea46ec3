"""The jit engine of the models over characters: WordPiece (``crayon.jit.wordpiece``), WordLevel and
SentencePiece's word model (``crayon.jit.wordlevel``), Unigram (``crayon.jit.unigram``) and BPE over characters (``crayon.jit.char_bpe``),
each after the tokenizer's normalizer
and its pre-tokenizer (compiled by ``crayon.jit.regex_vm`` where it can be, else in Python with a one-time
warning). Same ids as the reference."""

from __future__ import annotations

import functools
import threading
from typing import Callable, Sequence

import numpy as np

from crayon.jit.cache import GROW_AFTER_BYTES, SMALL_CACHE_BUCKETS, new_piece_cache
from crayon.jit.char_bpe import CharBytePairTables
from crayon.jit.char_bpe import encode_spans as char_bpe_encode_spans
from crayon.jit.character_normalizer import CharacterNormalizer, character_normalizer_of
from crayon.jit.cores import available_cores, worker_map
from crayon.jit.id_lists import id_list, id_list_kernel, id_lists, id_lists_kernel, shared_ids
from crayon.jit.precompiled_normalizer import PrecompiledNormalizer, precompiled_normalizer_of
from crayon.jit.regex_vm import compiled_splits_of, kept_text, normalized_texts
from crayon.jit.unigram import UnigramTables, new_segment_cache
from crayon.jit.unigram import encode_spans as unigram_encode_spans
from crayon.jit.whitespace_normalizer import normalize_utf8
from crayon.jit.wordlevel import encode_sentencepiece_words
from crayon.jit.wordlevel import encode_words as wordlevel_encode_words
from crayon.jit.word_cache import new_long_piece_caches
from crayon.jit.wordpiece import encode_words
from crayon.reference.cache import DEFAULT_BUCKETS
from crayon.reference.char_bpe import CharBytePairModel
from crayon.reference.unigram import UnigramModel
from crayon.reference.wordlevel import SentencePieceWordModel, WordLevelModel
from crayon.reference.wordpiece import WordPieceModel

SMALL_SEGMENT_ROWS, SEGMENT_ROWS = 1 << 9, 1 << 17  # a thread's Unigram segment cache: 32 KB, then 8 MB


class VocabModelEngine:
    """Encodes ordinary text of a WordPiece, WordLevel, Unigram or character-BPE tokenizer with Numba kernels."""

    name = "jit"
    capabilities = frozenset({"threads", "compiled"})

    def __init__(self, tokenizer):
        if not issubclass(tokenizer.model_class, (WordPieceModel, WordLevelModel, UnigramModel, CharBytePairModel,
                                                      SentencePieceWordModel)):
            raise TypeError(f"not a WordPiece, WordLevel, Unigram or character BPE model: "
                            f"{tokenizer.model_class.__name__}")
        self._tokenizer = tokenizer  # its model is built on first use (a cartridge's, when opened)
        self._local = threading.local()
        self._clearings = 0  # clear_caches calls so far: a thread whose caches saw fewer makes new ones
        self._normalizer = tokenizer.normalizer
        self._pretokenizer = tokenizer.pretokenizer
        self.compiled_splits = compiled_splits_of(tokenizer.pretokenizer, rewrites=True)
        splits_add_prefix = self.compiled_splits is not None and self.compiled_splits.add_prefix_space
        self._whitespace_options = None if splits_add_prefix else getattr(tokenizer.normalizer, "whitespace_options",
                                                                          None)
        # the normalizer runs on the bytes prepare_batch makes where they are the text's own
        self._normalizes_bytes = self.compiled_splits is not None and not splits_add_prefix

    @functools.cached_property
    def model(self):
        return self._tokenizer.model

    @functools.cached_property
    def character_normalizer(self) -> CharacterNormalizer | None:
        """The normalizer's jit twin, where it has one and the pre-tokenizer is compiled (built on first use)."""
        return character_normalizer_of(self._normalizer) if self._normalizes_bytes else None

    @functools.cached_property
    def precompiled_normalizer(self) -> PrecompiledNormalizer | None:
        """The jit twin of a normalizer that ends with HF's ``Precompiled`` (and the byte rewrites after it), where
        the pre-tokenizer is compiled (built on first use)."""
        return precompiled_normalizer_of(self._normalizer) if self._normalizes_bytes else None

    @functools.cached_property
    def _shared_ids(self) -> tuple[np.ndarray, np.ndarray]:
        return shared_ids(1 + max(self.model.token_bytes, default=-1))

    @functools.cached_property
    def _encode(self) -> Callable[[np.ndarray, np.ndarray, tuple], tuple[np.ndarray, np.ndarray]]:
        """(UTF-8 data, span ends, piece caches) -> (ids, ids per span), with the model's kernel."""
        model = self.model
        if isinstance(model, WordPieceModel):
            return lambda data, ends, caches: encode_words(model, data, ends)
        if isinstance(model, WordLevelModel):
            return lambda data, ends, caches: wordlevel_encode_words(model, data, ends)
        if isinstance(model, SentencePieceWordModel):
            return lambda data, ends, caches: encode_sentencepiece_words(model, data, ends)
        if isinstance(model, UnigramModel):
            tables = UnigramTables(model)
            return lambda data, ends, caches: unigram_encode_spans(tables, data, ends, caches[0], caches[1])
        tables = CharBytePairTables(model)
        return lambda data, ends, caches: char_bpe_encode_spans(tables, data, ends, caches[0], caches[2])

    def _piece_caches(self, text_bytes: int) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """This thread's piece cache (``crayon.jit.word_cache``), segment cache (Unigram's, see
        ``crayon.jit.unigram``; two rows for the other models) and long-piece caches (character BPE's,
        ``crayon.jit.word_cache.new_long_piece_caches``; small for the other models): small until the thread has
        encoded ``GROW_AFTER_BYTES``, then full size, as ``JitEngine``'s."""
        local = self._local
        local.encoded = getattr(local, "encoded", 0) + text_bytes
        full_size = local.encoded >= GROW_AFTER_BYTES
        buckets = DEFAULT_BUCKETS if full_size else SMALL_CACHE_BUCKETS
        if len(getattr(local, "pieces", ())) < 2 * buckets or local.clearings != self._clearings:
            local.pieces = new_piece_cache(buckets)
            segment_rows = SEGMENT_ROWS if full_size else SMALL_SEGMENT_ROWS
            local.segments = new_segment_cache(segment_rows if isinstance(self.model, UnigramModel) else 2)
            local.long_pieces = new_long_piece_caches(full_size and isinstance(self.model, CharBytePairModel))
            local.clearings = self._clearings
        return local.pieces, local.segments, local.long_pieces

    def clear_caches(self) -> None:
        """Empty every thread's piece caches (benchmarks time a text as if seen for the first time): each thread
        makes new ones at its next encode."""
        self._clearings += 1

    def _spans(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(bytes of every span of every text, one after the other; their ends; the text each belongs to)."""
        if self.compiled_splits is None:
            pieces = [self._pretokenizer(text) for text in normalized_texts(self._normalizer, texts)]
            spans = [span.encode("utf-8") for text_spans in pieces for span in text_spans]
            ends = np.cumsum(np.fromiter(map(len, spans), np.int64, len(spans)))
            text_of_span = np.repeat(np.arange(len(texts)), [len(text_spans) for text_spans in pieces])
            return np.frombuffer(b"".join(spans), np.uint8), ends, text_of_span
        if self._whitespace_options is not None:  # SentencePiece's normalization, on the bytes of all texts at once
            data, text_ends = normalize_utf8(*self.compiled_splits.prepare_batch(texts), **self._whitespace_options)
            data.flags.writeable = False
        elif self.character_normalizer is not None:  # likewise, a normalizer of each character on its own
            data, text_ends = self.compiled_splits.prepare_batch(texts)
            data, text_ends = self.character_normalizer.normalize_utf8(data, text_ends)
            data.flags.writeable = False
        elif self.precompiled_normalizer is not None:  # likewise, the normalizer's steps from Precompiled on
            texts = self.precompiled_normalizer.normalize_before(texts)
            data, text_ends = self.compiled_splits.prepare_batch(texts)
            data, text_ends = self.precompiled_normalizer.normalize_utf8(data, text_ends)
            data.flags.writeable = False
        else:
            data, text_ends = self.compiled_splits.prepare_batch(normalized_texts(self._normalizer, texts))
        data, ends, kept, text_ends = self.compiled_splits.run(data, text_ends)
        starts = np.concatenate(([0], ends[:-1])) if len(ends) else ends
        encoded = (kept != 0) & (ends > starts)
        text_of_span = np.searchsorted(text_ends, starts[encoded], side="right")
        if not encoded.all():  # spans dropped or empty: the others' bytes copied together
            data, ends = kept_text(data, ends, kept)
        data.flags.writeable = False
        return data, ends, text_of_span

    def encode_ordinary_flat(self, texts: Sequence[str],
                             num_threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """All texts' ids in one uint32 array and int64 offsets, with one kernel call (``num_threads`` unused)."""
        data, ends, text_of_span = self._spans(texts)
        ids, counts = self._encode(data, ends, self._piece_caches(len(data)))
        offsets = np.zeros(len(texts) + 1, np.int64)
        np.cumsum(np.bincount(text_of_span, weights=counts, minlength=len(texts)).astype(np.int64), out=offsets[1:])
        return ids.astype(np.uint32), offsets

    def encode_ordinary_array(self, text: str) -> np.ndarray:
        return self.encode_ordinary_flat([text])[0]

    def encode_ordinary(self, text: str) -> list[int]:
        return id_list(id_list_kernel, self.encode_ordinary_array(text), self._shared_ids)

    def encode_ordinary_batch(self, texts: Sequence[str], num_threads: int | None = None) -> list[list[int]]:
        """Ids of each text; ``num_threads`` threads (default: one per core) share the texts."""
        threads = available_cores() if num_threads is None else num_threads
        if threads < 1:
            raise ValueError(f"num_threads must be at least 1, not {num_threads}")
        threads = min(threads, max(1, len(texts) // 64))
        chunks = [texts[i * len(texts) // threads : (i + 1) * len(texts) // threads] for i in range(threads)]
        flats = list(worker_map(self.encode_ordinary_flat, chunks, threads))  # the kernels release the GIL
        batches = []
        for ids, offsets in flats:
            batches += id_lists(id_lists_kernel, ids, offsets, self._shared_ids)
        return batches

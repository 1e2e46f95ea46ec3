"""The jit engine of the models over characters: WordPiece (``crayon.jit.wordpiece``), Unigram
(``crayon.jit.unigram``) and BPE over characters (``crayon.jit.char_bpe``), each after the tokenizer's normalizer and its pre-tokenizer (compiled by
``crayon.jit.regex_vm`` where it can be, else in Python with a one-time warning). Same ids as the reference."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np

from crayon.jit.char_bpe import CharBytePairTables
from crayon.jit.char_bpe import encode_spans as char_bpe_encode_spans
from crayon.jit.regex_vm import compiled_splits_of
from crayon.jit.unigram import encode_spans as unigram_encode_spans
from crayon.jit.wordpiece import encode_words
from crayon.reference.char_bpe import CharBytePairModel
from crayon.reference.engine import flat_from_arrays
from crayon.reference.unigram import UnigramModel
from crayon.reference.wordpiece import WordPieceModel


class VocabModelEngine:
    """Encodes ordinary text of a WordPiece, Unigram or character-BPE tokenizer with Numba kernels."""

    name = "jit"
    capabilities = frozenset({"threads", "compiled"})

    def __init__(self, tokenizer):
        self.model = tokenizer.model
        if isinstance(self.model, WordPieceModel):
            self._encode = encode_words
        elif isinstance(self.model, UnigramModel):
            self._encode = unigram_encode_spans
        elif isinstance(self.model, CharBytePairModel):
            tables = CharBytePairTables(self.model)
            self._encode = lambda model, data, ends: char_bpe_encode_spans(tables, data, ends)
        else:
            raise TypeError(f"not a WordPiece, Unigram or character BPE model: {self.model!r}")
        self._normalizer = tokenizer.normalizer
        self._pretokenizer = tokenizer.pretokenizer
        self.compiled_splits = compiled_splits_of(tokenizer.pretokenizer)

    def spans(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(UTF-8 bytes of the spans one after the other, their ends) of ordinary text."""
        if self._normalizer is not None:
            text = self._normalizer(text)
        if self.compiled_splits is not None:
            return self.compiled_splits(self.compiled_splits.prepare(text))
        spans = [span.encode("utf-8") for span in self._pretokenizer(text)]
        ends = np.cumsum(np.fromiter(map(len, spans), np.int64, len(spans)))
        return np.frombuffer(b"".join(spans), np.uint8), ends

    def encode_ordinary_array(self, text: str) -> np.ndarray:
        return self._encode(self.model, *self.spans(text)).astype(np.uint32)

    def encode_ordinary(self, text: str) -> list[int]:
        return self._encode(self.model, *self.spans(text)).tolist()

    def encode_ordinary_batch(self, texts: Sequence[str], num_threads: int | None = None) -> list[list[int]]:
        """Ids of each text; ``num_threads`` threads (default: one per core) share the texts."""
        threads = (os.cpu_count() or 1) if num_threads is None else num_threads
        if threads < 1:
            raise ValueError(f"num_threads must be at least 1, not {num_threads}")
        if threads == 1 or len(texts) < 2:
            return [self.encode_ordinary(text) for text in texts]
        with ThreadPoolExecutor(min(threads, len(texts))) as pool:  # the kernels release the GIL
            return list(pool.map(self.encode_ordinary, texts))

    def encode_ordinary_flat(self, texts: Sequence[str], num_threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        return flat_from_arrays([self.encode_ordinary_array(text) for text in texts])

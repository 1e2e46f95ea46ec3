"""The engine interface every backend implements, and the reference engine: the spec the others are tested against.

An engine encodes *ordinary* text (no special tokens: the ``Tokenizer`` cuts those out first) of one tokenizer.
``crayon.tokenizer.make_engine`` builds one per backend: ``ReferenceEngine`` here, ``crayon.jit.engine.JitEngine``
and ``crayon.jit.longest.LongestMatchEngine`` (backend "jit"), ``crayon.gpu.engine.CudaEngine`` and
``LongestMatchCudaEngine`` (backend "cuda"). All of them give the reference engine's tokens.

Example: ``engine.encode_ordinary_flat(["ab", "", "c"])`` gives ``(tokens, offsets)`` with ``offsets`` of length 4,
``offsets[0] == 0`` and text i's tokens ``tokens[offsets[i]:offsets[i + 1]]``: here ``offsets[1] == offsets[2]``.
"""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np

__all__ = ["CAPABILITIES", "Engine", "ReferenceEngine", "flat_from_arrays"]

CAPABILITIES = {
    "threads": "the batch methods spread texts over ``num_threads`` threads (others accept and ignore it)",
    "compiled": "runs compiled kernels (numba, an ahead-of-time extension or CUDA), not Python",
    "gpu": "runs on a CUDA device",
    "prepare": "``encode_ordinary``, ``encode_ordinary_array`` and ``encode_ordinary_batch`` take ``prepare``, the "
               "caller's per-text checks and repairs, and run it where each text (a batch's run of texts, a long "
               "text's part) is encoded",
}


@runtime_checkable
class Engine(Protocol):
    """What the ``Tokenizer`` (and ``crayon.jit.encode``) calls on an engine: ``tok.engine``."""

    name: str  # the backend: "reference", "jit" or "cuda"
    capabilities: frozenset[str]  # keys of CAPABILITIES

    def encode_ordinary(self, text: str) -> list[int]:
        """Token ids of ordinary text."""
        ...

    def encode_ordinary_array(self, text: str) -> np.ndarray:
        """Token ids of ordinary text as a uint32 array."""
        ...

    def encode_ordinary_batch(self, texts: Sequence[str], num_threads: int | None = None) -> list[list[int]]:
        """Token ids of each text."""
        ...

    def encode_ordinary_flat(self, texts: Sequence[str], num_threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """All texts' tokens in one uint32 array and int64 offsets: text i is tokens[offsets[i]:offsets[i + 1]]."""
        ...


def flat_from_arrays(arrays: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per-text token arrays as ``encode_ordinary_flat``'s (uint32 tokens, int64 offsets)."""
    offsets = np.zeros(len(arrays) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, arrays), np.int64, len(arrays)), out=offsets[1:])
    tokens = np.concatenate(arrays).astype(np.uint32, copy=False) if arrays else np.empty(0, np.uint32)
    return tokens, offsets


class ReferenceEngine:
    """Encodes ordinary text in pure Python: normalize, pre-tokenize into spans, encode each span with the model."""

    name = "reference"
    capabilities = frozenset()

    def __init__(self, tokenizer):
        """``tokenizer``: anything with ``normalizer`` (or None), ``pretokenizer`` and ``model``."""
        self.normalizer = tokenizer.normalizer
        self.pretokenizer = tokenizer.pretokenizer
        self.model = tokenizer.model

    def encode_ordinary(self, text: str) -> list[int]:
        if self.normalizer is not None:
            text = self.normalizer(text)
        tokens: list[int] = []
        for span in self.pretokenizer(text):
            tokens.extend(self.model.encode_span(span.encode("utf-8")))
        return tokens

    def encode_ordinary_array(self, text: str) -> np.ndarray:
        return np.array(self.encode_ordinary(text), dtype=np.uint32)

    def encode_ordinary_batch(self, texts: Sequence[str], num_threads: int | None = None) -> list[list[int]]:
        return [self.encode_ordinary(text) for text in texts]

    def encode_ordinary_flat(self, texts: Sequence[str], num_threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        return flat_from_arrays([self.encode_ordinary_array(text) for text in texts])

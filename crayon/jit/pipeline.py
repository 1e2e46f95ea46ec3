"""The dataset pipeline over the GIL-free kernels: the stages of ``crayon.reference.pipeline``, a worker per core.

The reader, the cut rule (``CutRule``, proven in the reference's docstring), the bounded pool and the in-order
reassembly are the reference's; what changes is the worker's task. A worker hands a batch of pieces to
``JitEngine.encode_utf8_flat``: the kernel reads a piece of a mapped file in place (a batch of small documents is
joined into one buffer), releases the GIL while it encodes, and uses the worker thread's own buffers (piece
cache, validity memo, encoder scratch), allocated once per thread and reused for every batch: one piece cache per
worker, as the kernels write their cache without locks. Bytes are checked to be UTF-8 first (``errors``).

Where the fused kernel does not apply (a tokenizer with added tokens, allowed special tokens, or no jit
pre-tokenizer), the worker calls the tokenizer's ``encode`` on the decoded text, like the reference.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

import numpy as np

from crayon.jit.cores import available_cores
from crayon.jit.engine import JitEngine, make_engine
from crayon.reference.pipeline import (
    DEFAULT_CHUNK_BYTES,
    CutRule,
    Document,
    Piece,
    decode_piece,
    encode_pieces,
    join_documents,
    text_encoder,
)


def jit_encoder(tokenizer, allowed_special: frozenset[str], errors: str) -> Callable[[list[Piece]], list[np.ndarray]]:
    """The worker's task: a batch of pieces -> their tokens (uint32), with the jit kernels where they apply."""
    engine = make_engine(tokenizer) if tokenizer.algorithm == "bpe" else None
    if not isinstance(engine, JitEngine) or engine.pattern_id is None or allowed_special or tokenizer.added_tokens:
        return text_encoder(tokenizer, allowed_special, errors)

    def encode_batch(batch: list[Piece]) -> list[np.ndarray]:
        views = [_checked_utf8(piece, errors) for piece in batch]
        data = np.frombuffer(views[0] if len(views) == 1 else b"".join(views), np.uint8)
        offsets = np.zeros(len(views) + 1, np.int64)
        np.cumsum([len(view) for view in views], out=offsets[1:])
        tokens, counts = engine.encode_utf8_flat(data, offsets)
        bounds = np.concatenate([[0], np.cumsum(counts)])
        return [tokens[bounds[i] : bounds[i + 1]] for i in range(len(batch))]

    return encode_batch


def _checked_utf8(piece: Piece, errors: str):
    """The piece's bytes if they are UTF-8, else (``errors="replace"``) the UTF-8 of their decoded text."""
    view = piece.data
    try:
        str(view, "utf-8")
        return view
    except UnicodeDecodeError:
        return decode_piece(piece, errors).encode("utf-8")


def encode_pieces_jit(tokenizer, documents: Iterable[Document], *, allowed_special: Iterable[str] = (),
                      chunk_bytes: int | None = DEFAULT_CHUNK_BYTES, workers: int | None = None,
                      errors: str = "strict") -> Iterator[tuple[Piece, np.ndarray]]:
    """``(piece, tokens)`` in document order on ``workers`` threads (default: ``available_cores()``, the CPU
    affinity capped by a cgroup quota); the caller calls ``piece.release()`` when done with each piece."""
    allowed = frozenset(allowed_special)
    rule = None if chunk_bytes is None else CutRule(tokenizer, allowed)
    return encode_pieces(documents, jit_encoder(tokenizer, allowed, errors), rule=rule, chunk_bytes=chunk_bytes,
                         workers=workers or available_cores())


def encode_documents(tokenizer, documents: Iterable[Document], **options) -> Iterator[tuple[int, np.ndarray]]:
    """``(document index, tokens)`` of every document, whole, in order: the reference pipeline's result
    (options as ``encode_pieces_jit``)."""
    return join_documents(encode_pieces_jit(tokenizer, documents, **options))

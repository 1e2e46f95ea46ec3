"""The dataset pipeline over the GIL-free kernels: the stages of ``crayon.reference.pipeline``, a worker per core.

The tasks (``file_tasks``, ``jsonl_tasks``, ``separated_tasks``, ``document_tasks``: the cut rule ``CutRule`` is
proven in the reference's docstring), the bounded pool with in-order reassembly (``run_tasks``) and the loading of
a task on its worker (reading, parsing JSON lines, splitting at separators) are the reference's; what changes is
the encoding. A worker hands a loaded batch (its texts back to back: read into the worker's reused buffer, or a
piece of a mapped file read in place) to ``JitEngine.encode_utf8_flat``, which
releases the GIL while it encodes and uses the worker thread's own buffers (piece cache, validity memo, encoder
scratch), allocated once per thread and reused for every batch: one piece cache per worker, as the kernels write
their cache without locks. Bytes are checked to be UTF-8 first, once per batch, by a kernel that also releases
the GIL (``JitEngine.utf8_error``; ``Batch.checked`` replaces or reports what it finds).

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
    Batch,
    CutRule,
    Document,
    EncodedBatch,
    document_tasks,
    join_documents,
    run_tasks,
    text_encoder,
)


def jit_encoder(tokenizer, allowed_special: frozenset[str], errors: str) -> Callable[[Batch], EncodedBatch]:
    """The worker's encoding: a batch's texts -> their tokens, with the jit kernels where they apply."""
    engine = make_engine(tokenizer) if tokenizer.algorithm == "bpe" else None
    if not isinstance(engine, JitEngine) or engine.pattern_id is None or allowed_special or tokenizer.added_tokens:
        return text_encoder(tokenizer, allowed_special, errors)

    def encode_batch(batch: Batch) -> EncodedBatch:
        if engine.utf8_error(batch.data) >= 0:  # the kernel checks without the GIL; Python names the error
            batch = batch.checked(errors)
        tokens, counts = engine.encode_utf8_flat(batch.data, batch.offsets)
        return EncodedBatch(tokens, counts, batch.last, batch.offsets)

    return encode_batch


def encode_documents(tokenizer, documents: Iterable[Document], *, allowed_special: Iterable[str] = (),
                     chunk_bytes: int | None = DEFAULT_CHUNK_BYTES, workers: int | None = None,
                     errors: str = "strict") -> Iterator[tuple[int, np.ndarray]]:
    """``(document index, tokens)`` of every document, whole, in order, on ``workers`` threads (default:
    ``available_cores()``, the CPU affinity capped by a cgroup quota): the reference pipeline's result."""
    allowed = frozenset(allowed_special)
    rule = None if chunk_bytes is None else CutRule(tokenizer, allowed)
    tasks = document_tasks(documents, rule, chunk_bytes)
    return join_documents(run_tasks(tasks, jit_encoder(tokenizer, allowed, errors), workers=workers or available_cores()))

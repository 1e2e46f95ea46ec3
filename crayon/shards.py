"""Corpora to token shards: documents from files, encoded by the pipeline, streamed to a ``.bin`` or ``.npy``.

Documents: each file is one document; or, with ``separator``, each part of a file between
separators; or, with ``jsonl_field``, the string field of each line of JSON Lines files. A document's tokens are
exactly ``tokenizer.encode_ordinary`` of its text (``bytes.decode("utf-8")``, no newline translation); with
``append_eot`` the end-of-text token follows every document (as nanoGPT's prepare scripts do).

The shard (``write_shard``): the tokens of all documents back to back, little-endian ``uint16`` when
``n_vocab <= 65536`` else ``uint32``; a ``.bin`` is the raw array (``numpy.memmap(path, dtype, mode="r")``, the
layout nanoGPT reads), a ``.npy`` the same with numpy's header (``numpy.load(path, mmap_mode="r")``). Beside it,
``<output>.json`` (``SIDECAR_FORMAT``): tokenizer name and SHA-256 (``tokenizer_fingerprint``), dtype, counts, and
``document_offsets`` (document i is tokens[offsets[i]:offsets[i + 1]], its end-of-text token included).
Both are written to temporary files in the output's folder and renamed at the end: an error or Ctrl-C leaves
nothing under the final names.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import struct
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator, NamedTuple

import numpy as np

from crayon.reference.pipeline import (
    DEFAULT_CHUNK_BYTES,
    CutRule,
    EncodedBatch,
    file_sizes,
    file_tasks,
    jsonl_tasks,
    run_tasks,
    separated_tasks,
    text_encoder,
)

SIDECAR_FORMAT = "crayon-tokens/1"
WRITE_BUFFER_BYTES = 1 << 16  # a batch (about a chunk of tokens) is written directly, small chunks through it
NPY_HEADER_BYTES = 128  # the .npy header is written first with room for any count, then rewritten in place
TRIM_EVERY_BYTES = 1 << 24  # the writer hands freed heap memory back to the system after this much text
SIDECAR_BLOCK = 1 << 14  # sources and document offsets are written to the sidecar this many at once


class TokenChunk(NamedTuple):
    """Tokens of part of a document, in order: ``end_of_document`` marks a document's last chunk (its tokens end
    with the end-of-text token when asked); ``n_bytes`` is the text's size (UTF-8)."""

    document: int
    tokens: np.ndarray
    end_of_document: bool
    n_bytes: int


class TokenBatch(NamedTuple):
    """What the writer appends at once: ``tokens`` in the shard's dtype (end-of-text tokens included), the
    position in ``tokens`` after each document that ends here (``document_ends``, int64), the text's size."""

    tokens: np.ndarray
    document_ends: np.ndarray
    n_bytes: int


def iter_tokens(tokenizer, paths, *, separator: str | None = None, jsonl_field: str | None = None,
                append_eot: bool = False, threads: int | None = None, chunk_bytes: int | None = DEFAULT_CHUNK_BYTES,
                errors: str = "strict") -> Iterator[TokenChunk]:
    """Token chunks (uint32 arrays) of the documents of ``paths``, in order, on ``threads`` workers (default: the
    CPUs this process may use); memory is O(threads x chunk_bytes), whatever the size of the files."""
    eot = np.array([tokenizer.eot_token], np.uint32) if append_eot else None
    document = 0
    for batch in _encoded(tokenizer, paths, lambda encoded: encoded, separator=separator, jsonl_field=jsonl_field,
                          threads=threads, chunk_bytes=chunk_bytes, errors=errors):
        ends = np.cumsum(batch.counts).tolist()
        text_bytes = np.diff(batch.offsets).tolist()
        for i, (start, end) in enumerate(zip([0, *ends[:-1]], ends)):
            tokens, last = batch.tokens[start:end], bool(batch.last[i])
            if eot is not None and last:
                tokens = np.concatenate([tokens, eot])
            yield TokenChunk(document, tokens, last, text_bytes[i])
            document += last


def _encoded(tokenizer, paths, finish, *, separator, jsonl_field, threads, chunk_bytes, errors):
    """``finish(EncodedBatch)`` of each task, in order: the pipeline for this tokenizer's backend (the jit
    mirror's encoder, or the reference's on the tokenizer's engine), ``finish`` run on the worker too."""
    if errors not in ("strict", "replace"):
        raise ValueError(f"errors must be 'strict' or 'replace', not {errors!r}")
    if threads is not None and threads < 1:
        raise ValueError(f"threads must be at least 1, not {threads}")
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if separator is not None and jsonl_field is not None:
        raise ValueError("give a document separator or a JSON Lines field, not both")
    if jsonl_field is not None:  # documents are not cut: a task is whole lines
        tasks = jsonl_tasks(paths, jsonl_field, chunk_bytes)
    else:
        rule = None if chunk_bytes is None else CutRule(tokenizer)
        if separator is None:
            tasks = file_tasks(paths, rule, chunk_bytes)
        else:
            tasks = separated_tasks(paths, separator, rule, chunk_bytes)
    if tokenizer.backend == "jit":
        from crayon.jit.cores import available_cores
        from crayon.jit.pipeline import jit_encoder

        encode, workers = jit_encoder(tokenizer, frozenset(), errors), threads or available_cores()
    else:
        encode, workers = text_encoder(tokenizer, frozenset(), errors), threads or 1
    return run_tasks(tasks, lambda batch: finish(encode(batch)), workers=workers)


def shard_batch(encoded: EncodedBatch, dtype: np.dtype, eot: int | None) -> TokenBatch:
    """An encoded batch as the writer takes it (computed on the worker): end-of-text tokens inserted after each
    document that ends in it (when ``eot`` is given), converted to ``dtype``."""
    ends = np.cumsum(encoded.counts)[encoded.last]
    tokens = encoded.tokens
    if eot is not None:
        tokens = np.insert(tokens, ends, eot)
        ends = ends + np.arange(1, len(ends) + 1)
    return TokenBatch(tokens.astype(dtype, copy=False), ends, int(encoded.offsets[-1]))


def token_dtype(n_vocab: int) -> np.dtype:
    """uint16 when every id fits, else uint32."""
    return np.dtype("<u2") if n_vocab <= 1 << 16 else np.dtype("<u4")


def tokenizer_fingerprint(tokenizer) -> str:
    """SHA-256 of what decides the tokens: the pattern, the special and added tokens and every token's bytes."""
    digest = hashlib.sha256()
    digest.update(json.dumps([tokenizer.name, tokenizer.pattern, tokenizer.algorithm, tokenizer.special_tokens,
                              tokenizer.added_tokens, tokenizer.normalizer is not None], sort_keys=True).encode())
    tables = tokenizer.tables
    if tables is not None:
        digest.update(np.ascontiguousarray(tables["token_offsets"]).tobytes())
        digest.update(np.ascontiguousarray(tables["token_bytes"]).tobytes())
    else:
        for token_id, token in sorted(tokenizer.model.token_bytes.items()):
            digest.update(struct.pack("<qI", token_id, len(token)) + token)
    return digest.hexdigest()


def sidecar_path(output: str | os.PathLike) -> Path:
    return Path(f"{os.fspath(output)}.json")


def write_shard(tokenizer, paths, output: str | os.PathLike, *, separator: str | None = None,
                jsonl_field: str | None = None, append_eot: bool = False, threads: int | None = None,
                chunk_bytes: int | None = DEFAULT_CHUNK_BYTES, errors: str = "strict", progress: bool = False) -> dict:
    """Encode the documents of ``paths`` into ``output`` (``.npy``, else the raw ``.bin`` layout) and its JSON
    sidecar; returns the sidecar's summary plus timing. ``progress`` shows a tqdm bar (MB/s, tokens/s, ETA)."""
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    finish = functools.partial(shard_batch, dtype=token_dtype(tokenizer.n_vocab),
                               eot=tokenizer.eot_token if append_eot else None)
    batches = _encoded(tokenizer, paths, finish, separator=separator, jsonl_field=jsonl_field, threads=threads,
                       chunk_bytes=chunk_bytes, errors=errors)
    return write_batches(tokenizer, batches, output, sources=[os.fspath(path) for path in paths],
                         append_eot=append_eot, progress=progress,
                         total_bytes=None if jsonl_field is not None else lambda: int(file_sizes(paths).sum()))


def write_chunks(tokenizer, chunks: Iterable[TokenChunk], output: str | os.PathLike, *, sources: list[str],
                 append_eot: bool, progress: bool = False, total_bytes: int | Callable[[], int] | None = None) -> dict:
    """Stream token chunks into the shard ``output`` and its sidecar (``write_batches``)."""
    dtype = token_dtype(tokenizer.n_vocab)
    batches = (TokenBatch(chunk.tokens.astype(dtype, copy=False),
                          np.array([len(chunk.tokens)] if chunk.end_of_document else [], np.int64), chunk.n_bytes)
               for chunk in chunks)
    return write_batches(tokenizer, batches, output, sources=sources, append_eot=append_eot, progress=progress,
                         total_bytes=total_bytes)


def write_batches(tokenizer, batches: Iterable[TokenBatch], output: str | os.PathLike, *, sources: list[str],
                  append_eot: bool, progress: bool = False, total_bytes: int | Callable[[], int] | None = None) -> dict:
    """Stream token batches into the shard ``output`` and its sidecar: temporary files renamed at the end, the
    document offsets kept in a temporary file meanwhile (memory does not grow with the number of documents).
    The progress bar's ``total_bytes`` may be a function, called on a background thread so that encoding starts
    at once (stat-ing every file of a large corpus first took a noticeable time)."""
    output = Path(output)
    dtype = token_dtype(tokenizer.n_vocab)
    npy = output.suffix == ".npy"
    temporary = output.with_name(f".{output.name}.{os.getpid()}.tmp")
    temporary_sidecar = temporary.with_name(temporary.name + ".json")
    temporary_offsets = temporary.with_name(temporary.name + ".offsets")
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=None if callable(total_bytes) else total_bytes, unit="B", unit_scale=True, desc=output.name,
                   dynamic_ncols=True)
        if callable(total_bytes):
            threading.Thread(target=_set_total, args=(bar, total_bytes), daemon=True).start()
    started = time.perf_counter()
    n_tokens, n_bytes, n_documents = 0, 0, 0
    next_trim, written_back = TRIM_EVERY_BYTES, 0
    try:
        with open(temporary, "wb", buffering=WRITE_BUFFER_BYTES) as file, \
                open(temporary_offsets, "wb", buffering=WRITE_BUFFER_BYTES) as offsets:
            if npy:
                file.write(_npy_header(dtype, 0))
            offsets.write(np.zeros(1, np.int64).tobytes())
            for batch in batches:
                if batch.tokens.dtype != dtype:
                    raise TypeError(f"token batch of dtype {batch.tokens.dtype}, the shard's is {dtype}")
                file.write(memoryview(batch.tokens))
                offsets.write(memoryview(batch.document_ends.astype(np.int64) + n_tokens))
                n_tokens += len(batch.tokens)
                n_bytes += batch.n_bytes
                n_documents += len(batch.document_ends)
                if n_bytes >= next_trim:
                    return_free_memory()
                    written_back = start_writeback(file, written_back)
                    next_trim = n_bytes + TRIM_EVERY_BYTES
                if bar is not None:
                    bar.update(batch.n_bytes)
                    bar.set_postfix_str(f"{n_tokens / max(time.perf_counter() - started, 1e-9) / 1e6:.2f}M tok/s",
                                        refresh=False)
            if npy:
                file.seek(0)
                file.write(_npy_header(dtype, n_tokens))
        seconds = time.perf_counter() - started
        summary = {
            "format": SIDECAR_FORMAT,
            "tokenizer": tokenizer.name,
            "tokenizer_sha256": tokenizer_fingerprint(tokenizer),
            "n_vocab": tokenizer.n_vocab,
            "dtype": dtype.name,
            "layout": "npy" if npy else "bin",
            "tokens": n_tokens,
            "documents": n_documents,
            "bytes": n_bytes,
            "append_eot": append_eot,
            "sources": sources,
        }
        _write_sidecar(summary, temporary_offsets, temporary_sidecar)
        os.replace(temporary, output)
        os.replace(temporary_sidecar, sidecar_path(output))
    finally:
        if bar is not None:
            bar.close()
        for leftover in (temporary, temporary_sidecar, temporary_offsets):
            leftover.unlink(missing_ok=True)
    return {**summary, "output": os.fspath(output), "seconds": seconds}


def _set_total(bar, total_bytes: Callable[[], int]) -> None:
    """Give the bar its total when found; a file that cannot be read is reported by the pipeline, not here."""
    try:
        bar.total = total_bytes()
    except OSError:
        pass


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or None on another C library."""
    import ctypes

    try:
        return ctypes.CDLL(None).malloc_trim  # the C library the process runs on
    except (OSError, AttributeError, TypeError):
        return None


def return_free_memory() -> None:
    """Give the heap's free pages back to the system (glibc). Workers allocate and free token arrays of a few MB
    per task on several threads; glibc keeps such freed memory in its arenas, and the process's resident memory
    crept up with the input (152 MB on 1.3 GB of text, 115 MB on 100 MB) until the writer did this."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def start_writeback(file, start: int) -> int:
    """Ask the system to write ``file``'s bytes from ``start`` to disk now, in the background; return where the
    next call starts. A shard's pages otherwise stay dirty in the page cache until the system's limits force it,
    and then every ``write`` of the writer's thread paid for the cleaning: measured in a container here, writing
    120 MB took 0.2 s of the writer's CPU against 0.03 s with this every 16 MB of text (``POSIX_FADV_DONTNEED``
    starts the write-back; pages still being written are not dropped)."""
    if not hasattr(os, "posix_fadvise"):
        return start
    file.flush()
    end = file.tell()
    os.posix_fadvise(file.fileno(), start, end - start, os.POSIX_FADV_DONTNEED)
    return end


def _write_sidecar(summary: dict, offsets_path: Path, path: Path) -> None:
    """``summary`` as JSON with ``document_offsets`` (int64 in ``offsets_path``) added: its ``sources`` and the
    offsets written block by block, so that no string as long as the file is built."""
    head = {key: value for key, value in summary.items() if key != "sources"}
    with open(path, "w", encoding="utf-8") as out, open(offsets_path, "rb") as offsets:
        out.write(json.dumps(head)[:-1] + ', "sources": [')
        sources = summary["sources"]
        for start in range(0, len(sources), SIDECAR_BLOCK):
            out.write((", " if start else "") + json.dumps(sources[start : start + SIDECAR_BLOCK])[1:-1])
        out.write('], "document_offsets": [')
        separator = ""
        while block := offsets.read(8 * SIDECAR_BLOCK):
            out.write(separator + ", ".join(map(str, np.frombuffer(block, np.int64).tolist())))
            separator = ", "
        out.write("]}")


def _npy_header(dtype: np.dtype, count: int) -> bytes:
    """A version 1.0 ``.npy`` header of exactly ``NPY_HEADER_BYTES`` for a 1-D array of ``count`` items."""
    text = f"{{'descr': '{dtype.str}', 'fortran_order': False, 'shape': ({count},), }}"
    text = text.ljust(NPY_HEADER_BYTES - 10 - 1) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode("latin-1")


def read_shard(path: str | os.PathLike) -> tuple[np.ndarray, dict]:
    """(tokens as a read-only memory map, sidecar) of a shard written by ``write_shard``."""
    path = Path(path)
    meta = json.loads(sidecar_path(path).read_text())
    if meta.get("format") != SIDECAR_FORMAT:
        raise ValueError(f"{sidecar_path(path)}: not a {SIDECAR_FORMAT} sidecar")
    if meta["tokens"] == 0:
        return np.empty(0, np.dtype(meta["dtype"])), meta
    if meta["layout"] == "npy":
        return np.load(path, mmap_mode="r"), meta
    return np.memmap(path, dtype=np.dtype(meta["dtype"]).newbyteorder("<"), mode="r"), meta

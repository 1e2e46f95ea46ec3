"""Corpora to token shards: documents from files, encoded by the pipeline, streamed to a ``.bin`` or ``.npy``.

Documents (``documents``): each file is one document; or, with ``separator``, each part of a file between
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

import hashlib
import json
import os
import struct
import time
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple, Sequence

import numpy as np

from crayon.reference.pipeline import (
    DEFAULT_CHUNK_BYTES,
    CutRule,
    Document,
    encode_pieces,
    file_documents,
    jsonl_documents,
    text_encoder,
)

SIDECAR_FORMAT = "crayon-tokens/1"
WRITE_BUFFER_BYTES = 1 << 22
NPY_HEADER_BYTES = 128  # the .npy header is written first with room for any count, then rewritten in place


class TokenChunk(NamedTuple):
    """Tokens of part of a document, in order: ``end_of_document`` marks a document's last chunk (its tokens end
    with the end-of-text token when asked); ``n_bytes`` is the text's size (UTF-8)."""

    document: int
    tokens: np.ndarray
    end_of_document: bool
    n_bytes: int


def documents(paths: Sequence[str | os.PathLike], *, separator: str | None = None,
              jsonl_field: str | None = None) -> Iterator[Document]:
    """The documents of ``paths`` (see the module docstring)."""
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if separator is not None and jsonl_field is not None:
        raise ValueError("give a document separator or a JSON Lines field, not both")
    if jsonl_field is not None:
        return jsonl_documents(paths, jsonl_field)
    return file_documents(paths, separator)


def iter_tokens(tokenizer, paths, *, separator: str | None = None, jsonl_field: str | None = None,
                append_eot: bool = False, threads: int | None = None, chunk_bytes: int | None = DEFAULT_CHUNK_BYTES,
                errors: str = "strict") -> Iterator[TokenChunk]:
    """Token chunks (uint32 arrays) of the documents of ``paths``, in order, on ``threads`` workers (default: the
    CPUs this process may use); memory is O(threads x chunk_bytes), whatever the size of the files."""
    eot = np.array([tokenizer.eot_token], np.uint32) if append_eot else None
    for piece, tokens in _pieces(tokenizer, documents(paths, separator=separator, jsonl_field=jsonl_field),
                                 threads=threads, chunk_bytes=chunk_bytes, errors=errors):
        if eot is not None and piece.last:
            tokens = np.concatenate([tokens, eot])
        yield TokenChunk(piece.document, tokens, piece.last, piece.end - piece.start)
        piece.release()


def _pieces(tokenizer, docs: Iterable[Document], *, threads, chunk_bytes, errors):
    """The pipeline for this tokenizer's backend: the jit mirror, or the reference on the tokenizer's engine."""
    if errors not in ("strict", "replace"):
        raise ValueError(f"errors must be 'strict' or 'replace', not {errors!r}")
    if threads is not None and threads < 1:
        raise ValueError(f"threads must be at least 1, not {threads}")
    if tokenizer.backend == "jit":
        from crayon.jit.pipeline import encode_pieces_jit

        return encode_pieces_jit(tokenizer, docs, chunk_bytes=chunk_bytes, workers=threads, errors=errors)
    rule = None if chunk_bytes is None else CutRule(tokenizer)
    return encode_pieces(docs, text_encoder(tokenizer, frozenset(), errors), rule=rule, chunk_bytes=chunk_bytes,
                         workers=threads or 1)


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
    chunks = iter_tokens(tokenizer, paths, separator=separator, jsonl_field=jsonl_field, append_eot=append_eot,
                         threads=threads, chunk_bytes=chunk_bytes, errors=errors)
    total_bytes = None if jsonl_field is not None else sum(os.path.getsize(path) for path in paths)
    return write_chunks(tokenizer, chunks, output, sources=[os.fspath(path) for path in paths],
                        append_eot=append_eot, progress=progress, total_bytes=total_bytes)


def write_chunks(tokenizer, chunks: Iterable[TokenChunk], output: str | os.PathLike, *, sources: list[str],
                 append_eot: bool, progress: bool = False, total_bytes: int | None = None) -> dict:
    """Stream token chunks into the shard ``output`` and its sidecar (temporary files renamed at the end)."""
    output = Path(output)
    dtype = token_dtype(tokenizer.n_vocab)
    npy = output.suffix == ".npy"
    temporary = output.with_name(f".{output.name}.{os.getpid()}.tmp")
    temporary_sidecar = temporary.with_name(temporary.name + ".json")
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=total_bytes, unit="B", unit_scale=True, desc=output.name, dynamic_ncols=True)
    started = time.perf_counter()
    offsets, n_tokens, n_bytes = [0], 0, 0
    try:
        with open(temporary, "wb", buffering=WRITE_BUFFER_BYTES) as file:  # few large writes, not one per document
            if npy:
                file.write(_npy_header(dtype, 0))
            for chunk in chunks:
                file.write(memoryview(chunk.tokens.astype(dtype, copy=False)))
                n_tokens += len(chunk.tokens)
                n_bytes += chunk.n_bytes
                if chunk.end_of_document:
                    offsets.append(n_tokens)
                if bar is not None:
                    bar.update(chunk.n_bytes)
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
            "documents": len(offsets) - 1,
            "bytes": n_bytes,
            "append_eot": append_eot,
            "sources": sources,
            "document_offsets": offsets,
        }
        temporary_sidecar.write_text(json.dumps(summary))
        os.replace(temporary, output)
        os.replace(temporary_sidecar, sidecar_path(output))
    finally:
        if bar is not None:
            bar.close()
        for leftover in (temporary, temporary_sidecar):
            leftover.unlink(missing_ok=True)
    del summary["document_offsets"]
    return {**summary, "output": os.fspath(output), "seconds": seconds}


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

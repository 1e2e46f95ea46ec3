"""The dataset pipeline as a spec: documents in files become token arrays, in order, in bounded memory.

::

    plan tasks (main thread)  ->  load, check, encode on a pool of workers  ->  reassemble in order  ->  write
    file_tasks: files grouped,    Task.load (read/map), Batch.checked,          ordered_map yields      (crayon.shards
    big files mapped and cut      text_encoder / the jit kernel                 in input order          writes shards)
    jsonl_tasks, separated_tasks:
    byte ranges of a file
    document_tasks: Documents
    cut into pieces (cut_document)

A task is what one worker does at once: a ``FileGroup`` (whole small files, about ``chunk_bytes`` in all, which
the worker opens and reads into its reused buffer), a ``PieceGroup`` (pieces of documents in memory or mapped,
cut by ``CutRule``), a ``JsonLinesRange`` (whole lines of a JSON Lines file, which the worker reads and parses) or
a ``SeparatedRange`` (bytes of a file of documents split by a separator, ending after a separator or at a cut,
which the worker reads and splits). The main thread's work per small file is one ``stat``, per large file a
search for a boundary every ``chunk_bytes``; reading, parsing, splitting, the UTF-8 check, encoding and releasing
pages happen on the workers (``run_tasks``), so the pool scales with the cores. A worker need not know how many
documents come before its task: documents are numbered in order as the batches come back (``Batch``).

Every stage is a generator pulling from the one before, and ``ordered_map`` keeps at most ``in_flight`` tasks
submitted and not yet handed on: the reader stops reading while the writer is behind (back-pressure), so memory
is O(in_flight x chunk_bytes) whatever the size of the files. Each document's tokens are exactly
``tokenizer.encode(text, allowed_special=allowed, disallowed_special=())`` of its whole text (``encode_ordinary``
when nothing is allowed), where ``text = data.decode("utf-8", errors)`` of the document's bytes (no newline
translation). Documents are independent; a document longer than ``chunk_bytes`` is cut where ``CutRule`` allows.

The cut rule
------------
Write T = A + B, cut at byte p = len(A). The cut is exact when the tokens of T are the tokens of A followed by
those of B. The engines encode ordinary text as the concatenation of ``encode_span`` over the pattern's spans
(``regex.findall``), after special/added tokens are cut out; so it suffices that (a) no special-token match
straddles p, (b) no pattern span straddles p, and (c) the spans of T left of p are ``findall(A)`` and those right
of p are ``findall(B)``. ``CutRule`` accepts p in two cases (conditions on the document's characters):

* **W** (word): T[p] is a space U+0020 and T[p-1] is printable ASCII other than the space (``!`` to ``~``).
* **N** (line): T[p-1] is a newline, T[p] is neither whitespace (the pattern's ``\\s``) nor ``/``, and the
  whitespace run ending at p-1 is exactly ``\\n`` (T[p-2] is not whitespace, or p-1 is the text's start); for
  cl100k_base and o200k_base also exactly ``\\r\\n`` (with T[p-3] not whitespace).

Proof for the three pattern families (r50k_base = p50k_base = gpt2, cl100k_base, o200k_base; the strings of
``crayon.patterns``). The patterns have no lookbehind, ``\\b``, ``^`` or ``\\G``, never match the empty string,
and ``findall`` restarts each match where the last ended; so the matching of a span that starts at or after p
reads only text at or after p, and (c)'s right half holds once (b) holds. For a match attempt starting at i < p,
A and T differ in only two observations: a test at position p (T has the character T[p], A has the end of text)
and ``$``, which in A also matches at p-1 when T[p-1] is a newline (``$`` is "end, or before a final newline";
in T it matches at neither, as B is not empty and T[p] is no newline). An attempt that makes neither
observation, or makes it with the same outcome, produces the same match in A and in T.

*Rule W.* An attempt reaches p only after consuming x = T[p-1], which is not whitespace. In each family the
alternatives that can consume a non-whitespace character and then test the next position test it with one of:
a letter/mark class, a digit class, the contraction letters or an apostrophe, ``[^\\s\\p{L}\\p{N}]``, ``[\\r\\n]``
or (o200k) ``[\\r\\n/]``; ``$`` and ``(?!\\S)`` only follow ``\\s+``/``\\s++``, which cannot have consumed x.
A space fails every one of those classes, and so does the end of text: every test at p has the same outcome in A
and T, hence the same matches (c), and no match consumes T[p] (it fails in A), so none straddles p (b).

*Rule N.* Position p-1 holds the same newline in A and T, so an attempt differs only if it consumes the newline
(and then tests p) or tests ``$`` after a whitespace run ending at p-1 or p. Only whitespace alternatives and the
trailing newline runs (cl100k ``[^\\s\\p{L}\\p{N}]++[\\r\\n]*+``, o200k ``[^\\s\\p{L}\\p{N}]+[\\r\\n/]*``) consume a
newline; since T[p-2] (T[p-3] for CRLF) is not whitespace, a whitespace alternative that reaches the newline
starts at the whitespace run's first character. Case by case, the span that ends the run in T and in A:
 - after punctuation (cl100k, o200k): the trailing run takes the ``\\n``/``\\r\\n`` and stops at p in both (T[p] is
   not ``\\r``, ``\\n`` or ``/``); an earlier alternative cannot consume the newline.
 - r50k, ``\\n``: A matches ``\\s++$`` = "\\n"; in T ``\\s++$`` and ``\\s+(?!\\S)`` fail (T[p] is not whitespace),
   ``\\s`` matches "\\n". Same span. (r50k and ``\\r\\n``: A gives "\\r\\n", T gives "\\r", "\\n"; not a cut.)
 - cl100k: A matches ``\\s++$`` = the run; in T ``\\s++$`` fails and ``\\s*[\\r\\n]`` backtracks to end at the
   last newline, p: the run. Same span.
 - o200k (no ``$``): ``\\s*[\\r\\n]+`` matches the run in both (the letter alternatives exclude ``\\r\\n``).
In each case the span ends at p (b), the spans before it are unchanged (they neither reach p-1 nor test ``$``).

*Special and added tokens* are matched leftmost-first before pre-tokenization. If no token text that is matched
contains a space or a newline, a match cannot contain both T[p-1] and T[p] (rule W: x and a space; rule N: a
newline), so matches are the same in A, B and T (a), and the ordinary text around p is cut by the same rule
(a special token beside p only shortens the whitespace run or the text before p). ``CutRule`` refuses tokens
with a space or newline.

*UTF-8.* p lies between an ASCII byte and the next character, so both halves are whole characters, and a
decoder replacing invalid bytes restarts at the ASCII byte: ``decode(A + B) == decode(A) + decode(B)`` for
``errors`` "strict" and "replace".

*Not covered.* Other regexes, custom pre-tokenizers and normalizers (a normalizer may rewrite text across p,
e.g. composing characters or adding a prefix at the start) have no proven rule: ``CutRule`` refuses them with
``UnsupportedComponentError``; pass ``chunk_bytes=None`` to encode each document whole (exact, memory O(document)).
A document with no cut within ``chunk_bytes`` (a long line of CJK text without spaces) gets a longer chunk, cut
at the next allowed position: exact, and memory grows with that stretch.
"""

from __future__ import annotations

import functools
import heapq
import json
import mmap
import os
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, NamedTuple, Sequence

import numpy as np
import regex

from crayon.errors import UnsupportedComponentError
from crayon.patterns import pattern_name
from crayon.reference.pretokenize import PatternSpanner

DEFAULT_CHUNK_BYTES = 1 << 20
SPACE, NEWLINE, RETURN, SLASH = 0x20, 0x0A, 0x0D, 0x2F
PRINTABLE = range(0x21, 0x7F)  # printable ASCII other than the space: never whitespace
_WHITESPACE = regex.compile(r"\s")
CRLF_FAMILIES = ("cl100k_base", "o200k_base")


@dataclass(frozen=True)
class Document:
    """One document: the UTF-8 bytes data[start:end] (``data`` a mapped file, or bytes), and its name for messages."""

    name: str
    data: bytes | mmap.mmap
    start: int
    end: int


@dataclass
class Piece:
    """The bytes data[start:end] of a document; ``last`` says whether the document ends with it."""

    source: Document
    start: int
    end: int
    last: bool

    @property
    def data(self) -> memoryview:
        return memoryview(self.source.data)[self.start : self.end]

    def release(self) -> None:
        """Drop the pages of a mapped file that this piece read (they are read again if touched), so that the
        process's resident memory stays O(chunk) on a file of any size."""
        release_pages(self.source.data, self.start, self.end)


def release_pages(mapping: bytes | mmap.mmap, start: int, end: int) -> None:
    """Drop the pages of mapping[start:end] if it is a mapped file (they are read again if touched)."""
    if isinstance(mapping, mmap.mmap) and hasattr(mapping, "madvise") and end - start >= mmap.PAGESIZE:
        first = start - start % mmap.PAGESIZE
        mapping.madvise(mmap.MADV_DONTNEED, first, end - first)


class CutRule:
    """Where a tokenizer's text may be cut (see the module docstring); raises when no rule is known.
    ``added_tokens_removed``: the text comes with its added and special tokens already cut out (an engine's
    text), so only the pre-tokenizer and normalizer (``name``, ``pattern``, ``normalizer``, ``pretokenizer``) are
    read."""

    def __init__(self, tokenizer, allowed_special: Iterable[str] = (), *, added_tokens_removed: bool = False):
        family = pattern_name(tokenizer.pattern) if tokenizer.pattern is not None else None
        if tokenizer.normalizer is not None or not isinstance(tokenizer.pretokenizer, PatternSpanner) or family is None:
            raise UnsupportedComponentError(
                f"{tokenizer.name}: no proven rule cuts text for this pre-tokenizer/normalizer (cuts are proven for "
                f"the r50k, cl100k and o200k patterns without a normalizer); pass chunk_bytes=None to encode each "
                f"document whole")
        matched = set() if added_tokens_removed else set(allowed_special) | set(tokenizer.added_tokens)
        unsafe = sorted(token for token in matched if " " in token or "\n" in token)
        if unsafe:
            raise UnsupportedComponentError(
                f"{tokenizer.name}: token {unsafe[0]!r} contains a space or newline, so a cut could split it; "
                f"pass chunk_bytes=None to encode each document whole")
        options = tokenizer.added_token_options if matched else {}
        stripping = sorted(token for token in matched
                           if token in options and (options[token].lstrip or options[token].rstrip))
        if stripping:
            raise UnsupportedComponentError(
                f"{tokenizer.name}: token {stripping[0]!r} strips the whitespace around it, which a cut could separate "
                f"from it; pass chunk_bytes=None to encode each document whole")
        self.family = family
        self.crlf = family in CRLF_FAMILIES

    def is_cut(self, data, p: int, start: int = 0) -> bool:
        """Whether a document data[start:...] may be cut before byte p (start < p < the document's end)."""
        if data[p] == SPACE and data[p - 1] in PRINTABLE:
            return True
        if data[p - 1] != NEWLINE or data[p] == SLASH or _is_whitespace(_char_at(data, p)):
            return False
        run_start = p - 1
        if self.crlf and run_start > start and data[run_start - 1] == RETURN:
            run_start -= 1
        return run_start == start or not _is_whitespace(_char_before(data, run_start, start))

    def last_cut(self, data, low: int, high: int, start: int) -> int | None:
        """The last cut p with low < p <= high in the document data[start:...] (high < its end), or None."""
        spaces = _find_backward(data, b" ", low + 1, high + 1)  # rule W: p is a space
        newlines = (q + 1 for q in _find_backward(data, b"\n", low, high))  # rule N: p follows a newline
        return next((p for p in heapq.merge(spaces, newlines, reverse=True) if self.is_cut(data, p, start)), None)

    def next_cut(self, data, low: int, end: int, start: int) -> int | None:
        """The first cut p with low < p < end in the document data[start:end], or None."""
        spaces = _find_forward(data, b" ", low + 1, end)
        newlines = (q + 1 for q in _find_forward(data, b"\n", low, end - 1))
        return next((p for p in heapq.merge(spaces, newlines) if self.is_cut(data, p, start)), None)


def _find_backward(data, needle: bytes, low: int, stop: int) -> Iterator[int]:
    """Where ``needle`` occurs in data[low:stop], from the last occurrence down."""
    while (found := data.rfind(needle, low, stop)) >= 0:
        yield found
        stop = found


def _find_forward(data, needle: bytes, start: int, end: int) -> Iterator[int]:
    """Where ``needle`` occurs in data[start:end], from the first occurrence up."""
    while (found := data.find(needle, start, end)) >= 0:
        yield found
        start = found + 1


def _char_at(data, p: int) -> str:
    """The character starting at byte p (U+FFFD where the bytes are not UTF-8)."""
    lead = data[p]
    length = 1 if lead < 0xC0 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
    return bytes(data[p : p + length]).decode("utf-8", "replace")[:1]


def _char_before(data, p: int, start: int) -> str:
    """The character ending just before byte p, not before ``start`` (U+FFFD where the bytes are not UTF-8)."""
    first = p - 1
    while first > max(start, p - 4) and 0x80 <= data[first] < 0xC0:
        first -= 1
    return bytes(data[first:p]).decode("utf-8", "replace")[-1:]


def _is_whitespace(char: str) -> bool:
    return _WHITESPACE.match(char) is not None


# ------------------------------------------------------------------------------------------- read and cut


def file_sizes(paths: Sequence[str | os.PathLike]) -> np.ndarray:
    """Each file's size in bytes (int64), as ``stat`` sees it now."""
    return np.array([os.stat(path).st_size for path in paths], np.int64)


def file_documents(paths: Sequence[str | os.PathLike], separator: str | None = None) -> Iterator[Document]:
    """The documents of UTF-8 files: each file, or (with ``separator``) each part of a file between separators
    (as ``bytes.split``; an empty part after a final separator is no document). Files are mapped, not read."""
    needle = None if separator is None else separator.encode("utf-8")
    if needle == b"":
        raise ValueError("the document separator is empty")
    for path in paths:
        data, name = _map_file(path), os.fspath(path)
        if needle is None:
            yield Document(name, data, 0, len(data))
            continue
        start, index = 0, 0
        while True:
            found = data.find(needle, start)
            end = len(data) if found < 0 else found
            if found >= 0 or start < len(data) or index == 0:
                yield Document(f"{name}[{index}]", data, start, end)
            if found < 0:
                break
            start, index = found + len(needle), index + 1


def _map_file(path) -> mmap.mmap | bytes:
    """A file's bytes: mapped, or read where it is smaller than ``SMALL_FILE_BYTES`` (mapping a small file costs
    more than reading it, and its pages are never worth releasing early)."""
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size < SMALL_FILE_BYTES:
            return file.read()
        return mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)


SMALL_FILE_BYTES = 1 << 16


def jsonl_documents(paths: Sequence[str | os.PathLike], field: str) -> Iterator[Document]:
    """The documents of JSON Lines files: the string ``field`` of each line's object (blank lines are skipped)."""
    for path in paths:
        with open(path, "rb") as file:
            for number, line in enumerate(file, 1):
                if line.strip():
                    data = jsonl_text(line, field, path, number)
                    yield Document(f"{os.fspath(path)}:{number}", data, 0, len(data))


def jsonl_text(line: bytes, field: str, path, number: int | Callable[[], int]) -> bytes:
    """The UTF-8 text of the string ``field`` of a JSON line, or a ValueError naming the file and line ``number``
    (a function that finds it, where counting lines is left to the rare error)."""
    try:
        record = json.loads(line)
    except ValueError as error:
        problem = f"not a JSON line ({error})"
    else:
        text = record.get(field) if isinstance(record, dict) else None
        if isinstance(text, str):
            return _utf8_of(text)
        problem = f"no string field {field!r} in this line"
    raise ValueError(f"{os.fspath(path)}:{number if isinstance(number, int) else number()}: {problem}")


def _utf8_of(text: str) -> bytes:
    """UTF-8 of a JSON string; lone surrogates become U+FFFD, as ``Tokenizer.encode`` does."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")


def cut_document(document: Document, rule: CutRule | None, chunk_bytes: int | None) -> Iterator[tuple[int, int]]:
    """(start, end) byte ranges covering the document, cut by ``rule`` about every ``chunk_bytes``; an empty
    document is one empty range. ``chunk_bytes=None`` or no rule: the document whole."""
    if chunk_bytes is not None and chunk_bytes < 1:
        raise ValueError(f"chunk_bytes must be at least 1, not {chunk_bytes}")
    data, start, end = document.data, document.start, document.end
    while chunk_bytes is not None and rule is not None and end - start > chunk_bytes:
        cut = rule.last_cut(data, start, start + chunk_bytes, document.start)
        if cut is None:
            cut = rule.next_cut(data, start + chunk_bytes, end, document.start)
        if cut is None:
            break
        yield start, cut
        start = cut
    yield start, end


def document_pieces(document: Document, rule: CutRule | None, chunk_bytes: int | None) -> Iterator[Piece]:
    """A document cut into pieces, in order."""
    ranges = cut_document(document, rule, chunk_bytes)
    current = next(ranges)
    for following in ranges:
        yield Piece(document, *current, last=False)
        current = following
    yield Piece(document, *current, last=True)


def pieces(documents: Iterable[Document], rule: CutRule | None, chunk_bytes: int | None) -> Iterator[Piece]:
    """Every document cut into pieces, in order."""
    for document in documents:
        yield from document_pieces(document, rule, chunk_bytes)


# --------------------------------------------------------------------- tasks: what one worker does at once


@dataclass
class Batch:
    """A task's texts as a worker loaded them: text i is the bytes data[offsets[i]:offsets[i + 1]] (uint8 data,
    int64 offsets), part of a document, whose last part it is when ``last[i]``. Documents are numbered by their
    order: a text belongs to the document after those whose last part came before it (in this or earlier tasks),
    so a worker need not know how many documents the tasks before its own hold."""

    data: np.ndarray
    offsets: np.ndarray
    last: np.ndarray
    task: "Task"

    def text(self, i: int) -> memoryview:
        return memoryview(self.data)[self.offsets[i] : self.offsets[i + 1]]

    def checked(self, errors: str) -> "Batch":
        """This batch if its texts are UTF-8; else (``errors="replace"``) one whose texts are the UTF-8 of their
        decoded text (invalid bytes become U+FFFD); else a ValueError naming the document and byte."""
        try:
            if len(self.data) and self.data.max() >= 0x80:  # ASCII is UTF-8 (numpy's max: SIMD, without the GIL)
                str(memoryview(self.data), "utf-8")
            return self
        except UnicodeDecodeError as error:
            i = int(np.searchsorted(self.offsets, error.start, side="right")) - 1
            if errors != "replace":
                name, first_byte = self.task.where(i)
                raise ValueError(
                    f"{name}: not UTF-8 at byte {first_byte + error.start - int(self.offsets[i])} ({error.reason}); "
                    f"pass errors='replace' to encode invalid bytes as U+FFFD") from None
        texts = [str(self.text(i), "utf-8", "replace").encode("utf-8") for i in range(len(self.last))]
        return Batch(np.frombuffer(b"".join(texts), np.uint8), _offsets_of(map(len, texts), len(texts)),
                     self.last, self.task)


def _offsets_of(sizes, count: int) -> np.ndarray:
    """int64 offsets [0, sizes[0], sizes[0] + sizes[1], ...] of ``count`` sizes (an iterable)."""
    offsets = np.zeros(count + 1, np.int64)
    np.cumsum(np.fromiter(sizes, np.int64, count), out=offsets[1:])
    return offsets


class ReusedBuffer(threading.local):
    """A worker thread's byte buffer, grown as needed and reused for every task it loads."""

    def __init__(self):
        self.array = np.empty(0, np.uint8)

    def at_least(self, size: int) -> np.ndarray:
        if len(self.array) < size:
            self.array = np.empty(max(size, 2 * len(self.array)), np.uint8)
        return self.array


@dataclass
class PieceGroup:
    """Consecutive pieces of documents already in memory or mapped."""

    pieces: list[Piece]

    def load(self, buffer: ReusedBuffer) -> Batch:
        """One piece is read in place; several are copied back to back into the worker's buffer."""
        sizes = [piece.end - piece.start for piece in self.pieces]
        offsets = _offsets_of(sizes, len(sizes))
        if len(self.pieces) == 1 and sizes[0]:
            piece = self.pieces[0]
            data = np.frombuffer(piece.source.data, np.uint8, sizes[0], piece.start)
        else:
            data = buffer.at_least(int(offsets[-1]))
            for piece, start, end in zip(self.pieces, offsets[:-1].tolist(), offsets[1:].tolist()):
                data[start:end] = np.frombuffer(piece.source.data, np.uint8, end - start, piece.start)
            data = _read_only(data[: offsets[-1]])
        last = np.fromiter((piece.last for piece in self.pieces), np.bool_, len(self.pieces))
        return Batch(data, offsets, last, self)

    def where(self, i: int) -> tuple[str, int]:
        """(document name, offset of text i's first byte in its data) for messages."""
        return self.pieces[i].source.name, self.pieces[i].start

    def release(self) -> None:
        for piece in self.pieces:
            piece.release()


@dataclass
class FileGroup:
    """Consecutive whole files, each one document, read by the worker: the main thread only knows their
    ``sizes``, and a file whose size changed since is refused."""

    paths: Sequence[str | os.PathLike]
    sizes: np.ndarray

    def load(self, buffer: ReusedBuffer) -> Batch:
        offsets = _offsets_of(self.sizes, len(self.paths))
        data = buffer.at_least(int(offsets[-1]) + 1)  # one spare byte: a file that grew reads one byte too many
        for path, start, size in zip(self.paths, offsets[:-1].tolist(), self.sizes.tolist()):
            if _read_file_into(path, memoryview(data)[start : start + size + 1]) != size:
                raise RuntimeError(f"{os.fspath(path)}: the file changed size while it was being encoded")
        return Batch(_read_only(data[: offsets[-1]]), offsets, np.ones(len(self.paths), np.bool_), self)

    def where(self, i: int) -> tuple[str, int]:
        return os.fspath(self.paths[i]), 0

    def release(self) -> None:
        pass


@dataclass
class JsonLinesRange:
    """Whole lines of a JSON Lines file, the bytes [start, end), read and parsed by the worker: the string
    ``field`` of each non-blank line's object is a document (``jsonl_documents``)."""

    path: str | os.PathLike
    start: int
    end: int
    field: str
    file_end: bool

    def load(self, buffer: ReusedBuffer) -> Batch:
        texts = [jsonl_text(line, self.field, self.path, functools.partial(self.line_number, index))
                 for index, line in enumerate(self.lines()) if line.strip()]
        data = np.frombuffer(b"".join(texts), np.uint8)
        return Batch(data, _offsets_of(map(len, texts), len(texts)), np.ones(len(texts), np.bool_), self)

    def lines(self) -> list[bytes]:
        return _read_range(self.path, self.start, self.end, self.file_end).split(b"\n")

    def line_number(self, index: int) -> int:
        """The file's line number of this range's line ``index`` (counted from the file's start: slow, for messages)."""
        return _read_range(self.path, 0, self.start).count(b"\n") + index + 1

    def where(self, i: int) -> tuple[str, int]:
        index = [index for index, line in enumerate(self.lines()) if line.strip()][i]
        return f"{os.fspath(self.path)}:{self.line_number(index)}", 0

    def release(self) -> None:
        pass


@dataclass
class SeparatedRange:
    """The bytes [start, end) of a file whose documents are split by ``separator`` (``file_documents``), read and
    split by the worker. ``start`` is a document's start or a cut inside one; ``end`` follows a separator, or is
    a cut inside a document (``cut_at_end``), or the file's end (``file_end``)."""

    path: str | os.PathLike
    start: int
    end: int
    separator: bytes
    cut_at_end: bool
    file_end: bool

    def load(self, buffer: ReusedBuffer) -> Batch:
        parts = _read_range(self.path, self.start, self.end, self.file_end).split(self.separator)
        last = np.ones(len(parts), np.bool_)
        if self.cut_at_end:
            last[-1] = False
        elif not (self.file_end and (parts[-1] or (self.start == 0 and len(parts) == 1))):
            parts.pop()  # nothing follows the range's last separator: no document (file_documents' rule)
            last = last[:-1]
        data = np.frombuffer(b"".join(parts), np.uint8)
        return Batch(data, _offsets_of(map(len, parts), len(parts)), last, self)

    def where(self, i: int) -> tuple[str, int]:
        """(``file_documents``' name of text i's document, text i's offset in the file): counts the separators
        before it (slow, for messages)."""
        parts = _read_range(self.path, self.start, self.end).split(self.separator)
        first_byte = self.start + sum(len(part) + len(self.separator) for part in parts[:i])
        index = _read_range(self.path, 0, first_byte).count(self.separator)
        return f"{os.fspath(self.path)}[{index}]", first_byte

    def release(self) -> None:
        pass


def _read_range(path, start: int, end: int, file_end: bool = False) -> bytes:
    """The bytes [start, end) of the file ``path`` (which ends at ``end`` if ``file_end``); a RuntimeError if the
    file's size changed since."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        parts, position = [], start
        while position < end and (part := os.pread(descriptor, end - position, position)):
            parts.append(part)
            position += len(part)
        grown = file_end and position == end and os.pread(descriptor, 1, end)
    finally:
        os.close(descriptor)
    if position < end or grown:
        raise RuntimeError(f"{os.fspath(path)}: the file changed size while it was being encoded")
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _read_only(view: np.ndarray) -> np.ndarray:
    """A read-only view (the kernels take text as read-only arrays, as a mapped file is)."""
    view.flags.writeable = False
    return view


def _read_file_into(path, view: memoryview) -> int:
    """Read the file ``path`` into ``view`` until either is exhausted; the number of bytes read (``os.open`` and
    ``os.readv``: no file object is built for a file read once)."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        filled = 0
        while filled < len(view) and (count := os.readv(descriptor, [view[filled:]])):
            filled += count
        return filled
    except OSError as error:  # readv's error names no file (a folder: "Is a directory")
        raise type(error)(error.errno, error.strerror, os.fspath(path)) from None
    finally:
        os.close(descriptor)


def document_tasks(documents: Iterable[Document], rule: CutRule | None, chunk_bytes: int | None,
                   ) -> Iterator[PieceGroup]:
    """The documents cut into pieces, grouped into tasks of about ``chunk_bytes`` (many small documents make one
    task; ``chunk_bytes=None``: a piece per task)."""
    group: list[Piece] = []
    size = 0
    for piece in pieces(documents, rule, chunk_bytes):
        group.append(piece)
        size += piece.end - piece.start
        if chunk_bytes is None or size >= chunk_bytes:
            yield PieceGroup(group)
            group, size = [], 0
    if group:
        yield PieceGroup(group)


def file_tasks(paths: Sequence[str | os.PathLike], rule: CutRule | None, chunk_bytes: int | None,
               ) -> Iterator[PieceGroup | FileGroup]:
    """Files, each one document, as tasks: consecutive files of at most ``chunk_bytes`` in all make one
    ``FileGroup`` (the worker opens and reads them); a larger file is mapped here and cut into pieces. The main
    thread's work per small file is one ``stat`` (taken ``FIRST_STAT_BLOCK`` files at a time, doubling up to
    ``STAT_BLOCK``, as the tasks are needed)."""
    start, block = 0, FIRST_STAT_BLOCK  # a small first block: the workers start after a few stats, not thousands
    while start < len(paths):
        block_paths = paths[start : start + block]
        yield from _file_block_tasks(block_paths, file_sizes(block_paths), rule, chunk_bytes)
        start, block = start + block, min(2 * block, STAT_BLOCK)


FIRST_STAT_BLOCK, STAT_BLOCK = 1 << 6, 1 << 12


def _file_block_tasks(paths, sizes: np.ndarray, rule: CutRule | None, chunk_bytes: int | None,
                      ) -> Iterator[PieceGroup | FileGroup]:
    """``file_tasks`` of the files ``paths`` of known ``sizes``."""
    ends = np.cumsum(sizes)
    i = 0
    while i < len(paths):
        if chunk_bytes is not None and sizes[i] > chunk_bytes:
            data = _map_file(paths[i])
            document = Document(os.fspath(paths[i]), data, 0, len(data))
            for piece in document_pieces(document, rule, chunk_bytes):
                yield PieceGroup([piece])
            i += 1
            continue
        following = i + 1
        if chunk_bytes is not None:  # the files i..following-1 hold at most chunk_bytes
            following = max(following, int(np.searchsorted(ends, ends[i] - sizes[i] + chunk_bytes, side="right")))
        yield FileGroup(paths[i:following], sizes[i:following])
        i = following


def jsonl_tasks(paths: Sequence[str | os.PathLike], field: str, chunk_bytes: int | None) -> Iterator[JsonLinesRange]:
    """JSON Lines files as tasks of whole lines, about ``chunk_bytes`` each (``None``: a file per task). The main
    thread only finds a newline after every ``chunk_bytes`` (in a mapped file); the workers read and parse."""
    if chunk_bytes is not None and chunk_bytes < 1:
        raise ValueError(f"chunk_bytes must be at least 1, not {chunk_bytes}")
    for path in paths:
        size = os.stat(path).st_size
        if chunk_bytes is None or size <= chunk_bytes:
            if size:
                yield JsonLinesRange(path, 0, size, field, file_end=True)
            continue
        data = _map_file(path)
        start = 0
        while start < size:
            end = data.find(b"\n", start + chunk_bytes - 1) + 1 or size
            release_pages(data, start, end)
            yield JsonLinesRange(path, start, end, field, file_end=end == size)
            start = end


def separated_tasks(paths: Sequence[str | os.PathLike], separator: str, rule: CutRule | None,
                    chunk_bytes: int | None) -> Iterator[SeparatedRange]:
    """Files of documents split by ``separator`` as tasks of about ``chunk_bytes`` (``None``: a file per task):
    a task ends after the last separator in its window, or, inside a document longer than that, at a cut of
    ``rule``. The main thread only searches a mapped file for separators and cuts; the workers read and split."""
    needle = separator.encode("utf-8")
    if not needle:
        raise ValueError("the document separator is empty")
    if chunk_bytes is not None and chunk_bytes < 1:
        raise ValueError(f"chunk_bytes must be at least 1, not {chunk_bytes}")
    for path in paths:
        size = os.stat(path).st_size
        if chunk_bytes is None or size <= chunk_bytes:
            yield SeparatedRange(path, 0, size, needle, cut_at_end=False, file_end=True)
            continue
        data = _map_file(path)
        start = document_start = 0
        while start < size:
            end, cut = _separated_range_end(data, needle, start, document_start, rule, chunk_bytes)
            release_pages(data, start, end)
            yield SeparatedRange(path, start, end, needle, cut_at_end=cut, file_end=end == size)
            start = end
            if not cut:
                document_start = end


def _separated_range_end(data, needle: bytes, start: int, document_start: int, rule: CutRule | None,
                         chunk_bytes: int) -> tuple[int, bool]:
    """(end, whether it is a cut) of the task starting at ``start`` in the document from ``document_start``.

    Separators are found as ``bytes.split`` finds them: leftmost first, not overlapping, from a document's start
    (a cut lies before the document's separator, so searching from it finds the same)."""
    limit = start + chunk_bytes
    if limit >= len(data):
        return len(data), False
    separator_end = _last_separator_end(data, needle, start, limit)
    if separator_end is not None:
        return separator_end, False
    high = limit - len(needle)  # no separator starts in [start, high]: the document goes on past high
    cut = rule.last_cut(data, start, high, document_start) if rule is not None and high > start else None
    if cut is None:
        found = data.find(needle, max(start, high + 1))
        document_end = len(data) if found < 0 else found
        cut = rule.next_cut(data, max(start, high), document_end, document_start) if rule is not None else None
        if cut is None:
            return (len(data) if found < 0 else found + len(needle)), False
    return cut, True


def _last_separator_end(data, needle: bytes, start: int, limit: int) -> int | None:
    """The end of the last separator in data[start:limit], as a search from ``start`` finds them, or None."""
    if not any(needle[:k] == needle[-k:] for k in range(1, len(needle))):  # occurrences cannot overlap
        found = data.rfind(needle, start, limit)
        return None if found < 0 else found + len(needle)
    end = None
    while (found := data.find(needle, start, limit)) >= 0:
        end = start = found + len(needle)
    return end


Task = PieceGroup | FileGroup | JsonLinesRange | SeparatedRange


# ------------------------------------------------------------------------------- the pool and reassembly


def ordered_map(function: Callable, items: Iterable, workers: int, in_flight: int) -> Iterator[tuple]:
    """``(item, function(item))`` for each item, in input order, computed on ``workers`` threads.

    At most ``in_flight`` items are submitted and not yet yielded: the items are read only as fast as the
    consumer takes results (back-pressure). A worker's exception is raised here; closing the generator (or
    Ctrl-C in the consumer) cancels what has not started, and waits only for the items already running.
    """
    if workers < 1 or in_flight < 1:
        raise ValueError(f"workers and in_flight must be at least 1, not {workers} and {in_flight}")
    pending: deque = deque()
    pool = ThreadPoolExecutor(workers, thread_name_prefix="crayon-pipeline")
    try:
        for item in items:
            pending.append((item, pool.submit(function, item)))
            if len(pending) >= in_flight:
                item, future = pending.popleft()
                yield item, future.result()
        while pending:
            item, future = pending.popleft()
            yield item, future.result()
    finally:
        for _, future in pending:
            future.cancel()
        pool.shutdown(wait=True, cancel_futures=True)


class EncodedBatch(NamedTuple):
    """A batch's tokens: text i's ``counts[i]`` tokens follow text i - 1's in ``tokens`` (uint32); ``last`` and
    the texts' byte ``offsets`` as in ``Batch``."""

    tokens: np.ndarray
    counts: np.ndarray
    last: np.ndarray
    offsets: np.ndarray


def text_encoder(tokenizer, allowed_special: frozenset[str], errors: str) -> Callable[[Batch], EncodedBatch]:
    """The worker's encoding: a batch's texts -> their tokens, with the tokenizer's own ``encode``."""

    def encode_batch(batch: Batch) -> EncodedBatch:
        batch = batch.checked(errors)
        arrays = [np.asarray(tokenizer.encode(str(batch.text(i), "utf-8"), allowed_special=allowed_special,
                                              disallowed_special=()), dtype=np.uint32)
                  for i in range(len(batch.last))]
        counts = np.fromiter(map(len, arrays), np.int64, len(arrays))
        tokens = np.concatenate(arrays) if arrays else np.empty(0, np.uint32)
        return EncodedBatch(tokens, counts, batch.last, batch.offsets)

    return encode_batch


def run_tasks(tasks: Iterable[Task], work: Callable[[Batch], object], *, workers: int,
              in_flight: int | None = None) -> Iterator:
    """``work(task.load(...))`` of each task, in order, on ``workers`` threads: a worker loads the task's bytes
    into its reused buffer, works, then releases the task's pages. Everything a task needs happens on its
    worker; the caller's thread only plans tasks and takes results."""
    buffer = ReusedBuffer()

    def load_and_work(task):
        try:
            return work(task.load(buffer))
        finally:
            task.release()

    for _, result in ordered_map(load_and_work, tasks, workers, in_flight or 2 * workers):
        yield result


def join_documents(batches: Iterable[EncodedBatch]) -> Iterator[tuple[int, np.ndarray]]:
    """``(document index, tokens)`` of whole documents from a stream of encoded batches."""
    parts: list[np.ndarray] = []
    document = 0
    for batch in batches:
        ends = np.cumsum(batch.counts).tolist()
        for i, (start, end) in enumerate(zip([0, *ends[:-1]], ends)):
            parts.append(batch.tokens[start:end])
            if batch.last[i]:
                yield document, np.concatenate(parts) if len(parts) > 1 else parts[0]
                parts, document = [], document + 1


def encode_documents(tokenizer, documents: Iterable[Document], *, allowed_special: Iterable[str] = (),
                     chunk_bytes: int | None = DEFAULT_CHUNK_BYTES, workers: int = 2, errors: str = "strict",
                     ) -> Iterator[tuple[int, np.ndarray]]:
    """The reference pipeline: ``(document index, tokens)`` of every document, whole, in order, each equal to
    the tokenizer's ``encode`` of the document's text (see the module docstring)."""
    allowed = frozenset(allowed_special)
    rule = None if chunk_bytes is None else CutRule(tokenizer, allowed)
    tasks = document_tasks(documents, rule, chunk_bytes)
    yield from join_documents(run_tasks(tasks, text_encoder(tokenizer, allowed, errors), workers=workers))

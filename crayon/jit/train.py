"""Byte-level BPE training in Numba: the fast algorithm of ``crayon.reference.train`` over flat arrays.

Learns the same merges as ``crayon.reference.train.train_bpe``, merge for merge: same words, counts,
tie-break and id reuse (the rules are in that module's docstring).

Word counting streams its input: files are read in chunks, long texts are sliced, and a thread per core
pre-tokenizes chunks with ``crayon.jit.pretokenize`` and counts their words in a hash table (``WordBag``).
The kernels (``count_words_kernel``, ``add_bag_kernel``, ``learn_merges_kernel``) run from the extension that
``crayon.jit.aot`` compiles ahead of time (``aot.TRAINING``), so training does not import numba; where it cannot
be built, as numba dispatchers.

A document is only cut where cutting cannot change its spans (see ``safe_cuts``); a custom pattern, for which
there is neither such a proof nor a jit pre-tokenizer, is run by ``regex`` over each text or file whole.

Memory grows with the distinct words, never with the corpus itself, since exact training keeps every distinct
word (as the reference and HF tokenizers do; none is pruned). Counting holds a bag per thread: per distinct word
a row (start, length, count, hash: 32 bytes, grown by half) and two to four hash slots (4 bytes each), plus its
bytes. The merges hold, per byte of the distinct words, its token (int32), a word-start bit and its
occurrence entry (int32), with room for an eighth as many new occurrences (two int32 each): about 10 bytes; per
word its first position (int32) and count (int64); and per pair ever counted, about 45 bytes (its row, count,
hash slots and heap entry). On linux-source-6.1: 304k distinct words of 3.4 MB in the first 100 MB, 468k of
4.6 MB in the first 500 MB, 986k of 8.8 MB in the whole 1,298 MB. On glibc, training fixes malloc's mmap and trim
thresholds (2 and 4 MiB) for the rest of the process (``_pin_mmap_threshold``), so that the large arrays it
frees go back to the system.
"""

from __future__ import annotations

import codecs
import collections
import concurrent.futures
import ctypes
import functools
import os
import sys
import threading
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from crayon.cartridge import VOCAB_BYTES, VOCAB_OFFSETS, vocab_sections
from crayon.jit import aot
from crayon.jit.byte_ranges import FNV_OFFSET, fnv1a
from crayon.jit.cores import available_cores
from crayon.jit.kernels import SPAN_BATCH
from crayon.jit.lazy import njit
from crayon.jit.pretokenize import (
    BLOCK_SHIFT,
    BLOCK_SIZE,
    LETTER,
    PATTERN_IDS,
    WHITESPACE,
    classify_characters,
    fill_span_ends,
    unicode_tables,
)
from crayon.patterns import pattern_name, resolve_pattern
from crayon.reference.bpe import BytePairModel
from crayon.reference.pretokenize import split_specials
from crayon.reference.train import (
    N_BYTES,
    Extension,
    Splitter,
    TrainResult,
    Vocabulary,
    check_extension,
    check_settings,
    count_spans,
    words_of_spans,
)

CHUNK_SIZE = 1 << 20

# A cut at q between a letter text[q-1] and a whitespace character text[q] leaves the spans of the r50k,
# cl100k and o200k patterns unchanged (regex.findall(text) == findall(text[:q]) + findall(text[q:])):
# - In the whole text a span ends at q: the alternatives that take letters (letter runs, o200k's cased words,
#   contractions) end at the whitespace, and none that takes whitespace can start before q and reach it,
#   since text[q-1] is not whitespace.
# - text[:q] gives the same spans: the matches before q read text[q] only to stop a letter run or to fail a
#   contraction or a longer alternative, and the end of the text stops and fails them the same way.
# - The spans from q on depend only on text[q:]: the patterns have no lookbehind and findall restarts at q.
# Letters (\p{L}) and whitespace (\s) are read from the jit pre-tokenizer's Unicode 16 tables, as its spans are.
CUT_SEARCH_BLOCK = 1 << 16  # the most characters examined at a time, from the end of a piece back


def character_properties(text: str) -> np.ndarray:
    """The jit pre-tokenizer's property bits of each character of ``text`` (``crayon.jit.pretokenize``'s
    ``LETTER``: \\p{L}, ``WHITESPACE``: \\s, ..., Unicode 16)."""
    block_index, block_classes, class_properties = _unicode_tables()
    code_points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
    blocks = block_index[code_points >> BLOCK_SHIFT].astype(np.int64) << BLOCK_SHIFT
    return class_properties[block_classes[blocks | (code_points & (BLOCK_SIZE - 1))]]


def safe_cuts(text: str, low: int, high: int) -> np.ndarray:
    """Every safe cut q of ``text`` with low <= q < high (1 <= low): text[q - 1] a letter, text[q] whitespace."""
    properties = character_properties(text[low - 1 : high])
    return np.flatnonzero((properties[:-1] & LETTER != 0) & (properties[1:] & WHITESPACE != 0)) + low


@functools.cache
def _unicode_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return unicode_tables()

_LEFT, _RIGHT, _HEAD, _LENGTH = range(4)  # columns of the pair table (int32; counts apart, int64)
_EMPTY = -1
# The occurrence lists share one int32 array: a pair's list is a chain of blocks of positions (>= 0), each block
# ending in _LIST_END or in a link to the next block's first entry k, written _LINK_BASE - k.
_LIST_END = -1
_LINK_BASE = -2


def train_bpe_jit(
    texts_or_files: str | os.PathLike | Iterable[str | os.PathLike],
    vocab_size: int,
    *,
    pattern: str = "cl100k_base",
    special_tokens: str | Sequence[str] = (),
    progress: bool = False,
    workers: int | None = None,
) -> TrainResult:
    """Train byte-level BPE; the same result as ``crayon.reference.train.train_bpe`` on the same texts.

    ``texts_or_files``: a ``str`` (one text), a path (``os.PathLike``, one UTF-8 file) or an iterable of
    both; each item is a separate document. Files are read as UTF-8 with their line endings kept; one that
    is not valid UTF-8 raises ``ValueError`` naming it. ``workers``: threads counting words (default:
    ``available_cores()``). ``progress``: tqdm bars for the counting and merging phases (rate, ETA).
    """
    specials = check_settings(vocab_size, special_tokens)
    word_bytes, word_lengths, word_counts = count_words_jit(
        texts_or_files, pattern, specials, workers=workers or available_cores(), progress=progress
    )
    tokens = word_bytes.astype(np.int32)
    starts = _word_starts(word_lengths)
    del word_bytes, word_lengths  # not needed by the merges: freed before they start
    merges = _run_merges((tokens, starts, word_counts), vocab_size - len(specials), progress)
    vocab = Vocabulary()
    for left, right in merges:
        vocab.merge(left, right)
    return vocab.result([(int(left), int(right)) for left, right in merges], specials, pattern)


def extend_bpe_jit(
    texts_or_files: str | os.PathLike | Iterable[str | os.PathLike],
    model: BytePairModel,
    n_new_tokens: int,
    *,
    first_id: int,
    encode_spans: Callable[[list[bytes]], np.ndarray],
    pattern: str | Splitter = "cl100k_base",
    special_tokens: Sequence[str] = (),
    progress: bool = False,
    workers: int | None = None,
) -> Extension:
    """Continue BPE training from ``model``; the same result as ``crayon.reference.train.extend_bpe`` on the
    same texts (its docstring has the rules).

    The words are counted as in ``train_bpe_jit``, encoded by ``encode_spans`` (pre-tokenized spans -> their
    tokens end to end under ``model``: the jit engine's), and merged on from those tokens by the training
    kernel started from the existing vocabulary."""
    check_extension(model, n_new_tokens, first_id)
    word_bytes, word_lengths, word_counts = count_words_jit(
        texts_or_files, pattern, special_tokens, workers=workers or available_cores(), progress=progress
    )
    sections = vocab_sections(model.token_bytes)
    vocab_bytes, offsets = sections[VOCAB_BYTES], sections[VOCAB_OFFSETS]
    offsets = np.concatenate((offsets, np.full(first_id + 1 - len(offsets), offsets[-1], np.int64)))
    ends = np.cumsum(word_lengths)
    blob = word_bytes.tobytes()
    starts = (ends - word_lengths).tolist()
    tokens = np.asarray(encode_spans([blob[start:end] for start, end in zip(starts, ends.tolist())]))
    token_ends = np.cumsum(np.diff(offsets)[tokens])  # a token never crosses a word's end
    token_lengths = np.diff(np.searchsorted(token_ends, ends) + 1, prepend=0)
    several = token_lengths > 1  # a word of one token has no pair to merge
    merges = _run_merges(
        (tokens[np.repeat(several, token_lengths)], _word_starts(token_lengths[several]), word_counts[several]),
        first_id + n_new_tokens,
        progress,
        (vocab_bytes, offsets),
    )
    vocab = Vocabulary(model.token_bytes, next_id=first_id)
    pairs = [(int(left), int(right)) for left, right in merges]
    for left, right in pairs:
        vocab.merge(left, right)
    return Extension([(vocab.token_bytes[left], vocab.token_bytes[right]) for left, right in pairs], vocab.ranks)


# ----------------------------------------------------------------------------------------------- word counts


def count_words_jit(
    texts_or_files: str | os.PathLike | Iterable[str | os.PathLike],
    pattern: str | Splitter,
    special_tokens: Sequence[str],
    *,
    workers: int,
    chunk_size: int = CHUNK_SIZE,
    progress: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The words ``crayon.reference.train.count_words`` counts, as arrays: (their bytes end to end (uint8),
    their lengths, their counts), in no particular order.

    The named patterns split chunks with ``crayon.jit.pretokenize`` and count words into a ``WordBag``, in
    ``workers`` threads (the kernels run without the GIL). A custom regex runs in this thread with ``regex``.
    """
    _pin_mmap_threshold()
    bar = _progress_bar(progress, "counting words", unit="char", unit_scale=True)

    def counted(chunks: Iterable[str]) -> Iterator[str]:
        for chunk in chunks:
            yield chunk
            if bar is not None:
                bar.update(len(chunk))

    chunks = counted(iter_chunks(texts_or_files, pattern, special_tokens, chunk_size))
    name = pattern_name(resolve_pattern(pattern)) if isinstance(pattern, str) else None
    if name is None:
        span_counts: collections.Counter[str] = collections.Counter()
        for chunk in chunks:
            count_spans(chunk, pattern, special_tokens, span_counts)
        word_counts = words_of_spans(span_counts)
        arrays = (
            np.frombuffer(b"".join(word_counts), np.uint8),
            np.fromiter(map(len, word_counts), np.int64, len(word_counts)),
            np.fromiter(word_counts.values(), np.int64, len(word_counts)),
        )
    else:
        arrays = _count_with_spanner(chunks, PATTERN_IDS[name], special_tokens, workers).arrays()
        _release_free_memory()  # the bags' arrays, freed in the counting threads
    if bar is not None:
        bar.close()
    return arrays


# Blocks above MMAP_THRESHOLD get their own mapping, returned to the system when freed; the per-chunk buffers of
# counting (about 1 MB each) stay below it and are reused from malloc's arenas (mapping them afresh for each chunk
# cost about a fifth more CPU time, in page faults, on linux-source-6.1 at a 128 KiB threshold).
MMAP_THRESHOLD = 2 << 20
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD  # as glibc sets it when it moves the mmap threshold
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameter numbers (malloc.h)


def _pin_mmap_threshold() -> None:
    """Set glibc's mmap and trim thresholds to ``MMAP_THRESHOLD`` and ``TRIM_THRESHOLD`` and keep them there for
    the rest of this process; elsewhere nothing.

    glibc raises its mmap threshold each time a mapped block is freed (up to 32 MB; the trim threshold to twice
    that), after which blocks below it come from its arenas and stay resident once freed, scattered. Training
    grows and frees arrays of many MB (on linux-source-6.1 that left 20-60 MB resident and unused), so it fixes
    the threshold: every larger array is mapped and returned to the system when freed. glibc has no call to
    restore the moving threshold; the cost is a system call per large allocation."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)


def _release_free_memory() -> None:
    """Give the free pages of every malloc arena back to the system (glibc's ``malloc_trim``; elsewhere nothing):
    arrays freed in a worker thread's arena otherwise stay resident while the merges allocate theirs."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)


def training_kernels():
    """The module whose kernels train: the extension ``crayon.jit.aot`` compiles ahead of time (numba is not
    imported), or this module, whose kernels are numba dispatchers (where it cannot be built, or ``CRAYON_AOT=0``)."""
    return aot.load_kernels(aot.TRAINING) or sys.modules[__name__]


def _count_with_spanner(chunks: Iterator[str], pattern_id: int, special_tokens: Sequence[str], workers: int):
    """Count the words of ``chunks`` in ``workers`` threads, each into its own bag; return their sum."""
    lock = threading.Lock()
    failed = threading.Event()  # one thread's error stops the others
    kernels = training_kernels()
    char_tables = unicode_tables()

    def count_chunks() -> WordBag:
        bag = WordBag(kernels)
        try:
            while not failed.is_set():
                with lock:  # a generator is not thread-safe
                    chunk = next(chunks, None)
                if chunk is None:
                    break
                for piece, is_special in split_specials(chunk, special_tokens):
                    if not is_special:
                        bag.add_text(np.frombuffer(_utf8(piece), np.uint8), pattern_id, char_tables)
        except BaseException:
            failed.set()
            raise
        return bag

    if workers == 1:
        return count_chunks()
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        futures = [pool.submit(count_chunks) for _ in range(workers)]
        try:
            bags = [future.result() for future in futures]
        except BaseException:  # Ctrl-C: the threads stop after their chunk, not after the corpus
            failed.set()
            raise
    for bag in bags[1:]:
        bags[0].add_bag(bag)
    return bags[0]


def _utf8(text: str) -> bytes:
    """The UTF-8 bytes of ``text``; a lone surrogate is refused with ValueError."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as error:
        context = text[max(error.start - 20, 0) : error.start + 20]
        raise ValueError(
            f"training text contains a lone surrogate {text[error.start]!r} (in {context!r}); "
            "it has no UTF-8 encoding"
        ) from None


def iter_chunks(
    texts_or_files: str | os.PathLike | Iterable[str | os.PathLike],
    pattern: str | Splitter,
    special_tokens: Sequence[str],
    chunk_size: int = CHUNK_SIZE,
) -> Iterator[str]:
    """Yield text chunks whose spans are those of the documents (each a text or a file), in order.

    Texts are sliced, files read, in pieces of ``chunk_size`` characters (bytes for files); a chunk ends at
    the last safe cut (``safe_cuts``) of a piece, so it is at most about two pieces long where cuts are frequent."""
    cuttable = isinstance(pattern, str) and pattern_name(resolve_pattern(pattern)) is not None
    sources = [texts_or_files] if isinstance(texts_or_files, (str, os.PathLike)) else texts_or_files
    # A special token holding whitespace could straddle a cut: cuts keep room for it on both sides and check.
    straddlers = [token for token in special_tokens if (character_properties(token) & WHITESPACE).any()]
    for source in sources:
        if isinstance(source, str):
            pieces: Iterable[str] = (source[i : i + chunk_size] for i in range(0, len(source), chunk_size))
        elif isinstance(source, os.PathLike):
            pieces = _read_pieces(Path(source), chunk_size)
        else:
            kind = type(source).__name__
            raise TypeError(f"training input must be str (a text) or os.PathLike (a file), got {kind}")
        if cuttable:
            yield from _cut_document(pieces, straddlers)
        else:
            document = "".join(pieces)
            if document:
                yield document


def _read_pieces(path: Path, chunk_bytes: int) -> Iterator[str]:
    """The text of a UTF-8 file, line endings kept, in pieces of about ``chunk_bytes``."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0  # bytes of the file before the decoder's input

    def decode(block: bytes, final: bool = False) -> str:
        nonlocal offset
        pending, _ = decoder.getstate()  # the start of a character split between two blocks
        try:
            text = decoder.decode(block, final)
        except UnicodeDecodeError as error:
            position = offset - len(pending) + error.start
            raise ValueError(f"{path} is not UTF-8 text: {error.reason} at byte {position}") from None
        offset += len(block)
        return text

    with open(path, "rb") as file:
        for block in iter(lambda: file.read(chunk_bytes), b""):
            yield decode(block)
    decode(b"", final=True)


def _cut_document(pieces: Iterable[str], straddlers: list[str]) -> Iterator[str]:
    """Re-cut a document's consecutive pieces at the last safe cut of each piece that none of the special
    tokens ``straddlers`` (those holding whitespace) straddles."""
    reach = max(map(len, straddlers), default=1) - 1
    context = max(1, reach)
    pending: list[str] = []
    tail = ""  # the last characters before the piece, so that a cut can use them as left context
    pieces = iter(pieces)
    following = next(pieces, None)
    while following is not None:
        piece, following = following, next(pieces, None)
        if following is None:  # the document's last piece: no cut needed (a short file is one chunk)
            pending.append(piece)
            break
        window = tail + piece
        cut = _last_safe_cut(window, len(tail) + 1, len(window) - reach, straddlers, reach)
        if cut is None:
            pending.append(piece)
        else:
            cut -= len(tail)
            yield "".join(pending) + piece[:cut]
            pending = [piece[cut:]]
        tail = window[-context:]
    if pending:
        yield "".join(pending)


def _last_safe_cut(window: str, low: int, high: int, straddlers: list[str], reach: int) -> int | None:
    """The largest safe cut q of ``window`` with low <= q <= high that no special token straddles."""
    stop = min(high, len(window) - 1) + 1
    low = max(low, 1)
    block = 256
    while stop > low:  # from the end back, in growing blocks: the last cut is usually near the end
        start = max(low, stop - block)
        for cut in safe_cuts(window, start, stop)[::-1].tolist():
            if not any(token in window[max(cut - reach, 0) : cut + reach] for token in straddlers):
                return cut
        stop = start
        block = min(4 * block, CUT_SEARCH_BLOCK)
    return None


def _progress_bar(enabled: bool, description: str, **options):
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError as missing:
        raise ImportError("progress=True needs tqdm (pip install tqdm)") from missing

    return tqdm(desc=description, **options)


# -------------------------------------------------------------------------------------------------- word bag


_WORD_START, _WORD_LENGTH, _WORD_COUNT, _WORD_HASH = range(4)  # columns of a bag's word table


class WordBag:
    """Distinct words and their counts in flat arrays, filled by kernels that run without the GIL.

    ``word_bytes`` holds the words end to end in the order first seen; ``words`` has a row (start, length,
    count, hash) per word; ``table`` is an open-addressing hash table of word ids (at most half full);
    ``sizes`` is (number of words, number of bytes). ``kernels``: ``training_kernels()``."""

    def __init__(self, kernels=None) -> None:
        self.kernels = kernels or training_kernels()
        self.word_bytes = np.empty(1 << 16, np.uint8)
        self.words = np.empty((1 << 12, 4), np.int64)
        self.table = np.full(1 << 13, _EMPTY, np.int32)
        self.sizes = np.zeros(2, np.int64)

    def add_text(self, data: np.ndarray, pattern_id: int, char_tables: tuple) -> None:
        """Count the spans of the UTF-8 text ``data`` (a read-only uint8 array) under the jit pre-tokenizer
        ``pattern_id`` (``char_tables``: ``unicode_tables()``)."""
        self.word_bytes, self.words, self.table = self.kernels.count_words_kernel(
            self.word_bytes, self.words, self.table, self.sizes, data, pattern_id, char_tables
        )

    def add_bag(self, other: WordBag) -> None:
        """Add the words and counts of ``other``."""
        self.word_bytes, self.words, self.table = self.kernels.add_bag_kernel(
            self.word_bytes, self.words, self.table, self.sizes, other.word_bytes, other.words, other.sizes
        )

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(the words' bytes end to end, their lengths, their counts)."""
        n_words, n_bytes = self.sizes
        return (
            self.word_bytes[:n_bytes].copy(),  # not a view: the bag's buffers are freed with it
            np.ascontiguousarray(self.words[:n_words, _WORD_LENGTH]),
            np.ascontiguousarray(self.words[:n_words, _WORD_COUNT]),
        )


@njit(cache=True, nogil=True)
def _bag_reserve(word_bytes, words, table, sizes, more_words, more_bytes):
    """The bag's arrays, grown so that ``more_words`` new words of ``more_bytes`` bytes in all fit."""
    n_words, n_bytes = sizes[0], sizes[1]
    if n_words + more_words >= 2**31:
        raise ValueError("training supports fewer than 2**31 distinct words")  # word ids are int32 in the table
    word_bytes = _grown(word_bytes, n_bytes + more_bytes)
    words = _grown(words, n_words + more_words)
    if 2 * (n_words + more_words) > table.shape[0]:
        size = table.shape[0]
        while 2 * (n_words + more_words) > size:
            size *= 2
        table = np.full(size, _EMPTY, np.int32)
        for word in range(n_words):
            slot = _hash_slot(np.uint64(words[word, _WORD_HASH]), size - 1)
            while table[slot] != _EMPTY:
                slot = (slot + 1) & (size - 1)
            table[slot] = word
    return word_bytes, words, table


@njit(cache=True, nogil=True)
def _bag_add(word_bytes, words, table, sizes, source, start, length, count):
    """Count the word source[start:start+length] ``count`` times; the bag needs room for it."""
    digest = fnv1a(source, start, start + length, FNV_OFFSET)
    mask = table.shape[0] - 1
    slot = _hash_slot(digest, mask)
    while table[slot] != _EMPTY:
        word = table[slot]
        if (
            words[word, _WORD_HASH] == np.int64(digest)
            and words[word, _WORD_LENGTH] == length
            and _same_bytes(word_bytes, words[word, _WORD_START], source, start, length)
        ):
            words[word, _WORD_COUNT] += count
            return
        slot = (slot + 1) & mask
    n_words, n_bytes = sizes[0], sizes[1]
    _copy_bytes(word_bytes, n_bytes, source, start, length)
    words[n_words, _WORD_START] = n_bytes
    words[n_words, _WORD_LENGTH] = length
    words[n_words, _WORD_COUNT] = count
    words[n_words, _WORD_HASH] = np.int64(digest)
    table[slot] = n_words
    sizes[0] = n_words + 1
    sizes[1] = n_bytes + length


@njit(cache=True, nogil=True)
def count_words_kernel(word_bytes, words, table, sizes, data, pattern_id, char_tables):
    """Count each span of the UTF-8 text ``data`` under the jit pre-tokenizer ``pattern_id`` into the bag
    (word_bytes, words, table, sizes); returns the bag's arrays, grown where needed."""
    length = data.shape[0]
    classes = np.empty(length, np.uint8)
    classify_characters(data, 0, length, char_tables, classes)
    ends = np.empty(SPAN_BATCH, np.int64)
    pos = 0
    while pos < length:
        found = fill_span_ends(classes, pos, length, pattern_id, char_tables, ends)
        if found == 0 or ends[0] <= pos or ends[found - 1] > length:
            raise RuntimeError("the pre-tokenizer made no progress")
        word_bytes, words, table = _bag_reserve(word_bytes, words, table, sizes, found, ends[found - 1] - pos)
        for i in range(found):
            _bag_add(word_bytes, words, table, sizes, data, pos, ends[i] - pos, 1)
            pos = ends[i]
    return word_bytes, words, table


@njit(cache=True, nogil=True)
def add_bag_kernel(word_bytes, words, table, sizes, other_bytes, other_words, other_sizes):
    word_bytes, words, table = _bag_reserve(word_bytes, words, table, sizes, other_sizes[0], other_sizes[1])
    for word in range(other_sizes[0]):
        start, length = other_words[word, _WORD_START], other_words[word, _WORD_LENGTH]
        _bag_add(word_bytes, words, table, sizes, other_bytes, start, length, other_words[word, _WORD_COUNT])
    return word_bytes, words, table


# ---------------------------------------------------------------------------------------------------- merges


def _run_merges(
    arrays: tuple[np.ndarray, np.ndarray, np.ndarray],
    n_tokens: int,
    progress: bool,
    vocabulary: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Run ``learn_merges`` on (the words' token ids or bytes end to end, their first positions (``_word_starts``),
    their counts) from
    ``vocabulary`` (bytes end to end, offsets; default: the byte tokens) until the next id is ``n_tokens``, in a
    thread while this one follows the new tokens (a bar with ``progress``) and stops it on Ctrl-C. Token ids
    given as a C-contiguous int32 array are merged in place (the caller's array is overwritten).

    The words can make at most one token per symbol beyond the first of each word, so no more is allocated."""
    symbols, word_starts, word_weights = arrays
    vocab_bytes, vocab_offsets = byte_vocabulary() if vocabulary is None else vocabulary
    first_new = len(vocab_offsets) - 1
    n_tokens = min(n_tokens, first_new + symbols.size - word_starts.size)
    # One compiled version of the kernel: writable C-contiguous arrays of fixed types, whoever made them.
    token = np.require(symbols, np.int32, requirements="CW")  # overwritten by the kernel: a copy unless int32
    word_starts = np.require(word_starts, np.int32, requirements="CW")
    word_weights = np.require(word_weights, np.int64, requirements="CW")
    vocab_bytes = np.require(vocab_bytes, np.uint8, requirements="CW")
    vocab_offsets = np.require(vocab_offsets, np.int64, requirements="CW")
    progress_cell = np.zeros(2, np.int64)  # next new id, stop request
    arguments = (token, word_starts, word_weights, n_tokens, progress_cell, vocab_bytes, vocab_offsets)
    bar = _progress_bar(progress, "merging", total=max(n_tokens - first_new, 0), unit="token")
    kernels = training_kernels()  # loaded here: a build's message comes before the bar
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        future = pool.submit(learn_merges, kernels, *arguments)
        try:
            while concurrent.futures.wait([future], timeout=0.1).not_done:
                if bar is not None:
                    bar.update(int(progress_cell[0]) - first_new - bar.n)
        except BaseException:
            progress_cell[1] = 1
            raise
        merges = future.result()
    if bar is not None:
        bar.update(int(progress_cell[0]) - first_new - bar.n)
        bar.close()
    return merges


def _word_starts(word_lengths: np.ndarray) -> np.ndarray:
    """Each word's first position in the words end to end (int32), from their lengths; refuses 2**31 positions
    or more (positions are int32 in the merges)."""
    n_positions = int(word_lengths.sum())
    if n_positions >= 2**31:
        raise ValueError(f"the distinct words hold {n_positions} tokens; training supports fewer than 2**31")
    starts = np.zeros(len(word_lengths), np.int32)
    np.cumsum(word_lengths[:-1], out=starts[1:])
    return starts


@njit(cache=True)
def _grown(array, needed):
    """``array`` itself if it has ``needed`` rows, else a copy of it with room for them and at least half as many
    rows again (growing by half, not doubling, keeps the peak memory of the merges lower)."""
    if array.shape[0] >= needed:
        return array
    return _resized(array, array.shape[0], max(needed, array.shape[0] + array.shape[0] // 2 + 1))


@njit(cache=True)
def _resized(array, n_rows, size):
    """A new array of ``size`` rows holding the first ``n_rows`` rows of ``array``."""
    resized = np.empty((size,) + array.shape[1:], array.dtype)
    resized[:n_rows] = array[:n_rows]
    return resized


@njit(cache=True)
def _relisted(pairs, n_pairs, occurrences, table, token, word_start):
    """Rebuild every pair's occurrence list from the tokens as one block of positions (dropping the occurrences
    whose position has changed pair), the blocks end to end in pair order; return the entries used.

    Two passes over the positions, the first counting each pair's occurrences, the second filling each block
    from its end (so no cursor per pair is needed). ``occurrences`` needs room for the live positions and an
    end mark per listed pair."""
    for pair in range(n_pairs):
        pairs[pair, _LENGTH] = 0
    for i in range(token.shape[0]):
        if token[i] != _EMPTY:
            j = _following(token, word_start, i)
            if j != -1:
                pairs[table[_pair_slot(table, pairs, token[i], token[j])], _LENGTH] += 1
    n_entries = np.int64(0)
    for pair in range(n_pairs):
        if pairs[pair, _LENGTH] == 0:
            pairs[pair, _HEAD] = _EMPTY
            continue
        n_entries += pairs[pair, _LENGTH]
        occurrences[n_entries] = _LIST_END
        pairs[pair, _HEAD] = n_entries  # filled downwards to the block's start below
        n_entries += 1
    for i in range(token.shape[0]):
        if token[i] != _EMPTY:
            j = _following(token, word_start, i)
            if j != -1:
                pair = table[_pair_slot(table, pairs, token[i], token[j])]
                pairs[pair, _HEAD] -= 1
                occurrences[pairs[pair, _HEAD]] = i
    return n_entries


@njit(cache=True)
def _pair_of(table, pairs, left, right):
    """The id of the listed pair (left, right)."""
    return table[_pair_slot(table, pairs, left, right)]


@njit(cache=True)
def _hash_slot(key, mask):
    """The home slot of a 64-bit key (or hash) in an open-addressing table of mask + 1 slots."""
    mixed = np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)
    return np.int64(mixed ^ (mixed >> np.uint64(32))) & mask


@njit(cache=True)
def _pair_slot(table, pairs, left, right):
    """The slot of pair (left, right) in the open-addressing ``table`` of pair ids, or the empty slot for it."""
    mask = table.shape[0] - 1
    slot = _hash_slot((np.int64(left) << 32) | right, mask)
    while table[slot] != _EMPTY and (pairs[table[slot], _LEFT] != left or pairs[table[slot], _RIGHT] != right):
        slot = (slot + 1) & mask
    return slot


@njit(cache=True)
def _rehashed(table, pairs, n_pairs, needed_pairs):
    """``table``, or a bigger one holding the same pairs, so that it stays at most three quarters full."""
    if 4 * needed_pairs <= 3 * table.shape[0]:
        return table
    size = table.shape[0]
    while 4 * needed_pairs > 3 * size:
        size *= 2
    bigger = np.full(size, _EMPTY, np.int32)
    for pair in range(n_pairs):
        bigger[_pair_slot(bigger, pairs, pairs[pair, _LEFT], pairs[pair, _RIGHT])] = pair
    return bigger


@njit(cache=True)
def _pair_id(table, pairs, counts, n_pairs, left, right):
    """(id of pair (left, right), pair count): the pair is added with count 0 if new. Needs room for it."""
    slot = _pair_slot(table, pairs, left, right)
    if table[slot] != _EMPTY:
        return np.int64(table[slot]), n_pairs
    table[slot] = n_pairs
    counts[n_pairs] = 0
    pairs[n_pairs, _LEFT] = left
    pairs[n_pairs, _RIGHT] = right
    pairs[n_pairs, _HEAD] = _EMPTY
    pairs[n_pairs, _LENGTH] = 0
    return n_pairs, n_pairs + 1


@njit(cache=True)
def _add_occurrence(pairs, occurrences, n_entries, pair, position):
    """List ``position`` for ``pair``: a block of two entries (the position, a link to the pair's list so far)
    put at the list's head; return the entries used."""
    occurrences[n_entries] = position
    head = pairs[pair, _HEAD]
    occurrences[n_entries + 1] = _LIST_END if head == _EMPTY else _LINK_BASE - head
    pairs[pair, _HEAD] = n_entries
    pairs[pair, _LENGTH] += 1
    return n_entries + 2


@njit(cache=True)
def _listed_positions(pairs, occurrences, pair, positions):
    """Copy the positions listed for ``pair`` (``pairs[pair, _LENGTH]`` of them) into ``positions``."""
    entry = pairs[pair, _HEAD]
    k = 0
    while entry != _EMPTY:
        value = occurrences[entry]
        if value >= 0:
            positions[k] = value
            k += 1
            entry += 1
        elif value == _LIST_END:
            entry = _EMPTY
        else:
            entry = _LINK_BASE - value


@njit(cache=True)
def _credit_pair(table, pairs, counts, n_pairs, occurrences, n_occurrences, grown, n_grown, left, right, position,
                 w):
    """Count an occurrence of (left, right) at ``position``, weight w, and list the pair in ``grown``. Returns
    (pair id, pair count, occurrence count, grown count); needs room for a new pair."""
    pair, n_pairs = _pair_id(table, pairs, counts, n_pairs, left, right)
    counts[pair] += w
    n_occurrences = _add_occurrence(pairs, occurrences, n_occurrences, pair, position)
    grown[n_grown] = pair
    return pair, n_pairs, n_occurrences, n_grown + 1


@njit(cache=True)
def _outranks(heap, a, b, pairs):
    """Whether heap entry a comes before entry b: higher count, then smaller left id, then smaller right id."""
    if heap[a, 0] != heap[b, 0]:
        return heap[a, 0] > heap[b, 0]
    pair_a, pair_b = heap[a, 1], heap[b, 1]
    if pairs[pair_a, _LEFT] != pairs[pair_b, _LEFT]:
        return pairs[pair_a, _LEFT] < pairs[pair_b, _LEFT]
    return pairs[pair_a, _RIGHT] < pairs[pair_b, _RIGHT]


@njit(cache=True)
def _heap_push(heap, size, pairs, count, pair):
    """Push (count, pair) onto the max-heap of ``size`` entries (room needed); return the new size."""
    i = size
    heap[i, 0] = count
    heap[i, 1] = pair
    while i > 0:
        parent = (i - 1) // 2
        if not _outranks(heap, i, parent, pairs):
            break
        heap[i, 0], heap[parent, 0] = heap[parent, 0], heap[i, 0]
        heap[i, 1], heap[parent, 1] = heap[parent, 1], heap[i, 1]
        i = parent
    return size + 1


@njit(cache=True)
def _heap_pop(heap, size, pairs):
    """Remove the top entry of the max-heap; return (count, pair, new size)."""
    count, pair = heap[0, 0], heap[0, 1]
    size -= 1
    heap[0, 0], heap[0, 1] = heap[size, 0], heap[size, 1]
    i = np.int64(0)
    while True:
        best = i
        for child in (2 * i + 1, 2 * i + 2):
            if child < size and _outranks(heap, child, best, pairs):
                best = child
        if best == i:
            break
        heap[i, 0], heap[best, 0] = heap[best, 0], heap[i, 0]
        heap[i, 1], heap[best, 1] = heap[best, 1], heap[i, 1]
        i = best
    return count, pair, size


@njit(cache=True)
def _copy_bytes(target, target_start, source, source_start, length):
    for i in range(length):
        target[target_start + i] = source[source_start + i]


@njit(cache=True)
def _same_bytes(data, start, other, other_start, length):
    """Whether data[start:start+length] equals other[other_start:other_start+length]."""
    for i in range(length):
        if data[start + i] != other[other_start + i]:
            return False
    return True


@njit(cache=True)
def _is_concatenation(token_bytes, token_spans, candidate, left, right):
    """Whether token ``candidate``'s bytes are token ``left``'s followed by token ``right``'s."""
    start, length = token_spans[candidate, 0], token_spans[candidate, 1]
    left_start, left_length = token_spans[left, 0], token_spans[left, 1]
    right_start, right_length = token_spans[right, 0], token_spans[right, 1]
    return (
        length == left_length + right_length
        and _same_bytes(token_bytes, start, token_bytes, left_start, left_length)
        and _same_bytes(token_bytes, start + left_length, token_bytes, right_start, right_length)
    )


def byte_vocabulary() -> tuple[np.ndarray, np.ndarray]:
    """The 256 single-byte tokens as (bytes end to end, offsets): the vocabulary training starts from."""
    return np.arange(N_BYTES, dtype=np.uint8), np.arange(N_BYTES + 1, dtype=np.int64)


@njit(cache=True)
def _token_store(vocab_bytes, vocab_offsets, max_tokens):
    """Token storage holding the vocabulary ``vocab_bytes[vocab_offsets[i]:vocab_offsets[i + 1]]`` (ids with no
    bytes are unused ids that no merge can make), with room for ``max_tokens`` ids:
    (bytes, (start, length) spans, hashes, hash table)."""
    n_initial = vocab_offsets.shape[0] - 1
    max_tokens = max(max_tokens, n_initial)
    table_size = 1
    while table_size < 4 * max_tokens:
        table_size *= 2
    token_table = np.full(table_size, _EMPTY, np.int64)  # token ids by hash of their bytes, at most 1/4 full
    token_spans = np.zeros((max_tokens, 2), np.int64)
    token_bytes = np.empty(vocab_offsets[n_initial] + 4 * (max_tokens - n_initial) + 16, np.uint8)
    token_hashes = np.zeros(max_tokens, np.uint64)
    token_bytes[: vocab_offsets[n_initial]] = vocab_bytes[: vocab_offsets[n_initial]]
    for token in range(n_initial):
        start, length = vocab_offsets[token], vocab_offsets[token + 1] - vocab_offsets[token]
        token_spans[token, 0] = start
        token_spans[token, 1] = length
        if length == 0:
            continue
        token_hashes[token] = fnv1a(token_bytes, start, start + length, FNV_OFFSET)
        slot = _hash_slot(token_hashes[token], table_size - 1)
        while token_table[slot] != _EMPTY:
            slot = (slot + 1) & (table_size - 1)
        token_table[slot] = token
    return token_bytes, token_spans, token_hashes, token_table


@njit(cache=True)
def _merged_token(left, right, token_bytes, token_spans, token_hashes, token_table, n_tokens):
    """(id of the concatenation of tokens left and right, token count): an existing id, or a new one.

    ``token_bytes`` needs room for the new token's bytes."""
    left_start, left_length = token_spans[left, 0], token_spans[left, 1]
    right_start, right_length = token_spans[right, 0], token_spans[right, 1]
    left_digest = fnv1a(token_bytes, left_start, left_start + left_length, FNV_OFFSET)
    digest = fnv1a(token_bytes, right_start, right_start + right_length, left_digest)
    mask = token_table.shape[0] - 1
    slot = _hash_slot(digest, mask)
    while token_table[slot] != _EMPTY:
        candidate = token_table[slot]
        if token_hashes[candidate] == digest and _is_concatenation(token_bytes, token_spans, candidate, left, right):
            return candidate, n_tokens
        slot = (slot + 1) & mask
    start = token_spans[n_tokens - 1, 0] + token_spans[n_tokens - 1, 1]
    _copy_bytes(token_bytes, start, token_bytes, left_start, left_length)
    _copy_bytes(token_bytes, start + left_length, token_bytes, right_start, right_length)
    token_spans[n_tokens, 0] = start
    token_spans[n_tokens, 1] = left_length + right_length
    token_hashes[n_tokens] = digest
    token_table[slot] = n_tokens
    return n_tokens, n_tokens + 1


@njit(cache=True, inline="always")
def _bit(bits, i):
    """Bit i of the bit array ``bits`` (uint8, bit i % 8 of byte i // 8)."""
    return (bits[i >> 3] >> (i & 7)) & 1 != 0


@njit(cache=True, inline="always")
def _set_bit(bits, i):
    bits[i >> 3] |= np.uint8(1 << (i & 7))


@njit(cache=True, inline="always")
def _preceding(token, word_start, i):
    """The position of the token before the one at position i in its word, or -1 (skipping the positions
    merged into their left neighbour). ``word_start``: a bit per position, set where a word starts."""
    j = np.int64(i)
    while not _bit(word_start, j):
        j -= 1
        if token[j] != _EMPTY:
            return j
    return np.int64(-1)


@njit(cache=True, inline="always")
def _following(token, word_start, i):
    """The position of the token after the one at position i in its word, or -1 (``word_start`` has a bit past
    the last position, set)."""
    j = np.int64(i) + 1
    while not _bit(word_start, j):
        if token[j] != _EMPTY:
            return j
        j += 1
    return np.int64(-1)


@njit(cache=True, inline="always")
def _word_at(first_positions, i):
    """The word holding position i (``first_positions``: each word's first position, ascending)."""
    return np.searchsorted(first_positions, i, side="right") - 1


def learn_merges(kernels, *arguments) -> np.ndarray:
    """``learn_merges_kernel(*arguments)`` from ``kernels`` (``training_kernels()``)."""
    return kernels.learn_merges_kernel(*arguments)


@njit(cache=True, nogil=True)
def learn_merges_kernel(token, first_positions, word_weights, n_tokens_wanted, progress_cell, vocab_bytes,
                        vocab_offsets):
    """Merge pairs of the words until the next new id is ``n_tokens_wanted`` or no pair is left.

    ``token``: the words' token ids end to end (int32; the kernel overwrites it); ``first_positions``,
    ``word_weights``: each word's first position in ``token`` (int32, ascending) and count. The vocabulary starts as token ``i`` =
    ``vocab_bytes[vocab_offsets[i]:vocab_offsets[i + 1]]`` (see ``_token_store``); new ids follow it. Returns
    the merges as an int64 array of (left id, right id) rows, in order. Writes the next new id to
    ``progress_cell[0]`` as it goes and stops early once ``progress_cell[1]`` is set.
    """
    n_positions = token.shape[0]  # token[i]: the id at position i, -1 once merged into its left neighbour
    # Words are told apart by where they start: a bit per position, and the start of each word (a site's word,
    # whose count weighs its pairs, is found by binary search: an int32 of the word per position would be the
    # largest array of the merges after the occurrence lists).
    n_words = first_positions.shape[0]
    word_start = np.zeros(n_positions // 8 + 1, np.uint8)
    _set_bit(word_start, n_positions)
    for word in range(n_words):
        _set_bit(word_start, first_positions[word])  # a word of no tokens marks the next word's start, also set

    # The inverted index: a pair table (count, left, right, occurrence list head and length)
    # found through an open-addressing hash table, and occurrence lists (positions of the pair's left token) in
    # one int32 array: each pair's block from the last rebuild, then the occurrences added since, each linked to
    # the list before it (see _add_occurrence), 4 to 5 bytes per position. An occurrence whose position has since changed pair stays listed
    # (skipped when its pair merges) until the array is full; then the lists are rebuilt from the tokens. The
    # pair at a position is not stored (it would take an int32 per position): it is looked up from its tokens.
    # Room for as many pairs as usual (a tenth to a fifth of the positions), so that they seldom grow: memory that
    # is not written to is not resident, while growing copies them (old and new arrays resident at once).
    pairs = np.empty((1024 + n_positions // 2, 4), np.int32)
    counts = np.empty(1024 + n_positions // 2, np.int64)
    table = np.full(2048, _EMPTY, np.int32)
    n_pairs = np.int64(0)
    for word in range(n_words):
        end = first_positions[word + 1] if word + 1 < n_words else n_positions
        for i in range(first_positions[word], end):
            j = _following(token, word_start, i)
            if j == -1:
                continue
            pairs = _grown(pairs, n_pairs + 1)
            counts = _grown(counts, n_pairs + 1)
            table = _rehashed(table, pairs, n_pairs, n_pairs + 1)
            pair, n_pairs = _pair_id(table, pairs, counts, n_pairs, token[i], token[j])
            counts[pair] += word_weights[word]
    # Room for every position and an end mark per pair, listed in blocks, and for an eighth as many new
    # occurrences (two entries each) before the lists are rebuilt.
    occurrences = np.empty(n_positions + n_pairs + n_positions // 4 + 16, np.int32)
    n_occurrences = _relisted(pairs, n_pairs, occurrences, table, token, word_start)
    heap = np.empty((max(n_pairs + n_positions // 2, 16), 2), np.int64)
    heap_size = np.int64(0)  # not a literal 0: one compiled version of the heap functions
    for pair in range(n_pairs):
        heap_size = _heap_push(heap, heap_size, pairs, counts[pair], pair)

    n_tokens = np.int64(vocab_offsets.shape[0] - 1)
    token_bytes, token_spans, token_hashes, token_table = _token_store(vocab_bytes, vocab_offsets, n_tokens_wanted)
    progress_cell[0] = n_tokens

    merges = np.empty((max(n_tokens_wanted - n_tokens, 16), 2), np.int64)
    n_merges = np.int64(0)
    positions = np.empty(16, np.int64)
    grown = np.empty(16, np.int64)
    while n_tokens < n_tokens_wanted and heap_size > 0 and progress_cell[1] == 0:
        count, pair, heap_size = _heap_pop(heap, heap_size, pairs)
        true_count = counts[pair]
        if count != true_count:  # stale entry
            if 0 < true_count < count:
                heap_size = _heap_push(heap, heap_size, pairs, true_count, pair)
            continue
        left, right = pairs[pair, _LEFT], pairs[pair, _RIGHT]
        token_bytes = _grown(token_bytes, token_spans[n_tokens - 1, 0] + token_spans[n_tokens - 1, 1]
                             + token_spans[left, 1] + token_spans[right, 1])
        new_id, n_tokens = _merged_token(left, right, token_bytes, token_spans, token_hashes, token_table, n_tokens)
        merges = _grown(merges, n_merges + 1)
        merges[n_merges, 0] = left
        merges[n_merges, 1] = right
        n_merges += 1

        if n_occurrences + 4 * pairs[pair, _LENGTH] > occurrences.shape[0]:  # each site lists two, two entries each
            n_occurrences = _relisted(pairs, n_pairs, occurrences, table, token, word_start)
            needed = n_occurrences + 4 * pairs[pair, _LENGTH]
            if 4 * needed > 3 * occurrences.shape[0]:  # keep a quarter free, so that rebuilding stays rare
                occurrences = _resized(occurrences, n_occurrences, needed + needed // 2)
        n_sites = pairs[pair, _LENGTH]
        positions = _grown(positions, n_sites)
        _listed_positions(pairs, occurrences, pair, positions)
        pairs[pair, _HEAD] = _EMPTY
        pairs[pair, _LENGTH] = 0
        sites = np.sort(positions[:n_sites])
        # Each site makes at most two new pairs, occurrences and heap entries.
        pairs = _grown(pairs, n_pairs + 2 * n_sites)
        counts = _grown(counts, n_pairs + 2 * n_sites)
        table = _rehashed(table, pairs, n_pairs, n_pairs + 2 * n_sites)
        heap = _grown(heap, heap_size + 2 * n_sites)
        grown = _grown(grown, 2 * n_sites)
        n_grown = np.int64(0)
        for i in sites:
            if token[i] != left:
                continue  # an earlier merge of this step (or a past one) changed this site
            j = _following(token, word_start, i)
            if j == -1 or token[j] != right:
                continue
            w = word_weights[_word_at(first_positions, i)]
            before = _preceding(token, word_start, i)
            after = _following(token, word_start, j)
            if before != -1:
                counts[_pair_of(table, pairs, token[before], left)] -= w
                _, n_pairs, n_occurrences, n_grown = _credit_pair(
                    table, pairs, counts, n_pairs, occurrences, n_occurrences, grown, n_grown,
                    token[before], new_id, before, w,
                )
            if after != -1:
                counts[_pair_of(table, pairs, right, token[after])] -= w
                _, n_pairs, n_occurrences, n_grown = _credit_pair(
                    table, pairs, counts, n_pairs, occurrences, n_occurrences, grown, n_grown,
                    new_id, token[after], i, w,
                )
            counts[pair] -= w
            token[i] = new_id
            token[j] = _EMPTY
        grown_pairs = np.sort(grown[:n_grown])  # each pushed once, however often it grew
        for k in range(n_grown):
            grown_pair = grown_pairs[k]
            if (k == 0 or grown_pair != grown_pairs[k - 1]) and counts[grown_pair] > 0:
                heap_size = _heap_push(heap, heap_size, pairs, counts[grown_pair], grown_pair)
        progress_cell[0] = n_tokens
    return merges[:n_merges].copy()

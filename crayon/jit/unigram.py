"""Unigram in Numba: the jit twin of ``crayon.reference.unigram`` (identical ids), over UTF-8 bytes.

Where no matchable piece holds ``▁`` after its first character and ``▁`` is itself a piece (SentencePiece's
models and HF's Metaspace ones), every path breaks before each ``▁``: the Viterbi then runs on the segments
between them, one after the other, each from the path score reached before it, and a segment of 2 to 32 bytes
met again reuses its path from the thread's piece cache or long-piece cache (``crayon.jit.cache``; the kernel
uses the long-piece cache's rows two by two, as buckets of two). Path scores are rounded (single precision for a
``.model``), so a segment's best path could depend on the score before it: a segment is kept only where its split
is the best one by a margin that rounding cannot undo from any path score up to ``CACHED_SCORE_LIMIT`` in
magnitude (see ``_best_paths``), and it is reused only after such a score; the score after it is then summed from
its steps' scores (pieces and unknown characters, ``UNKNOWN_STEP``) as the Viterbi sums it, and its ids are
written from its steps as after a Viterbi. Any other segment runs the Viterbi.
"""

from __future__ import annotations

import numpy as np

from crayon.errors import UnsupportedComponentError
from crayon.jit.cache import (SMALL_CACHE_BUCKETS, cache_lookup, cache_store, fits_long_row, long_cache_lookup,
                              long_cache_store, long_piece_row, new_long_piece_cache, new_piece_cache, piece_key,
                              piece_row, prefetch)
from crayon.jit.dat import interleave_dat, lookup, prefix_states
from crayon.jit.lazy import njit
from crayon.jit.word_cache import find_cached, new_word_cache, remember
from crayon.reference.cache import LONG_PIECE_BYTES, MAX_PIECE_BYTES, MAX_PIECE_TOKENS, MIN_PIECE_BYTES
from crayon.reference.unigram import REBASED_BEYOND, UnigramModel

SPACE_PIECE = "\u2581"
SEGMENT_ROW_WORDS = 8  # the long-piece cache of segments: 64-byte rows (up to 16 bytes and 10 steps, or 32 and 6)
CACHED_SCORE_LIMIT = 50_000.0  # a cached segment is reused after path scores up to this magnitude
UNKNOWN_STEP = 0xFFFFFF00  # a path step over an unknown character: this + its byte length
ROUNDING_SAFETY = 4.0  # the margin a cached segment's choices need, in bounds of their rounding error


@njit(cache=True, inline="always")
def _char_length(lead):
    return 1 if lead < 0xC0 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _segment_end(data, start, end):
    """Where the first ``▁`` (E2 96 81) after data[start] begins, or ``end``."""
    for pos in range(start + 1, end - 2):
        if data[pos] == 0xE2 and data[pos + 1] == 0x96 and data[pos + 2] == 0x81:
            return pos
    return end


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _segment_row(low, high, length, n_rows):
    """The first row of a segment's bucket in the piece cache: ``piece_row`` of its key with each word's high
    bits folded down (``piece_row`` alone leaves a key's 7th and 8th bytes out of the bucket, and segments of 7
    or 8 bytes, ``▁`` and 4 or 5 letters, are many)."""
    return piece_row(low ^ (low >> np.uint64(29)), high ^ (high >> np.uint64(29)), length, n_rows)


@njit(cache=True, nogil=True, _nrt=False)
def _segment_ends(data, start, end, space_breaks, pieces, long_pieces, segment_ends):
    """Write the ends of the segments of data[start:end] to ``segment_ends`` (one segment unless
    ``space_breaks``) and return their number; start loading the cache lines that looking the segments up will
    read, so that the lookups do not wait for memory one after the other."""
    count = 0
    while start < end:
        segment_end = _segment_end(data, start, end) if space_breaks else end
        size = segment_end - start
        if space_breaks and MIN_PIECE_BYTES <= size <= MAX_PIECE_BYTES:
            low, high = piece_key(data, start, segment_end)
            prefetch(pieces, _segment_row(low, high, size, pieces.shape[0]))
        elif space_breaks and MAX_PIECE_BYTES < size <= LONG_PIECE_BYTES:
            prefetch(long_pieces, long_piece_row(data, start, segment_end, long_pieces.shape[0]) & ~1)
        segment_ends[count] = segment_end
        count += 1
        start = segment_end
    return count


@njit(cache=True, nogil=True, _nrt=False)
def _emit_unknown(data, start, end, dat, byte_ids, unk_id, out, n):
    """The ids of the unknown stretch data[start:end] (see ``UnigramModel.unknown_ids``); -1 written if there
    is no unknown id."""
    token_id = lookup(dat[0], dat[1], dat[2], data, start, end)
    if token_id >= 0:
        out[n] = token_id
        return n + 1
    if byte_ids[0] != -2:  # byte fallback on
        all_bytes = True
        for pos in range(start, end):
            all_bytes = all_bytes and byte_ids[data[pos]] >= 0
        if all_bytes:
            for pos in range(start, end):
                out[n] = byte_ids[data[pos]]
                n += 1
            return n
    out[n] = unk_id
    return n + 1


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _track(exact, second, end, candidate, largest):
    """Note a candidate path score to ``end`` in ``exact`` (the best) and ``second`` (the runner-up); returns the
    largest magnitude met."""
    if candidate > exact[end]:
        second[end], exact[end] = exact[end], candidate
    elif candidate > second[end]:
        second[end] = candidate
    return max(largest, abs(candidate))


@njit(cache=True, nogil=True, _nrt=False)
def _best_paths(data, start, size, dat_rows, starts, scores, unk_score, rebase, roundoff, track, best_score,
                best_start, best_id, exact, second):
    """The Viterbi over data[start:start + size] from the path score ``best_score[0]``: fills best_score,
    best_start and best_id[1:size + 1]. With ``track``, returns the segment's limit: the same pass in double
    precision from 0 (``exact``, the runner-up of each choice in ``second``) finds the closest choice
    (``margin``) and the largest score met; from any path score below the limit in magnitude, every choice keeps
    its winner despite rounding (each of the at most size + 1 sums on a path rounds by at most ``roundoff`` times
    its magnitude) and no score inside the segment goes beyond ±``REBASED_BEYOND`` when ``rebase``. Without
    ``track``, returns -1."""
    best_start[0] = 0
    best_score[1 : size + 1] = -np.inf  # no path reaches there yet
    if track:
        exact[0] = 0.0
        exact[1 : size + 1] = -np.inf
        second[1 : size + 1] = -np.inf
    largest = 0.0
    frontier = 0
    pos = 0
    while pos < size:
        if rebase and (best_score[pos] < -REBASED_BEYOND or best_score[pos] > REBASED_BEYOND):
            offset = best_score[pos]
            for end in range(pos, frontier + 1):
                best_score[end] -= offset
        char_length = _char_length(data[start + pos])
        one_char_piece = False
        here = best_score[pos]
        here_exact = exact[pos] if track else 0.0
        lead = np.int64(data[start + pos])
        state = np.int64(starts[lead])
        position = pos
        while state >= 0:
            token_id = dat_rows[state, 2]
            end = position + 1
            if token_id >= 0:
                frontier = max(frontier, end)
                score = here + scores[token_id]
                if score > best_score[end]:
                    best_score[end], best_start[end], best_id[end] = score, pos, token_id
                if track:
                    largest = _track(exact, second, end, here_exact + np.float64(scores[token_id]), largest)
                one_char_piece = one_char_piece or end - pos == char_length
            if end >= size:
                break
            byte = np.int64(data[start + end])
            if end == pos + 1:
                state = np.int64(starts[256 + (lead << 8) + byte])
            else:
                target = np.int64(dat_rows[state, 0]) + byte
                if target < 0 or target >= dat_rows.shape[0] or dat_rows[target, 1] != state:
                    break
                state = target
            position = end
        if not one_char_piece:
            end = pos + char_length
            frontier = max(frontier, end)
            score = best_score[pos] + unk_score
            if score > best_score[end]:
                best_score[end], best_start[end], best_id[end] = score, pos, -1
            if track:
                largest = _track(exact, second, end, here_exact + np.float64(unk_score), largest)
        pos += char_length
    if not track:
        return -1.0
    margin = np.inf
    for end in range(1, size + 1):
        if second[end] > -np.inf:
            margin = min(margin, exact[end] - second[end])
    limit = margin / (ROUNDING_SAFETY * (size + 1) * roundoff) - largest - 1.0
    if rebase:
        limit = min(limit, REBASED_BEYOND - largest - 1.0)
    return limit


@njit(cache=True, nogil=True, _nrt=False)
def _best_steps(best_start, best_id, size, steps):
    """Write the steps of the best path over a segment of ``size`` bytes (``_best_paths``) to ``steps``, first to
    last: a piece's id, or ``UNKNOWN_STEP`` + the byte length of an unknown character. Returns their number."""
    count = 0
    end = size
    while end > 0:
        count += 1
        end = best_start[end]
    index = count
    end = size
    while end > 0:
        index -= 1
        piece_start, token_id = best_start[end], best_id[end]
        steps[index] = token_id if token_id >= 0 else UNKNOWN_STEP + end - piece_start
        end = piece_start
    return count


@njit(cache=True, nogil=True, _nrt=False)
def _emit_steps(data, start, steps, count, piece_lengths, dat, byte_ids, unk_id, fuse_unk, out, n):
    """Write the ids of the path ``steps[:count]`` (``_best_steps``) over the segment at data[start] to out[n:]:
    its pieces, unknown characters fused (``fuse_unk``) and spelled by ``_emit_unknown``; returns the new n."""
    pos = start
    unknown_start = -1
    for index in range(count):
        step = steps[index]
        if step < UNKNOWN_STEP and (step != unk_id or not fuse_unk):
            out[n] = step
            n += 1
            pos += piece_lengths[step]
            continue
        if unknown_start < 0 or not fuse_unk:
            unknown_start = pos
        pos += step - UNKNOWN_STEP if step >= UNKNOWN_STEP else piece_lengths[step]
        if fuse_unk and index + 1 < count and (steps[index + 1] >= UNKNOWN_STEP or steps[index + 1] == unk_id):
            continue
        n = _emit_unknown(data, unknown_start, pos, dat, byte_ids, unk_id, out, n)
        unknown_start = -1
    return n


@njit(cache=True, nogil=True)
def encode_spans_kernel(data, span_ends, dat, dat_rows, starts, scores, unk_score, rebase, roundoff, unk_id, fuse_unk,
                        byte_ids, piece_lengths, space_breaks, pieces, long_pieces, cache, out, counts):
    """Encode the spans data[span_ends[i - 1]:span_ends[i]] (from 0) into ``out`` (room for one id per byte);
    returns the number of ids and writes each span's into ``counts``. ``dat_rows`` is ``dat`` interleaved (the
    common-prefix walks read it); ``rebase``: path scores beyond ±``REBASED_BEYOND`` are rebased as SentencePiece
    does; ``roundoff``: the relative rounding of a sum of path scores; ``byte_ids[0] == -2`` means no byte
    fallback; ``space_breaks``: every path breaks before a ``▁``, and the piece cache ``pieces`` and the long-piece
    cache ``long_pieces`` hold segments (see the module's docstring); otherwise ``pieces`` and ``cache`` hold whole
    spans (``crayon.jit.word_cache``)."""
    longest = 0
    start = 0
    for end in span_ends:
        longest = max(longest, end - start)
        start = end
    best_score = np.empty(longest + 1, scores.dtype)
    best_start = np.empty(longest + 1, np.int64)
    best_id = np.empty(longest + 1, np.int64)
    steps = np.empty(longest + 1, np.int64)
    exact = np.empty(longest + 1, np.float64)
    second = np.empty(longest + 1, np.float64)
    segment_ends = np.empty(longest + 1, np.int64)
    n = 0
    span_start = 0
    used = 0
    found = -1
    for span, span_end in enumerate(span_ends):
        if not space_breaks:
            found = find_cached(pieces, cache, data, span_start, span_end, out, n)
            if found >= 0:
                counts[span] = found
                n += found
                span_start = span_end
                continue
        first = n
        best_score[0] = 0
        segments = _segment_ends(data, span_start, span_end, space_breaks, pieces, long_pieces, segment_ends)
        segment_start = span_start
        for segment in range(segments):
            segment_end = segment_ends[segment]
            size = segment_end - segment_start
            if rebase and (best_score[0] < -REBASED_BEYOND or best_score[0] > REBASED_BEYOND):
                best_score[0] = 0
            cacheable = space_breaks and MIN_PIECE_BYTES <= size <= LONG_PIECE_BYTES and (
                -CACHED_SCORE_LIMIT < best_score[0] < CACHED_SCORE_LIMIT)
            if cacheable:
                count = -1
                if size <= MAX_PIECE_BYTES:
                    low, high = piece_key(data, segment_start, segment_end)
                    row = _segment_row(low, high, size, pieces.shape[0])
                    count = cache_lookup(pieces, low, high, size, row, steps, 0)
                if count < 0:
                    long_row = long_piece_row(data, segment_start, segment_end, long_pieces.shape[0]) & ~1
                    count = long_cache_lookup(long_pieces, data, segment_start, segment_end, long_row, steps, 0)
                    if count < 0:
                        count = long_cache_lookup(long_pieces, data, segment_start, segment_end, long_row + 1, steps,
                                                  0)
                if count >= 0:
                    unknown = False
                    for i in range(count):
                        step = steps[i]
                        unknown = unknown or step >= UNKNOWN_STEP or (fuse_unk and step == unk_id)
                        best_score[0] = best_score[0] + (unk_score if step >= UNKNOWN_STEP else scores[step])
                        out[n + i] = step
                    if unknown:
                        n = _emit_steps(data, segment_start, steps, count, piece_lengths, dat, byte_ids, unk_id,
                                        fuse_unk, out, n)
                    else:
                        n += count
                    segment_start = segment_end
                    continue
            limit = _best_paths(data, segment_start, size, dat_rows, starts, scores, unk_score, rebase, roundoff,
                                cacheable, best_score, best_start, best_id, exact, second)
            count = _best_steps(best_start, best_id, size, steps)
            n = _emit_steps(data, segment_start, steps, count, piece_lengths, dat, byte_ids, unk_id, fuse_unk, out, n)
            if cacheable and limit >= CACHED_SCORE_LIMIT:
                if size <= MAX_PIECE_BYTES and count <= MAX_PIECE_TOKENS:
                    cache_store(pieces, low, high, size, row, steps, 0, count)
                elif fits_long_row(long_pieces.shape[1], size, count):
                    long_pieces[long_row + 1] = long_pieces[long_row]  # two rows a bucket, the newest first
                    long_cache_store(long_pieces, data, segment_start, segment_end, long_row, steps, 0, count)
            best_score[0] = best_score[size]
            segment_start = segment_end
        counts[span] = n - first
        if not space_breaks:
            used = remember(pieces, cache, found, data, span_start, span_end, out, first, n - first, used)
        span_start = span_end
    return n


def space_breaks_paths(model: UnigramModel) -> bool:
    """Whether every path breaks before each ``▁``: it is a matchable piece (never unknown, so never fused with
    the unknown text before it) and no matchable piece holds it after its first character."""
    matchable = model.matchable
    return model.ids.get(SPACE_PIECE) in set(matchable) and all(
        model.pieces[token_id][0].find(SPACE_PIECE, 1) < 0 for token_id in matchable)


class UnigramTables:
    """The arrays the kernel takes for one model: its DAT (also interleaved), scores and byte tokens, and whether
    its paths break before each ``▁`` (``space_breaks_paths``)."""

    def __init__(self, model: UnigramModel):
        if model.unk_id is None:
            raise UnsupportedComponentError("the jit Unigram needs an unk_id")
        self.model = model
        self.dat_rows = interleave_dat(*model.dat)
        self.starts = prefix_states(self.dat_rows)
        self.byte_ids = model.byte_ids if model.byte_fallback else np.full(256, -2, np.int64)
        self.piece_lengths = np.array([len(piece.encode("utf-8")) for piece, _ in model.pieces], np.int64)
        self.space_breaks = space_breaks_paths(model)
        self.roundoff = float(np.finfo(model.score_type).eps) / 2


def new_segment_cache(n_rows: int) -> np.ndarray:
    """An empty long-piece cache for the kernel's segments: ``n_rows`` (a power of two, at least 2) rows of
    ``SEGMENT_ROW_WORDS`` words."""
    if n_rows < 2:
        raise ValueError(f"a segment cache needs at least 2 rows (buckets of two), not {n_rows}")
    return new_long_piece_cache(n_rows, SEGMENT_ROW_WORDS)


def encode_spans(tables: UnigramTables, data: np.ndarray, span_ends: np.ndarray, pieces: np.ndarray | None = None,
                 long_pieces: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(ids (int64), the number of ids of each span) of the spans of UTF-8 ``data`` ending at ``span_ends``, as
    the model's ``encode_span`` gives them; ``pieces`` and ``long_pieces``: the piece cache and segment cache
    (``new_segment_cache``) to use (default: new small ones)."""
    model = tables.model
    out = np.empty(len(data) + 1, np.int64)
    counts = np.empty(len(span_ends), np.int64)
    count = encode_spans_kernel(data, span_ends.astype(np.int64), model.dat, tables.dat_rows, tables.starts, model.scores,
                                model.unk_score, model.score_type is np.float32, tables.roundoff, model.unk_id,
                                model.fuse_unk, tables.byte_ids, tables.piece_lengths, tables.space_breaks,
                                new_piece_cache(SMALL_CACHE_BUCKETS) if pieces is None else pieces,
                                new_segment_cache(SMALL_CACHE_BUCKETS) if long_pieces is None else long_pieces,
                                new_word_cache(0 if tables.space_breaks else len(span_ends)), out, counts)
    return out[:count], counts

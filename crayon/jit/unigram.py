"""Unigram in Numba: the jit twin of ``crayon.reference.unigram`` (identical ids), over UTF-8 bytes."""

from __future__ import annotations

import numpy as np

from crayon.errors import UnsupportedComponentError
from crayon.jit.cache import SMALL_CACHE_BUCKETS, new_piece_cache
from crayon.jit.dat import interleave_dat, lookup, prefix_states
from crayon.jit.lazy import njit
from crayon.jit.word_cache import find_cached, new_word_cache, remember
from crayon.reference.unigram import REBASED_BEYOND, UnigramModel


@njit(cache=True, inline="always")
def _char_length(lead):
    return 1 if lead < 0xC0 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4


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


@njit(cache=True, nogil=True)
def encode_spans_kernel(data, span_ends, dat, dat_rows, starts, scores, unk_score, rebase, unk_id, fuse_unk, byte_ids,
                        pieces, cache, out, counts):
    """Encode the spans data[span_ends[i - 1]:span_ends[i]] (from 0) into ``out`` (room for one id per byte);
    returns the number of ids and writes each span's into ``counts``. ``dat_rows`` is ``dat`` interleaved (the
    common-prefix walks read it); ``rebase``: path scores beyond ±``REBASED_BEYOND`` are rebased as SentencePiece
    does; ``byte_ids[0] == -2`` means no byte fallback; ``pieces`` and ``cache`` are ``crayon.jit.word_cache``'s."""
    longest = 0
    start = 0
    for end in span_ends:
        longest = max(longest, end - start)
        start = end
    best_score = np.empty(longest + 1, scores.dtype)
    best_start = np.empty(longest + 1, np.int64)
    best_id = np.empty(longest + 1, np.int64)
    path = np.empty(longest + 1, np.int64)
    n = 0
    span_start = 0
    used = 0
    for span, span_end in enumerate(span_ends):
        found = find_cached(pieces, cache, data, span_start, span_end, out, n)
        if found >= 0:
            counts[span] = found
            n += found
            span_start = span_end
            continue
        first = n
        size = span_end - span_start
        best_score[0], best_start[0] = 0, 0
        best_start[1 : size + 1] = -1
        frontier = 0
        pos = 0
        while pos < size:
            if rebase and (best_score[pos] < -REBASED_BEYOND or best_score[pos] > REBASED_BEYOND):
                offset = best_score[pos]
                for end in range(pos, frontier + 1):
                    if end == pos or best_start[end] >= 0:
                        best_score[end] -= offset
            char_length = _char_length(data[span_start + pos])
            one_char_piece = False
            here = best_score[pos]
            lead = np.int64(data[span_start + pos])
            state = np.int64(starts[lead])
            position = pos
            while state >= 0:
                token_id = dat_rows[state, 2]
                end = position + 1
                if token_id >= 0:
                    frontier = max(frontier, end)
                    score = here + scores[token_id]
                    if best_start[end] < 0 or score > best_score[end]:
                        best_score[end], best_start[end], best_id[end] = score, pos, token_id
                    one_char_piece = one_char_piece or end - pos == char_length
                if end >= size:
                    break
                byte = np.int64(data[span_start + end])
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
                if best_start[end] < 0 or score > best_score[end]:
                    best_score[end], best_start[end], best_id[end] = score, pos, -1
            pos += char_length
        count = 0
        end = size
        while end > 0:
            path[count] = end
            count += 1
            end = best_start[end]
        unknown_start = -1
        for index in range(count - 1, -1, -1):
            end = path[index]
            start, token_id = best_start[end], best_id[end]
            if token_id >= 0 and (token_id != unk_id or not fuse_unk):
                out[n] = token_id
                n += 1
                continue
            if unknown_start < 0 or not fuse_unk:
                unknown_start = start
            if fuse_unk and index > 0 and (best_id[path[index - 1]] == -1 or best_id[path[index - 1]] == unk_id):
                continue
            n = _emit_unknown(data, span_start + unknown_start, span_start + end, dat, byte_ids, unk_id, out, n)
            unknown_start = -1
        counts[span] = n - first
        used = remember(pieces, cache, found, data, span_start, span_end, out, first, n - first, used)
        span_start = span_end
    return n


class UnigramTables:
    """The arrays the kernel takes for one model: its DAT (also interleaved), scores and byte tokens."""

    def __init__(self, model: UnigramModel):
        if model.unk_id is None:
            raise UnsupportedComponentError("the jit Unigram needs an unk_id")
        self.model = model
        self.dat_rows = interleave_dat(*model.dat)
        self.starts = prefix_states(self.dat_rows)
        self.byte_ids = model.byte_ids if model.byte_fallback else np.full(256, -2, np.int64)


def encode_spans(tables: UnigramTables, data: np.ndarray, span_ends: np.ndarray,
                 pieces: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(ids (int64), the number of ids of each span) of the spans of UTF-8 ``data`` ending at ``span_ends``, as
    the model's ``encode_span`` gives them; ``pieces``: the piece cache to use (default: a new small one)."""
    model = tables.model
    out = np.empty(len(data) + 1, np.int64)
    counts = np.empty(len(span_ends), np.int64)
    count = encode_spans_kernel(data, span_ends.astype(np.int64), model.dat, tables.dat_rows, tables.starts, model.scores,
                                model.unk_score, model.score_type is np.float32, model.unk_id, model.fuse_unk,
                                tables.byte_ids,
                                new_piece_cache(SMALL_CACHE_BUCKETS) if pieces is None else pieces,
                                new_word_cache(len(span_ends)), out, counts)
    return out[:count], counts

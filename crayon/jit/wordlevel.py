"""WordLevel in Numba: the jit twin of ``crayon.reference.wordlevel`` (identical ids), over UTF-8 bytes: each word
is one exact lookup in the DAT of the vocabulary (no word cache: a lookup in it costs as much)."""

from __future__ import annotations

import numpy as np

from crayon.jit.dat import lookup
from crayon.jit.lazy import njit
from crayon.reference.wordlevel import WordLevelModel


@njit(cache=True, nogil=True)
def encode_words_kernel(data, word_ends, dat, unk_id, out, counts):
    """Encode the words data[word_ends[i - 1]:word_ends[i]] (from 0) into ``out`` (room for one id per word);
    returns the number of ids and writes each word's count (1, or 0 for an empty word) into ``counts``; returns
    -1 - i when word i is not in the vocabulary and there is no unknown token (``unk_id`` -1). ``dat`` is
    (base, check, values)."""
    n = 0
    start = 0
    for word, end in enumerate(word_ends):
        if end == start:
            counts[word] = 0
        else:
            token_id = lookup(dat[0], dat[1], dat[2], data, start, end)
            if token_id < 0:
                if unk_id < 0:
                    return -1 - word
                token_id = unk_id
            out[n] = token_id
            counts[word] = 1
        n += counts[word]
        start = end
    return n


def encode_words(model: WordLevelModel, data: np.ndarray, word_ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ids (int64), the number of ids of each word) of the words of UTF-8 ``data`` ending at ``word_ends``, as
    ``model.encode_word`` gives them."""
    out = np.empty(len(word_ends), np.int64)
    counts = np.empty(len(word_ends), np.int64)
    unk_id = -1 if model.unk_id is None else model.unk_id
    count = encode_words_kernel(data, word_ends.astype(np.int64), model.dat, unk_id, out, counts)
    if count < 0:
        unknown = -1 - count
        word = bytes(data[word_ends[unknown - 1] if unknown else 0 : word_ends[unknown]]).decode("utf-8")
        raise model.unknown_word_error(word)
    return out[:count], counts

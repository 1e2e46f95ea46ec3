"""WordLevel and SentencePiece's word model in Numba: the jit twins of ``crayon.reference.wordlevel`` (identical
ids), over UTF-8 bytes: each word is one exact lookup in the DAT of the vocabulary (no word cache: a lookup in it
costs as much)."""

from __future__ import annotations

import numpy as np

from crayon.jit.dat import lookup
from crayon.jit.lazy import njit
from crayon.reference.wordlevel import SentencePieceWordModel, WordLevelModel


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


@njit(cache=True, nogil=True, _nrt=False)
def _is_space(data, at, end):
    """Whether ``▁`` (E2 96 81) starts at data[at] (before ``end``)."""
    return at + 3 <= end and data[at] == 0xE2 and data[at + 1] == 0x96 and data[at + 2] == 0x81


@njit(cache=True, nogil=True, _nrt=False)
def _unknown_ids(data, start, end, unk_id, byte_ids, out, n):
    """Write the ids of the unknown run data[start:end] at out[n:]; the new n (-1: no unknown piece)."""
    if byte_ids[0] >= 0:  # byte fallback: all 256 byte pieces exist
        for at in range(start, end):
            out[n] = byte_ids[data[at]]
            n += 1
        return n
    if unk_id < 0:
        return -1
    out[n] = unk_id
    return n + 1


@njit(cache=True, nogil=True)
def encode_sentencepiece_words_kernel(data, text_ends, dat, unk_id, byte_ids, out, counts):
    """Encode each normalized text data[text_ends[i - 1]:text_ends[i]] (from 0) as SentencePiece's word model
    into ``out`` (room for one id per byte) and its number of ids into ``counts``; returns the number of ids, or
    -1 - i when text i has an unknown word and the model no unknown piece. ``byte_ids`` is all -1 without byte
    fallback."""
    n = 0
    start = 0
    for text, end in enumerate(text_ends):
        before = n
        unknown_from = -1
        word = start
        while word < end:
            after = word + 1
            while after < end and not _is_space(data, after, end):
                after += 1
            token_id = lookup(dat[0], dat[1], dat[2], data, word, after)
            if token_id < 0:
                if unknown_from < 0:
                    unknown_from = word
            else:
                if unknown_from >= 0:
                    n = _unknown_ids(data, unknown_from, word, unk_id, byte_ids, out, n)
                    if n < 0:
                        return -1 - text
                    unknown_from = -1
                out[n] = token_id
                n += 1
            word = after
        if unknown_from >= 0:
            n = _unknown_ids(data, unknown_from, end, unk_id, byte_ids, out, n)
            if n < 0:
                return -1 - text
        counts[text] = n - before
        start = end
    return n


def encode_sentencepiece_words(model: SentencePieceWordModel, data: np.ndarray,
                               text_ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ids (int64), the number of ids of each text) of the normalized texts of UTF-8 ``data`` ending at
    ``text_ends``, as ``model.encode_span`` gives them."""
    out = np.empty(len(data), np.int64)
    counts = np.empty(len(text_ends), np.int64)
    byte_ids = model.byte_ids if model.byte_fallback else np.full(256, -1, np.int64)
    unk_id = -1 if model.unk_id is None else model.unk_id
    count = encode_sentencepiece_words_kernel(data, text_ends.astype(np.int64), model.dat, unk_id, byte_ids, out, counts)
    if count < 0:
        text = -1 - count
        model.encode_span(bytes(data[text_ends[text - 1] if text else 0 : text_ends[text]]))  # raises its error
    return out[:count], counts

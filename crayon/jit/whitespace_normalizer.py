"""SentencePiece's text preparation (``crayon.formats.sentencepiece.normalize``) in Numba, over the UTF-8 bytes of
many texts at once: ``▁`` read as a space, extra spaces removed, a dummy prefix, spaces written ``▁``."""

from __future__ import annotations

import numpy as np

from crayon.jit.lazy import njit


@njit(cache=True, nogil=True, inline="always")
def _write_spaces(out, n, count, escape_whitespaces):
    for _ in range(count):
        if escape_whitespaces:
            out[n], out[n + 1], out[n + 2] = 0xE2, 0x96, 0x81
            n += 3
        else:
            out[n] = 0x20
            n += 1
    return n


@njit(cache=True, nogil=True)
def _normalize_kernel(data, text_ends, escape_whitespaces, remove_extra_whitespaces, add_dummy_prefix, out,
                      out_ends):
    """Write each text's normalized bytes to ``out`` and its end to ``out_ends``; returns the bytes written."""
    n = 0
    start = 0
    for text, end in enumerate(text_ends):
        pos = start
        pending = 0  # spaces read and not yet written
        written = False  # a character of this text written
        while pos < end:
            byte = data[pos]
            length = 3 if (escape_whitespaces and byte == 0xE2 and pos + 2 < end and data[pos + 1] == 0x96
                           and data[pos + 2] == 0x81) else 1
            pos += length
            if byte == 0x20 or length == 3:
                pending += 1
                continue
            if remove_extra_whitespaces:
                pending = 1 if written and pending else 0
            if add_dummy_prefix and not written:
                pending += 1
            n = _write_spaces(out, n, pending, escape_whitespaces)
            pending = 0
            written = True
            for i in range(pos - length, pos):
                out[n] = data[i]
                n += 1
        if pending and not remove_extra_whitespaces:
            n = _write_spaces(out, n, pending + (add_dummy_prefix and not written), escape_whitespaces)
        out_ends[text] = n
        start = end
    return n


def normalize_utf8(data: np.ndarray, text_ends: np.ndarray, *, escape_whitespaces: bool,
                   remove_extra_whitespaces: bool, add_dummy_prefix: bool) -> tuple[np.ndarray, np.ndarray]:
    """(normalized bytes, their text ends) of the UTF-8 texts data[text_ends[i - 1]:text_ends[i]] (from 0): each
    as ``normalize`` gives it, with these options."""
    out = np.empty(3 * len(data) + 3 * len(text_ends), np.uint8)
    out_ends = np.empty(len(text_ends), np.int64)
    n = _normalize_kernel(data, text_ends.astype(np.int64), escape_whitespaces, remove_extra_whitespaces,
                          add_dummy_prefix, out, out_ends)
    return out[:n], out_ends

"""Spaces written as SentencePiece's ``▁`` in Numba, over the UTF-8 bytes of many texts at once: SentencePiece's
text preparation (``normalize_utf8``, the twin of ``crayon.formats.sentencepiece.normalize``: user-defined pieces
kept as they are, a character map's rules, extra spaces removed, a dummy prefix, spaces written ``▁``, ``▁``s at
the end removed) and HF's Metaspace pre-tokenizer (``metaspace_pieces``, the twin of
``crayon.reference.pretokenize.metaspace_split``)."""

from __future__ import annotations

import numpy as np

from crayon.jit.dat import longest_prefix
from crayon.jit.lazy import njit


@njit(cache=True, nogil=True, inline="always")
def _write_space(out, n, escape_whitespaces):
    if escape_whitespaces:
        out[n], out[n + 1], out[n + 2] = 0xE2, 0x96, 0x81
        return n + 3
    out[n] = 0x20
    return n + 1


@njit(cache=True, nogil=True, inline="always")
def _spaces_replaced(data, start, stop, first, second, third, out, n):
    """Write data[start:stop] to out[n:] with each space as the three bytes ``first second third`` (``▁``), without
    a branch on the byte: each writes three bytes and keeps them only if it was a space (the caller leaves two
    bytes of room past the end); returns where it ends. Unsigned indexes: no check for a negative index (the
    loop runs 2.7x faster)."""
    at = np.uint64(n)
    for pos in range(np.uint64(start), np.uint64(stop)):
        byte = data[pos]
        space = byte == 0x20
        out[at] = first if space else byte
        out[at + np.uint64(1)] = second
        out[at + np.uint64(2)] = third
        at += np.uint64(1) + np.uint64(2) * np.uint64(space)
    return np.int64(at)


@njit(cache=True, nogil=True, inline="always")
def _unit_offset(unit):
    return (unit >> 10) << ((unit & (1 << 9)) >> 6)


@njit(cache=True, nogil=True, inline="always")
def key_at(data, pos, end, units, shortest):
    """(length, trie position of the leaf) of the longest key of the character map at data[pos:end], or of the
    shortest one, (0, 0) where none starts there (``CharsMap.longest_rewrites``, ``CharsMap.shortest_rule``);
    then how many bytes the walk took (``end - pos`` where it went through: a key may start with data[pos:end])."""
    node = _unit_offset(units[0])
    found = leaf = 0
    for i in range(pos, end):
        position = node ^ data[i]
        if position >= units.shape[0] or (units[position] & ((1 << 31) | 0xFF)) != data[i]:
            return found, leaf, i - pos
        if (units[position] >> 8) & 1:
            found, leaf = i + 1 - pos, position
            if shortest:
                break
        node = position ^ _unit_offset(units[position])
    return found, leaf, found if shortest and found else end - pos


@njit(cache=True, nogil=True, inline="always")
def replacement_span(units, leaf, replacements):
    """(start, stop) in ``replacements`` of the replacement of the key whose leaf is at ``leaf``."""
    start = units[leaf ^ _unit_offset(units[leaf])] & ((1 << 31) - 1)
    stop = start
    while stop < replacements.shape[0] and replacements[stop] != 0:
        stop += 1
    return start, stop


@njit(cache=True, nogil=True, inline="always")
def _write_replacement_piece(out, n, replacements, start, stop, after_space, escape_whitespaces,
                             remove_extra_whitespaces):
    """Write a rule's replacement (or a user-defined piece) as one piece: its spaces at the start dropped after a
    space, the others kept (not made one); (bytes written in all, whether the next piece follows a space)."""
    if after_space:
        while start < stop and replacements[start] == 0x20:
            start += 1
    if start == stop:
        return n, after_space
    for i in range(start, stop):
        if replacements[i] == 0x20:
            n = _write_space(out, n, escape_whitespaces)
        else:
            out[n] = replacements[i]
            n += 1
    return n, remove_extra_whitespaces and replacements[stop - 1] == 0x20


@njit(cache=True, nogil=True)
def _normalize_kernel(data, text_ends, escape_whitespaces, remove_extra_whitespaces, add_dummy_prefix, as_suffix,
                      units, first_bytes, first_byte_pairs, replacements, user_defined, out, out_ends):
    """Write each text's normalized bytes to ``out`` and its end to ``out_ends``; returns the bytes written, or
    -1 where ``out`` is too small. The pieces that are neither a user-defined piece (the longest in the DAT
    ``user_defined`` starting there) nor rewritten by a character map are single characters: they are written
    byte by byte (only a space, one byte, is ever dropped)."""
    has_map = units.shape[0] > 0
    has_user_defined = user_defined[1].shape[0] > 1
    n = 0
    start = 0
    for text, end in enumerate(text_ends):
        pos = start
        while remove_extra_whitespaces and pos < end:  # the pieces that are one space, at the start
            if has_user_defined:
                _, length = longest_prefix(user_defined[0], user_defined[1], user_defined[2], data, pos, end)
                if length:
                    if length != 1 or data[pos] != 0x20:
                        break
                    pos += 1
                    continue
            length = 0
            if has_map and first_bytes[data[pos]]:
                length, leaf, _ = key_at(data, pos, end, units, False)
                if length:
                    piece_start, piece_stop = replacement_span(units, leaf, replacements)
                    if piece_stop - piece_start != 1 or replacements[piece_start] != 0x20:
                        break
            if not length and data[pos] != 0x20:
                break
            pos += length if length else 1
        text_start = n
        has_text = pos < end
        if add_dummy_prefix and not as_suffix and has_text:
            n = _write_space(out, n, escape_whitespaces)
        after_space = remove_extra_whitespaces
        if (escape_whitespaces and not (has_map or has_user_defined or remove_extra_whitespaces)
                and n + 3 * (end - pos) + 2 < out.shape[0]):
            pos, n = end, _spaces_replaced(data, pos, end, 0xE2, 0x96, 0x81, out, n)
        while pos < end:
            if has_user_defined:
                _, length = longest_prefix(user_defined[0], user_defined[1], user_defined[2], data, pos, end)
                if length:
                    n, after_space = _write_replacement_piece(out, n, data, pos, pos + length, after_space,
                                                              escape_whitespaces, remove_extra_whitespaces)
                    pos += length
                    continue
            byte = data[pos]
            if has_map and first_bytes[byte] and (
                    pos + 1 == end or first_byte_pairs[(np.int64(byte) << 8) | data[pos + 1]]):
                length, leaf, _ = key_at(data, pos, end, units, False)
                if length:
                    piece_start, piece_stop = replacement_span(units, leaf, replacements)
                    if n + 3 * (piece_stop - piece_start + data.shape[0] - pos + text_ends.shape[0]) > out.shape[0]:
                        return -1
                    n, after_space = _write_replacement_piece(out, n, replacements, piece_start, piece_stop,
                                                              after_space, escape_whitespaces,
                                                              remove_extra_whitespaces)
                    pos += length
                    continue
            pos += 1
            if byte != 0x20:
                out[n] = byte
                n += 1
                after_space = False
            elif not (remove_extra_whitespaces and after_space):
                n = _write_space(out, n, escape_whitespaces)
                after_space = remove_extra_whitespaces
        if remove_extra_whitespaces and escape_whitespaces:  # the ▁s at the end, written or in the text
            while n - 3 >= text_start and out[n - 3] == 0xE2 and out[n - 2] == 0x96 and out[n - 1] == 0x81:
                n -= 3
        elif remove_extra_whitespaces:
            while n > text_start and out[n - 1] == 0x20:
                n -= 1
        if add_dummy_prefix and as_suffix and has_text:  # the dummy space goes at the end instead, after the rest
            n = _write_space(out, n, escape_whitespaces)
        out_ends[text] = n
        start = end
    return n


NO_CHARSMAP = (np.zeros(0, np.int64), np.zeros(256, np.bool_), np.zeros(1 << 16, np.bool_), np.zeros(0, np.uint8))
NO_USER_DEFINED = (np.zeros(1, np.int32), np.full(1, -1, np.int32), np.full(1, -1, np.int32))  # a DAT: its root


def normalize_utf8(data: np.ndarray, text_ends: np.ndarray, *, escape_whitespaces: bool,
                   remove_extra_whitespaces: bool, add_dummy_prefix: bool, treat_whitespace_as_suffix: bool = False,
                   charsmap: tuple[np.ndarray, ...] = NO_CHARSMAP,
                   user_defined: tuple[np.ndarray, np.ndarray, np.ndarray] = NO_USER_DEFINED
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(normalized bytes, their text ends) of the UTF-8 texts data[text_ends[i - 1]:text_ends[i]] (from 0): each
    as ``normalize`` gives it, with these options, a character map as ``CharsMap.kernel_arrays`` and the DAT of
    the user-defined pieces (``SentencePieceNormalizer.whitespace_options`` gives them all)."""
    text_ends = text_ends.astype(np.int64)
    size = 3 * len(data) + 3 * len(text_ends)
    while True:
        out = np.empty(size, np.uint8)
        out_ends = np.empty(len(text_ends), np.int64)
        n = _normalize_kernel(data, text_ends, escape_whitespaces, remove_extra_whitespaces, add_dummy_prefix,
                              treat_whitespace_as_suffix, *charsmap, user_defined, out, out_ends)
        if n >= 0:
            return out[:n], out_ends
        size *= 2  # a rule's replacement is longer than its key


@njit(cache=True, nogil=True, inline="always")
def write_bytes(out, n, replacement):
    """Write ``replacement`` to out[n:]; returns where it ends."""
    for byte in replacement:
        out[n] = byte
        n += 1
    return n


@njit(cache=True, nogil=True, inline="always")
def bytes_at(data, pos, stop, replacement):
    """Whether data[pos:stop] starts with ``replacement``."""
    if pos + len(replacement) > stop:
        return False
    for i in range(len(replacement)):
        if data[pos + i] != replacement[i]:
            return False
    return True


@njit(cache=True, nogil=True)
def _metaspace_kernel(data, piece_ends, piece_kept, replacement, prepend, split, out, out_ends, out_kept,
                      mapped_ends):
    """Rewrite each kept piece into ``out`` (see ``metaspace_pieces``), the others copied as they are; returns
    (bytes written, pieces written) and writes where each input piece ends in ``out`` to ``mapped_ends``."""
    n = 0
    count = 0
    start = 0
    for piece in range(piece_ends.shape[0]):
        stop = piece_ends[piece]
        if not piece_kept[piece]:
            out[n : n + stop - start] = data[start:stop]
            n += stop - start
            out_ends[count], out_kept[count] = n, 0
            count += 1
        else:
            piece_start = n
            if (prepend and stop > start and data[start] != 0x20
                    and not bytes_at(data, start, stop, replacement)):
                n = write_bytes(out, n, replacement)
            pos = start
            if not split and len(replacement) == 3 and n + 3 * (stop - pos) + 2 < out.shape[0]:
                # a replacement in the text is written as it is
                pos, n = stop, _spaces_replaced(data, pos, stop, replacement[0], replacement[1], replacement[2], out, n)
            while pos < stop:
                byte = data[pos]
                if byte != 0x20 and byte != replacement[0]:  # most bytes: neither a space nor a replacement
                    out[n] = byte
                    n += 1
                    pos += 1
                    continue
                is_space = byte == 0x20
                length = 1
                if not is_space and bytes_at(data, pos, stop, replacement):
                    is_space, length = True, len(replacement)
                if is_space:
                    if split and n > piece_start:  # a piece ends before each replacement
                        out_ends[count], out_kept[count] = n, 1
                        count += 1
                        piece_start = n
                    n = write_bytes(out, n, replacement)
                else:
                    out[n] = data[pos]
                    n += 1
                pos += length
            out_ends[count], out_kept[count] = n, 1
            count += 1
        mapped_ends[piece] = n
        start = stop
    return n, count


def metaspace_pieces(data: np.ndarray, piece_ends: np.ndarray, piece_kept: np.ndarray, replacement: str,
                     prepend: bool, split: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """HF's Metaspace (``metaspace_split``) on each kept piece data[piece_ends[i - 1]:piece_ends[i]] (from 0):
    (the new bytes, the ends of the new pieces, whether each is kept, where each input piece ends in the new
    bytes). Pieces not kept are copied as they are; empty pieces may remain (kept, without bytes)."""
    encoded = np.frombuffer(replacement.encode("utf-8"), np.uint8)
    pieces = len(piece_ends)
    out = np.empty(len(encoded) * (len(data) + pieces), np.uint8)
    out_ends = np.empty(len(data) + pieces, np.int64)
    out_kept = np.empty(len(data) + pieces, np.uint8)
    mapped_ends = np.empty(pieces, np.int64)
    n, count = _metaspace_kernel(data, piece_ends.astype(np.int64), piece_kept.astype(np.uint8), encoded, prepend,
                                 split, out, out_ends, out_kept, mapped_ends)
    return out[:n], out_ends[:count], out_kept[:count], mapped_ends

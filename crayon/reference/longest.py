"""Greedy longest match over a double-array trie, as Crayon's C++ original encodes. Not BPE: it gives other tokens.

Within each span, from the current position, walk the DAT as far as the bytes allow and emit the longest token
seen on the way; move past it and repeat. Matches never cross a span boundary.

Byte fallback: where no token starts at a position, that one byte is emitted as ``fallback[byte]`` and the walk
moves on by one byte, so no byte is ever lost. ``byte_fallback_ids`` builds the table: the id of the single-byte
token when the vocabulary has one (byte-level vocabularies such as cl100k have all 256, so fallback never fires),
else ``first_reserved_id + byte``, where ``first_reserved_id`` is above every id in use (ordinary and special;
e.g. tiktoken's ``n_vocab``). ``LongestMatchModel.token_bytes`` maps those ids back to their bytes, so decoding
gives the input back.

DAT values below 0 mean "no token" (see ``crayon.reference.dat``). ``crayon.jit.longest`` gives identical ids.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import numpy as np

from crayon.reference.dat import lookup, transition


def byte_fallback_ids(base: np.ndarray, check: np.ndarray, values: np.ndarray, first_reserved_id: int) -> np.ndarray:
    """The 256 ids emitted for bytes no token covers: the single-byte token's id, else ``first_reserved_id + byte``."""
    if not 0 <= first_reserved_id <= 2**31 - 1 - 256:
        raise ValueError(f"first_reserved_id must lie in 0 .. 2**31-257, got {first_reserved_id}")
    fallback = np.empty(256, dtype=np.int32)
    for byte in range(256):
        token_id = lookup(base, check, values, bytes([byte]))
        fallback[byte] = token_id if token_id >= 0 else first_reserved_id + byte
    return fallback


def longest_match(data: bytes, start: int, end: int, base, check, values) -> tuple[int, int]:
    """``(id, length)`` of the longest token ``data[start:end]`` starts with, or ``(-1, 0)``."""
    state = 0
    best = (-1, 0)
    for position in range(start, end):
        state = transition(base, check, state, data[position])
        if state < 0:
            break
        if values[state] >= 0:
            best = (int(values[state]), position + 1 - start)
    return best


def encode_span(span: bytes, base, check, values, fallback: Sequence[int]) -> list[int]:
    """Token ids of one span by greedy longest match, with byte fallback."""
    ids = []
    position = 0
    while position < len(span):
        token_id, length = longest_match(span, position, len(span), base, check, values)
        if length == 0:
            token_id, length = int(fallback[span[position]]), 1
        ids.append(token_id)
        position += length
    return ids


def encode_spans(text: bytes, span_ends: Iterable[int], base, check, values, fallback: Sequence[int]) -> list[int]:
    """Encode ``text`` cut into spans ``[previous end, end)``; the last end must be ``len(text)``."""
    ids: list[int] = []
    start = 0
    for end in span_ends:
        if not start <= end <= len(text):
            raise ValueError(f"span ends must rise within the text: {end} after {start} (text of {len(text)} bytes)")
        ids += encode_span(text[start:end], base, check, values, fallback)
        start = end
    if start != len(text):
        raise ValueError(f"the spans end at byte {start} but the text has {len(text)}: bytes would be lost")
    return ids


class LongestMatchModel:
    """A vocabulary as a longest-match model: its DAT, its tokens, and the byte fallback ids (``encode_span``,
    ``token_bytes`` and ``ranks`` as ``BytePairModel`` has them).

    ``token_bytes`` holds the vocabulary's tokens (ids below ``first_reserved_id``) plus one entry per fallback id
    in use, so ``b"".join(token_bytes[i] for i in encode_span(span)) == span``.
    """

    def __init__(self, token_bytes: Mapping[int, bytes], base, check, values, first_reserved_id: int):
        if any(token_id >= first_reserved_id for token_id in token_bytes):
            raise ValueError(f"token ids must lie below first_reserved_id={first_reserved_id}")
        self.base, self.check, self.values = base, check, values
        self.first_reserved_id = first_reserved_id
        self.fallback = byte_fallback_ids(base, check, values, first_reserved_id)
        self.token_bytes = dict(token_bytes)
        for byte, token_id in enumerate(self.fallback.tolist()):
            if token_id >= first_reserved_id:
                self.token_bytes[token_id] = bytes([byte])
        self.ranks = {token: token_id for token_id, token in self.token_bytes.items()}

    def encode_span(self, span: bytes) -> list[int]:
        return encode_span(span, self.base, self.check, self.values, self.fallback)

"""Unigram (SentencePiece's default model, T5 / ALBERT / XLNet), written to be read: the most probable split.

Each vocabulary piece has a score (a log probability). The ids of a text are the split whose pieces' scores sum
highest, found by a Viterbi pass over the text's UTF-8 bytes: from each character boundary, the common-prefix
search of the DAT gives every piece starting there; ``best[end]`` keeps the best path ending at each boundary
(ties keep the path found first, i.e. the one whose last piece starts earliest). A character that no
one-character piece covers may be the unknown piece, scored ``min score - 10``. Consecutive unknown characters are
fused into one unknown token (``fuse_unk``); with ``byte_fallback`` an unknown stretch becomes its bytes' tokens
``<0xXX>`` when all of them exist. This is HF tokenizers' ``Unigram.tokenize`` (and SentencePiece's encoder, for
a model read from a ``.model`` file: see ``crayon.formats.sentencepiece``).

``crayon.jit.unigram`` gives identical ids.
"""

from __future__ import annotations

import numpy as np

from crayon.errors import UnsupportedComponentError
from crayon.reference.dat import compile_dat, lookup, transition

UNKNOWN_PENALTY = 10.0
REBASED_BEYOND = 100_000.0  # SentencePiece (0.2.3) brings a path score beyond +-this back to 0


class UnigramModel:
    """Pieces (string, score) with ids 0.., the unknown piece's id, and the options of HF's Unigram.

    ``matchable`` (default: every piece) are the ids the Viterbi may use; SentencePiece never matches its
    control pieces (``<s>``, ``</s>``) or unused ones in text. Path scores are summed in double precision as
    HF does, or in single precision (``single_precision``) as SentencePiece does: the rounding decides between
    splits whose scores tie, and where the best path to a character boundary scores beyond ±``REBASED_BEYOND``,
    that score is subtracted from those of the paths found so far from there on. ``unk_score`` is an unknown
    character's score (default: the lowest matchable score - 10).
    """

    def __init__(self, pieces: list[tuple[str, float]], *, unk_id: int | None, byte_fallback: bool = False,
                 fuse_unk: bool = True, matchable: list[int] | None = None, single_precision: bool = False,
                 unk_score: float | None = None, dat: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None):
        if unk_id is not None and not 0 <= unk_id < len(pieces):
            raise UnsupportedComponentError(f"Unigram unk_id {unk_id} is outside the {len(pieces)} pieces")
        self.pieces = [(piece, float(score)) for piece, score in pieces]
        self.unk_id = unk_id
        self.byte_fallback = byte_fallback
        self.fuse_unk = fuse_unk
        self.ids = {piece: token_id for token_id, (piece, _) in enumerate(self.pieces)}
        self.matchable = list(range(len(pieces)) if matchable is None else matchable)
        matchable = self.matchable
        self.score_type = np.float32 if single_precision else np.float64
        self.scores = np.array([score for _, score in self.pieces], self.score_type)
        if unk_score is None:
            unk_score = self.scores[list(matchable)].min(initial=0.0) - self.score_type(UNKNOWN_PENALTY)
        self.unk_score = self.score_type(unk_score)
        # the DAT of the matchable pieces (``dat``: one built before, as a cartridge stores it)
        self.dat = dat if dat is not None else compile_dat([self.pieces[i][0].encode("utf-8") for i in matchable],
                                                           list(matchable))
        self.byte_ids = np.array([self.ids.get(f"<0x{byte:02X}>", -1) for byte in range(256)], np.int64)
        self.token_bytes = {token_id: piece_bytes(piece) for token_id, (piece, _) in enumerate(self.pieces)}

    def best_split(self, data: bytes) -> list[tuple[int, int, int]]:
        """``(start, end, id)`` of the pieces of the best path over ``data``; id -1 for an unknown character."""
        best_score = np.zeros(len(data) + 1, self.score_type)
        best_start = [0] + [-1] * len(data)
        best_id = [-1] * (len(data) + 1)
        base, check, values = self.dat
        frontier = 0  # the furthest end of a piece found so far
        start = 0
        while start < len(data):
            if self.score_type is np.float32 and not -REBASED_BEYOND <= best_score[start] <= REBASED_BEYOND:
                offset = best_score[start]
                for end in range(start, frontier + 1):
                    if end == start or best_start[end] >= 0:
                        best_score[end] -= offset
            char_length = _char_length(data, start)
            has_one_char_piece = False
            state = 0
            for position in range(start, len(data)):  # the common-prefix search
                state = transition(base, check, state, data[position])
                if state < 0:
                    break
                token_id = int(values[state])
                if token_id < 0:
                    continue
                end = position + 1
                frontier = max(frontier, end)
                score = best_score[start] + self.scores[token_id]
                if best_start[end] < 0 or score > best_score[end]:
                    best_score[end], best_start[end], best_id[end] = score, start, token_id
                has_one_char_piece |= end - start == char_length
            if not has_one_char_piece:
                end = start + char_length
                frontier = max(frontier, end)
                score = best_score[start] + self.unk_score
                if best_start[end] < 0 or score > best_score[end]:
                    best_score[end], best_start[end], best_id[end] = score, start, -1
            start += char_length
        split = []
        end = len(data)
        while end > 0:
            split.append((best_start[end], end, best_id[end]))
            end = best_start[end]
        return split[::-1]

    def encode_span(self, span: bytes) -> list[int]:
        """The ids of one span (text as UTF-8)."""
        return [token_id for token_id, _, _ in self.byte_spans(span)]

    def byte_spans(self, span: bytes) -> list[tuple[int, int, int]]:
        """``(id, start, end)`` of each token of a span, ``span[start:end]`` the bytes it covers (HF's offsets:
        each byte token of an unknown stretch covers the whole stretch)."""
        spans: list[tuple[int, int, int]] = []
        unknown_start = None
        split = self.best_split(span)
        for index, (start, end, token_id) in enumerate(split):
            if token_id >= 0 and (token_id != self.unk_id or not self.fuse_unk):
                spans.append((token_id, start, end))
                continue
            unknown_start = start if unknown_start is None else unknown_start
            next_is_unknown = index + 1 < len(split) and split[index + 1][2] in (-1, self.unk_id)
            if self.fuse_unk and next_is_unknown:
                continue
            first = unknown_start if self.fuse_unk else start
            spans += [(token_id, first, end) for token_id in self.unknown_ids(span[first:end])]
            unknown_start = None
        return spans

    def token_spans(self, text: str) -> list[tuple[int, int, int]]:
        """``byte_spans`` of a span's text in characters (a token ends and starts on characters)."""
        data = text.encode("utf-8")
        char_at = np.cumsum(np.frombuffer(data, np.uint8) & 0xC0 != 0x80).tolist()  # characters up to each byte
        char_at = [0, *char_at]
        return [(token_id, char_at[start], char_at[end]) for token_id, start, end in self.byte_spans(data)]

    def unknown_ids(self, text: bytes) -> list[int]:
        """The ids of an unknown stretch: a (matchable) piece spelled like it, else its byte tokens, else the
        unknown id."""
        token_id = lookup(*self.dat, text)
        if token_id >= 0:
            return [token_id]
        if self.byte_fallback and all(self.byte_ids[byte] >= 0 for byte in text):
            return [int(self.byte_ids[byte]) for byte in text]
        if self.unk_id is None:
            raise UnsupportedComponentError(f"Unigram has no unk_id for the unknown text {text!r}")
        return [self.unk_id]


def piece_bytes(piece: str) -> bytes:
    """What a SentencePiece-style piece stands for, as decoding writes it: ``▁`` a space, ``<0xXX>`` that byte."""
    if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
        try:
            return bytes([int(piece[3:5], 16)])
        except ValueError:
            pass
    return piece.replace("\u2581", " ").encode("utf-8")


def _char_length(data: bytes, start: int) -> int:
    lead = data[start]
    return 1 if lead < 0xC0 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4

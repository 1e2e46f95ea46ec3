"""BPE over characters (SentencePiece-style BPE: Llama 2, Mistral), written to be read.

A span's characters are the first symbols: each character's token, else (``byte_fallback``) the tokens
``<0xXX>`` of its UTF-8 bytes, else the unknown token (consecutive unknown characters fused into one with
``fuse_unk``). Then, again and again, the adjacent pair with the lowest merge rank (the leftmost on a tie) is
replaced by its merged token. This is HF tokenizers' ``BPE`` without a ByteLevel step (``merge_word``).

SentencePiece's own BPE merges any two adjacent symbols whose concatenation is a piece, the highest-scored
first: ``merges_from_scores`` writes that as ranked pairs (every split of a piece into two pieces, ranked by the
piece's score). Its user-defined pieces (``user_defined``) are found before merging: at each character, the
longest one starting there is one symbol, which no merge joins. ``crayon.jit.char_bpe`` gives identical ids.
"""

from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from crayon.errors import UnknownTokenError, UnsupportedComponentError
from crayon.reference.dat import compile_dat
from crayon.reference.pretokenize import special_token_regex
from crayon.reference.unigram import piece_bytes


class CharBytePairModel:
    """Vocabulary (token string -> id), merges (pairs of token strings, in rank order, or with the ``ranks``
    given, equal ranks merging leftmost first), HF's BPE options and SentencePiece's user-defined tokens (in no
    merge)."""

    def __init__(self, vocab: dict[str, int], merges: list[tuple[str, str]], *, ranks: list[int] | None = None,
                 unk_token: str | None = None, byte_fallback: bool = False, fuse_unk: bool = False,
                 user_defined: Sequence[str] = (), dat: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None):
        if unk_token is not None and unk_token not in vocab:
            raise UnsupportedComponentError(f"BPE unk_token {unk_token!r} is not in the vocabulary")
        self.vocab = dict(vocab)
        self.unk_id = None if unk_token is None else vocab[unk_token]
        self.byte_fallback, self.fuse_unk = byte_fallback, fuse_unk
        self.byte_ids = [vocab.get(f"<0x{byte:02X}>", -1) for byte in range(256)]
        self.merges: dict[tuple[int, int], tuple[int, int]] = {}
        for rank, (left, right) in zip(range(len(merges)) if ranks is None else ranks, merges):
            for token in (left, right, left + right):
                if token not in vocab:
                    raise ValueError(f"merge {left!r} {right!r}: {token!r} is not in the vocabulary")
            self.merges.setdefault((vocab[left], vocab[right]), (rank, vocab[left + right]))
        self.user_defined = list(user_defined)
        in_merges = {token_id for pair in self.merges for token_id in pair}
        for token in self.user_defined:
            if token not in vocab or vocab[token] in in_merges:
                raise ValueError(f"user-defined token {token!r}: not in the vocabulary, or in a merge")
        self.token_bytes = {token_id: piece_bytes(token) for token, token_id in self.vocab.items()}
        self._dat = dat

    @property
    def dat(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The DAT of the tokens (engines look characters up in it), built on first use unless given."""
        if self._dat is None:
            tokens = sorted(self.vocab.items(), key=lambda item: item[1])
            self._dat = compile_dat([token.encode("utf-8") for token, _ in tokens], [i for _, i in tokens])
        return self._dat

    def first_symbols(self, text: str) -> list[tuple[int, int, int]]:
        """The symbols before any merge, each ``(id, start, end)`` with ``text[start:end]`` what it covers (HF's
        order: a pending unknown token is added at the next known character or at the end; a byte token covers
        its whole character, as HF's offsets do); a user-defined token starting at a character is its symbol."""
        symbols: list[tuple[int, int, int]] = []
        unknown_start = None  # where the pending unknown token starts
        user_defined = special_token_regex(frozenset(self.user_defined)) if self.user_defined else None
        index = 0
        while index < len(text):
            found = user_defined.match(text, index) if user_defined else None
            end = found.end() if found else index + 1
            token_id = self.vocab.get(text[index:end])
            if token_id is not None:
                if unknown_start is not None:
                    symbols.append((self.unk_id, unknown_start, index))
                    unknown_start = None
                symbols.append((token_id, index, end))
            else:
                encoded = text[index].encode("utf-8")
                if self.byte_fallback and all(self.byte_ids[byte] >= 0 for byte in encoded):
                    symbols += [(self.byte_ids[byte], index, end) for byte in encoded]
                elif self.unk_id is None:
                    raise UnknownTokenError(f"character {text[index]!r} has no token and the model has no unk_token")
                else:
                    if unknown_start is not None and not self.fuse_unk:
                        symbols.append((self.unk_id, unknown_start, index))
                        unknown_start = None
                    unknown_start = index if unknown_start is None else unknown_start
            index = end
        if unknown_start is not None:
            symbols.append((self.unk_id, unknown_start, len(text)))
        return symbols

    def merges_never_cross(self, char: str) -> bool:
        """Whether a span cut before each ``char`` gives the same ids: ``char`` has a token (so it is a symbol of
        its own, never in a run of unknown characters or byte pieces), no user-defined token holds it after its
        start, and no merge joins a symbol to one that starts with ``char``, so no symbol ever spans a cut."""
        if char not in self.vocab or any(char in token[1:] for token in self.user_defined):
            return False
        starting = {token_id for token, token_id in self.vocab.items() if token.startswith(char)}
        return not any(right in starting for _, right in self.merges)

    def encode_span(self, span: bytes) -> list[int]:
        """The ids of one span (text as UTF-8)."""
        return [token_id for token_id, _, _ in self.token_spans(span.decode("utf-8"))]

    def token_spans(self, text: str) -> list[tuple[int, int, int]]:
        """``(id, start, end)`` of each token of a span, ``text[start:end]`` what it covers (HF's offsets). Where
        no merge crosses a ▁ (``merges_never_cross``), the text is encoded a word at a time, as the engines do."""
        if "\u2581" in text[1:] and self._words_are_independent:
            starts = [0] + [i for i, char in enumerate(text) if char == "\u2581" and i]
            return [(token_id, start + begin, end + begin) for begin, stop in zip(starts, [*starts[1:], len(text)])
                    for token_id, start, end in self._merged(text[begin:stop])]
        return self._merged(text)

    @functools.cached_property
    def _words_are_independent(self) -> bool:
        return self.merges_never_cross("\u2581")

    def _merged(self, text: str) -> list[tuple[int, int, int]]:
        symbols = self.first_symbols(text)
        while len(symbols) > 1:
            ranked = [(self.merges.get((left[0], right[0]), (None, None)), index)
                      for index, (left, right) in enumerate(zip(symbols, symbols[1:]))]
            found = [(rank, index, merged) for (rank, merged), index in ranked if rank is not None]
            if not found:
                break
            _, index, merged = min(found)
            symbols[index : index + 2] = [(merged, symbols[index][1], symbols[index + 1][2])]
        return symbols


def merges_from_scores(pieces: list[tuple[str, float]],
                       mergeable: list[int]) -> tuple[list[tuple[str, str]], list[int]]:
    """SentencePiece's BPE as ranked merges ``(merges, ranks)``: every split of a mergeable piece into two
    mergeable pieces, all ranked by the piece's score (higher first: rank = the number of higher scores)."""
    ids = {pieces[token_id][0]: token_id for token_id in mergeable}
    distinct_scores = sorted({pieces[token_id][1] for token_id in mergeable}, reverse=True)
    rank_of_score = {score: rank for rank, score in enumerate(distinct_scores)}
    merges, ranks = [], []
    for token_id in sorted(mergeable, key=lambda token_id: -pieces[token_id][1]):
        piece, score = pieces[token_id]
        for cut in range(1, len(piece)):
            if piece[:cut] in ids and piece[cut:] in ids:
                merges.append((piece[:cut], piece[cut:]))
                ranks.append(rank_of_score[score])
    return merges, ranks

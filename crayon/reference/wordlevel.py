"""WordLevel, written to be read: each word (a pre-tokenizer span) is one token.

A word in the vocabulary is its id; any other word is the unknown token's id, and when the unknown token is
not in the vocabulary either, encoding that word fails (``UnknownTokenError``; HF raises "Missing [UNK] token
from the vocabulary" at the same point, and loads such a file without complaint). An empty word has no token
(HF never hands the model one). This is HF tokenizers' ``WordLevel.tokenize``.

``SentencePieceWordModel`` is SentencePiece's word model (``model_type=word``): it cuts a whole normalized text
into words itself, and consecutive unknown words are one unknown piece.

``crayon.jit.wordlevel`` gives identical ids, looking each word up exactly in the DAT of the vocabulary.
"""

from __future__ import annotations

import numpy as np

from crayon.errors import UnknownTokenError
from crayon.reference.dat import compile_dat
from crayon.reference.unigram import piece_bytes


class WordLevelModel:
    """A WordLevel vocabulary (word -> id) with its unknown token (HF's default ``<unk>``)."""

    def __init__(self, vocab: dict[str, int], *, unk_token: str = "<unk>",
                 dat: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None):
        self.vocab = dict(vocab)
        self.unk_token = unk_token
        self.unk_id = self.vocab.get(unk_token)
        self.token_bytes = {token_id: token.encode("utf-8") for token, token_id in self.vocab.items()}
        self._dat = dat

    @property
    def dat(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The DAT of the words (the jit kernel looks each word up in it), built on first use unless given (a
        cartridge stores it). The empty word is left out: no word to encode is empty."""
        if self._dat is None:
            words = sorted((item for item in self.vocab.items() if item[0]), key=lambda item: item[1])
            self._dat = compile_dat([word.encode("utf-8") for word, _ in words], [i for _, i in words])
        return self._dat

    def encode_word(self, word: str) -> list[int]:
        """The id of one word: ``[vocab[word]]``, else ``[unk_id]``; none for the empty word."""
        return [token_id for token_id, _, _ in self.token_spans(word)]

    def token_spans(self, word: str) -> list[tuple[int, int, int]]:
        """``[(id, 0, len(word))]``: the token covers the whole word (HF's offsets), known or not."""
        if not word:
            return []
        token_id = self.vocab.get(word, self.unk_id)
        if token_id is None:
            raise self.unknown_word_error(word)
        return [(token_id, 0, len(word))]

    def unknown_word_error(self, word: str) -> UnknownTokenError:
        """The error of a word that is not in the vocabulary when the unknown token is not either."""
        return UnknownTokenError(f"WordLevel: the word {word[:40]!r} is not in the vocabulary and neither is its "
                                 f"unk_token {self.unk_token!r}")

    def encode_span(self, span: bytes) -> list[int]:
        """``encode_word`` of a span's text (the engines' model interface)."""
        return self.encode_word(span.decode("utf-8"))


SPACE = "\u2581"


class SentencePieceWordModel:
    """SentencePiece's word model over a whole normalized text. A word starts at the text's start or at a ``▁``
    and runs to the next ``▁``; a word among the ``matchable`` pieces (normal and user-defined) is its id; a run
    of words that are not is one unknown piece, or with ``byte_fallback`` the pieces ``<0xXX>`` of its UTF-8
    bytes, as ``sentencepiece`` encodes (control pieces such as ``<s>`` are never matched)."""

    def __init__(self, pieces: list[str], matchable: list[int], *, unk_id: int | None, byte_fallback: bool = False,
                 dat: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None):
        self.strings, self.matchable = list(pieces), list(matchable)  # each id's piece
        self.unk_id, self.byte_fallback = unk_id, byte_fallback
        self.words = {self.strings[i]: i for i in self.matchable}
        self.vocab = {piece: i for i, piece in enumerate(self.strings)}
        self.byte_ids = np.array([self.vocab.get(f"<0x{byte:02X}>", -1) for byte in range(256)], np.int64)
        if byte_fallback and (self.byte_ids < 0).any():
            raise UnknownTokenError("SentencePiece byte_fallback without the 256 byte pieces <0x00> ... <0xFF>")
        self.token_bytes = {i: piece_bytes(piece) for i, piece in enumerate(self.strings)}
        self._dat = dat

    @property
    def dat(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The DAT of the matchable pieces (the jit kernel looks each word up in it), built on first use unless
        given (a cartridge stores it)."""
        if self._dat is None:
            words = sorted((item for item in self.words.items() if item[0]), key=lambda item: item[1])
            self._dat = compile_dat([word.encode("utf-8") for word, _ in words], [i for _, i in words])
        return self._dat

    def token_spans(self, text: str) -> list[tuple[int, int, int]]:
        """``(id, start, end)`` of each token of the text, in characters: a word covers itself, an unknown run
        (each of its byte tokens too) the whole run."""
        starts = [i for i, char in enumerate(text) if char == SPACE and i > 0]
        spans, unknown_from = [], None
        for start, end in zip([0, *starts], [*starts, len(text)]):
            if start == end:
                continue
            token_id = self.words.get(text[start:end])
            if token_id is None:
                unknown_from = start if unknown_from is None else unknown_from
                continue
            if unknown_from is not None:
                spans += self._unknown_spans(text, unknown_from, start)
                unknown_from = None
            spans.append((token_id, start, end))
        if unknown_from is not None:
            spans += self._unknown_spans(text, unknown_from, len(text))
        return spans

    def _unknown_spans(self, text: str, start: int, end: int) -> list[tuple[int, int, int]]:
        if self.byte_fallback:
            return [(int(self.byte_ids[byte]), start, end) for byte in text[start:end].encode("utf-8")]
        if self.unk_id is None:
            raise UnknownTokenError(f"SentencePiece words {text[start:end][:40]!r} are not pieces and the model has "
                                    "no unknown piece")
        return [(self.unk_id, start, end)]

    def encode_span(self, span: bytes) -> list[int]:
        """The ids of a whole normalized text (the engines' model interface)."""
        return [token_id for token_id, _, _ in self.token_spans(span.decode("utf-8"))]

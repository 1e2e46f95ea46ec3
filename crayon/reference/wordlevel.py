"""WordLevel, written to be read: each word (a pre-tokenizer span) is one token.

A word in the vocabulary is its id; any other word is the unknown token's id, and when the unknown token is
not in the vocabulary either, encoding that word fails (``UnknownTokenError``; HF raises "Missing [UNK] token
from the vocabulary" at the same point, and loads such a file without complaint). An empty word has no token
(HF never hands the model one). This is HF tokenizers' ``WordLevel.tokenize``.

``crayon.jit.wordlevel`` gives identical ids, looking each word up exactly in the DAT of the vocabulary.
"""

from __future__ import annotations

import numpy as np

from crayon.errors import UnknownTokenError
from crayon.reference.dat import compile_dat


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

"""WordPiece (BERT's model), written to be read: greedy longest-match-first over the vocabulary.

A word (a pre-tokenizer span) is cut from its start: the longest vocabulary token it starts with, then, from
where that ends, the longest token that ``continuing_subword_prefix`` + the rest starts with (``##ing``), and
so on. If some position has no token, or the word has more than ``max_input_chars_per_word`` characters, the
whole word is the unknown token. This is HF tokenizers' ``WordPiece.tokenize``.

The tries are the DAT of ``crayon.reference.dat``: one of every token (for a word's first piece), one of the
continuation tokens without their prefix (for the pieces after it). ``crayon.jit.wordpiece`` gives identical ids.
"""

from __future__ import annotations

from crayon.errors import UnsupportedComponentError
from crayon.reference.dat import compile_dat
from crayon.reference.longest import longest_match


class WordPieceModel:
    """A WordPiece vocabulary (token string -> id) with its unknown token, prefix and word length limit."""

    def __init__(self, vocab: dict[str, int], *, unk_token: str = "[UNK]", continuing_subword_prefix: str = "##",
                 max_input_chars_per_word: int = 100, dats: tuple[tuple, tuple] | None = None):
        if unk_token not in vocab:
            raise UnsupportedComponentError(f"WordPiece unk_token {unk_token!r} is not in the vocabulary")
        self.vocab = dict(vocab)
        self.unk_token, self.unk_id = unk_token, vocab[unk_token]
        self.prefix = continuing_subword_prefix
        self.max_input_chars_per_word = max_input_chars_per_word
        if dats is not None:  # (initial, continuing) built before, as a cartridge stores them
            self.initial, self.continuing = dats
        else:
            tokens = sorted(self.vocab.items(), key=lambda item: item[1])
            self.initial = compile_dat([token.encode("utf-8") for token, _ in tokens], [i for _, i in tokens])
            continuing = [(token[len(self.prefix):], i) for token, i in tokens
                          if token.startswith(self.prefix) and len(token) > len(self.prefix)]
            self.continuing = compile_dat([token.encode("utf-8") for token, _ in continuing],
                                          [i for _, i in continuing])
        self.token_bytes = {token_id: token.encode("utf-8") for token, token_id in self.vocab.items()}

    def encode_word(self, word: str) -> list[int]:
        """The ids of one word: its pieces, or ``[unk_id]``."""
        return [token_id for token_id, _, _ in self.token_spans(word)]

    def token_spans(self, word: str) -> list[tuple[int, int, int]]:
        """``(id, start, end)`` of each piece of a word, ``word[start:end]`` what it covers (HF's offsets: the
        unknown token covers the whole word)."""
        if len(word) > self.max_input_chars_per_word:
            return [(self.unk_id, 0, len(word))]
        data = word.encode("utf-8")
        spans = []
        start = char = 0
        while start < len(data):
            token_id, length = longest_match(data, start, len(data), *(self.continuing if start else self.initial))
            if length == 0:
                return [(self.unk_id, 0, len(word))]
            chars = len(data[start : start + length].decode("utf-8"))  # a token is whole characters
            spans.append((token_id, char, char + chars))
            start, char = start + length, char + chars
        return spans

    def encode_span(self, span: bytes) -> list[int]:
        """``encode_word`` of a span's text (the engines' model interface)."""
        return self.encode_word(span.decode("utf-8"))

"""Word-level tokenizer: words and single punctuation marks, whitespace dropped."""

from __future__ import annotations

import re
import unicodedata

from crayon.lookup.vocab_tokenizer import VocabTokenizer

__all__ = ["WordTokenizer"]

# A word is a maximal run of word characters (Unicode letters, digits, underscore: Python's \w);
# every other non-whitespace character is a token of its own.
PUNCTUATION_PATTERN = re.compile(r"[^\w\s]")
WORD_PATTERN = re.compile(r"\w+|" + PUNCTUATION_PATTERN.pattern)


class WordTokenizer(VocabTokenizer):
    """Maps words and punctuation marks to ids; ids 0-3 are `<PAD>`, `<UNK>`, `<BOS>`, `<EOS>`.

    Splitting (`tokenize`): special-token literals first, then the rest into maximal runs of `\\w`
    characters and single other non-whitespace characters; whitespace only separates tokens and is
    dropped. "Hello, world!" -> ["Hello", ",", "world", "!"]. Case-sensitive.

    `train` keeps the tokens seen at least `min_frequency` times (ids ordered by frequency, then by
    string; see `VocabTokenizer.train`). `encode` maps any other word to `<UNK>` (id 1).

    `decode` joins tokens with one space, except that none goes after an opening bracket or initial quote
    (Unicode categories Ps, Pi) and none before any other punctuation mark: ["Hello", ",", "world", "!"]
    -> "Hello, world!"; ["(", "don", "'", "t", ")"] -> "(don' t)". So decode does not give
    back the original whitespace, but re-splitting it gives the same tokens: for every list of valid
    ids, `encode(decode(ids)) == ids`, and for text whose tokens are all in the vocabulary,
    `tokenize(decode(encode(text))) == tokenize(text)`.
    """

    def _split_units(self, text: str) -> list[str]:
        return WORD_PATTERN.findall(text)

    def _join_tokens(self, tokens: list[str]) -> str:
        pieces: list[str] = []
        for previous, token in zip([None, *tokens], tokens):
            if previous is not None and not _is_opening(previous) and not (
                PUNCTUATION_PATTERN.fullmatch(token) and not _is_opening(token)
            ):
                pieces.append(" ")
            pieces.append(token)
        return "".join(pieces)

    @classmethod
    def _is_unit(cls, token: str) -> bool:
        return WORD_PATTERN.fullmatch(token) is not None



def _is_opening(token: str) -> bool:
    """An opening bracket or initial quote mark (Unicode categories Ps, Pi): no space goes after it."""
    return len(token) == 1 and unicodedata.category(token) in ("Ps", "Pi")

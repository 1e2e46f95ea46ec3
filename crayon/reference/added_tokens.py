"""Added tokens matched as HF tokenizers matches them: leftmost-longest over the text, with the ``single_word``,
``lstrip`` and ``rstrip`` options of each token.

HF matches in two passes: the tokens with ``normalized: false`` in the raw text, then, in each piece between
them once normalized, the tokens with ``normalized: true`` (their content normalized too). ``split_added_tokens``
is one pass; ``crayon.Tokenizer`` runs the two.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Iterator, Mapping

import regex

from crayon.reference.pretokenize import special_token_regex
from crayon.reference.unicode16 import pin_unicode_classes

__all__ = ["AddedTokenOptions", "PLAIN", "split_added_tokens"]

# HF tests word characters with Rust's regex ``\w`` and spaces with its ``\s`` (Unicode's White_Space), at the
# Unicode version tiktoken and HF's Rust tables share.
WHITE_SPACE = frozenset("\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
                        "\u200a\u2028\u2029\u202f\u205f\u3000")


@functools.cache
def _word() -> regex.Pattern:
    return regex.compile(pin_unicode_classes(r"\w"))


@dataclass(frozen=True)
class AddedTokenOptions:
    """How an added token is matched (HF's ``AddedToken`` fields): ``single_word`` only between non-word
    characters; ``lstrip``/``rstrip`` swallow the whitespace before/after it; ``normalized`` matched in the
    normalized text (second pass) rather than in the raw text."""

    single_word: bool = False
    lstrip: bool = False
    rstrip: bool = False
    normalized: bool = False

    def to_hf(self) -> dict[str, bool]:
        """The option fields of an entry of a ``tokenizer.json``'s ``added_tokens``."""
        return {"single_word": self.single_word, "lstrip": self.lstrip, "rstrip": self.rstrip,
                "normalized": self.normalized}

    @classmethod
    def from_hf(cls, fields: dict) -> "AddedTokenOptions":
        """``to_hf`` read back (every field present)."""
        return cls(**{name: bool(fields[name]) for name in ("single_word", "lstrip", "rstrip", "normalized")})


PLAIN = AddedTokenOptions()


def split_added_tokens(text: str, tokens: Mapping[str, AddedTokenOptions]) -> Iterator[tuple[int, int, str | None]]:
    """Yield ``(start, end, token)``: the tokens found in ``text`` (``token`` is the matched content,
    ``text[start:end]`` what it covers, stripped whitespace included) and the text between them (``token``
    None), as HF's ``AddedVocabulary::find_matches`` does. A match is discarded (and the search goes on after
    it) where a ``single_word`` token touches a word character; stripped whitespace already covered by the
    previous token is not covered twice."""
    if not tokens:
        if text:
            yield 0, len(text), None
        return
    covered = 0  # end of what the last token covered
    for match in special_token_regex(frozenset(tokens)).finditer(text):
        start, stop = match.span()
        options = tokens[match.group()]
        if options.single_word and ((start and _word().match(text, start - 1)) or _word().match(text, stop)):
            continue
        if options.lstrip:
            while start > covered and text[start - 1] in WHITE_SPACE:
                start -= 1
            start = max(start, covered)
        if options.rstrip:
            while stop < len(text) and text[stop] in WHITE_SPACE:
                stop += 1
        if covered < start:
            yield covered, start, None
        yield start, stop, match.group()
        covered = stop
    if covered < len(text):
        yield covered, len(text), None

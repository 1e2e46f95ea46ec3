"""Pre-tokenization ("the spanner"): split text into the spans the model encodes one at a time.

Special tokens are cut out first; the text between them is split by the pattern's regex, exactly as
tiktoken does (``regex.findall``). Every character of the text lands in exactly one span.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Iterable, Iterator

import regex

from crayon.errors import UnsupportedComponentError
from crayon.patterns import pattern_name, resolve_pattern
from crayon.reference.alignments import AlignedText
from crayon.reference.unicode16 import pin_unicode_classes

if TYPE_CHECKING:  # the regex compiler is imported where a pre-tokenizer is compiled, not by `import crayon`
    from crayon.reference.regex_vm import RegexSplit


# Letters, marks, digits, punctuation, symbols and whitespace of several scripts: a pattern whose spans drop
# any of it drops text a tokenizer will meet (``dropped_text``).
COVERAGE_SAMPLE = (
    "Hello, World! It's 2024: naïve café, ½ + 3.14 = x_y; \"quotes\" (parens) [brackets] {braces} <tags>\n"
    "\tTabs  and   spaces\r\nΕλληνικά Русский 東京 हिन्दी العربية 한국어 🙂👍🏽 $100 #tag @user ~/path\\ \u00a0end \n\n"
)


@functools.lru_cache(maxsize=32)
def compile_pattern(pattern: str) -> regex.Pattern:
    """Compile a pattern name or regex string (cached), its character properties pinned to Unicode 16
    (tiktoken's version) whatever the installed ``regex`` release implements; a regex that does not compile
    raises ValueError."""
    try:
        return regex.compile(pin_unicode_classes(resolve_pattern(pattern)))
    except regex.error as error:
        raise ValueError(f"pattern {pattern!r} is not a valid regex: {error}") from None


def dropped_text(pattern: str, text: str) -> list[tuple[int, str]]:
    """The pieces of ``text`` that no span of ``pattern`` covers, as (offset, piece): ``findall`` keeps only
    the matches, so a pattern that does not match every character loses text when encoding."""
    dropped, position = [], 0
    for match in compile_pattern(pattern).finditer(text):
        if match.start() > position:
            dropped.append((position, text[position : match.start()]))
        position = match.end()
    if position < len(text):
        dropped.append((position, text[position:]))
    return dropped


def split(text: str, pattern: str) -> list[str]:
    """Split ordinary text (no special tokens) into spans with a pattern name or regex."""
    return compile_pattern(pattern).findall(text)


@functools.lru_cache(maxsize=64)
def special_token_regex(tokens: frozenset[str]) -> regex.Pattern:
    """A regex matching any of ``tokens``, longest first so that a token never shadows a longer one."""
    alternatives = sorted(tokens, key=lambda t: (-len(t), t))
    return regex.compile("|".join(regex.escape(t) for t in alternatives))


def split_specials(text: str, allowed: Iterable[str]) -> Iterator[tuple[str, bool]]:
    """Yield ``(chunk, is_special)`` pieces: the allowed special tokens and the ordinary text between them."""
    allowed = frozenset(allowed)
    if not allowed:
        if text:
            yield text, False
        return
    start = 0
    for match in special_token_regex(allowed).finditer(text):
        if match.start() > start:
            yield text[start : match.start()], False
        yield match.group(), True
        start = match.end()
    if start < len(text):
        yield text[start:], False


def metaspace_split(piece: str, replacement: str, prepend: bool, split: bool) -> list[str]:
    """HF's Metaspace on one piece: each space becomes ``replacement``; with ``prepend``, a non-empty piece that
    does not start with ``replacement`` gets one first; with ``split``, the piece is cut before each
    ``replacement`` (HF's MergedWithNext split on it). Empty pieces are dropped."""
    piece = piece.replace(" ", replacement)
    if prepend and piece and not piece.startswith(replacement):
        piece = replacement + piece
    if not split:
        return [piece] if piece else []
    first, *rest = piece.split(replacement)
    return ([first] if first else []) + [replacement + part for part in rest]


class PatternSpanner:
    """The pre-tokenizer of a tiktoken-style vocabulary: ``regex.findall`` with one pattern."""

    def __init__(self, pattern: str):
        self.pattern = resolve_pattern(pattern)
        if pattern_name(self.pattern) is None:
            compile_pattern(self.pattern)  # a custom regex is checked now; a known one compiles on first use,
            # which the jit engine, with its own state machine for it, never makes

    def __call__(self, text: str) -> list[str]:
        return compile_pattern(self.pattern).findall(text)

    def aligned_spans(self, text: AlignedText) -> list[AlignedText]:
        """``__call__`` of an aligned text (``crayon.reference.alignments``): the matches with their spans."""
        return [text[match.start() : match.end()] for match in compile_pattern(self.pattern).finditer(text.text)]

    def regex_splits(self) -> tuple[list[RegexSplit], bool]:
        """findall as a split (see ``RegexSplit``): the matches are kept, the text between them dropped."""
        if compile_pattern(self.pattern).groups:
            raise UnsupportedComponentError(f"pattern {self.pattern!r} has capture groups (findall returns them)")
        from crayon.reference.regex_vm import RegexSplit

        return [RegexSplit(self.pattern, behavior="removed", invert=True)], False


class WholeText:
    """The pre-tokenizer of a vocabulary without a pattern (Crayon v2 ``.dat`` files): the text is one span."""

    def __call__(self, text: str) -> list[str]:
        return [text] if text else []

    def regex_splits(self) -> tuple[list[RegexSplit], bool]:
        """No split (see ``RegexSplit``)."""
        return [], False

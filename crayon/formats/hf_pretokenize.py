"""HF tokenizers' pre-tokenizers, written to be read: each one splits a list of pieces into finer pieces.

A pre-tokenizer step takes the pieces made so far and splits each of them; pieces that come out empty are
dropped, as in HF. Pieces are text in HF's representation: once a ``ByteLevel`` step has run, every character
stands for one byte (GPT-2's ``bytes_to_unicode`` table) and any later step splits that byte-level text.
``HFPreTokenizer`` runs the steps and hands Crayon's model each span as the original text. ``split_aligned`` does
the same to an ``AlignedText`` (``crayon.reference.alignments``), keeping each character's original span as HF
does, for the offsets of tokens.

Regexes in HF files are Oniguruma regexes (Ruby syntax); ``compile_hf_regex`` translates the few constructs
that mean something else to the ``regex`` module, and ``find_matches`` iterates matches the way HF does.
"""

from __future__ import annotations

import functools
from typing import Iterable

import regex

from crayon.errors import UnsupportedComponentError
from crayon.reference.alignments import AlignedText
from crayon.reference.unicode16 import escape_end, pin_unicode_classes, scan_class
from crayon.reference.pretokenize import metaspace_split
from crayon.reference.regex_vm import SPLIT_BEHAVIORS, MetaspaceSplit, RegexSplit

# ----------------------------------------------------------------------------------------------------------
# GPT-2's byte <-> character table: printable Latin-1 bytes stand for themselves, the 68 others are shifted
# to U+0100.. so that every byte has a visible, non-space character.


def _bytes_to_unicode() -> dict[int, str]:
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    table = {byte: chr(byte) for byte in printable}
    shifted = 0
    for byte in range(256):
        if byte not in table:
            table[byte] = chr(256 + shifted)
            shifted += 1
    return table


BYTE_TO_CHAR: dict[int, str] = _bytes_to_unicode()
CHAR_TO_BYTE: dict[str, int] = {char: byte for byte, char in BYTE_TO_CHAR.items()}
_TO_BYTE_CHARS = str.maketrans({chr(byte): char for byte, char in BYTE_TO_CHAR.items()})
_FROM_BYTE_CHARS = str.maketrans({char: chr(byte) for byte, char in BYTE_TO_CHAR.items()})


def to_byte_chars(data: bytes) -> str:
    """Bytes as GPT-2 byte-level characters (one character per byte)."""
    return data.decode("latin-1").translate(_TO_BYTE_CHARS)


def from_byte_chars(text: str) -> bytes:
    """The bytes that GPT-2 byte-level characters stand for; ``ValueError`` if a character stands for none."""
    latin1 = text.translate(_FROM_BYTE_CHARS)
    try:
        return latin1.encode("latin-1")
    except UnicodeEncodeError:
        raise ValueError(f"{text!r} is not byte-level text: it has characters outside GPT-2's byte table") from None


def as_byte_chars(text: AlignedText) -> AlignedText:
    """An aligned text as byte-level characters, the bytes of each character with its span."""
    return text.replace_each(to_byte_chars(char.encode("utf-8")) for char in text.text)


def is_byte_chars(text: str) -> bool:
    """Whether every character of ``text`` stands for a byte in GPT-2's table."""
    return all(char in CHAR_TO_BYTE for char in text)


# ----------------------------------------------------------------------------------------------------------
# Oniguruma regexes and HF's match iteration

_INTERVAL = regex.compile(r"\{(?:\d+,?\d*|,\d+)\}")  # {n} {n,} {n,m} {,m}


def _class_end(pattern: str, start: int) -> int:
    """The end of the character class starting at ``pattern[start] == "["`` (POSIX [:alpha:] inside is fine)."""
    end, nested = scan_class(pattern, start)
    if nested != -1:
        raise UnsupportedComponentError(f"regex {pattern!r}: nested character classes are not supported")
    if end == -1:
        raise UnsupportedComponentError(f"regex {pattern!r}: unterminated character class")
    return end


def _regex_tokens(pattern: str) -> list[tuple[str, str]]:
    """Split a regex into ("escape" | "class" | "open" | "close" | "interval" | "char", text) tokens."""
    tokens = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        interval = _INTERVAL.match(pattern, i) if char == "{" else None
        if char == "\\":
            end, kind = escape_end(pattern, i), "escape"
        elif char == "[":
            end, kind = _class_end(pattern, i), "class"
        elif interval:
            end, kind = interval.end(), "interval"
        else:
            end, kind = i + 1, {"(": "open", ")": "close"}.get(char, "char")
        tokens.append((kind, pattern[i:end]))
        i = end
    return tokens


def _rewrite_regex(pattern: str, rewrite_token, rewrite_interval_plus) -> str:
    """Rebuild a regex token by token; ``ATOM{n,m}+`` is handed whole to ``rewrite_interval_plus``.

    Oniguruma (Ruby syntax) reads ``ATOM{n,m}+`` as ``(?:ATOM{n,m})+``; Python's regex module (like
    tiktoken's fancy-regex) reads it as a possessive ``ATOM{n,m}``.
    """
    tokens = _regex_tokens(pattern)
    out: list[str] = []
    group_starts: list[int] = []
    atom_start = 0
    skip_plus = False
    for index, (kind, text) in enumerate(tokens):
        if skip_plus:
            skip_plus = False
            continue
        if kind == "open":
            group_starts.append(len(out))
            out.append(text)
        elif kind == "close":
            atom_start = group_starts.pop() if group_starts else len(out)
            out.append(text)
        elif kind == "interval" and tokens[index + 1 : index + 2] == [("char", "+")]:
            atom = "".join(out[atom_start:])
            del out[atom_start:]
            out.append(rewrite_interval_plus(atom + text))
            skip_plus = True
        elif kind == "interval":
            out.append(text)
        else:
            atom_start = len(out)
            out.append(rewrite_token(kind, text))
    return "".join(out)


# Oniguruma's \w is the regex module's \w without the two joiners (ZWNJ, ZWJ) and with Latin-1's numbers.
_ONIG_WORD = r"(?:[^\W\u200c\u200d]|[\xb2\xb3\xb9\xbc-\xbe])"
_ONIG_ESCAPES = {
    "\\w": _ONIG_WORD,
    "\\W": r"(?:[^\w\xb2\xb3\xb9\xbc-\xbe]|[\u200c\u200d])",
    "\\b": f"(?:(?<={_ONIG_WORD})(?!{_ONIG_WORD})|(?<!{_ONIG_WORD})(?={_ONIG_WORD}))",
    "\\B": f"(?:(?<={_ONIG_WORD})(?={_ONIG_WORD})|(?<!{_ONIG_WORD})(?!{_ONIG_WORD}))",
    "\\h": "[0-9a-fA-F]",  # hexadecimal digit
    "\\H": "[^0-9a-fA-F]",
    "\\Z": r"(?=\n?\Z)",  # end of string or before a final newline
    "\\z": r"\Z",  # end of string
}
_ONIG_CLASS_ESCAPES = regex.compile(r"\\[wWhH]|\\.")


def _onig_class_to_python(text: str) -> str:
    def translate(escape: regex.Match) -> str:
        if escape.group() in ("\\w", "\\W", "\\H"):
            raise UnsupportedComponentError(f"regex class {text!r}: {escape.group()} inside a class is not supported")
        return "0-9a-fA-F" if escape.group() == "\\h" else escape.group()

    return _ONIG_CLASS_ESCAPES.sub(translate, text)


def _onig_token_to_python(kind: str, text: str) -> str:
    if kind == "escape":
        return _ONIG_ESCAPES.get(text, text)
    if kind == "class":
        return _onig_class_to_python(text)
    return text


@functools.lru_cache(maxsize=256)
def compile_hf_regex(pattern: str) -> regex.Pattern:
    """Compile an Oniguruma regex from an HF file so that the ``regex`` module matches what HF matches.

    In Ruby syntax ``^``/``$`` match at every line start/end (hence MULTILINE), ``ATOM{n,m}+`` repeats the
    interval, and ``\\w \\W \\b \\B \\h \\H \\Z \\z`` mean other things; ``\\w``, ``\\W`` or ``\\H`` inside a
    character class have no translation and are refused.
    """
    python = _rewrite_regex(pattern, _onig_token_to_python, lambda repeated: f"(?:{repeated})+")
    try:
        return regex.compile(pin_unicode_classes(python), regex.MULTILINE | regex.VERSION0)
    except regex.error as error:
        raise UnsupportedComponentError(f"regex {pattern!r} does not compile: {error}") from None


_PYTHON_ANCHORS = {"^": r"\A", "$": r"(?=\n?\z)"}  # without MULTILINE: start; end or before a final newline


def python_regex_to_hf(pattern: str) -> str:
    """Write a ``regex``-module pattern (a tiktoken pattern) as the Oniguruma regex HF reads the same way.

    ``\\w \\W \\b \\B`` are refused: their word characters differ (see ``_ONIG_WORD``).
    """

    def translate(kind: str, text: str) -> str:
        if kind == "char":
            return _PYTHON_ANCHORS.get(text, text)
        if text in ("\\w", "\\W", "\\b", "\\B") or (kind == "class" and regex.search(r"\\[wW]", text)):
            raise UnsupportedComponentError(f"pattern {pattern!r}: {text} means other characters in HF's Oniguruma")
        return r"\z" if (kind, text) == ("escape", r"\Z") else text

    return _rewrite_regex(pattern, translate, lambda repeated: f"(?>{repeated})")


def string_pattern(literal: str) -> regex.Pattern:
    """HF's ``{"String": ...}`` pattern: the literal, escaped into a regex (so "" matches everywhere)."""
    return regex.compile(regex.escape(literal))


def find_matches(pattern: regex.Pattern, text: str) -> list[tuple[int, int, bool]]:
    """Cover ``text`` with ``(start, end, is_match)`` slices, iterating matches as HF's Oniguruma binding does.

    An empty match right where the previous match ended is skipped (one character is stepped over), so
    ``a*`` on "baab" matches at 0, 1-3 and 4, not also at 3 as Python's ``finditer`` would.
    """
    if not text:
        return [(0, 0, False)]
    slices: list[tuple[int, int, bool]] = []
    previous_end = 0
    search_from = 0
    last_match_end: int | None = None
    while search_from <= len(text):
        match = pattern.search(text, search_from)
        if match is None:
            break
        start, end = match.span()
        if start == end and last_match_end == end:
            search_from += 1
            continue
        if previous_end != start:
            slices.append((previous_end, start, False))
        slices.append((start, end, True))
        previous_end = search_from = last_match_end = end
    if previous_end != len(text):
        slices.append((previous_end, len(text), False))
    return slices


BEHAVIORS = SPLIT_BEHAVIORS
_HF_BEHAVIOR_NAMES = {
    "Removed": "removed",
    "Isolated": "isolated",
    "MergedWithPrevious": "merged_with_previous",
    "MergedWithNext": "merged_with_next",
    "Contiguous": "contiguous",
}


def split_text(text: str, slices: list[tuple[int, int, bool]], behavior: str) -> list[str]:
    """HF's ``NormalizedString::split``: what happens to the matched slices, then drop empty pieces."""
    return [text[start:end] for start, end in split_ranges(slices, behavior)]


def split_ranges(slices: list[tuple[int, int, bool]], behavior: str) -> list[tuple[int, int]]:
    """``split_text``'s pieces as (start, end) ranges of the text."""
    kept: list[list[int]] = []  # [start, end] of each piece
    if behavior == "removed":
        kept = [[start, end] for start, end, is_match in slices if not is_match]
    elif behavior == "isolated":
        kept = [[start, end] for start, end, _ in slices]
    elif behavior == "contiguous":
        previous_match = False
        for start, end, is_match in slices:
            if is_match == previous_match and kept:
                kept[-1][1] = end
            else:
                kept.append([start, end])
            previous_match = is_match
    elif behavior == "merged_with_previous":
        previous_match = False
        for start, end, is_match in slices:
            if is_match and not previous_match and kept:
                kept[-1][1] = end
            else:
                kept.append([start, end])
            previous_match = is_match
    elif behavior == "merged_with_next":
        previous_match = False
        for start, end, is_match in reversed(slices):
            if is_match and not previous_match and kept:
                kept[-1][0] = start
            else:
                kept.append([start, end])
            previous_match = is_match
        kept.reverse()
    else:
        raise ValueError(f"unknown split behavior {behavior!r}; choose one of {', '.join(BEHAVIORS)}")
    return [(start, end) for start, end in kept if end > start]


def behavior_from_hf(name: str) -> str:
    """A behavior as HF files spell it ("MergedWithNext") or in snake case ("merged_with_next")."""
    behavior = _HF_BEHAVIOR_NAMES.get(name, name)
    if behavior not in BEHAVIORS:
        raise UnsupportedComponentError(f"unknown split behavior {name!r}")
    return behavior


def _behavior_to_hf(behavior: str) -> str:
    return next(hf for hf, ours in _HF_BEHAVIOR_NAMES.items() if ours == behavior)


# ----------------------------------------------------------------------------------------------------------
# The pre-tokenizers


class PreTokenizerStep:
    """One HF pre-tokenizer: ``split(piece)`` gives the finer pieces of one piece."""

    maps_to_byte_chars = False  # True for a step whose output is byte-level text

    def split(self, piece: str) -> list[str]:
        raise NotImplementedError

    def __call__(self, pieces: Iterable[str]) -> list[str]:
        return [finer for piece in pieces for finer in self.split(piece) if finer]

    def split_aligned(self, piece: AlignedText) -> list[AlignedText]:
        """``split`` of an aligned piece: the finer pieces with their characters' original spans."""
        raise UnsupportedComponentError(f"the character offsets of tokens after the {type(self).__name__} "
                                        "pre-tokenizer are not implemented")

    def aligned(self, pieces: Iterable[AlignedText]) -> list[AlignedText]:
        """``__call__`` on aligned pieces."""
        return [finer for piece in pieces for finer in self.split_aligned(piece) if len(finer)]

    def to_hf(self) -> dict:
        raise NotImplementedError

    def after_token(self) -> "PreTokenizerStep":
        """This step on text that follows an added token (not at the start of the input)."""
        return self

    def regex_splits(self) -> tuple[list[RegexSplit], bool]:
        """This step as regex splits (see ``crayon.reference.regex_vm.RegexSplit``)."""
        raise UnsupportedComponentError(f"pre-tokenizer {type(self).__name__} has no regex form")


def _regex_split(pattern: regex.Pattern, behavior: str, invert: bool) -> RegexSplit:
    if pattern.flags & ~(regex.MULTILINE | regex.VERSION0 | regex.UNICODE):
        raise UnsupportedComponentError(f"regex {pattern.pattern!r} with flags {pattern.flags:#x}")
    return RegexSplit(pattern.pattern, bool(pattern.flags & regex.MULTILINE), behavior, invert)


class PatternSplit(PreTokenizerStep):
    """Split on every match of a compiled pattern, with one of HF's behaviors (the base of most steps)."""

    def __init__(self, pattern: regex.Pattern, behavior: str, invert: bool = False):
        self.regex = pattern
        self.behavior = behavior_from_hf(behavior)
        self.invert = invert

    def split(self, piece: str) -> list[str]:
        slices = find_matches(self.regex, piece)
        if self.invert:
            slices = [(start, end, not is_match) for start, end, is_match in slices]
        return split_text(piece, slices, self.behavior)

    def split_aligned(self, piece: AlignedText) -> list[AlignedText]:
        slices = find_matches(self.regex, piece.text)
        if self.invert:
            slices = [(start, end, not is_match) for start, end, is_match in slices]
        return [piece[start:end] for start, end in split_ranges(slices, self.behavior)]

    def regex_splits(self) -> tuple[list[RegexSplit], bool]:
        return [_regex_split(self.regex, self.behavior, self.invert)], False


class Split(PatternSplit):
    """HF ``Split``: a string or (Oniguruma) regex pattern, a behavior, and ``invert``."""

    def __init__(self, pattern: str, behavior: str, *, invert: bool = False, is_regex: bool = True):
        self.pattern = pattern
        self.is_regex = is_regex
        super().__init__(compile_hf_regex(pattern) if is_regex else string_pattern(pattern), behavior, invert)

    def to_hf(self) -> dict:
        return {
            "type": "Split",
            "pattern": {"Regex" if self.is_regex else "String": self.pattern},
            "behavior": _behavior_to_hf(self.behavior),
            "invert": self.invert,
        }


# GPT-2's pre-tokenization regex as HF's ByteLevel writes it (not tiktoken's r50k string: its last branch is \s+).
GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"


class ByteLevel(PreTokenizerStep):
    """HF ``ByteLevel``: optionally prefix a space, optionally split with GPT-2's regex, then map to bytes."""

    maps_to_byte_chars = True

    def __init__(self, *, add_prefix_space: bool = True, use_regex: bool = True, trim_offsets: bool = True):
        self.add_prefix_space = add_prefix_space
        self.use_regex = use_regex
        self.trim_offsets = trim_offsets  # offsets only; kept to write the file back
        self._gpt2_split = PatternSplit(compile_hf_regex(GPT2_PATTERN), "isolated")

    def split(self, piece: str) -> list[str]:
        if self.add_prefix_space and piece and not piece.startswith(" "):
            piece = " " + piece
        pieces = self._gpt2_split.split(piece) if self.use_regex else [piece]
        return [to_byte_chars(piece.encode("utf-8")) for piece in pieces]

    def split_aligned(self, piece: AlignedText) -> list[AlignedText]:
        if self.add_prefix_space and not piece.text.startswith(" "):
            piece = piece.prepended(" ")
        pieces = self._gpt2_split.split_aligned(piece) if self.use_regex else [piece]
        return [as_byte_chars(piece) for piece in pieces]

    def regex_splits(self) -> tuple[list[RegexSplit], bool]:
        splits, _ = self._gpt2_split.regex_splits() if self.use_regex else ([], False)
        return splits, self.add_prefix_space

    def to_hf(self) -> dict:
        return {
            "type": "ByteLevel",
            "add_prefix_space": self.add_prefix_space,
            "trim_offsets": self.trim_offsets,
            "use_regex": self.use_regex,
        }


class Digits(PatternSplit):
    """HF ``Digits``: numeric characters (Rust's ``char::is_numeric``: Nd, Nl, No) each alone or in runs."""

    def __init__(self, individual_digits: bool = False):
        self.individual_digits = individual_digits
        super().__init__(regex.compile(pin_unicode_classes(r"\p{N}")), "isolated" if individual_digits else "contiguous")

    def to_hf(self) -> dict:
        return {"type": "Digits", "individual_digits": self.individual_digits}


# Rust's char::is_ascii_punctuation (which includes ASCII symbols) or punctuation by HF's Unicode 9.0 tables:
# not the punctuation Unicode 16 (the version classes are pinned to) added since, but two characters that were
# punctuation then.
_PUNCTUATION = regex.compile(pin_unicode_classes(
    r"(?![\u061D\u09FD\u0A76\u0C77\u0C84\u1B4E\u1B4F\u1B7D-\u1B7F\u2E43-\u2E4F\u2E52-\u2E5D\U00010D6E\U00010EAD"
    r"\U00010F55-\U00010F59\U000113D4\U000113D5\U000113D7\U000113D8\U00011B00-\U00011B09\U00011BE1"
    r"\U00011F43-\U00011F4F\U00016D6D-\U00016D6F\U0001E5FF"
    r"\U00010F86-\U00010F89\U0001144B-\U0001144F\U0001145A\U0001145B\U0001145D\U00011660-\U0001166C\U000116B9"
    r"\U0001183B\U00011944-\U00011946\U000119E2\U00011A3F-\U00011A46\U00011A9A-\U00011A9C\U00011A9E-\U00011AA2"
    r"\U00011C41-\U00011C45\U00011C70\U00011C71\U00011EF7\U00011EF8\U00011FFF\U00012FF1\U00012FF2"
    r"\U00016E97-\U00016E9A\U00016FE2\U0001E95E\U0001E95F])[\p{P}!-/:-@\[-`{-~]|[\u166D\U000111C9]"
))


class Punctuation(PatternSplit):
    """HF ``Punctuation``: every punctuation character is a delimiter, with a behavior (default isolated)."""

    def __init__(self, behavior: str = "isolated"):
        super().__init__(_PUNCTUATION, behavior)

    def to_hf(self) -> dict:
        return {"type": "Punctuation", "behavior": _behavior_to_hf(self.behavior)}


class Whitespace(PatternSplit):
    """HF ``Whitespace``: keep runs of word characters and runs of other non-spaces (Rust regex's \\w)."""

    def __init__(self):
        super().__init__(regex.compile(pin_unicode_classes(r"\w+|[^\w\s]+")), "removed", invert=True)

    def to_hf(self) -> dict:
        return {"type": "Whitespace"}


_WHITE_SPACE = regex.compile(pin_unicode_classes(r"\p{White_Space}"))  # Rust's char::is_whitespace


class WhitespaceSplit(PatternSplit):
    """HF ``WhitespaceSplit``: split on white space, dropping it."""

    def __init__(self):
        super().__init__(_WHITE_SPACE, "removed")

    def to_hf(self) -> dict:
        return {"type": "WhitespaceSplit"}


class CharDelimiterSplit(PatternSplit):
    """HF ``CharDelimiterSplit``: split on one character, dropping it."""

    def __init__(self, delimiter: str):
        if len(delimiter) != 1:
            raise UnsupportedComponentError(f"CharDelimiterSplit delimiter {delimiter!r} is not one character")
        self.delimiter = delimiter
        super().__init__(string_pattern(delimiter), "removed")

    def to_hf(self) -> dict:
        return {"type": "CharDelimiterSplit", "delimiter": self.delimiter}


class BertPreTokenizer(PreTokenizerStep):
    """HF ``BertPreTokenizer``: split on white space (dropped), then isolate every punctuation character."""

    def __init__(self):
        self._steps = PreTokenizerSequence([WhitespaceSplit(), Punctuation()])

    def split(self, piece: str) -> list[str]:
        return self._steps([piece])

    def split_aligned(self, piece: AlignedText) -> list[AlignedText]:
        return self._steps.aligned([piece])

    def regex_splits(self) -> tuple[list[RegexSplit], bool]:
        return self._steps.regex_splits()

    def to_hf(self) -> dict:
        return {"type": "BertPreTokenizer"}


class FixedLength(PreTokenizerStep):
    """HF ``FixedLength``: chunks of ``length`` characters."""

    def __init__(self, length: int = 5):
        if length <= 0:
            raise UnsupportedComponentError(f"FixedLength length must be positive, got {length}")
        self.length = length

    def split(self, piece: str) -> list[str]:
        return [piece[start : start + self.length] for start in range(0, len(piece), self.length)]

    def split_aligned(self, piece: AlignedText) -> list[AlignedText]:
        return [piece[start : start + self.length] for start in range(0, len(piece), self.length)]

    def to_hf(self) -> dict:
        return {"type": "FixedLength", "length": self.length}


class Metaspace(PreTokenizerStep):
    """HF ``Metaspace`` (SentencePiece's spaces): spaces become ``replacement`` (▁), one is put first where the
    piece does not start with it (``prepend_scheme`` "always"; "first": only where the piece starts the input,
    which is the text this step sees, except after an added token: ``after_token``), then the piece is split
    before each one."""

    def __init__(self, replacement: str = "\u2581", prepend_scheme: str = "always", split: bool = True):
        if prepend_scheme not in ("always", "first", "never"):
            raise UnsupportedComponentError(f"Metaspace prepend_scheme {prepend_scheme!r} (always, first, never)")
        if len(replacement) != 1:
            raise UnsupportedComponentError(f"Metaspace replacement {replacement!r} is not one character")
        self.replacement, self.prepend_scheme, self.split_pieces = replacement, prepend_scheme, split

    def split(self, piece: str) -> list[str]:
        return metaspace_split(piece, self.replacement, self.prepend_scheme != "never", self.split_pieces)

    def split_aligned(self, piece: AlignedText) -> list[AlignedText]:
        piece = AlignedText(piece.text.replace(" ", self.replacement), piece.spans)  # one character for one
        if self.prepend_scheme != "never" and not piece.text.startswith(self.replacement):
            piece = piece.prepended(self.replacement)
        if not self.split_pieces:
            return [piece]
        starts = [0] + [i for i, char in enumerate(piece.text) if char == self.replacement and i]
        return [piece[start:end] for start, end in zip(starts, [*starts[1:], len(piece)])]

    def regex_splits(self) -> tuple[list[RegexSplit | MetaspaceSplit], bool]:
        """The rewrite and split of ``split`` on each piece ("first" puts the ▁ on every piece it sees: the text,
        as it is the first step; text after an added token has the ``after_token`` form)."""
        return [MetaspaceSplit(self.replacement, self.prepend_scheme != "never", self.split_pieces)], False

    def to_hf(self) -> dict:
        return {"type": "Metaspace", "replacement": self.replacement, "prepend_scheme": self.prepend_scheme,
                "split": self.split_pieces}

    def after_token(self) -> "Metaspace":
        return Metaspace(self.replacement, "never", self.split_pieces) if self.prepend_scheme == "first" else self


def _metaspace_from_hf(spec: dict) -> Metaspace:
    scheme = spec.get("prepend_scheme")
    if scheme is None:  # files written before prepend_scheme
        scheme = "always" if spec.get("add_prefix_space", True) else "never"
    return Metaspace(spec.get("replacement", "\u2581"), scheme, spec.get("split", True))


class PreTokenizerSequence(PreTokenizerStep):
    """HF ``Sequence``: the steps one after the other, each on all the pieces of the one before."""

    def __init__(self, steps: list[PreTokenizerStep]):
        self.steps = list(steps)
        if any(step.after_token() is not step for step in self.steps[1:]):
            raise UnsupportedComponentError("Metaspace prepend_scheme 'first' after another pre-tokenizer (HF puts "
                                            "the ▁ only on a piece that starts the input, which Crayon does not track)")
        byte_level_steps = sum(step.maps_to_byte_chars for step in self.steps)
        if byte_level_steps > 1:
            raise UnsupportedComponentError("ByteLevel is applied twice")
        self.maps_to_byte_chars = byte_level_steps == 1

    def __call__(self, pieces: Iterable[str]) -> list[str]:
        pieces = list(pieces)
        for step in self.steps:
            pieces = step(pieces)
        return pieces

    def split(self, piece: str) -> list[str]:
        return self([piece])

    def split_aligned(self, piece: AlignedText) -> list[AlignedText]:
        pieces = [piece]
        for step in self.steps:
            pieces = step.aligned(pieces)
        return pieces

    def after_token(self) -> "PreTokenizerSequence":
        first = self.steps[0].after_token() if self.steps else None
        return self if first is None or first is self.steps[0] else PreTokenizerSequence([first, *self.steps[1:]])

    def regex_splits(self) -> tuple[list[RegexSplit], bool]:
        splits, add_prefix_space = [], False
        for index, step in enumerate(self.steps):
            if any(before.maps_to_byte_chars for before in self.steps[:index]):
                raise UnsupportedComponentError(f"{type(step).__name__} after ByteLevel splits byte-level text")
            step_splits, prefix = step.regex_splits()
            if prefix and index:
                raise UnsupportedComponentError("ByteLevel add_prefix_space after another pre-tokenizer")
            splits += step_splits
            add_prefix_space = add_prefix_space or prefix
        return splits, add_prefix_space

    def to_hf(self) -> dict:
        return {"type": "Sequence", "pretokenizers": [step.to_hf() for step in self.steps]}


def pattern_from_hf(pattern: dict, component: str) -> tuple[str, bool]:
    """HF's ``{"Regex": r}`` or ``{"String": s}`` as ``(pattern, is_regex)``."""
    if isinstance(pattern, dict) and len(pattern) == 1:
        ((kind, value),) = pattern.items()
        if kind in ("Regex", "String"):
            return value, kind == "Regex"
    raise UnsupportedComponentError(f"{component} pattern {pattern!r} is not {{'Regex': ...}} or {{'String': ...}}")


def _split_from_hf(spec: dict) -> Split:
    pattern, is_regex = pattern_from_hf(spec["pattern"], "Split")
    return Split(pattern, spec["behavior"], invert=spec.get("invert", False), is_regex=is_regex)


_STEPS_BY_TYPE = {
    "ByteLevel": lambda spec: ByteLevel(
        add_prefix_space=spec.get("add_prefix_space", True),
        use_regex=spec.get("use_regex", True),
        trim_offsets=spec.get("trim_offsets", True),
    ),
    "Split": _split_from_hf,
    "Digits": lambda spec: Digits(spec.get("individual_digits", False)),
    "Punctuation": lambda spec: Punctuation(behavior_from_hf(spec.get("behavior", "Isolated"))),
    "Whitespace": lambda spec: Whitespace(),
    "WhitespaceSplit": lambda spec: WhitespaceSplit(),
    "CharDelimiterSplit": lambda spec: CharDelimiterSplit(spec["delimiter"]),
    "BertPreTokenizer": lambda spec: BertPreTokenizer(),
    "FixedLength": lambda spec: FixedLength(spec.get("length", 5)),
    "Metaspace": _metaspace_from_hf,
    "Sequence": lambda spec: PreTokenizerSequence([step_from_hf(step) for step in spec["pretokenizers"]]),
}


def step_from_hf(spec: dict) -> PreTokenizerStep:
    """Build one pre-tokenizer from its tokenizer.json object; unknown types raise naming the type."""
    kind = spec.get("type")
    if kind not in _STEPS_BY_TYPE:
        raise UnsupportedComponentError(f"pre-tokenizer {kind!r} is not supported")
    return _STEPS_BY_TYPE[kind](spec)


# ----------------------------------------------------------------------------------------------------------


class HFPreTokenizer:
    """The pre-tokenizer a Crayon Tokenizer calls: run the steps, return each span as original text.

    ``input_is_byte_chars`` is set when a ByteLevel normalizer already mapped the text to bytes. A step that
    splits byte-level text inside a character's UTF-8 bytes gives a span Crayon cannot hold as text: that
    raises ``UnsupportedComponentError`` when it happens.
    """

    def __init__(self, step: PreTokenizerStep | None, *, input_is_byte_chars: bool = False):
        if input_is_byte_chars and step is not None and step.maps_to_byte_chars:
            raise UnsupportedComponentError("ByteLevel is applied twice (normalizer and pre-tokenizer)")
        self.step = step
        self.output_is_byte_chars = input_is_byte_chars or (step is not None and step.maps_to_byte_chars)
        continuing = None if step is None else step.after_token()
        # the pre-tokenizer of text after an added token, where it differs (Metaspace "first"), else None
        self.after_token = None if continuing is step else HFPreTokenizer(
            continuing, input_is_byte_chars=input_is_byte_chars)

    def __call__(self, text: str) -> list[str]:
        pieces = [text] if self.step is None else self.step([text])
        if not self.output_is_byte_chars:
            return [piece for piece in pieces if piece]
        spans = []
        for piece in pieces:
            try:
                spans.append(from_byte_chars(piece).decode("utf-8"))
            except ValueError:  # a character's UTF-8 bytes were split, or a step wrote a non-byte character
                raise UnsupportedComponentError(
                    f"span {piece!r} after ByteLevel is not the byte-level form of text; Crayon's spans are text"
                ) from None
        return [span for span in spans if span]

    def aligned_spans(self, text: AlignedText) -> list[AlignedText]:
        """``__call__`` of an aligned text, its spans as the model reads them: byte-level ones (a character per
        byte) where the output is byte-level."""
        pieces = [text] if self.step is None else self.step.aligned([text])
        if self.output_is_byte_chars and not is_byte_chars("".join(piece.text for piece in pieces)):
            raise UnsupportedComponentError("a step wrote a character that stands for no byte after ByteLevel")
        return [piece for piece in pieces if len(piece)]

    def regex_splits(self) -> tuple[list[RegexSplit], bool]:
        """The steps as regex splits on the text (see ``crayon.reference.regex_vm.RegexSplit``)."""
        if self.step is None:
            return [], False
        if self.output_is_byte_chars and not self.step.maps_to_byte_chars:
            raise UnsupportedComponentError("a ByteLevel normalizer: the pre-tokenizer splits byte-level text")
        return self.step.regex_splits()

    def to_hf(self) -> dict | None:
        return None if self.step is None else self.step.to_hf()

"""Any pre-tokenization regex compiled to tables, and a backtracking matcher over them, written to be read.

``compile_regex(pattern)`` parses the regex dialect tokenizers use (the ``regex`` module's, which tiktoken's
fancy-regex and HF's Oniguruma translated by ``compile_hf_regex`` share) and compiles it to a ``Program``:

- character classes: every character set of the pattern (``[^\\r\\n\\p{L}\\p{N}]``, ``\\s``, a literal, a
  ``(?i:...)`` letter) is a bit; code points on which all those sets agree form one class; a two-level table
  maps a code point to its class and ``class_bits[class]`` says which sets hold it. The Unicode data is the
  shipped ``crayon/data/unicode_categories.npz`` (Unicode 16, from ``tools/gen_unicode_categories.py``), not
  the installed ``regex`` module's, so spans do not change with the ``regex`` release.
- instructions of a backtracking machine with leftmost-first alternation (the first alternative that leads
  to a match wins, as in PCRE, ``regex`` and fancy-regex): ``CLASS``, ``RUN`` (a greedy or possessive
  repetition of one class, the common case, backtracked a character at a time), ``SPLIT`` (try one branch,
  keep the other for backtracking), ``JUMP``, atomic groups (possessive quantifiers are atomic groups),
  lookaheads, anchors and ``MATCH``.

``find_spans`` (here in Python, ``crayon.jit.regex_vm.find_spans`` the Numba twin over UTF-8 bytes) covers a
text with matches and the gaps between them, trying a match at each character like ``regex.finditer``.

Refused with ``UnsupportedComponentError`` naming the construct: lookbehind, backreferences, ``\\b``/``\\B``,
``\\G``, conditionals, ``\\p{..}`` properties other than general categories and White_Space, case-insensitive
``\\p{..}`` and wide ranges, flags other than ``i``, ``m``, ``s``, more than 64 distinct character sets, and
patterns that can match the empty string (``regex``, fancy-regex and Oniguruma step over empty matches
differently, so no single answer would be right).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources

import numpy as np

from crayon.errors import CrayonError, UnsupportedComponentError

# ----------------------------------------------------------------------------------------------------------
# Unicode data

CATEGORIES = (
    "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po",
    "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn",
)
CATEGORY_MASK = 31
SPACE_BIT = 1 << 5  # \s
WORD_BIT = 1 << 6  # \w
BLOCK_SHIFT = 7
BLOCK_SIZE = 1 << BLOCK_SHIFT
CODE_POINTS = 0x110000
TABLE_FILE = "unicode_categories.npz"

_LONG_CATEGORY_NAMES = {
    "Letter": "L", "Cased_Letter": "LC", "Uppercase_Letter": "Lu", "Lowercase_Letter": "Ll",
    "Titlecase_Letter": "Lt", "Modifier_Letter": "Lm", "Other_Letter": "Lo", "Mark": "M", "Combining_Mark": "M",
    "Nonspacing_Mark": "Mn", "Spacing_Mark": "Mc", "Enclosing_Mark": "Me", "Number": "N", "Decimal_Number": "Nd",
    "Letter_Number": "Nl", "Other_Number": "No", "Punctuation": "P", "Connector_Punctuation": "Pc",
    "Dash_Punctuation": "Pd", "Open_Punctuation": "Ps", "Close_Punctuation": "Pe", "Initial_Punctuation": "Pi",
    "Final_Punctuation": "Pf", "Other_Punctuation": "Po", "Symbol": "S", "Math_Symbol": "Sm",
    "Currency_Symbol": "Sc", "Modifier_Symbol": "Sk", "Other_Symbol": "So", "Separator": "Z",
    "Space_Separator": "Zs", "Line_Separator": "Zl", "Paragraph_Separator": "Zp", "Other": "C", "Control": "Cc",
    "Format": "Cf", "Surrogate": "Cs", "Private_Use": "Co", "Unassigned": "Cn",
}


@functools.cache
def unicode_signatures() -> np.ndarray:
    """The signature byte (general category index | SPACE_BIT | WORD_BIT) of every code point."""
    path = resources.files("crayon").joinpath("data", TABLE_FILE)
    try:
        with path.open("rb") as file, np.load(file) as arrays:
            block_index = arrays["block_index"].astype(np.int64)
            block_signatures = arrays["block_signatures"].astype(np.uint8)
    except (OSError, KeyError, ValueError) as error:
        raise CrayonError(f"cannot read the regex tables {path}: {error}") from error
    if block_index.shape != (CODE_POINTS >> BLOCK_SHIFT,) or block_signatures.size % BLOCK_SIZE:
        raise CrayonError(f"the regex tables {path} are corrupt; regenerate with tools/gen_unicode_categories.py")
    return block_signatures.reshape(-1, BLOCK_SIZE)[block_index].reshape(-1)


@functools.cache
def case_fold_groups() -> dict[int, tuple[int, ...]]:
    """For each cased code point, the code points ``(?i)`` matches it with (itself first)."""
    path = resources.files("crayon").joinpath("data", TABLE_FILE)
    with path.open("rb") as file, np.load(file) as arrays:
        code_points, partners = arrays["fold_code_points"].tolist(), arrays["fold_partners"].tolist()
    groups: dict[int, tuple[int, ...]] = {}
    for code_point, partner in zip(code_points, partners):
        groups[code_point] = groups.get(code_point, (code_point,)) + (partner,)
    return groups


def _category_signatures(name: str) -> np.ndarray:
    """Which of the 128 signatures a general category (or group such as ``L``, ``LC``) holds."""
    name = _LONG_CATEGORY_NAMES.get(name, name)
    if name == "LC" or name == "L&":
        wanted = {"Lu", "Ll", "Lt"}
    elif len(name) == 1:
        wanted = {category for category in CATEGORIES if category[0] == name}
    else:
        wanted = {name}
    if not wanted or not wanted <= set(CATEGORIES):
        raise UnsupportedComponentError(f"regex property \\p{{{name}}}: only general categories and White_Space")
    signature = np.arange(128)
    return np.isin(signature & CATEGORY_MASK, [CATEGORIES.index(category) for category in wanted])


# ----------------------------------------------------------------------------------------------------------
# Syntax tree


@dataclass(frozen=True)
class CharSet:
    """A set of characters: ``negated`` XOR (in ``ranges`` or the code point's signature in ``signatures``)."""

    ranges: tuple[tuple[int, int], ...] = ()
    signatures: tuple[int, ...] = ()  # the signatures (0..127) it holds
    negated: bool = False

    def members(self) -> np.ndarray:
        """A bool array over every code point."""
        inside = np.zeros(128, bool)
        inside[list(self.signatures)] = True
        member = inside[unicode_signatures() & 127]
        for low, high in self.ranges:
            member[low : high + 1] = True
        return ~member if self.negated else member


@dataclass(frozen=True)
class Seq:
    items: tuple


@dataclass(frozen=True)
class Alt:
    options: tuple


@dataclass(frozen=True)
class Repeat:
    item: object
    low: int
    high: int | None  # None: unbounded
    mode: str  # "greedy", "lazy" or "possessive"


@dataclass(frozen=True)
class Atomic:
    item: object


@dataclass(frozen=True)
class Look:
    item: object
    negated: bool


@dataclass(frozen=True)
class Anchor:
    kind: str  # "text_start", "text_end", "end_or_final_newline", "line_start", "line_end"


_ESCAPED_CHARS = {"n": "\n", "r": "\r", "t": "\t", "f": "\f", "v": "\v", "a": "\a", "e": "\x1b", "0": "\0"}
_HEX_LENGTHS = {"x": 2, "u": 4, "U": 8}
_CLASS_ESCAPES = {"d": ("Nd", False), "D": ("Nd", True), "s": ("space", False), "S": ("space", True),
                  "w": ("word", False), "W": ("word", True)}
_REFUSED_ESCAPES = {"b": "\\b (word boundary)", "B": "\\B (not a word boundary)", "G": "\\G (search anchor)",
                    "K": "\\K (keep out)", "X": "\\X (grapheme)", "R": "\\R (line break)"}


def _named_signatures(name: str) -> np.ndarray:
    if name == "space" or name in ("White_Space", "WSpace", "Space"):
        return (np.arange(128) & SPACE_BIT) != 0
    if name == "word":
        return (np.arange(128) & WORD_BIT) != 0
    return _category_signatures(name)


class _Parser:
    """Recursive descent over the pattern; ``self.pos`` indexes ``self.pattern``."""

    def __init__(self, pattern: str, ignore_case: bool, multiline: bool, dotall: bool):
        self.pattern = pattern
        self.pos = 0
        self.flags = {"i": ignore_case, "m": multiline, "s": dotall}

    def error(self, what: str) -> UnsupportedComponentError:
        return UnsupportedComponentError(f"regex {self.pattern!r}: {what} (at offset {self.pos}) is not supported "
                                         "by the compiled pre-tokenizer")

    def peek(self, text: str) -> bool:
        return self.pattern.startswith(text, self.pos)

    def parse(self):
        node = self.alternation()
        if self.pos != len(self.pattern):
            raise self.error("an unbalanced ')'")
        return node

    def alternation(self):
        options = [self.sequence()]
        while self.peek("|"):
            self.pos += 1
            options.append(self.sequence())
        return options[0] if len(options) == 1 else Alt(tuple(options))

    def sequence(self):
        items = []
        while self.pos < len(self.pattern) and not self.peek("|") and not self.peek(")"):
            atom = self.atom()
            if atom is not None:
                items.append(self.quantified(atom))
        return items[0] if len(items) == 1 else Seq(tuple(items))

    def quantified(self, atom):
        while True:
            start = self.pos
            if self.peek("*"):
                low, high = 0, None
                self.pos += 1
            elif self.peek("+"):
                low, high = 1, None
                self.pos += 1
            elif self.peek("?"):
                low, high = 0, 1
                self.pos += 1
            elif self.peek("{") and (bounds := self.interval()) is not None:
                low, high = bounds
            else:
                return atom
            if isinstance(atom, (Anchor, Look)):
                self.pos = start
                raise self.error("a quantified assertion")
            mode = "greedy"
            if self.peek("?"):
                mode, self.pos = "lazy", self.pos + 1
            elif self.peek("+"):
                mode, self.pos = "possessive", self.pos + 1
            atom = Repeat(atom, low, high, mode)

    def interval(self):
        end = self.pattern.find("}", self.pos)
        body = self.pattern[self.pos + 1 : end] if end > 0 else ""
        low, comma, high = body.partition(",")
        if not (low.isdigit() or (comma and not low)) or not (high.isdigit() or not high) or not (low or high):
            return None  # a literal "{", as in the regex module
        self.pos = end + 1
        bounds = (int(low or 0), int(high) if high else (None if comma else int(low)))
        if bounds[1] is not None and bounds[1] < bounds[0]:
            raise self.error(f"the interval {{{body}}}")
        return bounds

    def atom(self):
        char = self.pattern[self.pos]
        if char == "(":
            return self.group()
        if char == "[":
            return self.char_class()
        if char == "\\":
            return self.escape(in_class=False)
        self.pos += 1
        if char == ".":
            return CharSet(ranges=(), signatures=(), negated=True) if self.flags["s"] else CharSet(((10, 10),),
                                                                                                    negated=True)
        if char == "^":
            return Anchor("line_start" if self.flags["m"] else "text_start")
        if char == "$":
            return Anchor("line_end" if self.flags["m"] else "end_or_final_newline")
        if char in "*+?":
            self.pos -= 1
            raise self.error(f"a quantifier {char!r} with nothing to repeat")
        return self.literal(ord(char))

    def literal(self, code_point: int) -> CharSet:
        if self.flags["i"]:
            group = case_fold_groups().get(code_point, (code_point,))
            return CharSet(tuple((member, member) for member in sorted(group)))
        return CharSet(((code_point, code_point),))

    def group(self):
        start = self.pos
        self.pos += 1
        saved_flags = dict(self.flags)
        kind = "group"
        if self.peek("?"):
            self.pos += 1
            if self.peek(":"):
                self.pos += 1
            elif self.peek(">"):
                kind, self.pos = "atomic", self.pos + 1
            elif self.peek("="):
                kind, self.pos = "lookahead", self.pos + 1
            elif self.peek("!"):
                kind, self.pos = "negative lookahead", self.pos + 1
            elif self.peek("<=") or self.peek("<!"):
                self.pos = start
                raise self.error("lookbehind")
            elif self.peek("P<") or (self.peek("<") and not self.peek("<=")):
                close = self.pattern.find(">", self.pos)
                if close < 0:
                    raise self.error("an unterminated group name")
                self.pos = close + 1
            else:
                flags_end = self.pos
                while flags_end < len(self.pattern) and self.pattern[flags_end] not in ":)":
                    flags_end += 1
                on, _, off = self.pattern[self.pos : flags_end].partition("-")
                if flags_end == len(self.pattern) or not set(on + off) <= set("ims"):
                    self.pos = start
                    raise self.error(f"the group or flags {self.pattern[start : flags_end + 1]!r}")
                for flag in on:
                    self.flags[flag] = True
                for flag in off:
                    self.flags[flag] = False
                self.pos = flags_end + 1
                if self.pattern[flags_end] == ")":  # (?i) applies to the rest of the enclosing group
                    return None
        inner = self.alternation()
        if not self.peek(")"):
            raise self.error("an unterminated group")
        self.pos += 1
        self.flags = saved_flags
        if kind == "atomic":
            return Atomic(inner)
        if kind in ("lookahead", "negative lookahead"):
            return Look(inner, negated=kind == "negative lookahead")
        return inner

    def escape(self, in_class: bool):
        """An escape: a CharSet, an Anchor, or (inside a class) a CharSet whose ranges or signatures to add."""
        letter = self.pattern[self.pos + 1 : self.pos + 2]
        if not letter:
            raise self.error("a trailing backslash")
        self.pos += 2
        if letter in "pP":
            if self.peek("{"):
                end = self.pattern.find("}", self.pos)
                name, self.pos = self.pattern[self.pos + 1 : end], end + 1
            else:
                name, self.pos = self.pattern[self.pos], self.pos + 1
            negated = letter == "P"
            if name.startswith("^"):
                name, negated = name[1:], not negated
            name = name.split("=", 1)[-1] if name.startswith(("gc=", "General_Category=")) else name
            if self.flags["i"]:
                raise self.error(f"case-insensitive \\{letter}{{{name}}}")
            return self.signature_set(_named_signatures(name), negated)
        if letter in _CLASS_ESCAPES:
            name, negated = _CLASS_ESCAPES[letter]
            return self.signature_set(_named_signatures(name), negated)
        if letter in _HEX_LENGTHS or letter == "N":
            return self.literal(self.code_point_escape(letter))
        if letter in _ESCAPED_CHARS and not (letter == "0" and self.pattern[self.pos : self.pos + 1].isdigit()):
            return self.literal(ord(_ESCAPED_CHARS[letter]))
        if not in_class and letter in "AZz":
            return Anchor("text_start" if letter == "A" else "text_end")
        if letter in _REFUSED_ESCAPES or letter.isdigit() or letter in "gk":
            self.pos -= 2
            raise self.error(_REFUSED_ESCAPES.get(letter, f"the escape \\{letter} (a backreference)"))
        if letter.isalnum():
            self.pos -= 2
            raise self.error(f"the escape \\{letter}")
        return self.literal(ord(letter))

    def code_point_escape(self, letter: str) -> int:
        if letter == "N":
            import unicodedata

            end = self.pattern.find("}", self.pos)
            name, self.pos = self.pattern[self.pos + 1 : end], end + 1
            return ord(unicodedata.lookup(name))
        digits = self.pattern[self.pos : self.pos + _HEX_LENGTHS[letter]]
        self.pos += len(digits)
        try:
            return int(digits, 16)
        except ValueError:
            raise self.error(f"the escape \\{letter}{digits}") from None

    @staticmethod
    def signature_set(signatures: np.ndarray, negated: bool) -> CharSet:
        return CharSet((), tuple(int(s) for s in np.flatnonzero(signatures)), negated)

    def char_class(self) -> CharSet:
        start = self.pos
        self.pos += 1
        negated = self.peek("^")
        self.pos += negated
        ranges: list[tuple[int, int]] = []
        inside = np.zeros(128, bool)  # signatures of the \p{..}, \s, \d, \w escapes in the class
        first = True
        while True:
            if self.pos >= len(self.pattern):
                self.pos = start
                raise self.error("an unterminated character class")
            if self.peek("]") and not first:
                self.pos += 1
                break
            first = False
            if self.peek("[:") and ":]" in self.pattern[self.pos :]:
                raise self.error("a POSIX class [:...:]")
            item = self.class_item()
            if isinstance(item, CharSet):
                member = np.zeros(128, bool)
                member[list(item.signatures)] = True
                inside |= ~member if item.negated else member
                continue
            low = high = item
            if self.peek("-") and not self.peek("-]") and self.pos + 1 < len(self.pattern):
                self.pos += 1
                high = self.class_item()
                if isinstance(high, CharSet):
                    raise self.error("a range ending in a class escape")
                if high < low:
                    raise self.error(f"the reversed range {chr(low)!r}-{chr(high)!r}")
            ranges.append((low, high))
        if self.flags["i"]:
            ranges = self.case_folded(ranges)
        return CharSet(tuple(ranges), tuple(int(s) for s in np.flatnonzero(inside)), negated)

    def class_item(self) -> int | CharSet:
        """One member of a character class: a code point, or the CharSet of a class escape."""
        char = self.pattern[self.pos]
        if char != "\\":
            self.pos += 1
            return ord(char)
        letter = self.pattern[self.pos + 1 : self.pos + 2]
        if letter in ("p", "P", *_CLASS_ESCAPES):
            return self.escape(in_class=True)
        self.pos += 2
        if letter in _HEX_LENGTHS or letter == "N":
            return self.code_point_escape(letter)
        if letter == "b":
            return 8  # backspace inside a class
        if letter in _ESCAPED_CHARS:
            return ord(_ESCAPED_CHARS[letter])
        if letter.isalnum() or not letter:
            self.pos -= 2
            raise self.error(f"the escape \\{letter} inside a class")
        return ord(letter)

    def case_folded(self, ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
        if sum(high - low + 1 for low, high in ranges) > 5000:
            raise self.error("a wide case-insensitive range")
        groups = case_fold_groups()
        folded = {member for low, high in ranges for cp in range(low, high + 1) for member in groups.get(cp, ())}
        return ranges + [(member, member) for member in sorted(folded)]


def parse(pattern: str, *, ignore_case: bool = False, multiline: bool = False, dotall: bool = False):
    """The syntax tree of a pattern (``CharSet``, ``Seq``, ``Alt``, ``Repeat``, ``Atomic``, ``Look``, ``Anchor``)."""
    return _Parser(pattern, ignore_case, multiline, dotall).parse()


# ----------------------------------------------------------------------------------------------------------
# What a pre-tokenizer compiles to

SPLIT_BEHAVIORS = ("removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous")


@dataclass(frozen=True)
class RegexSplit:
    """One split of the pieces of a text by a regex (``regex``-module syntax; ``multiline`` as HF's Oniguruma):
    the matches and the gaps between them are slices; ``invert`` swaps the two; ``behavior`` (one of
    ``SPLIT_BEHAVIORS``, HF's) says what becomes of them.

    A pre-tokenizer that can run compiled has ``regex_splits()``, returning ``(splits, add_prefix_space)``: the
    splits, each on the pieces the one before kept, after a space is put before text that does not start with
    one if ``add_prefix_space``; it raises ``UnsupportedComponentError`` naming what has no such form."""

    pattern: str
    multiline: bool = False
    behavior: str = "isolated"
    invert: bool = False


@dataclass(frozen=True)
class MetaspaceSplit:
    """HF's Metaspace among the splits of ``regex_splits()``: each kept piece rewritten and split by
    ``crayon.reference.pretokenize.metaspace_split(piece, replacement, prepend, split)``. It changes the text
    (a space becomes ``replacement``), so only a consumer that takes rewritten text accepts it."""

    replacement: str
    prepend: bool
    split: bool


# ----------------------------------------------------------------------------------------------------------
# Compilation

CLASS, RUN, RUN_POSSESSIVE, SPLIT, JUMP, ATOMIC, CUT, LOOK, LOOK_END, ASSERT, MATCH = range(11)
OP_NAMES = ("CLASS", "RUN", "RUN_POSSESSIVE", "SPLIT", "JUMP", "ATOMIC", "CUT", "LOOK", "LOOK_END", "ASSERT", "MATCH")
ANCHORS = ("text_start", "text_end", "end_or_final_newline", "line_start", "line_end")
UNBOUNDED = -1
MAX_SETS = 64  # one bit of class_bits each
ANY_START = (1 << 64) - 1  # the guard of a branch that may begin with any character, or none
MAX_INSTRUCTIONS = 1 << 16
INVALID_BYTE_CODE_POINT = 0xDC80  # an invalid UTF-8 byte is matched as the lone surrogate "surrogateescape" gives it


@dataclass(frozen=True, eq=False)
class Program:
    """A compiled pattern: the character tables and the instructions (rows of ``(op, a, b, c)``).

    ``block_index`` and ``block_classes`` map a code point to its class, ``class_bits[class]`` holds bit k when
    the class is in the pattern's k-th character set, ``can_start[class]`` says whether a match can begin with
    a character of the class, and ``invalid_class`` is the class of an invalid UTF-8 byte. ``guards[pc]`` of a
    SPLIT are the sets one of which the first character of its first and second branch must be in (ANY_START:
    no condition), so that branches that cannot match are neither tried nor kept.
    """

    pattern: str
    block_index: np.ndarray  # uint16
    block_classes: np.ndarray  # uint8
    class_bits: np.ndarray  # uint64
    can_start: np.ndarray  # uint8, one per class
    instructions: np.ndarray  # int32, shape (n, 4)
    guards: np.ndarray  # uint64, shape (n, 2)
    invalid_class: int

    def class_of(self, code_point: int) -> int:
        block = int(self.block_index[code_point >> BLOCK_SHIFT])
        return int(self.block_classes[(block << BLOCK_SHIFT) | (code_point & (BLOCK_SIZE - 1))])

    def listing(self) -> str:
        """The instructions, one a line (to read a compiled pattern)."""
        return "\n".join(f"{pc:4} {OP_NAMES[row[0]]} {row[1]} {row[2]} {row[3]}"
                         for pc, row in enumerate(self.instructions.tolist()))


def min_length(node) -> int:
    """The fewest characters ``node`` can match."""
    if isinstance(node, CharSet):
        return 1
    if isinstance(node, Seq):
        return sum(map(min_length, node.items))
    if isinstance(node, Alt):
        return min(map(min_length, node.options))
    if isinstance(node, Repeat):
        return node.low * min_length(node.item)
    if isinstance(node, Atomic):
        return min_length(node.item)
    return 0  # Look, Anchor, None (an empty group)


class _CodeGenerator:
    def __init__(self, pattern: str):
        self.pattern = pattern
        self.sets: dict[CharSet, int] = {}
        self.code: list[list[int]] = []
        self.guards: dict[int, tuple[int, int]] = {}  # SPLIT pc -> the first-character guards of its branches

    def error(self, what: str) -> UnsupportedComponentError:
        return UnsupportedComponentError(f"regex {self.pattern!r}: {what} is not supported by the compiled "
                                         "pre-tokenizer")

    def set_bit(self, char_set: CharSet) -> int:
        if char_set not in self.sets:
            if len(self.sets) == MAX_SETS:
                raise self.error(f"more than {MAX_SETS} distinct character sets")
            self.sets[char_set] = len(self.sets)
        return self.sets[char_set]

    def emit(self, op: int, a: int = 0, b: int = 0, c: int = 0) -> int:
        if len(self.code) >= MAX_INSTRUCTIONS:
            raise self.error(f"a program of more than {MAX_INSTRUCTIONS} instructions (a large counted repetition)")
        self.code.append([op, a, b, c])
        return len(self.code) - 1

    def generate(self, node) -> None:
        if node is None:
            return
        if isinstance(node, CharSet):
            self.emit(CLASS, self.set_bit(node))
        elif isinstance(node, Seq):
            for item in node.items:
                self.generate(item)
        elif isinstance(node, Alt):
            jumps, splits = [], []
            for option in node.options[:-1]:
                split = self.emit(SPLIT)
                splits.append(split)
                self.code[split][1] = len(self.code)
                self.generate(option)
                jumps.append(self.emit(JUMP))
                self.code[split][2] = len(self.code)
            self.generate(node.options[-1])
            for jump in jumps:
                self.code[jump][1] = len(self.code)
            for index, split in enumerate(splits):
                self.guards[split] = (self.guard(node.options[index]), self.guard(Alt(node.options[index + 1 :])))
        elif isinstance(node, Repeat):
            self.repeat(node)
        elif isinstance(node, Atomic):
            self.emit(ATOMIC)
            self.generate(node.item)
            self.emit(CUT)
        elif isinstance(node, Look):
            look = self.emit(LOOK, int(node.negated))
            self.generate(node.item)
            self.emit(LOOK_END, int(node.negated))
            self.code[look][2] = len(self.code)
        elif isinstance(node, Anchor):
            self.emit(ASSERT, ANCHORS.index(node.kind))
        else:
            raise TypeError(f"not a syntax tree node: {node!r}")

    def repeat(self, node: Repeat) -> None:
        item, low, high = node.item, node.low, node.high
        if high is None and min_length(item) == 0:
            raise self.error("an unbounded repetition of something that can match the empty string")
        if isinstance(item, CharSet) and node.mode != "lazy":
            self.emit(RUN if node.mode == "greedy" else RUN_POSSESSIVE, self.set_bit(item), low,
                      UNBOUNDED if high is None else high)
            return
        if node.mode == "possessive":
            self.generate(Atomic(Repeat(item, low, high, "greedy")))
            return
        for _ in range(low):
            self.generate(item)
        lazy = node.mode == "lazy"
        if high is None:
            split = self.emit(SPLIT)
            self.generate(item)
            self.emit(JUMP, split)
            splits = [split]
        else:
            splits = []
            for _ in range(high - low):  # item (item (item)?)?: every skip leaves the whole tail
                splits.append(self.emit(SPLIT))
                self.generate(item)
        guard = self.guard(item)
        for split in splits:
            self.code[split][1:3] = [len(self.code), split + 1] if lazy else [split + 1, len(self.code)]
            self.guards[split] = (ANY_START, guard) if lazy else (guard, ANY_START)

    def guard(self, node) -> int:
        """The set bits one of which the first character of any match of ``node`` has, or ANY_START."""
        bits, nullable = self.first_sets(node)
        return ANY_START if nullable or bits == -1 else bits

    def first_sets(self, node) -> tuple[int, bool]:
        """(bits of the sets a match of ``node`` can begin with, whether it can match empty); all bits (-1)
        where a lookahead makes that unknowable."""
        if isinstance(node, CharSet):
            return 1 << self.sets[node], False
        if isinstance(node, Seq):
            bits = 0
            for item in node.items:
                item_bits, nullable = self.first_sets(item)
                bits |= item_bits
                if not nullable:
                    return bits, False
            return bits, True
        if isinstance(node, Alt):
            firsts = [self.first_sets(option) for option in node.options]
            bits = 0
            for option_bits, _ in firsts:
                bits |= option_bits
            return bits, any(nullable for _, nullable in firsts)
        if isinstance(node, Repeat):
            bits, nullable = self.first_sets(node.item)
            return bits, nullable or node.low == 0
        if isinstance(node, Atomic):
            return self.first_sets(node.item)
        if isinstance(node, Look):
            return -1, True
        return 0, True  # Anchor, empty group


def _two_level_table(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(block_index, block_values): each block of BLOCK_SIZE values stored once."""
    first_of_block: dict[bytes, int] = {}
    block_index = np.empty(values.size // BLOCK_SIZE, np.uint16)
    for block, row in enumerate(values.reshape(-1, BLOCK_SIZE)):
        block_index[block] = first_of_block.setdefault(row.tobytes(), len(first_of_block))
    block_values = np.frombuffer(b"".join(first_of_block), values.dtype)
    return block_index, block_values


def _classes_of(set_bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct values of ``set_bits``, sorted; the index of each code point's value), run by run."""
    starts = np.concatenate(([0], np.flatnonzero(set_bits[1:] != set_bits[:-1]) + 1))
    class_bits, run_classes = np.unique(set_bits[starts], return_inverse=True)
    return class_bits, np.repeat(run_classes, np.diff(np.append(starts, set_bits.size)))


def _set_of(members: np.ndarray) -> CharSet:
    """The CharSet of a bool array over every code point, as ranges."""
    edges = np.diff(members.astype(np.int8), prepend=np.int8(0), append=np.int8(0))
    starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1
    return CharSet(ranges=tuple(zip(starts.tolist(), stops.tolist())))


def single_characters(node):
    """The same syntax tree with what matches exactly one character made one CharSet: an alternation of sets is
    their union (each option takes the same one character, so which one matched changes nothing after it), and a
    lookahead at one set followed by a set is their difference (negative) or intersection. The patterns that
    ``pin_unicode_classes`` corrects, ``(?:[ASCII]|(?![WRONG])\\p{L})``, then cost one CLASS step a character."""
    if isinstance(node, Seq):
        items = [single_characters(item) for item in node.items]
        folded = []
        for item in items:
            previous = folded[-1] if folded else None
            if (isinstance(item, CharSet) and isinstance(previous, Look) and isinstance(previous.item, CharSet)):
                look = previous.item.members()
                folded[-1] = _set_of(item.members() & (~look if previous.negated else look))
            else:
                folded.append(item)
        return folded[0] if len(folded) == 1 else Seq(tuple(folded))
    if isinstance(node, Alt):
        options = tuple(single_characters(option) for option in node.options)
        if all(isinstance(option, CharSet) for option in options):
            return _set_of(np.logical_or.reduce([option.members() for option in options]))
        return Alt(options)
    if isinstance(node, Repeat):
        return Repeat(single_characters(node.item), node.low, node.high, node.mode)
    if isinstance(node, Atomic):
        return Atomic(single_characters(node.item))
    if isinstance(node, Look):
        return Look(single_characters(node.item), node.negated)
    return node


@functools.lru_cache(maxsize=64)
def compile_regex(pattern: str, *, multiline: bool = False) -> Program:
    """Compile a ``regex``-module pattern (``multiline``: ``^``/``$`` at every line, as HF's Oniguruma reads
    them) to a Program; ``UnsupportedComponentError`` names a construct it cannot compile."""
    tree = single_characters(parse(pattern, multiline=multiline))
    if min_length(tree) == 0:
        raise UnsupportedComponentError(
            f"regex {pattern!r} can match the empty string; regex, fancy-regex and Oniguruma step over empty "
            "matches differently, so the compiled pre-tokenizer refuses it")
    generator = _CodeGenerator(pattern)
    generator.generate(tree)
    generator.emit(MATCH)
    set_bits = np.zeros(CODE_POINTS, np.uint64)
    for char_set, bit in generator.sets.items():
        set_bits[char_set.members()] |= np.uint64(1 << bit)
    class_bits, classes = _classes_of(set_bits)
    if class_bits.size > 256:
        raise UnsupportedComponentError(f"regex {pattern!r}: more than 256 character classes")
    first_bits, _ = generator.first_sets(tree)
    if first_bits == -1:
        can_start = np.ones(class_bits.size, np.uint8)
    else:
        can_start = ((class_bits & np.uint64(first_bits)) != 0).astype(np.uint8)
    block_index, block_classes = _two_level_table(classes.astype(np.uint8))
    guards = np.full((len(generator.code), 2), ANY_START, np.uint64)
    for split, branch_guards in generator.guards.items():
        guards[split] = branch_guards
    return Program(
        pattern=pattern,
        block_index=block_index,
        block_classes=block_classes,
        class_bits=class_bits.astype(np.uint64),
        can_start=can_start,
        instructions=np.array(generator.code, np.int32).reshape(-1, 4),
        guards=guards,
        invalid_class=int(classes[INVALID_BYTE_CODE_POINT]),
    )


# ----------------------------------------------------------------------------------------------------------
# The matcher

# Kinds of backtracking entries: a branch to try, a run to shorten, and the barriers of atomic groups and lookaheads.
BRANCH, RUN_BACK, ATOMIC_BARRIER, LOOK_BARRIER, NEGATIVE_LOOK_BARRIER = range(5)


def _assertion_holds(kind: int, text: str, pos: int) -> bool:
    at_end = pos == len(text)
    if kind == 0:
        return pos == 0
    if kind == 1:
        return at_end
    if kind == 2:
        return at_end or (pos == len(text) - 1 and text[pos] == "\n")
    if kind == 3:
        return pos == 0 or text[pos - 1] == "\n"
    return at_end or text[pos] == "\n"


def match_at(program: Program, text: str, classes: list[int], pos: int) -> int:
    """The end of the match starting at character ``pos`` of ``text`` (whose characters have ``classes``), or -1."""
    code = program.instructions.tolist()
    guards = program.guards.tolist()
    class_bits = program.class_bits.tolist()
    stack: list[tuple[int, int, int, int]] = []
    pc = 0
    while True:
        op, a, b, c = code[pc]
        ok = True
        if op == CLASS:
            ok = pos < len(text) and class_bits[classes[pos]] >> a & 1
            pc, pos = pc + 1, pos + 1
        elif op in (RUN, RUN_POSSESSIVE):
            start = pos
            while pos < len(text) and (c == UNBOUNDED or pos - start < c) and class_bits[classes[pos]] >> a & 1:
                pos += 1
            ok = pos - start >= b
            if ok and op == RUN and pos - start > b:
                stack.append((RUN_BACK, pc + 1, pos, start + b))
            pc += 1
        elif op == SPLIT:
            bits = class_bits[classes[pos]] if pos < len(text) else 0
            first, second = (guard == ANY_START or bits & guard != 0 for guard in guards[pc])
            if first and second:
                stack.append((BRANCH, b, pos, 0))
            ok = first or second
            pc = a if first else b
        elif op == JUMP:
            pc = a
        elif op == ATOMIC:
            stack.append((ATOMIC_BARRIER, 0, pos, 0))
            pc += 1
        elif op == LOOK:
            stack.append((NEGATIVE_LOOK_BARRIER if a else LOOK_BARRIER, b, pos, 0))
            pc += 1
        elif op in (CUT, LOOK_END):
            while stack[-1][0] not in (ATOMIC_BARRIER, LOOK_BARRIER, NEGATIVE_LOOK_BARRIER):
                stack.pop()
            _, _, barrier_pos, _ = stack.pop()
            if op == LOOK_END:
                ok = not a  # a negative lookahead whose body matched fails
                pos = barrier_pos
            pc += 1
        elif op == ASSERT:
            ok = _assertion_holds(a, text, pos)
            pc += 1
        else:  # MATCH
            return pos
        while not ok:  # backtrack
            if not stack:
                return -1
            kind, pc, pos, extra = stack.pop()
            if kind == BRANCH:
                ok = True
            elif kind == RUN_BACK:
                pos -= 1
                if pos > extra:
                    stack.append((RUN_BACK, pc, pos, extra))
                ok = True
            elif kind == NEGATIVE_LOOK_BARRIER:  # its body failed: the lookahead holds
                ok = True


def find_spans(program: Program, text: str) -> list[tuple[int, int, bool]]:
    """Cover ``text`` with ``(start, end, is_match)`` character slices: the leftmost-first matches, tried at each
    character as ``regex.finditer`` does, and the gaps between them."""
    classes = [program.class_of(ord(char)) for char in text]
    can_start = program.can_start.tolist()
    slices = []
    gap_start = pos = 0
    while pos < len(text):
        end = match_at(program, text, classes, pos) if can_start[classes[pos]] else -1
        if end < 0:
            pos += 1
            continue
        if gap_start < pos:
            slices.append((gap_start, pos, False))
        slices.append((pos, end, True))
        gap_start = pos = end
    if gap_start < len(text):
        slices.append((gap_start, len(text), False))
    return slices


def findall(program: Program, text: str) -> list[str]:
    """``regex.findall`` of the compiled pattern (no capture groups): the matched pieces."""
    return [text[start:end] for start, end, is_match in find_spans(program, text) if is_match]

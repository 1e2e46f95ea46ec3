"""Regexes pinned to Unicode 16, tiktoken's version, whatever Unicode version the installed ``regex`` implements.

tiktoken's patterns use ``\\p{L}``, ``\\p{N}``, ``\\s``, ... whose members depend on the Unicode version of the
regex engine: a letter added in Unicode 17 is ``\\p{L}`` to a newer ``regex`` release and punctuation-like to
tiktoken. ``pin_unicode_classes`` corrects a pattern before it is compiled: every character class or escape that
uses a general-category property (``\\p{L}``, ``\\p{Lu}``, ``\\P{N}``, ``\\p{^Letter}``, ``\\p{gc=Nd}``,
...), ``\\p{White_Space}``, ``\\s``/``\\S``, ``\\d``/``\\D`` or ``\\w``/``\\W`` is compared, code point by code point, with
the Unicode 16 ranges shipped in ``crayon/data/unicode16_categories.npz`` (written by
``tools/gen_unicode_tables.py``); where they disagree it becomes ``(?:(?![WRONG])CLASS|[MISSING])``. With a
Unicode 16 ``regex`` nothing changes (so nothing slows down); with a newer one only the few changed code points
are listed, and the guard makes ``findall`` 2-3x slower (the jit engine's compiled spanners, which read the
shipped tables, are not affected). Correcting a pattern costs about 0.1-0.2 s once per process (cached).

Not pinned (left to the installed ``regex``): scripts and binary properties (``\\p{Han}``,
``\\p{Alphabetic}``), ``\\b``, and case folding under ``(?i)``. The patterns of the OpenAI encodings
fold only ASCII letters, whose fold sets (``s``: ``sSſ``, ``k``: ``kKK``) Unicode's stability policy keeps.
"""

from __future__ import annotations

import functools
from importlib import resources

import numpy as np
import regex

from crayon.errors import CrayonError

UNICODE_VERSION = "16.0.0"
CATEGORY_FILE = "unicode16_categories.npz"
CODE_POINTS = 0x110000
WHITE_SPACE = "White_Space"  # the regex module's \s

GENERAL_CATEGORIES = (
    "Lu Ll Lt Lm Lo Mn Mc Me Nd Nl No Pc Pd Ps Pe Pi Pf Po Sm Sc Sk So Zs Zl Zp Cc Cf Cs Co Cn".split()
)
_LONG_NAMES = {
    "Lu": "Uppercase_Letter", "Ll": "Lowercase_Letter", "Lt": "Titlecase_Letter", "Lm": "Modifier_Letter",
    "Lo": "Other_Letter", "Mn": "Nonspacing_Mark", "Mc": "Spacing_Mark", "Me": "Enclosing_Mark",
    "Nd": "Decimal_Number", "Nl": "Letter_Number", "No": "Other_Number", "Pc": "Connector_Punctuation",
    "Pd": "Dash_Punctuation", "Ps": "Open_Punctuation", "Pe": "Close_Punctuation", "Pi": "Initial_Punctuation",
    "Pf": "Final_Punctuation", "Po": "Other_Punctuation", "Sm": "Math_Symbol", "Sc": "Currency_Symbol",
    "Sk": "Modifier_Symbol", "So": "Other_Symbol", "Zs": "Space_Separator", "Zl": "Line_Separator",
    "Zp": "Paragraph_Separator", "Cc": "Control", "Cf": "Format", "Cs": "Surrogate", "Co": "Private_Use",
    "Cn": "Unassigned",
}
_GROUPS = {
    "L": ("Letter", "Lu Ll Lt Lm Lo"), "LC": ("Cased_Letter", "Lu Ll Lt"), "L&": ("Cased_Letter", "Lu Ll Lt"),
    "M": ("Mark", "Mn Mc Me"), "N": ("Number", "Nd Nl No"), "P": ("Punctuation", "Pc Pd Ps Pe Pi Pf Po"),
    "S": ("Symbol", "Sm Sc Sk So"), "Z": ("Separator", "Zs Zl Zp"), "C": ("Other", "Cc Cf Cs Co Cn"),
}


def _normalized(name: str) -> str:
    """A property name as the regex module compares them: case, spaces, hyphens and underscores ignored."""
    return name.lower().replace(" ", "").replace("_", "").replace("-", "")


def _category_names() -> dict[str, tuple[str, ...]]:
    names: dict[str, tuple[str, ...]] = {}
    for short in GENERAL_CATEGORIES:
        names[short] = names[_LONG_NAMES[short]] = (short,)
    for short, (long, members) in _GROUPS.items():
        names[short] = names[long] = tuple(members.split())
    return {_normalized(name): members for name, members in names.items()}


_CATEGORY_NAMES = _category_names()


@functools.cache
def property_ranges(name: str) -> np.ndarray:
    """The Unicode 16 code points of a general category (or group, e.g. "L") or "White_Space", as sorted,
    disjoint inclusive ranges: an int64 array of shape (n, 2)."""
    members = (WHITE_SPACE,) if name == WHITE_SPACE else _CATEGORY_NAMES.get(_normalized(name))
    if members is None:
        raise KeyError(f"{name!r} is not a general category")
    tables = _category_tables()
    ranges = np.concatenate([tables[member] for member in members]).reshape(-1, 2)
    return _merged(ranges[np.argsort(ranges[:, 0], kind="stable")])


@functools.cache
def word_ranges() -> np.ndarray:
    """The Unicode 16 code points ``\\w`` matches, from the regex compiler's shipped signatures."""
    from crayon.reference.regex_vm import WORD_BIT, unicode_signatures  # its tables hold \\w; imported on use

    is_word = (unicode_signatures() & WORD_BIT) != 0
    edges = np.flatnonzero(np.diff(np.concatenate([[False], is_word, [False]]).astype(np.int8)))
    return edges.reshape(-1, 2) - np.array([0, 1])


def _merged(ranges: np.ndarray) -> np.ndarray:
    """Sorted ranges with touching neighbours joined."""
    out: list[list[int]] = []
    for first, last in ranges.tolist():
        if out and first <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], last)
        else:
            out.append([first, last])
    return np.array(out, dtype=np.int64).reshape(-1, 2)


def complement(ranges: np.ndarray) -> np.ndarray:
    """The ranges of every code point (0..0x10FFFF) not in ``ranges``."""
    starts = np.concatenate([[0], ranges[:, 1] + 1])
    ends = np.concatenate([ranges[:, 0] - 1, [CODE_POINTS - 1]])
    keep = starts <= ends
    return np.stack([starts[keep], ends[keep]], axis=1)


@functools.cache
def _category_tables() -> dict[str, np.ndarray]:
    path = resources.files("crayon").joinpath("data", CATEGORY_FILE)
    try:
        with path.open("rb") as file, np.load(file) as arrays:
            tables = {name: np.asarray(arrays[name], dtype=np.int64) for name in (*GENERAL_CATEGORIES, WHITE_SPACE)}
    except (OSError, KeyError, ValueError) as error:
        raise CrayonError(f"cannot read the Unicode {UNICODE_VERSION} tables {path}: {error}") from error
    return tables


def _char(code_point: int) -> str:
    return f"\\u{code_point:04x}" if code_point <= 0xFFFF else f"\\U{code_point:08x}"


def _class_body(ranges: np.ndarray) -> str:
    """The inside of a character class matching ``ranges``."""
    return "".join(
        _char(first) if first == last else f"{_char(first)}-{_char(last)}" for first, last in ranges.tolist()
    )


def _escape_ranges(escape: str) -> np.ndarray | None:
    """The Unicode 16 ranges an escape (``\\p{L}``, ``\\PL``, ``\\p{^Lu}``, ``\\s``, ``\\D``, ...) matches, or
    None when it is not one that this module pins."""
    letter = escape[1]
    if letter in "sSdD":
        ranges = property_ranges(WHITE_SPACE if letter in "sS" else "Nd")
        return complement(ranges) if letter.isupper() else ranges
    if letter in "wW":
        return complement(word_ranges()) if letter == "W" else word_ranges()
    if letter not in "pP":
        return None
    name = escape[3:-1] if escape[2:3] == "{" else escape[2:]
    negated = letter == "P"
    if name.startswith("^"):
        name, negated = name[1:], not negated
    key, _, value = name.partition("=")
    if value:
        if _normalized(key) not in ("gc", "generalcategory"):
            return None
        name = value
    if _normalized(name) in ("whitespace", "wspace", "space"):
        name = WHITE_SPACE
    elif _normalized(name) not in _CATEGORY_NAMES:
        return None
    ranges = property_ranges(name)
    return complement(ranges) if negated else ranges


_BRACED_ESCAPES = "pPxNgk"  # \p{L}, \x{263a}, \N{...}, \g<name>, \k<name> (braces or angle brackets)
_HEX_ESCAPE_LENGTHS = {"x": 2, "u": 4, "U": 8}


def escape_end(pattern: str, start: int) -> int:
    """The end of the escape starting at ``pattern[start] == "\\"`` (``\\p{..}``, ``\\pL``, ``\\x{..}``, ``\\x41``,
    ``\\u263a``, ``\\N{..}``, ``\\g<..>``, ...), in the syntax ``regex`` and Oniguruma share."""
    letter = pattern[start + 1 : start + 2]
    closing = {"{": "}", "<": ">"}.get(pattern[start + 2 : start + 3])
    if letter and letter in _BRACED_ESCAPES and closing:
        end = pattern.find(closing, start + 3)
        if end > 0:
            return end + 1
    if letter in ("p", "P") and start + 2 < len(pattern):  # \pL
        return start + 3
    return min(start + 2 + _HEX_ESCAPE_LENGTHS.get(letter, 0), len(pattern))


def scan_class(pattern: str, start: int) -> tuple[int, int]:
    """``(end, nested)`` of the character class starting at ``pattern[start] == "["``: ``end`` is -1 when it is
    unterminated; ``nested`` is the position of its first ``[`` that opens no POSIX class (``[:alpha:]``), a
    literal for ``regex`` (VERSION0) but a nested class for Oniguruma, or -1."""
    nested = -1
    i = start + 1
    if pattern[i : i + 1] == "^":
        i += 1
    if pattern[i : i + 1] == "]":  # a "]" first is a literal
        i += 1
    while i < len(pattern):
        if pattern[i] == "\\":
            i = escape_end(pattern, i)
        elif pattern.startswith("[:", i) and ":]" in pattern[i:]:
            i = pattern.index(":]", i) + 2
        elif pattern[i] == "]":
            return i + 1, nested
        else:
            if pattern[i] == "[" and nested == -1:
                nested = i
            i += 1
    return -1, nested


def _class_items(token: str) -> tuple[bool, list[str], str]:
    """Split a class (or a lone escape) into (negated, its pinned escapes, a class of its other members or ""
    when it has none)."""
    if not token.startswith("["):
        return False, [token] if _escape_ranges(token) is not None else [], ""
    negated = token.startswith("[^")
    body = token[2 if negated else 1 : -1]
    pinned, others = [], []
    i = 0
    while i < len(body):
        end = escape_end(body, i) if body[i] == "\\" else i + 1
        item = body[i:end]
        (pinned if len(item) > 1 and _escape_ranges(item) is not None else others).append(item)
        i = end
    return negated, pinned, f"[{''.join(others)}]" if others else ""


@functools.cache
def _every_code_point() -> str:
    return np.arange(CODE_POINTS, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")


def _matched(pattern: str, text: str) -> np.ndarray:
    """Which characters of ``text`` the one-character ``pattern`` matches, as a boolean array."""
    matched = np.zeros(len(text), dtype=bool)
    for match in regex.finditer(f"(?:{pattern})+", text):
        matched[match.start() : match.end()] = True
    return matched


def _contains(ranges: np.ndarray, code_points: np.ndarray) -> np.ndarray:
    index = np.searchsorted(ranges[:, 0], code_points, side="right") - 1
    return (index >= 0) & (code_points <= ranges[np.maximum(index, 0), 1])


@functools.lru_cache(maxsize=64)
def _changed_by_installed_regex(escape: str) -> np.ndarray:
    """The code points on which the installed ``regex`` and Unicode 16 disagree about ``escape``."""
    ranges = _escape_ranges(escape)
    steps = np.zeros(CODE_POINTS + 1, np.int8)
    steps[ranges[:, 0]] = 1
    steps[ranges[:, 1] + 1] = -1
    in_unicode16 = np.cumsum(steps[:-1], dtype=np.int8).astype(bool)
    return np.flatnonzero(_matched(escape, _every_code_point()) != in_unicode16)


def _class_body_of(code_points: np.ndarray) -> str:
    return _class_body(_merged(np.stack([code_points, code_points], axis=1)))


def _pinned_token(token: str) -> str:
    """A class or escape that matches, with any ``regex`` release, what it matches in Unicode 16.

    Unchanged when the installed ``regex`` agrees with Unicode 16 on its properties; otherwise
    ``(?:(?![WRONG])TOKEN|[MISSING])`` with the few code points on which they disagree."""
    negated, escapes, others = _class_items(token)
    if not escapes:
        return token
    suspects = np.unique(np.concatenate([_changed_by_installed_regex(escape) for escape in escapes]))
    if suspects.size == 0:
        return token
    text = np.asarray(suspects, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")
    in_installed = _matched(token, text)
    in_unicode16 = np.logical_or.reduce([_contains(_escape_ranges(escape), suspects) for escape in escapes])
    if others:
        in_unicode16 |= _matched(others, text)
    if negated:
        in_unicode16 = ~in_unicode16
    wrong, missing = suspects[in_installed & ~in_unicode16], suspects[in_unicode16 & ~in_installed]
    if not wrong.size and not missing.size:
        return token
    alternatives = [token]
    if wrong.size and wrong.min() >= 0x80:
        # ASCII first, unguarded (most text is ASCII); the alternatives stay disjoint so that backtracking
        # never tries one character two ways
        ascii_members = np.flatnonzero(_matched(token, _every_code_point()[:0x80]))
        alternatives = [f"[{_class_body_of(ascii_members)}]"] if ascii_members.size else []
        alternatives.append(f"(?![\\x00-\\x7f{_class_body_of(wrong)}]){token}")
    elif wrong.size:
        alternatives = [f"(?![{_class_body_of(wrong)}]){token}"]
    if missing.size:
        alternatives.append(f"[{_class_body_of(missing)}]")
    return f"(?:{'|'.join(alternatives)})"


@functools.lru_cache(maxsize=256)
def pin_unicode_classes(pattern: str) -> str:
    """``pattern`` (``regex`` module, VERSION0 syntax) matching with any ``regex`` release what it matches with
    Unicode 16: every class or escape using a general-category property, ``\\p{White_Space}``, ``\\s`` or
    ``\\d`` (or their negations) is corrected on the code points where the installed release disagrees."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern[i] == "\\":
            end = escape_end(pattern, i)
        elif pattern[i] == "[":
            end = scan_class(pattern, i)[0]
            if end == -1:
                end = len(pattern)  # unterminated: regex.compile reports it
        else:
            out.append(pattern[i])
            i += 1
            continue
        out.append(_pinned_token(pattern[i:end]))
        i = end
    return "".join(out)

"""Pre-tokenization patterns of the OpenAI encodings, by name (tiktoken's exact strings)."""

import difflib
import re

R50K_BASE = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""

CL100K_BASE = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)

O200K_BASE = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

# Other vocabularies' patterns that the jit engine's hand-written machines split exactly too (their exact strings,
# as their tokenizer.json files and quicktok give them). Llama 3's is cl100k's before tiktoken made it possessive:
# a run of whitespace that ends the text and holds a newline is cut after its last newline (``\s*[\r\n]+``), as
# o200k's is, where cl100k's ``\s++$`` keeps it whole. Qwen 2's (also Qwen 2.5's and Qwen 3's) is Llama 3's with
# one digit per span.
LLAMA3 = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"""
    r"""|\s+(?!\S)|\s+"""
)
QWEN2 = LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}", 1)
VARIANT_PATTERNS = {"llama3": LLAMA3, "qwen2": QWEN2}

PATTERNS = {
    "r50k_base": R50K_BASE,
    "p50k_base": R50K_BASE,
    "p50k_edit": R50K_BASE,
    "gpt2": R50K_BASE,
    "cl100k_base": CL100K_BASE,
    "o200k_base": O200K_BASE,
}


# A pattern made only of these characters is taken as a name, never as a regex: as a regex it could match
# nothing but itself, and every other character of the text would be dropped. Write "(?:abc)" for such a regex.
_NAME_LIKE = re.compile(r"[A-Za-z0-9_-]+")


def resolve_pattern(pattern: str) -> str:
    """Return the regex for a pattern name, or the pattern itself when it is a regex.

    A name-like string (letters, digits, ``_-``) that is not a known name raises ValueError listing the known
    names, with the nearest one."""
    if not isinstance(pattern, str):
        raise TypeError(f"a pattern is a name ({', '.join(PATTERNS)}) or a regex str, not {type(pattern).__name__}")
    if pattern in PATTERNS:
        return PATTERNS[pattern]
    if _NAME_LIKE.fullmatch(pattern):
        close = difflib.get_close_matches(pattern.lower(), PATTERNS, n=1, cutoff=0.5)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ValueError(
            f"unknown pattern name {pattern!r}: {hint}known names are {', '.join(PATTERNS)} "
            f"(a regex made only of letters, digits, _ and - must be written as a group, e.g. '(?:{pattern})')"
        )
    return pattern


def pattern_name(regex: str) -> str | None:
    """Return the canonical name of a known pattern regex, or None."""
    for name in ("cl100k_base", "o200k_base", "r50k_base"):
        if PATTERNS[name] == regex:
            return name
    return None


def variant_name(regex: str) -> str | None:
    """The name in ``VARIANT_PATTERNS`` of a regex, or None."""
    return next((name for name, variant in VARIANT_PATTERNS.items() if variant == regex), None)

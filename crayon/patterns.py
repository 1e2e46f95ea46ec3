"""Pre-tokenization patterns of the OpenAI encodings, by name (tiktoken's exact strings)."""

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

PATTERNS = {
    "r50k_base": R50K_BASE,
    "p50k_base": R50K_BASE,
    "p50k_edit": R50K_BASE,
    "gpt2": R50K_BASE,
    "cl100k_base": CL100K_BASE,
    "o200k_base": O200K_BASE,
}


def resolve_pattern(pattern: str) -> str:
    """Return the regex for a pattern name, or the pattern itself when it is not a known name."""
    return PATTERNS.get(pattern, pattern)


def pattern_name(regex: str) -> str | None:
    """Return the canonical name of a known pattern regex, or None."""
    for name in ("cl100k_base", "o200k_base", "r50k_base"):
        if PATTERNS[name] == regex:
            return name
    return None

"""Generate crayon/data/unicode_categories.npz, the Unicode tables of the regex compiler.

Every code point gets a signature byte: its general category (an index into
``crayon.reference.regex_vm.CATEGORIES``) | ``SPACE_BIT`` if ``\\s`` matches it | ``WORD_BIT`` if ``\\w`` does,
evaluated with the ``regex`` module the reference pre-tokenizer runs on (Unicode 16 with regex >= 2024.9.11).
The signatures are stored as a two-level table (``block_index`` maps each block of ``BLOCK_SIZE`` code points
to a row of ``block_signatures``). ``fold_code_points`` and ``fold_partners`` list the pairs of characters that
``(?i)`` matches case-insensitively: the literal code point matches its partner.

Run ``python -m tools.gen_unicode_categories`` from the repository root after upgrading ``regex``
(tests/test_regex_vm.py fails when the shipped tables no longer match it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import regex

from crayon.reference.unicode16 import WHITE_SPACE, property_ranges
from crayon.reference.regex_vm import (
    BLOCK_SIZE,
    CATEGORIES,
    CODE_POINTS,
    SPACE_BIT,
    TABLE_FILE,
    WORD_BIT,
)

TABLE_PATH = Path(__file__).resolve().parents[1] / "crayon" / "data" / TABLE_FILE


def unicode16_signatures() -> np.ndarray:
    """The general category | ``SPACE_BIT`` of every code point, from Crayon's shipped Unicode 16 ranges
    (``crayon.reference.unicode16``), whatever Unicode version the installed ``regex`` knows."""
    signatures = np.full(CODE_POINTS, 255, dtype=np.uint8)
    for index, category in enumerate(CATEGORIES):
        for first, last in property_ranges(category).tolist():
            signatures[first : last + 1] = index
    if (signatures == 255).any():
        raise ValueError(f"{int((signatures == 255).sum())} code points have no general category")
    for first, last in property_ranges(WHITE_SPACE).tolist():
        signatures[first : last + 1] |= SPACE_BIT
    return signatures


def installed_regex_is_unicode16() -> bool:
    """Whether the installed ``regex`` gives every code point its Unicode 16 category (\\w and case folding,
    which the shipped ranges do not hold, are then read from it)."""
    every_code_point = "".join(map(chr, range(CODE_POINTS)))
    expected = unicode16_signatures() & ~np.uint8(SPACE_BIT)
    for index, category in enumerate(CATEGORIES):
        found = np.zeros(CODE_POINTS, bool)
        for match in regex.finditer(rf"\p{{{category}}}+", every_code_point):
            found[match.start() : match.end()] = True
        if not np.array_equal(found, expected == index):
            return False
    return True


def code_point_signatures() -> np.ndarray:
    """The signature (uint8) of every code point 0..0x10FFFF: Unicode 16 categories and \\s, and \\w as the
    installed (Unicode 16) ``regex`` matches it."""
    signatures = unicode16_signatures()
    every_code_point = "".join(map(chr, range(CODE_POINTS)))
    for match in regex.finditer(r"\w+", every_code_point):
        signatures[match.start() : match.end()] |= WORD_BIT
    return signatures


def case_fold_pairs() -> tuple[np.ndarray, np.ndarray]:
    """(code points, partners): ``(?i)`` with the literal code point matches the partner (pairs of distinct
    characters; the relation is not transitive: (?i)I matches ı and i, but (?i)i does not match ı)."""
    related: dict[str, set[str]] = {}
    for code_point in range(CODE_POINTS):
        char = chr(code_point)
        for other in {char.lower(), char.upper(), char.casefold(), char.title()} - {char}:
            if len(other) == 1:
                related.setdefault(char, set()).add(other)
                related.setdefault(other, set()).add(char)
    code_points, partners = [], []
    for char in sorted(related):
        reachable, frontier = {char}, [char]
        while frontier:  # candidates: everything connected to char by case mappings
            for other in related.get(frontier.pop(), ()):
                if other not in reachable:
                    reachable.add(other)
                    frontier.append(other)
        for other in sorted(reachable - {char}):
            if regex.fullmatch(f"(?i){regex.escape(char)}", other):
                code_points.append(ord(char))
                partners.append(ord(other))
    return np.array(code_points, np.int32), np.array(partners, np.int32)


def build_tables() -> dict[str, np.ndarray]:
    blocks = code_point_signatures().reshape(-1, BLOCK_SIZE)
    distinct_blocks, block_index = np.unique(blocks, axis=0, return_inverse=True)
    fold_code_points, fold_partners = case_fold_pairs()
    return {
        "block_index": block_index.reshape(-1).astype(np.uint16),
        "block_signatures": distinct_blocks.reshape(-1),
        "fold_code_points": fold_code_points,
        "fold_partners": fold_partners,
    }


def main() -> None:
    if not installed_regex_is_unicode16():
        raise SystemExit(f"regex {regex.__version__} is not Unicode 16: \\w and case folding would not be tiktoken's; "
                         "install regex>=2024.9.11,<2025.10 to regenerate")
    tables = build_tables()
    np.savez_compressed(TABLE_PATH, **tables)
    sizes = ", ".join(f"{name} {array.nbytes} B" for name, array in tables.items())
    print(f"wrote {TABLE_PATH} ({TABLE_PATH.stat().st_size} B on disk; {sizes}; regex {regex.__version__})")


if __name__ == "__main__":
    main()

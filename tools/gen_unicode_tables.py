"""Generate Crayon's Unicode 16 tables: crayon/data/unicode16_categories.npz and crayon/data/unicode_classes.npz.

``unicode16_categories.npz`` holds the code-point ranges of every general category and of White_Space, read
from a ``regex`` release whose Unicode version is 16.0 (checked; ``--categories`` regenerates them, which only
a Unicode change of tiktoken would call for). ``crayon.reference.unicode16`` pins patterns to them.

``unicode_classes.npz``, the character tables of the jit pre-tokenizers: every code point gets the property
bits of ``crayon.jit.pretokenize.PROPERTY_REGEXES``, evaluated with the pinned (Unicode 16) fragments like the
reference pre-tokenizer's patterns. Code points with the same bits form a class; the classes are stored as a
two-level table (``block_index`` maps each block of ``BLOCK_SIZE`` code points to a row of ``block_classes``)
plus ``class_properties``, the bits of each class.

Run ``python -m tools.gen_unicode_tables`` from the repository root after changing ``PROPERTY_REGEXES``
(tests/test_jit_pretokenize.py fails when the shipped tables no longer match them).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import regex

from crayon.jit.pretokenize import BLOCK_SIZE, CODE_POINTS, PROPERTY_REGEXES, TABLE_FILE
from crayon.reference.unicode16 import CATEGORY_FILE, GENERAL_CATEGORIES, WHITE_SPACE, pin_unicode_classes

DATA = Path(__file__).resolve().parents[1] / "crayon" / "data"
TABLE_PATH = DATA / TABLE_FILE
CATEGORY_PATH = DATA / CATEGORY_FILE

NEW_IN_UNICODE_16 = "\u1c89"  # CYRILLIC CAPITAL LETTER TJE
NEW_IN_UNICODE_17 = "\U00010940"  # SIDETIC LETTER N01


def build_category_tables() -> dict[str, np.ndarray]:
    """The code-point ranges (int32, shape (n, 2)) of each general category and White_Space, from ``regex``."""
    if not (regex.fullmatch(r"\p{Lu}", NEW_IN_UNICODE_16) and regex.fullmatch(r"\p{Cn}", NEW_IN_UNICODE_17)):
        raise SystemExit(f"regex {regex.__version__} does not implement Unicode 16.0: install regex<2025.10")
    every_code_point = "".join(map(chr, range(CODE_POINTS)))
    tables = {}
    for name in (*GENERAL_CATEGORIES, WHITE_SPACE):
        fragment = r"\s" if name == WHITE_SPACE else rf"\p{{{name}}}"
        spans = [match.span() for match in regex.finditer(f"(?:{fragment})+", every_code_point)]
        tables[name] = np.array([(start, end - 1) for start, end in spans], dtype=np.int32).reshape(-1, 2)
    return tables


def code_point_properties() -> np.ndarray:
    """The property bits (uint16) of every code point 0..0x10FFFF."""
    every_code_point = "".join(map(chr, range(CODE_POINTS)))
    properties = np.zeros(CODE_POINTS, dtype=np.uint16)
    for bit, fragment in PROPERTY_REGEXES.items():
        for match in regex.finditer(f"(?:{pin_unicode_classes(fragment)})+", every_code_point):
            properties[match.start() : match.end()] |= bit
    return properties


def build_tables() -> dict[str, np.ndarray]:
    """The arrays of the table file: block_index (uint16), block_classes (uint8), class_properties (uint16)."""
    class_properties, classes = np.unique(code_point_properties(), return_inverse=True)
    if class_properties.size > 256:
        raise ValueError(f"{class_properties.size} classes do not fit in uint8")
    blocks = classes.astype(np.uint8).reshape(-1, BLOCK_SIZE)
    distinct_blocks, block_index = np.unique(blocks, axis=0, return_inverse=True)
    return {
        "block_index": block_index.reshape(-1).astype(np.uint16),
        "block_classes": distinct_blocks.reshape(-1),
        "class_properties": class_properties.astype(np.uint16),
    }


def main() -> None:
    if "--categories" in sys.argv[1:]:
        categories = build_category_tables()
        np.savez_compressed(CATEGORY_PATH, **categories)
        print(f"wrote {CATEGORY_PATH} ({CATEGORY_PATH.stat().st_size} B on disk, regex {regex.__version__})")
    tables = build_tables()
    np.savez_compressed(TABLE_PATH, **tables)
    sizes = ", ".join(f"{name} {array.nbytes} B" for name, array in tables.items())
    print(f"wrote {TABLE_PATH} ({TABLE_PATH.stat().st_size} B on disk; {sizes}; "
          f"{tables['class_properties'].size} classes, regex {regex.__version__})")


if __name__ == "__main__":
    main()

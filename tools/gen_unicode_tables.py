"""Generate crayon/data/unicode_classes.npz, the character tables of the jit pre-tokenizers.

Every code point gets the property bits of ``crayon.jit.pretokenize.PROPERTY_REGEXES``, evaluated with the
``regex`` module that the reference pre-tokenizer (and so tiktoken's patterns) runs on. Code points with the
same bits form a class; the classes are stored as a two-level table (``block_index`` maps each block of
``BLOCK_SIZE`` code points to a row of ``block_classes``) plus ``class_properties``, the bits of each class.

Run ``python -m tools.gen_unicode_tables`` from the repository root after upgrading ``regex``
(tests/test_jit_pretokenize.py fails when the shipped tables no longer match it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import regex

from crayon.jit.pretokenize import BLOCK_SIZE, CODE_POINTS, PROPERTY_REGEXES, TABLE_FILE

TABLE_PATH = Path(__file__).resolve().parents[1] / "crayon" / "data" / TABLE_FILE


def code_point_properties() -> np.ndarray:
    """The property bits (uint16) of every code point 0..0x10FFFF."""
    every_code_point = "".join(map(chr, range(CODE_POINTS)))
    properties = np.zeros(CODE_POINTS, dtype=np.uint16)
    for bit, fragment in PROPERTY_REGEXES.items():
        for match in regex.finditer(f"(?:{fragment})+", every_code_point):
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
    tables = build_tables()
    np.savez_compressed(TABLE_PATH, **tables)
    sizes = ", ".join(f"{name} {array.nbytes} B" for name, array in tables.items())
    print(f"wrote {TABLE_PATH} ({TABLE_PATH.stat().st_size} B on disk; {sizes}; "
          f"{tables['class_properties'].size} classes, regex {regex.__version__})")


if __name__ == "__main__":
    main()

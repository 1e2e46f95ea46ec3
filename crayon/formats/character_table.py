"""A normalizer that rewrites each character on its own, written as a table: what every code point becomes.

``CharacterTable.of`` builds the table from the normalizer itself, in one call on all code points joined by a
separator (a character the normalizer keeps, normalizing the text on each side of it as that text alone: its
``batch_separator``), so the table is the normalizer's own answer for each character. A normalizer can be exact
character by character except around some characters (``BertNormalizer``'s accent stripping reorders combining
marks): those are marked ``whole_text``, and a text holding one must be normalized as a whole. Tables of
normalizers applied one after the other compose (``then``). ``crayon.jit.character_normalizer`` applies a table
to UTF-8 bytes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np

CODE_POINTS = 0x110000


@dataclass(frozen=True)
class CharacterTable:
    """Code point ``c`` becomes ``code_points[starts[c]:starts[c + 1]]`` (a surrogate, which no text holds,
    itself); exact for a text none of whose characters is ``whole_text``."""

    starts: np.ndarray  # int64, CODE_POINTS + 1
    code_points: np.ndarray  # uint32
    whole_text: np.ndarray  # bool, CODE_POINTS

    @classmethod
    def of(cls, normalize: Callable[[str], str], separator: str,
           whole_text: np.ndarray | None = None) -> CharacterTable:
        """The table of ``normalize`` from one call on every code point, each followed by ``separator`` (checked:
        the normalized text holds as many separators)."""
        others = _other_code_points(ord(separator))
        joined = np.empty(2 * len(others), np.uint32)
        joined[0::2], joined[1::2] = others, ord(separator)
        normalized = _utf32(normalize(joined.tobytes().decode("utf-32-le")))
        ends = np.flatnonzero(normalized == ord(separator))
        if len(ends) != len(others):
            raise ValueError(f"the normalizer does not keep {separator!r} as a separator")
        starts = np.concatenate(([0], ends[:-1] + 1))
        separator_text = _utf32(normalize(separator))
        pool = np.concatenate((normalized, separator_text, np.arange(CODE_POINTS, dtype=np.uint32)))
        sources = np.arange(CODE_POINTS, dtype=np.int64) + len(normalized) + len(separator_text)  # themselves
        lengths = np.ones(CODE_POINTS, np.int64)
        sources[others], lengths[others] = starts, ends - starts
        sources[ord(separator)], lengths[ord(separator)] = len(normalized), len(separator_text)
        table_starts = _cumulated(lengths)
        return cls(table_starts, pool[_ranges(sources, lengths, table_starts)],
                   np.zeros(CODE_POINTS, bool) if whole_text is None else whole_text)

    def unchanged(self) -> np.ndarray:
        """For each code point, whether it becomes itself."""
        firsts = np.append(self.code_points, 0)[self.starts[:-1]]
        return (np.diff(self.starts) == 1) & (firsts == np.arange(CODE_POINTS))

    def utf8_texts(self, selected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the UTF-8 bytes of what each ``selected`` code point becomes, one after the other; where each ends)."""
        lengths = np.diff(self.starts)[selected]
        totals = _cumulated(lengths)
        code_points = self.code_points[_ranges(self.starts[selected], lengths, totals)]
        widths = 1 + (code_points >= 0x80).astype(np.int64) + (code_points >= 0x800) + (code_points >= 0x10000)
        data = np.frombuffer(code_points.tobytes().decode("utf-32-le").encode("utf-8"), np.uint8)
        return data, _cumulated(widths)[totals[1:]]

    def any_output(self, mask: np.ndarray) -> np.ndarray:
        """For each code point c, whether c becomes a character that ``mask`` marks."""
        counts = _cumulated(mask[self.code_points])
        return counts[self.starts[1:]] > counts[self.starts[:-1]]

    def then(self, later: CharacterTable) -> CharacterTable:
        """This table followed by ``later``; a text is taken whole where one of its characters is ``whole_text``
        here or becomes a character that is ``whole_text`` in ``later``."""
        lengths = np.diff(later.starts)[self.code_points]
        totals = _cumulated(lengths)
        code_points = later.code_points[_ranges(later.starts[self.code_points], lengths, totals)]
        return CharacterTable(totals[self.starts], code_points, self.whole_text | self.any_output(later.whole_text))


def _utf32(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le"), np.uint32)


def _cumulated(values: np.ndarray) -> np.ndarray:
    """0 and the running sums of ``values`` (int64)."""
    sums = np.zeros(len(values) + 1, np.int64)
    np.cumsum(values, out=sums[1:])
    return sums


@functools.lru_cache(maxsize=4)
def _other_code_points(excluded: int) -> np.ndarray:
    """Every code point but the surrogates and ``excluded`` (read-only)."""
    keep = np.ones(CODE_POINTS, bool)
    keep[0xD800:0xE000] = keep[excluded] = False
    code_points = np.flatnonzero(keep).astype(np.uint32)
    code_points.flags.writeable = False
    return code_points


def _ranges(sources: np.ndarray, lengths: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The indices of the ranges ``sources[i] : sources[i] + lengths[i]`` one after the other (``starts``: the
    ``_cumulated`` lengths)."""
    return np.repeat(sources - starts[:-1], lengths) + np.arange(starts[-1])

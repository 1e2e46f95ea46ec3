"""Text that remembers where each of its characters came from: HF tokenizers' ``NormalizedString`` alignments.

An ``AlignedText`` is a string and, for each of its characters, the ``(start, end)`` characters of the original
text it stands for. Normalizers and pre-tokenizers rewrite it with ``transform``, which takes the new characters
each with a *change*, as HF's ``NormalizedString::transform`` does: ``0`` the character replaces the next
character of the current text (and takes its span), ``-n`` it replaces the next one and the ``n`` after it are
removed, ``1`` it is inserted (and takes the span of the character before it, ``(0, 0)`` at the start).
``initial_removed`` characters at the start are dropped first. Spans follow positions, not meaning: that is HF's
rule, quirks included (a composed character keeps the span of its first part only).

A token covering the characters ``[start, end)`` of an aligned text stands for the original characters from the
first one's span start to the last one's span end (``original_span``): HF's ``Encoding.offsets`` of it.
"""

from __future__ import annotations

from typing import Iterable

__all__ = ["AlignedText"]


class AlignedText:
    """A string (``text``) and each character's original span (``spans``, a list of ``(start, end)``)."""

    __slots__ = ("text", "spans")

    def __init__(self, text: str, spans: list[tuple[int, int]]):
        if len(text) != len(spans):
            raise ValueError(f"{len(text)} characters but {len(spans)} spans")
        self.text, self.spans = text, spans

    @classmethod
    def of(cls, text: str, offset: int = 0) -> "AlignedText":
        """``text`` as found at character ``offset`` of the original: character i stands for ``offset + i``."""
        return cls(text, [(offset + i, offset + i + 1) for i in range(len(text))])

    def __len__(self) -> int:
        return len(self.text)

    def __getitem__(self, where: slice) -> "AlignedText":
        return AlignedText(self.text[where], self.spans[where])

    def __repr__(self) -> str:
        return f"AlignedText({self.text!r}, {self.spans!r})"

    def transform(self, changes: Iterable[tuple[str, int]], initial_removed: int = 0) -> "AlignedText":
        """The text made of ``changes`` (``(character, change)`` pairs, see the module docstring)."""
        spans = self.spans
        position = initial_removed  # the next character of the current text to be replaced
        chars: list[str] = []
        new_spans: list[tuple[int, int]] = []
        for char, change in changes:
            if change > 0:
                new_spans.append(spans[position - 1] if position > 0 else (0, 0))
            else:
                new_spans.append(spans[position])
                position += 1 - change
            chars.append(char)
        return AlignedText("".join(chars), new_spans)

    def replace_each(self, replacements: Iterable[str]) -> "AlignedText":
        """Each character replaced by a non-empty string: its first character takes the span, the others are
        inserted after it (HF's rule for a character mapped to several, as lowercasing and byte-level mapping do)."""
        return self.transform((char, int(i > 0)) for replacement in replacements for i, char in enumerate(replacement))

    def kept(self, keep: Iterable[bool]) -> "AlignedText":
        """The characters ``keep`` marks, each with its span (HF's ``filter``)."""
        pairs = [(char, span) for char, span, kept in zip(self.text, self.spans, keep) if kept]
        return AlignedText("".join(char for char, _ in pairs), [span for _, span in pairs])

    def prepended(self, prefix: str) -> "AlignedText":
        """``prefix`` put before the text unless it is empty (HF's ``prepend``): its characters take the span of
        the text's first character."""
        if not self.text:
            return self
        return AlignedText(prefix + self.text, [self.spans[0]] * len(prefix) + self.spans)

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """The original characters that ``text[start:end]`` (not empty) stands for."""
        return self.spans[start][0], self.spans[end - 1][1]

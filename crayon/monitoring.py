"""Vocabulary drift: how well a vocabulary compresses text from each source, against a baseline, and what to add.

For byte-level BPE no text is out of vocabulary (every byte is a token), so drift shows as compression: a
vocabulary trained on English spends more tokens per byte on another language or domain. ``drift`` (or a
``DriftMonitor`` fed text as it comes) reports, per source:

- **bytes per token** (UTF-8 bytes of the pre-tokenized spans / tokens), and its change against a baseline;
- the **worst spans**: the words that cost the most tokens beyond one each (count x (tokens - 1));
- the **candidate merges**: adjacent token pairs inside words, with the tokens each would save if it were
  the next merge (occurrences merged left to right, as BPE does) and the bytes per token that would give.
  Savings of different candidates overlap, so they do not add up; ``Tokenizer.extend`` learns them in order.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Mapping

import numpy as np

from crayon.corpus import documents
from crayon.evolution import token_label, word_splitter

__all__ = ["Candidate", "DriftMonitor", "DriftReport", "SourceDrift", "drift"]


@dataclass
class Candidate:
    """A pair of adjacent tokens to merge: ``tokens_saved`` in all sources (and per source) if it were added."""

    left: int
    right: int
    token_bytes: bytes
    tokens_saved: int
    saved_by_source: dict[str, int] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The merged token as text, or as bytes where it is part of a character (``token_label``)."""
        return token_label(self.token_bytes)


@dataclass
class SourceDrift:
    """One source's compression: bytes per token, against ``baseline`` (None without one), and its worst spans
    as (span, count, tokens per occurrence)."""

    source: str
    n_bytes: int
    n_tokens: int
    baseline: float | None
    worst_spans: list[tuple[str, int, int]]

    @property
    def bytes_per_token(self) -> float:
        return self.n_bytes / self.n_tokens if self.n_tokens else 0.0

    @property
    def change(self) -> float | None:
        """Relative change of bytes per token against the baseline (-0.3: 30% fewer bytes per token)."""
        return None if not self.baseline else self.bytes_per_token / self.baseline - 1


@dataclass
class DriftReport:
    """Per-source compression (``sources``) and the candidate merges that would help most (``candidates``)."""

    sources: dict[str, SourceDrift]
    candidates: list[Candidate]

    def bytes_per_token(self) -> dict[str, float]:
        """Bytes per token of each source: a baseline for a later report."""
        return {name: source.bytes_per_token for name, source in self.sources.items()}

    def __str__(self) -> str:
        lines = [f"{'source':20} {'bytes/token':>11} {'baseline':>9} {'change':>8}  worst span"]
        for source in self.sources.values():
            baseline = "" if source.baseline is None else f"{source.baseline:9.3f}"
            change = "" if source.change is None else f"{source.change:+8.1%}"
            worst = repr(source.worst_spans[0][0]) if source.worst_spans else "(every span is one token)"
            lines.append(f"{source.source:20} {source.bytes_per_token:11.3f} {baseline:>9} {change:>8}  {worst}")
        lines.append(f"{'candidate merge':32} {'tokens saved':>12}")
        for candidate in self.candidates:
            lines.append(f"{candidate.label:32} {candidate.tokens_saved:12d}")
        return "\n".join(lines)


class DriftMonitor:
    """Streaming drift: ``update(source, text)`` as text arrives, ``report()`` at any time.

    ``baseline``: bytes per token to compare against: one number for every source, a mapping by source, or an
    earlier ``DriftReport``. Memory grows with the number of distinct words seen, not with the text."""

    def __init__(self, tokenizer, *, baseline: float | Mapping[str, float] | DriftReport | None = None):
        if tokenizer.algorithm != "bpe":
            raise ValueError(f"{tokenizer.name} encodes by {tokenizer.algorithm} match; drift is measured for BPE")
        from crayon.jit.engine import make_engine

        self.tokenizer = tokenizer
        self.baseline = baseline.bytes_per_token() if isinstance(baseline, DriftReport) else baseline
        self.word_counts: dict[str, Counter[bytes]] = {}
        self._encode_spans = make_engine(tokenizer).encode_spans
        self._splitter = word_splitter(tokenizer)
        self._cut_out = [*tokenizer.special_tokens, *tokenizer.added_tokens]

    def update(
        self, source: str, *, texts: Iterable[str] | None = None, files: Iterable[str | os.PathLike] | None = None
    ) -> None:
        """Count the words of ``texts=[str, ...]`` and/or ``files=[paths]`` (UTF-8) under ``source``."""
        from crayon.jit.train import count_words_jit

        stream = documents(files, texts, caller="DriftMonitor.update")
        word_bytes, lengths, counts = count_words_jit(stream, self._splitter, self._cut_out, workers=1)
        blob, ends = word_bytes.tobytes(), np.cumsum(lengths).tolist()
        words = self.word_counts.setdefault(source, Counter())
        for start, end, count in zip([0, *ends[:-1]], ends, counts.tolist()):
            words[blob[start:end]] += count

    def report(self, *, top_spans: int = 10, top_merges: int = 20) -> DriftReport:
        """The report over everything seen so far (see the module docstring)."""
        distinct = sorted(set().union(*self.word_counts.values()))
        tokens, offsets = self._segment(distinct)
        tokens_of = {word: tokens[offsets[i] : offsets[i + 1]] for i, word in enumerate(distinct)}
        sources, pair_savings = {}, Counter()
        saved_by_source: dict[tuple[int, int], dict[str, int]] = {}
        for name, words in self.word_counts.items():
            n_bytes = sum(len(word) * count for word, count in words.items())
            n_tokens = sum(len(tokens_of[word]) * count for word, count in words.items())
            costly = sorted(
                ((word, count, len(tokens_of[word])) for word, count in words.items() if len(tokens_of[word]) > 1),
                key=lambda item: (-item[1] * (item[2] - 1), item[0]),
            )[:top_spans]
            worst = [(word.decode("utf-8", "replace"), count, n) for word, count, n in costly]
            baseline = self.baseline.get(name) if isinstance(self.baseline, Mapping) else self.baseline
            sources[name] = SourceDrift(name, n_bytes, n_tokens, baseline, worst)
            for pair, saved in _pair_savings(words, tokens_of).items():
                pair_savings[pair] += saved
                saved_by_source.setdefault(pair, {})[name] = saved
        model = self.tokenizer.model
        best = sorted(pair_savings.items(), key=lambda item: (-item[1], item[0]))[:top_merges]
        candidates = []
        for (left, right), saved in best:
            token = model.token_bytes[left] + model.token_bytes[right]
            candidates.append(Candidate(left, right, token, saved, saved_by_source[left, right]))
        return DriftReport(sources, candidates)

    def _segment(self, words: list[bytes]) -> tuple[list[int], list[int]]:
        """(the words' tokens end to end, offsets of each word's tokens)."""
        tokens = self._encode_spans(words).tolist()
        lengths = [len(self.tokenizer.model.token_bytes[token]) for token in tokens]
        offsets, position, consumed = [0], 0, 0
        for word in words:
            consumed_target = consumed + len(word)
            while consumed < consumed_target:
                consumed += lengths[position]
                position += 1
            offsets.append(position)
        return tokens, offsets


def _pair_savings(words: Mapping[bytes, int], tokens_of: Mapping[bytes, list[int]]) -> Counter[tuple[int, int]]:
    """Tokens each adjacent pair would save as the next merge: its occurrences merged left to right, per word,
    times the word's count ("a a a" saves one token with (a, a), not two)."""
    savings: Counter[tuple[int, int]] = Counter()
    for word, count in words.items():
        tokens = tokens_of[word]
        last_end: dict[tuple[int, int], int] = {}
        for i in range(len(tokens) - 1):
            pair = (tokens[i], tokens[i + 1])
            if last_end.get(pair, -1) <= i:  # does not overlap the last occurrence merged
                savings[pair] += count
                last_end[pair] = i + 2
    return savings


def drift(
    tokenizer,
    texts_by_source: Mapping[str, Iterable[str]],
    *,
    baseline: float | Mapping[str, float] | DriftReport | None = None,
    top_spans: int = 10,
    top_merges: int = 20,
) -> DriftReport:
    """How well ``tokenizer`` compresses each source's texts against ``baseline``, its worst spans and the
    candidate merges that would help most (see the module docstring). ``texts_by_source`` maps a source's
    name to its texts (a list of ``str``; ``DriftMonitor.update`` also reads files)."""
    monitor = DriftMonitor(tokenizer, baseline=baseline)
    for source, texts in texts_by_source.items():
        monitor.update(source, texts=texts)
    return monitor.report(top_spans=top_spans, top_merges=top_merges)

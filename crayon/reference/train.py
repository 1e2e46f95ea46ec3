"""Byte-level BPE training, written to be read: a naive trainer and the exact fast one, with identical merges.

The rules both trainers follow (and ``crayon.jit.train`` too, merge for merge):

- **Words.** Text is first cut at the special tokens (reserved: they are never learned from the text), then
  split into spans by the pre-tokenization pattern (``regex.findall``, as tiktoken). Each distinct span is
  a *word*, UTF-8 encoded and counted; merges never cross word boundaries. Text with a lone surrogate (no
  UTF-8 encoding) is refused with ``ValueError``.
- **Ids.** 0..255 are the single bytes in byte order; each merge that makes new token bytes gives them the
  next id. A merge whose result equals bytes already in the vocabulary (were two different splits of the
  same bytes both merged) reuses that id, as HF tokenizers does, so ``ranks`` maps bytes to ids one to one.
  ``ranks`` works as tiktoken's ``mergeable_ranks``: tiktoken's rule (merge the adjacent pair whose
  concatenation has the lowest rank) gives the training's segmentation of the training text (tested).
  Special tokens get the ids after the learned ones, in the order given.
- **Counts.** A pair's count is its number of adjacent occurrences, overlapping ones included ("aaa" holds
  (a, a) twice), each weighted by its word's count.
- **Tie-break.** Each step merges the pair with the highest count; among equal counts, the pair with the
  smallest left id, then the smallest right id. Inside a word, occurrences are merged left to right
  ("aaa" -> "aa" "a").
- **Extension** (``extend_bpe``). Training can go on from an existing vocabulary: each word is first
  encoded by it, then merging continues from those tokens under the rules above; the new tokens get ids from
  a given first id on, and no existing id changes.
- **Stopping.** Training stops when learned tokens plus special tokens reach ``vocab_size``, or earlier when
  no adjacent pair is left (then fewer tokens are returned). An empty corpus gives the 256 byte tokens
  (plus the special tokens); it is not an error.
"""

from __future__ import annotations

import heapq
import operator
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from crayon.patterns import resolve_pattern
from crayon.reference.bpe import BytePairModel
from crayon.reference.pretokenize import compile_pattern, split_specials

N_BYTES = 256
Splitter = Callable[[str], Iterable[str]]


@dataclass
class TrainResult:
    """A trained byte-level BPE vocabulary: the merges in order and tiktoken-style ``ranks`` (bytes -> id)."""

    merges: list[tuple[bytes, bytes]]
    ranks: dict[bytes, int]
    special_tokens: dict[str, int]
    pattern: str


def check_settings(vocab_size: int, special_tokens: str | Sequence[str]) -> tuple[str, ...]:
    """Validate the training settings; return the special tokens as a tuple (a lone str is one token)."""
    specials = (special_tokens,) if isinstance(special_tokens, str) else tuple(special_tokens)
    for token in specials:
        if not isinstance(token, str) or not token:
            raise ValueError(f"special tokens must be non-empty strings, got {token!r}")
    if len(set(specials)) != len(specials):
        raise ValueError(f"special tokens must be distinct, got {specials!r}")
    if operator.index(vocab_size) < N_BYTES + len(specials):
        raise ValueError(
            f"vocab_size={vocab_size!r} is smaller than the {N_BYTES} byte tokens plus "
            f"{len(specials)} special token(s); it must be at least {N_BYTES + len(specials)}"
        )
    return specials


def encode_word(word: str) -> bytes:
    """The UTF-8 bytes of a span; a lone surrogate is refused with ValueError."""
    try:
        return word.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(
            f"training text contains a lone surrogate {word[error.start]!r} in the span {word!r}; "
            "it has no UTF-8 encoding"
        ) from None


def count_words(
    texts: str | Iterable[str], pattern: str | Splitter, special_tokens: Sequence[str] = ()
) -> Counter[bytes]:
    """Count the words (pre-tokenized spans, as UTF-8 bytes) of ``texts``; a lone str is one text.

    ``pattern``: a pattern name or regex, or a function splitting a text into its spans (a tokenizer's own
    normalizer and pre-tokenizer)."""
    return words_of_spans(count_spans(texts, pattern, special_tokens, Counter()))


def count_spans(
    texts: str | Iterable[str], pattern: str | Splitter, special_tokens: Sequence[str], span_counts: Counter[str]
) -> Counter[str]:
    """Add the pre-tokenized spans of ``texts`` to ``span_counts`` and return it."""
    split = compile_pattern(pattern).findall if isinstance(pattern, str) else pattern
    for text in [texts] if isinstance(texts, str) else texts:
        if not isinstance(text, str):
            raise TypeError(f"training texts must be str, got {type(text).__name__}")
        for piece, is_special in split_specials(text, special_tokens):
            if not is_special:
                span_counts.update(split(piece))
    return span_counts


def words_of_spans(span_counts: Counter[str]) -> Counter[bytes]:
    """The span counts keyed by UTF-8 bytes; a lone surrogate is refused with ValueError."""
    try:
        words = list(map(str.encode, span_counts))  # distinct strings have distinct UTF-8 encodings
    except UnicodeEncodeError:
        words = [encode_word(span) for span in span_counts]  # raises, naming the span
    return Counter(dict(zip(words, span_counts.values())))


class Vocabulary:
    """The token bytes of each id, and the id of each token's bytes; ids 0..255 are the single bytes.

    ``tokens`` (id -> bytes) starts from an existing vocabulary instead; new tokens then get ids from
    ``next_id`` on (default: one past the largest id)."""

    def __init__(self, tokens: dict[int, bytes] | None = None, next_id: int | None = None) -> None:
        self.token_bytes = dict(tokens) if tokens is not None else {byte: bytes([byte]) for byte in range(N_BYTES)}
        self.ranks = {token: token_id for token_id, token in self.token_bytes.items()}
        self.next_id = max(self.token_bytes, default=-1) + 1 if next_id is None else next_id

    def merge(self, left: int, right: int) -> int:
        """The id of the concatenation of two tokens: an existing id, or the next one."""
        merged = self.token_bytes[left] + self.token_bytes[right]
        if merged not in self.ranks:
            self.ranks[merged] = self.next_id
            self.token_bytes[self.next_id] = merged
            self.next_id += 1
        return self.ranks[merged]

    def result(self, merges: list[tuple[int, int]], special_tokens: Sequence[str], pattern: str) -> TrainResult:
        """The training result: ``merges`` (pairs of ids) as bytes, special tokens numbered after the tokens."""
        return TrainResult(
            merges=[(self.token_bytes[left], self.token_bytes[right]) for left, right in merges],
            ranks=dict(self.ranks),
            special_tokens={token: self.next_id + i for i, token in enumerate(special_tokens)},
            pattern=resolve_pattern(pattern),
        )


def pair_priority(pair: tuple[int, int], count: int) -> tuple[int, int, int]:
    """Sort key of a candidate merge: the largest key is merged first (highest count, then smallest ids)."""
    return count, -pair[0], -pair[1]


def train_bpe_naive(
    texts: str | Iterable[str],
    vocab_size: int,
    *,
    pattern: str = "cl100k_base",
    special_tokens: str | Sequence[str] = (),
) -> TrainResult:
    """Train byte-level BPE the simple way: recount every pair after every merge (minbpe style)."""
    specials = check_settings(vocab_size, special_tokens)
    word_counts = count_words(texts, pattern, specials)
    words = [list(word) for word in word_counts]
    counts = list(word_counts.values())
    vocab = Vocabulary()
    merges: list[tuple[int, int]] = []
    while len(vocab.ranks) < vocab_size - len(specials):
        pair_counts: Counter[tuple[int, int]] = Counter()
        for word, count in zip(words, counts):
            for pair in zip(word, word[1:]):
                pair_counts[pair] += count
        if not pair_counts:
            break
        best = max(pair_counts, key=lambda pair: pair_priority(pair, pair_counts[pair]))
        new_id = vocab.merge(*best)
        merges.append(best)
        words = [merge_pair(word, best, new_id) for word in words]
    return vocab.result(merges, specials, pattern)


def merge_pair(word: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace the occurrences of ``pair`` in ``word`` by ``new_id``, left to right."""
    merged = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            merged.append(new_id)
            i += 2
        else:
            merged.append(word[i])
            i += 1
    return merged


def train_bpe(
    texts: str | Iterable[str],
    vocab_size: int,
    *,
    pattern: str = "cl100k_base",
    special_tokens: str | Sequence[str] = (),
) -> TrainResult:
    """Train byte-level BPE with the fast exact algorithm; learns the same merges as ``train_bpe_naive``.

    The words are laid end to end as linked lists in parallel arrays (token, prev, next, weight); an inverted
    index maps each pair to the positions of its left token; a max-heap holds candidate pairs with their count
    when pushed. Counts only change around a merge site, so each merge touches only its own occurrences. A
    heap entry whose count no longer matches the pair's true count is stale: it is dropped when popped, and
    pushed again with the true count if that is lower but not zero (a pair's count that grows gets a fresh
    entry at the end of the step, so the top entry, once it is current, is the true best pair).
    """
    specials = check_settings(vocab_size, special_tokens)
    word_counts = count_words(texts, pattern, specials)
    vocab = Vocabulary()
    merges = learn_merges(word_counts, vocab, vocab_size - len(specials))
    return vocab.result(merges, specials, pattern)


def learn_merges(
    word_counts: dict[bytes, int] | dict[tuple[int, ...], int], vocab: Vocabulary, n_tokens: int
) -> list[tuple[int, int]]:
    """Merge pairs of ``word_counts`` until ``vocab`` holds ``n_tokens`` tokens or no pair is left.

    A word is its token ids (its bytes, where each byte is its own token)."""
    token: list[int] = []  # token id at each position; -1 once merged into its left neighbour
    prev: list[int] = []  # position of the previous token of the word, -1 at the word's start
    next_: list[int] = []  # position of the next token of the word, -1 at the word's end
    weight: list[int] = []  # count of the word the position belongs to
    for word, count in word_counts.items():
        start = len(token)
        token.extend(word)
        prev.extend(range(start - 1, start + len(word) - 1))
        next_.extend(range(start + 1, start + len(word) + 1))
        prev[start] = next_[-1] = -1
        weight.extend([count] * len(word))

    pair_counts: Counter[tuple[int, int]] = Counter()
    positions: defaultdict[tuple[int, int], list[int]] = defaultdict(list)
    for i, j in enumerate(next_):
        if j != -1:
            pair_counts[token[i], token[j]] += weight[i]
            positions[token[i], token[j]].append(i)
    heap = [(-count, left, right) for (left, right), count in pair_counts.items()]
    heapq.heapify(heap)

    def add_count(pair: tuple[int, int], delta: int) -> None:
        pair_counts[pair] += delta
        if pair_counts[pair] == 0:
            del pair_counts[pair]

    merges: list[tuple[int, int]] = []
    while len(vocab.ranks) < n_tokens and heap:
        negative_count, left, right = heapq.heappop(heap)
        pair = (left, right)
        true_count = pair_counts.get(pair, 0)
        if -negative_count != true_count:
            if 0 < true_count < -negative_count:
                heapq.heappush(heap, (-true_count, left, right))
            continue
        new_id = vocab.merge(left, right)
        merges.append(pair)
        grown: set[tuple[int, int]] = set()
        for i in sorted(set(positions.pop(pair))):
            j = next_[i]
            if token[i] != left or j == -1 or token[j] != right:
                continue  # an earlier merge of this step (or a past one) changed this site
            w, before, after = weight[i], prev[i], next_[j]
            if before != -1:
                add_count((token[before], left), -w)
                add_count((token[before], new_id), w)
                positions[token[before], new_id].append(before)
                grown.add((token[before], new_id))
            if after != -1:
                add_count((right, token[after]), -w)
                add_count((new_id, token[after]), w)
                positions[new_id, token[after]].append(i)
                grown.add((new_id, token[after]))
            add_count(pair, -w)
            token[i], token[j] = new_id, -1
            next_[i] = after
            if after != -1:
                prev[after] = i
        for grown_pair in grown:
            if grown_pair in pair_counts:
                heapq.heappush(heap, (-pair_counts[grown_pair], *grown_pair))
    return merges


# ------------------------------------------------------------------------------------------------- extension


@dataclass
class Extension:
    """Tokens learned on top of an existing vocabulary: the new merges in order (as bytes) and the ranks of
    the old tokens (unchanged) plus the new ones (in the order learned)."""

    merges: list[tuple[bytes, bytes]]
    ranks: dict[bytes, int]


def check_extension(model: BytePairModel, n_new_tokens: int, first_id: int) -> None:
    """Refuse extension settings that would add no token or give a new token an id the vocabulary uses."""
    if operator.index(n_new_tokens) < 1:
        raise ValueError(f"n_new_tokens must be at least 1, got {n_new_tokens!r}")
    last_id = max(model.token_bytes, default=-1)
    if operator.index(first_id) <= last_id:
        raise ValueError(f"new tokens must get ids after the last token id {last_id}, not from {first_id}")
    missing = [byte for byte in range(N_BYTES) if bytes([byte]) not in model.ranks]
    if missing:
        raise ValueError(
            f"only byte-level BPE vocabularies can be extended; byte {bytes(missing[:1])!r} has no token"
        )


def segment_words(word_counts: dict[bytes, int], model: BytePairModel) -> dict[tuple[int, ...], int]:
    """Each word as the token ids ``model`` encodes it to; words of one token are dropped (nothing to merge)."""
    segmented = {}
    for word, count in word_counts.items():
        ids = tuple(model.encode_span(word))
        if len(ids) > 1:
            segmented[ids] = count
    return segmented


def extend_bpe(
    texts: str | Iterable[str],
    model: BytePairModel,
    n_new_tokens: int,
    *,
    first_id: int,
    pattern: str | Splitter = "cl100k_base",
    special_tokens: Sequence[str] = (),
) -> Extension:
    """Continue BPE training from ``model``: learn up to ``n_new_tokens`` new tokens on ``texts``.

    ``pattern``: the vocabulary's own pre-tokenization (see ``count_words``); ``special_tokens``: text cut
    out first, as in training. Each word of the texts is first encoded by the existing vocabulary; merging
    then goes on from those tokens exactly as in ``train_bpe`` (same counts, tie-break and id reuse: a merge
    whose bytes are already a token adds no id). New tokens get the ids ``first_id, first_id + 1, ...``; no
    existing id changes. Fewer tokens are learned when no adjacent pair is left.

    Example: a model whose ranks hold the bytes and b"ab", extended on "abc abc" by one token from id 300:
    the words "abc" and " abc" are encoded [ab, c] and [" ", ab, c]; (ab, c) occurs twice, so b"abc" gets 300.
    """
    check_extension(model, n_new_tokens, first_id)
    words = segment_words(count_words(texts, pattern, special_tokens), model)
    vocab = Vocabulary(model.token_bytes, next_id=first_id)
    merges = learn_merges(words, vocab, len(vocab.ranks) + n_new_tokens)
    return Extension([(vocab.token_bytes[left], vocab.token_bytes[right]) for left, right in merges], vocab.ranks)

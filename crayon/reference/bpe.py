"""Byte-level BPE encoding with the merge-rank algorithm, written to be read.

A span of text is encoded as UTF-8 bytes. Every byte starts as its own part; then, again and again, the
adjacent pair of parts with the lowest merge rank is merged (the leftmost one when ranks tie), until no
adjacent pair can merge. Each final part is a token.

Where the merge ranks come from:
- tiktoken vocabularies (``merges=None``): the rank of a pair is the rank of its concatenation, which is
  also its token id; a pair whose concatenation is not a token never merges. As in tiktoken, a span that is
  a token as a whole is returned as that one token without running the merges.
- HF tokenizer.json files: the rank of a pair is its position in the ``merges`` list; the merged token's id
  comes from the vocabulary. The whole-span shortcut applies only with ``ignore_merges=True``.
"""

from __future__ import annotations

from typing import Iterator, Sequence

from crayon.errors import UnknownTokenError


class BytePairModel:
    """The BPE model: token bytes <-> ids and the merge rank of adjacent pairs."""

    def __init__(
        self,
        ranks: dict[bytes, int],
        merges: Sequence[tuple[bytes, bytes]] | None = None,
        *,
        ignore_merges: bool | None = None,
    ):
        self.ranks = ranks
        self.merges = None if merges is None else list(merges)
        self.merge_ranks = None if merges is None else {pair: rank for rank, pair in enumerate(self.merges)}
        self.whole_span_lookup = merges is None if ignore_merges is None else ignore_merges
        self.token_bytes = {token_id: token for token, token_id in ranks.items()}

    @property
    def n_tokens(self) -> int:
        return len(self.ranks)

    def merge_rank(self, left: bytes, right: bytes) -> int | None:
        """The rank at which ``left`` and ``right`` merge, or None if they never do."""
        if self.merge_ranks is None:
            return self.ranks.get(left + right)
        return self.merge_ranks.get((left, right))

    def encode_span(self, span: bytes) -> list[int]:
        """Encode one pre-tokenized span."""
        if self.whole_span_lookup and span in self.ranks:
            return [self.ranks[span]]
        parts = [span[i : i + 1] for i in range(len(span))]
        while len(parts) > 1:
            best_rank, best_index = None, -1
            for i in range(len(parts) - 1):
                rank = self.merge_rank(parts[i], parts[i + 1])
                if rank is not None and (best_rank is None or rank < best_rank):
                    best_rank, best_index = rank, i
            if best_rank is None:
                break
            parts[best_index : best_index + 2] = [parts[best_index] + parts[best_index + 1]]
        try:
            return [self.ranks[part] for part in parts]
        except KeyError as missing:
            raise UnknownTokenError(f"byte {missing.args[0]!r} has no token in this vocabulary") from None

    def pair_merges(self) -> Iterator[tuple[int, int, int, int]]:
        """Every merge as ``(left_id, right_id, rank, merged_id)``: the table fast engines index by pair."""
        if self.merges is not None:
            for rank, (left, right) in enumerate(self.merges):
                yield self.ranks[left], self.ranks[right], rank, self.ranks[left + right]
            return
        for token, token_id in self.ranks.items():
            for cut in range(1, len(token)):
                left, right = self.ranks.get(token[:cut]), self.ranks.get(token[cut:])
                if left is not None and right is not None:
                    yield left, right, token_id, token_id

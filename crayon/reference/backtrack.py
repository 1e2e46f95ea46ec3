"""BPE by backtracking, written to be read: van Antwerpen and Neubeck's algorithm (GitHub's ``bpe`` crate,
wordchipper's BpeBacktrack). It gives exactly the tokens of the merge loop in ``crayon.reference.bpe``.

The merge loop builds tokens bottom-up. Backtracking goes left to right: at each position it takes the longest
token that starts there and keeps it if the pair it forms with the token before it is *valid*: BPE encodes the
bytes of the two tokens as exactly those two tokens. Otherwise it tries the token's shorter prefixes; when none
fits, the previous token was wrong, so the position is marked dead, the previous token is dropped and its
next shorter prefix is tried. The BPE encoding of a span is the one tokenization whose adjacent pairs are all
valid, so the search ends on it; a dead position is never entered again, which bounds the work by O(n) for a
span of n bytes (the merge loop is O(n^2)).

Whether a pair is valid is decided without encoding its bytes. Inside any text, BPE builds a token by the
same merges as on the token's own bytes (the merges inside a final token only ever see bytes of that token),
so each token has one merge tree, known from its *canonical split*: the last merge BPE makes on its bytes.
``is_valid_pair`` undoes the two trees latest merge first and checks at every step that no merge across the
boundary would have come earlier.

The condition for exactness: a token's rank must be the time at which it appears, i.e. every token is formed
after both halves of its canonical split. Merge ranks learnt by BPE training satisfy it (the tests check
cl100k_base and o200k_base on every token); ``crayon.jit.backtrack.backtracking_violation`` checks it when the
tables are built, and the jit engine uses a merge encoder for a vocabulary that fails it. Here the splits are
derived the way the ``bpe`` crate does it, in rank order from the pairs already known to be valid, which is
only right under the condition; the jit twin takes them from the merge loop itself, and the tests compare.

Tokens BPE never produces from their own bytes ("unreachable") are left out of the search. tiktoken's
whole-span lookup (a span that is a token is that token) is applied first, as in the merge loop.
"""

from __future__ import annotations

from crayon.errors import UnknownTokenError
from crayon.reference.bpe import BytePairModel

NEVER = float("inf")


class BacktrackEncoder:
    """Encodes spans by backtracking over the reachable tokens of a BPE model."""

    def __init__(self, model: BytePairModel):
        self.model = model
        self.split: dict[int, tuple[int, int]] = {}  # token -> (left, right); a single byte splits into itself
        self.formed_at: dict[int, float] = {}  # token -> rank of its last merge; -1 for single bytes
        for token, token_id in model.ranks.items():
            if len(token) == 1:
                self.split[token_id], self.formed_at[token_id] = (token_id, token_id), -1
        for left, right, rank, merged in sorted(model.pair_merges(), key=lambda merge: merge[2]):
            if merged in self.split or left not in self.split or right not in self.split:
                continue
            if self.is_valid_pair(left, right, limit=rank):
                self.split[merged], self.formed_at[merged] = (left, right), rank
        self.reachable = {model.token_bytes[token]: token for token in self.split}
        self.longest = max(map(len, self.reachable), default=0)

    def is_valid_pair(self, left: int, right: int, limit: float = NEVER) -> bool:
        """Whether BPE encodes the bytes of ``left`` then ``right`` as ``[left, right]``, using merges below ``limit``."""
        while True:
            rank = self.model.merge_rank(self.model.token_bytes[left], self.model.token_bytes[right])
            if rank is not None and rank < limit:
                return False  # this merge across the boundary comes before the state it would destroy ends
            if self.formed_at[left] > self.formed_at[right]:
                limit = self.formed_at[left]  # undo the left token's last merge
                left = self.split[left][1]
            elif self.formed_at[right] < 0:
                return True  # both are single bytes: nothing left to undo
            else:
                limit = self.formed_at[right] + 1  # on a tie the boundary merge is leftmost, so it wins
                right = self.split[right][0]

    def longest_match(self, span: bytes, pos: int) -> int | None:
        """The longest reachable token that ``span[pos:]`` starts with."""
        for end in range(min(len(span), pos + self.longest), pos, -1):
            token = self.reachable.get(span[pos:end])
            if token is not None:
                return token
        return None

    def next_prefix(self, token: int) -> int | None:
        """The longest reachable token that is a proper prefix of ``token``."""
        spelled = self.model.token_bytes[token]
        return self.longest_match(spelled[:-1], 0)

    def encode_span(self, span: bytes) -> list[int]:
        """Encode one pre-tokenized span."""
        if self.model.whole_span_lookup and span in self.model.ranks:
            return [self.model.ranks[span]]
        tokens: list[int] = []
        alive = [True] * (len(span) + 1)  # may a token still end here?
        pos = 0
        token = self.longest_match(span, 0)
        while pos < len(span):
            if token is None:
                raise UnknownTokenError(f"byte {span[pos:pos + 1]!r} has no token in this vocabulary")
            previous = tokens[-1] if tokens else None
            end = pos + len(self.model.token_bytes[token])
            if alive[end] and (previous is None or self.is_valid_pair(previous, token)):
                tokens.append(token)
                pos = end
                token = self.longest_match(span, pos)
            elif self.next_prefix(token) is not None:
                token = self.next_prefix(token)
            else:  # no token fits here after `previous`: it was wrong
                alive[pos] = False
                tokens.pop()
                pos -= len(self.model.token_bytes[previous])
                token = previous
        return tokens

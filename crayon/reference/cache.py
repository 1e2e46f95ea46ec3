"""The piece cache, written to be read: span bytes -> tokens, so that a span seen before costs one lookup.

Text repeats its words, so most spans have been encoded before. The cache is a fixed array of slots, in
buckets of two (open addressing with a probe window of two slots): a span's bucket comes from a hash of its
bytes; a lookup checks the bucket's two slots; an insert puts the new entry in the first slot and moves the
entry there to the second, dropping the one in the second. The cache never grows and never needs clearing.

Only spans of 2 to 16 bytes that encode to 1 to 3 tokens are kept: they are the words that repeat (one byte is
its own token without a lookup; longer spans are rare), and a slot of 32 bytes holds them, two to a cache line. The jit
twin (``crayon.jit.cache``) stores the same entries in the same slots.
"""

from __future__ import annotations

MIN_PIECE_BYTES = 2
MAX_PIECE_BYTES = 16
MAX_PIECE_TOKENS = 3
DEFAULT_BUCKETS = 32768

_MASK64 = (1 << 64) - 1
_MULTIPLIER_LOW = 0x9E3779B97F4A7C15
_MULTIPLIER_HIGH = 0xC2B2AE3D27D4EB4F


def piece_key(span: bytes) -> tuple[int, int]:
    """The span's bytes as two little-endian 64-bit words (bytes 0-7, bytes 8-15)."""
    return int.from_bytes(span[:8], "little"), int.from_bytes(span[8:16], "little")


def piece_bucket(span: bytes, n_buckets: int) -> int:
    """The bucket of a span (``n_buckets`` is a power of two)."""
    low, high = piece_key(span)
    mixed = ((low * _MULTIPLIER_LOW) ^ (high * _MULTIPLIER_HIGH) ^ len(span)) & _MASK64
    mixed = (mixed * _MULTIPLIER_LOW) & _MASK64
    return (mixed >> 32) & (n_buckets - 1)


def is_cacheable(span: bytes, tokens: list[int] | None = None) -> bool:
    """Whether the cache keeps this span (and its encoding)."""
    return MIN_PIECE_BYTES <= len(span) <= MAX_PIECE_BYTES and (tokens is None or 1 <= len(tokens) <= MAX_PIECE_TOKENS)


class PieceCache:
    """A fixed-size map from span bytes to their tokens; old entries are dropped, never the new one."""

    def __init__(self, n_buckets: int = DEFAULT_BUCKETS):
        if n_buckets < 1 or n_buckets & (n_buckets - 1):
            raise ValueError(f"n_buckets must be a power of two, not {n_buckets}")
        self.n_buckets = n_buckets
        self.slots: list[tuple[bytes, tuple[int, ...]] | None] = [None] * (2 * n_buckets)

    def get(self, span: bytes) -> list[int] | None:
        """The cached tokens of ``span``, or None."""
        first = 2 * piece_bucket(span, self.n_buckets)
        for entry in self.slots[first : first + 2]:
            if entry is not None and entry[0] == span:
                return list(entry[1])
        return None

    def put(self, span: bytes, tokens: list[int]) -> None:
        """Remember ``tokens`` for ``span`` if it is cacheable."""
        if not is_cacheable(span, tokens):
            return
        first = 2 * piece_bucket(span, self.n_buckets)
        self.slots[first + 1] = self.slots[first]
        self.slots[first] = (span, tuple(tokens))

    def encode_span(self, span: bytes, encode) -> list[int]:
        """``encode(span)``, through the cache."""
        tokens = self.get(span) if is_cacheable(span) else None
        if tokens is None:
            tokens = encode(span)
            self.put(span, tokens)
        return tokens

"""The piece cache, written to be read: span bytes -> tokens, so that a span seen before costs one lookup.

Text repeats its words, so most spans have been encoded before. The cache is a fixed array of slots, in
buckets of two (open addressing with a probe window of two slots): a span's bucket comes from a hash of its
bytes; a lookup checks the bucket's two slots; an insert puts the new entry in the first slot and moves the
entry there to the second, dropping the one in the second. The cache never grows and never needs clearing.

Only spans of 2 to 16 bytes that encode to 1 to 3 tokens are kept: they are the words that repeat (one byte is
its own token without a lookup), and a slot of 32 bytes holds them, two to a cache line. The jit twin
(``crayon.jit.cache``) stores the same entries in the same slots.

The long-piece caches keep what the piece cache does not: the long-piece cache, spans of 17 to 32 bytes, and
spans of 2 to 16 bytes with a non-ASCII byte that encode to more than 3 tokens (words of non-Latin scripts: a third
of multilingual text's spans, each a full encode on every sight without it); the longer-piece cache, spans of 33 to
256 bytes (runs of CJK or Thai text). Each is direct-mapped: a span's hash picks one row (of 16 or 128 words of 8
bytes), and a new entry replaces the row's old one. A row holds the span's length and token count, its bytes, then
its tokens two to a word; an encoding that does not fit in a row is not kept.
"""

from __future__ import annotations

MIN_PIECE_BYTES = 2
MAX_PIECE_BYTES = 16
MAX_PIECE_TOKENS = 3
DEFAULT_BUCKETS = 65536
LONG_PIECE_BYTES, LONG_ROW_WORDS, DEFAULT_LONG_ROWS = 32, 16, 65536  # the long-piece cache: 128-byte rows, 8 MB
LONGER_PIECE_BYTES, LONGER_ROW_WORDS, DEFAULT_LONGER_ROWS = 256, 128, 4096  # the longer-piece cache: 1 KB rows, 4 MB

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


def long_piece_row(span: bytes, n_rows: int) -> int:
    """The row of a span in a long-piece cache of ``n_rows`` rows (a power of two): a hash of its 8-byte words."""
    mixed = len(span)
    for i in range(0, len(span), 8):
        mixed = ((mixed ^ int.from_bytes(span[i : i + 8], "little")) * _MULTIPLIER_LOW) & _MASK64
        mixed ^= mixed >> 29
    return ((mixed * _MULTIPLIER_HIGH) & _MASK64) >> 32 & (n_rows - 1)


def fits_long_row(row_words: int, length: int, count: int) -> bool:
    """Whether a row of ``row_words`` words holds a span of ``length`` bytes and ``count`` tokens."""
    return 1 + (length + 7) // 8 + (count + 1) // 2 <= row_words


class LongPieceCache:
    """A fixed-size, direct-mapped map from span bytes to their tokens for spans of ``min_bytes`` to ``max_bytes``
    that ``PieceCache`` does not keep (short ASCII spans excepted)."""

    def __init__(self, n_rows: int = DEFAULT_LONG_ROWS, row_words: int = LONG_ROW_WORDS,
                 min_bytes: int = MIN_PIECE_BYTES, max_bytes: int = LONG_PIECE_BYTES):
        if n_rows < 1 or n_rows & (n_rows - 1):
            raise ValueError(f"n_rows must be a power of two, not {n_rows}")
        self.n_rows, self.row_words, self.min_bytes, self.max_bytes = n_rows, row_words, min_bytes, max_bytes
        self.rows: list[tuple[bytes, tuple[int, ...]] | None] = [None] * n_rows

    def keeps(self, span: bytes, tokens: list[int]) -> bool:
        """Whether this cache keeps ``span`` and its encoding."""
        return (self.min_bytes <= len(span) <= self.max_bytes and len(tokens) >= 1
                and fits_long_row(self.row_words, len(span), len(tokens)) and not is_cacheable(span, tokens)
                and (len(span) > MAX_PIECE_BYTES or not span.isascii()))

    def get(self, span: bytes) -> list[int] | None:
        """The cached tokens of ``span``, or None."""
        if not self.min_bytes <= len(span) <= self.max_bytes:
            return None
        entry = self.rows[long_piece_row(span, self.n_rows)]
        return list(entry[1]) if entry is not None and entry[0] == span else None

    def put(self, span: bytes, tokens: list[int]) -> None:
        """Remember ``tokens`` for ``span`` if this cache keeps it, replacing its row's entry."""
        if self.keeps(span, tokens):
            self.rows[long_piece_row(span, self.n_rows)] = (span, tuple(tokens))


def longer_piece_cache(n_rows: int = DEFAULT_LONGER_ROWS) -> LongPieceCache:
    """The longer-piece cache: spans of 33 to 256 bytes."""
    return LongPieceCache(n_rows, LONGER_ROW_WORDS, LONG_PIECE_BYTES + 1, LONGER_PIECE_BYTES)

"""SentencePiece's precompiled character map (HF's ``Precompiled`` normalizer), read and applied as HF applies it.

The map (``precompiled_charsmap``: base64 in a tokenizer.json, bytes in a SentencePiece ``.model``) is a
little-endian uint32 ``n``, then ``n`` bytes of a darts-clone double-array trie (uint32 units) whose keys are
UTF-8 strings and whose values are offsets into the rest: replacement strings, each ended by a NUL byte.

HF walks the text one extended grapheme cluster at a time. A cluster shorter than 6 UTF-8 bytes that some key is a
prefix of becomes the replacement of the *shortest* such key (anything after that key in the cluster is dropped,
as HF does); any other cluster is rewritten character by character, each character that is a key becoming its
replacement. A NUL byte ends the key search. Clusters are the ``regex`` module's ``\\X``.
"""

from __future__ import annotations

import base64
import binascii
import functools
import struct

import numpy as np
import regex

from crayon.errors import FormatError

__all__ = ["CharsMap", "charsmap_from_bytes", "charsmap_from_base64", "charsmap_to_base64"]

_SHORT_CLUSTER_BYTES = 6
_REMEMBERED_CLUSTERS = 1 << 16


class CharsMap:
    """A parsed precompiled character map: ``rewrite(text)`` is HF's ``Precompiled`` normalizer."""

    def __init__(self, blob: bytes):
        if len(blob) < 4:
            raise FormatError("precompiled_charsmap is shorter than its 4-byte trie size")
        (trie_size,) = struct.unpack_from("<I", blob)
        if trie_size % 4 or 4 + trie_size > len(blob) or trie_size == 0:
            raise FormatError(f"precompiled_charsmap: a trie of {trie_size} bytes does not fit in {len(blob)} bytes")
        self.blob = bytes(blob)
        self.trie_size = trie_size
        self.replacements = self.blob[4 + trie_size :]
        self._rewritten: dict[str, str] = {}  # clusters rewritten so far (text repeats its clusters)

    # --- the trie (darts-clone's unit layout) ----------------------------------------------------------

    @functools.cached_property
    def units(self) -> np.ndarray:
        return np.frombuffer(self.blob, "<u4", self.trie_size // 4, 4).astype(np.int64)

    @functools.cached_property
    def _unit_list(self) -> list[int]:
        return self.units.tolist()

    @staticmethod
    def _offset(unit: int) -> int:
        return (unit >> 10) << ((unit & (1 << 9)) >> 6)

    def _child(self, node: int, byte: int) -> int | None:
        """The node reached from ``node`` by ``byte``, or None."""
        units = self._unit_list
        position = node ^ byte
        if position >= len(units) or units[position] & ((1 << 31) | 0xFF) != byte:
            return None
        return position

    def _replacement_at(self, position: int) -> str:
        """The replacement stored for the key ending at trie position ``position`` (a unit with a leaf)."""
        leaf = self._unit_list[position ^ self._offset(self._unit_list[position])]
        start = leaf & ((1 << 31) - 1)
        end = self.replacements.find(b"\0", start)
        try:
            return self.replacements[start : end if end >= 0 else len(self.replacements)].decode("utf-8")
        except UnicodeDecodeError:
            raise FormatError(f"precompiled_charsmap: the replacement at {start} is not UTF-8") from None

    def shortest_rule(self, key: str) -> str | None:
        """The replacement of the shortest key that is a prefix of ``key`` (up to a NUL), or None."""
        units = self._unit_list
        node = self._offset(units[0])
        for byte in key.encode("utf-8"):
            if byte == 0:
                return None
            position = self._child(node, byte)
            if position is None:
                return None
            if (units[position] >> 8) & 1:
                return self._replacement_at(position)
            node = position ^ self._offset(units[position])
        return None

    @functools.cached_property
    def single_char_keys(self) -> np.ndarray:
        """The code points of the characters that are keys on their own."""
        units = self.units
        nodes = np.array([self._offset(int(units[0]))], np.int64)
        prefixes = np.zeros(1, np.int64)  # the bytes walked so far, big-endian in an int
        labels = np.arange(1, 256, dtype=np.int64)
        keys: list[int] = []
        for depth in range(1, 5):
            positions = (nodes[:, None] ^ labels[None, :]).ravel()
            bytes_walked = np.broadcast_to(labels, (len(nodes), 255)).ravel()
            walked = np.repeat(prefixes, 255) * 256 + bytes_walked
            inside = positions < len(units)
            positions, bytes_walked, walked = positions[inside], bytes_walked[inside], walked[inside]
            found = (units[positions] & ((1 << 31) | 0xFF)) == bytes_walked
            positions, walked = positions[found], walked[found]
            lead = walked >> (8 * (depth - 1))
            length = np.where(lead < 0x80, 1, np.where(lead < 0xE0, 2, np.where(lead < 0xF0, 3, 4)))
            complete = length == depth
            has_leaf = (units[positions] >> 8) & 1 == 1
            for value in walked[complete & has_leaf].tolist():
                try:
                    keys.append(ord(value.to_bytes(depth, "big").decode("utf-8")))
                except (UnicodeDecodeError, TypeError):
                    raise FormatError("precompiled_charsmap: a key is not UTF-8") from None
            offsets = (units[positions] >> 10) << ((units[positions] & (1 << 9)) >> 6)
            nodes, prefixes = (positions ^ offsets)[~complete], walked[~complete]
        return np.array(sorted(set(keys)), np.int64)

    @functools.cached_property
    def _stays_alone(self) -> np.ndarray:
        """Per code point: no joining behaviour (Grapheme_Cluster_Break=Other) and no key on its own. Such a
        character followed by another or by the end is a cluster of its own that stays as it is."""
        stays = _joins_no_cluster().copy()
        stays[self.single_char_keys] = False
        return stays

    def rewrite_cluster(self, cluster: str) -> str:
        """HF's rewrite of one extended grapheme cluster."""
        rewritten = self._rewritten.get(cluster)
        if rewritten is None:
            if len(self._rewritten) >= _REMEMBERED_CLUSTERS:
                self._rewritten.clear()
            rewritten = self._rewritten[cluster] = self._rewrite_cluster(cluster)
        return rewritten

    def _rewrite_cluster(self, cluster: str) -> str:
        if len(cluster.encode("utf-8")) < _SHORT_CLUSTER_BYTES:
            whole = self.shortest_rule(cluster)
            if whole is not None:
                return whole
        return "".join(rule if (rule := self.shortest_rule(char)) is not None else char for char in cluster)

    def rewrite(self, text: str) -> str:
        """``text`` normalized as HF's ``Precompiled`` normalizer does."""
        code_points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
        stays = self._stays_alone[code_points]
        skipped = stays & np.append(stays[1:], True)  # positions that are clusters of their own, left alone
        out = []
        done = 0
        for start in np.flatnonzero(~skipped).tolist():
            if start < done:  # inside the cluster rewritten last
                continue
            cluster = _CLUSTER.match(text, start).group()
            out += (text[done:start], self.rewrite_cluster(cluster))
            done = start + len(cluster)
        out.append(text[done:])
        return "".join(out)


_CLUSTER = regex.compile(r"(?s)\X")


@functools.lru_cache(maxsize=1)
def _joins_no_cluster() -> np.ndarray:
    """Per code point (surrogates included, as False): whether its Grapheme_Cluster_Break is Other."""
    every = "".join(map(chr, range(0xD800))) + "".join(map(chr, range(0xE000, 0x110000)))
    other = np.zeros(0x110000, bool)
    joining = [match.start() for match in regex.finditer(r"\P{Grapheme_Cluster_Break=Other}", every)]
    other[:0xD800] = True
    other[0xE000:] = True
    positions = np.array(joining, np.int64)
    other[np.where(positions < 0xD800, positions, positions + 0x800)] = False
    return other


@functools.lru_cache(maxsize=8)
def charsmap_from_bytes(blob: bytes) -> CharsMap:
    """The parsed map of ``blob`` (parsed maps are shared: a map's rewrite caches what it compiled)."""
    return CharsMap(blob)


def charsmap_from_base64(text: str) -> CharsMap:
    """The parsed map of a tokenizer.json's ``precompiled_charsmap`` string."""
    try:
        blob = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as error:
        raise FormatError(f"precompiled_charsmap is not base64: {error}") from None
    return charsmap_from_bytes(blob)


def charsmap_to_base64(charsmap: CharsMap) -> str:
    return base64.b64encode(charsmap.blob).decode("ascii")

"""SentencePiece's precompiled character map (HF's ``Precompiled`` normalizer), read and applied as HF applies it.

The map (``precompiled_charsmap``: base64 in a tokenizer.json, bytes in a SentencePiece ``.model``) is a
little-endian uint32 ``n``, then ``n`` bytes of a darts-clone double-array trie (uint32 units) whose keys are
UTF-8 strings and whose values are offsets into the rest: replacement strings, each ended by a NUL byte.

HF walks the text one extended grapheme cluster at a time. A cluster shorter than 6 UTF-8 bytes that some key is a
prefix of becomes the replacement of the *shortest* such key (anything after that key in the cluster is dropped,
as HF does); any other cluster is rewritten character by character, each character that is a key becoming its
replacement. A NUL byte ends the key search. Clusters are the ``regex`` module's ``\\X``, cut before each consonant
that it joins to a virama that follows no consonant (UAX #29's rule GB9c, which HF follows, joins only those).

SentencePiece itself (a ``.model``'s normalizer, ``longest_rewrites``) walks the text from its start: a
user-defined piece that starts where it stands stays as it is (the longest), else the *longest* key that starts
there becomes its replacement, else one character stays as it is.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import struct
from typing import Iterator

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

    def _key_ends(self, data: bytes, start: int) -> Iterator[tuple[int, int]]:
        """(end, trie position of its leaf) of each key that data[start:] begins with, shortest first."""
        units = self._unit_list
        node = self._offset(units[0])
        for end in range(start, len(data)):
            position = self._child(node, data[end])
            if position is None:
                return
            if (units[position] >> 8) & 1:
                yield end + 1, position
            node = position ^ self._offset(units[position])

    def shortest_rule(self, key: str) -> str | None:
        """The replacement of the shortest key that is a prefix of ``key`` (up to a NUL), or None."""
        data = key.encode("utf-8").split(b"\0", 1)[0]
        for _, position in self._key_ends(data, 0):
            return self._replacement_at(position)
        return None

    @functools.cached_property
    def single_char_keys(self) -> np.ndarray:
        """The code points of the characters that are keys on their own."""
        return self._first_characters[0]

    @functools.cached_property
    def starts_key(self) -> np.ndarray | None:
        """Per code point: whether some key starts with that character; None where a key ends inside a
        character's UTF-8 bytes (a cluster could then match a key whatever its characters)."""
        starts = self._first_characters[1]
        if starts is None:
            return None
        mask = np.zeros(0x110000, bool)
        mask[starts] = True
        return mask

    @functools.cached_property
    def _first_characters(self) -> tuple[np.ndarray, np.ndarray | None]:
        """(the code points that are keys on their own, the code points some key starts with, or None where a key
        ends inside a character), from a walk of the trie's first character of every key."""
        units = self.units
        nodes = np.array([self._offset(int(units[0]))], np.int64)
        prefixes = np.zeros(1, np.int64)  # the bytes walked so far, big-endian in an int
        labels = np.arange(1, 256, dtype=np.int64)
        keys: list[int] = []
        starts: list[int] = []
        partial_key = False
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
            partial_key |= bool((has_leaf & ~complete).any())
            for value, leaf in zip(walked[complete].tolist(), has_leaf[complete].tolist()):
                try:
                    code_point = ord(value.to_bytes(depth, "big").decode("utf-8"))
                except (UnicodeDecodeError, TypeError):
                    raise FormatError("precompiled_charsmap: a key is not UTF-8") from None
                starts.append(code_point)
                if leaf:
                    keys.append(code_point)
            offsets = (units[positions] >> 10) << ((units[positions] & (1 << 9)) >> 6)
            nodes, prefixes = (positions ^ offsets)[~complete], walked[~complete]
        return np.array(sorted(set(keys)), np.int64), None if partial_key else np.array(sorted(set(starts)), np.int64)

    @functools.cached_property
    def _rules(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The characters that are keys on their own, as arrays: (whether each code point is one, their code
        points sorted, where each one's replacement starts in and how long it is, in code points, the
        replacements' code points one after the other). A NUL ends the key search: it has no rule."""
        keys = [key for key in self.single_char_keys.tolist() if key != 0]
        replacements = [np.frombuffer(self.shortest_rule(chr(key)).encode("utf-32-le"), np.uint32) for key in keys]
        lengths = np.array([len(replacement) for replacement in replacements], np.int64)
        has_rule = np.zeros(0x110000, bool)
        has_rule[keys] = True
        flat = np.concatenate([np.zeros(0, np.uint32), *replacements])
        return has_rule, np.array(keys, np.uint32), np.cumsum(lengths) - lengths, lengths, flat

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

    def _rewrite_each(self, code_points: np.ndarray, ruled: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the code points with each ``ruled`` one replaced by its rule, where each input one's output ends)."""
        _, keys, starts, lengths, flat = self._rules
        positions = np.flatnonzero(ruled)
        rules = np.searchsorted(keys, code_points[positions])
        output_lengths = np.ones(len(code_points), np.int64)
        output_lengths[positions] = lengths[rules]
        ends = np.cumsum(output_lengths)
        out = np.repeat(code_points, output_lengths)
        rule_lengths = lengths[rules]
        inside = np.arange(rule_lengths.sum()) - np.repeat(np.cumsum(rule_lengths) - rule_lengths, rule_lengths)
        out[np.repeat(ends[positions] - rule_lengths, rule_lengths) + inside] = flat[np.repeat(starts[rules],
                                                                                          rule_lengths) + inside]
        return out, ends

    def rewrite_changes(self, text: str) -> list[tuple[str, int]] | None:
        """``rewrite(text)`` as (character, change) pairs (``crayon.reference.alignments``), as HF builds them:
        a rule's replacement replaces the cluster or character character by character, any extra characters
        inserted after them, any missing ones removed from the last pair made so far; None where no rule applies
        (HF then keeps the text and its alignments as they are)."""
        changes: list[tuple[str, int]] = []
        modified = False

        def replace(old: str, new: str) -> None:
            changes.extend((char, 0) for char in new)
            grown = len(new) - len(old)
            if grown > 0:
                changes[-grown:] = [(char, 1) for char, _ in changes[-grown:]]
            elif grown < 0 and changes:
                char, change = changes[-1]
                changes[-1] = (char, change + grown)

        starts = self.starts_key
        for cluster in _clusters(text, 0, len(text)):
            if starts is not None and not starts[ord(cluster[0])] and len(cluster) == 1:
                changes.append((cluster, 0))  # no key starts with it
                continue
            if len(cluster.encode("utf-8")) < _SHORT_CLUSTER_BYTES:
                whole = self.shortest_rule(cluster)
                if whole is not None:
                    modified = True
                    replace(cluster, whole)
                    continue
            for char in cluster:
                rule = None if starts is not None and not starts[ord(char)] else self.shortest_rule(char)
                if rule is None:
                    changes.append((char, 0))
                else:
                    modified = True
                    replace(char, rule)
        return changes if modified else None

    @functools.cached_property
    def first_bytes(self) -> np.ndarray:
        """Per byte value: whether some key starts with it (ASCII or a lead byte: keys are UTF-8)."""
        root = self._offset(self._unit_list[0])
        starts = np.array([self._child(root, byte) is not None for byte in range(256)])
        starts[0] = False
        if starts[0x80:0xC0].any():
            raise FormatError("precompiled_charsmap: a key is not UTF-8")
        return starts

    @property
    def kernel_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """What ``crayon.jit.whitespace_normalizer`` takes to apply the map as SentencePiece does: the trie's
        units, ``first_bytes``, ``first_byte_pairs`` and the replacements."""
        return self.units, self.first_bytes, self.first_byte_pairs, self.replacement_bytes

    @functools.cached_property
    def first_byte_pairs(self) -> np.ndarray:
        """Per two bytes b0 b1 (entry b0 << 8 | b1): whether some key is b0 alone or starts with b0 b1."""
        pairs = np.zeros(1 << 16, bool)
        root = self._offset(self._unit_list[0])
        for first in np.flatnonzero(self.first_bytes).tolist():
            position = self._child(root, first)
            if (self._unit_list[position] >> 8) & 1:
                pairs[first << 8 : (first + 1) << 8] = True
                continue
            node = position ^ self._offset(self._unit_list[position])
            seconds = np.arange(256)
            positions = node ^ seconds
            inside = positions < len(self.units)
            inside[inside] = (self.units[positions[inside]] & ((1 << 31) | 0xFF)) == seconds[inside]
            pairs[first << 8 : (first + 1) << 8] = inside
        return pairs

    @functools.cached_property
    def replacement_bytes(self) -> np.ndarray:
        """The replacements, each ended by a NUL, as a uint8 array."""
        return np.frombuffer(self.replacements, np.uint8)

    @functools.cached_property
    def _key_first_bytes(self) -> "re.Pattern[bytes]":
        firsts = bytes(np.flatnonzero(self.first_bytes).tolist())
        return re.compile(b"[" + re.escape(firsts) + b"]" if firsts else b"(?!)")

    def longest_rewrites(self, text: str, kept: frozenset[str] = frozenset()) -> list[tuple[str, bool]]:
        """SentencePiece's own use of the map (its normalizer, not HF's): from the text's start, the longest of
        ``kept`` (a ``.model``'s user-defined pieces) found there stays as it is, else the longest key found there
        becomes its replacement, else one character is kept. ``(piece, whole)`` in order: ``whole`` for a
        replacement or a kept string, the other characters between two of them as one piece."""
        data = text.encode("utf-8", "surrogatepass")
        kept_regex = _longest_first(kept)
        next_kept = kept_regex.search(data) if kept_regex is not None else None
        pieces: list[tuple[str, bool]] = []
        plain_from = pos = 0
        while True:
            if next_kept is not None and next_kept.start() < pos:
                next_kept = kept_regex.search(data, pos)
            found = self._key_first_bytes.search(data, pos)
            if next_kept is not None and (found is None or next_kept.start() <= found.start()):
                start, end = next_kept.span()
                piece = next_kept.group().decode("utf-8", "surrogatepass")
            elif found is not None:
                start = found.start()
                longest = None
                for longest in self._key_ends(data, start):
                    pass
                if longest is None:
                    pos = start + 1  # a character's first byte: the search goes on after it
                    continue
                end, piece = longest[0], self._replacement_at(longest[1])
            else:
                break
            if plain_from < start:
                pieces.append((data[plain_from:start].decode("utf-8", "surrogatepass"), False))
            pieces.append((piece, True))
            plain_from = pos = end
        if plain_from < len(data):
            pieces.append((data[plain_from:].decode("utf-8", "surrogatepass"), False))
        return pieces

    def rewrite(self, text: str) -> str:
        """``text`` normalized as HF's ``Precompiled`` normalizer does.

        A character whose Grapheme_Cluster_Break is Other, Control, LF, LV or LVT, between two such characters (or
        the text's ends), is a cluster of its own: those are rewritten character by character with numpy, as are the
        runs of other characters none of which starts a key; the other runs cluster by cluster."""
        if not text:
            return text
        code_points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
        simple = _own_cluster_mask()[code_points]
        lone = simple.copy()
        lone[1:] &= simple[:-1]
        lone[:-1] &= simple[1:]
        # rewritten character by character: the clusters of their own, and the runs of other characters none of
        # which starts a key (no cluster there has a rule: they stay as they are)
        by_character = lone.copy()
        if self.starts_key is not None and not lone.all():
            run_starts = np.concatenate(([0], np.flatnonzero(lone[1:] != lone[:-1]) + 1))
            keyed = np.logical_or.reduceat(self.starts_key[code_points], run_starts)
            by_character |= np.repeat(~keyed, np.diff(np.append(run_starts, len(code_points))))
        ruled = lone & self._rules[0][code_points]
        if by_character.all() and not ruled.any():
            return text
        out, ends = self._rewrite_each(code_points, ruled)
        if by_character.all():
            return out.tobytes().decode("utf-32-le")
        changes = (np.flatnonzero(by_character[1:] != by_character[:-1]) + 1).tolist()
        pieces = []
        for start, end in zip([0, *changes], [*changes, len(text)]):
            if by_character[start]:
                pieces.append(out[ends[start - 1] if start else 0 : ends[end - 1]].tobytes().decode("utf-32-le"))
            else:
                pieces.append("".join(map(self.rewrite_cluster, _clusters(text, start, end))))
        return "".join(pieces)


_CLUSTER = regex.compile(r"(?s)\X")
# a consonant after a linker (a virama) that follows no consonant (Consonant [Extend Linker]* Linker [Extend Linker]*)
_UNLINKED_CONSONANT = regex.compile(r"(?<!\p{InCB=Consonant}[\p{InCB=Extend}\p{InCB=Linker}]*)"
                                    r"(?<=\p{InCB=Linker}[\p{InCB=Extend}\p{InCB=Linker}]*)\p{InCB=Consonant}")


def _clusters(text: str, start: int, end: int) -> list[str]:
    """The extended grapheme clusters of text[start:end]: ``\\X``'s, cut before each unlinked consonant."""
    clusters = _CLUSTER.findall(text, start, end)
    cuts = [found.start() for found in _UNLINKED_CONSONANT.finditer(text, start, end)]
    if not cuts:
        return clusters
    pieces = []
    for cluster in clusters:
        cluster_end = start + len(cluster)
        while cuts and cuts[0] < cluster_end:
            if cuts[0] > start:
                pieces.append(text[start : cuts[0]])
                start = cuts[0]
            cuts.pop(0)
        pieces.append(text[start:cluster_end])
        start = cluster_end
    return pieces


@functools.lru_cache(maxsize=1)
def _own_cluster_mask() -> np.ndarray:
    """Per code point (surrogates included, as False): whether its Grapheme_Cluster_Break is Other, Control, LF, LV
    or LVT (Hangul syllables). Two such characters side by side are never in one cluster (no rule joins them: CR
    joins LF, L joins LV and LVT, and LV and LVT join V and T, none of which is one of them)."""
    every = "".join(map(chr, range(0xD800))) + "".join(map(chr, range(0xE000, 0x110000)))
    own = np.zeros(0x110000, bool)
    simple = [match.start() for match in regex.finditer(
        r"[\p{Grapheme_Cluster_Break=Other}\p{Grapheme_Cluster_Break=Control}\p{Grapheme_Cluster_Break=LF}"
        r"\p{Grapheme_Cluster_Break=LV}\p{Grapheme_Cluster_Break=LVT}]", every)]
    positions = np.array(simple, np.int64)
    own[np.where(positions < 0xD800, positions, positions + 0x800)] = True
    return own


@functools.lru_cache(maxsize=8)
@functools.cache
def _longest_first(strings: frozenset[str]) -> "re.Pattern[bytes] | None":
    """A regex of the UTF-8 of ``strings`` that matches the longest one where several start, None if empty."""
    if not strings:
        return None
    encoded = sorted((string.encode("utf-8") for string in strings), key=len, reverse=True)
    return re.compile(b"|".join(map(re.escape, encoded)))


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

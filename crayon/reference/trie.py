"""A byte trie of a vocabulary: one node per prefix of a token, one child per next byte.

This is the plain pointer form of the structure every walker uses; ``crayon.reference.dat`` packs it into three
flat arrays (the double-array trie) that the fast engines and cartridges use, with the same walks.

Example: the tokens ``{b"a": 0, b"ab": 1, b"b": 2}`` make the nodes "" (root), "a" (value 0), "ab" (value 1) and
"b" (value 2); ``trie.lookup(b"ab") == 1``, ``trie.lookup(b"x") == -1`` and ``trie.longest_prefix(b"abc") ==
(1, 2)``: token 1 spans the first two bytes.
"""

from __future__ import annotations

from typing import Iterator, Sequence

__all__ = ["Trie", "TrieNode"]


class TrieNode:
    """A prefix: ``value`` is the id of the token it spells (-1 if it is only a prefix), ``children`` maps the next
    byte to the longer prefix, ``weight`` is the total weight of the tokens below it (itself included)."""

    __slots__ = ("children", "value", "depth", "weight")

    def __init__(self, depth: int) -> None:
        self.children: dict[int, TrieNode] = {}
        self.value = -1
        self.depth = depth
        self.weight = 0


class Trie:
    """A byte trie; ``Trie.from_tokens(tokens, ids)`` builds one from a vocabulary."""

    def __init__(self) -> None:
        self.root = TrieNode(0)
        self.size = 1  # nodes, the root included

    @classmethod
    def from_tokens(
        cls, tokens: Sequence[bytes], ids: Sequence[int] | None = None, weights: Sequence[int] | None = None
    ) -> "Trie":
        """The trie of ``tokens`` (token ``tokens[i]`` has id ``ids[i]``, default ``i``, and weight ``weights[i]``)."""
        trie = cls()
        for i, token in enumerate(tokens):
            trie.insert(token, i if ids is None else int(ids[i]), 0 if weights is None else int(weights[i]))
        return trie

    def insert(self, token: bytes, token_id: int, weight: int = 0) -> None:
        """Add ``token`` with id ``token_id``, adding ``weight`` to every node on its path."""
        node = self.root
        node.weight += weight
        for byte in token:
            child = node.children.get(byte)
            if child is None:
                child = node.children[byte] = TrieNode(node.depth + 1)
                self.size += 1
            node = child
            node.weight += weight
        node.value = token_id

    def lookup(self, token: bytes) -> int:
        """The id of exactly ``token``, or -1 when it is not in the vocabulary."""
        node = self.root
        for byte in token:
            node = node.children.get(byte)
            if node is None:
                return -1
        return node.value if token else -1

    def longest_prefix(self, data: bytes, start: int = 0) -> tuple[int, int]:
        """``(id, end)`` of the longest token that ``data[start:]`` starts with; ``(-1, start)`` if none does."""
        best = (-1, start)
        node = self.root
        for position in range(start, len(data)):
            node = node.children.get(data[position])
            if node is None:
                break
            if node.value >= 0:
                best = (node.value, position + 1)
        return best

    def preorder(self) -> Iterator[tuple[bytes, TrieNode]]:
        """Every ``(prefix, node)``, parents before children and children in byte order: prefixes in sorted order."""
        stack = [(b"", self.root)]
        while stack:
            prefix, node = stack.pop()
            yield prefix, node
            for byte in sorted(node.children, reverse=True):
                stack.append((prefix + bytes([byte]), node.children[byte]))

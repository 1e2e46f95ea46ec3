"""Double-array trie (DAT): a vocabulary's byte trie (``crayon.reference.trie``) packed into three flat int32 arrays.

Contract (shared by every engine that walks a DAT, and by the cartridge format):

* ``base``, ``check``, ``values`` have the same length ``n >= 1``; slot 0 is the root state.
* From state ``s`` on byte ``c`` (0..255) the walk goes to ``t = base[s] + c``; the transition exists iff
  ``0 <= t < n and check[t] == s``. ``check[0] == -1`` and every free slot has ``check == -1``, a value no
  state has, so no transition lands on the root or on a free slot. Leaves and free slots have ``base == 0``.
* ``values[t]`` is the id of the token spelled by the path from the root to ``t``, or -1 if that path is only a
  prefix. Walkers treat any negative value as "no token", so a corrupt array gives wrong tokens, never a crash
  (jit walkers also bounds-check ``t`` themselves).

Packing (first fit): every internal trie node gets the smallest ``base >= 1`` such that all the
slots ``base + c`` of its children are still free. Nodes are packed in a chosen order: ``"out_degree"`` (most
children first: hard nodes first, small ones fill the gaps), ``"bfs"`` (level by level) or
``"frequency"`` (heaviest subtree first, by caller-given token weights). Ties are broken by the node's prefix in
lexicographic order (DFS preorder), so the arrays depend only on the vocabulary, never on input order. Because
slots are only ever claimed, a node's slot number is known only once its parent is packed; occupancy is all the
scan needs, so CHECK is filled in after every base is chosen.

The scan starts at ``first_free - c_min`` (a "last free slot" cache: every slot below ``first_free`` is
taken, so no smaller base can fit), which gives the same base as scanning from 1. ``crayon.jit.dat`` builds
identical arrays fast.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from crayon.reference.trie import Trie, TrieNode

PACKING_ORDERS = ("out_degree", "bfs", "frequency")
FREE = -1  # CHECK of the root and of every free slot; VALUES of a slot that is no token


def compile_dat(
    tokens: Sequence[bytes],
    ids: Sequence[int] | None = None,
    *,
    order: str = "out_degree",
    weights: Sequence[int] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pack ``tokens`` (token ``tokens[i]`` has id ``ids[i]``, default ``i``) into ``(base, check, values)``.

    ``weights`` (one integer per token, e.g. corpus counts) is required by ``order="frequency"``.
    """
    ids = list(range(len(tokens))) if ids is None else [int(i) for i in ids]
    validate_vocabulary(tokens, ids)
    if order == "frequency" and (weights is None or len(weights) != len(tokens)):
        raise ValueError('order="frequency" needs one weight per token')
    packing_key = {
        "out_degree": lambda node: -len(node.children),
        "bfs": lambda node: node.depth,
        "frequency": lambda node: -node.weight,
    }
    if order not in packing_key:
        raise ValueError(f"unknown packing order {order!r}; expected one of {PACKING_ORDERS}")
    nodes = [node for _, node in Trie.from_tokens(tokens, ids, weights).preorder()]
    internal = [node for node in nodes if node.children]
    internal.sort(key=packing_key[order])  # stable: ties keep DFS preorder

    node_base: dict[TrieNode, int] = {}
    slots = FreeSlots()
    slots.claim(0)  # the root's slot
    for node in internal:
        labels = sorted(node.children)
        first_slot = slots.next_free(1 + labels[0])  # base >= 1, and only bases whose first child slot is free
        while not all(slots.is_free(first_slot - labels[0] + label) for label in labels[1:]):
            first_slot = slots.next_free(first_slot + 1)
        base = first_slot - labels[0]
        for label in labels:
            slots.claim(base + label)
        node_base[node] = base

    size = slots.end
    base_array = np.zeros(size, dtype=np.int32)
    check_array = np.full(size, FREE, dtype=np.int32)
    values_array = np.full(size, FREE, dtype=np.int32)
    slot = {nodes[0]: 0}
    for node in nodes:  # preorder: a parent's slot is known before its children's
        if node.children:
            base_array[slot[node]] = node_base[node]
        for label, child in node.children.items():
            slot[child] = node_base[node] + label
            check_array[slot[child]] = slot[node]
        values_array[slot[node]] = node.value
    return base_array, check_array, values_array


def validate_vocabulary(tokens: Sequence[bytes], ids: Sequence[int]) -> None:
    """Refuse what a DAT cannot hold: empty or duplicate tokens, ids outside 0..2**31-2, mismatched lengths."""
    if len(ids) != len(tokens):
        raise ValueError(f"{len(tokens)} tokens but {len(ids)} ids")
    if any(len(token) == 0 for token in tokens):
        raise ValueError("the empty token cannot be stored in a DAT")
    if len(set(tokens)) != len(tokens):
        raise ValueError("duplicate token bytes: a DAT maps each byte string to one id")
    if ids and not 0 <= min(ids) <= max(ids) < 2**31 - 1:
        raise ValueError("token ids must lie in 0 .. 2**31-2 (int32 VALUES)")


class FreeSlots:
    """Which array slots are claimed, with a fast "first free slot at or after i" (slots past the end are free).

    ``skip[i] == i`` for a free slot; a claimed slot points further right. Following the pointers (halving the
    path as we go) finds the next free slot in near O(1): a "last free slot" cache for every start.
    """

    def __init__(self) -> None:
        self.skip: list[int] = []
        self.end = 0  # one past the highest claimed slot

    def is_free(self, slot: int) -> bool:
        return slot >= len(self.skip) or self.skip[slot] == slot

    def next_free(self, slot: int) -> int:
        skip = self.skip
        while slot < len(skip) and skip[slot] != slot:
            following = skip[slot]
            if following < len(skip):
                skip[slot] = skip[following]
            slot = following
        return slot

    def claim(self, slot: int) -> None:
        if slot >= len(self.skip):
            self.skip.extend(range(len(self.skip), slot + 1))
        self.skip[slot] = slot + 1
        self.end = max(self.end, slot + 1)


def transition(base: np.ndarray, check: np.ndarray, state: int, byte: int) -> int:
    """The state reached from ``state`` on ``byte``, or -1 when there is no such transition."""
    target = int(base[state]) + byte
    if 0 <= target < len(check) and check[target] == state:
        return target
    return -1


def lookup(base: np.ndarray, check: np.ndarray, values: np.ndarray, token: bytes) -> int:
    """The id of exactly ``token``, or -1 when it is not in the vocabulary."""
    state = 0
    for byte in token:
        state = transition(base, check, state, byte)
        if state < 0:
            return -1
    value = int(values[state])
    return value if value >= 0 and token else -1


def dat_tokens(base: np.ndarray, check: np.ndarray, values: np.ndarray) -> dict[bytes, int]:
    """Every token stored in a well-formed DAT, spelled out by walking it from the root (for tests and tools)."""
    found: dict[bytes, int] = {}
    stack = [(0, b"")]
    while stack:
        state, spelled = stack.pop()
        for byte in range(256):
            child = transition(base, check, state, byte)
            if child > 0:
                word = spelled + bytes([byte])
                if values[child] >= 0:
                    found[word] = int(values[child])
                stack.append((child, word))
    return found

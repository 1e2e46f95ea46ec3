"""Numba helpers over byte ranges ``data[start:end]`` that several kernels share: FNV-1a hashing and equality."""

from __future__ import annotations

import numpy as np

from crayon.jit.lazy import njit

FNV_OFFSET = np.uint64(0xCBF29CE484222325)  # the digest of no bytes
_FNV_PRIME = np.uint64(0x100000001B3)


@njit(cache=True, _nrt=False, inline="always")
def fnv1a(data, start, end, digest):
    """The FNV-1a hash of data[start:end], continuing from ``digest`` (``FNV_OFFSET`` to hash them alone)."""
    for i in range(start, end):
        digest = (digest ^ np.uint64(data[i])) * _FNV_PRIME
    return digest


@njit(cache=True, _nrt=False, inline="always")
def same_bytes(a, a_start, b, b_start, length):
    """Whether a[a_start:a_start + length] holds the same values as b[b_start:b_start + length]."""
    for i in range(length):
        if a[a_start + i] != b[b_start + i]:
            return False
    return True

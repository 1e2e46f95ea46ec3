"""Status codes the jit and GPU kernels return instead of a token count, and the one place that turns them into
exceptions.

Kernels return a count of tokens written (>= 0) or one of these negative codes; they compare against the plain
int constants (numba reads them as compile-time constants), and Python code reads them as ``Status`` members.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np

from crayon.errors import CartridgeError, UnknownTokenError

__all__ = ["Status", "raise_for_status", "UNKNOWN_BYTE", "CORRUPT_TABLES", "NO_PROGRESS", "NEED_SCRATCH"]

UNKNOWN_BYTE = -1  # a byte of the text has no token in the vocabulary
CORRUPT_TABLES = -2  # a kernel found an index outside its arrays
NO_PROGRESS = -3  # the pre-tokenizer returned a span that is empty or past the text
NEED_SCRATCH = -4  # a span is longer than the scratch buffers: grow them and resume


class Status(IntEnum):
    """The negative codes a kernel returns in place of a token count."""

    UNKNOWN_BYTE = UNKNOWN_BYTE
    CORRUPT_TABLES = CORRUPT_TABLES
    NO_PROGRESS = NO_PROGRESS
    NEED_SCRATCH = NEED_SCRATCH


def raise_for_status(status: int, data: np.ndarray, byte_tokens: np.ndarray) -> None:
    """Raise the exception of a kernel's negative ``status`` on the text bytes ``data``; return for a count >= 0.

    ``byte_tokens`` (int32[256], -1 for a byte without a token) names the byte behind ``UNKNOWN_BYTE``.
    """
    if status >= 0:
        return
    if status == Status.NO_PROGRESS:
        raise RuntimeError("the jit pre-tokenizer returned an empty span (a stale numba cache? clear __pycache__)")
    missing = [int(byte) for byte in np.unique(data) if byte_tokens[byte] < 0]
    if status == Status.UNKNOWN_BYTE and missing:
        raise UnknownTokenError(f"byte {bytes(missing[:1])!r} has no token in this vocabulary")
    raise CartridgeError("the BPE tables are corrupt: a kernel found an index outside its arrays")

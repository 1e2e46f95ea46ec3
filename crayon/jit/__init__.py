"""The Numba engine (``backend="jit"``): ``crayon.jit.encode`` and the kernels in its modules.

Importing this package and its modules is cheap: numba is imported when a kernel is first used
(``crayon.jit.lazy``), and the engine's entry kernels run from an ahead-of-time compiled extension where one is
built (``crayon.jit.aot``), so encoding need not import numba at all.
"""

from __future__ import annotations

import weakref
from typing import AbstractSet, Collection, Literal

import numpy as np

__all__ = ["encode"]

_JIT_TWINS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def encode(
    tok,
    text: str,
    *,
    allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
    disallowed_special: Literal["all"] | Collection[str] = "all",
) -> np.ndarray:
    """``tok.encode(text)`` with the jit engine, as a uint32 array (no Python list is built)."""
    if tok.backend != "jit":
        if tok not in _JIT_TWINS:
            _JIT_TWINS[tok] = tok.with_backend("jit")
        tok = _JIT_TWINS[tok]
    return tok.encode_to_numpy(text, allowed_special=allowed_special, disallowed_special=disallowed_special)

"""``njit`` that imports numba on first use, so the ``crayon.jit`` modules import without it.

Importing numba and loading the first kernel from its cache costs about half a second. A process that runs the
ahead-of-time compiled kernels (``crayon.jit.aot``), or only loads a cartridge, should not pay it. Until a kernel
is first used, ``@njit(...)`` leaves a ``LazyKernel`` in its module. The first use of any of them imports numba,
makes every pending ``LazyKernel`` its ``numba.njit`` dispatcher (compiled or loaded from numba's cache on its own
first call, as usual) and puts the dispatcher in its place in the globals of every loaded module, so that numba,
compiling one kernel, finds the kernels it calls as dispatchers (which it can inline). Functions decorated after
that are dispatchers at once.
"""

from __future__ import annotations

import functools
import sys
import threading

_pending: list["LazyKernel"] = []
_lock = threading.RLock()
_numba_njit = None


class LazyKernel:
    """Stands for ``numba.njit(**options)(py_func)`` until numba is imported; calls and attributes go to it."""

    def __init__(self, py_func, options: dict):
        functools.update_wrapper(self, py_func)
        self.py_func = py_func
        self.options = options
        self.dispatcher = None

    def __call__(self, *args):
        use_numba()
        return self.dispatcher(*args)

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        use_numba()
        return getattr(self.dispatcher, name)

    def __repr__(self) -> str:
        return f"<LazyKernel {self.__module__}.{self.__qualname__}>"


def njit(function=None, **options):
    """``numba.njit`` with the same options, but numba is imported when the kernel is first used."""

    def decorate(py_func):
        with _lock:
            if _numba_njit is not None:
                return _numba_njit(**options)(py_func)
            kernel = LazyKernel(py_func, options)
            _pending.append(kernel)
            return kernel

    return decorate if function is None else decorate(function)


def numba_loaded() -> bool:
    """Whether the kernels have been handed to numba (numba is imported)."""
    return _numba_njit is not None


def use_numba() -> None:
    """Import numba and replace every LazyKernel by its dispatcher, in the kernels and in every module's globals."""
    global _numba_njit
    with _lock:
        if _pending or _numba_njit is None:
            from numba import njit as numba_njit

            for kernel in _pending:
                kernel.dispatcher = numba_njit(**kernel.options)(kernel.py_func)
            _pending.clear()
            for module in list(sys.modules.values()):
                namespace = getattr(module, "__dict__", None)
                if namespace is None:
                    continue
                for name, value in list(namespace.items()):
                    if type(value) is LazyKernel:
                        namespace[name] = value.dispatcher
            _numba_njit = numba_njit

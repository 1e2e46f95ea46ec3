"""``njit`` (and ``intrinsic``) that import numba on first use, so the ``crayon.jit`` modules import without it.

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
import warnings

_pending: list["LazyKernel"] = []
_lock = threading.RLock()
_numba = None
_warned_no_cache = False


class LazyKernel:
    """Stands for ``make(numba, py_func)`` (a dispatcher or an intrinsic) until numba is imported; calls and
    attributes go to it."""

    def __init__(self, py_func, make):
        functools.update_wrapper(self, py_func)
        self.py_func = py_func
        self.make = make
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


def _lazy(py_func, make):
    with _lock:
        if _numba is not None:
            return make(_numba, py_func)
        kernel = LazyKernel(py_func, make)
        _pending.append(kernel)
        return kernel


def njit(function=None, **options):
    """``numba.njit`` with the same options, but numba is imported when the kernel is first used."""

    def decorate(py_func):
        return _lazy(py_func, lambda numba, func: _dispatcher(numba, func, options))

    return decorate if function is None else decorate(function)


def _dispatcher(numba, py_func, options: dict):
    """``numba.njit(**options)(py_func)``; where ``cache=True`` finds nowhere to write (no writable
    ``__pycache__`` beside the package, no writable ``NUMBA_CACHE_DIR`` or home), the kernel is compiled in each
    process instead (slower to start, the same kernel) and a warning, once, names the fix."""
    try:
        return numba.njit(**options)(py_func)
    except RuntimeError as error:
        if not options.get("cache") or "no locator" not in str(error):
            raise
        global _warned_no_cache
        if not _warned_no_cache:
            _warned_no_cache = True
            warnings.warn(
                "numba has nowhere to cache crayon's kernels (the package folder and the home folder are not "
                "writable), so each process compiles them again; set NUMBA_CACHE_DIR to a writable folder to cache "
                "them", RuntimeWarning, stacklevel=2,
            )
        return numba.njit(**{**options, "cache": False})(py_func)


def intrinsic(function):
    """``numba.extending.intrinsic``, made when numba is imported (the function's typing and codegen run in
    numba, so they import what they need from it themselves)."""
    return _lazy(function, lambda numba, func: numba.extending.intrinsic(func))


def use_numba() -> None:
    """Import numba and replace every LazyKernel by what it stands for, in the kernels and in every module's
    globals."""
    global _numba
    with _lock:
        if _pending or _numba is None:
            import numba
            import numba.extending

            for kernel in _pending:
                kernel.dispatcher = kernel.make(numba, kernel.py_func)
            _pending.clear()
            for module in list(sys.modules.values()):
                namespace = getattr(module, "__dict__", None)
                if namespace is None:
                    continue
                for name, value in list(namespace.items()):
                    if type(value) is LazyKernel:
                        namespace[name] = value.dispatcher
            _numba = numba

"""The engine's two entry kernels compiled ahead of time into a C extension (``numba.pycc``), so a process that
encodes starts without importing numba.

``encode_docs_kernel`` and ``encode_spans_kernel`` of ``crayon.jit.kernels`` are the same Python functions the
numba dispatchers compile; pycc compiles them, with everything they call, for the host CPU and for the argument
types in ``SIGNATURES``, into one extension module that imports in milliseconds (importing numba and loading its
first cached kernel take about half a second). The module is built once, the first time an engine needs it, into
``$CRAYON_KERNEL_DIR`` or ``~/.cache/crayon/kernels``, under a name that changes with the kernels' source, the
Python and numpy versions and the CPU. Its wrappers release the GIL, as the dispatchers' ``nogil=True`` does.

The extension checks no argument types: a wrong dtype would be read as the declared one. The engine passes the
declared types only (``argument_spec`` is how the tests check it). Where the module cannot be built (no C
compiler, say) the engine warns once and runs the numba dispatchers: the same kernels, the same tokens.
``CRAYON_AOT=0`` skips it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import sys
import tempfile
import threading
import warnings
from pathlib import Path

import numpy as np

INT = "int64"


def _array(dtype: str, ndim: int = 1, writable: bool = True) -> tuple:
    return ("array", np.dtype(dtype).str, ndim, writable)


BPE_TABLES = tuple(_array(dtype, ndim, writable=False) for dtype, ndim in (
    ("i4", 1), ("i8", 2), ("i8", 1), ("u1", 1), ("i8", 1), ("i8", 1), ("i4", 2), ("i4", 2), ("u8", 2), ("i4", 1)))
CHAR_TABLES = (_array("u2"), _array("u1"), _array("u2"))
BUFFERS = (_array("u8", 2), _array("u8"), _array("i8"), _array("u1"))  # piece cache, validity memo, scratch, alive
TEXT = _array("u1", writable=False)
SIGNATURES = {
    # (data, doc_offsets, last_doc, pattern_id, char_tables, bpe, encoder, buffers + (classes, ends), out, counts, resume)
    "encode_docs_kernel": (TEXT, _array("i8"), INT, INT, CHAR_TABLES, BPE_TABLES, INT,
                           BUFFERS + (_array("u1"), _array("i8")), _array("u4"), _array("i8"), _array("i8")),
    # (data, span_ends, bpe, encoder, cache, memo, scratch, alive, out)
    "encode_spans_kernel": (TEXT, _array("i8"), BPE_TABLES, INT, *BUFFERS, _array("u4")),
}
_SOURCES = ("jit", "reference")  # the packages whose modules the kernels call or take constants from

_lock = threading.Lock()
_loaded: dict[str, object] = {}
_build_failure: list[str] = []


def argument_spec(value) -> object:
    """The type of a kernel argument in ``SIGNATURES``' terms (a non-contiguous array has no spec)."""
    if isinstance(value, tuple):
        return tuple(argument_spec(item) for item in value)
    if isinstance(value, np.ndarray):
        if not value.flags.c_contiguous:
            return ("non-contiguous array",)
        return ("array", value.dtype.str, value.ndim, bool(value.flags.writeable))
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return INT
    return (type(value).__name__,)


def kernel_dir() -> Path:
    """Where built kernel modules are kept: ``$CRAYON_KERNEL_DIR``, else ``~/.cache/crayon/kernels``."""
    folder = os.environ.get("CRAYON_KERNEL_DIR")
    return Path(folder) if folder else Path.home() / ".cache" / "crayon" / "kernels"


@functools.cache
def module_name() -> str:
    """The extension's name: a hash of the kernels' sources, the signatures, Python, numpy and the host CPU."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]
    for folder in _SOURCES:
        for path in sorted((package / folder).glob("*.py")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    for part in (repr(SIGNATURES), sys.implementation.cache_tag, importlib.machinery.EXTENSION_SUFFIXES[0],
                 np.__version__, _host_cpu()):
        digest.update(part.encode() + b"\0")
    return "crayon_kernels_" + digest.hexdigest()[:24]


def _host_cpu() -> str:
    """What identifies the CPU the code is compiled for: the model and feature lines of /proc/cpuinfo where
    there is one (cheap), else LLVM's host CPU name and features."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            first_cpu = cpuinfo.read(1 << 16).split("\n\n", 1)[0]
    except OSError:
        first_cpu = ""
    keys = {"vendor_id", "cpu family", "model", "model name", "flags", "CPU implementer", "CPU architecture",
            "CPU variant", "CPU part", "Features"}
    lines = [line for line in first_cpu.splitlines() if line.split(":", 1)[0].strip() in keys]
    if lines:
        return "\n".join(lines)
    import llvmlite.binding as llvm

    return llvm.get_host_cpu_name() + " " + llvm.get_host_cpu_features().flatten()


def load_kernels():
    """The compiled kernel module for this source, Python, numpy and CPU, built first if missing; None if it
    cannot be built (a warning says why, once per process) or ``CRAYON_AOT=0``."""
    if os.environ.get("CRAYON_AOT", "1") == "0":
        return None
    name = module_name()
    with _lock:
        if name in _loaded:
            return _loaded[name]
        path = kernel_dir() / (name + importlib.machinery.EXTENSION_SUFFIXES[0])
        module = _import(name, path)
        if module is None and not _build_failure:
            try:
                build_kernels(name, path)
                module = _import(name, path)
                if module is None:
                    raise ImportError(f"{path} was built but does not load")
            except Exception as error:  # a compiler or pycc problem: the numba dispatchers still run
                _build_failure.append(f"{type(error).__name__}: {error}")
                warnings.warn(f"crayon could not build its ahead-of-time kernels ({_build_failure[0]}); using numba's "
                              "jit kernels (same tokens, slower start). CRAYON_AOT=0 skips the attempt.",
                              RuntimeWarning, stacklevel=3)
        if module is not None:
            _loaded[name] = module
        return module


def _digest_path(path: Path) -> Path:
    return Path(f"{path}.sha256")


def _import(name: str, path: Path):
    """The module at ``path`` if it is the file its build recorded (a truncated shared library can crash the
    loader, so the file is checked before it is loaded); None where it is missing or differs."""
    try:
        content, recorded = path.read_bytes(), _digest_path(path).read_text().strip()
    except OSError:
        return None
    if hashlib.sha256(content).hexdigest() != recorded:
        return None
    spec = importlib.util.spec_from_file_location(name, path)
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except ImportError:
        return None
    if not all(hasattr(module, kernel) for kernel in SIGNATURES):
        return None
    return module


def build_kernels(name: str, path: Path) -> None:
    """Compile the kernels with pycc into the extension ``path`` and record its sha256 beside it (each written to a
    temporary file, then renamed, so a concurrent process never loads half a file)."""
    import llvmlite.binding as llvm
    from numba import types
    from numba.core.compiler import Flags
    from numba.core.errors import NumbaPendingDeprecationWarning

    from crayon.jit import kernels
    from crayon.jit.lazy import use_numba

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumbaPendingDeprecationWarning)
        import numba.pycc.compiler
        from numba.pycc import CC
    use_numba()

    class GilReleasingFlags(Flags):
        """pycc has no nogil option; its wrappers release the GIL when the compile flags say so."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.release_gil = True

    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as building:
        compiler = CC(name, source_module=kernels)
        compiler.output_dir = building
        compiler.target_cpu = llvm.get_host_cpu_name()
        compiler.use_nrt = False  # the kernels allocate nothing
        for kernel, signature in SIGNATURES.items():
            compiler.export(kernel, types.int64(*(_numba_type(spec) for spec in signature)))(
                getattr(kernels, kernel).py_func)
        numba.pycc.compiler.Flags = GilReleasingFlags
        try:
            compiler.compile()
        finally:
            numba.pycc.compiler.Flags = Flags
        built = Path(building) / compiler.output_file
        digest = Path(building) / "digest"
        digest.write_text(hashlib.sha256(built.read_bytes()).hexdigest())
        os.replace(digest, _digest_path(path))
        os.replace(built, path)


def _numba_type(spec):
    from numba import types
    from numba.np.numpy_support import from_dtype

    if spec == INT:
        return types.int64
    if spec[0] == "array":
        _, dtype, ndim, writable = spec
        return types.Array(from_dtype(np.dtype(dtype)), ndim, "C", readonly=not writable)
    return types.BaseTuple.from_types([_numba_type(item) for item in spec])

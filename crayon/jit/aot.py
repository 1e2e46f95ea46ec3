"""The engine's entry kernels, and the trainer's kernels, compiled ahead of time into C extensions
(``numba.pycc``), so a process that encodes or trains never imports numba.

``encode_docs_kernel``, ``encode_spans_kernel`` and ``utf8_error_kernel`` of ``crayon.jit.kernels`` are the same
Python functions the numba dispatchers compile; pycc compiles them, with everything they call, for the host CPU and for the argument
types in ``SIGNATURES``, into one extension module that imports in milliseconds (importing numba and loading its
first cached kernel take about half a second). The module is built once per machine, the first time an engine
needs it (or by ``crayon warmup``), into ``kernel_dir()``, under a name that changes with the kernels' source, the
Python and numpy versions and the CPU. One line on stderr (or the ``crayon`` logger, where logging is configured)
says that it is compiling. Processes starting together build it once: the build holds a file lock in that folder,
and the others wait for it. Its wrappers release the GIL, as the dispatchers' ``nogil=True`` does.

The extension checks no argument types: a wrong dtype would be read as the declared one. The engine passes the
declared types only (``argument_spec`` is how the tests check it). Where the module cannot be built (no C
compiler, say) the process that tried warns and records the failure beside the module (``NAME.failed``), so
later processes run the numba dispatchers without trying again or warning again: the same kernels, the same
tokens. ``crayon warmup`` tries again; ``CRAYON_AOT=0`` skips the module.

The trainer's kernels (``crayon.jit.train``, ``TRAINING``) are a second module, built the same way the first time
a process trains. They allocate, so that module carries numba's small C runtime for arrays (NRT); the encoding
module does not, since reference counting would slow its loops. Numba itself (its compiler and LLVM, well over
100 MB resident) is loaded by neither.

The kernels that build an engine's tables from a vocabulary (``TABLES``: ``crayon.jit.tables.build_bpe_tables`` and
what it calls) are a third module, so that a tokenizer built in a process (``crayon.train``'s, say) does not import
numba either. Their callers go through ``call_kernel``, which runs a kernel from the module where its arguments
have the declared types and by numba otherwise (the same function, the same tables).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

INT = "int64"


def _array(dtype: str, ndim: int = 1, writable: bool = True) -> tuple:
    return ("array", np.dtype(dtype).str, ndim, writable)


BPE_TABLES = tuple(_array(dtype, ndim, writable=False) for dtype, ndim in (
    ("i4", 1), ("i8", 2), ("i8", 1), ("u1", 1), ("i8", 1), ("i8", 1), ("i4", 2), ("i4", 2), ("u8", 2), ("i4", 1)))
CHAR_TABLES = (_array("u2"), _array("u1"), _array("u2"))
# the piece cache, long-piece and longer-piece caches, validity memo, scratch, alive
BUFFERS = (_array("u8", 2), _array("u8", 2), _array("u8", 2), _array("u8"), _array("i8"), _array("u1"))
TEXT = _array("u1", writable=False)
SIGNATURES = {
    # (data, doc_offsets, last_doc, pattern_id, char_tables, bpe, encoder, buffers + (classes, ends), out, counts, resume)
    "encode_docs_kernel": (TEXT, _array("i8"), INT, INT, CHAR_TABLES, BPE_TABLES, INT,
                           BUFFERS + (_array("u1"), _array("i8")), _array("u4"), _array("i8"), _array("i8")),
    # (data, span_ends, bpe, encoder, cache, long_cache, longer_cache, memo, scratch, alive, out)
    "encode_spans_kernel": (TEXT, _array("i8"), BPE_TABLES, INT, *BUFFERS, _array("u4")),
    # (data): the first invalid UTF-8 byte, or -1 (the dataset pipeline checks a batch without the GIL)
    "utf8_error_kernel": (TEXT,),
    # (tokens, addresses of the id objects): a list's address (crayon.jit.id_lists)
    "id_list_kernel": (_array("u4"), _array("u8", writable=False)),
    # (tokens, bounds, addresses of the id objects): the address of a list of lists (crayon.jit.id_lists)
    "id_lists_kernel": (_array("u4"), _array("i8"), _array("u8", writable=False)),
    # (a list's address, tokens, addresses of the id objects): how many were appended (crayon.jit.id_lists)
    "id_list_extend_kernel": (INT, _array("u4"), _array("u8", writable=False)),
}
WORD_BAG = (_array("u1"), _array("i8", 2), _array("i4"), _array("i8"))  # word bytes, word rows, table, sizes
TRAINING_SIGNATURES = {
    # (word bag, data, pattern_id, char_tables) -> the bag's (word bytes, word rows, table)
    "count_words_kernel": ((*WORD_BAG, TEXT, INT, CHAR_TABLES), WORD_BAG[:3]),
    # (word bag, other bag's word bytes, word rows, sizes) -> the first bag's (word bytes, word rows, table)
    "add_bag_kernel": ((*WORD_BAG, _array("u1"), _array("i8", 2), _array("i8")), WORD_BAG[:3]),
    # (token, first_positions, word_weights, n_tokens_wanted, progress_cell, vocab_bytes, vocab_offsets) -> merges
    "learn_merges_kernel": ((_array("i4"), _array("i4"), _array("i8"), INT, _array("i8"), _array("u1"),
                             _array("i8")), _array("i8", 2)),
}
TABLE_SIGNATURES = {
    # (vocab_index, token_offsets, token_bytes)
    "fill_vocab_index": ((_array("i8"), _array("i8"), _array("u1")), None),
    # (vocab_index, token_offsets, token_bytes) -> (left, right, rank, merged) rows
    "tiktoken_pairs": ((_array("i8"), _array("i8"), _array("u1")), _array("i8", 2)),
    # (pair_table, merges)
    "fill_pair_table": ((_array("i8", 2), _array("i8", 2)), None),
    # (byte_tokens, pair_table, token_offsets, token_bytes, token_rows)
    "canonical_splits": ((_array("i4"), _array("i8", 2), _array("i8"), _array("u1"), _array("i4", 2)), None),
    # (dat_rows, prefix_states, token_offsets, token_bytes, token_rows)
    "next_prefixes": ((_array("i4", 2), _array("i4"), _array("i8"), _array("u1"), _array("i4", 2)), None),
    # (short_tokens, token_offsets, token_bytes, keep)
    "fill_short_tokens": ((_array("u8", 2), _array("i8"), _array("u1"), _array("b1")), None),
    # (blob, starts) -> order;  (blob, starts, order) -> (parent, label, depth, node_token)
    "sorted_tokens": ((_array("u1", writable=False), _array("i8")), _array("i8")),
    "build_trie": ((_array("u1", writable=False), _array("i8"), _array("i8")), (_array("i8"),) * 4),
    # (parent, label, degree, node_token, ids, packing_order) -> (base, check, values)
    "pack_trie": ((_array("i8"),) * 6, (_array("i4"),) * 3),
}
_SOURCES = ("jit", "reference")  # the packages whose modules the kernels call or take constants from
BUILD_ESTIMATE = "about 25 s"  # measured on a 2-core machine (bench/startup.py)
LOCK_TIMEOUT_S = 900  # a process waiting for another's build gives up after this and runs the numba kernels

logger = logging.getLogger("crayon")


@dataclass(frozen=True, eq=False)
class KernelSet:
    """Kernels compiled into one extension: ``signatures`` maps each kernel of ``source`` (a module name, or
    several) to its argument specs, or, where ``use_nrt``, to (argument specs, result spec: None for a kernel that
    returns nothing)."""

    what: str  # for the user: "encoding", "training" or "engine table"
    prefix: str  # of the module's name
    source: str | tuple[str, ...]  # the module, or modules, defining the kernels
    signatures: dict
    use_nrt: bool
    estimate: str


ENCODING = KernelSet("encoding", "crayon_kernels_", "crayon.jit.kernels", SIGNATURES, False, BUILD_ESTIMATE)
TRAINING = KernelSet("training", "crayon_training_kernels_", "crayon.jit.train", TRAINING_SIGNATURES, True,
                     "about 15 s")
TABLES = KernelSet("engine table", "crayon_table_kernels_",
                   ("crayon.jit.bpe", "crayon.jit.backtrack", "crayon.jit.cache", "crayon.jit.dat"), TABLE_SIGNATURES,
                   True, "about 10 s")
KERNEL_SETS = (ENCODING, TRAINING, TABLES)

_lock = threading.Lock()
_loaded: dict[str, object] = {}
_build_failure: list[str] = []  # why the encoding module failed to build, once known
_training_build_failure: list[str] = []
_table_build_failure: list[str] = []


def _failures(kernel_set: KernelSet) -> list[str]:
    """Why the module of ``kernel_set`` failed to build in this process (empty until it does)."""
    return {ENCODING: _build_failure, TRAINING: _training_build_failure, TABLES: _table_build_failure}[kernel_set]


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
    """Where built kernel modules are kept: ``$CRAYON_KERNEL_DIR``, else ``kernels`` in the user cache folder
    (``$XDG_CACHE_HOME/crayon/kernels``, default ``~/.cache/crayon/kernels``, on Linux)."""
    folder = os.environ.get("CRAYON_KERNEL_DIR")
    if folder:
        return Path(folder)
    import platformdirs

    return platformdirs.user_cache_path("crayon", appauthor=False) / "kernels"


def module_path(kernel_set: KernelSet = ENCODING) -> Path:
    """The file of the compiled kernel module for this source, Python, numpy and CPU."""
    return kernel_dir() / (module_name(kernel_set) + importlib.machinery.EXTENSION_SUFFIXES[0])


def _stem(path: Path) -> str:
    return path.name.split(".", 1)[0]


def _failure_path(path: Path) -> Path:
    return path.with_name(_stem(path) + ".failed")


def _lock_path(path: Path) -> Path:
    return path.with_name(_stem(path) + ".lock")


def _kernel_set_named(name: str) -> KernelSet:
    return next(kernel_set for kernel_set in KERNEL_SETS if name.startswith(kernel_set.prefix))


def _tell(message: str) -> None:
    """One line for the user: to the ``crayon`` logger where logging is configured, else to stderr."""
    if logger.hasHandlers():
        logger.info(message)
    else:
        print(message, file=sys.stderr, flush=True)


@functools.cache
def module_name(kernel_set: KernelSet = ENCODING) -> str:
    """The extension's name: a hash of the kernels' sources, the signatures, Python, numpy and the host CPU."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]
    for folder in _SOURCES:
        for path in sorted((package / folder).glob("*.py")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    for part in (repr(kernel_set.signatures), sys.implementation.cache_tag, importlib.machinery.EXTENSION_SUFFIXES[0],
                 np.__version__, _host_cpu()):
        digest.update(part.encode() + b"\0")
    return kernel_set.prefix + digest.hexdigest()[:24]


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


def load_kernels(kernel_set: KernelSet = ENCODING):
    """The compiled kernel module for this source, Python, numpy and CPU, built first if missing; None if it
    cannot be built (a warning says why, once per machine where the failure can be recorded) or ``CRAYON_AOT=0``."""
    if os.environ.get("CRAYON_AOT", "1") == "0":
        return None
    name = module_name(kernel_set)
    failure = _failures(kernel_set)
    with _lock:
        if name in _loaded:
            return _loaded[name]
        if failure:
            return None
        path = module_path(kernel_set)
        module = _import(name, path)
        if module is None:
            try:
                module = _build_once(name, path)
            except Exception as error:  # a compiler or pycc problem: the numba dispatchers still run
                failure.append(" ".join(f"{type(error).__name__}: {error}".split()))  # one line
                recorded = not isinstance(error, TimeoutError) and _record_failure(path, failure[0])
                warnings.warn(f"crayon could not build its ahead-of-time kernels ({failure[0]}) for {kernel_set.what}; "
                              "using numba's jit kernels (same results, slower start). "
                              + ("Not retried on this machine: `crayon warmup` retries. " if recorded else "")
                              + "CRAYON_AOT=0 skips the attempt; CRAYON_KERNEL_DIR names a writable folder for them.",
                              RuntimeWarning, stacklevel=3)
            if module is None and not failure:  # a failure recorded by an earlier process: no new warning
                try:
                    failure.append(_failure_path(path).read_text(errors="replace"))
                except OSError as error:
                    failure.append(str(error))
                logger.debug("crayon: the %s kernels failed to build before (%s); using numba's", kernel_set.what,
                             failure[0])
        if module is not None:
            _loaded[name] = module
        return module


def _build_once(name: str, path: Path, *, retry_failed: bool = False):
    """Build the module under a file lock beside it, unless another process built it meanwhile; None where a
    failed build is recorded there (and ``retry_failed`` is false)."""
    from filelock import FileLock, Timeout

    if _failure_path(path).is_file() and not retry_failed:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(_lock_path(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        what = _kernel_set_named(name).what
        _tell(f"crayon: waiting for another process to finish compiling the {what} kernels in {path.parent}")
        try:
            lock.acquire(timeout=LOCK_TIMEOUT_S)
        except Timeout:
            raise TimeoutError(f"{_lock_path(path)} was held for {LOCK_TIMEOUT_S} s") from None
    try:
        module = _import(name, path)
        if module is not None or (_failure_path(path).is_file() and not retry_failed):
            return module
        kernel_set = _kernel_set_named(name)
        _tell(f"crayon: compiling the {kernel_set.what} kernels for this machine, once ({kernel_set.estimate}) into "
              f"{path.parent}")
        started = time.perf_counter()
        build_kernels(name, path)
        module = _import(name, path)
        if module is None:
            raise ImportError(f"{path} was built but does not load")
        _failure_path(path).unlink(missing_ok=True)
        logger.info("crayon: compiled the %s kernels in %.1f s", kernel_set.what, time.perf_counter() - started)
        return module
    finally:
        lock.release()


def _record_failure(path: Path, reason: str) -> bool:
    """Write why the build failed beside the module, so that other processes neither retry nor warn again."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as temporary:
            temporary.write(reason)
        os.replace(temporary.name, _failure_path(path))
        return True
    except OSError:
        return False


def warmup(kernel_set: KernelSet = ENCODING) -> Path:
    """Build the compiled kernels now if they are missing, retrying a build recorded as failed; return the
    module's path. An error (no C compiler, say) is raised, not warned."""
    name, path = module_name(kernel_set), module_path(kernel_set)
    with _lock:
        _failures(kernel_set).clear()
        _loaded[name] = _import(name, path) or _build_once(name, path, retry_failed=True)
    return path


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
    if not all(hasattr(module, kernel) for kernel in _kernel_set_named(name).signatures):
        return None
    return module


def build_kernels(name: str, path: Path, target_cpu: str | None = None) -> None:
    """Compile the kernels with pycc into the extension ``path`` and record its sha256 beside it (each written to a
    temporary file, then renamed, so a concurrent process never loads half a file). The name's prefix says which
    ``KERNEL_SETS`` it holds. ``target_cpu``: an LLVM CPU name ("x86-64" for any x86-64, as a portable build would
    use); default the host's."""
    import llvmlite.binding as llvm
    from numba.core.compiler import Flags
    from numba.core.errors import NumbaPendingDeprecationWarning

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
        kernel_set = _kernel_set_named(name)
        sources = [importlib.import_module(module) for module in _source_modules(kernel_set)]
        compiler = CC(name, source_module=sources[0])
        compiler.output_dir = building
        compiler.target_cpu = target_cpu or llvm.get_host_cpu_name()
        compiler.use_nrt = kernel_set.use_nrt  # the encoding kernels allocate nothing
        for kernel, signature in kernel_set.signatures.items():
            arguments, result = signature if kernel_set.use_nrt else (signature, INT)
            function = next(getattr(module, kernel) for module in sources if hasattr(module, kernel))
            compiler.export(kernel, _numba_type(result)(*(_numba_type(spec) for spec in arguments)))(function.py_func)
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


def _source_modules(kernel_set: KernelSet) -> tuple[str, ...]:
    return (kernel_set.source,) if isinstance(kernel_set.source, str) else kernel_set.source


def call_kernel(kernel_set: KernelSet, kernel, *arguments):
    """``kernel(*arguments)``, ``kernel`` being a numba kernel that ``kernel_set`` exports (``use_nrt`` sets only):
    run from the compiled module (built first if missing) where the arguments have the declared types, else by
    numba (the same function: a cartridge's read-only arrays, say, or where the module cannot be built)."""
    name = kernel.py_func.__name__
    module = load_kernels(kernel_set)
    if module is not None and argument_spec(arguments) == kernel_set.signatures[name][0]:
        return getattr(module, name)(*arguments)
    logger.debug("crayon: %s runs by numba (%s)", name, "no compiled module" if module is None else "other types")
    return kernel(*arguments)


def _numba_type(spec):
    from numba import types
    from numba.np.numpy_support import from_dtype

    if spec is None:
        return types.none
    if spec == INT:
        return types.int64
    if spec[0] == "array":
        _, dtype, ndim, writable = spec
        return types.Array(from_dtype(np.dtype(dtype)), ndim, "C", readonly=not writable)
    return types.BaseTuple.from_types([_numba_type(item) for item in spec])

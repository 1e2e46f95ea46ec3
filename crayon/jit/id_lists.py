"""Python lists of token ids built in one compiled pass (``id_list_kernel``), each id the shared int object of
``id_objects`` (``shared_ids`` gives them with their addresses).

``id_objects(n).take(tokens).tolist()`` touches every id's int object three times (take and tolist each add a
reference, freeing the taken array drops one) through a temporary object array; ``id_list_kernel`` makes the list
and adds each reference once. It makes the list with CPython's C API (``PyList_New``) with the GIL, which it takes
itself (``PyGILState_Ensure``): the compiled kernels are called with the GIL released. It writes the new list's
item array itself, as ``PyList_SET_ITEM`` does, and before CPython 3.12 adds each reference as ``Py_INCREF`` does
(the count is the object's first word; from 3.12 on ``Py_IncRef``, which knows immortal objects, is called):
measured on the English corpora (``bench/longest.py``), a call of ``Py_IncRef`` and ``PyList_SetItem`` per id
took 3-4 of the 9-10 ns an id cost. A free-threaded CPython, whose lists are made otherwise, gets those calls.
``id_list`` is the Python side: the list's address comes back as an integer and becomes the list object here.
``id_lists_kernel`` (``id_lists``) makes a batch's list of lists the same way, each reference added once (cutting one
long list into slices added each a second time, at random places in memory: it took longer than the kernel on
242,877 short lines). ``id_list_extend_kernel`` (``extend_ids``) appends to a
list instead: a long text's parts, encoded on worker threads, are added to one list on the calling thread as
they come, in one pass, the workers never waiting for the GIL to make lists. It grows the list's item array once
per part, as ``list.extend`` does (``PyMem_Realloc``), and writes the items as ``id_list_kernel`` does.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import sys
import sysconfig
import threading
from typing import Iterable, Sequence

import numpy as np

from crayon.errors import CartridgeError
from crayon.jit.cache import prefetch, prefetch_object
from crayon.jit.lazy import intrinsic, njit

__all__ = ["extend_ids", "joined_ids", "id_list", "id_list_extend_kernel", "id_list_kernel", "id_lists", "id_lists_kernel",
           "id_objects", "object_addresses", "shared_ids"]

NO_MEMORY, BAD_ID = -1, 0  # id_list_kernel's failures (a list's address is neither)


def _c_function(builder, name, result, arguments):
    from llvmlite import ir
    from numba.core import cgutils

    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(result, arguments), name)


@intrinsic
def _gil_ensure(typingctx):
    from llvmlite import ir
    from numba.core import types

    def codegen(context, builder, signature, args):
        state = builder.call(_c_function(builder, "PyGILState_Ensure", ir.IntType(32), []), [])
        return builder.zext(state, ir.IntType(64))

    return types.int64(), codegen


@intrinsic
def _gil_release(typingctx, state):
    from llvmlite import ir
    from numba.core import types

    def codegen(context, builder, signature, args):
        release = _c_function(builder, "PyGILState_Release", ir.VoidType(), [ir.IntType(32)])
        builder.call(release, [builder.trunc(args[0], ir.IntType(32))])
        return context.get_dummy_value()

    return types.void(types.int64), codegen


@intrinsic
def _new_list(typingctx, size):
    """PyList_New(size) as an address; 0 with the error cleared where it fails (no memory)."""
    from llvmlite import ir
    from numba.core import types

    def codegen(context, builder, signature, args):
        pointer = ir.IntType(8).as_pointer()
        made = builder.call(_c_function(builder, "PyList_New", pointer, [ir.IntType(64)]), [args[0]])
        with builder.if_then(builder.icmp_unsigned("==", made, ir.Constant(pointer, None)), likely=False):
            builder.call(_c_function(builder, "PyErr_Clear", ir.VoidType(), []), [])
        return builder.ptrtoint(made, ir.IntType(64))

    return types.int64(types.int64), codegen


# PyListObject ends with ob_size, ob_item (the item array) and allocated (its length), all word-sized
LIST_SIZE, LIST_ITEMS, LIST_ALLOCATED = list.__basicsize__ - 24, list.__basicsize__ - 16, list.__basicsize__ - 8
DIRECT_ITEMS = not sysconfig.get_config_var("Py_GIL_DISABLED")  # lists whose item array id_lists may write
INLINE_REFERENCES = DIRECT_ITEMS and sys.version_info < (3, 12)  # no immortal objects: Py_INCREF adds 1


def _list_field(builder, list_address, offset):
    from llvmlite import ir

    word = ir.IntType(64)
    return builder.inttoptr(builder.add(list_address, ir.Constant(word, offset)), word.as_pointer())


@intrinsic
def _list_items(typingctx, list_address):
    """The address of the item array of the list at ``list_address`` (0 where ``DIRECT_ITEMS`` is false)."""
    from llvmlite import ir
    from numba.core import types

    def codegen(context, builder, signature, args):
        if not DIRECT_ITEMS:
            return ir.Constant(ir.IntType(64), 0)
        return builder.load(_list_field(builder, args[0], LIST_ITEMS))

    return types.int64(types.int64), codegen


@intrinsic
def _set_shared_item(typingctx, list_address, items, index, item_address):
    """list[index] = the object at ``item_address``, with a new reference to it (the list's slot was empty);
    ``items`` is ``_list_items`` of the list."""
    from llvmlite import ir
    from numba.core import types

    def codegen(context, builder, signature, args):
        word, pointer = ir.IntType(64), ir.IntType(8).as_pointer()
        if INLINE_REFERENCES:
            count = builder.inttoptr(args[3], word.as_pointer())
            builder.store(builder.add(builder.load(count), ir.Constant(word, 1)), count)
        else:
            builder.call(_c_function(builder, "Py_IncRef", ir.VoidType(), [pointer]), [builder.inttoptr(args[3], pointer)])
        if DIRECT_ITEMS:
            builder.store(args[3], builder.gep(builder.inttoptr(args[1], word.as_pointer()), [args[2]]))
        else:
            set_item = _c_function(builder, "PyList_SetItem", ir.IntType(32), [pointer, word, pointer])
            builder.call(set_item, [builder.inttoptr(args[0], pointer), args[2], builder.inttoptr(args[3], pointer)])
        return context.get_dummy_value()

    return types.void(types.int64, types.int64, types.int64, types.uint64), codegen


@intrinsic
def _grown_items(typingctx, list_address, extra):
    """``_list_items`` of the list at ``list_address`` once its item array has room for ``extra`` more items (its
    length unchanged), as ``list.extend`` grows it; 0 where there is no memory. Only where ``DIRECT_ITEMS``."""
    from llvmlite import ir
    from numba.core import cgutils, types

    def codegen(context, builder, signature, args):
        word, pointer = ir.IntType(64), ir.IntType(8).as_pointer()
        items_field = _list_field(builder, args[0], LIST_ITEMS)
        allocated_field = _list_field(builder, args[0], LIST_ALLOCATED)
        wanted = builder.add(builder.load(_list_field(builder, args[0], LIST_SIZE)), args[1])
        result = cgutils.alloca_once_value(builder, builder.load(items_field))
        with builder.if_then(builder.icmp_signed(">", wanted, builder.load(allocated_field)), likely=False):
            allocated = builder.add(wanted, builder.lshr(wanted, ir.Constant(word, 3)))  # 1/8 more, as CPython
            realloc = _c_function(builder, "PyMem_Realloc", pointer, [pointer, word])
            grown = builder.call(realloc, [builder.inttoptr(builder.load(items_field), pointer),
                                           builder.mul(allocated, ir.Constant(word, 8))])
            grown = builder.ptrtoint(grown, word)
            builder.store(grown, result)
            with builder.if_then(builder.icmp_unsigned("!=", grown, ir.Constant(word, 0))):
                builder.store(grown, items_field)
                builder.store(allocated, allocated_field)
        return builder.load(result)

    return types.int64(types.int64, types.int64), codegen


@intrinsic
def _list_length(typingctx, list_address):
    """len() of the list at ``list_address``."""
    from numba.core import types

    def codegen(context, builder, signature, args):
        return builder.load(_list_field(builder, args[0], LIST_SIZE))

    return types.int64(types.int64), codegen


@intrinsic
def _set_length(typingctx, list_address, length):
    """The list at ``list_address`` holds its first ``length`` items (written, within its item array)."""
    from numba.core import types

    def codegen(context, builder, signature, args):
        builder.store(args[1], _list_field(builder, args[0], LIST_SIZE))
        return context.get_dummy_value()

    return types.void(types.int64, types.int64), codegen


@intrinsic
def _set_new_item(typingctx, list_address, index, item_address):
    """list[index] = the object at ``item_address``, whose new reference the list takes (the slot was empty)."""
    from llvmlite import ir
    from numba.core import types

    def codegen(context, builder, signature, args):
        pointer = ir.IntType(8).as_pointer()
        set_item = _c_function(builder, "PyList_SetItem", ir.IntType(32), [pointer, ir.IntType(64), pointer])
        builder.call(set_item, [builder.inttoptr(args[0], pointer), args[1], builder.inttoptr(args[2], pointer)])
        return context.get_dummy_value()

    return types.void(types.int64, types.int64, types.int64), codegen


@intrinsic
def _append_shared_item(typingctx, list_address, item_address):
    """list.append(the object at ``item_address``) (a new reference); False with the error cleared where it fails
    (no memory)."""
    from llvmlite import ir
    from numba.core import types

    def codegen(context, builder, signature, args):
        pointer = ir.IntType(8).as_pointer()
        append = _c_function(builder, "PyList_Append", ir.IntType(32), [pointer, pointer])
        failed = builder.icmp_signed("!=", builder.call(append, [builder.inttoptr(args[0], pointer),
                                                                 builder.inttoptr(args[1], pointer)]),
                                     ir.Constant(ir.IntType(32), 0))
        with builder.if_then(failed, likely=False):
            builder.call(_c_function(builder, "PyErr_Clear", ir.VoidType(), []), [])
        return builder.not_(failed)

    return types.boolean(types.int64, types.uint64), codegen


@intrinsic
def _drop(typingctx, address):
    """Py_DecRef of the object at ``address``."""
    from llvmlite import ir
    from numba.core import types

    def codegen(context, builder, signature, args):
        pointer = ir.IntType(8).as_pointer()
        builder.call(_c_function(builder, "Py_DecRef", ir.VoidType(), [pointer]), [builder.inttoptr(args[0], pointer)])
        return context.get_dummy_value()

    return types.void(types.int64), codegen


OBJECT_AHEAD = 32  # of 8, 16 and 32 items ahead, 32 measured fastest


@njit(cache=True, _nrt=False, inline="always")
def _prefetch_ahead(tokens, i, addresses):
    """Start loading the int of tokens[i + OBJECT_AHEAD] (its reference count is written next) and the address of
    the int of tokens[i + 2 * OBJECT_AHEAD] (read first, as scattered as the ints): the ints of a large vocabulary
    do not stay in the CPU's caches beside the encoder's tables."""
    if i + 2 * OBJECT_AHEAD < tokens.shape[0]:
        far = tokens[i + 2 * OBJECT_AHEAD]
        if far < addresses.shape[0]:
            prefetch(addresses, far)
        near = tokens[i + OBJECT_AHEAD]
        if near < addresses.shape[0]:
            prefetch_object(addresses[near])


@njit(cache=True, _nrt=False, inline="always")
def _fill(list_address, items, first, tokens, start, stop, addresses):
    """Write the objects at addresses[tokens[i]], i from ``start`` to ``stop``, to the list's empty slots from
    ``first`` on (``items`` is ``_list_items`` of the list); the first i whose token has no address, else ``stop``."""
    for i in range(start, stop):
        _prefetch_ahead(tokens, i, addresses)
        token = tokens[i]
        if token >= addresses.shape[0]:
            return i
        _set_shared_item(list_address, items, first + i - start, addresses[token])
    return stop


@njit(cache=True, nogil=True, _nrt=False)
def id_list_kernel(tokens, addresses):
    """The address of a new list whose item i is the object at addresses[tokens[i]]; NO_MEMORY, or BAD_ID for a
    token with no address (the list is then freed)."""
    state = _gil_ensure()
    made = _new_list(tokens.shape[0])
    if made == 0:
        _gil_release(state)
        return NO_MEMORY
    if _fill(made, _list_items(made), 0, tokens, 0, tokens.shape[0], addresses) != tokens.shape[0]:
        _drop(made)
        _gil_release(state)
        return BAD_ID
    _gil_release(state)
    return made


@njit(cache=True, nogil=True, _nrt=False)
def id_lists_kernel(tokens, bounds, addresses):
    """The address of a new list whose item d is a new list of the objects at addresses[tokens[i]] for i from
    bounds[d] to bounds[d + 1]; NO_MEMORY or BAD_ID as ``id_list_kernel`` (everything made is then freed)."""
    state = _gil_ensure()
    made = _new_list(bounds.shape[0] - 1)
    if made == 0:
        _gil_release(state)
        return NO_MEMORY
    for d in range(bounds.shape[0] - 1):
        start, stop = bounds[d], bounds[d + 1]
        inner = _new_list(stop - start)
        if inner == 0:
            _drop(made)
            _gil_release(state)
            return NO_MEMORY
        _set_new_item(made, d, inner)
        if _fill(inner, _list_items(inner), 0, tokens, start, stop, addresses) != stop:
            _drop(made)
            _gil_release(state)
            return BAD_ID
    _gil_release(state)
    return made


@njit(cache=True, nogil=True, _nrt=False)
def id_list_extend_kernel(list_address, tokens, addresses):
    """Append the objects at addresses[tokens[i]] to the list at ``list_address``; how many were appended: all,
    or fewer where a token has no address (the rest not appended) or memory ran out (NO_MEMORY)."""
    state = _gil_ensure()
    if DIRECT_ITEMS and tokens.shape[0]:
        length = _list_length(list_address)
        items = _grown_items(list_address, tokens.shape[0])
        if items == 0:
            _gil_release(state)
            return NO_MEMORY
        filled = _fill(list_address, items, length, tokens, 0, tokens.shape[0], addresses)
        _set_length(list_address, length + filled)
        _gil_release(state)
        return filled
    for i in range(tokens.shape[0]):
        token = tokens[i]
        if token >= addresses.shape[0]:
            _gil_release(state)
            return i
        if not _append_shared_item(list_address, addresses[token]):
            _gil_release(state)
            return NO_MEMORY
    _gil_release(state)
    return tokens.shape[0]


def object_addresses(objects: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(objects, addresses)``: the addresses of the objects of an object array (read-only uint64), to keep and pass
    together: the addresses are valid while the array lives."""
    pointers = (ctypes.c_uint64 * len(objects)).from_address(objects.ctypes.data) if len(objects) else b""
    addresses = np.frombuffer(pointers, np.uint64).copy()
    addresses.flags.writeable = False
    return objects, addresses


_drop_reference = ctypes.pythonapi.Py_DecRef
_drop_reference.argtypes = [ctypes.py_object]
_drop_reference.restype = None


def id_list(kernel, tokens: np.ndarray, objects_and_addresses: tuple[np.ndarray, np.ndarray]) -> list:
    """``objects.take(tokens).tolist()`` for uint32 ``tokens`` in one pass of ``kernel`` (``id_list_kernel``, as a
    dispatcher or compiled ahead of time), with ``(objects, addresses)`` from ``object_addresses``; CartridgeError
    for a token outside ``objects``."""
    objects, addresses = objects_and_addresses
    return _made_list(kernel(np.ascontiguousarray(tokens, dtype=np.uint32), addresses), len(tokens))


def _made_list(made: int, n_tokens: int) -> list:
    """The list a kernel made, at address ``made``, or the error its failure means."""
    if made == NO_MEMORY:
        raise MemoryError(f"no memory for lists of {n_tokens} token ids")
    if made == BAD_ID:
        raise CartridgeError("the tables are corrupt: a token id outside the vocabulary came out")
    ids = ctypes.cast(made, ctypes.py_object).value  # a second reference to the list
    _drop_reference(ids)  # the kernel's: ``ids`` holds the only one now
    return ids


def extend_ids(kernel, ids: list, tokens: np.ndarray, objects_and_addresses: tuple[np.ndarray, np.ndarray]) -> None:
    """``ids.extend(objects.take(tokens).tolist())`` in one pass of ``kernel`` (``id_list_extend_kernel``), as
    ``id_list``; CartridgeError for a token outside ``objects`` (``ids`` then holds the tokens before it)."""
    if type(ids) is not list:
        raise TypeError(f"extend_ids appends to a list, not {type(ids).__name__}")
    objects, addresses = objects_and_addresses
    appended = kernel(id(ids), np.ascontiguousarray(tokens, dtype=np.uint32), addresses)
    if appended == NO_MEMORY:
        raise MemoryError(f"no memory for {len(tokens)} more token ids")
    if appended != len(tokens):
        raise CartridgeError("the tables are corrupt: a token id outside the vocabulary came out")


def joined_ids(kernel, parts: Iterable[np.ndarray], objects_and_addresses: tuple[np.ndarray, np.ndarray]) -> list[int]:
    """One list of the ids of the parts (uint32 token arrays), each part appended (``extend_ids``) as it comes."""
    ids: list[int] = []
    for tokens in parts:
        extend_ids(kernel, ids, tokens, objects_and_addresses)
    return ids


def id_lists(kernel, tokens: np.ndarray, bounds: Sequence[int] | np.ndarray,
             objects_and_addresses: tuple[np.ndarray, np.ndarray]) -> list[list[int]]:
    """The lists ``objects.take(tokens[bounds[i]:bounds[i + 1]]).tolist()`` in one pass of ``kernel``
    (``id_lists_kernel``), as ``id_list``. The cyclic garbage collector is paused meanwhile: lists of ints form no
    cycles, and the collections that thousands of new lists trigger, older generations included, cost about a
    fifth of a batch of 13,000 short lines (in a loop of such calls, the one collection that follows included)."""
    objects, addresses = objects_and_addresses
    bounds = np.ascontiguousarray(bounds, dtype=np.int64)
    if len(bounds) == 0 or bounds[0] != 0 or bounds[-1] != len(tokens) or (np.diff(bounds) < 0).any():
        raise ValueError("bounds must rise from 0 to the number of tokens")
    with _collector_paused():
        return _made_list(kernel(np.ascontiguousarray(tokens, dtype=np.uint32), bounds, addresses), len(tokens))


_id_objects = np.empty(0, dtype=object)
_id_objects_lock = threading.Lock()


def id_objects(n_ids: int) -> np.ndarray:
    """An object array whose entry i is the int i, for ids 0..n_ids-1: one array for the whole process, grown to
    the largest vocabulary seen, so that a newly loaded tokenizer does not build its own."""
    global _id_objects
    table = _id_objects
    if len(table) < n_ids:
        with _id_objects_lock:
            if len(_id_objects) < n_ids:
                _id_objects = np.array(range(n_ids), dtype=object)
            table = _id_objects
    return table[:n_ids]


def shared_ids(n_ids: int) -> tuple[np.ndarray, np.ndarray]:
    """``object_addresses(id_objects(n_ids))``: what ``id_list`` takes for a vocabulary of ``n_ids`` ids."""
    return object_addresses(id_objects(n_ids))


_gc_pauses = 0  # callers of id_lists cutting lists now; the first pauses the collector, the last resumes it
_gc_was_enabled = False
_gc_lock = threading.Lock()


@contextlib.contextmanager
def _collector_paused():
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()

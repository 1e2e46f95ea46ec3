"""The jit engine's tables: built from a BPE model, checked, and grouped into the tuple the kernels take.

``build_bpe_tables(model)`` makes every array the kernels read (the cartridge sections of a BPE model), and
``check_bpe_tables`` refuses arrays the kernels cannot index safely:

* ``byte_tokens`` int32[256]: the token of each single byte, -1 if it has none.
* ``pair_table`` int64[capacity, 2], open addressing (capacity a power of two): column 0 the key
  ``left << 32 | right`` (-1: empty slot), column 1 the merge packed as ``rank << 32 | merged_id``, so that
  the smaller packed value is the earlier merge.
* ``token_offsets`` int64[n_ids + 1], ``token_bytes`` uint8: token ``i`` is
  ``token_bytes[token_offsets[i]:token_offsets[i + 1]]``, empty for an id that is no token.
* ``vocab_index`` int64[capacity], open addressing by ``bytes_hash`` of each token: ``tag << 32 | id`` (-1:
  empty), for the whole-span lookup.
* ``settings`` int64[2]: ``[whole_span_lookup, TABLES_VERSION]`` (whole_span_lookup 1: a span that is a token is
  that token, as in tiktoken; the version changes whenever the layout of any table does).
* the backtracking encoder's tables, from ``crayon.jit.backtrack.build_backtrack_tables`` (among them what an
  engine would otherwise derive at load: the interleaved DAT, its prefix states and the ``encoder_flags``).
* ``short_tokens`` uint64[capacity, 4]: the tokens of 2 to 16 bytes a span spelling them encodes to, keyed like
  the piece cache (``crayon.jit.cache.build_short_tokens``).

``kernel_tables(tables)`` is the tuple the kernels of ``crayon.jit.kernels`` take.
"""

from __future__ import annotations

import numpy as np

from crayon.errors import CartridgeError
from crayon.jit import aot
from crayon.jit.backtrack import build_backtrack_tables, whole_span_tokens
from crayon.jit.bpe import EMPTY, fill_pair_table, fill_vocab_index, table_capacity, tiktoken_pairs
from crayon.jit.cache import build_short_tokens
from crayon.reference.bpe import BytePairModel

__all__ = ["TABLES_VERSION", "BPE_TABLE_NAMES", "build_bpe_tables", "check_bpe_tables", "kernel_tables"]

TABLES_VERSION = 4
BPE_TABLE_NAMES = ("byte_tokens", "pair_table", "token_offsets", "token_bytes", "vocab_index", "settings", "short_tokens")


def build_bpe_tables(model: BytePairModel) -> dict[str, np.ndarray]:
    """Every array the jit encoders read for ``model``: see the module docstring."""
    n_ids = 1 + max(model.token_bytes, default=-1)
    if n_ids >= 2**31 - 1:
        raise ValueError("token ids must fit in int32")
    lengths = np.zeros(n_ids, np.int64)
    for token_id, token in model.token_bytes.items():
        lengths[token_id] = len(token)
    token_offsets = np.zeros(n_ids + 1, np.int64)
    np.cumsum(lengths, out=token_offsets[1:])
    token_bytes = np.frombuffer(
        b"".join(model.token_bytes.get(token_id, b"") for token_id in range(n_ids)), dtype=np.uint8
    ).copy()
    vocab_index = np.full(table_capacity(len(model.token_bytes)), EMPTY, np.int64)
    aot.call_kernel(aot.TABLES, fill_vocab_index, vocab_index, token_offsets, token_bytes)

    byte_tokens = np.full(256, -1, np.int32)
    for byte in range(256):
        byte_tokens[byte] = model.ranks.get(bytes([byte]), -1)

    if model.merges is None:
        merges = aot.call_kernel(aot.TABLES, tiktoken_pairs, vocab_index, token_offsets, token_bytes)
    else:
        merges = np.array(list(model.pair_merges()), dtype=np.int64).reshape(-1, 4)
    pair_table = np.full((table_capacity(len(merges)), 2), EMPTY, np.int64)
    aot.call_kernel(aot.TABLES, fill_pair_table, pair_table, merges)

    tables = {
        "byte_tokens": byte_tokens,
        "pair_table": pair_table,
        "token_offsets": token_offsets,
        "token_bytes": token_bytes,
        "vocab_index": vocab_index,
        "settings": np.array([int(model.whole_span_lookup), TABLES_VERSION], np.int64),
    }
    tables.update(build_backtrack_tables(tables))
    tables["short_tokens"] = build_short_tokens(token_offsets, token_bytes, whole_span_tokens(tables))
    return tables


def check_bpe_tables(tables: dict[str, np.ndarray]) -> None:
    """Refuse tables the kernels cannot index safely: missing arrays, wrong dtypes or shapes (CartridgeError)."""
    expected = {
        "byte_tokens": (np.int32, 1),
        "pair_table": (np.int64, 2),
        "token_offsets": (np.int64, 1),
        "token_bytes": (np.uint8, 1),
        "vocab_index": (np.int64, 1),
        "settings": (np.int64, 1),
        "short_tokens": (np.uint64, 2),
    }
    for name, (dtype, ndim) in expected.items():
        array = tables.get(name)
        if not isinstance(array, np.ndarray) or array.dtype != dtype or array.ndim != ndim:
            raise CartridgeError(f"BPE table {name!r} is missing or not a {ndim}-D {np.dtype(dtype).name} array")
        if not array.flags.c_contiguous:
            raise CartridgeError(f"BPE table {name!r} is not contiguous")
    for name in ("pair_table", "vocab_index", "short_tokens"):
        size = tables[name].shape[0]
        if size < 1 or size & (size - 1):
            raise CartridgeError(f"BPE table {name!r} must have a power-of-two number of slots, not {size}")
    if tables["pair_table"].shape[1] != 2 or tables["byte_tokens"].shape[0] != 256 or tables["short_tokens"].shape[1] != 4:
        raise CartridgeError("BPE tables have the wrong shape")
    offsets = tables["token_offsets"]
    if offsets.shape[0] < 1 or offsets[0] != 0 or offsets[-1] != len(tables["token_bytes"]) or (offsets[1:] < offsets[:-1]).any():
        raise CartridgeError("BPE table 'token_offsets' does not cut 'token_bytes' into tokens")
    if tables["settings"].shape[0] != 2 or tables["settings"][1] != TABLES_VERSION:
        raise CartridgeError(
            f"BPE tables of another format (crayon.jit.tables.TABLES_VERSION is {TABLES_VERSION}): rebuild them from the "
            "vocabulary (delete a cached cartridge of this vocabulary)"
        )


def kernel_tables(tables: dict[str, np.ndarray]) -> tuple:
    """The tuple the kernels take: (byte_tokens, pair_table, token_offsets, token_bytes, vocab_index, whole_spans,
    token_rows, dat_rows, short_tokens, prefix_states), read-only views of the tables (nothing is derived here).

    A span that is a reachable token encodes to that token anyway, so ``whole_spans[0]`` (``encoder_flags[0]``:
    look whole spans up in ``vocab_index``) is set only where the model has the whole-span lookup and some token
    is unreachable; spans of up to 16 bytes are looked up in ``short_tokens``, which holds the tokens the lookup
    may return.
    """
    arrays = tuple(tables[name] for name in BPE_TABLE_NAMES[:5]) + (
        tables["encoder_flags"][:1], tables["token_rows"], tables["dat_rows"], tables["short_tokens"],
        tables["prefix_states"])
    return tuple(_read_only(array) for array in arrays)


def _read_only(array: np.ndarray) -> np.ndarray:
    """A read-only view: tables built here and tables mapped from a cartridge then share one compiled kernel."""
    view = np.ascontiguousarray(array).view()
    view.flags.writeable = False
    return view

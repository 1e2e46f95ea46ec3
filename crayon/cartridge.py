"""Cartridge files: a vocabulary's arrays in one little-endian file that opens with one ``mmap`` and no parsing.

Layout (every integer little-endian; offsets from the start of the file)::

    0    fixed header, 64 bytes: magic b"\\x89CRAYON\\n", version u32, flags u32 (no flag is defined: must be 0),
         header_size u32 (where the header ends, a multiple of 64), section_count u32, metadata_length u32,
         header_crc u32, file_size u64, then zeros
    64   section table, 64 bytes per section: name (32 bytes ASCII, NUL-padded), dtype code u8, ndim u8 (1 or 2),
         u16 zero, crc32 of the section's bytes u32, offset u64, shape u64 x 2 (the second is 0 when ndim is 1)
    ...  metadata: UTF-8 JSON object (name, pattern, algorithm, special tokens, whatever the writer passes),
         then zeros up to header_size
    ...  sections in table order, each at a 64-byte aligned offset, zeros between them and up to file_size
         (itself a multiple of 64)

``header_crc`` is the zlib crc32 of bytes ``[0, header_size)`` with the crc field itself zeroed: it covers the
fixed header, the section table and the metadata, and is checked at every open. Opening also checks, in time
independent of the file's size, the magic, version, flags, file size, header and section bounds, alignment and
dtype codes, then returns read-only numpy views over the one map. ``verify=True`` also checks every section's
crc32, that all padding is zero, and the structural invariants of the known sections below (and of any section
family an engine registered with ``register_section_check``), so it refuses any changed byte.

Known sections:

* ``dat.base``, ``dat.check``, ``dat.values``: int32 double-array trie (see ``crayon.reference.dat``).
* ``vocab.bytes`` (uint8) and ``vocab.offsets`` (int64, one more than the number of ids): token ``i`` is
  ``vocab.bytes[offsets[i]:offsets[i + 1]]``; an id that is no token has empty bytes. Built by ``vocab_sections``.

Engines add their own arrays under their own prefix (e.g. ``bpe.``); names are free-form ASCII up to 32 bytes.

Crayon v2 files (the format of Crayon's C++ original) (``.dat``: 12-byte header with magic 0x59415243, version 2 and the node count, then
BASE, CHECK, VALUES as int32; beside a ``.json`` vocabulary) are read by ``read_seed_v2``.
"""

from __future__ import annotations

import errno
import glob
import json
import mmap as mmap_module
import os
import struct
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from crayon.errors import CartridgeError

MAGIC = b"\x89CRAYON\n"
SUFFIX = ".crayon"
STALE_TEMPORARY_SECONDS = 3600  # a live write takes seconds: an older temporary file is a killed writer's
VERSION = 1
ALIGNMENT = 64
MAX_NAME_BYTES = 32

BASE, CHECK, VALUES = "dat.base", "dat.check", "dat.values"
VOCAB_BYTES, VOCAB_OFFSETS = "vocab.bytes", "vocab.offsets"

_FIXED = struct.Struct("<8sIIIIIIQ")  # magic, version, flags, header_size, section_count, metadata_length, crc, size
_ENTRY = struct.Struct("<32sBBHIQQQ")  # name, dtype code, ndim, zero, crc32, offset, shape[0], shape[1]
_CRC_FIELD = slice(28, 32)
_DTYPES = {
    1: np.dtype("u1"), 2: np.dtype("i1"), 3: np.dtype("<u2"), 4: np.dtype("<i2"), 5: np.dtype("<u4"),
    6: np.dtype("<i4"), 7: np.dtype("<u8"), 8: np.dtype("<i8"), 9: np.dtype("<f4"), 10: np.dtype("<f8"),
}  # fmt: skip
_DTYPE_CODES = {dtype: code for code, dtype in _DTYPES.items()}


def _aligned(size: int) -> int:
    return -(-size // ALIGNMENT) * ALIGNMENT


# --------------------------------------------------------------------------------------------------- writing


def cartridge_path(path: str | os.PathLike) -> Path:
    """The file a cartridge named ``path`` is written to: ``path`` with ``.crayon`` appended when it lacks it
    (``save("model")`` writes ``model.crayon``, which ``crayon.load("model")`` finds)."""
    path = Path(path)
    return path if path.name.endswith(SUFFIX) else path.with_name(path.name + SUFFIX)


def check_writable(path: str | os.PathLike) -> Path:
    """The cartridge path for ``path`` (``cartridge_path``); raises OSError naming it when it cannot be written
    (a missing or read-only folder, a folder in its place), so long work can check before it starts."""
    path = cartridge_path(path)
    folder = path.parent
    if not folder.is_dir():
        raise FileNotFoundError(errno.ENOENT, f"the folder {folder} does not exist", str(path))
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "a folder is in the way", str(path))
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, f"the folder {folder} is not writable", str(path))
    return path


def write_cartridge(path: str | os.PathLike, metadata: Mapping, sections: Mapping[str, np.ndarray]) -> None:
    """Write a cartridge atomically: a temporary ``.NAME.*.tmp`` file in the same folder, renamed over ``path``.

    The file gets the mode a new file gets under the umask. Temporary files that a killed writer left behind
    (older than ``STALE_TEMPORARY_SECONDS``) are removed. A failure raises OSError naming ``path``."""
    path = Path(path)
    try:
        metadata_bytes = json.dumps(dict(metadata), ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as error:
        raise CartridgeError(f"cartridge metadata must be JSON-serializable: {error}") from None
    arrays = {name: _storable(name, array) for name, array in sections.items()}

    header_size = _aligned(ALIGNMENT + _ENTRY.size * len(arrays) + len(metadata_bytes))
    entries, offset = [], header_size
    for name, array in arrays.items():
        shape = (*array.shape, 0) if array.ndim == 1 else array.shape
        crc = zlib.crc32(_raw_bytes(array))
        entries.append(_ENTRY.pack(name.encode("ascii"), _DTYPE_CODES[array.dtype], array.ndim, 0, crc, offset, *shape))
        offset = _aligned(offset + array.nbytes)
    header = bytearray(header_size)
    header[: _FIXED.size] = _FIXED.pack(MAGIC, VERSION, 0, header_size, len(arrays), len(metadata_bytes), 0, offset)
    table_end = ALIGNMENT + _ENTRY.size * len(arrays)
    header[ALIGNMENT:table_end] = b"".join(entries)
    header[table_end : table_end + len(metadata_bytes)] = metadata_bytes
    header[_CRC_FIELD] = struct.pack("<I", zlib.crc32(header))

    _remove_stale_temporaries(path)
    try:
        descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as error:
        raise type(error)(error.errno, error.strerror, str(path)) from None  # the user's path, not the temporary
    try:
        with os.fdopen(descriptor, "wb") as handle:
            os.fchmod(handle.fileno(), 0o666 & ~_umask())  # mkstemp makes it 0600
            handle.write(header)
            for array in arrays.values():
                handle.write(_raw_bytes(array))
                handle.write(bytes(_aligned(array.nbytes) - array.nbytes))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException as error:
        os.unlink(temporary)
        if isinstance(error, OSError):
            raise type(error)(error.errno, error.strerror, str(path)) from None  # the user's path, not the temporary
        raise


def _umask() -> int:
    """The process's umask (read from /proc where there is one: setting it to read it races with other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _remove_stale_temporaries(path: Path) -> None:
    """Remove ``.NAME.*.tmp`` files of ``path`` older than ``STALE_TEMPORARY_SECONDS`` (a writer killed mid-write)."""
    now = time.time()
    for leftover in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        try:
            if now - leftover.stat().st_mtime > STALE_TEMPORARY_SECONDS:
                leftover.unlink()
        except OSError:  # another process removed it, or the folder is read-only: not this write's concern
            pass


def _raw_bytes(array: np.ndarray) -> np.ndarray:
    return array.reshape(-1).view(np.uint8)


def _storable(name: str, array: np.ndarray) -> np.ndarray:
    """``array`` as the contiguous little-endian array the file holds; refuses bad names, dtypes and shapes."""
    if not name or len(name) > MAX_NAME_BYTES or not name.isascii() or not name.isprintable():
        raise CartridgeError(f"section name {name!r} must be 1 to {MAX_NAME_BYTES} printable ASCII characters")
    array = np.asarray(array)
    dtype = np.dtype("u1") if array.dtype == np.bool_ else array.dtype.newbyteorder("<")
    if dtype not in _DTYPE_CODES or array.ndim not in (1, 2):
        raise CartridgeError(f"section {name!r}: {array.dtype} arrays of {array.ndim} dimensions cannot be stored")
    return np.ascontiguousarray(array, dtype=dtype)


def vocab_sections(tokens: Mapping[int, bytes]) -> dict[str, np.ndarray]:
    """``vocab.bytes`` and ``vocab.offsets`` for ids ``0 .. max id`` (ids that are no token get empty bytes)."""
    size = max(tokens, default=-1) + 1
    if size and min(tokens) < 0:
        raise CartridgeError("token ids must be non-negative")
    lengths = np.zeros(size + 1, dtype=np.int64)
    for token_id, token in tokens.items():
        lengths[token_id + 1] = len(token)
    blob = b"".join(tokens.get(token_id, b"") for token_id in range(size))
    return {VOCAB_BYTES: np.frombuffer(blob, dtype=np.uint8), VOCAB_OFFSETS: np.cumsum(lengths)}


# --------------------------------------------------------------------------------------------------- reading


class Cartridge:
    """An open cartridge: ``metadata`` (dict) and ``sections`` (name -> read-only numpy view over one map)."""

    def __init__(self, path: Path, metadata: dict, sections: dict[str, np.ndarray], data: mmap_module.mmap | bytes,
                 entries: list[tuple]):
        self.path = path
        self.metadata = metadata
        self.sections = sections
        self._mapping = data
        self._entries = entries

    def verify_checksums(self) -> None:
        """Check every section's crc32 and that all padding is zero (reads the whole file; ``CartridgeError``)."""
        view = memoryview(self._mapping)
        try:
            previous_end = _FIXED.unpack_from(view, 0)[3]
            for name, dtype, shape, offset, section_crc in self._entries:
                if _nonzero(view[previous_end:offset]):
                    raise CartridgeError(f"{self.path}: non-zero padding before section {name!r}")
                previous_end = offset + _count(shape) * dtype.itemsize
                if zlib.crc32(view[offset:previous_end]) != section_crc:
                    raise CartridgeError(f"{self.path}: section {name!r} checksum mismatch (corrupt data)")
            if _nonzero(view[previous_end:]):
                raise CartridgeError(f"{self.path}: non-zero padding at the end of the file")
        finally:
            view.release()

    def close(self) -> None:
        """Drop the views and unmap the file; a view the caller still holds keeps the map alive until it dies."""
        self.sections = {}
        _unmap(self._mapping)

    def __enter__(self) -> Cartridge:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Cartridge({str(self.path)!r}, sections={sorted(self.sections)})"


def open_cartridge(path: str | os.PathLike, *, verify: bool = False, mmap: bool = True) -> Cartridge:
    """Map a cartridge and return its views; raises ``CartridgeError`` on any malformed header or section table.

    ``verify=True`` also checks every checksum, the padding and the known sections' invariants (reads the
    whole file). ``mmap=False`` reads the file into memory instead of mapping it: a mapped file must not be
    truncated or rewritten in place while it is open (the process would get SIGBUS), a file read into memory
    can be (Crayon itself only ever replaces a cartridge by renaming a new file over it).
    """
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size < ALIGNMENT:
                raise CartridgeError(f"{path}: {size} bytes is too short for a cartridge")
            if mmap:
                data = mmap_module.mmap(handle.fileno(), 0, access=mmap_module.ACCESS_READ)
            else:
                data = handle.read()
                size = len(data)
    except OSError as error:
        raise CartridgeError(f"{path}: cannot read the cartridge: {error}") from None
    try:
        metadata, entries = _read_header(path, data, size)
        sections = {
            name: np.frombuffer(data, dtype, count=_count(shape), offset=offset).reshape(shape)
            for name, dtype, shape, offset, _ in entries
        }
        cartridge = Cartridge(path, metadata, sections, data, entries)
        if verify:
            _verify(cartridge)
        return cartridge
    except BaseException:
        _unmap(data)
        raise


def _unmap(data: mmap_module.mmap | bytes) -> None:
    if isinstance(data, bytes):
        return
    try:
        data.close()
    except BufferError:  # numpy views still exist: the map goes when the last of them does
        pass


def _read_header(path: Path, mapping: mmap_module.mmap | bytes, size: int):
    magic, version, flags, header_size, count, metadata_length, crc, file_size = _FIXED.unpack_from(mapping, 0)
    if magic != MAGIC:
        raise CartridgeError(f"{path}: not a Crayon cartridge (bad magic bytes)")
    if version != VERSION:
        raise CartridgeError(f"{path}: cartridge format version {version}; this Crayon reads version {VERSION}")
    if flags:
        raise CartridgeError(f"{path}: unknown cartridge flags {flags:#x}")
    if file_size != size:
        raise CartridgeError(f"{path}: the header says {file_size} bytes but the file has {size} (truncated?)")
    table_end = ALIGNMENT + _ENTRY.size * count
    if header_size % ALIGNMENT or not table_end + metadata_length <= header_size <= size:
        raise CartridgeError(f"{path}: header size {header_size} does not fit the file")
    header = bytearray(mapping[:header_size])
    header[_CRC_FIELD] = bytes(4)
    if zlib.crc32(header) != crc:
        raise CartridgeError(f"{path}: header checksum mismatch (corrupt header, section table or metadata)")
    try:
        metadata = json.loads(bytes(header[table_end : table_end + metadata_length]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise CartridgeError(f"{path}: metadata is not UTF-8 JSON") from None
    if not isinstance(metadata, dict):
        raise CartridgeError(f"{path}: metadata must be a JSON object")

    entries, previous_end = [], header_size
    for index in range(count):
        entry = _ENTRY.unpack_from(mapping, ALIGNMENT + _ENTRY.size * index)
        raw_name, code, ndim, zero, section_crc, offset, rows, columns = entry
        name = raw_name.rstrip(b"\0").decode("ascii", errors="replace")
        if not name or not name.isprintable() or b"\0" in raw_name.rstrip(b"\0") or any(name == e[0] for e in entries):
            raise CartridgeError(f"{path}: section {index} has a bad or repeated name {raw_name!r}")
        if code not in _DTYPES or ndim not in (1, 2) or zero or (ndim == 1 and columns):
            raise CartridgeError(f"{path}: section {name!r} has an unknown dtype code {code} or shape")
        shape = (rows,) if ndim == 1 else (rows, columns)
        nbytes = _count(shape) * _DTYPES[code].itemsize
        if offset % ALIGNMENT or offset < previous_end or offset + nbytes > size:
            raise CartridgeError(f"{path}: section {name!r} lies outside the file or overlaps another")
        entries.append((name, _DTYPES[code], shape, offset, section_crc))
        previous_end = offset + nbytes
    return metadata, entries


def _count(shape: tuple[int, ...]) -> int:
    return shape[0] if len(shape) == 1 else shape[0] * shape[1]


# --------------------------------------------------------------------------------------------------- verifying


SectionCheck = Callable[[Mapping[str, np.ndarray]], None]
_SECTION_CHECKS: dict[str, SectionCheck] = {}


def register_section_check(prefix: str, check: SectionCheck) -> None:
    """Have ``verify=True`` run ``check(sections)`` on cartridges with a section named ``prefix...``.

    The check raises ``CartridgeError`` (or ``ValueError``) describing the first broken invariant.
    """
    _SECTION_CHECKS[prefix] = check


def _verify(cartridge: Cartridge) -> None:
    cartridge.verify_checksums()
    for prefix, check in _SECTION_CHECKS.items():
        if any(name.startswith(prefix) for name in cartridge.sections):
            try:
                check(cartridge.sections)
            except ValueError as error:
                raise CartridgeError(f"{cartridge.path}: {error}") from None


def _nonzero(padding: memoryview) -> bool:
    return bool(np.frombuffer(padding, dtype=np.uint8).any())


def check_vocab_sections(sections: Mapping[str, np.ndarray]) -> None:
    """Invariants of ``vocab.bytes`` / ``vocab.offsets``: offsets start at 0, never decrease, end at the blob's end."""
    blob, offsets = sections.get(VOCAB_BYTES), sections.get(VOCAB_OFFSETS)
    if blob is None or offsets is None:
        raise CartridgeError(f"{VOCAB_BYTES} and {VOCAB_OFFSETS} come together")
    if blob.dtype != np.uint8 or blob.ndim != 1 or offsets.dtype != np.int64 or offsets.ndim != 1 or not len(offsets):
        raise CartridgeError("vocab sections have the wrong dtype or shape")
    if offsets[0] != 0 or offsets[-1] != len(blob) or (np.diff(offsets) < 0).any():
        raise CartridgeError(f"{VOCAB_OFFSETS} must rise from 0 to the length of {VOCAB_BYTES}")


def check_dat_sections(sections: Mapping[str, np.ndarray]) -> None:
    """Invariants of a DAT (see ``crayon.reference.dat``); with a vocabulary, also that each state spells its token."""
    if any(name not in sections for name in (BASE, CHECK, VALUES)):
        raise CartridgeError(f"{BASE}, {CHECK} and {VALUES} come together")
    base, check, values = (sections[name] for name in (BASE, CHECK, VALUES))
    if not all(a.dtype == np.int32 and a.ndim == 1 for a in (base, check, values)):
        raise CartridgeError("DAT arrays must be 1-D int32")
    n = len(check)
    if not (len(base) == len(values) == n >= 1):
        raise CartridgeError("DAT arrays must share one length >= 1")
    if check[0] != -1 or values[0] != -1:
        raise CartridgeError("the DAT root must have CHECK -1 and no token")
    if ((check < -1) | (check >= n)).any():
        raise CartridgeError("DAT CHECK values out of range")
    states = np.flatnonzero(check >= 0)
    parents = check[states].astype(np.int64)
    labels = states - base[parents].astype(np.int64)
    if ((labels < 0) | (labels > 255)).any():
        raise CartridgeError("a DAT state is not at its parent's BASE + byte")
    has_children = np.zeros(n, dtype=bool)
    has_children[parents] = True
    if (base[~has_children] != 0).any() or (values[check < 0] != -1).any() or (values < -1).any():
        raise CartridgeError("DAT free slots and leaves must have BASE 0 and VALUES -1")

    ancestor = np.arange(n, dtype=np.int64)  # pointer jumping: every state must lead up to the root
    ancestor[states] = parents
    ancestor[0] = 0
    for _ in range(max(1, int(n).bit_length())):
        ancestor = ancestor[ancestor]
    if (ancestor[states] != 0).any():
        raise CartridgeError("DAT states not reachable from the root (a cycle)")

    if VOCAB_OFFSETS in sections:
        check_vocab_sections(sections)
        _check_dat_spells_vocab(base, check, values, sections[VOCAB_BYTES], sections[VOCAB_OFFSETS])


def _check_dat_spells_vocab(base, check, values, blob, offsets) -> None:
    """Walk every token the DAT holds from the root: it must end at the state that holds it."""
    token_states = np.flatnonzero(values >= 0)
    ids = values[token_states].astype(np.int64)
    if len(ids) and ids.max() >= len(offsets) - 1:
        raise CartridgeError("DAT VALUES hold ids outside the vocabulary")
    starts, lengths = offsets[ids], offsets[ids + 1] - offsets[ids]
    state = np.zeros(len(ids), dtype=np.int64)
    for depth in range(int(lengths.max(initial=0))):
        walking = lengths > depth
        target = base[state[walking]].astype(np.int64) + blob[starts[walking] + depth]
        if ((target < 0) | (target >= len(check))).any() or (check[target] != state[walking]).any():
            raise CartridgeError("a DAT token's path does not spell its vocabulary bytes")
        state[walking] = target
    if (state != token_states).any():
        raise CartridgeError("a DAT token's path does not spell its vocabulary bytes")


register_section_check("vocab.", check_vocab_sections)
register_section_check("dat.", check_dat_sections)


# --------------------------------------------------------------------------------------------------- seed v2

SEED_V2_MAGIC = 0x59415243
SEED_V2_VERSION = 2
_SEED_V2_HEADER = struct.Struct("<III")


@dataclass
class SeedV2Vocabulary:
    """A seed Crayon v2 cartridge: its DAT arrays (read-only views over a map) and its tokens by id."""

    base: np.ndarray
    check: np.ndarray
    values: np.ndarray
    tokens: dict[int, bytes]


def read_seed_v2(dat_path: str | os.PathLike, json_path: str | os.PathLike | None = None) -> SeedV2Vocabulary:
    """Read a seed ``.dat`` file and its ``.json`` vocabulary (default: same name, ``.json``); tokens are UTF-8."""
    dat_path = Path(dat_path)
    json_path = dat_path.with_suffix(".json") if json_path is None else Path(json_path)
    try:
        size = dat_path.stat().st_size
        with open(dat_path, "rb") as handle:
            header = handle.read(_SEED_V2_HEADER.size)
    except OSError as error:
        raise CartridgeError(f"{dat_path}: cannot read the v2 cartridge: {error}") from None
    if len(header) < _SEED_V2_HEADER.size:
        raise CartridgeError(f"{dat_path}: too short for a Crayon v2 .dat file")
    magic, version, nodes = _SEED_V2_HEADER.unpack(header)
    if magic != SEED_V2_MAGIC:
        raise CartridgeError(f"{dat_path}: not a Crayon v2 .dat file (bad magic)")
    if version != SEED_V2_VERSION:
        raise CartridgeError(f"{dat_path}: Crayon .dat version {version}; only version 2 is read")
    if nodes < 1 or size != _SEED_V2_HEADER.size + 12 * nodes:
        needed = _SEED_V2_HEADER.size + 12 * nodes
        raise CartridgeError(f"{dat_path}: {nodes} nodes need {needed} bytes, the file has {size}")
    arrays = np.memmap(dat_path, dtype="<i4", mode="r", offset=_SEED_V2_HEADER.size, shape=(3, nodes))
    return SeedV2Vocabulary(arrays[0], arrays[1], arrays[2], _read_seed_v2_json(json_path))


def _read_seed_v2_json(json_path: Path) -> dict[int, bytes]:
    try:
        vocabulary = json.loads(json_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise CartridgeError(f"{json_path}: cannot read the v2 vocabulary: {error}") from None
    if isinstance(vocabulary, list) and all(isinstance(token, str) for token in vocabulary):
        return {token_id: token.encode("utf-8") for token_id, token in enumerate(vocabulary)}
    if isinstance(vocabulary, dict) and all(type(i) is int and i >= 0 for i in vocabulary.values()):
        tokens = {token_id: token.encode("utf-8") for token, token_id in vocabulary.items()}
        if len(tokens) == len(vocabulary):
            return tokens
    raise CartridgeError(f"{json_path}: expected a list of token strings or an object of token -> unique id >= 0")


def write_seed_v2(
    dat_path: str | os.PathLike,
    base: np.ndarray,
    check: np.ndarray,
    values: np.ndarray,
    tokens: Sequence[str] | Mapping[str, int],
    json_path: str | os.PathLike | None = None,
) -> None:
    """Write a seed Crayon v2 ``.dat`` file and its ``.json`` vocabulary (for tests and interchange)."""
    dat_path = Path(dat_path)
    json_path = dat_path.with_suffix(".json") if json_path is None else Path(json_path)
    arrays = [np.ascontiguousarray(a, dtype="<i4") for a in (base, check, values)]
    if not len(arrays[0]) == len(arrays[1]) == len(arrays[2]) >= 1:
        raise CartridgeError("BASE, CHECK and VALUES must share one length >= 1")
    with open(dat_path, "wb") as handle:
        handle.write(_SEED_V2_HEADER.pack(SEED_V2_MAGIC, SEED_V2_VERSION, len(arrays[0])))
        for array in arrays:
            handle.write(array.tobytes())
    vocabulary = dict(tokens) if isinstance(tokens, Mapping) else list(tokens)
    json_path.write_text(json.dumps(vocabulary, ensure_ascii=False), encoding="utf-8")

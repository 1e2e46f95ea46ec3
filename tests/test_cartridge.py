"""Cartridge files: round trips, O(1) open checks, verify=True, seed v2 files, and a mutation test.

The mutation test mangles a real cartridge many ways (truncations, flipped header and body bytes, absurd int32
values written with valid checksums) and requires that each one is refused by ``open_cartridge`` or encodes
without crashing the process (in a subprocess, so a segfault shows), and that ``verify=True`` refuses all.
"""

import json
import os
import struct
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import numpy as np
import pytest
from conftest import mergeable_ranks

from crayon.cartridge import (
    BASE,
    CHECK,
    VALUES,
    VOCAB_BYTES,
    VOCAB_OFFSETS,
    open_cartridge,
    read_seed_v2,
    register_section_check,
    vocab_sections,
    write_cartridge,
    write_seed_v2,
)
from crayon.errors import CartridgeError
from crayon.jit.dat import compile_dat
from crayon.reference import longest

# The documented layout, restated here so that the tests pin the format down independently of the module.
FIXED = struct.Struct("<8sIIIIIIQ")  # magic, version, flags, header_size, count, metadata_length, crc, file_size
ENTRY = struct.Struct("<32sBBHIQQQ")  # name, dtype code, ndim, zero, crc32, offset, shape[0], shape[1]
CRC_FIELD = slice(28, 32)
METADATA = {"name": "cl100k_slice", "pattern": "cl100k_base", "algorithm": "longest", "special_tokens": {"<|x|>": 9}}


def small_vocabulary() -> dict[int, bytes]:
    """Every 20th cl100k token and all single bytes: a real-shaped vocabulary, small enough to mangle often."""
    return {rank: token for token, rank in mergeable_ranks("cl100k_base").items() if rank % 20 == 0 or len(token) == 1}


def dat_and_vocab_sections(tokens: dict[int, bytes]) -> dict[str, np.ndarray]:
    base, check, values = compile_dat(list(tokens.values()), list(tokens))
    return {BASE: base, CHECK: check, VALUES: values, **vocab_sections(tokens)}


@pytest.fixture(scope="module")
def sections():
    return dat_and_vocab_sections(small_vocabulary())


@pytest.fixture
def cartridge_path(tmp_path, sections):
    path = tmp_path / "small.crayon"
    write_cartridge(path, METADATA, sections)
    return path


def rewrite_header(path: Path, **fields) -> None:
    """Change fixed-header fields (by name) and re-seal the header checksum, as a hostile writer would."""
    data = bytearray(path.read_bytes())
    names = ["magic", "version", "flags", "header_size", "count", "metadata_length", "crc", "file_size"]
    values = dict(zip(names, FIXED.unpack_from(data, 0)))
    values.update(fields)
    FIXED.pack_into(data, 0, *(values[name] for name in names))
    reseal(data)
    path.write_bytes(data)


def rewrite_entry(path: Path, index: int, **fields) -> None:
    data = bytearray(path.read_bytes())
    names = ["name", "code", "ndim", "zero", "crc", "offset", "rows", "columns"]
    values = dict(zip(names, ENTRY.unpack_from(data, 64 + 64 * index)))
    values.update(fields)
    ENTRY.pack_into(data, 64 + 64 * index, *(values[name] for name in names))
    reseal(data)
    path.write_bytes(data)


def reseal(data: bytearray) -> None:
    header_size = FIXED.unpack_from(data, 0)[3]
    header = bytearray(data[:header_size])
    header[CRC_FIELD] = bytes(4)
    data[CRC_FIELD] = struct.pack("<I", zlib.crc32(header))


# ------------------------------------------------------------------------------------------------ round trips


def test_round_trip_gives_read_only_aligned_views_over_one_map(cartridge_path, sections):
    with open_cartridge(cartridge_path, verify=True) as cartridge:
        assert cartridge.metadata == METADATA and cartridge.path == cartridge_path
        assert list(cartridge.sections) == list(sections)
        maps = set()
        for name, array in cartridge.sections.items():
            np.testing.assert_array_equal(array, sections[name])
            assert array.dtype == sections[name].dtype and not array.flags.writeable
            assert array.ctypes.data % 64 == 0
            owner = array
            while isinstance(owner, np.ndarray):
                owner = owner.base
            maps.add(id(owner.obj) if isinstance(owner, memoryview) else id(owner))
        assert len(maps) == 1


def test_every_dtype_and_shape_round_trips(tmp_path):
    arrays = {
        "u8": np.arange(5, dtype=np.uint8),
        "i16 big-endian": np.arange(-3, 4, dtype=">i2"),
        "f64 2-D": np.linspace(0, 1, 12).reshape(4, 3),
        "u32": np.array([2**32 - 1], dtype=np.uint32),
        "bool": np.array([True, False, True]),
        "empty": np.zeros(0, dtype=np.int64),
        "empty 2-D": np.zeros((0, 2), dtype=np.int32),
        "i8 strided": np.arange(20, dtype=np.int8)[::3],
        "bpe.merges": np.arange(10, dtype=np.int32).reshape(5, 2),
    }
    write_cartridge(tmp_path / "all.crayon", {}, arrays)
    cartridge = open_cartridge(tmp_path / "all.crayon", verify=True)
    for name, array in arrays.items():
        np.testing.assert_array_equal(cartridge.sections[name], array)
        assert cartridge.sections[name].shape == array.shape
        assert cartridge.sections[name].dtype.byteorder in "<=|"
    assert os.path.getsize(tmp_path / "all.crayon") % 64 == 0


@pytest.mark.parametrize(
    "metadata, arrays, message",
    [
        ({"x": object()}, {}, "JSON"),
        ({}, {"": np.zeros(1)}, "section name"),
        ({}, {"n" * 33: np.zeros(1)}, "section name"),
        ({}, {"é": np.zeros(1)}, "section name"),
        ({}, {"c": np.zeros(2, dtype=np.complex64)}, "cannot be stored"),
        ({}, {"c": np.zeros((2, 2, 2))}, "cannot be stored"),
    ],
)
def test_writer_refuses_what_it_cannot_store(tmp_path, metadata, arrays, message):
    with pytest.raises(CartridgeError, match=message):
        write_cartridge(tmp_path / "bad.crayon", metadata, arrays)
    assert not list(tmp_path.iterdir())


def test_write_is_atomic_and_leaves_open_maps_intact(cartridge_path, sections):
    old = open_cartridge(cartridge_path)
    write_cartridge(cartridge_path, {"name": "other"}, {"only": np.arange(3)})
    assert list(cartridge_path.parent.iterdir()) == [cartridge_path]  # no temporary file left
    np.testing.assert_array_equal(old.sections[CHECK], sections[CHECK])  # the old map still reads the old file
    assert open_cartridge(cartridge_path).metadata == {"name": "other"}


def test_close_unmaps_and_tolerates_views_still_held(cartridge_path, sections):
    cartridge = open_cartridge(cartridge_path)
    kept = cartridge.sections[VALUES]
    cartridge.close()
    assert cartridge.sections == {}
    np.testing.assert_array_equal(kept, sections[VALUES])  # the map lives while a view does
    open_cartridge(cartridge_path).close()


def test_vocab_sections_leave_gaps_empty():
    packed = vocab_sections({0: b"ab", 3: b"c"})
    assert packed[VOCAB_OFFSETS].tolist() == [0, 2, 2, 2, 3] and bytes(packed[VOCAB_BYTES]) == b"abc"


# ------------------------------------------------------------------------------------------------ open checks


@pytest.mark.parametrize(
    "mangle, message",
    [
        (lambda p: p.write_bytes(b""), "too short"),
        (lambda p: p.write_bytes(b"not a cartridge at all" * 10), "magic"),
        (lambda p: rewrite_header(p, version=2), "version 2"),
        (lambda p: rewrite_header(p, flags=1), "flags"),
        (lambda p: rewrite_header(p, file_size=12345), "truncated"),
        (lambda p: rewrite_header(p, header_size=96), "header size"),
        (lambda p: rewrite_header(p, header_size=2**31), "header size"),
        (lambda p: rewrite_header(p, count=10**6), "header size"),
        (lambda p: rewrite_header(p, metadata_length=10**6), "header size"),
        (lambda p: rewrite_entry(p, 0, code=99), "dtype code"),
        (lambda p: rewrite_entry(p, 0, ndim=3), "dtype code"),
        (lambda p: rewrite_entry(p, 0, offset=FIXED.unpack_from(p.read_bytes())[3] + 4), "outside|overlaps"),
        (lambda p: rewrite_entry(p, 0, rows=2**62), "outside"),
        (lambda p: rewrite_entry(p, 1, offset=FIXED.unpack_from(p.read_bytes())[3]), "overlaps"),
        (lambda p: rewrite_entry(p, 1, name=b"dat.base"), "repeated"),
        (lambda p: rewrite_entry(p, 1, name=b""), "bad or repeated name"),
        (lambda p: rewrite_entry(p, 1, name=b"a\0b"), "bad or repeated name"),
        (lambda p: rewrite_entry(p, 1, zero=7), "dtype code"),
    ],
)
def test_open_refuses_malformed_headers(cartridge_path, mangle, message):
    mangle(cartridge_path)
    with pytest.raises(CartridgeError, match=message):
        open_cartridge(cartridge_path)


def test_open_refuses_bad_metadata(tmp_path):
    path = tmp_path / "m.crayon"
    for blob, message in [(b"\xff\xfe", "UTF-8 JSON"), (b"[1, 2]", "JSON object"), (b"{bad", "UTF-8 JSON")]:
        write_cartridge(path, {"k": "v" * (len(blob) - 10)} if len(blob) > 10 else {}, {})
        data = bytearray(path.read_bytes())
        FIXED.pack_into(data, 0, *FIXED.unpack_from(data, 0)[:5], len(blob), *FIXED.unpack_from(data, 0)[6:])
        data[64 : 64 + len(blob)] = blob
        reseal(data)
        path.write_bytes(data)
        with pytest.raises(CartridgeError, match=message):
            open_cartridge(path)


def test_open_refuses_missing_files(tmp_path):
    with pytest.raises(CartridgeError, match="cannot read"):
        open_cartridge(tmp_path / "absent.crayon")


# ------------------------------------------------------------------------------------------------ verify=True


def hostile(sections, name, index, value):
    changed = dict(sections)
    changed[name] = sections[name].copy()
    changed[name][index] = value
    return changed


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda s: hostile(s, CHECK, 0, 5), "root"),
        (lambda s: hostile(s, CHECK, 7, len(s[CHECK])), "CHECK values out of range"),
        (lambda s: hostile(s, CHECK, 7, -2), "CHECK values out of range"),
        (lambda s: hostile(s, BASE, 0, 2**31 - 1), "parent's BASE"),
        (lambda s: hostile(s, VALUES, int(np.flatnonzero(s[VALUES] >= 0)[3]), 10**6), "outside the vocabulary"),
        (lambda s: hostile(s, VALUES, int(np.flatnonzero(s[VALUES] >= 0)[3]), int(s[VALUES].max())), "spell"),
        (lambda s: hostile(s, BASE, int(np.setdiff1d(np.flatnonzero(s[CHECK] >= 0), s[CHECK])[0]), 3), "leaves"),
        (lambda s: hostile(s, VALUES, 5, -7), "free slots"),
        (lambda s: hostile(s, VOCAB_OFFSETS, 5, 10**6), "rise"),
        (lambda s: hostile(s, VOCAB_BYTES, 50, 0), "spell"),
        (lambda s: {**s, VALUES: s[VALUES][:-1]}, "one length"),
        (lambda s: {**s, VALUES: s[VALUES].astype(np.int64)}, "int32"),
        (lambda s: {k: v for k, v in s.items() if k != CHECK}, "come together"),
        (lambda s: {k: v for k, v in s.items() if k != VOCAB_BYTES}, "come together"),
    ],
)
def test_verify_refuses_broken_invariants_behind_valid_checksums(tmp_path, sections, change, message):
    path = tmp_path / "hostile.crayon"
    write_cartridge(path, METADATA, change(sections))
    open_cartridge(path).close()  # the O(1) checks pass: only verify can tell
    with pytest.raises(CartridgeError, match=message):
        open_cartridge(path, verify=True)


def test_verify_refuses_unreachable_cycles(tmp_path):
    # Two free slots made into a cycle: each one's CHECK points at the other, both at BASE + byte of the other.
    base = np.array([1, 0, 0, 0, 0], dtype=np.int32)
    check = np.array([-1, 0, -1, -1, -1], dtype=np.int32)
    values = check.copy()
    base[2], base[3], check[2], check[3] = 1, 0, 3, 2
    write_cartridge(tmp_path / "cycle.crayon", {}, {BASE: base, CHECK: check, VALUES: values})
    with pytest.raises(CartridgeError, match="cycle|free slots"):
        open_cartridge(tmp_path / "cycle.crayon", verify=True)


def test_verify_refuses_nonzero_padding(cartridge_path):
    data = bytearray(cartridge_path.read_bytes())
    data[-1] = 1  # the last section's padding (the vocab bytes are not a multiple of 64 long)
    cartridge_path.write_bytes(data)
    open_cartridge(cartridge_path).close()
    with pytest.raises(CartridgeError, match="padding"):
        open_cartridge(cartridge_path, verify=True)


def test_registered_section_checks_run_on_verify(tmp_path):
    def positive(sections):
        if (sections["test.weights"] < 0).any():
            raise ValueError("test.weights must be positive")

    register_section_check("test.", positive)
    write_cartridge(tmp_path / "w.crayon", {}, {"test.weights": np.array([1.0, -1.0])})
    with pytest.raises(CartridgeError, match="must be positive"):
        open_cartridge(tmp_path / "w.crayon", verify=True)


# ------------------------------------------------------------------------------------------------ mutation test

ENCODE_EVERY_FILE = textwrap.dedent(
    """
    import sys
    import numpy as np
    from crayon.cartridge import open_cartridge
    from crayon.errors import CartridgeError
    from crayon.jit.longest import encode_spans

    text = np.frombuffer(sys.argv[1].encode("utf-8"), np.uint8)
    fallback = np.arange(256, dtype=np.int32) + 100277
    refused = encoded = 0
    for path in sys.stdin.read().split():
        print(path, flush=True)  # the last path printed names the file that crashed, if one does
        try:
            sections = open_cartridge(path).sections
        except CartridgeError:
            refused += 1
            continue
        dat = [sections[name] for name in ("dat.base", "dat.check", "dat.values")]
        ids = encode_spans(text, np.array([len(text)]), *dat, fallback)
        assert 0 < len(ids) <= len(text)
        encoded += 1
    print("refused", refused, "encoded", encoded)
    """
)


def mangled_copies(path: Path, sections, folder: Path) -> list[Path]:
    """Truncations, flipped bytes across header and body, and absurd int32 values written with valid checksums."""
    data = path.read_bytes()
    header_size = FIXED.unpack_from(data, 0)[3]
    rng = np.random.default_rng(3)
    cuts = {*range(0, header_size + 70, 7), *rng.integers(0, len(data), 60).tolist()}
    variants = [data[:cut] for cut in sorted(cuts)]
    for position in [*range(0, header_size, 3), *rng.integers(header_size, len(data), 250).tolist()]:
        flipped = bytearray(data)
        flipped[position] ^= 1 << int(rng.integers(8))
        variants.append(bytes(flipped))
    files = []
    for number, variant in enumerate(variants):
        files.append(folder / f"mangled{number}.crayon")
        files[-1].write_bytes(variant)
    absurd = [2**31 - 1, -(2**31), -2, 2**30, len(sections[CHECK]), 255, -255]
    for number in range(120):
        name = (BASE, CHECK, VALUES)[number % 3]
        changed = dict(sections)
        changed[name] = sections[name].copy()
        where = rng.integers(0, len(changed[name]), size=1 + number % 5)
        random_values = rng.integers(-(2**31), 2**31 - 1, len(where))
        changed[name][where] = rng.choice(absurd, size=len(where)) if number % 2 else random_values
        if np.array_equal(changed[name], sections[name]):
            continue  # the absurd value happened to be the right one
        files.append(folder / f"absurd{number}.crayon")
        write_cartridge(files[-1], METADATA, changed)
    return files


def test_every_mangled_cartridge_is_refused_or_encodes_without_crashing(cartridge_path, sections, tmp_path):
    folder = tmp_path / "mangled"
    folder.mkdir()
    files = mangled_copies(cartridge_path, sections, folder)
    text = "Hello, wörld! 🚀 The quick brown fox, 1234567 times.\n" * 20
    result = subprocess.run(
        [sys.executable, "-c", ENCODE_EVERY_FILE, text],
        input="\n".join(map(str, files)),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[1],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    last_file = result.stdout.strip().splitlines()[-1:] or ["(none)"]
    assert result.returncode == 0, f"crashed (code {result.returncode}) on {last_file}: {result.stderr[-2000:]}"
    refused, encoded = (int(word) for word in last_file[0].split()[1::2])
    print(f"{len(files)} mangled cartridges: {refused} refused by open, {encoded} encoded")
    assert refused + encoded == len(files) and refused > 0 and encoded > 0
    for path in files:
        with pytest.raises(CartridgeError):
            open_cartridge(path, verify=True)


# ------------------------------------------------------------------------------------------------ seed v2


@pytest.mark.parametrize("as_object", [False, True])
def test_seed_v2_files_round_trip_and_encode_like_cartridges(tmp_path, sections, as_object):
    strings = ["hello", " world", "wor", "ld", "é", "日本"]
    vocabulary = {token: 10 + i for i, token in enumerate(strings)} if as_object else strings
    ids = [vocabulary[s] for s in strings] if as_object else list(range(len(strings)))
    dat = compile_dat([s.encode() for s in strings], ids)
    write_seed_v2(tmp_path / "vocab_lite.dat", *dat, vocabulary)
    seed = read_seed_v2(tmp_path / "vocab_lite.dat")
    for read, written in zip((seed.base, seed.check, seed.values), dat):
        np.testing.assert_array_equal(read, written)
    assert seed.tokens == {i: s.encode() for i, s in zip(ids, strings)}
    model = longest.LongestMatchModel(seed.tokens, seed.base, seed.check, seed.values, first_reserved_id=100)
    data = "hello world! 日本".encode()
    encoded = model.encode_span(data)
    assert encoded[:3] == [ids[0], ids[1], model.first_reserved_id + ord("!")]
    assert b"".join(model.token_bytes[i] for i in encoded) == data


@pytest.mark.parametrize(
    "header, body, vocabulary, message",
    [
        (struct.pack("<III", 0x12345678, 2, 1), bytes(12), [], "magic"),
        (struct.pack("<III", 0x59415243, 3, 1), bytes(12), [], "version 3"),
        (struct.pack("<III", 0x59415243, 2, 2), bytes(12), [], "need 36 bytes"),
        (struct.pack("<III", 0x59415243, 2, 0), b"", [], "need"),
        (struct.pack("<II", 0x59415243, 2), b"", [], "too short"),
        (struct.pack("<III", 0x59415243, 2, 1), bytes(12), {"a": -1}, "unique id"),
        (struct.pack("<III", 0x59415243, 2, 1), bytes(12), {"a": 1, "b": 1}, "unique id"),
        (struct.pack("<III", 0x59415243, 2, 1), bytes(12), [1, 2], "list of token strings"),
        (struct.pack("<III", 0x59415243, 2, 1), bytes(12), None, "cannot read"),
    ],
)
def test_seed_v2_refuses_bad_files(tmp_path, header, body, vocabulary, message):
    (tmp_path / "v.dat").write_bytes(header + body)
    if vocabulary is not None:
        (tmp_path / "v.json").write_text(json.dumps(vocabulary))
    with pytest.raises(CartridgeError, match=message):
        read_seed_v2(tmp_path / "v.dat")

"""GPU engine tests: capacity planning on the host, and the engine itself on a device.

The device tests run on a real GPU when numba-cuda finds one. Elsewhere ``test_device_tests_under_simulator``
runs this file again in a subprocess with ``NUMBA_ENABLE_CUDASIM=1``: the simulator has to be switched on
before numba.cuda is first imported, which a subprocess guarantees whatever else pytest imported. Under the
simulator the kernels' own loops run in Python (slow), so most cases use a 3000-token slice of cl100k and small
chunks, which make every document span many GPU threads; exactness against tiktoken uses the full cl100k.
``test_kernels_compile_for_sm90`` compiles every kernel to PTX with NVVM where the toolkit is installed, so a
kernel that only the simulator accepts is caught without a GPU.
"""

from __future__ import annotations

import functools
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tiktoken
from hypothesis import given, settings

from conftest import corpus_text, mergeable_ranks, tiktoken_encoding
from crayon.gpu import capacity
from strategies import tokenizer_text

SIMULATED = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
ON_DEVICE = SIMULATED or capacity.cuda_status()[0]
device = pytest.mark.skipif(not ON_DEVICE, reason="device test: run by test_device_tests_under_simulator")
DEVICE_TEST_COUNT = 12


# --- host-side planning ----------------------------------------------------------------------------


def test_plan_batches_keeps_order_and_budget():
    sizes = np.array([5, 0, 7, 30, 2, 2, 9, 0])
    batches = capacity.plan_batches(sizes, 10)
    assert [(b.first, b.stop, b.oversized) for b in batches] == [
        (0, 2, False), (2, 3, False), (3, 4, True), (4, 6, False), (6, 8, False)
    ]
    assert all(b.text_bytes == sizes[b.first : b.stop].sum() for b in batches)
    assert all(b.text_bytes <= 10 for b in batches if not b.oversized)
    assert [(b.first, b.stop) for b in capacity.plan_batches(np.array([], np.int64), 10)] == [(0, 0)]


def test_plan_pieces_cuts_at_span_ends():
    ends = np.array([3, 5, 20, 22, 25, 40])
    pieces = capacity.plan_pieces(ends, 6)
    assert pieces == [(0, 2), (2, 3), (3, 5), (5, 6)]  # the 15-byte and 15-byte spans stand alone
    assert [first for first, _ in pieces[1:]] == [stop for _, stop in pieces[:-1]]


def test_chunk_layout_cuts_at_character_boundaries():
    texts = ["", "é" * 9, "a", "日本語テキスト" * 3, "😀x" * 5, ""]
    encoded = [text.encode() for text in texts]
    data = np.frombuffer(b"".join(encoded), np.uint8)
    offsets = np.cumsum([0, *map(len, encoded)])
    layout = capacity.chunk_layout(data, offsets, chunk_bytes=4)
    assert layout.count > len(texts)
    assert ((data[layout.starts] & 0xC0) != 0x80).all()  # no chunk starts inside a character
    assert (layout.starts < layout.stops).all() and (layout.stops <= layout.doc_stops).all()
    for doc in range(len(texts)):
        first, stop = layout.doc_first_chunk[doc], layout.doc_first_chunk[doc + 1]
        assert (layout.stops[first:stop] - layout.starts[first:stop]).sum() == len(encoded[doc])  # they tile it
        assert layout.first_of_doc[first:stop].tolist() == [1] * int(stop > first) + [0] * max(int(stop - first) - 1, 0)


def test_memory_sizes_come_from_the_input():
    budget = 1 << 20
    largest = capacity.max_batch_bytes(budget)
    assert capacity.batch_device_bytes(largest) <= budget < capacity.batch_device_bytes(largest + 1024)
    with pytest.raises(ValueError, match="budget"):
        capacity.max_batch_bytes(10)
    groups, too_big = capacity.plan_long_groups(np.array([4, 4, 9, 3, 20, 1]), 10)
    assert groups == [(0, 2), (2, 3), (3, 4), (5, 6)] and too_big.tolist() == [4]


def test_budget_from_environment(monkeypatch):
    monkeypatch.setenv("CRAYON_GPU_MEMORY_BUDGET", "12345")
    assert capacity.memory_budget(free_device_bytes=1 << 40) == 12345
    monkeypatch.setenv("CRAYON_GPU_MEMORY_BUDGET", "lots")
    with pytest.raises(ValueError, match="CRAYON_GPU_MEMORY_BUDGET"):
        capacity.memory_budget()
    monkeypatch.delenv("CRAYON_GPU_MEMORY_BUDGET")
    assert capacity.memory_budget(free_device_bytes=6 << 30) == 3 << 30
    assert capacity.memory_budget(free_device_bytes=1 << 40) == capacity.MAX_DEFAULT_BUDGET
    assert capacity.memory_budget() == capacity.DEFAULT_MEMORY_BUDGET


@pytest.mark.skipif(ON_DEVICE, reason="CUDA (or its simulator) is available here")
def test_without_cuda_auto_stays_on_cpu_and_cuda_is_refused():
    import crayon
    from crayon.errors import BackendUnavailableError

    use, reason = capacity.should_use_gpu(1 << 30)
    assert not use and reason.startswith("CPU:")
    with pytest.raises(BackendUnavailableError, match="backend 'cuda' is unavailable"):
        crayon.load("cl100k_base", backend="cuda")


# --- on a device (the simulator in a subprocess where there is no GPU) --------------------------------


@pytest.mark.skipif(ON_DEVICE, reason="already on a device")
def test_device_tests_under_simulator():
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", __file__, "-q", "-p", "no:cacheprovider", "-k", "on_device"],
        cwd=Path(__file__).parents[1], env=env, capture_output=True, text=True, timeout=600,  # imports this checkout
    )
    output = result.stdout[-6000:] + result.stderr[-3000:]
    assert result.returncode == 0, output
    assert re.search(rf"\b{DEVICE_TEST_COUNT} passed", result.stdout), output


def _slice_ranks(limit: int = 3000, without: tuple[bytes, ...] = ()) -> dict[bytes, int]:
    ranks = mergeable_ranks("cl100k_base")
    return {token: rank for token, rank in ranks.items() if rank < limit and token not in without}


@functools.cache
def _slice_tokenizer():
    return _tokenizer(_slice_ranks())


def _tokenizer(ranks, pattern="cl100k_base"):
    from crayon.reference.bpe import BytePairModel
    from crayon.tokenizer import Tokenizer

    return Tokenizer("slice", BytePairModel(ranks), pattern=pattern, backend="jit")


def _assert_same_as_jit(engine, tokenizer, texts):
    """The GPU engine's flat output equals the JIT engine's; returns it as lists."""
    from crayon.jit.engine import JitEngine

    tokens, offsets = engine.encode_ordinary_flat(texts)
    expected_tokens, expected_offsets = JitEngine(tokenizer).encode_ordinary_flat(texts)
    assert tokens.dtype == expected_tokens.dtype and offsets.dtype == expected_offsets.dtype
    np.testing.assert_array_equal(offsets, expected_offsets)
    np.testing.assert_array_equal(tokens, expected_tokens)
    return [tokens[offsets[i] : offsets[i + 1]].tolist() for i in range(len(texts))]


DIGITS = "".join(random.Random(7).choice("0123456789") for _ in range(700))


@device
def test_on_device_cl100k_equals_tiktoken():
    import crayon
    from crayon.gpu.engine import make_engine

    tokenizer = crayon.load("cl100k_base", backend="jit")
    texts = ["", "a", "é", " ", "don't  \n\n  stop", "1234567 x", "😀👍🏽 日本語 Straße"]
    texts += [corpus_text(name)[5000:5300] for name in ("multilingual.txt", "python_code.py", "enwik8_head.xml")]
    engine = make_engine(tokenizer, chunk_bytes=16)  # small chunks: every document spans many threads
    got = _assert_same_as_jit(engine, tokenizer, texts)
    assert got == [tiktoken_encoding("cl100k_base").encode_ordinary(text) for text in texts]


@device
def test_on_device_document_of_more_than_4096_tokens():
    from crayon.gpu.engine import make_engine

    tokenizer = _tokenizer(_slice_ranks())
    long_text = corpus_text("shakespeare.txt")[:13000]
    engine = make_engine(tokenizer)
    got = _assert_same_as_jit(engine, tokenizer, ["", long_text, "b"])
    assert engine.encode_ordinary_batch(["", long_text, "b"]) == got
    assert len(got[1]) > 4096 and got[0] == [] and len(got[2]) == 1
    assert got[1] == tiktoken.Encoding("s", pat_str=tokenizer.pattern, mergeable_ranks=_slice_ranks(),
                                       special_tokens={}).encode_ordinary(long_text)


@device
def test_on_device_chains_resynchronize_across_chunks():
    from crayon.gpu.engine import make_engine

    tokenizer = _tokenizer(_slice_ranks())
    engine = make_engine(tokenizer, chunk_bytes=8)
    _assert_same_as_jit(engine, tokenizer, ["x" + DIGITS + " y", "ab " * 40 + DIGITS[:50], "\n\n\n   " * 10])
    assert max(engine.stats.fix_passes) > 1  # a run of digits longer than a chunk needs more than one pass


@device
@pytest.mark.parametrize("encoder", ["backtrack", "heap"])
def test_on_device_long_spans(encoder):
    from crayon.gpu.engine import make_engine

    tokenizer = _tokenizer(_slice_ranks(), pattern="r50k_base")
    engine = make_engine(tokenizer, chunk_bytes=32, encoder=encoder)
    _assert_same_as_jit(engine, tokenizer, ["a " + DIGITS, " " * 300 + "x", "!?" * 200, "ok"])
    assert engine.stats.long_spans >= 2


@device
def test_on_device_tiny_budget_splits_documents_and_spans():
    from crayon.gpu.engine import make_engine

    tokenizer = _tokenizer(_slice_ranks(), pattern="r50k_base")
    engine = make_engine(tokenizer, chunk_bytes=16, memory_budget=12_000, encoder="heap")
    texts = ["q " + DIGITS + " end", "x" * 200, corpus_text("big.txt")[:700], ""]
    _assert_same_as_jit(engine, tokenizer, texts)
    stats = engine.stats
    assert engine.batch_bytes < 1000 and stats.batches > 3 and stats.oversized_documents >= 2
    assert stats.cpu_spans >= 1  # the 700-digit span outgrows both a batch and the long-span scratch budget


@device
def test_on_device_host_pre_tokenizer():
    from crayon.gpu.engine import make_engine

    tokenizer = _tokenizer(_slice_ranks(), pattern=r"\S+|\s+")
    engine = make_engine(tokenizer, chunk_bytes=16)
    assert engine.pattern_id is None
    _assert_same_as_jit(engine, tokenizer, ["", "hello   world\n", corpus_text("multilingual.txt")[:800]])


@device
def test_on_device_a_normalizer_runs_on_the_host_before_the_gpu_spanner():
    """NFC before Qwen 2's regex (Qwen's tokenizer.json): the texts are normalized on the host, then split by the
    hand-written machine on the GPU; the reference engine's tokens."""
    from crayon.formats.hf_normalize import UnicodeNormalizer
    from crayon.gpu.engine import make_engine
    from crayon.patterns import VARIANT_PATTERNS
    from crayon.reference.bpe import BytePairModel
    from crayon.tokenizer import Tokenizer

    tokenizer = Tokenizer("slice", BytePairModel(_slice_ranks()), pattern=VARIANT_PATTERNS["qwen2"],
                          normalizer=UnicodeNormalizer("NFC"), backend="reference")
    engine = make_engine(tokenizer, chunk_bytes=16)
    assert engine.pattern_id is not None
    texts = ["Cafe\u0301 \u1100\u1161\u11a8 \uf900 12", "", "\u212b" * 40 + " x", corpus_text("multilingual.txt")[:400]]
    tokens, offsets = engine.encode_ordinary_flat(texts)
    assert [tokens[offsets[i] : offsets[i + 1]].tolist() for i in range(len(texts))] == [
        tokenizer.encode_ordinary(text) for text in texts]


@device
def test_on_device_a_byte_without_a_token_encodes_as_tiktoken():
    """A vocabulary without the token b"\\xc3": merges that cover the byte give tiktoken's tokens (as the
    reference engine does); where none does, UnknownTokenError (tiktoken panics)."""
    from crayon.errors import UnknownTokenError
    from crayon.gpu.engine import make_engine

    ranks = _slice_ranks(without=(b"\xc3",))
    engine = make_engine(_tokenizer(ranks), chunk_bytes=16)
    expected = tiktoken.Encoding("slice", pat_str=_tokenizer(ranks).pattern, mergeable_ranks=ranks, special_tokens={})
    texts = ["plain ascii", "café", "résumé, é"]
    assert engine.encode_ordinary_batch(texts) == [expected.encode_ordinary(text) for text in texts]
    lone = next(chr(c) for c in range(0xC0, 0x100) if chr(c).encode() not in ranks)
    with pytest.raises(UnknownTokenError):
        engine.encode_ordinary_batch(["fine", lone])


@device
def test_on_device_tokenizer_backend_and_longest_match():
    from crayon.gpu.engine import LongestMatchGpu
    from crayon.jit import longest
    from crayon.jit.dat import compile_dat
    from crayon.jit.pretokenize import span_ends
    from crayon.reference.longest import byte_fallback_ids

    tokenizer = _slice_tokenizer().with_backend("cuda")
    assert tokenizer.backend == "cuda"
    text = "Hello <|endoftext|> there, " + corpus_text("english_web.txt")[:300]
    assert tokenizer.encode_batch([text, ""], allowed_special="all") == tokenizer.with_backend("jit").encode_batch(
        [text, ""], allowed_special="all"
    )

    ranks = _slice_ranks(without=(b"e",))  # "e" takes the byte fallback
    base, check, values = compile_dat(list(ranks), list(ranks.values()))
    fallback = byte_fallback_ids(base, check, values, 100_000)
    texts = ["", "e", "eeeee " + DIGITS[:100], corpus_text("multilingual.txt")[:600]]
    for pattern in (None, "cl100k_base"):
        engine = LongestMatchGpu(base, check, values, fallback, pattern=pattern, chunk_bytes=16)
        ids, offsets = engine.encode_flat(texts)
        for i, text in enumerate(texts):
            data = np.frombuffer(text.encode(), np.uint8)
            ends = np.array([len(data)]) if pattern is None else span_ends(text.encode(), pattern)
            expected = longest.encode_spans(data, ends if len(data) else np.zeros(0, np.int64), base, check, values,
                                            fallback)
            np.testing.assert_array_equal(ids[offsets[i] : offsets[i + 1]], expected)


@device
def test_on_device_longest_match_tokenizers(tmp_path):
    import crayon
    from crayon.cartridge import write_seed_v2
    from crayon.jit.dat import compile_dat
    from crayon.loading import as_longest_match

    text = "Hello there, " + corpus_text("english_web.txt")[:400] + " 東京 " + DIGITS[:40]
    patterned = as_longest_match(_slice_tokenizer(), backend="jit")
    assert patterned.with_backend("cuda").encode_ordinary(text) == patterned.encode_ordinary(text)
    vocab = ["a", "b", "ab", "abc", "hello", " ", "wor", "Hello", "the"]
    write_seed_v2(tmp_path / "seed.dat", *compile_dat([t.encode() for t in vocab], list(range(len(vocab)))), vocab)
    seed = crayon.load(tmp_path / "seed.dat", backend="jit")
    assert seed.with_backend("cuda").encode_batch([text, "", "abc"]) == seed.encode_batch([text, "", "abc"])


@device
@settings(max_examples=12, deadline=None)
@given(texts=tokenizer_text.map(lambda text: [text, text[::-1], ""]))
def test_on_device_random_text_equals_jit(texts):
    from crayon.gpu.engine import make_engine

    tokenizer = _slice_tokenizer()
    _assert_same_as_jit(make_engine(tokenizer, chunk_bytes=8), tokenizer, texts)

# --- PTX: the kernels compile for a real GPU --------------------------------------------------------

PTX_CHECK = r"""
import glob, os, sys, types as pytypes
import numpy as np
toolkit = os.environ.get("CUDA_HOME", "/usr/local/cuda*")
libdevice = sorted(glob.glob(os.path.join(toolkit, "nvvm/libdevice/libdevice*.bc")))
if not libdevice:
    print("SKIP: no CUDA toolkit (libdevice) to compile with"); sys.exit(0)
import numba.cuda.cudadrv.libs as libs, numba.cuda.cudadrv.nvvm as nvvm, numba.cuda.cudadrv.nvrtc as nvrtc
import numba.cuda.dispatcher as dispatcher
# No driver here: stand in for what numba-cuda would ask the GPU and NVRTC (the target is sm_90, an H100).
dispatcher.get_current_device = lambda: pytypes.SimpleNamespace(compute_capability=(9, 0))
nvrtc.get_supported_ccs = lambda: ((9, 0),)
libs.get_libdevice = nvvm.get_libdevice = lambda: libdevice[-1]
from numba import cuda, typeof, types
try:
    cuda.compile_ptx(lambda a: None, (types.int32[::1],), cc=(9, 0))
except Exception as missing:
    print(f"SKIP: NVVM cannot compile here ({type(missing).__name__}: {str(missing)[:200]})"); sys.exit(0)
import crayon
from crayon.gpu import kernels
from crayon.jit.pretokenize import unicode_tables
tables = crayon.load("cl100k_base", backend="jit").engine.kernel_tables
bpe = typeof(tuple(np.array(table) for table in tables))  # writable, as device arrays are
chars = typeof(unicode_tables())
A = lambda dtype, ndim=1: types.Array(typeof(np.zeros(1, dtype)).dtype, ndim, "C")
i64, u8, i32, u32, dat = types.int64, A(np.uint8), A(np.int32), A(np.uint32), types.UniTuple(A(np.int32), 3)
chunks = (A(np.int64),) * 3
signatures = {
    "classify_chunks": (u8, A(np.int64), A(np.int64), chars, u8),
    "span_chunks": (u8, u8, *chunks, i64, chars, dat, u8, A(np.int64), A(np.int64)),
    "fix_chunks": (u8, u8, *chunks, u8, i64, chars, dat, u8, A(np.int64), A(np.int64), i32),
    "encode_chunks": (u8, *chunks, u8, bpe, A(np.uint64), i64, i64, u32, i32, A(np.int64, 2), A(np.int64),
                      A(np.int64)),
    "encode_long_spans": (u8, A(np.int64, 2), A(np.int64), A(np.int64), bpe, A(np.uint64), i64, A(np.int64), u8, u32,
                          i32, A(np.int64)),
    "longest_chunks": (u8, *chunks, u8, dat, i32, i32, i32),
    "chunk_token_totals": (A(np.int64), A(np.int64), i32, A(np.int64)),
    "compact_chunks": (A(np.int64), A(np.int64), i32, u32, A(np.int64), u32),
    "scan_blocks": (A(np.int64), i64, A(np.int64), A(np.int64)),
    "add_block_offsets": (A(np.int64), A(np.int64)),
}
for name, signature in signatures.items():
    ptx, _ = cuda.compile_ptx(getattr(kernels, name).py_func, signature, cc=(9, 0))
    externs = [line for line in ptx.splitlines() if ".extern" in line]
    assert not externs, (name, externs[:3])
    print("compiled", name, len(ptx))
print("OK", len(signatures))
"""


@pytest.mark.skipif(ON_DEVICE, reason="on a device the other tests compile the kernels")
def test_kernels_compile_for_sm90():
    result = subprocess.run([sys.executable, "-c", PTX_CHECK], capture_output=True, text=True, timeout=300,
                            env={key: value for key, value in os.environ.items() if key != "NUMBA_ENABLE_CUDASIM"})
    output = result.stdout[-3000:] + result.stderr[-3000:]
    assert result.returncode == 0, output
    if result.stdout.startswith("SKIP:"):
        pytest.skip(result.stdout.strip())
    assert "OK 10" in result.stdout, output

"""Start-up of the jit engine: numba imported only on first use (crayon.jit.lazy), the entry kernels compiled
ahead of time (crayon.jit.aot) and identical to the numba dispatchers, the types the engine hands them, and what
happens when the compiled module is missing, broken or cannot be built."""

from __future__ import annotations

import hashlib
import importlib.machinery
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest

import crayon
from conftest import corpus_text, mergeable_ranks, tiktoken_encoding
from crayon.errors import BackendUnavailableError
from crayon.jit import aot
from crayon.jit.engine import JitEngine
from crayon.reference.bpe import BytePairModel
from crayon.tokenizer import Tokenizer

ENCODINGS = ["cl100k_base", "o200k_base"]


def _python(code: str, **env) -> str:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                            timeout=600, env={**os.environ, **env})
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def _texts() -> list[str]:
    return [corpus_text("big.txt", 40_000), corpus_text("multilingual.txt", 40_000),
            corpus_text("python_code.py", 20_000), "a" * 3000 + " " * 700 + "好" * 900, ""]


@pytest.mark.parametrize("name", ENCODINGS)
def test_compiled_kernels_equal_the_numba_kernels_and_tiktoken(name):
    tok = crayon.load(name, backend="jit")
    compiled = JitEngine(tok, tables=tok.tables, kernels="aot")
    dispatched = JitEngine(tok, tables=tok.tables, kernels="numba")
    assert (compiled.kernels_kind, dispatched.kernels_kind) == ("aot", "numba")
    reference = tiktoken_encoding(name)
    texts = _texts()
    for text in texts:
        expected = reference.encode_ordinary(text)
        assert compiled.encode_ordinary(text) == dispatched.encode_ordinary(text) == expected
    for threads in (1, 2):
        assert compiled.encode_ordinary_batch(texts, num_threads=threads) == [reference.encode_ordinary(t) for t in texts]


def test_the_engine_hands_the_compiled_kernels_the_declared_types():
    """The extension does not check types (a wrong dtype would be misread): every call site passes SIGNATURES'.
    Both kernels, the fused one and the span encoder of other patterns, give the numba kernels' tokens."""
    module = aot.load_kernels()
    assert module is not None
    calls = []

    def checked(name):
        def call(*args):
            assert aot.argument_spec(args) == aot.SIGNATURES[name], name
            calls.append(name)
            return getattr(module, name)(*args)
        return call

    shim = types.SimpleNamespace(**{name: checked(name) for name in aot.SIGNATURES})
    tokenizers = [crayon.load("cl100k_base", backend="jit"),
                  Tokenizer("custom", BytePairModel(mergeable_ranks("cl100k_base")), pattern=r"\S+|\s+", backend="jit")]
    for tok in tokenizers:
        engine = JitEngine(tok, tables=tok.engine.tables)
        engine._kernels = shim
        dispatched = JitEngine(tok, tables=tok.engine.tables, kernels="numba")
        for text in _texts():  # the long run of "a" grows the scratch buffers (NEED_SCRATCH)
            assert engine.encode_ordinary(text) == dispatched.encode_ordinary(text)
        assert engine.encode_ordinary_batch(_texts(), num_threads=2) == dispatched.encode_ordinary_batch(_texts())
        engine.long_texts.min_bytes, engine.long_texts.part_bytes = 1, 64  # cut: the parts' ids appended to a list
        text = " ".join(_texts())
        assert engine.encode_ordinary(text) == dispatched.encode_ordinary(text)
        for data in (b"ok \xe2\x82", "naïve 中文".encode()):
            text = np.frombuffer(data, np.uint8)
            assert engine.utf8_error(text) == dispatched.utf8_error(text) == (3 if data.startswith(b"ok") else -1)
    assert set(calls) == set(aot.SIGNATURES)


def test_no_numba_import_on_a_warm_start():
    """With the compiled module and the cartridge cached, loading and encoding never import numba."""
    code = """
        import sys, crayon
        tok = crayon.load("cl100k_base")
        assert tok.encode("hello world") == [15339, 1917]
        print(tok.engine.kernels_kind, "numba" in sys.modules)
    """
    _python(code)  # warms the caches (cartridge, compiled kernels) if no test did
    assert _python(code).split() == ["aot", "False"]


def test_lazy_kernels_become_numba_dispatchers_everywhere():
    out = _python("""
        import sys
        import crayon.jit.bpe, crayon.jit.cache, crayon.jit.engine, crayon.jit.kernels, crayon.jit.pretokenize
        from crayon.jit.bpe import merge_loop
        from crayon.jit.lazy import LazyKernel, njit
        assert "numba" not in sys.modules and type(merge_loop) is LazyKernel
        assert merge_loop.__name__ == "merge_loop" and merge_loop.__doc__

        @njit(cache=False)
        def twice(x):
            return 2 * x

        assert twice(21) == 42 and "numba" in sys.modules
        from numba.core.registry import CPUDispatcher
        assert isinstance(crayon.jit.bpe.merge_loop, CPUDispatcher) and isinstance(merge_loop, CPUDispatcher)
        assert isinstance(crayon.jit.kernels.encode_piece, CPUDispatcher)
        from numba.core.extending import _Intrinsic
        assert isinstance(crayon.jit.cache.prefetch, _Intrinsic)

        @njit(cache=False)
        def thrice(x):
            return 3 * x

        assert isinstance(thrice, CPUDispatcher)
        print("ok")
    """)
    assert out.strip() == "ok"


def test_aot_off_and_required(monkeypatch):
    tok = crayon.load("cl100k_base", backend="jit")
    monkeypatch.setenv("CRAYON_AOT", "0")
    assert aot.load_kernels() is None
    engine = JitEngine(tok, tables=tok.tables)
    assert engine.encode_ordinary("hello world") == [15339, 1917] and engine.kernels_kind == "numba"
    with pytest.raises(BackendUnavailableError, match="CRAYON_AOT=0"):
        JitEngine(tok, tables=tok.tables, kernels="aot").encode_ordinary("hello")
    with pytest.raises(ValueError, match="unknown kernels"):
        JitEngine(tok, tables=tok.tables, kernels="fast")


def test_a_failed_build_warns_once_and_runs_the_numba_kernels(monkeypatch, tmp_path):
    monkeypatch.setenv("CRAYON_KERNEL_DIR", str(tmp_path))
    monkeypatch.setattr(aot, "_loaded", {})
    monkeypatch.setattr(aot, "_build_failure", [])

    def no_compiler(name, path):
        raise OSError("no C compiler")

    monkeypatch.setattr(aot, "build_kernels", no_compiler)
    with pytest.warns(RuntimeWarning, match="no C compiler"):
        assert aot.load_kernels() is None
    tok = crayon.load("cl100k_base", backend="jit")
    engine = JitEngine(tok, tables=tok.tables)
    assert engine.encode_ordinary("hello world") == [15339, 1917] and engine.kernels_kind == "numba"


def test_a_changed_truncated_or_foreign_module_is_not_loaded(tmp_path):
    """Loading a truncated shared library can crash the process: the file is checked against its build's sha256."""
    name = aot.module_name()
    built = aot.kernel_dir() / (name + importlib.machinery.EXTENSION_SUFFIXES[0])
    assert aot.load_kernels() is not None and built.is_file()
    copy = tmp_path / built.name
    recorded = aot._digest_path(built).read_text()
    content = built.read_bytes()
    for mangled in (content[:4096], content[:-1], content[:1000] + bytes([content[1000] ^ 1]) + content[1001:]):
        copy.write_bytes(mangled)
        aot._digest_path(copy).write_text(recorded)
        assert aot._import(name, copy) is None
    copy.write_bytes(content)
    aot._digest_path(copy).unlink()
    assert aot._import(name, copy) is None
    foreign = tmp_path / ("other" + importlib.machinery.EXTENSION_SUFFIXES[0])
    foreign.write_bytes(np.zeros(1000, np.uint8).tobytes())
    aot._digest_path(foreign).write_text(aot.hashlib.sha256(foreign.read_bytes()).hexdigest())
    assert aot._import("other", foreign) is None
    assert aot._import(name, tmp_path / "missing.so") is None


def test_argument_spec():
    readonly = np.zeros(3, np.uint8)
    readonly.flags.writeable = False
    assert aot.argument_spec((readonly, np.zeros((2, 2), np.int64), 3)) == (
        aot.TEXT, ("array", "<i8", 2, True), aot.INT)
    assert aot.argument_spec(np.zeros((4, 4), np.int32)[:, 0]) == ("non-contiguous array",)
    assert aot.argument_spec(None) == ("NoneType",)


def test_training_runs_the_compiled_kernels_with_the_declared_types_and_without_numba():
    """The trainer's kernels come from the compiled module (``aot.TRAINING``), each called with the types it
    declares (the module checks none), and training imports no numba; the merges are the reference trainer's."""
    texts = [corpus_text("big.txt", 60_000), corpus_text("multilingual.txt", 20_000), corpus_text("python_code.py", 20_000)]
    assert aot.load_kernels(aot.TRAINING) is not None  # built here where missing (building imports numba)
    out = _python(f"""
        import sys
        from crayon.jit import aot, train as jit_train

        module = aot.load_kernels(aot.TRAINING)
        assert module is not None
        calls = set()

        class Checked:
            def __getattr__(self, name):
                def call(*args):
                    arguments, _ = aot.TRAINING_SIGNATURES[name]
                    assert aot.argument_spec(args) == arguments, (name, aot.argument_spec(args))
                    calls.add(name)
                    return getattr(module, name)(*args)
                return call

        jit_train.training_kernels = Checked
        result = jit_train.train_bpe_jit({texts!r}, 700, special_tokens=["<|endoftext|>"], workers=2)
        assert calls == set(aot.TRAINING_SIGNATURES), calls
        print("numba" in sys.modules, sorted(result.ranks.items(), key=lambda item: item[1])[256:])
    """)
    from crayon.reference.train import train_bpe

    expected = train_bpe(texts, 700, special_tokens=["<|endoftext|>"])
    assert out.strip() == f"False {sorted(expected.ranks.items(), key=lambda item: item[1])[256:]}"


def test_engine_tables_are_built_by_the_compiled_kernels_without_numba_and_equal_numba_s(monkeypatch):
    """A tokenizer built in a process (``crayon.train``'s, say) builds its engine tables with the compiled table
    kernels (``aot.TABLES``), each called with the types it declares, without importing numba; the tables are
    those of the numba dispatchers."""
    assert aot.load_kernels(aot.TABLES) is not None  # built here where missing (building imports numba)
    out = _python("""
        import hashlib, sys
        from conftest import mergeable_ranks
        from crayon.jit import aot
        from crayon.jit.tables import build_bpe_tables
        from crayon.reference.bpe import BytePairModel

        module = aot.load_kernels(aot.TABLES)
        calls = set()

        class Recorded:
            def __getattr__(self, name):
                calls.add(name)
                return getattr(module, name)

        aot.load_kernels = lambda kernel_set: Recorded()
        tables = build_bpe_tables(BytePairModel(mergeable_ranks("r50k_base")))
        assert calls == set(aot.TABLE_SIGNATURES), calls
        digest = hashlib.sha256(b"".join(tables[name].tobytes() for name in sorted(tables))).hexdigest()
        print("numba" in sys.modules, digest)
    """, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    from crayon.jit.tables import build_bpe_tables

    monkeypatch.setenv("CRAYON_AOT", "0")
    tables = build_bpe_tables(BytePairModel(mergeable_ranks("r50k_base")))
    digest = hashlib.sha256(b"".join(tables[name].tobytes() for name in sorted(tables))).hexdigest()
    assert out.split() == ["False", digest]


def test_a_user_trains_and_encodes_without_numba():
    """``crayon.train`` then ``encode``, as a user writes it: the trainer's, the engine tables' and the encoder's
    compiled modules do all the work, and numba is never imported."""
    for kernel_set in aot.KERNEL_SETS:
        assert aot.load_kernels(kernel_set) is not None  # built here where missing (building imports numba)
    out = _python("""
        import sys
        import crayon

        tok = crayon.train(texts=["int main(void) { return 0; }\\n" * 40, "low lower lowest " * 50], vocab_size=290,
                           progress=False)
        assert tok.decode(tok.encode("int lowest")) == "int lowest"
        print(tok.engine.kernels_kind, "numba" in sys.modules)
    """)
    assert out.split() == ["aot", "False"]

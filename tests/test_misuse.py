"""The mistakes users make and the faults they meet (issue 12): each gets a clear, typed error or the right result,
never a silently wrong tokenizer, dropped text or a crash. Grouped by the class of mistake, not by the report."""

from __future__ import annotations

import base64
import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import crayon
import crayon.cartridge
import crayon.loading
from crayon.cartridge import open_cartridge, write_cartridge
from crayon.cli import main as cli_main
from crayon.errors import (
    CartridgeError,
    FormatError,
    PatternCoverageWarning,
    TrainingWarning,
    UnsupportedComponentError,
)
from crayon.patterns import R50K_BASE
from conftest import corpus_text, tiktoken_encoding

ROOT = Path(__file__).resolve().parents[1]
SENTENCE = "the quick brown fox jumps over the lazy dog; the lazy dog sleeps"


def write_tiktoken(path: Path, ranks: dict[bytes, int]) -> Path:
    """A .tiktoken file as tiktoken's loader reads it (the empty token written as "=", as in Whisper's files)."""
    lines = [(base64.b64encode(token) or b"=") + b" %d" % rank for token, rank in sorted(ranks.items(), key=lambda x: x[1])]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def byte_ranks(*extra: bytes, without: bytes = b"") -> dict[bytes, int]:
    ranks = {bytes([b]): b for b in range(256) if bytes([b]) not in without}
    ranks = {token: rank for rank, token in enumerate(ranks)}
    for token in extra:
        ranks[token] = len(ranks)
    return ranks


@pytest.fixture(scope="module")
def cl100k():
    return crayon.load("cl100k_base")


@pytest.fixture
def small_tokenizer():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TrainingWarning)
        return crayon.train(texts=[SENTENCE * 20], vocab_size=300, progress=False, special_tokens=("<|endoftext|>",))


# ------------------------------------------------------------ a corpus, a pattern, a set: never guessed from a type


def test_train_refuses_a_positional_corpus_naming_the_keywords(tmp_path):
    (tmp_path / "a.txt").write_text(SENTENCE)
    with pytest.raises(TypeError, match=r"files=\[path, \.\.\.\].*texts=\[str, \.\.\.\]"):
        crayon.train([str(tmp_path / "a.txt")], vocab_size=300)


def test_train_files_reads_the_files_not_their_names(tmp_path):
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text(SENTENCE * 50)
    with pytest.warns(TrainingWarning):
        tok = crayon.train(files=[tmp_path / "a.txt", str(tmp_path / "b.txt")], vocab_size=400, progress=False)
    tokens = set(tok.model.ranks)
    assert b" lazy" in tokens and b".txt" not in tokens
    assert tok.encode(" lazy dog") == [tok.model.ranks[b" lazy"], tok.model.ranks[b" dog"]]


@pytest.mark.parametrize(
    "corpus, error, match",
    [
        (dict(texts="one text"), TypeError, r"texts=\[text\]"),
        (dict(files="a.txt"), TypeError, r"files=\['a.txt'\]"),
        (dict(texts=[Path("a.txt")]), TypeError, "files go in files="),
        (dict(texts=[b"bytes"]), TypeError, "str items"),
        (dict(files=["/no/such/file.txt"]), FileNotFoundError, "/no/such/file.txt"),
        (dict(), TypeError, "needs a corpus"),
    ],
)
def test_train_refuses_an_ambiguous_or_wrong_corpus(corpus, error, match):
    with pytest.raises(error, match=match):
        crayon.train(**corpus, vocab_size=300, progress=False)


@pytest.mark.parametrize("backend", ["jit", "reference"])
def test_training_that_ends_below_vocab_size_warns_with_the_size_reached(backend):
    with pytest.warns(TrainingWarning, match=r"stopped at (\d+) tokens, below vocab_size=5000") as caught:
        tok = crayon.train(texts=[SENTENCE], vocab_size=5000, progress=False, backend=backend)
    reached = int(str(caught[0].message).split("stopped at ")[1].split()[0])
    assert tok.n_vocab == reached < 5000


def test_a_huge_vocab_size_costs_what_the_corpus_can_produce():
    """vocab_size=10**8 on one sentence allocated tables for 10**8 tokens (6.7 GB); now the corpus's bound: the
    peak is that of a small vocab_size (compiling the trainer's kernels dominates both), not gigabytes more."""

    def trained(vocab_size: int) -> tuple[int, int]:
        script = textwrap.dedent(f"""
            import resource, warnings, crayon
            warnings.simplefilter("ignore")
            tok = crayon.train(texts=[{SENTENCE!r}], vocab_size={vocab_size}, progress=False)
            print(tok.n_vocab, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
        """)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=600)
        assert done.returncode == 0, done.stderr
        n_vocab, peak_mb = map(int, done.stdout.split())
        return n_vocab, peak_mb

    small_vocab, small_peak = trained(260)
    n_vocab, peak_mb = trained(10**8)
    assert small_vocab == 260 and n_vocab < 400 and peak_mb < small_peak + 300, (small_peak, peak_mb)


@pytest.mark.parametrize("pattern", ["cl100k", "CL100K_BASE", "cl200k_base", "o200k"])
def test_a_mistyped_pattern_name_is_refused_with_the_known_names(tmp_path, pattern):
    ranks = write_tiktoken(tmp_path / "ranks.tiktoken", byte_ranks(b"ab"))
    with pytest.raises(ValueError, match=r"unknown pattern name .*did you mean '(cl100k|o200k)_base'.*known names"):
        crayon.load(ranks, pattern=pattern)
    with pytest.raises(ValueError, match="unknown pattern name"):
        crayon.train(texts=["some text"], vocab_size=300, pattern=pattern, progress=False)


def test_cli_train_refuses_a_mistyped_pattern(tmp_path, capsys):
    (tmp_path / "a.txt").write_text(SENTENCE)
    with pytest.raises(SystemExit) as exited:
        cli_main(["train", str(tmp_path / "a.txt"), "-o", str(tmp_path / "x.crayon"), "--vocab-size", "300",
                  "--pattern", "cl200k_base", "--quiet"])
    assert exited.value.code != 0 and "did you mean 'cl100k_base'" in capsys.readouterr().err
    assert not (tmp_path / "x.crayon").exists()


def test_a_regex_that_skips_text_is_detected(tmp_path):
    ranks = write_tiktoken(tmp_path / "ranks.tiktoken", byte_ranks(b"ab"))
    with pytest.warns(PatternCoverageWarning, match="skips text"):
        tok = crayon.load(ranks, pattern=r"\w+")
    assert tok.encode("ab cd") == tok.encode("abcd")  # the documented loss the warning announces
    with pytest.raises(ValueError, match=r"skips 1 characters.*' ' at offset 2"):
        tok.check_pattern("ab cd")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        covering = crayon.load(ranks, pattern=r"\w+|\W+")
        covering.check_pattern("ab cd, ünï 🙂\n")
        crayon.load(ranks, pattern="o200k_base").check_pattern("ab cd")
    with pytest.raises(ValueError, match="not a valid regex"):
        crayon.load(ranks, pattern=r"(\w+")
    with pytest.warns(PatternCoverageWarning):
        crayon.train(texts=["ab cd " * 20], vocab_size=260, pattern=r"\w+", special_tokens=(), progress=False)


@pytest.mark.parametrize(
    "call",
    [
        lambda enc: enc.encode("hi <|endoftext|>", allowed_special="<|endoftext|>"),
        lambda enc: enc.encode("hi", allowed_special=None),
        lambda enc: enc.decode([15339.9]),
        lambda enc: enc.decode(["15339"]),
        lambda enc: enc.decode(15339),
        lambda enc: enc.decode_single_token_bytes(15339.0),
        lambda enc: enc.decode_tokens_bytes(["1"]),
        lambda enc: enc.decode_bytes([1.5]),
        lambda enc: enc.encode(b"x"),
        lambda enc: enc.encode(None),
        lambda enc: enc.encode(5),
        lambda enc: enc.encode_ordinary(b"x"),
        lambda enc: enc.encode_ordinary(None),
        lambda enc: enc.encode_batch([b"x"]),
        lambda enc: enc.encode_ordinary_batch([None]),
        lambda enc: enc.encode_to_numpy(b"x"),
    ],
)
def test_wrong_argument_types_raise_typeerror_as_in_tiktoken(cl100k, call):
    with pytest.raises(TypeError):
        call(tiktoken_encoding("cl100k_base"))
    with pytest.raises(TypeError):
        call(cl100k)


def test_a_special_token_given_as_a_plain_str_names_the_fix(cl100k):
    with pytest.raises(TypeError, match=r"allowed_special=\{'<\|endoftext\|>'\}"):
        cl100k.encode("hi <|endoftext|>", allowed_special="<|endoftext|>")
    with pytest.raises(TypeError, match="disallowed_special"):
        cl100k.encode("hi", disallowed_special="<|endoftext|>")
    assert cl100k.encode("hi <|endoftext|>", allowed_special={"<|endoftext|>"})[-1] == 100257
    assert cl100k.encode("<|endoftext|>", disallowed_special=None) == tiktoken_encoding("cl100k_base").encode(
        "<|endoftext|>", disallowed_special=None)


def test_a_lone_text_or_id_where_a_list_is_expected_is_refused(cl100k):
    """tiktoken's encode_batch("abc") encodes each character; Crayon refuses (it is never what was meant)."""
    with pytest.raises(TypeError, match=r"pass \[text\]"):
        cl100k.encode_batch("hello")
    with pytest.raises(TypeError, match=r"pass \[text\]"):
        cl100k.encode_ordinary_batch("hello")
    assert cl100k.decode(np.array([15339], np.uint32)) == "hello" == cl100k.decode([np.int64(15339)])


# ------------------------------------------------------------------------ vocabularies tiktoken or HF accept


@pytest.mark.parametrize("backend", ["reference", "jit"])
def test_a_vocabulary_without_a_single_byte_token_encodes_as_tiktoken(tmp_path, backend):
    import tiktoken

    ranks = byte_ranks(b"qu", b"ab", b"abc", without=b"q")
    tok = crayon.load(write_tiktoken(tmp_path / "noq.tiktoken", ranks), pattern="r50k_base", backend=backend)
    expected = tiktoken.Encoding("noq", pat_str=R50K_BASE, mergeable_ranks=ranks, special_tokens={})
    for text in ["quick", "abc quack", "unique queue", "plain text"]:
        assert tok.encode(text) == expected.encode(text)
        assert tok.encode_batch([text, text]) == [expected.encode(text)] * 2
    with pytest.raises(crayon.UnknownTokenError, match="b'q'"):
        tok.encode("q")  # tiktoken panics here: no token covers the byte


@pytest.mark.parametrize("backend", ["reference", "jit"])
def test_whispers_empty_token_loads_as_in_tiktoken(tmp_path, backend):
    """Whisper's multilingual.tiktoken ends with an empty token ('= 50256'); tiktoken reads it as b''."""
    import tiktoken

    ranks = byte_ranks(b"ab", b"abc", b" a", b"")
    path = write_tiktoken(tmp_path / "multilingual.tiktoken", ranks)
    assert path.read_text().splitlines()[-1] == f"= {len(ranks) - 1}"
    specials = {"<|endoftext|>": len(ranks)}
    expected = tiktoken.Encoding("w", pat_str=R50K_BASE, mergeable_ranks=ranks, special_tokens=specials)
    tok = crayon.load(path, pattern="r50k_base", special_tokens=specials, backend=backend)
    text = "abc ab a <|endoftext|> abcabc"
    assert tok.encode(text, allowed_special="all") == expected.encode(text, allowed_special="all")
    assert tok.n_vocab == expected.n_vocab
    assert tok.decode_single_token_bytes(len(ranks) - 1) == b"" == expected.decode_single_token_bytes(len(ranks) - 1)
    reloaded = crayon.load(tok.save(tmp_path / "w"), backend=backend, verify=True)
    assert reloaded.encode(text, allowed_special="all") == expected.encode(text, allowed_special="all")
    assert reloaded.decode_single_token_bytes(len(ranks) - 1) == b"" and reloaded.n_vocab == expected.n_vocab
    assert reloaded.model.ranks == ranks
    with pytest.raises(crayon.UnknownTokenError):
        reloaded.decode_single_token_bytes(len(ranks) + 1)


@pytest.mark.parametrize(
    "specials, match",
    [
        ({"<|end|>": -1}, "ids are integers >= 0"),
        ({"<|end|>": 97}, "ordinary token b'a'"),
        ({"": 300}, "not a token"),
        ({"<a>": 300, "<b>": 300}, "share the id 300"),
        ({"<a>": True}, "ids are integers"),
        ({"<a>": 300.0}, "ids are integers"),
    ],
)
def test_bad_special_tokens_are_refused_at_load(tmp_path, specials, match):
    ranks = write_tiktoken(tmp_path / "ranks.tiktoken", byte_ranks(b"ab"))
    with pytest.raises(ValueError, match=match):
        crayon.load(ranks, pattern="cl100k_base", special_tokens=specials)


def test_a_cartridge_with_bad_special_tokens_is_a_cartridge_error(tmp_path, small_tokenizer):
    path = small_tokenizer.save(tmp_path / "t")
    with open_cartridge(path) as cartridge:
        metadata, sections = dict(cartridge.metadata), {k: np.array(v) for k, v in cartridge.sections.items()}
    metadata["special_tokens"] = {"<|endoftext|>": 100}  # an ordinary token's id
    write_cartridge(path, metadata, sections)
    with pytest.raises(CartridgeError, match="ordinary token"):
        crayon.load(path)


# ------------------------------------------------------------------------------ files: reading and writing


def test_mmap_false_survives_the_file_being_truncated_in_place(tmp_path, small_tokenizer):
    path = small_tokenizer.save(tmp_path / "t")
    tok = crayon.load(path, mmap=False, backend="jit")
    expected = small_tokenizer.encode(SENTENCE)
    with open(path, "r+b") as handle:
        handle.truncate(0)
    assert tok.encode(SENTENCE) == expected and tok.decode(expected) == SENTENCE


def test_saving_over_a_cartridge_in_use_replaces_it_by_rename(tmp_path, small_tokenizer):
    path = small_tokenizer.save(tmp_path / "t")
    inode = path.stat().st_ino
    in_use = crayon.load(path)
    small_tokenizer.save(path)
    assert path.stat().st_ino != inode
    assert in_use.encode(SENTENCE) == small_tokenizer.encode(SENTENCE)


def test_a_mangled_cartridge_fails_as_cartridge_error(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers, trainers

    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.train_from_iterator([SENTENCE * 10], trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    hf.save(str(tmp_path / "tokenizer.json"))
    path = crayon.load(tmp_path / "tokenizer.json").save(tmp_path / "hf")
    with open_cartridge(path) as cartridge:
        metadata, sections = dict(cartridge.metadata), {k: np.array(v) for k, v in cartridge.sections.items()}
    sections["merges.pairs"][0] = (10**6, 10**6)
    write_cartridge(path, metadata, sections)
    with pytest.raises(CartridgeError, match="merges.pairs"):
        crayon.load(path, backend="reference").encode(SENTENCE)
    metadata["hf_pipeline"] = {"normalizer": 5, "pre_tokenizer": []}
    write_cartridge(path, metadata, sections)
    with pytest.raises(CartridgeError):
        crayon.load(path)


def test_a_corrupted_cached_profile_is_rebuilt_from_the_vocabulary(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setattr(crayon.loading, "profile_dirs", lambda: [cache])
    monkeypatch.setattr(crayon.loading, "cache_dirs", lambda: [cache])
    text = corpus_text("english_web.txt", 20_000)
    expected = tiktoken_encoding("cl100k_base").encode(text)
    assert crayon.load("cl100k_base").encode(text) == expected
    cached = cache / "cl100k_base.crayon"
    with open_cartridge(cached) as cartridge:
        start = min(entry[3] for entry in cartridge._entries)
    data = bytearray(cached.read_bytes())
    data[start : len(data) : 97] = bytes(len(range(start, len(data), 97)))  # zero bytes all over the sections
    cached.write_bytes(data)
    assert crayon.load("cl100k_base").encode(text) == expected
    open_cartridge(cached, verify=True).close()  # rebuilt


def test_a_cached_profile_is_checksummed_once_per_version(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setattr(crayon.loading, "profile_dirs", lambda: [cache])
    monkeypatch.setattr(crayon.loading, "cache_dirs", lambda: [cache])
    crayon.load("cl100k_base")
    checked = []
    original = crayon.cartridge.Cartridge.verify_checksums
    monkeypatch.setattr(crayon.cartridge.Cartridge, "verify_checksums",
                        lambda self: checked.append(self.path) or original(self))
    for _ in range(3):
        crayon.load("cl100k_base")
    assert len(checked) <= 1
    cached = cache / "cl100k_base.crayon"
    os.utime(cached, ns=(cached.stat().st_atime_ns, cached.stat().st_mtime_ns + 10**9))  # written since
    crayon.load("cl100k_base")
    assert checked[-1] == cached and len(checked) <= 2


def test_save_appends_the_suffix_and_load_finds_it(tmp_path, monkeypatch, small_tokenizer):
    monkeypatch.chdir(tmp_path)
    assert small_tokenizer.save("model") == Path("model.crayon")
    for source in ("model", "model.crayon", tmp_path / "model", tmp_path / "model.crayon"):
        assert crayon.load(source).encode(SENTENCE) == small_tokenizer.encode(SENTENCE)


def test_a_file_or_folder_named_like_a_profile_does_not_hide_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cl100k_base").mkdir()
    (tmp_path / "o200k_base").write_text("not a vocabulary")
    assert crayon.load("cl100k_base").encode("hello world") == [15339, 1917]
    assert crayon.load("o200k_base").name == "o200k_base"
    with pytest.raises(FileNotFoundError, match="no profile named 'nope'.*no cartridge nope.crayon"):
        crayon.load("nope")


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_saved_cartridges_get_the_mode_the_umask_gives(tmp_path, small_tokenizer, mask, mode):
    previous = os.umask(mask)
    try:
        path = small_tokenizer.save(tmp_path / "t")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == mode


def test_save_errors_name_the_users_path(tmp_path, small_tokenizer):
    target = tmp_path / "missing" / "x.crayon"
    with pytest.raises(FileNotFoundError, match=str(target)):
        small_tokenizer.save(target)
    (tmp_path / "folder.crayon").mkdir()
    with pytest.raises(IsADirectoryError, match="folder.crayon"):
        small_tokenizer.save(tmp_path / "folder.crayon")


def test_cli_train_checks_the_output_folder_before_training(tmp_path, monkeypatch, capsys):
    (tmp_path / "a.txt").write_text(SENTENCE)
    monkeypatch.setattr(crayon, "train", lambda *a, **k: pytest.fail("trained before checking the output"))
    target = tmp_path / "missing" / "x.crayon"
    with pytest.raises(SystemExit) as exited:
        cli_main(["train", str(tmp_path / "a.txt"), "-o", str(target), "--vocab-size", "300", "--quiet"])
    assert exited.value.code != 0 and str(target) in capsys.readouterr().err


def test_stale_temporary_files_of_killed_saves_are_removed(tmp_path, small_tokenizer):
    stale, fresh = tmp_path / ".t.crayon.abc123.tmp", tmp_path / ".t.crayon.def456.tmp"
    stale.write_bytes(b"half a cartridge")
    fresh.write_bytes(b"a save in progress")
    os.utime(stale, (time.time() - 2 * 3600,) * 2)
    small_tokenizer.save(tmp_path / "t")
    assert not stale.exists() and fresh.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".t.crayon.def456.tmp", "t.crayon"]


@pytest.mark.parametrize("kind", ["WordPiece", "Unigram", "WordLevel"])
def test_every_hf_model_loads_and_an_unknown_one_is_named_first(tmp_path, kind):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, normalizers, pre_tokenizers

    model = {
        "WordPiece": lambda: models.WordPiece({"[UNK]": 0, "a": 1}, unk_token="[UNK]"),
        "Unigram": lambda: models.Unigram([("<unk>", 0.0), ("a", -1.0)], 0),
        "WordLevel": lambda: models.WordLevel({"[UNK]": 0, "a": 1}, unk_token="[UNK]"),
    }[kind]()
    hf = tokenizers.Tokenizer(model)
    hf.normalizer, hf.pre_tokenizer = normalizers.BertNormalizer(), pre_tokenizers.BertPreTokenizer()
    hf.save(str(tmp_path / "tokenizer.json"))
    # read with BERT's normalizer and pre-tokenizer (tests/test_hf_families.py)
    loaded = crayon.load(tmp_path / "tokenizer.json", backend="reference")
    assert loaded.encode("A a") == hf.encode("A a", add_special_tokens=False).ids
    config = json.loads(hf.to_str())
    config["model"]["type"] = "Lattice"  # a model no HF version has: named before the rest is read
    (tmp_path / "tokenizer.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedComponentError, match="model 'Lattice' is not supported"):
        crayon.load(tmp_path / "tokenizer.json")


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        "[1, 2]",
        '{"model": 5}',
        '{"model": {"type": "BPE", "vocab": [1], "merges": []}}',
        '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": 5}, "pre_tokenizer": {"type": "ByteLevel"}}',
        '{"model": {"type": "BPE", "vocab": {}}, "pre_tokenizer": 7}',
    ],
)
def test_a_malformed_tokenizer_json_is_a_format_error(tmp_path, content):
    (tmp_path / "tokenizer.json").write_text(content)
    with pytest.raises(FormatError):
        crayon.load(tmp_path / "tokenizer.json")


def test_a_malformed_tiktoken_file_is_a_format_error(tmp_path):
    (tmp_path / "bad.tiktoken").write_text("YQ== 0\nnot-base64! 1\n")
    with pytest.raises(FormatError, match="bad.tiktoken:2"):
        crayon.load(tmp_path / "bad.tiktoken", pattern="cl100k_base")


# ---------------------------------------------------------------------------- environments and interruption


def test_kernels_run_where_numba_has_nowhere_to_cache(tmp_path):
    """A read-only install and an unwritable HOME (uid 1000 in a container): numba's cache=True raised
    "no locator available"; now the kernel compiles uncached and a warning names NUMBA_CACHE_DIR."""
    package = tmp_path / "package"
    package.mkdir()
    (package / "__pycache__").write_text("a file: no cache folder can be made here")
    (package / "kernel.py").write_text(textwrap.dedent("""
        from crayon.jit.lazy import njit

        @njit(cache=True)
        def double(x):
            return 2 * x
    """))
    (tmp_path / "home").write_text("HOME is a file: nothing can be made under it")
    env = {key: value for key, value in os.environ.items()
           if key not in ("NUMBA_CACHE_DIR", "CRAYON_PROFILE_DIR", "CRAYON_KERNEL_DIR")}
    env.update(HOME=str(tmp_path / "home" / "user"), PYTHONPATH=os.pathsep.join([str(package), str(ROOT)]),
               XDG_CACHE_HOME=str(tmp_path / "home" / "cache"))
    done = subprocess.run([sys.executable, "-c", "import kernel; print(kernel.double(21))"], env=env,
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "42" and "NUMBA_CACHE_DIR" in done.stderr


def assert_ctrl_c_stops_within_a_second(script: str, started, stopped, *, after: float) -> None:
    """Run ``script``, send SIGINT ``after`` seconds past its ``started`` mark, and check that the
    KeyboardInterrupt reached it (it writes its clock to ``stopped``) within a second."""
    process = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not started.exists():
            assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
            time.sleep(0.05)
        time.sleep(after)
        process.send_signal(signal.SIGINT)
        interrupted = time.monotonic()
        process.wait(timeout=60)
    finally:
        process.kill()
    assert "KeyboardInterrupt" in process.stderr.read()
    stopped_after = float(stopped.read_text()) - interrupted  # the same clock in both processes
    assert stopped_after < 1.0, f"training went on {stopped_after:.2f} s after Ctrl-C"


def test_ctrl_c_stops_word_counting_within_a_second(tmp_path):
    corpus = corpus_text("enwik8_head.xml")
    started = tmp_path / "started"
    script = textwrap.dedent(f"""
        import pathlib, time, crayon
        text = pathlib.Path({str(ROOT.parent / "shared" / "corpora" / "enwik8_head.xml")!r}).read_text()
        def texts():
            for i in range(200):  # about 1 GB: minutes of counting
                if i == 2:
                    pathlib.Path({str(started)!r}).touch()
                yield text
        try:
            crayon.train(texts=texts(), vocab_size=1000, progress=False)
        except KeyboardInterrupt:
            pathlib.Path({str(tmp_path / "stopped")!r}).write_text(repr(time.monotonic()))
            raise
    """)
    assert corpus
    assert_ctrl_c_stops_within_a_second(script, started, tmp_path / "stopped", after=0.5)


def test_ctrl_c_stops_merging_within_a_second(tmp_path):
    started = tmp_path / "started"
    script = textwrap.dedent(f"""
        import pathlib, time, crayon, crayon.jit.train as jit_train
        learn = jit_train.learn_merges
        def learn_merges(*args):
            pathlib.Path({str(started)!r}).touch()
            return learn(*args)
        jit_train.learn_merges = learn_merges
        text = pathlib.Path({str(ROOT.parent / "shared" / "corpora" / "big.txt")!r}).read_text()
        try:
            crayon.train(texts=[text, text[::-1], text.upper()], vocab_size=2_000_000, progress=False)
        except KeyboardInterrupt:
            pathlib.Path({str(tmp_path / "stopped")!r}).write_text(repr(time.monotonic()))
            raise
    """)
    corpus_text("big.txt", 10)
    assert_ctrl_c_stops_within_a_second(script, started, tmp_path / "stopped", after=1.0)

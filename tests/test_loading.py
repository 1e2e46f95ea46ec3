"""Loading and saving whole tokenizers: cartridges, profiles, longest match, exports, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import crayon
import crayon.loading
from conftest import corpus_text, tiktoken_encoding

TEXT_SAMPLES = ["big.txt", "multilingual.txt", "python_code.py"]


@pytest.fixture(scope="module")
def cl100k():
    return crayon.load("cl100k_base", backend="reference")


@pytest.fixture(scope="module")
def cl100k_cartridge(cl100k, tmp_path_factory):
    path = tmp_path_factory.mktemp("cartridges") / "cl100k_base.crayon"
    cl100k.save(path)
    return path


@pytest.fixture
def isolated_profiles(tmp_path, monkeypatch):
    """Profile folders inside tmp_path, so the tests neither read nor write the user's cache."""
    package, cache = tmp_path / "package", tmp_path / "cache"
    package.mkdir()
    monkeypatch.setattr(crayon.loading, "profile_dirs", lambda: [package, cache])
    monkeypatch.setattr(crayon.loading, "cache_dirs", lambda: [cache])
    return package, cache


@pytest.mark.parametrize("backend", ["reference", "jit"])
def test_cartridge_round_trip_matches_tiktoken(cl100k_cartridge, backend):
    tok = crayon.load(cl100k_cartridge, backend=backend)
    reference = tiktoken_encoding("cl100k_base")
    assert (tok.name, tok.n_vocab, tok.pattern, tok.special_tokens_set) == (
        "cl100k_base", reference.n_vocab, reference._pat_str, reference.special_tokens_set)
    for corpus in TEXT_SAMPLES:
        text = corpus_text(corpus, 50_000) + "<|endoftext|>"
        tokens = tok.encode(text, allowed_special="all")
        assert tokens == reference.encode(text, allowed_special="all")
        assert tok.decode_bytes(tokens) == text.encode()
    with pytest.raises(crayon.UnknownTokenError):
        tok.decode([100256])


def test_cartridge_opens_without_building_the_model(cl100k_cartridge):
    tok = crayon.load(cl100k_cartridge, backend="jit")
    assert tok._model is None  # decode and jit encode run on the mapped arrays
    assert tok.decode(tok.encode("hello world")) == "hello world"
    assert tok._model is None
    assert not tok.tables["token_bytes"].flags.writeable


def test_verify_refuses_a_changed_byte(cl100k_cartridge, tmp_path):
    crayon.load(cl100k_cartridge, verify=True, backend="reference")
    data = bytearray(cl100k_cartridge.read_bytes())
    data[len(data) // 2] ^= 0x40
    mangled = tmp_path / "mangled.crayon"
    mangled.write_bytes(bytes(data))
    with pytest.raises(crayon.CartridgeError):
        crayon.load(mangled, verify=True)
    truncated = tmp_path / "truncated.crayon"
    truncated.write_bytes(bytes(data[: len(data) // 3]))
    with pytest.raises(crayon.CartridgeError):
        crayon.load(truncated)


def test_hf_tokenizer_survives_a_cartridge(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, normalizers, pre_tokenizers, trainers

    hf = tokenizers.Tokenizer(models.BPE())
    hf.normalizer = normalizers.NFKC()
    hf.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)])
    hf.train_from_iterator([corpus_text("english_web.txt", 100_000)], trainers.BpeTrainer(
        vocab_size=600, special_tokens=["<s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    hf.save(str(tmp_path / "tokenizer.json"))
    text = corpus_text("big.txt", 20_000) + " ﬁ 123 <s>"
    expected = hf.encode(text, add_special_tokens=False).ids
    loaded = crayon.load(tmp_path / "tokenizer.json", backend="reference")
    loaded.save(tmp_path / "hf.crayon")
    for backend in ("reference", "jit"):
        assert crayon.load(tmp_path / "hf.crayon", backend=backend).encode(text, allowed_special="all") == expected


def test_profiles_compile_once_and_notice_a_changed_vocabulary(isolated_profiles, monkeypatch):
    _, cache = isolated_profiles
    tok = crayon.load("cl100k_base", backend="jit")
    cached = cache / "cl100k_base.crayon"
    assert cached.is_file()
    assert crayon.list_profiles()["cl100k_base"] == str(cached)
    assert crayon.load("cl100k_base", backend="jit").encode("hi there") == tok.encode("hi there")
    stamp = crayon.loading._source_stamp("cl100k_base")
    monkeypatch.setattr(crayon.loading, "_source_stamp", lambda name: {**stamp, "size": stamp["size"] + 1})
    assert not crayon.loading._is_fresh(cached, "cl100k_base")
    with pytest.raises(FileNotFoundError, match="no profile named 'nope'"):
        crayon.load("nope")


def test_trained_profile_in_package_folder(isolated_profiles):
    package, _ = isolated_profiles
    text = corpus_text("shakespeare.txt", 100_000)
    trained = crayon.train(texts=[text], vocab_size=400, progress=False, backend="reference", name="tiny")
    trained.save(package / "tiny.crayon")
    assert "tiny" in crayon.list_profiles()
    tok = crayon.load("tiny", backend="jit")
    assert tok.encode(text[:5000]) == trained.encode(text[:5000])


def test_longest_match_is_lossless_and_the_same_on_every_path(cl100k, tmp_path):
    text = corpus_text("multilingual.txt", 20_000) + corpus_text("enwik8_head.xml", 20_000)
    reference = crayon.load("cl100k_base", backend="reference", algorithm="longest")
    jit = crayon.load("cl100k_base", backend="jit", algorithm="longest")
    tokens = reference.encode_ordinary(text)
    assert jit.encode_ordinary(text) == tokens
    assert reference.decode_bytes(tokens) == text.encode()
    assert tokens != cl100k.encode_ordinary(text)  # a different algorithm: say so wherever it is measured
    with pytest.raises(ValueError, match="neither tiktoken nor HF"):
        reference.export(tmp_path / "longest.tiktoken")
    reference.save(tmp_path / "longest.crayon")
    assert crayon.load(tmp_path / "longest.crayon", backend="jit").encode_ordinary(text) == tokens


def test_seed_v2_cartridge_loads_as_longest_match(tmp_path):
    from crayon.cartridge import write_seed_v2
    from crayon.jit.dat import compile_dat

    vocab = ["a", "b", "ab", "abc", "hello", " ", "wor"]
    base, check, values = compile_dat([t.encode() for t in vocab], list(range(len(vocab))))
    write_seed_v2(tmp_path / "seed.dat", base, check, values, vocab)
    for backend in ("reference", "jit"):
        tok = crayon.load(tmp_path / "seed.dat", backend=backend)
        tokens = tok.encode("abc hello world! é")
        assert tokens[:4] == [3, 5, 4, 5]
        assert tok.decode(tokens) == "abc hello world! é"


def test_exports_load_in_tiktoken_and_hf(tmp_path):
    tiktoken = pytest.importorskip("tiktoken")
    tokenizers = pytest.importorskip("tokenizers")
    from crayon.formats.tiktoken_io import load_tiktoken_bpe

    text = corpus_text("english_web.txt", 200_000)
    tok = crayon.train(texts=[text], vocab_size=700, progress=False, special_tokens=("<|endoftext|>",))
    tok.export(tmp_path / "t.tiktoken", format="tiktoken")
    tok.export(tmp_path / "t.json", format="hf")
    exported = tiktoken.Encoding("t", pat_str=tok.pattern, mergeable_ranks=load_tiktoken_bpe(tmp_path / "t.tiktoken"),
                                 special_tokens=tok.special_tokens)
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "t.json"))
    sample = corpus_text("big.txt", 30_000) + " <|endoftext|> 日本語 "
    expected = tok.encode(sample, allowed_special="all")
    assert exported.encode(sample, allowed_special="all") == expected
    assert hf.encode(sample, add_special_tokens=False).ids == expected
    with pytest.raises(ValueError, match="unknown export format"):
        tok.export(tmp_path / "x", format="yaml")


def test_backend_errors_never_fall_back():
    with pytest.raises(crayon.BackendUnavailableError):
        crayon.load("cl100k_base", backend="cuda")
    with pytest.raises(ValueError, match="unknown algorithm"):
        crayon.load("cl100k_base", algorithm="unigram")


def test_cli_compile_verify_train(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(corpus_text("shakespeare.txt", 50_000), encoding="utf-8")
    run = lambda *args: subprocess.run([sys.executable, "-m", "crayon.cli", *args], capture_output=True, text=True)
    trained = run("train", str(corpus), "-o", str(tmp_path / "t.crayon"), "--vocab-size", "300", "--quiet")
    assert trained.returncode == 0, trained.stderr
    assert run("verify", str(tmp_path / "t.crayon")).stdout.strip().endswith("ok")
    data = bytearray((tmp_path / "t.crayon").read_bytes())
    data[-100] ^= 1
    (tmp_path / "bad.crayon").write_bytes(bytes(data))
    assert run("verify", str(tmp_path / "bad.crayon")).returncode == 1
    assert json.loads(json.dumps(crayon.load(tmp_path / "t.crayon").special_tokens)) == {"<|endoftext|>": 300 - 1}


@pytest.mark.parametrize("profile", ["lite", "standard"])
def test_shipped_profiles(profile):
    """The trained cartridges in cartridges/ load by name, pass verification and agree across engines."""
    text = corpus_text("english_web.txt", 30_000) + corpus_text("multilingual.txt", 10_000)
    tok = crayon.load(profile, verify=True)
    assert tok.backend == "jit" and tok.eot_token == tok.n_vocab - 1
    tokens = tok.encode(text + "<|endoftext|>", allowed_special="all")
    assert tokens == tok.with_backend("reference").encode(text + "<|endoftext|>", allowed_special="all")
    assert tok.decode_bytes(tokens[:-1]) == text.encode()


def test_auto_backend_choice_is_inspectable(monkeypatch):
    from crayon.gpu import capacity

    tok = crayon.load("cl100k_base")
    assert tok.backend == "jit"
    assert tok.encode_batch(["a b", "c"]) == [[64, 293], [66]]
    assert tok.batch_choice == ("jit", "CPU: 4 characters is below the GPU batch threshold")
    monkeypatch.setattr(capacity, "should_use_gpu", lambda size: (False, f"CPU: no GPU for {size}"))
    monkeypatch.setenv("CRAYON_GPU_MIN_BATCH_BYTES", "3")
    tok.encode_batch(["a b", "c"])
    assert tok.batch_choice == ("jit", "CPU: no GPU for 4")
    explicit = crayon.load("cl100k_base", backend="jit")
    explicit.encode_batch(["a b"])
    assert explicit.batch_choice is None  # an explicit backend is never switched

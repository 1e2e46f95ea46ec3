"""The dataset pipeline: the cut rule, jit pipeline == reference pipeline == whole-text encode, shards, Ctrl-C."""

from __future__ import annotations

import functools
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import crayon
import crayon.shards
from crayon.shards import read_shard, token_dtype
from crayon.errors import UnsupportedComponentError
from crayon.jit import kernels as jit_kernels
from crayon.jit import pipeline as jit_pipeline
from crayon.patterns import PATTERNS
from crayon.reference import pipeline as reference_pipeline
from crayon.reference.bpe import BytePairModel
from crayon.reference.pretokenize import split
from tests.conftest import CORPORA_DIR, CORPUS_FILES, corpus_text, mergeable_ranks
from tests.strategies import tokenizer_text

FAMILIES = ("r50k_base", "cl100k_base", "o200k_base")
HARD_TEXT = st.lists(st.one_of(tokenizer_text, st.sampled_from(["  \n", " \r\n", "x\r\ny", ".\n/", "a.\r\n/b", "é\n"])),
                     max_size=4).map("".join)


@functools.lru_cache(maxsize=None)
def tokenizer(family: str, backend: str = "jit") -> crayon.Tokenizer:
    """A tokenizer with ``family``'s pattern over cl100k's vocabulary (r50k's vocabulary is not installed here)."""
    return crayon.Tokenizer(family, BytePairModel(mergeable_ranks("cl100k_base")), pattern=family,
                            special_tokens={"<|endoftext|>": 100257}, backend=backend)


def documents_of(texts: list[bytes]) -> list[reference_pipeline.Document]:
    return [reference_pipeline.Document(f"text{i}", data, 0, len(data)) for i, data in enumerate(texts)]


def pipeline_tokens(module, tok, texts: list[bytes], **options) -> list[list[int]]:
    found = dict(module.encode_documents(tok, documents_of(texts), **options))
    assert sorted(found) == list(range(len(texts)))
    return [found[i].tolist() for i in range(len(texts))]


# ------------------------------------------------------------------------------------------------ the cut rule


@pytest.mark.parametrize("family", FAMILIES)
@settings(max_examples=150, deadline=None)
@given(text=HARD_TEXT)
def test_every_accepted_cut_keeps_the_spans(family, text):
    """The proof's claim, checked directly: at every position the rule accepts, findall(T) = findall(A) + findall(B)."""
    data = text.encode("utf-8")
    rule = reference_pipeline.CutRule(tokenizer(family))
    for p in range(1, len(data)):
        if rule.is_cut(data, p):
            left, right = data[:p].decode(), data[p:].decode()
            assert split(text, PATTERNS[family]) == split(left, PATTERNS[family]) + split(right, PATTERNS[family]), p


def test_the_traps_are_not_cuts():
    """Whitespace before a newline (\\s+(?!\\S) and $ differ), CRLF under r50k, o200k's trailing '/'."""
    for family, text, p in [("r50k_base", "a  \nb", 4), ("cl100k_base", "a  \nb", 4), ("r50k_base", "a\r\nb", 3),
                            ("o200k_base", "a.\n/b", 3), ("cl100k_base", "a\n b", 2), ("cl100k_base", "a  b", 2)]:
        assert not reference_pipeline.CutRule(tokenizer(family)).is_cut(text.encode(), p), (family, text)
    assert reference_pipeline.CutRule(tokenizer("cl100k_base")).is_cut(b"a\r\nb", 3)
    assert reference_pipeline.CutRule(tokenizer("cl100k_base")).is_cut(b"a b", 1)


def test_pipelines_without_a_proven_rule_refuse():
    custom = crayon.Tokenizer("custom", BytePairModel(mergeable_ranks("cl100k_base")), pattern=r"\w+|\W")
    with pytest.raises(UnsupportedComponentError, match="chunk_bytes=None"):
        list(jit_pipeline.encode_documents(custom, documents_of([b"a b"])))
    assert pipeline_tokens(jit_pipeline, custom, [b"a b c"], chunk_bytes=None) == [custom.encode_ordinary("a b c")]
    with pytest.raises(UnsupportedComponentError, match="contains a space"):
        reference_pipeline.CutRule(tokenizer("cl100k_base"), allowed_special={"<|a b|>"})


# ----------------------------------------------------------------------------- jit == reference == whole text


@pytest.mark.parametrize("family", FAMILIES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(HARD_TEXT, min_size=1, max_size=3), chunk_bytes=st.integers(1, 40))
def test_jit_pipeline_equals_reference_pipeline_equals_whole_text(family, texts, chunk_bytes):
    tok = tokenizer(family)
    data = [text.encode("utf-8") for text in texts]
    whole = [tok.encode_ordinary(text) for text in texts]
    assert pipeline_tokens(jit_pipeline, tok, data, chunk_bytes=chunk_bytes, workers=2) == whole
    assert pipeline_tokens(reference_pipeline, tokenizer(family, "reference"), data, chunk_bytes=chunk_bytes) == whole


@pytest.mark.parametrize("family", FAMILIES)
def test_multibyte_characters_at_every_cut_offset(family):
    text = "naïve 中文 x\n日本語\r\nz 😀 a/b Straße\n\n  e\u0301 \u3000 ok.\n/end 👍🏽 ẞ" * 2
    data = text.encode("utf-8")
    tok, want = tokenizer(family), tokenizer(family).encode_ordinary(text)
    for chunk_bytes in range(1, len(data) + 1):
        assert pipeline_tokens(jit_pipeline, tok, [data], chunk_bytes=chunk_bytes, workers=2) == [want], chunk_bytes


@pytest.mark.parametrize("text", ["", "no newline at the end", "a" * 5000, " " * 3000 + "x" + " " * 3000,
                                  "line\r\n" * 500, "<|endoftext|> specials <|endoftext|>\n" * 50,
                                  "\n" * 1000 + "tail"])
def test_edge_files(text):
    tok = tokenizer("cl100k_base")
    for chunk_bytes in (1, 7, 64, None):
        assert pipeline_tokens(jit_pipeline, tok, [text.encode()], chunk_bytes=chunk_bytes) == [tok.encode_ordinary(text)]


def test_allowed_specials_and_invalid_utf8():
    tok = tokenizer("cl100k_base")
    text = "one <|endoftext|> two\nthree <|endoftext|>" * 20
    want = tok.encode(text, allowed_special={"<|endoftext|>"})
    for module in (jit_pipeline, reference_pipeline):
        assert pipeline_tokens(module, tok, [text.encode()], chunk_bytes=9, allowed_special={"<|endoftext|>"}) == [want]
    bad = b"ok \xff\xfe bytes\n\xc3 end " * 30
    with pytest.raises(ValueError, match="errors='replace'"):
        pipeline_tokens(jit_pipeline, tok, [bad], chunk_bytes=16)
    want = tok.encode_ordinary(bad.decode("utf-8", "replace"))
    for module in (jit_pipeline, reference_pipeline):
        assert pipeline_tokens(module, tok, [bad], chunk_bytes=16, errors="replace") == [want]


@pytest.mark.parametrize("name", CORPUS_FILES)
def test_shared_corpora(name):
    corpus_text(name, 1)  # skips where the corpora are absent
    data = (CORPORA_DIR / name).read_bytes()
    tok = crayon.load("cl100k_base")
    want = tok.encode_ordinary(data.decode("utf-8"))
    assert pipeline_tokens(jit_pipeline, tok, [data], chunk_bytes=4096, workers=2) == [want]
    head = data[:20000].decode("utf-8", "ignore").encode()
    reference = tok.with_backend("reference")
    assert pipeline_tokens(reference_pipeline, reference, [head], chunk_bytes=1000) == [tok.encode_ordinary(head.decode())]


def test_ordered_map_keeps_order_bounds_reading_and_raises():
    read = []

    def items():
        for i in range(50):
            read.append(i)
            yield i

    results = reference_pipeline.ordered_map(lambda i: (time.sleep(0.001 * (i % 3)), i * i)[1], items(), 3, 4)
    for item, result in results:
        assert result == item * item
        assert len(read) <= item + 4  # back-pressure: never more than in_flight ahead of the consumer

    def fail(i):
        raise KeyError(i)

    with pytest.raises(KeyError):
        list(reference_pipeline.ordered_map(fail, range(5), 2, 2))


# ----------------------------------------------------------------------------------------------- user API


@pytest.fixture
def corpus_dir(tmp_path):
    texts = ["first document\nwith two lines", "", "third: 中文 and CRLF\r\nend\n", "fourth " * 2000]
    for i, text in enumerate(texts):
        (tmp_path / f"doc{i}.txt").write_bytes(text.encode())
    return tmp_path, texts


@pytest.mark.parametrize("suffix", [".bin", ".npy"])
@pytest.mark.parametrize("maintain_every_batch", [False, True])
def test_write_tokens_one_document_per_file(corpus_dir, suffix, maintain_every_batch, monkeypatch):
    folder, texts = corpus_dir
    if maintain_every_batch:  # the writer's periodic memory trim and write-back start, after every batch
        monkeypatch.setattr(crayon.shards, "TRIM_EVERY_BYTES", 1)
    tok = crayon.load("cl100k_base")
    paths = [folder / f"doc{i}.txt" for i in range(len(texts))]
    output = folder / f"train{suffix}"
    summary = tok.write_tokens(paths, output, append_eot=True, chunk_bytes=64, threads=2)
    tokens, meta = read_shard(output)
    assert tokens.dtype == np.uint32 and meta["dtype"] == "uint32" and meta["documents"] == len(texts)
    offsets = meta["document_offsets"]
    for i, text in enumerate(texts):
        assert tokens[offsets[i] : offsets[i + 1]].tolist() == tok.encode_ordinary(text) + [tok.eot_token]
    assert summary["tokens"] == len(tokens) == offsets[-1]
    if suffix == ".bin":
        assert np.array_equal(np.memmap(output, dtype=np.uint32, mode="r"), tokens)  # nanoGPT's reader
    else:
        assert np.array_equal(np.load(output), tokens)
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith(("train", "."))) == [f"train{suffix}",
                                                                                         f"train{suffix}.json"]


def test_separator_jsonl_and_uint16(tmp_path):
    tok = crayon.load("cl100k_base")
    texts = ["alpha beta", "gamma\n\ndelta", "", "epsilon"]
    (tmp_path / "split.txt").write_text("<doc>".join(texts), encoding="utf-8")
    (tmp_path / "docs.jsonl").write_text("\n".join(json.dumps({"text": t, "id": i}) for i, t in enumerate(texts)) + "\n\n")
    for name, options in [("split.txt", {"separator": "<doc>"}), ("docs.jsonl", {"jsonl_field": "text"})]:
        chunks = list(tok.iter_encode_files([tmp_path / name], chunk_bytes=3, **options))
        by_document = [np.concatenate([c.tokens for c in chunks if c.document == i]).tolist() for i in range(len(texts))]
        assert by_document == [tok.encode_ordinary(t) for t in texts]
    with pytest.raises(ValueError, match="no string field 'body'"):
        list(tok.iter_encode_files([tmp_path / "docs.jsonl"], jsonl_field="body"))
    small = crayon.load("lite")
    assert token_dtype(small.n_vocab) == np.uint16 and token_dtype(100277) == np.uint32
    small.write_tokens([tmp_path / "split.txt"], tmp_path / "small.bin", separator="<doc>")
    tokens, meta = read_shard(tmp_path / "small.bin")
    assert meta["dtype"] == "uint16" and tokens.tolist() == sum((small.encode_ordinary(t) for t in texts), [])


SEPARATORS = st.sampled_from(["<doc>", "\n\n", "aa", " ", "é"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(HARD_TEXT, max_size=6), separator=SEPARATORS, chunk_bytes=st.integers(1, 40),
       trailing=st.booleans())
def test_separated_and_jsonl_tasks_give_each_documents_tokens(tmp_path, texts, separator, chunk_bytes, trailing):
    """Documents split by a separator or in JSON Lines, planned as many tasks (byte ranges the workers read,
    split or parse), give exactly ``encode_ordinary`` of each document, as ``file_documents`` and
    ``jsonl_documents`` define them."""
    tok = tokenizer("cl100k_base")
    split_path, jsonl_path = tmp_path / "split.txt", tmp_path / "docs.jsonl"
    split_path.write_bytes((separator.join(texts) + (separator if trailing else "")).encode("utf-8", "surrogatepass"))
    jsonl_path.write_text("".join(json.dumps({"text": t}) + "\n" + ("\n" if trailing else "") for t in texts))
    for path, options, documents in [
            (split_path, {"separator": separator}, reference_pipeline.file_documents([split_path], separator)),
            (jsonl_path, {"jsonl_field": "text"}, reference_pipeline.jsonl_documents([jsonl_path], "text"))]:
        want = [tok.encode_ordinary(str(bytes(d.data[d.start : d.end]), "utf-8", "replace")) for d in documents]
        tok.write_tokens([path], tmp_path / "out.bin", chunk_bytes=chunk_bytes, threads=2,
                         errors="replace", **options)
        tokens, meta = read_shard(tmp_path / "out.bin")
        offsets = meta["document_offsets"]
        assert [tokens[a:b].tolist() for a, b in zip(offsets, offsets[1:])] == want
        chunks = list(tok.iter_encode_files([path], chunk_bytes=chunk_bytes, errors="replace", **options))
        assert [np.concatenate([c.tokens for c in chunks if c.document == i]).tolist()
                for i in range(len(want))] == want


def test_a_bad_line_or_byte_in_a_later_task_is_named(tmp_path):
    tok = crayon.load("cl100k_base")
    lines = [json.dumps({"text": f"line {i} " * 20}) for i in range(50)]
    lines[37] = '{"text": "unterminated'
    (tmp_path / "docs.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"docs\.jsonl:38: not a JSON line"):
        tok.write_tokens([tmp_path / "docs.jsonl"], tmp_path / "out.bin", jsonl_field="text", chunk_bytes=200)
    lines[37] = json.dumps({"body": "x"})
    (tmp_path / "docs.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"docs\.jsonl:38: no string field 'text'"):
        tok.write_tokens([tmp_path / "docs.jsonl"], tmp_path / "out.bin", jsonl_field="text", chunk_bytes=200)
    (tmp_path / "split.txt").write_bytes(b"<doc>".join([b"fine text " * 30] * 5 + [b"bad \xff here"]))
    with pytest.raises(ValueError, match=r"split\.txt\[5\]: not UTF-8 at byte 1529"):
        tok.write_tokens([tmp_path / "split.txt"], tmp_path / "out.bin", separator="<doc>", chunk_bytes=64)
    assert not list(tmp_path.glob("out.bin*"))


def test_encode_file(corpus_dir):
    folder, texts = corpus_dir
    tok = crayon.load("o200k_base")
    assert tok.encode_file(folder / "doc3.txt").tolist() == tok.encode_ordinary(texts[3])
    assert tok.encode_file(folder / "doc1.txt").tolist() == []


def test_ctrl_c_stops_within_a_second_and_leaves_no_output(tmp_path):
    big = tmp_path / "big.txt"
    with open(big, "w", encoding="utf-8") as file:
        for i in range(400_000):
            file.write(f"line {i} of a large file with words, numbers {i * 7} and symbols!\n")
    output = tmp_path / "out.bin"
    script = ("import sys, crayon; tok = crayon.load('cl100k_base'); print('ready', flush=True); "
              f"tok.write_tokens([{str(big)!r}], {str(output)!r}, chunk_bytes=4096, threads=1)")
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             cwd=Path(__file__).resolve().parents[1], text=True)
    assert child.stdout.readline().strip() == "ready"
    deadline = time.monotonic() + 60
    while not any(p.name.endswith(".tmp") for p in tmp_path.iterdir()):
        assert time.monotonic() < deadline and child.poll() is None, child.stderr.read()
        time.sleep(0.01)
    time.sleep(0.2)
    child.send_signal(signal.SIGINT)
    sent = time.monotonic()
    child.wait(timeout=10)
    assert time.monotonic() - sent < 1.0
    assert child.returncode != 0 and "KeyboardInterrupt" in child.stderr.read()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.txt"]


def test_cli_encode_shard_and_stdin(corpus_dir, capsys):
    from crayon.cli import main

    folder, texts = corpus_dir
    paths = [str(folder / f"doc{i}.txt") for i in range(len(texts))]
    main(["encode", *paths, "-o", str(folder / "train.bin"), "--tokenizer", "cl100k_base", "--threads", "2",
          "--append-eot", "--quiet"])
    assert "4 documents" in capsys.readouterr().out
    tok = crayon.load("cl100k_base")
    tokens, meta = read_shard(folder / "train.bin")
    assert tokens.tolist() == sum((tok.encode_ordinary(t) + [tok.eot_token] for t in texts), [])
    (folder / "docs.jsonl").write_text(json.dumps({"body": "héllo there"}) + "\n")
    main(["encode", str(folder / "docs.jsonl"), "--jsonl-field", "body"])
    assert capsys.readouterr().out.split() == [str(t) for t in tok.encode_ordinary("héllo there")]
    printed = subprocess.run([sys.executable, "-m", "crayon.cli", "encode"], input="hello world\n", text=True,
                             capture_output=True, check=True, cwd=Path(__file__).resolve().parents[1]).stdout
    assert printed.split() == [str(t) for t in tok.encode_ordinary("hello world\n")]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(texts=st.lists(HARD_TEXT, min_size=1, max_size=12), chunk_bytes=st.integers(1, 60), append_eot=st.booleans())
def test_many_files_grouped_read_by_the_workers(tmp_path_factory, monkeypatch, texts, chunk_bytes, append_eot):
    """Small files grouped into one task (read on the workers), larger ones mapped and cut, stat'ed in blocks of
    one, two, then three: the shard and its offsets are each file's whole-text tokens, in order."""
    monkeypatch.setattr(reference_pipeline, "FIRST_STAT_BLOCK", 1)
    monkeypatch.setattr(reference_pipeline, "STAT_BLOCK", 3)
    folder = tmp_path_factory.mktemp("files")
    paths = []
    for i, text in enumerate(texts):
        paths.append(folder / f"{i}.txt")
        paths[-1].write_bytes(text.encode())
    tok = crayon.load("cl100k_base")
    eot = [tok.eot_token] if append_eot else []
    tok.write_tokens(paths, folder / "out.bin", chunk_bytes=chunk_bytes, threads=2, append_eot=append_eot)
    tokens, meta = read_shard(folder / "out.bin")
    offsets = meta["document_offsets"]
    assert meta["documents"] == len(texts) and meta["sources"] == [str(path) for path in paths]
    for i, text in enumerate(texts):
        assert tokens[offsets[i] : offsets[i + 1]].tolist() == tok.encode_ordinary(text) + eot


UTF8_LIKE = st.lists(st.one_of(st.binary(max_size=3), st.sampled_from([b"\xc2\x80", b"\xe0\xa0\x80", b"\xed\xa0\x80",
                                                                     b"\xf0\x90\x80\x80", b"\xf4\x90\x80\x80",
                                                                     b"\xc0\xaf", b"\xef\xbf\xbf"]),
                                st.text(max_size=4).map(lambda t: t.encode("utf-8", "surrogatepass"))),
                      max_size=8).map(b"".join)


@settings(max_examples=300, deadline=None)
@given(data=UTF8_LIKE)
def test_the_utf8_check_kernel_agrees_with_python(data):
    """The pipeline's GIL-free check (compiled and numba kernels) fails exactly where Python's decoder fails."""
    try:
        data.decode("utf-8")
        want = -1
    except UnicodeDecodeError as error:
        want = error.start
    text = np.frombuffer(data, np.uint8)
    engine = tokenizer("cl100k_base").engine
    assert engine.utf8_error(text) == jit_kernels.utf8_error_kernel(text) == want


def test_a_grouped_file_that_is_not_utf8_or_changed_is_named(tmp_path):
    tok = crayon.load("cl100k_base")
    paths = [tmp_path / f"{i}.txt" for i in range(3)]
    for path, data in zip(paths, [b"fine", b"ok \xff bad", b"fine too"]):
        path.write_bytes(data)
    with pytest.raises(ValueError, match=r"1\.txt: not UTF-8 at byte 3"):
        tok.write_tokens(paths, tmp_path / "out.bin")
    assert tok.write_tokens(paths, tmp_path / "out.bin", errors="replace")["documents"] == 3
    sizes = reference_pipeline.file_sizes(paths)
    paths[2].write_bytes(b"fine too, and grown")
    task = reference_pipeline.FileGroup(paths, sizes)
    with pytest.raises(RuntimeError, match=r"2\.txt: the file changed size"):
        task.load(reference_pipeline.ReusedBuffer())
    (tmp_path / "folder").mkdir()
    with pytest.raises(IsADirectoryError, match="folder"):
        tok.write_tokens([paths[0], tmp_path / "folder"], tmp_path / "out.bin")


def test_progress_bar_starts_before_the_total_is_known(tmp_path, capsys):
    """The bar's total (the files' sizes) is found on a background thread; the shard is the same as without it."""
    tok = crayon.load("cl100k_base")
    paths = [tmp_path / f"{i}.txt" for i in range(5)]
    for i, path in enumerate(paths):
        path.write_text(f"document {i} " * (i + 1))
    with_bar = tok.write_tokens(paths, tmp_path / "bar.bin", progress=True)
    assert "bar.bin" in capsys.readouterr().err
    tok.write_tokens(paths, tmp_path / "plain.bin")
    assert read_shard(tmp_path / "bar.bin")[0].tolist() == read_shard(tmp_path / "plain.bin")[0].tolist()
    assert with_bar["documents"] == 5

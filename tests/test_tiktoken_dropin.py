"""Crayon as a drop-in for tiktoken: the shipped OpenAI vocabulary files are tiktoken's (sha256), every encoding
gives tiktoken's tokens, ``import crayon as tiktoken`` runs tiktoken code unchanged, and the HF habits
(``get_vocab``, ``token_to_id``, ``len``) agree with HF tokenizers."""

from __future__ import annotations

import gzip
import hashlib
import os
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import crayon
from conftest import corpus_text, tiktoken_encoding
from crayon.profiles import OPENAI_ENCODINGS, VOCABULARY_SHA256, find_vocabulary_file

tiktoken = pytest.importorskip("tiktoken")

ENCODINGS = list(OPENAI_ENCODINGS)
TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"


@pytest.fixture(scope="module")
def tiktoken_registry(tmp_path_factory):
    """tiktoken's own registry (``tiktoken.get_encoding``), offline: its download cache is filled with the files
    Crayon ships, under the names tiktoken gives the official URLs; tiktoken checks their sha256 itself."""
    cache = tmp_path_factory.mktemp("tiktoken-cache")
    for vocabulary in VOCABULARY_SHA256:
        url = TIKTOKEN_URL.format(vocabulary)
        data = gzip.decompress(find_vocabulary_file(vocabulary).read_bytes())
        (cache / hashlib.sha1(url.encode()).hexdigest()).write_bytes(data)
    previous = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    yield tiktoken
    if previous is None:
        del os.environ["TIKTOKEN_CACHE_DIR"]
    else:
        os.environ["TIKTOKEN_CACHE_DIR"] = previous


def oracle(name: str, registry):
    """tiktoken's encoding: from its registry, except gpt2 (tiktoken reads GPT-2's encoder.json + vocab.bpe, which
    hold the r50k_base ranks; built here from those ranks with gpt2's pattern and special tokens)."""
    return tiktoken_encoding(name) if name == "gpt2" else registry.get_encoding(name)


def test_shipped_vocabulary_files_are_tiktokens():
    for vocabulary, expected in VOCABULARY_SHA256.items():
        data = gzip.decompress(find_vocabulary_file(vocabulary).read_bytes())
        assert hashlib.sha256(data).hexdigest() == expected, vocabulary


def test_a_damaged_vocabulary_file_is_refused(tmp_path):
    from crayon.formats.tiktoken_io import load_tiktoken_bpe

    damaged = tmp_path / "r50k_base.tiktoken"
    damaged.write_bytes(gzip.decompress(find_vocabulary_file("r50k_base").read_bytes())[:-1])
    with pytest.raises(ValueError, match="sha256 .* differs"):
        load_tiktoken_bpe(damaged, VOCABULARY_SHA256["r50k_base"])


@pytest.mark.parametrize("name", ENCODINGS)
def test_every_encoding_matches_tiktoken(name, tiktoken_registry):
    expected = oracle(name, tiktoken_registry)
    tok = crayon.get_encoding(name)
    assert tok is crayon.get_encoding(name)  # one shared object per name, as in tiktoken
    assert (tok.name, tok.n_vocab, tok.max_token_value) == (expected.name, expected.n_vocab, expected.max_token_value)
    assert tok.special_tokens_set == expected.special_tokens_set and tok.eot_token == expected.eot_token
    texts = [corpus_text(corpus, 20_000) for corpus in ("big.txt", "multilingual.txt", "python_code.py")]
    texts += ["hello   world    x\n\n   y\t\t z" + " " * 40 + "end", "<|endoftext|> and <|fim_prefix|>"]
    for text in texts:
        assert tok.encode(text, allowed_special="all") == expected.encode(text, allowed_special="all")
        assert tok.encode_ordinary(text) == expected.encode_ordinary(text)
    assert tok.encode_batch(texts, allowed_special="all") == expected.encode_batch(texts, allowed_special="all")


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.sampled_from(list(" \t\n  abcXYZ123'sé好🙂.,-")), max_size=80))
def test_r50k_family_matches_tiktoken_on_whitespace_runs(text):
    """p50k_base differs from r50k_base only in tokens for runs of 2 to 25 spaces: runs of spaces are the test."""
    for name in ("gpt2", "p50k_base"):
        assert crayon.get_encoding(name).encode_ordinary(text) == tiktoken_encoding(name).encode_ordinary(text)


def test_encoding_for_model_is_tiktokens_table(tiktoken_registry):
    from tiktoken.model import MODEL_PREFIX_TO_ENCODING, MODEL_TO_ENCODING

    models = [*MODEL_TO_ENCODING, *(prefix + "2099-01-01" for prefix in MODEL_PREFIX_TO_ENCODING)]
    for model in models:
        assert crayon.encoding_name_for_model(model) == tiktoken.encoding_name_for_model(model), model
    assert crayon.encoding_for_model("gpt-4o-mini") is crayon.get_encoding("o200k_base")
    assert crayon.encoding_for_model("text-davinci-003").name == "p50k_base"
    with pytest.raises(KeyError):
        crayon.encoding_for_model("no-such-model")
    with pytest.raises(ValueError, match="Unknown encoding 'cl100k'"):
        crayon.get_encoding("cl100k")
    with pytest.raises(ValueError, match="does not support o200k_harmony"):
        crayon.encoding_for_model("gpt-oss-120b")
    from tiktoken_ext.openai_public import ENCODING_CONSTRUCTORS

    assert set(crayon.list_encoding_names()) == set(ENCODING_CONSTRUCTORS) - {"o200k_harmony"}


TIKTOKEN_SNIPPET = """
enc = tiktoken.get_encoding("cl100k_base")
text = "héllo wörld 🙂 <|endoftext|> code: def f(x): return x**2\\n"
ids = enc.encode(text, allowed_special={"<|endoftext|>"})
assert enc.decode(ids) == text
out = [ids, enc.encode_ordinary(text), enc.encode(text, disallowed_special=()), enc.n_vocab, enc.max_token_value,
       enc.eot_token, sorted(enc.special_tokens_set), enc.name]
out.append(enc.decode_batch([ids[:3], ids[3:]]))
out.append(enc.decode_bytes_batch([ids[:2], ids[2:]]))
out.append(enc.decode_with_offsets(enc.encode("héllo wörld 🙂 日本語")))
out.append(enc.decode_tokens_bytes(ids))
out.append([enc.decode_single_token_bytes(t) for t in ids])
out.append([enc.encode_single_token(t) for t in ("hello", b" world", "<|endoftext|>")])
out.append([enc.is_special_token(t) for t in (100257, 15339)])
out.append(enc.encode_batch(["a b", "c <|endoftext|>"], allowed_special="all"))
out.append(enc.encode_ordinary_batch(["a b", "c d"]))
out.append(enc.encode_to_numpy("hello world").tolist())
out.append(len(enc.token_byte_values()))
out.append(enc.token_byte_values()[:50] + enc.token_byte_values()[-50:])
out.append(tiktoken.encoding_for_model("gpt-4").name)
out.append(tiktoken.encoding_name_for_model("gpt-4o"))
out.append(tiktoken.get_encoding("p50k_base").encode("hello    world"))
try:
    enc.encode("<|endoftext|>")
except ValueError as error:
    out.append(("ValueError", "disallowed special token" in str(error)))
try:
    enc.encode_single_token("not a single token at all")
except KeyError:
    out.append("KeyError")
"""


def test_import_crayon_as_tiktoken_runs_tiktoken_code(tiktoken_registry):
    """The same snippet, once with tiktoken and once with ``import crayon as tiktoken``: the same results."""
    snippet = textwrap.dedent(TIKTOKEN_SNIPPET)
    with_tiktoken: dict = {"tiktoken": tiktoken_registry}
    exec(snippet, with_tiktoken)
    with_crayon: dict = {}
    exec("import crayon as tiktoken\n" + snippet, with_crayon)
    assert with_crayon["out"] == with_tiktoken["out"]


def test_decode_with_offsets_inside_characters():
    tok = crayon.get_encoding("cl100k_base")
    expected = tiktoken_encoding("cl100k_base")
    for text in ("日本語のテキスト", "🙂🙃 emoji", "a\u0301e\u0301", ""):
        ids = tok.encode(text)
        assert tok.decode_with_offsets(ids) == expected.decode_with_offsets(ids)
    with pytest.raises(TypeError):
        tok.is_special_token("100257")


def test_hf_vocabulary_habits_match_hf_tokenizers(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    tok = crayon.get_encoding("gpt2")
    tok.export(tmp_path / "tokenizer.json", format="hf")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert tok.get_vocab() == hf.get_vocab() and len(tok) == hf.get_vocab_size() == tok.n_vocab
    for token in ("hello", "Ġworld", "<|endoftext|>", "ĠĠ", "not-a-token", "日本"):
        assert tok.token_to_id(token) == hf.token_to_id(token), token
    for token_id in (0, 31373, 50256, 50257):
        assert tok.id_to_token(token_id) == hf.id_to_token(token_id), token_id


SPECIAL_PIECES = st.lists(st.sampled_from(["<", "<|", "|>", "<|endoftext|>", "<|fim_prefix|>", "<|endofprompt|>",
                                           "<|endoftext", "a", " b", "\n", "é", "<" * 70]), max_size=12).map("".join)


@settings(max_examples=200, deadline=None)
@given(SPECIAL_PIECES)
def test_disallowed_specials_are_found_as_tiktoken_finds_them(text):
    """The search for disallowed specials (``str.find`` of their first character, the regex only there, or over
    the rest where those places are many) names the special tiktoken names, or none where tiktoken finds none."""
    import re

    reference, tok = tiktoken_encoding("cl100k_base"), crayon.load("cl100k_base")

    def named(encode, piece):
        try:
            encode(piece)
        except ValueError as error:
            return re.search(r"disallowed special token '(.*?)'", str(error)).group(1)
        return None

    for piece in (text, "x" * 5000 + text, ("<a " * 100 + "\n") * 20 + text):
        expected = named(reference.encode, piece)
        assert named(tok.encode, piece) == expected
        assert named(lambda one: tok.encode_batch(["a", one]), piece) == expected

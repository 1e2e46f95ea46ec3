"""The reference tokenizer's API against tiktoken: attributes, decoding, bad input (exactness on every backend:
test_differential.py)."""

from __future__ import annotations

import pytest

import crayon
from conftest import corpus_text, tiktoken_encoding

ENCODINGS = ["cl100k_base", "o200k_base"]


@pytest.fixture(scope="module", params=ENCODINGS)
def pair(request):
    """(crayon reference tokenizer, tiktoken encoder) for one vocabulary."""
    return crayon.load(request.param, backend="reference"), tiktoken_encoding(request.param)


def test_api_attributes_match_tiktoken(pair):
    tok, reference = pair
    assert tok.n_vocab == reference.n_vocab
    assert tok.eot_token == reference.eot_token
    assert tok.special_tokens_set == reference.special_tokens_set
    assert tok.name == reference.name
    assert tok.pattern == reference._pat_str
    texts = ["Hello world", "", " spaces   here\n", "数字 123"]
    assert tok.encode_batch(texts) == reference.encode_batch(texts)
    assert tok.encode_to_numpy("Hello world").tolist() == reference.encode("Hello world")
    assert str(tok.encode_to_numpy("x").dtype) == "uint32"


def test_decode(pair):
    tok, reference = pair
    tokens = reference.encode("naïve café 😀")
    assert tok.decode(tokens) == reference.decode(tokens)
    assert tok.decode_single_token_bytes(tokens[0]) == reference.decode_single_token_bytes(tokens[0])
    partial = [t for t in tok.encode("𝔘𝔫𝔦𝔠𝔬𝔡𝔢 🫨") if not _is_utf8(tok.decode_single_token_bytes(t))][:1]
    assert partial, "expected a token that is part of a character"
    assert tok.decode(partial) == reference.decode(partial)  # invalid UTF-8 becomes U+FFFD
    with pytest.raises(UnicodeDecodeError):
        tok.decode(partial, errors="strict")


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


@pytest.mark.parametrize("bad_id", [-1, 10**7, 100261])
def test_unknown_ids_raise(bad_id):
    tok = crayon.load("cl100k_base", backend="reference")
    with pytest.raises(crayon.UnknownTokenError, match="not in cl100k_base"):
        tok.decode([1, bad_id])
    with pytest.raises(KeyError):
        tok.decode_single_token_bytes(bad_id)


def test_tiktoken_file_with_pattern_name_or_regex(tmp_path):
    tiktoken = pytest.importorskip("tiktoken")
    from crayon.patterns import CL100K_BASE
    from crayon.formats.tiktoken_io import load_tiktoken_bpe, save_tiktoken_bpe
    from crayon.profiles import find_vocabulary_file

    ranks = {token: rank for token, rank in load_tiktoken_bpe(find_vocabulary_file("cl100k_base")).items() if rank < 5000}
    path = tmp_path / "small.tiktoken"
    save_tiktoken_bpe(ranks, path)
    assert load_tiktoken_bpe(path) == ranks
    specials = {"<|end|>": 5000}
    reference = tiktoken.Encoding("small", pat_str=CL100K_BASE, mergeable_ranks=ranks, special_tokens=specials)
    text = corpus_text("english_web.txt", 20_000) + " <|end|>"
    for pattern in ["cl100k_base", CL100K_BASE]:
        tok = crayon.load(path, pattern=pattern, special_tokens=specials, backend="reference")
        assert tok.encode(text, allowed_special="all") == reference.encode(text, allowed_special="all")
    with pytest.raises(ValueError, match="needs pattern"):
        crayon.load(path)


def test_corrupt_tiktoken_file_is_refused(tmp_path):
    path = tmp_path / "bad.tiktoken"
    path.write_bytes(b"aGVsbG8= 0\nnot-base64!! 1\n")
    with pytest.raises(ValueError, match="bad.tiktoken:2"):
        crayon.load(path, pattern="cl100k_base")


def test_unknown_source_and_backend():
    with pytest.raises(FileNotFoundError, match="no profile named"):
        crayon.load("no_such_vocabulary")
    with pytest.raises(ValueError, match="unknown backend"):
        crayon.load("cl100k_base", backend="tpu")


def test_unicode_version_is_tiktokens():
    """tiktoken's Rust regex knows Unicode 16: a letter new in 17 (U+323B0) is no letter to it, nor to us."""
    reference = tiktoken_encoding("cl100k_base")
    tok = crayon.load("cl100k_base", backend="reference")
    for text in ["\U000323b0:A", "\U00010d4a:A", "\ua7ce1 x"]:
        assert tok.encode_ordinary(text) == reference.encode_ordinary(text)

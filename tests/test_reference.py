"""The reference engine against tiktoken: corpora, generated text, specials, decoding, bad input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import crayon
from conftest import CORPUS_FILES, corpus_text, tiktoken_encoding
from strategies import tokenizer_text

ENCODINGS = ["cl100k_base", "o200k_base"]


@pytest.fixture(scope="module", params=ENCODINGS)
def pair(request):
    """(crayon reference tokenizer, tiktoken encoder) for one vocabulary."""
    return crayon.load(request.param, backend="reference"), tiktoken_encoding(request.param)


@pytest.mark.parametrize("corpus", CORPUS_FILES)
def test_corpus_matches_tiktoken(pair, corpus):
    tok, reference = pair
    text = corpus_text(corpus)
    tokens = tok.encode_ordinary(text)
    assert tokens == reference.encode_ordinary(text)
    assert tok.decode_bytes(tokens) == text.encode("utf-8")


@settings(max_examples=300, deadline=None)
@given(text=tokenizer_text)
def test_generated_text_matches_tiktoken(pair, text):
    tok, reference = pair
    assert tok.encode_ordinary(text) == reference.encode_ordinary(text)
    assert tok.encode(text, disallowed_special=()) == reference.encode(text, disallowed_special=())
    assert tok.encode(text, allowed_special="all") == reference.encode(text, allowed_special="all")
    assert tok.decode_bytes(tok.encode_ordinary(text)) == text.encode("utf-8")


@settings(max_examples=100, deadline=None)
@given(text=st.text(st.characters(), max_size=30))
def test_lone_surrogates_are_replaced_like_tiktoken(pair, text):
    tok, reference = pair
    assert tok.encode_ordinary(text) == reference.encode_ordinary(text)


def test_disallowed_special_raises_value_error(pair):
    tok, reference = pair
    text = "hi <|endoftext|> there"
    with pytest.raises(ValueError, match="disallowed special token"):
        tok.encode(text)
    with pytest.raises(crayon.SpecialTokenError):
        tok.encode(text, allowed_special={"<|endofprompt|>"})
    assert tok.encode(text, allowed_special={"<|endoftext|>"}) == reference.encode(text, allowed_special={"<|endoftext|>"})
    assert tok.encode(text, disallowed_special=()) == reference.encode(text, disallowed_special=())
    assert tok.eot_token in tok.encode(text, allowed_special="all")


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

"""Crayon's model-ready path: flat batches, token counts, padded arrays with a template, offsets, bytes input."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import corpus_text
from hypothesis import given, settings
from strategies import tokenizer_text

import crayon

TEXTS = [*corpus_text("multilingual.txt")[:6000].split("\n")[:20], "a <|endoftext|> b", "héllo 😀", "", " \n "]


@pytest.fixture(scope="module", params=["reference", "jit"])
def tok(request):
    return crayon.load("cl100k_base", backend=request.param)


def test_flat_batches_and_counts_match_encode(tok):
    tokens, offsets = tok.encode_batch_flat(TEXTS, allowed_special="all")
    expected = tok.encode_batch(TEXTS, allowed_special="all")
    assert tokens.dtype == np.uint32 and offsets.dtype == np.int64
    assert [tokens[offsets[i] : offsets[i + 1]].tolist() for i in range(len(TEXTS))] == expected
    assert tok.count_tokens_batch(TEXTS, allowed_special="all").tolist() == [len(ids) for ids in expected]
    assert tok.count_tokens(TEXTS[0]) == len(tok.encode(TEXTS[0]))
    with pytest.raises(ValueError, match="disallowed special token"):
        tok.count_tokens_batch(TEXTS)


def padded(rows: list[list[int]], width: int, pad: int, left: bool) -> np.ndarray:
    return np.array([[pad] * (width - len(row)) + row if left else row + [pad] * (width - len(row)) for row in rows])


@pytest.mark.parametrize("left_pad", [False, True])
@pytest.mark.parametrize("left_cut", [False, True])
def test_padded_arrays_with_template(tok, left_pad, left_cut):
    tok = tok.with_backend(tok.backend)
    tok.template = ((100257,), (100276,))
    encoded = tok.encode_batch(TEXTS, allowed_special="all")
    room = 7
    cut = [(ids[-room:] if left_cut else ids[:room]) if len(ids) > room else ids for ids in encoded]
    rows = [[100257, *ids, 100276] for ids in cut]
    width = -(-max(map(len, rows)) // 4) * 4
    got = tok(TEXTS, padding=True, truncation=True, max_length=room + 2, pad_token_id=0, pad_to_multiple_of=4,
              padding_side="left" if left_pad else "right", truncation_side="left" if left_cut else "right",
              allowed_special="all")
    assert np.array_equal(got["input_ids"], padded(rows, width, 0, left_pad))
    assert np.array_equal(got["attention_mask"], padded([[1] * len(row) for row in rows], width, 0, left_pad))
    assert got["input_ids"].dtype == got["attention_mask"].dtype == np.int64
    plain = tok(TEXTS[0], add_special_tokens=False, padding=False)
    assert plain["input_ids"].tolist() == [tok.encode(TEXTS[0])]


def test_bad_padding_requests_are_refused(tok):
    with pytest.raises(ValueError, match="pad_token_id"):
        tok(["a", "a b c"], padding=True)
    with pytest.raises(ValueError, match="need max_length"):
        tok(["a"], truncation=True)
    with pytest.raises(ValueError, match="pass padding=True"):
        tok(["a", "a b c"], padding=False)
    with pytest.raises(ValueError, match="truncation=True"):
        tok(["a b c d"], padding="max_length", max_length=2, pad_token_id=0)
    with pytest.raises(ValueError, match="'np'"):
        tok(["a"], return_tensors="pt")


def check_offsets(tok, text: str) -> None:
    tokens = np.asarray(tok.encode(text, allowed_special="all"), np.int64)
    spans = tok.offsets_mapping(text, tokens)
    assert spans.shape == (len(tokens), 2)
    for token, (start, end) in zip(tokens.tolist(), spans.tolist()):
        assert tok.decode_single_token_bytes(token) in text[start:end].encode("utf-8")
    if len(tokens):
        assert spans[0, 0] == 0 and spans[-1, 1] == len(text)
        assert np.all(np.diff(spans[:, 0]) >= 0) and np.all(spans[1:, 0] >= spans[:-1, 1] - 1)


@settings(max_examples=100, deadline=None)
@given(tokenizer_text)
def test_offsets_cover_the_characters_of_each_token(text):
    check_offsets(crayon.load("cl100k_base", backend="jit"), text)


def test_offsets_in_arrays(tok):
    for text in TEXTS:
        check_offsets(tok, text)
    got = tok(TEXTS, padding=True, pad_token_id=0, return_offsets_mapping=True, allowed_special="all")
    for i, text in enumerate(TEXTS):
        n = int(got["attention_mask"][i].sum())
        expected = tok.offsets_mapping(text, tok.encode(text, allowed_special="all"))
        assert np.array_equal(got["offsets_mapping"][i, :n], expected)
        assert not got["offsets_mapping"][i, n:].any()


def test_bytes_encode_like_text(tok):
    text = TEXTS[0] + " 😀 x"
    data = text.encode("utf-8")
    for buffer in (data, bytearray(data), memoryview(data)):
        assert tok.encode_ordinary_bytes(buffer).tolist() == tok.encode_ordinary(text)
    broken = b"abc \xff\xfe def \xe2\x82 x"
    assert tok.decode_bytes(tok.encode_ordinary_bytes(broken).tolist()) == broken


def gpt2_byte_level_spans(text: str) -> list[str]:
    from crayon.formats.hf_pretokenize import ByteLevel, HFPreTokenizer

    return HFPreTokenizer(ByteLevel(add_prefix_space=False, use_regex=True))(text)


@settings(max_examples=300, deadline=None)
@given(tokenizer_text)
def test_gpt2_byte_level_splits_as_r50k(text):
    """Why crayon.formats.hf_io.known_pattern_of runs r50k's compiled spanner for GPT-2's ByteLevel."""
    from crayon.reference.pretokenize import split

    assert gpt2_byte_level_spans(text) == split(text, "r50k_base")


@pytest.mark.parametrize("corpus", ["english_web.txt", "multilingual.txt", "python_code.py"])
def test_gpt2_byte_level_splits_corpora_as_r50k(corpus):
    from crayon.reference.pretokenize import split

    text = corpus_text(corpus)[:300000]
    assert gpt2_byte_level_spans(text) == split(text, "r50k_base")


def test_invalid_bytes_with_added_tokens_are_refused():
    base = crayon.load("cl100k_base", backend="reference")
    tok = crayon.Tokenizer("with-added", base.model, pattern="cl100k_base", added_tokens={"<x>": 100300},
                           backend="reference")
    assert tok.encode_ordinary_bytes(b"a<x>b").tolist() == tok.encode_ordinary("a<x>b")
    with pytest.raises(ValueError, match="valid UTF-8"):
        tok.encode_ordinary_bytes(b"a<x>\xff")

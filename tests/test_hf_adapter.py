"""crayon.hf.CrayonTokenizerFast against transformers itself, on byte-level BPEs trained here with HF's trainer."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import corpus_text

transformers = pytest.importorskip("transformers")
pytest.importorskip("jinja2")

from crayon.errors import UnsupportedComponentError  # noqa: E402
from crayon.hf import CrayonTokenizerFast  # noqa: E402
from tools.hf_model_folder import write_model_folder  # noqa: E402

TEXTS = [
    *corpus_text("english_web.txt")[:30000].split("\n")[:40],
    *corpus_text("multilingual.txt")[:8000].split("\n")[:15],
    "a <s> b </s> c <pad>",  # special tokens in the text
    "héllo wörld 😀  \n\n\t x",
    "",
    " ",
]
CALLS = [
    {"padding": True, "return_tensors": "np"},
    {"padding": True, "truncation": True, "max_length": 16, "return_tensors": "np"},
    {"padding": "max_length", "truncation": True, "max_length": 48, "return_tensors": "np"},
    {"padding": True, "padding_side": "left", "pad_to_multiple_of": 8, "return_tensors": "np"},
    {"padding": True, "add_special_tokens": False, "return_tensors": "np"},
    {"padding": True, "split_special_tokens": True, "return_tensors": "np"},
    {"padding": True, "return_attention_mask": False, "return_tensors": "np"},
    {},
    {"truncation": True, "max_length": 5},
    {"padding": True},
]


@pytest.fixture(scope="module", params=[("cl100k_base", False), ("gpt2", True)], ids=["cl100k-split", "gpt2-bytelevel-eos"])
def pair(request, tmp_path_factory):
    """(transformers' own fast tokenizer, CrayonTokenizerFast) on the same trained model folder."""
    pattern, eos = request.param
    texts = corpus_text("english_web.txt")[:200000].split("\n") + corpus_text("multilingual.txt")[:50000].split("\n")
    folder = write_model_folder(tmp_path_factory.mktemp(pattern), texts, vocab_size=1200, pattern=pattern, eos=eos)
    return transformers.AutoTokenizer.from_pretrained(folder), CrayonTokenizerFast.from_pretrained(folder)


def assert_same(expected, got, tensors: bool):
    assert expected.keys() == got.keys()
    for key in expected:
        if tensors:
            assert np.asarray(got[key]).dtype == np.asarray(expected[key]).dtype, key
            assert np.array_equal(got[key], expected[key]), key
        else:
            assert got[key] == expected[key], key


@pytest.mark.parametrize("options", CALLS, ids=lambda options: ",".join(f"{k}={v}" for k, v in options.items()) or "plain")
def test_batches_match_transformers(pair, options):
    hf, crayon_hf = pair
    before = crayon_hf.crayon_calls
    assert_same(hf(TEXTS, **options), crayon_hf(TEXTS, **options), "return_tensors" in options)
    assert crayon_hf.crayon_calls == before + 1  # Crayon encoded it, not transformers


def test_single_text_and_truncation_side(pair):
    hf, crayon_hf = pair
    assert_same(hf(TEXTS[0]), crayon_hf(TEXTS[0]), tensors=False)
    assert_same(hf(TEXTS[0], return_tensors="np"), crayon_hf(TEXTS[0], return_tensors="np"), tensors=True)
    hf.truncation_side = crayon_hf.truncation_side = "left"
    try:
        options = {"padding": True, "truncation": True, "max_length": 7, "return_tensors": "np"}
        assert_same(hf(TEXTS, **options), crayon_hf(TEXTS, **options), tensors=True)
    finally:
        hf.truncation_side = crayon_hf.truncation_side = "right"


def test_decode_and_chat_template_match_transformers(pair):
    hf, crayon_hf = pair
    ids = hf(TEXTS, padding=True)["input_ids"]
    assert crayon_hf.batch_decode(ids) == hf.batch_decode(ids)
    assert crayon_hf.batch_decode(ids, skip_special_tokens=True) == hf.batch_decode(ids, skip_special_tokens=True)
    assert crayon_hf.decode(ids[0]) == hf.decode(ids[0])
    chat = [{"role": "user", "content": TEXTS[0]}, {"role": "assistant", "content": TEXTS[-4]}]
    for options in ({"tokenize": False}, {"tokenize": True}, {"tokenize": True, "add_generation_prompt": True}):
        assert crayon_hf.apply_chat_template(chat, **options) == hf.apply_chat_template(chat, **options)


PAIR_CALLS = [
    {"padding": True, "return_tensors": "np"},
    {},
    {"padding": "max_length", "max_length": 400, "return_token_type_ids": True, "return_tensors": "np"},
    {"padding": True, "padding_side": "left", "pad_to_multiple_of": 8, "add_special_tokens": False},
    {"return_token_type_ids": True, "return_attention_mask": False},
]


@pytest.mark.parametrize("options", PAIR_CALLS, ids=lambda options: ",".join(f"{k}={v}" for k, v in options.items()) or "plain")
def test_pairs_and_token_type_ids_match_transformers(pair, options):
    hf, crayon_hf = pair
    before = crayon_hf.crayon_calls
    assert_same(hf(TEXTS[:12], TEXTS[12:24], **options), crayon_hf(TEXTS[:12], TEXTS[12:24], **options),
                "return_tensors" in options)
    assert_same(hf(TEXTS[0], TEXTS[-4], **options), crayon_hf(TEXTS[0], TEXTS[-4], **options), "return_tensors" in options)
    single = {"return_token_type_ids": True, "truncation": True, "max_length": 9, "padding": True}
    assert_same(hf(TEXTS, **single), crayon_hf(TEXTS, **single), tensors=False)
    assert crayon_hf.crayon_calls == before + 3


def test_calls_crayon_does_not_cover_are_transformers_own(pair):
    hf, crayon_hf = pair
    options = {"return_offsets_mapping": True, "return_special_tokens_mask": True, "padding": True}
    before = crayon_hf.crayon_calls
    assert_same(hf(TEXTS[:5], TEXTS[5:10], **options), crayon_hf(TEXTS[:5], TEXTS[5:10], **options), tensors=False)
    cut_pairs = {"truncation": True, "max_length": 8, "padding": True}  # HF shares the cut between the two texts
    assert_same(hf(TEXTS[:5], TEXTS[5:10], **cut_pairs), crayon_hf(TEXTS[:5], TEXTS[5:10], **cut_pairs), tensors=False)
    assert crayon_hf.crayon_calls == before


def test_a_model_that_is_not_byte_level_bpe_is_refused(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    wordpiece = Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1, "##b": 2}, unk_token="[UNK]"))
    wordpiece.pre_tokenizer = pre_tokenizers.Whitespace()
    wordpiece.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast"}))
    with pytest.raises(UnsupportedComponentError, match="CrayonTokenizerFast cannot encode this tokenizer"):
        CrayonTokenizerFast.from_pretrained(tmp_path)


def test_datasets_map_with_workers(pair):
    """``datasets.map(batched=True, num_proc=2)``: the adapter pickles into the workers and gives transformers' ids."""
    datasets = pytest.importorskip("datasets")
    hf, crayon_hf = pair
    dataset = datasets.Dataset.from_dict({"text": TEXTS * 4})

    def tokenize(tokenizer):
        return lambda batch: tokenizer(batch["text"], truncation=True, max_length=32)

    expected = dataset.map(tokenize(hf), batched=True, batch_size=16, remove_columns=["text"])
    got = dataset.map(tokenize(crayon_hf), batched=True, batch_size=16, num_proc=2, remove_columns=["text"])
    assert got["input_ids"] == expected["input_ids"] and got["attention_mask"] == expected["attention_mask"]

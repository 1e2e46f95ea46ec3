"""HF tokenizer.json files: Crayon gives HF tokenizers' ids, its components do what HF's do, and what it does
not support is refused by name. The files are built with HF tokenizers itself (small BPE models trained on a
corpus slice); cl100k_base exported to HF must encode like tiktoken."""

from __future__ import annotations

import json
import random
import unicodedata

import pytest
from hypothesis import given, settings

import crayon
from conftest import CORPUS_FILES, corpus_text, tiktoken_encoding
from crayon.errors import UnknownTokenError, UnsupportedComponentError
from crayon.formats import hf_pretokenize as pre
from crayon.formats import hf_normalize as norm
from crayon.formats.hf_io import merges_from_ranks, read_hf_tokenizer, save_hf_tokenizer, spec_from_hf

tokenizers = pytest.importorskip("tokenizers")

from tokenizers import Regex, decoders  # noqa: E402
from tokenizers import normalizers as hf_norm  # noqa: E402
from tokenizers import pre_tokenizers as hf_pre  # noqa: E402

from hf_configs import ADDED, CONFIGS, LLAMA3, SPECIALS, byte_level, hf_text, train_hf  # noqa: E402
from hf_configs import training_text as shared_training_text  # noqa: E402


def tokenizer_from_hf(config: dict, *, backend: str) -> crayon.Tokenizer:
    return crayon.Tokenizer.from_spec(spec_from_hf(config), backend=backend)


def load_hf_tokenizer(path, *, backend: str) -> crayon.Tokenizer:
    return crayon.Tokenizer.from_spec(read_hf_tokenizer(path), backend=backend)


@pytest.fixture(scope="module")
def training_text():
    return shared_training_text()


def crayon_from(hf):
    return tokenizer_from_hf(json.loads(hf.to_str()), backend="reference")


def hf_ids(hf, text):
    return hf.encode(text, add_special_tokens=False).ids


# --- components against HF's own ----------------------------------------------------------------------------

NORMALIZERS = {
    "NFC": (hf_norm.NFC(), norm.UnicodeNormalizer("NFC")),
    "NFD": (hf_norm.NFD(), norm.UnicodeNormalizer("NFD")),
    "NFKC": (hf_norm.NFKC(), norm.UnicodeNormalizer("NFKC")),
    "NFKD": (hf_norm.NFKD(), norm.UnicodeNormalizer("NFKD")),
    "Lowercase": (hf_norm.Lowercase(), norm.Lowercase()),
    "StripAccents": (hf_norm.StripAccents(), norm.StripAccents()),
    "Strip": (hf_norm.Strip(), norm.Strip()),
    "StripRight": (hf_norm.Strip(left=False, right=True), norm.Strip(left=False, right=True)),
    "Nmt": (hf_norm.Nmt(), norm.Nmt()),
    "ReplaceEmptyMatches": (hf_norm.Replace(Regex("a*"), "-"), norm.Replace("a*", "-", is_regex=True)),
    "ReplaceString": (hf_norm.Replace(" ", "▁"), norm.Replace(" ", "▁")),
    "Prepend": (hf_norm.Prepend("▁"), norm.Prepend("▁")),
    "ByteLevel": (hf_norm.ByteLevel(), norm.ByteLevelNormalizer()),
}


@pytest.mark.parametrize("name", sorted(NORMALIZERS))
@settings(max_examples=100, deadline=None)
@given(text=hf_text)
def test_normalizer_matches_hf(name, text):
    hf, ours = NORMALIZERS[name]
    assert ours(text) == hf.normalize_str(text)


UNICODE_FORMS = ["NFC", "NFD", "NFKC", "NFKD"]
# Characters that compose, decompose, reorder or that HF's Unicode 9.0 tables do not know, to mix into long text.
TRICKY_CHARACTERS = ("\u0301", "\u0300", "\u0323", "\u0345", "\u05b0", "\u093c", "\u0f71", "\u1100", "\u1161",
                     "\u11a8", "\uac00", "\u0dd9", "\u0dcf", "\u212b", "\u00c5", "\u3099", "\u304b", "\u07fd",
                     "\U00010781", "\ufb01", "e", " ", "\n", "\x00")


@pytest.mark.parametrize("form", UNICODE_FORMS)
def test_unicode_forms_match_hf_on_long_text(form):
    """Long texts take the quick check over a table and normalize only the stretches that may change."""
    hf, ours = getattr(hf_norm, form)(), norm.UnicodeNormalizer(form)
    corpus = corpus_text("multilingual.txt", 60_000)
    for start in range(0, len(corpus), 6_000):
        assert ours(corpus[start : start + 6_000]) == hf.normalize_str(corpus[start : start + 6_000])
    generator = random.Random(form)
    tricky = "".join(generator.choice(TRICKY_CHARACTERS) + generator.choice(["", "a", "Z", "\u00e9"])
                     for _ in range(3_000))
    for start in range(0, len(tricky), 1_000):
        assert ours(tricky[start : start + 1_500]) == hf.normalize_str(tricky[start : start + 1_500])


@pytest.mark.parametrize("form", UNICODE_FORMS)
@settings(max_examples=60, deadline=None)
@given(text=hf_text)
def test_unicode_forms_match_hf_on_long_generated_text(form, text):
    long_text = text * (600 // max(len(text), 1) + 1) + text[::-1]
    assert norm.UnicodeNormalizer(form)(long_text) == getattr(hf_norm, form)().normalize_str(long_text)


def test_unicode_tables_match_hf():
    """HF normalizes with Unicode 9.0 tables: check every character Python decomposes, reorders or calls a mark."""
    chars = [
        char
        for char in map(chr, range(0x110000))
        if unicodedata.decomposition(char) or unicodedata.combining(char) or unicodedata.category(char)[0] == "M"
    ]
    for name in ("NFC", "NFD", "NFKC", "NFKD", "StripAccents"):
        hf, ours = NORMALIZERS[name]
        for text in (*chars, *("a" + char + "\u0301" for char in chars)):
            assert ours(text) == hf.normalize_str(text), (name, text)


def test_punctuation_table_matches_hf():
    every_char = "".join(chr(c) for c in range(1, 0x110000) if unicodedata.category(chr(c)) not in ("Cn", "Cs"))
    hf_kept = [piece for piece, _ in hf_pre.Punctuation("removed").pre_tokenize_str(every_char)]
    assert pre.Punctuation("removed")([every_char]) == hf_kept


PATTERNS = [r"\s+|[.,;]", "a*", r"\w+", r"\W", r"\b", r"\p{N}{1,3}+", r"\s+$", r"^\s*\S", r".\Z", LLAMA3]
PRE_TOKENIZERS = {
    "Split string": (hf_pre.Split("ab", "contiguous"), pre.Split("ab", "contiguous", is_regex=False)),
    "ByteLevel": (hf_pre.ByteLevel(), pre.ByteLevel()),
    "ByteLevel no regex": (hf_pre.ByteLevel(use_regex=False), pre.ByteLevel(use_regex=False)),
    "Digits": (hf_pre.Digits(), pre.Digits()),
    "Digits individual": (hf_pre.Digits(individual_digits=True), pre.Digits(individual_digits=True)),
    "Punctuation": (hf_pre.Punctuation(), pre.Punctuation()),
    "Whitespace": (hf_pre.Whitespace(), pre.Whitespace()),
    "WhitespaceSplit": (hf_pre.WhitespaceSplit(), pre.WhitespaceSplit()),
    "BertPreTokenizer": (hf_pre.BertPreTokenizer(), pre.BertPreTokenizer()),
    "CharDelimiterSplit": (hf_pre.CharDelimiterSplit(" "), pre.CharDelimiterSplit(" ")),
    "FixedLength": (hf_pre.FixedLength(3), pre.FixedLength(3)),
    "Sequence": (
        hf_pre.Sequence([hf_pre.ByteLevel(), hf_pre.Digits(individual_digits=True)]),
        pre.PreTokenizerSequence([pre.ByteLevel(), pre.Digits(individual_digits=True)]),
    ),
}


def hf_pieces(hf, text):
    return [piece for piece, _ in hf.pre_tokenize_str(text)]


@pytest.mark.parametrize("name", sorted(PRE_TOKENIZERS))
@settings(max_examples=40, deadline=None)
@given(text=hf_text)
def test_pre_tokenizer_matches_hf(name, text):
    hf, ours = PRE_TOKENIZERS[name]
    assert ours([text]) == hf_pieces(hf, text)


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=40, deadline=None)
@given(text=hf_text)
def test_split_matches_hf_for_every_behavior(pattern, text):
    """Oniguruma's syntax and match iteration (empty matches, $, \\w, {n,m}+), each behavior, inverted or not."""
    for behavior in pre.BEHAVIORS:
        for invert in (False, True):
            hf = hf_pre.Split(Regex(pattern), behavior, invert=invert)
            assert pre.Split(pattern, behavior, invert=invert)([text]) == hf_pieces(hf, text), (behavior, invert)


# --- files, added tokens, refusals --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpt2(training_text):
    return train_hf(training_text, *CONFIGS["gpt2"]())


def test_load_from_file_and_through_crayon_load(gpt2, tmp_path):
    path = tmp_path / "tokenizer.json"
    gpt2.save(str(path))
    text = corpus_text("english_web.txt", 5000)
    for tok in (load_hf_tokenizer(path, backend="reference"), crayon.load(path, backend="reference")):
        assert tok.encode(text) == hf_ids(gpt2, text)
        assert tok.special_tokens == {token: gpt2.token_to_id(token) for token in [*SPECIALS, ADDED[1]]}
        assert tok.added_tokens == {ADDED[0]: gpt2.token_to_id(ADDED[0])}


def test_added_token_ids_are_assigned_as_hf_assigns_them(gpt2):
    config = json.loads(gpt2.to_str())
    existing = next(token for token in config["model"]["vocab"] if len(token) > 3 and token.isalpha())
    flags = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False}
    config["added_tokens"] += [
        {"id": 0, "content": existing, "special": True, **flags},  # a vocabulary token: HF keeps its id
        {"id": 12345, "content": "<new>", "special": False, **flags},  # HF gives it the next free id
    ]
    hf = tokenizers.Tokenizer.from_str(json.dumps(config))
    with pytest.warns(UserWarning, match="HF gives it"):
        tok = tokenizer_from_hf(config, backend="reference")
    assert tok.special_tokens[existing] == hf.token_to_id(existing) == config["model"]["vocab"][existing]
    assert tok.added_tokens["<new>"] == hf.token_to_id("<new>")
    text = f"a{existing}b <new><think>{existing}"
    assert tok.encode(text, allowed_special="all") == hf_ids(hf, text)


def test_post_processors_and_decoders_that_keep_ids_are_accepted(gpt2):
    """Crayon's encode is HF's encode(text, add_special_tokens=False): template post-processors add nothing."""
    from tokenizers import processors

    hf = tokenizers.Tokenizer.from_str(gpt2.to_str())
    text = "Hello there, world"
    for post_processor, decoder in [
        (processors.TemplateProcessing(single="<|endoftext|> $A", special_tokens=[("<|endoftext|>", 0)]), None),
        (processors.RobertaProcessing(("<|endoftext|>", 0), ("<|pad|>", 1)), decoders.Fuse()),
        (processors.Sequence([processors.ByteLevel(), processors.BertProcessing(("<|pad|>", 1), ("<|endoftext|>", 0))]),
         decoders.Sequence([decoders.ByteLevel(), decoders.Fuse()])),
    ]:
        hf.post_processor = post_processor
        hf.decoder = decoder
        assert crayon_from(hf).encode(text) == hf_ids(hf, text) != hf.encode(text).ids


def _set(path: str, value):
    """A change to a tokenizer.json object: the value at a dotted path."""

    def change(config):
        *parents, last = path.split(".")
        target = config
        for key in parents:
            target = target[int(key)] if isinstance(target, list) else target[key]
        target[int(last) if isinstance(target, list) else last] = value

    return change


REFUSED = {
    "model WordPiece": (_set("model.type", "WordPiece"), "WordPiece"),
    "dropout": (_set("model.dropout", 0.1), "dropout"),
    "continuing_subword_prefix": (_set("model.continuing_subword_prefix", "##"), "continuing_subword_prefix"),
    "end_of_word_suffix": (_set("model.end_of_word_suffix", "</w>"), "end_of_word_suffix"),
    "byte_fallback": (_set("model.byte_fallback", True), "byte_fallback"),
    "normalizer": (_set("normalizer", {"type": "CaseFold"}), "CaseFold"),
    "nested normalizer": (
        _set("normalizer", {"type": "Sequence", "normalizers": [{"type": "CaseFold"}]}),
        "CaseFold",
    ),
    "pre-tokenizer": (_set("pre_tokenizer", {"type": "UnicodeScripts"}), "UnicodeScripts"),
    "model": (_set("model.type", "Lattice"), "Lattice"),
    "WordLevel with ByteLevel": (_set("model.type", "WordLevel"), "ByteLevel with a model over characters"),
    "ByteLevel twice": (_set("normalizer", {"type": "ByteLevel"}), "twice"),
    "decoder": (_set("decoder", {"type": "CTC"}), "CTC"),
    "decoder in a sequence": (_set("decoder", {"type": "Sequence", "decoders": [{"type": "BPEDecoder"}]}),
                              "BPEDecoder"),
    "post-processor": (_set("post_processor", {"type": "Unknown"}), "Unknown"),
    "truncation": (_set("truncation", {"max_length": 8}), "truncation"),
    "fixed padding": (_set("padding", {"strategy": {"Fixed": 8}}), "padding"),
    "Split regex": (_set("pre_tokenizer", {"type": "Split", "pattern": {"Regex": r"[\w]"}, "behavior": "Isolated",
                                           "invert": False}), "inside a class"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_unsupported_components_are_refused_by_name(gpt2, name):
    change, named = REFUSED[name]
    config = json.loads(gpt2.to_str())
    change(config)
    with pytest.raises(UnsupportedComponentError, match=named):
        tokenizer_from_hf(config, backend="reference")


def test_missing_byte_raises_where_hf_drops_it(gpt2):
    config = json.loads(gpt2.to_str())
    missing = pre.to_byte_chars(b"\xa9")  # the second byte of "é"
    config["model"]["merges"] = [merge for merge in config["model"]["merges"] if missing not in "".join(merge)]
    del config["model"]["vocab"][missing]
    hf = tokenizers.Tokenizer.from_str(json.dumps(config))
    assert hf.decode(hf_ids(hf, "aé")) != "aé"  # HF drops the byte
    with pytest.warns(UserWarning, match="HF gives it"):  # one token fewer: HF renumbers the added tokens
        tok = tokenizer_from_hf(config, backend="reference")
    assert tok.added_tokens[ADDED[0]] == hf.token_to_id(ADDED[0]) == gpt2.token_to_id(ADDED[0]) - 1
    with pytest.raises(UnknownTokenError):
        tok.encode("aé")
    config["model"]["unk_token"] = SPECIALS[1]
    with pytest.raises(UnsupportedComponentError, match="unk_token"):
        tokenizer_from_hf(config, backend="reference")


def test_span_split_inside_a_character_is_refused_when_met(training_text):
    hf = train_hf(training_text, hf_pre.Sequence([byte_level(), hf_pre.Digits(individual_digits=True)]))
    tok = crayon_from(hf)
    assert tok.encode("a1b 22") == hf_ids(hf, "a1b 22")
    with pytest.raises(UnsupportedComponentError, match="not the byte-level form of text"):
        tok.encode("x²")  # "²" is C2 B2 and the byte B2 stands for "²", a digit to HF's Digits


# --- saving -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["llama3_ignore_merges", "digits_nfkc_lowercase", "byte_level_normalizer"])
def test_save_round_trip(training_text, tmp_path, name):
    hf = train_hf(training_text, *CONFIGS[name]())
    path = tmp_path / "saved.json"
    save_hf_tokenizer(crayon_from(hf), path)
    saved_hf = tokenizers.Tokenizer.from_file(str(path))
    reloaded = load_hf_tokenizer(path, backend="reference")
    text = corpus_text("multilingual.txt", 4000) + f" {SPECIALS[0]}{ADDED[0]}"
    assert hf_ids(saved_hf, text) == hf_ids(hf, text) == reloaded.encode(text, allowed_special="all")


@pytest.fixture(scope="module")
def cl100k_in_hf(tmp_path_factory):
    """cl100k_base saved by Crayon as a tokenizer.json, loaded by HF tokenizers and by Crayon."""
    path = tmp_path_factory.mktemp("cl100k") / "tokenizer.json"
    save_hf_tokenizer(crayon.load("cl100k_base", backend="reference"), path)
    return tokenizers.Tokenizer.from_file(str(path)), load_hf_tokenizer(path, backend="reference")


@pytest.mark.parametrize("corpus", CORPUS_FILES)
def test_cl100k_exported_to_hf_matches_tiktoken(cl100k_in_hf, corpus):
    hf, reloaded = cl100k_in_hf
    reference = tiktoken_encoding("cl100k_base")
    text = corpus_text(corpus, 200_000)
    assert hf_ids(hf, text) == reference.encode_ordinary(text)
    assert reloaded.encode_ordinary(text[:20_000]) == reference.encode_ordinary(text[:20_000])


@settings(max_examples=200, deadline=None)
@given(text=hf_text)
def test_cl100k_exported_to_hf_matches_tiktoken_on_generated_text(cl100k_in_hf, text):
    hf, reloaded = cl100k_in_hf
    expected = tiktoken_encoding("cl100k_base").encode(text, allowed_special="all")
    assert hf_ids(hf, text) == expected
    assert reloaded.encode(text, allowed_special="all") == expected


def test_merges_from_ranks_follow_tiktoken_order():
    assert merges_from_ranks({b"a": 0, b"b": 1, b"c": 2, b"ab": 3, b"abc": 4}) == [(b"a", b"b"), (b"ab", b"c")]
    # "bc" outranks "ab", so tiktoken builds "abc" from "a" + "bc"
    ranks = {b"a": 0, b"b": 1, b"c": 2, b"bc": 3, b"ab": 4, b"abc": 5}
    assert merges_from_ranks(ranks) == [(b"b", b"c"), (b"a", b"b"), (b"a", b"bc")]
    with pytest.raises(ValueError, match="not the merge"):
        merges_from_ranks({b"a": 0, b"b": 1, b"c": 2, b"abc": 3, b"bc": 4})

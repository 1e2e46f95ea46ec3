"""HF's pipeline around the model, against HF tokenizers itself: added tokens with their options (``single_word``,
``lstrip``, ``rstrip``, ``normalized``, overlapping contents, the two-pass match), post-processors
(``add_special_tokens=True``, pairs) and decoders. The files are small models HF trains on a corpus slice, with
their ``added_tokens``, ``post_processor`` and ``decoder`` edited."""

from __future__ import annotations

import json
import pickle
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import crayon
from crayon.errors import UnsupportedComponentError
from crayon.formats.hf_io import spec_from_hf
from crayon.reference.added_tokens import WHITE_SPACE, AddedTokenOptions, split_added_tokens

tokenizers = pytest.importorskip("tokenizers")

from tokenizers import AddedToken, decoders, models, processors, trainers  # noqa: E402
from tokenizers import normalizers as hf_norm  # noqa: E402
from tokenizers import pre_tokenizers as hf_pre  # noqa: E402

from conftest import corpus_text  # noqa: E402
from hf_configs import CONFIGS, hf_text, trained  # noqa: E402

# Added tokens whose matches overlap, touch words and whitespace: (content, options, special)
OPTIONED_TOKENS = [
    ("<mask>", dict(lstrip=True), True),  # RoBERTa's mask
    ("[MASK]", dict(lstrip=True, rstrip=True), True),
    ("ab", dict(single_word=True), False),
    ("abc", dict(), False),
    ("bc d", dict(rstrip=True), False),
    (" x", dict(), False),
    ("  ", dict(normalized=True), False),
    ("HeLLo", dict(normalized=True, single_word=True), False),
    ("lo wo", dict(normalized=True, lstrip=True), False),
    ("<s>", dict(rstrip=True, single_word=True), True),
    ("s>", dict(normalized=True), False),
    ("é_", dict(single_word=True, lstrip=True), False),
]
AROUND = [" ", "  ", "\n", "\t", "\u3000", "\xa0", "\x1c", "\u200b", "a", "b", "c", "d", "x", "_", "é", "1", "²",
          "Ⅻ", "\u0301", "中", "!", ".", "<", ">", "Hello", "HELLO", "hello world", "s", "E\u0301"]
text_around_tokens = st.lists(
    st.one_of(st.sampled_from([content for content, _, _ in OPTIONED_TOKENS] + AROUND),
              st.text(st.characters(codec="utf-8", exclude_categories=["Cn"]), max_size=3)),
    max_size=20,
).map("".join)


def with_options(hf, tokens=OPTIONED_TOKENS):
    hf = tokenizers.Tokenizer.from_str(hf.to_str())
    for content, options, special in tokens:
        token = AddedToken(content, special=special, **{"normalized": not special, **options})
        (hf.add_special_tokens if special else hf.add_tokens)([token])
    return hf


@pytest.fixture(scope="module", params=["gpt2", "digits_nfkc_lowercase"])
def optioned(request):
    """(HF tokenizer, Crayon reference, Crayon jit) of a file with ``OPTIONED_TOKENS``; the second configuration
    has a normalizer (NFKC, lowercase) that changes text and tokens matched in the normalized text."""
    hf = with_options(trained(request.param))
    spec = json.loads(hf.to_str())
    return (hf, crayon.Tokenizer.from_spec(spec_from_hf(spec), backend="reference"),
            crayon.Tokenizer.from_spec(spec_from_hf(spec), backend="jit"))


@settings(max_examples=300, deadline=None)
@given(text=text_around_tokens)
def test_added_tokens_with_options_match_hf(optioned, text):
    hf, reference, jit = optioned
    expected = hf.encode(text, add_special_tokens=False).ids
    assert reference.encode(text, allowed_special="all") == expected
    assert jit.encode(text, allowed_special="all") == expected
    assert jit.decode(expected) == hf.decode(expected, skip_special_tokens=False)  # "é_" is bytes E9 5F to HF


def test_added_tokens_with_options_match_hf_in_batches_and_on_corpus_text(optioned):
    hf, reference, jit = optioned
    texts = ["I said <mask> and [MASK]  ab abc HELLO  lo  wo <s> s> é_ x", " <s>ab\n [MASK]\t\tbc d   z",
             "x" * 50 + " " * 9 + "HeLLo"]
    expected = [encoding.ids for encoding in hf.encode_batch(texts, add_special_tokens=False)]
    for tok in (reference, jit):
        assert tok.encode_batch(texts, allowed_special="all") == expected
        tokens, offsets = tok.encode_batch_flat(texts, allowed_special="all")
        assert [tokens[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])] == expected


def test_special_tokens_not_allowed_are_text_as_with_split_special_tokens(optioned):
    hf, _, jit = optioned
    text = "a <mask> b [MASK] <s> c"
    hf.encode_special_tokens = True
    try:
        assert jit.encode_ordinary(text) == hf.encode(text, add_special_tokens=False).ids
    finally:
        hf.encode_special_tokens = False
    with pytest.raises(ValueError, match="disallowed special token"):
        jit.encode(text)


def test_options_survive_cartridges_pickles_and_hf_export(optioned, tmp_path):
    hf, _, jit = optioned
    text = "  <mask> [MASK]\n ab HeLLo\tlo wo x"
    expected = hf.encode(text, add_special_tokens=False).ids
    assert jit.added_token_options["<mask>"] == AddedTokenOptions(lstrip=True)
    assert crayon.load(jit.save(tmp_path / "optioned")).encode(text, allowed_special="all") == expected
    if jit.normalizer is None:  # an export refuses "é_" (spelled in byte-level characters): the ASCII tokens
        ascii_only = with_options(trained("gpt2"), [token for token in OPTIONED_TOKENS if token[0].isascii()])
        tok = crayon.Tokenizer.from_spec(spec_from_hf(json.loads(ascii_only.to_str())), backend="jit")
        tok.export(tmp_path / "tokenizer.json", format="hf")
        again = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
        assert again.encode(text, add_special_tokens=False).ids == expected
    assert pickle.loads(pickle.dumps(jit)).encode(text, allowed_special="all") == expected


def test_files_are_not_cut_next_to_tokens_that_strip_whitespace(optioned, tmp_path):
    hf, _, jit = optioned
    path = tmp_path / "doc.txt"
    text = ("word\n<mask> other [MASK] more " * 2000)
    path.write_text(text, encoding="utf-8")
    expected = hf.encode(text, add_special_tokens=False).ids
    if jit.normalizer is None:  # cuts are proven for tiktoken patterns (GPT-2's ByteLevel is r50k's) only
        added = {token: token_id for token, token_id in jit.added_tokens.items() if " " not in token}
        with_pattern = crayon.Tokenizer("r50k", jit.model, pattern="r50k_base", special_tokens=jit.special_tokens,
                                        added_tokens=added, added_token_options={
                                            token: options for token, options in jit.added_token_options.items()
                                            if " " not in token})
        with pytest.raises(UnsupportedComponentError, match="strips the whitespace"):
            with_pattern.encode_file(path)
    whole = [chunk.tokens for chunk in jit.iter_encode_files([path], chunk_bytes=None)]
    assert [token for tokens in whole for token in tokens.tolist()] == jit.encode_ordinary(text)
    assert jit.encode(text, allowed_special="all") == expected


def test_word_and_space_characters_are_hf_s(optioned):
    """``single_word`` looks for Rust's ``\\w`` next to the token, ``lstrip``/``rstrip`` take Unicode's White_Space:
    every assigned character of a sample of the code space, checked against HF (for characters Python's Unicode
    database does not know, the normalizers may differ)."""
    hf, reference, _ = optioned
    chars = [chr(code) for code in [*range(0x300), *range(0x300, 0x30000, 97)]
             if unicodedata.category(chr(code)) not in ("Cn", "Cs")]
    for template in ("{}ab", "ab{}", "{}<mask>", "[MASK]{}"):
        texts = [template.format(char) for char in chars]
        expected = [encoding.ids for encoding in hf.encode_batch(texts, add_special_tokens=False)]
        assert [reference.encode(text, allowed_special="all") for text in texts] == expected, template
    assert WHITE_SPACE == {char for char in map(chr, range(0x3000 + 1)) if char.isspace()} - set("\x1c\x1d\x1e\x1f")


def test_split_added_tokens_pieces():
    tokens = {"<a>": AddedTokenOptions(lstrip=True, rstrip=True), "ab": AddedTokenOptions(single_word=True)}
    text = "x  <a> \ny ab,zab"
    assert [(text[start:end], token) for start, end, token in split_added_tokens(text, tokens)] == [
        ("x", None), ("  <a> \n", "<a>"), ("y ", None), ("ab", "ab"), (",zab", None)]
    assert list(split_added_tokens("", tokens)) == []


def test_normalized_tokens_that_normalize_alike_are_refused(tmp_path):
    hf = with_options(trained("digits_nfkc_lowercase"), [("Ab", dict(normalized=True), False),
                                                          ("aB", dict(normalized=True), False)])
    tok = crayon.Tokenizer.from_spec(spec_from_hf(json.loads(hf.to_str())), backend="reference")
    with pytest.raises(ValueError, match="ambiguous"):
        tok.encode("ab")


def test_a_token_listed_twice_with_different_options_is_refused():
    config = json.loads(trained("gpt2").to_str())
    entry = {"id": 700, "content": "<x>", "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": False}
    config["added_tokens"] += [entry, {**entry, "lstrip": True}]
    with pytest.raises(UnsupportedComponentError, match="twice"):
        spec_from_hf(config)


# --- post-processors and decoders on WordPiece, Unigram and SentencePiece-style BPE -----------------------------

def _lines() -> list[str]:
    text = corpus_text("big.txt", 60_000) + corpus_text("multilingual.txt", 20_000)
    return [text[i : i + 2000] for i in range(0, len(text), 2000)]


def _bert():
    hf = tokenizers.Tokenizer(models.WordPiece(unk_token="[UNK]"))
    hf.normalizer = hf_norm.Sequence([hf_norm.NFD(), hf_norm.Lowercase(), hf_norm.StripAccents()])
    hf.pre_tokenizer = hf_pre.BertPreTokenizer()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    hf.train_from_iterator(_lines(), trainers.WordPieceTrainer(vocab_size=800, special_tokens=specials,
                                                               show_progress=False))
    hf.post_processor = processors.BertProcessing(("[SEP]", hf.token_to_id("[SEP]")), ("[CLS]", hf.token_to_id("[CLS]")))
    hf.decoder = decoders.WordPiece()
    hf.add_special_tokens([AddedToken("[MASK]", lstrip=True)])
    return hf


def _t5():
    hf = tokenizers.Tokenizer(models.Unigram())
    hf.normalizer = hf_norm.NFKC()
    hf.pre_tokenizer = hf_pre.Metaspace()
    hf.train_from_iterator(_lines(), trainers.UnigramTrainer(vocab_size=2000, special_tokens=["<pad>", "</s>", "<unk>"],
                                                             unk_token="<unk>", show_progress=False))
    hf.post_processor = processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B:1 </s>:1",
                                                      special_tokens=[("</s>", hf.token_to_id("</s>"))])
    hf.decoder = decoders.Metaspace()
    return hf


def _llama2(prepend_scheme="always", split=True):
    hf = tokenizers.Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    hf.pre_tokenizer = hf_pre.Metaspace(prepend_scheme=prepend_scheme, split=split)
    byte_tokens = [f"<0x{byte:02X}>" for byte in range(256)]
    hf.train_from_iterator(_lines(), trainers.BpeTrainer(vocab_size=700, special_tokens=["<unk>", "<s>", "</s>",
                                                                                         *byte_tokens],
                                                         show_progress=False))
    hf.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s>:1 $B:1",
                                                      special_tokens=[("<s>", hf.token_to_id("<s>"))])
    hf.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                    decoders.Strip(" ", 1, 0)])
    hf.add_tokens([AddedToken("<tool>", normalized=False)])
    return hf


# transformers' conversion of Llama 2 / Mistral without its legacy flag: Metaspace puts ▁ only at the input's start
FAMILIES = {"bert": _bert, "t5": _t5, "llama2": _llama2,
            "llama2_first": lambda: _llama2(prepend_scheme="first", split=False)}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request):
    """(HF tokenizer, Crayon jit tokenizer) of a small model of each family, with its post-processor and decoder."""
    hf = FAMILIES[request.param]()
    return hf, crayon.Tokenizer.from_spec(spec_from_hf(json.loads(hf.to_str())), backend="jit")


family_text = st.lists(st.one_of(st.sampled_from(AROUND + ["[MASK]", "<s>", "<tool>", "don't", "Hello, world.", "é",
                                                            "🙂"]),
                                 st.text(st.characters(codec="utf-8", exclude_categories=["Cn"]), max_size=3)),
                       max_size=12).map("".join)


@settings(max_examples=150, deadline=None)
@given(text=family_text, pair=st.none() | family_text, add_special_tokens=st.booleans())
def test_post_processor_ids_and_decode_match_hf(family, text, pair, add_special_tokens):
    hf, tok = family
    expected = hf.encode(text, pair, add_special_tokens=add_special_tokens)
    ids = tok.encode(text, allowed_special="all", add_special_tokens=add_special_tokens, pair=pair)
    assert ids == expected.ids
    first = tok.encode(text, allowed_special="all")
    second = None if pair is None else tok.encode(pair, allowed_special="all")
    assert tok.post_process(first, second, add_special_tokens=add_special_tokens) == (ids, expected.type_ids)
    for skip in (False, True):
        assert tok.decode(ids, skip_special_tokens=skip) == hf.decode(ids, skip_special_tokens=skip)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_decode_of_any_ids_matches_hf(family, data):
    hf, tok = family
    ids = data.draw(st.lists(st.integers(0, hf.get_vocab_size() - 1), max_size=12))
    assert tok.decode(ids) == hf.decode(ids, skip_special_tokens=False)


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_byte_level_decode_of_any_ids_matches_hf(optioned, data):
    hf, _, jit = optioned
    ids = data.draw(st.lists(st.integers(0, hf.get_vocab_size() - 1), max_size=12))
    assert jit.decode(ids) == hf.decode(ids, skip_special_tokens=False)
    assert jit.decode(ids, skip_special_tokens=True) == hf.decode(ids, skip_special_tokens=True)


def test_family_on_corpus_text(family):
    hf, tok = family
    text = corpus_text("english_web.txt", 3000) + corpus_text("multilingual.txt", 1000)
    expected = hf.encode(text)
    assert tok.encode(text, add_special_tokens=True) == expected.ids
    assert tok.decode(expected.ids, skip_special_tokens=True) == hf.decode(expected.ids)


def test_template_frames_model_ready_batches(family):
    hf, tok = family
    batch = tok.encode_batch_to_numpy(["Hello there", "x"], pad_token_id=0)
    expected = [encoding.ids for encoding in hf.encode_batch(["Hello there", "x"])]
    assert [row[row_mask == 1].tolist() for row, row_mask in zip(batch["input_ids"], batch["attention_mask"])] == expected


def test_default_encode_adds_nothing_and_tiktoken_vocabularies_have_no_post_processor(family):
    hf, tok = family
    assert tok.encode("Hello there") == hf.encode("Hello there", add_special_tokens=False).ids
    cl100k = crayon.load("cl100k_base")
    assert cl100k.encode("hi", add_special_tokens=True) == cl100k.encode("hi")
    assert cl100k.encode("hi", pair="there") == cl100k.encode("hi") + cl100k.encode("there")
    assert cl100k.post_process([1, 2], [3]) == ([1, 2, 3], [0, 0, 1])


@pytest.mark.parametrize("spec, named", [
    ({"type": "CTC"}, "CTC"),
    ({"type": "Sequence", "decoders": [{"type": "Fuse"}, {"type": "BPEDecoder", "suffix": "</w>"}]}, "BPEDecoder"),
])
def test_unsupported_decoders_are_refused_by_name(spec, named):
    config = json.loads(trained("gpt2").to_str())
    config["decoder"] = spec
    with pytest.raises(UnsupportedComponentError, match=named):
        spec_from_hf(config)


def test_metaspace_first_puts_no_prefix_after_an_added_token():
    first = _llama2(prepend_scheme="first", split=False)
    always = tokenizers.Tokenizer.from_str(first.to_str())
    always.pre_tokenizer = hf_pre.Metaspace(prepend_scheme="always", split=False)
    text = "Hello<tool>Hello <tool> world"
    for backend in ("reference", "jit"):
        tok = crayon.Tokenizer.from_spec(spec_from_hf(json.loads(first.to_str())), backend=backend)
        assert tok.encode(text) == first.encode(text, add_special_tokens=False).ids
        assert tok.encode(text) != always.encode(text, add_special_tokens=False).ids
        assert tok.encode("Hello") == always.encode("Hello", add_special_tokens=False).ids


@pytest.mark.parametrize("change, named", [
    ({"normalizer": {"type": "Replace", "pattern": {"Regex": "a+b"}, "content": ""}}, "Replace of 'a\\+b'"),
    ({"normalizer": {"type": "Replace", "pattern": {"String": "x" * 17}, "content": "y"}}, "Replace of 'x"),
    ({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "WhitespaceSplit"}, {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": True}]}},
     "'first' after another pre-tokenizer"),
])
def test_metaspace_first_where_crayon_cannot_track_the_start_is_refused(change, named):
    config = json.loads(_llama2(prepend_scheme="first").to_str())
    config.update(change)
    with pytest.raises(UnsupportedComponentError, match=named):
        spec_from_hf(config)


def test_post_processor_sequences_adding_ids_twice_are_refused():
    config = json.loads(trained("gpt2").to_str())
    bert = {"type": "BertProcessing", "sep": ["<|pad|>", 1], "cls": ["<|endoftext|>", 0]}
    config["post_processor"] = {"type": "Sequence", "processors": [bert, bert]}
    with pytest.raises(UnsupportedComponentError, match="more than one"):
        spec_from_hf(config)
    config["post_processor"] = {"type": "Unknown"}
    with pytest.raises(UnsupportedComponentError, match="Unknown"):
        spec_from_hf(config)


def test_post_processor_and_decoder_survive_cartridges_pickles_and_export(tmp_path):
    hf = tokenizers.Tokenizer.from_str(trained("gpt2").to_str())
    hf.post_processor = processors.TemplateProcessing(single="<|endoftext|> $A <|pad|>",
                                                      special_tokens=[("<|endoftext|>", 0), ("<|pad|>", 1)])
    hf.decoder = decoders.Sequence([decoders.ByteLevel(), decoders.Strip(" ", 1, 0)])
    tok = crayon.Tokenizer.from_spec(spec_from_hf(json.loads(hf.to_str())), backend="jit")
    text = " Hello there"
    expected = hf.encode(text).ids
    tok.export(tmp_path / "tokenizer.json", format="hf")
    for again in (crayon.load(tok.save(tmp_path / "framed")), pickle.loads(pickle.dumps(tok)),
                  crayon.load(tmp_path / "tokenizer.json")):
        assert again.encode(text, add_special_tokens=True) == expected
        assert again.decode(expected) == hf.decode(expected, skip_special_tokens=False) == "<|endoftext|> Hello there<|pad|>"


# --- offsets --------------------------------------------------------------------------------------------------

OFFSET_POST_PROCESSORS = {
    "none": None,
    "byte_level_trim": lambda: processors.ByteLevel(trim_offsets=True),
    "byte_level_trim_no_prefix": lambda: processors.ByteLevel(trim_offsets=True, add_prefix_space=False),
    "roberta": lambda: processors.RobertaProcessing(("<|pad|>", 1), ("<|endoftext|>", 0), trim_offsets=True),
    "llama3": lambda: processors.Sequence([processors.ByteLevel(trim_offsets=False), processors.TemplateProcessing(
        single="<|endoftext|> $A", pair="<|endoftext|> $A <|endoftext|> $B:1", special_tokens=[("<|endoftext|>", 0)])]),
}


@pytest.fixture(scope="module", params=sorted(OFFSET_POST_PROCESSORS))
def with_offsets(request):
    hf = with_options(trained("gpt2"))
    make = OFFSET_POST_PROCESSORS[request.param]
    hf.post_processor = None if make is None else make()
    return hf, crayon.Tokenizer.from_spec(spec_from_hf(json.loads(hf.to_str())), backend="jit")


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def hf_config(request):
    """(HF tokenizer, Crayon jit tokenizer) of each normalizer / pre-tokenizer configuration of ``hf_configs``."""
    hf = trained(request.param)
    return hf, crayon.Tokenizer.from_spec(spec_from_hf(json.loads(hf.to_str())), backend="jit")


@settings(max_examples=150, deadline=None)
@given(text=text_around_tokens, pair=st.none() | text_around_tokens, add_special_tokens=st.booleans())
def test_offsets_match_hf(with_offsets, text, pair, add_special_tokens):
    hf, tok = with_offsets
    expected = hf.encode(text, pair, add_special_tokens=add_special_tokens)
    ids, offsets = tok.encode_with_offsets(text, allowed_special="all", add_special_tokens=add_special_tokens, pair=pair)
    assert ids == expected.ids
    assert offsets == expected.offsets


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(text_around_tokens, min_size=1, max_size=3))
def test_model_ready_offsets_are_hfs_trimmed_ones(with_offsets, texts):
    """``return_offsets_mapping`` gives transformers' spans: the post-processor's ``trim_offsets`` applied."""
    hf, tok = with_offsets
    batch = tok(texts, pad_token_id=0, add_special_tokens=False, return_offsets_mapping=True, allowed_special="all")
    for text, mask, spans in zip(texts, batch["attention_mask"], batch["offsets_mapping"]):
        expected = hf.encode(text, add_special_tokens=False)
        assert [tuple(span) for span in spans[mask == 1].tolist()] == expected.offsets


@settings(max_examples=100, deadline=None)
@given(text=family_text, pair=st.none() | family_text, add_special_tokens=st.booleans())
def test_family_offsets_match_hf(family, text, pair, add_special_tokens):
    """BERT (NFD, Lowercase, StripAccents, WordPiece), T5 (NFKC, Metaspace, Unigram), Llama 2 (BPE over characters,
    byte fallback): HF's offsets, framing and pairs included."""
    hf, tok = family
    expected = hf.encode(text, pair, add_special_tokens=add_special_tokens)
    ids, offsets = tok.encode_with_offsets(text, allowed_special="all", add_special_tokens=add_special_tokens, pair=pair)
    assert ids == expected.ids
    assert offsets == expected.offsets


def test_family_offsets_match_hf_on_corpus_text(family):
    hf, tok = family
    text = corpus_text("english_web.txt", 3000) + corpus_text("multilingual.txt", 2000)
    expected = hf.encode(text, text[:500])
    assert tok.encode_with_offsets(text, add_special_tokens=True, pair=text[:500]) == (expected.ids, expected.offsets)
    batch = tok(["Hello there, é!", text[:300]], pad_token_id=0, return_offsets_mapping=True)
    for row, (mask, spans) in enumerate(zip(batch["attention_mask"], batch["offsets_mapping"])):
        assert [tuple(span) for span in spans[mask == 1].tolist()] == hf.encode(["Hello there, é!", text[:300]][row]).offsets


@settings(max_examples=60, deadline=None)
@given(text=hf_text)
def test_offsets_match_hf_through_every_normalizer_and_pre_tokenizer(hf_config, text):
    hf, tok = hf_config
    expected = hf.encode(text, add_special_tokens=False)
    assert tok.encode_with_offsets(text, allowed_special="all") == (expected.ids, expected.offsets)


@settings(max_examples=150, deadline=None)
@given(text=text_around_tokens, add_special_tokens=st.booleans())
def test_offsets_match_hf_around_added_tokens_with_options(optioned, text, add_special_tokens):
    """Tokens matched in the raw text and in the normalized text (NFKC, lowercase), stripping whitespace."""
    hf, _, jit = optioned
    expected = hf.encode(text, add_special_tokens=add_special_tokens)
    assert jit.encode_with_offsets(text, allowed_special="all", add_special_tokens=add_special_tokens) == (
        expected.ids, expected.offsets)


def test_offsets_through_a_normalizer_without_alignments_are_refused_by_name():
    hf = trained("gpt2")
    spec = spec_from_hf(json.loads(hf.to_str()))
    tok = crayon.Tokenizer("custom", spec.model, pattern=None, pretokenizer=spec.pretokenizer,
                           normalizer=lambda text: text.lower(), backend="reference")
    with pytest.raises(ValueError, match="normalizer function has no alignments"):
        tok.encode_with_offsets("Hello")
    with pytest.raises(ValueError, match="normalizer function has no alignments"):
        tok(["Hello"], return_offsets_mapping=True)

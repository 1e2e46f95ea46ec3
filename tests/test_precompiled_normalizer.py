"""HF's Precompiled normalizer over UTF-8 bytes (``crayon.jit.precompiled_normalizer``) and the Strip / Replace
steps after it: the kernels' text equals HF's ``normalize_str`` and the reference (``CharsMap.rewrite``) on every
code point, on every short sequence of characters of every grapheme cluster class, on hypothesis text and on the
corpora, for SentencePiece's own maps and a map whose keys are characters of every class."""

import base64
import functools
import itertools
import json
import unicodedata

import numpy as np
import pytest
from conftest import corpus_text
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import tokenizer_text

from crayon.formats.hf_normalize import Replace, Strip, normalizer_from_hf
from crayon.formats.sentencepiece import read_sentencepiece
from crayon.jit.precompiled_normalizer import PrecompiledNormalizer, precompiled_normalizer_of

tokenizers = pytest.importorskip("tokenizers")
spm = pytest.importorskip("sentencepiece")

# a character of each Grapheme_Cluster_Break (and Extended_Pictographic, Indic_Conjunct_Break) value, short ones
# where there are, so that clusters of several stay under HF's 6 bytes
CLASS_CHARS = ["a", "b", "e", "\x00", "\x01", "\u200b", "\r", "\n", "\u0301", "\u0300", "\u200d", "\U0001F1FA",
               "\U0001F1F8", "\u0600", "\u0903", "\u0e33", "\u1100", "\u1161", "\u11a8", "\uac00", "\uac01", "\u00a9",
               "\U0001F468", "\u0915", "\u094d", "\u093c", "\u00e9", " "]
# the keys of the map of every class: characters alone and clusters, a key that is a prefix of another
# ("a", "a\u0301"), a rule that removes its key (U+200B)
CLASS_RULES = {"a": "<a>", "\x01": "<1>", "\r": "<cr>", "\n": "<lf>", "\u0301": "<acute>", "\u200d": "<zwj>",
               "\U0001F1FA": "<u>", "\u0600": "<p>", "\u0903": "<sm>", "\u1100": "<l>", "\u1161": "<v>",
               "\u11a8": "<t>", "\uac00": "<lv>", "\u00a9": "<c>", "\u0915": "<ka>", "\u094d": "<virama>",
               "\u093c": "<nukta>", "\u200b": "", "a\u0301": "\u00e1", "\r\n": "<crlf>", "\u1100\u1161": "<ga>",
               "\u0600b": "<pb>", "\U0001F1FA\U0001F1F8": "<us>", "\u0915\u094d": "<k>", "e\u0301": "\u00e9",
               "\u00a9\u200d": "<c-zwj>", " ": "  "}


def charsmap_of(tmp_path, rule_name: str | None = None, rules: dict[str, str] | None = None) -> bytes:
    """The precompiled character map of a SentencePiece model with a normalization rule, or with ``rules``."""
    text = tmp_path / "text.txt"
    text.write_text("\n".join(["abc def ghi jkl"] * 20), encoding="utf-8")
    options = {"normalization_rule_name": rule_name}
    if rules is not None:
        tsv = tmp_path / "rules.tsv"
        tsv.write_text("".join(" ".join(f"{ord(char):X}" for char in key) + "\t"
                               + " ".join(f"{ord(char):X}" for char in value) + "\n" for key, value in rules.items()))
        options = {"normalization_rule_tsv": str(tsv)}
    prefix = str(tmp_path / (rule_name or "rules"))
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=prefix, vocab_size=20, model_type="char",
                                   minloglevel=2, **options)
    return read_sentencepiece(prefix + ".model").precompiled_charsmap


MAPS = ["nmt_nfkc", "nfkc_cf", "classes"]


@pytest.fixture(scope="module")
def charsmaps(tmp_path_factory) -> dict[str, bytes]:
    """SentencePiece's maps (nmt_nfkc, nfkc_cf) and the map of every class."""
    return {name: charsmap_of(tmp_path_factory.mktemp(name), None if name == "classes" else name,
                              CLASS_RULES if name == "classes" else None) for name in MAPS}


@pytest.fixture(scope="module", params=MAPS)
def charsmap(request, charsmaps) -> bytes:
    return charsmaps[request.param]


def precompiled_spec(charsmap: bytes) -> dict:
    return {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap).decode()}


def jit_normalize(twin: PrecompiledNormalizer, texts: list[str]) -> list[str]:
    """The texts through ``twin`` as one batch of UTF-8 bytes."""
    texts = twin.normalize_before(texts)
    encoded = [text.encode("utf-8") for text in texts]
    ends = np.cumsum([len(text) for text in encoded], dtype=np.int64)
    data, out_ends = twin.normalize_utf8(np.frombuffer(b"".join(encoded), np.uint8), ends)
    joined, starts = data.tobytes(), [0, *out_ends.tolist()]
    return [joined[start:end].decode("utf-8") for start, end in zip(starts, starts[1:])]


def hf_normalizer(spec: dict):
    """HF's normalizer of the tokenizer.json object ``spec``."""
    return tokenizers.Tokenizer.from_str(json.dumps({
        "version": "1.0", "normalizer": spec, "model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}
    })).normalizer


@functools.lru_cache(maxsize=None)
def normalizers_of(spec_json: str) -> tuple:
    """(the reference, its jit twin, HF's) normalizer of a tokenizer.json object (its JSON), built once: a twin
    with character steps builds their table (a fraction of a second)."""
    spec = json.loads(spec_json)
    ours = normalizer_from_hf(spec)
    twin = precompiled_normalizer_of(ours)
    assert twin is not None
    return ours, twin, hf_normalizer(spec)


def three_ways(spec: dict, texts: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(the jit kernels', the reference's, HF's) text of each text, with the normalizer of ``spec``."""
    ours, twin, hf = normalizers_of(json.dumps(spec))
    return jit_normalize(twin, texts), [ours(text) for text in texts], [hf.normalize_str(text) for text in texts]


def assert_same(spec: dict, texts: list[str]) -> None:
    jit, reference, hf = three_ways(spec, texts)
    assert jit == hf
    assert reference == hf


# HF's Unicode tables are older than the regex module's: the characters Python does not know yet (a newer
# regex may give them a Grapheme_Cluster_Break, as the reference does) are left out
ASSIGNED = [chr(code_point) for code_point in range(0x110000)
            if not 0xD800 <= code_point < 0xE000 and unicodedata.category(chr(code_point)) not in ("Cn", "Co")]


@pytest.mark.parametrize("name", ["nmt_nfkc", "classes"])
def test_every_assigned_code_point(charsmaps, name):
    """Each character alone, after a letter and before a mark, after a CR and before a ZWJ, in one text (a line
    feed ends every cluster), against HF (the reference is, in tests/test_hf_families.py)."""
    text = "\n".join(f"{char}\na{char}\u0301\n\r{char}\u200d\u00a9" for char in ASSIGNED)
    spec = precompiled_spec(charsmaps[name])
    assert jit_normalize(precompiled_normalizer_of(normalizer_from_hf(spec)), [text]) == [
        hf_normalizer(spec).normalize_str(text)]


# the characters of the rules that look further back than one character: GB9c (a consonant, a nukta, a virama),
# GB11 (pictographs, an accent, a ZWJ), GB12-13 (regional indicators)
CONTEXT_CHARS = ["a", "\u00a0", "\u0915", "\u093c", "\u094d", "\u00a9", "\u0300", "\u200d", "\U0001F1FA",
                 "\U0001F1F8"]


def test_every_short_sequence_of_cluster_classes(charsmap):
    """Every sequence of up to three characters of the classes, and of four of the characters whose clusters
    depend on more than the character before, one text each."""
    texts = ["".join(chars) for length in range(1, 4) for chars in itertools.product(CLASS_CHARS, repeat=length)]
    assert_same(precompiled_spec(charsmap), texts + ["".join(chars) for chars in itertools.product(CONTEXT_CHARS,
                                                                                                   repeat=4)])


cluster_text = st.lists(st.sampled_from(CLASS_CHARS), max_size=30).map("".join)


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(st.one_of(tokenizer_text, cluster_text), min_size=1, max_size=5))
def test_generated_batches(charsmap, texts):
    assert_same(precompiled_spec(charsmap), texts)


# T5's normalizer (Precompiled, Strip right, Replace runs of spaces) and ALBERT's (two Replaces of a string, NFKD,
# StripAccents and Lowercase before Precompiled, as one table of each character; Replace after it)
def t5_spec(charsmap: bytes) -> dict:
    return {"type": "Sequence", "normalizers": [
        precompiled_spec(charsmap), {"type": "Strip", "strip_left": False, "strip_right": True},
        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": "\u2581"}]}


def albert_spec(charsmap: bytes) -> dict:
    return {"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"String": "``"}, "content": '"'},
        {"type": "Replace", "pattern": {"String": "''"}, "content": '"'}, {"type": "NFKD"}, {"type": "StripAccents"},
        {"type": "Lowercase"}, precompiled_spec(charsmap),
        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]}


def xlnet_spec(charsmap: bytes) -> dict:
    """ALBERT's without Lowercase."""
    return {"type": "Sequence", "normalizers": [step for step in albert_spec(charsmap)["normalizers"]
                                                if step["type"] != "Lowercase"]}


def corpus_lines() -> list[str]:
    text = "".join(corpus_text(name, 200_000) for name in
                   ("multilingual.txt", "english_web.txt", "enwik8_head.xml", "python_code.py"))
    return text.split("\n") + ["", "  ", " a  b   ", "\r\n", "\ufb01\u0301"]


@pytest.mark.parametrize("spec_of", [precompiled_spec, t5_spec, albert_spec, xlnet_spec],
                         ids=["precompiled", "t5", "albert", "xlnet"])
def test_corpora(charsmap, spec_of):
    spec = spec_of(charsmap)
    _, twin, _ = normalizers_of(json.dumps(spec))
    assert twin.python_steps == []  # ALBERT's Replaces, NFKD, StripAccents and Lowercase too run on bytes
    assert len(twin.character_normalizers) == (spec_of in (albert_spec, xlnet_spec))
    assert_same(spec, corpus_lines())


# ALBERT's steps before Precompiled, with what each rewrites and the characters NFKD decomposes (into marks,
# compatibility forms, Hangul jamo) or reorders
ALBERT_CHARS = ["`", "``", "'", "''", '"', "a", "A", "\u00e9", "\u0301", "\u0323", "\u0344", "\u0f73", "\ufb01",
                "\uff21", "\u2126", "\uac01", "\u1e9b", "\u00bd", "\u03a3", "\u0130", "\u2460", "\u3000", " ", "\n"]
albert_text = st.lists(st.sampled_from(ALBERT_CHARS), max_size=20).map("".join)


@settings(max_examples=100, deadline=None)
@given(texts=st.lists(st.one_of(tokenizer_text, cluster_text, albert_text), min_size=1, max_size=5))
def test_sequences_on_generated_batches(charsmap, texts):
    for spec_of in (t5_spec, albert_spec, xlnet_spec):
        assert_same(spec_of(charsmap), texts)


def test_a_text_normalized_whole_after_a_byte_rewrite_is_the_rewritten_text(charsmaps):
    """A step of each character on its own after a byte rewrite hands a text it cannot rewrite alone (a mark
    BertNormalizer keeps that NFD reorders) to the normalizer as the rewrite made it, not as it was given."""
    spec = {"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"String": "ab"}, "content": "x\u08d4\U0001d165"},
        {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": True,
         "lowercase": True}, precompiled_spec(charsmaps["nmt_nfkc"])]}
    _, twin, _ = normalizers_of(json.dumps(spec))
    [characters] = twin.character_normalizers
    before = characters.whole_texts
    texts = ["ab", "AB ab", "x\u08d4\U0001d165", "plain"]
    jit, reference, hf = three_ways(spec, texts)
    assert jit == reference == hf
    assert characters.whole_texts - before == 3  # all but "plain"


# --- the byte rewrites after Precompiled, each alone --------------------------------------------------------

BYTE_STEPS = [Strip(True, True), Strip(False, True), Strip(True, False), Replace(" {2,}", "\u2581", is_regex=True),
              Replace(" +", "", is_regex=True), Replace("a{3,}", "<aaa>", is_regex=True),
              Replace("aa", "b", is_regex=False), Replace("\u00e9", "e\u0301", is_regex=False),
              Replace("``", '"', is_regex=False)]
spacey_text = st.lists(st.sampled_from([" ", "  ", "a", "aa", "\u00e9", "`", "\t", "\u3000", "\n", "\u2581", "x"]),
                       max_size=20).map("".join)


@settings(max_examples=150, deadline=None)
@given(texts=st.lists(st.one_of(tokenizer_text, spacey_text), min_size=1, max_size=4),
       step=st.sampled_from(BYTE_STEPS))
def test_byte_steps_match_hf(texts, step):
    twin = PrecompiledNormalizer([], [step.utf8_rewrite()])
    hf = hf_normalizer(step.to_hf())
    assert jit_normalize(twin, texts) == [hf.normalize_str(text) for text in texts] == [step(text) for text in texts]


def test_regexes_other_than_runs_of_a_character_stay_in_python():
    for pattern in (".+", " {2}", "a{0,}", "[ ]+", "\\s+", "ab+"):
        assert Replace(pattern, "x", is_regex=True).utf8_rewrite() is None
    charsmap = base64.b64encode(b"\x04\x00\x00\x00\x00\x00\x00\x00").decode()
    spec = {"type": "Sequence", "normalizers": [{"type": "Precompiled", "precompiled_charsmap": charsmap},
                                                {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}]}
    assert precompiled_normalizer_of(normalizer_from_hf(spec)) is None  # a Python step after it: all in Python
    assert precompiled_normalizer_of(Strip()) is None  # no Precompiled


def test_maps_with_a_key_ending_inside_a_character_look_keys_up_from_the_first_byte(charsmap):
    """Where the map does not say which characters start a key (``CharsMap.starts_key`` is None: some key ends
    inside a character), the kernel walks the trie from every character whose first byte starts one: same text."""
    spec = precompiled_spec(charsmap)
    units, replacements, _, first_bytes = normalizer_from_hf(spec).utf8_rewrite()[1:]
    by_first_byte = PrecompiledNormalizer([], [("precompiled", units, replacements, None, first_bytes)])
    texts = corpus_lines()[:3000] + ["".join(chars) for chars in itertools.product(CLASS_CHARS, repeat=2)]
    assert jit_normalize(by_first_byte, texts) == jit_normalize(precompiled_normalizer_of(normalizer_from_hf(spec)),
                                                                texts)


def test_longer_replacements_grow_the_output(charsmaps):
    """Texts that become three times as long: the kernel's output array is grown."""
    spec = precompiled_spec(charsmaps["classes"])
    texts = ["a" * 1000, "", "\U0001F1FA" * 7 + "a" * 99]
    jit, reference, hf = three_ways(spec, texts)
    assert jit == reference == hf
    assert jit[0] == "<a>" * 1000


def test_bytes_that_are_not_utf8_are_refused(charsmaps):
    twin = precompiled_normalizer_of(normalizer_from_hf(precompiled_spec(charsmaps["nmt_nfkc"])))
    data = np.frombuffer("abc\u00e9".encode()[:-1] + b"x", np.uint8)
    with pytest.raises(ValueError, match="not UTF-8"):
        twin.normalize_utf8(data, np.array([len(data)]))  # no text has these bytes

"""The jit normalizer of each character on its own (``crayon.jit.character_normalizer``, from the normalizer's
``crayon.formats.character_table``) against HF tokenizers' normalizers and Crayon's reference: every code point,
hypothesis text, the corpora, the texts it hands to the normalizer whole; and BERT tokenizer.json files of every
option through the jit engine with HF's ids."""

import json
import unicodedata
import warnings

import numpy as np
import pytest
from conftest import corpus_text
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import tokenizer_text

import crayon
from crayon.formats.hf_normalize import normalizer_from_hf
from crayon.jit.character_normalizer import WHOLE_TEXT, character_normalizer_of

tokenizers = pytest.importorskip("tokenizers")


def bert(clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True) -> dict:
    return {"type": "BertNormalizer", "clean_text": clean_text, "handle_chinese_chars": handle_chinese_chars,
            "strip_accents": strip_accents, "lowercase": lowercase}


# every value of each BertNormalizer option, and each pair of values of two options, in six configurations
BERT_CONFIGS = [
    bert(),
    bert(clean_text=False, handle_chinese_chars=False, lowercase=False),
    bert(clean_text=False, handle_chinese_chars=False, strip_accents=True),
    bert(strip_accents=True, lowercase=False),
    bert(clean_text=False, strip_accents=False),
    bert(handle_chinese_chars=False, strip_accents=False, lowercase=False),
]
CONFIGS = {
    **{"bert-" + "-".join(f"{key}={value}" for key, value in spec.items() if key != "type"): spec
       for spec in BERT_CONFIGS},
    "lowercase": {"type": "Lowercase"},
    "sequence": {"type": "Sequence", "normalizers": [{"type": "Nmt"}, {"type": "StripAccents"}, bert(lowercase=False),
                                                     {"type": "Lowercase"}]},
    # XLNet's and ALBERT's steps before Precompiled (NFKD and StripAccents: one step of each character on its own)
    "nfkd-strip_accents": {"type": "Sequence", "normalizers": [{"type": "NFKD"}, {"type": "StripAccents"}]},
    "nfd-strip_accents-lowercase": {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "StripAccents"},
                                                                        {"type": "Lowercase"}]},
}
# the separator each BertNormalizer keeps; NUL, which clean_text removes; U+FFFD; a capital sigma, dotted capital
# I and other letters of many-character lowercase; CJK; marks (U+1D165, U+08D4, U+302E: marks strip_accents keeps
# that NFD reorders; U+1D15E: decomposes to one) and a character HF's tables do not decompose (U+1E2EC)
SPECIAL_CHARS = list("\ufdd0\x00\ufffd\r\n\t \x85\u200b\u2028\u00ad\u3000\u03a3\u03c3\u03c2\u0130\u0049\u1e9e\u1f88"
                     "\u0345\u0390\u01c5\u4e2d\u3400\uf900\U00020000\u0301\u0323\u0344\u0f73\u0f39\u302e"
                     "\u08d4\U0001d165\U0001d16e\U0001d15e\U0001e2ec\u00e9\u1100\u1161\uac00\ue000")
special_text = st.lists(st.one_of(st.sampled_from(SPECIAL_CHARS), st.sampled_from("aAiI ")), max_size=20).map("".join)
EVERY_CHAR = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp < 0xE000]
KNOWN_TO_PYTHON = [char for char in EVERY_CHAR if unicodedata.category(char) != "Cn"]


def strips_accents(spec: dict) -> bool:
    """Whether a BertNormalizer of the spec strips accents (by NFD)."""
    if spec["type"] == "Sequence":
        return any(map(strips_accents, spec["normalizers"]))
    return spec["type"] == "BertNormalizer" and (spec["strip_accents"] or (spec["strip_accents"] is None
                                                                          and spec["lowercase"]))


def hf_normalizer(spec: dict):
    return tokenizers.Tokenizer.from_str(json.dumps({
        "version": "1.0", "normalizer": spec, "model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}
    })).normalizer


@pytest.fixture(scope="module")
def normalizers() -> dict:
    """name -> (the reference, its jit twin, HF's normalizer)."""
    pairs = {}
    for name, spec in CONFIGS.items():
        reference = normalizer_from_hf(spec)
        pairs[name] = reference, character_normalizer_of(reference), hf_normalizer(spec)
    return pairs


def jit_normalized(jit, texts: list[str]) -> list[str]:
    encoded = [text.encode("utf-8") for text in texts]
    data = np.frombuffer(b"".join(encoded), np.uint8)
    out, out_ends = jit.normalize_utf8(data, np.cumsum([len(text) for text in encoded], dtype=np.int64))
    joined, starts = out.tobytes(), [0, *out_ends[:-1].tolist()]
    return [joined[start:end].decode("utf-8") for start, end in zip(starts, out_ends.tolist())]


def test_every_character_of_nonzero_combining_class_is_a_mark():
    """What ``_decomposes_to_kept_reordered_marks`` looks among."""
    assert all(unicodedata.category(char).startswith("M") for char in EVERY_CHAR if unicodedata.combining(char))


@pytest.mark.parametrize("name", CONFIGS)
def test_every_code_point_matches_the_reference_and_hf(normalizers, name):
    """Each character between letters, 256 to a text: texts holding a character the table cannot rewrite alone
    are normalized whole by the reference. HF lowercases with newer tables: only the characters Python's
    database knows are compared with HF (the reference is HF's on the others where it does not lowercase:
    tests/test_hf_families.py)."""
    reference, jit, hf = normalizers[name]
    texts = ["".join(f"a{char}b|" for char in EVERY_CHAR[i : i + 256]) for i in range(0, len(EVERY_CHAR), 256)]
    before = jit.whole_texts
    assert jit_normalized(jit, texts) == [reference(text) for text in texts]
    taken_whole = [(jit.rewrites[[ord(char) for char in text]] == WHOLE_TEXT).any() for text in texts]
    assert jit.whole_texts - before == sum(taken_whole)
    assert any(taken_whole) == strips_accents(CONFIGS[name])
    texts = ["".join(f"a{char}b|" for char in KNOWN_TO_PYTHON[i : i + 256])
             for i in range(0, len(KNOWN_TO_PYTHON), 256)]
    assert jit_normalized(jit, texts) == [hf.normalize_str(text) for text in texts]


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(st.one_of(tokenizer_text, special_text), min_size=1, max_size=6),
       name=st.sampled_from(sorted(CONFIGS)))
def test_generated_text_matches_the_reference_and_hf(normalizers, texts, name):
    reference, jit, hf = normalizers[name]
    assert jit_normalized(jit, texts) == [reference(text) for text in texts]
    assert jit_normalized(jit, texts) == [hf.normalize_str(text) for text in texts]


@pytest.mark.parametrize("name", CONFIGS)
def test_corpora_match_hf(normalizers, name):
    _, jit, hf = normalizers[name]
    lines = [line for corpus in ("english_web.txt", "multilingual.txt", "enwik8_head.xml", "python_code.py")
             for line in corpus_text(corpus, 30_000).split("\n")]
    assert jit_normalized(jit, lines) == [hf.normalize_str(line) for line in lines]


def test_texts_where_accents_are_stripped_with_marks_reordered_are_normalized_whole(normalizers):
    """NFD puts U+1D165 (class 216) before U+08D4 (230), strip_accents keeps both: the text's own order is not
    HF's, so character by character would be wrong; such texts, and only they, go to the reference."""
    reference, jit, hf = normalizers["bert-clean_text=True-handle_chinese_chars=True-strip_accents=None-lowercase=True"]
    texts = ["x\u08d4\U0001d165", "plain É", "\U0001d15e\u0301", "\u0301\u0323 ok"]
    assert hf.normalize_str(texts[0]) == "x\U0001d165\u08d4"
    before = jit.whole_texts
    assert jit_normalized(jit, texts) == [hf.normalize_str(text) for text in texts]
    assert jit.whole_texts - before == 2


def test_normalizers_that_do_not_rewrite_each_character_alone_have_no_twin():
    for spec in ({"type": "NFD"}, {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "Lowercase"}]},
                 {"type": "Sequence", "normalizers": [{"type": "StripAccents"}, {"type": "NFKD"}]},
                 {"type": "Sequence", "normalizers": [{"type": "NFKD"}, {"type": "Lowercase"}, {"type": "StripAccents"}]},
                 {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "StripAccents"}]},
                 {"type": "Strip", "strip_left": True, "strip_right": True}, {"type": "Prepend", "prepend": "_"}):
        assert normalizer_from_hf(spec).character_table() is None
        assert character_normalizer_of(normalizer_from_hf(spec)) is None


def test_the_packed_table_is_stored_once_and_read_back(tmp_path, monkeypatch):
    """The first twin of a normalizer writes its packed table to the kernel folder; the next reads it (the same
    arrays, the same text) instead of running the normalizer on every code point; a damaged file is built again and
    a folder that cannot be written keeps none."""
    monkeypatch.setenv("CRAYON_KERNEL_DIR", str(tmp_path))
    reference = normalizer_from_hf(bert())
    built = character_normalizer_of(reference)
    [stored] = tmp_path.glob("characters-*.npz")
    character_normalizer_of(normalizer_from_hf(bert(lowercase=False)))
    assert len(list(tmp_path.glob("characters-*.npz"))) == 2  # another normalizer, another file
    monkeypatch.setattr(type(reference), "character_table", lambda self: pytest.fail("the table was built again"))
    read = character_normalizer_of(reference)
    assert np.array_equal(read.rewrites, built.rewrites) and np.array_equal(read.replacements, built.replacements)
    assert read.growth == built.growth
    texts = ["H\u00e9llo W\u00d6RLD \u4e2d\u6587", "\x00 a\u0301\u0323 \u03a3", ""]
    assert jit_normalized(read, texts) == jit_normalized(built, texts) == [reference(text) for text in texts]
    monkeypatch.undo()
    monkeypatch.setenv("CRAYON_KERNEL_DIR", str(tmp_path))
    stored.write_bytes(b"not a table")
    assert np.array_equal(character_normalizer_of(reference).rewrites, built.rewrites)
    assert np.load(stored)["rewrites"].shape == built.rewrites.shape  # written again, whole
    monkeypatch.setenv("CRAYON_KERNEL_DIR", str(tmp_path / "file"))
    (tmp_path / "file").write_text("a file where the folder should be")
    assert np.array_equal(character_normalizer_of(reference).rewrites, built.rewrites)


@pytest.fixture(scope="module")
def bert_file(tmp_path_factory) -> dict:
    """A BERT tokenizer.json (HF's BertWordPieceTokenizer trained on the corpora), as a dict."""
    folder = tmp_path_factory.mktemp("bert")
    text = corpus_text("big.txt", 100_000) + corpus_text("multilingual.txt", 40_000)
    (folder / "train.txt").write_text("\n".join(line for line in text.splitlines() if line.strip()),
                                      encoding="utf-8")
    trained = tokenizers.BertWordPieceTokenizer(lowercase=True)
    trained.train([str(folder / "train.txt")], vocab_size=3000, show_progress=False)
    trained.save(str(folder / "bert.json"))
    return json.loads((folder / "bert.json").read_text())


@pytest.mark.parametrize("spec", BERT_CONFIGS, ids=lambda spec: "-".join(map(str, list(spec.values())[1:])))
def test_bert_files_run_the_jit_normalizer_with_hf_ids(bert_file, tmp_path, spec):
    path = tmp_path / "bert.json"
    path.write_text(json.dumps({**bert_file, "normalizer": spec}), encoding="utf-8")
    hf = tokenizers.Tokenizer.from_file(str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = crayon.load(path, backend="jit")
    assert ours.engine.character_normalizer is not None
    lines = [line for corpus in ("english_web.txt", "multilingual.txt", "enwik8_head.xml", "python_code.py")
             for line in corpus_text(corpus, 20_000).split("\n")]
    lines += ["x\u08d4\U0001d165 \u0130STANBUL \u03a3\u039f\u03a3 \u4e2d\u6587\r\n\x00\ufffd\u200b", ""]
    assert ours.encode_batch(lines, num_threads=1) == [
        encoding.ids for encoding in hf.encode_batch(lines, add_special_tokens=False)]

    @settings(max_examples=40, deadline=None)
    @given(texts=st.lists(st.one_of(tokenizer_text, special_text), max_size=4))
    def check(texts):
        assert ours.encode_batch(texts, num_threads=1) == [
            encoding.ids for encoding in hf.encode_batch(texts, add_special_tokens=False)]

    check()

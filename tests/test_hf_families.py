"""BERT, T5, ALBERT and XLNet tokenizer.json files: their normalizers (BertNormalizer, SentencePiece's Precompiled
character map) against HF tokenizers on every code point, corpora and hypothesis text, and whole files (built
here from models trained in seconds, converted by transformers' converters) loading with HF's ids."""

import json
import unicodedata
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import corpus_text
from hypothesis import example, given, settings
from hypothesis import strategies as st
from strategies import tokenizer_text

import crayon
from crayon.errors import FormatError
from crayon.formats.hf_io import spec_from_hf
from crayon.formats.hf_normalize import BertNormalizer, normalizer_from_hf
from crayon.formats.sentencepiece import read_sentencepiece
from crayon.jit.whitespace_normalizer import normalize_utf8

tokenizers = pytest.importorskip("tokenizers")
spm = pytest.importorskip("sentencepiece")
from tokenizers import normalizers as hf_normalizers  # noqa: E402

BERT_OPTIONS = [
    {},
    {"lowercase": False},
    {"lowercase": False, "strip_accents": True},
    {"clean_text": False, "handle_chinese_chars": False, "strip_accents": False},
]
EVERY_CHAR = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp < 0xE000]
# HF lowercases with newer Unicode tables than Python's: characters Python does not know yet stay as they are.
KNOWN_TO_PYTHON = [char for char in EVERY_CHAR if unicodedata.category(char) != "Cn"]
ASSIGNED = [char for char in KNOWN_TO_PYTHON if unicodedata.category(char) != "Co"]


def sample_text() -> str:
    return (corpus_text("multilingual.txt", 120_000) + corpus_text("english_web.txt", 60_000)
            + corpus_text("enwik8_head.xml", 30_000) + corpus_text("python_code.py", 20_000))


@pytest.mark.parametrize("options", [BERT_OPTIONS[0], BERT_OPTIONS[2]], ids=["uncased", "cased-strip"])
def test_bert_normalizer_matches_hf_on_every_code_point(options):
    ours, hf = BertNormalizer(**options), hf_normalizers.BertNormalizer(**options)
    chars = KNOWN_TO_PYTHON if options.get("lowercase", True) else EVERY_CHAR
    text = "".join(f"a{char}b|" for char in chars)  # each character normalizes on its own between "a" and "b"
    assert ours(text) == hf.normalize_str(text)


@pytest.mark.parametrize("options", BERT_OPTIONS, ids=str)
def test_bert_normalizer_matches_hf_on_corpora(options):
    text = sample_text()
    assert BertNormalizer(**options)(text) == hf_normalizers.BertNormalizer(**options).normalize_str(text)


@settings(max_examples=150, deadline=None)
@given(text=tokenizer_text, options=st.sampled_from(BERT_OPTIONS))
def test_bert_normalizer_matches_hf_on_generated_text(text, options):
    assert BertNormalizer(**options)(text) == hf_normalizers.BertNormalizer(**options).normalize_str(text)


def training_lines() -> list[str]:
    text = corpus_text("big.txt", 150_000) + corpus_text("multilingual.txt", 40_000)
    return [line for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def training_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("families") / "train.txt"
    path.write_text("\n".join(training_lines()), encoding="utf-8")
    return path


def train_sentencepiece(training_file, rule: str, **options) -> str:
    prefix = str(training_file.parent / f"{rule}-{'-'.join(map(str, options.values()))}")
    spm.SentencePieceTrainer.train(input=str(training_file), model_prefix=prefix, vocab_size=3000,
                                   normalization_rule_name=rule, character_coverage=0.995, minloglevel=2, **options)
    return prefix + ".model"


@pytest.fixture(scope="module", params=["nmt_nfkc", "nfkc_cf"])
def charsmap(request, training_file) -> bytes:
    """The precompiled character map of a SentencePiece model trained with one of its normalization rules."""
    return read_sentencepiece(train_sentencepiece(training_file, request.param)).precompiled_charsmap


def precompiled_pair(charsmap: bytes):
    spec = {"type": "Precompiled", "precompiled_charsmap": __import__("base64").b64encode(charsmap).decode()}
    return normalizer_from_hf(spec), hf_normalizers.Precompiled(charsmap)


def test_precompiled_matches_hf_on_every_assigned_code_point(charsmap):
    """Each assigned character (private use aside) alone, after a letter, before combining marks and after a CR:
    one text, since a line feed always ends an extended grapheme cluster."""
    ours, hf = precompiled_pair(charsmap)
    text = "".join(f"{char}\na{char}\u0301\n{char}\u0302\u0301\u0323\n\r{char}\n" for char in ASSIGNED)
    assert ours(text) == hf.normalize_str(text)


def test_precompiled_matches_hf_on_corpora(charsmap):
    ours, hf = precompiled_pair(charsmap)
    text = sample_text() + "\r\n\u0000x\ufb01\uff21\u0301 A\u030a\u0301 \u1100\u1161\u11a8 \U0001F468\u200d\U0001F469"
    assert ours(text) == hf.normalize_str(text)


@settings(max_examples=200, deadline=None)
@given(text=tokenizer_text)
def test_precompiled_matches_hf_on_generated_text(charsmap, text):
    ours, hf = precompiled_pair(charsmap)
    assert ours(text) == hf.normalize_str(text)


# clusters of every kind beside characters that are clusters of their own (Hangul syllables among them), keys among
# both; runs of clusters without a key (Devanagari, Arabic with its marks, Thai) beside runs with one (a Thai key,
# Hangul jamo)
CLUSTER_CHARS = st.sampled_from(list("a \t\n\r\x01\x00\u0301\u0302\u200d\U0001F468\U0001F1FA\U0001F1F8\u1100\u1161"
                                     "\u11a8\uac00\uac01\uff21\ufb01\u0915\u094d\u0937\u0e01\u0e48\u2581\u00e9"
                                     "\u0628\u064e\u0651\u0e33\u0e4d\u0f73"))


@settings(max_examples=300, deadline=None)
@given(text=st.lists(CLUSTER_CHARS, max_size=30).map("".join))
def test_precompiled_matches_hf_where_clusters_meet(charsmap, text):
    ours, hf = precompiled_pair(charsmap)
    assert ours(text) == hf.normalize_str(text)


def test_precompiled_cuts_a_cluster_before_a_consonant_after_a_virama_that_follows_no_consonant(charsmap):
    """The regex module's \\X joins U+0915 to the virama before it whatever precedes; UAX #29 (and HF) only after a
    consonant: the no-break space and the virama are a cluster of 5 bytes, so the virama goes with its rule."""
    ours, hf = precompiled_pair(charsmap)
    for text in ("\u00a0\u094d\u0915", "x\u00a0\u094d\u0937\u093f", "\u0915\u094d\u0937 \u00a0\u094d\u094d\u0915"):
        assert ours(text) == hf.normalize_str(text)


def test_a_damaged_charsmap_is_refused():
    for spec in ({"type": "Precompiled", "precompiled_charsmap": "not base64!"},
                 {"type": "Precompiled", "precompiled_charsmap": "AAAA"}):
        with pytest.raises(FormatError, match="precompiled_charsmap"):
            normalizer_from_hf(spec)


# --- whole tokenizer.json files -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def family_files(training_file):
    """name -> tokenizer.json path: BERT (cased, uncased) trained by HF tokenizers, and T5, ALBERT and XLNet
    converted by transformers from a SentencePiece unigram model with the default nmt_nfkc rule."""
    transformers = pytest.importorskip("transformers")
    from transformers.convert_slow_tokenizer import convert_slow_tokenizer

    folder = training_file.parent
    files = {}
    for name, lowercase in (("bert-uncased", True), ("bert-cased", False)):
        bert = tokenizers.BertWordPieceTokenizer(lowercase=lowercase)
        bert.train([str(training_file)], vocab_size=3000, show_progress=False)
        files[name] = folder / f"{name}.json"
        bert.save(str(files[name]))
    model = train_sentencepiece(training_file, "nmt_nfkc")
    for name in ("T5Tokenizer", "AlbertTokenizer", "XLNetTokenizer"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            slow = getattr(transformers, name)(vocab_file=model)
            files[name] = folder / f"{name}.json"
            convert_slow_tokenizer(slow).save(str(files[name]))
    return files


FAMILIES = ["bert-uncased", "bert-cased", "T5Tokenizer", "AlbertTokenizer", "XLNetTokenizer"]


def load_quietly(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "runs this pre-tokenizer in Python"
        return crayon.load(path)


@pytest.mark.parametrize("name", FAMILIES)
def test_family_file_loads_with_hf_ids_on_corpora(family_files, name):
    ours, hf = load_quietly(family_files[name]), tokenizers.Tokenizer.from_file(str(family_files[name]))
    normalizer = json.loads(family_files[name].read_text())["normalizer"]
    assert "BertNormalizer" in str(normalizer) or "Precompiled" in str(normalizer)
    text = sample_text()
    assert ours.encode(text, allowed_special="all") == hf.encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("name", FAMILIES)
def test_family_file_loads_with_hf_ids_on_generated_text(family_files, name):
    ours, hf = load_quietly(family_files[name]), tokenizers.Tokenizer.from_file(str(family_files[name]))

    @settings(max_examples=60, deadline=None)
    @given(text=tokenizer_text)
    def check(text):
        assert ours.encode(text, allowed_special="all") == hf.encode(text, add_special_tokens=False).ids

    check()


# --- cartridges ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sentencepiece_bpe_file(training_file):
    """A BPE over characters with Metaspace (HF's SentencePieceBPETokenizer, as Llama 2 without byte fallback)."""
    bpe = tokenizers.SentencePieceBPETokenizer()
    bpe.train([str(training_file)], vocab_size=3000, show_progress=False, special_tokens=["<unk>"])
    path = training_file.parent / "spbpe.json"
    bpe.save(str(path))
    return path


@pytest.mark.parametrize("name", ["bert-uncased", "T5Tokenizer", "AlbertTokenizer", "sentencepiece-bpe"])
def test_family_saved_as_cartridge_gives_the_same_ids(family_files, sentencepiece_bpe_file, name, tmp_path):
    path = sentencepiece_bpe_file if name == "sentencepiece-bpe" else family_files[name]
    tokenizer = load_quietly(path)
    saved = tokenizer.save(tmp_path / "family.crayon")
    reopened = load_quietly(saved)
    assert type(reopened.model) is type(tokenizer.model)
    text = sample_text()[:120_000] + "\u00e9\u0301 \uff21 \u4e2d\u6587 x" * 3
    ids = tokenizer.encode(text, allowed_special="all")
    assert reopened.encode(text, allowed_special="all") == ids
    assert ids == tokenizers.Tokenizer.from_file(str(path)).encode(text, add_special_tokens=False).ids
    assert reopened.decode(ids) == tokenizer.decode(ids)
    assert reopened.template == tokenizer.template and reopened.special_tokens == tokenizer.special_tokens


def test_tokenizer_json_is_compiled_once_and_reopened_from_the_cache(family_files, tmp_path, monkeypatch):
    monkeypatch.setenv("CRAYON_PROFILE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "T5.json"
    source.write_bytes(family_files["T5Tokenizer"].read_bytes())
    first = load_quietly(source)
    cached = list((tmp_path / "cache").glob("*.crayon"))
    assert len(cached) == 1
    compiled_at = cached[0].stat().st_mtime_ns
    again = load_quietly(source)
    assert cached[0].stat().st_mtime_ns == compiled_at  # reopened, not compiled again
    text = sample_text()[:50_000]
    assert again.encode(text) == first.encode(text)
    assert again.template == first.template and again.special_tokens == first.special_tokens
    hf = tokenizers.Tokenizer.from_file(str(source))  # the post-processor and decoder survive the cache
    framed = again.encode(text[:2000], add_special_tokens=True)
    assert framed == first.encode(text[:2000], add_special_tokens=True) == hf.encode(text[:2000]).ids
    assert again.decode(framed) == first.decode(framed) == hf.decode(framed, skip_special_tokens=False)
    config = json.loads(source.read_text())
    config["added_tokens"] = config["added_tokens"][:1]  # an edited file is compiled again
    source.write_text(json.dumps(config))
    edited = load_quietly(source)
    assert edited.special_tokens != first.special_tokens
    assert edited.encode(text) == tokenizers.Tokenizer.from_file(str(source)).encode(text, add_special_tokens=False).ids
    recompiled_at = cached[0].stat().st_mtime_ns
    load_quietly(source)
    assert cached[0].stat().st_mtime_ns == recompiled_at
    monkeypatch.setattr("crayon.loading.__version__", "99.0")  # another Crayon reads the file anew
    load_quietly(source)
    assert cached[0].stat().st_mtime_ns != recompiled_at


# --- BertPreTokenizer compiled ------------------------------------------------------------------------------

# white space of every kind, Unicode punctuation, CJK, combining marks, control characters
BERT_SPLIT_CHARS = st.sampled_from(list(" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2007\u200b\u2028\u2029"
                                        "\u202f\u205f\u3000\ufeff.,!?\"'#$%&()*+-/:;<=>@[\\]^_`{|}~\u00a1\u00bf\u00b7"
                                        "\u2018\u2019\u201c\u201d\u2014\u2026\u3001\u3002\u300c\u300d\uff01\uff0c"
                                        "\u066a\u0964\u05be\u00a7\u00b6\u2e43\u1b4e\U00011b00\u00e9\u0301\u4e2d\u6587"
                                        "\uac00\u0915\u093f\U0001f600a1Z"))
bert_text = st.one_of(tokenizer_text, st.lists(BERT_SPLIT_CHARS, max_size=40).map("".join))


def compiled_bert_pieces(text: str) -> list[str]:
    from crayon.formats.hf_pretokenize import BertPreTokenizer
    from crayon.jit.regex_vm import compiled_splits_of

    data, ends = compiled_splits_of(BertPreTokenizer())(text.encode("utf-8"))
    joined, starts = data.tobytes(), [0, *ends.tolist()]
    return [joined[start:end].decode("utf-8") for start, end in zip(starts, starts[1:])]


def test_bert_pretokenizer_compiled_matches_hf_on_every_code_point():
    text = "".join("a" + char for char in EVERY_CHAR)  # each character between letters: split, isolated or kept
    hf = tokenizers.pre_tokenizers.BertPreTokenizer()
    assert compiled_bert_pieces(text) == [piece for piece, _ in hf.pre_tokenize_str(text)]


@settings(max_examples=300, deadline=None)
@given(text=bert_text)
def test_bert_pretokenizer_compiled_matches_hf_on_generated_text(text):
    hf = tokenizers.pre_tokenizers.BertPreTokenizer()
    assert compiled_bert_pieces(text) == [piece for piece, _ in hf.pre_tokenize_str(text)]


@pytest.mark.parametrize("name", ["bert-uncased", "bert-cased"])
def test_bert_family_runs_compiled_with_hf_ids(family_files, name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "the jit engine runs this pre-tokenizer in Python" would raise
        ours = crayon.load(family_files[name], backend="jit")
        assert ours.engine.compiled_splits is not None
        hf = tokenizers.Tokenizer.from_file(str(family_files[name]))
        text = sample_text()
        assert ours.encode(text, allowed_special="all") == hf.encode(text, add_special_tokens=False).ids

        @settings(max_examples=150, deadline=None)
        @given(text=bert_text)
        def check(text):
            assert ours.encode(text, allowed_special="all") == hf.encode(text, add_special_tokens=False).ids

        check()


# --- Metaspace compiled; SentencePiece-style BPE (Llama 2, Mistral) a word at a time ----------------------------

METASPACE_OPTIONS = [(replacement, scheme, split) for replacement in ("\u2581", "_", "\U0001f600")
                     for scheme in ("always", "first", "never") for split in (True, False)]
SPACEY = st.sampled_from(list(" \u2581_\U0001f600a\u00e9\u4e2d\t\n") + ["  ", "\u2581 ", " \u2581"])
metaspace_text = st.one_of(tokenizer_text, st.lists(SPACEY, max_size=16).map("".join))


@settings(max_examples=300, deadline=None)
@given(text=metaspace_text, options=st.sampled_from(METASPACE_OPTIONS))
def test_metaspace_reference_matches_hf(text, options):
    from crayon.formats.hf_pretokenize import Metaspace

    replacement, scheme, split = options
    hf = tokenizers.pre_tokenizers.Metaspace(replacement=replacement, prepend_scheme=scheme, split=split)
    assert Metaspace(replacement, scheme, split)([text]) == [piece for piece, _ in hf.pre_tokenize_str(text)]


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(st.tuples(metaspace_text, st.booleans()), max_size=6), options=st.sampled_from(METASPACE_OPTIONS))
def test_metaspace_jit_matches_the_reference(pieces, options):
    """Several pieces at once, some not kept (copied as they are, as a split before it leaves them)."""
    import numpy as np

    from crayon.jit.whitespace_normalizer import metaspace_pieces
    from crayon.reference.pretokenize import metaspace_split

    replacement, scheme, split = options
    encoded = [text.encode("utf-8") for text, _ in pieces]
    ends = np.cumsum([len(piece) for piece in encoded], dtype=np.int64)
    kept = np.array([keep for _, keep in pieces], np.uint8)
    data, out_ends, out_kept, mapped = metaspace_pieces(np.frombuffer(b"".join(encoded), np.uint8), ends, kept,
                                                        replacement, scheme != "never", split)
    starts = [0, *out_ends.tolist()]
    got = [(data[start:end].tobytes().decode("utf-8"), bool(keep)) for start, end, keep in zip(starts, starts[1:], out_kept)]
    expected = []
    for text, keep in pieces:
        expected += [(piece, True) for piece in metaspace_split(text, replacement, scheme != "never", split)] if keep else [(text, False)]
    assert [(piece, keep) for piece, keep in got if piece or not keep] == [(p, k) for p, k in expected if p or not k]
    mapped_starts = [0, *mapped.tolist()]  # each input piece's output is data[mapped[i - 1]:mapped[i]]
    assert [data[start:end].tobytes().decode("utf-8") for start, end in zip(mapped_starts, mapped_starts[1:])] == [
        "".join(metaspace_split(text, replacement, scheme != "never", split)) if keep else text for text, keep in pieces]


@pytest.fixture(scope="module")
def sentencepiece_bpe_files(training_file):
    """Llama 2 and Mistral-style tokenizer.json files of a SentencePiece BPE model with byte fallback: Llama 2
    spells the ▁s with a normalizer (Prepend, Replace) and has no pre-tokenizer; Mistral has Metaspace
    "first" without splitting (built as ``bench.families`` builds them)."""
    from bench.families import llama_style_files

    model = train_sentencepiece(training_file, "identity", model_type="bpe", byte_fallback=True)
    return llama_style_files(Path(model), training_file.parent)


def check_compiled_family(path, texts):
    """Loaded without the Python pre-tokenizer warning; HF's ids text by text and as a batch."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = crayon.load(path, backend="jit")
    assert ours.engine.compiled_splits is not None
    hf = tokenizers.Tokenizer.from_file(str(path))
    for text in texts:
        assert ours.encode(text, allowed_special="all") == hf.encode(text, add_special_tokens=False).ids
    assert ours.encode_batch(texts, allowed_special="all") == [
        encoding.ids for encoding in hf.encode_batch(texts, add_special_tokens=False)]
    return ours


BATCH_EDGES = ["", " ", "  a  ", "\u2581", "\u2581\u2581x", "x \u2581 y", "", "end "]


@pytest.mark.parametrize("name", ["T5Tokenizer", "AlbertTokenizer", "XLNetTokenizer"])
def test_metaspace_families_run_compiled_with_hf_ids(family_files, name):
    """The normalizer's steps from Precompiled on run on bytes (``crayon.jit.precompiled_normalizer``)."""
    lines = [line for line in sample_text().splitlines() if line][:3000]
    edges = [*BATCH_EDGES, "e\u0301\ufb01\u0301 \r\n\u1100\u1161\u11a8 \U0001F1FA\U0001F1F8 \u0915\u094d\u0937  "]
    ours = check_compiled_family(family_files[name], [sample_text()[:60_000], *edges, *lines])
    assert ours.engine.precompiled_normalizer is not None


@pytest.mark.parametrize("name", ["llama2", "mistral"])
def test_sentencepiece_bpe_files_run_word_by_word_with_hf_ids(sentencepiece_bpe_files, name):
    lines = [line for line in sample_text().splitlines() if line][:3000]
    ours = check_compiled_family(sentencepiece_bpe_files[name], [sample_text()[:60_000], *BATCH_EDGES, *lines])
    assert ours.model.merges_never_cross("\u2581")  # so the kernel encodes a word at a time
    hf = tokenizers.Tokenizer.from_file(str(sentencepiece_bpe_files[name]))

    @settings(max_examples=150, deadline=None)
    @given(text=metaspace_text)
    def check(text):
        assert ours.encode(text) == hf.encode(text, add_special_tokens=False).ids

    check()


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(metaspace_text, max_size=6))
@example(texts=["", " ", "\u2581 a", " a  b ", "\t x\n"])
def test_llama2_normalizer_runs_as_sentencepiece_whitespace_rules(texts):
    """Llama 2's Prepend + Replace is applied by the jit SentencePiece normalizer, with HF's text."""
    spec = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
    options = normalizer_from_hf(spec).whitespace_options
    assert options is not None
    hf = tokenizers.Tokenizer.from_str(json.dumps({
        "version": "1.0", "normalizer": spec, "model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}
    })).normalizer
    encoded = [text.encode("utf-8") for text in texts]
    data = np.frombuffer(b"".join(encoded), np.uint8)
    normalized, ends = normalize_utf8(data, np.cumsum([len(text) for text in encoded], dtype=np.int64), **options)
    starts = [0, *ends.tolist()]
    assert [normalized[a:b].tobytes().decode("utf-8") for a, b in zip(starts, starts[1:])] == [
        hf.normalize_str(text) for text in texts]
    reordered = {"type": "Sequence", "normalizers": spec["normalizers"][::-1]}
    assert normalizer_from_hf(reordered).whitespace_options is None


def test_merges_that_cross_a_space_keep_the_whole_span():
    """A merge onto a piece that starts with ▁ ("a" + "▁b"): spans are not cut, the ids stay HF's."""
    from tokenizers import models

    vocab = {token: i for i, token in enumerate(["<unk>", "a", "b", "\u2581", "\u2581b", "a\u2581b", "c"])}
    merges = [("\u2581", "b"), ("a", "\u2581b")]
    hf = tokenizers.Tokenizer(models.BPE(vocab, merges, unk_token="<unk>"))
    hf.normalizer = hf_normalizers.Replace(" ", "\u2581")
    ours = crayon.Tokenizer.from_spec(spec_from_hf(json.loads(hf.to_str())), backend="jit")
    assert not ours.model.merges_never_cross("\u2581")
    for text in ("a b", "a bc a b", "ca b b"):
        assert ours.encode(text) == hf.encode(text, add_special_tokens=False).ids


BATCH_NORMALIZER_SPECS = [
    {"type": "NFKD"}, {"type": "NFC"}, {"type": "Lowercase"}, {"type": "StripAccents"}, {"type": "Nmt"},
    {"type": "Strip", "strip_left": False, "strip_right": True},
    {"type": "Replace", "pattern": {"String": "``"}, "content": "\""},
    {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": "\u2581"},
    {"type": "Replace", "pattern": {"Regex": "a*"}, "content": "\\1"},
    {"type": "Replace", "pattern": {"Regex": "[^a]a"}, "content": "<\\0>"},  # matches a separator
    {"type": "Replace", "pattern": {"Regex": "^a|a$|a(?=\u0301)"}, "content": "A"},  # anchors, a lookahead
    {"type": "Prepend", "prepend": "\u2581"},
]


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(st.one_of(tokenizer_text, st.lists(st.sampled_from(["\x00", "\ufdd0", "  ", "\u03a3", "``", "a", "\u0301", "\u4e2d", "\t"]),
                                                        max_size=6).map("".join)), max_size=8))
def test_normalize_batch_gives_each_texts_hf_normalization(family_files, texts):
    """Joined at NUL where the normalizer allows it, text by text where a text holds a NUL or it does not."""
    specs = BATCH_NORMALIZER_SPECS + [json.loads(family_files[name].read_text())["normalizer"]
                                      for name in ("T5Tokenizer", "AlbertTokenizer", "bert-uncased", "bert-cased")]
    for spec in specs:
        hf = tokenizers.Tokenizer.from_str(json.dumps({
            "version": "1.0", "normalizer": spec, "model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}
        })).normalizer
        assert normalizer_from_hf(spec).normalize_batch(texts) == [hf.normalize_str(text) for text in texts], spec


@pytest.mark.parametrize("name", ["bert-uncased", "T5Tokenizer", "sentencepiece-bpe"])
def test_cartridge_reopens_with_its_stored_dat(family_files, sentencepiece_bpe_file, name, tmp_path, monkeypatch):
    """WordPiece, Unigram and character-BPE cartridges store their DATs: reopening builds none."""
    import crayon.reference.char_bpe
    import crayon.reference.unigram
    import crayon.reference.wordpiece

    path = sentencepiece_bpe_file if name == "sentencepiece-bpe" else family_files[name]
    tokenizer = load_quietly(path)
    saved = tokenizer.save(tmp_path / "family.crayon")
    text = sample_text()[:20_000]
    expected = tokenizer.encode(text, allowed_special="all")

    def no_build(*args, **kwargs):
        raise AssertionError("a DAT was built again")

    for module in (crayon.reference.char_bpe, crayon.reference.unigram, crayon.reference.wordpiece):
        monkeypatch.setattr(module, "compile_dat", no_build)
    assert load_quietly(saved).encode(text, allowed_special="all") == expected


# --- offsets ------------------------------------------------------------------------------------------------

# accents, combining marks, CJK, emoji, control characters, whitespace runs, compatibility forms, special tokens
OFFSET_CHARS = st.sampled_from(list("aZ \t\n\r\x00\x01\x7f\u0085\u00a0\u3000\u200b\u00e9\u0301\u0323\u0302\u00c5\u212b"
                                    "\u1ea1\u4e2d\u6587\uac00\u1100\u1161\u11a8\ufb01\uff21\u2460\u00bd\U0001f600"
                                    "\U0001f468\u200d\u0130\u03a3\u2581.,'") + ["[MASK]", "<unk>", "</s>", "<s>", "  "])
offset_text = st.one_of(tokenizer_text, st.lists(OFFSET_CHARS, max_size=24).map("".join))


def check_offsets(ours, hf, text, pair=None, add_special_tokens=False):
    expected = hf.encode(text, pair, add_special_tokens=add_special_tokens)
    got = ours.encode_with_offsets(text, allowed_special="all", pair=pair, add_special_tokens=add_special_tokens)
    assert got == (expected.ids, expected.offsets)


@pytest.mark.parametrize("name", FAMILIES + ["llama2", "mistral"])
def test_family_file_offsets_match_hf(family_files, sentencepiece_bpe_files, name):
    """BertNormalizer + WordPiece, Precompiled + Metaspace + Unigram (T5, ALBERT, XLNet: NFKC-style maps,
    Replace/Strip sequences), Llama 2 (Prepend, Replace, byte fallback) and Mistral (Metaspace "first")."""
    path = {**family_files, **sentencepiece_bpe_files}[name]
    ours, hf = load_quietly(path), tokenizers.Tokenizer.from_file(str(path))
    text = sample_text()[:6000] + corpus_text("multilingual.txt", 3000)
    check_offsets(ours, hf, text, add_special_tokens=True)
    check_offsets(ours, hf, text[:400], text[-400:], add_special_tokens=True)

    @settings(max_examples=80, deadline=None)
    @given(text=offset_text, pair=st.none() | offset_text, add_special_tokens=st.booleans())
    def check(text, pair, add_special_tokens):
        check_offsets(ours, hf, text, pair, add_special_tokens)

    check()


def check_alignments(ours, hf_normalizer, text):
    """Each normalized character's original span, as HF aligns it (a one-character pre-tokenizer makes every
    normalized character a token of its own)."""
    from crayon.reference.alignments import AlignedText

    hf = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    hf.normalizer = hf_normalizer
    hf.pre_tokenizer = tokenizers.pre_tokenizers.Split(tokenizers.Regex("(?m)."), "isolated")
    aligned = ours.align(AlignedText.of(text))
    assert aligned.text == hf_normalizer.normalize_str(text)
    if aligned.text:
        assert aligned.spans == hf.encode(text, add_special_tokens=False).offsets


@settings(max_examples=150, deadline=None)
@given(text=st.one_of(tokenizer_text, st.lists(CLUSTER_CHARS, max_size=30).map("".join)))
def test_precompiled_alignments_match_hf(charsmap, text):
    check_alignments(*precompiled_pair(charsmap), text)


# composition, decomposition, reordering of marks, Hangul, expansions, removals, insertions at the start
ALIGNMENT_CHARS = st.sampled_from(list("aA b\u03a3\u0130\u0301\u0323\u0302e\u00e9\u1ea1\u1ead\uac00\u1100\u1161\u11a8\ufb01"
                                       "\uff21\u2126\u0344\u0f73\u4e2d\x00\x01\t\n\u3000\u200b`\u01c5\U0001f600\u0345"
                                       "\u05b0\u0591\ufdfa\u1e9b\u0307\u2581\u00df\ufffd"))
alignment_text = st.one_of(tokenizer_text, st.lists(ALIGNMENT_CHARS, max_size=16).map("".join))
ALIGNMENT_SPECS = BATCH_NORMALIZER_SPECS + [
    {"type": "NFD"}, {"type": "NFKC"}, {"type": "Prepend", "prepend": "\u2581\u2581"},
    {"type": "Strip", "strip_left": True, "strip_right": True},
    {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
    *({"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": None,
       "lowercase": True, **options} for options in BERT_OPTIONS),
    {"type": "ByteLevel"},
]


@settings(max_examples=100, deadline=None)
@given(text=alignment_text)
def test_normalizer_alignments_match_hf(text):
    for spec in ALIGNMENT_SPECS:
        hf = tokenizers.Tokenizer.from_str(json.dumps({
            "version": "1.0", "normalizer": spec, "model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}
        })).normalizer
        check_alignments(normalizer_from_hf(spec), hf, text)


# --- Metaspace prepend_scheme "first" behind a normalizer -------------------------------------------------------

FIRST_EDGES = ["hello world", "\u0301abc def", "``quote'' x", "''x", "\x00x y", "\x01\u0301a", "\u3000x", "\ufeffx",
               " hello", "  hello  there", "\u200bhello", "\u2581x", "ﬁne", "Ünïcödé", "Σ", "", " ", "\u0301",
               "<extra_id_0>hello", "hi<extra_id_1> there", "\u0301<extra_id_0> x", "\u4e2d\u6587 x", "\t\tx"]
FIRST_TEXT = st.one_of(tokenizer_text, st.lists(st.sampled_from(list(" \t\u0301\u200b\x01`'a\u4e2d\u2581\uff41\u00e9")
                                                                  + ["<extra_id_0>", "``"]), max_size=8).map("".join))


@pytest.fixture(scope="module")
def first_files(family_files):
    """T5, ALBERT and XLNet files with Metaspace's prepend_scheme "first" (transformers writes it for
    ``legacy=False``): HF puts the ▁ only where the normalized text still starts at the input's first character."""
    files = {}
    for name in ("T5Tokenizer", "AlbertTokenizer", "XLNetTokenizer"):
        config = json.loads(family_files[name].read_text())
        config["pre_tokenizer"]["prepend_scheme"] = "first"
        files[name] = family_files[name].with_name(f"{name}-first.json")
        files[name].write_text(json.dumps(config))
    return files


@pytest.mark.parametrize("name", ["T5Tokenizer", "AlbertTokenizer", "XLNetTokenizer"])
def test_metaspace_first_behind_a_normalizer_gives_hf_ids(first_files, name):
    """A text whose first characters the normalizer removes (a mark StripAccents drops, leading white space
    Strip drops) or rewrites with a later one (``Replace`` of "``") gets no ▁, as in HF; others get it; after an
    added token none. Text by text, in batches mixing both, and their offsets, on both engines."""
    hf = tokenizers.Tokenizer.from_file(str(first_files[name]))
    lines = [line for line in sample_text().splitlines() if line][:400]
    texts = FIRST_EDGES + lines
    expected = [hf.encode(text, add_special_tokens=False).ids for text in texts]
    for backend in ("reference", "jit"):
        ours = crayon.load(first_files[name], backend=backend)
        assert [ours.encode(text, allowed_special="all") for text in FIRST_EDGES] == expected[:len(FIRST_EDGES)]
        assert ours.encode_batch(texts, allowed_special="all") == expected
        assert ours.encode_batch(lines) == expected[len(FIRST_EDGES):]
    for text in FIRST_EDGES:
        check_offsets(ours, hf, text)
    always = tokenizers.Tokenizer.from_file(str(first_files[name]).replace("-first", ""))
    assert any(always.encode(text, add_special_tokens=False).ids != ids for text, ids in zip(FIRST_EDGES, expected))


@pytest.mark.parametrize("name", ["T5Tokenizer", "AlbertTokenizer"])
def test_metaspace_first_behind_a_normalizer_on_generated_text(first_files, name):
    hf = tokenizers.Tokenizer.from_file(str(first_files[name]))
    loaded = [crayon.load(first_files[name], backend=backend) for backend in ("reference", "jit")]

    @settings(max_examples=100, deadline=None)
    @given(texts=st.lists(FIRST_TEXT, min_size=1, max_size=3))
    def check(texts):
        expected = [hf.encode(text, add_special_tokens=False).ids for text in texts]
        for ours in loaded:
            assert ours.encode_batch(texts, allowed_special="all") == expected
            assert [ours.encode(text, allowed_special="all") for text in texts] == expected

    check()

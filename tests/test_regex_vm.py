"""The regex compiler: its reference matcher and its jit twin against the ``regex`` module on the patterns of real
tokenizers and on every construct it compiles (corpora, hypothesis text, every short tuple of character classes),
its refusals, its Unicode tables, and the jit engine running compiled pre-tokenizers (same ids as the reference
and as HF tokenizers)."""

import functools
import itertools
import json
import warnings
from importlib import resources

import numpy as np
import pytest
import regex
from conftest import CORPUS_FILES, corpus_text, mergeable_ranks
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import FRAGMENTS, tokenizer_text

from crayon.errors import PatternCoverageWarning, UnsupportedComponentError
from crayon.jit.pretokenize import CODE_POINTS, LETTER, NUMBER, WHITESPACE, unicode_tables
from crayon.jit.regex_vm import find_spans
from crayon.patterns import PATTERNS
from crayon.reference.bpe import BytePairModel
from crayon.formats.hf_pretokenize import GPT2_PATTERN, compile_hf_regex
from crayon.reference.regex_vm import (
    BLOCK_SIZE,
    CATEGORIES,
    CATEGORY_MASK,
    SPACE_BIT,
    TABLE_FILE,
    WORD_BIT,
    RegexSplit,
    compile_regex,
    findall,
    unicode_signatures,
)
from crayon.reference.regex_vm import find_spans as reference_find_spans
from crayon.reference.unicode16 import pin_unicode_classes
from crayon.tokenizer import Tokenizer
from tools.gen_unicode_categories import build_tables, installed_regex_is_unicode16, unicode16_signatures

LLAMA3 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)
LLAMA3_GROUPED = f"(?:{LLAMA3})"  # the same regex in a form the hand-written machines do not know: compiled
# Pre-tokenizer regexes of public tokenizers, written out (as in their tokenizer.json / tiktoken files).
TOKENIZER_PATTERNS = {
    "r50k": PATTERNS["r50k_base"],
    "cl100k": PATTERNS["cl100k_base"],
    "o200k": PATTERNS["o200k_base"],
    "gpt2_neox_bytelevel": compile_hf_regex(GPT2_PATTERN).pattern,
    "llama3": LLAMA3,
    "qwen2": LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}"),
    "mistral_tekken": (
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?"
        r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+"
        r"|\s+(?!\S)|\s+"
    ),
    "deepseek_digits": r"\p{N}{1,3}",
    "deepseek_cjk": r"[一-龥\u3040-ゟ゠-ヿ]+",
    "deepseek_words": (
        r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"""
        r"""| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
    ),
    "starcoder_digits": r"\p{N}",
    "hf_whitespace": r"\w+|[^\w\s]+",
}
# One pattern per construct the compiler handles.
CONSTRUCT_PATTERNS = [
    r"a+?b|.", r"\d{2,4}?|\D", r"(?:ab|a)+c|.", r"(?>a+)b|.", r"a*+a|.", r"(?:xy){2}|.", r"x{,2}y|.",
    r"(?=ab)a|.", r"b(?!c)|.", r"\s+(?=\S)|\S+", r"(?i:straße|ǅ|k)|.", r"(?i)[a-c]+|.", r"[^\W\d]+|\W",
    r"\p{Lu}\p{Ll}+|\P{Lu}", r"[\u4e00-\u9fff]+|.", r".$|.", r"a$|.", r"\n\Z|.",
    r"\x41|\u00e9|\U0001F600|\N{SNOWMAN}|.", r"[\]\-^]+|.", r"[-a]+|[a-]|.", r"(?P<word>\w+)|.",
    r"(a|ab)(c|bcd)|.", r"(?:a|b)*?c|.", r"[\s\S]", r"(?s:.)", r"\.+|[^.]",
    # one character each, made one set by the compiler (unions, lookahead differences and intersections)
    r"(?:[a-c]|(?![\x00-\x7f])\p{L})+|.", r"(?:(?=[a-m])\p{Ll})+|.", r"(?:x|y|[0-9]|é)+?b|.",
    r"(?:(?!\s)\S|\n){1,3}|.", r"(?i:k|ß)+|\s+(?!\S)|\s+",
]


def byte_ends(text: str, slices) -> np.ndarray:
    return np.cumsum([len(text[start:end].encode("utf-8")) for start, end, _ in slices], dtype=np.int64)


def regex_slices(pattern: str, text: str, flags: int = 0) -> list[tuple[int, int, bool]]:
    """The oracle: regex.finditer's matches and the gaps between them, the pattern pinned to Unicode 16."""
    slices, previous = [], 0
    for match in regex.finditer(pin_unicode_classes(pattern), text, flags):
        if match.start() > previous:
            slices.append((previous, match.start(), False))
        slices.append((match.start(), match.end(), True))
        previous = match.end()
    if previous < len(text):
        slices.append((previous, len(text), False))
    return slices


def code_point_classes(program) -> np.ndarray:
    """The class of every code point under a compiled program."""
    code_points = np.arange(CODE_POINTS)
    return program.block_classes[(program.block_index[code_points >> 7].astype(np.int64) << 7) | (code_points & 127)]


def assert_matches_regex(pattern: str, text: str, multiline: bool = False, reference: bool = True) -> None:
    """The jit matcher (and the reference matcher, unless ``reference`` is False) give regex's slices."""
    program = compile_regex(pattern, multiline=multiline)
    expected = regex_slices(pattern, text, regex.MULTILINE if multiline else 0)
    if reference:
        assert reference_find_spans(program, text) == expected, (pattern, text)
    ends, is_match = find_spans(np.frombuffer(text.encode("utf-8"), np.uint8), program)
    assert np.array_equal(ends, byte_ends(text, expected)), (pattern, text)
    assert is_match.tolist() == [int(flag) for _, _, flag in expected], (pattern, text)


def test_shipped_tables_match_the_generator():
    """Categories and \\s always match Crayon's Unicode 16 ranges; \\w and case folding are compared with the
    generator where the installed regex is Unicode 16 (it is their only source)."""
    with resources.files("crayon").joinpath("data", TABLE_FILE).open("rb") as file, np.load(file) as shipped:
        tables = {name: shipped[name] for name in shipped.files}
    per_code_point = tables["block_signatures"].reshape(-1, BLOCK_SIZE)[tables["block_index"]].reshape(-1)
    assert np.array_equal(per_code_point & ~np.uint8(WORD_BIT), unicode16_signatures())
    if not installed_regex_is_unicode16():
        pytest.skip(f"regex {regex.__version__} is not Unicode 16: \\w and case folds are checked with one that is")
    for name, array in build_tables().items():
        assert np.array_equal(tables[name], array), name


def test_signatures_agree_with_the_hand_written_pre_tokenizer_tables():
    """Both tables are Unicode 16: letters, numbers and \\s fall where the jit pre-tokenizers' classes say."""
    block_index, block_classes, class_properties = unicode_tables()
    code_points = np.arange(CODE_POINTS)
    classes = block_classes[(block_index[code_points >> 7].astype(np.int64) << 7) | (code_points & 127)]
    properties = class_properties[classes]
    signatures = unicode_signatures()
    category = np.array(CATEGORIES)[signatures & CATEGORY_MASK]
    assert np.array_equal(np.char.startswith(category, "L"), (properties & LETTER) != 0)
    assert np.array_equal(np.char.startswith(category, "N"), (properties & NUMBER) != 0)
    assert np.array_equal((signatures & SPACE_BIT) != 0, (properties & WHITESPACE) != 0)


@pytest.mark.parametrize("name", sorted(TOKENIZER_PATTERNS))
@pytest.mark.parametrize("corpus", CORPUS_FILES)
def test_tokenizer_patterns_match_regex_on_corpora(name, corpus):
    text = corpus_text(corpus, 5_000)
    pattern = TOKENIZER_PATTERNS[name]
    assert findall(compile_regex(pattern), text) == regex.findall(pattern, text)
    assert_matches_regex(pattern, corpus_text(corpus, 200_000)[-100_000:], reference=False)


@pytest.mark.parametrize("name", sorted(TOKENIZER_PATTERNS))
@settings(max_examples=60, deadline=None)
@given(text=tokenizer_text)
def test_tokenizer_patterns_match_regex_on_generated_text(name, text):
    assert_matches_regex(TOKENIZER_PATTERNS[name], text)


@pytest.mark.parametrize("name", ["cl100k", "o200k", "llama3", "deepseek_words"])
def test_every_short_tuple_of_character_classes(name):
    """wordchipper's enumeration: a representative of each class of the program (and of the tricky fragments),
    in every tuple of up to three."""
    program = compile_regex(TOKENIZER_PATTERNS[name])
    _, first = np.unique(code_point_classes(program), return_index=True)
    alphabet = sorted({chr(code_point) for code_point in first if not 0xD800 <= code_point < 0xE000}
                      | {"'", "s", "S", "l", "L", "e", "\r", "\n", " ", "a", "1"})
    text = "".join(
        "".join(chars) + "\x00" for length in (1, 2, 3) for chars in itertools.product(alphabet, repeat=length)
    )
    assert_matches_regex(TOKENIZER_PATTERNS[name], text)


@pytest.mark.parametrize("pattern", CONSTRUCT_PATTERNS)
@settings(max_examples=40, deadline=None)
@given(text=st.lists(st.sampled_from(["a", "b", "c", "ab", "x", "y", "\n", " ", "  ", "1", "22", "ß", "SS", "ǆ",
                                      "K", "é", "😀", "☃", "中", ".", "]", "-", "^", *FRAGMENTS]),
                     max_size=20).map("".join))
def test_constructs_match_regex(pattern, text):
    assert_matches_regex(pattern, text)


@settings(max_examples=60, deadline=None)
@given(text=tokenizer_text)
def test_multiline_anchors_match_regex(text):
    for pattern in (r"^\s*\S+|.", r"\S+$|.", r"\s+$|\s+(?!\S)|\S+"):
        assert_matches_regex(pattern, text, multiline=True)


@pytest.mark.parametrize("pattern, construct", [
    (r"(?<=a)b", "lookbehind"), (r"(?<!a)b", "lookbehind"), (r"(a)\1", "backreference"),
    (r"\bword", "word boundary"), (r"a*", "empty string"), (r"(?:a?)+b", "empty string"),
    (r"\p{Greek}", r"\p{Greek}"), (r"(?x)a", "flags"), ("|".join(f"\\u{c:04x}x" for c in range(0x100, 0x142)),
                                                        "more than 64"),
    (r"(?i:\p{Lu})", "case-insensitive"), (r"[[:alpha:]]", "POSIX"), (r"(?i)[\u0100-\u3000]", "wide"),
])
def test_unsupported_constructs_are_named(pattern, construct):
    with pytest.raises(UnsupportedComponentError, match=regex.escape(construct)):
        compile_regex(pattern)


@pytest.mark.parametrize("name", sorted(TOKENIZER_PATTERNS))
def test_pinned_patterns_compile_to_the_unpinned_program(name):
    """The form HF files are read in (``pin_unicode_classes``: ``(?:[ASCII]|(?![WRONG])\\p{L})`` where the installed
    ``regex`` is not Unicode 16) is one set a character, as the pattern is: the same program, the same speed."""
    pattern = TOKENIZER_PATTERNS[name]
    program, pinned = compile_regex(pattern), compile_regex(pin_unicode_classes(pattern))
    assert np.array_equal(program.instructions, pinned.instructions)
    assert np.array_equal(program.class_bits, pinned.class_bits)
    assert np.array_equal(code_point_classes(program), code_point_classes(pinned))


def test_one_character_alternatives_are_one_step():
    explicit = compile_regex(r"(?:[A-Za-z]|(?![\x00-\x7f\u0558])\p{L})+")
    assert explicit.listing() == compile_regex(r"\p{L}+").listing() == "   0 RUN 0 1 -1\n   1 MATCH 0 0 0"
    assert explicit.class_of(ord("\u0558")) != explicit.class_of(ord("a")) == explicit.class_of(ord("é"))


def test_invalid_utf8_is_one_character_per_byte():
    program = compile_regex(TOKENIZER_PATTERNS["llama3"])
    data = b"ab\xff\xfe cd \xe4\xb8 x\xc3"
    text = data.decode("utf-8", "surrogateescape")
    expected = regex_slices(TOKENIZER_PATTERNS["llama3"], text)
    ends, _ = find_spans(np.frombuffer(data, np.uint8), program)
    assert ends.tolist() == np.cumsum([len(text[s:e].encode("utf-8", "surrogateescape"))
                                       for s, e, _ in expected]).tolist()


# ---- the jit engine with compiled pre-tokenizers -----------------------------------------------------------


def corpus_sample() -> str:
    return "".join(corpus_text(name, 15_000) for name in CORPUS_FILES)


@pytest.mark.parametrize("pattern", [LLAMA3_GROUPED, TOKENIZER_PATTERNS["deepseek_words"], r"\S+|\s+", r"[a-z]+"])
def test_engine_runs_any_pattern_compiled(pattern):
    """A custom pattern (no hand-written machine) is split by the compiled matcher, gaps dropped as findall."""
    ranks = mergeable_ranks("cl100k_base")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback to the Python pre-tokenizer
        warnings.simplefilter("ignore", PatternCoverageWarning)  # the patterns that skip text do so on purpose
        jit_tok = Tokenizer("custom", BytePairModel(ranks), pattern=pattern, backend="jit")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PatternCoverageWarning)
        ref_tok = Tokenizer("custom", BytePairModel(ranks), pattern=pattern, backend="reference")
    assert jit_tok.engine.compiled_splits is not None
    text = corpus_sample()
    assert jit_tok.encode_ordinary(text) == ref_tok.encode_ordinary(text)
    texts = text.splitlines()[:100]
    assert jit_tok.encode_ordinary_batch(texts) == [ref_tok.encode_ordinary(t) for t in texts]


@pytest.mark.parametrize("pattern", [r"[a-z]+", LLAMA3_GROUPED])
def test_compiled_batch_keeps_each_texts_tokens_apart(pattern):
    """The compiled batch encodes all texts' spans in one kernel call: empty texts, texts whose text the pattern
    skips entirely, first, last and in between, still get their own (possibly empty) token lists."""
    ranks = mergeable_ranks("cl100k_base")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PatternCoverageWarning)
        jit_tok = Tokenizer("custom", BytePairModel(ranks), pattern=pattern, backend="jit")
        ref_tok = Tokenizer("custom", BytePairModel(ranks), pattern=pattern, backend="reference")
    texts = ["", "", "ABC 12", "abc def", "", "123", "x", "Hello world", "  ", "ünïcode wörds", "END", ""]
    expected = [ref_tok.encode_ordinary(text) for text in texts]
    assert jit_tok.encode_ordinary_batch(texts) == expected
    tokens, offsets = jit_tok.engine.encode_ordinary_flat(texts)
    assert [tokens[offsets[i] : offsets[i + 1]].tolist() for i in range(len(texts))] == expected


@settings(max_examples=30, deadline=None)
@given(texts=st.lists(tokenizer_text, max_size=8))
def test_compiled_batches_of_generated_texts(texts):
    """Each text's tokens in a compiled batch are its own (the cut by ``text_token_offsets``), whether the pattern
    keeps all text (Llama 3) or skips some (``[a-z]+``)."""
    for pattern in (LLAMA3_GROUPED, r"[a-z]+"):
        jit_tok, ref_tok = cl100k_pair(pattern)
        assert jit_tok.encode_ordinary_batch(texts) == [ref_tok.encode_ordinary(text) for text in texts]


@functools.cache
def cl100k_pair(pattern: str) -> tuple[Tokenizer, Tokenizer]:
    """cl100k's ranks with ``pattern``: (jit, reference) tokenizers, made once."""
    ranks = mergeable_ranks("cl100k_base")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PatternCoverageWarning)
        return (Tokenizer("custom", BytePairModel(ranks), pattern=pattern, backend="jit"),
                Tokenizer("custom", BytePairModel(ranks), pattern=pattern, backend="reference"))


@pytest.mark.parametrize("name", ["llama3", "qwen2"])
def test_llama3_and_qwen2_patterns_run_the_hand_written_machine(name):
    """Llama 3's and Qwen 2's exact regexes run cl100k's hand-written machine (``crayon.jit.pretokenize``), with the
    reference's ids, whitespace at the end of a text (cut after its last newline, unlike cl100k's) included."""
    from crayon.jit.pretokenize import PATTERN_IDS
    from crayon.patterns import VARIANT_PATTERNS

    jit_tok, ref_tok = cl100k_pair(VARIANT_PATTERNS[name])
    assert jit_tok.engine.pattern_id == PATTERN_IDS[name] and jit_tok.engine.compiled_splits is None
    texts = [corpus_sample(), "x \n\n  ", "12345 \u0661\u0662\u0663\u0664 1", "it's \r\n\t", *corpus_sample().splitlines()[:200]]
    assert [jit_tok.encode_ordinary(text) for text in texts] == [ref_tok.encode_ordinary(text) for text in texts]
    assert jit_tok.encode_ordinary_batch(texts) == [ref_tok.encode_ordinary(text) for text in texts]
    assert ref_tok.pretokenizer("x \n\n  ") == ["x", " \n\n", "  "]  # cl100k's: ["x", " \n\n  "]


def test_engine_falls_back_with_one_warning_naming_the_construct():
    ranks = mergeable_ranks("cl100k_base")
    pattern = r"(?<=\s)\S+|\S+|\s+"
    with pytest.warns(UserWarning, match="lookbehind"):
        jit_tok = Tokenizer("custom", BytePairModel(ranks), pattern=pattern, backend="jit")
    assert jit_tok.engine.compiled_splits is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Tokenizer("custom", BytePairModel(ranks), pattern=pattern, backend="jit")  # warned once already
    ref_tok = Tokenizer("custom", BytePairModel(ranks), pattern=pattern, backend="reference")
    text = corpus_text("english_web.txt", 20_000)
    assert jit_tok.encode_ordinary(text) == ref_tok.encode_ordinary(text)


tokenizers = pytest.importorskip("tokenizers")
from test_hf_io import CONFIGS, tokenizer_from_hf, train_hf  # noqa: E402

COMPILED_CONFIGS = sorted(set(CONFIGS) - {"fixed_length", "byte_level_normalizer"})
# GPT-2's ByteLevel splits as r50k_base, Llama 3's and Qwen 2's Split as their patterns: the hand-written state
# machines run them, after NFC where the file has it (Qwen 2, GPT-NeoX)
HAND_WRITTEN_CONFIGS = {"gpt2", "llama3_ignore_merges", "qwen2_nfc", "neox_nfc_whitespace_tokens"}


@pytest.fixture(scope="module")
def small_training_text():
    text = corpus_text("big.txt", 40_000) + corpus_text("multilingual.txt", 20_000)
    return [text[i : i + 2000] for i in range(0, len(text), 2000)]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_hf_pipelines_run_compiled_with_hf_ids(name, small_training_text):
    hf = train_hf(small_training_text, *CONFIGS[name]())
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        tok = tokenizer_from_hf(json.loads(hf.to_str()), backend="jit")
    if name in HAND_WRITTEN_CONFIGS:
        assert tok.engine.pattern_id is not None and tok.engine.compiled_splits is None
    else:
        assert (tok.engine.compiled_splits is not None) == (name in COMPILED_CONFIGS)
    text = corpus_sample()
    assert tok.encode(text, allowed_special="all") == hf.encode(text, add_special_tokens=False).ids


# one-character splits, fused into one pass (CharacterSplits) against the same splits run one after another by the
# regex VM; an isolating split before a removing one whose sets overlap, and invalid UTF-8 bytes among the text
ONE_CHARACTER_SPLITS = {
    "bert": [RegexSplit(r"\p{White_Space}", behavior="removed"), RegexSplit(r"[\p{P}!-/:-@\[-`{-~]")],
    "isolate-then-remove": [RegexSplit(r"(?![\-])[\p{P}\s]"), RegexSplit(r"[,\s\u00e9]", behavior="removed"),
                            RegexSplit("[\u4e00-\u9fff]|[\u0300-\u036f]")],
    "merged-with-next": [RegexSplit("\u2581", behavior="merged_with_next")],
    "merged-with-previous": [RegexSplit(r"[\s,\u00e9]", behavior="merged_with_previous")],
}
CHARACTER_SPLIT_TEXT = st.lists(st.one_of(st.sampled_from(["a", "é", "e\u0301", ",", "-", " ", "\u3000", "\t", "中", "\u2581",
                                                           "!", "¿", "\u2028", "\U0001F600", "ab", "\x00"]),
                                          st.text(st.characters(codec="utf-8"), max_size=3)), max_size=30).map("".join)


class SplitsOf:
    """A pre-tokenizer made of these splits."""

    def __init__(self, splits):
        self.splits = splits

    def regex_splits(self):
        return self.splits, False


def one_by_one_and_fused(splits: list[RegexSplit]):
    from crayon.jit.regex_vm import (SPLIT_BEHAVIORS, CharacterSplits, CompiledSplits, compiled_splits_of,
                                     program_tables, split_pieces)

    assert all(CharacterSplits.takes(split) for split in splits)
    fused = CompiledSplits([CharacterSplits(splits)])
    assert len(compiled_splits_of(SplitsOf(splits)).steps) == 1

    def one_by_one(data, ends):
        kept = np.ones(len(ends), np.uint8)
        for split in splits:
            program = compile_regex(split.pattern)
            ends, kept = split_pieces(data, ends, kept, program_tables(program), SPLIT_BEHAVIORS.index(split.behavior),
                                      False)
        return ends, kept

    return one_by_one, fused


def kept_pieces(data, ends, kept) -> list[bytes]:
    starts = [0, *ends.tolist()]
    return [data[start:end].tobytes() for start, end, keep in zip(starts, starts[1:], kept.tolist())
            if keep and end > start]


@pytest.mark.parametrize("name", ONE_CHARACTER_SPLITS)
@settings(max_examples=200, deadline=None)
@given(texts=st.lists(CHARACTER_SPLIT_TEXT, min_size=1, max_size=4), invalid=st.booleans())
def test_fused_one_character_splits_match_the_splits_one_by_one(name, texts, invalid):
    one_by_one, fused = one_by_one_and_fused(ONE_CHARACTER_SPLITS[name])
    encoded = [text.encode("utf-8") + (b"\xff\xe4\xb8" if invalid else b"") for text in texts]
    data = np.frombuffer(b"".join(encoded), np.uint8)
    text_ends = np.cumsum([len(part) for part in encoded]).astype(np.int64)
    ends, kept = fused.split(data, text_ends)
    assert kept_pieces(data, ends, kept) == kept_pieces(data, *one_by_one(data, text_ends))
    assert set(text_ends.tolist()) <= set(ends.tolist()) | {0}  # no piece crosses a text's end


@pytest.mark.parametrize("name", ONE_CHARACTER_SPLITS)
def test_fused_one_character_splits_match_on_every_code_point(name):
    one_by_one, fused = one_by_one_and_fused(ONE_CHARACTER_SPLITS[name])
    text = "".join("a" + chr(code_point) for code_point in range(0x110000) if not 0xD800 <= code_point < 0xE000)
    data = np.frombuffer(text.encode("utf-8"), np.uint8)
    text_ends = np.array([len(data)], np.int64)
    assert kept_pieces(data, *fused.split(data, text_ends)) == kept_pieces(data, *one_by_one(data, text_ends))


def test_merging_splits_are_not_fused_with_others():
    from crayon.jit.regex_vm import compiled_splits_of

    splits = [RegexSplit(r"\s", behavior="removed"), RegexSplit(",", behavior="merged_with_next"),
              RegexSplit("-", behavior="merged_with_previous"), RegexSplit(r"\p{P}")]
    assert len(compiled_splits_of(SplitsOf(splits)).steps) == 4


def test_only_one_character_patterns_are_fused():
    from crayon.jit.regex_vm import matches_one_character

    assert matches_one_character(r"\s") and matches_one_character(r"(?![a])[\p{L}]|[0-9]")
    for pattern in (r"\s+", r"ab", r"(?=ab)a", r"a|bc", r"^a", r"a(?!b)", r"(?:)"):
        assert not matches_one_character(pattern), pattern

"""Character-level and word-level tokenizers: checkpoint tests, round trips, training rule, JSON files."""

import json
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crayon.errors import UnknownTokenError
from crayon.lookup.char import CharTokenizer
from crayon.lookup.vocab_tokenizer import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, UNK_ID
from crayon.lookup.word import WordTokenizer

SHAKESPEARE = Path(__file__).resolve().parents[1].parent / "shared" / "corpora" / "shakespeare.txt"
TOKENIZER_CLASSES = [CharTokenizer, WordTokenizer]

# Words, punctuation, specials and assorted whitespace, so word splitting and spacing get exercised.
word_texts = st.lists(
    st.one_of(
        st.text(min_size=1, max_size=8),
        st.sampled_from(["the", "cat", "don't", "Hello,", "(", "«", "世界", "🚀", "e\u0301", "_x1"]),
        st.sampled_from(SPECIAL_TOKENS),
        st.sampled_from([" ", "  ", "\n", "\t", "\r\n", "\u00a0", "\u3000"]),
    ),
    max_size=20,
).map("".join)


def vocab_tokens(tokenizer):
    """Trained tokens in id order, specials excluded."""
    return [tokenizer.id_to_token(i) for i in range(len(SPECIAL_TOKENS), tokenizer.vocab_size)]


def save_and_load(tokenizer):
    """Save to a temporary file and load it back; also return the file's bytes."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "tokenizer.json"
        tokenizer.save(path)
        return type(tokenizer).load(path), path.read_bytes()


# --- the problem statement's checkpoint tests (Milestones 1 and 2) ---


def test_char_checkpoint_basic():
    tokenizer = CharTokenizer()
    tokenizer.train("hello world")
    encoded = tokenizer.encode("hello")
    assert len(encoded) == 5
    assert tokenizer.decode(encoded) == "hello"


def test_char_checkpoint_special_tokens_are_first_ids():
    tokenizer = CharTokenizer()
    assert [tokenizer.encode(token) for token in SPECIAL_TOKENS] == [[0], [1], [2], [3]]
    assert (PAD_ID, UNK_ID, BOS_ID, EOS_ID) == (0, 1, 2, 3)


def test_char_checkpoint_unknown_characters():
    tokenizer = CharTokenizer()
    tokenizer.train("abc")
    encoded = tokenizer.encode("axc")
    assert encoded == [tokenizer.token_to_id("a"), UNK_ID, tokenizer.token_to_id("c")]
    assert tokenizer.decode(encoded) == "a<UNK>c"
    assert tokenizer.decode(encoded, skip_special_tokens=True) == "ac"


def test_char_checkpoint_unicode():
    tokenizer = CharTokenizer()
    tokenizer.train("Hello 世界 🚀")
    encoded = tokenizer.encode("世界🚀")
    assert len(encoded) == 3 and UNK_ID not in encoded  # code points, not UTF-8 bytes
    assert tokenizer.decode(encoded) == "世界🚀"


def test_char_checkpoint_vocab_size():
    tokenizer = CharTokenizer()
    tokenizer.train("aabbcc")
    assert tokenizer.vocab_size == 7


def test_word_checkpoint_basic():
    tokenizer = WordTokenizer(1)
    tokenizer.train("the cat sat on the mat")
    encoded = tokenizer.encode("the cat")
    assert len(encoded) == 2
    assert tokenizer.decode(encoded) == "the cat"


def test_word_checkpoint_punctuation_splitting():
    assert WordTokenizer(1).tokenize("Hello, world!") == ["Hello", ",", "world", "!"]


def test_word_checkpoint_frequency_filtering():
    tokenizer = WordTokenizer(2)
    tokenizer.train("the cat the dog the bird cat")
    assert vocab_tokens(tokenizer) == ["the", "cat"]
    assert tokenizer.encode("the dog") == [tokenizer.token_to_id("the"), UNK_ID]


def test_word_checkpoint_case_sensitivity():
    tokenizer = WordTokenizer(1)
    tokenizer.train("The the THE")
    assert sorted(vocab_tokens(tokenizer)) == ["THE", "The", "the"]


def test_word_checkpoint_unknown_words():
    tokenizer = WordTokenizer(1)
    tokenizer.train("hello world")
    encoded = tokenizer.encode("hello universe")
    assert encoded[1] == UNK_ID
    assert tokenizer.decode(encoded) == "hello <UNK>"


# --- round trips ---


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1), st.data())
def test_char_text_of_trained_characters_round_trips(training_text, data):
    tokenizer = CharTokenizer()
    tokenizer.train(training_text)
    trained_characters = vocab_tokens(tokenizer)
    text = data.draw(st.text(alphabet=trained_characters)) if trained_characters else ""
    ids = tokenizer.encode(text)
    assert ids.count(UNK_ID) == text.count("<UNK>")
    assert tokenizer.decode(ids) == text
    assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=True), skip_special_tokens=True) == text


@settings(max_examples=200, deadline=None)
@given(st.text(), st.text())
def test_char_each_untrained_character_becomes_one_unk(training_text, text):
    tokenizer = CharTokenizer()
    tokenizer.train(training_text)
    ids = tokenizer.encode(text)
    assert len(ids) == len(CharTokenizer().tokenize(text))
    unknown = [token for token in tokenizer.tokenize(text) if tokenizer.token_to_id(token) is None]
    assert ids.count(UNK_ID) - tokenizer.tokenize(text).count("<UNK>") == len(unknown)


@settings(max_examples=200, deadline=None)
@given(word_texts)
def test_word_trained_text_keeps_its_tokens_through_decode(text):
    tokenizer = WordTokenizer()
    tokenizer.train(text)
    ids = tokenizer.encode(text)
    assert UNK_ID not in ids or "<UNK>" in text
    assert tokenizer.tokenize(tokenizer.decode(ids)) == tokenizer.tokenize(text)
    assert "".join(tokenizer.decode(ids).split()) == "".join(text.split())


@settings(max_examples=200, deadline=None)
@given(word_texts, st.data())
def test_word_encode_inverts_decode_for_any_ids(training_text, data):
    tokenizer = WordTokenizer()
    tokenizer.train(training_text)
    ids = data.draw(st.lists(st.integers(0, tokenizer.vocab_size - 1), max_size=30))
    assert tokenizer.encode(tokenizer.decode(ids)) == ids


def test_word_decode_spacing():
    tokenizer = WordTokenizer()
    tokenizer.train("Hello, world! (don't) <BOS> 世界。")
    text = "Hello , world!( don't)<BOS>世界 。"
    assert tokenizer.decode(tokenizer.encode(text)) == "Hello, world! (don' t) <BOS> 世界。"
    assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=True)) == (
        "<BOS> Hello, world! (don' t) <BOS> 世界。 <EOS>"
    )
    without_specials = tokenizer.decode(tokenizer.encode(text), skip_special_tokens=True)
    assert without_specials == "Hello, world! (don' t) 世界。"
    assert tokenizer.decode(tokenizer.encode("( ( world ) )")) == "((world))"


# --- training rule ---


def test_ids_ordered_by_frequency_then_string():
    words = WordTokenizer()
    words.train(["b a b c", "c c d a"])
    assert vocab_tokens(words) == ["c", "a", "b", "d"]
    chars = CharTokenizer()
    chars.train("bacbcc")
    assert vocab_tokens(chars) == ["c", "b", "a"]


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(TOKENIZER_CLASSES),
    st.lists(word_texts, max_size=4),
    st.integers(1, 3),
    st.one_of(st.none(), st.integers(4, 12)),
)
def test_training_keeps_the_most_frequent_tokens_in_order(cls, texts, min_frequency, max_vocab_size):
    tokenizer = cls(min_frequency=min_frequency, max_vocab_size=max_vocab_size)
    tokenizer.train(iter(texts))
    counts = Counter(token for text in texts for token in tokenizer.tokenize(text))
    eligible = {token for token, count in counts.items() if count >= min_frequency} - set(SPECIAL_TOKENS)
    kept = vocab_tokens(tokenizer)
    assert [(-counts[token], token) for token in kept] == sorted((-counts[token], token) for token in kept)
    assert set(kept) <= eligible
    if max_vocab_size is None or tokenizer.vocab_size < max_vocab_size:
        assert set(kept) == eligible
    else:
        assert tokenizer.vocab_size == max_vocab_size
        ranked = sorted((-counts[token], token) for token in eligible)
        assert kept == [token for _, token in ranked[: len(kept)]]


def test_training_again_keeps_ids_and_respects_max_vocab_size():
    tokenizer = WordTokenizer(max_vocab_size=7)
    tokenizer.train("a a b")
    before = tokenizer.get_vocab()
    tokenizer.train("c c c d d e")
    assert tokenizer.get_vocab() == {**before, "c": 6}


def test_special_literals_are_not_split_into_units():
    tokenizer = CharTokenizer()
    tokenizer.train("x<EOS>y<PAD")
    assert vocab_tokens(tokenizer) == sorted("xy<PAD")
    assert tokenizer.encode("<EOS>x") == [EOS_ID, tokenizer.token_to_id("x")]
    assert WordTokenizer().tokenize("a<UNK>b <BOS") == ["a", "<UNK>", "b", "<", "BOS"]


# --- save / load ---


@settings(max_examples=50, deadline=None)
@given(
    st.sampled_from(TOKENIZER_CLASSES),
    word_texts,
    st.integers(1, 2),
    st.one_of(st.none(), st.integers(4, 50)),
)
def test_save_load_round_trips_exactly(cls, text, min_frequency, max_vocab_size):
    tokenizer = cls(min_frequency=min_frequency, max_vocab_size=max_vocab_size)
    tokenizer.train(text)
    loaded, saved_bytes = save_and_load(tokenizer)
    assert type(loaded) is cls
    assert loaded.get_vocab() == tokenizer.get_vocab()
    assert (loaded.min_frequency, loaded.max_vocab_size) == (min_frequency, max_vocab_size)
    assert loaded.encode(text) == tokenizer.encode(text)
    assert save_and_load(loaded)[1] == saved_bytes


def test_save_load_checkpoint_unicode(tmp_path):
    tokenizer = CharTokenizer()
    tokenizer.train("the quick brown fox 世界 🚀")
    tokenizer.save(tmp_path / "char.json")
    assert CharTokenizer.load(tmp_path / "char.json").encode("quick 🚀") == tokenizer.encode("quick 🚀")


def write_state(path, **changes):
    state = {"type": "WordTokenizer", "version": 1, "min_frequency": 1, "max_vocab_size": None,
             "tokens": [*SPECIAL_TOKENS, "cat", "."]}
    path.write_text(json.dumps({**state, **changes}), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"type": "CharTokenizer"}, "not a 'WordTokenizer'"),
        ({"version": 2}, "version"),
        ({"tokens": ["cat", *SPECIAL_TOKENS]}, "starting with"),
        ({"tokens": [*SPECIAL_TOKENS, "cat", "cat"]}, "appears twice"),
        ({"tokens": [*SPECIAL_TOKENS, "two words"]}, "not a valid"),
        ({"tokens": [*SPECIAL_TOKENS, 7]}, "not a valid"),
        ({"tokens": [*SPECIAL_TOKENS, "\ud800"]}, "not a valid"),
        ({"max_vocab_size": 5}, "exceed"),
        ({"min_frequency": 0}, "min_frequency"),
    ],
)
def test_load_refuses_bad_files(tmp_path, changes, message):
    with pytest.raises(ValueError, match=message):
        WordTokenizer.load(write_state(tmp_path / "bad.json", **changes))


def test_load_refuses_non_json_and_multi_character_char_tokens(tmp_path):
    (tmp_path / "junk.json").write_bytes(b"\xff not json")
    with pytest.raises(ValueError, match="not a UTF-8 JSON"):
        CharTokenizer.load(tmp_path / "junk.json")
    path = write_state(tmp_path / "char.json", type="CharTokenizer", tokens=[*SPECIAL_TOKENS, "ab"])
    with pytest.raises(ValueError, match="'ab' is not a valid"):
        CharTokenizer.load(path)


# --- bad input ---


@pytest.mark.parametrize("cls", TOKENIZER_CLASSES)
def test_decode_refuses_unknown_and_non_integer_ids(cls):
    tokenizer = cls()
    tokenizer.train("a b")
    assert tokenizer.decode(np.array([tokenizer.token_to_id("a")], dtype=np.uint32)) == "a"
    for bad_id in (tokenizer.vocab_size, -1, 10**20):
        with pytest.raises(UnknownTokenError, match=f"token id {bad_id} is not in the vocabulary"):
            tokenizer.decode([bad_id])
        with pytest.raises(UnknownTokenError):
            tokenizer.id_to_token(bad_id)
    for bad_id in ("a", 1.0, None):
        with pytest.raises(TypeError, match="token ids must be integers"):
            tokenizer.decode([bad_id])


@pytest.mark.parametrize("cls", TOKENIZER_CLASSES)
def test_bad_text_is_refused(cls):
    tokenizer = cls()
    with pytest.raises(ValueError, match="lone surrogate '\\\\udc80' at index 2"):
        tokenizer.encode("ab\udc80")
    with pytest.raises(ValueError, match="lone surrogate"):
        tokenizer.train(["fine", "x\ud800"])
    with pytest.raises(TypeError, match="must be str, not bytes"):
        tokenizer.encode(b"abc")
    with pytest.raises(TypeError, match="must be str, not bytes"):
        tokenizer.train([b"abc"])
    for bad_settings in ({"min_frequency": 0}, {"min_frequency": 1.5}, {"max_vocab_size": 3}):
        with pytest.raises(ValueError):
            cls(**bad_settings)
    assert tokenizer.vocab_size == len(SPECIAL_TOKENS)


# --- real text ---


@pytest.fixture(scope="module")
def shakespeare():
    if not SHAKESPEARE.exists():
        pytest.skip(f"corpus not found at {SHAKESPEARE} (the shared corpora live at ../shared/corpora)")
    return SHAKESPEARE.read_text(encoding="utf-8")


def test_char_shakespeare_round_trips(shakespeare):
    tokenizer = CharTokenizer()
    tokenizer.train(shakespeare)
    assert tokenizer.vocab_size == len(SPECIAL_TOKENS) + len(set(shakespeare))
    ids = tokenizer.encode(shakespeare)
    assert len(ids) == len(shakespeare)
    assert tokenizer.decode(ids) == shakespeare


def test_word_shakespeare_unknown_rate_and_round_trip(shakespeare):
    split = len(shakespeare) * 9 // 10
    train_text, held_out = shakespeare[:split], shakespeare[split:]
    tokenizer = WordTokenizer(min_frequency=2)
    tokenizer.train(train_text.splitlines())
    held_out_ids = tokenizer.encode(held_out)
    unknown_rate = held_out_ids.count(UNK_ID) / len(held_out_ids)
    assert 0.01 < unknown_rate < 0.10, unknown_rate
    assert tokenizer.vocab_size < len(set(tokenizer.tokenize(train_text))) + len(SPECIAL_TOKENS)
    sample = shakespeare[:50_000]
    ids = tokenizer.encode(sample)
    assert tokenizer.encode(tokenizer.decode(ids)) == ids
    assert len(ids) < len(sample) / 3

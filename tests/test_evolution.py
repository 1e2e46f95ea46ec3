"""Vocabulary evolution: extend keeps every id and the old tokens of text it does not help, reference == jit merge
for merge, the result loads in tiktoken and HF; reserved special slots; lineage in cartridges; diff, promote,
rollback."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import crayon
from conftest import corpus_text
from strategies import tokenizer_text
from crayon.cartridge import open_cartridge, write_cartridge
from crayon.errors import VocabularyChangeError
from crayon.evolution import derived_from, vocabulary_hash
from crayon.jit.train import extend_bpe_jit
from crayon.reference.bpe import BytePairModel
from crayon.reference.pretokenize import compile_pattern
from crayon.reference.train import extend_bpe, train_bpe
from crayon.staging import diff_vocabularies, promote, rollback
from crayon.tokenizer import Tokenizer

tiktoken = pytest.importorskip("tiktoken")

FRAGMENTS = ["a", "b", "ab", "aa", " ", "\n", "'s", "1", "é", "中", "😀", "!", "X", "<|endoftext|>"]
corpus_texts = st.lists(st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join), min_size=1, max_size=4)


def trained(texts, vocab_size, **options) -> Tokenizer:
    result = train_bpe(texts, vocab_size, **options)
    return Tokenizer("base", BytePairModel(result.ranks), pattern=result.pattern,
                     special_tokens=result.special_tokens, backend="jit")


@pytest.fixture(scope="module")
def english():
    return trained(corpus_text("big.txt", 200_000), 700, special_tokens=["<|endoftext|>"])


@pytest.fixture(scope="module")
def cl100k():
    return crayon.load("cl100k_base")


@pytest.fixture(scope="module")
def cl100k_extended(cl100k):
    return cl100k.extend(texts=[corpus_text("multilingual.txt", 150_000)], n_new_tokens=400)


# --------------------------------------------------------------------------------------- reference == jit


def assert_same_extension(tokenizer, texts, n_new, first_id):
    options = dict(first_id=first_id, pattern=tokenizer.pattern, special_tokens=list(tokenizer.special_tokens))
    reference = extend_bpe(texts, tokenizer.model, n_new, **options)
    encode_spans = tokenizer.engine.encode_spans
    jit = extend_bpe_jit(texts, tokenizer.model, n_new, encode_spans=encode_spans, workers=1, **options)
    assert jit == reference
    return reference


@settings(max_examples=30, deadline=None)
@given(texts=corpus_texts, n_new=st.integers(1, 40), gap=st.integers(0, 3))
def test_reference_and_jit_extend_alike(english, texts, n_new, gap):
    extension = assert_same_extension(english, texts, n_new, english.n_vocab + gap)
    old = english.model.ranks
    assert {token: i for token, i in extension.ranks.items() if token in old} == old
    new_ids = sorted(i for token, i in extension.ranks.items() if token not in old)
    assert new_ids == list(range(english.n_vocab + gap, english.n_vocab + gap + len(new_ids)))


def test_reference_and_jit_extend_cl100k_alike(cl100k):
    assert_same_extension(cl100k, corpus_text("multilingual.txt", 60_000), 150, cl100k.n_vocab)


def test_extending_on_the_training_corpus_continues_the_training():
    text = corpus_text("shakespeare.txt", 150_000)
    base = trained(text, 600)
    continued = extend_bpe(text, base.model, 300, first_id=600, pattern=base.pattern)
    further = train_bpe(text, 900)
    assert continued.ranks == further.ranks
    assert continued.merges == further.merges[-len(continued.merges):]


# ----------------------------------------------------------------------------------------- stable ids


def test_extend_keeps_every_old_id_and_special(cl100k, cl100k_extended):
    old, new = cl100k.model.token_bytes, cl100k_extended.model.token_bytes
    assert len(old) == 100_256 and all(new[i] == token for i, token in old.items())
    assert cl100k_extended.special_tokens == cl100k.special_tokens
    added = sorted(set(new) - set(old))
    assert added == list(range(cl100k.n_vocab, cl100k.n_vocab + 400))  # after <|endofprompt|> = 100276
    for token_id in range(cl100k_extended.n_vocab):
        if token_id in old or token_id in cl100k.special_tokens.values():
            assert cl100k_extended.decode_single_token_bytes(token_id) == cl100k.decode_single_token_bytes(token_id)
    assert (cl100k_extended.vocabulary_version, cl100k_extended.parent_hash) == (2, vocabulary_hash(cl100k))


def assert_old_tokens_kept(old, new, text) -> tuple[int, int]:
    """Span by span: the old tokens, unless two adjacent old tokens now join into a new one (then fewer tokens).
    Returns (spans unchanged, spans helped)."""
    new_tokens = {new.model.token_bytes[i] for i in set(new.model.token_bytes) - set(old.model.token_bytes)}
    unchanged = helped = 0
    for span in sorted(set(compile_pattern(old.pattern).findall(text))):
        before, after = old.encode_ordinary(span), new.encode_ordinary(span)
        parts = old.decode_tokens_bytes(before)
        if any(left + right in new_tokens for left, right in zip(parts, parts[1:])):
            assert len(after) < len(before) and any(token >= old.n_vocab for token in after)
            helped += 1
        else:
            assert after == before
            unchanged += 1
        assert new.decode_bytes(after) == span.encode()
    return unchanged, helped


@pytest.mark.parametrize("corpus", ["big.txt", "multilingual.txt", "python_code.py"])
def test_text_the_new_tokens_do_not_help_keeps_its_old_tokens(cl100k, cl100k_extended, corpus):
    unchanged, helped = assert_old_tokens_kept(cl100k, cl100k_extended, corpus_text(corpus, 60_000))
    assert unchanged > 100 and (helped > 0 or corpus != "multilingual.txt")


@pytest.fixture(scope="module")
def english_extended(english):
    texts = [corpus_text("multilingual.txt", 50_000), corpus_text("python_code.py", 50_000)]
    return english.extend(texts=texts, n_new_tokens=300)


@settings(max_examples=60, deadline=None)
@given(text=tokenizer_text)
def test_generated_text_keeps_its_old_tokens_unless_helped(english, english_extended, text):
    assert_old_tokens_kept(english, english_extended, text)
    tokens = english_extended.encode_ordinary(text)
    assert english_extended.decode(tokens) == text and len(tokens) <= len(english.encode_ordinary(text))


def test_extended_cl100k_loads_in_tiktoken_and_hf(cl100k_extended, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from tiktoken.load import load_tiktoken_bpe

    cl100k_extended.export(tmp_path / "ext.tiktoken")
    encoding = tiktoken.Encoding(
        "ext", pat_str=cl100k_extended.pattern,
        mergeable_ranks=load_tiktoken_bpe(str(tmp_path / "ext.tiktoken")),
        special_tokens=cl100k_extended.special_tokens,
    )
    cl100k_extended.export(tmp_path / "tokenizer.json", format="hf")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    for corpus in ["multilingual.txt", "big.txt", "python_code.py"]:
        text = corpus_text(corpus, 200_000)[-30_000:] + " <|endoftext|>"
        ids = cl100k_extended.encode(text, allowed_special="all")
        assert encoding.encode(text, allowed_special="all") == ids
        assert hf.encode(text, add_special_tokens=False).ids == ids
        assert encoding.decode(ids) == text


def test_extend_a_tokenizer_json_appends_merges(tmp_path):
    base = trained(corpus_text("big.txt", 100_000), 500, special_tokens=["<|endoftext|>"])
    base.export(tmp_path / "tokenizer.json", format="hf")
    loaded = crayon.load(tmp_path / "tokenizer.json")
    assert loaded.model.merges is not None
    text = corpus_text("multilingual.txt", 40_000)
    extended = loaded.extend(texts=[text], n_new_tokens=100)
    assert extended.model.merges[: len(loaded.model.merges)] == loaded.model.merges
    assert extended.with_backend("reference").encode_ordinary(text) == extended.encode_ordinary(text)
    reference = loaded.extend(texts=[text], n_new_tokens=100, backend="reference")
    assert reference.model.ranks == extended.model.ranks and reference.model.merges == extended.model.merges
    assert len(extended.encode_ordinary(text)) < len(loaded.encode_ordinary(text))
    tokenizers = pytest.importorskip("tokenizers")
    extended.export(tmp_path / "extended.json", format="hf")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "extended.json"))
    sample = text[-5000:] + corpus_text("big.txt", 5000) + "<|endoftext|>"
    assert hf.encode(sample, add_special_tokens=False).ids == extended.encode(sample, allowed_special="all")


def test_extend_a_cartridge_as_the_tokenizer_it_holds(english, tmp_path):
    english.save(tmp_path / "english.crayon")
    loaded = crayon.load(tmp_path / "english.crayon")
    text = corpus_text("multilingual.txt", 30_000)
    from_cartridge = loaded.extend(texts=[text], n_new_tokens=50)
    from_memory = english.extend(texts=[text], n_new_tokens=50)
    assert from_cartridge.model.ranks == from_memory.model.ranks
    assert from_cartridge.parent_hash == from_memory.parent_hash == vocabulary_hash(english)


def test_move_special_tokens_puts_new_tokens_after_the_last_ordinary_one(english):
    text = corpus_text("multilingual.txt", 20_000)
    moved = english.extend(texts=[text], n_new_tokens=50, move_special_tokens=True)
    assert sorted(moved.model.token_bytes) == list(range(749))
    assert moved.special_tokens == {"<|endoftext|>": 749}
    kept = english.extend(texts=[text], n_new_tokens=50)
    assert kept.special_tokens == english.special_tokens == {"<|endoftext|>": 699}
    assert sorted(kept.model.token_bytes) == [*range(699), *range(700, 750)]


def test_bad_extension_settings_are_refused(english):
    with pytest.raises(ValueError, match="at least 1"):
        english.extend(texts=["text"], n_new_tokens=0)
    with pytest.raises(ValueError, match="backend"):
        english.extend(texts=["text"], n_new_tokens=5, backend="cuda")
    with pytest.raises(TypeError, match="by keyword"):
        english.extend(["text"], n_new_tokens=5)
    with pytest.raises(TypeError, match="lone str"):
        english.extend(texts="text", n_new_tokens=5)
    with pytest.raises(ValueError, match="after the last token id"):
        extend_bpe("text", english.model, 5, first_id=10, pattern=english.pattern)


# ------------------------------------------------------------------------------------ reserved special slots


def test_reserved_special_slots_are_filled_without_moving_an_id():
    text = corpus_text("big.txt", 50_000)
    tok = crayon.train(texts=[text], vocab_size=400, reserved_special_tokens=3, progress=False)
    assert tok.special_tokens == {"<|endoftext|>": 396, "<|reserved_special_token_0|>": 397,
                                  "<|reserved_special_token_1|>": 398, "<|reserved_special_token_2|>": 399}
    chat = tok.with_special_tokens(["<|im_start|>", "<|im_end|>"])
    assert chat.special_tokens == {"<|endoftext|>": 396, "<|im_start|>": 397, "<|im_end|>": 398,
                                   "<|reserved_special_token_2|>": 399}
    assert chat.n_vocab == tok.n_vocab == 400 and chat.vocabulary_version == 2
    assert chat.encode("<|im_start|>hi<|im_end|>", allowed_special="all") == [397, *tok.encode("hi"), 398]
    tok.encode("[SEP]")  # remembered by tok as ordinary text; a new special must still be refused by the clone
    with pytest.raises(ValueError, match="disallowed special token '\\[SEP\\]'"):
        tok.with_special_tokens(["[SEP]"]).encode("[SEP]")
    assert chat.with_special_tokens({"<|tool|>": 399}).special_tokens["<|tool|>"] == 399
    with pytest.raises(ValueError, match="only 1 free reserved"):
        chat.with_special_tokens(["<a>", "<b>"])
    with pytest.raises(ValueError, match="not a free reserved special slot"):
        chat.with_special_tokens({"<a>": 396})
    with pytest.raises(ValueError, match="already a token"):
        chat.with_special_tokens({"<|im_start|>": 399})


def test_extend_adds_reserved_slots_after_the_new_tokens(english):
    text = corpus_text("multilingual.txt", 20_000)
    extended = english.extend(texts=[text], n_new_tokens=30, reserved_special_tokens=2)
    assert extended.special_tokens == {"<|endoftext|>": 699, "<|reserved_special_token_0|>": 730,
                                       "<|reserved_special_token_1|>": 731}
    again = extended.extend(texts=[text[::-1]], n_new_tokens=5, reserved_special_tokens=1)
    assert again.special_tokens["<|reserved_special_token_2|>"] == 737 and again.vocabulary_version == 3


# ---------------------------------------------------------------------------------------------- lineage


def test_cartridges_carry_version_and_parent(english, tmp_path):
    extended = english.extend(texts=[corpus_text("multilingual.txt", 20_000)], n_new_tokens=20)
    extended.save(tmp_path / "ext.crayon")
    loaded = crayon.load(tmp_path / "ext.crayon")
    assert (loaded.vocabulary_version, loaded.parent_hash) == (2, vocabulary_hash(english))
    assert vocabulary_hash(loaded) == vocabulary_hash(extended)


def test_a_cartridge_without_lineage_still_loads(english, tmp_path):
    english.save(tmp_path / "new.crayon")
    with open_cartridge(tmp_path / "new.crayon") as cartridge:
        metadata = {k: v for k, v in cartridge.metadata.items() if k not in ("vocabulary_version", "parent_hash")}
        sections = {name: array.copy() for name, array in cartridge.sections.items()}
    write_cartridge(tmp_path / "old.crayon", metadata, sections)
    old = crayon.load(tmp_path / "old.crayon", verify=True)
    assert (old.vocabulary_version, old.parent_hash) == (1, None)
    assert json.dumps(old.special_tokens) == json.dumps(english.special_tokens)


# ---------------------------------------------------------------------------------- diff, promote, rollback


def test_diff_lists_added_moved_removed_and_changed_ids(english):
    text = corpus_text("multilingual.txt", 20_000)
    extended = english.extend(texts=[text], n_new_tokens=20, reserved_special_tokens=2)
    diff = diff_vocabularies(english, extended)
    assert not diff.breaking and len(diff.added) == 22 and not (diff.moved or diff.removed or diff.changed)
    filled = extended.with_special_tokens(["<|tool|>"])
    diff = diff_vocabularies(extended, filled)
    assert not diff.breaking and diff.filled == {720: ("<|reserved_special_token_0|>", "<|tool|>")}
    moved = english.extend(texts=[text], n_new_tokens=20, move_special_tokens=True)
    diff = diff_vocabularies(english, moved)
    assert diff.breaking and diff.moved == {"<|endoftext|>": (699, 719)} and 699 in diff.changed
    back = diff_vocabularies(moved, english)
    assert back.removed.keys() == set(range(700, 719)) and back.changed.keys() == {699, 719}


def test_cli_diff_exits_non_zero_when_an_id_changes(english, tmp_path, capsys):
    from crayon.cli import main

    text = corpus_text("multilingual.txt", 20_000)
    english.save(tmp_path / "a.crayon")
    english.extend(texts=[text], n_new_tokens=5).save(tmp_path / "b.crayon")
    english.extend(texts=[text], n_new_tokens=5, move_special_tokens=True).save(tmp_path / "c.crayon")
    main(["diff", str(tmp_path / "a.crayon"), str(tmp_path / "b.crayon")])
    out = capsys.readouterr().out
    assert "5 added, 0 removed, 0 moved, 0 ids changed" in out and "\n  700\t" in out
    with pytest.raises(SystemExit) as exit_info:
        main(["diff", str(tmp_path / "a.crayon"), str(tmp_path / "c.crayon")])
    assert exit_info.value.code == 1
    captured = capsys.readouterr()
    assert "699 -> 704\t<|endoftext|>" in captured.out and "would break" in captured.err


def test_promote_validates_keeps_the_parent_and_rolls_back(english, tmp_path, monkeypatch):
    monkeypatch.setenv("CRAYON_PROFILE_DIR", str(tmp_path))
    texts = [corpus_text("multilingual.txt", 5_000), corpus_text("big.txt", 5_000)]
    promote(english, "mine")
    v1 = crayon.load("mine")
    v2 = v1.extend(texts=[corpus_text("multilingual.txt", 30_000)], n_new_tokens=40)
    promote(v2, "mine", texts=texts)
    assert crayon.load("mine").vocabulary_version == 2 and crayon.load("mine@v1").vocabulary_version == 1
    assert crayon.load("mine").encode(texts[0]) == v2.encode(texts[0])
    with pytest.raises(VocabularyChangeError, match="changes ids"):
        promote(v1.extend(texts=[texts[0]], n_new_tokens=5, move_special_tokens=True), "mine", texts=texts)
    other_pattern = Tokenizer("o200k", v2.model, pattern="o200k_base", special_tokens=v2.special_tokens)
    with pytest.raises(VocabularyChangeError, match="pre-tokenizes text differently"):
        promote(derived_from(other_pattern, v2), "mine")
    same_tokens_no_lineage = Tokenizer("copy", v2.model, pattern=v2.pattern, special_tokens=v2.special_tokens)
    with pytest.raises(VocabularyChangeError, match="does not record"):
        promote(same_tokens_no_lineage, "mine")
    assert crayon.load("mine").vocabulary_version == 2  # refused versions replace nothing
    rollback("mine")
    assert vocabulary_hash(crayon.load("mine")) == vocabulary_hash(v1)
    assert vocabulary_hash(crayon.load("mine@v2")) == vocabulary_hash(v2)
    for taken in ["cl100k_base", "lite", "a.b"]:  # an OpenAI encoding, a shipped profile, a file name
        with pytest.raises(ValueError, match="new profile name"):
            promote(v2, taken)

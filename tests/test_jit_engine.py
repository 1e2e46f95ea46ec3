"""The jit engine's own choices: every span encoder gives the same tokens, long single-word inputs, a byte without
a token, a normalizer (Qwen's NFC) before the fused kernel (exactness against tiktoken and HF on every backend:
test_differential.py)."""

from __future__ import annotations

import json
import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import crayon
import hf_configs
from conftest import CORPUS_FILES, corpus_text, mergeable_ranks, tiktoken_encoding
from crayon.errors import UnknownTokenError
from crayon.formats.hf_io import spec_from_hf
from crayon.jit.engine import JitEngine
from crayon.jit.kernels import ENCODERS
from crayon.jit.pretokenize import PATTERN_IDS
from crayon.reference.bpe import BytePairModel
from crayon.tokenizer import Tokenizer
from strategies import FRAGMENTS

ENCODINGS = ["cl100k_base", "o200k_base"]


@pytest.fixture(scope="module", params=ENCODINGS)
def pair(request):
    """(crayon tokenizer on the jit backend, tiktoken encoder) for one vocabulary."""
    tok = crayon.load(request.param, backend="jit")
    assert tok.backend == "jit"
    return tok, tiktoken_encoding(request.param)


@pytest.mark.parametrize("name", ENCODINGS)
def test_every_span_encoder_gives_the_same_tokens(name):
    reference = tiktoken_encoding(name)
    text = corpus_text("multilingual.txt", 60_000) + corpus_text("enwik8_head.xml", 60_000)
    expected = reference.encode_ordinary(text)
    tok = crayon.load(name, backend="jit")
    for encoder in ENCODERS:
        engine = JitEngine(tok, encoder=encoder, tables=tok.engine.tables)
        assert engine.encode_ordinary(text) == expected, encoder


@pytest.mark.parametrize("name", ENCODINGS)
def test_long_single_word_inputs(name):
    """A run of one letter is one span; every encoder stays exact (and linear: see bench/peers.py)."""
    tok = crayon.load(name, backend="jit")
    plain = BytePairModel(mergeable_ranks(name), ignore_merges=False)
    for text in ["a" * 5000, "ab" * 2500, "好" * 2000, " " * 4000 + "x"]:
        expected = tiktoken_encoding(name).encode_ordinary(text)
        assert tok.encode_ordinary(text) == expected
        if len(text) <= 4000:
            assert expected == [t for span in crayon.reference.pretokenize.split(text, name)
                                for t in plain.encode_span(span.encode())]
    long_text = "a" * 200_000
    encoded = {encoder: JitEngine(tok, encoder=encoder, tables=tok.engine.tables).encode_ordinary(long_text)
               for encoder in ("backtrack", "heap")}
    assert encoded["backtrack"] == encoded["heap"]
    assert tok.decode(encoded["backtrack"]) == long_text


def test_a_byte_without_a_token_raises_a_typed_error():
    ranks = {bytes([b]): b for b in range(128)}
    tok = Tokenizer("ascii", BytePairModel(ranks), pattern="cl100k_base", backend="jit")
    assert tok.encode_ordinary("plain ascii") == [ord(c) for c in "plain ascii"]
    with pytest.raises(UnknownTokenError, match="has no token"):
        tok.encode_ordinary("café")


def test_remembered_short_texts_keep_the_special_token_contract(pair):
    """``encode`` and ``encode_ordinary`` remember short texts' tokens: a text remembered by one never skips the
    other's special-token check, a caller's change to a returned list changes nothing, the memory stays bounded."""
    tok, reference = pair
    tok = tok.with_backend("jit")  # a memory of its own
    special = "hi <|endoftext|>"
    assert tok.encode_ordinary(special) == tok.encode_ordinary(special) == reference.encode_ordinary(special)
    for _ in range(2):
        with pytest.raises(ValueError, match="disallowed special token"):
            tok.encode(special)
    assert tok.encode(special, allowed_special="all") == reference.encode(special, allowed_special="all")
    first = tok.encode("hello world")
    first.append(-1)
    assert tok.encode("hello world") == reference.encode("hello world")
    for i in range(crayon.tokenizer.SHORT_TEXTS_KEPT + 10):
        tok.encode(f"w{i}")
    assert tok.encode("w5") == reference.encode("w5")
    assert len(tok._short_encode) <= crayon.tokenizer.SHORT_TEXTS_KEPT


def test_short_calls_equal_the_array_path(pair):
    """One short text is encoded through reusable per-thread arrays; a span longer than the thread's scratch
    falls back to the general path: both give the general path's tokens."""
    tok, reference = pair
    engine = JitEngine(tok, tables=tok.engine.tables)
    for text in ["", "x", " é" * 40, "a" * 255, "a" * 257 + " b", "好" * 1024, "日本 " * 204, "z" * 1025]:
        expected = reference.encode_ordinary(text)
        assert engine.encode_ordinary(text) == expected
        assert engine.encode_ordinary_array(text).tolist() == expected


@pytest.mark.parametrize("kernels", ["aot", "numba"])
def test_id_lists_share_the_id_objects_and_count_references(kernels):
    """``id_list`` gives ``tolist``'s list, its items the shared id objects, each reference counted once (no
    leak, no early free), and refuses an id outside the vocabulary."""
    import sys

    from crayon.errors import CartridgeError
    from crayon.jit.engine import JitEngine
    from crayon.jit.id_lists import id_list, id_objects, object_addresses

    tok = crayon.load("cl100k_base", backend="jit")
    engine = JitEngine(tok, tables=tok.tables, kernels=kernels)
    objects = id_objects(1000)
    pair = object_addresses(objects)
    tokens = np.array([999, 400, 505, 505, 300, 999] * 50, np.uint32)  # no small int, which Python shares
    before = [sys.getrefcount(objects[i]) for i in (400, 505, 300, 999)]
    ids = id_list(engine.kernels.id_list_kernel, tokens, pair)
    assert ids == tokens.tolist() and all(ids[i] is objects[tokens[i]] for i in range(len(ids)))
    assert sys.getrefcount(ids) == 2  # ``ids`` and the call's argument
    grown = [sys.getrefcount(objects[i]) for i in (400, 505, 300, 999)]
    assert [g - b for g, b in zip(grown, before)] == [50, 100, 50, 100]
    del ids
    assert [sys.getrefcount(objects[i]) for i in (400, 505, 300, 999)] == before
    assert id_list(engine.kernels.id_list_kernel, np.zeros(0, np.uint32), pair) == []
    with pytest.raises(CartridgeError, match="outside the vocabulary"):
        id_list(engine.kernels.id_list_kernel, np.array([1, 2, 1000], np.uint32), pair)
    assert [sys.getrefcount(objects[i]) for i in (400, 505, 300, 999)] == before
    text = corpus_text("multilingual.txt", 20_000)
    assert engine.encode_ordinary(text) == engine.encode_ordinary_array(text).tolist()


@pytest.mark.parametrize("kernels", ["aot", "numba"])
def test_a_batchs_id_lists_share_the_id_objects_and_count_references(kernels):
    """``id_lists`` gives each text's list in one pass, references counted once; an id outside the vocabulary in a
    later text frees everything made before it; bounds that do not cut the tokens are refused."""
    import sys

    from crayon.errors import CartridgeError
    from crayon.jit.engine import JitEngine
    from crayon.jit.id_lists import id_lists, id_objects, object_addresses

    tok = crayon.load("cl100k_base", backend="jit")
    kernel = JitEngine(tok, tables=tok.tables, kernels=kernels).kernels.id_lists_kernel
    objects = id_objects(1000)
    pair = object_addresses(objects)
    tokens = np.array([999, 400, 505, 505, 300, 999] * 50, np.uint32)
    bounds = [0, 0, 7, 7, 150, 299, 300]
    before = [sys.getrefcount(objects[i]) for i in (400, 505, 300, 999)]
    lists = id_lists(kernel, tokens, bounds, pair)
    assert lists == [tokens[a:b].tolist() for a, b in zip(bounds[:-1], bounds[1:])]
    assert all(item is objects[t] for got, a in zip(lists, bounds) for item, t in zip(got, tokens[a:]))
    assert sys.getrefcount(lists) == 2 and all(sys.getrefcount(got) == 3 for got in lists)  # + ``got``
    grown = [sys.getrefcount(objects[i]) for i in (400, 505, 300, 999)]
    assert [g - b for g, b in zip(grown, before)] == [50, 100, 50, 100]
    del lists
    assert [sys.getrefcount(objects[i]) for i in (400, 505, 300, 999)] == before
    assert id_lists(kernel, np.zeros(0, np.uint32), [0], pair) == []
    assert id_lists(kernel, np.zeros(0, np.uint32), [0, 0], pair) == [[]]
    with pytest.raises(CartridgeError, match="outside the vocabulary"):
        id_lists(kernel, np.append(tokens, 1000).astype(np.uint32), [0, 150, 301], pair)
    assert [sys.getrefcount(objects[i]) for i in (400, 505, 300, 999)] == before
    for bad in ([], [1, 300], [0, 299], [0, 200, 100, 300]):
        with pytest.raises(ValueError, match="bounds"):
            id_lists(kernel, tokens, bad, pair)


@pytest.mark.parametrize("kernels", ["aot", "numba"])
def test_extend_ids_appends_the_id_objects_and_counts_references(kernels):
    """``extend_ids`` appends what ``id_list`` would make to an existing list, each reference counted once, and
    refuses an id outside the vocabulary (what came before it stays) and a list that is not a list."""
    import sys

    from crayon.errors import CartridgeError
    from crayon.jit.engine import JitEngine
    from crayon.jit.id_lists import extend_ids, id_objects, object_addresses

    tok = crayon.load("cl100k_base", backend="jit")
    kernel = JitEngine(tok, tables=tok.tables, kernels=kernels).kernels.id_list_extend_kernel
    objects = id_objects(1000)
    pair = object_addresses(objects)
    tokens = np.array([999, 400, 505, 505, 300, 999] * 50, np.uint32)
    before = [sys.getrefcount(objects[i]) for i in (400, 505, 300, 999)]
    ids = ["start"]
    extend_ids(kernel, ids, tokens[:100], pair)
    extend_ids(kernel, ids, np.zeros(0, np.uint32), pair)
    extend_ids(kernel, ids, tokens[100:], pair)
    assert ids == ["start", *tokens.tolist()] and all(ids[i + 1] is objects[t] for i, t in enumerate(tokens))
    ids.extend(["end"] * 1000)  # the item array the kernel grew goes on growing as any list's
    assert ids[:301] == ["start", *tokens.tolist()] and ids[301:] == ["end"] * 1000
    del ids[301:]
    grown = [sys.getrefcount(objects[i]) for i in (400, 505, 300, 999)]
    assert [g - b for g, b in zip(grown, before)] == [50, 100, 50, 100]
    del ids
    assert [sys.getrefcount(objects[i]) for i in (400, 505, 300, 999)] == before
    ids = []
    with pytest.raises(CartridgeError, match="outside the vocabulary"):
        extend_ids(kernel, ids, np.array([400, 2, 1000, 3], np.uint32), pair)
    assert ids == [400, 2]
    with pytest.raises(TypeError, match="list"):
        extend_ids(kernel, (), tokens, pair)


_C_API_LISTS = """
import sys
import numpy as np
import crayon.jit.id_lists as lists
from crayon.errors import CartridgeError

lists.DIRECT_ITEMS = lists.INLINE_REFERENCES = False  # what a free-threaded CPython compiles
objects = lists.id_objects(1000)
pair = lists.object_addresses(objects)
tokens = np.array([999, 400, 505, 505, 300, 999] * 50, np.uint32)
before = [sys.getrefcount(objects[i]) for i in (400, 505, 300, 999)]
ids = lists.id_list(lists.id_list_kernel, tokens, pair)
batch = lists.id_lists(lists.id_lists_kernel, tokens, [0, 100, 100, 300], pair)
joined = lists.joined_ids(lists.id_list_extend_kernel, [tokens[:7], tokens[7:]], pair)
assert ids == joined == tokens.tolist() and batch == [ids[:100], [], ids[100:]]
grown = [sys.getrefcount(objects[i]) for i in (400, 505, 300, 999)]
assert [g - b for g, b in zip(grown, before)] == [150, 300, 150, 300]
del ids, batch, joined
assert [sys.getrefcount(objects[i]) for i in (400, 505, 300, 999)] == before
for call in (lambda: lists.id_list(lists.id_list_kernel, np.array([1, 1000], np.uint32), pair),
             lambda: lists.id_lists(lists.id_lists_kernel, np.array([1, 1000], np.uint32), [0, 1, 2], pair)):
    try:
        call()
    except CartridgeError:
        pass
    else:
        raise AssertionError("an id outside the vocabulary was not refused")
partial = []
try:
    lists.extend_ids(lists.id_list_extend_kernel, partial, np.array([400, 2, 1000, 3], np.uint32), pair)
except CartridgeError:
    assert partial == [400, 2]
else:
    raise AssertionError("an id outside the vocabulary was not refused")
del partial
assert [sys.getrefcount(objects[i]) for i in (400, 505, 300, 999)] == before
for kernel, call in ((lists.id_list_kernel, "PyList_SetItem"), (lists.id_lists_kernel, "PyList_SetItem"),
                     (lists.id_list_extend_kernel, "PyList_Append")):
    assert all(call in code for code in kernel.inspect_llvm().values()), "not compiled the C API way"
print("ok")
"""


def test_the_list_kernels_c_api_path_makes_the_same_lists(tmp_path):
    """Where CPython's list layout is not written directly (a free-threaded build), the list kernels call
    ``PyList_SetItem`` / ``PyList_Append`` / ``Py_IncRef``: compiled that way in a fresh process, they make the
    same lists, count references once and refuse an id outside the vocabulary."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "CRAYON_AOT": "0"}
    done = subprocess.run([sys.executable, "-c", _C_API_LISTS], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


# --- a normalizer before the fused kernel: Qwen 2's tokenizer.json (NFC, then Qwen 2's regex) -----------------

# Text NFC changes: combining sequences (composed, reordered), Hangul jamo (composed into syllables), CJK
# compatibility ideographs and other singletons (replaced), composition exclusions (decomposed), and characters
# that lengthen; then characters HF's Unicode 9.0 tables leave as they are, which Python's would change.
NOT_NFC = ["e\u0301", "a\u0323\u0301", "a\u0301\u0323", "\u0301", "\u1100\u1161", "\u1100\u1161\u11a8", "\uac00\u11a8",
           "\u1161", "\uf900", "\uf9dc", "\U0002f800", "\u212b", "\u2126", "\u0958", "\u0344", "\ufb2c", "\U0001d160",
           "\u304b\u3099", "\u0dd9\u0dcf", "\u07fd", "\U00010781"]
non_nfc_text = st.lists(
    st.one_of(st.sampled_from(NOT_NFC + [fragment for fragment in FRAGMENTS if "<|" not in fragment]),  # no specials
              st.text(hf_configs.assigned_chars, max_size=3)),
    max_size=20,
).map("".join)


@pytest.fixture(scope="module")
def qwen():
    """(HF tokenizer, Crayon jit tokenizer, the same without its added tokens) of a Qwen 2-style tokenizer.json: NFC;
    Split(Qwen 2's regex, Isolated) then ByteLevel without its regex; a byte-level BPE; added tokens."""
    hf = hf_configs.trained("qwen2_nfc")
    tok = Tokenizer.from_spec(spec_from_hf(json.loads(hf.to_str())), backend="jit")
    plain = Tokenizer("qwen-plain", tok.model, pattern=None, pretokenizer=tok.pretokenizer,
                      normalizer=tok.normalizer, backend="jit")
    return hf, tok, plain


def _hf_ids(hf, texts):
    return [encoding.ids for encoding in hf.encode_batch(texts, add_special_tokens=False)]


def test_a_qwen_file_runs_the_hand_written_machine_after_its_nfc(qwen):
    """Qwen's NFC is applied before cl100k's hand-written machine (``PATTERN_IDS["qwen2"]``), not the compiled
    regex; HF's ids on the corpora, whole, in lines on two threads, and decomposed (NFD: every accent to compose)."""
    hf, tok, plain = qwen
    assert tok.normalizer.form == "NFC"
    assert tok.engine.pattern_id == PATTERN_IDS["qwen2"] and tok.engine.compiled_splits is None
    assert plain.engine.pattern_id == PATTERN_IDS["qwen2"]
    texts = [corpus_text(name, 20_000) for name in CORPUS_FILES]
    texts.append(unicodedata.normalize("NFD", corpus_text("multilingual.txt", 20_000)))
    for text in texts:
        expected = hf.encode(text, add_special_tokens=False).ids
        assert tok.encode(text, allowed_special="all") == expected
        assert plain.encode_ordinary(text) == expected
        lines = text.splitlines()
        assert plain.encode_batch(lines, num_threads=2) == _hf_ids(hf, lines)


@settings(max_examples=150, deadline=None)
@given(texts=st.lists(non_nfc_text, min_size=1, max_size=4))
def test_qwen_ids_match_hf_on_text_nfc_changes(qwen, texts):
    """Combining sequences, Hangul jamo, compatibility ideographs ...: HF's ids and offsets one text at a time
    (short and long calls), in batches on two threads and in the flat form."""
    hf, tok, plain = qwen
    long_text = "".join(texts) * (1100 // max(1, len("".join(texts))) + 1)  # past the short call's 1024 characters
    expected = _hf_ids(hf, [*texts, long_text])
    for text, ids in zip([*texts, long_text], expected):
        assert plain.encode_ordinary(text) == ids
        assert plain.encode_to_numpy(text).tolist() == ids
        assert tok.engine.encode_ordinary(text) == ids
    assert plain.encode_batch(texts, num_threads=2) == expected[:-1]
    tokens, offsets = plain.encode_batch_flat(texts, num_threads=2)
    assert [tokens[offsets[i] : offsets[i + 1]].tolist() for i in range(len(texts))] == expected[:-1]
    text = texts[0] + "<think>" + texts[-1]
    encoding = hf.encode(text, add_special_tokens=False)
    assert tok.encode(text, allowed_special="all") == encoding.ids
    assert tok.encode_with_offsets(text, allowed_special="all") == (encoding.ids, encoding.offsets)


def test_qwen_nfc_that_outgrows_the_short_call_buffer(qwen):
    """NFC lengthens U+1D160 threefold (12 bytes): 1000 of them, a short call by length, take the general path."""
    hf, _, plain = qwen
    for text in ["\U0001d160" * 1000, "\ufb2c" * 1024, "x\u0344" * 512]:
        assert plain.encode_ordinary(text) == hf.encode(text, add_special_tokens=False).ids


def test_qwen_nfc_follows_the_repair_of_lone_surrogates(qwen):
    """A lone surrogate is replaced (U+FFFD) before NFC, as the reference engine does: the same ids."""
    _, _, plain = qwen
    reference = plain.with_backend("reference")
    texts = ["e\u0301\ud800\u0301", "\udfff\u1100\u1161 x", "\u212b" * 600 + "\ud800"]
    for text in texts:
        assert plain.encode_ordinary(text) == reference.encode_ordinary(text)
        assert plain.encode_to_numpy(text).tolist() == reference.encode_ordinary(text)
    assert plain.encode_batch(texts, num_threads=2) == [reference.encode_ordinary(text) for text in texts]


def test_qwen_bytes_are_normalized_before_the_kernel(qwen):
    """``encode_ordinary_bytes`` and the engine's flat UTF-8 call (the dataset pipeline's) never hand UTF-8 that
    NFC would change straight to the kernel; bytes that are not UTF-8 are refused, as for any tokenizer with a
    normalizer."""
    _, _, plain = qwen
    texts = ["Cafe\u0301 \u1100\u1161\u11a8 \uf900", "\u212b", "plain"]
    assert plain.encode_ordinary_bytes(texts[0].encode()).tolist() == plain.encode_ordinary(texts[0])
    data = np.frombuffer("".join(texts).encode(), np.uint8)
    offsets = np.cumsum([0, *(len(text.encode()) for text in texts)])
    tokens, counts = plain.engine.encode_utf8_flat(data, offsets)
    assert [part.tolist() for part in np.split(tokens, np.cumsum(counts)[:-1])] == plain.encode_batch(texts)
    with pytest.raises(ValueError, match="normalizer"):
        plain.encode_ordinary_bytes(b"caf\xe9")


def test_only_nfc_alone_keeps_the_hand_written_machine(qwen):
    """Another normalizer (NFKC) in front of Qwen's split keeps the compiled regex."""
    config = json.loads(qwen[0].to_str())
    config["normalizer"] = {"type": "NFKC"}
    tok = Tokenizer.from_spec(spec_from_hf(config), backend="jit")
    assert tok.engine.pattern_id is None and tok.engine.compiled_splits is not None

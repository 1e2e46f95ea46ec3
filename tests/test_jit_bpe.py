"""The jit BPE modules against their reference twins: span encoders (merge loop, heap, backtracking), the
backtracking tables and its exactness condition, the piece cache, and corrupt tables."""

from __future__ import annotations

import functools
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import corpus_text, mergeable_ranks
from crayon.errors import CartridgeError, CrayonError, UnsupportedComponentError
from crayon.jit import backtrack as jit_backtrack
from crayon.jit import cache as jit_cache
from crayon.jit.dat import interleave_dat, prefix_states
from crayon.jit.tables import build_bpe_tables, check_bpe_tables, kernel_tables
from crayon.jit.engine import JitEngine
from crayon.jit.kernels import ENCODERS, encode_spans_kernel
from crayon.reference import cache as ref_cache
from crayon.reference.backtrack import BacktrackEncoder
from crayon.reference.bpe import BytePairModel
from crayon.reference.pretokenize import split
from crayon.tokenizer import Tokenizer
from strategies import tokenizer_text

ENCODINGS = ["cl100k_base", "o200k_base"]


@functools.lru_cache(maxsize=None)
def model_and_tables(name: str):
    model = BytePairModel(mergeable_ranks(name))
    return model, build_bpe_tables(model)


@functools.lru_cache(maxsize=None)
def plain_model(name: str) -> BytePairModel:
    """The model without tiktoken's whole-span lookup: the merge loop proper."""
    return BytePairModel(mergeable_ranks(name), ignore_merges=False)


def encode_spans(tables, spans: list[bytes], encoder: str) -> list[list[int]]:
    """Each span encoded alone by the jit kernel (a fresh cache, so every span reaches the encoder once)."""
    kernel = kernel_tables(tables)
    data = np.frombuffer(b"".join(spans), np.uint8)
    ends = np.cumsum([len(span) for span in spans]).astype(np.int64)
    longest = max(map(len, spans), default=1)
    out = np.empty(len(data), np.uint32)
    caches = (jit_cache.new_piece_cache(64), jit_cache.new_long_piece_cache(16),
              jit_cache.new_long_piece_cache(4, ref_cache.LONGER_ROW_WORDS))
    memo = jit_backtrack.new_validity_memo(64)
    scratch, alive = np.empty(5 * longest, np.int64), np.empty(longest + 1, np.uint8)
    count = encode_spans_kernel(data, ends, kernel, ENCODERS[encoder], *caches, memo, scratch, alive, out)
    assert count >= 0
    return _cut(out[:count].tolist(), tables, spans)


def _cut(tokens: list[int], tables, spans: list[bytes]) -> list[list[int]]:
    """Split a token sequence back into its spans' tokens by their byte lengths."""
    lengths = np.diff(tables["token_offsets"])
    result, position = [], 0
    for span in spans:
        taken, covered = [], 0
        while covered < len(span):
            taken.append(tokens[position])
            covered += int(lengths[tokens[position]])
            position += 1
        result.append(taken)
    assert position == len(tokens)
    return result


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("encoder", list(ENCODERS))
def test_span_encoders_match_reference_on_corpora(name, encoder):
    model, tables = model_and_tables(name)
    spans = [s.encode() for corpus in ("big.txt", "multilingual.txt", "python_code.py")
             for s in split(corpus_text(corpus, 12_000), name)]
    assert encode_spans(tables, spans, encoder) == [model.encode_span(span) for span in spans]


@pytest.mark.parametrize("name", ENCODINGS)
@settings(max_examples=40, deadline=None)
@given(data=st.lists(st.binary(min_size=1, max_size=40), min_size=1, max_size=8))
def test_span_encoders_match_reference_on_any_bytes(name, data):
    model, tables = model_and_tables(name)
    expected = [model.encode_span(span) for span in data]
    for encoder in ENCODERS:
        assert encode_spans(tables, data, encoder) == expected


@pytest.mark.parametrize("name", ENCODINGS)
def test_long_spans_are_exact(name):
    model, tables = model_and_tables(name)
    spans = [b"a" * 1200, b"ab" * 500, "日本語のテキスト".encode() * 40, bytes(range(256)) * 2, b" " * 1000]
    expected = [plain_model(name).encode_span(span) for span in spans]
    for encoder in ENCODERS:
        assert encode_spans(tables, spans, encoder) == expected


@pytest.mark.parametrize("name", ENCODINGS)
def test_backtracking_tables_match_the_reference_derivation(name):
    """The reference derives canonical splits as the ``bpe`` crate does; the jit runs the merge loop on every
    token. They agree on every token of both vocabularies."""
    model, tables = model_and_tables(name)
    reference = BacktrackEncoder(model)
    rows = tables["token_rows"]
    reachable = rows[:, jit_backtrack.SPLIT_LEFT] >= 0
    assert set(np.flatnonzero(reachable).tolist()) == set(reference.split)
    for token, (left, right) in reference.split.items():
        assert (rows[token, jit_backtrack.SPLIT_LEFT], rows[token, jit_backtrack.SPLIT_RIGHT]) == (left, right)
        assert rows[token, jit_backtrack.FORMED_AT] == reference.formed_at[token]
    for token in random.Random(0).sample(sorted(reference.split), 2000):
        expected = reference.next_prefix(token)
        assert rows[token, jit_backtrack.NEXT_PREFIX] == (-1 if expected is None else expected)


@pytest.mark.parametrize("name", ENCODINGS)
def test_backtracking_reproduces_the_merge_loop_on_every_token(name):
    """The exactness condition holds for the whole vocabulary, and backtracking gives the merge loop's tokens on
    the bytes of every token (the merge loop's own answer, not tiktoken's whole-span shortcut)."""
    model, tables = model_and_tables(name)
    assert jit_backtrack.backtracking_violation(tables) is None
    offsets, blob = tables["token_offsets"], tables["token_bytes"].tobytes()
    spans = [blob[offsets[t] : offsets[t + 1]] for t in range(len(offsets) - 1) if offsets[t + 1] > offsets[t]]
    _, pair_table, _, _, _, _, rows, dat_rows, _, starts = kernel_tables(tables)
    data = np.frombuffer(b"".join(spans), np.uint8)
    out = np.empty(len(data), np.uint32)
    alive, memo = np.empty(300, np.uint8), jit_backtrack.new_validity_memo()
    by_backtracking, start = [], 0
    for span in spans:
        count = jit_backtrack.backtrack_span(data, start, start + len(span), out, 0, (pair_table, rows, dat_rows, starts),
                                             alive, memo)
        by_backtracking.append(out[:count].tolist())
        start += len(span)
    sample = random.Random(1).sample(range(len(spans)), 3000)
    assert [by_backtracking[i] for i in sample] == [plain_model(name).encode_span(spans[i]) for i in sample]
    reachable = rows[:, jit_backtrack.SPLIT_LEFT] >= 0
    ids = [t for t in range(len(offsets) - 1) if offsets[t + 1] > offsets[t]]
    assert all(tokens == [t] for t, tokens in zip(ids, by_backtracking) if reachable[t])


@settings(max_examples=40, deadline=None)
@given(text=tokenizer_text)
def test_reference_backtracking_matches_merge_loop(text):
    model, _ = model_and_tables("cl100k_base")
    encoder = _reference_backtrack("cl100k_base")
    for span in split(text, "cl100k_base"):
        assert encoder.encode_span(span.encode()) == model.encode_span(span.encode())


@functools.lru_cache(maxsize=None)
def _reference_backtrack(name: str) -> BacktrackEncoder:
    return BacktrackEncoder(model_and_tables(name)[0])


def _inverted_vocabulary() -> dict[bytes, int]:
    """Every byte, then "ab" formed after "abc" although "abc" is made from it: backtracking is not exact here."""
    ranks = {bytes([b]): b for b in range(256)}
    ranks.update({b"abc": 256, b"ab": 257, b"bc": 258})
    return ranks


def test_a_vocabulary_failing_the_condition_is_detected_and_encoded_by_merges():
    model = BytePairModel(_inverted_vocabulary())
    tables = build_bpe_tables(model)
    reason = jit_backtrack.backtracking_violation(tables)
    assert reason is not None and "256" in reason
    tok = Tokenizer("inverted", model, pattern=r"\S+|\s+", backend="reference")
    with pytest.raises(UnsupportedComponentError, match="not exact"):
        JitEngine(tok, encoder="backtrack", tables=tables)
    engine = JitEngine(tok, tables=tables)
    assert engine.encoder == "heap" and engine.backtrack_violation == reason
    for text in ["abc", "xabcabx", "abcbc", "aabbcc abc"]:
        assert engine.encode_ordinary(text) == tok.encode_ordinary(text)


# -------------------------------------------------------------------------------------------------- cache


def _jit_cache_entries(cache: np.ndarray) -> list[tuple[bytes, tuple[int, ...]] | None]:
    entries = []
    for row in cache:
        length, count = int(row[2]) & 0xFF, (int(row[2]) >> 8) & 0xFF
        if length == 0:
            entries.append(None)
            continue
        key = int(row[0]).to_bytes(8, "little") + int(row[1]).to_bytes(8, "little")
        words = [int(row[2]) >> 32, int(row[3]) & 0xFFFFFFFF, int(row[3]) >> 32]
        tokens = tuple(words[:count])
        entries.append((key[:length], tokens))
    return entries


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(st.tuples(st.binary(min_size=1, max_size=20), st.lists(st.integers(0, 2**32 - 1), max_size=10)),
                    max_size=60))
def test_piece_cache_matches_reference(ops):
    reference = ref_cache.PieceCache(n_buckets=8)
    cache = jit_cache.new_piece_cache(8)
    out = np.zeros(32, np.uint32)
    for span, tokens in ops:
        data = np.frombuffer(span, np.uint8)
        if ref_cache.is_cacheable(span):
            found = jit_cache.cached_get(cache, data, 0, len(span), out, 0)
            expected = reference.get(span)
            assert (None if found < 0 else out[:found].tolist()) == expected
        reference.put(span, tokens)
        jit_cache.cached_put(cache, data, 0, len(span), np.array(tokens, np.uint32), 0, len(tokens))
        assert _jit_cache_entries(cache) == reference.slots


def _jit_long_cache_entries(cache: np.ndarray) -> list:
    """The long-piece cache's rows as the reference's (span, tokens) entries."""
    entries = []
    for row in cache:
        length, count = int(row[0]) & 0xFFFF, int(row[0]) >> 16
        if length == 0:
            entries.append(None)
            continue
        words = -(-length // 8)
        key = b"".join(int(word).to_bytes(8, "little") for word in row[1 : 1 + words])
        tokens = [(int(row[1 + words + i // 2]) >> (32 * (i % 2))) & 0xFFFFFFFF for i in range(count)]
        entries.append((key[:length], tuple(tokens)))
    return entries


@pytest.mark.parametrize("longer", [False, True], ids=["long", "longer"])
@settings(max_examples=40, deadline=None)
@given(ops=st.lists(st.tuples(st.binary(min_size=1, max_size=300), st.lists(st.integers(0, 2**32 - 1), max_size=30)),
                    max_size=40))
def test_long_piece_caches_match_reference(longer, ops):
    """Same gets, same puts: the jit long-piece caches answer as the reference's and hold the same rows (a span
    of the other cache's lengths is never looked up or put there: the kernels pick the cache by length)."""
    if longer:
        reference, cache = ref_cache.longer_piece_cache(8), jit_cache.new_long_piece_cache(8, ref_cache.LONGER_ROW_WORDS)
    else:
        reference, cache = ref_cache.LongPieceCache(8, row_words=6), jit_cache.new_long_piece_cache(8, 6)
    out = np.zeros(400, np.uint32)
    for span, tokens in ops:
        if not reference.min_bytes <= len(span) <= reference.max_bytes:
            continue
        data = np.frombuffer(span, np.uint8)
        found = jit_cache.cached_long_get(cache, data, 0, len(span), out, 0)
        assert (None if found < 0 else out[:found].tolist()) == reference.get(span)
        if not ref_cache.is_cacheable(span, tokens):
            reference.put(span, tokens)
            jit_cache.cached_long_put(cache, data, 0, len(span), np.array(tokens, np.uint32), 0, len(tokens))
        assert _jit_long_cache_entries(cache) == reference.rows


def test_long_piece_cache_keeps_what_the_piece_cache_refuses():
    long, longer = ref_cache.LongPieceCache(64), ref_cache.longer_piece_cache(64)
    kept = {"é".encode(): [1, 2, 3, 4], b"x" * 17: [5], b"y" * 32: list(range(22)), b"u" * 256: list(range(190))}
    refused = {"ü".encode(): [1, 2, 3], b"ab": [1, 2, 3, 4], b"z" * 257: [6], b"w" * 32: list(range(23)),
               b"t" * 256: list(range(191)), b"v" * 20: []}
    for span, tokens in {**refused, **kept}.items():
        long.put(span, tokens)
        longer.put(span, tokens)
    assert all((long.get(span) or longer.get(span)) == tokens for span, tokens in kept.items())
    assert all(long.get(span) is None and longer.get(span) is None for span in refused)


def test_long_piece_row_matches_reference():
    rng = random.Random(3)
    for _ in range(500):
        span = bytes(rng.randrange(256) for _ in range(rng.randint(2, 256)))
        before = bytes(rng.randrange(256) for _ in range(rng.randint(0, 3)))
        after = bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
        buffer = np.frombuffer(before + span + after, np.uint8)
        assert jit_cache.long_piece_row(buffer, len(before), len(before) + len(span), 1024) == ref_cache.long_piece_row(span, 1024)


def test_piece_cache_bucket_hash_matches_reference():
    rng = random.Random(2)
    for _ in range(500):
        span = bytes(rng.randrange(256) for _ in range(rng.randint(2, 16)))
        # bytes around the span: a span with 16 bytes from its start to the end of the buffer is read in words
        before = bytes(rng.randrange(256) for _ in range(rng.randint(0, 3)))
        after = bytes(rng.randrange(256) for _ in range(rng.randint(0, 20)))
        buffer = np.frombuffer(before + span + after, np.uint8)
        low, high = jit_cache.piece_key(buffer, len(before), len(before) + len(span))
        assert (int(low), int(high)) == ref_cache.piece_key(span)
        assert jit_cache.piece_row(np.uint64(low), np.uint64(high), len(span), 2 * 1024) == 2 * ref_cache.piece_bucket(span, 1024)


# ------------------------------------------------------------------------------------------- corrupt tables


@pytest.mark.parametrize("table", ["pair_table", "token_rows", "dat_rows", "prefix_states", "encoder_flags", "byte_tokens",
                                   "token_offsets", "vocab_index"])
def test_corrupt_tables_give_errors_or_tokens_never_a_crash(table):
    """Garbage in any table: the kernels answer with an error or (wrong) tokens, and never read outside an array
    (a read outside would crash this process or hang it)."""
    model, clean = model_and_tables("cl100k_base")
    rng = np.random.default_rng(3)
    text = corpus_text("multilingual.txt", 3000) + corpus_text("python_code.py", 3000)
    spans = [s.encode() for s in split(text, "cl100k_base")]
    for trial in range(3):
        tables = dict(clean)
        corrupt = tables[table].copy()
        flat = corrupt.reshape(-1)
        where = rng.integers(0, flat.size, size=max(1, flat.size // 50))
        flat[where] = rng.integers(-(2**31), 2**31 - 1, size=where.size).astype(flat.dtype)
        tables[table] = corrupt
        tables["settings"] = np.array([1, tables["settings"][1]], np.int64)
        try:
            check_bpe_tables(tables)
            jit_backtrack.check_backtrack_tables(tables)
            for encoder in ENCODERS:
                encode_spans_raw(tables, spans, encoder)
        except (CrayonError, ValueError, KeyError):
            pass


def encode_spans_raw(tables, spans, encoder):
    """Like ``encode_spans`` without checking the tokens."""
    kernel = kernel_tables(tables)
    data = np.frombuffer(b"".join(spans), np.uint8)
    ends = np.cumsum([len(span) for span in spans]).astype(np.int64)
    out = np.empty(len(data), np.uint32)
    longest = max(map(len, spans))
    return encode_spans_kernel(data, ends, kernel, ENCODERS[encoder], jit_cache.new_piece_cache(64),
                               jit_cache.new_long_piece_cache(16),
                               jit_cache.new_long_piece_cache(4, ref_cache.LONGER_ROW_WORDS), jit_backtrack.new_validity_memo(64), np.empty(5 * longest, np.int64),
                               np.empty(longest + 1, np.uint8), out)


def test_tables_of_another_format_are_refused():
    _, tables = model_and_tables("cl100k_base")
    stale = {**tables, "settings": np.array([1, 1], np.int64)}
    with pytest.raises(CartridgeError, match="another format"):
        check_bpe_tables(stale)
    missing = {name: array for name, array in tables.items() if name != "pair_table"}
    with pytest.raises(CartridgeError, match="pair_table"):
        check_bpe_tables(missing)
    with pytest.raises(CartridgeError, match="token_rows"):
        jit_backtrack.check_backtrack_tables({**tables, "token_rows": tables["token_rows"][:, :5].copy()})
    outside = tables["prefix_states"].copy()
    outside[ord("a")] = len(tables["dat_rows"])
    with pytest.raises(CartridgeError, match="prefix_states"):
        jit_backtrack.check_backtrack_tables({**tables, "prefix_states": outside})


def test_stored_derived_tables_are_what_the_dat_and_rows_give():
    """The tables an engine used to derive at load are built with the others (and stored in cartridges): they are
    exactly what deriving them again gives."""
    _, tables = model_and_tables("cl100k_base")
    dat_rows = interleave_dat(tables["dat_base"], tables["dat_check"], tables["dat_values"])
    assert np.array_equal(tables["dat_rows"], dat_rows)
    assert np.array_equal(tables["prefix_states"], prefix_states(dat_rows))
    assert tables["encoder_flags"].tolist() == [0, jit_backtrack.late_token(tables["token_rows"])] == [0, -1]



def test_prefetch_changes_nothing_and_ignores_spans_outside_the_data():
    caches = jit_cache.new_piece_cache(8), jit_cache.new_long_piece_cache(8), jit_cache.new_long_piece_cache(8, 32)
    short_tokens = np.zeros((16, 4), np.uint64)
    data = np.frombuffer(b"hello world", np.uint8)
    for start, end in [(0, 5), (5, 11), (0, 11), (3, 3), (2**40, 2**40 + 4), (-2**40, -2**40 + 4), (8, 20)]:
        assert jit_cache.prefetch_piece(caches, short_tokens, data, start, end) is None
    assert not any(cache.any() for cache in caches) and not short_tokens.any()

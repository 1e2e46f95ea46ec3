"""Double-array trie: reference and jit compilers give identical arrays that honour the DAT contract."""

import random
from pathlib import Path

import numpy as np
import pytest
from conftest import CORPORA_DIR, mergeable_ranks
from hypothesis import given, settings
from hypothesis import strategies as st

from crayon.jit import dat as jit_dat
from crayon.reference import dat as ref_dat

vocabularies = st.lists(st.binary(min_size=1, max_size=6), max_size=60, unique=True)


def cl100k_slice(step: int) -> tuple[list[bytes], list[int]]:
    """Every ``step``-th cl100k token (in byte order, so every slice has all kinds of prefixes) and its rank."""
    ranks = mergeable_ranks("cl100k_base")
    tokens = sorted(ranks)[::step]
    return tokens, [ranks[token] for token in tokens]


def assert_same_arrays(left, right):
    for a, b in zip(left, right, strict=True):
        assert a.dtype == b.dtype == np.int32
        np.testing.assert_array_equal(a, b)


def assert_contract(base, check, values, tokens, ids):
    """The module contract: root 0 with CHECK -1, free slots -1, every token found, nothing else stored."""
    assert len(base) == len(check) == len(values) >= 1
    assert check[0] == -1 and values[0] == -1
    assert ((check >= -1) & (check < len(check))).all()
    states = check >= 0
    assert (base[~states][1:] == 0).all() and (values[~states] == -1).all()
    parents = check[states]
    labels = np.flatnonzero(states) - base[parents]
    assert ((labels >= 0) & (labels <= 255)).all()
    assert np.count_nonzero(values >= 0) == len(tokens)
    for token, token_id in zip(tokens, ids):
        assert ref_dat.lookup(base, check, values, token) == token_id


@settings(max_examples=150, deadline=None)
@given(vocabularies, st.sampled_from(ref_dat.PACKING_ORDERS), st.randoms(use_true_random=False))
def test_reference_and_jit_identical_on_random_vocabularies(tokens, order, rng):
    ids = rng.sample(range(10 * len(tokens) + 1), len(tokens))
    weights = [rng.randrange(1000) for _ in tokens]
    reference = ref_dat.compile_dat(tokens, ids, order=order, weights=weights)
    assert_same_arrays(reference, jit_dat.compile_dat(tokens, ids, order=order, weights=weights))
    assert_contract(*reference, tokens, ids)
    assert ref_dat.dat_tokens(*reference) == dict(zip(tokens, ids))


@pytest.mark.parametrize("order", ref_dat.PACKING_ORDERS)
def test_reference_and_jit_identical_on_cl100k_slice(order):
    tokens, ids = cl100k_slice(step=41)
    weights = [len(token) * 7 % 13 for token in tokens]
    reference = ref_dat.compile_dat(tokens, ids, order=order, weights=weights)
    assert_same_arrays(reference, jit_dat.compile_dat(tokens, ids, order=order, weights=weights))
    assert_contract(*reference, tokens, ids)


def test_arrays_do_not_depend_on_input_order():
    tokens, ids = cl100k_slice(step=7)
    pairs = list(zip(tokens, ids))
    random.Random(0).shuffle(pairs)
    shuffled_tokens, shuffled_ids = zip(*pairs)
    assert_same_arrays(jit_dat.compile_dat(tokens, ids), jit_dat.compile_dat(shuffled_tokens, shuffled_ids))


def test_full_cl100k_vocabulary_round_trips_through_the_jit_dat():
    ranks = mergeable_ranks("cl100k_base")
    base, check, values = jit_dat.compile_dat(list(ranks), list(ranks.values()))
    assert check[0] == -1 and np.count_nonzero(values >= 0) == len(ranks)
    assert np.count_nonzero(check >= 0) + 1 == len(check)  # every slot used: density 1.0 on cl100k
    blob = np.frombuffer(b"".join(ranks), dtype=np.uint8)
    start = 0
    for token, rank in ranks.items():
        assert jit_dat.lookup(base, check, values, blob, start, start + len(token)) == rank
        start += len(token)


def test_jit_walkers_match_reference_lookup():
    tokens, ids = cl100k_slice(step=13)
    dat = jit_dat.compile_dat(tokens, ids)
    rng = random.Random(1)
    probes = [token + bytes([rng.randrange(256)]) for token in rng.sample(tokens, 300)]
    probes += [token[: max(1, len(token) - 1)] for token in rng.sample(tokens, 300)]
    for probe in probes:
        data = np.frombuffer(b"~" + probe, dtype=np.uint8)
        assert jit_dat.lookup(*dat, data, 1, len(data)) == ref_dat.lookup(*dat, probe)
        matches = [(ref_dat.lookup(*dat, probe[:k]), k) for k in range(1, len(probe) + 1)]
        matches = [match for match in matches if match[0] >= 0]
        expected = matches[-1] if matches else (-1, 0)
        assert jit_dat.longest_prefix(*dat, data, 1, len(data)) == expected


def test_walkers_never_read_out_of_bounds_on_hostile_arrays():
    rng = np.random.default_rng(2)
    data = rng.integers(0, 256, size=4096).astype(np.uint8)
    for size in (1, 2, 300):
        for scale in (10, 2**31 - 1):
            base, check, values = rng.integers(-scale, scale, size=(3, size), dtype=np.int64).astype(np.int32)
            for start in range(0, 4096, 97):
                best_id, best_length = jit_dat.longest_prefix(base, check, values, data, start, 4096)
                assert 0 <= best_length <= 4096 - start
                jit_dat.lookup(base, check, values, data, start, min(4096, start + 9))


@pytest.mark.parametrize("compile_dat", [ref_dat.compile_dat, jit_dat.compile_dat])
@pytest.mark.parametrize(
    "tokens, ids, kwargs, message",
    [
        ([b"a", b""], None, {}, "empty token"),
        ([b"a", b"b", b"a"], None, {}, "duplicate"),
        ([b"a", b"b"], [0], {}, "2 tokens but 1 ids"),
        ([b"a", b"b"], [0, -1], {}, "token ids"),
        ([b"a", b"b"], [0, 2**31 - 1], {}, "token ids"),
        ([b"a"], None, {"order": "dfs"}, "packing order"),
        ([b"a"], None, {"order": "frequency"}, "one weight per token"),
    ],
)
def test_bad_vocabularies_are_refused(compile_dat, tokens, ids, kwargs, message):
    with pytest.raises(ValueError, match=message):
        compile_dat(tokens, ids, **kwargs)


@pytest.mark.parametrize("compile_dat", [ref_dat.compile_dat, jit_dat.compile_dat])
def test_empty_vocabulary_is_a_lone_root(compile_dat):
    base, check, values = compile_dat([])
    assert base.tolist() == [0] and check.tolist() == [-1] and values.tolist() == [-1]


def test_vocabulary_layout_notebook_runs():
    """The notebook executes top to bottom (its cells assert that every packing order gives the same ids)."""
    nbclient = pytest.importorskip("nbclient", reason="install crayon-tokenizer[test] to run the notebook")
    nbformat = pytest.importorskip("nbformat", reason="install crayon-tokenizer[test] to run the notebook")
    pytest.importorskip("matplotlib", reason="install crayon-tokenizer[test] to run the notebook")
    if not CORPORA_DIR.is_dir():
        pytest.skip(f"shared corpora {CORPORA_DIR} are absent")
    folder = Path(__file__).resolve().parents[1] / "notebooks"
    notebook = nbformat.read(folder / "vocabulary_layout.ipynb", as_version=4)
    resources = {"metadata": {"path": str(folder)}}
    client = nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3", resources=resources)
    client.execute()

"""The differential harness: every tokenizer of ``differential.TOKENIZERS`` on every backend of
``differential.BACKENDS`` gives its oracle's ids (tiktoken, HF tokenizers, or the reference engine): corpora,
generated text, any Unicode, special tokens, batches and the flat form, long inputs. How to add a tokenizer or a
backend: tests/differential.py (one entry) and CONTRIBUTING.md. A property a pair cannot have (the registry's
``lacks``) skips with the reason."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import crayon
import crayon.jit
from conftest import CORPUS_FILES, corpus_text
from crayon.reference.engine import CAPABILITIES, Engine
from differential import (BACKENDS, PAIRS, PipelineTokenizer, case_on, oracle_of, skip_if_lacking,
                          tokenizer_on)


SIMULATED = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
SIMULATOR_CASE = "cl100k_slice"


@pytest.fixture(scope="module", params=PAIRS, ids=[f"{case}-{backend}" for case, backend in PAIRS])
def subject(request):
    """(tokenizer on the backend, its oracle, its Case as run on the backend, the backend's name)."""
    case, backend = request.param
    return tokenizer_on(case, backend), oracle_of(case), case_on(case, backend), backend


def test_engine_implements_the_protocol(subject):
    tok, _, case, backend = subject
    skip_if_lacking(case, "engine")
    engine = tok.engine
    assert isinstance(engine, Engine) and engine.name == tok.backend == BACKENDS[backend].backend
    assert engine.capabilities <= CAPABILITIES.keys()
    array = engine.encode_ordinary_array("Hello world 日本語")
    assert array.dtype == np.uint32 and array.tolist() == engine.encode_ordinary("Hello world 日本語")


@pytest.mark.parametrize("corpus", CORPUS_FILES)
def test_corpora_match_the_oracle(subject, corpus):
    tok, oracle, case, _ = subject
    text = corpus_text(corpus, case.corpus_chars) + case.suffix
    ids = tok.encode(text, allowed_special="all")
    assert ids == oracle.encode_all_special(text)
    if "decode" not in case.lacks:
        assert tok.decode(ids) == oracle.decode(ids)
    if oracle.has_special_contract:
        ordinary = tok.encode_ordinary(text)
        assert ordinary == oracle.encode_ordinary(text)
        assert tok.decode_bytes(ordinary) == text.encode("utf-8")


def test_generated_text_matches_the_oracle(subject):
    tok, oracle, case, _ = subject

    @settings(max_examples=case.examples, deadline=None, database=None)
    @given(text=case.text)
    def check(text):
        assert tok.encode(text, allowed_special="all") == oracle.encode_all_special(text)
        if oracle.has_special_contract:
            assert tok.encode_ordinary(text) == oracle.encode_ordinary(text)
            assert tok.encode(text, disallowed_special=()) == oracle.encode_ordinary(text)

    check()


def test_any_unicode_matches_the_oracle(subject):
    """Every category, lone surrogates included (replaced by U+FFFD, as tiktoken does)."""
    tok, oracle, case, _ = subject
    if not oracle.has_special_contract:
        pytest.skip("the oracle takes no lone surrogates and always matches its added tokens")

    @settings(max_examples=case.examples // 2, deadline=None, database=None)
    @given(text=st.text(st.characters(), max_size=40))
    def check(text):
        assert tok.encode_ordinary(text) == oracle.encode_ordinary(text)

    check()


def test_special_tokens_follow_tiktokens_contract(subject):
    tok, oracle, case, _ = subject
    skip_if_lacking(case, "special_contract")
    if not oracle.has_special_contract or "<|endoftext|>" not in tok.special_tokens_set:
        pytest.skip("no tiktoken special-token contract to check")
    text = "hi <|endoftext|> there<|endofprompt|>!"
    for encode in (tok.encode, tok.encode_to_numpy, lambda text, **kw: crayon.jit.encode(tok, text, **kw)):
        with pytest.raises(ValueError, match="disallowed special token"):
            encode(text)
    expected = oracle.encode_all_special(text)
    assert tok.encode(text, allowed_special="all") == expected
    for array in (tok.encode_to_numpy(text, allowed_special="all"), crayon.jit.encode(tok, text, allowed_special="all")):
        assert array.dtype == np.uint32 and array.tolist() == expected
    assert tok.encode(text, disallowed_special=()) == oracle.encode_ordinary(text)
    assert crayon.jit.encode(tok, "").tolist() == [] == tok.encode("")


def test_batches_and_flat_form_equal_a_loop(subject):
    tok, oracle, case, _ = subject
    skip_if_lacking(case, "engine")
    texts = corpus_text("english_web.txt", min(6000, case.corpus_chars or 6000)).splitlines()
    texts += ["", "日本語 text", " " * 50, case.suffix]
    expected = [oracle.encode_all_special(text) for text in texts]
    threads = (1, 2, 3) if "threads" in tok.engine.capabilities else (None,)
    for num_threads in threads:
        assert tok.encode_batch(texts, num_threads=num_threads, allowed_special="all") == expected
        tokens, offsets = tok.engine.encode_ordinary_flat(texts, num_threads=num_threads)
        assert tokens.dtype == np.uint32 and offsets.dtype == np.int64 and len(offsets) == len(texts) + 1
        flat = [tokens[offsets[i] : offsets[i + 1]].tolist() for i in range(len(texts))]
        assert flat == tok.engine.encode_ordinary_batch(texts, num_threads=num_threads)
        assert flat == [tok.engine.encode_ordinary(text) for text in texts]
    if "threads" in tok.engine.capabilities:
        with pytest.raises(ValueError, match="num_threads"):
            tok.engine.encode_ordinary_batch(texts, num_threads=0)
    assert tok.encode_ordinary_batch([]) == []


def test_long_inputs(subject):
    """Long single spans (one letter repeated): exact, and linear on the fast backends (bench/peers.py times it)."""
    tok, oracle, _, _ = subject
    slow = tok.backend == "reference" or SIMULATED  # the reference's merge loop is quadratic in a span's length
    n = 600 if slow else 5000
    for text in ["a" * n, "ab" * (n // 2), "好" * (n // 2), " " * n + "x"]:
        assert tok.encode(text, allowed_special="all") == oracle.encode_all_special(text)


def test_decode_matches_the_oracle(subject):
    tok, oracle, case, _ = subject
    skip_if_lacking(case, "decode")
    text = corpus_text("multilingual.txt", 2000)
    ids = tok.encode(text, allowed_special="all")
    assert tok.decode(ids) == oracle.decode(ids)


PIPELINE_PAIRS = [(case, backend) for case, backend in PAIRS if BACKENDS[backend].drive is not None]


@pytest.mark.parametrize(("case", "backend"), PIPELINE_PAIRS, ids=[f"{c}-{b}" for c, b in PIPELINE_PAIRS])
def test_pipeline_backends_cut_the_text(case, backend):
    """The pipeline pairs test cuts: their corpus slices are cut many times."""
    tok = tokenizer_on(case, backend)
    assert isinstance(tok, PipelineTokenizer)
    text = corpus_text("english_web.txt", case_on(case, backend).corpus_chars)
    assert tok.cuts(text) > len(text.encode("utf-8")) // (4 * tok.chunk_bytes)


@pytest.mark.skipif(BACKENDS["cuda"].available()[0], reason="CUDA (or its simulator) runs the cuda pairs here")
def test_cuda_backend_under_the_simulator():
    """Without a GPU, the harness's cuda pairs of the small tokenizer run under numba-cuda's simulator (switched on
    before numba.cuda is imported, so in a subprocess)."""
    pytest.importorskip("numba.cuda")
    selected = f"{SIMULATOR_CASE}-cuda"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", __file__, "-q", "-p", "no:cacheprovider", "-k", selected],
        cwd=Path(__file__).parents[1], env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}, capture_output=True, text=True,
        timeout=600,
    )
    output = result.stdout[-6000:] + result.stderr[-3000:]
    assert result.returncode == 0, output
    expected = 7 + len(CORPUS_FILES)  # every test above on the one pair, the corpus test once per corpus
    assert re.search(rf"\b{expected} passed", result.stdout), output

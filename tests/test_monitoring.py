"""Drift monitor: bytes per token per source as the encoder counts them, streaming == one call, candidate merges
whose savings an extension realises; the vocabulary drift notebook runs."""

from __future__ import annotations

from pathlib import Path

import pytest

import crayon
from conftest import CORPORA_DIR, corpus_text
from crayon.monitoring import DriftMonitor


@pytest.fixture(scope="module")
def cl100k():
    return crayon.load("cl100k_base")


def test_bytes_per_token_is_what_encoding_gives(cl100k):
    texts = {"english": corpus_text("big.txt", 50_000), "multilingual": corpus_text("multilingual.txt", 50_000)}
    report = crayon.drift(cl100k, {name: [text] for name, text in texts.items()}, baseline={"english": 4.0})
    for name, text in texts.items():
        source = report.sources[name]
        assert (source.n_bytes, source.n_tokens) == (len(text.encode()), len(cl100k.encode_ordinary(text)))
    assert report.sources["english"].change == pytest.approx(report.sources["english"].bytes_per_token / 4 - 1)
    assert report.sources["multilingual"].baseline is None
    assert report.sources["multilingual"].bytes_per_token < report.sources["english"].bytes_per_token
    assert "multilingual" in str(report)


def test_worst_spans_and_candidates_are_ranked_by_the_tokens_they_cost(cl100k):
    report = crayon.drift(cl100k, {"ml": [corpus_text("multilingual.txt", 50_000)]}, top_spans=5, top_merges=5)
    costs = [count * (n_tokens - 1) for _, count, n_tokens in report.sources["ml"].worst_spans]
    assert costs == sorted(costs, reverse=True) and len(costs) == 5
    saved = [candidate.tokens_saved for candidate in report.candidates]
    assert saved == sorted(saved, reverse=True) and report.candidates[0].saved_by_source == {"ml": saved[0]}


def test_the_top_candidate_saves_what_it_promises(cl100k):
    text = corpus_text("multilingual.txt", 50_000)
    top = crayon.drift(cl100k, {"ml": [text]}).candidates[0]
    extended = cl100k.extend(texts=[text], n_new_tokens=1)
    assert extended.decode_single_token_bytes(cl100k.n_vocab) == top.token_bytes
    assert len(cl100k.encode_ordinary(text)) - len(extended.encode_ordinary(text)) == top.tokens_saved


def test_streaming_gives_the_one_call_report(cl100k):
    documents = [corpus_text("big.txt", 20_000), corpus_text("multilingual.txt", 20_000)]
    whole = crayon.drift(cl100k, {"mixed": documents, "thai": [corpus_text("multilingual.txt", 5_000)]})
    monitor = DriftMonitor(cl100k)
    monitor.update("mixed", texts=documents[:1])
    monitor.update("thai", texts=[corpus_text("multilingual.txt", 5_000)])
    monitor.update("mixed", texts=documents[1:])
    assert monitor.report() == whole
    from_file = DriftMonitor(cl100k)
    from_file.update("file", files=[CORPORA_DIR / "multilingual.txt"])
    assert from_file.report().sources["file"].n_bytes == (CORPORA_DIR / "multilingual.txt").stat().st_size
    later = DriftMonitor(cl100k, baseline=whole)
    later.update("mixed", texts=documents[1:])
    assert later.report().sources["mixed"].baseline == whole.sources["mixed"].bytes_per_token


def test_vocabulary_drift_notebook_runs():
    """The notebook executes top to bottom (its cells assert what they plot: old ids kept, drift reduced)."""
    nbclient = pytest.importorskip("nbclient", reason="install crayon[test] to run the notebook")
    nbformat = pytest.importorskip("nbformat", reason="install crayon[test] to run the notebook")
    pytest.importorskip("matplotlib", reason="install crayon[test] to run the notebook")
    if not CORPORA_DIR.is_dir():
        pytest.skip(f"shared corpora {CORPORA_DIR} are absent")
    folder = Path(__file__).resolve().parents[1] / "notebooks"
    notebook = nbformat.read(folder / "vocabulary_drift.ipynb", as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(folder)}})
    client.execute()

"""The API reference (MkDocs + mkdocstrings, generated from the docstrings) builds with warnings as errors, and
the examples in the docstrings it shows run as written (doctest)."""

from __future__ import annotations

import doctest
import subprocess
import sys
from pathlib import Path

import pytest

import crayon
from crayon import Tokenizer

ROOT = Path(__file__).resolve().parents[1]


def test_api_reference_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    assert "WARNING" not in build.stderr, build.stderr
    page = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    for name in ("encode_batch_to_numpy", "count_tokens_batch", "CrayonTokenizerFast", "UnsupportedComponentError"):
        assert name in page


DOCUMENTED_WITH_EXAMPLES = [
    crayon.load,
    crayon.get_encoding,
    crayon.train,
    Tokenizer.encode,
    Tokenizer.decode,
    Tokenizer.encode_batch,
    Tokenizer.count_tokens,
    Tokenizer.__call__,
]


@pytest.mark.parametrize("documented", DOCUMENTED_WITH_EXAMPLES, ids=lambda function: function.__qualname__)
def test_docstring_examples_run(documented):
    tests = doctest.DocTestFinder(recurse=False).find(documented, documented.__qualname__, globs={"crayon": crayon})
    assert any(test.examples for test in tests), f"{documented.__qualname__} has no example"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in tests:
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0

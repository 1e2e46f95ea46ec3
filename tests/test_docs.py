"""The API reference (MkDocs + mkdocstrings, generated from the docstrings) builds with warnings as errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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

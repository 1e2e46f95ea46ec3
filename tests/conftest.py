"""Shared test fixtures: the shared corpora and tiktoken's own encoders built from the offline vocabulary files."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from crayon.loading import openai_ranks
from crayon.profiles import OPENAI_ENCODINGS

CORPORA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "corpora"
CORPUS_FILES = ["big.txt", "english_web.txt", "enwik8_head.xml", "multilingual.txt", "python_code.py", "shakespeare.txt"]


def corpus_text(name: str, limit: int | None = None) -> str:
    """A corpus file's text (its first ``limit`` characters), or skip the test where the corpora are absent."""
    path = CORPORA_DIR / name
    if not path.is_file():
        pytest.skip(f"shared corpus {path} is absent")
    text = path.read_text(encoding="utf-8")
    return text if limit is None else text[:limit]


@functools.lru_cache(maxsize=None)
def mergeable_ranks(name: str) -> dict[bytes, int]:
    return openai_ranks(name)


@functools.lru_cache(maxsize=None)
def tiktoken_encoding(name: str):
    """tiktoken's encoder for an OpenAI encoding, built offline from the same vocabulary file."""
    tiktoken = pytest.importorskip("tiktoken")
    encoding = OPENAI_ENCODINGS[name]
    return tiktoken.Encoding(
        name=name,
        pat_str=encoding.pattern,
        mergeable_ranks=mergeable_ranks(name),
        special_tokens=encoding.special_tokens,
    )

"""``crayon.train``: one entry point for BPE, character and word vocabularies.

The corpus is given by keyword, never guessed from its type: ``files=[...]`` are paths of UTF-8 files,
``texts=[...]`` are the texts themselves (any iterable of ``str``, streamed).
"""

from __future__ import annotations

import itertools
import os
import warnings
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from crayon.errors import TrainingWarning
from crayon.patterns import resolve_pattern
from crayon.reference.bpe import BytePairModel
from crayon.tokenizer import Tokenizer

MODELS = ("bpe", "char", "word")


def _documents(files, texts) -> Iterator[str | Path]:
    """The corpus as one stream of documents: each file as a ``Path``, each text as a ``str``.

    Files are checked up front (a missing one raises before any training); texts as they are read."""
    if files is None and texts is None:
        raise TypeError("crayon.train needs a corpus: files=[path, ...] (UTF-8 files) or texts=[str, ...]")
    paths = [] if files is None else _checked_paths(files)
    if texts is None:
        return iter(paths)
    if isinstance(texts, (str, bytes, os.PathLike)):
        raise TypeError(
            f"texts= takes an iterable of texts, not a lone {type(texts).__name__}: write texts=[text] for one "
            f"text, or files=[path] to read files"
        )
    return itertools.chain(paths, map(_checked_text, texts))


def _checked_paths(files) -> list[Path]:
    if isinstance(files, (str, bytes, os.PathLike)):
        raise TypeError(f"files= takes a list of paths, not a lone {type(files).__name__}: write files=[{files!r}]")
    paths = []
    for file in files:
        if not isinstance(file, (str, os.PathLike)):
            raise TypeError(f"files= takes paths (str or os.PathLike), got {type(file).__name__}: texts go in texts=")
        path = Path(file)
        if not path.is_file():
            raise FileNotFoundError(f"training file {os.fspath(file)!r} does not exist or is not a file")
        paths.append(path)
    return paths


def _checked_text(text) -> str:
    if not isinstance(text, str):
        fix = "; files go in files=" if isinstance(text, os.PathLike) else ""
        raise TypeError(f"texts= takes str items, got {type(text).__name__}{fix}")
    return text


def _texts(documents: Iterable[str | Path]) -> Iterator[str]:
    """Each document as text (files read as UTF-8)."""
    for document in documents:
        if isinstance(document, Path):
            try:
                yield document.read_text(encoding="utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(f"{document} is not UTF-8 text: {error}") from None
        else:
            yield document


def train(
    *corpus,
    files: Iterable[str | os.PathLike] | None = None,
    texts: Iterable[str] | None = None,
    vocab_size: int,
    model: str = "bpe",
    pattern: str = "cl100k_base",
    special_tokens: Sequence[str] = ("<|endoftext|>",),
    backend: str = "auto",
    progress: bool = True,
    name: str = "trained",
    min_frequency: int = 1,
):
    """Train a vocabulary of ``vocab_size`` tokens on ``files=[paths]`` (UTF-8 files, streamed) and/or
    ``texts=[str, ...]`` (any iterable of texts); each file or text is one document.

    ``model="bpe"`` returns a byte-level BPE :class:`Tokenizer` (special tokens get the last ids); when the
    corpus runs out of pairs to merge first, it has fewer tokens and a ``crayon.TrainingWarning`` says so.
    ``"char"`` / ``"word"`` return a :class:`crayon.CharTokenizer` / :class:`crayon.WordTokenizer`.
    ``backend``: "jit" / "auto" (the Numba trainer, both cores) or "reference" (pure Python, same merges).
    ``min_frequency``: the least count of a kept character or word (``"char"`` / ``"word"``); BPE refuses it.
    """
    if corpus:
        raise TypeError(
            "crayon.train takes its corpus by keyword: files=[path, ...] to read UTF-8 files, or "
            "texts=[str, ...] for texts (a positional list could be either)"
        )
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; choose one of {', '.join(MODELS)}")
    if model == "bpe" and min_frequency != 1:
        raise ValueError("min_frequency is for model='char' and 'word': BPE training merges the most frequent pair "
                         "until vocab_size is reached; choose a smaller vocab_size instead")
    if backend not in ("jit", "auto", "reference"):
        raise ValueError(f"training runs on backend 'jit', 'auto' or 'reference', not {backend!r}")
    documents = _documents(files, texts)
    if model != "bpe":
        from crayon.lookup.char import CharTokenizer
        from crayon.lookup.word import WordTokenizer

        tokenizer = (CharTokenizer if model == "char" else WordTokenizer)(
            min_frequency=min_frequency, max_vocab_size=vocab_size
        )
        tokenizer.train(_texts(documents))
        return tokenizer
    resolve_pattern(pattern)  # an unknown pattern name fails before any work
    if backend == "reference":
        from crayon.reference.train import train_bpe

        result = train_bpe(_texts(documents), vocab_size, pattern=pattern, special_tokens=special_tokens)
    else:
        from crayon.jit.train import train_bpe_jit

        result = train_bpe_jit(documents, vocab_size, pattern=pattern, special_tokens=special_tokens, progress=progress)
    reached = len(result.ranks) + len(result.special_tokens)
    if reached < vocab_size:
        warnings.warn(
            f"training stopped at {reached} tokens, below vocab_size={vocab_size}: the corpus has no more pairs "
            f"of tokens to merge (train on more text, or ask for at most {reached})",
            TrainingWarning,
            stacklevel=2,
        )
    return Tokenizer(name, BytePairModel(result.ranks), pattern=result.pattern, special_tokens=result.special_tokens)

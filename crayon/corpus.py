"""A training corpus, given by keyword and never guessed from its type: ``files=[...]`` are paths of UTF-8 files,
``texts=[...]`` are the texts themselves (any iterable of ``str``, streamed). ``crayon.train`` and
``Tokenizer.extend`` take it this way."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Iterable, Iterator

__all__ = ["documents", "read_documents"]


def documents(files, texts, *, caller: str = "crayon.train") -> Iterator[str | Path]:
    """The corpus as one stream of documents: each file as a ``Path``, each text as a ``str``.

    Files are checked up front (a missing one raises before any training); texts as they are read. ``caller``
    names the function in the messages."""
    if files is None and texts is None:
        raise TypeError(f"{caller} needs a corpus: files=[path, ...] (UTF-8 files) or texts=[str, ...]")
    # Each checked path becomes a Path when its turn comes: a list of Path objects would take about 500 bytes a
    # file (38 MB for the 78,608 files of linux-source-6.1), while the caller's own str objects are kept as given.
    paths = map(Path, [] if files is None else _checked_paths(files))
    if texts is None:
        return paths
    if isinstance(texts, (str, bytes, os.PathLike)):
        raise TypeError(
            f"texts= takes an iterable of texts, not a lone {type(texts).__name__}: write texts=[text] for one "
            f"text, or files=[path] to read files"
        )
    return itertools.chain(paths, map(_checked_text, texts))


def _checked_paths(files) -> list[str]:
    if isinstance(files, (str, bytes, os.PathLike)):
        raise TypeError(f"files= takes a list of paths, not a lone {type(files).__name__}: write files=[{files!r}]")
    paths = []
    for file in files:
        if not isinstance(file, (str, os.PathLike)):
            raise TypeError(f"files= takes paths (str or os.PathLike), got {type(file).__name__}: texts go in texts=")
        path = os.fspath(file)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"training file {path!r} does not exist or is not a file")
        paths.append(path)
    return paths


def _checked_text(text) -> str:
    if not isinstance(text, str):
        fix = "; files go in files=" if isinstance(text, os.PathLike) else ""
        raise TypeError(f"texts= takes str items, got {type(text).__name__}{fix}")
    return text


def read_documents(stream: Iterable[str | Path]) -> Iterator[str]:
    """Each document of ``documents(...)`` as text (files read as UTF-8)."""
    for document in stream:
        if isinstance(document, Path):
            try:
                yield document.read_text(encoding="utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(f"{document} is not UTF-8 text: {error}") from None
        else:
            yield document

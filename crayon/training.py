"""``crayon.train``: one entry point for BPE, character and word vocabularies.

The corpus is given by keyword, never guessed from its type: ``files=[...]`` are paths of UTF-8 files,
``texts=[...]`` are the texts themselves (any iterable of ``str``, streamed).
"""

from __future__ import annotations

import os
import warnings
from typing import Iterable, Sequence

from crayon.corpus import documents, read_documents
from crayon.errors import TrainingWarning
from crayon.patterns import resolve_pattern
from crayon.reference.bpe import BytePairModel
from crayon.tokenizer import Tokenizer

__all__ = ["train", "MODELS"]

MODELS = ("bpe", "char", "word")


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
    reserved_special_tokens: int = 0,
):
    """Train a vocabulary of ``vocab_size`` tokens on ``files=[paths]`` (UTF-8 files, streamed) and/or
    ``texts=[str, ...]`` (any iterable of texts); each file or text is one document.

    ``model="bpe"`` returns a byte-level BPE :class:`Tokenizer` (special tokens get the last ids); when the
    corpus runs out of pairs to merge first, it has fewer tokens and a ``crayon.TrainingWarning`` says so.
    ``"char"`` / ``"word"`` return a :class:`crayon.CharTokenizer` / :class:`crayon.WordTokenizer`.
    ``backend``: "jit" / "auto" (the Numba trainer, both cores) or "reference" (pure Python, same merges).
    ``min_frequency``: the least count of a kept character or word (``"char"`` / ``"word"``); BPE refuses it.
    ``reserved_special_tokens``: that many ``<|reserved_special_token_K|>`` special tokens after the others
    (counted in ``vocab_size``), to name later with ``Tokenizer.with_special_tokens`` without moving any id.
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
    if model != "bpe" and reserved_special_tokens:
        raise ValueError(f"reserved_special_tokens is for model='bpe'; a {model} vocabulary has no special tokens")
    if backend not in ("jit", "auto", "reference"):
        raise ValueError(f"training runs on backend 'jit', 'auto' or 'reference', not {backend!r}")
    stream = documents(files, texts)
    if model != "bpe":
        from crayon.lookup.char import CharTokenizer
        from crayon.lookup.word import WordTokenizer

        tokenizer = (CharTokenizer if model == "char" else WordTokenizer)(
            min_frequency=min_frequency, max_vocab_size=vocab_size
        )
        tokenizer.train(read_documents(stream))
        return tokenizer
    resolve_pattern(pattern)  # an unknown pattern name fails before any work
    if reserved_special_tokens:
        from crayon.evolution import reserved_slots

        special_tokens = (special_tokens,) if isinstance(special_tokens, str) else tuple(special_tokens)
        special_tokens = (*special_tokens, *reserved_slots(dict.fromkeys(special_tokens, 0), reserved_special_tokens, 0))
    if backend == "reference":
        from crayon.reference.train import train_bpe

        result = train_bpe(read_documents(stream), vocab_size, pattern=pattern, special_tokens=special_tokens)
    else:
        from crayon.jit.train import train_bpe_jit

        result = train_bpe_jit(stream, vocab_size, pattern=pattern, special_tokens=special_tokens, progress=progress)
    reached = len(result.ranks) + len(result.special_tokens)
    if reached < vocab_size:
        warnings.warn(
            f"training stopped at {reached} tokens, below vocab_size={vocab_size}: the corpus has no more pairs "
            f"of tokens to merge (train on more text, or ask for at most {reached})",
            TrainingWarning,
            stacklevel=2,
        )
    return Tokenizer(name, BytePairModel(result.ranks), pattern=result.pattern, special_tokens=result.special_tokens)

"""``crayon.train``: one entry point for BPE, character and word vocabularies."""

from __future__ import annotations

import os
from typing import Iterable, Sequence

from crayon.reference.bpe import BytePairModel
from crayon.reference.train import iter_documents
from crayon.tokenizer import Tokenizer

MODELS = ("bpe", "char", "word")


def train(
    files_or_texts: str | os.PathLike | Iterable[str | os.PathLike],
    *,
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
    """Train a vocabulary of ``vocab_size`` tokens.

    ``files_or_texts``: a text, a path (``pathlib.Path``; a UTF-8 file, streamed) or an iterable of both.
    ``model="bpe"`` returns a byte-level BPE :class:`Tokenizer` (special tokens get the last ids);
    ``"char"`` / ``"word"`` return a :class:`crayon.CharTokenizer` / :class:`crayon.WordTokenizer`.
    ``backend``: "jit" / "auto" (the Numba trainer, both cores) or "reference" (pure Python, same merges).
    ``min_frequency``: the least count of a kept character or word (``"char"`` / ``"word"``); BPE refuses it.
    ``reserved_special_tokens``: that many ``<|reserved_special_token_K|>`` special tokens after the others
    (counted in ``vocab_size``), to name later with ``Tokenizer.with_special_tokens`` without moving any id.
    """
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; choose one of {', '.join(MODELS)}")
    if model == "bpe" and min_frequency != 1:
        raise ValueError("min_frequency is for model='char' and 'word': BPE training merges the most frequent pair "
                         "until vocab_size is reached; choose a smaller vocab_size instead")
    if model != "bpe" and reserved_special_tokens:
        raise ValueError(f"reserved_special_tokens is for model='bpe'; a {model} vocabulary has no special tokens")
    if model != "bpe":
        from crayon.lookup.char import CharTokenizer
        from crayon.lookup.word import WordTokenizer

        tokenizer = (CharTokenizer if model == "char" else WordTokenizer)(
            min_frequency=min_frequency, max_vocab_size=vocab_size
        )
        tokenizer.train(iter_documents(files_or_texts))
        return tokenizer
    if reserved_special_tokens:
        from crayon.evolution import reserved_slots

        special_tokens = (special_tokens,) if isinstance(special_tokens, str) else tuple(special_tokens)
        special_tokens = (*special_tokens, *reserved_slots(dict.fromkeys(special_tokens, 0), reserved_special_tokens, 0))
    if backend == "reference":
        from crayon.reference.train import train_bpe

        result = train_bpe(iter_documents(files_or_texts), vocab_size, pattern=pattern, special_tokens=special_tokens)
    elif backend in ("jit", "auto"):
        from crayon.jit.train import train_bpe_jit

        result = train_bpe_jit(
            files_or_texts, vocab_size, pattern=pattern, special_tokens=special_tokens, progress=progress
        )
    else:
        raise ValueError(f"training runs on backend 'jit', 'auto' or 'reference', not {backend!r}")
    return Tokenizer(
        name, BytePairModel(result.ranks), pattern=result.pattern, special_tokens=result.special_tokens
    )

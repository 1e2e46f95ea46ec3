"""``crayon.train``: one entry point for BPE, character and word vocabularies.

The corpus is given by keyword, never guessed from its type: ``files=[...]`` are paths of UTF-8 files,
``texts=[...]`` are the texts themselves (any iterable of ``str``, streamed).
"""

from __future__ import annotations

import collections
import hashlib
import operator
import os
import warnings
from pathlib import Path
from typing import Iterable, Sequence

from crayon.cartridge import VOCAB_BYTES, VOCAB_OFFSETS, check_writable, open_cartridge
from crayon.corpus import documents, read_documents
from crayon.errors import TrainingWarning
from crayon.patterns import resolve_pattern
from crayon.reference.bpe import BytePairModel
from crayon.reference.train import N_BYTES, check_settings
from crayon.saving import save_cartridge
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
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int = 5000,
):
    """Train a vocabulary of ``vocab_size`` tokens on ``files=[paths]`` (UTF-8 files, streamed) and/or
    ``texts=[str, ...]`` (any iterable of texts); each file or text is one document.

    ``model="bpe"`` returns a byte-level BPE :class:`Tokenizer` (special tokens get the last ids); when the
    corpus runs out of pairs to merge first, it has fewer tokens and a ``crayon.TrainingWarning`` says so.
    ``"char"`` / ``"word"`` return a :class:`crayon.CharTokenizer` / :class:`crayon.WordTokenizer`.
    ``backend``: "jit" / "auto" (the Numba trainer, every core; its kernels are compiled ahead of time, once per
    machine, so training itself does not import numba) or "reference" (pure Python, same merges). On glibc the
    "jit" trainer fixes malloc's mmap and trim thresholds (2 and 4 MiB) for the rest of the process, so that the
    large arrays it frees are returned to the system rather than kept in malloc's arenas.
    ``min_frequency``: the least count of a kept character or word (``"char"`` / ``"word"``); BPE refuses it.
    ``reserved_special_tokens``: that many ``<|reserved_special_token_K|>`` special tokens after the others
    (counted in ``vocab_size``), to name later with ``Tokenizer.with_special_tokens`` without moving any id.
    ``checkpoint``: a cartridge path (BPE only); training runs in segments of ``checkpoint_every`` new tokens
    and saves the vocabulary so far there (atomically) after each. When that file exists, training resumes
    from it and reaches the same vocabulary as an uninterrupted run; a checkpoint of another corpus (file
    paths, sizes and modification times, or the texts' hash) or other settings is refused, naming what
    differs. Each segment reads and counts the corpus again (a cost of one word count per segment), so
    ``texts=`` must be a list (not a one-pass iterator).

    ```pycon
    >>> tok = crayon.train(texts=["low lower lowest " * 50], vocab_size=262, progress=False)
    >>> tok.n_vocab, tok.decode(tok.encode("lowest"))
    (262, 'lowest')

    ```
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
    if checkpoint is not None and model != "bpe":
        raise ValueError(f"checkpoint= is for model='bpe'; a {model} vocabulary is counted in one pass")
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
    if checkpoint is not None:
        tokenizer = _train_checkpointed(files, texts, vocab_size, pattern=pattern, special_tokens=special_tokens,
                                        backend=backend, progress=progress, name=name, checkpoint=checkpoint,
                                        every=checkpoint_every)
    else:
        tokenizer = _train_bpe(stream, vocab_size, pattern=pattern, special_tokens=special_tokens, backend=backend,
                               progress=progress, name=name)
    reached = tokenizer.n_vocab
    if reached < vocab_size:
        warnings.warn(
            f"training stopped at {reached} tokens, below vocab_size={vocab_size}: the corpus has no more pairs "
            f"of tokens to merge (train on more text, or ask for at most {reached})",
            TrainingWarning,
            stacklevel=2,
        )
    return tokenizer


def _train_bpe(stream, vocab_size, *, pattern, special_tokens, backend, progress, name) -> Tokenizer:
    if backend == "reference":
        from crayon.reference.train import train_bpe

        result = train_bpe(read_documents(stream), vocab_size, pattern=pattern, special_tokens=special_tokens)
    else:
        from crayon.jit.train import train_bpe_jit

        result = train_bpe_jit(stream, vocab_size, pattern=pattern, special_tokens=special_tokens, progress=progress)
    return Tokenizer(name, BytePairModel(result.ranks), pattern=result.pattern, special_tokens=result.special_tokens)


def _train_checkpointed(files, texts, vocab_size, *, pattern, special_tokens, backend, progress, name, checkpoint,
                        every) -> Tokenizer:
    """Train in segments of ``every`` new tokens, each continuing the last (``Tokenizer.extend`` on the same
    corpus continues the training exactly), saving the vocabulary to ``checkpoint`` after each."""
    if operator.index(every) < 1:
        raise ValueError(f"checkpoint_every must be at least 1 (new tokens per segment), got {every!r}")
    if texts is not None and not isinstance(texts, (str, bytes, os.PathLike)) and iter(texts) is texts:
        raise TypeError("checkpointed training reads the corpus once per segment: give texts= as a list, not a "
                        "one-pass iterator (or write the texts to files and pass files=)")
    special_tokens = check_settings(vocab_size, special_tokens)
    collections.deque(documents(files, texts), maxlen=0)  # a missing file or a text that is no str fails here
    path = check_writable(checkpoint)
    settings = {
        "vocab_size": vocab_size,
        "pattern": resolve_pattern(pattern),
        "special_tokens": list(special_tokens),
        "corpus": corpus_fingerprint(files, texts),
    }
    tokenizer = _resume(path, settings) if path.exists() else None
    n_tokens = vocab_size - len(special_tokens)  # ordinary tokens wanted, the 256 bytes included
    bar = _progress_bar(progress, total=n_tokens - N_BYTES, initial=min(_learned(tokenizer), n_tokens - N_BYTES))
    try:
        while tokenizer is None or _learned(tokenizer) < n_tokens - N_BYTES:
            before = _learned(tokenizer)
            if tokenizer is None:
                segment_size = min(n_tokens, N_BYTES + every) + len(special_tokens)
                tokenizer = _train_bpe(documents(files, texts), segment_size, pattern=pattern,
                                       special_tokens=special_tokens, backend=backend, progress=False, name=name)
            else:
                n_new_tokens = min(every, n_tokens - N_BYTES - before)
                tokenizer = tokenizer.extend(files=files, texts=texts, n_new_tokens=n_new_tokens, backend=backend,
                                             move_special_tokens=True, name=name)
            save_cartridge(tokenizer, path, source={CHECKPOINT_KEY: settings})
            if bar is not None:
                bar.update(_learned(tokenizer) - before)
            if _learned(tokenizer) == before:
                break  # no pair left to merge
    finally:
        if bar is not None:
            bar.close()
    # a fresh vocabulary (version 1, no parent), as an uninterrupted run gives
    return Tokenizer(name, BytePairModel(tokenizer.model.ranks), pattern=tokenizer.pattern,
                     special_tokens=tokenizer.special_tokens)


CHECKPOINT_KEY = "training_checkpoint"


def _learned(tokenizer: Tokenizer | None) -> int:
    """How many tokens training has learned beyond the 256 bytes."""
    return 0 if tokenizer is None else len(tokenizer.model.ranks) - N_BYTES


def corpus_fingerprint(files, texts) -> dict:
    """What identifies a corpus for resuming: each file's absolute path, size and modification time, and a
    SHA-256 of the texts."""
    fingerprint = {}
    if files is not None:
        fingerprint["files"] = [
            [str(path.resolve()), path.stat().st_size, path.stat().st_mtime_ns] for path in map(Path, files)
        ]
    if texts is not None:
        digest = hashlib.sha256()
        for text in texts:
            encoded = text.encode("utf-8", "surrogatepass")
            digest.update(b"%d:" % len(encoded) + encoded)
        fingerprint["texts_sha256"] = digest.hexdigest()
    return fingerprint


def _resume(path: Path, settings: dict) -> Tokenizer:
    """The vocabulary saved in the checkpoint at ``path``, refused unless it was made with ``settings``."""
    cartridge = open_cartridge(path, verify=True)
    saved = (cartridge.metadata.get("source") or {}).get(CHECKPOINT_KEY)
    if saved is None:
        raise ValueError(f"{path} exists but is not a training checkpoint: choose another checkpoint= path")
    differing = [key for key in settings if saved.get(key) != settings[key]]
    if differing:
        raise ValueError(
            f"the checkpoint {path} was made with another {', '.join(differing)} (resuming needs the same corpus "
            f"and settings): train with those, or delete the checkpoint / choose another path to start afresh"
        )
    blob, offsets = cartridge.sections[VOCAB_BYTES], cartridge.sections[VOCAB_OFFSETS].tolist()
    ranks = {blob[start:end].tobytes(): token_id for token_id, (start, end) in enumerate(zip(offsets, offsets[1:]))}
    return Tokenizer(cartridge.metadata["name"], BytePairModel(ranks), pattern=settings["pattern"],
                     special_tokens=cartridge.metadata["special_tokens"])


def _progress_bar(enabled: bool, **options):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(desc="training (checkpointed)", unit="token", **options)

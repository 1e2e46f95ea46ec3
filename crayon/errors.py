"""Typed exceptions raised by Crayon."""

__all__ = ["CrayonError", "CartridgeError", "BackendUnavailableError", "UnsupportedComponentError", "UnknownTokenError",
           "SpecialTokenError"]


class CrayonError(Exception):
    """Base class of every error Crayon raises on purpose."""


class CartridgeError(CrayonError, ValueError):
    """A cartridge file is missing, truncated, corrupt or of an unknown version."""


class FormatError(CrayonError, ValueError):
    """A vocabulary or tokenizer file (``.tiktoken``, ``tokenizer.json``) is malformed."""


class BackendUnavailableError(CrayonError, RuntimeError):
    """The requested backend ("jit", "cuda") cannot run here; the message says what is missing."""


class UnsupportedComponentError(CrayonError, ValueError):
    """A tokenizer file uses a component (normalizer, pre-tokenizer, model option) Crayon does not implement."""


class UnknownTokenError(CrayonError, KeyError):
    """A token id is outside the vocabulary."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class SpecialTokenError(CrayonError, ValueError):
    """Text contains a special token the caller did not allow (tiktoken raises ValueError here too)."""


class PatternCoverageWarning(UserWarning):
    """A custom pre-tokenization regex does not match every character: the text it skips is not encoded."""


class TrainingWarning(UserWarning):
    """Training ended below the requested vocabulary size (the corpus has no more pairs to merge)."""


class VocabularyChangeError(CrayonError, ValueError):
    """A new vocabulary version would change what an existing id means, or fails its validation."""

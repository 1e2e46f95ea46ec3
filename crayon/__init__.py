"""Crayon: exact, fast byte-level BPE tokenizers with tiktoken's API."""

from crayon.errors import (
    BackendUnavailableError,
    CartridgeError,
    CrayonError,
    FormatError,
    PatternCoverageWarning,
    SpecialTokenError,
    TrainingWarning,
    UnknownTokenError,
    UnsupportedComponentError,
)
from crayon.loading import list_profiles, load
from crayon.lookup.char import CharTokenizer
from crayon.lookup.word import WordTokenizer
from crayon.tokenizer import Tokenizer
from crayon.training import train

__all__ = [
    "load",
    "list_profiles",
    "train",
    "Tokenizer",
    "CharTokenizer",
    "WordTokenizer",
    "CrayonError",
    "CartridgeError",
    "FormatError",
    "BackendUnavailableError",
    "SpecialTokenError",
    "UnknownTokenError",
    "UnsupportedComponentError",
    "PatternCoverageWarning",
    "TrainingWarning",
]
__version__ = "0.1.0"

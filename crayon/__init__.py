"""Crayon: exact, fast byte-level BPE tokenizers with tiktoken's API (``pip install crayon-tokenizer``)."""

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
    VocabularyChangeError,
)
from crayon.loading import list_profiles, load
from crayon.monitoring import DriftMonitor, drift
from crayon.lookup.char import CharTokenizer
from crayon.lookup.word import WordTokenizer
from crayon.tiktoken_compat import encoding_for_model, encoding_name_for_model, get_encoding, list_encoding_names
from crayon.tokenizer import Tokenizer
from crayon.training import train
from crayon.version import __version__

__all__ = [
    "load",
    "list_profiles",
    "get_encoding",
    "encoding_for_model",
    "encoding_name_for_model",
    "list_encoding_names",
    "train",
    "drift",
    "DriftMonitor",
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
    "VocabularyChangeError",
]

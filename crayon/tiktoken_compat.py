"""tiktoken's module-level functions, so that ``import crayon as tiktoken`` runs tiktoken code: ``get_encoding``,
``encoding_for_model``, ``encoding_name_for_model``, ``list_encoding_names``."""

from __future__ import annotations

import functools
import threading

from crayon.profiles import OPENAI_ENCODINGS
from crayon.tokenizer import Tokenizer

UNSUPPORTED_ENCODINGS = {
    "o200k_harmony": "its special tokens give id 200018 to two names (<|endofprompt|> and <|reserved_200018|>), "
                     "so decoding that id is ambiguous",
}

MODEL_TO_ENCODING = {
    # reasoning and chat
    **dict.fromkeys(["o1", "o3", "o4-mini", "gpt-5", "gpt-4.1", "gpt-4o"], "o200k_base"),
    **dict.fromkeys(["gpt-4", "gpt-3.5-turbo", "gpt-3.5", "gpt-35-turbo"], "cl100k_base"),
    # base and embeddings
    **dict.fromkeys(["davinci-002", "babbage-002", "text-embedding-ada-002", "text-embedding-3-small",
                     "text-embedding-3-large"], "cl100k_base"),
    # deprecated text and code models
    **dict.fromkeys(["text-davinci-003", "text-davinci-002", "code-davinci-002", "code-davinci-001",
                     "code-cushman-002", "code-cushman-001", "davinci-codex", "cushman-codex"], "p50k_base"),
    **dict.fromkeys(["text-davinci-edit-001", "code-davinci-edit-001"], "p50k_edit"),
    **dict.fromkeys(["text-davinci-001", "text-curie-001", "text-babbage-001", "text-ada-001", "davinci", "curie",
                     "babbage", "ada"], "r50k_base"),
    **dict.fromkeys([f"text-similarity-{size}-001" for size in ("davinci", "curie", "babbage", "ada")]
                    + [f"text-search-{size}-doc-001" for size in ("davinci", "curie", "babbage", "ada")]
                    + ["code-search-babbage-code-001", "code-search-ada-code-001"], "r50k_base"),
    # open models
    "gpt2": "gpt2",
    "gpt-2": "gpt2",
}
MODEL_PREFIX_TO_ENCODING = {  # dated and fine-tuned variants, tried in this order
    **dict.fromkeys(["o1-", "o3-", "o4-mini-", "gpt-5", "gpt-4.5-", "gpt-4.1-", "chatgpt-4o-", "gpt-4o-"], "o200k_base"),
    **dict.fromkeys(["gpt-4-", "gpt-3.5-turbo-", "gpt-35-turbo-"], "cl100k_base"),
    "gpt-oss-": "o200k_harmony",
    "ft:gpt-4o": "o200k_base",
    **dict.fromkeys(["ft:gpt-4", "ft:gpt-3.5-turbo", "ft:davinci-002", "ft:babbage-002"], "cl100k_base"),
}

_lock = threading.Lock()


def list_encoding_names() -> list[str]:
    """The OpenAI encodings Crayon ships."""
    return list(OPENAI_ENCODINGS)


def get_encoding(encoding_name: str) -> Tokenizer:
    """The tokenizer of an OpenAI encoding ("cl100k_base", "gpt2" ...), one shared object per name as in tiktoken;
    ``ValueError`` for a name Crayon does not ship.

    ```pycon
    >>> enc = crayon.get_encoding("cl100k_base")
    >>> enc is crayon.get_encoding("cl100k_base"), enc.decode(enc.encode("hello world"))
    (True, 'hello world')

    ```
    """
    if encoding_name in UNSUPPORTED_ENCODINGS:
        raise ValueError(f"Crayon does not support {encoding_name}: {UNSUPPORTED_ENCODINGS[encoding_name]}")
    if encoding_name not in OPENAI_ENCODINGS:
        raise ValueError(f"Unknown encoding {encoding_name!r}; Crayon ships {', '.join(OPENAI_ENCODINGS)} "
                         f"(crayon.load also opens trained profiles and vocabulary files)")
    with _lock:
        return _shared_encoding(encoding_name)


@functools.cache
def _shared_encoding(encoding_name: str) -> Tokenizer:
    from crayon.loading import load

    return load(encoding_name)


def encoding_name_for_model(model_name: str) -> str:
    """The encoding a model uses; ``KeyError`` for a model that is not known."""
    if model_name in MODEL_TO_ENCODING:
        return MODEL_TO_ENCODING[model_name]
    for prefix, encoding_name in MODEL_PREFIX_TO_ENCODING.items():
        if model_name.startswith(prefix):
            return encoding_name
    raise KeyError(f"Could not map {model_name!r} to an encoding; use crayon.get_encoding with the encoding's name")


def encoding_for_model(model_name: str) -> Tokenizer:
    """The tokenizer a model uses (``encoding_name_for_model`` then ``get_encoding``)."""
    return get_encoding(encoding_name_for_model(model_name))

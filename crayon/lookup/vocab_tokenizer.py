"""Shared machinery of the table-lookup tokenizers (character-level and word-level).

Both split text into units (characters or words), map each unit to an id through a trained table, and
share the special tokens, training rule, decoding checks and JSON format below. Subclasses define only
how text is split into units (`_split_units`), how tokens are joined back (`_join_tokens`) and which
strings are valid units (`_is_unit`).
"""

from __future__ import annotations

import json
import operator
import os
import re
from collections import Counter
from collections.abc import Iterable

from crayon.errors import UnknownTokenError

__all__ = ["VocabTokenizer", "SPECIAL_TOKENS", "PAD_TOKEN", "UNK_TOKEN", "BOS_TOKEN", "EOS_TOKEN", "PAD_ID", "UNK_ID", "BOS_ID",
           "EOS_ID", "check_text"]

PAD_TOKEN, UNK_TOKEN, BOS_TOKEN, EOS_TOKEN = "<PAD>", "<UNK>", "<BOS>", "<EOS>"
SPECIAL_TOKENS = (PAD_TOKEN, UNK_TOKEN, BOS_TOKEN, EOS_TOKEN)
PAD_ID, UNK_ID, BOS_ID, EOS_ID = range(len(SPECIAL_TOKENS))

_SPECIAL_SPLIT = re.compile("(" + "|".join(map(re.escape, SPECIAL_TOKENS)) + ")")
_FORMAT_VERSION = 1


def lone_surrogate_index(text: str) -> int | None:
    """Index of the first lone surrogate in `text` (a code point UTF-8 cannot encode), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return error.start
    return None


def check_text(text: object, what: str = "text") -> str:
    """Return `text` if it is a str without lone surrogates; raise TypeError / ValueError otherwise."""
    if not isinstance(text, str):
        raise TypeError(f"{what} must be str, not {type(text).__name__}")
    index = lone_surrogate_index(text)
    if index is not None:
        raise ValueError(
            f"{what} contains a lone surrogate {text[index]!r} at index {index}; "
            "it is not a Unicode scalar value and cannot be tokenized"
        )
    return text


class VocabTokenizer:
    """Base class: a table of tokens, ids 0..vocab_size-1, the four special tokens first.

    Special-token literals (`<PAD>`, `<UNK>`, `<BOS>`, `<EOS>`) found in text always encode to their ids,
    in training and encoding alike; they are never split into units.
    """

    def __init__(self, min_frequency: int = 1, max_vocab_size: int | None = None) -> None:
        if isinstance(min_frequency, bool) or not isinstance(min_frequency, int) or min_frequency < 1:
            raise ValueError(f"min_frequency must be an int >= 1, got {min_frequency!r}")
        if max_vocab_size is not None and (
            isinstance(max_vocab_size, bool)
            or not isinstance(max_vocab_size, int)
            or max_vocab_size < len(SPECIAL_TOKENS)
        ):
            raise ValueError(
                f"max_vocab_size must be None or an int >= {len(SPECIAL_TOKENS)} (the special tokens), "
                f"got {max_vocab_size!r}"
            )
        self.min_frequency = min_frequency
        self.max_vocab_size = max_vocab_size
        self._id_to_token: list[str] = list(SPECIAL_TOKENS)
        self._token_to_id: dict[str, int] = {token: i for i, token in enumerate(SPECIAL_TOKENS)}

    # --- what subclasses define -------------------------------------------------------------------

    def _split_units(self, text: str) -> list[str]:
        """Split text that holds no special-token literal into units."""
        raise NotImplementedError

    def _join_tokens(self, tokens: list[str]) -> str:
        """Join decoded tokens back into text."""
        raise NotImplementedError

    @classmethod
    def _is_unit(cls, token: str) -> bool:
        """Whether `token` is a string `_split_units` can produce (checked when loading a file)."""
        raise NotImplementedError

    # --- vocabulary -------------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """Number of tokens, special tokens included."""
        return len(self._id_to_token)

    def token_to_id(self, token: str) -> int | None:
        """The id of `token`, or None if it is not in the vocabulary."""
        return self._token_to_id.get(token)

    def id_to_token(self, token_id: int) -> str:
        """The token of `token_id`; raises UnknownTokenError for an id outside the vocabulary."""
        return self._id_to_token[self._check_id(token_id)]

    def get_vocab(self) -> dict[str, int]:
        """A copy of the token -> id table."""
        return dict(self._token_to_id)

    def tokenize(self, text: str) -> list[str]:
        """Split text into tokens: special-token literals whole, everything else into units."""
        tokens: list[str] = []
        for i, piece in enumerate(_SPECIAL_SPLIT.split(check_text(text))):
            # re.split with a capturing group alternates plain text (even i) and special tokens (odd i).
            if i % 2:
                tokens.append(piece)
            elif piece:
                tokens.extend(self._split_units(piece))
        return tokens

    # --- training ---------------------------------------------------------------------------------

    def train(self, texts: str | Iterable[str]) -> None:
        """Add the units of `texts` (a str or an iterable of str) that occur at least `min_frequency` times.

        Units already in the vocabulary keep their ids; new ones are appended in order of frequency
        (descending), ties broken by the token string (ascending code points), until `max_vocab_size` is reached.
        Calling train again extends the vocabulary the same way.
        """
        counts: Counter[str] = Counter()
        for text in [texts] if isinstance(texts, str) else texts:
            counts.update(self.tokenize(check_text(text, "each training text")))
        candidates = sorted(
            (token for token, count in counts.items()
             if count >= self.min_frequency and token not in self._token_to_id),
            key=lambda token: (-counts[token], token),
        )
        if self.max_vocab_size is not None:
            candidates = candidates[: max(0, self.max_vocab_size - self.vocab_size)]
        for token in candidates:
            self._add_token(token)

    def _add_token(self, token: str) -> None:
        self._token_to_id[token] = len(self._id_to_token)
        self._id_to_token.append(token)

    # --- encoding and decoding --------------------------------------------------------------------

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Text -> ids. Units not in the vocabulary become `<UNK>` (id 1).

        With add_special_tokens, the ids are wrapped in `<BOS>` ... `<EOS>`.
        """
        ids = [self._token_to_id.get(token, UNK_ID) for token in self.tokenize(text)]
        return [BOS_ID, *ids, EOS_ID] if add_special_tokens else ids

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        """Ids -> text. Special tokens decode to their literal (`<UNK>` for an unknown unit) unless skipped.

        Raises UnknownTokenError for an id outside the vocabulary and TypeError for a non-integer id.
        """
        tokens = [self._id_to_token[self._check_id(token_id)] for token_id in ids]
        if skip_special_tokens:
            tokens = [token for token in tokens if token not in SPECIAL_TOKENS]
        return self._join_tokens(tokens)

    def _check_id(self, token_id: int) -> int:
        try:
            index = operator.index(token_id)
        except TypeError:
            raise TypeError(f"token ids must be integers, got {token_id!r}") from None
        if not 0 <= index < len(self._id_to_token):
            raise UnknownTokenError(
                f"token id {index} is not in the vocabulary (ids are 0..{len(self._id_to_token) - 1})"
            )
        return index

    # --- serialization ----------------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the tokenizer as JSON (UTF-8): its type, settings and tokens in id order."""
        state = {
            "type": type(self).__name__,
            "version": _FORMAT_VERSION,
            "min_frequency": self.min_frequency,
            "max_vocab_size": self.max_vocab_size,
            "tokens": self._id_to_token,
        }
        with open(path, "w", encoding="utf-8") as file:
            json.dump(state, file, ensure_ascii=False, indent=1)
            file.write("\n")

    @classmethod
    def load(cls, path: str | os.PathLike[str]):
        """Read a tokenizer written by `save`; raises ValueError naming what is wrong with a bad file."""
        try:
            with open(path, encoding="utf-8") as file:
                state = json.load(file)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"{path}: not a UTF-8 JSON tokenizer file ({error})") from None
        if not isinstance(state, dict):
            raise ValueError(f"{path}: expected a JSON object, got {type(state).__name__}")
        if state.get("type") != cls.__name__:
            raise ValueError(f"{path}: holds a {state.get('type')!r}, not a {cls.__name__!r}")
        if state.get("version") != _FORMAT_VERSION:
            raise ValueError(f"{path}: unsupported format version {state.get('version')!r}")
        tokenizer = cls(state.get("min_frequency"), state.get("max_vocab_size"))
        tokens = state.get("tokens")
        if not isinstance(tokens, list) or tuple(tokens[: len(SPECIAL_TOKENS)]) != SPECIAL_TOKENS:
            raise ValueError(f"{path}: 'tokens' must be a list starting with {list(SPECIAL_TOKENS)}")
        for token in tokens[len(SPECIAL_TOKENS):]:
            valid = isinstance(token, str) and lone_surrogate_index(token) is None and cls._is_unit(token)
            if not valid:
                raise ValueError(f"{path}: {token!r} is not a valid {cls.__name__} token")
            if token in tokenizer._token_to_id:
                raise ValueError(f"{path}: token {token!r} appears twice")
            tokenizer._add_token(token)
        if tokenizer.max_vocab_size is not None and tokenizer.vocab_size > tokenizer.max_vocab_size:
            raise ValueError(
                f"{path}: {tokenizer.vocab_size} tokens exceed max_vocab_size {tokenizer.max_vocab_size}"
            )
        return tokenizer

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(vocab_size={self.vocab_size}, min_frequency={self.min_frequency}, "
            f"max_vocab_size={self.max_vocab_size})"
        )

"""HF decoders: the text HF tokenizers' ``decode`` makes of the token strings of ids (``id_to_token``).

Each step maps a list of strings to a list of strings, as HF's ``decode_chain``; the result is joined. Steps:
ByteLevel, Metaspace, WordPiece, ByteFallback, Fuse, Strip, Replace, and Sequence of them. Without a decoder,
HF joins the token strings with spaces (``Decoder(None)``).
"""

from __future__ import annotations

import re
from typing import Callable

from crayon.errors import UnsupportedComponentError
from crayon.formats.hf_normalize import Replace
from crayon.formats.hf_pretokenize import from_byte_chars, is_byte_chars, pattern_from_hf

__all__ = ["Decoder", "decoder_from_hf", "BYTE_PRESERVING"]

BYTE_PRESERVING = ("ByteLevel", "Fuse")  # decoders that give the tokens' bytes as text: Crayon's plain decode
Step = Callable[[list[str], str], list[str]]  # (token strings, errors) -> strings

# WordPiece's cleanup (HF's ``cleanup``): spaces before punctuation and English contractions, in this order;
# a token none of them can apply to matches no ``_MAY_CLEAN_UP``
_CLEANUP = [(" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
            (" do not", " don't"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")]
_MAY_CLEAN_UP = re.compile(r" [.?!,']| n't| do not")


class Decoder:
    """An HF ``decoder`` entry (``spec``; None for none) as the steps that turn token strings into text."""

    def __init__(self, spec: dict | None):
        self.spec = spec
        self.steps = [] if spec is None else _steps(spec)

    def decode(self, tokens: list[str], errors: str = "replace") -> str:
        """The text of the token strings; ``errors`` handles byte sequences that are not UTF-8 as
        ``bytes.decode`` does ("replace" is HF's)."""
        if self.spec is None:
            return " ".join(tokens)
        for step in self.steps:
            tokens = step(tokens, errors)
        return "".join(tokens)

    @property
    def preserves_bytes(self) -> bool:
        """Whether the text is the UTF-8 decoding of the tokens' bytes (ByteLevel and Fuse only)."""
        return self.spec is not None and _preserves_bytes(self.spec)

    def to_hf(self) -> dict | None:
        return self.spec

    def __reduce__(self):
        return Decoder, (self.spec,)

    def __repr__(self) -> str:
        return f"Decoder({self.spec!r})"


def decoder_from_hf(spec: dict | None) -> Decoder:
    """The decoder of a ``tokenizer.json``'s ``decoder`` entry; an unsupported one raises by name."""
    return Decoder(spec)


def _preserves_bytes(spec: dict) -> bool:
    if spec.get("type") == "Sequence":
        return all(_preserves_bytes(inner) for inner in spec.get("decoders", []))
    return spec.get("type") in BYTE_PRESERVING


def _steps(spec: dict) -> list[Step]:
    kind = spec.get("type")
    if kind == "Sequence":
        return [step for inner in spec.get("decoders", []) for step in _steps(inner)]
    if kind == "ByteLevel":
        return [_byte_level]
    if kind == "Fuse":
        return [lambda tokens, errors: ["".join(tokens)]]
    if kind == "ByteFallback":
        return [_byte_fallback]
    if kind == "Metaspace":
        replacement = spec.get("replacement", "\u2581")
        scheme = spec.get("prepend_scheme", "always" if spec.get("add_prefix_space", True) else "never")
        return [lambda tokens, errors: _metaspace(tokens, replacement, scheme != "never")]
    if kind == "WordPiece":
        prefix, cleanup = spec.get("prefix", "##"), spec.get("cleanup", True)
        return [lambda tokens, errors: _wordpiece(tokens, prefix, cleanup)]
    if kind == "Strip":
        content, start, stop = spec["content"], int(spec.get("start", 0)), int(spec.get("stop", 0))
        return [lambda tokens, errors: [_strip(token, content, start, stop) for token in tokens]]
    if kind == "Replace":  # HF's Replace decoder is its Replace normalizer applied to each token
        pattern, is_regex = pattern_from_hf(spec["pattern"], "decoder Replace")
        content = spec["content"]
        if not is_regex and pattern:  # a literal: str.replace makes the same left-to-right replacements
            return [lambda tokens, errors: [token.replace(pattern, content) for token in tokens]]
        replace = Replace(pattern, content, is_regex=is_regex)
        return [lambda tokens, errors: [replace(token) for token in tokens]]
    raise UnsupportedComponentError(f"decoder {kind!r} is not supported")


def _byte_level(tokens: list[str], errors: str) -> list[str]:
    """GPT-2's byte-level characters back to bytes; a token with a character outside the table is its UTF-8."""
    data = b"".join(from_byte_chars(token) if is_byte_chars(token) else token.encode("utf-8") for token in tokens)
    return [data.decode("utf-8", errors)]


def _byte_fallback(tokens: list[str], errors: str) -> list[str]:
    """Runs of ``<0xXX>`` tokens become their bytes' text; a run that is not UTF-8 becomes one U+FFFD per byte."""
    out: list[str] = []
    pending = bytearray()

    def flush():
        if pending:
            try:
                out.append(pending.decode("utf-8"))
            except UnicodeDecodeError:
                if errors == "strict":
                    raise
                out.append("\ufffd" * len(pending))
            pending.clear()

    for token in tokens:
        byte = _fallback_byte(token)
        if byte is None:
            flush()
            out.append(token)
        else:
            pending.append(byte)
    flush()
    return out


def _fallback_byte(token: str) -> int | None:
    if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
        try:
            return int(token[3:5], 16)
        except ValueError:
            return None
    return None


def _metaspace(tokens: list[str], replacement: str, strip_first: bool) -> list[str]:
    """``replacement`` back to spaces; in the first token it is dropped (HF drops every one there)."""
    return [token.replace(replacement, "" if i == 0 and strip_first else " ") for i, token in enumerate(tokens)]


def _wordpiece(tokens: list[str], prefix: str, cleanup: bool) -> list[str]:
    """Tokens after the first join their word when they start with ``prefix`` (removed), else start a new one."""
    out = []
    for i, token in enumerate(tokens):
        if i:
            token = token.replace(prefix, "", 1) if token.startswith(prefix) else " " + token
        if cleanup and _MAY_CLEAN_UP.search(token):
            for before, after in _CLEANUP:
                token = token.replace(before, after)
        out.append(token)
    return out


def _strip(token: str, content: str, start: int, stop: int) -> str:
    """Up to ``start`` leading and ``stop`` trailing ``content`` characters removed (counted separately, as HF
    does: where they overlap, HF fails)."""
    begin = 0
    while begin < min(start, len(token)) and token[begin] == content:
        begin += 1
    end = len(token)
    while len(token) - end < stop and end > 0 and token[end - 1] == content:
        end -= 1
    if begin > end or len(token) - end == len(token) < stop:
        raise ValueError(f"HF's Strip decoder fails on the token {token!r} (start={start}, stop={stop})")
    return token[begin:end]


"""Read and write ``.tiktoken`` vocabulary files: one ``base64(token) rank`` pair per line (optionally gzipped)."""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import os

from crayon.errors import FormatError

__all__ = ["load_tiktoken_bpe", "save_tiktoken_bpe"]


def load_tiktoken_bpe(path: str | os.PathLike, expected_sha256: str | None = None) -> dict[bytes, int]:
    """Load mergeable ranks (token bytes -> rank) from a ``.tiktoken`` or ``.tiktoken.gz`` file; with
    ``expected_sha256``, the (decompressed) content must have that hash."""
    with open(path, "rb") as handle:
        data = handle.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if expected_sha256 is not None and hashlib.sha256(data).hexdigest() != expected_sha256:
        raise ValueError(f"{os.fspath(path)}: sha256 {hashlib.sha256(data).hexdigest()} differs from the expected "
                         f"{expected_sha256}; the file is damaged, reinstall it")
    ranks: dict[bytes, int] = {}
    for line_number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            token_b64, rank = line.split()
            # "=" is the empty token (Whisper's files end with one); tiktoken decodes it to b"".
            token = b"" if token_b64 == b"=" else base64.b64decode(token_b64, validate=True)
            ranks[token] = int(rank)
        except (ValueError, binascii.Error):
            raise FormatError(f"{os.fspath(path)}:{line_number}: not a '<base64 token> <rank>' line") from None
    if len(set(ranks.values())) != len(ranks):
        raise FormatError(f"{os.fspath(path)}: two tokens share a rank")
    return ranks


def save_tiktoken_bpe(ranks: dict[bytes, int], path: str | os.PathLike) -> None:
    """Write mergeable ranks in tiktoken's format, sorted by rank."""
    with open(path, "wb") as handle:
        for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
            handle.write(base64.b64encode(token) + b" " + str(rank).encode() + b"\n")

"""A normalizer that rewrites each character on its own (HF's ``BertNormalizer``, ``Lowercase``, ``StripAccents``,
``Nmt`` and sequences of them), in Numba over the UTF-8 bytes of many texts at once: the twin of the normalizer,
from its ``character_table`` (``crayon.formats.character_table``, what the normalizer makes of each character
alone). A text holding a character the table marks ``whole_text`` is normalized by the normalizer itself."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import threading
import unicodedata
from pathlib import Path

import numpy as np

from crayon.jit.aot import kernel_dir
from crayon.jit.lazy import njit

UNCHANGED = -1
WHOLE_TEXT = -2


@njit(cache=True, nogil=True)
def _rewrite_kernel(data, text_ends, rewrites, replacements, out, out_ends, whole_texts):
    """Write each text's characters rewritten to ``out`` and its end to ``out_ends``: a character's rewrite is
    ``UNCHANGED``, ``WHOLE_TEXT`` (the text is left empty and its index written to ``whole_texts``) or where its
    replacement starts in ``replacements`` (a length byte, then the bytes). Returns (bytes written, texts left)."""
    n = 0
    whole_count = 0
    start = 0
    for text in range(text_ends.shape[0]):
        end = text_ends[text]
        text_start = n
        pos = start
        while pos < end:
            code_point = np.int64(data[pos])
            width = 1
            if code_point >= 0xF0:
                code_point, width = code_point & 0x07, 4
            elif code_point >= 0xE0:
                code_point, width = code_point & 0x0F, 3
            elif code_point >= 0x80:
                code_point, width = code_point & 0x1F, 2
            for i in range(1, width):
                code_point = (code_point << 6) | (data[pos + i] & 0x3F)
            rewrite = rewrites[code_point]
            if rewrite == UNCHANGED:
                for i in range(width):
                    out[n + i] = data[pos + i]
                n += width
            elif rewrite == WHOLE_TEXT:
                break
            else:
                length = replacements[rewrite]
                for i in range(length):
                    out[n + i] = replacements[rewrite + 1 + i]
                n += length
            pos += width
        if pos < end:
            n = text_start
            whole_texts[whole_count] = text
            whole_count += 1
        out_ends[text] = n
        start = end
    return n, whole_count


class CharacterNormalizer:
    """``normalizer`` (one with a ``character_table``) on the UTF-8 bytes of many texts in one kernel call;
    ``whole_texts`` counts the texts it handed to the normalizer itself."""

    def __init__(self, normalizer, table=None, *, arrays: tuple[np.ndarray, np.ndarray, float] | None = None):
        """From the normalizer's ``character_table``, or from the ``arrays`` (rewrites, replacements, growth) a
        normalizer's table was packed into (``store``)."""
        self.normalizer = normalizer
        self.whole_texts = 0
        self._lock = threading.Lock()
        if arrays is not None:
            self.rewrites, self.replacements, self.growth = arrays
            return
        changed = np.flatnonzero(~table.unchanged() & ~table.whole_text)
        data, ends = table.utf8_texts(changed)
        lengths = np.diff(ends, prepend=0)
        if len(lengths) and lengths.max() > 0xFF:
            raise ValueError("a character's replacement is longer than 255 bytes")
        # each replacement after its length byte
        self.replacements = np.insert(data, ends - lengths, lengths.astype(np.uint8))
        self.rewrites = np.full(len(table.whole_text), UNCHANGED, np.int32)
        self.rewrites[table.whole_text] = WHOLE_TEXT
        self.rewrites[changed] = ends - lengths + np.arange(len(changed))
        widths = 1 + (changed >= 0x80).astype(np.int64) + (changed >= 0x800) + (changed >= 0x10000)
        self.growth = max(1.0, float((lengths / widths).max(initial=0.0)))  # output bytes per input byte, at most

    def store(self, path: Path) -> None:
        """Write the packed table to ``path`` (whole or not at all; a folder that cannot be written keeps none)."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as handle:
                np.savez(handle, rewrites=self.rewrites, replacements=self.replacements, growth=self.growth)
            os.replace(handle.name, path)
        except OSError:
            return

    def normalize_utf8(self, data: np.ndarray, text_ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(normalized bytes, their text ends) of the texts whose UTF-8 bytes are data[text_ends[i - 1]:
        text_ends[i]] (from 0)."""
        out = np.empty(int(len(data) * self.growth) + 4, np.uint8)
        out_ends = np.empty(len(text_ends), np.int64)
        whole_texts = np.empty(len(text_ends), np.int64)
        n, whole_count = _rewrite_kernel(data, text_ends.astype(np.int64), self.rewrites, self.replacements, out,
                                         out_ends, whole_texts)
        if not whole_count:
            return out[:n], out_ends
        with self._lock:
            self.whole_texts += whole_count
        return self._with_whole_texts(out[:n], out_ends, whole_texts[:whole_count], data, text_ends)

    def _with_whole_texts(self, data: np.ndarray, text_ends: np.ndarray, whole_texts: np.ndarray,
                          given: np.ndarray, given_ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The bytes with the texts ``whole_texts`` (empty there) normalized by the normalizer put in place, from
        the texts as given (their bytes ``given``, ending at ``given_ends``)."""
        starts = np.concatenate(([0], given_ends[:-1]))
        normalized = [np.frombuffer(self.normalizer(given[starts[text] : given_ends[text]].tobytes().decode("utf-8"))
                                    .encode("utf-8"), np.uint8) for text in whole_texts]
        pieces, previous_end = [], 0
        for text, text_bytes in zip(whole_texts, normalized):
            pieces += [data[previous_end : text_ends[text]], text_bytes]
            previous_end = text_ends[text]
        pieces.append(data[previous_end:])
        added = np.zeros(len(text_ends), np.int64)
        added[whole_texts] = [len(text_bytes) for text_bytes in normalized]
        return np.concatenate(pieces), text_ends + np.cumsum(added)


def character_normalizer_of(normalizer) -> CharacterNormalizer | None:
    """The jit twin of ``normalizer`` where it rewrites each character on its own, else None. Building its table
    runs the normalizer on every code point (about a second the first time in a process), so the packed arrays
    are kept in ``kernel_dir()`` under a name that changes with the normalizer and the code that builds them."""
    if not getattr(normalizer, "per_character", False):
        return None
    path = kernel_dir() / f"characters-{_stored_name(normalizer)}.npz"
    try:
        with np.load(path) as stored:
            return CharacterNormalizer(normalizer, arrays=(stored["rewrites"], stored["replacements"],
                                                           float(stored["growth"])))
    except (OSError, KeyError, ValueError):  # not built yet, or unreadable: build it
        pass
    built = CharacterNormalizer(normalizer, normalizer.character_table())
    built.store(path)
    return built


def _stored_name(normalizer) -> str:
    """A hash of the normalizer's tokenizer.json object, the Unicode data of Python's ``unicodedata`` and the source
    of this module and of ``crayon.formats`` (where the normalizers and their tables are made)."""
    digest = hashlib.sha256(json.dumps(normalizer.to_hf(), sort_keys=True).encode())
    digest.update(f"{unicodedata.unidata_version} {sys.version}".encode())
    package = Path(__file__).resolve().parents[1]
    for path in [Path(__file__).resolve(), *sorted((package / "formats").glob("*.py"))]:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:24]

"""Writing a tokenizer as a cartridge: ``Tokenizer.save`` and the profile cache call ``save_cartridge``.

A cartridge of a BPE tokenizer holds the jit engine's tables (``crayon.jit.tables.build_bpe_tables``) under
``CARTRIDGE_SECTION`` names (the vocabulary and the DAT under the format's own names, the rest as ``bpe.*``);
a longest-match tokenizer's holds its vocabulary and DAT. ``crayon.loading.load_cartridge`` reads both back.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from crayon.cartridge import check_writable, vocab_sections, write_cartridge
from crayon.errors import UnsupportedComponentError
from crayon.reference.bpe import BytePairModel
from crayon.reference.longest import LongestMatchModel

__all__ = ["CARTRIDGE_SECTION", "save_cartridge"]

CARTRIDGE_SECTION = {
    "token_bytes": "vocab.bytes",
    "token_offsets": "vocab.offsets",
    "dat_base": "dat.base",
    "dat_check": "dat.check",
    "dat_values": "dat.values",
    "empty_tokens": "vocab.empty",  # ids of tokens with no bytes (Whisper's last token), when there are any
}


def save_cartridge(tokenizer, path: str | os.PathLike, *, source: dict | None = None) -> Path:
    """Write ``tokenizer`` (a ``crayon.Tokenizer``) as a cartridge (see the module docstring); return the path
    written: ``path``, with ``.crayon`` appended when it lacks it."""
    if tokenizer.tables is None and not isinstance(tokenizer.model, (BytePairModel, LongestMatchModel)):
        raise UnsupportedComponentError(
            f"a cartridge of a {type(tokenizer.model).__name__} (cartridges hold byte-level BPE and longest match)")
    path = check_writable(path)
    metadata = {
        "name": tokenizer.name,
        "algorithm": tokenizer.algorithm,
        "pattern": tokenizer.pattern,
        "special_tokens": tokenizer.special_tokens,
        "added_tokens": tokenizer.added_tokens,
        "added_token_options": {token: options.to_hf()
                                for token, options in tokenizer.added_token_options.items()},
        "source": source,
        "hf_post_processor": None if tokenizer.post_processor is None else tokenizer.post_processor.to_hf(),
        "hf_decoder": None if tokenizer.decoder is None else tokenizer.decoder.to_hf(),
        "vocabulary_version": tokenizer.vocabulary_version,
        "parent_hash": tokenizer.parent_hash,
    }
    if tokenizer.normalizer is not None or tokenizer.pattern is None:
        from crayon.formats.hf_io import pipeline_to_hf

        metadata["hf_pipeline"] = pipeline_to_hf(tokenizer.normalizer, tokenizer.pretokenizer)
    if tokenizer.algorithm == "longest":
        model = tokenizer.model
        tokens = {i: t for i, t in model.token_bytes.items() if i < model.first_reserved_id}
        sections = {**vocab_sections(tokens), "dat.base": model.base, "dat.check": model.check, "dat.values": model.values}
        metadata["first_reserved_id"] = model.first_reserved_id
    else:
        tables = tokenizer.tables
        if tables is None:
            from crayon.jit.engine import tables_for

            tables = tables_for(tokenizer.model)
        sections = {CARTRIDGE_SECTION.get(name, f"bpe.{name}"): array for name, array in tables.items()}
        model = tokenizer.model
        empty = [token_id for token_id, token in model.token_bytes.items() if not token]
        if empty:
            sections["vocab.empty"] = np.array(empty, np.int64)
        metadata["whole_span_lookup"] = bool(model.whole_span_lookup)
        if model.merges is not None:
            sections["merges.pairs"] = np.array(
                [(model.ranks[left], model.ranks[right]) for left, right in model.merges], dtype=np.int32
            ).reshape(-1, 2)
    write_cartridge(path, metadata, sections)
    return path

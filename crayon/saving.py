"""Writing a tokenizer as a cartridge: ``Tokenizer.save`` and the profile cache call ``save_cartridge``.

A cartridge of a BPE tokenizer holds the jit engine's tables (``crayon.jit.tables.build_bpe_tables``) under
``CARTRIDGE_SECTION`` names (the vocabulary and the DAT under the format's own names, the rest as ``bpe.*``);
a longest-match tokenizer's holds its vocabulary and DAT. A WordPiece, WordLevel, Unigram or character-BPE
tokenizer's (``model_sections``) holds its token strings, its options in the metadata's "model", its DATs and, for
Unigram, the scores and the ids the Viterbi may use; for BPE, the merges as id triples (left, right, rank).
``crayon.loading.load_cartridge`` reads them all back.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import numpy as np

from crayon.cartridge import check_writable, vocab_sections, write_cartridge
from crayon.errors import UnsupportedComponentError
from crayon.reference.bpe import BytePairModel
from crayon.reference.char_bpe import CharBytePairModel
from crayon.reference.longest import LongestMatchModel
from crayon.reference.unigram import UnigramModel
from crayon.reference.wordlevel import SentencePieceWordModel, WordLevelModel
from crayon.reference.wordpiece import WordPieceModel

__all__ = ["CARTRIDGE_SECTION", "VOCAB_MODELS", "save_cartridge", "model_sections"]

VOCAB_MODELS = (WordPieceModel, WordLevelModel, UnigramModel, CharBytePairModel, SentencePieceWordModel)

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
    vocab_model = issubclass(tokenizer.model_class, VOCAB_MODELS)
    if tokenizer.tables is None and not vocab_model and not isinstance(tokenizer.model, (BytePairModel, LongestMatchModel)):
        raise UnsupportedComponentError(
            f"a cartridge of a {type(tokenizer.model).__name__} (cartridges hold byte-level BPE, longest match, "
            "WordPiece, WordLevel, Unigram and BPE over characters)")
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
        "has_hf_decoder": tokenizer.decoder is not None,  # HF's null decoder (None above) joins tokens with spaces
        "vocabulary_version": tokenizer.vocabulary_version,
        "parent_hash": tokenizer.parent_hash,
        "template": [list(ids) for ids in tokenizer.template],
    }
    if tokenizer.normalizer is not None or tokenizer.pattern is None:
        from crayon.formats.hf_io import pipeline_to_hf

        metadata["hf_pipeline"] = pipeline_to_hf(tokenizer.normalizer, tokenizer.pretokenizer,
                                                 byte_level=not vocab_model)
        charsmaps = charsmaps_to_sections(metadata["hf_pipeline"]["normalizer"])
    if vocab_model:
        metadata["model"], sections = model_sections(tokenizer.model)
        decoded = tokenizer.model.token_bytes  # what each token decodes to, read without building the model
        sections.update({f"decoded.{name.split('.')[1]}": array for name, array in vocab_sections(decoded).items()})
        empty = [token_id for token_id, token in decoded.items() if not token]
        if empty:
            sections["decoded.empty"] = np.array(empty, np.int64)
    elif tokenizer.algorithm == "longest":
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
    if "hf_pipeline" in metadata:
        sections.update(charsmaps)
    write_cartridge(path, metadata, sections)
    return path


def model_sections(model) -> tuple[dict, dict[str, np.ndarray]]:
    """The metadata "model" object and the sections of a WordPiece, WordLevel, Unigram, character-BPE or
    SentencePiece word model."""
    if isinstance(model, WordPieceModel):
        options = {"type": "WordPiece", "unk_token": model.unk_token, "continuing_subword_prefix": model.prefix,
                   "max_input_chars_per_word": model.max_input_chars_per_word}
        sections = vocab_sections({i: token.encode("utf-8") for token, i in model.vocab.items()})
        sections.update(dat_sections("wordpiece.initial", model.initial))
        sections.update(dat_sections("wordpiece.continuing", model.continuing))
        return options, sections
    if isinstance(model, WordLevelModel):
        sections = vocab_sections({i: token.encode("utf-8") for token, i in model.vocab.items()})
        sections.update(dat_sections("wordlevel.dat", model.dat))
        return {"type": "WordLevel", "unk_token": model.unk_token}, sections
    if isinstance(model, SentencePieceWordModel):
        sections = vocab_sections({i: piece.encode("utf-8") for i, piece in enumerate(model.strings)})
        sections["words.matchable"] = np.array(model.matchable, np.int64)
        sections.update(dat_sections("words.dat", model.dat))
        return {"type": "SentencePieceWord", "unk_id": model.unk_id, "byte_fallback": model.byte_fallback}, sections
    if isinstance(model, UnigramModel):
        options = {"type": "Unigram", "unk_id": model.unk_id, "byte_fallback": model.byte_fallback,
                   "fuse_unk": model.fuse_unk, "single_precision": model.score_type == np.float32,
                   "unk_score": float(model.unk_score)}
        sections = vocab_sections({i: piece.encode("utf-8") for i, (piece, _) in enumerate(model.pieces)})
        sections["unigram.scores"] = np.array([score for _, score in model.pieces], np.float64)
        sections["unigram.matchable"] = np.array(model.matchable, np.int64)
        sections.update(dat_sections("unigram.dat", model.dat))
        return options, sections
    tokens = {token_id: token for token, token_id in model.vocab.items()}
    options = {"type": "CharBPE", "unk_token": None if model.unk_id is None else tokens[model.unk_id],
               "byte_fallback": model.byte_fallback, "fuse_unk": model.fuse_unk, "user_defined": model.user_defined}
    sections = vocab_sections({i: token.encode("utf-8") for token, i in model.vocab.items()})
    sections["merges.ranked"] = np.array(
        [(left, right, rank) for (left, right), (rank, _) in model.merges.items()], np.int64).reshape(-1, 3)
    sections.update(dat_sections("char_bpe.dat", model.dat))
    return options, sections


def dat_sections(name: str, dat: tuple[np.ndarray, np.ndarray, np.ndarray]) -> dict[str, np.ndarray]:
    """A model's DAT as sections ``name.base``, ``name.check``, ``name.values``: opening the cartridge maps it
    instead of building it again (``crayon.loading``)."""
    return {f"{name}.{part}": np.asarray(array, np.int32) for part, array in zip(("base", "check", "values"), dat)}


def charsmaps_to_sections(normalizer: dict | None) -> dict[str, np.ndarray]:
    """Move the precompiled character maps of a normalizer's HF object (base64 in a tokenizer.json) into sections
    ``charsmap.N``, leaving ``"charsmap_section": "charsmap.N"`` in their place: a map is a few hundred KB that
    opening the cartridge then maps instead of parsing. ``crayon.loading`` puts them back."""
    sections: dict[str, np.ndarray] = {}
    for spec in _normalizer_specs(normalizer):
        if spec.get("type") == "Precompiled" and "precompiled_charsmap" in spec:
            name = f"charsmap.{len(sections)}"
            sections[name] = np.frombuffer(base64.b64decode(spec.pop("precompiled_charsmap")), np.uint8)
            spec["charsmap_section"] = name
    return sections


def _normalizer_specs(spec: dict | None) -> list[dict]:
    if spec is None:
        return []
    return [spec, *(inner for nested in spec.get("normalizers", []) for inner in _normalizer_specs(nested))]

"""``crayon.load`` and cartridges of tokenizers: from a built-in name, a vocabulary file or a cartridge, and back.

A built-in name ("cl100k_base", "o200k_base", a trained profile such as "lite") resolves to the first
``NAME.crayon`` in the profile folders (``crayon.profiles.profile_dirs``); an OpenAI encoding with no cartridge
yet is read from its official vocabulary file, compiled and cached there on first use.

A cartridge of a BPE tokenizer holds the jit engine's tables (``crayon.jit.tables.build_bpe_tables``) under
``CARTRIDGE_SECTION`` names (the vocabulary and the DAT under the format's own names, the rest as ``bpe.*``), so
opening it is a map and some numpy views; the reference model is rebuilt from them only when it is used.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from crayon.cartridge import SUFFIX as CARTRIDGE_SUFFIX
from crayon.cartridge import cartridge_path, open_cartridge, read_seed_v2
from crayon.errors import CartridgeError, UnsupportedComponentError
from crayon.formats.hf_postprocess import post_processor_from_hf
from crayon.formats.tiktoken_io import load_tiktoken_bpe
from crayon.patterns import PATTERNS
from crayon.profiles import OPENAI_ENCODINGS, VOCABULARY_SHA256, cache_dirs, find_vocabulary_file, profile_dirs
from crayon.reference.added_tokens import AddedTokenOptions
from crayon.reference.bpe import BytePairModel
from crayon.reference.pretokenize import WholeText
from crayon.saving import CARTRIDGE_SECTION, save_cartridge
from crayon.tokenizer import Tokenizer, remember_source
from crayon.version import __version__

__all__ = ["load", "list_profiles", "load_cartridge", "as_longest_match", "ALGORITHMS", "CARTRIDGE_SUFFIX"]

ALGORITHMS = ("bpe", "longest")
TABLE_NAME = {section: table for table, section in CARTRIDGE_SECTION.items()}


@remember_source
def load(
    source: str | os.PathLike,
    *,
    pattern: str | None = None,
    special_tokens: dict[str, int] | None = None,
    backend: str = "auto",
    algorithm: str = "bpe",
    verify: bool = False,
    mmap: bool = True,
) -> Tokenizer:
    """Load a tokenizer.

    ``source``: a built-in name (an OpenAI encoding: "gpt2", "r50k_base", "p50k_base", "p50k_edit",
    "cl100k_base", "o200k_base"; or a profile from ``crayon.list_profiles()`` such as "lite"), a cartridge
    (``.crayon``; the suffix may be left out, as ``Tokenizer.save`` adds it), a ``.tiktoken`` file (give
    ``pattern``: a name such as "cl100k_base" or a regex, and ``special_tokens``), an HF ``tokenizer.json``
    (byte-level BPE, WordPiece, WordLevel, Unigram, or BPE over characters), a SentencePiece unigram or bpe
    ``.model``, or a Crayon v2 ``.dat`` (with its ``.json`` beside it; a longest-match tokenizer). A str with
    neither a path separator nor a dot is a name: the built-in profile of that name, else the cartridge
    ``NAME.crayon`` in the working folder, never another file or folder named so.
    ``backend``: "reference", "jit", "cuda" or "auto". ``algorithm``: "bpe" (exact) or "longest" (greedy
    longest match over the vocabulary: fast, lossless, but not the tokens BPE gives). ``verify=True`` checks a
    cartridge's checksums and invariants before using it. ``mmap=False`` reads a cartridge into memory instead of
    mapping it: a mapped cartridge must not be truncated or rewritten in place while it is in use (replace it by
    renaming a new file over it, as ``save`` does).

    ```pycon
    >>> tok = crayon.load("cl100k_base")
    >>> tok.encode("hello world")
    [15339, 1917]

    ```
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
    name = os.fspath(source)
    if not isinstance(name, str):
        raise TypeError(f"load takes a name or a path, not {type(name).__name__}")
    path = Path(name)
    if isinstance(source, str) and _is_bare_name(name) or (not path.exists() and _is_profile(name)):
        return _load_name(name, backend=backend, algorithm=algorithm, verify=verify, mmap=mmap,
                          pattern=pattern, special_tokens=special_tokens)
    if not path.exists() and cartridge_path(path).is_file():
        path = cartridge_path(path)
    if not path.exists():
        raise FileNotFoundError(f"no file {name!r} (and no built-in profile of that name)")
    if path.name.endswith(CARTRIDGE_SUFFIX):
        tokenizer = load_cartridge(path, backend=backend, verify=verify, mmap=mmap)
        return tokenizer if algorithm == "bpe" else as_longest_match(tokenizer, backend)
    if path.suffix == ".dat":
        return _load_seed_v2(path, backend=backend)
    if path.suffix == ".model":
        from crayon.formats.sentencepiece import read_sentencepiece_tokenizer

        if algorithm != "bpe":
            raise ValueError(f"algorithm={algorithm!r} does not apply to a SentencePiece model")
        tokenizer = Tokenizer.from_spec(read_sentencepiece_tokenizer(path), backend=backend)
    elif path.name.endswith(".json"):
        if algorithm == "bpe" and backend != "reference":
            return _load_hf_compiled(path, backend=backend)
        from crayon.formats.hf_io import read_hf_tokenizer

        tokenizer = Tokenizer.from_spec(read_hf_tokenizer(path), backend="reference")
    elif path.name.endswith((".tiktoken", ".tiktoken.gz")):
        if pattern is None:
            raise ValueError(f"loading {path.name} needs pattern=: a name ({', '.join(PATTERNS)}) or a regex")
        tokenizer = Tokenizer(
            path.name.split(".")[0],
            BytePairModel(load_tiktoken_bpe(path)),
            pattern=pattern,
            special_tokens=special_tokens,
            backend=backend if algorithm == "bpe" else "reference",
        )
    else:
        raise ValueError(
            f"{path.name}: unknown vocabulary format (expected .crayon, .tiktoken[.gz], .json, .model or .dat)")
    return tokenizer if algorithm == "bpe" else as_longest_match(tokenizer, backend)


def openai_ranks(name: str) -> dict[bytes, int]:
    """The mergeable ranks of an OpenAI encoding, read from its shipped file and checked against its sha256."""
    return load_tiktoken_bpe(find_vocabulary_file(name), VOCABULARY_SHA256[OPENAI_ENCODINGS[name].vocabulary])


def _is_bare_name(name: str) -> bool:
    """A name (no path separator, no dot): a profile, or a cartridge saved under that name; never another file."""
    return "." not in name and os.sep not in name and (os.altsep is None or os.altsep not in name)


def _profile_cartridge(name: str) -> Path | None:
    """The first ``NAME.crayon`` in the profile folders, or None."""
    return next((d / f"{name}{CARTRIDGE_SUFFIX}" for d in profile_dirs() if (d / f"{name}{CARTRIDGE_SUFFIX}").is_file()), None)


def _is_profile(name: str) -> bool:
    return os.sep not in name and (name in OPENAI_ENCODINGS or _profile_cartridge(name) is not None)


def _load_name(name, *, backend, algorithm, verify, mmap, pattern, special_tokens) -> Tokenizer:
    """A built-in profile, else the cartridge ``NAME.crayon`` in the working folder (what ``save(NAME)`` wrote)."""
    if _is_profile(name):
        return _load_profile(name, backend=backend, algorithm=algorithm, verify=verify, mmap=mmap,
                             pattern=pattern, special_tokens=special_tokens)
    saved = cartridge_path(name)
    if saved.is_file():
        tokenizer = load_cartridge(saved, backend=backend, verify=verify, mmap=mmap)
        return tokenizer if algorithm == "bpe" else as_longest_match(tokenizer, backend)
    known = ", ".join(sorted(list_profiles()))
    raise FileNotFoundError(
        f"no profile named {name!r} (available: {known}) and no cartridge {saved} here; a file of another "
        f"format is named with its suffix (.tiktoken, .json, .dat)"
    )


def list_profiles() -> dict[str, str]:
    """Built-in profile names and where each comes from (a cartridge, or a vocabulary file compiled on first use)."""
    found: dict[str, str] = {}
    for folder in profile_dirs():
        for cartridge in sorted(folder.glob(f"*{CARTRIDGE_SUFFIX}")) if folder.is_dir() else ():
            found.setdefault(cartridge.stem, str(cartridge))
    for name in OPENAI_ENCODINGS:
        if name not in found:
            found[name] = f"{find_vocabulary_file(name)} (compiled to a cartridge on first use)"
    return found


def _load_profile(name, *, backend, algorithm, verify, mmap, pattern, special_tokens) -> Tokenizer:
    """A built-in profile: its cartridge, or (OpenAI encodings) its vocabulary file, compiled and cached when
    there is no sound cached cartridge compiled from the file installed now."""
    cartridge = _profile_cartridge(name)
    if name not in OPENAI_ENCODINGS:
        tokenizer = load_cartridge(cartridge, backend=backend, verify=verify, mmap=mmap)
        return tokenizer if algorithm == "bpe" else as_longest_match(tokenizer, backend)
    overridden = pattern is not None or special_tokens is not None
    tokenizer = None
    if not overridden and backend != "reference" and _is_fresh(cartridge, name):
        try:
            tokenizer = load_cartridge(cartridge, backend=backend, verify=verify, mmap=mmap)
        except CartridgeError:  # a damaged cache: rebuilt below from the vocabulary file
            tokenizer = None
    if tokenizer is None:
        encoding = OPENAI_ENCODINGS[name]
        tokenizer = Tokenizer(
            name,
            BytePairModel(openai_ranks(name)),
            pattern=pattern or encoding.pattern,
            special_tokens=encoding.special_tokens if special_tokens is None else special_tokens,
            backend=backend if algorithm == "bpe" else "reference",
        )
        if not overridden and backend != "reference":
            _cache_compiled_profile(tokenizer)
    return tokenizer if algorithm == "bpe" else as_longest_match(tokenizer, backend)


def _source_stamp(name: str) -> dict:
    """What a cached profile was compiled from: the vocabulary file as installed, and the jit tables' format."""
    from crayon.jit.tables import TABLES_VERSION

    path = find_vocabulary_file(name)
    stat = path.stat()
    return {"path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "tables_version": TABLES_VERSION,
            "crayon": __version__}


def _is_fresh(cartridge: Path | None, name: str) -> bool:
    """Whether a cached cartridge of an OpenAI encoding was compiled from the vocabulary file installed now, and
    is intact: its checksums hold (a cache is derived data, so a damaged one is rebuilt rather than trusted)."""
    if cartridge is None:
        return False
    try:
        with open_cartridge(cartridge) as opened:
            if opened.metadata.get("source") != _source_stamp(name):
                return False
            _check_once(opened)
            return True
    except (CartridgeError, FileNotFoundError):
        return False


def _check_once(opened) -> None:
    """``opened.verify_checksums()`` (about 50 ms for cl100k_base), once per version of the file: a record
    ``.NAME.checked`` beside it holds the (inode, size, mtime) its checksums held for; any write since (the cache
    is replaced by rename, a new inode) makes them checked again. No record can be written: checked every time."""
    record = opened.path.with_name(f".{opened.path.name}.checked")
    info = os.stat(opened.path)
    version = f"{info.st_ino} {info.st_size} {info.st_mtime_ns}"
    try:
        if record.read_text() == version:
            return
    except OSError:
        pass
    opened.verify_checksums()
    try:
        record.write_text(version)
    except OSError:
        pass


def _cache_compiled_profile(tokenizer: Tokenizer) -> None:
    """Save a compiled OpenAI encoding in the first writable cache folder (a failure to write is not an error)."""
    for folder in cache_dirs():
        try:
            folder.mkdir(parents=True, exist_ok=True)
            save_cartridge(tokenizer, folder / f"{tokenizer.name}{CARTRIDGE_SUFFIX}", source=_source_stamp(tokenizer.name))
            return
        except OSError:
            continue


def _load_hf_compiled(path: Path, *, backend: str) -> Tokenizer:
    """An HF tokenizer.json of a WordPiece, WordLevel, Unigram or character-BPE model, compiled to a cartridge in
    the first writable cache folder on first use and reopened from there while the file is unchanged (its path,
    size and mtime, and the cartridge format, recorded in the cartridge). Byte-level BPE files are read each
    time."""
    from crayon.formats.hf_io import read_hf_tokenizer
    from crayon.jit.tables import TABLES_VERSION
    from crayon.saving import VOCAB_MODELS

    resolved = path.resolve()
    stat = resolved.stat()
    stamp = {"path": str(resolved), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "tables_version": TABLES_VERSION,
            "crayon": __version__}
    name = f"hf-{hashlib.sha256(str(resolved).encode()).hexdigest()[:16]}{CARTRIDGE_SUFFIX}"
    for folder in cache_dirs():
        cached = folder / name
        try:
            with open_cartridge(cached) as opened:
                fresh = opened.metadata.get("source") == stamp
            if fresh:
                return load_cartridge(cached, backend=backend)
        except (CartridgeError, OSError):  # none there, or a damaged cache: compiled again below
            continue
    tokenizer = Tokenizer.from_spec(read_hf_tokenizer(path), backend=backend)
    if issubclass(tokenizer.model_class, VOCAB_MODELS):
        for folder in cache_dirs():
            try:
                folder.mkdir(parents=True, exist_ok=True)
                save_cartridge(tokenizer, folder / name, source=stamp)
                break
            except (OSError, UnsupportedComponentError):  # not writable here, or nothing a cartridge can hold
                continue
    return tokenizer


# ------------------------------------------------------------------------------------------------ cartridges


def load_cartridge(
    path: str | os.PathLike, *, backend: str = "auto", verify: bool = False, mmap: bool = True
) -> Tokenizer:
    """Open a cartridge as a Tokenizer: a map (or, ``mmap=False``, one read) and numpy views; nothing is parsed
    or copied. Whatever is wrong with the file raises ``CartridgeError``."""
    cartridge = open_cartridge(path, verify=verify, mmap=mmap)
    metadata, sections = cartridge.metadata, cartridge.sections
    name = _metadata_field(metadata, "name", str, path)
    specials = _metadata_field(metadata, "special_tokens", dict, path)
    added = _metadata_field(metadata, "added_tokens", dict, path)
    pattern = metadata.get("pattern")
    for table in (specials, added):
        if not all(isinstance(k, str) and type(v) is int and v >= 0 for k, v in table.items()):
            raise CartridgeError(f"{path}: special or added tokens must map text to ids >= 0")
    normalizer = pretokenizer = None
    if metadata.get("hf_pipeline") is not None:
        from crayon.formats.hf_io import pipeline_from_hf

        try:
            _charsmaps_from_sections(metadata["hf_pipeline"].get("normalizer"), sections)
            normalizer, pretokenizer = pipeline_from_hf(metadata["hf_pipeline"],
                                                        byte_level=None if metadata.get("model") else True)
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise CartridgeError(f"{path}: its HF pipeline cannot be read: {error}") from None
    elif not isinstance(pattern, str):
        raise CartridgeError(f"{path}: the metadata has neither a pattern nor an HF pipeline")
    algorithm = metadata.get("algorithm")
    if metadata.get("model") is not None:
        builder = VocabModelBuilder(metadata["model"], sections, path)
        tables = {"token_bytes": sections.get("decoded.bytes"), "token_offsets": sections.get("decoded.offsets")}
        if any(table is None for table in tables.values()):
            raise CartridgeError(f"{path}: the decoded-token sections are missing")
        if "decoded.empty" in sections:
            tables["empty_tokens"] = sections["decoded.empty"]
        tokenizer = _tokenizer_of(path, name, builder, pattern=pattern, special_tokens=specials, added_tokens=added,
                                  normalizer=normalizer, pretokenizer=pretokenizer, backend=backend, tables=tables,
                                  **_hf_framing(metadata, path))
        return _with_lineage(tokenizer, metadata, path)
    common = dict(pattern=pattern, special_tokens=specials, added_tokens=added, normalizer=normalizer,
                  pretokenizer=pretokenizer, backend=backend, algorithm=algorithm, **_hf_framing(metadata, path))
    if algorithm == "longest":
        from crayon.reference.longest import LongestMatchModel

        first_reserved_id = _metadata_field(metadata, "first_reserved_id", int, path)
        model = LongestMatchModel(_tokens_of(sections, path), *_dat_of(sections, path), first_reserved_id)
        return _with_lineage(_tokenizer_of(path, name, model, **common), metadata, path)
    if algorithm != "bpe":
        raise CartridgeError(f"{path}: unknown algorithm {algorithm!r}")
    whole_span_lookup = _metadata_field(metadata, "whole_span_lookup", bool, path)
    tables = {TABLE_NAME.get(section, section.removeprefix("bpe.")): array for section, array in sections.items()
              if section in TABLE_NAME or section.startswith("bpe.")}
    if "token_offsets" not in tables or "token_bytes" not in tables:
        raise CartridgeError(f"{path}: the vocabulary sections are missing")

    def build_model() -> BytePairModel:
        ranks = {token: token_id for token_id, token in _tokens_of(sections, path).items()}
        for token_id in sections.get("vocab.empty", ()):
            ranks[b""] = int(token_id)
        merges = None
        if "merges.pairs" in sections:
            tokens = {token_id: token for token, token_id in ranks.items()}
            try:
                merges = [(tokens[int(a)], tokens[int(b)]) for a, b in sections["merges.pairs"]]
            except (KeyError, ValueError):
                raise CartridgeError(f"{path}: merges.pairs names ids that are no tokens") from None
        return BytePairModel(ranks, merges, ignore_merges=whole_span_lookup)

    return _with_lineage(_tokenizer_of(path, name, build_model, tables=tables, **common), metadata, path)


def _hf_framing(metadata: dict, path) -> dict:
    """The Tokenizer arguments of a cartridge's HF added-token options, post-processor and decoder (a
    cartridge written before them has none; one written before ``has_hf_decoder`` lost HF's null decoder)."""
    framing = {}
    try:
        framing["added_token_options"] = {token: AddedTokenOptions.from_hf(fields)
                                          for token, fields in metadata.get("added_token_options", {}).items()}
        if metadata.get("hf_post_processor") is not None:
            framing["post_processor"] = post_processor_from_hf(metadata["hf_post_processor"])
        if metadata.get("has_hf_decoder", metadata.get("hf_decoder") is not None):
            from crayon.formats.hf_decode import decoder_from_hf

            framing["decoder"] = decoder_from_hf(metadata.get("hf_decoder"))
    except (KeyError, TypeError, AttributeError, ValueError) as error:
        raise CartridgeError(f"{path}: its HF added-token options, post-processor or decoder cannot be read: "
                             f"{error!r}") from None
    return framing


def _charsmaps_from_sections(spec: dict | None, sections: dict) -> None:
    """Hand the character maps ``crayon.saving.charsmaps_to_sections`` moved into sections back to their
    Precompiled normalizers (as ``charsmap_bytes``)."""
    if spec is None:
        return
    if spec.get("type") == "Precompiled" and "charsmap_section" in spec:
        spec["charsmap_bytes"] = sections[spec["charsmap_section"]].tobytes()
    for inner in spec.get("normalizers", []):
        _charsmaps_from_sections(inner, sections)


class VocabModelBuilder:
    """Builds the WordPiece, WordLevel, Unigram or character-BPE model of a cartridge
    (``crayon.saving.model_sections``) when the tokenizer first needs it; ``model_class`` names it before (the
    engine is chosen by it)."""

    def __init__(self, options: dict, sections: dict, path):
        from crayon.saving import VOCAB_MODELS

        classes = {model_class.__name__: model_class for model_class in VOCAB_MODELS}
        kind = options.get("type") if isinstance(options, dict) else None
        name = {"WordPiece": "WordPieceModel", "WordLevel": "WordLevelModel", "Unigram": "UnigramModel",
                "CharBPE": "CharBytePairModel", "SentencePieceWord": "SentencePieceWordModel"}.get(kind)
        if name not in classes:
            raise CartridgeError(f"{path}: unknown model type {kind!r}")
        self.model_class = classes[name]
        self.options, self.sections, self.path = options, sections, path

    def __call__(self):
        return _vocab_model_of(self.options, self.sections, self.path)


def _vocab_model_of(options: dict, sections: dict, path):
    from crayon.reference.char_bpe import CharBytePairModel
    from crayon.reference.unigram import UnigramModel
    from crayon.reference.wordlevel import SentencePieceWordModel, WordLevelModel
    from crayon.reference.wordpiece import WordPieceModel

    try:
        tokens = {token_id: token.decode("utf-8") for token_id, token in _tokens_of(sections, path).items()}
        kind = options["type"]
        if kind == "WordPiece":
            initial, continuing = _stored_dat(sections, "wordpiece.initial"), _stored_dat(sections, "wordpiece.continuing")
            return WordPieceModel({token: i for i, token in tokens.items()}, unk_token=options["unk_token"],
                                  continuing_subword_prefix=options["continuing_subword_prefix"],
                                  max_input_chars_per_word=options["max_input_chars_per_word"],
                                  dats=None if initial is None or continuing is None else (initial, continuing))
        if kind == "WordLevel":
            return WordLevelModel({token: i for i, token in tokens.items()}, unk_token=options["unk_token"],
                                  dat=_stored_dat(sections, "wordlevel.dat"))
        if kind == "SentencePieceWord":
            return SentencePieceWordModel([tokens[i] for i in range(len(tokens))], sections["words.matchable"].tolist(),
                                          unk_id=options["unk_id"], byte_fallback=options["byte_fallback"],
                                          dat=_stored_dat(sections, "words.dat"))
        if kind == "Unigram":
            scores = sections["unigram.scores"]
            pieces = [(tokens[i], float(score)) for i, score in enumerate(scores.tolist())]
            return UnigramModel(pieces, unk_id=options["unk_id"], byte_fallback=options["byte_fallback"],
                                fuse_unk=options["fuse_unk"], matchable=sections["unigram.matchable"].tolist(),
                                single_precision=options["single_precision"], unk_score=options.get("unk_score"),
                                dat=_stored_dat(sections, "unigram.dat"))
        if kind == "CharBPE":
            ranked = sections["merges.ranked"].tolist()
            return CharBytePairModel({token: i for i, token in tokens.items()},
                                     [(tokens[left], tokens[right]) for left, right, _ in ranked],
                                     ranks=[rank for _, _, rank in ranked], unk_token=options["unk_token"],
                                     byte_fallback=options["byte_fallback"], fuse_unk=options["fuse_unk"],
                                     user_defined=options.get("user_defined", ()),
                                     dat=_stored_dat(sections, "char_bpe.dat"))
    except (KeyError, IndexError, TypeError, ValueError, UnicodeDecodeError) as error:
        raise CartridgeError(f"{path}: its model cannot be read: {type(error).__name__}: {error}") from None
    raise CartridgeError(f"{path}: unknown model type {options.get('type')!r}")


def _stored_dat(sections: dict, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The DAT ``crayon.saving.dat_sections`` stored as ``name``, or None in a cartridge written before it (the
    model then builds its own). Arrays of unequal lengths or another type raise ValueError (a CartridgeError)."""
    from crayon.jit.dat import check_dat_arrays

    parts = [sections.get(f"{name}.{part}") for part in ("base", "check", "values")]
    if all(part is None for part in parts):
        return None
    if any(part is None for part in parts):
        raise ValueError(f"the DAT {name!r} lacks one of its three sections")
    check_dat_arrays(*parts)
    return tuple(parts)


def _template_of(metadata: dict, path) -> tuple[tuple[int, ...], tuple[int, ...]]:
    template = metadata.get("template", [[], []])
    if not (isinstance(template, list) and len(template) == 2
            and all(isinstance(ids, list) and all(type(i) is int for i in ids) for ids in template)):
        raise CartridgeError(f"{path}: template must be two lists of ids")
    return tuple(template[0]), tuple(template[1])


def _tokenizer_of(path, *args, **kwargs) -> Tokenizer:
    """``Tokenizer(*args, **kwargs)`` from a cartridge's contents: what it refuses is a CartridgeError."""
    try:
        return Tokenizer(*args, **kwargs)
    except (ValueError, TypeError, KeyError, IndexError) as error:
        if isinstance(error, CartridgeError):
            raise
        raise CartridgeError(f"{path}: {error}") from None


def _with_lineage(tokenizer: Tokenizer, metadata: dict, path) -> Tokenizer:
    """Set the tokenizer's vocabulary version, parent hash and template from the metadata (a cartridge written
    before they existed has none: version 1, no parent, no ids around a text)."""
    version, parent = metadata.get("vocabulary_version", 1), metadata.get("parent_hash")
    if type(version) is not int or version < 1 or not (parent is None or isinstance(parent, str)):
        raise CartridgeError(f"{path}: vocabulary_version must be an int >= 1 and parent_hash a string or null")
    tokenizer.vocabulary_version, tokenizer.parent_hash = version, parent
    tokenizer.template = _template_of(metadata, path)
    return tokenizer


def _metadata_field(metadata: dict, key: str, kind: type, path) -> object:
    value = metadata.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise CartridgeError(f"{path}: metadata field {key!r} is missing or not a {kind.__name__}")
    return value


def _tokens_of(sections: dict, path) -> dict[int, bytes]:
    try:
        blob, offsets = sections["vocab.bytes"], sections["vocab.offsets"]
    except KeyError as missing:
        raise CartridgeError(f"{path}: section {missing.args[0]!r} is missing") from None
    if len(offsets) == 0 or offsets[0] != 0 or (np.diff(offsets) < 0).any() or offsets[-1] > len(blob):
        raise CartridgeError(f"{path}: vocab.offsets are not increasing offsets into vocab.bytes")
    data = blob.tobytes()
    bounds = offsets.tolist()
    return {i: data[bounds[i] : bounds[i + 1]] for i in range(len(bounds) - 1) if bounds[i + 1] > bounds[i]}


def _dat_of(sections: dict, path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    try:
        return sections["dat.base"], sections["dat.check"], sections["dat.values"]
    except KeyError as missing:
        raise CartridgeError(f"{path}: section {missing.args[0]!r} is missing") from None


# ----------------------------------------------------------------------------------------- longest match


def as_longest_match(tokenizer: Tokenizer, backend: str = "auto") -> Tokenizer:
    """The same vocabulary, pipeline and special tokens, encoded by greedy longest match (not BPE)."""
    from crayon.jit.dat import compile_dat
    from crayon.reference.longest import LongestMatchModel

    tokens = dict(tokenizer.model.token_bytes)
    base, check, values = compile_dat(list(tokens.values()), list(tokens))
    model = LongestMatchModel(tokens, base, check, values, first_reserved_id=tokenizer.n_vocab)
    return Tokenizer(
        tokenizer.name, model, pattern=tokenizer.pattern, special_tokens=tokenizer.special_tokens,
        added_tokens=tokenizer.added_tokens, normalizer=tokenizer.normalizer,
        pretokenizer=None if tokenizer.normalizer is None and tokenizer.pattern else tokenizer.pretokenizer,
        backend=backend, algorithm="longest", added_token_options=tokenizer.added_token_options,
    )


def _load_seed_v2(path: Path, *, backend: str) -> Tokenizer:
    """A Crayon v2 ``.dat`` + ``.json``: longest match over the whole text (the format has no pre-tokenizer)."""
    from crayon.reference.longest import LongestMatchModel

    seed = read_seed_v2(path)
    model = LongestMatchModel(seed.tokens, seed.base, seed.check, seed.values,
                              first_reserved_id=max(seed.tokens, default=-1) + 1)
    return Tokenizer(path.stem, model, pattern=None, pretokenizer=WholeText(), backend=backend, algorithm="longest")

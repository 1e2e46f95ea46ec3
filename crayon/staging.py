"""Staging vocabulary versions: compare two vocabularies, validate an extension, promote it to a profile, roll back.

A profile ``NAME`` is the cartridge ``NAME.crayon`` in a profile folder (``crayon.load("NAME")``). ``promote``
validates a new version against the profile's current one, keeps the current one beside it as
``NAME@vK.crayon`` (K its ``vocabulary_version``; ``crayon.load("NAME@vK")`` opens it), and only then
replaces ``NAME.crayon`` (written and checked under a temporary name first). ``rollback`` makes the parent
the profile again, keeping the rolled-back version as ``NAME@vK`` too.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from crayon.errors import VocabularyChangeError
from crayon.evolution import is_reserved_special_token, vocabulary_hash
from crayon.loading import CARTRIDGE_SUFFIX, load_cartridge
from crayon.profiles import OPENAI_ENCODINGS, cache_dirs, profile_dirs, shipped_profiles_dir

__all__ = ["VocabularyDiff", "diff_vocabularies", "promote", "rollback", "validate_extension"]


@dataclass
class VocabularyDiff:
    """What changed from vocabulary A to B. A token is its bytes (ordinary) or its text (special or added).

    ``added``/``removed``: tokens only in B/A, by id. ``moved``: tokens in both under other ids (A id, B id).
    ``changed``: ids whose token is different in B (a token moved away counts here too, unless the id is gone).
    ``filled``: reserved special slots of A given a name in B (not a change: that is what they are for)."""

    added: dict[int, bytes | str] = field(default_factory=dict)
    removed: dict[int, bytes | str] = field(default_factory=dict)
    moved: dict[bytes | str, tuple[int, int]] = field(default_factory=dict)
    changed: dict[int, tuple[bytes | str, bytes | str]] = field(default_factory=dict)
    filled: dict[int, tuple[str, str]] = field(default_factory=dict)

    @property
    def breaking(self) -> bool:
        """Whether an id of A means something else in B (or nothing): a model trained on A would break."""
        return bool(self.changed or self.removed)

    def summary(self) -> str:
        return (f"{len(self.added)} added, {len(self.removed)} removed, {len(self.moved)} moved, "
                f"{len(self.changed)} ids changed, {len(self.filled)} reserved slots filled")


def _entries(tokenizer) -> dict[int, bytes | str]:
    """Every id's token: ordinary tokens as bytes, special and added tokens as their text."""
    entries: dict[int, bytes | str] = dict(tokenizer.model.token_bytes)
    named = {**tokenizer.added_tokens, **tokenizer.special_tokens}
    entries.update({token_id: text for text, token_id in named.items()})
    return entries


def diff_vocabularies(a, b) -> VocabularyDiff:
    """Compare tokenizers ``a`` and ``b`` id by id (see ``VocabularyDiff``)."""
    old, new = _entries(a), _entries(b)
    new_ids = {token: token_id for token_id, token in new.items()}
    old_ids = {token: token_id for token_id, token in old.items()}
    result = VocabularyDiff()
    for token_id, token in old.items():
        if token_id in new and new[token_id] != token:
            if isinstance(token, str) and is_reserved_special_token(token) and new[token_id] not in old_ids:
                result.filled[token_id] = (token, new[token_id])
            else:
                result.changed[token_id] = (token, new[token_id])
        elif token_id not in new and token not in new_ids:
            result.removed[token_id] = token
        elif token_id not in new:
            result.changed[token_id] = (token, b"")
        if token in new_ids and new_ids[token] != token_id:
            result.moved[token] = (token_id, new_ids[token])
    filled_names = {name for _, name in result.filled.values()}
    result.added = {i: token for i, token in new.items() if token not in old_ids and token not in filled_names}
    return result


def validate_extension(parent, child, texts: Iterable[str] = ()) -> VocabularyDiff:
    """Check that ``child`` is a safe next version of ``parent``; raise ``VocabularyChangeError`` if not.

    Checks: no id of the parent changed its token (reserved slots may be filled); the text is split into
    spans as before (same pattern, no normalizer added); the child records the parent (``parent_hash``) and
    a higher version; on each text, the child decodes its tokens back to the text and uses no more tokens
    than the parent."""
    diff = diff_vocabularies(parent, child)
    if diff.breaking:
        if diff.changed:
            token_id, (before, after) = next(iter(diff.changed.items()))
            example = f"id {token_id}: {before!r} -> {after!r}"
        else:
            example = f"removed ids {list(diff.removed)[:5]}"
        raise VocabularyChangeError(f"the new version changes ids of the old one ({diff.summary()}; {example})")
    if child.pattern != parent.pattern or (child.normalizer is None) != (parent.normalizer is None):
        raise VocabularyChangeError(f"the new version pre-tokenizes text differently ({parent.pattern!r} -> "
                                    f"{child.pattern!r}): old text would get other tokens")
    if child.parent_hash != vocabulary_hash(parent) or child.vocabulary_version <= parent.vocabulary_version:
        raise VocabularyChangeError(
            f"{child.name} (version {child.vocabulary_version}) does not record {parent.name} (version "
            f"{parent.vocabulary_version}) as its parent: derive it with Tokenizer.extend or with_special_tokens"
        )
    for text in texts:
        tokens = child.encode(text, allowed_special="all")
        if child.decode(tokens, errors="strict") != text:
            raise VocabularyChangeError(f"the new version does not decode its tokens back to the text {text[:60]!r}")
        before = parent.encode(text, allowed_special="all")
        if len(tokens) > len(before):
            raise VocabularyChangeError(f"the new version spends {len(tokens)} tokens where the old one spent "
                                        f"{len(before)} on {text[:60]!r}")
    return diff


def _profile_path(profile: str) -> Path | None:
    return next((d / f"{profile}{CARTRIDGE_SUFFIX}" for d in profile_dirs()
                 if (d / f"{profile}{CARTRIDGE_SUFFIX}").is_file()), None)


def _versioned(folder: Path, profile: str, version: int) -> Path:
    return folder / f"{profile}@v{version}{CARTRIDGE_SUFFIX}"


def promote(tokenizer, profile: str, *, texts: Iterable[str] = (), folder: str | os.PathLike | None = None) -> Path:
    """Make ``tokenizer`` the profile ``profile``, after validating it against the current one (if any); the
    current one stays loadable as ``profile@vK``. Returns the profile's path. ``folder``: where a new profile
    is written (default: the first profile cache folder, ``$CRAYON_PROFILE_DIR`` where set)."""
    current_path = _profile_path(profile)
    shipped = current_path is not None and current_path.parent == shipped_profiles_dir()
    if profile in OPENAI_ENCODINGS or shipped or not profile or any(c in profile for c in "./@" + os.sep):
        raise ValueError(f"choose a new profile name for an evolved vocabulary, not {profile!r} "
                         "(no '.', '/', '@'; not a built-in encoding or a profile shipped with crayon)")
    texts = list(texts)
    target = Path(folder) if folder is not None else (current_path.parent if current_path else cache_dirs()[0])
    target.mkdir(parents=True, exist_ok=True)
    if current_path is not None:
        current = load_cartridge(current_path)
        validate_extension(current, tokenizer, texts)
        kept = _versioned(target, profile, current.vocabulary_version)
        if not kept.exists():
            _copy_atomically(current_path, kept)
    staged = Path(tempfile.mkdtemp(prefix=f".{profile}.", dir=target)) / f"{profile}{CARTRIDGE_SUFFIX}"
    try:
        tokenizer.save(staged)
        reloaded = load_cartridge(staged, verify=True)
        for text in texts:
            if reloaded.encode(text, allowed_special="all") != tokenizer.encode(text, allowed_special="all"):
                raise VocabularyChangeError(f"the saved cartridge encodes {text[:60]!r} differently")
        os.replace(staged, target / f"{profile}{CARTRIDGE_SUFFIX}")
    finally:
        shutil.rmtree(staged.parent, ignore_errors=True)
    return target / f"{profile}{CARTRIDGE_SUFFIX}"


def rollback(profile: str) -> Path:
    """Make the parent of profile ``profile`` (kept as ``profile@vK`` by ``promote``) the profile again; the
    rolled-back version stays loadable as ``profile@vK`` with its own version. Returns the profile's path."""
    path = _profile_path(profile)
    if path is None:
        raise FileNotFoundError(f"no profile named {profile!r}")
    current = load_cartridge(path)
    parent_path = _versioned(path.parent, profile, current.vocabulary_version - 1)
    if current.parent_hash is None or not parent_path.is_file():
        raise FileNotFoundError(f"profile {profile!r} (version {current.vocabulary_version}) has no kept parent "
                                f"{parent_path.name} to roll back to")
    if vocabulary_hash(load_cartridge(parent_path)) != current.parent_hash:
        raise VocabularyChangeError(f"{parent_path} is not the parent recorded in {path.name} (hash mismatch)")
    kept = _versioned(path.parent, profile, current.vocabulary_version)
    if not kept.exists():
        _copy_atomically(path, kept)
    _copy_atomically(parent_path, path)
    return path


def _copy_atomically(source: Path, destination: Path) -> None:
    """Copy ``source`` to ``destination`` through a temporary file in the destination's folder."""
    descriptor, temporary = tempfile.mkstemp(prefix=f".{destination.name}.", suffix=".tmp", dir=destination.parent)
    os.close(descriptor)
    try:
        shutil.copyfile(source, temporary)
        os.replace(temporary, destination)
    except BaseException:
        os.unlink(temporary)
        raise

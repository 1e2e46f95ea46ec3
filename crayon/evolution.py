"""Vocabulary evolution with stable ids: extend a vocabulary, reserve special slots, compare and stage versions.

Rules every function here keeps:

- **Stable ids.** Extending never changes an existing id's bytes: new tokens get new ids. By default they
  start at ``tokenizer.n_vocab`` (one past the largest id, special tokens included), so a model's embedding
  table only grows. ``move_special_tokens=True`` instead puts them right after the last ordinary token and
  renumbers the special tokens after them (for a vocabulary no model uses yet).
- **Old text, old tokens.** The extended vocabulary encodes a span as the old one did, then may merge further
  with the new tokens (their ranks come after every old rank): text the new tokens do not help keeps its
  tokens exactly.
- **Lineage.** Each tokenizer has a ``vocabulary_version`` (1 for a vocabulary made from scratch) and the
  ``parent_hash`` (``vocabulary_hash``) of the vocabulary it was derived from; cartridges store both.
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Iterable

from crayon.corpus import documents, read_documents
from crayon.formats.spec import TokenizerSpec
from crayon.reference.bpe import BytePairModel
from crayon.reference.pretokenize import PatternSpanner
from crayon.reference.train import extend_bpe

RESERVED_SPECIAL_TOKEN = "<|reserved_special_token_{}|>"
_RESERVED = re.compile(r"<\|reserved_special_token_(\d+)\|>")
EXTEND_BACKENDS = ("auto", "jit", "reference")


def is_reserved_special_token(token: str) -> bool:
    """Whether ``token`` is a reserved slot (``<|reserved_special_token_K|>``) waiting to be filled."""
    return _RESERVED.fullmatch(token) is not None


def token_label(token: bytes | str) -> str:
    """A token for people: its text where its bytes are UTF-8 (``'ות'``), else its bytes (``b'\\xe0\\xb8'``,
    part of a character); a special token's text as is."""
    if isinstance(token, str):
        return token
    try:
        return repr(token.decode("utf-8"))
    except UnicodeDecodeError:
        return repr(token)


def reserved_slots(special_tokens: dict[str, int], count: int, first_id: int) -> dict[str, int]:
    """``count`` new reserved slots with ids from ``first_id``, numbered after the reserved names in use."""
    if count < 0:
        raise ValueError(f"reserved_special_tokens must be >= 0, got {count}")
    used = [int(match.group(1)) for match in map(_RESERVED.fullmatch, special_tokens) if match]
    start = max(used, default=-1) + 1
    return {RESERVED_SPECIAL_TOKEN.format(start + k): first_id + k for k in range(count)}


def extended_spec(
    tokenizer,
    n_new_tokens: int,
    *,
    files: Iterable[str | os.PathLike] | None = None,
    texts: Iterable[str] | None = None,
    backend: str = "auto",
    reserved_special_tokens: int = 0,
    move_special_tokens: bool = False,
    progress: bool = False,
) -> TokenizerSpec:
    """The parts of ``tokenizer`` (a ``crayon.Tokenizer``) extended by up to ``n_new_tokens`` BPE tokens learned
    on ``files`` and ``texts`` (``Tokenizer.extend`` documents the options)."""
    if tokenizer.algorithm != "bpe":
        raise ValueError(f"{tokenizer.name} encodes by {tokenizer.algorithm} match; only BPE vocabularies extend")
    if backend not in EXTEND_BACKENDS:
        raise ValueError(f"extension runs on backend {', '.join(map(repr, EXTEND_BACKENDS))}, not {backend!r}")
    stream = documents(files, texts, caller="Tokenizer.extend")
    model = tokenizer.model
    options = dict(
        first_id=max(model.token_bytes, default=-1) + 1 if move_special_tokens else tokenizer.n_vocab,
        pattern=word_splitter(tokenizer),
        special_tokens=[*tokenizer.special_tokens, *tokenizer.added_tokens],  # never learned from, as in training
    )
    if backend == "reference":
        extension = extend_bpe(read_documents(stream), model, n_new_tokens, **options)
    else:
        from crayon.jit.engine import make_engine
        from crayon.jit.train import extend_bpe_jit

        extension = extend_bpe_jit(stream, model, n_new_tokens, encode_spans=make_engine(tokenizer).encode_spans,
                                   progress=progress, **options)
    merges = None if model.merges is None else model.merges + extension.merges
    new_model = BytePairModel(extension.ranks, merges, ignore_merges=model.whole_span_lookup)
    next_id = max(new_model.token_bytes, default=-1) + 1
    specials, added = tokenizer.special_tokens, dict(tokenizer.added_tokens)
    if move_special_tokens:  # in their old order, after the new tokens
        old_ids = sorted({**specials, **added}.values())
        renumbered = {old: next_id + k for k, old in enumerate(old_ids)}
        specials = {text: renumbered[i] for text, i in specials.items()}
        added = {text: renumbered[i] for text, i in added.items()}
        next_id += len(old_ids)
    else:
        next_id = max(next_id, tokenizer.n_vocab)
    specials.update(reserved_slots(specials, reserved_special_tokens, next_id))
    return TokenizerSpec(
        tokenizer.name,
        new_model,
        pattern=tokenizer.pattern,
        special_tokens=specials,
        added_tokens=added,
        normalizer=tokenizer.normalizer,
        pretokenizer=None if tokenizer.pattern is not None else tokenizer.pretokenizer,
        template=tokenizer.template,
        added_token_options=tokenizer.added_token_options,
        post_processor=tokenizer.post_processor,
        decoder=tokenizer.decoder,
    )


def word_splitter(tokenizer):
    """The tokenizer's pre-tokenization for counting words: its pattern (which the jit counts natively), or
    a function running its normalizer and pre-tokenizer."""
    if tokenizer.normalizer is None and isinstance(tokenizer.pretokenizer, PatternSpanner):
        return tokenizer.pretokenizer.pattern
    normalize = tokenizer.normalizer or (lambda text: text)
    return lambda text: tokenizer.pretokenizer(normalize(text))


def derived_from(child, parent):
    """Record ``parent`` as ``child``'s parent: the next version number and the parent's hash."""
    child.vocabulary_version = parent.vocabulary_version + 1
    child.parent_hash = vocabulary_hash(parent)
    return child


def vocabulary_hash(tokenizer) -> str:
    """A SHA-256 (hex) of what decides the ids: every token's id and bytes, the special and added tokens, the
    pre-tokenization pattern and, for a model with explicit merges, the merges."""
    digest = hashlib.sha256()
    model = tokenizer.model
    for token_id in sorted(model.token_bytes):
        digest.update(b"%d:%d:" % (token_id, len(model.token_bytes[token_id])) + model.token_bytes[token_id])
    for label, table in (("special", tokenizer.special_tokens), ("added", tokenizer.added_tokens)):
        for text, token_id in sorted(table.items(), key=lambda item: item[1]):
            digest.update(f"\0{label}:{token_id}:{text}".encode())
    digest.update(f"\0pattern:{tokenizer.pattern}".encode())
    for left, right in model.merges or ():
        digest.update(b"\0merge:%d:%d" % (model.ranks[left], model.ranks[right]))
    return digest.hexdigest()

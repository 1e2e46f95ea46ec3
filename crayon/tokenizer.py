"""The Tokenizer: tiktoken's API over Crayon's pipeline (normalize -> pre-tokenize -> model -> decode)."""

from __future__ import annotations

import codecs
import functools
import importlib
import importlib.util
import operator
import os
import warnings
from typing import TYPE_CHECKING, AbstractSet, Callable, Collection, Iterable, Literal, Sequence

import numpy as np

from crayon.errors import (
    BackendUnavailableError,
    PatternCoverageWarning,
    SpecialTokenError,
    UnknownTokenError,
    UnsupportedComponentError,
)
from crayon.formats.hf_postprocess import PostProcessor, plain_process
from crayon.formats.spec import TokenizerSpec
from crayon.patterns import pattern_name
from crayon.reference.added_tokens import PLAIN, AddedTokenOptions, split_added_tokens
from crayon.reference.alignments import AlignedText
from crayon.reference.bpe import BytePairModel
from crayon.reference.engine import Engine, ReferenceEngine, flat_from_arrays
from crayon.reference.pretokenize import (
    COVERAGE_SAMPLE,
    PatternSpanner,
    dropped_text,
    special_token_regex,
    split_specials,
)

if TYPE_CHECKING:
    from crayon.formats.hf_decode import Decoder

__all__ = ["Tokenizer", "BACKENDS", "make_engine"]

BACKENDS = ("reference", "jit", "cuda", "auto")
SHORT_TEXT = 32  # characters: ``encode`` and ``encode_ordinary`` remember the tokens of texts up to this long
SHORT_TEXTS_KEPT = 1 << 14  # per tokenizer and method; a full memory starts over
NO_SPECIALS: frozenset[str] = frozenset()  # ``encode``'s default, recognised by identity on its short-text path
_ENGINE_MODULES = {"jit": "crayon.jit.engine", "cuda": "crayon.gpu.engine"}


def make_engine(tokenizer: "Tokenizer", backend: str, **options) -> Engine:
    """Build the engine for ``backend`` (``options`` go to the backend's ``make_engine``: ``kernels``, ``encoder`` for
    "jit"; ``chunk_bytes``, ``memory_budget`` ... for "cuda"); a backend that cannot run here raises, it never falls
    back."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if backend == "auto":
        backend = "jit" if importlib.util.find_spec(_ENGINE_MODULES["jit"]) is not None else "reference"
    if backend == "reference":
        if options:
            raise TypeError(f"the reference engine takes no options, not {', '.join(options)}")
        return _start_aware(tokenizer, ReferenceEngine(tokenizer), ReferenceEngine)
    try:
        module = importlib.import_module(_ENGINE_MODULES[backend])
    except ImportError as missing:
        raise BackendUnavailableError(f"backend {backend!r} is unavailable: {missing}") from missing
    return _start_aware(tokenizer, module.make_engine(tokenizer, **options),
                        lambda variant: module.make_engine(variant, **options))


def _start_aware(tokenizer: "Tokenizer", engine: Engine, make: Callable[["Tokenizer"], Engine]) -> Engine:
    """``engine``, or a ``StartAwareEngine`` around it where the pre-tokenizer marks a text's start (HF's Metaspace
    prepend_scheme "first") behind a normalizer."""
    after_token = getattr(tokenizer.pretokenizer, "after_token", None)
    if after_token is None or tokenizer.normalizer is None:
        return engine
    variant = object.__new__(type(tokenizer))
    variant.__dict__.update(tokenizer.__dict__)
    variant.pretokenizer = after_token
    return StartAwareEngine(engine, make(variant), tokenizer.normalizer)


class StartAwareEngine:
    """The engine of a tokenizer whose pre-tokenizer marks where a text starts (HF's Metaspace prepend_scheme
    "first") behind a normalizer. HF marks a text only where its normalized form still starts at its first
    character (``crayon.formats.hf_normalize.starts_at_first_character``): such a text goes to ``at_start``, any
    other to ``elsewhere``, the engine of text after an added token. Other attributes are ``at_start``'s."""

    def __init__(self, at_start: Engine, elsewhere: Engine, normalizer):
        from crayon.formats.hf_normalize import starts_at_first_character

        self.at_start, self.elsewhere = at_start, elsewhere
        self.name = at_start.name
        self.capabilities = at_start.capabilities - {"prepare"}  # the texts are needed as given, prepared
        self._starts = functools.partial(starts_at_first_character, normalizer)

    def __getattr__(self, name: str):
        if name == "at_start":  # not set yet (a copy being made)
            raise AttributeError(name)
        return getattr(self.at_start, name)

    def _engine_of(self, text: str) -> Engine:
        return self.at_start if self._starts(text) else self.elsewhere

    def encode_ordinary(self, text: str) -> list[int]:
        return self._engine_of(text).encode_ordinary(text)

    def encode_ordinary_array(self, text: str) -> np.ndarray:
        return self._engine_of(text).encode_ordinary_array(text)

    def encode_ordinary_batch(self, texts: Sequence[str], num_threads: int | None = None) -> list[list[int]]:
        marked = [self._starts(text) for text in texts]
        if all(marked) or not any(marked):
            return (self.at_start if all(marked) else self.elsewhere).encode_ordinary_batch(texts, num_threads)
        results = [iter(engine.encode_ordinary_batch([t for t, m in zip(texts, marked) if m == wanted], num_threads))
                   for engine, wanted in ((self.elsewhere, False), (self.at_start, True))]
        return [next(results[m]) for m in marked]

    def encode_ordinary_flat(self, texts: Sequence[str], num_threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        marked = np.fromiter(map(self._starts, texts), bool, len(texts))
        if marked.all() or not marked.any():
            return (self.at_start if marked.all() else self.elsewhere).encode_ordinary_flat(texts, num_threads)
        arrays: list[np.ndarray] = [np.empty(0, np.uint32)] * len(texts)
        for engine, wanted in ((self.elsewhere, False), (self.at_start, True)):
            chosen = np.flatnonzero(marked == wanted)
            tokens, offsets = engine.encode_ordinary_flat([texts[i] for i in chosen], num_threads)
            for k, i in enumerate(chosen.tolist()):
                arrays[i] = tokens[offsets[k] : offsets[k + 1]]
        return flat_from_arrays(arrays)


def _as_str(text: str) -> str:
    """The text; a text that is not a ``str`` is refused with TypeError, as tiktoken does (bytes are decoded by
    the caller, not guessed)."""
    if not isinstance(text, str):
        fix = " (decode bytes first: data.decode('utf-8'))" if isinstance(text, (bytes, bytearray)) else ""
        raise TypeError(f"expected a str to encode, got {type(text).__name__}{fix}")
    return text


def _as_utf8_safe(text: str) -> str:
    """Replace lone surrogates with U+FFFD, as tiktoken does, so the text has a UTF-8 encoding; refuse a
    text that is not a ``str`` (``_as_str``)."""
    if _as_str(text).isascii():  # constant time for a str: no copy to make
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _text_list(texts: Sequence[str]) -> list[str]:
    """The texts of a batch call as a list; a lone str (which would be encoded character by character) is refused."""
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"expected a list of texts, got a {type(texts).__name__}: to encode one text, pass [text]")
    return texts if type(texts) is list else list(texts)


SPECIAL_SEARCH_HITS = 64  # _search_specials tries the regex at this many places, and one more per 4096 characters


def _search_specials(pattern, first: str | None, text: str):
    """``pattern.search(text)``, where every token of ``pattern`` begins with the character ``first`` (None: not
    all with the same one): the regex is tried only where ``str.find`` (memchr: 10-40x faster than the regex on
    English text) finds ``first``, while those places are few (``SPECIAL_SEARCH_HITS``), then over the rest."""
    if first is None:
        return pattern.search(text)
    position = text.find(first)
    hits = 0
    while position >= 0:
        hits += 1
        if hits > SPECIAL_SEARCH_HITS + (position >> 12):
            return pattern.search(text, position)
        found = pattern.match(text, position)
        if found:
            return found
        position = text.find(first, position + 1)
    return None


def _refuse_disallowed(texts: Sequence[str], disallowed: AbstractSet[str]) -> None:
    """SpecialTokenError for the first text holding one of the ``disallowed`` special tokens."""
    if not disallowed:
        return
    firsts = {token[:1] for token in disallowed}
    search = functools.partial(_search_specials, special_token_regex(disallowed),
                               next(iter(firsts)) if len(firsts) == 1 and "" not in firsts else None)
    if len(texts) > 1 and search("".join(texts)) is None:  # one search: a text's match would show in the join
        return
    for text in texts:
        match = search(text)
        if match:
            raise SpecialTokenError(
                f"Encountered text corresponding to disallowed special token {match.group()!r}.\n"
                f"Pass it in `allowed_special` to encode it as a special token, or "
                f"`disallowed_special=()` to encode it as ordinary text."
            )


def _prepared_texts(texts: Sequence[str], disallowed: AbstractSet[str] = frozenset()) -> list[str]:
    """A batch's texts as an engine takes them: each made UTF-8 safe (``_as_utf8_safe``), none holding a
    ``disallowed`` special token (``_refuse_disallowed``). Engines that take ``prepare`` run this on the threads
    that encode, a run of texts at a time."""
    texts = [text if type(text) is str and text.isascii() else _as_utf8_safe(text) for text in texts]
    _refuse_disallowed(texts, disallowed)
    return texts


def _token_list(tokens: Sequence[int]) -> Sequence[int]:
    """The tokens of a decode call; a lone int is refused, as in tiktoken."""
    if isinstance(tokens, (int, str, bytes)) or not hasattr(tokens, "__iter__"):
        raise TypeError(f"expected a sequence of token ids, got {type(tokens).__name__}: to decode one token, pass [token]")
    return tokens


def warn_if_lossy(pattern: str) -> None:
    """Warn (``PatternCoverageWarning``) when a pattern skips characters of ``COVERAGE_SAMPLE``."""
    dropped = dropped_text(pattern, COVERAGE_SAMPLE)
    if dropped:
        warnings.warn(
            f"the pattern {pattern!r} skips text: {[piece for _, piece in dropped[:5]]} of a sample text would be "
            f"dropped by encode; make the regex match every character (tok.check_pattern(text) checks a text)",
            PatternCoverageWarning,
            stacklevel=3,
        )


def _checked_token_table(argument: str, table: dict[str, int] | None) -> dict[str, int]:
    """``special_tokens`` / ``added_tokens`` as a dict of non-empty str -> int id >= 0, or a ValueError."""
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise TypeError(f"{argument} must be a dict of token text -> id, not {type(table).__name__}")
    for text, token_id in table.items():
        if not isinstance(text, str) or not text:
            raise ValueError(f"{argument}: {text!r} is not a token (a non-empty str)")
        if not isinstance(token_id, int) or isinstance(token_id, bool) or token_id < 0:
            raise ValueError(f"{argument}: {text!r} has id {token_id!r}; ids are integers >= 0")
    return {text: int(token_id) for text, token_id in table.items()}


def _checked_options(options: dict | None, tokens: dict[str, int]) -> dict[str, AddedTokenOptions]:
    """``added_token_options`` of known tokens, the plain ones left out."""
    options = dict(options or {})
    for token, option in options.items():
        if token not in tokens:
            raise ValueError(f"added_token_options: {token!r} is neither a special nor an added token")
        if not isinstance(option, AddedTokenOptions):
            raise TypeError(f"added_token_options: {token!r} has {option!r}, not an AddedTokenOptions")
    return {token: option for token, option in options.items() if option != PLAIN}


def _model_token_strings(model) -> dict[int, str]:
    """The token strings of a model over characters (WordPiece, WordLevel, Unigram, BPE over characters: its
    vocabulary as the file spells it); empty for byte-level models, whose tokens are spelled in GPT-2's byte
    characters."""
    if hasattr(model, "pieces"):
        return {token_id: piece for token_id, (piece, _) in enumerate(model.pieces)}
    if hasattr(model, "vocab"):
        return {token_id: token for token, token_id in model.vocab.items()}
    return {}


def _special_set_error(argument: str, value) -> str:
    """The TypeError message for an ``allowed_special`` / ``disallowed_special`` that is not "all" or a set."""
    fix = f"{{{value!r}}}" if isinstance(value, str) else "{...}"
    return (
        f"{argument} must be 'all' or a set of special tokens, not {type(value).__name__} {value!r}; "
        f"write {argument}={fix}"
    )


def _remember(memory: dict[str, tuple[int, ...]], text: str, tokens: list[int]) -> None:
    if len(memory) >= SHORT_TEXTS_KEPT:
        memory.clear()
    memory[text] = tuple(tokens)


class Tokenizer:
    """A tokenizer with tiktoken's methods: ``encode``, ``encode_ordinary``, ``encode_batch``, ``decode`` ..."""

    def __init__(
        self,
        name: str,
        model: BytePairModel | Callable[[], BytePairModel],
        *,
        pattern: str | None,
        special_tokens: dict[str, int] | None = None,
        normalizer: Callable[[str], str] | None = None,
        pretokenizer: Callable[[str], list[str]] | None = None,
        added_tokens: dict[str, int] | None = None,
        backend: str = "auto",
        tables: dict[str, np.ndarray] | None = None,
        algorithm: str = "bpe",
        added_token_options: dict[str, AddedTokenOptions] | None = None,
        post_processor: PostProcessor | None = None,
        decoder: Decoder | None = None,
    ):
        """``model`` is the model, or a function building it on first use (a cartridge's reference model).
        ``added_tokens`` are non-special tokens matched in all text before pre-tokenization (HF's
        ``added_tokens`` with ``special: false``); ``special_tokens`` follow tiktoken's allow/disallow contract.
        ``tables`` are the arrays fast engines read (a cartridge's sections; ``token_bytes`` and
        ``token_offsets`` among them), ``algorithm`` is "bpe" or "longest". ``added_token_options`` gives
        special or added tokens HF's matching options (``crayon.reference.added_tokens``); the others are matched
        plainly in the raw text. ``post_processor`` (``crayon.formats.hf_postprocess``) frames texts when
        ``add_special_tokens=True``; ``decoder`` (``crayon.formats.hf_decode``) makes ``decode``'s text from the
        token strings (None: the tokens' bytes as text)."""
        if pretokenizer is None and pattern is None:
            raise ValueError("a tokenizer needs a pre-tokenization pattern or a pre-tokenizer")
        self.name = name
        self.algorithm = algorithm
        self.tables = tables
        self._model = model if not callable(model) else None
        self._build_model = model if callable(model) else None
        self.pattern = None if pattern is None else PatternSpanner(pattern).pattern
        if self.pattern is not None and pattern_name(self.pattern) is None:
            warn_if_lossy(self.pattern)
        self.normalizer = normalizer
        self.pretokenizer = pretokenizer or PatternSpanner(pattern)
        self.added_tokens = _checked_token_table("added_tokens", added_tokens)
        self._set_special_tokens(_checked_token_table("special_tokens", special_tokens))
        self.added_token_options = _checked_options(added_token_options, {**self.added_tokens, **self._special_tokens})
        n_tokens = len(tables["token_offsets"]) - 1 if tables is not None else 1 + max(self.model.token_bytes, default=-1)
        self.n_vocab = max(n_tokens, 1 + max(self._special_bytes, default=-1))
        self._check_token_ids()
        self._engine = make_engine(self, backend)
        self._short_encode: dict[str, tuple[int, ...]] = {}
        self._short_ordinary: dict[str, tuple[int, ...]] = {}
        self._added_matchers: dict[frozenset[str], tuple[dict, dict, dict]] = {}
        self._piece_engines: dict[tuple[bool, bool], Engine] = {}
        self._choose_per_batch = backend == "auto"
        self._cuda_engine = None
        self.batch_choice: tuple[str, str] | None = None  # (engine, reason) of the last batch under "auto"
        self.vocabulary_version = 1  # lineage (crayon.evolution): 1 + the number of changes since made from scratch
        self.parent_hash: str | None = None  # crayon.evolution.vocabulary_hash of the vocabulary it was derived from
        self.post_processor, self.decoder = post_processor, decoder
        # the ids before and after each text in encode_batch_to_numpy
        self.template: tuple[tuple[int, ...], tuple[int, ...]] = post_processor.template() if post_processor else ((), ())
        self._token_strings: dict[int, str] | None = None
        self._id_strings: list[str | None] | None = None  # id_to_token of every id, for decoders
        self._token_byte_lengths: np.ndarray | None = None

    @classmethod
    def from_spec(cls, spec: TokenizerSpec, *, backend: str = "auto") -> "Tokenizer":
        """The tokenizer a reader of ``crayon.formats`` describes (an HF ``tokenizer.json``, say)."""
        tokenizer = cls(spec.name, spec.model, pattern=spec.pattern, special_tokens=spec.special_tokens,
                        added_tokens=spec.added_tokens, normalizer=spec.normalizer, pretokenizer=spec.pretokenizer,
                        backend=backend, added_token_options=spec.added_token_options,
                        post_processor=spec.post_processor, decoder=spec.decoder)
        if spec.post_processor is None:
            tokenizer.template = spec.template
        return tokenizer

    def _check_token_ids(self) -> None:
        """Special and added tokens need ids of their own: not shared, not an ordinary token of other bytes."""
        by_id: dict[int, str] = {}
        for text, token_id in {**self.added_tokens, **self._special_tokens}.items():
            if token_id in by_id:
                raise ValueError(f"{by_id[token_id]!r} and {text!r} share the id {token_id}; give each its own id")
            by_id[token_id] = text
            # An HF file gives an added token the id of the vocabulary entry with its content (hf_io assigns
            # those ids), so only tiktoken-style vocabularies (a pattern) are checked against the ordinary ids.
            ordinary = None if self.pattern is None else self._ordinary_token_bytes(token_id)
            if ordinary is not None and ordinary != text.encode("utf-8"):
                raise ValueError(
                    f"the special or added token {text!r} has id {token_id}, which is the ordinary token {ordinary!r}; "
                    f"give it an id no ordinary token has"
                )

    def __repr__(self) -> str:
        return f"<crayon.Tokenizer {self.name!r} backend={self.backend!r} n_vocab={self.n_vocab}>"

    @property
    def model(self):
        """The reference model (built on first use for a tokenizer opened from a cartridge)."""
        if self._model is None:
            self._model = self._build_model()
        return self._model

    @property
    def model_class(self) -> type:
        """The reference model's class, known without building the model (a cartridge's builder names it)."""
        if self._model is not None:
            return type(self._model)
        return getattr(self._build_model, "model_class", BytePairModel)

    @property
    def backend(self) -> str:
        """The engine that encodes: "reference", "jit" or "cuda" ("auto" is resolved when loading)."""
        return self._engine.name

    @property
    def engine(self) -> Engine:
        """The engine that encodes ordinary text (``crayon.reference.engine.Engine``; read-only)."""
        return self._engine

    @property
    def special_tokens(self) -> dict[str, int]:
        return dict(self._special_tokens)

    @property
    def eot_token(self) -> int:
        try:
            return self._special_tokens["<|endoftext|>"]
        except KeyError:
            raise AttributeError(f"{self.name} has no <|endoftext|> token") from None

    def with_backend(self, backend: str, **options) -> "Tokenizer":
        """The same vocabulary on another engine; ``options`` configure it (see ``make_engine``), e.g.
        ``with_backend("jit", kernels="numba")``."""
        clone = object.__new__(Tokenizer)
        clone.__dict__.update(self.__dict__)
        clone._engine = make_engine(clone, backend, **options)
        clone._short_encode, clone._short_ordinary = {}, {}
        clone._added_matchers, clone._piece_engines = {}, {}
        clone._choose_per_batch, clone._cuda_engine, clone.batch_choice = backend == "auto", None, None
        return clone

    # evolving the vocabulary -------------------------------------------------------------------------

    def extend(
        self,
        *corpus,
        files: Iterable[str | os.PathLike] | None = None,
        texts: Iterable[str] | None = None,
        n_new_tokens: int,
        backend: str = "auto",
        reserved_special_tokens: int = 0,
        move_special_tokens: bool = False,
        progress: bool = False,
        name: str | None = None,
    ) -> "Tokenizer":
        """A new tokenizer: this vocabulary plus up to ``n_new_tokens`` BPE tokens learned on ``files=[paths]``
        (UTF-8 files, streamed) and/or ``texts=[str, ...]``, as ``crayon.train`` takes its corpus; the text is
        pre-tokenized as this tokenizer does.

        Every existing id keeps its bytes and the existing merges stay first, so text that the new tokens do not
        help encodes as before. New ids start at ``n_vocab`` (after the special tokens, which keep their ids);
        ``move_special_tokens=True`` puts them right after the last ordinary token and renumbers the special
        tokens after them. ``reserved_special_tokens``: add that many ``<|reserved_special_token_K|>`` slots at
        the end (name them later with ``with_special_tokens``). ``backend``: "auto"/"jit" (the Numba trainer) or
        "reference" (pure Python; the same merges). The result records this tokenizer as its parent
        (``vocabulary_version``, ``parent_hash``)."""
        from crayon.evolution import derived_from, extended_spec

        if corpus:
            raise TypeError("Tokenizer.extend takes its corpus by keyword: files=[path, ...] to read UTF-8 files, or "
                            "texts=[str, ...] for texts (a positional list could be either)")
        spec = extended_spec(self, n_new_tokens, files=files, texts=texts, backend=backend, progress=progress,
                             reserved_special_tokens=reserved_special_tokens, move_special_tokens=move_special_tokens)
        spec.name = name or self.name
        return derived_from(Tokenizer.from_spec(spec, backend="auto" if self._choose_per_batch else self.backend), self)

    def with_special_tokens(self, tokens: Sequence[str] | dict[str, int]) -> "Tokenizer":
        """The same vocabulary with reserved special slots (``<|reserved_special_token_K|>``) given names; no id
        moves. A list fills the free slots in id order; a dict names the slot id of each token."""
        from crayon.evolution import derived_from, is_reserved_special_token

        free = sorted((i, text) for text, i in self._special_tokens.items() if is_reserved_special_token(text))
        if not isinstance(tokens, dict):
            tokens = list(tokens)
            if len(tokens) > len(free):
                raise ValueError(f"{len(tokens)} special tokens but {self.name} has only {len(free)} free reserved "
                                 "slots; extend it with reserved_special_tokens=N to get more")
            tokens = {text: token_id for text, (token_id, _) in zip(tokens, free)}
        slot_of = {token_id: text for token_id, text in free}
        specials = dict(self._special_tokens)
        for text, token_id in tokens.items():
            if not isinstance(text, str) or not text:
                raise ValueError(f"special tokens must be non-empty strings, got {text!r}")
            if text in specials or text in self.added_tokens:
                existing = specials.get(text, self.added_tokens.get(text))
                raise ValueError(f"{text!r} is already a token of {self.name} (id {existing})")
            if token_id not in slot_of:
                raise ValueError(f"id {token_id!r} is not a free reserved special slot of {self.name}")
            del specials[slot_of.pop(token_id)]
            specials[text] = token_id
        clone = object.__new__(Tokenizer)
        clone.__dict__.update(self.__dict__)
        clone._set_special_tokens(specials)
        clone._added_matchers, clone._id_strings = {}, None
        clone._short_encode = {}  # its texts passed this tokenizer's special check, not the clone's
        return derived_from(clone, self)

    def _set_special_tokens(self, special_tokens: dict[str, int]) -> None:
        self._special_tokens = special_tokens
        self._special_bytes = {
            token_id: text.encode("utf-8") for text, token_id in {**self.added_tokens, **special_tokens}.items()
        }
        self.special_tokens_set = frozenset(special_tokens)
        self._special_ids = frozenset(special_tokens.values())
        # encode's default check (every special disallowed) on a short text, without argument checks: a text
        # without the specials' common prefix holds none of them, the others are searched
        self._find_disallowed = special_token_regex(self.special_tokens_set).search if special_tokens else None
        self._specials_prefix = os.path.commonprefix(sorted(special_tokens))

    # encoding --------------------------------------------------------------------------------------

    def encode_ordinary(self, text: str) -> list[int]:
        """Encode text, treating special-token text as ordinary text."""
        if type(text) is str and len(text) <= SHORT_TEXT:
            known = self._short_ordinary.get(text)
            if known is not None:
                return list(known)
            tokens = self._encode_chunks(_as_utf8_safe(text), NO_SPECIALS)
            _remember(self._short_ordinary, text, tokens)
            return tokens
        if not self.added_tokens and "prepare" in self._engine.capabilities:
            return self._engine.encode_ordinary(_as_str(text), prepare=_as_utf8_safe)
        return self._encode_chunks(_as_utf8_safe(text), NO_SPECIALS)

    def _encode_chunks(self, text: str, allowed_specials: frozenset[str]) -> list[int]:
        """Cut out added tokens and allowed specials, encode the text between them with the engine."""
        if not self.added_tokens and not allowed_specials:
            return self._engine.encode_ordinary(text)
        if self.added_token_options:
            return self._encode_with_options(text, allowed_specials)
        tokens: list[int] = []
        for index, (chunk, is_token) in enumerate(split_specials(text, allowed_specials | self.added_tokens.keys())):
            if is_token:
                tokens.append(self._special_tokens[chunk] if chunk in allowed_specials else self.added_tokens[chunk])
            else:
                tokens.extend(self._piece_engine(index == 0).encode_ordinary(chunk))
        return tokens

    def _encode_with_options(self, text: str, allowed_specials: frozenset[str]) -> list[int]:
        """HF's two passes: the raw tokens (``normalized`` false) in the text, then the normalized tokens in each
        piece between them once normalized; the rest is encoded without normalizing it again."""
        raw, normalized, normalized_ids = self._added_matcher(allowed_specials)
        tokens: list[int] = []
        for index, (start, end, token) in enumerate(split_added_tokens(text, raw)):
            if token is not None:
                tokens.append(self._token_id(token))
            elif not normalized:
                tokens.extend(self._piece_engine(index == 0).encode_ordinary(text[start:end]))
            else:
                piece = text[start:end] if self.normalizer is None else self.normalizer(text[start:end])
                inner_pieces = split_added_tokens(piece, normalized)
                at_start = index == 0 and self._starts_at_first_character(text[start:end])
                for inner_index, (inner_start, inner_end, inner_token) in enumerate(inner_pieces):
                    if inner_token is not None:
                        tokens.append(normalized_ids[inner_token])
                    else:
                        engine = self._piece_engine(at_start and inner_index == 0, normalized=True)
                        tokens.extend(engine.encode_ordinary(piece[inner_start:inner_end]))
        return tokens

    def _added_matcher(self, allowed_specials: frozenset[str]) -> tuple[dict, dict, dict]:
        """(raw token -> options, normalized content -> options, normalized content -> id) of the added and
        allowed special tokens."""
        matcher = self._added_matchers.get(allowed_specials)
        if matcher is None:
            raw, normalized, normalized_ids = {}, {}, {}
            for token in allowed_specials | self.added_tokens.keys():
                options = self.added_token_options.get(token, PLAIN)
                if not options.normalized:
                    raw[token] = options
                    continue
                content = token if self.normalizer is None else self.normalizer(token)
                if content in normalized or not content:
                    raise ValueError(f"the normalized added token {token!r} normalizes to {content!r}, as another "
                                     "token does or to nothing: which one it matches is ambiguous")
                normalized[content], normalized_ids[content] = options, self._token_id(token)
            matcher = self._added_matchers[allowed_specials] = (raw, normalized, normalized_ids)
        return matcher

    def _token_id(self, token: str) -> int:
        return self._special_tokens[token] if token in self._special_tokens else self.added_tokens[token]

    def _starts_at_first_character(self, text: str) -> bool:
        """Whether the normalized text still starts at its first character, where the pre-tokenizer marks a text's
        start (``StartAwareEngine``); True where it does not mark it or nothing normalizes."""
        if self.normalizer is None or getattr(self.pretokenizer, "after_token", None) is None:
            return True
        from crayon.formats.hf_normalize import starts_at_first_character

        return starts_at_first_character(self.normalizer, text)

    def _piece_engine(self, at_start: bool, normalized: bool = False) -> Engine:
        """The engine of a piece of text between added tokens: one ``normalized`` already (HF's second pass) is
        not normalized again; one after an added token (not ``at_start``) runs the pre-tokenizer's
        ``after_token`` form where it has one (HF's Metaspace "first" puts its ▁ only at the start)."""
        after_token = None if at_start else getattr(self.pretokenizer, "after_token", None)
        skip_normalizer = normalized and self.normalizer is not None
        if after_token is None and not skip_normalizer:
            return self._engine
        key = (after_token is not None, skip_normalizer)
        if key not in self._piece_engines:
            variant = object.__new__(Tokenizer)
            variant.__dict__.update(self.__dict__)
            variant.pretokenizer = after_token or self.pretokenizer
            variant.normalizer = None if skip_normalizer else self.normalizer
            self._piece_engines[key] = make_engine(variant, self.backend)
        return self._piece_engines[key]

    def encode(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = NO_SPECIALS,
        disallowed_special: Literal["all"] | Collection[str] = "all",
        add_special_tokens: bool = False,
        pair: str | None = None,
    ) -> list[int]:
        """Encode text; allowed special tokens become their ids, a disallowed one raises ``ValueError``.

        ``add_special_tokens=True`` adds the ids of the tokenizer's post-processor (an HF file's BOS/EOS or
        CLS/SEP; none for tiktoken vocabularies) as HF's ``encode`` does; ``pair`` encodes a second text after
        the first, framed as the post-processor frames pairs (``post_process`` gives the type ids too).

        With the default specials, the tokens of a short text are remembered: the same text again (a word, a
        label) costs a dictionary lookup. A remembered text passed the special-token check, which depends on the
        text alone.

        ```pycon
        >>> enc = crayon.load("cl100k_base")
        >>> enc.encode("hello world")
        [15339, 1917]
        >>> enc.encode("<|endoftext|>", allowed_special="all")
        [100257]

        ```
        """
        if add_special_tokens or pair is not None:
            specials = dict(allowed_special=allowed_special, disallowed_special=disallowed_special)
            return self.post_process(self.encode(text, **specials),
                                     None if pair is None else self.encode(pair, **specials),
                                     add_special_tokens=add_special_tokens)[0]
        if (type(text) is str and len(text) <= SHORT_TEXT and (allowed_special is NO_SPECIALS or (
                type(allowed_special) in (frozenset, set) and not allowed_special)) and disallowed_special == "all"):
            known = self._short_encode.get(text)
            if known is not None:
                return list(known)
            safe = _as_utf8_safe(text)
            find = self._find_disallowed
            if find is not None and self._specials_prefix in safe and find(safe) is not None:
                self._check_specials(safe, allowed_special, disallowed_special)  # raises, with its message
            tokens = self._encode_chunks(safe, NO_SPECIALS)
            _remember(self._short_encode, text, tokens)
            return tokens
        allowed = self._check_specials(_as_str(text), allowed_special, disallowed_special)
        if not allowed and not self.added_tokens and "prepare" in self._engine.capabilities:
            # the repair runs where the engine makes the text's UTF-8 (a long text: on every core); the specials
            # were looked for in the text as given, as tiktoken does
            return self._engine.encode_ordinary(text, prepare=_as_utf8_safe)
        return self._encode_chunks(_as_utf8_safe(text), allowed)

    def post_process(self, ids: Sequence[int], pair_ids: Sequence[int] | None = None, *,
                     add_special_tokens: bool = True) -> tuple[list[int], list[int]]:
        """(ids, type ids) of a text's ids, or of a pair's, framed by the post-processor as HF frames them
        (``Encoding.ids``, ``Encoding.type_ids``); without one, the ids follow each other (types 0 and 1)."""
        ids, pair_ids = list(ids), None if pair_ids is None else list(pair_ids)
        if self.post_processor is None:
            return plain_process(ids, pair_ids)
        return self.post_processor.process(ids, pair_ids, add_special_tokens=add_special_tokens)

    def encode_with_offsets(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
        add_special_tokens: bool = False,
        pair: str | None = None,
    ) -> tuple[list[int], list[tuple[int, int]]]:
        """``encode``'s ids and, for each, the ``(start, end)`` characters of its text that it stands for, as HF's
        ``Encoding.offsets`` gives them: an added token covers the whitespace it strips, a token holding part of
        a character covers the whole character, the post-processor's ``trim_offsets`` moves spans off their
        spaces, its special tokens get ``(0, 0)`` and a ``pair``'s spans count in the pair's text. Through a
        normalizer a token covers the original characters its normalized characters came from (HF's alignments:
        BertNormalizer, NFC/NFD/NFKC/NFKD, Lowercase, StripAccents, Strip, Replace, Prepend, Nmt, Precompiled,
        ByteLevel, Sequence); a WordPiece piece covers its characters without ``##``, an unknown word the whole
        word, a byte-fallback token its whole character. A component without alignments is refused
        (``ValueError`` naming it)."""
        specials = dict(allowed_special=allowed_special, disallowed_special=disallowed_special)
        ids, offsets = self._ids_and_offsets(text, **specials)
        pair_ids = pair_offsets = None
        if pair is not None:
            pair_ids, pair_offsets = self._ids_and_offsets(pair, **specials)
        if self.post_processor is None:
            return plain_process(ids, pair_ids)[0], plain_process(offsets, pair_offsets)[0]
        framed_ids, _ = self.post_processor.process(ids, pair_ids, add_special_tokens=add_special_tokens)
        marked, _ = self.post_processor.process(offsets, pair_offsets, add_special_tokens=add_special_tokens)
        return framed_ids, [span if isinstance(span, tuple) else (0, 0) for span in marked]

    def _ids_and_offsets(self, text: str, *, allowed_special,
                         disallowed_special) -> tuple[list[int], list[tuple[int, int]]]:
        """The ids of one text and their HF offsets (the post-processor's trims applied, no framing). The text's pieces follow HF's alignments (``crayon.reference.alignments``) through the
        normalizer and pre-tokenizer; a byte-level piece with neither is mapped from its tokens' bytes."""
        text = _as_utf8_safe(text)
        raw, normalized, normalized_ids = self._added_matcher(self._check_specials(text, allowed_special,
                                                                                   disallowed_special))
        ids: list[int] = []
        offsets: list[tuple[int, int]] = []
        strings: list[str] = []  # the token strings HF trims offsets by
        for index, (start, end, token) in enumerate(split_added_tokens(text, raw)):
            if token is not None:
                ids.append(self._token_id(token))
                offsets.append((start, end))
                strings.append(text[start:end])
                continue
            piece = self._normalized_aligned(AlignedText.of(text[start:end], start))
            for inner_index, (inner_start, inner_end, inner_token) in enumerate(
                    split_added_tokens(piece.text, normalized)):
                if inner_token is not None:
                    ids.append(normalized_ids[inner_token])
                    offsets.append(piece.original_span(inner_start, inner_end))
                    strings.append(piece.text[inner_start:inner_end])
                    continue
                at_start = index == 0 and inner_index == 0 and piece.spans[0][0] == 0  # HF's original offset
                self._append_offsets(piece[inner_start:inner_end], at_start, ids, offsets, strings)
        if self.post_processor is not None:
            offsets = self.post_processor.trim_offsets(strings, offsets)
        return ids, offsets

    def _model_is_over_characters(self) -> bool:
        """Whether the model's tokens are strings of characters (WordPiece, WordLevel, Unigram, BPE over
        characters)."""
        if self._token_strings is None:
            self._token_strings = _model_token_strings(self.model)
        return bool(self._token_strings)

    def _normalized_aligned(self, piece: AlignedText) -> AlignedText:
        """A piece of text normalized, each character with its original span; refused (naming the normalizer)
        where the normalizer has no alignments."""
        if self.normalizer is None:
            return piece
        if not hasattr(self.normalizer, "align"):
            raise ValueError(f"{self.name}: the normalizer {type(self.normalizer).__name__} has no alignments, so "
                             "its tokens have no character offsets")
        try:
            aligned = self.normalizer.align(piece)
        except UnsupportedComponentError as error:
            raise ValueError(f"{self.name}: {error}") from None
        if aligned.text != self.normalizer(piece.text):  # never offsets of other text than encode's
            raise ValueError(f"{self.name}: the aligned normalization of {piece.text[:40]!r} differs from the "
                             "normalizer's text; its offsets are refused")
        return aligned

    def _append_offsets(self, piece: AlignedText, at_start: bool, ids: list[int], offsets: list[tuple[int, int]],
                        strings: list[str]) -> None:
        """The ids, offsets and HF token strings of a normalized piece between added tokens, appended."""
        from crayon.formats.hf_pretokenize import as_byte_chars, to_byte_chars

        engine = self._piece_engine(at_start, normalized=True)
        piece_ids = engine.encode_ordinary(piece.text)
        byte_level = not self._model_is_over_characters()
        lengths = self.token_byte_lengths()[np.asarray(piece_ids, np.int64)] if byte_level else None
        if byte_level and self.normalizer is None and int(lengths.sum()) == len(piece.text.encode("utf-8")):
            begin = piece.spans[0][0]  # the piece is text as given: its tokens' bytes are its bytes
            offsets.extend((begin + a, begin + b) for a, b in self._byte_spans(piece.text, piece_ids).tolist())
            ids.extend(piece_ids)
            strings.extend(to_byte_chars(self.decode_single_token_bytes(token_id)) for token_id in piece_ids)
            return
        pretokenizer = self.pretokenizer if at_start else getattr(self.pretokenizer, "after_token", None) or self.pretokenizer
        if not hasattr(pretokenizer, "aligned_spans"):
            raise ValueError(f"{self.name}: the pre-tokenizer {type(pretokenizer).__name__} has no alignments, so its "
                             "tokens have no character offsets")
        try:
            spans = pretokenizer.aligned_spans(piece)
        except UnsupportedComponentError as error:
            raise ValueError(f"{self.name}: {error}") from None
        found: list[int] = []
        if byte_level:
            position = 0
            for span in spans:
                span = span if getattr(pretokenizer, "output_is_byte_chars", False) else as_byte_chars(span)
                covered = 0
                while covered < len(span) and position < len(piece_ids):
                    length = int(lengths[position])
                    offsets.append(span.original_span(covered, covered + length))
                    strings.append(span.text[covered : covered + length])
                    found.append(piece_ids[position])
                    covered, position = covered + length, position + 1
                if covered != len(span):
                    break
        else:
            for span in spans:
                for token_id, start, end in self.model.token_spans(span.text):
                    found.append(token_id)
                    offsets.append(span.original_span(start, end))
                    strings.append(self._token_strings.get(token_id, ""))
        if found != piece_ids:
            raise RuntimeError(f"{self.name}: the tokens of {piece.text[:40]!r} found for offsets differ from the "
                               "engine's; please report this")
        ids.extend(piece_ids)

    def encode_to_numpy(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> np.ndarray:
        """``encode`` returning a uint32 numpy array (straight from the engine when no special token is cut out)."""
        allowed = self._check_specials(_as_str(text), allowed_special, disallowed_special)
        if not allowed and not self.added_tokens and "prepare" in self._engine.capabilities:
            return self._engine.encode_ordinary_array(text, prepare=_as_utf8_safe)  # as in encode
        text = _as_utf8_safe(text)
        if not allowed and not self.added_tokens:
            return self._engine.encode_ordinary_array(text)
        return np.asarray(self._encode_chunks(text, allowed), dtype=np.uint32)

    def encode_batch(
        self,
        texts: Sequence[str],
        *,
        num_threads: int | None = None,
        allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> list[list[int]]:
        """Encode many texts; the same lists as a loop of ``encode``.

        ```pycon
        >>> crayon.load("cl100k_base").encode_batch(["hello", "hello world"])
        [[15339], [15339, 1917]]

        ```
        """
        texts = _text_list(texts)
        allowed, disallowed = self._special_sets(texts, allowed_special, disallowed_special)
        if not allowed and not self.added_tokens:
            return self._ordinary_batch(texts, num_threads, disallowed)
        texts = _prepared_texts(texts, disallowed)
        return [self._encode_chunks(text, allowed) for text in texts]

    def encode_ordinary_batch(self, texts: Sequence[str], *, num_threads: int | None = None) -> list[list[int]]:
        """Encode many texts, treating special-token text as ordinary text."""
        texts = _text_list(texts)
        if self.added_tokens:
            return [self._encode_chunks(text, frozenset()) for text in _prepared_texts(texts)]
        return self._ordinary_batch(texts, num_threads)

    def _ordinary_batch(self, texts: list[str], num_threads: int | None,
                        disallowed: AbstractSet[str] = frozenset()) -> list[list[int]]:
        """The engine's batch call on texts not yet prepared (``_prepared_texts``): an engine that takes
        ``prepare`` runs the checks and repairs on its threads, beside its kernels; for another, they run here."""
        prepare = functools.partial(_prepared_texts, disallowed=disallowed)
        try:
            engine = self._batch_engine(texts)
        except TypeError:  # a text without a length: prepare names it as encode would
            prepare(texts)
            raise
        if "prepare" in engine.capabilities:
            return engine.encode_ordinary_batch(texts, num_threads=num_threads, prepare=prepare)
        return engine.encode_ordinary_batch(prepare(texts), num_threads=num_threads)

    def _batch_engine(self, texts: Sequence[str]):
        """Under backend "auto", a batch large enough to pay for the transfer goes to the GPU where there is one
        (``crayon.gpu.should_use_gpu``); ``batch_choice`` records the engine and the reason."""
        if not self._choose_per_batch:
            return self._engine
        from crayon.gpu import capacity

        size = sum(map(len, texts))
        use_gpu, reason = (False, f"CPU: {size} characters is below the GPU batch threshold")
        if size >= capacity.min_gpu_batch_bytes():
            use_gpu, reason = capacity.should_use_gpu(size)
        if use_gpu and self._cuda_engine is None:
            self._cuda_engine = make_engine(self, "cuda")
        engine = self._cuda_engine if use_gpu else self._engine
        self.batch_choice = (engine.name, reason)
        return engine

    # model-ready batches, counts, offsets, bytes ------------------------------------------------------

    def encode_batch_flat(
        self,
        texts: Sequence[str],
        *,
        num_threads: int | None = None,
        allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> tuple[np.ndarray, np.ndarray]:
        """``encode_batch`` without Python lists: all tokens in one uint32 array and int64 ``offsets``, text i
        being ``tokens[offsets[i]:offsets[i + 1]]``."""
        texts = [_as_utf8_safe(text) for text in texts]
        allowed = self._check_batch_specials(texts, allowed_special, disallowed_special)
        matched = frozenset(self.added_tokens) | allowed
        # a token matched in normalized text may come from other raw text: each text is then searched when encoded
        search_all = self.normalizer is not None and any(
            options.normalized for options in self.added_token_options.values())
        with_tokens = [i for i, text in enumerate(texts)
                       if matched and (search_all or special_token_regex(matched).search(text))]
        ordinary = [texts[i] for i in sorted(set(range(len(texts))) - set(with_tokens))] if with_tokens else texts
        engine = self._batch_engine(ordinary)
        tokens, offsets = engine.encode_ordinary_flat(ordinary, num_threads=num_threads)
        if not with_tokens:
            return tokens.astype(np.uint32, copy=False), offsets
        chunked = {i: np.asarray(self._encode_chunks(texts[i], allowed), np.uint32) for i in with_tokens}
        pieces, next_ordinary = [], 0
        for i in range(len(texts)):
            if i in chunked:
                pieces.append(chunked[i])
            else:
                pieces.append(tokens[offsets[next_ordinary] : offsets[next_ordinary + 1]])
                next_ordinary += 1
        return flat_from_arrays(pieces)

    def count_tokens(self, text: str, **specials) -> int:
        """The number of tokens ``encode(text, **specials)`` gives, without building the list.

        ```pycon
        >>> crayon.load("cl100k_base").count_tokens("hello world")
        2

        ```
        """
        return int(self.count_tokens_batch([text], **specials)[0])

    def count_tokens_batch(self, texts: Sequence[str], *, num_threads: int | None = None, **specials) -> np.ndarray:
        """The token count of each text (int64 array), without building Python lists."""
        _, offsets = self.encode_batch_flat(texts, num_threads=num_threads, **specials)
        return np.diff(offsets)

    def token_byte_lengths(self) -> np.ndarray:
        """The byte length of every token id (int64, ``n_vocab`` long; 0 for ids no token has)."""
        if self._token_byte_lengths is None:
            lengths = np.zeros(self.n_vocab, np.int64)
            if self.tables is not None:
                offsets = self.tables["token_offsets"]
                lengths[: len(offsets) - 1] = np.diff(offsets)
            else:
                for token, data in self.model.token_bytes.items():
                    lengths[token] = len(data)
            for token, data in self._special_bytes.items():
                lengths[token] = len(data)
            self._token_byte_lengths = lengths
        return self._token_byte_lengths

    def offsets_mapping(self, text: str, tokens: np.ndarray) -> np.ndarray:
        """The character span ``(start, end)`` of each token of ``encode(text)`` in ``text`` (int64, shape
        (n, 2)), as HF's ``Encoding.offsets`` and transformers' ``return_offsets_mapping`` give them: the
        characters its bytes belong to; through a normalizer, a model over characters or added tokens (which may
        strip whitespace), HF's alignments; the post-processor's ``trim_offsets`` applied
        (``encode_with_offsets``)."""
        trims = self.post_processor is not None and bool(self.post_processor.offset_trims)
        if trims or self.added_tokens or self.normalizer is not None or self._model_is_over_characters():
            listed = np.asarray(tokens).tolist()
            allowed = {special for special, token in self._special_tokens.items() if token in listed}
            ids, spans = self._ids_and_offsets(text, allowed_special=allowed, disallowed_special=())
            if ids != listed:
                raise ValueError("tokens are not the encoding of text")
            return np.array(spans, np.int64).reshape(-1, 2)
        return self._byte_spans(text, tokens)

    def _byte_spans(self, text: str, tokens: np.ndarray) -> np.ndarray:
        """``offsets_mapping`` where each token is bytes of ``text``: the characters its bytes belong to."""
        data = np.frombuffer(_as_utf8_safe(text).encode("utf-8"), np.uint8)
        byte_ends = np.cumsum(self.token_byte_lengths()[np.asarray(tokens, np.int64)])
        if len(byte_ends) and byte_ends[-1] != len(data):
            raise ValueError("tokens are not the encoding of text")
        char_of_byte = np.cumsum((data & 0xC0) != 0x80) - 1  # the character each byte belongs to
        char_of_byte = np.append(char_of_byte, char_of_byte[-1] + 1 if len(data) else 0)
        byte_starts = byte_ends - self.token_byte_lengths()[np.asarray(tokens, np.int64)]
        return np.stack([char_of_byte[byte_starts], char_of_byte[np.maximum(byte_ends - 1, 0)] + 1], axis=1)

    def encode_batch_to_numpy(
        self,
        texts: Sequence[str],
        *,
        padding: bool | Literal["longest", "max_length"] = "longest",
        truncation: bool = False,
        max_length: int | None = None,
        pad_token_id: int | None = None,
        pad_to_multiple_of: int | None = None,
        padding_side: Literal["right", "left"] = "right",
        truncation_side: Literal["right", "left"] = "right",
        add_special_tokens: bool = True,
        return_attention_mask: bool = True,
        return_offsets_mapping: bool = False,
        num_threads: int | None = None,
        allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> dict[str, np.ndarray]:
        """Model-ready int64 arrays of a batch, as transformers' ``tokenizer(texts, return_tensors="np")``:
        ``input_ids`` (each text framed by ``template``'s prefix and suffix ids when ``add_special_tokens``,
        truncated to ``max_length`` with ``truncation``, padded with ``pad_token_id`` to the longest row or to
        ``max_length``), ``attention_mask`` (1 on tokens) and ``offsets_mapping`` (character spans, (0, 0) on
        template and pad tokens)."""
        if padding is True:
            padding = "longest"
        if padding not in (False, "longest", "max_length"):
            raise ValueError(f"padding={padding!r}: choose True/'longest', 'max_length' or False")
        if (truncation or padding == "max_length") and max_length is None:
            raise ValueError("truncation=True and padding='max_length' need max_length")
        if padding_side not in ("right", "left") or truncation_side not in ("right", "left"):
            raise ValueError("padding_side and truncation_side are 'right' or 'left'")
        tokens, offsets = self.encode_batch_flat(texts, num_threads=num_threads, allowed_special=allowed_special,
                                                 disallowed_special=disallowed_special)
        prefix, suffix = (np.asarray(ids, np.int64) for ids in self.template) if add_special_tokens else (
            np.empty(0, np.int64), np.empty(0, np.int64))
        framing = len(prefix) + len(suffix)
        lengths = np.diff(offsets)
        if truncation:
            if max_length < framing:
                raise ValueError(f"max_length={max_length} leaves no room for the {framing} template tokens")
            kept = np.minimum(lengths, max_length - framing)
        else:
            kept = lengths
        skipped = lengths - kept if truncation_side == "left" else np.zeros_like(lengths)
        row_lengths = kept + framing
        width = int(row_lengths.max(initial=0))
        if padding == "max_length":
            if width > max_length:
                raise ValueError(f"a text has {width} tokens, more than max_length={max_length}: pass truncation=True")
            width = max_length
        if pad_to_multiple_of:
            width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
        if padding is False and len(set(row_lengths.tolist())) > 1:
            raise ValueError("texts of different token counts make no array without padding: pass padding=True")
        if width > row_lengths.min(initial=width) and pad_token_id is None:
            raise ValueError(f"{self.name} has no pad token: pass pad_token_id")
        n = len(lengths)
        starts = width - row_lengths if padding_side == "left" else np.zeros(n, np.int64)
        input_ids = np.full((n, width), pad_token_id if pad_token_id is not None else 0, np.int64)
        rows = np.repeat(np.arange(n), kept)
        within = np.arange(int(kept.sum())) - np.repeat(np.cumsum(kept) - kept, kept)
        columns = np.repeat(starts + len(prefix), kept) + within
        sources = np.repeat(offsets[:-1] + skipped, kept) + within
        input_ids[rows, columns] = tokens[sources]
        for j, token in enumerate(prefix):
            input_ids[np.arange(n), starts + j] = token
        for j, token in enumerate(suffix):
            input_ids[np.arange(n), starts + len(prefix) + kept + j] = token
        result = {"input_ids": input_ids}
        if return_attention_mask:
            column = np.arange(width)
            result["attention_mask"] = ((column >= starts[:, None]) & (column < (starts + row_lengths)[:, None])).astype(np.int64)
        if return_offsets_mapping:
            spans = np.zeros((n, width, 2), np.int64)
            for i, text in enumerate(texts):
                mapping = self.offsets_mapping(text, tokens[offsets[i] : offsets[i + 1]])
                begin = starts[i] + len(prefix)
                spans[i, begin : begin + kept[i]] = mapping[skipped[i] : skipped[i] + kept[i]]
            result["offsets_mapping"] = spans
        return result

    def __call__(self, texts: str | Sequence[str], *, return_tensors: Literal["np"] = "np", **options) -> dict[str, np.ndarray]:
        """``encode_batch_to_numpy`` called like a transformers tokenizer: ``tok(texts, padding=True,
        truncation=True, max_length=512, return_tensors="np")``; one text gives one row.

        ```pycon
        >>> batch = crayon.load("cl100k_base")(["hello", "hello world"], pad_token_id=0)
        >>> batch["input_ids"].tolist(), batch["attention_mask"].tolist()
        ([[15339, 0], [15339, 1917]], [[1, 0], [1, 1]])

        ```
        """
        if return_tensors != "np":
            raise ValueError(f"return_tensors={return_tensors!r}: Crayon returns numpy arrays ('np')")
        return self.encode_batch_to_numpy([texts] if isinstance(texts, str) else texts, **options)

    def encode_ordinary_bytes(self, data: bytes | bytearray | memoryview) -> np.ndarray:
        """Tokens (uint32) of UTF-8 bytes as ordinary text: ``encode_ordinary(data.decode())`` for valid UTF-8.
        A byte that is not valid UTF-8 counts as one non-letter character (the spans of
        ``data.decode("utf-8", "surrogateescape")``) and is encoded as itself."""
        view = memoryview(data).cast("B")
        if (not self.added_tokens and self.normalizer is None and getattr(self._engine, "pattern_id", None) is not None
                and hasattr(self._engine, "encode_utf8_flat")):  # read in place by the jit kernels
            tokens, _ = self._engine.encode_utf8_flat(np.frombuffer(view, np.uint8), np.array([0, len(view)], np.int64))
            return tokens
        try:
            return np.asarray(self.encode_ordinary(codecs.decode(view, "utf-8")), np.uint32)
        except UnicodeDecodeError:
            if self.added_tokens or self.normalizer is not None:
                raise ValueError(f"{self.name} has added tokens or a normalizer, which need valid UTF-8; "
                                 "decode the bytes yourself (errors='replace') and call encode_ordinary") from None
        text = view.tobytes().decode("utf-8", "surrogateescape")
        spans = [span.encode("utf-8", "surrogateescape") for span in self.pretokenizer(text)]
        return np.asarray([token for span in spans for token in self.model.encode_span(span)], np.uint32)

    def _check_specials(self, text: str, allowed_special, disallowed_special) -> frozenset[str]:
        """Apply tiktoken's special-token contract; return the specials to encode as specials."""
        return self._check_batch_specials([text], allowed_special, disallowed_special)

    def _check_batch_specials(self, texts: Sequence[str], allowed_special, disallowed_special) -> frozenset[str]:
        """``_check_specials`` of each text (the arguments checked once); the specials to encode as specials."""
        allowed, disallowed = self._special_sets(texts, allowed_special, disallowed_special)
        _refuse_disallowed(texts, disallowed)
        return allowed

    def _special_sets(self, texts: Sequence[str], allowed_special,
                      disallowed_special) -> tuple[frozenset[str], frozenset[str]]:
        """(specials to encode as specials, specials to refuse) of a call on ``texts``, the arguments checked as
        tiktoken checks them."""
        if not texts:  # as tiktoken: an empty batch checks nothing
            return frozenset(), frozenset()
        if type(allowed_special) in (frozenset, set) and not allowed_special and disallowed_special == "all":
            allowed, disallowed = frozenset(), self.special_tokens_set  # the defaults, without building sets
        else:
            if allowed_special != "all" and not isinstance(allowed_special, AbstractSet):
                raise TypeError(_special_set_error("allowed_special", allowed_special))
            if isinstance(disallowed_special, (str, bytes)) and disallowed_special != "all":
                raise TypeError(_special_set_error("disallowed_special", disallowed_special))
            allowed = self.special_tokens_set if allowed_special == "all" else frozenset(allowed_special)
            allowed &= self.special_tokens_set  # as in tiktoken, allowing a name that is no special token is a no-op
            if disallowed_special == "all":
                disallowed = self.special_tokens_set - allowed
            else:
                disallowed = frozenset(disallowed_special or ())  # None is "none", as in tiktoken
        return allowed, disallowed

    def check_pattern(self, text: str) -> None:
        """Raise ValueError if the pre-tokenization pattern skips any of ``text``: ``encode`` keeps only the
        text its regex matches (as tiktoken does), so a custom regex that skips characters loses them. The
        named patterns match every character; a tokenizer without a pattern (an HF pipeline) is not checked."""
        if self.pattern is None:
            return
        dropped = dropped_text(self.pattern, _as_utf8_safe(text))
        if dropped:
            offset, piece = dropped[0]
            raise ValueError(
                f"the pattern of {self.name} skips {sum(len(p) for _, p in dropped)} characters of this text, "
                f"the first {piece[:40]!r} at offset {offset}: encode would drop them"
            )

    # decoding --------------------------------------------------------------------------------------

    def decode_single_token_bytes(self, token: int) -> bytes:
        """The bytes of one token; a token that is not an integer raises TypeError, as in tiktoken."""
        token = operator.index(token)
        found = self._ordinary_token_bytes(token)
        if found is None:
            found = self._special_bytes.get(token)
        if found is None:
            raise UnknownTokenError(f"token id {token!r} is not in {self.name} (n_vocab={self.n_vocab})")
        return found

    def _ordinary_token_bytes(self, token: int) -> bytes | None:
        if self.tables is None:
            return self.model.token_bytes.get(token)
        offsets = self.tables["token_offsets"]
        if not 0 <= token < len(offsets) - 1:
            return None
        found = self.tables["token_bytes"][offsets[token] : offsets[token + 1]].tobytes()
        return found if found or token in self.tables.get("empty_tokens", ()) else None

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        """The bytes of a token sequence: ``decode_bytes(encode(s)) == s.encode()``."""
        return b"".join(map(self.decode_single_token_bytes, _token_list(tokens)))

    def decode(self, tokens: Sequence[int], errors: str = "replace", *, skip_special_tokens: bool = False) -> str:
        """Decode to text; ``errors`` is how bytes that are not UTF-8 are handled, as in ``bytes.decode``.
        A tokenizer with a ``decoder`` (an HF file's WordPiece, Metaspace ...) gives HF's ``decode`` text;
        ``skip_special_tokens`` leaves the special tokens out, as HF's option does.

        ```pycon
        >>> crayon.load("cl100k_base").decode([15339, 1917])
        'hello world'

        ```
        """
        tokens = _token_list(tokens)
        if skip_special_tokens:
            tokens = [token for token in tokens if token not in self._special_ids]
        if self.decoder is None:
            return self.decode_bytes(tokens).decode("utf-8", errors=errors)
        if self._id_strings is None:  # a decoder may know ids the model never gives (SentencePiece's <s>, </s>)
            self._id_strings = (getattr(self.decoder, "token_strings", None)
                                or [self.id_to_token(token) for token in range(self.n_vocab)])
        try:
            strings = [self._id_strings[operator.index(token)] if token >= 0 else None for token in tokens]
        except IndexError:
            strings = [None]
        if None in strings:
            unknown = next(token for token in tokens if not 0 <= token < self.n_vocab or self.id_to_token(token) is None)
            raise UnknownTokenError(f"token id {unknown!r} is not in {self.name} (n_vocab={self.n_vocab})")
        return self.decoder.decode(strings, errors)

    def decode_tokens_bytes(self, tokens: Sequence[int]) -> list[bytes]:
        """The bytes of each token."""
        return list(map(self.decode_single_token_bytes, _token_list(tokens)))

    # files -----------------------------------------------------------------------------------------

    def save(self, path):
        """Write a cartridge: one file that ``crayon.load(path)`` maps back in under a millisecond. ``.crayon`` is
        appended to a path without it; the path written is returned."""
        from crayon.saving import save_cartridge

        return save_cartridge(self, path)

    def export(self, path, format: Literal["tiktoken", "hf"] = "tiktoken") -> None:
        """Write the vocabulary for another library: a ``.tiktoken`` ranks file (load it in tiktoken with
        ``pat_str=tok.pattern`` and ``tok.special_tokens``) or an HF ``tokenizer.json``."""
        if self.algorithm != "bpe":
            raise ValueError(f"{self.name} encodes by {self.algorithm} match, which neither tiktoken nor HF can express")
        if format == "hf":
            from crayon.formats.hf_io import save_hf_tokenizer

            save_hf_tokenizer(self, path)
        elif format == "tiktoken":
            if not issubclass(self.model_class, BytePairModel):
                raise ValueError(f"{self.name} is a {self.model_class.__name__}, which a .tiktoken file cannot "
                                 "express; export it with format='hf'")
            if self.model.merges is not None or self.normalizer is not None or self.pattern is None:
                raise ValueError(
                    f"{self.name} has explicit merges, a normalizer or a custom pre-tokenizer, which a .tiktoken "
                    f"file cannot express; export it with format='hf'"
                )
            from crayon.formats.tiktoken_io import save_tiktoken_bpe

            save_tiktoken_bpe(self.model.ranks, path)
        else:
            raise ValueError(f"unknown export format {format!r}; choose 'tiktoken' or 'hf'")


    # tiktoken's remaining methods and HF habits ---------------------------------------------------------------

    @property
    def max_token_value(self) -> int:
        """The largest token id, ordinary or special (``n_vocab - 1``)."""
        return self.n_vocab - 1

    def __len__(self) -> int:
        """The number of ids, ``n_vocab`` (HF's ``len(tokenizer)``)."""
        return self.n_vocab

    def is_special_token(self, token: int) -> bool:
        """Whether ``token`` is the id of a special token."""
        if not isinstance(token, int):
            raise TypeError(f"a token id is an int, not {type(token).__name__}")
        return token in self._special_tokens.values()

    def encode_single_token(self, text_or_bytes: str | bytes) -> int:
        """The id of the token spelled ``text_or_bytes`` (special tokens included); ``KeyError`` if none is."""
        if isinstance(text_or_bytes, str):
            if text_or_bytes in self._special_tokens:
                return self._special_tokens[text_or_bytes]
            text_or_bytes = text_or_bytes.encode("utf-8")
        elif not isinstance(text_or_bytes, (bytes, bytearray)):
            raise TypeError(f"encode_single_token takes str or bytes, not {type(text_or_bytes).__name__}")
        token = self.model.ranks.get(bytes(text_or_bytes))
        if token is None:
            token = next((i for i, spelled in self._special_bytes.items() if spelled == text_or_bytes), None)
        if token is None:
            raise KeyError(text_or_bytes)
        return token

    def decode_batch(self, batch: Sequence[Sequence[int]], *, errors: str = "replace",
                     num_threads: int | None = None) -> list[str]:
        """``decode`` of each token list (``num_threads`` is accepted for tiktoken's signature; decoding is a
        lookup and runs in this thread)."""
        return [self.decode(tokens, errors=errors) for tokens in batch]

    def decode_bytes_batch(self, batch: Sequence[Sequence[int]], *, num_threads: int | None = None) -> list[bytes]:
        """``decode_bytes`` of each token list."""
        return [self.decode_bytes(tokens) for tokens in batch]

    def decode_with_offsets(self, tokens: Sequence[int]) -> tuple[str, list[int]]:
        """The text and, for each token, the index of the first character holding any of its bytes (a token that
        starts inside a character belongs to that character). Bytes that are not UTF-8 raise
        ``UnicodeDecodeError``, as in tiktoken."""
        pieces = self.decode_tokens_bytes(tokens)
        offsets, characters = [], 0
        for piece in pieces:
            continues_a_character = bool(piece) and 0x80 <= piece[0] < 0xC0
            offsets.append(max(0, characters - continues_a_character))
            characters += sum(not 0x80 <= byte < 0xC0 for byte in piece)
        return b"".join(pieces).decode("utf-8", errors="strict"), offsets

    def token_byte_values(self) -> list[bytes]:
        """The bytes of every ordinary (mergeable) token, sorted."""
        return sorted(self.model.ranks)

    def get_vocab(self) -> dict[str, int]:
        """HF's vocabulary: each ordinary token spelled in the byte-level alphabet (``Ġ`` for a space ...), and the
        special and added tokens as their text."""
        from crayon.formats.hf_pretokenize import to_byte_chars

        vocab = {to_byte_chars(token): token_id for token, token_id in self.model.ranks.items()}
        return {**vocab, **self.added_tokens, **self._special_tokens}

    def token_to_id(self, token: str) -> int | None:
        """HF's lookup: the id of a token spelled as ``get_vocab`` spells it, or None."""
        from crayon.formats.hf_pretokenize import from_byte_chars, is_byte_chars

        if token in self._special_tokens or token in self.added_tokens:
            return self._special_tokens.get(token, self.added_tokens.get(token))
        return self.model.ranks.get(from_byte_chars(token)) if is_byte_chars(token) else None

    def id_to_token(self, token: int) -> str | None:
        """HF's reverse lookup: the token of ``token`` as ``get_vocab`` spells it, or None."""
        from crayon.formats.hf_pretokenize import to_byte_chars

        if token in self._special_bytes:  # HF spells a normalized added token as its normalized content
            content = self._special_bytes[token].decode("utf-8")
            normalized = self.normalizer is not None and self.added_token_options.get(content, PLAIN).normalized
            return self.normalizer(content) if normalized else content
        if self._token_strings is None:
            self._token_strings = _model_token_strings(self.model)
        if self._token_strings:
            return self._token_strings.get(token)
        found = self._ordinary_token_bytes(token)
        return None if found is None else to_byte_chars(found)

    # corpora and pickling ------------------------------------------------------------------------------

    def encode_file(self, path, *, threads: int | None = None, errors: str = "strict") -> np.ndarray:
        """Tokens (uint32) of a UTF-8 file's text: ``encode_ordinary(data.decode())``, read by the streaming
        pipeline of ``crayon.shards`` (mapped, cut where exact, encoded on ``threads`` workers)."""
        from crayon.shards import iter_tokens

        parts = [chunk.tokens for chunk in iter_tokens(self, [path], threads=threads, errors=errors)]
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def iter_encode_files(self, paths, **options):
        """Token chunks of the documents of ``paths`` in order, in bounded memory: ``crayon.shards.iter_tokens``
        (documents per file, per ``separator`` or per ``jsonl_field`` line; ``append_eot``; ``threads``)."""
        from crayon.shards import iter_tokens

        return iter_tokens(self, paths, **options)

    def write_tokens(self, paths, output, **options) -> dict:
        """Encode the documents of ``paths`` into a token shard ``output`` (``.bin`` or ``.npy``) and its JSON
        sidecar: ``crayon.shards.write_shard``; returns the summary."""
        from crayon.shards import write_shard

        return write_shard(self, paths, output, **options)

    def __reduce__(self):
        """Pickle by source, not engine state: a tokenizer from ``crayon.load`` is loaded again from its profile
        name or file (absolute path); any other (trained in memory) carries its model, tables and pipeline."""
        backend = "auto" if self._choose_per_batch else self.backend
        loaded_from = self.__dict__.get("_loaded_from")
        if loaded_from is not None:
            load, source, options = loaded_from
            return _load_tokenizer, (load, source, {**options, "backend": backend}, self.name)
        return _build_tokenizer, (self.name, self.model, dict(
            pattern=self.pattern, special_tokens=self._special_tokens, normalizer=self.normalizer,
            pretokenizer=None if self.pattern is not None else self.pretokenizer,
            added_tokens=self.added_tokens, backend=backend, tables=self.tables, algorithm=self.algorithm,
            added_token_options=self.added_token_options, post_processor=self.post_processor, decoder=self.decoder))


def remember_source(load: Callable[..., Tokenizer]) -> Callable[..., Tokenizer]:
    """Decorate ``crayon.load`` so that the tokenizers it returns pickle by their source (``__reduce__``)."""

    @functools.wraps(load)
    def load_remembering(source, **options) -> Tokenizer:
        tokenizer = load(source, **options)
        name = os.fspath(source)
        tokenizer._loaded_from = (load_remembering, os.path.abspath(name) if os.path.exists(name) else name,
                                  {key: value for key, value in options.items() if key != "backend"})
        return tokenizer

    return load_remembering


def _load_tokenizer(load: Callable[..., Tokenizer], source: str, options: dict, name: str) -> Tokenizer:
    tokenizer = load(source, **options)
    tokenizer.name = name
    return tokenizer


def _build_tokenizer(name: str, model, options: dict) -> Tokenizer:
    return Tokenizer(name, model, **options)

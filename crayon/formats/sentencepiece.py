"""Read SentencePiece ``.model`` files (a ``ModelProto`` protocol buffer) without the protobuf package.

``read_sentencepiece(path)`` gives the pieces (string, score, type), the model type and the normalizer options;
``model_from_sentencepiece`` the Unigram (``crayon.reference.unigram``) or BPE over characters
(``crayon.reference.char_bpe``) model that encodes as SentencePiece does (a char model is BPE without merges),
and ``normalize`` SentencePiece's text preparation: the precompiled character map of its normalization rule
(``nmt_nfkc``, the default, ``nmt_nfkc_cf``, ...; none for ``identity``), extra spaces removed, a dummy prefix,
spaces written ``▁`` (with ``treat_whitespace_as_suffix``, a dummy suffix instead). A word model cuts the
normalized text into words at each ``▁`` itself (``crayon.reference.wordlevel.SentencePieceWordModel``).

User-defined pieces (``user_defined_symbols=`` of the trainer) are not HF's added tokens: SentencePiece cuts
nothing out of the text. The normalizer copies one found in the raw text as it is (no character map; its spaces
are still spaces), then the model sees the whole normalized text: Unigram scores them ``user_defined_score``
(≥ 0, so the Viterbi nearly always takes them), BPE and char make the longest one starting at each character
one symbol that never merges (as sentencepiece 0.2.3 does).
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from crayon.errors import UnsupportedComponentError
from crayon.formats.precompiled_charsmap import CharsMap, charsmap_from_bytes
from crayon.formats.spec import TokenizerSpec
from crayon.reference.dat import compile_dat
from crayon.reference.pretokenize import WholeText, split_specials
from crayon.reference.char_bpe import CharBytePairModel, merges_from_scores
from crayon.reference.unigram import UNKNOWN_PENALTY, UnigramModel
from crayon.reference.wordlevel import SentencePieceWordModel

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6  # SentencePiece.Type
MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}
SPACE = "\u2581"  # ▁
SPACES_AND_WORDS = re.compile(" |[^ ]+")  # as the normalizer reads a text: each space, and what is between
LARGEST_FLOAT = float(np.finfo(np.float32).max)


@dataclass
class SentencePieceFile:
    pieces: list[tuple[str, float, int]] = field(default_factory=list)  # (piece, score, type)
    model_type: str = "unigram"
    byte_fallback: bool = False
    normalizer_name: str = ""
    precompiled_charsmap: bytes = b""
    add_dummy_prefix: bool = True
    remove_extra_whitespaces: bool = True
    escape_whitespaces: bool = True
    treat_whitespace_as_suffix: bool = False
    allow_whitespace_only_pieces: bool = False
    unk_surface: str = " \u2047 "  # what decoding writes for the unknown piece

    def ids_of(self, *kinds: int) -> list[int]:
        """The ids of the pieces of these types."""
        return [i for i, (_, _, kind) in enumerate(self.pieces) if kind in kinds]


def _fields(data: bytes):
    """Yield (field number, wire type, value) of a protocol buffer message: ints for varints, bytes for
    length-delimited fields, raw bytes for fixed 32/64-bit ones."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, pos = data[pos : pos + size], pos + size
        else:
            raise UnsupportedComponentError(f"SentencePiece model: protocol buffer wire type {wire}")
        yield number, wire, value


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise UnsupportedComponentError("SentencePiece model: the protocol buffer is truncated")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, pos


def read_sentencepiece(path: str | os.PathLike) -> SentencePieceFile:
    """The parts of a ``.model`` file Crayon uses."""
    with open(path, "rb") as handle:
        data = handle.read()
    model = SentencePieceFile()
    for number, _, value in _fields(data):
        if number == 1:  # pieces
            piece, score, kind = "", 0.0, NORMAL
            for inner, _, inner_value in _fields(value):
                if inner == 1:
                    piece = inner_value.decode("utf-8")
                elif inner == 2:
                    (score,) = struct.unpack("<f", inner_value)
                elif inner == 3:
                    kind = inner_value
            model.pieces.append((piece, score, kind))
        elif number == 2:  # trainer_spec
            for inner, _, inner_value in _fields(value):
                if inner == 3:
                    model.model_type = MODEL_TYPES.get(inner_value, str(inner_value))
                elif inner == 24:
                    model.treat_whitespace_as_suffix = bool(inner_value)
                elif inner == 26:
                    model.allow_whitespace_only_pieces = bool(inner_value)
                elif inner == 44:
                    model.unk_surface = inner_value.decode("utf-8")
                elif inner == 35:
                    model.byte_fallback = bool(inner_value)
        elif number == 3:  # normalizer_spec
            for inner, _, inner_value in _fields(value):
                if inner == 1:
                    model.normalizer_name = inner_value.decode("utf-8")
                elif inner == 2:
                    model.precompiled_charsmap = inner_value
                elif inner == 3:
                    model.add_dummy_prefix = bool(inner_value)
                elif inner == 4:
                    model.remove_extra_whitespaces = bool(inner_value)
                elif inner == 5:
                    model.escape_whitespaces = bool(inner_value)
    return model


def model_from_sentencepiece(model: SentencePieceFile) -> UnigramModel | CharBytePairModel | SentencePieceWordModel:
    """The model of a SentencePiece file: Unigram, BPE over characters (char: without merges), or words. Normal and
    user-defined pieces are matched in text, control and unused pieces never; consecutive unknown characters (words,
    in a word model) are one unknown piece (or their bytes' pieces with byte fallback), as SentencePiece gives
    them."""
    if model.model_type not in ("unigram", "bpe", "char", "word"):
        raise UnsupportedComponentError(f"SentencePiece model type {model.model_type!r} (only unigram, bpe, char, word)")
    if model.treat_whitespace_as_suffix and model.model_type == "word":
        raise UnsupportedComponentError("SentencePiece word model with treat_whitespace_as_suffix (the ▁ ends a "
                                        "word instead of starting it)")
    unknown = model.ids_of(UNKNOWN)
    normal, user_defined = model.ids_of(NORMAL), model.ids_of(USER_DEFINED)
    if model.model_type == "word":
        if model.allow_whitespace_only_pieces:
            raise UnsupportedComponentError("SentencePiece word model with allow_whitespace_only_pieces (a run of ▁ "
                                            "is one word)")
        return SentencePieceWordModel([piece for piece, _, _ in model.pieces], sorted(normal + user_defined),
                                      unk_id=unknown[0] if unknown else None, byte_fallback=model.byte_fallback)
    if model.model_type != "unigram":
        pieces = [(piece, score) for piece, score, _ in model.pieces]
        merges, ranks = merges_from_scores(pieces, normal) if model.model_type == "bpe" else ([], [])
        vocab = {model.pieces[i][0]: i for i in model.ids_of(NORMAL, UNKNOWN, BYTE, USER_DEFINED)}
        return CharBytePairModel(vocab, merges, ranks=ranks, unk_token=model.pieces[unknown[0]][0] if unknown else None,
                                 byte_fallback=model.byte_fallback, fuse_unk=True,
                                 user_defined=[model.pieces[i][0] for i in user_defined])
    scores = [score for _, score, _ in model.pieces]
    for i in user_defined:
        scores[i] = user_defined_score(model.pieces[i][0])
    lowest = np.float32(min((scores[i] for i in normal), default=LARGEST_FLOAT))
    return UnigramModel([(piece, score) for (piece, _, _), score in zip(model.pieces, scores)],
                        unk_id=unknown[0] if unknown else None, byte_fallback=model.byte_fallback,
                        matchable=normal + user_defined, single_precision=True,
                        unk_score=float(lowest - np.float32(UNKNOWN_PENALTY)))


def user_defined_score(piece: str) -> float:
    """A user-defined piece's Unigram score: 0.1 for each UTF-8 byte after its first, in single precision (at
    least any normal piece's log probability, and a longer piece beats the split of the same text into shorter
    user-defined ones)."""
    return float(np.float32(0.1 * (len(piece.encode("utf-8")) - 1)))


def normalize(model: SentencePieceFile, text: str, charsmap: CharsMap | None = None,
              user_defined: frozenset[str] = frozenset()) -> str:
    """SentencePiece's preparation of text: the user-defined pieces kept as they are and the character map's
    rewrites (``CharsMap.longest_rewrites``), if any; then spaces (U+0020) at the start removed and runs of them
    made one, a dummy prefix, spaces written ``▁``, and ``▁``s at the end removed (with
    ``treat_whitespace_as_suffix``, then a dummy suffix, wherever the text had more than spaces). A ``▁`` in the text is kept as
    it is, but ends a run of spaces, and is removed at the end like the spaces written ``▁`` (``encode("▁")`` is
    empty, ``encode("▁a")`` is ``▁``, ``▁a``). Spaces inside one rewrite or user-defined piece are kept as they
    are (a run of them is not made one); those at its start are removed after a space."""
    whole_or_not = (split_specials(text, user_defined) if charsmap is None
                    else charsmap.longest_rewrites(text, user_defined))
    pieces = [split for piece, whole in whole_or_not
              for split in ([piece] if whole else SPACES_AND_WORDS.findall(piece))]
    start = 0
    while model.remove_extra_whitespaces and start < len(pieces) and pieces[start] == " ":
        start += 1
    if start == len(pieces):
        return ""
    suffix = model.treat_whitespace_as_suffix
    kept = [" "] if model.add_dummy_prefix and not suffix else []
    after_space = model.remove_extra_whitespaces
    for piece in pieces[start:]:
        if after_space:
            piece = piece.lstrip(" ")
        if piece:
            kept.append(piece)
            after_space = model.remove_extra_whitespaces and piece.endswith(" ")
    text = "".join(kept)
    space = SPACE if model.escape_whitespaces else " "
    if model.escape_whitespaces:
        text = text.replace(" ", SPACE)
    if model.remove_extra_whitespaces:
        text = text.rstrip(space)
    return text + space if suffix and model.add_dummy_prefix else text  # even where only ▁s were left


class SentencePieceNormalizer:
    """``normalize`` with one file's options, character map and user-defined pieces, as a Tokenizer's
    normalizer."""

    def __init__(self, model: SentencePieceFile):
        self.model = model
        self.charsmap = charsmap_from_bytes(model.precompiled_charsmap) if model.precompiled_charsmap else None
        self.user_defined = frozenset(model.pieces[i][0] for i in model.ids_of(USER_DEFINED))

    def __call__(self, text: str) -> str:
        return normalize(self.model, text, self.charsmap, self.user_defined)

    @property
    def whitespace_options(self) -> dict:
        """The options of ``normalize``, the character map and the user-defined pieces, as
        ``crayon.jit.whitespace_normalizer.normalize_utf8`` takes them."""
        options = {"escape_whitespaces": self.model.escape_whitespaces,
                   "remove_extra_whitespaces": self.model.remove_extra_whitespaces,
                   "add_dummy_prefix": self.model.add_dummy_prefix,
                   "treat_whitespace_as_suffix": self.model.treat_whitespace_as_suffix}
        if self.charsmap is not None:
            options["charsmap"] = self.charsmap.kernel_arrays
        if self.user_defined:
            options["user_defined"] = compile_dat([piece.encode("utf-8") for piece in self.user_defined],
                                                  list(range(len(self.user_defined))))
        return options


class SentencePieceDecoder:
    """``SentencePieceProcessor.decode`` of the pieces of ids: a control piece (``<s>``, ``</s>``) is nothing, the
    unknown piece the trainer's ``unk_surface`` (" ⁇ "), a run of byte pieces ``<0xXX>`` its bytes as UTF-8 (each
    byte that starts no character a U+FFFD), a ``▁`` a space; with ``add_dummy_prefix`` or
    ``remove_extra_whitespaces`` the first piece loses a leading ``▁`` (with ``remove_extra_whitespaces``, each
    piece until one writes text)."""

    preserves_bytes = False

    def __init__(self, model: SentencePieceFile):
        self.token_strings = [piece for piece, _, _ in model.pieces]  # every id's piece, control pieces included
        self.control = frozenset(model.pieces[i][0] for i in model.ids_of(CONTROL))
        self.unknown = frozenset(model.pieces[i][0] for i in model.ids_of(UNKNOWN))
        self.bytes = {model.pieces[i][0]: bytes([int(model.pieces[i][0][3:5], 16)]) for i in model.ids_of(BYTE)}
        self.unknown_surface = model.unk_surface
        self.strips_first = model.add_dummy_prefix or model.remove_extra_whitespaces
        self.strips_until_text = model.remove_extra_whitespaces

    def decode(self, tokens: list[str], errors: str = "replace") -> str:
        """The text of the pieces; ``errors`` other than "replace" (SentencePiece's U+FFFD per byte) handle a
        byte that starts no character as ``bytes.decode`` does."""
        surfaces: list[str] = []
        pending: list[bytes] = []
        at_start, stripped, written = True, False, False
        for piece in tokens:
            if piece in self.bytes:
                pending.append(self.bytes[piece])
                continue
            if pending:
                surfaces.append(_utf8_surface(b"".join(pending), errors))
                written, pending = written or bool(surfaces[-1]), []
            at_start = at_start and not stripped and not written
            stripped = False
            if piece in self.control:
                surface = ""
            elif piece in self.unknown:
                surface = self.unknown_surface
            else:
                if at_start and self.strips_first and piece.startswith(SPACE):
                    piece, stripped = piece[1:], not self.strips_until_text
                surface = piece.replace(SPACE, " ")
            surfaces.append(surface)
            written = written or bool(surface)
        if pending:
            surfaces.append(_utf8_surface(b"".join(pending), errors))
        return "".join(surfaces)

    def to_hf(self) -> dict:
        raise UnsupportedComponentError("SentencePieceDecoder: SentencePiece's decoding has no tokenizer.json form")


def _utf8_surface(data: bytes, errors: str) -> str:
    """UTF-8 bytes as text, character by character; a byte that starts no character is U+FFFD ("replace")."""
    if errors != "replace":
        return data.decode("utf-8", errors)
    text, start = [], 0
    while start < len(data):
        for end in range(min(len(data), start + 4), start, -1):
            try:
                text.append(data[start:end].decode("utf-8"))
                break
            except UnicodeDecodeError:
                continue
        else:
            text.append("\ufffd")
            end = start + 1
        start = end
    return "".join(text)


def read_sentencepiece_tokenizer(path: str | os.PathLike) -> TokenizerSpec:
    """The spec of a SentencePiece unigram, bpe, char or word ``.model``: its normalization, its model, and its spans.
    ``Tokenizer.from_spec(...).encode(text)`` gives ``SentencePieceProcessor.encode(text)``.

    The model runs on the whole text. Unigram must: SentencePiece sums path scores in single precision over the
    whole text, and the rounding decides ties, so a split would change ids. BPE cuts the text itself before each
    ``▁`` where neither a merge nor a user-defined piece crosses one (``CharBytePairModel.merges_never_cross``),
    on both engines."""
    model = read_sentencepiece(path)
    encoder = model_from_sentencepiece(model)
    return TokenizerSpec(Path(path).stem, encoder, pattern=None, normalizer=SentencePieceNormalizer(model),
                         pretokenizer=WholeText(), decoder=SentencePieceDecoder(model))

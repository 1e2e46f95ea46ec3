"""Read and write HF tokenizers' ``tokenizer.json`` files of byte-level BPE and WordLevel models; read those of
the other models over characters (WordPiece, Unigram, BPE without ByteLevel such as Llama 2's, with byte
fallback: see ``_vocab_model_spec``).

Reading gives a ``TokenizerSpec``; the Tokenizer built from it (``crayon.load``, ``Tokenizer.from_spec``) gives
with ``encode(text, allowed_special="all")`` the ids of HF's ``encode(text, add_special_tokens=False)``:

- normalizer and pre-tokenizer: the components of ``hf_normalize.py`` and ``hf_pretokenize.py``; the pipeline
  must map text to GPT-2's byte-level characters somewhere (a ByteLevel pre-tokenizer or normalizer), since
  Crayon's model works on bytes.
- model: BPE with its vocabulary (byte-level strings turned back into bytes), its merges (``"a b"`` strings or
  ``[a, b]`` lists; a pair's rank is its position) and ``ignore_merges``. Refused: dropout,
  ``continuing_subword_prefix``/``end_of_word_suffix``, ``byte_fallback``, and an ``unk_token`` that a missing
  byte could produce. HF silently drops a byte with no token; Crayon raises ``UnknownTokenError`` instead.
- added tokens: ids are assigned as HF assigns them (the file's ``id`` fields are only checked, as HF does);
  special ones become Crayon special tokens, the others ``added_tokens`` (always matched). Their ``lstrip``,
  ``rstrip``, ``single_word`` and ``normalized`` fields become ``added_token_options``, which the Tokenizer
  matches as HF does (``crayon.reference.added_tokens``: two passes, raw then normalized text).
- post-processors (ByteLevel, TemplateProcessing, RobertaProcessing, BertProcessing, Sequence;
  ``hf_postprocess``) act with ``encode(text, add_special_tokens=True)`` (and ``pair=``) and in
  ``encode_batch_to_numpy`` (the Tokenizer's ``template``). Decoders (``hf_decode``): ByteLevel, Metaspace,
  WordPiece, ByteFallback, Fuse, Strip, Replace, Sequence; a byte-level BPE's ByteLevel/Fuse decoder (or none)
  leaves ``decode`` the tokens' bytes as text. Truncation and fixed-length padding change ids and are
  refused.

Saving writes a file HF loads and encodes to the same ids, of a byte-level BPE or a WordLevel model (its
vocabulary and unknown token). A pattern becomes a Split pre-tokenizer (tiktoken's ``findall``: matches kept, the
rest dropped), followed for BPE by ByteLevel without regex; a tiktoken-style vocabulary (ranks, no merges) gets
``ignore_merges`` (tiktoken's whole-span lookup) and the merges derived from the ranks by ``merges_from_ranks``.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

from crayon.errors import FormatError, UnsupportedComponentError
from crayon.patterns import VARIANT_PATTERNS
from crayon.reference.bpe import BytePairModel
from crayon.formats.hf_pretokenize import (
    ByteLevel,
    HFPreTokenizer,
    PreTokenizerSequence,
    Split,
    from_byte_chars,
    is_byte_chars,
    python_regex_to_hf,
    step_from_hf,
    to_byte_chars,
)
from crayon.formats.hf_decode import Decoder, decoder_from_hf
from crayon.formats.hf_normalize import Normalizer, UnicodeNormalizer, normalizer_from_hf, start_is_local
from crayon.formats.hf_postprocess import post_processor_from_hf
from crayon.formats.spec import TokenizerSpec
from crayon.reference.added_tokens import PLAIN, AddedTokenOptions
from crayon.reference.char_bpe import CharBytePairModel
from crayon.reference.pretokenize import PatternSpanner
from crayon.reference.unigram import UnigramModel
from crayon.reference.wordlevel import WordLevelModel
from crayon.reference.wordpiece import WordPieceModel

__all__ = ["read_hf_tokenizer", "spec_from_hf", "pipeline_from_hf", "pipeline_to_hf", "save_hf_tokenizer", "tokenizer_to_hf",
           "merges_from_ranks"]

MODEL_TYPES = ("BPE", "WordPiece", "WordLevel", "Unigram")
_BYTE_LEVEL_DECODER = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}


def read_hf_tokenizer(path: str | os.PathLike) -> TokenizerSpec:
    """Read an HF ``tokenizer.json`` of a byte-level BPE model (see the module docstring for what is supported)."""
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as handle:
            config = json.load(handle)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise FormatError(f"{path} is not a tokenizer.json (UTF-8 JSON): {error}") from None
    name = path.parent.name if path.stem == "tokenizer" and path.parent.name else path.stem
    try:
        return spec_from_hf(config, name=name or "tokenizer")
    except (AttributeError, TypeError, KeyError, IndexError) as error:  # a field of the wrong shape
        raise FormatError(f"{path} is not a well-formed tokenizer.json: {type(error).__name__}: {error}") from None


def spec_from_hf(config: dict, *, name: str = "tokenizer") -> TokenizerSpec:
    """The spec of the parsed JSON object of a ``tokenizer.json``; the model type is checked first, since an
    unknown model is the cause of whatever else does not fit."""
    if not isinstance(config, dict) or not isinstance(config.get("model"), dict):
        raise FormatError("a tokenizer.json is a JSON object with a \"model\" object")
    model_spec = config["model"]
    kind = model_spec.get("type", "BPE" if "merges" in model_spec else None)
    if kind not in MODEL_TYPES:
        raise UnsupportedComponentError(f"model {kind!r} is not supported ({', '.join(MODEL_TYPES)})")
    _check_encoding_options(config)
    post_processor = post_processor_from_hf(config.get("post_processor"))
    decoder = decoder_from_hf(config.get("decoder"))
    normalizer, pretokenizer = pipeline_from_hf(config, byte_level=None)
    if kind != "BPE" or not pretokenizer.output_is_byte_chars:
        spec = _vocab_model_spec(config, model_spec, name, normalizer, pretokenizer)
        spec.post_processor, spec.decoder = post_processor, decoder
        return spec
    vocab = _check_bpe_model(model_spec)
    # NFC (Qwen's, GPT-NeoX's) keeps the hand-written machine: the jit engine normalizes the text first
    pattern = known_pattern_of(config.get("pre_tokenizer")) if normalizer is None or _is_nfc(normalizer) else None

    special_tokens, added_tokens, options = _added_tokens(config.get("added_tokens") or [], vocab)
    added_ids = set(special_tokens.values()) | set(added_tokens.values())
    ranks = _vocabulary_bytes(vocab, added_ids)
    merges = [_merge_from_hf(merge, vocab) for merge in model_spec.get("merges", [])]
    model = BytePairModel(ranks, merges, ignore_merges=bool(model_spec.get("ignore_merges", False)))
    return TokenizerSpec(
        name,
        model,
        special_tokens=special_tokens,
        added_tokens=added_tokens,
        normalizer=normalizer,
        pretokenizer=pretokenizer if pattern is None else PatternSpanner(pattern),
        added_token_options=options,
        post_processor=post_processor,
        decoder=None if _decodes_as_bytes(decoder, [*special_tokens, *added_tokens], options, normalizer) else decoder,
    )


def known_pattern_of(pre_tokenizer_spec: dict | None) -> str | None:
    """The tiktoken-style pattern (a name, or a regex of ``VARIANT_PATTERNS``) ``pre_tokenizer_spec`` splits
    exactly as, or None: the HF form that ``save_hf_tokenizer`` writes for a pattern; GPT-2's ByteLevel without a
    prefix space, whose regex is r50k's (they differ only in ``\\s++$|...|\\s`` against ``...|\\s+``, which match
    the same whitespace); or Llama 3's (Qwen 2's) ``Split`` of its regex, "Isolated", then ByteLevel without its
    regex: the regex matches every character, so the split's pieces are its matches. The jit engine then runs its
    hand-written machine."""
    if isinstance(pre_tokenizer_spec, dict) and {**pre_tokenizer_spec, "trim_offsets": True} == {
            "type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}:
        return "r50k_base"
    for name in ("r50k_base", "cl100k_base", "o200k_base"):
        if pre_tokenizer_spec == _pretokenizer_to_hf(PatternSpanner(name)):
            return name
    steps = pre_tokenizer_spec.get("pretokenizers") if isinstance(pre_tokenizer_spec, dict) else None
    if isinstance(steps, list) and len(steps) == 2 and pre_tokenizer_spec.get("type") == "Sequence":
        split, byte_level = steps
        if isinstance(byte_level, dict) and {**byte_level, "trim_offsets": True} == {
                "type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}:
            for regex_text in VARIANT_PATTERNS.values():
                if split == {"type": "Split", "pattern": {"Regex": regex_text}, "behavior": "Isolated", "invert": False}:
                    return regex_text
    return None


def _is_nfc(normalizer: Normalizer) -> bool:
    """Whether the normalizer is HF's NFC alone: text to text, never to byte-level characters."""
    return isinstance(normalizer, UnicodeNormalizer) and normalizer.form == "NFC"


def _decodes_as_bytes(decoder: Decoder, added: list[str], options: dict[str, AddedTokenOptions],
                      normalizer: Normalizer | None) -> bool:
    """Whether a byte-level BPE's decode is the tokens' bytes as text, as Crayon's plain decode gives it: no
    decoder (HF would join the byte-level strings with spaces: Crayon keeps the text), or ByteLevel/Fuse ones
    and every added token decoded by HF as its text: HF decodes a ``normalized`` one as its normalized content,
    and one spelled in byte-level characters as the bytes they stand for ("é" is byte 0xE9)."""
    if decoder.spec is None:
        return True
    strings = {token: normalizer(token) if normalizer is not None and options.get(token, PLAIN).normalized else token
               for token in added}
    return decoder.preserves_bytes and all(
        string == token and not (is_byte_chars(string) and from_byte_chars(string) != string.encode("utf-8"))
        for token, string in strings.items())


def _vocab_model_spec(config: dict, model_spec: dict, name: str, normalizer: Normalizer | None,
                      pretokenizer: HFPreTokenizer) -> TokenizerSpec:
    """A WordPiece, WordLevel, Unigram or BPE model over characters (``crayon.reference.wordpiece``,
    ``.wordlevel``, ``.unigram``, ``.char_bpe``)."""
    if pretokenizer.output_is_byte_chars:
        raise UnsupportedComponentError("ByteLevel with a model over characters (WordPiece, WordLevel, Unigram)")
    kind = model_spec.get("type", "BPE" if "merges" in model_spec else None)
    if kind == "WordPiece":
        vocab = model_spec.get("vocab") or {}
        model = WordPieceModel(vocab, unk_token=model_spec.get("unk_token", "[UNK]"),
                               continuing_subword_prefix=model_spec.get("continuing_subword_prefix", "##"),
                               max_input_chars_per_word=model_spec.get("max_input_chars_per_word", 100))
    elif kind == "WordLevel":
        missing = [field for field in ("vocab", "unk_token") if field not in model_spec]
        if missing:
            raise FormatError(f"the WordLevel model lacks {missing[0]!r} (HF refuses the file)")
        vocab = _token_ids(model_spec)
        model = WordLevelModel(vocab, unk_token=model_spec["unk_token"])
    elif kind == "BPE":
        vocab = model_spec.get("vocab") or {}
        model = _char_bpe_model(model_spec, vocab)
    elif kind == "Unigram":
        pieces = [(piece, score) for piece, score in model_spec.get("vocab") or []]
        vocab = {piece: token_id for token_id, (piece, _) in enumerate(pieces)}
        model = UnigramModel(pieces, unk_id=model_spec.get("unk_id"),
                             byte_fallback=model_spec.get("byte_fallback", False))
    else:
        raise UnsupportedComponentError(f"model {kind!r} is not supported ({', '.join(MODEL_TYPES)})")
    special_tokens, added_tokens, options = _added_tokens(config.get("added_tokens") or [], vocab)
    return TokenizerSpec(name, model, pattern=None, special_tokens=special_tokens, added_tokens=added_tokens,
                         normalizer=normalizer, pretokenizer=pretokenizer, added_token_options=options)


def _char_bpe_model(spec: dict, vocab: dict[str, int]) -> CharBytePairModel:
    if spec.get("dropout") not in (None, 0, 0.0):
        raise UnsupportedComponentError(f"BPE dropout={spec['dropout']} (random merges)")
    for option in ("continuing_subword_prefix", "end_of_word_suffix", "ignore_merges"):
        if spec.get(option):
            raise UnsupportedComponentError(f"BPE over characters with {option}={spec[option]!r}")
    merges = [tuple(merge.split(" ")) if isinstance(merge, str) else tuple(merge) for merge in spec.get("merges", [])]
    if any(len(merge) != 2 for merge in merges):
        raise ValueError("a merge is not two tokens")
    return CharBytePairModel(vocab, merges, unk_token=spec.get("unk_token"),
                             byte_fallback=bool(spec.get("byte_fallback")), fuse_unk=bool(spec.get("fuse_unk")))


def pipeline_from_hf(config: dict, *, byte_level: bool | None = True) -> tuple[Normalizer | None, HFPreTokenizer]:
    """The normalizer and pre-tokenizer of a ``tokenizer.json`` object (its "normalizer", "pre_tokenizer"); they
    must map the text to byte-level characters if ``byte_level``, must not if it is False (None: no check)."""
    normalizer = None if config.get("normalizer") is None else normalizer_from_hf(config["normalizer"])
    pre_tokenizer_spec = config.get("pre_tokenizer")
    pretokenizer = HFPreTokenizer(
        None if pre_tokenizer_spec is None else step_from_hf(pre_tokenizer_spec),
        input_is_byte_chars=normalizer is not None and normalizer.maps_to_byte_chars,
    )
    if pretokenizer.after_token is not None and normalizer is not None:
        start_is_local(normalizer)  # HF puts the ▁ only where the normalized text starts at the first character
    if byte_level is True and not pretokenizer.output_is_byte_chars:
        raise UnsupportedComponentError(
            "BPE over characters: no ByteLevel pre-tokenizer or normalizer maps the text to bytes"
        )
    return normalizer, pretokenizer


def pipeline_to_hf(normalizer: Normalizer | None, pretokenizer, *, byte_level: bool = True) -> dict:
    """The "normalizer" and "pre_tokenizer" entries of a ``tokenizer.json`` object; ``byte_level``: whether the
    model's tokens are in GPT-2's byte-level characters (a pattern is then followed by ByteLevel)."""
    return {"normalizer": _normalizer_to_hf(normalizer),
            "pre_tokenizer": _pretokenizer_to_hf(pretokenizer, byte_level=byte_level)}


# --- checks ------------------------------------------------------------------------------------------------


def _check_encoding_options(config: dict) -> None:
    version = config.get("version", "1.0")
    if version != "1.0":
        raise UnsupportedComponentError(f"tokenizer.json version {version!r} (HF reads only '1.0')")
    if config.get("truncation") is not None:
        raise UnsupportedComponentError("truncation: HF would cut the ids; Crayon's encode never does")
    padding = config.get("padding")
    if padding is not None and padding.get("strategy") != "BatchLongest":
        raise UnsupportedComponentError(f"padding with strategy {padding.get('strategy')!r}: HF would add pad ids")


def _check_bpe_model(spec: dict) -> dict[str, int]:
    """Refuse what Crayon's BPE does not do; return the vocabulary (token string -> id)."""
    kind = spec.get("type", "BPE" if "merges" in spec else None)
    if kind != "BPE":
        raise UnsupportedComponentError(f"model {kind!r} is not supported (only byte-level BPE)")
    if spec.get("dropout") not in (None, 0, 0.0):
        raise UnsupportedComponentError(f"BPE dropout={spec['dropout']} (random merges)")
    for option in ("continuing_subword_prefix", "end_of_word_suffix"):
        if spec.get(option):
            raise UnsupportedComponentError(f"BPE {option}={spec[option]!r}")
    if spec.get("byte_fallback"):
        raise UnsupportedComponentError("BPE byte_fallback")
    vocab = _token_ids(spec)
    if len(set(vocab.values())) != len(vocab):
        raise ValueError("model.vocab gives two tokens the same id")
    missing_bytes = [byte for byte in range(256) if to_byte_chars(bytes([byte])) not in vocab]
    if missing_bytes and spec.get("unk_token") is not None:
        raise UnsupportedComponentError(
            f"BPE unk_token {spec['unk_token']!r} with {len(missing_bytes)} bytes missing from the vocabulary"
        )
    return vocab


def _token_ids(spec: dict) -> dict[str, int]:
    """A model's "vocab" object (token -> id), checked."""
    vocab = spec.get("vocab") or {}
    if not isinstance(vocab, dict) or not all(isinstance(i, int) for i in vocab.values()):
        raise FormatError("model.vocab must be an object of token -> integer id")
    return vocab


def _vocabulary_bytes(vocab: dict[str, int], added_ids: set[int]) -> dict[bytes, int]:
    """The model's tokens as bytes; entries that are added tokens written as plain text are left to those."""
    ranks: dict[bytes, int] = {}
    for token, token_id in vocab.items():
        if is_byte_chars(token):
            ranks[from_byte_chars(token)] = token_id
        elif token_id not in added_ids:
            raise UnsupportedComponentError(f"vocabulary token {token!r} (id {token_id}) is not byte-level text")
    return ranks


def _merge_from_hf(merge: str | list, vocab: dict[str, int]) -> tuple[bytes, bytes]:
    """One merge, ``"a b"`` or ``["a", "b"]``, as a pair of byte strings; its parts and result must be tokens."""
    parts = merge.split(" ") if isinstance(merge, str) else merge
    if len(parts) != 2:
        raise ValueError(f"merge {merge!r} is not two tokens")
    for token in (parts[0], parts[1], parts[0] + parts[1]):
        if token not in vocab:
            raise ValueError(f"merge {merge!r}: {token!r} is not in the vocabulary")
    return from_byte_chars(parts[0]), from_byte_chars(parts[1])


def _added_tokens(
    specs: list[dict], vocab: dict[str, int]
) -> tuple[dict[str, int], dict[str, int], dict[str, AddedTokenOptions]]:
    """Assign ids as HF does (existing token, else the next id after the vocabulary); split special/other; the
    matching options of each (HF's default for a missing ``normalized``: true unless special)."""
    ids: dict[str, int] = {}
    seen: set[tuple] = set()  # HF skips a token equal to one already added (content and flags, not id)
    special_contents: set[str] = set()
    options: dict[str, AddedTokenOptions] = {}
    for spec in specs:
        content = spec["content"]
        key = tuple(sorted((field, value) for field, value in spec.items() if field != "id"))
        if not content or key in seen:
            continue
        seen.add(key)
        token_options = AddedTokenOptions(
            single_word=bool(spec.get("single_word", False)), lstrip=bool(spec.get("lstrip", False)),
            rstrip=bool(spec.get("rstrip", False)), normalized=bool(spec.get("normalized", not spec.get("special"))))
        if options.get(content, token_options) != token_options:
            raise UnsupportedComponentError(f"added token {content!r} is listed twice with different options")
        options[content] = token_options
        token_id = ids.get(content, vocab.get(content))
        if token_id is None:
            highest = max(ids.values(), default=None)
            token_id = len(vocab) if highest is None or (highest < len(vocab) and vocab) else highest + 1
        if spec.get("id", token_id) != token_id:
            warnings.warn(f"added token {content!r} has id {spec['id']} in the file; HF gives it {token_id}")
        ids[content] = token_id
        if spec.get("special", False):
            special_contents.add(content)
    special = {content: token_id for content, token_id in ids.items() if content in special_contents}
    added = {content: token_id for content, token_id in ids.items() if content not in special_contents}
    return special, added, {content: option for content, option in options.items() if option != PLAIN}


# --- saving ------------------------------------------------------------------------------------------------


def save_hf_tokenizer(tokenizer: TokenizerSpec, path: str | os.PathLike) -> None:
    """Write ``tokenizer`` (a spec, or a ``crayon.Tokenizer``: it has the same attributes) as an HF
    ``tokenizer.json`` that HF loads and encodes to the same ids."""
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(tokenizer_to_hf(tokenizer), handle, ensure_ascii=False)


def tokenizer_to_hf(tokenizer: TokenizerSpec) -> dict:
    """The ``tokenizer.json`` object of a spec or a ``crayon.Tokenizer`` of a byte-level BPE or WordLevel model."""
    model = tokenizer.model
    added_tokens = _added_tokens_to_hf(tokenizer)
    if isinstance(model, WordLevelModel):
        return _wordlevel_to_hf(tokenizer, added_tokens)
    if not isinstance(model, BytePairModel):
        raise UnsupportedComponentError(
            f"writing a {type(model).__name__} as a tokenizer.json (only byte-level BPE and WordLevel)")
    vocab = {to_byte_chars(token): token_id for token, token_id in model.ranks.items()}
    merges = model.merges if model.merges is not None else merges_from_ranks(model.ranks)
    for token in added_tokens:
        _put_added_token_in_vocab(token["content"], token["id"], vocab)
    return {
        **_framing_to_hf(tokenizer, added_tokens, byte_level=True),
        "decoder": _BYTE_LEVEL_DECODER if tokenizer.decoder is None else tokenizer.decoder.to_hf(),
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": model.whole_span_lookup,
            "vocab": vocab,
            "merges": [f"{to_byte_chars(left)} {to_byte_chars(right)}" for left, right in merges],
        },
    }


def _wordlevel_to_hf(tokenizer: TokenizerSpec, added_tokens: list[dict]) -> dict:
    """A WordLevel model's ``tokenizer.json`` object: its vocabulary as it is (HF gives an added token the id of
    the word spelled like it, else the next id after the vocabulary: other ids are refused). Without a decoder,
    Crayon's ``decode`` joins the tokens' text, as HF's Fuse decoder does (HF's none joins them with spaces)."""
    model = tokenizer.model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ids HF would change are refused below
        special, added, _ = _added_tokens(added_tokens, model.vocab)
    if (special, added) != (dict(tokenizer.special_tokens), dict(tokenizer.added_tokens)):
        raise UnsupportedComponentError(
            "WordLevel added tokens with ids HF would not give them (the id of the word spelled like the token, "
            "else the next id after the vocabulary)")
    return {
        **_framing_to_hf(tokenizer, added_tokens, byte_level=False),
        "decoder": {"type": "Fuse"} if tokenizer.decoder is None else tokenizer.decoder.to_hf(),
        "model": {"type": "WordLevel", "vocab": dict(sorted(model.vocab.items(), key=lambda item: item[1])),
                  "unk_token": model.unk_token},
    }


def _added_tokens_to_hf(tokenizer: TokenizerSpec) -> list[dict]:
    """The "added_tokens" entries of a tokenizer's special and added tokens, by id."""
    added_tokens = [
        {"id": token_id, "content": content, **tokenizer.added_token_options.get(content, PLAIN).to_hf(),
         "special": special}
        for tokens, special in ((tokenizer.special_tokens, True), (tokenizer.added_tokens, False))
        for content, token_id in tokens.items()
    ]
    return sorted(added_tokens, key=lambda token: token["id"])


def _framing_to_hf(tokenizer: TokenizerSpec, added_tokens: list[dict], *, byte_level: bool) -> dict:
    """The entries of a ``tokenizer.json`` object other than the model and the decoder (``byte_level``: as
    ``pipeline_to_hf``'s)."""
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added_tokens,
        **pipeline_to_hf(tokenizer.normalizer, tokenizer.pretokenizer, byte_level=byte_level),
        "post_processor": None if tokenizer.post_processor is None else tokenizer.post_processor.to_hf(),
    }


def _put_added_token_in_vocab(content: str, token_id: int, vocab: dict[str, int]) -> None:
    """HF gives an added token the id of the vocabulary entry spelled like it, so make that entry the id."""
    if is_byte_chars(content) and from_byte_chars(content) != content.encode("utf-8"):
        raise UnsupportedComponentError(
            f"added token {content!r} is spelled with byte-level characters that stand for other bytes; "
            "HF's model would confuse it with ordinary text"
        )
    if vocab.get(content, token_id) != token_id:
        raise UnsupportedComponentError(f"added token {content!r} is spelled like vocabulary token {vocab[content]}")
    vocab[content] = token_id


def _normalizer_to_hf(normalizer) -> dict | None:
    if normalizer is None:
        return None
    if not isinstance(normalizer, Normalizer):
        raise UnsupportedComponentError(f"normalizer {type(normalizer).__name__} has no HF form")
    return normalizer.to_hf()


def _pretokenizer_to_hf(pretokenizer, *, byte_level: bool = True) -> dict | None:
    """The HF pre-tokenizer object; a pattern's is tiktoken's ``findall`` (keep the matches, drop the text
    between them), then ByteLevel where ``byte_level``."""
    if isinstance(pretokenizer, HFPreTokenizer):
        return pretokenizer.to_hf()
    if isinstance(pretokenizer, PatternSpanner):
        findall = Split(python_regex_to_hf(pretokenizer.pattern), "removed", invert=True)
        if not byte_level:
            return findall.to_hf()
        return PreTokenizerSequence([findall, ByteLevel(add_prefix_space=False, use_regex=False)]).to_hf()
    raise UnsupportedComponentError(f"pre-tokenizer {pretokenizer!r} has no HF form")


def merges_from_ranks(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """HF merges under which HF's BPE makes the tokens tiktoken's merge-rank BPE over ``ranks`` makes.

    tiktoken merges, again and again, the adjacent pair whose concatenation has the lowest rank; HF merges the
    pair listed first. Each token of two or more bytes gets one merge, listed in rank order: the two parts
    tiktoken's own algorithm reaches when it encodes the token's bytes with only the lower ranks. When tiktoken
    forms that token inside longer text, its bytes have gone through those same lower-ranked merges, so it
    forms it from the same two parts (checked for cl100k_base and o200k_base on every corpus file). Raises
    ``ValueError`` if a token is not reached that way: the ranks are then not a BPE merge order.
    """
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) < 2:
            continue
        parts = _merge_below_rank(ranks, token, rank)
        if len(parts) != 2:
            raise ValueError(f"token {token!r} (rank {rank}) is not the merge of two lower-ranked tokens")
        merges.append((parts[0], parts[1]))
    return merges


def _merge_below_rank(ranks: dict[bytes, int], token: bytes, max_rank: int) -> list[bytes]:
    """Merge-rank BPE of ``token``'s bytes using only merges ranked below ``max_rank``."""
    parts = [token[i : i + 1] for i in range(len(token))]
    while len(parts) > 1:
        ranked = [(ranks.get(left + right, max_rank), i) for i, (left, right) in enumerate(zip(parts, parts[1:]))]
        best_rank, best_index = min(ranked)
        if best_rank >= max_rank:
            break
        parts[best_index : best_index + 2] = [parts[best_index] + parts[best_index + 1]]
    return parts


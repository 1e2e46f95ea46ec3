"""A transformers tokenizer whose batches Crayon encodes: ``CrayonTokenizerFast``.

``CrayonTokenizerFast`` is transformers' ``PreTrainedTokenizerFast`` (so loading, special tokens, ``decode``,
``batch_decode``, ``apply_chat_template``, ``save_pretrained`` ... are transformers' own) with one change:
calls of the form ``tokenizer(texts, padding=..., truncation=..., max_length=..., return_tensors=...)`` on
plain text are encoded by a Crayon Tokenizer built from the same ``tokenizer.json`` and padded in numpy, giving
the same ids, attention masks and arrays; so are text pairs (without truncation) and token type ids, framed by
the file's post-processor (``Tokenizer.post_process``) and padded by transformers' ``pad``. Calls that ask for
more (pairs with truncation, pre-split words, strides and overflowing tokens, offsets, special-token masks,
lengths) are encoded by transformers itself; ``crayon_calls`` counts the calls Crayon encoded.

    from crayon.hf import CrayonTokenizerFast
    tokenizer = CrayonTokenizerFast.from_pretrained("path/to/model")   # a folder with tokenizer.json
    batch = tokenizer(texts, padding=True, truncation=True, max_length=512, return_tensors="np")

The adapter takes byte-level BPE tokenizers (what it is tested against transformers on); any other model
(WordPiece, WordLevel, Unigram, BPE over characters) is refused at loading with ``UnsupportedComponentError``.
"""

from __future__ import annotations

import json
import logging
import weakref

import numpy as np

try:
    from transformers import PreTrainedTokenizerFast
    from transformers.tokenization_utils_base import BatchEncoding, PaddingStrategy, TruncationStrategy
except ImportError as missing:  # pragma: no cover - the message is the point
    raise ImportError("crayon.hf needs transformers: pip install transformers") from missing

from crayon.errors import UnsupportedComponentError
from crayon.formats.hf_io import spec_from_hf
from crayon.reference.bpe import BytePairModel
from crayon.tokenizer import Tokenizer

logger = logging.getLogger(__name__)
_CRAYON_TOKENIZERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_CRAYON_TRUNCATIONS = (TruncationStrategy.DO_NOT_TRUNCATE, TruncationStrategy.LONGEST_FIRST,
                       TruncationStrategy.ONLY_FIRST)


def _all_str(texts) -> bool:
    return isinstance(texts, (list, tuple)) and all(isinstance(item, str) for item in texts)


def crayon_tokenizer_of(hf_tokenizer: PreTrainedTokenizerFast, backend: str = "auto") -> Tokenizer:
    """The Crayon Tokenizer of a transformers fast tokenizer's ``tokenizer.json`` (its current post-processor
    gives ``template``); ``UnsupportedComponentError`` when Crayon cannot encode it exactly."""
    config = json.loads(hf_tokenizer.backend_tokenizer.to_str())
    config["truncation"] = config["padding"] = None  # transformers sets these per call; Crayon pads itself
    try:
        spec = spec_from_hf(config, name=hf_tokenizer.name_or_path or "tokenizer")
        if not isinstance(spec.model, BytePairModel):
            raise UnsupportedComponentError(f"a {type(spec.model).__name__}: the adapter takes byte-level BPE")
        return Tokenizer.from_spec(spec, backend=backend)
    except UnsupportedComponentError as error:
        raise UnsupportedComponentError(
            f"CrayonTokenizerFast cannot encode this tokenizer exactly ({error}); "
            "load it with transformers' AutoTokenizer instead"
        ) from None


class CrayonTokenizerFast(PreTrainedTokenizerFast):
    """transformers' fast tokenizer with plain-text batches encoded by Crayon (see the module docstring).

    It keeps transformers' ``__init__`` (transformers rebuilds the backend of classes that define their own);
    ``from_pretrained(..., crayon_backend="jit")`` picks Crayon's engine ("auto" by default) and refuses a
    tokenizer Crayon cannot encode exactly."""

    crayon_calls = 0
    crayon_warned_length = False
    crayon_backend = "auto"

    @classmethod
    def from_pretrained(cls, *args, crayon_backend: str = "auto", **kwargs) -> "CrayonTokenizerFast":
        tokenizer = super().from_pretrained(*args, **kwargs)
        tokenizer.crayon_backend = crayon_backend
        _CRAYON_TOKENIZERS[tokenizer] = crayon_tokenizer_of(tokenizer, backend=crayon_backend)
        return tokenizer

    @property
    def crayon(self) -> Tokenizer:
        """The Crayon Tokenizer that encodes the batches, built from the backend on first use. It is kept outside
        the instance, so that pickling (``datasets.map(..., num_proc=N)`` and its fingerprints pickle the
        tokenizer's attributes) carries transformers' state only and each process builds its own."""
        if self not in _CRAYON_TOKENIZERS:
            _CRAYON_TOKENIZERS[self] = crayon_tokenizer_of(self, backend=self.crayon_backend)
        return _CRAYON_TOKENIZERS[self]

    def _encode_plus(self, text, text_pair=None, add_special_tokens=True,
                     padding_strategy=PaddingStrategy.DO_NOT_PAD,
                     truncation_strategy=TruncationStrategy.DO_NOT_TRUNCATE, max_length=None, stride=0,
                     is_split_into_words=False, pad_to_multiple_of=None, padding_side=None, return_tensors=None,
                     return_token_type_ids=None, return_attention_mask=None, return_overflowing_tokens=False,
                     return_special_tokens_mask=False, return_offsets_mapping=False, return_length=False,
                     verbose=True, split_special_tokens=None, **kwargs) -> BatchEncoding:
        texts = [text] if isinstance(text, str) else text
        pairs = [text_pair] if isinstance(text_pair, str) else text_pair
        if return_token_type_ids is None:
            return_token_type_ids = "token_type_ids" in self.model_input_names
        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        crayon_can = (
            not is_split_into_words and stride == 0 and not kwargs
            and not (return_overflowing_tokens or return_special_tokens_mask or return_offsets_mapping or return_length)
            and truncation_strategy in _CRAYON_TRUNCATIONS
            and _all_str(texts) and (pairs is None or (  # pairs: without truncation, which HF shares between them
                _all_str(pairs) and len(pairs) == len(texts)
                and truncation_strategy == TruncationStrategy.DO_NOT_TRUNCATE))
        )
        if not crayon_can:
            return super()._encode_plus(
                text, text_pair, add_special_tokens, padding_strategy, truncation_strategy, max_length, stride,
                is_split_into_words, pad_to_multiple_of, padding_side, return_tensors, return_token_type_ids,
                return_attention_mask, return_overflowing_tokens, return_special_tokens_mask,
                return_offsets_mapping, return_length, verbose, split_special_tokens, **kwargs)
        self.crayon_calls += 1
        split = self.split_special_tokens if split_special_tokens is None else split_special_tokens
        specials = {"allowed_special": frozenset(), "disallowed_special": ()} if split else {"allowed_special": "all"}
        padding = {PaddingStrategy.LONGEST: "longest", PaddingStrategy.MAX_LENGTH: "max_length"}.get(padding_strategy)
        truncation = truncation_strategy != TruncationStrategy.DO_NOT_TRUNCATE
        if pairs is not None or return_token_type_ids:
            encoded = self._framed(texts, pairs, add_special_tokens, max_length if truncation else None, specials,
                                   return_token_type_ids, return_attention_mask)
            if padding is not None:
                encoded = self.pad(encoded, padding=padding_strategy, max_length=max_length,
                                   pad_to_multiple_of=pad_to_multiple_of, padding_side=padding_side,
                                   return_attention_mask=return_attention_mask)
            if return_tensors is not None:
                encoded = {key: np.asarray(value, np.int64) for key, value in encoded.items()}
        elif padding is None:
            rows = self._rows(texts, add_special_tokens, max_length if truncation else None, specials)
            encoded = {"input_ids": rows}
            if return_attention_mask:
                encoded["attention_mask"] = [[1] * len(row) for row in rows]
        else:
            arrays = self.crayon.encode_batch_to_numpy(
                texts, padding=padding, truncation=truncation, max_length=max_length,
                pad_token_id=self.pad_token_id, pad_to_multiple_of=pad_to_multiple_of,
                padding_side=padding_side or self.padding_side, truncation_side=self.truncation_side,
                add_special_tokens=add_special_tokens, return_attention_mask=return_attention_mask, **specials)
            encoded = arrays if return_tensors is not None else {key: value.tolist() for key, value in arrays.items()}
        longest = max(map(len, encoded["input_ids"]), default=0)
        if verbose and max_length is None and longest > self.model_max_length and not self.crayon_warned_length:
            self.crayon_warned_length = True
            logger.warning(f"a text has {longest} tokens, more than model_max_length={self.model_max_length}: "
                           "the model may fail on it (pass truncation=True)")
        if isinstance(text, str) and return_tensors is None:
            encoded = {key: value[0] for key, value in encoded.items()}
        return BatchEncoding(encoded, tensor_type=return_tensors)

    def _framed(self, texts, pairs, add_special_tokens: bool, max_length: int | None, specials: dict,
                return_token_type_ids: bool, return_attention_mask: bool) -> dict[str, list[list[int]]]:
        """Unpadded ``input_ids`` (and ``token_type_ids``, ``attention_mask``) of texts or pairs of texts, framed by
        the post-processor (``Tokenizer.post_process``); single texts cut to ``max_length`` first."""
        first = self.crayon.encode_batch(texts, **specials)
        second = [None] * len(texts) if pairs is None else self.crayon.encode_batch(pairs, **specials)
        if max_length is not None:
            framing = len(self.crayon.post_process([], add_special_tokens=add_special_tokens)[0])
            room = max(max_length - framing, 0)
            first = [ids if len(ids) <= room else ids[:room] if self.truncation_side == "right" else ids[len(ids) - room:]
                     for ids in first]
        framed = [self.crayon.post_process(a, b, add_special_tokens=add_special_tokens) for a, b in zip(first, second)]
        encoded = {"input_ids": [ids for ids, _ in framed]}
        if return_token_type_ids:
            encoded["token_type_ids"] = [types for _, types in framed]
        if return_attention_mask:
            encoded["attention_mask"] = [[1] * len(ids) for ids, _ in framed]
        return encoded

    def _rows(self, texts, add_special_tokens: bool, max_length: int | None, specials: dict) -> list[list[int]]:
        """Unpadded id lists, framed by the template and cut to ``max_length`` on the truncation side."""
        tokens, offsets = self.crayon.encode_batch_flat(texts, **specials)
        prefix, suffix = (list(ids) for ids in self.crayon.template) if add_special_tokens else ([], [])
        room = None if max_length is None else max(max_length - len(prefix) - len(suffix), 0)
        flat = tokens.astype(np.int64).tolist()
        rows = []
        for start, end in zip(offsets[:-1].tolist(), offsets[1:].tolist()):
            if room is not None and end - start > room:
                start, end = (start, start + room) if self.truncation_side == "right" else (end - room, end)
            rows.append(prefix + flat[start:end] + suffix)
        return rows

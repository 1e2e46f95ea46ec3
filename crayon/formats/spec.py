"""What a tokenizer file describes, as plain data: the readers of ``crayon.formats`` return a ``TokenizerSpec``
and the writers take one; ``crayon.Tokenizer.from_spec`` builds the tokenizer (the formats never import it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from crayon.reference.added_tokens import AddedTokenOptions
from crayon.reference.bpe import BytePairModel

if TYPE_CHECKING:
    from crayon.formats.hf_decode import Decoder
    from crayon.formats.hf_postprocess import PostProcessor

__all__ = ["TokenizerSpec"]


@dataclass
class TokenizerSpec:
    """A tokenizer's parts: the model (vocabulary and merges), its pre-tokenization (a ``pattern`` regex, or a
    ``pretokenizer`` that splits text into spans), an optional ``normalizer``, and the special tokens (tiktoken's
    allow/disallow contract) and added tokens (always matched) with their ids; ``template`` holds the ids put
    before and after each text by ``encode_batch_to_numpy`` (an HF post-processor's BOS/EOS);
    ``added_token_options`` HF's matching options of special and added tokens (plain ones left out);
    ``post_processor`` the ids ``add_special_tokens=True`` adds (it sets ``template``) and ``decoder`` what
    ``decode`` makes of the token strings (None: the tokens' bytes as text)."""

    name: str
    model: BytePairModel
    pattern: str | None = None
    special_tokens: dict[str, int] = field(default_factory=dict)
    added_tokens: dict[str, int] = field(default_factory=dict)
    normalizer: Callable[[str], str] | None = None
    pretokenizer: Callable[[str], list[str]] | None = None
    template: tuple[tuple[int, ...], tuple[int, ...]] = ((), ())
    added_token_options: dict[str, AddedTokenOptions] = field(default_factory=dict)
    post_processor: "PostProcessor | None" = None
    decoder: "Decoder | None" = None

"""Character-level tokenizer: one token per Unicode code point."""

from __future__ import annotations

from crayon.lookup.vocab_tokenizer import VocabTokenizer

__all__ = ["CharTokenizer"]


class CharTokenizer(VocabTokenizer):
    """Maps each Unicode code point (not byte) to an id; ids 0-3 are `<PAD>`, `<UNK>`, `<BOS>`, `<EOS>`.

    `train` adds the characters it sees (see `VocabTokenizer.train` for the id order). `encode` maps a
    character that was never trained to `<UNK>` (id 1), so that character is lost: `decode` gives back
    the literal "<UNK>" in its place (or nothing with skip_special_tokens=True). Any text made only of
    trained characters round-trips exactly: `decode(encode(text)) == text`. Text containing a lone
    surrogate is refused with ValueError.
    """

    def _split_units(self, text: str) -> list[str]:
        return list(text)

    def _join_tokens(self, tokens: list[str]) -> str:
        return "".join(tokens)

    @classmethod
    def _is_unit(cls, token: str) -> bool:
        return len(token) == 1

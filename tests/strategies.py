"""Hypothesis strategies for tokenizer text: every Unicode category plus the places BPE patterns are subtle."""

from hypothesis import strategies as st

FRAGMENTS = [
    " ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\n\n", " \n ", "\u00a0", "\u3000", "\u2009", "\x0b", "\x0c",
    "'s", "'S", "'ll", "'LL", "'Ve", "'re", "'d", "'M", "'t", "’s",
    "0", "12", "123", "1234567", "٣٤", "½", "Ⅻ",
    "hello", "Hello", "HELLO", "camelCase", "naïve", "Straße", "ǅ", "ʰ", "中文", "日本語", "한국어", "שלום", "ไทย",
    "e\u0301", "\u0301", "😀", "👍🏽", "🇺🇸", "a/b", "//", "...", "?!", "$$", "<|", "|>", "_", "-",
    "<|endoftext|>", "<|fim_prefix|>", "<|endofprompt|>",
]

unicode_chars = st.characters(codec="utf-8")  # every category but lone surrogates
text_pieces = st.one_of(st.sampled_from(FRAGMENTS), st.text(unicode_chars, max_size=4))
tokenizer_text = st.lists(text_pieces, max_size=24).map("".join)

"""HF tokenizer configurations shared by test_hf_io.py and the differential harness: small byte-level BPE models
that HF tokenizers trains on a corpus slice, one per pre-tokenizer/normalizer combination real files use."""

from __future__ import annotations

import functools

from hypothesis import strategies as st
from tokenizers import AddedToken, Regex, decoders, models, trainers
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import normalizers as hf_norm
from tokenizers import pre_tokenizers as hf_pre

from conftest import corpus_text
from crayon.formats.hf_pretokenize import BEHAVIORS
from strategies import FRAGMENTS

SPECIALS = ["<|endoftext|>", "<|pad|>"]
ADDED = ["<think>", "<|eot|>"]  # added after training: a plain one and a special one
LLAMA3 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)
QWEN2 = LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")

# Characters Python's Unicode database knows: for unassigned ones HF's tables (Oniguruma, Rust) are newer or older.
assigned_chars = st.characters(codec="utf-8", exclude_categories=["Cn"])
hf_text = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS + ADDED), st.text(assigned_chars, max_size=4)), max_size=16
).map("".join)


def byte_level(use_regex: bool = True):
    return hf_pre.ByteLevel(add_prefix_space=False, use_regex=use_regex)


def then_bytes(*steps):
    """Steps followed by ByteLevel without its regex, as Llama 3 and Qwen 2 files have it."""
    return hf_pre.Sequence([*steps, byte_level(use_regex=False)])


# name -> (pre-tokenizer, normalizer, ignore_merges)
CONFIGS = {
    "gpt2": lambda: (byte_level(), None, False),
    "gpt2_prefix_space": lambda: (hf_pre.ByteLevel(add_prefix_space=True), None, False),
    "llama3_ignore_merges": lambda: (then_bytes(hf_pre.Split(Regex(LLAMA3), "isolated")), None, True),
    "qwen2_nfc": lambda: (then_bytes(hf_pre.Split(Regex(QWEN2), "isolated")), hf_norm.NFC(), False),
    "digits_nfkc_lowercase": lambda: (
        hf_pre.Sequence([hf_pre.Digits(individual_digits=True), byte_level()]),
        hf_norm.Sequence([hf_norm.NFKC(), hf_norm.Lowercase()]),
        False,
    ),
    "digit_runs_nfd_strip_accents": lambda: (
        hf_pre.Sequence([hf_pre.Digits(individual_digits=False), byte_level()]),
        hf_norm.Sequence([hf_norm.NFD(), hf_norm.StripAccents()]),
        False,
    ),
    "replace_strip_prepend": lambda: (
        byte_level(),
        hf_norm.Sequence(
            [hf_norm.Replace("``", '"'), hf_norm.Replace(Regex(r"\s+"), " "), hf_norm.Strip(), hf_norm.Prepend("▁")]
        ),
        False,
    ),
    "nmt_punctuation": lambda: (
        hf_pre.Sequence([hf_pre.Punctuation("merged_with_previous"), byte_level()]),
        hf_norm.Nmt(),
        False,
    ),
    "whitespace": lambda: (then_bytes(hf_pre.Whitespace()), None, False),
    "whitespace_split": lambda: (then_bytes(hf_pre.WhitespaceSplit()), None, False),
    "bert_pre_tokenizer": lambda: (then_bytes(hf_pre.BertPreTokenizer()), None, False),
    "char_delimiter": lambda: (hf_pre.Sequence([hf_pre.CharDelimiterSplit("e"), byte_level()]), None, False),
    "fixed_length": lambda: (then_bytes(hf_pre.FixedLength(4)), None, False),
    "split_string_pattern": lambda: (
        hf_pre.Sequence([hf_pre.Split(" ", "merged_with_next"), byte_level()]), None, False
    ),
    "byte_level_normalizer": lambda: (hf_pre.Split(Regex("Ġ?[^Ġ]+"), "isolated"), hf_norm.ByteLevel(), False),
    "neox_nfc_whitespace_tokens": lambda: (byte_level(), hf_norm.NFC(), False),
    **{
        f"split_{behavior}{'_inverted' if invert else ''}": (
            lambda behavior=behavior, invert=invert: (
                hf_pre.Sequence([hf_pre.Split(Regex(r"\s+|[.,;]"), behavior, invert=invert), byte_level()]),
                None,
                False,
            )
        )
        for behavior in BEHAVIORS
        for invert in (False, True)
    },
}


# GPT-NeoX's added tokens: runs of spaces matched in the normalized text, which NFC never changes or makes.
EXTRA_ADDED = {"neox_nfc_whitespace_tokens": [AddedToken(" " * n, normalized=True) for n in range(2, 8)]}


@functools.cache
def training_text() -> tuple[str, ...]:
    text = corpus_text("big.txt", 100_000) + corpus_text("multilingual.txt", 40_000)
    return tuple(text[i : i + 2000] for i in range(0, len(text), 2000))


def train_hf(training_text, pre_tokenizer, normalizer=None, ignore_merges=False, extra_added=()):
    """A small byte-level BPE trained by HF tokenizers, with specials and added tokens."""
    hf = HFTokenizer(models.BPE(ignore_merges=ignore_merges))
    hf.pre_tokenizer = pre_tokenizer
    if normalizer is not None:
        hf.normalizer = normalizer
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600, initial_alphabet=hf_pre.ByteLevel.alphabet(), special_tokens=SPECIALS, show_progress=False
    )
    hf.train_from_iterator(training_text, trainer)
    # Without a normalizer a plain added token may keep HF's default normalized=true; with one it must not.
    hf.add_tokens([ADDED[0] if normalizer is None else AddedToken(ADDED[0], normalized=False)])
    hf.add_special_tokens([ADDED[1]])
    hf.add_tokens(list(extra_added))
    return hf


@functools.cache
def trained(name: str) -> HFTokenizer:
    """The HF tokenizer of configuration ``name`` (trained once per session)."""
    return train_hf(training_text(), *CONFIGS[name](), extra_added=EXTRA_ADDED.get(name, ()))

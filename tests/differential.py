"""The registry of the differential harness (tests/test_differential.py): tokenizers, each with its oracle, and
the backends every one of them runs on.

Adding a tokenizer or a model family is one entry in ``TOKENIZERS``: a ``Case`` with a function building the
tokenizer (on any backend: the harness moves it with ``with_backend``), the oracle it must match and the text
strategy of its property tests. Adding a backend (an engine) is one entry in ``BACKENDS``: the ``backend`` name
``Tokenizer.with_backend`` takes, its options, and whether it runs here. Every property test of
test_differential.py then runs on every (tokenizer, backend) pair.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Callable, Protocol

from hypothesis import strategies as st

import crayon
from conftest import mergeable_ranks, tiktoken_encoding
from crayon.errors import BackendUnavailableError
from crayon.reference.bpe import BytePairModel
from crayon.reference.longest import LongestMatchModel
from crayon.reference.pretokenize import WholeText
from strategies import tokenizer_text


class Oracle(Protocol):
    """What a tokenizer is checked against: tiktoken, HF tokenizers, or (where no other library implements the
    model) Crayon's reference engine."""

    has_special_contract: bool  # tiktoken's allowed/disallowed specials and encode_ordinary; HF always matches them

    def encode_all_special(self, text: str) -> list[int]:
        """Ids with every special and added token matched."""
        ...

    def encode_ordinary(self, text: str) -> list[int]:
        """Ids with special-token text encoded as ordinary text (only where ``has_special_contract``)."""
        ...

    def decode(self, ids: list[int]) -> str:
        ...


class TiktokenOracle:
    has_special_contract = True

    def __init__(self, encoding):
        self.encoding = encoding

    def encode_all_special(self, text: str) -> list[int]:
        return self.encoding.encode(text, allowed_special="all")

    def encode_ordinary(self, text: str) -> list[int]:
        return self.encoding.encode_ordinary(text)

    def decode(self, ids: list[int]) -> str:
        return self.encoding.decode(ids)


class HFOracle:
    has_special_contract = False

    def __init__(self, hf):
        self.hf = hf

    def encode_all_special(self, text: str) -> list[int]:
        return self.hf.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self.hf.decode(ids, skip_special_tokens=False)


class ReferenceOracle:
    """Crayon's reference engine: the oracle of models no other library implements (greedy longest match)."""

    has_special_contract = True

    def __init__(self, tokenizer: crayon.Tokenizer):
        self.tokenizer = tokenizer.with_backend("reference")

    def encode_all_special(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, allowed_special="all")

    def encode_ordinary(self, text: str) -> list[int]:
        return self.tokenizer.encode_ordinary(text)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)


@dataclass(frozen=True)
class Case:
    """A tokenizer of the harness: ``build()`` makes it (any backend), ``oracle(tokenizer)`` its oracle."""

    build: Callable[[], crayon.Tokenizer]
    oracle: Callable[[crayon.Tokenizer], Oracle]
    text: st.SearchStrategy[str] = tokenizer_text
    corpus_chars: int | None = 20_000  # of each corpus; None: whole files
    examples: int = 40  # hypothesis examples per property test
    suffix: str = ""  # appended to corpus text (special and added tokens the oracle matches)
    algorithm: str = "bpe"  # the tokenizer's: backends run the algorithms they list


def _tiktoken_case(name: str, **options) -> Case:
    return Case(lambda: crayon.load(name, backend="reference"),
                lambda tok: TiktokenOracle(tiktoken_encoding(name)), **options)


CUSTOM_PATTERN = r"\w+|\s+|[^\w\s]+"  # no jit pre-tokenizer: the reference spanner feeds the fast encoders


def _custom_regex_oracle(tok):
    import tiktoken

    return TiktokenOracle(tiktoken.Encoding("custom", pat_str=CUSTOM_PATTERN,
                                            mergeable_ranks=mergeable_ranks("cl100k_base"),
                                            special_tokens={"<|endoftext|>": 100257}))


def _cl100k_slice() -> dict[bytes, int]:
    """The first 3000 ranks of cl100k (every byte and the commonest merges): small enough for the CUDA simulator."""
    return {token: rank for token, rank in mergeable_ranks("cl100k_base").items() if rank < 3000}


def _slice_oracle(tok):
    import tiktoken

    return TiktokenOracle(tiktoken.Encoding("slice", pat_str=tok.pattern, mergeable_ranks=_cl100k_slice(),
                                            special_tokens=tok.special_tokens))


def _sparse_longest(pattern: str | None) -> crayon.Tokenizer:
    """Longest match over every 3rd multi-byte cl100k token (no single bytes, so the byte fallback fires)."""
    from crayon.jit.dat import compile_dat

    tokens = {rank: token for token, rank in mergeable_ranks("cl100k_base").items() if len(token) > 1 and rank % 3 == 0}
    model = LongestMatchModel(tokens, *compile_dat(list(tokens.values()), list(tokens)), 100277)
    return crayon.Tokenizer("sparse", model, pattern=pattern, pretokenizer=None if pattern else WholeText(),
                            backend="reference", algorithm="longest")


def _hf_case(name: str) -> Case:
    def build():
        import hf_configs

        config = json.loads(hf_configs.trained(name).to_str())
        from crayon.formats.hf_io import spec_from_hf

        return crayon.Tokenizer.from_spec(spec_from_hf(config, name=name), backend="reference")

    def oracle(tok):
        import hf_configs

        return HFOracle(hf_configs.trained(name))

    from hf_configs import ADDED, SPECIALS, hf_text

    suffix = f" {ADDED[0]} x{ADDED[1]}y {SPECIALS[0]}   e\u0301  \u00a0 "
    return Case(build, oracle, text=hf_text, corpus_chars=2_500, examples=20, suffix=suffix)


def _hf_cases() -> dict[str, Case]:
    try:
        import hf_configs
    except ImportError:  # HF tokenizers is not installed: no HF oracle
        return {}
    return {f"hf_{name}": _hf_case(name) for name in sorted(hf_configs.CONFIGS)}


TOKENIZERS: dict[str, Case] = {
    "cl100k_base": _tiktoken_case("cl100k_base", corpus_chars=None, examples=150),
    "o200k_base": _tiktoken_case("o200k_base", corpus_chars=None, examples=150),
    "custom_regex": Case(lambda: crayon.Tokenizer("custom", BytePairModel(mergeable_ranks("cl100k_base")),
                                                   pattern=CUSTOM_PATTERN, special_tokens={"<|endoftext|>": 100257},
                                                   backend="reference"), _custom_regex_oracle),
    # small and fast: the one the CUDA simulator runs (test_differential.py::test_cuda_backend_under_the_simulator)
    "cl100k_slice": Case(lambda: crayon.Tokenizer("slice", BytePairModel(_cl100k_slice()), pattern="cl100k_base",
                                                  special_tokens={"<|endoftext|>": 100257}, backend="reference"),
                         _slice_oracle, corpus_chars=300, examples=6),
    "longest_sparse_cl100k": Case(lambda: _sparse_longest("cl100k_base"), ReferenceOracle, corpus_chars=3000,
                                  algorithm="longest"),
    "longest_sparse_whole_text": Case(lambda: _sparse_longest(None), ReferenceOracle, corpus_chars=3000,
                                      algorithm="longest"),
    **_hf_cases(),
}


@dataclass(frozen=True)
class Backend:
    """An engine of the harness: ``Tokenizer.with_backend(backend, **options)`` for tokenizers of ``algorithms``,
    where ``available()`` says so."""

    backend: str
    options: dict = field(default_factory=dict)
    algorithms: tuple[str, ...] = ("bpe", "longest")
    available: Callable[[], tuple[bool, str]] = lambda: (True, "")


def _cuda_available() -> tuple[bool, str]:
    from crayon.gpu import capacity

    return capacity.cuda_status()


BACKENDS: dict[str, Backend] = {
    "reference": Backend("reference"),
    "jit-aot": Backend("jit", {"kernels": "aot"}, algorithms=("bpe",)),
    "jit-numba": Backend("jit", {"kernels": "numba"}, algorithms=("bpe",)),
    "jit-longest": Backend("jit", algorithms=("longest",)),
    "cuda": Backend("cuda", {"chunk_bytes": 64}, available=_cuda_available),
}


PAIRS = [(case, backend) for case, entry in TOKENIZERS.items() for backend in BACKENDS
         if entry.algorithm in BACKENDS[backend].algorithms]


@functools.cache
def tokenizer_on(case: str, backend: str) -> crayon.Tokenizer:
    """The tokenizer of ``TOKENIZERS[case]`` on ``BACKENDS[backend]``; skips (with the reason) where that backend
    does not run here."""
    import pytest

    entry = BACKENDS[backend]
    available, reason = entry.available()
    if not available:
        pytest.skip(f"backend {backend} is unavailable: {reason}")
    tok = reference_tokenizer(case)
    assert tok.algorithm == TOKENIZERS[case].algorithm, "the Case's algorithm must be its tokenizer's"
    moved = tok.with_backend(entry.backend, **entry.options)
    try:
        moved.encode_ordinary("warm up")  # the ahead-of-time kernels are loaded (or refused) on the first encode
    except BackendUnavailableError as unavailable:
        pytest.skip(f"backend {backend} is unavailable: {unavailable}")
    return moved


@functools.cache
def reference_tokenizer(case: str) -> crayon.Tokenizer:
    return TOKENIZERS[case].build()


@functools.cache
def oracle_of(case: str) -> Oracle:
    return TOKENIZERS[case].oracle(reference_tokenizer(case))

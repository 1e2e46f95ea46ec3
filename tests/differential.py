"""The registry of the differential harness (tests/test_differential.py): tokenizers, each with its oracle, and
the backends every one of them runs on.

Adding a tokenizer or a model family is one entry in ``TOKENIZERS``: a ``Case`` with a function building the
tokenizer (on any backend: the harness moves it with ``with_backend``), the oracle it must match and the text
strategy of its property tests. Adding a backend (an engine, or a way of driving one such as the dataset
pipeline) is one entry in ``BACKENDS``: the ``backend`` name ``Tokenizer.with_backend`` takes, its options,
whether it runs here, and (``drive``) what wraps the moved tokenizer. Every property test of
test_differential.py then runs on every (tokenizer, backend) pair.

Capabilities: a property a pair cannot have is named, with the reason, in the Case's or the Backend's ``lacks``
(``LACKABLE`` lists the names); the test of that property skips with the reason instead of being weakened. A
backend that runs only some tokenizers says why it cannot run the others (``refuses``); those pairs skip too.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

import numpy as np
from hypothesis import strategies as st

import crayon
from conftest import corpus_text, mergeable_ranks, tiktoken_encoding
from crayon.errors import BackendUnavailableError, UnsupportedComponentError
from crayon.jit import pipeline as jit_pipeline
from crayon.reference import pipeline as reference_pipeline
from crayon.reference.bpe import BytePairModel
from crayon.reference.char_bpe import CharBytePairModel
from crayon.reference.longest import LongestMatchModel
from crayon.reference.pretokenize import WholeText
from crayon.reference.unigram import UnigramModel
from crayon.reference.wordlevel import WordLevelModel
from crayon.reference.wordpiece import WordPieceModel
from strategies import tokenizer_text

LACKABLE = {
    "engine": "the engine protocol, batches and the flat form (tok.engine)",
    "decode": "decode(ids) equals the oracle's decode",
    "special_contract": "tiktoken's disallowed-special errors and crayon.jit.encode",
}


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


class SentencePieceOracle:
    has_special_contract = False

    def __init__(self, processor):
        self.processor = processor

    def encode_all_special(self, text: str) -> list[int]:
        return self.processor.encode(text)

    def decode(self, ids: list[int]) -> str:
        return self.processor.decode(ids)


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
    algorithm: str = "bpe"  # the tokenizer's model (``algorithm_of``): backends run the algorithms they list
    lacks: dict[str, str] = field(default_factory=dict)  # LACKABLE property -> why this tokenizer cannot have it


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


VOCAB_MODELS = {WordPieceModel: "wordpiece", WordLevelModel: "wordlevel", UnigramModel: "unigram",
                CharBytePairModel: "char_bpe"}


def algorithm_of(tok: crayon.Tokenizer) -> str:
    """The model a backend must implement: "wordpiece", "wordlevel", "unigram", "char_bpe", else
    ``tok.algorithm``."""
    return VOCAB_MODELS.get(type(tok.model), tok.algorithm)


def _vocab_training_lines() -> list[str]:
    text = corpus_text("big.txt", 100_000) + corpus_text("multilingual.txt", 20_000)
    return [text[i : i + 2000] for i in range(0, len(text), 2000)]


@functools.cache
def _trained_vocab_model(kind: str):
    """An HF tokenizer of a model over characters, trained here in a fraction of a second (as
    tests/test_vocab_models.py trains them)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    if kind == "wordpiece":
        hf = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=20))
        hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        trainer = trainers.WordPieceTrainer(vocab_size=1500, special_tokens=["[UNK]"], show_progress=False)
    elif kind == "wordlevel":
        hf = Tokenizer(models.WordLevel(unk_token="[UNK]"))
        hf.normalizer, hf.pre_tokenizer = normalizers.Lowercase(), pre_tokenizers.Whitespace()
        trainer = trainers.WordLevelTrainer(vocab_size=3000, special_tokens=["[UNK]"], show_progress=False)
    elif kind == "unigram":
        hf = Tokenizer(models.Unigram())
        hf.pre_tokenizer, hf.decoder = pre_tokenizers.Metaspace(), decoders.Metaspace()
        trainer = trainers.UnigramTrainer(vocab_size=3000, special_tokens=["<unk>"], unk_token="<unk>",
                                          show_progress=False)
    else:
        hf = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True))
        hf.pre_tokenizer, hf.decoder = pre_tokenizers.Metaspace(), decoders.Metaspace()
        trainer = trainers.BpeTrainer(vocab_size=1500, special_tokens=["<unk>"], show_progress=False)
    hf.train_from_iterator(_vocab_training_lines(), trainer)
    return hf


def _vocab_model_case(kind: str, **options) -> Case:
    def build():
        from crayon.formats.hf_io import spec_from_hf

        spec = spec_from_hf(json.loads(_trained_vocab_model(kind).to_str()), name=kind)
        return crayon.Tokenizer.from_spec(spec, backend="reference")

    return Case(build, lambda tok: HFOracle(_trained_vocab_model(kind)), corpus_chars=5_000, examples=30,
                algorithm=kind, **options)


@functools.cache
def _sentencepiece_processor(model_type: str):
    """A SentencePiece model (identity normalization, byte fallback) trained here: (processor, model bytes)."""
    import sentencepiece

    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "train.txt").write_text("".join(_vocab_training_lines()), encoding="utf-8")
        prefix = str(Path(folder) / model_type)
        sentencepiece.SentencePieceTrainer.train(
            input=str(Path(folder) / "train.txt"), model_prefix=prefix, vocab_size=1500, model_type=model_type,
            normalization_rule_name="identity", byte_fallback=True, character_coverage=0.995, minloglevel=2)
        proto = Path(prefix + ".model").read_bytes()
    return sentencepiece.SentencePieceProcessor(model_proto=proto), proto


def _sentencepiece_case(model_type: str) -> Case:
    def build():
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / f"{model_type}.model"
            path.write_bytes(_sentencepiece_processor(model_type)[1])
            return crayon.load(path, backend="reference")

    algorithm = "unigram" if model_type == "unigram" else "char_bpe"
    return Case(build, lambda tok: SentencePieceOracle(_sentencepiece_processor(model_type)[0]),
                text=SENTENCEPIECE_TEXT, corpus_chars=5_000, examples=30, algorithm=algorithm,
                lacks={"decode": DUMMY_PREFIX})


# sentencepiece treats a newline as an ordinary character with no piece; its tests use one line at a time
SENTENCEPIECE_TEXT = tokenizer_text.map(lambda text: text.replace("\n", " ").replace("\r", " "))


DUMMY_PREFIX = "crayon decodes the dummy prefix ▁ as a space, which the oracle's decoder strips"


def _vocab_model_cases() -> dict[str, Case]:
    """The models over characters, each where its oracle (HF tokenizers, sentencepiece) is installed."""
    cases = {}
    if importlib.util.find_spec("tokenizers") is not None:
        cases |= {"wordpiece": _vocab_model_case("wordpiece", lacks={
                      "decode": "WordPiece joins pieces without HF's decoder's spaces and ## stripping"}),
                  "wordlevel": _vocab_model_case("wordlevel"),
                  "unigram": _vocab_model_case("unigram", lacks={"decode": DUMMY_PREFIX}),
                  "char_bpe": _vocab_model_case("char_bpe", lacks={"decode": DUMMY_PREFIX})}
    if importlib.util.find_spec("sentencepiece") is not None:
        cases |= {"sentencepiece_unigram": _sentencepiece_case("unigram"),
                  "sentencepiece_bpe": _sentencepiece_case("bpe")}
    return cases


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
    **_vocab_model_cases(),
}


@dataclass(frozen=True)
class Backend:
    """An engine of the harness: ``Tokenizer.with_backend(backend, **options)`` for tokenizers of ``algorithms``,
    where ``available()`` says so; ``drive`` wraps the moved tokenizer (the dataset pipeline), ``refuses(tok)``
    says why it cannot run a tokenizer (None: it can), ``lacks`` names the LACKABLE properties it has not, and
    ``corpus_chars``/``examples`` cap the Case's (for slow backends)."""

    backend: str
    options: dict = field(default_factory=dict)
    algorithms: tuple[str, ...] = ("bpe", "longest")
    available: Callable[[], tuple[bool, str]] = lambda: (True, "")
    drive: Callable[[crayon.Tokenizer], object] | None = None
    refuses: Callable[[crayon.Tokenizer], str | None] = lambda tok: None
    lacks: dict[str, str] = field(default_factory=dict)
    corpus_chars: int | None = None
    examples: int | None = None


def _cuda_available() -> tuple[bool, str]:
    from crayon.gpu import capacity

    return capacity.cuda_status()


class PipelineTokenizer:
    """A tokenizer whose encode runs a dataset pipeline (``crayon.jit.pipeline`` or ``crayon.reference.pipeline``)
    on a file holding the text, cut every ``chunk_bytes`` where its cut rule allows: what ``encode_file`` and
    ``iter_encode_files`` do, with the special tokens the caller allows."""

    def __init__(self, tokenizer: crayon.Tokenizer, pipeline, chunk_bytes: int):
        self.tokenizer, self.pipeline, self.chunk_bytes = tokenizer, pipeline, chunk_bytes
        self.backend, self.special_tokens_set = tokenizer.backend, tokenizer.special_tokens_set
        self.decode, self.decode_bytes = tokenizer.decode, tokenizer.decode_bytes

    def encode(self, text: str, *, allowed_special=frozenset(), disallowed_special=()) -> list[int]:
        """The pipeline's tokens of ``text`` (``disallowed_special`` is the pipeline's: nothing is refused)."""
        allowed = self.special_tokens_set if allowed_special == "all" else allowed_special
        # a file holds no lone surrogate: U+FFFD in its place, as Tokenizer.encode replaces it
        data = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "text.txt"
            path.write_bytes(data)
            documents = self.pipeline.encode_documents(
                self.tokenizer, reference_pipeline.file_documents([path]), allowed_special=allowed,
                chunk_bytes=self.chunk_bytes, workers=2)
            [(index, tokens)] = documents
        assert index == 0 and tokens.dtype == np.uint32
        return tokens.tolist()

    def encode_ordinary(self, text: str) -> list[int]:
        return self.encode(text)

    def cuts(self, text: str) -> int:
        """How many times the pipeline cuts ``text``."""
        data = text.encode("utf-8")
        document = reference_pipeline.Document("text", data, 0, len(data))
        rule = reference_pipeline.CutRule(self.tokenizer)
        return len(list(reference_pipeline.cut_document(document, rule, self.chunk_bytes))) - 1


def _without_cut_rule(tok: crayon.Tokenizer) -> str | None:
    try:
        reference_pipeline.CutRule(tok, tok.special_tokens_set)
    except UnsupportedComponentError as refused:
        return str(refused)
    return None


PIPELINE_CHUNK_BYTES = 64  # tiny: a corpus slice is cut hundreds of times
PIPELINE_LACKS = {
    "engine": "the pipeline drives the tokenizer's engine, whose own pairs test it",
    "special_contract": "the pipeline encodes with disallowed_special=() (it refuses no special token)",
}


def _pipeline_backend(backend: str, pipeline) -> Backend:
    return Backend(backend, drive=lambda tok: PipelineTokenizer(tok, pipeline, PIPELINE_CHUNK_BYTES),
                   refuses=_without_cut_rule, lacks=PIPELINE_LACKS, corpus_chars=20_000, examples=25)


BACKENDS: dict[str, Backend] = {
    "reference": Backend("reference", algorithms=("bpe", "longest", *VOCAB_MODELS.values())),
    "jit-aot": Backend("jit", {"kernels": "aot"}, algorithms=("bpe",)),
    "jit-numba": Backend("jit", {"kernels": "numba"}, algorithms=("bpe",)),
    "jit-longest": Backend("jit", algorithms=("longest",)),
    "jit-vocab-models": Backend("jit", algorithms=tuple(VOCAB_MODELS.values())),
    "cuda": Backend("cuda", {"chunk_bytes": 64}, available=_cuda_available),
    "pipeline-jit": _pipeline_backend("jit", jit_pipeline),
    "pipeline-reference": _pipeline_backend("reference", reference_pipeline),
}


PAIRS = [(case, backend) for case, entry in TOKENIZERS.items() for backend in BACKENDS
         if entry.algorithm in BACKENDS[backend].algorithms]


@functools.cache
def tokenizer_on(case: str, backend: str):
    """The tokenizer of ``TOKENIZERS[case]`` on ``BACKENDS[backend]`` (driven as the backend drives it); skips
    (with the reason) where that backend does not run here or cannot run this tokenizer."""
    import pytest

    entry = BACKENDS[backend]
    available, reason = entry.available()
    if not available:
        pytest.skip(f"backend {backend} is unavailable: {reason}")
    tok = reference_tokenizer(case)
    assert algorithm_of(tok) == TOKENIZERS[case].algorithm, "the Case's algorithm must be its tokenizer's"
    refused = entry.refuses(tok)
    if refused is not None:
        pytest.skip(f"backend {backend} cannot run {case}: {refused}")
    moved = tok.with_backend(entry.backend, **entry.options)
    try:
        moved.encode_ordinary("warm up")  # the ahead-of-time kernels are loaded (or refused) on the first encode
    except BackendUnavailableError as unavailable:
        pytest.skip(f"backend {backend} is unavailable: {unavailable}")
    return moved if entry.drive is None else entry.drive(moved)


def case_on(case: str, backend: str) -> Case:
    """``TOKENIZERS[case]`` as its tests run on ``backend``: the backend's caps and lacks applied."""
    entry, found = BACKENDS[backend], TOKENIZERS[case]
    chars = found.corpus_chars if entry.corpus_chars is None else min(found.corpus_chars or entry.corpus_chars,
                                                                        entry.corpus_chars)
    examples = min(found.examples, entry.examples or found.examples)
    return dataclasses.replace(found, corpus_chars=chars, examples=examples, lacks={**found.lacks, **entry.lacks})


def skip_if_lacking(case: Case, name: str) -> None:
    """Skip the test of the LACKABLE property ``name`` where the pair lacks it, with the reason."""
    import pytest

    assert name in LACKABLE, name
    if name in case.lacks:
        pytest.skip(f"not applicable ({LACKABLE[name]}): {case.lacks[name]}")


@functools.cache
def reference_tokenizer(case: str) -> crayon.Tokenizer:
    return TOKENIZERS[case].build()


@functools.cache
def oracle_of(case: str) -> Oracle:
    return TOKENIZERS[case].oracle(reference_tokenizer(case))

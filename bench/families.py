"""BERT, T5, ALBERT, XLNet, Llama 2 and Mistral-style tokenizer.json files (built here offline: HF tokenizers'
BertWordPieceTokenizer, a SentencePiece unigram model converted by transformers' converters, and a SentencePiece
BPE model with byte fallback written as Llama 2's file (Prepend and Replace normalizers, no pre-tokenizer) and as
Mistral's (Metaspace "first", no split), all trained on the shared corpora) and their normalizers, side by side
with HF tokenizers in one run.

Normalizers: each normalizer of these files (and NFC, NFKC, Lowercase alone) on each corpus, Crayon's
``crayon.formats.hf_normalize`` against HF's ``normalize_str``; both must give the same text. Files:
``crayon.load(path)`` the first time (compiled to a cartridge in a temporary cache folder), reopened in the same
process (median of 20), and HF's ``Tokenizer.from_file``; encode speed, Crayon (jit engine) and HF single
thread, same ids: "documents" encodes each corpus sample with ``encode`` (HF: ``encode(...).ids``), "lines" the
samples' lines as one batch with ``encode_batch`` (HF: the ``.ids`` of each ``encode_batch`` result: the lists a
user gets from both). Each file's speed is also given over cl100k_base's (jit engine) on the same documents and
lines (issue 11 asks for at least half). Times are process CPU time, best of ``--repeat``. Prints tables and writes
bench/results/families.json.

    python -m bench.families [--bytes-per-corpus N] [--repeat N]

Run it from another checkout with ``PYTHONPATH=that/checkout`` to compare normalizer speeds before and after
(normalizers that checkout lacks are left out).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
import warnings
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # HF tokenizers single thread (set before it is imported)

import tokenizers  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CORPORA_DIR = ROOT.parent / "shared" / "corpora"
CORPORA = ("english_web.txt", "multilingual.txt", "enwik8_head.xml", "python_code.py")


def cpu_seconds(function, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        function()
        best = min(best, time.process_time() - start)
    return best


def build_files(folder: Path) -> dict[str, Path]:
    import sentencepiece
    import transformers
    from transformers.convert_slow_tokenizer import convert_slow_tokenizer

    text = (CORPORA_DIR / "big.txt").read_text()[:300_000] + (CORPORA_DIR / "multilingual.txt").read_text()[:60_000]
    training = folder / "train.txt"
    training.write_text("\n".join(line for line in text.splitlines() if line.strip()), encoding="utf-8")
    files = {}
    for name, lowercase in (("bert-uncased", True), ("bert-cased", False)):
        bert = tokenizers.BertWordPieceTokenizer(lowercase=lowercase)
        bert.train([str(training)], vocab_size=8000, show_progress=False)
        files[name] = folder / f"{name}.json"
        bert.save(str(files[name]))
    sentencepiece.SentencePieceTrainer.train(input=str(training), model_prefix=str(folder / "unigram"),
                                             vocab_size=8000, character_coverage=0.9995, minloglevel=2)
    for name, class_name in (("t5", "T5Tokenizer"), ("albert", "AlbertTokenizer"), ("xlnet", "XLNetTokenizer")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            slow = getattr(transformers, class_name)(vocab_file=str(folder / "unigram.model"))
        files[name] = folder / f"{name}.json"
        convert_slow_tokenizer(slow).save(str(files[name]))
    sentencepiece.SentencePieceTrainer.train(input=str(training), model_prefix=str(folder / "bpe"), vocab_size=8000,
                                             model_type="bpe", byte_fallback=True, normalization_rule_name="identity",
                                             character_coverage=0.9995, minloglevel=2)
    files.update(llama_style_files(folder / "bpe.model", folder))
    return files


def llama_style_files(model: Path, folder: Path) -> dict[str, Path]:
    """Llama 2 and Mistral-style tokenizer.json files of a SentencePiece BPE model: its pieces, and as merges every
    split of a piece into two pieces, ordered by the piece's id (as transformers' converter orders them)."""
    import sentencepiece
    from tokenizers import decoders, models, normalizers, pre_tokenizers

    processor = sentencepiece.SentencePieceProcessor(model_file=str(model))
    vocab = {processor.id_to_piece(i): i for i in range(processor.get_piece_size())}
    merges = sorted((token_id, vocab[piece[:cut]], vocab[piece[cut:]], piece[:cut], piece[cut:])
                    for piece, token_id in vocab.items() for cut in range(1, len(piece))
                    if piece[:cut] in vocab and piece[cut:] in vocab)
    files = {}
    for name, normalizer, pre_tokenizer in (
            ("llama2", normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")]), None),
            ("mistral", None, pre_tokenizers.Metaspace(prepend_scheme="first", split=False))):
        tokenizer = tokenizers.Tokenizer(models.BPE(vocab, [(left, right) for *_, left, right in merges],
                                                    unk_token="<unk>", fuse_unk=True, byte_fallback=True))
        if normalizer is not None:
            tokenizer.normalizer = normalizer
        if pre_tokenizer is not None:
            tokenizer.pre_tokenizer = pre_tokenizer
        tokenizer.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                               decoders.Fuse(), decoders.Strip(" ", 1, 0)])
        files[name] = folder / f"{name}.json"
        tokenizer.save(str(files[name]))
    return files


def normalizer_rows(files: dict[str, Path], texts: dict[str, str], repeat: int) -> list[dict]:
    from crayon.formats.hf_normalize import normalizer_from_hf

    specs = {"NFC": {"type": "NFC"}, "NFKC": {"type": "NFKC"}, "Lowercase": {"type": "Lowercase"}}
    for name in ("bert-uncased", "t5", "albert"):
        specs[f"{name} normalizer"] = json.loads(files[name].read_text())["normalizer"]
    rows = []
    for name, spec in specs.items():
        try:
            ours = normalizer_from_hf(spec)
        except Exception as error:  # a checkout without this normalizer
            print(f"  {name}: {type(error).__name__}: {error}")
            continue
        hf = tokenizers.Tokenizer.from_str(json.dumps({
            "version": "1.0", "normalizer": spec, "model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}
        })).normalizer
        for corpus, text in texts.items():
            ours(text)  # first use builds tables
            same = ours(text) == hf.normalize_str(text)
            crayon_s, hf_s = cpu_seconds(lambda: ours(text), repeat), cpu_seconds(lambda: hf.normalize_str(text), repeat)
            mb = len(text.encode()) / 1e6
            rows.append({"normalizer": name, "corpus": corpus, "same_text": same,
                         "crayon_mb_s": round(mb / crayon_s, 2), "hf_mb_s": round(mb / hf_s, 2)})
    return rows


def file_rows(files: dict[str, Path], documents: list[str], repeat: int, cache: Path) -> list[dict]:
    import crayon

    os.environ["CRAYON_PROFILE_DIR"] = str(cache)
    lines = [line for document in documents for line in document.split("\n") if line]
    mb = sum(len(document.encode()) for document in documents) / 1e6
    lines_mb = sum(len(line.encode()) for line in lines) / 1e6
    cl100k = crayon.load("cl100k_base", backend="jit")  # issue 11's yardstick: half its speed on the same text
    cl100k_mb_s = mb / cpu_seconds(lambda: [cl100k.encode(document) for document in documents], repeat)
    cl100k_lines_mb_s = lines_mb / cpu_seconds(lambda: cl100k.encode_batch(lines, num_threads=1), repeat)
    rows = []
    for name, path in files.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            crayon.load(path)
            first_ms = (time.perf_counter() - start) * 1e3
            reopen = []
            for _ in range(20):
                start = time.perf_counter()
                tokenizer = crayon.load(path)
                reopen.append((time.perf_counter() - start) * 1e3)
        start = time.perf_counter()
        hf = tokenizers.Tokenizer.from_file(str(path))
        hf_ms = (time.perf_counter() - start) * 1e3
        start = time.perf_counter()
        ids = [tokenizer.encode(document) for document in documents]
        first_encode_ms = (time.perf_counter() - start) * 1e3

        def hf_documents():
            return [hf.encode(document, add_special_tokens=False).ids for document in documents]

        def hf_lines():
            return [encoding.ids for encoding in hf.encode_batch(lines, add_special_tokens=False)]

        same = ids == hf_documents() and tokenizer.encode_batch(lines, num_threads=1) == hf_lines()
        crayon_s = cpu_seconds(lambda: [tokenizer.encode(document) for document in documents], repeat)
        hf_s = cpu_seconds(hf_documents, repeat)
        crayon_lines_s = cpu_seconds(lambda: tokenizer.encode_batch(lines, num_threads=1), repeat)
        hf_lines_s = cpu_seconds(hf_lines, repeat)
        rows.append({"file": name, "same_ids": same, "first_load_ms": round(first_ms, 1),
                     "reopen_ms_median": round(statistics.median(reopen), 3), "hf_from_file_ms": round(hf_ms, 1),
                     "first_encode_after_reopen_ms": round(first_encode_ms, 1),
                     "crayon_mb_s": round(mb / crayon_s, 2), "hf_mb_s": round(mb / hf_s, 2),
                     "crayon_lines_mb_s": round(lines_mb / crayon_lines_s, 2),
                     "hf_lines_mb_s": round(lines_mb / hf_lines_s, 2),
                     "of_cl100k": round(mb / crayon_s / cl100k_mb_s, 2),
                     "of_cl100k_lines": round(lines_mb / crayon_lines_s / cl100k_lines_mb_s, 2)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bytes-per-corpus", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    texts = {name: (CORPORA_DIR / name).read_text(encoding="utf-8")[: args.bytes_per_corpus] for name in CORPORA}
    with tempfile.TemporaryDirectory() as folder:
        files = build_files(Path(folder))
        normalizers = normalizer_rows(files, texts, args.repeat)
        print(f"{'normalizer':<24}{'corpus':<18}{'same':<6}{'Crayon MB/s':>12}{'HF MB/s':>10}")
        for row in normalizers:
            print(f"{row['normalizer']:<24}{row['corpus']:<18}{str(row['same_text']):<6}"
                  f"{row['crayon_mb_s']:>12}{row['hf_mb_s']:>10}")
        loaded = []
        try:
            loaded = file_rows(files, list(texts.values()), args.repeat, Path(folder) / "cache")
        except Exception as error:  # a checkout that cannot load these files
            print(f"files: {type(error).__name__}: {error}")
        print(f"\n{'file':<14}{'same':<6}{'1st load ms':>12}{'reopen ms':>10}{'HF open ms':>11}{'1st enc ms':>11}"
              f"{'docs MB/s':>10}{'HF':>6}{'x':>6}{'lines MB/s':>11}{'HF':>6}{'x':>6}{'÷cl100k docs/lines':>20}")
        for row in loaded:
            print(f"{row['file']:<14}{str(row['same_ids']):<6}{row['first_load_ms']:>12}{row['reopen_ms_median']:>10}"
                  f"{row['hf_from_file_ms']:>11}{row['first_encode_after_reopen_ms']:>11}{row['crayon_mb_s']:>10}"
                  f"{row['hf_mb_s']:>6}{row['crayon_mb_s'] / row['hf_mb_s']:>6.1f}{row['crayon_lines_mb_s']:>11}"
                  f"{row['hf_lines_mb_s']:>6}{row['crayon_lines_mb_s'] / row['hf_lines_mb_s']:>6.1f}"
                  f"{row['of_cl100k']:>14.2f}/{row['of_cl100k_lines']:.2f}")
    results = ROOT / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    report = {"machine": platform.platform(), "python": platform.python_version(), "args": vars(args),
              "normalizers": normalizers, "files": loaded}
    (results / "families.json").write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()

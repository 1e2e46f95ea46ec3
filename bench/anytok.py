"""Any pre-tokenizer at jit speed: the compiled regex matcher (crayon.jit.regex_vm) against cl100k's hand-written
state machine and against HF tokenizers, on the same text, in one run.

Spans: the hand-written cl100k machine vs the compiled matcher on the cl100k and Llama 3 patterns.
Encode (first sight: the jit engine's caches are emptied before each run): cl100k_base on the fused hand-written
path; a Llama 3-style tokenizer.json (cl100k's vocabulary and merges, Llama 3's Split regex, ByteLevel without
regex) read by Crayon (jit engine: Llama 3's exact regex runs on cl100k's hand-written machine) and, with the
regex written as a group ``(?:...)`` (a custom regex: the compiled pipeline), by Crayon and by HF tokenizers
(single thread); all must give the same ids. The same file on the jit engine with the pre-tokenizer in Python (what ran before the compiler) is
shown too (one run). On the text's lines as one batch, HF's time includes taking each result's ``.ids`` (the
lists Crayon's ``encode_batch`` returns). Encode rows and the models' rows are medians of ``--repeat`` interleaved rounds (each round
times every peer once, in turn); the span rows are the best of ``--repeat``. Times are process CPU time (shared
machines inflate the wall clock; process time counts the worker threads HF and sentencepiece may start). Pin the
process for single-core figures (``taskset -c 0``). Prints a table and writes bench/results/anytok.json.

    python -m bench.anytok [--bytes-per-corpus N] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # HF tokenizers single thread (set before it is imported)

import numpy as np  # noqa: E402
import tokenizers  # noqa: E402

import crayon  # noqa: E402
from crayon.formats.hf_io import read_hf_tokenizer, save_hf_tokenizer  # noqa: E402
from crayon.jit.engine import JitEngine  # noqa: E402
from crayon.jit.pretokenize import PATTERN_IDS, split_spans  # noqa: E402
from crayon.jit.regex_vm import find_spans  # noqa: E402
from crayon.patterns import LLAMA3, PATTERNS  # noqa: E402
from crayon.reference.regex_vm import compile_regex  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CORPORA_DIR = ROOT.parent / "shared" / "corpora"
RESULTS = ROOT / "bench" / "results" / "anytok.json"
GROUPED_LLAMA3 = f"(?:{LLAMA3})"  # the same regex in a form the hand-written machines do not know: compiled


def best_cpu(function, repeat: int, before=None) -> tuple[float, object]:
    """Fastest process CPU time (all threads) of ``repeat`` calls (``before`` runs untimed before each) and the
    last result."""
    best = float("inf")
    result = None
    for _ in range(repeat):
        if before is not None:
            before()
        start = time.process_time()
        result = function()
        best = min(best, time.process_time() - start)
    return best, result


def interleaved(peers: dict, repeat: int) -> tuple[dict[str, float], dict[str, object]]:
    """Median process CPU seconds of each peer over ``repeat`` rounds, each round calling every peer once in turn
    (a peer is ``call`` or ``(call, before)``, ``before`` run untimed first); and each peer's last result."""
    times: dict[str, list[float]] = {name: [] for name in peers}
    results = {}
    for _ in range(repeat):
        for name, peer in peers.items():
            call, before = peer if isinstance(peer, tuple) else (peer, None)
            if before is not None:
                before()
            results.pop(name, None)  # the last round's result is freed here, not in the timed call
            start = time.process_time()
            results[name] = call()
            times[name].append(time.process_time() - start)
    return {name: statistics.median(values) for name, values in times.items()}, results


def llama3_style_json(folder: Path, pattern: str = LLAMA3) -> Path:
    """cl100k_base's vocabulary as a tokenizer.json with Llama 3's pre-tokenizer, as Llama 3's file has it (or with
    another ``pattern`` in its Split)."""
    path = folder / f"tokenizer-{len(pattern)}.json"
    save_hf_tokenizer(crayon.load("cl100k_base", backend="reference"), path)
    config = json.loads(path.read_text(encoding="utf-8"))
    config["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
    ]}
    path.write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
    return path


def bench_vocab_models(text: str, repeat: int) -> list[dict]:
    """WordPiece, Unigram and BPE over characters: Crayon jit vs HF tokenizers and sentencepiece, all single
    thread, on the text's lines as one batch, with models trained here on the first 300 kB of the text (median
    process CPU time of interleaved rounds). Crayon is timed twice a round: with the piece caches its earlier
    rounds filled (as a process encoding batch after batch runs), and at first sight (the caches emptied first). Lines, not the whole text as one input: on inputs of ~100 kB and more SentencePiece's unigram
    path scores (single precision, summed over the whole input) round so coarsely that ties break by rounding."""
    import sentencepiece
    from tokenizers import models, normalizers, pre_tokenizers, trainers

    lines = [text[i : i + 2000] for i in range(0, min(len(text), 300_000), 2000)]
    batch = [line for line in text.split("\n") if line]
    megabytes = len(text.encode("utf-8")) / 1e6
    rows = []
    print(f"{'model':<45} {'crayon jit MB/s':>15} {'first sight':>11} {'oracle MB/s':>12} {'speedup':>8} "
          f"{'(first)':>7}  ids")
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        oracles = {}
        wordpiece = tokenizers.Tokenizer(models.WordPiece(unk_token="[UNK]"))
        wordpiece.normalizer = normalizers.Lowercase()
        wordpiece.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                           pre_tokenizers.Punctuation()])
        wordpiece.train_from_iterator(lines, trainers.WordPieceTrainer(vocab_size=8000, special_tokens=["[UNK]"],
                                                                       show_progress=False))
        wordpiece.save(str(folder / "wordpiece.json"))
        oracles["WordPiece tokenizer.json vs HF"] = (folder / "wordpiece.json", lambda batch: [
            encoding.ids for encoding in wordpiece.encode_batch(batch, add_special_tokens=False)])
        (folder / "train.txt").write_text("".join(lines), encoding="utf-8")
        for rule in ("identity", "nmt_nfkc"):  # nmt_nfkc (the default) has a character map
            for kind in ("unigram", "bpe"):
                prefix = str(folder / f"{kind}-{rule}")
                sentencepiece.SentencePieceTrainer.train(
                    input=str(folder / "train.txt"), model_prefix=prefix, vocab_size=4000, model_type=kind,
                    normalization_rule_name=rule, byte_fallback=True, character_coverage=0.9995, minloglevel=2)
                processor = sentencepiece.SentencePieceProcessor(model_file=prefix + ".model")
                oracles[f"SentencePiece {kind} .model ({rule}) vs spm"] = (
                    Path(prefix + ".model"), lambda batch, processor=processor: processor.encode(batch, num_threads=1))
        for what, (path, oracle) in oracles.items():
            tok = crayon.load(path, backend="jit")
            tok.encode_ordinary(text[:1000])
            encode = lambda tok=tok: tok.encode_ordinary_batch(batch, num_threads=1)  # noqa: E731
            seconds, results = interleaved({"crayon": encode, "first sight": (encode, tok.engine.clear_caches),
                                             "oracle": lambda: oracle(batch)}, repeat)
            crayon_seconds, oracle_seconds = seconds["crayon"], seconds["oracle"]
            same = results["crayon"] == results["first sight"] == [list(line_ids) for line_ids in results["oracle"]]
            rows.append({"model": what, "crayon_mb_per_s": megabytes / crayon_seconds,
                         "crayon_first_sight_mb_per_s": megabytes / seconds["first sight"],
                         "oracle_mb_per_s": megabytes / oracle_seconds, "same_ids": same})
            print(f"{what:<45} {megabytes / crayon_seconds:15.1f} {megabytes / seconds['first sight']:11.1f} "
                  f"{megabytes / oracle_seconds:12.1f} {oracle_seconds / crayon_seconds:7.1f}x "
                  f"{oracle_seconds / seconds['first sight']:7.1f}x  {'same' if same else 'DIFFERENT'}")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bytes-per-corpus", type=int, default=500_000, help="leading bytes of each corpus file")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    corpora = sorted(path for path in CORPORA_DIR.glob("*") if path.suffix != ".md")
    if not corpora:
        raise SystemExit(f"no corpora in {CORPORA_DIR}")
    text = "".join(path.read_bytes()[: args.bytes_per_corpus].decode("utf-8", "ignore") for path in corpora)
    data = np.frombuffer(text.encode("utf-8"), np.uint8)
    megabytes = len(data) / 1e6
    print(f"text: the first {args.bytes_per_corpus} bytes of {len(corpora)} corpus files, {megabytes:.2f} MB; "
          f"process CPU time: spans best of {args.repeat}, encode and models median of {args.repeat} interleaved\n")

    # first: after the rest of this script, sentencepiece's unigram encode was measured at half its speed in a
    # fresh process (8.6 against 16.5-18 MB/s), which flattered Crayon's ratio
    model_rows = bench_vocab_models(text, args.repeat)
    rows = []

    def row(kind: str, what: str, seconds: float, spans: int | None = None) -> None:
        rows.append({"kind": kind, "what": what, "seconds": seconds, "mb_per_s": megabytes / seconds,
                     "mspans_per_s": None if spans is None else spans / seconds / 1e6})
        spans_text = "" if spans is None else f"{spans / seconds / 1e6:10.2f}"
        print(f"{kind:<7} {what:<58} {megabytes / seconds:9.1f} {spans_text:>10}")

    print(f"{'':<7} {'':<58} {'MB/s':>9} {'Mspans/s':>10}")
    split_spans(data[:1000], PATTERN_IDS["cl100k_base"])
    seconds, ends = best_cpu(lambda: split_spans(data, PATTERN_IDS["cl100k_base"]), args.repeat)
    row("spans", "cl100k hand-written machine (crayon.jit.pretokenize)", seconds, len(ends))
    for name, pattern in (("cl100k", PATTERNS["cl100k_base"]), ("Llama 3", LLAMA3)):
        program = compile_regex(pattern)
        find_spans(data[:1000], program)
        seconds, (ends, is_match) = best_cpu(lambda: find_spans(data, program), args.repeat)
        row("spans", f"{name} pattern compiled (crayon.jit.regex_vm)", seconds, len(ends))

    cl100k = crayon.load("cl100k_base", backend="jit")
    cl100k.encode_ordinary(text[:1000])
    lines = [line for line in text.split("\n") if line]

    with tempfile.TemporaryDirectory() as folder:
        llama3 = crayon.Tokenizer.from_spec(read_hf_tokenizer(llama3_style_json(Path(folder))), backend="jit")
        path = llama3_style_json(Path(folder), GROUPED_LLAMA3)
        compiled = crayon.Tokenizer.from_spec(read_hf_tokenizer(path), backend="jit")
        if llama3.engine.pattern_id is None or compiled.engine.compiled_splits is None:
            raise SystemExit("the Llama 3-style pipeline did not run on the hand-written machine, or its grouped "
                             "form did not compile")
        llama3.encode_ordinary(text[:1000])
        compiled.encode_ordinary(text[:1000])
        hf = tokenizers.Tokenizer.from_file(str(path))
        seconds, results = interleaved({
            "cl100k": (lambda: cl100k.encode_ordinary(text), cl100k.engine.clear_caches),
            "llama3": (lambda: llama3.encode_ordinary(text), llama3.engine.clear_caches),
            "compiled": (lambda: compiled.encode_ordinary(text), compiled.engine.clear_caches),
            "hf": lambda: hf.encode(text, add_special_tokens=False),
            "cl100k lines": (lambda: cl100k.encode_ordinary_batch(lines, num_threads=1), cl100k.engine.clear_caches),
            "llama3 lines": (lambda: llama3.encode_ordinary_batch(lines, num_threads=1), llama3.engine.clear_caches),
            "compiled lines": (lambda: compiled.encode_ordinary_batch(lines, num_threads=1),
                               compiled.engine.clear_caches),
            "hf lines": lambda: [encoding.ids for encoding in hf.encode_batch(lines, add_special_tokens=False)],
        }, args.repeat)
        crayon_ids, encoding = results["compiled"], results["hf"]
        crayon_lines, hf_lines = results["compiled lines"], results["hf lines"]
        same_llama3 = results["llama3"] == crayon_ids and results["llama3 lines"] == crayon_lines
        row("encode", "cl100k_base, hand-written machine, fused kernel", seconds["cl100k"])
        row("encode", "Llama 3-style tokenizer.json, crayon jit (hand-written machine)", seconds["llama3"])
        row("encode", "its regex written as a group, crayon jit, compiled regex", seconds["compiled"])

        python_split = JitEngine(compiled, tables=compiled.engine.tables)
        python_split.compiled_splits = None  # the pre-tokenizer in Python, as before the compiler
        python_seconds, python_ids = best_cpu(lambda: python_split.encode_ordinary(text), 1,
                                              python_split.clear_caches)
        row("encode", "the same, crayon jit, pre-tokenizer in Python", python_seconds)
        row("encode", "the same, HF tokenizers (single thread)", seconds["hf"])
        row("lines", "cl100k_base on the text's lines as a batch, crayon jit", seconds["cl100k lines"])
        row("lines", "Llama 3-style, the lines as a batch, crayon jit (hand-written)", seconds["llama3 lines"])
        row("lines", "the same on the text's lines as a batch, crayon jit", seconds["compiled lines"])
        row("lines", "the same on the text's lines as a batch, HF tokenizers", seconds["hf lines"])
    same_ids = crayon_ids == encoding.ids == python_ids and crayon_lines == hf_lines and same_llama3
    print(f"\nids identical (crayon hand-written, compiled, Python pre-tokenizer, HF): {same_ids}\n")
    by_what = {r["what"]: r["mb_per_s"] for r in rows}
    compiled_speed = by_what["its regex written as a group, crayon jit, compiled regex"]
    ratios = {
        "llama3_vs_cl100k_encode": by_what["Llama 3-style tokenizer.json, crayon jit (hand-written machine)"]
        / by_what["cl100k_base, hand-written machine, fused kernel"],
        "llama3_vs_hf_lines": by_what["Llama 3-style, the lines as a batch, crayon jit (hand-written)"]
        / by_what["the same on the text's lines as a batch, HF tokenizers"],
        "compiled_vs_cl100k_encode": compiled_speed / by_what["cl100k_base, hand-written machine, fused kernel"],
        "compiled_vs_hf_encode": compiled_speed / by_what["the same, HF tokenizers (single thread)"],
        "compiled_vs_hf_lines": by_what["the same on the text's lines as a batch, crayon jit"]
        / by_what["the same on the text's lines as a batch, HF tokenizers"],
        "compiled_vs_cl100k_lines": by_what["the same on the text's lines as a batch, crayon jit"]
        / by_what["cl100k_base on the text's lines as a batch, crayon jit"],
        "compiled_vs_hand_spans_cl100k": by_what["cl100k pattern compiled (crayon.jit.regex_vm)"]
        / by_what["cl100k hand-written machine (crayon.jit.pretokenize)"],
    }
    for name, ratio in ratios.items():
        print(f"{name}: {ratio:.2f}x")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "rows": rows, "ratios": ratios, "same_ids": same_ids, "megabytes": megabytes, "models": model_rows,
        "bytes_per_corpus": args.bytes_per_corpus, "repeat": args.repeat, "machine": platform.platform(),
        "processor": platform.processor(), "tokenizers": tokenizers.__version__,
    }, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    if not same_ids or not all(row["same_ids"] for row in model_rows):
        raise SystemExit("the ids differ")


if __name__ == "__main__":
    main()

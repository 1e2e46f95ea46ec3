"""Greedy longest match, end to end and kernel alone, per corpus, beside tiktoken's exact BPE encode.

End to end (issue 15's row): ``crayon.load("lite", algorithm="longest").encode(text)``, the public call, on the
English corpora, the process pinned to one CPU, M tokens/s of thread CPU time (median of ``--rounds`` rounds, each
round a fresh process), with where the time goes: UTF-8 encoding, the kernel (``engine.encode_ordinary_array``
less the UTF-8 encoding) and the Python list (``engine.as_list`` of the ids). ``--baseline DIR`` measures the
crayon package of another checkout (``git worktree add /tmp/base <commit>``) in the same run, its rounds
interleaved with this checkout's, and prints both and their ratio; ``--before JSON`` compares with the
``end_to_end`` figures of an earlier run's JSON instead.

Kernel alone: over cl100k_base's vocabulary, spans from the jit cl100k pre-tokenizer; "model" times only the
longest-match kernel on those spans, "+spans" adds the pre-tokenizer, like tiktoken's encode_ordinary which includes
its regex. Also times the ASCII fast path of ``encode_spans``. Best of several runs, thread CPU time (wall clock in
the JSON). Longest match is NOT BPE: it gives other (usually more) tokens, so the speeds compare different outputs.

Prints the tables and writes bench/results/longest.json.

    python -m bench.longest [--repeat N] [--rounds N] [--baseline DIR | --before JSON]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import tiktoken

from bench.pretokenize import best_times
from crayon.jit.dat import compile_dat
from crayon.jit.longest import encode_spans
from crayon.jit.pretokenize import span_ends
from crayon.profiles import OPENAI_ENCODINGS, find_vocabulary_file
from crayon.reference.longest import LongestMatchModel
from crayon.formats.tiktoken_io import load_tiktoken_bpe

ROOT = Path(__file__).resolve().parents[1]
CORPORA_DIR = ROOT.parent / "shared" / "corpora"
RESULTS = ROOT / "bench" / "results" / "longest.json"
NAME = "cl100k_base"
ENGLISH = ("big.txt", "english_web.txt", "shakespeare.txt")
TARGET = 28.0  # M tokens/s: issue 15's target, 1.5x the seeds' 18.4

# One round of the end-to-end measurement in a fresh process, with the crayon package of sys.argv[1]; prints JSON.
# It uses only what every version since the fused kernel has: crayon.load, encode, engine.encode_ordinary_array and
# engine.as_list, so a baseline checkout runs it unchanged.
END_TO_END_ROUND = r"""
import gc, json, os, statistics, sys, time
sys.path.insert(0, sys.argv[1])
import crayon
from pathlib import Path

os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:1])
tok = crayon.load("lite", algorithm="longest")
engine = tok.engine
found = {}
for name in json.loads(sys.argv[3]):
    text = (Path(sys.argv[2]) / name).read_text(encoding="utf-8")
    ids = engine.encode_ordinary_array(text)
    tok.encode(text)
    calls = {"public": lambda: tok.encode(text), "utf8": lambda: text.encode("utf-8"),
             "array": lambda: engine.encode_ordinary_array(text), "list": lambda: engine.as_list(ids)}
    seconds = {key: [] for key in calls}
    for _ in range(5):
        for key, call in calls.items():
            gc.collect()
            start = time.thread_time()
            call()
            seconds[key].append(time.thread_time() - start)
    found[name] = {"tokens": len(ids), "crayon": crayon.__file__,
                   **{key: statistics.median(times) for key, times in seconds.items()}}
print(json.dumps(found))
"""


def end_to_end_round(source: Path) -> dict:
    """One round of ``END_TO_END_ROUND`` in a fresh process importing crayon from ``source``."""
    done = subprocess.run([sys.executable, "-c", END_TO_END_ROUND, str(source), str(CORPORA_DIR), json.dumps(ENGLISH)],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(source)})
    if done.returncode:
        raise SystemExit(f"the end-to-end round with {source} failed:\n{done.stderr[-3000:]}")
    found = json.loads(done.stdout)
    if Path(next(iter(found.values()))["crayon"]).resolve().parents[1] != source.resolve():
        raise SystemExit(f"the round meant for {source} imported {next(iter(found.values()))['crayon']}")
    return found


def end_to_end(sources: dict[str, Path], rounds: int) -> dict[str, dict]:
    """Per source and corpus: tokens, M tokens/s of the public call, and the ns per token of each part (medians
    over the rounds, the sources' rounds interleaved)."""
    seen: dict[str, list[dict]] = {label: [] for label in sources}
    for _ in range(rounds):
        for label, source in sources.items():
            seen[label].append(end_to_end_round(source))
    results = {}
    for label, found in seen.items():
        rows = {}
        for name in ENGLISH:
            tokens = found[0][name]["tokens"]
            median = {key: statistics.median(one[name][key] for one in found)
                      for key in ("public", "utf8", "array", "list")}
            rows[name] = {"tokens": tokens, "m_tokens_per_s": tokens / median["public"] / 1e6,
                          "ns_per_token": {"public": median["public"] / tokens * 1e9,
                                           "utf8": median["utf8"] / tokens * 1e9,
                                           "kernel": (median["array"] - median["utf8"]) / tokens * 1e9,
                                           "list": median["list"] / tokens * 1e9}}
        results[label] = rows
    counts = {label: [rows[name]["tokens"] for name in ENGLISH] for label, rows in results.items()}
    if len({tuple(count) for count in counts.values()}) > 1:
        raise SystemExit(f"the sources give different numbers of tokens: {counts}")
    return results


def print_end_to_end(results: dict[str, dict], before: dict | None) -> None:
    print('end to end: crayon.load("lite", algorithm="longest").encode(text), one CPU, thread CPU time, medians')
    print(f"{'corpus':<16} {'source':<9} {'M tok/s':>8} {'of 28':>6} {'ns/token':>9} {'utf8':>6} {'kernel':>7} {'list':>6}")
    for name in ENGLISH:
        for label, rows in [*results.items(), *([("before", before)] if before else [])]:
            row = rows[name]
            parts = row["ns_per_token"]
            print(f"{name:<16} {label:<9} {row['m_tokens_per_s']:8.1f} {row['m_tokens_per_s'] / TARGET:6.2f}"
                  f" {parts['public']:9.1f} {parts['utf8']:6.1f} {parts['kernel']:7.1f} {parts['list']:6.1f}")
        if len(results) + bool(before) > 1:
            after, *others = [rows[name]["m_tokens_per_s"] for rows in [*results.values(), *([before] if before else [])]]
            print(f"{'':<16} {'after / before':<26} {after / others[0]:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5, help="end-to-end rounds (fresh processes) per source")
    parser.add_argument("--baseline", type=Path, help="a checkout whose crayon package is measured beside this one")
    parser.add_argument("--before", type=Path, help="a JSON of an earlier run to compare the end-to-end rows with")
    parser.add_argument("--end-to-end-only", action="store_true", help="skip the kernel-alone table")
    args = parser.parse_args()
    sources = {"this": ROOT, **({"baseline": args.baseline} if args.baseline else {})}
    before = json.loads(args.before.read_text())["end_to_end"]["this"] if args.before else None
    end_to_end_results = end_to_end(sources, args.rounds)
    print_end_to_end(end_to_end_results, before)
    if args.end_to_end_only:
        write_report({"end_to_end": end_to_end_results, "end_to_end_sources": {k: str(v) for k, v in sources.items()}})
        return
    print()
    corpora = sorted(path for path in CORPORA_DIR.glob("*") if path.suffix != ".md")
    if not corpora:
        raise SystemExit(f"no corpora in {CORPORA_DIR}")

    ranks = load_tiktoken_bpe(find_vocabulary_file(NAME))
    encoding = OPENAI_ENCODINGS[NAME]
    reference = tiktoken.Encoding(
        NAME, pat_str=encoding.pattern, mergeable_ranks=ranks, special_tokens=encoding.special_tokens
    )
    first_reserved = reference.n_vocab
    model = LongestMatchModel({rank: token for token, rank in ranks.items()},
                              *compile_dat(list(ranks), list(ranks.values())), first_reserved)
    dat, fallback = (model.base, model.check, model.values), model.fallback
    warm_up = np.frombuffer(b"warm up", np.uint8)
    for fast in (False, True):
        encode_spans(warm_up, span_ends(b"warm up", NAME), *dat, fallback, ascii_fast_path=fast)

    rows = []
    print("longest-match, not BPE: its tokens differ from tiktoken's; speeds compare different outputs")
    print(f"{'corpus':<18} {'MB':>5} {'model MB/s':>10} {'M tok/s':>8} {'+spans MB/s':>11} {'ascii8 MB/s':>11}"
          f" {'tiktoken MB/s':>13} {'M tok/s':>8} {'tokens vs BPE':>13}")
    for path in corpora:
        data = path.read_bytes()
        text = data.decode("utf-8")
        array = np.frombuffer(data, np.uint8)
        megabytes = len(data) / 1e6
        ends = span_ends(data, NAME)
        model_cpu, model_wall, ids = best_times(lambda: encode_spans(array, ends, *dat, fallback), args.repeat)
        fast_cpu, _, fast_ids = best_times(
            lambda: encode_spans(array, ends, *dat, fallback, ascii_fast_path=True), args.repeat
        )
        full_cpu, _, _ = best_times(lambda: encode_spans(array, span_ends(data, NAME), *dat, fallback), args.repeat)
        tiktoken_cpu, tiktoken_wall, bpe_ids = best_times(lambda: reference.encode_ordinary(text), 2)
        if not np.array_equal(ids, fast_ids) or b"".join(map(model.token_bytes.__getitem__, ids.tolist())) != data:
            raise SystemExit(f"longest match failed its round trip on {path.name}")
        row = {
            "corpus": path.name,
            "bytes": len(data),
            "tokens": int(len(ids)),
            "bpe_tokens": len(bpe_ids),
            "model_mb_per_s": megabytes / model_cpu,
            "model_tokens_per_s": len(ids) / model_cpu,
            "model_wall_mb_per_s": megabytes / model_wall,
            "with_spans_mb_per_s": megabytes / full_cpu,
            "ascii_fast_path_mb_per_s": megabytes / fast_cpu,
            "tiktoken_mb_per_s": megabytes / tiktoken_cpu,
            "tiktoken_tokens_per_s": len(bpe_ids) / tiktoken_cpu,
            "tiktoken_wall_mb_per_s": megabytes / tiktoken_wall,
        }
        rows.append(row)
        print(
            f"{path.name:<18} {megabytes:5.2f} {row['model_mb_per_s']:10.1f} {row['model_tokens_per_s'] / 1e6:8.2f}"
            f" {row['with_spans_mb_per_s']:11.1f} {row['ascii_fast_path_mb_per_s']:11.1f}"
            f" {row['tiktoken_mb_per_s']:13.1f} {row['tiktoken_tokens_per_s'] / 1e6:8.2f}"
            f" {len(ids) / len(bpe_ids) - 1:+12.1%}"
        )

    print("round trips lossless on every corpus")
    write_report({"algorithm": "greedy longest match, not BPE", "vocabulary": NAME, "repeat": args.repeat,
                  "timer": "thread CPU time (wall in *_wall_*)", "results": rows, "end_to_end": end_to_end_results,
                  "end_to_end_sources": {k: str(v) for k, v in sources.items()}})


def write_report(report: dict) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    machine = {"processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
               "load_average": os.getloadavg(), "python": platform.python_version()}
    RESULTS.write_text(json.dumps({"machine": machine, **report}, indent=2))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()

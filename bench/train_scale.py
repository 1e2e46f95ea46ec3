"""BPE training at scale: crayon's jit trainer vs HF tokenizers' BpeTrainer on 12, 50 and 100 MB corpora.

The corpora are built from the shared corpora (13.7 MB) by concatenating shuffled documents:
- a document is a line of english_web.txt and multilingual.txt (one sentence a line), and a paragraph of
  the other files (text up to and including a run of blank lines, i.e. it ends in two or more newlines);
  a document not ending in a newline (the end of a file) gets one;
- one stream, seeded: random.Random(SEED) shuffles all documents, writes them in that order, and shuffles
  again for each further pass; the corpus of N MB is the stream's shortest prefix of whole documents
  holding at least N * 10**6 bytes, so the smaller corpora are prefixes of the larger ones. Above 13.7 MB
  documents repeat, so the number of distinct words stops growing with the size.
They are written to --corpus-dir (outside the repository) and their sizes and sha256 printed.

Each size is trained at --vocab-size with the helpers of ``bench.train`` (same pattern setup): crayon's
``train_bpe_jit`` on the file path (streamed in chunks, never read whole) and HF's ``Tokenizer.train`` on the
file, each in a fresh child process, alternating. Reports wall and CPU seconds, peak RSS of the child
(``getrusage``, and its RSS before training), MB/s, wall and CPU seconds per MB and crayon / HF. A second
pass of crayon's word counting (after its peak RSS is taken) gives the number of distinct words and the counting time.
Prints a table and the load average, writes bench/results/train_scale.json. No assertions: a benchmark.

    python -m bench.train_scale [--sizes 12 50 100] [--repeat N] [--vocab-size V] [--timeout S]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import re
import statistics
import subprocess
import time
from pathlib import Path

from bench.train import ROOT, SPECIAL, corpus_files, run_child, train_crayon, train_hf

RESULTS = ROOT / "bench" / "results" / "train_scale.json"
SEED = 5
LINE_DOCUMENT_FILES = ("english_web.txt", "multilingual.txt")
AFTER_EACH_LINE = re.compile(r"(?<=\n)")
AFTER_BLANK_LINES = re.compile(r"(?<=\n\n)(?=[^\n])")


def documents(path: Path) -> list[str]:
    """The documents of a shared corpus file: its lines or its paragraphs, each ending in a newline."""
    text = path.read_text(encoding="utf-8")
    boundary = AFTER_EACH_LINE if path.name in LINE_DOCUMENT_FILES else AFTER_BLANK_LINES
    return [piece if piece.endswith("\n") else piece + "\n" for piece in boundary.split(text) if piece]


def build_corpora(sizes_mb: list[int], directory: Path) -> list[dict]:
    """Write corpus_<N>mb.txt for each size N (see the module docstring); describe each file."""
    pool = [document.encode("utf-8") for path in corpus_files() for document in documents(path)]
    targets = sorted(sizes_mb)
    outputs = {size: open(directory / f"corpus_{size}mb.txt", "wb") for size in targets}
    written = dict.fromkeys(targets, 0)
    hashes = {size: hashlib.sha256() for size in targets}
    rng = random.Random(SEED)
    passes = 0
    try:
        while written[targets[-1]] < targets[-1] * 10**6:
            order = list(range(len(pool)))
            rng.shuffle(order)
            passes += 1
            for index in order:
                data = pool[index]
                open_sizes = [size for size in targets if written[size] < size * 10**6]
                if not open_sizes:
                    break
                for size in open_sizes:
                    outputs[size].write(data)
                    hashes[size].update(data)
                    written[size] += len(data)
    finally:
        for output in outputs.values():
            output.close()
    return [
        {
            "size_mb": size,
            "path": str(directory / f"corpus_{size}mb.txt"),
            "bytes": written[size],
            "sha256": hashes[size].hexdigest(),
            "documents_in_pool": len(pool),
            "pool_bytes": sum(map(len, pool)),
            "shuffled_passes_for_largest": passes,
        }
        for size in targets
    ]


def run_crayon_scale(path: Path, vocab_size: int) -> dict:
    from crayon.jit.cores import available_cores
    from crayon.jit.train import count_words_jit

    measurements, _ = train_crayon([path], vocab_size)
    began = time.perf_counter()
    word_bytes, _, counts = count_words_jit([path], "cl100k_base", [SPECIAL], workers=available_cores())
    return {
        **measurements,
        "count_seconds": time.perf_counter() - began,
        "distinct_words": len(counts),
        "distinct_word_bytes": len(word_bytes),
        "words": int(counts.sum()),
    }


def run_hf_scale(path: Path, vocab_size: int) -> dict:
    measurements, _ = train_hf([path], vocab_size)
    return measurements


TRAINERS = {"crayon jit": run_crayon_scale, "HF tokenizers": run_hf_scale}


def measure(trainer: str, path: Path, vocab_size: int, timeout: float) -> dict:
    """One training run in a fresh child process; {"timed_out": True} after ``timeout`` seconds."""
    arguments = ["--child", trainer, "--corpus", str(path), "--vocab-size", str(vocab_size)]
    try:
        return run_child("bench.train_scale", arguments, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"timed_out": True, "timeout_seconds": timeout}


def summarize(trainer: str, corpus: dict, runs: list[dict]) -> dict:
    finished = [run for run in runs if not run.get("timed_out")]
    row = {"trainer": trainer, "size_mb": corpus["size_mb"], "corpus_bytes": corpus["bytes"], "runs": runs}
    if not finished:
        return row
    seconds = statistics.median(run["seconds"] for run in finished)
    megabytes = corpus["bytes"] / 1e6
    row.update(
        median_seconds=seconds,
        median_cpu_seconds=statistics.median(run["cpu_seconds"] for run in finished),
        peak_rss_mb=max(run["peak_rss_mb"] for run in finished),
        rss_before_training_mb=max(run["rss_before_training_mb"] for run in finished),
        mb_per_s=megabytes / seconds,
        seconds_per_mb=seconds / megabytes,
        cpu_seconds_per_mb=statistics.median(run["cpu_seconds"] for run in finished) / megabytes,
        vocab=finished[0]["vocab"],
    )
    if "distinct_words" in finished[0]:
        row.update(
            {key: finished[0][key] for key in ("distinct_words", "distinct_word_bytes", "words")},
            median_count_seconds=statistics.median(run["count_seconds"] for run in finished),
        )
    return row


def load_average() -> list[float]:
    return [round(load, 2) for load in os.getloadavg()]


def print_table(rows: list[dict]) -> None:
    print(f"{'MB':>6} {'trainer':<14} {'wall s':>7} {'CPU s':>6} {'MB/s':>6} {'s/MB':>6} {'CPU s/MB':>8} "
          f"{'peak RSS':>9} {'RSS pre':>8} {'distinct words':>15} {'count s':>8}")
    for row in rows:
        megabytes = row["corpus_bytes"] / 1e6
        if "median_seconds" not in row:
            print(f"{megabytes:6.1f} {row['trainer']:<14} timed out after {row['runs'][0]['timeout_seconds']:.0f} s")
            continue
        words = f"{row['distinct_words']:15,d}" if "distinct_words" in row else f"{'':15}"
        count = f"{row['median_count_seconds']:8.2f}" if "median_count_seconds" in row else f"{'':8}"
        print(
            f"{megabytes:6.1f} {row['trainer']:<14} {row['median_seconds']:7.2f} {row['median_cpu_seconds']:6.1f} "
            f"{row['mb_per_s']:6.2f} {row['seconds_per_mb']:6.3f} {row['cpu_seconds_per_mb']:8.3f} "
            f"{row['peak_rss_mb']:9.0f} {row['rss_before_training_mb']:8.0f} {words} {count}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[12, 50, 100], help="corpus sizes in MB (10**6 B)")
    parser.add_argument("--repeat", type=int, default=2, help="runs per trainer and size (the median is reported)")
    parser.add_argument("--vocab-size", type=int, default=32768)
    parser.add_argument("--timeout", type=float, default=480, help="seconds before a training run is abandoned")
    parser.add_argument("--corpus-dir", type=Path, default=Path("/tmp/crayon_scale"))
    parser.add_argument("--child", choices=list(TRAINERS), help=argparse.SUPPRESS)
    parser.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(TRAINERS[args.child](args.corpus, args.vocab_size)))
        return

    args.corpus_dir.mkdir(parents=True, exist_ok=True)
    corpora = build_corpora(args.sizes, args.corpus_dir)
    pool = corpora[0]
    print(f"corpora: documents of {', '.join(path.name for path in corpus_files())} (lines of "
          f"{' and '.join(LINE_DOCUMENT_FILES)}, blank-line paragraphs of the others; {pool['documents_in_pool']} "
          f"documents, {pool['pool_bytes']:,} bytes), shuffled with random.Random({SEED}), "
          f"{pool['shuffled_passes_for_largest']} passes for the largest")
    for corpus in corpora:
        print(f"  {corpus['path']}: {corpus['bytes']:,} bytes, sha256 {corpus['sha256']}")

    load_before = load_average()
    print(f"load average before: {load_before}")
    run_child("bench.train", ["--child", "crayon jit", "--vocab-size", "300"])  # compile and cache the kernels
    rows = []
    for corpus in corpora:
        runs: dict[str, list[dict]] = {trainer: [] for trainer in TRAINERS}
        for _ in range(args.repeat):  # alternate, so both see the same machine load
            for trainer in TRAINERS:
                if not any(run.get("timed_out") for run in runs[trainer]):
                    runs[trainer].append(measure(trainer, Path(corpus["path"]), args.vocab_size, args.timeout))
        rows.extend(summarize(trainer, corpus, trainer_runs) for trainer, trainer_runs in runs.items())
        print_table(rows[-len(TRAINERS):])
    load_after = load_average()

    print(f"\nvocab {args.vocab_size}, {os.cpu_count()} cores, medians of {args.repeat}; load average before "
          f"{load_before}, after {load_after}; peak RSS and RSS before training (pre) in MB; count s: crayon's "
          f"word counting alone (second pass)")
    print_table(rows)
    ratios = {}
    for corpus in corpora:
        crayon, hf = (row for row in rows if row["size_mb"] == corpus["size_mb"])
        if "median_seconds" in crayon and "median_seconds" in hf:
            ratios[corpus["size_mb"]] = crayon["median_seconds"] / hf["median_seconds"]
    print("crayon / HF wall time: " + ", ".join(f"{size} MB {ratio:.2f}" for size, ratio in ratios.items()))

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    machine = {"processor": platform.processor() or platform.machine(), "cores": os.cpu_count(),
               "python": platform.python_version()}
    RESULTS.write_text(json.dumps({
        "machine": machine, "load_average_before": load_before, "load_average_after": load_after,
        "vocab_size": args.vocab_size, "repeat": args.repeat, "seed": SEED, "corpora": corpora,
        "crayon_over_hf": ratios, "results": rows,
    }, indent=2))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()

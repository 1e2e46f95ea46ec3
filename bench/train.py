"""BPE training time: crayon's jit trainer vs HF tokenizers' BpeTrainer on the shared corpora, same run.

Both train a byte-level BPE vocabulary of --vocab-size tokens (special token "<|endoftext|>" included) with the
cl100k_base pattern: crayon with ``train_bpe_jit`` (files streamed, words counted by one thread per core),
HF with a Split(cl100k regex, isolated) + ByteLevel(use_regex=False) pre-tokenizer and ``Tokenizer.train``
on the same files (it reads them line by line and trains with all cores). Every run is a fresh child process;
peak RSS is the child's right after training plus that of its largest worker process. crayon's Numba kernels
are compiled and cached before timing; loading them from the cache in a new process is timed apart, as is
crayon's word counting (a second pass). Also reports each vocabulary's bytes per token on the training
corpora. Prints a table and writes bench/results/train.json.

    python -m bench.train [--repeat N] [--vocab-size V]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from crayon.reference.train import TrainResult

ROOT = Path(__file__).resolve().parents[1]
CORPORA_DIR = ROOT.parent / "shared" / "corpora"
RESULTS = ROOT / "bench" / "results" / "train.json"
SPECIAL = "<|endoftext|>"


def corpus_files() -> list[Path]:
    files = sorted(path for path in CORPORA_DIR.glob("*") if path.suffix != ".md")
    if not files:
        raise SystemExit(f"no corpora in {CORPORA_DIR}")
    return files


def cpu_seconds() -> float:
    """CPU time (user + system) used so far by this process, its threads and its finished children."""
    usages = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(usage.ru_utime + usage.ru_stime for usage in usages)


def peak_rss_megabytes() -> float:
    """Peak resident memory of this process and its finished children (crayon's counting workers)."""
    return sum(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)) / 1024


def train_crayon(files: list[Path], vocab_size: int) -> tuple[dict, TrainResult]:
    """Train with crayon's jit trainer in this process, its kernels loaded first: (measurements, result)."""
    from crayon.jit.train import train_bpe_jit

    began = time.perf_counter()
    train_bpe_jit(["warm up"], 300)  # loads (or compiles and caches) the kernels
    load_seconds = time.perf_counter() - began
    measurements, result = timed(lambda: train_bpe_jit(files, vocab_size, special_tokens=[SPECIAL]))
    measurements.update(kernel_load_seconds=load_seconds, vocab=len(result.ranks) + 1)
    return measurements, result


def train_hf(files: list[Path], vocab_size: int) -> tuple[dict, Tokenizer]:
    """Train HF tokenizers' BpeTrainer in this process with crayon's pattern setup: (measurements, tokenizer)."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    from crayon.patterns import CL100K_BASE

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(CL100K_BASE), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[SPECIAL],
    )
    measurements, _ = timed(lambda: tokenizer.train([str(path) for path in files], trainer))
    measurements["vocab"] = tokenizer.get_vocab_size()
    return measurements, tokenizer


def timed(train) -> tuple[dict, object]:
    """Run ``train()``: its wall and CPU seconds, the peak RSS before and after, and its result."""
    rss_before_mb = peak_rss_megabytes()
    began, cpu_before = time.perf_counter(), cpu_seconds()
    result = train()
    measurements = {
        "seconds": time.perf_counter() - began,
        "cpu_seconds": cpu_seconds() - cpu_before,
        "peak_rss_mb": peak_rss_megabytes(),
        "rss_before_training_mb": rss_before_mb,
    }
    return measurements, result


def run_crayon(files: list[Path], vocab_size: int) -> dict:
    from crayon.jit.cores import available_cores
    from crayon.jit.train import count_words_jit

    measurements, result = train_crayon(files, vocab_size)
    began = time.perf_counter()
    count_words_jit(files, "cl100k_base", [SPECIAL], workers=available_cores())
    count_seconds = time.perf_counter() - began

    import tiktoken

    encoding = tiktoken.Encoding("trained", pat_str=result.pattern, mergeable_ranks=result.ranks, special_tokens={})
    texts = [path.read_text(encoding="utf-8") for path in files]
    n_tokens = sum(map(len, encoding.encode_ordinary_batch(texts)))
    return {**measurements, "count_seconds": count_seconds, "tokens": n_tokens}


def run_hf(files: list[Path], vocab_size: int) -> dict:
    measurements, tokenizer = train_hf(files, vocab_size)
    texts = [path.read_text(encoding="utf-8") for path in files]
    n_tokens = sum(len(encoded.ids) for encoded in tokenizer.encode_batch(texts, add_special_tokens=False))
    return {**measurements, "tokens": n_tokens}


TRAINERS = {"crayon jit": run_crayon, "HF tokenizers": run_hf}


def child(trainer: str, vocab_size: int) -> None:
    print(json.dumps(TRAINERS[trainer](corpus_files(), vocab_size)))


def run_child(module: str, arguments: list[str], timeout: float | None = None) -> dict:
    """Run ``python -m module *arguments`` in a fresh process; return the JSON object its last line prints."""
    command = [sys.executable, "-m", module, *arguments]
    output = subprocess.run(command, cwd=ROOT, check=True, capture_output=True, text=True, timeout=timeout).stdout
    return json.loads(output.splitlines()[-1])


def measure(trainer: str, vocab_size: int) -> dict:
    """One training run in a fresh child process."""
    return run_child("bench.train", ["--child", trainer, "--vocab-size", str(vocab_size)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per trainer (the median is reported)")
    parser.add_argument("--vocab-size", type=int, default=32768)
    parser.add_argument("--child", choices=list(TRAINERS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.vocab_size)
        return

    files = corpus_files()
    corpus_bytes = sum(path.stat().st_size for path in files)
    measure("crayon jit", 300)  # compile and cache the Numba kernels outside the timed runs
    runs = {trainer: [] for trainer in TRAINERS}
    for _ in range(args.repeat):  # alternate, so both see the same machine load
        for trainer in TRAINERS:
            runs[trainer].append(measure(trainer, args.vocab_size))

    rows = []
    print(f"{len(files)} files, {corpus_bytes / 1e6:.1f} MB, vocab {args.vocab_size}, {os.cpu_count()} cores")
    print(f"{'trainer':<14} {'median s':>9} {'min s':>7} {'CPU s':>6} {'MB/s':>6} {'peak RSS MB':>12} {'vocab':>6} "
          f"{'bytes/token':>12}")
    for trainer, trainer_runs in runs.items():
        seconds = [run["seconds"] for run in trainer_runs]
        row = {
            "trainer": trainer,
            "median_seconds": statistics.median(seconds),
            "min_seconds": min(seconds),
            "runs": trainer_runs,
            "median_cpu_seconds": statistics.median(run["cpu_seconds"] for run in trainer_runs),
            "mb_per_s": corpus_bytes / 1e6 / statistics.median(seconds),
            "peak_rss_mb": max(run["peak_rss_mb"] for run in trainer_runs),
            "vocab": trainer_runs[0]["vocab"],
            "bytes_per_token": corpus_bytes / trainer_runs[0]["tokens"],
        }
        rows.append(row)
        print(
            f"{trainer:<14} {row['median_seconds']:9.2f} {row['min_seconds']:7.2f} {row['median_cpu_seconds']:6.1f} "
            f"{row['mb_per_s']:6.2f} "
            f"{row['peak_rss_mb']:12.0f} {row['vocab']:6d} {row['bytes_per_token']:12.3f}"
        )
    ratio = rows[0]["median_seconds"] / rows[1]["median_seconds"]
    crayon_runs = runs["crayon jit"]
    count_seconds = statistics.median(run["count_seconds"] for run in crayon_runs)
    load_seconds = statistics.median(run["kernel_load_seconds"] for run in crayon_runs)
    print(f"crayon / HF wall time: {ratio:.2f}; crayon's word counting alone (timed apart): {count_seconds:.2f} s; "
          f"loading its cached kernels in a new process (not in the time): {load_seconds:.2f} s")

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    machine = {"processor": platform.processor() or platform.machine(), "cores": os.cpu_count(),
               "python": platform.python_version()}
    RESULTS.write_text(json.dumps({
        "machine": machine, "corpus_files": [path.name for path in files], "corpus_bytes": corpus_bytes,
        "vocab_size": args.vocab_size, "repeat": args.repeat, "crayon_over_hf": ratio, "results": rows,
    }, indent=2))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()

"""BPE training on Debian's linux-source-6.1: ``crayon.train`` vs HF tokenizers' BpeTrainer, in the same run.

The corpora are the kernel source's regular files that are valid UTF-8, sorted by path, each file a document
(``bench.pipeline.utf8_files``): for each of ``--sizes`` N (MB, 10**6 bytes) the shortest prefix of at least N MB
(``bench.pipeline.first_megabytes``, as ``bench/pipeline.py`` takes its subset), and ``full``, every file.

Both trainers learn a byte-level BPE vocabulary of ``--vocab-size`` tokens ("<|endoftext|>" included) over the
cl100k_base pattern, from the file paths: crayon with the call a user writes,
``crayon.train(files=paths, vocab_size=V, progress=False)``, then an encode with the tokenizer it returns
(in the peak RSS, not in the training seconds); HF with a ByteLevel pre-tokenizer behind a
Split(cl100k_base regex, isolated) (the same words as crayon's) and ``Tokenizer.train(paths, BpeTrainer(...))``,
with all cores (RAYON). Each run is a fresh child process; the trainers alternate, ``--repeat`` times, and each
row reports medians: wall seconds of the child (start to exit, imports included) and of the training call alone,
CPU seconds (user + system, from ``getrusage(RUSAGE_CHILDREN)``: all its threads), the child's peak RSS (its own
VmHWM at exit), MB/s, wall and CPU seconds per MB, and crayon / HF. crayon's child also says whether numba was
imported by the end (its ahead-of-time compiled kernels, the trainer's, the engine tables' and the encoder's, are
built by an untimed first run).

The machine may be shared: the load average before and after is recorded; compare the two trainers' ratios,
which were measured side by side, rather than absolute times. Prints a table; writes
bench/results/train_kernel_source.json. No assertions: a benchmark.

    python -m bench.train_kernel_source [--source DIR] [--sizes 100 500 full] [--repeat 1] [--vocab-size 32768]
                                        [--trainers crayon HF] [--timeout 900]
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
import tempfile
import time
from pathlib import Path

from bench.pipeline import first_megabytes, prepare_linux, total_bytes, utf8_files

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "train_kernel_source.json"
DEFAULT_SOURCE = Path("/tmp/pipeline-linux/src/linux-source-6.1")
SPECIAL = "<|endoftext|>"
TRAINERS = ("crayon", "HF")


def peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM), in MB."""
    with open("/proc/self/status") as status:
        return int(status.read().split("VmHWM:")[1].split()[0]) / 1024


def child_crayon(paths: list[str], vocab_size: int) -> dict:
    import crayon

    began = time.perf_counter()
    tokenizer = crayon.train(files=paths, vocab_size=vocab_size, special_tokens=(SPECIAL,), progress=False)
    seconds = time.perf_counter() - began
    tokenizer.encode(Path(paths[0]).read_text(encoding="utf-8")[:10_000])  # what a user does next
    return {"train_seconds": seconds, "vocab": tokenizer.n_vocab, "numba_imported": "numba" in sys.modules}


def child_hf(paths: list[str], vocab_size: int, pattern: str) -> dict:
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False, special_tokens=[SPECIAL],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    began = time.perf_counter()
    tokenizer.train(paths, trainer)
    return {"train_seconds": time.perf_counter() - began, "vocab": tokenizer.get_vocab_size()}


def measure(trainer: str, listing: Path, vocab_size: int, timeout: float) -> dict:
    """Train in a fresh child process: its wall and CPU seconds, peak RSS and what it reports."""
    from crayon.patterns import CL100K_BASE

    command = [sys.executable, "-m", "bench.train_kernel_source", "--child", trainer, "--files-from", str(listing),
               "--vocab-size", str(vocab_size), "--pattern", CL100K_BASE]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load_before = os.getloadavg()[0]
    began = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"timed_out": True, "timeout_seconds": timeout}
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{trainer} failed: {done.stderr[-3000:]}")
    return {**json.loads(done.stdout.splitlines()[-1]), "seconds": wall,
            "cpu_seconds": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
            "load_before": load_before, "load_after": os.getloadavg()[0]}


def summarize(trainer: str, corpus: dict, runs: list[dict]) -> dict:
    row = {"trainer": trainer, "corpus": corpus["name"], "bytes": corpus["bytes"], "runs": runs}
    finished = [run for run in runs if not run.get("timed_out")]
    if finished:
        megabytes = corpus["bytes"] / 1e6
        seconds = statistics.median(run["seconds"] for run in finished)
        cpu = statistics.median(run["cpu_seconds"] for run in finished)
        row.update(seconds=seconds, train_seconds=statistics.median(run["train_seconds"] for run in finished),
                   cpu_seconds=cpu, peak_rss_mb=max(run["peak_rss_mb"] for run in finished), mb_per_s=megabytes / seconds,
                   seconds_per_mb=seconds / megabytes, cpu_seconds_per_mb=cpu / megabytes, vocab=finished[0]["vocab"])
        if "numba_imported" in finished[0]:
            row["numba_imported"] = any(run["numba_imported"] for run in finished)
    return row


def print_rows(rows: list[dict]) -> None:
    print(f"{'corpus':>8} {'MB':>7} {'trainer':<7} {'wall s':>7} {'train s':>7} {'CPU s':>7} {'MB/s':>6} {'s/MB':>6} "
          f"{'CPU s/MB':>8} {'peak RSS MB':>11} {'vocab':>6}")
    for row in rows:
        start = f"{row['corpus']:>8} {row['bytes'] / 1e6:7.0f} {row['trainer']:<7}"
        if "seconds" not in row:
            print(f"{start} timed out after {row['runs'][0]['timeout_seconds']:.0f} s")
            continue
        numba = {True: " (numba imported)", False: " (numba not imported)"}.get(row.get("numba_imported"), "")
        print(f"{start} {row['seconds']:7.1f} {row['train_seconds']:7.1f} {row['cpu_seconds']:7.1f} "
              f"{row['mb_per_s']:6.1f} {row['seconds_per_mb']:6.3f} {row['cpu_seconds_per_mb']:8.3f} "
              f"{row['peak_rss_mb']:11.0f} {row['vocab']:6d}{numba}")


def ratios(rows: list[dict]) -> dict:
    """crayon / HF per corpus: wall, CPU and peak RSS."""
    result = {}
    for corpus in dict.fromkeys(row["corpus"] for row in rows):
        crayon, hf = (next((row for row in rows if row["corpus"] == corpus and row["trainer"] == t), {})
                      for t in TRAINERS)
        if "seconds" in crayon and "seconds" in hf:
            result[corpus] = {key: crayon[key] / hf[key] for key in ("seconds", "cpu_seconds", "peak_rss_mb")}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=None,
                        help=f"the unpacked kernel source (default {DEFAULT_SOURCE} if present, else fetched with "
                             "bench.pipeline's --workdir)")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "crayon-bench-linux")
    parser.add_argument("--sizes", nargs="+", default=["100", "500", "full"], help="MB (10**6 B) of files, or full")
    parser.add_argument("--repeat", type=int, default=1, help="runs per trainer and corpus (medians reported)")
    parser.add_argument("--vocab-size", type=int, default=32768)
    parser.add_argument("--timeout", type=float, default=900, help="seconds before a training run is abandoned")
    parser.add_argument("--trainers", nargs="+", choices=TRAINERS, default=list(TRAINERS))
    parser.add_argument("--child", choices=TRAINERS, help=argparse.SUPPRESS)
    parser.add_argument("--files-from", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--pattern", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        paths = args.files_from.read_text(encoding="utf-8").split("\n")
        result = (child_crayon(paths, args.vocab_size) if args.child == "crayon"
                  else child_hf(paths, args.vocab_size, args.pattern))
        print(json.dumps({**result, "peak_rss_mb": peak_rss_mb()}))
        return

    source = args.source or (DEFAULT_SOURCE if DEFAULT_SOURCE.is_dir() else prepare_linux(args.workdir))
    files, skipped = utf8_files(source)
    scratch = Path(tempfile.mkdtemp(prefix="crayon-bench-train-"))
    corpora = []
    for size in args.sizes:
        chosen = files if size == "full" else first_megabytes(files, float(size))
        listing = scratch / f"{size}.list"
        listing.write_text("\n".join(map(str, chosen)), encoding="utf-8")
        corpora.append({"name": size if size == "full" else f"{size} MB", "listing": listing, "files": len(chosen),
                        "bytes": total_bytes(chosen)})
    print(f"{source}: {len(files):,} UTF-8 files, {total_bytes(files) / 1e6:,.0f} MB ({skipped} not UTF-8, skipped)")
    warmup = scratch / "warmup.list"
    warmup.write_text(str(files[0]), encoding="utf-8")
    measure("crayon", warmup, 300, args.timeout)  # builds the compiled kernels where missing: not timed

    load_before = [round(load, 2) for load in os.getloadavg()]
    rows = []
    for corpus in corpora:
        runs: dict[str, list[dict]] = {trainer: [] for trainer in args.trainers}
        for _ in range(args.repeat):  # alternate, so that both see the same machine load
            for trainer in args.trainers:
                if not any(run.get("timed_out") for run in runs[trainer]):
                    runs[trainer].append(measure(trainer, corpus["listing"], args.vocab_size, args.timeout))
        rows.extend(summarize(trainer, corpus, runs[trainer]) for trainer in args.trainers)
        print_rows(rows[-len(args.trainers):])
    load_after = [round(load, 2) for load in os.getloadavg()]

    print(f"\nvocab {args.vocab_size}, {os.cpu_count()} cores, medians of {args.repeat}; load average before "
          f"{load_before}, after {load_after}. wall s: the child process, imports included; train s: the training "
          f"call alone; CPU s: all its threads")
    print_rows(rows)
    compared = ratios(rows)
    for corpus, ratio in compared.items():
        print(f"crayon / HF on {corpus}: wall {ratio['seconds']:.2f}, CPU {ratio['cpu_seconds']:.2f}, "
              f"peak RSS {ratio['peak_rss_mb']:.2f}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    machine = {"processor": platform.processor() or platform.machine(), "cores": os.cpu_count(),
               "python": platform.python_version()}
    RESULTS.write_text(json.dumps({
        "machine": machine, "source": str(source), "load_average_before": load_before,
        "load_average_after": load_after, "vocab_size": args.vocab_size, "repeat": args.repeat,
        "corpora": [{key: str(value) if key == "listing" else value for key, value in corpus.items()}
                    for corpus in corpora],
        "crayon_over_hf": compared, "results": rows,
    }, indent=2))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()

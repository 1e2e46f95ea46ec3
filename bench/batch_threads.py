"""Batch calls, one long string and the shard writer on 1 and 2 threads: wall clock, and where the CPU time goes.

Three tables (cl100k_base):

1. Wall clock, crayon beside tiktoken: ``encode_batch`` and ``encode_ordinary_batch`` (lists of ids, the public
   calls) of every shared corpus cut into 1,000-line documents (13.7 MB). Each cell is the best of ``--repeat``
   runs, libraries and thread counts interleaved; crayon's piece caches are emptied before every run, so each run
   sees the text for the first time. Scaling is the 1-thread time over the 2-thread time.

2. CPU accounting, crayon alone, for what the wall clock of a shared machine cannot show: how far two idle cores
   could take each call. For each workload and 1 and 2 threads (medians of ``--repeat`` interleaved runs): wall
   time; process CPU time T; the CPU time spent inside the GIL-free kernels K (every ``*_kernel`` call of the jit
   engine timed with its thread's CPU clock); the GIL-held CPU time G = T - K (Python work: UTF-8 encoding,
   building lists, numpy bookkeeping, reading files; reading a file releases the GIL, so G overstates the
   writer's); and the serial CPU time S, the calling thread's CPU time before the first kernel starts and after
   the last one ends, when no other thread can work. On two idle cores the 2-thread call takes at least
   max(G2, S2 + (T2 - S2) / 2): the GIL serializes G, and only the rest of T is shared by both cores. The
   1-thread call takes T1 (``write_tokens``: T1 minus the main thread's work beside the kernels, which runs on
   the other core). Their ratio is the "2-core bound" column: what the code allows, not what this machine shows.
   Workloads: ``encode_ordinary_batch`` of the corpora's lines (short texts) and of the 1,000-line documents,
   ``encode_batch`` of the documents, ``encode_ordinary`` of one ``--long-mb`` MB string (the corpora repeated;
   1 thread: ``tok.engine.long_texts.threads = 1``), and ``write_tokens`` of ``--files-from`` (default: the
   corpus files themselves).

3. A small batch called again and again (245 texts of 2 kB), caches warm: CPU and wall time, 1 and 2 threads.

    python -m bench.batch_threads [--repeat N] [--long-mb 20] [--files-from LIST] [--accounting-only] [--only TEXT]

Writes bench/results/batch_threads.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import statistics
import tempfile
import threading
import time
from contextlib import contextmanager

from bench.peers import CORPORA_DIR, RESULTS


def corpus_files() -> list:
    return [path for path in sorted(CORPORA_DIR.glob("*")) if path.suffix != ".md"]


def documents() -> list[str]:
    found = []
    for path in corpus_files():
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        found += ["".join(lines[i : i + 1000]) for i in range(0, len(lines), 1000)]
    return found


class KernelClock:
    """Times every ``*_kernel`` call of every jit engine (``JitEngine.kernels``) while installed: each call's CPU
    time on its thread, its wall-clock span, and the main thread's CPU clock at its start and end. The kernels
    that make Python lists (``GIL_KERNELS``) take the GIL themselves: their time is GIL time, not kernel time."""

    GIL_KERNELS = frozenset({"id_list_kernel", "id_lists_kernel", "id_list_extend_kernel"})

    def __init__(self):
        # cpu, start, end, main cpu at start/end, whether the kernel holds the GIL
        self.calls: list[tuple[float, float, float, float, float, bool]] = []
        self._main_clock = time.pthread_getcpuclockid(threading.main_thread().ident)

    def main_cpu(self) -> float:
        return time.clock_gettime(self._main_clock)

    @contextmanager
    def installed(self):
        from crayon.jit.engine import JitEngine

        original = JitEngine.kernels
        clock = self

        class Timed:
            def __init__(self, kernels):
                self._kernels = kernels

            def __getattr__(self, name):
                function = getattr(self._kernels, name)
                if not name.endswith("_kernel"):
                    return function

                holds_gil = name in clock.GIL_KERNELS

                def timed(*args):
                    cpu, start, main = time.thread_time(), time.perf_counter(), clock.main_cpu()
                    try:
                        return function(*args)
                    finally:
                        clock.calls.append((time.thread_time() - cpu, start, time.perf_counter(), main,
                                            clock.main_cpu(), holds_gil))
                return timed

        JitEngine.kernels = property(lambda engine: Timed(original.fget(engine)))
        try:
            yield self
        finally:
            JitEngine.kernels = original

    def measure(self, call) -> dict:
        """Wall, process CPU, kernel CPU, main thread CPU and serial CPU of ``call()``."""
        self.calls.clear()
        gc.collect()
        main, cpu, wall = self.main_cpu(), time.process_time(), time.perf_counter()
        result = call()
        wall, cpu, main_end = time.perf_counter() - wall, time.process_time() - cpu, self.main_cpu()
        del result
        kernel = sum(call[0] for call in self.calls if not call[5])
        first = min(self.calls, key=lambda call: call[1])
        last = max(self.calls, key=lambda call: call[2])
        serial = (first[3] - main) + (main_end - last[4])
        return {"wall_s": wall, "cpu_s": cpu, "kernel_s": kernel, "gil_s": cpu - kernel, "main_s": main_end - main,
                "serial_s": serial}


def accounting(tok, repeat: int, long_mb: float, files: list, only: str | None = None) -> dict:
    """The CPU accounting table's rows (see the module docstring); ``only``: the workloads whose name has it."""
    docs = documents()
    lines = [line for doc in docs for line in doc.splitlines(keepends=True)]
    corpus = "".join(docs)
    long_text = corpus * max(1, math.ceil(long_mb * 1e6 / len(corpus.encode())))
    output = os.path.join(tempfile.mkdtemp(prefix="bench-batch-threads-"), "tokens.bin")

    def long_string(threads):
        tok.engine.long_texts.threads = threads
        return tok.encode_ordinary(long_text)

    workloads = {
        f"encode_ordinary_batch, {len(lines):,} lines": (lambda n: tok.encode_ordinary_batch(lines, num_threads=n),
                                                        sum(len(line.encode()) for line in lines)),
        f"encode_ordinary_batch, {len(docs)} documents": (lambda n: tok.encode_ordinary_batch(docs, num_threads=n),
                                                        len(corpus.encode())),
        f"encode_batch, {len(docs)} documents": (lambda n: tok.encode_batch(docs, num_threads=n), len(corpus.encode())),
        f"encode_ordinary, one {len(long_text.encode()) / 1e6:.0f} MB string": (long_string, len(long_text.encode())),
        f"write_tokens, {len(files):,} files": (lambda n: tok.write_tokens(files, output, threads=n),
                                                sum(os.path.getsize(path) for path in files)),
    }
    workloads = {name: workload for name, workload in workloads.items() if only is None or only in name}
    clock = KernelClock()
    samples = {(name, n): [] for name in workloads for n in (1, 2)}
    with clock.installed():
        for name, (call, _) in workloads.items():
            call(2)  # warm-up: compiled kernels loaded, worker threads started
        for _ in range(repeat):
            for name, (call, _) in workloads.items():
                for n in (1, 2):
                    tok.engine.clear_caches()
                    samples[name, n].append(clock.measure(lambda: call(n)))
    tok.engine.long_texts.threads = None
    rows = []
    for name, (_, size) in workloads.items():
        one, two = ({key: statistics.median(sample[key] for sample in samples[name, n]) for key in samples[name, n][0]}
                    for n in (1, 2))
        idle_one = one["cpu_s"] - (one["main_s"] - one["serial_s"] if name.startswith("write_tokens") else 0)
        idle_two = max(two["gil_s"], two["serial_s"] + (two["cpu_s"] - two["serial_s"]) / 2)
        rows.append({"workload": name, "megabytes": size / 1e6, "1": one, "2": two,
                     "wall_scaling": one["wall_s"] / two["wall_s"], "two_core_bound": idle_one / idle_two})
    return {"rows": rows}


def print_accounting(report: dict) -> None:
    print("\nCPU accounting (seconds, medians; G = GIL-held CPU, S = serial CPU of the calling thread; "
          "see the docstring)")
    header = (f"{'workload':<44}{'threads':>8}{'wall':>7}{'CPU':>7}{'kernel':>8}{'G':>7}{'G/CPU':>7}{'S':>7}"
              f"{'S/CPU':>7}{'wall x':>8}{'2-core bound':>14}")
    print(header)
    for row in report["rows"]:
        for n in ("1", "2"):
            cells = row[n]
            tail = f"{row['wall_scaling']:>7.2f}x{row['two_core_bound']:>13.2f}x" if n == "2" else ""
            print(f"{row['workload'] if n == '1' else '':<44}{n:>8}{cells['wall_s']:>7.2f}{cells['cpu_s']:>7.2f}"
                  f"{cells['kernel_s']:>8.2f}{cells['gil_s']:>7.2f}{cells['gil_s'] / cells['cpu_s']:>7.0%}"
                  f"{cells['serial_s']:>7.2f}{cells['serial_s'] / cells['cpu_s']:>7.0%}{tail}")


def wall_clock(tok, repeat: int) -> list[dict]:
    """The wall-clock table's rows, crayon beside tiktoken."""
    import tiktoken

    from crayon.formats.tiktoken_io import load_tiktoken_bpe
    from crayon.profiles import OPENAI_ENCODINGS, find_vocabulary_file

    spec = OPENAI_ENCODINGS["cl100k_base"]
    encoding = tiktoken.Encoding("cl100k_base", pat_str=spec.pattern, special_tokens=spec.special_tokens,
                                 mergeable_ranks=load_tiktoken_bpe(find_vocabulary_file("cl100k_base")))
    docs = documents()
    megabytes = sum(len(d.encode()) for d in docs) / 1e6
    expected = encoding.encode_ordinary_batch(docs[:50])
    assert tok.encode_batch(docs[:50], num_threads=2) == expected == tok.encode_ordinary_batch(docs[:50], num_threads=2)

    calls = {
        ("crayon", "encode_batch"): lambda n: tok.encode_batch(docs, num_threads=n),
        ("crayon", "encode_ordinary_batch"): lambda n: tok.encode_ordinary_batch(docs, num_threads=n),
        ("tiktoken", "encode_batch"): lambda n: encoding.encode_batch(docs, num_threads=n),
        ("tiktoken", "encode_ordinary_batch"): lambda n: encoding.encode_ordinary_batch(docs, num_threads=n),
    }
    best = {(library, method, n): float("inf") for library, method in calls for n in (1, 2)}
    for _ in range(repeat):
        for (library, method), call in calls.items():
            for n in (1, 2):
                tok.engine.clear_caches()
                gc.collect()
                start = time.perf_counter()
                call(n)
                best[library, method, n] = min(best[library, method, n], time.perf_counter() - start)
    print(f"\n{len(docs)} documents, {megabytes:.1f} MB, cl100k_base, best of {repeat} (wall clock, "
          f"{os.cpu_count()} CPUs)")
    print(f"{'library':<10}{'method':<24}{'1 thread MB/s':>15}{'2 threads MB/s':>16}{'scaling':>9}")
    rows = []
    for library, method in calls:
        one, two = best[library, method, 1], best[library, method, 2]
        rows.append({"library": library, "method": method, "mb_per_s_1": megabytes / one,
                     "mb_per_s_2": megabytes / two, "scaling": one / two})
        print(f"{library:<10}{method:<24}{megabytes / one:>15.1f}{megabytes / two:>16.1f}{one / two:>8.2f}x")
    return rows


def repeated_small_batches(tok, repeat: int) -> list[dict]:
    """Median CPU and wall time of a batch of 245 texts of 2 kB (each document's first 2,000 characters) called
    again and again, caches warm as in a service: the worker threads, kept for the process, keep theirs."""
    texts = [doc[:2000] for doc in documents()]
    rows = []
    for n in (1, 2):
        tok.encode_ordinary_batch(texts, num_threads=n)
        cpu, wall = [], []
        for _ in range(max(5, 3 * repeat)):
            gc.collect()
            start_cpu, start = time.process_time(), time.perf_counter()
            tok.encode_ordinary_batch(texts, num_threads=n)
            cpu.append(time.process_time() - start_cpu)
            wall.append(time.perf_counter() - start)
        rows.append({"threads": n, "cpu_ms": 1e3 * statistics.median(cpu), "wall_ms": 1e3 * statistics.median(wall)})
    print(f"\nencode_ordinary_batch of {len(texts)} texts of 2 kB, called repeatedly (caches warm), medians")
    for row in rows:
        print(f"  {row['threads']} thread{'s' * (row['threads'] > 1)}: CPU {row['cpu_ms']:.1f} ms, wall {row['wall_ms']:.1f} ms")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--long-mb", type=float, default=20, help="size of the long string (MB)")
    parser.add_argument("--files-from", help="a file listing write_tokens' input files, one per line "
                                             "(default: the shared corpus files)")
    parser.add_argument("--accounting-only", action="store_true", help="skip the wall-clock table (and tiktoken)")
    parser.add_argument("--only", help="account only for the workloads whose name contains this (e.g. write_tokens)")
    args = parser.parse_args()
    import crayon

    tok = crayon.load("cl100k_base", backend="jit")
    files = ([line for line in open(args.files_from, encoding="utf-8").read().splitlines() if line] if args.files_from
             else [str(path) for path in corpus_files()])
    report = {"machine": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
              "load_average_start": os.getloadavg()}
    if not args.accounting_only:
        report["rows"] = wall_clock(tok, args.repeat)
    report["accounting"] = accounting(tok, args.repeat, args.long_mb, files, args.only)
    report["repeated_small_batches"] = repeated_small_batches(tok, args.repeat)
    report["load_average_end"] = os.getloadavg()
    print_accounting(report["accounting"])
    print(f"load average: start {report['load_average_start']}, end {report['load_average_end']}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "batch_threads.json").write_text(json.dumps(report, indent=2))
    print(f"wrote {RESULTS / 'batch_threads.json'}")


if __name__ == "__main__":
    main()

"""Every row of issue 15's performance table, measured side by side in one run; one table with ratios.

    python -m bench.performance [--quick] [--long-mb 100] [--rounds N]

Run it unpinned on a quiet machine: single-core rows pin the process to its first allowed CPU themselves
(``os.sched_setaffinity``, as ``taskset -c`` does) and the thread rows use two CPUs. The rows, with the functions of
the row's own bench script where one exists:

* swap (``bench.swap``): ``crayon.load(path)`` of a cl100k_base cartridge in a warm process and
  ``crayon.load(path).encode("hello")``, beside ``tiktoken.Encoding(...)`` from ranks in memory; median ms.
* tiny calls (``bench.tiny_calls``): 200k calls of ``encode(word)`` (big.txt's words), crayon over tiktoken.
* batch (``bench.batch_threads``): ``encode_ordinary_batch`` of the corpora in 1,000-line documents, 2 threads
  over 1 (wall clock), crayon and tiktoken.
* longest match: ``crayon.load("lite", algorithm="longest").encode(text)`` on the English corpora (big.txt,
  english_web.txt, shakespeare.txt), one core, M tokens/s of thread CPU time, median of rounds.
* exact BPE per core (``bench.fastokens``' protocol: each corpus in 8 parts, first sight and repeated, process
  CPU time, one round, the first ``--bpe-chars`` characters of each file): crayon's MB/s over fastokens', quicktok's
  and tiktoken's, the worst and best file per vocabulary.
* one long string: ``tok.encode_ordinary(text)`` of ``--long-mb`` MB (the corpora repeated) on 1 and 2 threads
  (``tok.engine.long_texts.threads``; with 1 the parts are encoded in turn), checked against the text encoded
  whole, wall clock and process CPU time, beside fastokens on the same 2 CPUs; and
  the scaling two idle cores would give, from CPU times (``bench.batch_threads.KernelClock``: the calling
  thread's serial part on one core, the rest on both, never less than the GIL-held part).
* training: the figures of the last ``python -m bench.train_scale`` run (bench/results/train_scale.json), not rerun.

Prints the table and writes bench/results/performance.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from bench import batch_threads, fastokens, swap, tiny_calls
from bench.peers import CORPORA_DIR, ENCODINGS, RESULTS

ENGLISH = ("big.txt", "english_web.txt", "shakespeare.txt")


@contextmanager
def cpus(count: int):
    """Run the block on the first ``count`` CPUs this process may use (raises if it may use fewer)."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < count:
        raise SystemExit(f"this row needs {count} CPUs; the process may use {allowed}")
    os.sched_setaffinity(0, allowed[:count])
    try:
        yield
    finally:
        os.sched_setaffinity(0, allowed)


def tiktoken_encoding(name: str):
    import tiktoken

    from crayon.formats.tiktoken_io import load_tiktoken_bpe
    from crayon.profiles import OPENAI_ENCODINGS, find_vocabulary_file

    spec = OPENAI_ENCODINGS[name]
    return tiktoken.Encoding(name, pat_str=spec.pattern, special_tokens=spec.special_tokens,
                             mergeable_ranks=load_tiktoken_bpe(find_vocabulary_file(name)))


def swap_row(rounds: int) -> dict:
    import crayon

    with tempfile.TemporaryDirectory() as folder:
        cartridge = Path(folder) / "cl100k_base.crayon"
        crayon.load("cl100k_base").save(cartridge)
        return swap.measure(swap.calls(cartridge), rounds)


def tiny_calls_row(calls: int, rounds: int) -> dict:
    import crayon

    encoding = tiktoken_encoding("cl100k_base")
    texts = tiny_calls.workloads(calls)["corpus words"]
    checked = crayon.load("cl100k_base")
    assert [checked.encode(t) for t in texts[:20_000]] == [encoding.encode(t) for t in texts[:20_000]]
    best = {"crayon": float("inf"), "tiktoken": float("inf")}
    for _ in range(rounds):  # a newly loaded crayon tokenizer each round: its memory of short texts starts empty
        best["crayon"] = min(best["crayon"], tiny_calls.run(crayon.load("cl100k_base").encode, texts))
        best["tiktoken"] = min(best["tiktoken"], tiny_calls.run(encoding.encode, texts))
    return {"calls": calls, "seconds": best}


def batch_row(rounds: int) -> dict:
    import crayon

    encoding = tiktoken_encoding("cl100k_base")
    tok = crayon.load("cl100k_base", backend="jit")
    docs = batch_threads.documents()
    assert tok.encode_ordinary_batch(docs[:50], num_threads=2) == encoding.encode_ordinary_batch(docs[:50])
    calls = {"crayon": lambda n: tok.encode_ordinary_batch(docs, num_threads=n),
             "tiktoken": lambda n: encoding.encode_ordinary_batch(docs, num_threads=n)}
    best = {(library, n): float("inf") for library in calls for n in (1, 2)}
    for _ in range(rounds):
        for library, call in calls.items():
            for n in (1, 2):
                tok.engine.clear_caches()
                gc.collect()
                start = time.perf_counter()
                call(n)
                best[library, n] = min(best[library, n], time.perf_counter() - start)
    megabytes = sum(len(d.encode()) for d in docs) / 1e6
    return {library: {"mb_per_s_1": megabytes / best[library, 1], "mb_per_s_2": megabytes / best[library, 2],
                      "scaling": best[library, 1] / best[library, 2]} for library in calls}


def longest_row(rounds: int) -> dict:
    import crayon

    tok = crayon.load("lite", algorithm="longest")
    reference = crayon.load("lite", algorithm="longest", backend="reference")
    found = {}
    for name in ENGLISH:
        text = (CORPORA_DIR / name).read_text(encoding="utf-8")
        assert tok.encode(text[:20_000]) == reference.encode(text[:20_000])
        seconds, count = [], 0
        for _ in range(rounds):
            gc.collect()
            start = time.thread_time()
            count = len(tok.encode(text))
            seconds.append(time.thread_time() - start)
        found[name] = {"tokens": count, "m_tokens_per_s": count / statistics.median(seconds) / 1e6,
                       "mb_per_s": len(text.encode()) / statistics.median(seconds) / 1e6}
    return found


def exact_bpe_row(rounds: int, limit: int) -> dict:
    texts = {path.name: path.read_text(encoding="utf-8")[:limit]
             for path in sorted(CORPORA_DIR.glob("*")) if path.suffix != ".md"}
    folder = Path(tempfile.mkdtemp(prefix="bench-performance-"))
    rows = []
    for name in ENCODINGS:
        found = fastokens.libraries(name, folder)
        for file_name, text in texts.items():
            warm_up = "".join(other[: fastokens.WARM_UP_BYTES] for other_name, other in texts.items()
                              if other_name != file_name)
            runs = [fastokens.measure_file(found, fastokens.cut(text, fastokens.PARTS), warm_up) for _ in range(rounds)]
            for pass_name in fastokens.PASSES:
                cpu = {label: statistics.median(run[pass_name][label]["cpu"] for run in runs) for label in found}
                rows.append({"vocabulary": name, "corpus": file_name, "pass": pass_name,
                             "mb_per_s": {label: len(text.encode()) / 1e6 / cpu[label] for label in found},
                             "crayon_speed_over": {label: cpu[label] / cpu["crayon"] for label in found if label != "crayon"},
                             "identical": all(run[pass_name][label]["same"] for run in runs for label in found)})
    return {"rows": rows}


def long_text_row(megabytes: int, rounds: int) -> dict:
    import crayon

    corpus = "".join(path.read_text(encoding="utf-8")
                     for path in sorted(CORPORA_DIR.glob("*")) if path.suffix != ".md")
    text = corpus * (megabytes * 10**6 // len(corpus.encode()) + 1)
    size = len(text.encode())
    tok = crayon.load("cl100k_base", backend="jit")
    results = {}
    peers = {}
    try:
        make, encode = fastokens.libraries("cl100k_base", Path(tempfile.mkdtemp(prefix="bench-performance-")))["fastokens"]
        fast = make()
        peers["fastokens, 2 CPUs"] = lambda: encode(fast, text)
    except ImportError:
        pass
    default_min_bytes, tok.engine.long_texts.min_bytes = tok.engine.long_texts.min_bytes, len(text) + 1  # not cut
    expected = tok.encode_ordinary(text)
    tok.engine.long_texts.min_bytes = default_min_bytes
    calls = {f"crayon, {n} thread{'s' * (n > 1)}": n for n in (1, 2)}
    times = {label: [] for label in [*calls, *peers]}
    serial, gil = [], []  # the 2-thread call's serial and GIL-held CPU time (bench.batch_threads.KernelClock)
    clock = batch_threads.KernelClock()
    for _ in range(rounds):
        for label, threads in calls.items():
            tok.engine.long_texts.threads = threads
            tok.engine.clear_caches()  # every thread's: each call sees the text for the first time
            with clock.installed():
                measured = clock.measure(lambda: tok.encode_ordinary(text))
            if threads == 2:
                serial.append(measured["serial_s"])
                gil.append(measured["gil_s"])
            times[label].append((measured["wall_s"], measured["cpu_s"]))
        for label, call in peers.items():
            gc.collect()
            start_wall, start_cpu = time.perf_counter(), time.process_time()
            same = call() == expected
            times[label].append((time.perf_counter() - start_wall, time.process_time() - start_cpu))
            assert same, f"{label} gives other tokens"
    for threads in (1, 2):
        tok.engine.long_texts.threads = threads
        assert tok.encode_ordinary(text) == expected, "the cut text's tokens differ from the whole text's"
    tok.engine.long_texts.threads = None
    for label, pairs in times.items():
        wall = statistics.median(wall for wall, _ in pairs)
        cpu = statistics.median(cpu for _, cpu in pairs)
        results[label] = {"wall_s": wall, "cpu_s": cpu, "mb_per_s": size / 1e6 / wall}
    one, two = results["crayon, 1 thread"], results["crayon, 2 threads"]
    serial_s, gil_s = statistics.median(serial), statistics.median(gil)
    return {"bytes": size, "tokens": len(expected), "results": results, "scaling": one["wall_s"] / two["wall_s"],
            "cpu_over_wall_2_threads": two["cpu_s"] / two["wall_s"], "serial_cpu_s": serial_s, "gil_cpu_s": gil_s,
            # from CPU times, what 2 idle cores would give: the 1-thread call's CPU time over the 2-thread call's
            # least wall time, its serial part on one core, the rest on both, and never less than its GIL-held part
            "cpu_time_scaling_bound": one["cpu_s"] / max(gil_s, serial_s + (two["cpu_s"] - serial_s) / 2)}


def training_row() -> dict:
    path = RESULTS / "train_scale.json"
    if not path.exists():
        return {"note": "no bench/results/train_scale.json: run python -m bench.train_scale"}
    return {"source": str(path), "report": json.loads(path.read_text())}


def print_table(report: dict) -> None:
    lines = [("row", "crayon", "peer", "ratio (crayon's advantage)")]
    swap_results = report["swap"]
    load, hello = swap_results["crayon.load(path)"], swap_results["crayon.load(path).encode('hello')"]
    peer_load = swap_results.get("tiktoken.Encoding(...)", {}).get("median_ms")
    lines.append(("load(path), warm process (median ms)", f"{load['median_ms']:.2f} ms",
                  f"tiktoken.Encoding {peer_load:.1f} ms" if peer_load else "-",
                  f"{peer_load / load['median_ms']:.1f}x" if peer_load else "-"))
    lines.append(("load(path).encode('hello') (median ms)", f"{hello['median_ms']:.2f} ms", "target < 1 ms", "-"))
    tiny = report["tiny_calls"]["seconds"]
    lines.append((f"{report['tiny_calls']['calls']:,} x encode(word)", f"{tiny['crayon']:.2f} s",
                  f"tiktoken {tiny['tiktoken']:.2f} s", f"{tiny['tiktoken'] / tiny['crayon']:.2f}x"))
    batch = report["batch"]
    lines.append(("encode_ordinary_batch, 2 threads / 1", f"{batch['crayon']['scaling']:.2f}x",
                  f"tiktoken {batch['tiktoken']['scaling']:.2f}x", "target >= 1.8x"))
    for name, row in report["longest"].items():
        lines.append((f"longest match (lite), {name}, 1 core", f"{row['m_tokens_per_s']:.1f} M tok/s",
                      "target 28 M tok/s", f"{row['m_tokens_per_s'] / 28:.2f} of target"))
    for name in ENCODINGS:
        for pass_name in fastokens.PASSES:
            rows = [r for r in report["exact_bpe"]["rows"] if r["vocabulary"] == name and r["pass"] == pass_name]
            for peer in ("fastokens", "quicktok", "tiktoken"):
                ratios = [r["crayon_speed_over"][peer] for r in rows]
                worst = min(rows, key=lambda r: r["crayon_speed_over"][peer])
                lines.append((f"exact BPE 1 core, {name}, {pass_name}, vs {peer}",
                              f"{min(r['mb_per_s']['crayon'] for r in rows):.0f}-{max(r['mb_per_s']['crayon'] for r in rows):.0f} MB/s",
                              f"{min(r['mb_per_s'][peer] for r in rows):.0f}-{max(r['mb_per_s'][peer] for r in rows):.0f} MB/s",
                              f"{min(ratios):.2f}-{max(ratios):.2f}x (worst {worst['corpus']})"))
    long_text = report["long_text"]
    for label, row in long_text["results"].items():
        lines.append((f"one {long_text['bytes'] / 1e6:.0f} MB string, {label}", f"{row['mb_per_s']:.1f} MB/s",
                      f"cpu {row['cpu_s']:.1f} s, wall {row['wall_s']:.1f} s", ""))
    lines.append(("one long string, 2 threads / 1 (wall)", f"{long_text['scaling']:.2f}x",
                  f"2-thread CPU/wall {long_text['cpu_over_wall_2_threads']:.2f}", "target >= 1.8x"))
    lines.append(("one long string, 2 threads, from CPU times", f"{long_text['cpu_time_scaling_bound']:.2f}x",
                  f"serial {long_text['serial_cpu_s']:.2f} s, GIL-held {long_text['gil_cpu_s']:.2f} s",
                  "what 2 idle cores would give"))
    lines.append(("training", "see bench/results/train_scale.json", "python -m bench.train_scale", ""))
    widths = [max(len(str(line[i])) for line in lines) for i in range(4)]
    for index, line in enumerate(lines):
        print("  ".join(str(cell).ljust(width) for cell, width in zip(line, widths)))
        if index == 0:
            print("  ".join("-" * width for width in widths))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and calls, 400 kB per corpus file")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--long-mb", type=int, default=100)
    parser.add_argument("--bpe-chars", type=int, default=1_000_000,
                        help="characters of each corpus file in the exact-BPE row (bench.fastokens runs them whole)")
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    started = time.perf_counter()
    report = {"machine": platform.platform(), "python": platform.python_version(),
              "cpus_allowed": sorted(os.sched_getaffinity(0)), "load_average_start": os.getloadavg()}
    steps = [
        ("swap", 1, lambda: swap_row(20 if args.quick else 40)),
        ("tiny_calls", 1, lambda: tiny_calls_row(20_000 if args.quick else 200_000, rounds)),
        ("longest", 1, lambda: longest_row(3 if args.quick else 7)),
        ("exact_bpe", 1, lambda: exact_bpe_row(1, 400_000 if args.quick else args.bpe_chars)),
        ("batch", 2, lambda: batch_row(rounds)),
        ("long_text", 2, lambda: long_text_row(10 if args.quick else args.long_mb, rounds)),
    ]
    for key, count, step in steps:
        step_start = time.perf_counter()
        with cpus(count):
            report[key] = step()
        print(f"{key}: {time.perf_counter() - step_start:.0f} s", flush=True)
    report["training"] = training_row()
    report["load_average_end"] = os.getloadavg()
    report["seconds"] = time.perf_counter() - started
    print()
    print_table(report)
    print(f"\nload average: start {report['load_average_start']}, end {report['load_average_end']}; "
          f"{report['seconds']:.0f} s in all")
    RESULTS.mkdir(parents=True, exist_ok=True)
    output = RESULTS / ("performance-quick.json" if args.quick else "performance.json")
    output.write_text(json.dumps(report, indent=2))
    print(f"wrote {output}")


if __name__ == "__main__":
    main()

"""Batch calls on 1 and 2 threads: ``encode_batch`` and ``encode_ordinary_batch`` (lists of ids, the public
calls), crayon beside tiktoken's same methods (cl100k_base).

The documents are every shared corpus cut into 1,000-line pieces (13.7 MB). Each row is the best wall-clock time
of ``--repeat`` runs, the libraries and thread counts interleaved; crayon's piece caches are emptied before every
run, so each run sees the text for the first time. Scaling is the 1-thread time over the 2-thread time.

    python -m bench.batch_threads [--repeat N]

Writes bench/results/batch_threads.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import time

from bench.peers import CORPORA_DIR, RESULTS


def documents() -> list[str]:
    found = []
    for path in sorted(CORPORA_DIR.glob("*")):
        if path.suffix != ".md":
            lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
            found += ["".join(lines[i : i + 1000]) for i in range(0, len(lines), 1000)]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    import tiktoken

    import crayon
    from crayon.formats.tiktoken_io import load_tiktoken_bpe
    from crayon.profiles import OPENAI_ENCODINGS, find_vocabulary_file

    spec = OPENAI_ENCODINGS["cl100k_base"]
    encoding = tiktoken.Encoding("cl100k_base", pat_str=spec.pattern, special_tokens=spec.special_tokens,
                                 mergeable_ranks=load_tiktoken_bpe(find_vocabulary_file("cl100k_base")))
    tok = crayon.load("cl100k_base", backend="jit")
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
    for _ in range(args.repeat):
        for (library, method), call in calls.items():
            for n in (1, 2):
                tok.engine.clear_caches()
                gc.collect()
                start = time.perf_counter()
                call(n)
                best[library, method, n] = min(best[library, method, n], time.perf_counter() - start)
    print(f"\n{len(docs)} documents, {megabytes:.1f} MB, cl100k_base, best of {args.repeat} (wall clock, "
          f"{os.cpu_count()} CPUs)")
    print(f"{'library':<10}{'method':<24}{'1 thread MB/s':>15}{'2 threads MB/s':>16}{'scaling':>9}")
    rows = []
    for library, method in calls:
        one, two = best[library, method, 1], best[library, method, 2]
        rows.append({"library": library, "method": method, "mb_per_s_1": megabytes / one,
                     "mb_per_s_2": megabytes / two, "scaling": one / two})
        print(f"{library:<10}{method:<24}{megabytes / one:>15.1f}{megabytes / two:>16.1f}{one / two:>8.2f}x")
    report = {"machine": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
              "megabytes": megabytes, "rows": rows}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "batch_threads.json").write_text(json.dumps(report, indent=2))
    print(f"wrote {RESULTS / 'batch_threads.json'}")


if __name__ == "__main__":
    main()

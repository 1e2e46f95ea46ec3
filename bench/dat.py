"""Double-array trie compile time and density for cl100k_base and o200k_base, per packing order.

Density is the share of DAT slots that hold a trie state (the root included). Build time is the jit compiler's
(crayon.jit.dat.compile_dat) on the full token list, after a warm-up call, best of several runs, thread CPU
time (wall clock in the JSON). ``--reference`` also times the pure-Python compiler once (minutes) and checks that
both give identical arrays. Prints a table and writes bench/results/dat.json.

    python -m bench.dat [--repeat N] [--reference]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from bench.pretokenize import best_times
from crayon.jit import dat as jit_dat
from crayon.profiles import find_vocabulary_file
from crayon.reference import dat as reference_dat
from crayon.formats.tiktoken_io import load_tiktoken_bpe

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "dat.json"
VOCABULARIES = ["cl100k_base", "o200k_base"]
ORDERS = ["out_degree", "bfs"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--reference", action="store_true", help="also time the pure-Python compiler (slow)")
    args = parser.parse_args()
    jit_dat.compile_dat([b"warm", b"up"])

    rows = []
    print(f"{'vocabulary':<12} {'order':<11} {'tokens':>7} {'states':>7} {'slots':>7} {'density':>8} {'MB':>5}"
          f" {'build ms':>9} {'reference s':>11}")
    for name in VOCABULARIES:
        ranks = load_tiktoken_bpe(find_vocabulary_file(name))
        tokens, ids = list(ranks), list(ranks.values())
        for order in ORDERS:
            build_cpu, build_wall, (base, check, values) = best_times(
                lambda: jit_dat.compile_dat(tokens, ids, order=order), args.repeat
            )
            states = int(np.count_nonzero(check >= 0)) + 1
            row = {
                "vocabulary": name,
                "order": order,
                "tokens": len(tokens),
                "states": states,
                "slots": len(check),
                "density": states / len(check),
                "megabytes": 3 * check.nbytes / 1e6,
                "build_ms": build_cpu * 1e3,
                "build_wall_ms": build_wall * 1e3,
            }
            if args.reference:
                started = time.perf_counter()
                reference = reference_dat.compile_dat(tokens, ids, order=order)
                row["reference_s"] = time.perf_counter() - started
                if not all(np.array_equal(a, b) for a, b in zip(reference, (base, check, values))):
                    raise SystemExit(f"MISMATCH: reference and jit DATs differ for {name} / {order}")
            rows.append(row)
            reference_column = f"{row['reference_s']:11.1f}" if args.reference else f"{'-':>11}"
            print(f"{name:<12} {order:<11} {len(tokens):7d} {states:7d} {len(check):7d} {row['density']:8.4f}"
                  f" {row['megabytes']:5.2f} {row['build_ms']:9.1f} {reference_column}")

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    machine = {"processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
               "load_average": os.getloadavg(), "python": platform.python_version()}
    report = {"machine": machine, "repeat": args.repeat, "timer": "thread CPU time (wall in *_wall_*)", "results": rows}
    RESULTS.write_text(json.dumps(report, indent=2))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()

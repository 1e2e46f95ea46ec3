"""Pre-tokenizer throughput: the jit state machines (crayon.jit.pretokenize) vs regex.findall, per corpus.

Single thread, whole corpus files of ../shared/corpora, best of several runs; checks that both give the same
spans. Both are timed by the calling thread's CPU time (what a quiet machine's wall clock would show; shared
machines inflate the wall clock) and by the wall clock. Prints a table and writes bench/results/pretokenize.json.

    python -m bench.pretokenize [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import regex

from crayon.jit.pretokenize import span_ends
from crayon.patterns import PATTERNS

ROOT = Path(__file__).resolve().parents[1]
CORPORA_DIR = ROOT.parent / "shared" / "corpora"
RESULTS = ROOT / "bench" / "results" / "pretokenize.json"
PATTERN_NAMES = ["r50k_base", "cl100k_base", "o200k_base"]


def best_times(function, repeat: int) -> tuple[float, float, object]:
    """Fastest thread CPU time and fastest wall time of ``repeat`` calls, and the last result."""
    best_cpu = best_wall = float("inf")
    for _ in range(repeat):
        cpu, wall = time.thread_time(), time.perf_counter()
        result = function()
        best_cpu = min(best_cpu, time.thread_time() - cpu)
        best_wall = min(best_wall, time.perf_counter() - wall)
    return best_cpu, best_wall, result


def regex_byte_ends(pieces: list[str]) -> np.ndarray:
    return np.cumsum([len(piece.encode()) for piece in pieces], dtype=np.int64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs of the jit kernel (regex runs twice)")
    args = parser.parse_args()
    corpora = sorted(path for path in CORPORA_DIR.glob("*") if path.suffix != ".md")
    if not corpora:
        raise SystemExit(f"no corpora in {CORPORA_DIR}")
    span_ends(b"warm up the compiled kernels", "cl100k_base")

    rows = []
    print(f"{'corpus':<20} {'pattern':<12} {'MB':>6} {'spans':>9} {'jit MB/s':>9} {'regex MB/s':>10} {'speedup':>8}"
          f" {'jit wall':>9} {'regex wall':>10}")
    for path in corpora:
        data = path.read_bytes()
        text = data.decode()
        megabytes = len(data) / 1e6
        for name in PATTERN_NAMES:
            compiled = regex.compile(PATTERNS[name])
            jit_cpu, jit_wall, ends = best_times(lambda: span_ends(data, name), args.repeat)
            regex_cpu, regex_wall, pieces = best_times(lambda: compiled.findall(text), 2)
            if not np.array_equal(ends, regex_byte_ends(pieces)):
                raise SystemExit(f"MISMATCH: jit and regex spans differ on {path.name} with {name}")
            row = {
                "corpus": path.name,
                "pattern": name,
                "bytes": len(data),
                "spans": int(ends.size),
                "jit_mb_per_s": megabytes / jit_cpu,
                "regex_mb_per_s": megabytes / regex_cpu,
                "jit_wall_mb_per_s": megabytes / jit_wall,
                "regex_wall_mb_per_s": megabytes / regex_wall,
            }
            row["speedup"] = row["jit_mb_per_s"] / row["regex_mb_per_s"]
            rows.append(row)
            print(
                f"{path.name:<20} {name:<12} {megabytes:6.2f} {row['spans']:9d} {row['jit_mb_per_s']:9.1f} "
                f"{row['regex_mb_per_s']:10.1f} {row['speedup']:7.1f}x {row['jit_wall_mb_per_s']:9.1f} "
                f"{row['regex_wall_mb_per_s']:10.1f}"
            )

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    machine = {
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "python": platform.python_version(),
    }
    report = {"machine": machine, "repeat": args.repeat, "timer": "thread CPU time (wall in *_wall_*)", "results": rows}
    RESULTS.write_text(json.dumps(report, indent=2))
    print(f"spans identical on every corpus; wrote {RESULTS}")


if __name__ == "__main__":
    main()

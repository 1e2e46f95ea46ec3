"""Where crayon's exact-BPE time goes, stage by stage, on the first megabyte of each shared corpus file.

Stages, each timed alone (process CPU time, best of ``--repeat``), one vocabulary at a time:

* ``pre-tokenizer``: the jit pre-tokenizer's span ends alone (``crayon.jit.pretokenize.span_ends``);
* ``kernel, first sight``: the engine's ``encode_ordinary_array`` (UTF-8 encoding, then the fused kernel:
  pre-tokenizer, piece caches, short-token table, span encoders; the tokens stay a numpy array) with the
  thread's piece caches and validity memo emptied first (not timed);
* ``kernel, repeated``: the same text again (every span of 2-16 bytes is a piece-cache hit);
* ``encode_ordinary, repeated``: the public call, which adds UTF-8 encoding and the Python list.

Differences between rows estimate a stage's cost: repeated kernel minus pre-tokenizer is the per-span lookup
path, first sight minus repeated the span encoders' work on cache misses, ``encode_ordinary`` minus the kernel
the Python side. Run it pinned (``taskset -c 0``) so that nothing moves the process between cores.

    taskset -c 0 python -m bench.span_stages [--repeat N]

Writes bench/results/span_stages.json.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from bench.peers import CORPORA_DIR, ENCODINGS, RESULTS

MEGABYTE = 1_000_000


def best_seconds(function, repeat: int, prepare=None) -> float:
    """The least process CPU time of ``repeat`` calls of ``function``, each after ``prepare()`` (not timed)."""
    best = float("inf")
    for _ in range(repeat):
        if prepare is not None:
            prepare()
        start = time.process_time()
        function()
        best = min(best, time.process_time() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    import crayon
    from crayon.jit.pretokenize import span_ends

    rows = []
    print(f"{'vocabulary':<12} {'corpus':<18} {'spans':>7} {'>16 B':>6} {'pretok':>7} {'first':>7} {'repeated':>8}"
          f" {'public':>7}   (ms per MB; public = encode_ordinary, repeated)")
    for name in ENCODINGS:
        tokenizer = crayon.load(name, backend="jit")
        engine = tokenizer.engine
        tokenizer.encode_ordinary("warm up " * 20_000)
        for path in sorted(p for p in CORPORA_DIR.glob("*") if p.suffix != ".md"):
            text = path.read_bytes()[:MEGABYTE].decode("utf-8", "ignore")
            encoded = text.encode()
            per_mb = 1e3 * MEGABYTE / len(encoded)

            ends = span_ends(encoded, name)
            lengths = np.diff(ends, prepend=0)
            row = {
                "vocabulary": name, "corpus": path.name, "bytes": len(encoded), "spans": len(ends),
                "share_of_spans_over_16_bytes": float((lengths > 16).mean()),
                "ms_per_mb": {
                    "pre-tokenizer": per_mb * best_seconds(lambda: span_ends(encoded, name), args.repeat),
                    "kernel, first sight": per_mb * best_seconds(lambda: engine.encode_ordinary_array(text), args.repeat,
                                                                 engine.clear_caches),
                    "kernel, repeated": per_mb * best_seconds(lambda: engine.encode_ordinary_array(text), args.repeat),
                    "encode_ordinary, repeated": per_mb * best_seconds(lambda: tokenizer.encode_ordinary(text), args.repeat),
                },
            }
            rows.append(row)
            ms = list(row["ms_per_mb"].values())
            print(f"{name:<12} {path.name:<18} {len(ends):>7} {row['share_of_spans_over_16_bytes']:>6.1%}"
                  + "".join(f" {value:>7.1f}" for value in ms[:2]) + f" {ms[2]:>8.1f} {ms[3]:>7.1f}", flush=True)
    print(f"load average: {os.getloadavg()}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "span_stages.json").write_text(json.dumps({"rows": rows, "load_average": os.getloadavg()}, indent=2))
    print(f"wrote {RESULTS / 'span_stages.json'}")


if __name__ == "__main__":
    main()

"""Swapping tokenizers in a warm process: what ``crayon.load`` and the first encode after it cost, beside tiktoken.

Measured in one process, the calls interleaved round by round so that they share the machine's load (median of
``--rounds`` calls each, milliseconds):

* ``crayon.load(path)`` of a cl100k_base cartridge, and ``crayon.load(path).encode("hello")`` (a profile swap
  per request);
* ``crayon.load("cl100k_base")`` by name (finds the cached cartridge, checks it is fresh, maps it);
* tiktoken's nearest equivalents: ``tiktoken.Encoding(...)`` built from ranks already in memory (what a process
  holding several vocabularies pays to make a new encoder) and the same followed by ``encode("hello")``; its
  ``get_encoding`` returns a cached object after the first call, so it is no swap.

    taskset -c 0 python -m bench.swap [--rounds N]

Writes bench/results/swap.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path

from bench.peers import RESULTS


def calls(cartridge: Path) -> dict:
    """label -> a function making the measured call once."""
    import crayon

    found = {
        "crayon.load(path)": lambda: crayon.load(cartridge),
        "crayon.load(path).encode('hello')": lambda: crayon.load(cartridge).encode("hello"),
        "crayon.load('cl100k_base')": lambda: crayon.load("cl100k_base"),
    }
    try:
        import tiktoken

        from crayon.profiles import OPENAI_ENCODINGS, find_vocabulary_file
        from crayon.formats.tiktoken_io import load_tiktoken_bpe
    except ImportError:
        return found
    spec = OPENAI_ENCODINGS["cl100k_base"]
    ranks = load_tiktoken_bpe(find_vocabulary_file("cl100k_base"))

    def tiktoken_encoding():
        return tiktoken.Encoding("cl100k_base", pat_str=spec.pattern, mergeable_ranks=ranks,
                                 special_tokens=spec.special_tokens)

    found["tiktoken.Encoding(...)"] = tiktoken_encoding
    found["tiktoken.Encoding(...).encode('hello')"] = lambda: tiktoken_encoding().encode("hello")
    return found


def measure(functions: dict, rounds: int) -> dict:
    """Median and best milliseconds per call of each function, interleaved (one call of each per round, in a
    shuffled order: a call right after tiktoken's big allocations would otherwise always pay for them)."""
    for function in functions.values():  # warm-up: kernels loaded, profile cached, id table built
        function()
    times = {label: [] for label in functions}
    order = list(functions.items())
    shuffle = random.Random(0).shuffle
    for _ in range(rounds):
        shuffle(order)
        for label, function in order:
            gc.collect()  # each call starts clean: no call pays for the garbage of the one before it
            start = time.perf_counter()
            function()
            times[label].append((time.perf_counter() - start) * 1e3)
    return {label: {"median_ms": statistics.median(values), "best_ms": min(values)} for label, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    import crayon

    with tempfile.TemporaryDirectory() as folder:
        cartridge = Path(folder) / "cl100k_base.crayon"
        crayon.load("cl100k_base").save(cartridge)
        results = measure(calls(cartridge), args.rounds)
    print(f"\nswap cost in a warm process, median of {args.rounds} interleaved calls (ms)")
    print(f"{'call':<42}{'median':>10}{'best':>10}")
    for label, row in results.items():
        print(f"{label:<42}{row['median_ms']:>10.3f}{row['best_ms']:>10.3f}")
    report = {"machine": platform.platform(), "python": platform.python_version(), "rounds": args.rounds,
              "results": results}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "swap.json").write_text(json.dumps(report, indent=2))
    print(f"wrote {RESULTS / 'swap.json'}")


if __name__ == "__main__":
    main()

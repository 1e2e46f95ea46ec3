"""Cartridge open time: ``open_cartridge`` on cl100k_base and o200k_base cartridges (DAT + token table).

Writes each cartridge to a temporary folder, then opens (and closes) it many times: the median is the cost of a
vocabulary swap once the file is in the page cache (mmap, header checks, numpy views; no parsing, no copies).
Also times ``verify=True`` (checksums and every invariant) and the first read of every page of the arrays.
Prints a table and writes bench/results/open.json.

    python -m bench.open [--opens N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from crayon.cartridge import BASE, CHECK, VALUES, open_cartridge, vocab_sections, write_cartridge
from crayon.jit.dat import compile_dat
from crayon.profiles import OPENAI_ENCODINGS, find_vocabulary_file
from crayon.formats.tiktoken_io import load_tiktoken_bpe

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "open.json"
VOCABULARIES = ["cl100k_base", "o200k_base"]


def timings_ms(function, count: int) -> list[float]:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        function()
        samples.append((time.perf_counter() - started) * 1e3)
    return samples


def write_openai_cartridge(name: str, path: Path) -> None:
    ranks = load_tiktoken_bpe(find_vocabulary_file(name))
    encoding = OPENAI_ENCODINGS[name]
    base, check, values = compile_dat(list(ranks), list(ranks.values()))
    metadata = {"name": name, "pattern": name, "algorithm": "bpe", "special_tokens": encoding.special_tokens}
    tokens = {rank: token for token, rank in ranks.items()}
    write_cartridge(path, metadata, {BASE: base, CHECK: check, VALUES: values, **vocab_sections(tokens)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--opens", type=int, default=2000)
    args = parser.parse_args()

    rows = []
    print(f"{'vocabulary':<12} {'file MB':>7} {'median open ms':>14} {'p90 ms':>7} {'verify ms':>9}"
          f" {'touch pages ms':>14}")
    with tempfile.TemporaryDirectory() as folder:
        for name in VOCABULARIES:
            path = Path(folder) / f"{name}.crayon"
            write_openai_cartridge(name, path)
            open_cartridge(path).close()  # page cache warm, as for any swap after the first load
            opens = timings_ms(lambda: open_cartridge(path).close(), args.opens)
            verify = timings_ms(lambda: open_cartridge(path, verify=True).close(), 5)

            def touch_every_page() -> None:
                with open_cartridge(path) as cartridge:
                    for array in cartridge.sections.values():
                        array.reshape(-1)[:: max(1, 4096 // array.itemsize)].sum()

            touch = timings_ms(touch_every_page, 20)
            row = {
                "vocabulary": name,
                "file_bytes": path.stat().st_size,
                "opens": args.opens,
                "median_open_ms": statistics.median(opens),
                "p90_open_ms": statistics.quantiles(opens, n=10)[-1],
                "median_verify_ms": statistics.median(verify),
                "median_open_and_touch_ms": statistics.median(touch),
            }
            rows.append(row)
            print(f"{name:<12} {row['file_bytes'] / 1e6:7.2f} {row['median_open_ms']:14.3f} {row['p90_open_ms']:7.3f}"
                  f" {row['median_verify_ms']:9.1f} {row['median_open_and_touch_ms']:14.2f}")

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    machine = {"processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
               "load_average": os.getloadavg(), "python": platform.python_version()}
    report = {"machine": machine, "timer": "wall clock, page cache warm", "results": rows}
    RESULTS.write_text(json.dumps(report, indent=2))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()

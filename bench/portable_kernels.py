"""Could the wheel ship precompiled kernels? The engine's entry kernels compiled for the host CPU against the same
kernels compiled for any x86-64 (LLVM's generic "x86-64" target, what a portable build would ship): build time,
size, the same tokens, and speed (thread CPU time, median of 9 alternating rounds in one process, cl100k_base and
o200k_base on 2 MB of big.txt and 1 MB of multilingual.txt).

    python -m bench.portable_kernels

Writes bench/results/portable_kernels.json.
"""

from __future__ import annotations

import importlib.util
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

import crayon
from bench.peers import RESULTS
from crayon.jit import aot
from crayon.jit.engine import JitEngine
from tests.conftest import corpus_text

TARGETS = {"host": None, "x86-64": "x86-64"}
ROUNDS = 9


def build(folder: Path, target: str | None) -> tuple[object, dict]:
    path = folder / aot.module_path().name
    started = time.perf_counter()
    aot.build_kernels(aot.module_name(), path, target_cpu=target)
    seconds = time.perf_counter() - started
    spec = importlib.util.spec_from_file_location(aot.module_name(), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, {"build_seconds": round(seconds, 1), "bytes": path.stat().st_size}


def main() -> None:
    report = {"machine": platform.platform(), "processor": platform.processor(), "targets": {}, "speed": []}
    modules = {}
    with tempfile.TemporaryDirectory() as scratch:
        for label, target in TARGETS.items():
            (Path(scratch) / label).mkdir()
            modules[label], report["targets"][label] = build(Path(scratch) / label, target)
            print(f"{label}: built in {report['targets'][label]['build_seconds']} s, "
                  f"{report['targets'][label]['bytes']} bytes")
        texts = {"big.txt": corpus_text("big.txt", 2_000_000), "multilingual.txt": corpus_text("multilingual.txt", 1_000_000)}
        print("\n| encoding | text | host MB/s | x86-64 MB/s | x86-64 time / host time |\n| --- | --- | --- | --- | --- |")
        for name in ("cl100k_base", "o200k_base"):
            tok = crayon.load(name)
            engines = {}
            for label, module in modules.items():
                engines[label] = JitEngine(tok, tables=tok.tables, kernels="aot")
                engines[label]._kernels = module
            for text_name, text in texts.items():
                tokens = {label: engine.encode_ordinary(text) for label, engine in engines.items()}
                assert tokens["host"] == tokens["x86-64"], "the portable kernels gave other tokens"
                seconds = {label: [] for label in engines}
                for _ in range(ROUNDS):
                    for label, engine in engines.items():
                        started = time.thread_time()
                        engine.encode_ordinary(text)
                        seconds[label].append(time.thread_time() - started)
                megabytes = len(text.encode("utf-8")) / 1e6
                row = {"encoding": name, "text": text_name,
                       **{f"{label} MB/s": round(megabytes / statistics.median(s), 1) for label, s in seconds.items()},
                       "ratio": round(statistics.median(seconds["x86-64"]) / statistics.median(seconds["host"]), 3)}
                report["speed"].append(row)
                print(f"| {name} | {text_name} | {row['host MB/s']} | {row['x86-64 MB/s']} | {row['ratio']} |")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "portable_kernels.json").write_text(json.dumps(report, indent=2))
    print(f"wrote {RESULTS / 'portable_kernels.json'}")


if __name__ == "__main__":
    main()

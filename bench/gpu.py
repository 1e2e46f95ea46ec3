"""GPU engine benchmark: exact BPE and longest match on a CUDA GPU against the JIT engine and tiktoken.

Needs a CUDA GPU with numba-cuda. Every GPU output is checked against the CPU's: identical tokens, not just
counts. Four parts, printed as tables and written to bench/results/gpu.json:

* corpora: each file of ../shared/corpora cut into documents of about 2 KB and repeated to ``--batch-mb``;
  end-to-end MB/s (Python strings in, flat token arrays out) of the GPU engine, the JIT engine on all CPU
  cores and on one, and tiktoken on all cores and on one. Goal: the GPU at least 10x the JIT on one core.
* decomposition: the same batch with several ``chunk_bytes`` (text bytes per GPU thread), with the time of
  each stage (upload, pre-tokenize, model, compact, download) and the number of chain fix-up passes.
* longest match: greedy longest match over the vocabulary's DAT, per pre-tokenizer span and over whole
  texts, GPU against ``crayon.jit.longest`` on one core. Goal: above 1 GB/s.
* stress: the seed's test, one text block of ``--stress-chars`` characters (about 100 M) with the
  ``--stress-profile`` vocabulary (the seed's "standard"; cl100k_base where no such profile is installed),
  GPU against the JIT engine; the token arrays must be identical.

    python -m bench.gpu [--encoding cl100k_base] [--batch-mb 32] [--stress-chars 100000000] [--repeat 3]
    python -m bench.gpu --quick      # small sizes, to check the script (runs under NUMBA_ENABLE_CUDASIM=1 too;
                                     # simulator timings mean nothing and go to bench/results/gpu_simulator.json)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

import crayon
from crayon.gpu import capacity
from crayon.jit.engine import JitEngine

ROOT = Path(__file__).resolve().parents[1]
CORPORA_DIR = ROOT.parent / "shared" / "corpora"
RESULTS_DIR = ROOT / "bench" / "results"
DOC_CHARS = 2000
CHUNK_SWEEP = (64, 128, 256, 512, 1024)


def best_wall(function, repeat: int):
    """Fastest wall time of ``repeat`` calls and the last result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - started)
    return best, result


def documents(text: str, target_chars: int) -> list[str]:
    """``text`` cut at line ends into documents of about DOC_CHARS characters, taken in a cycle until they
    hold ``target_chars`` characters."""
    docs, current, size = [], [], 0
    for line in text.splitlines(keepends=True):
        current.append(line)
        size += len(line)
        if size >= DOC_CHARS:
            docs.append("".join(current))
            current, size = [], 0
    if current:
        docs.append("".join(current))
    batch, total = [], 0
    while total < target_chars:
        batch.append(docs[len(batch) % len(docs)])
        total += len(batch[-1])
    return batch


def device_description() -> dict:
    from numba import config, cuda

    if config.ENABLE_CUDASIM:
        return {"name": "CUDA simulator (timings meaningless)", "simulator": True}
    device = cuda.get_current_device()
    free, total = cuda.current_context().get_memory_info()
    return {"name": device.name.decode() if isinstance(device.name, bytes) else str(device.name),
            "compute_capability": list(device.compute_capability), "memory_gib": round(total / 2**30, 1),
            "free_gib": round(free / 2**30, 1), "simulator": False}


def check_same(label: str, got: np.ndarray, expected: np.ndarray) -> None:
    if got.shape != expected.shape or not np.array_equal(got.astype(np.int64), expected.astype(np.int64)):
        differ = np.flatnonzero(got[: min(len(got), len(expected))] != expected[: min(len(got), len(expected))])
        raise SystemExit(f"{label}: GPU tokens differ from the CPU's ({len(got)} vs {len(expected)} tokens, "
                         f"first difference at {differ[0] if len(differ) else min(len(got), len(expected))})")


def bench_corpora(tokenizer, tiktoken_encoding, corpora, batch_chars, repeat, cores):
    from crayon.gpu.engine import make_engine

    gpu, jit = make_engine(tokenizer), JitEngine(tokenizer)
    rows = []
    print(f"\n{'corpus':<18} {'MB':>7} {'tokens':>11} {'GPU MB/s':>9} {'JIT all':>8} {'JIT 1':>7} "
          f"{'tiktoken all':>12} {'tiktoken 1':>10} {'GPU/JIT 1':>9} {'GPU/JIT all':>11}")
    for path in corpora:
        texts = documents(path.read_text(encoding="utf-8"), batch_chars)
        megabytes = sum(len(text.encode()) for text in texts) / 1e6
        gpu.encode_ordinary_flat(texts[:50])  # compile the kernels (first use), outside the timing
        gpu_seconds, (tokens, offsets) = best_wall(lambda: gpu.encode_ordinary_flat(texts), repeat)
        jit_all_seconds, (jit_tokens, jit_offsets) = best_wall(lambda: jit.encode_ordinary_flat(texts, cores), repeat)
        jit_one_seconds, _ = best_wall(lambda: jit.encode_ordinary_flat(texts, 1), 1)
        check_same(path.name, tokens, jit_tokens)
        check_same(path.name + " offsets", offsets, jit_offsets)
        tik_all_seconds, tik_lists = best_wall(lambda: tiktoken_encoding.encode_ordinary_batch(texts, num_threads=cores),
                                               1)
        tik_one_seconds, _ = best_wall(lambda: tiktoken_encoding.encode_ordinary_batch(texts, num_threads=1), 1)
        tik_tokens = np.fromiter((token for doc in tik_lists for token in doc), np.int64)
        check_same(path.name + " vs tiktoken", tokens, tik_tokens)
        row = {
            "corpus": path.name, "documents": len(texts), "megabytes": megabytes, "tokens": int(len(tokens)),
            "gpu_mb_s": megabytes / gpu_seconds, "jit_all_cores_mb_s": megabytes / jit_all_seconds,
            "jit_one_core_mb_s": megabytes / jit_one_seconds, "tiktoken_all_cores_mb_s": megabytes / tik_all_seconds,
            "tiktoken_one_core_mb_s": megabytes / tik_one_seconds, "batches": gpu.stats.batches,
        }
        rows.append(row)
        print(f"{path.name:<18} {megabytes:>7.1f} {len(tokens):>11,} {row['gpu_mb_s']:>9.1f} "
              f"{row['jit_all_cores_mb_s']:>8.1f} {row['jit_one_core_mb_s']:>7.1f} "
              f"{row['tiktoken_all_cores_mb_s']:>12.1f} {row['tiktoken_one_core_mb_s']:>10.1f} "
              f"{row['gpu_mb_s'] / row['jit_one_core_mb_s']:>8.1f}x {row['gpu_mb_s'] / row['jit_all_cores_mb_s']:>10.1f}x")
    return rows


def bench_decomposition(tokenizer, corpus: Path, batch_chars: int, repeat: int):
    from crayon.gpu.engine import make_engine

    texts = documents(corpus.read_text(encoding="utf-8"), batch_chars)
    megabytes = sum(len(text.encode()) for text in texts) / 1e6
    expected, _ = JitEngine(tokenizer).encode_ordinary_flat(texts)
    rows = []
    print(f"\ndecomposition on {corpus.name} ({megabytes:.1f} MB): seconds per stage (profiled: the GPU is waited for "
          "after each)")
    print(f"{'chunk bytes':>11} {'MB/s':>8} {'upload':>8} {'spans':>8} {'model':>8} {'compact':>8} {'download':>9} "
          f"{'fix passes':>10} {'long spans':>10}")
    for chunk_bytes in CHUNK_SWEEP:
        engine = make_engine(tokenizer, chunk_bytes=chunk_bytes)
        engine.encode_ordinary_flat(texts[:50])
        seconds, (tokens, _) = best_wall(lambda: engine.encode_ordinary_flat(texts), repeat)
        check_same(f"chunk_bytes={chunk_bytes}", tokens, expected)
        profiled = make_engine(tokenizer, chunk_bytes=chunk_bytes, profile=True)
        profiled.encode_ordinary_flat(texts)
        stages = profiled.stats.seconds
        rows.append({"chunk_bytes": chunk_bytes, "mb_s": megabytes / seconds, "stage_seconds": stages,
                     "fix_passes": profiled.stats.fix_passes, "long_spans": profiled.stats.long_spans})
        print(f"{chunk_bytes:>11} {megabytes / seconds:>8.1f} {stages.get('layout and upload', 0):>8.4f} "
              f"{stages.get('pre-tokenize', 0):>8.4f} {stages.get('model', 0):>8.4f} {stages.get('compact', 0):>8.4f} "
              f"{stages.get('download', 0):>9.4f} {max(profiled.stats.fix_passes, default=0):>10} "
              f"{profiled.stats.long_spans:>10}")
    return rows


def bench_longest(tokenizer, corpora, batch_chars: int, repeat: int):
    from crayon.gpu.engine import LongestMatchGpu
    from crayon.jit import longest
    from crayon.jit.dat import compile_dat
    from crayon.jit.pretokenize import span_ends
    from crayon.reference.longest import byte_fallback_ids

    vocabulary = tokenizer.model.ranks
    base, check, values = compile_dat(list(vocabulary), list(vocabulary.values()))
    fallback = byte_fallback_ids(base, check, values, tokenizer.n_vocab)
    share = batch_chars // len(corpora)
    texts = [doc for path in corpora for doc in documents(path.read_text(encoding="utf-8"), share)]
    encoded = [text.encode() for text in texts]
    data = np.frombuffer(b"".join(encoded), np.uint8)
    megabytes = len(data) / 1e6
    rows = []
    print(f"\nlongest match over the {tokenizer.name} DAT, all corpora ({megabytes:.1f} MB, {len(texts)} documents)")
    print(f"{'spans':<14} {'GPU MB/s':>9} {'jit 1 core MB/s':>15} {'speedup':>8} {'tokens':>12}")
    for pattern in (tokenizer.name, None):
        engine = LongestMatchGpu(base, check, values, fallback, pattern=pattern)
        engine.encode_flat(texts[:50])
        seconds, (ids, _) = best_wall(lambda: engine.encode_flat(texts), repeat)
        if pattern is None:
            ends = np.cumsum([len(e) for e in encoded if e])
        else:
            starts = np.cumsum([0, *map(len, encoded)])
            ends = np.concatenate([span_ends(e, pattern) + start for e, start in zip(encoded, starts)])
        cpu_seconds, expected = best_wall(lambda: longest.encode_spans(data, ends, base, check, values, fallback), 1)
        check_same(f"longest {pattern}", ids, expected)
        label = pattern or "whole texts"
        rows.append({"spans": label, "gpu_mb_s": megabytes / seconds, "jit_one_core_mb_s": megabytes / cpu_seconds,
                     "tokens": int(len(ids))})
        print(f"{label:<14} {megabytes / seconds:>9.1f} {megabytes / cpu_seconds:>15.1f} "
              f"{cpu_seconds / seconds:>7.1f}x {len(ids):>12,}")
    return rows


def bench_stress(profile: str, corpora, chars: int):
    from crayon.gpu.engine import make_engine

    try:
        tokenizer = crayon.load(profile, backend="jit")
    except Exception as unavailable:  # noqa: BLE001 - any reason the profile cannot load: say it, use cl100k
        print(f"\nstress: profile {profile!r} is not available ({unavailable}); using cl100k_base")
        tokenizer = crayon.load("cl100k_base", backend="jit")
    corpus = "".join(path.read_text(encoding="utf-8") for path in corpora)
    block = (corpus * (chars // len(corpus) + 1))[:chars]
    mebibytes = len(block.encode()) / 2**20
    gpu = make_engine(tokenizer)
    gpu.encode_ordinary_flat([block[:10000]])
    started = time.perf_counter()
    tokens, _ = gpu.encode_ordinary_flat([block])
    gpu_seconds = time.perf_counter() - started
    started = time.perf_counter()
    cpu_tokens = JitEngine(tokenizer).encode_ordinary_array(block)
    cpu_seconds = time.perf_counter() - started
    check_same("stress", tokens, cpu_tokens)
    print(f"\nstress test: one block of {chars:,} characters ({mebibytes:.2f} MiB), {tokenizer.name}; "
          f"GPU plan: {gpu.stats.batches} batch(es), {gpu.stats.oversized_documents} oversized document(s), "
          f"{gpu.stats.long_spans} long spans, {gpu.stats.cpu_spans} spans on the CPU")
    print(f"{'device':<8} {'total tokens':>14} {'time (s)':>10} {'MiB/s':>9} {'M tokens/s':>11}")
    rows = []
    for device, seconds in (("CPU", cpu_seconds), ("CUDA", gpu_seconds)):
        rows.append({"device": device, "tokens": int(len(tokens)), "seconds": seconds, "mib_s": mebibytes / seconds,
                     "m_tokens_s": len(tokens) / seconds / 1e6})
        print(f"{device:<8} {len(tokens):>14,} {seconds:>10.3f} {mebibytes / seconds:>9.2f} "
              f"{len(tokens) / seconds / 1e6:>11.2f}")
    return {"profile": tokenizer.name, "characters": chars, "mebibytes": mebibytes, "identical_tokens": True,
            "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoding", default="cl100k_base")
    parser.add_argument("--batch-mb", type=float, default=32, help="characters per corpus batch, in millions")
    parser.add_argument("--stress-chars", type=int, default=100_000_000)
    parser.add_argument("--stress-profile", default="standard")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: check that the script runs")
    args = parser.parse_args()
    if args.quick:
        args.batch_mb, args.stress_chars, args.repeat = 0.02, 30_000, 1

    available, reason = capacity.cuda_status()
    if not available:
        raise SystemExit(f"no CUDA device: {reason}")
    corpora = sorted(path for path in CORPORA_DIR.glob("*") if path.suffix != ".md")
    if not corpora:
        raise SystemExit(f"no corpora in {CORPORA_DIR}")
    cores = os.cpu_count() or 1
    batch_chars = int(args.batch_mb * 1e6)
    tokenizer = crayon.load(args.encoding, backend="jit")
    encoding = tiktoken_encoding(tokenizer)
    device = device_description()
    print(f"device: {device['name']}; {cores} CPU cores; {args.encoding}; batches of {batch_chars:,} characters "
          f"per corpus")
    results = {
        "device": device, "cpu_cores": cores, "cpu": platform.processor() or platform.machine(),
        "encoding": args.encoding, "batch_chars": batch_chars, "repeat": args.repeat,
        "corpora": bench_corpora(tokenizer, encoding, corpora, batch_chars, args.repeat, cores),
        "decomposition": bench_decomposition(tokenizer, CORPORA_DIR / "english_web.txt", batch_chars, args.repeat),
        "longest_match": bench_longest(tokenizer, corpora, batch_chars, args.repeat),
        "stress": bench_stress(args.stress_profile, corpora, args.stress_chars),
    }
    name = "gpu_simulator.json" if device["simulator"] else ("gpu_quick.json" if args.quick else "gpu.json")
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / name).write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {RESULTS_DIR / name}")


def tiktoken_encoding(tokenizer):
    """tiktoken's encoder for the same vocabulary and pattern (offline: built from the loaded ranks)."""
    import tiktoken

    return tiktoken.Encoding(name=tokenizer.name, pat_str=tokenizer.pattern, mergeable_ranks=tokenizer.model.ranks,
                             special_tokens=tokenizer.special_tokens)


if __name__ == "__main__":
    main()

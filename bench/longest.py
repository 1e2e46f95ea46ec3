"""Greedy longest match (jit) over cl100k_base's vocabulary, per corpus, beside tiktoken's exact BPE encode.

Longest match is NOT BPE: it gives other (usually more) tokens, so the speeds compare different outputs (the
seed compared them as if they were the same). Spans come from the jit cl100k pre-tokenizer; "model" times only
the longest-match kernel on those spans, "+spans" adds the pre-tokenizer, like tiktoken's encode_ordinary which
includes its regex. Also times the ASCII fast path. Single thread, best of several runs, thread CPU time (wall
clock in the JSON). Prints a table and writes bench/results/longest.json.

    python -m bench.longest [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path

import numpy as np
import tiktoken

from bench.pretokenize import best_times
from crayon.jit.dat import compile_dat
from crayon.jit.longest import encode_spans
from crayon.jit.pretokenize import span_ends
from crayon.profiles import OPENAI_ENCODINGS, find_vocabulary_file
from crayon.reference.longest import LongestMatchModel
from crayon.formats.tiktoken_io import load_tiktoken_bpe

ROOT = Path(__file__).resolve().parents[1]
CORPORA_DIR = ROOT.parent / "shared" / "corpora"
RESULTS = ROOT / "bench" / "results" / "longest.json"
NAME = "cl100k_base"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    corpora = sorted(path for path in CORPORA_DIR.glob("*") if path.suffix != ".md")
    if not corpora:
        raise SystemExit(f"no corpora in {CORPORA_DIR}")

    ranks = load_tiktoken_bpe(find_vocabulary_file(NAME))
    encoding = OPENAI_ENCODINGS[NAME]
    reference = tiktoken.Encoding(
        NAME, pat_str=encoding.pattern, mergeable_ranks=ranks, special_tokens=encoding.special_tokens
    )
    first_reserved = reference.n_vocab
    model = LongestMatchModel({rank: token for token, rank in ranks.items()},
                              *compile_dat(list(ranks), list(ranks.values())), first_reserved)
    dat, fallback = (model.base, model.check, model.values), model.fallback
    warm_up = np.frombuffer(b"warm up", np.uint8)
    for fast in (False, True):
        encode_spans(warm_up, span_ends(b"warm up", NAME), *dat, fallback, ascii_fast_path=fast)

    rows = []
    print("longest-match, not BPE: its tokens differ from tiktoken's; speeds compare different outputs")
    print(f"{'corpus':<18} {'MB':>5} {'model MB/s':>10} {'M tok/s':>8} {'+spans MB/s':>11} {'ascii8 MB/s':>11}"
          f" {'tiktoken MB/s':>13} {'M tok/s':>8} {'tokens vs BPE':>13}")
    for path in corpora:
        data = path.read_bytes()
        text = data.decode("utf-8")
        array = np.frombuffer(data, np.uint8)
        megabytes = len(data) / 1e6
        ends = span_ends(data, NAME)
        model_cpu, model_wall, ids = best_times(lambda: encode_spans(array, ends, *dat, fallback), args.repeat)
        fast_cpu, _, fast_ids = best_times(
            lambda: encode_spans(array, ends, *dat, fallback, ascii_fast_path=True), args.repeat
        )
        full_cpu, _, _ = best_times(lambda: encode_spans(array, span_ends(data, NAME), *dat, fallback), args.repeat)
        tiktoken_cpu, tiktoken_wall, bpe_ids = best_times(lambda: reference.encode_ordinary(text), 2)
        if not np.array_equal(ids, fast_ids) or b"".join(map(model.token_bytes.__getitem__, ids.tolist())) != data:
            raise SystemExit(f"longest match failed its round trip on {path.name}")
        row = {
            "corpus": path.name,
            "bytes": len(data),
            "tokens": int(len(ids)),
            "bpe_tokens": len(bpe_ids),
            "model_mb_per_s": megabytes / model_cpu,
            "model_tokens_per_s": len(ids) / model_cpu,
            "model_wall_mb_per_s": megabytes / model_wall,
            "with_spans_mb_per_s": megabytes / full_cpu,
            "ascii_fast_path_mb_per_s": megabytes / fast_cpu,
            "tiktoken_mb_per_s": megabytes / tiktoken_cpu,
            "tiktoken_tokens_per_s": len(bpe_ids) / tiktoken_cpu,
            "tiktoken_wall_mb_per_s": megabytes / tiktoken_wall,
        }
        rows.append(row)
        print(
            f"{path.name:<18} {megabytes:5.2f} {row['model_mb_per_s']:10.1f} {row['model_tokens_per_s'] / 1e6:8.2f}"
            f" {row['with_spans_mb_per_s']:11.1f} {row['ascii_fast_path_mb_per_s']:11.1f}"
            f" {row['tiktoken_mb_per_s']:13.1f} {row['tiktoken_tokens_per_s'] / 1e6:8.2f}"
            f" {len(ids) / len(bpe_ids) - 1:+12.1%}"
        )

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    machine = {"processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
               "load_average": os.getloadavg(), "python": platform.python_version()}
    report = {"algorithm": "greedy longest match, not BPE", "vocabulary": NAME, "machine": machine,
              "repeat": args.repeat, "timer": "thread CPU time (wall in *_wall_*)", "results": rows}
    RESULTS.write_text(json.dumps(report, indent=2))
    print(f"round trips lossless on every corpus; wrote {RESULTS}")


if __name__ == "__main__":
    main()

"""transformers' fast tokenizer vs crayon.hf.CrayonTokenizerFast on the same tokenizer.json: one call
``tokenizer(batch, padding=True, return_tensors="np")``, the same arrays checked, per corpus.

The model folders are byte-level BPEs trained here with HF's trainer (tools/hf_model_folder.py): "cl100k-split"
pre-tokenizes with cl100k's pattern in the Split form Crayon writes (Crayon runs its compiled spanner),
"gpt2-bytelevel" with HF's ByteLevel regex (Crayon runs its Python reference spanner). The batch is each
corpus cut into documents of about ``--doc-chars`` characters. Times are wall clock (both tokenizers use every
core) and process CPU; best of ``--repeat`` calls after one warm-up call. Prints a table and writes
bench/results/transformers_adapter.json.

    python -m bench.transformers_adapter [--repeat N] [--doc-chars N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CORPORA_DIR = ROOT.parent / "shared" / "corpora"
RESULTS = ROOT / "bench" / "results" / "transformers_adapter.json"
CORPORA = ["english_web.txt", "multilingual.txt", "python_code.py", "enwik8_head.xml"]


def documents(path: Path, doc_chars: int, total_chars: int) -> list[str]:
    text = path.read_text(encoding="utf-8", errors="replace")[:total_chars]
    return [text[start : start + doc_chars] for start in range(0, len(text), doc_chars)]


def best_time(function, repeat: int) -> tuple[float, float, object]:
    """(best wall seconds, best process CPU seconds, last result) over ``repeat`` calls after one warm-up."""
    result = function()
    best_wall = best_cpu = float("inf")
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        result = function()
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    return best_wall, best_cpu, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--doc-chars", type=int, default=2000)
    parser.add_argument("--batch-chars", type=int, default=2_000_000, help="characters per corpus batch")
    args = parser.parse_args()

    import transformers

    from crayon.hf import CrayonTokenizerFast
    from tools.hf_model_folder import write_model_folder

    training = (CORPORA_DIR / "english_web.txt").read_text()[:1_000_000].split("\n")
    training += (CORPORA_DIR / "multilingual.txt").read_text()[:300_000].split("\n")
    rows = []
    print(f"{'folder':<16} {'corpus':<18} {'docs':>5} {'MB':>5} {'hf s':>7} {'crayon s':>8} {'speedup':>7}"
          f" {'hf cpu s':>8} {'crayon cpu s':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        for label, pattern in [("cl100k-split", "cl100k_base"), ("gpt2-bytelevel", "gpt2")]:
            folder = write_model_folder(Path(tmp) / label, training, vocab_size=8000, pattern=pattern)
            hf = transformers.AutoTokenizer.from_pretrained(folder)
            crayon_hf = CrayonTokenizerFast.from_pretrained(folder)
            for corpus in CORPORA:
                batch = documents(CORPORA_DIR / corpus, args.doc_chars, args.batch_chars)
                call = {"padding": True, "return_tensors": "np"}
                hf_wall, hf_cpu, expected = best_time(lambda: hf(batch, **call), args.repeat)
                crayon_wall, crayon_cpu, got = best_time(lambda: crayon_hf(batch, **call), args.repeat)
                if expected.keys() != got.keys() or not all(np.array_equal(expected[k], got[k]) for k in expected):
                    raise SystemExit(f"MISMATCH: arrays differ on {label} {corpus}")
                megabytes = sum(len(doc.encode()) for doc in batch) / 1e6
                row = {"folder": label, "corpus": corpus, "documents": len(batch), "megabytes": megabytes,
                       "shape": list(got["input_ids"].shape), "hf_wall_s": hf_wall, "crayon_wall_s": crayon_wall,
                       "speedup": hf_wall / crayon_wall, "hf_cpu_s": hf_cpu, "crayon_cpu_s": crayon_cpu,
                       "crayon_backend": crayon_hf.crayon.backend}
                rows.append(row)
                print(f"{label:<16} {corpus:<18} {len(batch):>5} {megabytes:>5.2f} {hf_wall:>7.3f} {crayon_wall:>8.3f}"
                      f" {row['speedup']:>6.1f}x {hf_cpu:>8.3f} {crayon_cpu:>12.3f}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "call": 'tokenizer(batch, padding=True, return_tensors="np")',
        "transformers": transformers.__version__, "cpus": os.cpu_count(), "platform": platform.platform(),
        "repeat": args.repeat, "doc_chars": args.doc_chars, "rows": rows}, indent=1))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()

"""CPU time of ``write_tokens`` on JSON Lines and separator-split documents: the main thread's versus the workers'.

Builds (once, in ``--workdir``) a JSON Lines file of ``{"text": ...}`` lines and the same documents split by a
separator, from the shared corpora's paragraphs repeated to ``--megabytes``; then, in a child per run (pinned
with ``taskset -c 0`` when ``--pin``), encodes each with ``write_tokens(threads=N)`` and reports wall time, the
process's CPU time and the main thread's (the rest is the workers'). The main thread's share of the CPU time is
work that does not spread over the workers (the workers' ``json.loads`` holds the GIL too, which this accounting
does not see).
``--crayon DIR`` measures the crayon of another checkout (the previous implementation) in the same run.

    python bench/pipeline_documents.py --workdir /tmp/docs --megabytes 50 --pin --crayon /work/main
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT.parent / "shared" / "corpora"
SEPARATOR = "\n<|doc|>\n"

CHILD = r"""
import json, sys, time
import crayon
path, mode, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
tok = crayon.load("cl100k_base")
tok.encode_ordinary("warm up the kernels")
options = {"jsonl_field": "text"} if mode == "jsonl" else {"separator": sys.argv[4]}
cpu, main, wall = time.process_time(), time.thread_time(), time.perf_counter()
summary = tok.write_tokens([path], path + ".bin", threads=threads, **options)
print(json.dumps({"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu,
                  "main_cpu_s": time.thread_time() - main, "tokens": summary["tokens"],
                  "documents": summary["documents"]}))
"""


def build_inputs(workdir: Path, megabytes: float) -> dict[str, Path]:
    """The JSON Lines file and the separator file (same documents), built once."""
    workdir.mkdir(parents=True, exist_ok=True)
    jsonl, split = workdir / f"docs-{megabytes:g}mb.jsonl", workdir / f"docs-{megabytes:g}mb.txt"
    if not jsonl.exists() or not split.exists():
        paragraphs = [p for f in sorted(CORPORA.iterdir()) if f.suffix != ".md"
                      for p in f.read_text(encoding="utf-8", errors="replace").split("\n\n") if p.strip()]
        documents, size, i = [], 0, 0
        while size < megabytes * 1e6:
            document = "\n\n".join(paragraphs[i % len(paragraphs) : i % len(paragraphs) + 5])
            documents.append(document)
            size += len(document.encode("utf-8"))
            i += 5
        jsonl.write_text("".join(json.dumps({"text": d}) + "\n" for d in documents), encoding="utf-8")
        split.write_text(SEPARATOR.join(documents), encoding="utf-8")
    return {"jsonl": jsonl, "separator": split}


def measure(crayon_root: Path, path: Path, mode: str, threads: int, pin: bool) -> dict:
    command = [sys.executable, "-c", CHILD, str(path), mode, str(threads), SEPARATOR]
    if pin:
        command = ["taskset", "-c", "0", *command]
    child = subprocess.run(command, cwd=crayon_root, env={**os.environ, "PYTHONPATH": str(crayon_root)},
                           capture_output=True, text=True, check=True)
    return json.loads(child.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--megabytes", type=float, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--pin", action="store_true", help="run each child on CPU 0 (CPU-time figures only)")
    parser.add_argument("--crayon", type=Path, action="append", default=[], help="also measure this checkout")
    args = parser.parse_args()
    inputs = build_inputs(args.workdir, args.megabytes)
    roots = [ROOT, *args.crayon]
    rows = {}
    for _ in range(args.repeat):  # interleaved: every configuration once per round
        for root in roots:
            for mode, path in inputs.items():
                for threads in args.threads:
                    rows.setdefault((str(root), mode, threads), []).append(measure(root, path, mode, threads, args.pin))
    table = []
    print(f"{'crayon':<16} {'input':<10} {'threads':>7} {'wall s':>7} {'CPU s':>7} {'main CPU s':>10} "
          f"{'workers CPU s':>13} {'main share':>10}")
    for (root, mode, threads), runs in rows.items():
        median = {key: statistics.median(run[key] for run in runs) for key in ("wall_s", "cpu_s", "main_cpu_s")}
        workers = median["cpu_s"] - median["main_cpu_s"]
        share = median["main_cpu_s"] / median["cpu_s"]
        table.append({"crayon": root, "input": mode, "threads": threads, **median, "workers_cpu_s": workers,
                      "main_share": share, "tokens": runs[0]["tokens"], "documents": runs[0]["documents"],
                      "megabytes": args.megabytes, "pinned": args.pin, "runs": len(runs)})
        print(f"{Path(root).name:<16} {mode:<10} {threads:>7} {median['wall_s']:>7.2f} {median['cpu_s']:>7.2f} "
              f"{median['main_cpu_s']:>10.2f} {workers:>13.2f} {share:>10.0%}")
    out = ROOT / "bench" / "results" / "pipeline_documents.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(table, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

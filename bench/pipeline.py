"""The dataset pipeline on real data: Debian's linux-source-6.1 (well over 1 GB of C and documentation).

Fetches the package (``apt-get download linux-source-6.1`` in ``--workdir``, ``apt-get update`` first if needed),
unpacks its ``.tar.xz`` and takes every regular file that is valid UTF-8 as one document (sorted by path). Then,
with cl100k_base, each measurement in a fresh process (cold piece caches, its own peak RSS):

* exactness: the shard ``crayon encode --files-from LIST -o X.bin`` writes equals, document by document, a
  single-threaded ``encode_ordinary`` of each whole file: on the shared corpora and on the full kernel source;
* memory: peak RSS of ``crayon encode`` on the first ``--subset-mb`` MB of files and on the full source;
* throughput on the subset, as its files and as one file (their concatenation): ``Tokenizer.write_tokens`` with 1
  and 2 threads, and the in-memory single call (files read beforehand, not timed): ``encode_ordinary(text)`` of
  the one file, ``encode_ordinary_batch(texts, num_threads=1)`` of the files; on the files also tiktoken's
  ``encode_ordinary_batch(texts, num_threads=2)`` and HF tokenizers' ``encode_batch`` (RAYON_NUM_THREADS=2); all
  in one run, interleaved over ``--rounds`` rounds (medians). Besides wall-clock MB/s, each case reports MB per
  CPU second, the cores it kept busy (CPU / wall time) and, for ``write_tokens``, the main thread's CPU time:
  on a shared machine the wall clock measures the neighbours as much as the code, and the 1-thread run's CPU
  accounting bounds what 2 threads can reach on two idle cores (workers' CPU W, main thread's M: 2W / (W + M));
* Ray: ``crayon.ray_data.write_shard`` on a local instance (``ray.init(num_cpus=2)``) over a JSON Lines file of
  the first ``--ray-mb`` MB, against the local ``write_tokens`` of the same file (same shard, wall time ratio).

The machine is shared: the load average before and after each measurement is recorded. Each round runs Crayon's
cases first and the peers' last, and waits ``SETTLE_SECONDS`` after a case that used over 1 GB: on the 2-vCPU VM
this was written on, a 2-thread case run right after HF's (5 GB peak RSS) kept only 1.56 of 2 cores busy (135
MB/s) against 1.93 (157 MB/s) a case later, the host taking the memory back.

    python -m bench.pipeline [--workdir DIR] [--subset-mb 100] [--rounds 3] [--ray-mb 20] [--skip-full]

Prints a table; writes bench/results/pipeline.json.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPORA_DIR = ROOT.parent / "shared" / "corpora"
RESULTS = ROOT / "bench" / "results"
PYTHON = sys.executable
ENCODING = "cl100k_base"
PEERS = ("tiktoken", "hf")
SETTLE_SECONDS = 10  # after a case that used over 1 GB (HF's takes 5 GB): see the module docstring


# ------------------------------------------------------------------------------------------------ the data


def prepare_linux(workdir: Path) -> Path:
    """The unpacked kernel source tree under ``workdir`` (downloaded and unpacked on first use)."""
    tree = workdir / "src"
    if (workdir / "unpacked").exists():
        return next(tree.iterdir())
    workdir.mkdir(parents=True, exist_ok=True)
    if not glob.glob(str(workdir / "linux-source-6.1_*.deb")):
        if subprocess.run(["apt-get", "download", "linux-source-6.1"], cwd=workdir).returncode != 0:
            subprocess.run(["apt-get", "update"], check=True)
            subprocess.run(["apt-get", "download", "linux-source-6.1"], cwd=workdir, check=True)
    deb = glob.glob(str(workdir / "linux-source-6.1_*.deb"))[0]
    subprocess.run(["dpkg-deb", "-x", deb, str(workdir / "deb")], check=True)
    tree.mkdir(exist_ok=True)
    archive = glob.glob(str(workdir / "deb" / "usr" / "src" / "linux-source-6.1*.tar.xz"))[0]
    subprocess.run(["tar", "-xJf", archive, "-C", str(tree)], check=True)
    (workdir / "unpacked").touch()
    return next(tree.iterdir())


def utf8_files(root: Path) -> tuple[list[Path], int]:
    """Regular files under ``root`` that are valid UTF-8, sorted by path; and how many were skipped."""
    files, skipped = [], 0
    for folder, subfolders, names in os.walk(root):
        subfolders.sort()
        for name in sorted(names):
            path = Path(folder) / name
            if path.is_symlink() or not path.is_file():
                continue
            try:
                path.read_bytes().decode("utf-8")
                files.append(path)
            except UnicodeDecodeError:
                skipped += 1
    return files, skipped


def first_megabytes(files: list[Path], megabytes: float) -> list[Path]:
    chosen, total = [], 0
    for path in files:
        if total >= megabytes * 1e6:
            break
        chosen.append(path)
        total += path.stat().st_size
    return chosen


def total_bytes(files: list[Path]) -> int:
    return sum(path.stat().st_size for path in files)


# ------------------------------------------------------------------------------------------- measurements


# Run as a Python child's first statement: print its peak RSS at exit. The kernel's ru_maxrss would not do: it
# keeps the high-water mark of the forked parent across exec.
PEAK_RSS_AT_EXIT = ("import atexit, sys; atexit.register(lambda: print('PEAK_RSS_KB', open('/proc/self/status')"
                    ".read().split('VmHWM:')[1].split()[0], file=sys.stderr))")


def run_measured(command: list[str], env: dict | None = None) -> dict:
    """Run a Python command (``[PYTHON, "-c", code, ...]``); its wall time, peak RSS (MB, the process's own
    VmHWM), exit status and stdout, with the load average around it."""
    command = [*command[:2], f"{PEAK_RSS_AT_EXIT}\n{command[2]}", *command[3:]]
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    child = subprocess.run(command, cwd=ROOT, env={**os.environ, **(env or {})}, capture_output=True, text=True)
    peak = [line.split()[1] for line in child.stderr.splitlines() if line.startswith("PEAK_RSS_KB")]
    return {"wall_s": time.perf_counter() - started, "peak_rss_mb": int(peak[-1]) / 1024 if peak else None,
            "status": child.returncode, "stdout": child.stdout, "stderr_tail": child.stderr[-2000:],
            "load_before": load_before, "load_after": os.getloadavg()[0]}


def crayon_encode(listing: Path, output: Path, threads: int) -> dict:
    """``crayon encode`` as a user runs it (the console script's module, run as ``__main__``), measured."""
    cli = "import runpy, sys; sys.argv[0] = 'crayon'; runpy.run_module('crayon.cli', run_name='__main__')"
    result = run_measured([PYTHON, "-c", cli, "encode", "--files-from", str(listing), "-o", str(output),
                           "--tokenizer", ENCODING, "--threads", str(threads), "--quiet"])
    if result["status"] != 0:
        raise RuntimeError(f"crayon encode failed: {result}")
    return result


def check_shard(shard: Path, files: list[Path]) -> dict:
    """Compare a shard with a single-threaded whole-document encode_ordinary of every file."""
    import crayon
    from crayon.shards import read_shard

    tok = crayon.load(ENCODING)
    tokens, meta = read_shard(shard)
    offsets = meta["document_offsets"]
    mismatched = [str(path) for i, path in enumerate(files)
                  if tokens[offsets[i] : offsets[i + 1]].tolist() != tok.encode_ordinary(path.read_bytes().decode())]
    return {"documents": len(files), "tokens": int(meta["tokens"]), "mismatched_documents": len(mismatched),
            "first_mismatches": mismatched[:5], "exact": not mismatched and meta["documents"] == len(files)}


CHILD = r"""
import json, os, sys, time
listing, case = sys.argv[1], sys.argv[2]
files = open(listing, encoding="utf-8").read().split("\n")
size = sum(os.path.getsize(f) for f in files)
cpu_started = None
def report(seconds, tokens, main_cpu_seconds=None):
    print(json.dumps({"seconds": seconds, "cpu_seconds": time.process_time() - cpu_started, "tokens": tokens,
                      "bytes": size, "main_cpu_seconds": main_cpu_seconds}))
if case.startswith("crayon_file"):
    import crayon, tempfile
    tok = crayon.load("cl100k_base")
    tok.encode_ordinary("warm up the kernels")
    out = os.path.join(tempfile.mkdtemp(), "x.bin")
    cpu_started, started, main_started = time.process_time(), time.perf_counter(), time.thread_time()
    summary = tok.write_tokens(files, out, threads=int(case[-1]))
    report(time.perf_counter() - started, summary["tokens"], time.thread_time() - main_started)
    os.unlink(out)
    sys.exit()
texts = [open(f, "rb").read().decode() for f in files]
if case == "crayon_memory":
    import crayon
    tok = crayon.load("cl100k_base")
    tok.engine.long_texts.threads = 1  # one thread: a text of 1 MB or more would otherwise be cut over every core
    tok.encode_ordinary("warm up the kernels")
    cpu_started, started = time.process_time(), time.perf_counter()
    tokens = [tok.encode_ordinary(texts[0])] if len(texts) == 1 else tok.encode_ordinary_batch(texts, num_threads=1)
elif case == "tiktoken":
    sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
    import tiktoken
    from crayon.profiles import OPENAI_ENCODINGS, find_vocabulary_file
    from crayon.formats.tiktoken_io import load_tiktoken_bpe
    spec = OPENAI_ENCODINGS["cl100k_base"]
    enc = tiktoken.Encoding(name="cl100k_base", pat_str=spec.pattern, special_tokens=spec.special_tokens,
                            mergeable_ranks=load_tiktoken_bpe(find_vocabulary_file("cl100k_base")))
    enc.encode_ordinary("warm up")
    cpu_started, started = time.process_time(), time.perf_counter()
    tokens = enc.encode_ordinary_batch(texts, num_threads=2)
elif case == "hf":
    from tokenizers import Tokenizer
    hf = Tokenizer.from_file(sys.argv[3])
    hf.encode("warm up", add_special_tokens=False)
    cpu_started, started = time.process_time(), time.perf_counter()
    tokens = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
report(time.perf_counter() - started, sum(map(len, tokens)))
"""

RAY_CHILD = r"""
import json, sys, time, os, tempfile
import crayon
jsonl = sys.argv[1]
tok = crayon.load("cl100k_base")
folder = tempfile.mkdtemp()
started = time.perf_counter()
local = tok.write_tokens([jsonl], os.path.join(folder, "local.bin"), jsonl_field="text")
local_s = time.perf_counter() - started
import ray, crayon.ray_data
from crayon.shards import read_shard
started = time.perf_counter()
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
init_s = time.perf_counter() - started
started = time.perf_counter()
crayon.ray_data.write_shard(ray.data.read_json(jsonl), os.path.join(folder, "ray.bin"), tok)
ray_s = time.perf_counter() - started
same = read_shard(os.path.join(folder, "ray.bin"))[0].tolist() == read_shard(os.path.join(folder, "local.bin"))[0].tolist()
print(json.dumps({"local_s": local_s, "ray_init_s": init_s, "ray_s": ray_s, "same_shard": same,
                  "bytes": local["bytes"], "tokens": local["tokens"]}))
"""


def measure_case(listing: Path, case: str, hf_json: Path) -> dict:
    result = run_measured([PYTHON, "-c", CHILD, str(listing), case, str(hf_json)],
                          env={"RAYON_NUM_THREADS": "2", "PYTHONPATH": str(ROOT)})
    if result["status"] != 0:
        raise RuntimeError(f"{case} failed: {result}")
    measured = json.loads(result["stdout"].strip().splitlines()[-1])
    return {**measured, "mb_per_s": measured["bytes"] / 1e6 / measured["seconds"],
            "mb_per_cpu_s": measured["bytes"] / 1e6 / measured["cpu_seconds"],
            "cores_used": measured["cpu_seconds"] / measured["seconds"],
            "mtokens_per_s": measured["tokens"] / 1e6 / measured["seconds"], "peak_rss_mb": result["peak_rss_mb"],
            "load_before": result["load_before"], "load_after": result["load_after"]}


def write_listing(files: list[Path], path: Path) -> Path:
    path.write_text("\n".join(map(str, files)), encoding="utf-8")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "crayon-bench-linux")
    parser.add_argument("--subset-mb", type=float, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ray-mb", type=float, default=20)
    parser.add_argument("--skip-full", action="store_true", help="no full-source run (memory, exactness)")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="crayon-bench-pipeline-"))
    report: dict = {"machine": {"python": platform.python_version(), "cpus": len(os.sched_getaffinity(0)),
                                "note": "shared machine: other work ran at the same time; see load averages"}}

    # exactness on the shared corpora
    corpora = sorted(CORPORA_DIR.glob("*.*"))
    corpora = [path for path in corpora if path.name != "README.md"]
    crayon_encode(write_listing(corpora, scratch / "corpora.list"), scratch / "corpora.bin", threads=2)
    report["corpora_exact"] = check_shard(scratch / "corpora.bin", corpora)
    print(f"shared corpora: exact={report['corpora_exact']['exact']} ({report['corpora_exact']['tokens']:,} tokens)")

    root = prepare_linux(args.workdir)
    files, skipped = utf8_files(root)
    subset = first_megabytes(files, args.subset_mb)
    report["linux"] = {"root": str(root), "files": len(files), "bytes": total_bytes(files), "skipped_not_utf8": skipped,
                       "subset_files": len(subset), "subset_bytes": total_bytes(subset)}
    print(f"linux-source-6.1: {len(files):,} UTF-8 files, {total_bytes(files) / 1e6:,.0f} MB ({skipped} not UTF-8, "
          f"skipped); subset {len(subset):,} files, {total_bytes(subset) / 1e6:,.0f} MB")
    subset_list = write_listing(subset, scratch / "subset.list")

    # memory: crayon encode on the subset and on the full source; exactness on the full source
    runs = {"subset": crayon_encode(subset_list, scratch / "subset.bin", threads=2)}
    if not args.skip_full:
        runs["full"] = crayon_encode(write_listing(files, scratch / "full.list"), scratch / "full.bin", threads=2)
        (scratch / "subset.bin").unlink()
        report["linux_exact"] = check_shard(scratch / "full.bin", files)
        print(f"kernel source: exact={report['linux_exact']['exact']} ({report['linux_exact']['tokens']:,} tokens)")
        (scratch / "full.bin").unlink()
    report["crayon_encode"] = {name: {key: run[key] for key in ("wall_s", "peak_rss_mb", "load_before", "load_after")}
                               for name, run in runs.items()}

    # throughput on the subset, interleaved rounds
    import crayon

    hf_json = scratch / "cl100k_tokenizer.json"
    crayon.load(ENCODING).export(hf_json, format="hf")
    one_file = scratch / "one.txt"
    with open(one_file, "wb") as out:  # the subset as one file: one document, cut into chunks
        for path in subset:
            out.write(path.read_bytes())
    listings = {"files": subset_list, "one_file": write_listing([one_file], scratch / "one.list")}
    cases = {"files": ["crayon_file_1", "crayon_file_2", "crayon_memory", "tiktoken", "hf"],
             "one_file": ["crayon_file_1", "crayon_file_2", "crayon_memory"]}
    rounds = {(data, case): [] for data, names in cases.items() for case in names}
    order = sorted(rounds, key=lambda data_case: data_case[1] in PEERS)  # Crayon's cases first, then the peers'
    for _ in range(args.rounds):
        for data, case in order:
            rounds[data, case].append(measure_case(listings[data], case, hf_json))
            if rounds[data, case][-1]["peak_rss_mb"] > 1000:
                time.sleep(SETTLE_SECONDS)
    report["throughput"] = {data: {case: summarize(rounds[data, case]) for case in names}
                            for data, names in cases.items()}
    report["ratios"] = {data: ratios(report["throughput"][data]) for data in cases}

    # Ray on a local instance
    try:
        import ray  # noqa: F401

        jsonl = scratch / "ray.jsonl"
        with open(jsonl, "w", encoding="utf-8") as out:
            for path in first_megabytes(files, args.ray_mb):
                out.write(json.dumps({"text": path.read_bytes().decode()}) + "\n")
        result = run_measured([PYTHON, "-c", RAY_CHILD, str(jsonl)], env={"PYTHONPATH": str(ROOT)})
        report["ray"] = json.loads(result["stdout"].strip().splitlines()[-1])
        report["ray"]["overhead"] = report["ray"]["ray_s"] / report["ray"]["local_s"]
    except ImportError:
        report["ray"] = {"skipped": "ray is not installed (pip install 'crayon[ray]')"}

    print_table(report)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "pipeline.json").write_text(json.dumps(report, indent=2, default=str))
    print(f"wrote {RESULTS / 'pipeline.json'}")


def summarize(results: list[dict]) -> dict:
    """Medians over rounds (peak RSS: the largest), with the rounds."""
    summary = {key: statistics.median(r[key] for r in results)
               for key in ("mb_per_s", "mtokens_per_s", "mb_per_cpu_s", "cores_used")}
    if results[0]["main_cpu_seconds"] is not None:
        summary["main_cpu_s"] = statistics.median(r["main_cpu_seconds"] for r in results)
        summary["cpu_s"] = statistics.median(r["cpu_seconds"] for r in results)
    return {**summary, "peak_rss_mb": max(r["peak_rss_mb"] for r in results), "rounds": results}


def ratios(rows: dict) -> dict:
    """The targets' ratios by wall clock, and the 2-thread speed-up the CPU accounting of the 1-thread run allows
    on two idle cores: with W the workers' CPU time and M the main thread's, one worker takes about W (the main
    thread runs beside it on the other core) and two take at least (W + M) / 2."""
    one = rows["crayon_file_1"]
    workers = one["cpu_s"] - one["main_cpu_s"]
    return {"2_workers_over_1": rows["crayon_file_2"]["mb_per_s"] / one["mb_per_s"],
            "1_worker_over_in_memory": one["mb_per_s"] / rows["crayon_memory"]["mb_per_s"],
            "1_worker_over_in_memory_cpu": one["mb_per_cpu_s"] / rows["crayon_memory"]["mb_per_cpu_s"],
            "2_workers_bound_from_cpu": 2 * workers / one["cpu_s"]}


def print_table(report: dict) -> None:
    subset_mb = report["linux"]["subset_bytes"] / 1e6
    names = {"crayon_file_1": "crayon write_tokens, 1 thread", "crayon_file_2": "crayon write_tokens, 2 threads",
             "crayon_memory": "crayon in memory, 1 call, 1 thread",
             "tiktoken": "tiktoken encode_ordinary_batch, 2 threads", "hf": "HF tokenizers encode_batch, 2 threads"}
    titles = {"files": f"{subset_mb:.0f} MB of kernel source, {report['linux']['subset_files']:,} files",
              "one_file": f"the same {subset_mb:.0f} MB as one file"}
    for data, rows in report["throughput"].items():
        print(f"\n{titles[data]:46} {'MB/s':>8} {'Mtok/s':>8} {'MB/CPU-s':>9} {'cores':>6} {'main CPU s':>11} "
              f"{'peak RSS MB':>12}")
        for case, row in rows.items():
            main = f"{row['main_cpu_s']:.2f}" if "main_cpu_s" in row else ""
            print(f"{names[case]:46} {row['mb_per_s']:8.1f} {row['mtokens_per_s']:8.2f} {row['mb_per_cpu_s']:9.1f} "
                  f"{row['cores_used']:6.2f} {main:>11} {row['peak_rss_mb']:12.0f}")
        ratio = report["ratios"][data]
        print(f"2 threads / 1 thread: {ratio['2_workers_over_1']:.2f}x (target >= 1.8; the 1-thread run's CPU "
              f"accounting allows at most {ratio['2_workers_bound_from_cpu']:.2f}x on two idle cores); "
              f"1 thread / in memory: {ratio['1_worker_over_in_memory']:.2f}x (target >= 0.9; per CPU-second "
              f"{ratio['1_worker_over_in_memory_cpu']:.2f}x)")
    for name, run in report["crayon_encode"].items():
        print(f"crayon encode --threads 2, {name}: peak RSS {run['peak_rss_mb']:.0f} MB, wall {run['wall_s']:.1f} s")
    ray = report["ray"]
    if "overhead" in ray:
        print(f"Ray local (2 CPUs), {ray['bytes'] / 1e6:.0f} MB JSON Lines: same shard={ray['same_shard']}, "
              f"{ray['ray_s']:.1f} s vs local {ray['local_s']:.1f} s ({ray['overhead']:.2f}x; ray.init "
              f"{ray['ray_init_s']:.1f} s not included)")


if __name__ == "__main__":
    main()

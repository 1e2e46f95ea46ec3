"""Exact BPE on one core: crayon beside fastokens, quicktok and tiktoken, the protocol of issue 15.

Run it pinned to one CPU (``taskset -c 0``; the script refuses to run on more unless ``--unpinned``). For each
vocabulary (cl100k_base, o200k_base), each round and each shared corpus file: every library starts fresh (crayon's
caches emptied, new fastokens and quicktok objects; tiktoken keeps none), warms up on other text (the first 64 kB
of each other corpus file), then encodes the file cut in 8 parts, each part once ("first sight"), then the same 8
parts again ("repeated"). The libraries take turns part by part, so they share the machine's load. A library's
time for a file is the sum over its 8 parts of process CPU time (every thread of the process, so a library that
spawned threads is not flattered); the table shows the median over rounds as MB/s and crayon's time over the
peer's (above 1: crayon is slower). Every part's ids are compared with tiktoken's.

    taskset -c 0 python -m bench.fastokens [--rounds N] [--quick] [--before OLD.json]

Writes bench/results/fastokens.json. ``--before`` names the JSON of an earlier run (say, of an older checkout:
``git archive OLD | tar -x -C DIR``, then this script from DIR, its corpora found at DIR/../shared/corpora) and
prints the two side by side: crayon's MB/s and its time over fastokens' then and now (each ratio measured within
its own run, so a change in the machine's load between the runs moves the ratios less than the MB/s); the JSON
keeps both.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from bench.peers import CORPORA_DIR, ENCODINGS, RESULTS

PARTS = 8
WARM_UP_BYTES = 64_000
PASSES = ("first sight", "repeated")


def libraries(name: str, vocabulary_dir: Path) -> dict:
    """label -> (make, encode_ordinary): ``make()`` returns a fresh encoder state, ``encode(state, text)`` the ids."""
    import fastokens
    import quicktok
    import tiktoken

    import crayon
    from crayon.formats.tiktoken_io import load_tiktoken_bpe
    from crayon.profiles import OPENAI_ENCODINGS, find_vocabulary_file

    encoding = OPENAI_ENCODINGS[name]  # tiktoken gets crayon's copy of the pattern and ranks: no download
    source = find_vocabulary_file(name)
    plain = vocabulary_dir / f"{name}.tiktoken"
    opener = gzip.open if source.name.endswith(".gz") else open
    with opener(source, "rb") as handle:
        plain.write_bytes(handle.read())

    crayon_tokenizer = crayon.load(name, backend="jit")

    def fresh_crayon():
        crayon_tokenizer.engine.clear_caches()
        return crayon_tokenizer

    tiktoken_encoding = tiktoken.Encoding(name, pat_str=encoding.pattern,
                                          mergeable_ranks=load_tiktoken_bpe(source), special_tokens={})
    return {
        "crayon": (fresh_crayon, lambda tok, text: tok.encode_ordinary(text)),
        # naming the encoding selects fastokens' own pre-tokenizer for it (several times faster than the pattern)
        "fastokens": (lambda: fastokens.Tokenizer.from_tiktoken(str(plain), encoding=name),
                      lambda tok, text: tok.encode_ordinary(text).ids),
        "quicktok": (lambda: quicktok.Tokenizer(name, ""), lambda tok, text: tok.encode_ordinary(text)),
        "tiktoken": (lambda: tiktoken_encoding, lambda enc, text: enc.encode_ordinary(text)),
    }


def cut(text: str, parts: int) -> list[str]:
    """``text`` in ``parts`` pieces of about equal length (cut on character boundaries)."""
    size = -(-len(text) // parts)
    return [text[i:i + size] for i in range(0, len(text), size)]


def measure_file(found: dict, parts: list[str], warm_up: str) -> dict:
    """Per pass and library: seconds (process CPU, wall) summed over the parts, and whether every part's ids match."""
    states = {}
    for label, (make, encode) in found.items():
        states[label] = make()
        encode(states[label], warm_up)
    result = {p: {label: {"cpu": 0.0, "wall": 0.0, "same": True} for label in found} for p in PASSES}
    for pass_name in PASSES:
        for part in parts:
            ids = {}
            for label, (_, encode) in found.items():
                start_cpu, start_wall = time.process_time(), time.perf_counter()
                ids[label] = encode(states[label], part)
                row = result[pass_name][label]
                row["cpu"] += time.process_time() - start_cpu
                row["wall"] += time.perf_counter() - start_wall
            for label in found:
                result[pass_name][label]["same"] &= ids[label] == ids["tiktoken"]
    return result


def before_after(before: dict, after: dict) -> list[dict]:
    """Rows of both runs matched by vocabulary, corpus and pass: crayon's MB/s and its time over fastokens'."""
    old = {(row["vocabulary"], row["corpus"], row["pass"]): row for row in before["rows"]}
    table = []
    print("\nbefore -> after (crayon MB/s; crayon's time over fastokens', above 1: fastokens is faster)")
    print(f"{'vocabulary':<12} {'corpus':<18} {'pass':<12} {'MB/s before':>11} {'after':>7} {'c/fastok before':>15}"
          f" {'after':>6}")
    for row in after["rows"]:
        key = (row["vocabulary"], row["corpus"], row["pass"])
        if key not in old:
            continue
        entry = {"vocabulary": key[0], "corpus": key[1], "pass": key[2],
                 "crayon_mb_per_s": [old[key]["mb_per_s"]["crayon"], row["mb_per_s"]["crayon"]],
                 "crayon_time_over_fastokens": [old[key]["crayon_time_over_peer"]["fastokens"],
                                                row["crayon_time_over_peer"]["fastokens"]]}
        table.append(entry)
        print(f"{key[0]:<12} {key[1]:<18} {key[2]:<12} {entry['crayon_mb_per_s'][0]:>11.1f} "
              f"{entry['crayon_mb_per_s'][1]:>7.1f} {entry['crayon_time_over_fastokens'][0]:>15.2f} "
              f"{entry['crayon_time_over_fastokens'][1]:>6.2f}")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="first 400 kB of each corpus, one round")
    parser.add_argument("--unpinned", action="store_true", help="run although the process may use several CPUs")
    parser.add_argument("--before", type=Path, help="the JSON of an earlier run, printed side by side with this one")
    args = parser.parse_args()
    cpus = os.sched_getaffinity(0)
    if len(cpus) != 1 and not args.unpinned:
        raise SystemExit(f"this process may run on CPUs {sorted(cpus)}: run it under `taskset -c 0` (or --unpinned)")
    rounds = 1 if args.quick else args.rounds
    corpora = sorted(path for path in CORPORA_DIR.glob("*") if path.suffix != ".md")
    texts = {path.name: path.read_text(encoding="utf-8") for path in corpora}
    if args.quick:
        texts = {name: text[:400_000] for name, text in texts.items()}
    vocabulary_dir = Path(tempfile.mkdtemp(prefix="bench-fastokens-"))
    report = {"machine": platform.platform(), "cpus_allowed": sorted(cpus), "rounds": rounds, "parts": PARTS,
              "load_average_start": os.getloadavg(), "rows": []}
    peers = ["fastokens", "quicktok", "tiktoken"]
    print(f"{'vocabulary':<12} {'corpus':<18} {'pass':<12} " + " ".join(f"{label:>9}" for label in ["crayon"] + peers)
          + "  " + " ".join(f"{'c/' + label[:6]:>9}" for label in peers) + "  same")
    for name in ENCODINGS:
        found = libraries(name, vocabulary_dir)
        for file_name, text in texts.items():
            warm_up = "".join(other[:WARM_UP_BYTES] for other_name, other in texts.items() if other_name != file_name)
            parts = cut(text, PARTS)
            megabytes = len(text.encode()) / 1e6
            runs = [measure_file(found, parts, warm_up) for _ in range(rounds)]
            for pass_name in PASSES:
                cpu = {label: [run[pass_name][label]["cpu"] for run in runs] for label in found}
                wall = {label: [run[pass_name][label]["wall"] for run in runs] for label in found}
                same = {label: all(run[pass_name][label]["same"] for run in runs) for label in found}
                # crayon's time over the peer's, round by round, median over rounds
                ratio = {label: statistics.median(c / p for c, p in zip(cpu["crayon"], cpu[label])) for label in peers}
                row = {"vocabulary": name, "corpus": file_name, "pass": pass_name, "bytes": len(text.encode()),
                       "mb_per_s": {label: megabytes / statistics.median(cpu[label]) for label in found},
                       "wall_mb_per_s": {label: megabytes / statistics.median(wall[label]) for label in found},
                       "cpu_seconds": cpu, "crayon_time_over_peer": ratio, "identical_to_tiktoken": same}
                report["rows"].append(row)
                print(f"{name:<12} {file_name:<18} {pass_name:<12} "
                      + " ".join(f"{row['mb_per_s'][label]:9.1f}" for label in ["crayon"] + peers) + "  "
                      + " ".join(f"{ratio[label]:9.2f}" for label in peers)
                      + "  " + ("yes" if all(same.values()) else "NO: " + ",".join(k for k, v in same.items() if not v)),
                      flush=True)
    report["load_average_end"] = os.getloadavg()
    print(f"load average: start {report['load_average_start']}, end {report['load_average_end']}")
    if args.before:
        report["before"] = {"file": str(args.before), "rows": before_after(json.loads(args.before.read_text()), report)}
    RESULTS.mkdir(parents=True, exist_ok=True)
    output = RESULTS / ("fastokens-quick.json" if args.quick else "fastokens.json")
    output.write_text(json.dumps(report, indent=2))
    print(f"wrote {output}")


if __name__ == "__main__":
    main()

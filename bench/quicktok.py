"""Crayon against quicktok on the encodings quicktok ships besides OpenAI's: Llama 3 and Qwen (2.5 / 3).

quicktok (pip package ``quicktok-v1``) compiles each pre-tokenizer grammar by hand and encodes as tiktoken does.
Its bundled vocabularies are read here, offline, as tiktoken-style ranks; Crayon encodes them with the model's
pre-tokenizer regex, on cl100k's hand-written machine (Qwen's after HF's NFC normalizer, which the jit engine
applies first): what ``crayon.load("llama3.tiktoken", pattern=...)`` gives (the file is written to
``--workdir``). Crayon's ids must equal tiktoken's (the same ranks and regex; the run fails otherwise); column
"quicktok wrong" counts the inputs (the text, or lines) where quicktok's ids differ from tiktoken's. HF tokenizers
runs the equivalent tokenizer.json (merges derived from the ranks, ``ignore_merges``); its ids are shown as same
or not: for Llama 3, whose vocabulary has tokens no merge reaches, HF's merge-list BPE differs from tiktoken's on
some Japanese text.
Single thread; each repetition times every peer once, in turn (interleaved); the table shows medians of process
CPU time. Pin the process for single-core figures:

    taskset -c 0 python -m bench.quicktok [--bytes-per-corpus N] [--repeat N] [--workdir DIR]

Rows: the whole text as one call (``encode_ordinary``), and its lines as one batch (crayon ``encode_batch_flat``
and quicktok ``encode_batch``, both flat arrays; HF ``encode_batch``, single thread). Writes
bench/results/quicktok.json.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import statistics
import struct
import time
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # HF tokenizers single thread (set before it is imported)

import quicktok  # noqa: E402
import tiktoken  # noqa: E402
import tokenizers  # noqa: E402

import crayon  # noqa: E402
from crayon.formats.hf_io import tokenizer_to_hf  # noqa: E402
from crayon.formats.hf_normalize import UnicodeNormalizer  # noqa: E402
from crayon.reference.bpe import BytePairModel  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CORPORA_DIR = ROOT.parent / "shared" / "corpora"
RESULTS = ROOT / "bench" / "results" / "quicktok.json"
QUICKTOK_DATA = Path(quicktok.__file__).parent / "data"
# The pre-tokenizer regexes of Meta's Llama 3 and of Qwen 2.5 / 3 tokenizer.json files (Qwen: one digit a span).
ENCODINGS = {
    "llama3": (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+", None),
    "qwen3": (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
              r"|\s*[\r\n]+|\s+(?!\S)|\s+", {"type": "NFC"}),
}


def quicktok_ranks(name: str) -> tuple[dict[bytes, int], dict[str, int]]:
    """(ranks, special tokens) of a bundled quicktok encoding: ``NAME.vocab`` is a u32 count then (u16 length,
    bytes, u32 rank) records, ``NAME.special`` a u32 count then (u32 id, u16 length, UTF-8) records."""
    ranks: dict[bytes, int] = {}
    data = (QUICKTOK_DATA / f"{name}.vocab").read_bytes()
    (count,), pos = struct.unpack_from("<I", data), 4
    for _ in range(count):
        (length,) = struct.unpack_from("<H", data, pos)
        token = data[pos + 2 : pos + 2 + length]
        (rank,) = struct.unpack_from("<I", data, pos + 2 + length)
        ranks[token] = rank
        pos += 6 + length
    specials: dict[str, int] = {}
    data = (QUICKTOK_DATA / f"{name}.special").read_bytes()
    (count,), pos = struct.unpack_from("<I", data), 4
    for _ in range(count):
        token_id, length = struct.unpack_from("<IH", data, pos)
        specials[data[pos + 6 : pos + 6 + length].decode("utf-8")] = token_id
        pos += 6 + length
    return ranks, specials


def reachable_merges(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """The HF merges of tiktoken-style ranks, as Llama 3's file lists them: each token that merge-rank BPE over
    the lower ranks reaches as two parts gets that merge; the others (Llama 3 has some, such as ``.:.:``) only
    ever come from the whole-span lookup (``ignore_merges``)."""
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        parts = [token[i : i + 1] for i in range(len(token))]
        while len(parts) > 2:
            pairs = [(ranks.get(a + b, rank), i) for i, (a, b) in enumerate(zip(parts, parts[1:]))]
            best, i = min(pairs)
            if best >= rank:
                break
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        if len(parts) == 2:
            merges.append((parts[0], parts[1]))
    return merges


def tokenizer_json(name: str, folder: Path) -> Path:
    """The model's tokenizer.json, built once from quicktok's files: NFC for Qwen, Split(regex, Isolated) then
    ByteLevel without its regex, BPE with ``ignore_merges`` (tiktoken's whole-span lookup), as the Llama 3 and
    Qwen files have it."""
    path = folder / f"{name}.tokenizer.json"
    if path.exists():
        return path
    pattern, normalizer = ENCODINGS[name]
    ranks, specials = quicktok_ranks(name)
    tok = crayon.Tokenizer(name, BytePairModel(ranks, reachable_merges(ranks), ignore_merges=True),
                           pattern=pattern, special_tokens=specials, backend="reference")
    config = tokenizer_to_hf(tok)
    config["normalizer"] = normalizer
    config["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
    ]}
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
    partial.rename(path)
    return path


def interleaved(peers: dict, repeat: int) -> tuple[dict[str, float], dict[str, object]]:
    """Median process CPU seconds of each peer's call over ``repeat`` rounds, each round calling every peer once
    in turn; and each peer's last result."""
    times: dict[str, list[float]] = {name: [] for name in peers}
    results = {}
    for _ in range(repeat):
        for name, call in peers.items():
            start = time.process_time()
            results[name] = call()
            times[name].append(time.process_time() - start)
    return {name: statistics.median(values) for name, values in times.items()}, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bytes-per-corpus", type=int, default=500_000, help="leading bytes of each corpus file")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/crayon-bench-quicktok"))
    args = parser.parse_args()
    corpora = sorted(path for path in CORPORA_DIR.glob("*") if path.suffix != ".md")
    if not corpora:
        raise SystemExit(f"no corpora in {CORPORA_DIR}")
    text = "".join(path.read_bytes()[: args.bytes_per_corpus].decode("utf-8", "ignore") for path in corpora)
    lines = [line for line in text.split("\n") if line]
    megabytes = len(text.encode("utf-8")) / 1e6
    args.workdir.mkdir(parents=True, exist_ok=True)
    print(f"text: the first {args.bytes_per_corpus} bytes of {len(corpora)} corpus files, {megabytes:.2f} MB "
          f"({len(lines)} lines); median process CPU time of {args.repeat} interleaved rounds; quicktok "
          f"{quicktok.__version__}, tokenizers {tokenizers.__version__}\n")
    print(f"{'encoding':<8} {'input':<6} {'crayon MB/s':>12} {'quicktok MB/s':>14} {'HF MB/s':>9} "
          f"{'vs quicktok':>12} {'vs HF':>7}  {'ids':<9} {'quicktok wrong':>14} {'HF ids':>7}")
    rows = []
    for name in ENCODINGS:
        path = tokenizer_json(name, args.workdir)
        pattern, normalizer = ENCODINGS[name]
        ranks, specials = quicktok_ranks(name)
        tiktoken_file = args.workdir / f"{name}.tiktoken"
        if not tiktoken_file.exists():
            partial = tiktoken_file.with_suffix(".partial")
            partial.write_text("".join(f"{base64.b64encode(token).decode()} {rank}\n"
                                       for token, rank in sorted(ranks.items(), key=lambda item: item[1])))
            partial.rename(tiktoken_file)
        tok = crayon.load(tiktoken_file, pattern=pattern, special_tokens=specials, backend="jit")
        if normalizer is not None:
            tok = crayon.Tokenizer(name, tok.model, pattern=pattern, special_tokens=specials,
                                   normalizer=UnicodeNormalizer(normalizer["type"]), backend="jit")
        if tok.engine.pattern_id is None and tok.engine.compiled_splits is None:
            raise SystemExit(f"{name}: the pre-tokenizer runs in Python")
        machine = "hand-written machine" if tok.engine.pattern_id is not None else "compiled regex"
        print(f"{name}: crayon's pre-tokenizer: {machine}")
        quick = quicktok.get_encoding(name)
        oracle = tiktoken.Encoding(name=name, pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
        oracle_lines = [line if normalizer is None else tok.normalizer(line) for line in lines]  # tiktoken: no NFC
        oracle_text = text if normalizer is None else tok.normalizer(text)
        hf = tokenizers.Tokenizer.from_file(str(path))
        tok.encode_ordinary(text[:2000])
        tok.encode_batch_flat(lines[:100], num_threads=1)
        for what, peers in {
            "text": {"crayon": lambda: tok.encode_ordinary(text),
                     "quicktok": lambda: quick.encode_ordinary(text),
                     "hf": lambda: hf.encode(text, add_special_tokens=False).ids},
            "lines": {"crayon": lambda: tok.encode_batch_flat(lines, num_threads=1, disallowed_special=()),
                      "quicktok": lambda: quick.encode_batch(lines, 1),
                      "hf": lambda: [encoding.ids for encoding in hf.encode_batch(lines, add_special_tokens=False)]},
        }.items():
            seconds, results = interleaved(peers, args.repeat)
            if what == "text":
                crayon_lists, quick_lists, hf_lists = [results["crayon"]], [list(results["quicktok"])], [results["hf"]]
                expected = [oracle.encode_ordinary(oracle_text)]
            else:
                (tokens, offsets), (quick_tokens, quick_offsets) = results["crayon"], results["quicktok"]
                crayon_lists = [tokens[offsets[i] : offsets[i + 1]].tolist() for i in range(len(lines))]
                quick_lists = [quick_tokens[quick_offsets[i] : quick_offsets[i + 1]].tolist()
                               for i in range(len(lines))]
                hf_lists, expected = results["hf"], oracle.encode_ordinary_batch(oracle_lines, num_threads=1)
            same = crayon_lists == expected
            quick_differs = sum(ids != right for ids, right in zip(quick_lists, expected))
            same_hf = crayon_lists == hf_lists
            speed = {peer: megabytes / value for peer, value in seconds.items()}
            rows.append({"encoding": name, "input": what, "mb_per_s": speed, "seconds": seconds, "same_ids": same,
                         "hf_same_ids": same_hf, "quicktok_inputs_differing_from_tiktoken": quick_differs,
                         "vs_quicktok": speed["crayon"] / speed["quicktok"], "vs_hf": speed["crayon"] / speed["hf"]})
            print(f"{name:<8} {what:<6} {speed['crayon']:12.1f} {speed['quicktok']:14.1f} {speed['hf']:9.1f} "
                  f"{rows[-1]['vs_quicktok']:11.2f}x {rows[-1]['vs_hf']:6.1f}x  {'same' if same else 'DIFFERENT':<9} "
                  f"{quick_differs:>14} {'same' if same_hf else 'differ':>7}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "rows": rows, "megabytes": megabytes, "lines": len(lines), "bytes_per_corpus": args.bytes_per_corpus,
        "repeat": args.repeat, "machine": platform.platform(), "quicktok": quicktok.__version__,
        "tokenizers": tokenizers.__version__,
    }, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    if not all(row["same_ids"] for row in rows):
        raise SystemExit("the ids differ")


if __name__ == "__main__":
    main()

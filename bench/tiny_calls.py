"""Per-call overhead: many ``encode(word)`` calls on one-word strings, crayon beside tiktoken (cl100k_base).

Two workloads of ``--calls`` calls each, the libraries interleaved in ``--rounds`` rounds (best round reported):

* ``corpus words``: the words of big.txt in order (``str.split``), each with its leading space as a tokenizer
  sees it mid-sentence; they repeat as words do in text.
* ``distinct``: strings that never repeat (a word and a counter), so no per-call cache can answer them.

Each round uses a newly loaded crayon tokenizer, so its memory of short texts (``Tokenizer.encode``) starts
empty. Both libraries' tokens are compared on the first 20,000 calls of each workload.

    taskset -c 0 python -m bench.tiny_calls [--calls N] [--rounds N]

Writes bench/results/tiny_calls.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import time

from bench.peers import CORPORA_DIR, RESULTS


def workloads(calls: int) -> dict[str, list[str]]:
    words = (CORPORA_DIR / "big.txt").read_text(encoding="utf-8").split()
    corpus = [" " + word for word in (words * (1 + calls // len(words)))[:calls]]
    return {"corpus words": corpus, "distinct": [f" {word}{i}" for i, word in enumerate(corpus)]}


def run(encode, texts: list[str]) -> float:
    gc.collect()
    start = time.perf_counter()
    for text in texts:
        encode(text)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import tiktoken

    import crayon

    from crayon.formats.tiktoken_io import load_tiktoken_bpe
    from crayon.profiles import OPENAI_ENCODINGS, find_vocabulary_file

    spec = OPENAI_ENCODINGS["cl100k_base"]
    encoding = tiktoken.Encoding("cl100k_base", pat_str=spec.pattern, special_tokens=spec.special_tokens,
                                 mergeable_ranks=load_tiktoken_bpe(find_vocabulary_file("cl100k_base")))
    libraries = {"crayon": lambda: crayon.load("cl100k_base").encode, "tiktoken": lambda: encoding.encode}
    report = {"machine": platform.platform(), "python": platform.python_version(), "calls": args.calls, "results": {}}
    print(f"\n{args.calls:,} calls of encode(word), cl100k_base, best of {args.rounds} rounds")
    print(f"{'workload':<14}{'library':<10}{'seconds':>9}{'us/call':>9}{'vs tiktoken':>13}")
    for workload, texts in workloads(args.calls).items():
        check = texts[: min(len(texts), 20_000)]
        crayon_encode, tiktoken_encode = libraries["crayon"](), libraries["tiktoken"]()
        assert [crayon_encode(t) for t in check] == [tiktoken_encode(t) for t in check], workload
        best = {name: float("inf") for name in libraries}
        for _ in range(args.rounds):
            if workload == "distinct":  # every round's strings are new to any cache
                texts = [text + "x" for text in texts]
            for name, encoder in libraries.items():
                best[name] = min(best[name], run(encoder(), texts))
        report["results"][workload] = best
        for name, seconds in best.items():
            print(f"{workload:<14}{name:<10}{seconds:>9.3f}{seconds / args.calls * 1e6:>9.2f}"
                  f"{seconds / best['tiktoken']:>12.2f}x")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "tiny_calls.json").write_text(json.dumps(report, indent=2))
    print(f"wrote {RESULTS / 'tiny_calls.json'}")


if __name__ == "__main__":
    main()

"""Extending cl100k_base by N tokens on the multilingual corpus: compression gained, compression kept, ids kept, time.

One run, with the public calls a user writes:

- ``tok = crayon.load("cl100k_base")``; ``tok.extend(files=["multilingual.txt"], n_new_tokens=N)`` (the jit trainer:
  words counted from the file, encoded by cl100k's jit engine, merged on from cl100k's 100,256 tokens);
- a fresh vocabulary of the same added size, ``crayon.train(files=["multilingual.txt"], vocab_size=256 + N + 1)``
  (the 256 byte tokens, N learned, ``<|endoftext|>``), for the compression a vocabulary made for the corpus gets;
- bytes per token (UTF-8 bytes / tokens of ``encode_ordinary``) of cl100k, the extension and the fresh
  vocabulary on the multilingual corpus (in-sample: the whole file, as trained) and, as a check on
  over-fitting, on the last 10% of its lines for an extension and a fresh vocabulary trained on the first 90%;
  and on the English corpora big.txt and english_web.txt;
- every one of cl100k's ordinary ids (100,256) and special ids decodes to the same bytes after extension, and the
  exported ``.tiktoken`` gives tiktoken the same ids as crayon on the multilingual corpus;
- wall time of ``extend`` and of ``train`` (the jit trainer from scratch, the same number of merges on the same
  file), after one small warm-up call of each so that Numba's compilation is not timed.

Prints a table and writes bench/results/extend.json.

    python -m bench.extend [--new-tokens N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import crayon

ROOT = Path(__file__).resolve().parents[1]
CORPORA_DIR = ROOT.parent / "shared" / "corpora"
RESULTS = ROOT / "bench" / "results" / "extend.json"
ENGLISH = ["big.txt", "english_web.txt"]


def bytes_per_token(tok, text: str) -> float:
    return len(text.encode("utf-8")) / len(tok.encode_ordinary(text))


def timed(function):
    started = time.perf_counter()
    result = function()
    return result, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new-tokens", type=int, default=10_000)
    args = parser.parse_args()
    n_new = args.new_tokens
    corpus = CORPORA_DIR / "multilingual.txt"
    text = corpus.read_text(encoding="utf-8")
    english = {name: (CORPORA_DIR / name).read_text(encoding="utf-8") for name in ENGLISH}
    lines = text.splitlines(keepends=True)
    cut = len(lines) * 9 // 10
    train_part, held_out = "".join(lines[:cut]), "".join(lines[cut:])

    cl100k = crayon.load("cl100k_base")
    # compile (or load from Numba's cache) the kernels before timing
    cl100k.extend(texts=[text[:20_000]], n_new_tokens=10)
    crayon.train(texts=[text[:20_000]], vocab_size=300, progress=False)

    extended, extend_seconds = timed(lambda: cl100k.extend(files=[corpus], n_new_tokens=n_new))
    fresh, train_seconds = timed(lambda: crayon.train(files=[corpus], vocab_size=256 + n_new + 1, progress=False))
    extended_90 = cl100k.extend(texts=[train_part], n_new_tokens=n_new)
    fresh_90 = crayon.train(texts=[train_part], vocab_size=256 + n_new + 1, progress=False)

    old = cl100k.model.token_bytes
    changed = [i for i, token in old.items() if extended.decode_single_token_bytes(i) != token]
    changed += [i for i in cl100k.special_tokens.values()
                if extended.decode_single_token_bytes(i) != cl100k.decode_single_token_bytes(i)]
    new_ids = sorted(set(extended.model.token_bytes) - set(old))

    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    with tempfile.TemporaryDirectory() as folder:
        extended.export(Path(folder) / "extended.tiktoken")
        encoding = tiktoken.Encoding("extended", pat_str=extended.pattern, special_tokens=extended.special_tokens,
                                     mergeable_ranks=load_tiktoken_bpe(str(Path(folder) / "extended.tiktoken")))
    tiktoken_agrees = encoding.encode_ordinary(text) == extended.encode_ordinary(text)

    rows = {
        "multilingual (in-sample)": (text, cl100k, extended, fresh),
        "multilingual (held-out 10%)": (held_out, cl100k, extended_90, fresh_90),
        **{name: (english[name], cl100k, extended, fresh) for name in ENGLISH},
    }
    table = {name: {"cl100k_base": bytes_per_token(a, t), f"cl100k_base + {n_new}": bytes_per_token(b, t),
                    f"fresh {n_new}": bytes_per_token(c, t)} for name, (t, a, b, c) in rows.items()}
    results = {
        "new_tokens_asked": n_new,
        "new_tokens_learned": len(new_ids),
        "new_ids": [new_ids[0], new_ids[-1]] if new_ids else [],
        "old_ordinary_ids": len(old),
        "old_ids_changed": len(changed),
        "special_tokens_kept": extended.special_tokens == cl100k.special_tokens,
        "tiktoken_agrees_on_multilingual": tiktoken_agrees,
        "bytes_per_token": table,
        "extend_seconds": extend_seconds,
        "train_from_scratch_seconds": train_seconds,
        "machine": {"platform": platform.platform(), "cores": len(os.sched_getaffinity(0))},
    }

    columns = list(next(iter(table.values())))
    print(f"{'bytes per token':30}" + "".join(f"{c:>22}" for c in columns))
    for name, values in table.items():
        print(f"{name:30}" + "".join(f"{values[c]:22.3f}" for c in columns))
    for name in ENGLISH:
        change = table[name][columns[1]] / table[name][columns[0]] - 1
        print(f"{name}: extension changes English bytes/token by {change:+.3%}")
    print(f"new ids {new_ids[0]}..{new_ids[-1]} ({len(new_ids)} learned); old ordinary ids {len(old)}, "
          f"changed {len(changed)}; specials kept: {results['special_tokens_kept']}; "
          f"tiktoken agrees: {tiktoken_agrees}")
    print(f"extend {extend_seconds:.2f} s, train from scratch (same merges, same file) {train_seconds:.2f} s")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()

"""Train the shipped profiles `lite` and `standard` on the shared corpora and write them to crayon/cartridges/.

    python tools/build_profiles.py [--corpora ../shared/corpora] [--out crayon/cartridges]

Prints the corpus hash, the training time and a compression table (bytes per token on each corpus, beside
cl100k_base and o200k_base), and how many of each vocabulary's tokens the corpora use at least 10 times;
writes the same as JSON to crayon/cartridges/profiles.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

import numpy as np

import crayon

PROFILES = {"lite": 50_000, "standard": 100_000}
CORPUS_FILES = ["big.txt", "english_web.txt", "enwik8_head.xml", "multilingual.txt", "python_code.py", "shakespeare.txt"]


def corpus_hash(files: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = Path(__file__).resolve().parents[1]
    parser.add_argument("--corpora", type=Path, default=root.parent / "shared" / "corpora")
    parser.add_argument("--out", type=Path, default=root / "crayon" / "cartridges")
    args = parser.parse_args()
    files = [args.corpora / name for name in CORPUS_FILES]
    texts = {path.name: path.read_text(encoding="utf-8") for path in files}
    report = {"corpus_sha256": corpus_hash(files), "corpus_bytes": sum(len(t.encode()) for t in texts.values()),
              "profiles": {}, "bytes_per_token": {}}
    print(f"corpus sha256 {report['corpus_sha256']} ({report['corpus_bytes']:,} bytes)")

    tokenizers = {}
    for name, vocab_size in PROFILES.items():
        started = time.perf_counter()
        tok = crayon.train(files=files, vocab_size=vocab_size, pattern="o200k_base", special_tokens=("<|endoftext|>",),
                           progress=False, name=name)
        seconds = time.perf_counter() - started
        args.out.mkdir(exist_ok=True)
        tok.save(args.out / f"{name}.crayon")
        tokenizers[name] = crayon.load(args.out / f"{name}.crayon")
        report["profiles"][name] = {"vocab_size": vocab_size, "train_seconds": round(seconds, 2)}
        print(f"{name}: {vocab_size:,} tokens trained in {seconds:.1f} s")
    for name in ("cl100k_base", "o200k_base"):
        tokenizers[name] = crayon.load(name)

    header = f"{'corpus':18}" + "".join(f"{name:>13}" for name in tokenizers)
    print("\nbytes per token\n" + header)
    usage = {name: np.zeros(tok.n_vocab, np.int64) for name, tok in tokenizers.items()}
    for corpus, text in texts.items():
        row = {}
        for name, tok in tokenizers.items():
            tokens = np.asarray(tok.encode_ordinary(text))
            usage[name] += np.bincount(tokens, minlength=tok.n_vocab)[: tok.n_vocab]
            row[name] = round(len(text.encode()) / len(tokens), 3)
        report["bytes_per_token"][corpus] = row
        print(f"{corpus:18}" + "".join(f"{row[name]:>13.3f}" for name in tokenizers))
    for name in PROFILES:
        used = int((usage[name] >= 10).sum())
        report["profiles"][name]["tokens_used_10_times"] = used
        print(f"{name}: {used:,} of {PROFILES[name]:,} tokens occur at least 10 times in the corpora")
    (args.out / "profiles.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()

"""The main job: load cl100k_base, encode a corpus file, print tokens, MB/s and a round-trip check."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import crayon

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "shakespeare.txt"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("file", nargs="?", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--vocab", default="cl100k_base")
    parser.add_argument("--backend", default="auto")
    args = parser.parse_args()

    started = time.perf_counter()
    tok = crayon.load(args.vocab, backend=args.backend)
    load_seconds = time.perf_counter() - started
    text = args.file.read_text(encoding="utf-8")
    size = len(text.encode("utf-8"))

    tok.encode_ordinary(text[:1000])  # the first call loads the compiled kernels (builds them the first time)
    started = time.perf_counter()
    tokens = tok.encode_ordinary(text)
    seconds = time.perf_counter() - started

    round_trip = tok.decode_bytes(tokens) == text.encode("utf-8")
    kinds = {"aot": ", ahead-of-time compiled kernels", "numba": ", numba jit kernels"}
    kernels = kinds.get(getattr(tok.engine, "kernels_kind", None), "")
    print(f"tokenizer   {tok!r} (loaded in {load_seconds * 1000:.0f} ms)")
    print(f"input       {args.file.name}: {size / 1e6:.2f} MB")
    print(f"first ids   {tokens[:16]}")
    print(f"first text  {[tok.decode_single_token_bytes(t) for t in tokens[:8]]}")
    print(f"tokens      {len(tokens):,} ({size / len(tokens):.2f} bytes/token)")
    print(f"speed       {size / seconds / 1e6:.2f} MB/s, {len(tokens) / seconds / 1e6:.2f} M tokens/s ({tok.backend} backend{kernels}, one thread)")
    print(f"round trip  {'ok' if round_trip else 'FAILED'}")
    if not round_trip:
        raise SystemExit(1)


if __name__ == "__main__":
    main()

"""The HF pipeline around the model: what added-token options (HF's two-pass match) and decoders cost, against
HF tokenizers on the same file and text, in one run.

Encode: a Llama 3-style tokenizer.json (cl100k_base's vocabulary and merges, Llama 3's Split regex, ByteLevel
without regex) with added tokens in the text, read by Crayon (jit engine) and by HF tokenizers (single thread):
"plain" tokens (HF's defaults for special tokens: raw, no options) against tokens with options (``lstrip`` /
``rstrip`` / ``single_word`` specials and ``normalized`` non-special tokens: HF's two passes). Ids must agree.
Decode: a WordPiece model with its WordPiece decoder and a SentencePiece-style BPE with Llama 2's decoder
(Replace, ByteFallback, Fuse, Strip), trained here, decoding the ids of the text. Times are process CPU time;
each row is the median of ``--repeat`` runs, the rows interleaved. Prints a table and writes
bench/results/hf_pipeline.json.

    taskset -c 0 python -m bench.hf_pipeline [--bytes N] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # HF tokenizers single thread (set before it is imported)

import tokenizers  # noqa: E402
from tokenizers import AddedToken, decoders, models, pre_tokenizers, trainers  # noqa: E402

import crayon  # noqa: E402
from bench.anytok import llama3_style_json  # noqa: E402
from crayon.formats.hf_io import spec_from_hf  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CORPORA_DIR = ROOT.parent / "shared" / "corpora"
RESULTS = ROOT / "bench" / "results" / "hf_pipeline.json"
SPECIALS = ["<|begin_of_text|>", "<mask>", "<|eot_id|>"]
PLAIN_ADDED = ["<tool_call>", "</tool_call>"]


def with_added_tokens(path: Path, options: bool) -> tokenizers.Tokenizer:
    hf = tokenizers.Tokenizer.from_file(str(path))
    flags = [dict(), dict(lstrip=True), dict(rstrip=True, single_word=True)] if options else [dict()] * 3
    hf.add_special_tokens([AddedToken(token, normalized=False, **flag) for token, flag in zip(SPECIALS, flags)])
    hf.add_tokens([AddedToken(token, normalized=options) for token in PLAIN_ADDED])
    return hf


def text_with_tokens(size: int) -> str:
    text = (CORPORA_DIR / "english_web.txt").read_text(encoding="utf-8")[: size // 2]
    text += (CORPORA_DIR / "multilingual.txt").read_text(encoding="utf-8")[: size // 2]
    words = text.split(" ")
    tokens = [" <mask> ", "<|eot_id|>\n", "<tool_call>", " </tool_call> ", "<|begin_of_text|>"]
    return " ".join(word + (tokens[i // 40 % len(tokens)] if i % 40 == 39 else "") for i, word in enumerate(words))


def cpu(function) -> tuple[float, object]:
    start = time.process_time()
    result = function()
    return time.process_time() - start, result


def decoder_models(text: str) -> dict[str, tokenizers.Tokenizer]:
    lines = [text[i : i + 2000] for i in range(0, min(len(text), 300_000), 2000)]
    bert = tokenizers.Tokenizer(models.WordPiece(unk_token="[UNK]"))
    bert.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    bert.train_from_iterator(lines, trainers.WordPieceTrainer(vocab_size=4000, special_tokens=["[UNK]"],
                                                              show_progress=False))
    bert.decoder = decoders.WordPiece()
    llama2 = tokenizers.Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    llama2.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first", split=False)
    llama2.train_from_iterator(lines, trainers.BpeTrainer(
        vocab_size=4000, special_tokens=["<unk>", *(f"<0x{byte:02X}>" for byte in range(256))], show_progress=False))
    llama2.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                       decoders.Strip(" ", 1, 0)])
    return {"WordPiece decoder": bert, "Llama 2 decoder": llama2}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bytes", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    text = text_with_tokens(args.bytes)
    size = len(text.encode("utf-8"))
    rows: dict[str, list[float]] = {}
    calls = {}
    with tempfile.TemporaryDirectory() as folder:
        base = llama3_style_json(Path(folder))
        for options in (False, True):
            hf = with_added_tokens(base, options)
            path = Path(folder) / f"options_{options}.json"
            hf.save(str(path))
            tok = crayon.load(path, backend="jit")
            label = "options (two passes)" if options else "plain tokens"
            expected = hf.encode(text, add_special_tokens=False).ids
            if tok.encode(text, allowed_special="all") != expected:
                raise SystemExit(f"{label}: Crayon's ids differ from HF's")
            calls[f"encode, {label}: Crayon jit"] = lambda tok=tok: tok.encode(text, allowed_special="all")
            calls[f"encode, {label}: HF tokenizers"] = lambda hf=hf: hf.encode(text, add_special_tokens=False)
    for label, hf in decoder_models(text).items():
        tok = crayon.Tokenizer.from_spec(spec_from_hf(json.loads(hf.to_str())), backend="jit")
        ids = hf.encode(text).ids
        if tok.decode(ids) != hf.decode(ids, skip_special_tokens=False):
            raise SystemExit(f"{label}: Crayon's text differs from HF's")
        calls[f"decode, {label}: Crayon"] = lambda tok=tok, ids=ids: tok.decode(ids)
        calls[f"decode, {label}: HF tokenizers"] = lambda hf=hf, ids=ids: hf.decode(ids, skip_special_tokens=False)
    for function in calls.values():  # warm-up: kernels, caches
        function()
    for _ in range(args.repeat):
        for label, function in calls.items():
            rows.setdefault(label, []).append(cpu(function)[0])
    print(f"text: {size / 1e6:.2f} MB with an added token every 40 words; median CPU seconds of {args.repeat} runs")
    print(f"{'call':<58} {'seconds':>8} {'MB/s':>8}")
    table = []
    for label, times in rows.items():
        seconds = statistics.median(times)
        table.append({"call": label, "seconds": seconds, "mb_per_s": size / 1e6 / seconds})
        print(f"{label:<58} {seconds:>8.3f} {size / 1e6 / seconds:>8.2f}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"bytes": size, "repeat": args.repeat, "machine": platform.platform(),
                                   "rows": table}, indent=1))


if __name__ == "__main__":
    main()

"""The crayon command (also python -m crayon): train, export, decode and count with a tokenizer, verify
cartridges, list the built-in profiles, and build the compiled kernels ahead of time."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from crayon.errors import CrayonError

OUTPUT_FORMATS = {".crayon": "a Crayon cartridge", ".json": "an HF tokenizer.json", ".tiktoken": "a tiktoken ranks file"}
EXIT_USAGE = 2  # argparse's code for a bad command line; also every refused input


class UsageError(Exception):
    """A mistake on the command line, reported in one line with exit code 2."""


def output_format(path: str) -> str:
    """The suffix of ``-o``, checked before any work: one of ``OUTPUT_FORMATS``, in a folder that exists."""
    target = Path(path)
    if target.suffix not in OUTPUT_FORMATS:
        choices = ", ".join(f"{suffix} ({what})" for suffix, what in OUTPUT_FORMATS.items())
        raise UsageError(f"-o {path}: the suffix chooses the format; use {choices}")
    if not target.parent.resolve().is_dir():
        raise UsageError(f"-o {path}: the folder {target.parent} does not exist")
    if not os.access(target.parent.resolve(), os.W_OK):
        raise UsageError(f"-o {path}: the folder {target.parent} is not writable")
    return target.suffix


def write_tokenizer(tok, path: str) -> str:
    """Write ``tok`` in the format ``path``'s suffix names; return a line saying what was written."""
    suffix = output_format(path)
    if suffix == ".crayon":
        tok.save(path)
    else:
        tok.export(path, format="hf" if suffix == ".json" else "tiktoken")
    line = f"wrote {path}: {OUTPUT_FORMATS[suffix]}, {tok.name}, {tok.n_vocab} tokens"
    if suffix == ".tiktoken":
        specials = ", ".join(f"{text}={token}" for text, token in tok.special_tokens.items()) or "none"
        line += (f"\n  a .tiktoken file holds the ranks only; load it with its pattern and special tokens: "
                 f"pattern={tok.pattern!r}, special tokens: {specials}")
    return line


def _load(args: argparse.Namespace):
    import crayon

    return crayon.load(args.tokenizer, pattern=args.pattern)


def _train(args: argparse.Namespace) -> None:
    import crayon

    output_format(args.output)
    missing = [path for path in args.files if not Path(path).is_file()]
    if missing:
        raise UsageError(f"not a file: {', '.join(missing)}")
    tok = crayon.train(
        files=args.files,
        vocab_size=args.vocab_size,
        pattern=args.pattern,
        special_tokens=tuple(args.special if args.special is not None else ["<|endoftext|>"]),
        progress=not args.quiet,
        name=args.name or Path(args.output).stem,
        checkpoint=args.checkpoint,
        checkpoint_every=args.checkpoint_every,
    )
    print(write_tokenizer(tok, args.output))


def _export(args: argparse.Namespace) -> None:
    output_format(args.output)
    print(write_tokenizer(_load(args), args.output))


def _token_ids(words: list[str]) -> list[int]:
    ids = []
    for word in words:
        for part in word.replace(",", " ").replace("[", " ").replace("]", " ").split():
            if not part.isdigit():
                raise UsageError(f"{part!r} is not a token id (ids are non-negative integers)")
            ids.append(int(part))
    return ids


def _decode(args: argparse.Namespace) -> None:
    tok = _load(args)
    ids = _token_ids(args.ids if args.ids else sys.stdin.read().split())
    sys.stdout.write(tok.decode(ids, errors=args.errors))
    sys.stdout.write("\n" if args.newline else "")


def _count(args: argparse.Namespace) -> None:
    tok = _load(args)
    if not args.files:
        print(len(tok.encode_ordinary(sys.stdin.read())))
        return
    total = 0
    for path in args.files:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except UnicodeDecodeError as error:
            raise UsageError(f"{path} is not UTF-8 text ({error.reason} at byte {error.start})") from None
        count = len(tok.encode_ordinary(text))
        total += count
        print(f"{count}\t{path}")
    if len(args.files) > 1:
        print(f"{total}\ttotal")


def _verify(args: argparse.Namespace) -> None:
    from crayon.cartridge import open_cartridge
    from crayon.errors import CartridgeError

    failed = False
    for path in args.paths:
        try:
            open_cartridge(path, verify=True).close()
            print(f"{path}: ok")
        except (CartridgeError, OSError) as error:
            failed = True
            print(f"{path}: {error}", file=sys.stderr)
    if failed:
        raise SystemExit(1)


def _profiles(args: argparse.Namespace) -> None:
    import crayon

    for name, where in crayon.list_profiles().items():
        print(f"{name:16} {where}")


def _warmup(args: argparse.Namespace) -> None:
    import crayon
    from crayon.jit import aot

    for kernel_set in aot.KERNEL_SETS:
        started = time.perf_counter()
        label = "kernels" if kernel_set is aot.ENCODING else f"{kernel_set.what} kernels"
        print(f"{label}: {aot.warmup(kernel_set)} ({time.perf_counter() - started:.1f} s)")
    for name in args.profiles:
        started = time.perf_counter()
        tok = crayon.load(name)
        tok.encode("warm up")
        print(f"{name}: ready ({tok.n_vocab} tokens, {time.perf_counter() - started:.1f} s)")


def _diff(args: argparse.Namespace) -> None:
    """List the tokens added, removed and moved from vocabulary A to B; exit 1 when an id of A changed."""
    import crayon
    from crayon.evolution import token_label
    from crayon.staging import diff_vocabularies

    a, b = (crayon.load(source, pattern=args.pattern, backend="reference") for source in (args.a, args.b))
    diff = diff_vocabularies(a, b)
    sections = [
        ("added", [f"{i}\t{token_label(token)}" for i, token in sorted(diff.added.items())]),
        ("removed", [f"{i}\t{token_label(token)}" for i, token in sorted(diff.removed.items())]),
        ("moved", [f"{old} -> {new}\t{token_label(token)}"
                   for token, (old, new) in sorted(diff.moved.items(), key=lambda item: item[1])]),
        ("changed", [f"{i}\t{token_label(old)} -> {token_label(new)}"
                     for i, (old, new) in sorted(diff.changed.items())]),
        ("filled reserved slots", [f"{i}\t{old} -> {new}" for i, (old, new) in sorted(diff.filled.items())]),
    ]
    print(f"{args.a} -> {args.b}: {diff.summary()}")
    for title, lines in sections:
        if lines:
            shown = lines if args.all else lines[: args.limit]
            print(f"{title} ({len(lines)}):")
            print("\n".join(f"  {line}" for line in shown))
            if len(shown) < len(lines):
                print(f"  ... {len(lines) - len(shown)} more (--all lists them)")
    if diff.breaking:
        print("error: ids of A mean something else in B: a model trained on A would break", file=sys.stderr)
        raise SystemExit(1)


def _encode(args: argparse.Namespace) -> None:
    """``crayon encode``: files to a token shard (-o), or token ids printed (no -o; text on stdin without files)."""
    import crayon

    tok = crayon.load(args.tokenizer)
    if args.files_from is not None:
        listing = sys.stdin if args.files_from == "-" else open(args.files_from, encoding="utf-8")
        with listing:
            args.files += [line.rstrip("\n") for line in listing if line.strip()]
    if not args.files:
        if sys.stdin.isatty():
            raise UsageError("crayon encode: give files, or pipe text on stdin")
        print(" ".join(map(str, tok.encode_ordinary(sys.stdin.buffer.read().decode("utf-8", args.errors)))))
        return
    options = dict(separator=args.separator, jsonl_field=args.jsonl_field, append_eot=args.append_eot,
                   threads=args.threads, chunk_bytes=args.chunk_bytes, errors=args.errors)
    if args.output is None:
        line: list[int] = []
        for chunk in tok.iter_encode_files(args.files, **options):
            line.extend(chunk.tokens.tolist())
            if chunk.end_of_document:
                print(" ".join(map(str, line)))
                line = []
        return
    summary = tok.write_tokens(args.files, args.output, progress=not args.quiet, **options)
    seconds = max(summary["seconds"], 1e-9)
    print(f"wrote {summary['output']} (+ .json): {summary['tokens']:,} {summary['dtype']} tokens, "
          f"{summary['documents']:,} documents, {summary['bytes'] / 1e6:,.1f} MB in {seconds:.1f} s "
          f"({summary['bytes'] / 1e6 / seconds:,.1f} MB/s, {summary['tokens'] / seconds / 1e6:,.2f} M tokens/s)")


def _add_encode_parser(commands) -> None:
    encode = commands.add_parser("encode", help="encode UTF-8 files into a token shard (.bin/.npy + .json sidecar)")
    encode.add_argument("files", nargs="*", help="UTF-8 text or JSON Lines files; none: read text on stdin")
    encode.add_argument("--files-from", help="a file listing input files, one per line ('-': stdin)")
    encode.add_argument("-o", "--output", help="the shard (.bin: raw uint16/uint32, .npy); none: print ids")
    encode.add_argument("--tokenizer", default="cl100k_base", help="profile name or vocabulary file")
    encode.add_argument("--threads", type=int, help="workers (default: the CPUs this process may use)")
    encode.add_argument("--jsonl-field", help="the files are JSON Lines; each line's FIELD is a document")
    encode.add_argument("--separator", help="documents in a file are separated by this text (default: file = doc)")
    encode.add_argument("--append-eot", action="store_true", help="the end-of-text token after every document")
    encode.add_argument("--chunk-bytes", type=int, default=1 << 20, help="bytes per task (memory ~ threads x this)")
    encode.add_argument("--errors", choices=("strict", "replace"), default="strict", help="bytes that are not UTF-8")
    encode.add_argument("--quiet", action="store_true", help="no progress bar")
    encode.set_defaults(run=_encode)


def build_parser() -> argparse.ArgumentParser:
    import crayon

    parser = argparse.ArgumentParser(prog="crayon", description=__doc__)
    parser.add_argument("--version", action="version", version=f"crayon-tokenizer {crayon.__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def with_tokenizer(command: argparse.ArgumentParser, *, positional: bool = False) -> None:
        where = ("a built-in name (cl100k_base, gpt2, lite ...: `crayon profiles`), a .crayon cartridge, a .tiktoken "
                 "file or an HF tokenizer.json")
        if positional:
            command.add_argument("tokenizer", help=where)
        else:
            command.add_argument("--tokenizer", default="cl100k_base", help=where + " (default: cl100k_base)")
        command.add_argument("--pattern", help="pre-tokenization pattern for a .tiktoken file: a name such as "
                                               "cl100k_base, or a regex")

    train = commands.add_parser("train", help="train byte-level BPE on UTF-8 files",
                                description="Train byte-level BPE on UTF-8 text files and write it to -o.")
    train.add_argument("files", nargs="+", help="UTF-8 text files to train on")
    train.add_argument("-o", "--output", required=True,
                       help="where to write: .crayon (cartridge), .json (HF tokenizer.json) or .tiktoken (ranks)")
    train.add_argument("--vocab-size", type=int, required=True, help="tokens in the vocabulary, special tokens included")
    train.add_argument("--pattern", default="cl100k_base",
                       help="pre-tokenization pattern: a name (r50k_base, cl100k_base, o200k_base) or a regex "
                            "(default: cl100k_base)")
    train.add_argument("--special", action="append", metavar="TOKEN",
                       help="a special token, given the last ids (repeat the option; default: <|endoftext|>)")
    train.add_argument("--name", help="the tokenizer's name (default: the output file's stem)")
    train.add_argument("--quiet", action="store_true", help="no progress bars")
    train.add_argument("--checkpoint", metavar="PATH",
                       help="save the vocabulary so far to this cartridge every --checkpoint-every tokens; when it "
                            "exists, resume from it (same files and settings) to the uninterrupted result")
    train.add_argument("--checkpoint-every", type=int, default=5000, metavar="N",
                       help="new tokens per checkpointed segment (default 5000)")
    train.set_defaults(run=_train)

    export = commands.add_parser("export", aliases=["compile"], help="write a tokenizer in another format",
                                 description="Write a tokenizer as a cartridge, an HF tokenizer.json or a .tiktoken "
                                             "ranks file, chosen by the suffix of -o.")
    with_tokenizer(export, positional=True)
    export.add_argument("-o", "--output", required=True,
                        help="where to write: .crayon (cartridge), .json (HF tokenizer.json) or .tiktoken (ranks)")
    export.set_defaults(run=_export)

    _add_encode_parser(commands)

    decode = commands.add_parser("decode", help="token ids to text",
                                 description="Decode token ids (arguments, or whitespace-separated on stdin) to text.")
    with_tokenizer(decode)
    decode.add_argument("ids", nargs="*", help="token ids (default: read from stdin)")
    decode.add_argument("--errors", default="replace", choices=["strict", "replace", "ignore", "backslashreplace"],
                        help="what to do with bytes that are not UTF-8 (default: replace)")
    decode.add_argument("--no-newline", dest="newline", action="store_false", help="no newline after the text")
    decode.set_defaults(run=_decode)

    count = commands.add_parser("count", help="count the tokens of files or stdin",
                                description="Count tokens (special-token text counted as ordinary text).")
    with_tokenizer(count)
    count.add_argument("files", nargs="*", help="UTF-8 text files (default: stdin)")
    count.set_defaults(run=_count)

    verify = commands.add_parser("verify", help="check cartridges' checksums and structure (exit 1 on a fault)")
    verify.add_argument("paths", nargs="+", help=".crayon files")
    verify.set_defaults(run=_verify)

    profiles = commands.add_parser("profiles", help="list the built-in tokenizers and where they come from")
    profiles.set_defaults(run=_profiles)

    warmup = commands.add_parser("warmup", help="build the compiled kernels now (for Docker and Ray images)",
                                 description="Build the encoding kernels for this machine now (a failed build "
                                             "recorded earlier is retried), and compile the named profiles into the "
                                             "cache, so that later processes start at once.")
    warmup.add_argument("profiles", nargs="*", metavar="NAME", help="built-in tokenizers to prepare (e.g. cl100k_base)")
    warmup.set_defaults(run=_warmup)
    diff = commands.add_parser("diff", help="list tokens added, removed, moved from A to B (exit 1 if an id changed)",
                               description="Compare two vocabularies id by id: the tokens added, removed and moved "
                                           "from A to B, and the ids of A whose token changed (then exit 1: a model "
                                           "trained on A would break). Reserved special slots given a name are listed, "
                                           "not failed.")
    diff.add_argument("a", help="the old vocabulary: a built-in name, a .crayon cartridge, a .tiktoken file or an "
                                "HF tokenizer.json")
    diff.add_argument("b", help="the new vocabulary (the same kinds)")
    diff.add_argument("--pattern", help="pre-tokenization pattern for .tiktoken files: a name such as cl100k_base, "
                                        "or a regex")
    diff.add_argument("--limit", type=int, default=20, help="tokens listed per section (default: 20)")
    diff.add_argument("--all", action="store_true", help="list every token")
    diff.set_defaults(run=_diff)
    return parser


def main(argv: list[str] | None = None) -> None:
    """Run the command line; a refused input prints one line and exits with code 2."""
    args = build_parser().parse_args(argv)
    try:
        args.run(args)
    except KeyboardInterrupt:
        print("crayon: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except (UsageError, CrayonError, ValueError, KeyError, OSError, ImportError) as error:
        kind = "" if isinstance(error, (UsageError, CrayonError)) else f"{type(error).__name__}: "
        message = str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)
        print("crayon: error: " + kind + " ".join(message.split("\n")), file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None


if __name__ == "__main__":
    main()

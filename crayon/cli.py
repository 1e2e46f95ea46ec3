"""The ``crayon`` command: train, compile and verify cartridges, list profiles."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _train(args: argparse.Namespace) -> None:
    import crayon
    from crayon.cartridge import check_writable

    try:
        check_writable(args.output)  # before minutes of training, not after
    except OSError as error:
        raise SystemExit(f"crayon train: {error.strerror}") from None
    tok = crayon.train(
        files=args.files,
        vocab_size=args.vocab_size,
        pattern=args.pattern,
        special_tokens=tuple(args.special),
        progress=not args.quiet,
        name=args.name or Path(args.output).stem,
    )
    print(f"wrote {tok.save(args.output)}: {tok.n_vocab} tokens")


def _compile(args: argparse.Namespace) -> None:
    import crayon

    tok = crayon.load(args.source, pattern=args.pattern, backend="reference")
    tok.save(args.output)
    print(f"wrote {args.output}: {tok.name}, {tok.n_vocab} tokens")


def _verify(args: argparse.Namespace) -> None:
    from crayon.cartridge import open_cartridge
    from crayon.errors import CartridgeError

    failed = False
    for path in args.paths:
        try:
            open_cartridge(path, verify=True).close()
            print(f"{path}: ok")
        except CartridgeError as error:
            failed = True
            print(f"{path}: {error}", file=sys.stderr)
    if failed:
        raise SystemExit(1)


def _profiles(args: argparse.Namespace) -> None:
    import crayon

    for name, where in crayon.list_profiles().items():
        print(f"{name:16} {where}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="crayon", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    train = commands.add_parser("train", help="train byte-level BPE on UTF-8 files and write a cartridge")
    train.add_argument("files", nargs="+")
    train.add_argument("-o", "--output", required=True)
    train.add_argument("--vocab-size", type=int, required=True)
    train.add_argument("--pattern", default="cl100k_base")
    train.add_argument("--special", action="append", default=None, help="a special token (repeat); default <|endoftext|>")
    train.add_argument("--name")
    train.add_argument("--quiet", action="store_true")
    train.set_defaults(run=_train)

    compile_ = commands.add_parser("compile", help="compile a vocabulary (name, .tiktoken, tokenizer.json) to a cartridge")
    compile_.add_argument("source")
    compile_.add_argument("-o", "--output", required=True)
    compile_.add_argument("--pattern", help="pattern name or regex, for .tiktoken files")
    compile_.set_defaults(run=_compile)

    verify = commands.add_parser("verify", help="check a cartridge's checksums and structure")
    verify.add_argument("paths", nargs="+")
    verify.set_defaults(run=_verify)

    profiles = commands.add_parser("profiles", help="list the built-in profiles and where they come from")
    profiles.set_defaults(run=_profiles)

    args = parser.parse_args(argv)
    if getattr(args, "special", ()) is None:
        args.special = ["<|endoftext|>"]
    args.run(args)


if __name__ == "__main__":
    main()

"""The ``crayon`` command: ``python -m crayon``, help for every option, the output format from the ``-o`` suffix,
decode / count / export, and one-line errors with exit code 2 instead of tracebacks."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

import crayon
from conftest import corpus_text
from crayon.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]


def run(capsys, *argv) -> tuple[int, str, str]:
    """``crayon ARGV`` in this process: (exit code, stdout, stderr)."""
    try:
        main([str(arg) for arg in argv])
        code = 0
    except SystemExit as stop:
        code = stop.code
    out, err = capsys.readouterr()
    return code, out, err


def test_python_dash_m_crayon_and_version():
    result = subprocess.run([sys.executable, "-m", "crayon", "--version"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == f"crayon-tokenizer {crayon.__version__}"


def test_every_option_has_help():
    parser = build_parser()
    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    assert {"train", "export", "decode", "count", "verify", "profiles", "warmup"} <= set(commands.choices)
    for name, command in commands.choices.items():
        for action in command._actions:
            assert action.help, f"crayon {name}: {action.dest} has no help"
    assert all(choice.help for choice in commands._choices_actions)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "corpus.txt"
    path.write_text(corpus_text("shakespeare.txt", 30_000), encoding="utf-8")
    return path


@pytest.mark.parametrize("suffix", [".crayon", ".json", ".tiktoken"])
def test_train_writes_the_format_the_suffix_names(capsys, tmp_path, corpus, suffix):
    output = tmp_path / f"mine{suffix}"
    code, out, err = run(capsys, "train", corpus, "-o", output, "--vocab-size", 300, "--quiet")
    assert code == 0, err
    assert out.startswith(f"wrote {output}: ")
    text = "To be, or not to be"
    trained = crayon.load(tmp_path / "mine.crayon") if suffix == ".crayon" else None
    if suffix == ".json":
        tokenizers = pytest.importorskip("tokenizers")
        assert json.loads(output.read_text())["model"]["type"] == "BPE"
        hf = tokenizers.Tokenizer.from_file(str(output))
        assert hf.decode(hf.encode(text, add_special_tokens=False).ids) == text
    elif suffix == ".tiktoken":
        assert "pattern=" in out
        trained = crayon.load(output, pattern="cl100k_base", special_tokens={"<|endoftext|>": 299})
    if trained is not None:
        assert trained.n_vocab == 300 and trained.decode(trained.encode(text)) == text


def test_train_checkpoints_and_resumes(capsys, tmp_path, corpus):
    checkpoint = tmp_path / "run.crayon"
    options = ["--vocab-size", 300, "--quiet", "--checkpoint", checkpoint, "--checkpoint-every", 10]
    code, _, err = run(capsys, "train", corpus, "-o", tmp_path / "mine.crayon", *options)
    assert code == 0, err
    assert crayon.load(checkpoint).model.ranks == crayon.load(tmp_path / "mine.crayon").model.ranks
    code, _, err = run(capsys, "train", corpus, "-o", tmp_path / "again.crayon", *options[:-4], "--checkpoint",
                       checkpoint, "--pattern", "gpt2")
    assert code == 2 and "made with another pattern" in err


def test_refused_outputs_exit_2_before_training(capsys, tmp_path, corpus):
    for output, message in ((tmp_path / "mine.bin", "the suffix chooses the format"),
                            (tmp_path / "mine", "the suffix chooses the format"),
                            (tmp_path / "missing" / "mine.json", "does not exist")):
        code, out, err = run(capsys, "train", corpus, "-o", output, "--vocab-size", 300, "--quiet")
        assert code == 2 and message in err and err.count("\n") == 1 and "Traceback" not in err
        assert not output.exists()
    code, _, err = run(capsys, "train", tmp_path / "absent.txt", "-o", tmp_path / "x.crayon", "--vocab-size", 300)
    assert code == 2 and "not a file" in err


def test_export_decode_count(capsys, tmp_path, monkeypatch):
    code, out, err = run(capsys, "export", "gpt2", "-o", tmp_path / "gpt2.json")
    assert code == 0, err
    assert crayon.load(tmp_path / "gpt2.json").encode("hello  world") == crayon.get_encoding("gpt2").encode("hello  world")
    code, out, _ = run(capsys, "compile", "r50k_base", "-o", tmp_path / "r50k.crayon")
    assert code == 0 and crayon.load(tmp_path / "r50k.crayon").n_vocab == 50257
    ids = crayon.get_encoding("cl100k_base").encode("héllo wörld")
    assert run(capsys, "decode", *ids)[1] == "héllo wörld\n"
    monkeypatch.setattr(sys, "stdin", __import__("io").StringIO(json.dumps(ids)))
    assert run(capsys, "decode", "--tokenizer", "cl100k_base", "--no-newline")[1] == "héllo wörld"
    text_file = tmp_path / "a.txt"
    text_file.write_text("hello world <|endoftext|>", encoding="utf-8")
    code, out, _ = run(capsys, "count", text_file, text_file, "--tokenizer", "cl100k_base")
    expected = len(crayon.get_encoding("cl100k_base").encode_ordinary(text_file.read_text()))
    assert code == 0 and out.splitlines() == [f"{expected}\t{text_file}", f"{expected}\t{text_file}", f"{2 * expected}\ttotal"]


def test_errors_are_one_line_with_exit_2(capsys, tmp_path):
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    cases = [
        (["decode", "99999999"], "token id 99999999 is not in cl100k_base"),
        (["decode", "1.5", "--tokenizer", "gpt2"], "is not a token id"),
        (["count", "x.txt", "--tokenizer", "no_such_profile"], "no profile named 'no_such_profile'"),
        (["count", tmp_path / "latin1.txt"], "is not UTF-8"),
        (["count", tmp_path / "absent.txt"], "No such file"),
        (["export", tmp_path / "absent.tiktoken", "-o", tmp_path / "x.json"], "absent.tiktoken"),
    ]
    for argv, message in cases:
        code, out, err = run(capsys, *argv)
        assert code == 2 and message in err and err.startswith("crayon: error: ") and err.count("\n") == 1, err


def test_bpe_training_refuses_min_frequency():
    with pytest.raises(ValueError, match="min_frequency is for model='char' and 'word'"):
        crayon.train(texts=["some text"], vocab_size=300, min_frequency=2)

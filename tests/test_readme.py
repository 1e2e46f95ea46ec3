"""The README's examples run: every ```python block executes in a temporary folder holding the files it names,
and every command a ```bash block names exists (``crayon`` subcommands answer ``--help``, make targets and
scripts exist, ``pip install`` names this project's distribution)."""

from __future__ import annotations

import re
import shlex
import shutil
import warnings
from pathlib import Path

import pytest

import crayon
from crayon.cli import main as cli_main
from crayon.profiles import find_vocabulary_file
from conftest import corpus_text

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def commands(block: str) -> list[list[str]]:
    """The commands of a shell block: one a line, comments and continuation joined away."""
    found = []
    for line in block.replace("\\\n", " ").splitlines():
        for command in line.split("#")[0].split("|"):  # a pipeline: each command in it
            words = shlex.split(command)
            if words and words[0] not in ("echo", "cat"):  # the text a pipeline feeds in
                found.append(words)
    return found


@pytest.fixture
def example_folder(tmp_path, monkeypatch):
    """A working folder with the files the examples name: a.txt and b.txt (training text), ranks.tiktoken
    (cl100k_base's ranks) and tokenizer.json (a small HF file)."""
    monkeypatch.chdir(tmp_path)
    text = corpus_text("shakespeare.txt", 40_000)
    (tmp_path / "a.txt").write_text(text[:20_000], encoding="utf-8")
    (tmp_path / "b.txt").write_text(text[20_000:], encoding="utf-8")
    shutil.copyfile(find_vocabulary_file("cl100k_base"), tmp_path / "ranks.tiktoken")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", crayon.TrainingWarning)
        small = crayon.train(texts=[text], vocab_size=400, progress=False)
    small.export(tmp_path / "tokenizer.json", format="hf")
    return tmp_path


def test_the_readme_has_examples():
    assert blocks("python") and blocks("bash")


@pytest.mark.parametrize("index", range(len(blocks("python"))))
def test_python_examples_run(example_folder, index):
    code = blocks("python")[index]
    exec(compile(code, f"README.md python block {index}", "exec"), {"__name__": "readme"})


def test_the_training_example_trains_on_the_files(example_folder):
    call = re.search(r"crayon\.train\(files=[^`\n]*\)", README).group()  # the example in the README's text
    namespace = {"crayon": crayon}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", crayon.TrainingWarning)
        exec(f"tok = {call}", namespace)
    tokens = set(namespace["tok"].model.ranks)
    assert b".txt" not in tokens and b" the" in tokens


@pytest.mark.parametrize("words", [words for block in blocks("bash") for words in commands(block)], ids=" ".join)
def test_shell_commands_exist(words, capsys):
    program = Path(words[0]).name
    if program == "crayon":
        with pytest.raises(SystemExit) as exited:
            cli_main([words[1], "--help"])
        assert exited.value.code == 0 and capsys.readouterr().out.startswith("usage: crayon ")
    elif program == "make":
        targets = re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), flags=re.M)
        assert words[1] in targets
    elif program == "pip":
        distribution = re.search(r'^name = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), flags=re.M).group(1)
        assert words[1:] == ["install", distribution]
    elif program.startswith("python"):
        script = words[words.index("-m") + 1].replace(".", "/") + ".py" if "-m" in words else words[1]
        assert (ROOT / script).is_file(), script
    else:
        pytest.fail(f"the README names a command this test does not know how to check: {words}")

"""Checkpointed training: segments of checkpoint_every tokens reach exactly the uninterrupted vocabulary; a run
killed by Ctrl-C resumes from its checkpoint to the same vocabulary, the progress bar starting where it
stopped; a checkpoint of another corpus or other settings is refused."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import crayon
from conftest import corpus_text
from crayon.cartridge import open_cartridge

ROOT = Path(__file__).resolve().parents[1]


def ids(tokenizer):
    return tokenizer.model.ranks, tokenizer.special_tokens, tokenizer.pattern


@pytest.mark.parametrize("backend", ["jit", "reference"])
def test_segmented_training_equals_uninterrupted(tmp_path, backend):
    text = corpus_text("shakespeare.txt", 120_000)
    options = dict(texts=[text, "<|endoftext|> more text"], vocab_size=650, backend=backend, progress=False,
                   special_tokens=["<|endoftext|>", "<|pad|>"], reserved_special_tokens=2)
    whole = crayon.train(**options)
    segmented = crayon.train(**options, checkpoint=tmp_path / "run.crayon", checkpoint_every=90)
    assert ids(segmented) == ids(whole)
    assert segmented.n_vocab == 650 and (segmented.vocabulary_version, segmented.parent_hash) == (1, None)
    saved = crayon.load(tmp_path / "run.crayon")
    assert ids(saved) == ids(whole)
    again = crayon.train(**options, checkpoint=tmp_path / "run.crayon", checkpoint_every=90)  # finished: loads it
    assert ids(again) == ids(whole)


def test_a_checkpoint_of_another_corpus_or_settings_is_refused(tmp_path):
    text = corpus_text("shakespeare.txt", 30_000)
    checkpoint = tmp_path / "run.crayon"
    crayon.train(texts=[text], vocab_size=300, progress=False, checkpoint=checkpoint, checkpoint_every=20)
    with pytest.raises(ValueError, match=r"another corpus \(resuming"):
        crayon.train(texts=[text + "!"], vocab_size=300, progress=False, checkpoint=checkpoint)
    with pytest.raises(ValueError, match="another vocab_size"):
        crayon.train(texts=[text], vocab_size=320, progress=False, checkpoint=checkpoint)
    with pytest.raises(ValueError, match="another special_tokens"):
        crayon.train(texts=[text], vocab_size=300, progress=False, checkpoint=checkpoint, special_tokens=[])
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(text, encoding="utf-8")
    crayon.train(files=[corpus], vocab_size=300, progress=False, checkpoint=tmp_path / "files.crayon")
    corpus.write_text(text + "changed", encoding="utf-8")
    with pytest.raises(ValueError, match="another corpus"):
        crayon.train(files=[corpus], vocab_size=300, progress=False, checkpoint=tmp_path / "files.crayon")
    crayon.load("cl100k_base").save(tmp_path / "other.crayon")
    with pytest.raises(ValueError, match="not a training checkpoint"):
        crayon.train(texts=[text], vocab_size=300, progress=False, checkpoint=tmp_path / "other.crayon")
    with pytest.raises(TypeError, match="give texts= as a list"):
        crayon.train(texts=iter([text]), vocab_size=300, progress=False, checkpoint=tmp_path / "new.crayon")
    with pytest.raises(ValueError, match="checkpoint_every must be at least 1"):
        crayon.train(texts=[text], vocab_size=300, progress=False, checkpoint=tmp_path / "new.crayon",
                     checkpoint_every=0)


def test_training_interrupted_by_ctrl_c_resumes_to_the_uninterrupted_vocabulary(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(corpus_text("shakespeare.txt", 200_000), encoding="utf-8")
    checkpoint = tmp_path / "run.crayon"
    options = dict(files=[corpus], vocab_size=1000)
    script = textwrap.dedent(f"""
        import crayon
        crayon.train(files=[{str(corpus)!r}], vocab_size=1000, backend="reference", progress=False,
                     checkpoint={str(checkpoint)!r}, checkpoint_every=20)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen([sys.executable, "-c", script], env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not checkpoint.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode != 0 and "KeyboardInterrupt" in stderr, stderr
    partial = crayon.load(checkpoint)  # usable: a whole cartridge, written before the interruption
    learned = len(partial.model.ranks) - 256
    assert 0 < learned < 1000 - 1 - 256 and learned % 20 == 0
    assert open_cartridge(checkpoint).metadata["source"]["training_checkpoint"]["vocab_size"] == 1000

    capsys.readouterr()
    resumed = crayon.train(**options, backend="jit", progress=True, checkpoint=checkpoint, checkpoint_every=200)
    bar = capsys.readouterr().err
    assert re.search(r"training \(checkpointed\):\s+\d+%\|[^|]*\| (\d+)/743", bar).group(1) == str(learned)
    assert ids(resumed) == ids(crayon.train(**options, backend="jit", progress=False))


def test_a_corpus_out_of_pairs_stops_segmented_training_as_uninterrupted(tmp_path):
    options = dict(texts=["low lower lowest"] * 3, vocab_size=300, progress=False)
    with pytest.warns(crayon.TrainingWarning, match="stopped at 264 tokens"):
        whole = crayon.train(**options)
    with pytest.warns(crayon.TrainingWarning, match="stopped at 264 tokens"):
        segmented = crayon.train(**options, checkpoint=tmp_path / "run", checkpoint_every=3)
    assert ids(segmented) == ids(whole) and (tmp_path / "run.crayon").is_file()
    bytes_only = crayon.train(texts=["abc"], vocab_size=257, progress=False, checkpoint=tmp_path / "bytes.crayon")
    assert ids(bytes_only) == ids(crayon.train(texts=["abc"], vocab_size=257, progress=False))
    with pytest.raises(ValueError, match="vocab_size=100 is smaller"):
        crayon.train(texts=["abc"], vocab_size=100, progress=False, checkpoint=tmp_path / "small.crayon")

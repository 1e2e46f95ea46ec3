"""Batches over threads: the caller's checks and repairs run on the threads that encode (``prepare``), errors
come as a loop of ``encode`` would raise them, and the worker threads (``crayon.jit.cores.worker_map``) are kept
for the process, so that their piece caches stay warm from one call to the next."""

import multiprocessing
import threading

import pytest
from conftest import corpus_text, tiktoken_encoding

import crayon
from crayon.jit.cores import worker_map


@pytest.fixture(scope="module")
def cl100k():
    return crayon.load("cl100k_base")


def test_batches_on_threads_repair_and_check_each_text_as_encode_does(cl100k):
    lines = corpus_text("multilingual.txt", limit=60000).splitlines(keepends=True)
    lines[7] += "\ud800 lone \udc00\ud83d\ude00 pair"
    expected = tiktoken_encoding("cl100k_base").encode_ordinary_batch(lines)
    for threads in (1, 2, 3):
        assert cl100k.encode_ordinary_batch(lines, num_threads=threads) == expected
        assert cl100k.encode_batch(tuple(lines), num_threads=threads) == expected
        assert cl100k.encode_batch(iter(lines), num_threads=threads) == expected
    late = [*lines, "and <|endoftext|> at the end"]
    with pytest.raises(ValueError, match="disallowed special token '<|endoftext|>'"):
        cl100k.encode_batch(late, num_threads=2)
    assert cl100k.encode_ordinary_batch(late, num_threads=2)[-1] == cl100k.encode_ordinary(late[-1])
    split = ["a special cut in two: <|endof", "text|> is no special token"]  # whole in the texts' join only
    assert cl100k.encode_batch(split, num_threads=2) == tiktoken_encoding("cl100k_base").encode_batch(split)
    with pytest.raises(TypeError, match="decode bytes first"):
        cl100k.encode_ordinary_batch([*lines, b"bytes"], num_threads=2)
    for tok in (cl100k, crayon.load("cl100k_base", backend="jit")):
        with pytest.raises(TypeError, match="expected a str to encode, got NoneType"):
            tok.encode_batch([*lines, None], num_threads=2)


def test_worker_threads_are_kept_and_their_caches_emptied_on_request(cl100k):
    docs = [corpus_text("big.txt", limit=400000)[i : i + 20000] for i in range(0, 400000, 20000)]
    engine = cl100k.engine
    seen = []
    engine.encode_ordinary_batch(docs, num_threads=2, prepare=lambda texts: seen.append(threading.get_ident()) or texts)
    engine.encode_ordinary_batch(docs, num_threads=2, prepare=lambda texts: seen.append(threading.get_ident()) or texts)
    assert threading.get_ident() not in seen and len(set(seen)) <= 2  # the same two threads both times
    hits = list(worker_map(lambda _: int(engine._buffers()[0].any()), range(8), 2))
    assert any(hits)  # the workers' piece caches are filled
    engine.clear_caches()
    assert not any(worker_map(lambda _: int(engine._buffers()[0].any()), range(8), 2))


def test_a_worker_thread_maps_on_itself():
    """A pool thread that maps again runs the calls itself (waiting on its own pool could deadlock)."""
    def inner(_):
        outer = threading.get_ident()
        return [ident == outer for ident in worker_map(lambda _: threading.get_ident(), range(3), 2)]

    assert list(worker_map(inner, range(4), 2)) == [[True] * 3] * 4


def _batch_in_child(queue):
    tok = crayon.load("cl100k_base")
    queue.put(tok.encode_ordinary_batch(["hello world"] * 64, num_threads=2))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork on this platform")
def test_a_forked_child_gets_its_own_worker_threads(cl100k):
    cl100k.encode_ordinary_batch(["hello world"] * 64, num_threads=2)  # the parent's pool is started
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_batch_in_child, args=(queue,))
    child.start()
    assert queue.get(timeout=60) == [[15339, 1917]] * 64
    child.join(timeout=60)
    assert child.exitcode == 0

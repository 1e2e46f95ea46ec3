"""Ray Data: tokenize a ``ray.data.Dataset`` on a cluster (or a local Ray instance) with ``map_batches``.

Ray runs the tasks (reading, scheduling, retries, spilling); Crayon is the function each task calls::

    import ray, crayon.ray_data
    ds = ray.data.read_json("s3://bucket/corpus/*.jsonl")          # or read_text(...): one row per line
    tokens = ds.map_batches(crayon.ray_data.Tokenize("cl100k_base"), batch_format="pyarrow")
    tokens.write_parquet("s3://bucket/tokens/")                     # each worker writes its blocks
    # or, one .bin shard identical to `crayon encode` (written by the driver):
    crayon.ray_data.write_shard(ds, "train.bin", "cl100k_base")

``Tokenize`` adds a ``tokens`` column (``list<uint32>``: ``encode_ordinary`` of the row's text). The tokenizer
travels to the workers by pickling, which for ``crayon.load``'s tokenizers is the profile name or the file path
(each worker loads it from its own disk or profile cache).
"""

from __future__ import annotations

import os

import numpy as np

from crayon.shards import TokenChunk, write_chunks


def _as_tokenizer(tokenizer):
    if isinstance(tokenizer, (str, os.PathLike)):
        from crayon.loading import load

        return load(tokenizer)
    return tokenizer


class Tokenize:
    """A ``map_batches`` callable (``batch_format="pyarrow"``): the batch with a ``tokens`` column added."""

    def __init__(self, tokenizer="cl100k_base", *, text_column: str = "text", append_eot: bool = False):
        self.tokenizer = _as_tokenizer(tokenizer)
        self.text_column, self.append_eot = text_column, append_eot
        self.eot = [self.tokenizer.eot_token] if append_eot else []

    def __call__(self, batch):
        import pyarrow as pa

        if self.text_column not in batch.column_names:
            raise KeyError(f"no column {self.text_column!r} in the batch (columns: {', '.join(batch.column_names)})")
        texts = batch.column(self.text_column).to_pylist()
        tokens = [ids + self.eot for ids in self.tokenizer.encode_ordinary_batch(texts)]
        return batch.append_column("tokens", pa.array(tokens, type=pa.list_(pa.uint32())))


def write_shard(dataset, output, tokenizer="cl100k_base", *, text_column: str = "text", append_eot: bool = False,
                progress: bool = False) -> dict:
    """Tokenize ``dataset`` on Ray and write one shard and sidecar (``crayon.shards.write_chunks``), rows in the
    dataset's order: the same files ``crayon encode`` writes for the same documents."""
    tokenizer = _as_tokenizer(tokenizer)
    dataset.context.execution_options.preserve_order = True
    tokenized = dataset.map_batches(Tokenize(tokenizer, text_column=text_column, append_eot=append_eot),
                                    batch_format="pyarrow")

    def chunks():
        document = 0
        for batch in tokenized.iter_batches(batch_format="pyarrow"):
            texts, tokens = batch.column(text_column), batch.column("tokens")
            for text, ids in zip(texts, tokens):
                yield TokenChunk(document, np.asarray(ids.values, np.uint32), True, len(text.as_py().encode("utf-8")))
                document += 1

    return write_chunks(tokenizer, chunks(), output, sources=["ray.data"], append_eot=append_eot, progress=progress)

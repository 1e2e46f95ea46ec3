"""Ray Data: a local Ray instance tokenizes with map_batches and writes the shard `crayon encode` writes."""

from __future__ import annotations

import json

import pytest

import crayon
from crayon.shards import read_shard

ray = pytest.importorskip("ray")
pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_ray_shard_equals_local_shard(local_ray, tmp_path):
    import crayon.ray_data

    texts = [f"document {i}: naïve café 中文 " * (i % 7 + 1) + "end" for i in range(300)]
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    (tmp_path / "lines.txt").write_text("\n".join(texts) + "\n")
    tok = crayon.load("cl100k_base")
    tok.write_tokens([tmp_path / "docs.jsonl"], tmp_path / "local.bin", jsonl_field="text", append_eot=True)
    local, local_meta = read_shard(tmp_path / "local.bin")
    for name, dataset in [("json", ray.data.read_json(str(tmp_path / "docs.jsonl"))),
                          ("text", ray.data.read_text(str(tmp_path / "lines.txt")))]:
        crayon.ray_data.write_shard(dataset, tmp_path / f"{name}.bin", "cl100k_base", append_eot=True)
        shard, meta = read_shard(tmp_path / f"{name}.bin")
        assert shard.tolist() == local.tolist(), name
        assert meta["document_offsets"] == local_meta["document_offsets"]


def test_map_batches_tokens_column(local_ray):
    import crayon.ray_data

    tok = crayon.load("cl100k_base")
    texts = ["hello world", "", "<|endoftext|> as text"]
    rows = ray.data.from_items([{"body": t} for t in texts]).map_batches(
        crayon.ray_data.Tokenize(tok, text_column="body"), batch_format="pyarrow").take_all()
    assert [row["tokens"].tolist() if hasattr(row["tokens"], "tolist") else list(row["tokens"]) for row in rows] == [
        tok.encode_ordinary(t) for t in texts]

"""The embedded sample's shipped text-model vectors (``data/sample/embeddings.parquet``): current,
exactly what the text model computes, and rebuilt the way ``gavil sample-embeddings`` rebuilds them."""

import numpy as np
import pandas as pd
import pytest

from gavil.models.embeddings import Cache, recipe_id, ship_text_vectors
from gavil.models.loading import ModelSpec, RuntimeOptions, load_model
from gavil.pipeline import catalog
from tests.helpers import ROOT

SHIPPED = ROOT / catalog.entry("sample_embeddings").path


@pytest.mark.slow
def test_shipped_vectors_are_current_and_what_the_text_model_computes():
    """Every row is looked up by a run of this installation (its recipe and numerics), and its
    bytes are the model's own: a first run that reads them gets what it would have computed."""
    df = Cache._read(SHIPPED)
    assert len(df) > 1000 and set(df["model"]) == {"all-MiniLM-L6-v2"} and set(df["kind"]) == {"text"}
    model = load_model(ModelSpec("t", "text", "all-MiniLM-L6-v2"), RuntimeOptions(device="cpu", threads=1))
    full = Cache([], None).full_key(model.cache_key("text"))
    assert set(df["weights_id"]) == {full[1]}, "run `gavil sample-embeddings` after a fresh `dvc repro`"
    picks = df.iloc[:: max(1, len(df) // 12)]
    got = model.embed_texts(list(picks["key"]))
    assert [np.ascontiguousarray(v, "<f4").tobytes() for v in got] == list(picks["vector"])


def _rows(model: str, weights_id: str, keys: list[str], fill: float) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "model": model,
            "weights_id": weights_id,
            "kind": "text",
            "key": keys,
            "dim": 2,
            "vector": [np.full(2, fill, "<f4").tobytes() for _ in keys],
        }
    )


def test_shipping_keeps_one_models_current_rows_from_every_cache(tmp_path):
    from gavil.io import write_parquet
    from schemas.embeddings import EmbeddingCache

    now, old = f"m|fp64-cpu|{recipe_id()}", "m|fp64-cpu|canonical-v1 torch=1.0"
    write_parquet(_rows("m", now, ["moon", "cat"], 1.0), tmp_path / "a.parquet", EmbeddingCache)
    write_parquet(
        pd.concat([_rows("m", old, ["star"], 2.0), _rows("other", now, ["dog"], 3.0), _rows("m", now, ["cat"], 1.0)]),
        tmp_path / "b.parquet",
        EmbeddingCache,
    )
    out = tmp_path / "shipped.parquet"
    write_parquet(_rows("m", now, ["apple"], 4.0), out, EmbeddingCache)
    paths = [tmp_path / "a.parquet", tmp_path / "b.parquet", tmp_path / "missing.parquet"]
    assert ship_text_vectors(paths, out, "m") == 3
    got = Cache._read(out)
    assert list(got["key"]) == ["apple", "cat", "moon"] and set(got["weights_id"]) == {now}
    first = out.read_bytes()
    assert ship_text_vectors(paths, out, "m") == 3 and out.read_bytes() == first


def test_a_cpu_only_build_and_the_public_indexs_build_share_cache_entries(monkeypatch):
    """torch's local label (``+cpu``, ``+cu126``) names the accelerator, not the release: the
    public index's torch finds the vectors a CPU-only build of the same release computed (the
    device is in the key already); another release does not."""
    from importlib import metadata

    real = metadata.version
    ids = set()
    for label in ("", "+cpu", "+cu126"):
        monkeypatch.setattr(metadata, "version", lambda d, lb=label: "2.13.0" + lb if d == "torch" else real(d))
        ids.add(recipe_id())
    assert len(ids) == 1 and "torch=2.13.0 " in next(iter(ids))
    monkeypatch.setattr(metadata, "version", lambda d: "2.14.0" if d == "torch" else real(d))
    assert recipe_id() not in ids

"""Same commit, same bytes, on any CPU: what each piece does so, checked piece by piece.

The whole property (the README's first run gives the committed bytes under several OpenBLAS kernels,
1 and 2 threads, and torch capped at AVX2) is CI's gate: ``benchmarks/first_run.py --variant fresh
--variant kernel:...`` (``.ci/run``). Here: every stored float declares its precision and is written
at it; the text model's vectors are the same bytes whatever torch's kernels and thread count; the
fits that decide run in float64; model-output caches are never hashed in ``dvc.lock``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import schemas
from gavil.io import read_parquet, write_parquet
from gavil.pipeline import catalog
from tests.helpers import ROOT


@pytest.mark.parametrize("table", [t.name for t in catalog.TABLES])
def test_every_stored_float_declares_its_precision(table):
    """A float column (or list of floats) is either rounded to stated decimals or exact, with why."""
    precision = schemas.stored_precision(catalog.entry(table).schema())
    undeclared = [c for c, v in precision.items() if v is None]
    assert not undeclared, f"{table}: declare rounded(...) or exact('why') for {undeclared} (schemas/__init__.py)"


def test_the_precision_sweep_sees_every_float_column():
    """The sweep above finds float and float-list columns (a sweep that finds none could not fail)."""
    found = {t.name: schemas.stored_precision(t.schema()) for t in catalog.TABLES}
    assert found["af_replacements"] == {"removed_score": 6, "added_score": 6, "lowest_association_score": 6}
    assert found["predictions"]["similarities"] == 6 and isinstance(found["predictions"]["jaccard"], str)
    assert sum(len(v) for v in found.values()) >= 40


def test_writes_round_declared_columns_so_last_bit_noise_stores_the_same_bytes(tmp_path):
    """Two computations of one score that differ in the last bits (another kernel's summation order)
    store identical bytes; exact columns keep every bit."""
    model = catalog.entry("af_replacements").schema()
    base = {"iteration": 1, "phase": "cheap", "instance_id": "s1", "removed": "a", "added": "b", "member": "text"}
    a = pd.DataFrame([{**base, "removed_score": 0.1 + 0.2, "added_score": 0.7, "lowest_association_score": 0.5}])
    b = a.assign(removed_score=0.3, added_score=0.7 * (1 + 1e-12), lowest_association_score=0.5 - 3e-13)
    write_parquet(a, tmp_path / "a.parquet", model)
    write_parquet(b, tmp_path / "b.parquet", model)
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    assert read_parquet(tmp_path / "a.parquet", model)["removed_score"].iloc[0] == 0.3

    preds = catalog.entry("predictions").schema()
    sims = schemas.round_stored(pd.DataFrame({"similarities": [[0.12345678901, -1e-9], None]}), preds)
    assert sims["similarities"].iloc[0] == [0.123457, -0.0] and sims["similarities"].iloc[1] is None
    exact = schemas.round_stored(pd.DataFrame({"jaccard": [1 / 3]}), preds)
    assert exact["jaccard"].iloc[0] == 1 / 3


def test_pair_features_are_float64():
    from gavil.models.features import pair_features

    x = pair_features(np.ones((2, 3), np.float32), np.full((2, 3), 0.5, np.float32))
    assert x.dtype == np.float64 and x.shape == (2, 6)


def test_model_output_caches_are_no_dvc_output_dependency_or_edge():
    """OCR detections and embeddings hold this machine's float32 network numerics: never in dvc.lock."""
    from gavil.pipeline.registry import STAGES, upstream

    local = [e.name for e in (*catalog.TABLES, *catalog.ARTIFACTS) if e.local]
    assert {"ocr_detections", *catalog.EMBEDDING_CACHES} <= set(local)
    dvc_yaml = (ROOT / "dvc.yaml").read_text()
    lock = (ROOT / "dvc.lock").read_text()
    for name in local:
        assert catalog.entry(name).path not in dvc_yaml and catalog.entry(name).path not in lock, name
    evaluate = next(s for s in STAGES if s.name == "evaluate")
    assert "score_candidates" not in upstream(evaluate)  # it reads the rival's cache, which orders nothing


_EMBED = """
import json, sys, numpy as np
from gavil.models.loading import ModelSpec, RuntimeOptions, load_model
m = load_model(ModelSpec(name="t", kind="text", model="all-MiniLM-L6-v2"), RuntimeOptions(threads=int(sys.argv[1])))
words = ["cat", "a fast food", "werewolf", "moon", "Straße", "eye of the storm", "x" * 40]
v = m.embed_texts(words)
print(json.dumps({"dtype": str(v.dtype), "hex": np.ascontiguousarray(v).tobytes().hex()}))
"""


@pytest.mark.slow
def test_text_vectors_are_the_same_bytes_on_other_kernels_and_thread_counts():
    """The text model runs in float64 and rounds to float32: torch's AVX-512, AVX2 and scalar kernels,
    MKL capped at AVX2, oneDNN capped at SSE4.1, OpenBLAS's Sandybridge kernel, 1 or 2 threads: one result.
    (In float32 the same words differed in the 7th digit between these settings.)"""
    settings = [
        ("2", {}),
        ("1", {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}),
        ("1", {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41", "OPENBLAS_CORETYPE": "Sandybridge"}),
    ]
    out = []
    for threads, extra in settings:
        env = {**os.environ, **extra, "OMP_NUM_THREADS": threads, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
        r = subprocess.run([sys.executable, "-c", _EMBED, threads], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]
        out.append(json.loads(r.stdout.strip().splitlines()[-1]))
    assert out[0]["dtype"] == "float32"
    assert out[1]["hex"] == out[0]["hex"] and out[2]["hex"] == out[0]["hex"]

"""Stage 9, ``export``: the benchmark in the released WinoGAViL layout, as CSV and Parquet.

The CSV has exactly the columns of ``winogavil_dataset.csv`` in its order
(:data:`schemas.export.BENCHMARK_COLUMNS`), list cells as JSON (``["eagle", "ash"]``), floats
as Python writes them (``1.0``, ``0.87``), LF line endings; ``ID`` is 0..n-1. Importing the
release's game files and exporting the 0.8 selection reproduces ``winogavil_dataset.csv``
byte for byte (tested).
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from schemas.export import BENCHMARK_COLUMNS, Benchmark
from schemas.selection import Selection
from stages._io import atomic_path, read_table, section, write_json, write_table
from stages.select_instances import SELECTION_PATH

BENCHMARK_CSV = "data/export/benchmark.csv"
BENCHMARK_PARQUET = "data/export/benchmark.parquet"
METRICS_PATH = "data/metrics/export.json"


def benchmark_table(selection: pd.DataFrame, dataset: str = "game") -> pd.DataFrame:
    """Selected instances of ``dataset`` in ID order, released columns only (:class:`schemas.export.Benchmark`)."""
    sel = selection[(selection["status"] == "selected") & (selection["dataset"] == dataset)].sort_values("ID")
    return sel[BENCHMARK_COLUMNS].reset_index(drop=True)


def to_release_csv(bench: pd.DataFrame) -> str:
    """The CSV text, formatted as the release (JSON list cells, pandas float repr, LF)."""
    out = bench.copy()
    for col in ("candidates", "associations"):
        out[col] = out[col].map(json.dumps)
    return out.to_csv(index=False, lineterminator="\n")


def run(params: dict[str, Any]) -> dict[str, Any]:
    """Stage entry point: selection -> benchmark.csv + benchmark.parquet."""
    p = section(params, "export", ("dataset",))
    bench = write_table(benchmark_table(read_table(SELECTION_PATH, Selection), p["dataset"]), BENCHMARK_PARQUET, Benchmark)
    with atomic_path(BENCHMARK_CSV, ".csv") as tmp:
        tmp.write_text(to_release_csv(bench))
    metrics = {"dataset": p["dataset"], "instances": len(bench), "by_num_candidates": bench["num_candidates"].value_counts().sort_index().to_dict()}
    write_json(METRICS_PATH, metrics)
    return metrics

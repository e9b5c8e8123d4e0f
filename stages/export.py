"""Stage 9, ``export``: the benchmark in the released WinoGAViL layouts, a dataset folder, a card.

Writes, from the ``selected`` instances:

- ``benchmark.csv`` / ``benchmark.parquet``: the game benchmark with exactly the columns of
  ``winogavil_dataset.csv`` in its order (:data:`schemas.export.BENCHMARK_COLUMNS`), JSON list
  cells, Python float repr (``1.0``, ``0.87``), LF, ``ID`` 0..n-1. Importing the release and
  exporting at 0.8 reproduces ``winogavil_dataset.csv`` byte for byte (tested).
- ``game_5_6.csv``, ``game_10_12.csv``, ``swow.csv``: the release's split layouts (with
  ``annotation_index`` and ``images_source``; SWOW weights), CRLF, whole numbers without ``.0``
  as the release writes them, each row's split ID; cell for cell equal to the release files.
- ``dataset/test.parquet`` + ``dataset/images/<concept>.<ext>`` + ``dataset/README.md``: a
  self-contained copy (``datasets.load_dataset("parquet", data_files=...)`` reads it) whose
  ``candidate_images`` column gives each candidate's image path relative to ``dataset/``, and a
  dataset card (counts, threshold, rival model, date, licenses, attribution).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pandas as pd

from schemas.export import BENCHMARK_COLUMNS, Benchmark, BenchmarkDataset
from schemas.ocr import Ocr
from schemas.selection import Selection
from stages._io import atomic_path, read_table, section, write_json, write_table
from stages.ocr_filter import OCR_PATH
from stages.select_instances import SELECTION_PATH

EXPORT_DIR = "data/export"
BENCHMARK_CSV = "data/export/benchmark.csv"
BENCHMARK_PARQUET = "data/export/benchmark.parquet"
SPLIT_FILES = {"game_5_6": "data/export/game_5_6.csv", "game_10_12": "data/export/game_10_12.csv", "swow": "data/export/swow.csv"}
DATASET_DIR = "data/export/dataset"
METRICS_PATH = "data/metrics/export.json"

GAME_SPLIT_COLUMNS = ["candidates", "cue", "associations", "score_fool_the_ai", "num_associations", "annotation_index",
                      "num_candidates", "solvers_jaccard_mean", "solvers_jaccard_std", "images_source", "ID"]  # fmt: skip
SWOW_SPLIT_COLUMNS = ["ID", "cue", "associations", "num_associations", "cue_weight", "associations_mean_weight",
                      "candidates", "candidates_connectivity_score", "solvers_jaccard_mean", "solvers_jaccard_std"]  # fmt: skip


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


def release_cell(value: Any) -> str:
    """A cell as the release's split files write it: lists as JSON, whole numbers without a
    fraction (``1``, ``0``, ``98``), other floats by Python repr (``0.833333333``), null empty."""
    if isinstance(value, list):
        return json.dumps(value)
    if value is None or (isinstance(value, float) and value != value) or value is pd.NA:
        return ""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


def split_table(selection: pd.DataFrame, split: str) -> tuple[list[str], list[list[str]]]:
    """(header, rows of cells) for one release split file, selected rows in import order."""
    sel = selection[(selection["status"] == "selected") & (selection["split"] == split)]
    cols = SWOW_SPLIT_COLUMNS if split == "swow" else GAME_SPLIT_COLUMNS
    source = sel.rename(columns={"split_id": "ID_"}).drop(columns="ID").rename(columns={"ID_": "ID"})
    rows = [[release_cell(v) for v in rec] for rec in source[cols].itertuples(index=False)]
    return cols, rows


def to_split_csv(header: list[str], rows: list[list[str]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def dataset_table(bench: pd.DataFrame, image_names: dict[str, str]) -> pd.DataFrame:
    """The benchmark plus ``candidate_images`` (``images/<file>`` or "" when none was accepted)."""
    out = bench.copy()
    out["candidate_images"] = [[f"images/{image_names[c]}" if c in image_names else "" for c in cands] for cands in out["candidates"]]
    return out


def dataset_card(bench: pd.DataFrame, selection: pd.DataFrame, params: dict[str, Any], n_images: int, built: str) -> str:
    """A Markdown dataset card: contents, how it was selected, rival model, licenses."""
    by_n = bench["num_candidates"].value_counts().sort_index()
    sel = selection
    counts = sel.groupby(["dataset", "status"]).size()
    thr = params["select"]["min_solver_jaccard"]
    score = params["score"]
    rows = "\n".join(f"| {n} | {c} |" for n, c in by_n.items())
    fates = "\n".join(f"| {d} | {s} | {c} |" for (d, s), c in counts.items())
    return f"""---
license: cc-by-4.0
task_categories: [image-classification]
language: [en]
pretty_name: WinoGAViL-style association benchmark
---
# WinoGAViL-style association benchmark

Built {built} by winogavil-pipeline. One split, `test.parquet` ({len(bench)} instances); the same rows as
`../benchmark.csv`, plus `candidate_images`: each candidate's image, relative to this folder
({n_images} image files in `images/`; "" where the pipeline had no accepted image).

Each instance: a `cue`, `num_candidates` candidate images, and the `num_associations` associations a
spymaster linked to the cue. Solvers pick exactly K images; score = Jaccard index with the associations.

| candidates (N) | instances |
|---|---|
{rows}

## How it was made
- Selection: instances whose mean solver Jaccard (3 solvers, `solvers_jaccard_mean`, rounded to 2
  decimals) is >= {thr}; model scores are not used to select. IDs renumbered 0..n-1.
- Rival model: `score_fool_the_ai` = 100 - int(100 x Jaccard of the rival model's top-K); for released
  instances as released (CLIP RN50, OpenAI weights). Pipeline setting: {score['model']} / {score['pretrained']}.
- Instance fates in this build (dataset / status / count):

| dataset | status | instances |
|---|---|---|
{fates}

## Licenses and attribution
- Annotations from the WinoGAViL release: CC-BY 4.0, non-commercial research use. Bitton, Bitton Guetta,
  Yosef, Elovici, Bansal, Stanovsky, Schwartz (2022), "WinoGAViL: Gamified Association Benchmark to
  Challenge Vision-and-Language Models", NeurIPS Datasets and Benchmarks.
- Concepts and SWOW-baseline associations derive from SWOW-EN: De Deyne, Navarro, Perfors, Brysbaert &
  Storms (2019), Behavior Research Methods 51:987-1006 (CC BY-NC-ND 3.0).
- Images keep the licenses of their sources (see the crawl table's `source_url`); sample images: see
  `data/sample/images/ATTRIBUTION.md`.
"""


def _build_date() -> str:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = dt.datetime.fromtimestamp(int(epoch), dt.UTC) if epoch else dt.datetime.now(dt.UTC)
    return when.date().isoformat()


def run(params: dict[str, Any]) -> dict[str, Any]:
    """Stage entry point: selection (+ accepted images) -> benchmark, split files, dataset folder."""
    section(params, "export", ("copy_images",))
    copy_images = bool(params["export"]["copy_images"])
    selection = read_table(SELECTION_PATH, Selection)
    bench = write_table(benchmark_table(selection), BENCHMARK_PARQUET, Benchmark)
    with atomic_path(BENCHMARK_CSV, ".csv") as tmp:
        tmp.write_text(to_release_csv(bench))
    split_counts = {}
    for split, path in SPLIT_FILES.items():
        header, rows = split_table(selection, split)
        with atomic_path(path, ".csv") as tmp:
            tmp.write_text(to_split_csv(header, rows))
        split_counts[split] = len(rows)

    ocr = read_table(OCR_PATH, Ocr)
    accepted = ocr[ocr["status"] == "accepted"]
    wanted = {c for cands in bench["candidates"] for c in cands}
    names = {c: f"{c}{Path(p).suffix}" for c, p in zip(accepted["concept"], accepted["path"]) if c in wanted}
    dataset_dir = Path(DATASET_DIR)
    images_dir = dataset_dir / "images"
    if images_dir.exists():
        shutil.rmtree(images_dir)
    if copy_images:
        images_dir.mkdir(parents=True)
        for concept, path in zip(accepted["concept"], accepted["path"]):
            if concept in names:
                shutil.copyfile(path, images_dir / names[concept])
    else:
        names = {}
    write_table(dataset_table(bench, names), dataset_dir / "test.parquet", BenchmarkDataset)
    with atomic_path(dataset_dir / "README.md", ".md") as tmp:
        tmp.write_text(dataset_card(bench, selection, params, len(names), _build_date()))
    metrics = {
        "instances": len(bench),
        "by_num_candidates": bench["num_candidates"].value_counts().sort_index().to_dict(),
        "split_files": split_counts,
        "candidates_with_image": sum(1 for cands in bench["candidates"] for c in cands if c in names),
        "candidates_total": int(bench["num_candidates"].sum()),
    }
    write_json(METRICS_PATH, metrics)
    return metrics

"""DuckDB over the pipeline's Parquet tables: one view per catalog table (:mod:`gavil.pipeline.catalog`),
named as in the catalog (e.g. ``concepts``, ``images``, ``ocr``, ``scores``, ``selection``,
``benchmark``), for every table that exists under the project root."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from gavil.pipeline import catalog


def table_files(root: str | os.PathLike = ".") -> dict[str, Path]:
    """{view name: parquet file} for every catalog table present under ``root``."""
    return {t.name: p for t in catalog.TABLES if (p := Path(root) / t.path).is_file()}


def connect(root: str | os.PathLike = ".") -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with one view per stage table (read-only over the files)."""
    con = duckdb.connect()
    for name, path in table_files(root).items():
        literal = str(path.resolve()).replace("'", "''")
        con.execute(f"CREATE VIEW \"{name}\" AS SELECT * FROM read_parquet('{literal}')")
    return con

"""DuckDB over the pipeline's Parquet tables: each ``data/<stage>/<table>.parquet`` is a view
named ``<table>`` (e.g. ``concepts``, ``images``, ``scores``, ``selection``, ``benchmark``)."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb


def table_files(root: str | os.PathLike = ".") -> dict[str, Path]:
    """{view name: parquet file} for every stage output under ``root/data`` (sample excluded)."""
    out: dict[str, Path] = {}
    for p in sorted(Path(root, "data").glob("*/*.parquet")):
        if p.parent.name != "sample" and not p.name.startswith("."):
            out[p.stem] = p
    return out


def connect(root: str | os.PathLike = ".") -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with one view per stage table (read-only over the files)."""
    con = duckdb.connect()
    for name, path in table_files(root).items():
        literal = str(path.resolve()).replace("'", "''")
        con.execute(f"CREATE VIEW \"{name}\" AS SELECT * FROM read_parquet('{literal}')")
    return con

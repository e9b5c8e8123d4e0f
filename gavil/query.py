"""DuckDB over the pipeline's Parquet tables: one view per catalog table (:mod:`gavil.pipeline.catalog`),
named as in the catalog (e.g. ``concepts``, ``images``, ``ocr``, ``scores``, ``selection``,
``benchmark``), for every table that exists under the project root."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from gavil.pipeline import catalog


def table_files(root: str | os.PathLike[str] = ".") -> dict[str, Path]:
    """{view name: parquet file} for every catalog table present under ``root``."""
    return {t.name: p for t in catalog.TABLES if (p := Path(root) / t.path).is_file()}


def missing_table_hint(error: str, root: str | os.PathLike[str] = ".") -> str | None:
    """For DuckDB's "Table with name X does not exist" on a catalog table not built yet, one line
    saying which stage writes it and what to run; for a name the catalog does not know, the tables
    there are; None for any other error."""
    import re

    from gavil.pipeline.registry import STAGES

    m = re.search(r"Table with name (\S+) does not exist", error)
    if not m:
        return None
    name = m.group(1).strip("\"'`")
    writer = next((s.name for s in STAGES if name in s.writes), None)
    if writer is not None:
        return f"table {name} does not exist yet: run `dvc repro {writer}` (or `dvc repro`) first"
    built = ", ".join(table_files(root)) or "none yet (run `dvc repro`)"
    return f"no table named {name}: `gavil tables` lists every table; built so far: {built}"


def connect(root: str | os.PathLike[str] = ".") -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with one view per stage table (read-only over the files)."""
    con = duckdb.connect()
    for name, path in table_files(root).items():
        literal = str(path.resolve()).replace("'", "''")
        con.execute(f"CREATE VIEW \"{name}\" AS SELECT * FROM read_parquet('{literal}')")
    return con

"""File I/O shared by every stage: schema-checked Parquet, atomic writes, JSON and CSV.

Stages read and write tables by catalog name (:mod:`stages.catalog`), which calls
:func:`read_parquet` / :func:`write_parquet` here with the table's pandera model: every table is
validated against its ``DataFrameModel`` on write *and* on read.
Writes go to a temporary file in the target directory, then ``os.replace`` (atomic on
POSIX), so an interrupted stage never leaves a half-written table behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from schemas import TableModel, arrow_schema, check_lists, list_columns

_UMASK = os.umask(0)
os.umask(_UMASK)


@contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temp path next to ``path``; rename it onto ``path`` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix or ".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; outputs are shared like normal files
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def validate(df: pd.DataFrame, model: type[TableModel]) -> pd.DataFrame:
    """Validate (and coerce) ``df`` against ``model``.

    Raises:
        pandera.errors.SchemaErrors: column types, values, table checks.
        schemas.ListColumnError: list columns with wrong element types.
    """
    check_lists(df, model)
    out = model.validate(df, lazy=True)
    return out[list(model.to_schema().columns)]


def write_parquet(df: pd.DataFrame, path: str | os.PathLike, model: type[TableModel]) -> pd.DataFrame:
    """Validate ``df`` against ``model`` and write it atomically as Parquet. Returns the validated frame."""
    df = validate(df.reset_index(drop=True), model)
    table = pa.Table.from_pandas(df, schema=arrow_schema(model, df), preserve_index=False)
    with atomic_path(path, ".parquet") as tmp:
        pq.write_table(table, tmp)
    return df


def read_parquet(path: str | os.PathLike, model: type[TableModel]) -> pd.DataFrame:
    """Read a Parquet table and validate it against ``model``.

    List columns come back as Python lists of str (not numpy arrays).

    Raises:
        FileNotFoundError: the file does not exist (:func:`stages.catalog.read_table` says which
            stage to run first).
    """
    table = pq.read_table(path)
    df = table.to_pandas()
    for col in list_columns(model):
        if col in df.columns:
            df[col] = pd.Series(table.column(col).to_pylist(), dtype=object, index=df.index)
    return validate(df, model)


def partitions(items: list[Any], size: int) -> list[list[Any]]:
    """``items`` in consecutive chunks of ``size`` (at least 1); ``[[]]`` when empty, so a
    partitioned stage always has one partition and its reduce still runs."""
    size = max(1, int(size))
    return [items[i : i + size] for i in range(0, len(items), size)] or [[]]


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes (read in 1 MiB blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_csv(df: pd.DataFrame, path: str | os.PathLike) -> None:
    """Write a small CSV atomically (plot data for `dvc plots`)."""
    with atomic_path(path, ".csv") as tmp:
        df.to_csv(tmp, index=False, lineterminator="\n")


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write JSON atomically (sorted keys, 2-space indent, trailing newline; NaN -> null)."""
    with atomic_path(path, ".json") as tmp:
        tmp.write_text(json.dumps(finite(obj), indent=2, sort_keys=True, default=_json_default, allow_nan=False) + "\n")


def finite(o: Any) -> Any:
    """NaN/inf -> None recursively (JSON has no NaN; DVC metrics must parse)."""
    if isinstance(o, float):
        return o if o == o and o not in (float("inf"), float("-inf")) else None
    if isinstance(o, dict):
        return {str(k): finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [finite(v) for v in o]
    if hasattr(o, "item") and not isinstance(o, (str, bytes)):
        return finite(o.item())
    return o


def _json_default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    raise TypeError(f"{type(o).__name__} is not JSON serialisable")

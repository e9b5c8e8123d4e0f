"""File I/O shared by every stage: schema-checked Parquet, atomic writes, JSON and CSV.

Every CSV the project writes goes through :func:`write_csv`, :func:`csv_text` or
:func:`csv_writer`: a cell a spreadsheet would run as a formula is neutralised
(:func:`spreadsheet_safe`), whatever its source.

Stages read and write tables by catalog name (:mod:`gavil.pipeline.catalog`), which calls
:func:`read_parquet` / :func:`write_parquet` here with the table's pandera model: every table is
validated against its ``DataFrameModel`` on write *and* on read.
Writes go to a temporary file in the target directory, then ``os.replace`` (atomic on
POSIX), so an interrupted stage never leaves a half-written table behind.
"""

from __future__ import annotations

import hashlib
import json
import numbers
import os
import re
import tempfile
import unicodedata
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from defusedcsv import csv as defused_csv

from gavil.domain.names import is_invisible
from schemas import TableModel, arrow_schema, check_lists, list_columns, round_stored

_UMASK = os.umask(0)
os.umask(_UMASK)


@contextmanager
def atomic_path(path: str | os.PathLike[str], suffix: str = "") -> Iterator[Path]:
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


def write_parquet(df: pd.DataFrame, path: str | os.PathLike[str], model: type[TableModel]) -> pd.DataFrame:
    """Round ``df``'s float columns to their declared precision (:func:`schemas.round_stored`), validate it
    against ``model`` and write it atomically as Parquet. Returns the validated frame."""
    df = validate(round_stored(df.reset_index(drop=True), model), model)
    table = pa.Table.from_pandas(df, schema=arrow_schema(model, df), preserve_index=False)
    with atomic_path(path, ".parquet") as tmp:
        pq.write_table(table, tmp)
    return df


def read_parquet(path: str | os.PathLike[str], model: type[TableModel]) -> pd.DataFrame:
    """Read a Parquet table and validate it against ``model``.

    List columns come back as Python lists of str (not numpy arrays).

    Raises:
        FileNotFoundError: the file does not exist (:func:`gavil.pipeline.catalog.read_table` says which
            stage to run first).
    """
    table = pq.read_table(path)
    df = table.to_pandas()
    for col in list_columns(model):
        if col in df.columns:
            df[col] = pd.Series(table.column(col).to_pylist(), dtype=object, index=df.index)
    return validate(df, model)


T = TypeVar("T")


def partitions(items: list[T], size: int) -> list[list[T]]:
    """``items`` in consecutive chunks of ``size`` (at least 1); ``[[]]`` when empty, so a
    partitioned stage always has one partition and its reduce still runs."""
    size = max(1, int(size))
    return [items[i : i + size] for i in range(0, len(items), size)] or [[]]


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a file's bytes (read in 1 MiB blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --------------------------------------------------------------------------- spreadsheet-safe CSV
#: First characters that make a spreadsheet read a cell as a formula or command (OWASP "CSV
#: injection": = + - @, and tab / CR; defusedcsv adds | and % (DDE, and some locales); a LF is a
#: line break inside the cell, as a CR is).
FORMULA_STARTS = frozenset("=+-@|%\t\r\n")
#: A plain number, left as it is: ``-0.5`` is the number a spreadsheet reads, not a formula
#: (the same exemption as defusedcsv's).
_PLAIN_NUMBER = re.compile(r"-?[0-9,.]+")


def _quiet(ch: str) -> bool:
    return ch.isspace() or is_invisible(ch)


def spreadsheet_safe(cell: str) -> str:
    """``cell`` neutralised for a spreadsheet: prefixed with ``'`` (shown as text, never run) when
    it starts with a tab, CR or LF, or when its first character after any leading spaces and
    invisible characters is, after NFKC (full-width ``＝`` is ``=``), one of :data:`FORMULA_STARTS`;
    a plain number (``-0.5``) is kept. Every other cell is returned unchanged, so a file without
    such cells is written byte for byte as before."""
    if not cell or _PLAIN_NUMBER.fullmatch(cell):
        return cell
    if cell[0] in "\t\r\n":
        return "'" + cell
    lead = next((ch for ch in cell if not _quiet(ch)), "")
    if lead and unicodedata.normalize("NFKC", lead)[:1] in FORMULA_STARTS:
        return "'" + cell
    return cell


def _safe_value(v: Any, lf_only: bool = False) -> Any:
    """A cell as the safe writers store it: text through :func:`spreadsheet_safe`; numbers,
    booleans and nulls unchanged (their text cannot be a formula); any other object by its text.

    ``lf_only`` (a file whose rows end in LF): a CR inside the text becomes LF. Python's csv
    writer quotes a cell only for the characters of the file's line terminator, so an unquoted
    CR would split the row in a spreadsheet; an LF cell is quoted."""
    if v is None or isinstance(v, (bool, numbers.Number)) or v is pd.NA or v is pd.NaT:
        return v
    text = spreadsheet_safe(v if isinstance(v, str) else str(v))
    return text.replace("\r\n", "\n").replace("\r", "\n") if lf_only else text


def _inert(dtype: Any) -> bool:
    """Whether every value of a column of ``dtype`` is written as a number, a boolean or a date and
    time (never text a spreadsheet could run): numeric, boolean, datetime and timedelta dtypes."""
    api = pd.api.types
    if isinstance(dtype, pd.CategoricalDtype):
        return False  # categories are values of any type, text included (DuckDB ENUM)
    return bool(
        api.is_bool_dtype(dtype) or api.is_numeric_dtype(dtype) or api.is_datetime64_any_dtype(dtype)
    ) or api.is_timedelta64_dtype(dtype)


def safe_frame(df: pd.DataFrame, lineterminator: str = "\n") -> pd.DataFrame:
    """A copy of ``df`` whose cells and column names went through :func:`_safe_value`, in every
    column of every dtype (text, object, categorical such as DuckDB's ENUM, lists, structs, bytes,
    ...), except the dtypes whose values are written as numbers, booleans or dates (:func:`_inert`)."""
    lf_only = "\r" not in lineterminator
    out = df.copy()
    for col in out.columns:
        if not _inert(out[col].dtype):
            out[col] = out[col].astype(object).map(lambda v: _safe_value(v, lf_only))
    out.columns = [_safe_value(c, lf_only) for c in out.columns]
    return out


def csv_text(df: pd.DataFrame, lineterminator: str = "\n") -> str:
    """``df`` as CSV text (pandas' formatting, no index), every cell spreadsheet-safe."""
    return safe_frame(df, lineterminator).to_csv(index=False, lineterminator=lineterminator)


class SafeCsvWriter:
    """A ``csv.writer`` for rows whose every text cell is spreadsheet-safe: cells go through
    :func:`spreadsheet_safe`, then defusedcsv's writer (its own escaping finds nothing left)."""

    def __init__(self, f: Any, **fmtparams: Any) -> None:
        self._w = defused_csv.writer(f, **fmtparams)
        self._lf_only = "\r" not in fmtparams.get("lineterminator", "\r\n")

    def writerow(self, row: Iterable[Any]) -> Any:
        return self._w.writerow([_safe_value(v, self._lf_only) for v in row])

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


def csv_writer(f: Any, **fmtparams: Any) -> SafeCsvWriter:
    """The one way the project writes CSV rows (``csv.writer`` arguments): see :class:`SafeCsvWriter`."""
    return SafeCsvWriter(f, **fmtparams)


def write_csv(df: pd.DataFrame, path: str | os.PathLike[str], lineterminator: str = "\n") -> None:
    """Write a CSV atomically, every cell spreadsheet-safe (:func:`csv_text`)."""
    with atomic_path(path, ".csv") as tmp:
        tmp.write_text(csv_text(df, lineterminator), encoding="utf-8")


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
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

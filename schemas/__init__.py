"""pandera contracts: one ``DataFrameModel`` per table the pipeline writes.

Every stage validates its tables on write and on read (``gavil.io``). Modules are named
after the stage that writes the tables. List-valued columns (candidates, associations,
predictions, ...) are declared with :func:`list_field` and stored in Parquet as
``list<string>`` / ``list<double>``, so DuckDB sees real lists.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pandera.pandas as pa
import pyarrow as pyarrow

TableModel = pa.DataFrameModel


class StrictModel(pa.DataFrameModel):
    """Base of every table the pipeline writes: no undeclared columns (``strict``), values
    coerced to the declared dtypes (``coerce``). Subclasses inherit this Config."""

    class Config:
        strict = True
        coerce = True


_ARROW_ELEMENT = {"str": pyarrow.string(), "float": pyarrow.float64()}
_PY_ELEMENT: dict[str, type | tuple[type, ...]] = {"str": str, "float": (float, int)}


class ListColumnError(ValueError):
    """A list column holds a value that is not a list of the declared element type."""


#: Decimal places of values a model or an optimiser computed (scores, similarities, fractions of them).
MODEL_DECIMALS = 6
#: Decimal places of percentages computed from such values (Table 1, Table 4, paired scores).
PERCENT_DECIMALS = 4


def rounded(decimals: int = MODEL_DECIMALS) -> dict[str, int | str | None]:
    """The ``metadata`` of a float column stored rounded to ``decimals`` places on every write
    (:func:`round_stored`, run by ``gavil.io.write_parquet``): ``pa.Field(..., metadata=rounded(6))``.

    Why: floating-point sums and products come out in the last bits differently on another CPU's
    kernels, thread count or batch shape (~1e-16 relative in float64, ~1e-7 in float32). The project
    computes what decides in float64 and stores scores at a precision far coarser than that, so the
    stored bytes are the same on every machine (``docs/determinism.md``)."""
    return {"decimals": decimals}


def exact(why: str) -> dict[str, int | str | None]:
    """The ``metadata`` of a float column stored exactly as computed or read: a value copied from an
    input file (the release's solver means, SWOW weights), a ratio of two integers (a Jaccard index,
    a strength), or a params value; ``why`` says which (shown in the table catalog)."""
    return {"decimals": None, "exact": why}


def list_field(
    of: str = "str", *, nullable: bool = False, min_len: int = 0, decimals: int | None = None, **kw: Any
) -> Any:
    """A pandera Field for a column of Python lists of ``of`` ("str" or "float").

    pandera has no element type for Python lists, so :func:`check_lists` (run by every table
    read and write) enforces the element type, nullability and minimum length. Float lists say
    their stored precision: ``decimals`` places (see :func:`rounded`), or ``exact=<why>`` in ``kw``.
    """
    meta: dict[str, Any] = {"list_of": of, "list_nullable": nullable, "list_min_len": min_len}
    if of == "float":
        why = kw.pop("exact", None)
        meta |= rounded(decimals) if why is None and decimals is not None else exact(why or "")
    return pa.Field(nullable=True, metadata=meta, **kw)


def stored_precision(model: type[TableModel]) -> dict[str, int | None | str]:
    """{float column: decimals (int), or the ``exact`` reason (str), or None when undeclared}."""
    out: dict[str, int | None | str] = {}
    for name, col in model.to_schema().columns.items():
        meta = col.metadata or {}
        is_float = meta.get("list_of") == "float" or (
            "list_of" not in meta and col.dtype is not None and "float" in str(col.dtype).lower()
        )
        if is_float:
            out[name] = meta["exact"] if meta.get("exact") else meta.get("decimals")
    return out


def round_stored(df: pd.DataFrame, model: type[TableModel]) -> pd.DataFrame:
    """``df`` with every :func:`rounded` column (and float-list column) rounded to its decimals
    (numpy's round half to even on the float64 value); other columns untouched."""
    import numpy as np

    out = None
    for name, col in model.to_schema().columns.items():
        meta = col.metadata or {}
        d = meta.get("decimals")
        if d is None or name not in df.columns:
            continue
        if out is None:
            out = df.copy()
        if meta.get("list_of") == "float":
            out[name] = [
                v if not isinstance(v, list) else np.round(np.asarray(v, dtype=np.float64), d).tolist()
                for v in out[name]
            ]
        else:
            out[name] = np.round(pd.to_numeric(out[name], errors="coerce").astype("float64"), d)
    return df if out is None else out


def check_lists(df: pd.DataFrame, model: type[TableModel]) -> None:
    """Check every list column of ``df`` declared in ``model``.

    Raises:
        ListColumnError: naming the table, column, row and offending value.
    """
    for name, col in model.to_schema().columns.items():
        meta = col.metadata or {}
        if "list_of" not in meta or name not in df.columns:
            continue
        kind = _PY_ELEMENT[meta["list_of"]]
        for i, v in zip(df.index, df[name]):
            if v is None or (isinstance(v, float) and v != v):
                if meta["list_nullable"]:
                    continue
                raise ListColumnError(f"{model.__name__}.{name} row {i}: null, expected a list of {meta['list_of']}")
            if not isinstance(v, list) or not all(isinstance(x, kind) and not isinstance(x, bool) for x in v):
                raise ListColumnError(f"{model.__name__}.{name} row {i}: {v!r} is not a list of {meta['list_of']}")
            if len(v) < meta["list_min_len"]:
                raise ListColumnError(
                    f"{model.__name__}.{name} row {i}: {len(v)} items, expected at least {meta['list_min_len']}"
                )


def list_columns(model: type[TableModel]) -> dict[str, str]:
    """{column: element kind} for the model's list columns."""
    out = {}
    for name, col in model.to_schema().columns.items():
        meta = col.metadata or {}
        if "list_of" in meta:
            out[name] = meta["list_of"]
    return out


def arrow_schema(model: type[TableModel], df: pd.DataFrame) -> pyarrow.Schema:
    """The Parquet schema for ``df``: inferred from pandas, with list columns typed explicitly
    (so an empty table still has ``list<string>`` columns, not ``null``)."""
    lists = list_columns(model)
    base = pyarrow.Schema.from_pandas(df.drop(columns=list(lists)), preserve_index=False)
    fields = []
    for name in df.columns:
        if name in lists:
            fields.append(pyarrow.field(name, pyarrow.list_(_ARROW_ELEMENT[lists[name]])))
        else:
            f = base.field(name)
            if pyarrow.types.is_null(f.type):  # empty or all-null object column
                f = pyarrow.field(name, pyarrow.string())
            fields.append(f)
    return pyarrow.schema(fields)

"""The catalog: every table and file the pipeline writes, by name.

Stages know each other only through these names. A table has a path and a pandera model
(named as ``"module:Class"`` and imported only when the table is read or written, so loading the
catalog, e.g. to generate ``dvc.yaml``, imports no schema and no stage). Non-table artifacts
(the image store, caches, Markdown tables, plots, the dataset folder) have a path and a kind.

How DVC treats an entry follows from it: ``persist`` outputs survive ``dvc repro`` (resumable
stores). Every output is in DVC's cache (so ``dvc push``/``dvc pull`` share it, plots too, and a
collaborator's pull leaves nothing to re-run) except ``cache=False`` ones, which are small files
kept in git instead (the ID ledger, the annotator key's fingerprint). ``local`` entries are no DVC
output at all: the model-output caches (OCR detections, embeddings) hold this machine's network
numerics (float32 networks differ in the last bits across CPUs and instruction sets), so each machine
keeps its own and ``dvc.lock`` hashes only what is the same everywhere.

:func:`read_table` / :func:`write_table` check the model on every read and write. While a stage
runs (:func:`stage_access`), reading or writing a name the stage's spec does not declare raises
:class:`UndeclaredAccess`, so the DAG in ``dvc.yaml`` cannot drift from what the code reads.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pandas as pd

from gavil import io as _io
from gavil.errors import GavilError, MissingInput

__all__ = [
    "ARTIFACTS",
    "ARTIFACT_BY_NAME",
    "EMBEDDING_CACHES",
    "METRICS_DIR",
    "TABLES",
    "TABLE_BY_NAME",
    "TIMINGS_DIR",
    "Artifact",
    "ArtifactKind",
    "Entry",
    "MissingInput",
    "Table",
    "UndeclaredAccess",
    "UnknownName",
    "entry",
    "path",
    "read_table",
    "write_table",
]

from gavil.pipeline.entries import (
    ARTIFACT_BY_NAME,
    ARTIFACTS,
    EMBEDDING_CACHES,
    METRICS_DIR,
    TABLE_BY_NAME,
    TABLES,
    TIMINGS_DIR,
    Artifact,
    ArtifactKind,
    Entry,
    Table,
)


class UnknownName(GavilError, KeyError):
    """A name that is not in the catalog."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class UndeclaredAccess(GavilError):
    """A stage read or wrote a catalog entry its spec does not declare (gavil/pipeline/registry.py)."""


def entry(name: str) -> Entry:
    """The catalog entry ``name`` (table or artifact).

    Raises:
        UnknownName: listing the known names.
    """
    found = TABLE_BY_NAME.get(name) or ARTIFACT_BY_NAME.get(name)
    if found is None:
        raise UnknownName(
            f"{name!r} is not in the catalog (gavil/pipeline/catalog.py); known: {', '.join([*TABLE_BY_NAME, *ARTIFACT_BY_NAME])}"
        )
    return found


def is_local(name: str) -> bool:
    """Whether entry ``name`` is ``local``: no DVC output, dependency or DAG edge (a cache of this
    machine's model numerics, the crawl journal). Reading one never orders stages: a cache holds only
    what its reader could compute itself."""
    return entry(name).local


def metrics_path(stage: str) -> str:
    """``data/metrics/<stage>.json``: a stage's deterministic metrics (DVC metrics, in git)."""
    return f"{METRICS_DIR}/{stage}.json"


# ------------------------------------------------------------------ access control during a stage run
@dataclass(frozen=True)
class _Access:
    stage: str
    reads: frozenset[str]
    writes: frozenset[str]
    producers: dict[str, str]  # catalog name -> the stage that writes it (for "run X first")


_ACCESS: ContextVar[_Access | None] = ContextVar("gavil_stage_access", default=None)


@contextmanager
def stage_access(
    stage: str, reads: tuple[str, ...], writes: tuple[str, ...], producers: dict[str, str] | None = None
) -> Iterator[None]:
    """While the block runs, the catalog lets ``stage`` read ``reads`` and its own ``writes``
    and write only ``writes``; anything else raises :class:`UndeclaredAccess`. ``producers``
    (name -> stage) lets a missing input name the stage to run first."""
    token = _ACCESS.set(_Access(stage, frozenset(reads) | frozenset(writes), frozenset(writes), producers or {}))
    try:
        yield
    finally:
        _ACCESS.reset(token)


def _check(name: str, mode: Literal["read", "write"]) -> None:
    acc = _ACCESS.get()
    if acc is None:
        return
    allowed = acc.reads if mode == "read" else acc.writes
    if name not in allowed:
        raise UndeclaredAccess(
            f"stage {acc.stage} {mode}s {name!r}, which its spec does not declare: add it to "
            f"{'reads' if mode == 'read' else 'writes'}= in gavil/pipeline/registry.py, then `gavil dvc-yaml --write`"
        )


def path(name: str, mode: Literal["read", "write"] = "read", root: str | os.PathLike[str] = ".") -> Path:
    """The path of entry ``name`` under ``root``, checked against the running stage's spec."""
    e = entry(name)
    _check(name, mode)
    return Path(root) / e.path


def read_table(name: str, root: str | os.PathLike[str] = ".") -> pd.DataFrame:
    """Read and validate catalog table ``name``.

    Returns the frame with the model's columns in order; list columns as Python lists.

    Raises:
        MissingInput: the file does not exist (names the stage to run first).
        UndeclaredAccess: during a stage run, ``name`` is not among the stage's reads.
        pandera.errors.SchemaErrors / schemas.ListColumnError: the file breaks the contract.
    """
    t = _table(name)
    p = path(name, "read", root)
    if not p.exists():
        acc = _ACCESS.get()
        who = acc.producers.get(name) if acc else None
        fix = f"run `dvc repro {who}` (or `gavil stage {who}`) first" if who else "run `dvc repro` first"
        raise MissingInput(f"{p} ({name}) does not exist yet: {fix}")
    return _io.read_parquet(p, t.schema())


def write_table(df: pd.DataFrame, name: str, root: str | os.PathLike[str] = ".") -> pd.DataFrame:
    """Validate ``df`` against table ``name``'s model and write it atomically; returns the validated frame.

    A zero-row ``df`` gets the schema's missing columns (:func:`empty_table`), so a stage whose
    input is empty writes a valid empty table without building one by hand.

    Raises:
        UndeclaredAccess: during a stage run, ``name`` is not among the stage's writes.
        pandera.errors.SchemaErrors / schemas.ListColumnError: ``df`` breaks the contract
            (nothing is written then).
    """
    t = _table(name)
    if len(df) == 0:
        df = _with_schema_columns(df, name)
    return _io.write_parquet(df, path(name, "write", root), t.schema())


def empty_table(name: str) -> pd.DataFrame:
    """A zero-row frame with table ``name``'s columns, in order, and dtypes (what a stage writes
    when its input has no rows: every table exists, passes its schema, and reads back)."""
    cols = _table(name).schema().to_schema().columns
    return pd.DataFrame({c: pd.Series(dtype=col.dtype.type) for c, col in cols.items()})


def _with_schema_columns(df: pd.DataFrame, name: str) -> pd.DataFrame:
    """A zero-row ``df`` (often ``pd.DataFrame([])`` of no records, which has no columns at all)
    completed with the schema's missing columns and their dtypes. Only for zero rows, so no value
    is invented; a column the schema does not know is kept, and still refused by the schema."""
    empty = empty_table(name)
    for c in empty.columns:
        if c not in df.columns:
            df = df.assign(**{c: empty[c]})
    return df


def exists(name: str, root: str | os.PathLike[str] = ".") -> bool:
    """Whether entry ``name`` exists on disk (no access check: existence is not a read)."""
    return (Path(root) / entry(name).path).exists()


def _table(name: str) -> Table:
    e = entry(name)
    if not isinstance(e, Table):
        raise UnknownName(f"{name!r} is a {e.kind}, not a table")
    return e

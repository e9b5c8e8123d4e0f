"""A ledger that cannot forget: the ID ledger is checked before selection uses it.

``select_instances`` keeps two records of what it published, both in git:

- the ID ledger, ``data/ledger/benchmark_ids.parquet`` (:class:`schemas.selection.IdLedger`);
- the published IDs, ``data/ledger/published_ids.csv`` (``dataset,ID,fingerprint``, one line per
  ID ever published, retired ones included, sorted): written with the ledger after every build.

Before anything else, :func:`check_ledger` holds the ledger to what was last published and to its
own history: a published ID is given as the next one of its dataset and never removed
(:func:`stages.select_instances.ledger.benchmark_ids`), so a dataset's IDs are exactly 0..max; every
published row's fingerprint is the fingerprint of its own frozen content; and every line of the
published IDs is in the ledger with the same fingerprint. A row missing (an older copy from git, a
lost merge), a changed content, a truncated, empty or foreign file all stop the stage with one line
naming the ID (or the file) and how to restore it, before anything is written. The only way an ID
leaves the benchmark is ``select.retired``, which keeps it in the ledger.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

import pandas as pd

from gavil import io as gio
from gavil.errors import GavilError
from schemas.selection import IdLedger

PUBLISHED_HEADER = ["dataset", "ID", "fingerprint"]
_FP = re.compile(r"[0-9a-f]{64}")


class LedgerError(GavilError):
    """The ID ledger or the published IDs are damaged or have lost a published ID."""


def _restore(path: Path) -> str:
    return (
        f"restore it from git (`git log --oneline -- {path.as_posix()}` lists its versions; "
        f"`git checkout <commit> -- {path.as_posix()}` brings one back); nothing was written. "
        "A published ID leaves the benchmark only through select.retired"
    )


def read_ledger(path: Path) -> pd.DataFrame | None:
    """The ID ledger at ``path`` (None when there is none), validated.

    Raises:
        LedgerError: the file is empty, truncated, not Parquet, or not an ID ledger (one line).
    """
    if not path.exists():
        return None
    try:
        if path.stat().st_size == 0:
            raise ValueError("the file is empty (0 bytes)")
        return gio.read_parquet(path, IdLedger)
    except Exception as e:  # pyarrow, OSError, pandera: all say the same thing here
        why = " ".join(str(e).split())[:160] or type(e).__name__
        raise LedgerError(f"{path.as_posix()} is not a readable ID ledger ({why}): {_restore(path)}") from None


def read_published(path: Path) -> list[tuple[str, int, str]] | None:
    """The published IDs at ``path`` as (dataset, ID, fingerprint), or None when there is none.

    Raises:
        LedgerError: the file is not a list of published IDs (header, fields, duplicates).
    """
    if not path.exists():
        return None
    try:
        rows = list(csv.reader(io.StringIO(path.read_text("utf-8"))))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise LedgerError(f"{path.as_posix()} cannot be read ({e}): {_restore(path)}") from None
    if not rows or rows[0] != PUBLISHED_HEADER:
        raise LedgerError(
            f"{path.as_posix()} does not start with the header {','.join(PUBLISHED_HEADER)}: {_restore(path)}"
        )
    out: list[tuple[str, int, str]] = []
    for n, r in enumerate(rows[1:], start=2):
        if len(r) != 3 or not r[1].isdigit() or not _FP.fullmatch(r[2]) or not r[0]:
            raise LedgerError(f"{path.as_posix()} line {n} is not dataset,ID,fingerprint: {_restore(path)}")
        out.append((r[0], int(r[1]), r[2]))
    if len({(d, i) for d, i, _ in out}) != len(out):
        raise LedgerError(f"{path.as_posix()} lists an ID twice: {_restore(path)}")
    return out


def published_ids(ledger: pd.DataFrame) -> pd.DataFrame:
    """``dataset, ID, fingerprint`` of every ledger row with an ID, sorted (what to write)."""
    has = ledger[ledger["ID"].notna()]
    out = pd.DataFrame({"dataset": has["dataset"], "ID": has["ID"].astype(int), "fingerprint": has["fingerprint"]})
    return out.sort_values(["dataset", "ID"], kind="stable").reset_index(drop=True)


def check_ledger(
    ledger: pd.DataFrame | None,
    published: list[tuple[str, int, str]] | None,
    fingerprints: Callable[[Mapping[str, object]], set[str]],
    ledger_path: Path,
    published_path: Path,
) -> None:
    """Stop unless the ledger still holds every ID it published, each with its content.

    Args:
        ledger: the ID ledger (None: there is none).
        published: the published IDs (:func:`read_published`; None: none recorded yet).
        fingerprints: the fingerprints a ledger row's own content may have (current and earlier
            name forms), to check it against its ``fingerprint``.

    Raises:
        LedgerError: one line naming the first lost or changed ID and how to restore the ledger.
    """
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    if ledger is not None:
        # cast: pandas-stubs types record keys as Hashable; here they are column names
        for r in cast("list[dict[str, Any]]", ledger[ledger["ID"].notna()].to_dict("records")):
            key = (str(r["dataset"]), int(r["ID"]))
            rows[key] = r
            if r["fingerprint"] not in fingerprints(r):
                raise LedgerError(
                    f"{ledger_path.as_posix()}: published {key[0]} ID {key[1]} no longer matches its fingerprint "
                    f"(its cue, candidates or associations were changed): {_restore(ledger_path)}"
                )
    for dataset in sorted({d for d, _ in rows}):
        ids = {i for d, i in rows if d == dataset}
        lost = sorted(set(range(max(ids) + 1)) - ids)
        if lost:
            raise LedgerError(
                f"{ledger_path.as_posix()} has lost published {dataset} ID {lost[0]}"
                f"{f' (and {len(lost) - 1} more)' if len(lost) > 1 else ''}: {_restore(ledger_path)}"
            )
    for dataset, id_, fp in published or []:
        row = rows.get((dataset, id_))
        if row is None:
            where = "is missing" if ledger is None else "has lost"
            raise LedgerError(
                f"{ledger_path.as_posix()} {where} published {dataset} ID {id_} "
                f"(recorded in {published_path.as_posix()}): {_restore(ledger_path)}"
            )
        if row["fingerprint"] != fp:
            raise LedgerError(
                f"{ledger_path.as_posix()}: published {dataset} ID {id_} has other content than "
                f"{published_path.as_posix()} records: {_restore(ledger_path)}"
            )

"""Crowd-platform batch-results CSVs (``HITId, AssignmentId, WorkerId, AssignmentStatus, ...``):
rows are mapped onto raw creation/solve records through ``annotations.crowd.columns`` and fed to
the raw importers of :mod:`stages.import_annotations.raw`; assignments not in an accepted status
are rejected.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from schemas.raw import CROWD_FIXED_COLUMNS
from stages.import_annotations.raw import import_creation_records, import_solve_records, missing_columns
from stages.import_annotations.records import ImportState, Records, duplicate_header_reason, header_of, iter_records


def _crowd_records(path: Path, kind: str, crowd: dict[str, Any]) -> Records:
    """Map crowd batch-results rows onto raw records using ``annotations.crowd.columns``.

    A creation HIT (one candidate set, two cues) yields two creation records with
    instance ids ``<AssignmentId>:1`` and ``:2`` and task id ``<AssignmentId>``.
    Assignments whose status is not in ``crowd.accepted_status`` are rejected.
    """
    cols = crowd["columns"]
    accepted = set(crowd["accepted_status"])
    for line, rec, err in iter_records(path):
        if err or rec is None:
            yield line, rec, err
            continue
        status = rec.get("AssignmentStatus", "")
        if status not in accepted:
            yield line, rec, f"AssignmentStatus {status!r} not in annotations.crowd.accepted_status"
            continue
        if kind == "solve":
            yield (
                line,
                {
                    "instance_id": rec[cols["instance_id"]],
                    "solver_id": rec["WorkerId"],
                    "selection": rec[cols["selection"]],
                },
                None,
            )
            continue
        for i in (1, 2):
            fool_col = cols.get(f"score_fool_the_ai_{i}")
            yield (
                line,
                {
                    "instance_id": f"{rec['AssignmentId']}:{i}",
                    "task_id": rec["AssignmentId"],
                    "spymaster_id": rec["WorkerId"],
                    "cue": rec[cols[f"cue_{i}"]],
                    "candidates": rec[cols["candidates"]],
                    "associations": rec[cols[f"associations_{i}"]],
                    "score_fool_the_ai": rec.get(fool_col) if fool_col else None,
                },
                None,
            )


def import_crowd(path: Path, kind: str, crowd: dict[str, Any], state: ImportState) -> None:
    """Import a crowd-platform batch-results CSV of creation or solve HITs."""
    name = path.as_posix()
    cols = crowd["columns"]
    wanted = (
        ["candidates", "cue_1", "associations_1", "cue_2", "associations_2"]
        if kind == "creation"
        else ["instance_id", "selection"]
    )
    required = CROWD_FIXED_COLUMNS + [cols[k] for k in wanted]
    dup = duplicate_header_reason(header_of(path))
    if dup:
        state.reject(name, 1, kind, dup, None)
        state.read[name] = 0
        return
    missing = missing_columns(path, required)
    if missing:
        state.reject(name, 1, kind, f"missing column(s) {missing} (see annotations.crowd.columns)", None)
        state.read[name] = 0
        return
    records = _crowd_records(path, kind, crowd)
    importer = import_creation_records if kind == "creation" else import_solve_records
    state.read[name] = importer(name, records, state)

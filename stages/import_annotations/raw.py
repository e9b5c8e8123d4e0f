"""Raw collections: creation rows (:class:`schemas.raw.RawCreation`, one row = one cue) and solve
rows (:class:`schemas.raw.RawSolve`, one row = one answer) are validated against the acceptance
rules, accepted into the :class:`~stages.import_annotations.records.ImportState` (annotator ids
hashed, raw cues flagged by the profanity check) or rejected with a reason. The record importers
here also serve the crowd-platform CSVs (:mod:`stages.import_annotations.crowd`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gavil.domain.privacy import hash_annotator
from gavil.domain.vocabulary import clean_cue, name_key
from schemas.raw import RawCreation, RawSolve, required_columns
from stages.import_annotations.records import (
    ImportState,
    Records,
    RowError,
    check_instance_shape,
    duplicate_header_reason,
    header_of,
    iter_records,
    parse_id,
    parse_int,
    parse_list,
)


def missing_columns(path: Path, required: list[str]) -> list[str]:
    header = header_of(path)
    return [c for c in required if c not in header]


def _optional_text(value: object, field: str) -> str | None:
    """An optional short text cell (a rival's entry name or weights): None or blank -> None,
    else the stripped text.

    Raises:
        RowError: not a string, longer than 200 characters, or holding a control character.
    """
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise RowError(f"{field} {value!r} is not a string")
    text = value.strip()
    if len(text) > 200 or not text.isprintable():
        raise RowError(f"{field} must be printable text of at most 200 characters")
    return text or None


def _check_creation(rec: dict[str, Any], state: ImportState) -> dict[str, Any]:
    """Validate one creation record; returns the instance fields. Raises RowError."""
    iid = parse_id(rec.get("instance_id"), "instance_id")
    uid = f"raw:{iid}"
    if uid in state.by_uid:
        raise RowError(f"duplicate instance_id {iid!r}")
    try:
        cue = clean_cue(rec.get("cue"))
    except ValueError as e:
        raise RowError(str(e)) from None
    cands = parse_list(rec["candidates"], "candidates", normalize=True)
    assoc = parse_list(rec["associations"], "associations", normalize=True)
    check_instance_shape(cands, assoc)
    task = None if rec.get("task_id") in (None, "") else parse_id(rec.get("task_id"), "task_id")
    if task is not None:
        prior = state.tasks.get(task)
        if prior is not None:
            if prior["candidates"] != frozenset(name_key(c) for c in cands):
                raise RowError(f"task {task!r}: candidates differ from the task's first cue")
            if len(prior["cues"]) >= 2:
                raise RowError(f"task {task!r} already has two cues")
            if name_key(cue) in prior["cues"]:
                raise RowError(f"duplicate creation: cue {cue!r} was already given for these candidates in this task")
    spymaster = parse_id(rec.get("spymaster_id"), "spymaster_id")
    fool = rec.get("score_fool_the_ai")
    fool = None if fool in (None, "") else parse_int(fool, "score_fool_the_ai")
    if fool is not None and not 0 <= fool <= 100:
        raise RowError(f"score_fool_the_ai={fool} outside 0..100")
    source = rec.get("images_source")
    if source is not None and not isinstance(source, str):
        raise RowError(f"images_source {source!r} is not a string")
    source = (source or "").strip() or None
    rnd = rec.get("round")
    rnd = 0 if rnd in (None, "") else parse_int(rnd, "round")
    if rnd < 0:
        raise RowError(f"round={rnd} is negative (rounds are 0, the release, 1, 2, ...)")
    rival = {k: _optional_text(rec.get(k), k) for k in ("rival_model", "rival_weights")}
    return {
        "uid": uid,
        "cue": cue,
        "candidates": cands,
        "associations": assoc,
        "task": task,
        "spymaster": spymaster,
        "fool": fool,
        "images_source": source,
        "round": rnd,
        **rival,
    }


def _accept_creation(v: dict[str, Any], name: str, line: int, state: ImportState) -> None:
    if v["task"] is not None:
        cands = frozenset(name_key(c) for c in v["candidates"])
        entry = state.tasks.setdefault(v["task"], {"candidates": cands, "cues": set()})
        entry["cues"].add(name_key(v["cue"]))
    state.add_instance(
        {
            "instance_uid": v["uid"],
            "origin": "raw",
            "dataset": "game",
            "source_file": name,
            "source_line": line,
            "release_id": None,
            "task_id": v["task"],
            "cue": v["cue"],
            "candidates": v["candidates"],
            "associations": v["associations"],
            "num_associations": len(v["associations"]),
            "num_candidates": len(v["candidates"]),
            "score_fool_the_ai": v["fool"],
            "solvers_jaccard_mean": None,
            "solvers_jaccard_std": None,
            "annotation_index": None,
            "images_source": v["images_source"],
            "cue_weight": None,
            "associations_mean_weight": None,
            "candidates_connectivity_score": None,
            "spymaster": hash_annotator(v["spymaster"], state.key),
            "cue_flag": state.flag_cue(v["cue"]),
            "round": v["round"],
            "rival_model": v["rival_model"],
            "rival_weights": v["rival_weights"],
        }
    )


def _import_records(
    name: str, kind: str, records: Records, state: ImportState, accept: Callable[[dict[str, Any], int], None]
) -> int:
    """Feed each record to ``accept``; unreadable rows, RowError and missing fields become rejects.

    Returns the number of records read.
    """
    n_read = 0
    for line, rec, err in records:
        n_read += 1
        if err:
            state.reject(name, line, kind, err, rec)
            continue
        assert rec is not None
        try:
            accept(rec, line)
        except (RowError, KeyError) as e:
            state.reject(name, line, kind, str(e) if isinstance(e, RowError) else f"missing field {e}", rec)
    return n_read


def import_creation_records(name: str, records: Records, state: ImportState) -> int:
    def accept(rec: dict[str, Any], line: int) -> None:
        _accept_creation(_check_creation(rec, state), name, line, state)

    return _import_records(name, "creation", records, state, accept)


def import_solve_records(name: str, records: Records, state: ImportState) -> int:
    def accept(rec: dict[str, Any], line: int) -> None:
        uid = f"raw:{parse_id(rec.get('instance_id'), 'instance_id')}"
        inst = state.by_uid.get(uid)
        if inst is None:
            raise RowError(f"unknown instance_id {rec.get('instance_id')!r}")
        solver = hash_annotator(parse_id(rec.get("solver_id"), "solver_id"), state.key)
        if solver == inst["spymaster"]:
            raise RowError("the solver is the instance's spymaster: an association is solved by other players")
        sel = parse_list(rec["selection"], "selection", normalize=True)
        spelled = {name_key(c): c for c in inst["candidates"]}
        extra = [s for s in sel if name_key(s) not in spelled]
        if extra:
            raise RowError(f"selection {extra} not among the instance's candidates")
        sel = [spelled[name_key(s)] for s in sel]  # one name, the instance's spelling
        if len(sel) != inst["num_associations"]:
            raise RowError(f"selection has {len(sel)} images; the instance asks for K={inst['num_associations']}")
        if (uid, solver) in state.solved:
            raise RowError("this solver already answered this instance")
        state.solved.add((uid, solver))
        state.solves.append(
            {"instance_uid": uid, "solver": solver, "selection": sel, "source_file": name, "source_line": line}
        )

    return _import_records(name, "solve", records, state, accept)


def _import_raw_file(path: Path, kind: str, state: ImportState) -> None:
    """Import a raw creations (:class:`schemas.raw.RawCreation`, one row = one cue) or solves
    (:class:`schemas.raw.RawSolve`, one row = one answer) file; missing columns reject the file."""
    name = path.as_posix()
    model, importer = (RawCreation, import_creation_records) if kind == "creation" else (RawSolve, import_solve_records)
    # a CSV's header names the columns of every row; JSONL records each carry their own keys,
    # so a record missing a field is rejected on its own (as a short CSV row is), not the file
    dup = None if path.suffix.lower() == ".jsonl" else duplicate_header_reason(header_of(path))
    if dup:
        state.reject(name, 1, kind, dup, None)
        state.read[name] = 0
        return
    missing = [] if path.suffix.lower() == ".jsonl" else missing_columns(path, required_columns(model))
    if missing:
        state.reject(name, 1, kind, f"missing column(s) {missing}; required {required_columns(model)}", None)
        state.read[name] = 0
        return
    state.read[name] = importer(name, iter_records(path), state)


def import_creations(path: Path, state: ImportState) -> None:
    """Import a raw creations file (:class:`schemas.raw.RawCreation`; one row = one cue)."""
    _import_raw_file(path, "creation", state)


def import_solves(path: Path, state: ImportState) -> None:
    """Import a raw solves file (:class:`schemas.raw.RawSolve`; one row = one answer)."""
    _import_raw_file(path, "solve", state)

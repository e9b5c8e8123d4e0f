"""Stage 7, ``import_annotations``: human annotations into instances, solves and rejects.

Inputs (README "Annotation formats"):

- **Released WinoGAViL files** (``annotations.release_files`` under ``release_dir``):
  ``game_5_6.csv``/``game_10_12.csv`` (CRLF, whole floats as ``1``), ``swow.csv``, or
  ``winogavil_dataset.csv``; recognised by header. Their solver means/stds and fool-the-AI
  scores are kept exactly as released, and their cues are not re-filtered.
- **Raw collections** (``<raw_dir>/<batch>/``, batches in name order):
  ``creations.csv|jsonl`` (:class:`schemas.raw.RawCreation`) and ``solves.csv|jsonl``
  (:class:`schemas.raw.RawSolve`), and/or crowd-platform batch-results CSVs
  (``HITId, AssignmentId, WorkerId, AssignmentStatus, SubmitTime, WorkTimeInSeconds, Input.*,
  Answer.*``) mapped by ``annotations.crowd.columns``. ``instance_id`` is unique across batches.

A raw creation is accepted when: N in {5, 6, 10, 12} distinct candidates; the cue is a single
token longer than one character; K = len(associations) is within the game's limits for N
(5: 2-3, 6: 2-4, 10: 2-5, 12: 2-6); associations are distinct candidates; the instance_id and
the (cue, candidates) pair are new; within a creation task (``task_id``; a crowd creation HIT)
at most two cues, differing case-insensitively, over the same candidates. A solve is accepted
when its instance is known, the selection has exactly K distinct candidates, and the solver has
not answered that instance. Every other row goes to ``annotation_rejects`` with file, line and
reason. Cues of raw instances pass the profanity filter (``profanity`` params): a flagged cue is
kept with ``cue_flag`` and kept out of selection. Annotator ids are replaced by keyed hashes
(:mod:`stages._privacy`) before anything is stored. A file whose bytes were already imported is
skipped (idempotent re-import).
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from schemas.annotations import AnnotationRejects, Instances, Solves
from schemas.raw import CROWD_FIXED_COLUMNS, RawCreation, RawSolve, required_columns
from stages._io import ParamsError, section, write_json, write_table
from stages._privacy import annotator_key, hash_annotator
from stages.filter_profanity import ProfanityFilter
from stages.winogavil import CANDIDATE_SIZES, K_LIMITS, k_is_valid

INSTANCES_PATH = "data/annotations/instances.parquet"
SOLVES_PATH = "data/annotations/solves.parquet"
REJECTS_PATH = "data/annotations/annotation_rejects.parquet"
METRICS_PATH = "data/metrics/import_annotations.json"

GAME_HEADER = ["candidates", "cue", "associations", "score_fool_the_ai", "num_associations", "annotation_index", "num_candidates", "solvers_jaccard_mean", "solvers_jaccard_std", "images_source", "ID"]
DATASET_HEADER = ["candidates", "cue", "associations", "score_fool_the_ai", "num_associations", "num_candidates", "solvers_jaccard_mean", "solvers_jaccard_std", "ID"]
SWOW_HEADER = ["ID", "cue", "associations", "num_associations", "cue_weight", "associations_mean_weight", "candidates", "candidates_connectivity_score", "solvers_jaccard_mean", "solvers_jaccard_std"]
_ID_COLUMNS = ("spymaster_id", "solver_id", "WorkerId")


class RowError(ValueError):
    """A row is invalid; the message is the reason written to the rejects table."""


# --------------------------------------------------------------------------- cell parsing
def parse_list(value: Any, column: str) -> list[str]:
    """A JSON list of non-empty strings (cell text or an already-parsed list), stripped."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise RowError(f"{column}: not a JSON list ({e.msg})") from e
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise RowError(f"{column}: must be a JSON list of non-empty strings")
    return [v.strip() for v in value]


def parse_int(value: Any, column: str) -> int:
    """An integer cell; accepts ``1`` and ``1.0`` (the release writes both)."""
    try:
        f = float(value)
    except (TypeError, ValueError) as e:
        raise RowError(f"{column}: {value!r} is not a number") from e
    if not f.is_integer():
        raise RowError(f"{column}: {value!r} is not an integer")
    return int(f)


def parse_float(value: Any, column: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError) as e:
        raise RowError(f"{column}: {value!r} is not a number") from e


def _opt_float(rec: dict[str, Any], column: str) -> float | None:
    return parse_float(rec[column], column) if rec.get(column) not in (None, "") else None


def _redact(row: dict[str, Any], key: bytes) -> str:
    clean = {k: (hash_annotator(str(v), key) if k in _ID_COLUMNS and v else v) for k, v in row.items() if k is not None}
    return json.dumps(clean, ensure_ascii=False, default=str)


# --------------------------------------------------------------------------- readers
def iter_records(path: Path) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """Yield (line, record, error) from a CSV (BOM/CRLF tolerant) or JSONL file.

    For CSV, ``line`` is the physical line where the record ends; short rows (e.g. a truncated
    last line) yield an error instead of a record.
    """
    if path.suffix.lower() == ".jsonl":
        with open(path, encoding="utf-8-sig") as f:
            for i, text in enumerate(f, start=1):
                if not text.strip():
                    continue
                try:
                    rec = json.loads(text)
                except json.JSONDecodeError as e:
                    yield i, None, f"not a JSON object ({e.msg})"
                    continue
                yield (i, rec, None) if isinstance(rec, dict) else (i, None, "not a JSON object")
        return
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.DictReader(f)
        for rec in reader:
            if None in rec.values():
                yield reader.line_num, {k: v for k, v in rec.items() if v is not None}, "row has fewer fields than the header (truncated?)"
            elif None in rec:
                yield reader.line_num, None, "row has more fields than the header"
            else:
                yield reader.line_num, rec, None


def header_of(path: Path) -> list[str]:
    if path.suffix.lower() == ".jsonl":
        with open(path, encoding="utf-8-sig") as f:
            for text in f:
                if text.strip():
                    try:
                        return list(json.loads(text))
                    except (json.JSONDecodeError, TypeError):
                        return []
        return []
    with open(path, encoding="utf-8-sig", newline="") as f:
        return next(csv.reader(f), [])


@dataclass
class ImportState:
    """Accumulates accepted rows and rejects across files (one import run)."""

    key: bytes
    flag_cue: Callable[[str], str | None] = lambda cue: None
    instances: list[dict[str, Any]] = field(default_factory=list)
    solves: list[dict[str, Any]] = field(default_factory=list)
    rejects: list[dict[str, Any]] = field(default_factory=list)
    seen_raw_content: set[tuple[str, tuple[str, ...]]] = field(default_factory=set)
    by_uid: dict[str, dict[str, Any]] = field(default_factory=dict)
    solved: set[tuple[str, str]] = field(default_factory=set)
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    read: dict[str, int] = field(default_factory=dict)
    file_hashes: dict[str, str] = field(default_factory=dict)  # sha256 -> first file with it
    skipped_files: list[str] = field(default_factory=list)

    def first_time(self, path: Path) -> bool:
        """False (and the file is noted as skipped) when identical content was already imported."""
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest in self.file_hashes:
            self.skipped_files.append(f"{path.as_posix()} = {self.file_hashes[digest]}")
            return False
        self.file_hashes[digest] = path.as_posix()
        return True

    def reject(self, file: str, line: int, kind: str, reason: str, row: dict[str, Any] | None) -> None:
        self.rejects.append({"source_file": file, "source_line": line, "kind": kind, "reason": reason, "row": _redact(row or {}, self.key)})

    def add_instance(self, inst: dict[str, Any]) -> None:
        self.instances.append(inst)
        self.by_uid[inst["instance_uid"]] = inst


def _check_instance_shape(candidates: list[str], associations: list[str], k: int | None = None, n: int | None = None) -> None:
    if len(set(candidates)) != len(candidates):
        raise RowError("candidates contain duplicates")
    if len(candidates) not in CANDIDATE_SIZES:
        raise RowError(f"{len(candidates)} candidates; must be one of {CANDIDATE_SIZES}")
    if n is not None and n != len(candidates):
        raise RowError(f"num_candidates={n} but {len(candidates)} candidates")
    if len(set(associations)) != len(associations):
        raise RowError("associations contain duplicates")
    extra = [a for a in associations if a not in candidates]
    if extra:
        raise RowError(f"associations {extra} are not among the candidates")
    if k is not None and k != len(associations):
        raise RowError(f"num_associations={k} but {len(associations)} associations")
    if not k_is_valid(len(candidates), len(associations)):
        lo, hi = K_LIMITS[len(candidates)]
        raise RowError(f"K={len(associations)} associations outside {lo}..{hi} for N={len(candidates)}")


def import_release_file(path: Path, dataset: str, state: ImportState) -> None:
    """Import one released WinoGAViL CSV (game, dataset or swow layout) into ``state``."""
    header = header_of(path)
    layout = {tuple(GAME_HEADER): "game", tuple(DATASET_HEADER): "dataset", tuple(SWOW_HEADER): "swow"}.get(tuple(header))
    name = path.as_posix()
    if layout is None:
        state.reject(name, 1, "release", f"header {header} is not a WinoGAViL release layout", None)
        return
    n_read = 0
    for line, rec, err in iter_records(path):
        n_read += 1
        if err:
            state.reject(name, line, "release", err, rec)
            continue
        assert rec is not None
        try:
            cands = parse_list(rec["candidates"], "candidates")
            assoc = parse_list(rec["associations"], "associations")
            k, n = parse_int(rec["num_associations"], "num_associations"), len(cands)
            if "num_candidates" in rec:
                n = parse_int(rec["num_candidates"], "num_candidates")
            _check_instance_shape(cands, assoc, k, n)
            rid = parse_int(rec["ID"], "ID")
            uid = f"release:{path.stem}:{rid}"
            if uid in state.by_uid:
                raise RowError(f"duplicate ID {rid} in {path.name}")
            cue = rec["cue"].strip()
            if not cue:
                raise RowError("empty cue")
            state.add_instance(
                {
                    "instance_uid": uid,
                    "origin": "release",
                    "dataset": dataset,
                    "source_file": name,
                    "source_line": line,
                    "release_id": rid,
                    "cue": cue,
                    "candidates": cands,
                    "associations": assoc,
                    "num_associations": k,
                    "num_candidates": n,
                    "score_fool_the_ai": parse_int(rec["score_fool_the_ai"], "score_fool_the_ai") if "score_fool_the_ai" in rec else None,
                    "solvers_jaccard_mean": parse_float(rec["solvers_jaccard_mean"], "solvers_jaccard_mean"),
                    "solvers_jaccard_std": parse_float(rec["solvers_jaccard_std"], "solvers_jaccard_std"),
                    "annotation_index": parse_int(rec["annotation_index"], "annotation_index") if "annotation_index" in rec else None,
                    "images_source": rec.get("images_source"),
                    "task_id": None,
                    "cue_weight": _opt_float(rec, "cue_weight"),
                    "associations_mean_weight": _opt_float(rec, "associations_mean_weight"),
                    "candidates_connectivity_score": _opt_float(rec, "candidates_connectivity_score"),
                    "spymaster": None,
                    "cue_flag": None,  # released instances are imported as published
                }
            )
        except RowError as e:
            state.reject(name, line, "release", str(e), rec)
    state.read[name] = n_read


def _missing_columns(path: Path, required: list[str]) -> list[str]:
    header = header_of(path)
    return [c for c in required if c not in header]


def _check_creation(rec: dict[str, Any], state: ImportState) -> dict[str, Any]:
    """Validate one creation record; returns the instance fields. Raises RowError."""
    iid = str(rec.get("instance_id") or "").strip()
    if not iid:
        raise RowError("empty instance_id")
    uid = f"raw:{iid}"
    if uid in state.by_uid:
        raise RowError(f"duplicate instance_id {iid!r}")
    cue = str(rec.get("cue") or "").strip()
    if len(cue.split()) != 1 or len(cue) < 2:
        raise RowError(f"cue {cue!r} must be a single token longer than one character")
    cands = parse_list(rec["candidates"], "candidates")
    assoc = parse_list(rec["associations"], "associations")
    _check_instance_shape(cands, assoc)
    content = (cue.lower(), tuple(sorted(cands)))
    if content in state.seen_raw_content:
        raise RowError(f"duplicate creation: cue {cue!r} was already given for these candidates")
    task = str(rec.get("task_id") or "").strip() or None
    if task is not None:
        prior = state.tasks.get(task)
        if prior is not None:
            if prior["candidates"] != tuple(sorted(cands)):
                raise RowError(f"task {task!r}: candidates differ from the task's first cue")
            if len(prior["cues"]) >= 2:
                raise RowError(f"task {task!r} already has two cues")
    spymaster = str(rec.get("spymaster_id") or "").strip()
    if not spymaster:
        raise RowError("empty spymaster_id")
    fool = rec.get("score_fool_the_ai")
    fool = None if fool in (None, "") else parse_int(fool, "score_fool_the_ai")
    if fool is not None and not 0 <= fool <= 100:
        raise RowError(f"score_fool_the_ai={fool} outside 0..100")
    source = str(rec.get("images_source") or "").strip() or None
    return {"uid": uid, "cue": cue, "candidates": cands, "associations": assoc, "content": content, "task": task,
            "spymaster": spymaster, "fool": fool, "images_source": source}  # fmt: skip


def _accept_creation(v: dict[str, Any], name: str, line: int, state: ImportState) -> None:
    state.seen_raw_content.add(v["content"])
    if v["task"] is not None:
        entry = state.tasks.setdefault(v["task"], {"candidates": tuple(sorted(v["candidates"])), "cues": set()})
        entry["cues"].add(v["cue"].lower())
    state.add_instance(
        {
            "instance_uid": v["uid"], "origin": "raw", "dataset": "game", "source_file": name, "source_line": line,
            "release_id": None, "task_id": v["task"], "cue": v["cue"], "candidates": v["candidates"],
            "associations": v["associations"], "num_associations": len(v["associations"]),
            "num_candidates": len(v["candidates"]), "score_fool_the_ai": v["fool"], "solvers_jaccard_mean": None,
            "solvers_jaccard_std": None, "annotation_index": None, "images_source": v["images_source"],
            "cue_weight": None, "associations_mean_weight": None, "candidates_connectivity_score": None,
            "spymaster": hash_annotator(v["spymaster"], state.key), "cue_flag": state.flag_cue(v["cue"]),
        }
    )  # fmt: skip


Records = Iterator[tuple[int, dict[str, Any] | None, str | None]]


def _import_records(name: str, kind: str, records: Records, state: ImportState, accept: Callable[[dict[str, Any], int], None]) -> int:
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


def _import_creation_records(name: str, records: Records, state: ImportState) -> int:
    def accept(rec: dict[str, Any], line: int) -> None:
        _accept_creation(_check_creation(rec, state), name, line, state)

    return _import_records(name, "creation", records, state, accept)


def _import_solve_records(name: str, records: Records, state: ImportState) -> int:
    def accept(rec: dict[str, Any], line: int) -> None:
        uid = f"raw:{str(rec.get('instance_id') or '').strip()}"
        inst = state.by_uid.get(uid)
        if inst is None:
            raise RowError(f"unknown instance_id {rec.get('instance_id')!r}")
        solver_raw = str(rec.get("solver_id") or "").strip()
        if not solver_raw:
            raise RowError("empty solver_id")
        solver = hash_annotator(solver_raw, state.key)
        sel = parse_list(rec["selection"], "selection")
        if len(set(sel)) != len(sel):
            raise RowError("selection contains duplicates")
        extra = [s for s in sel if s not in inst["candidates"]]
        if extra:
            raise RowError(f"selection {extra} not among the instance's candidates")
        if len(sel) != inst["num_associations"]:
            raise RowError(f"selection has {len(sel)} images; the instance asks for K={inst['num_associations']}")
        if (uid, solver) in state.solved:
            raise RowError("this solver already answered this instance")
        state.solved.add((uid, solver))
        state.solves.append({"instance_uid": uid, "solver": solver, "selection": sel, "source_file": name, "source_line": line})

    return _import_records(name, "solve", records, state, accept)


def _import_raw_file(path: Path, kind: str, state: ImportState) -> None:
    """Import a raw creations (:class:`schemas.raw.RawCreation`, one row = one cue) or solves
    (:class:`schemas.raw.RawSolve`, one row = one answer) file; missing columns reject the file."""
    name = path.as_posix()
    model, importer = (RawCreation, _import_creation_records) if kind == "creation" else (RawSolve, _import_solve_records)
    missing = _missing_columns(path, required_columns(model))
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


# --------------------------------------------------------------------------- crowd-platform batch CSVs
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
            yield line, {"instance_id": rec[cols["instance_id"]], "solver_id": rec["WorkerId"], "selection": rec[cols["selection"]]}, None
            continue
        for i in (1, 2):
            fool_col = cols.get(f"score_fool_the_ai_{i}")
            yield line, {
                "instance_id": f"{rec['AssignmentId']}:{i}",
                "task_id": rec["AssignmentId"],
                "spymaster_id": rec["WorkerId"],
                "cue": rec[cols[f"cue_{i}"]],
                "candidates": rec[cols["candidates"]],
                "associations": rec[cols[f"associations_{i}"]],
                "score_fool_the_ai": rec.get(fool_col) if fool_col else None,
            }, None


def import_crowd(path: Path, kind: str, crowd: dict[str, Any], state: ImportState) -> None:
    """Import a crowd-platform batch-results CSV of creation or solve HITs."""
    name = path.as_posix()
    cols = crowd["columns"]
    wanted = ["candidates", "cue_1", "associations_1", "cue_2", "associations_2"] if kind == "creation" else ["instance_id", "selection"]
    required = CROWD_FIXED_COLUMNS + [cols[k] for k in wanted]
    missing = _missing_columns(path, required)
    if missing:
        state.reject(name, 1, kind, f"missing column(s) {missing} (see annotations.crowd.columns)", None)
        state.read[name] = 0
        return
    records = _crowd_records(path, kind, crowd)
    importer = _import_creation_records if kind == "creation" else _import_solve_records
    state.read[name] = importer(name, records, state)


def _find(batch: Path, stem: str) -> Path | None:
    for ext in (".csv", ".jsonl"):
        if (batch / f"{stem}{ext}").exists():
            return batch / f"{stem}{ext}"
    return None


@dataclass(frozen=True)
class ImportResult:
    instances: pd.DataFrame
    solves: pd.DataFrame
    rejects: pd.DataFrame
    metrics: dict[str, Any]


def import_all(
    release_dir: Path | None,
    release_files: list[dict[str, str]],
    raw_dir: Path | None,
    key: bytes,
    crowd: dict[str, Any] | None = None,
    flag_cue: Callable[[str], str | None] | None = None,
) -> ImportResult:
    """Import released files, then raw batches in name order (pure apart from reading inputs).

    In each batch: ``creations.{csv,jsonl}``, the crowd creations CSV, then (after every batch's
    creations, so a later batch may answer an earlier one) ``solves.{csv,jsonl}`` and the crowd
    solves CSV. A file whose bytes were already imported (same sha256) is skipped, so dropping the
    same batch in twice changes nothing.

    Args:
        crowd: ``annotations.crowd`` params (file names, accepted statuses, column map) or None.
        flag_cue: returns why a cue is inappropriate (profanity) or None; raw cues only.
    """
    state = ImportState(key, flag_cue or (lambda cue: None))
    for spec in release_files:
        if not release_dir:
            break
        path = release_dir / spec["file"]
        if not path.exists():
            raise FileNotFoundError(f"annotations.release_files: {path} does not exist")
        import_release_file(path, spec["dataset"], state)
    batches = sorted(p for p in raw_dir.iterdir() if p.is_dir()) if raw_dir and raw_dir.is_dir() else []
    crowd_files = crowd or {}
    for batch in batches:
        creations = _find(batch, "creations")
        if creations and state.first_time(creations):
            import_creations(creations, state)
        cc = batch / crowd_files.get("creations_file", "") if crowd_files else None
        if cc and cc.is_file() and state.first_time(cc):
            import_crowd(cc, "creation", crowd_files, state)
    for batch in batches:
        solves = _find(batch, "solves")
        if solves and state.first_time(solves):
            import_solves(solves, state)
        cs = batch / crowd_files.get("solves_file", "") if crowd_files else None
        if cs and cs.is_file() and state.first_time(cs):
            import_crowd(cs, "solve", crowd_files, state)
    inst = pd.DataFrame(state.instances, columns=list(Instances.to_schema().columns))
    for col in ("release_id", "score_fool_the_ai", "annotation_index"):
        inst[col] = inst[col].astype("Int64")
    for col in ("cue_weight", "associations_mean_weight", "candidates_connectivity_score"):
        inst[col] = inst[col].astype(float)
    sol = pd.DataFrame(state.solves, columns=list(Solves.to_schema().columns))
    rej = pd.DataFrame(state.rejects, columns=list(AnnotationRejects.to_schema().columns))
    by_reason = rej["reason"].str.replace(r"'[^']*'|\[[^\]]*\]|\d+", "…", regex=True).value_counts().to_dict() if len(rej) else {}
    accepted = pd.concat([inst["source_file"], sol["source_file"]]).value_counts().to_dict()
    metrics = {
        "rows_read": state.read,
        "rows_accepted": {f: int(accepted.get(f, 0)) for f in state.read},
        "rows_rejected": {f: int((rej["source_file"] == f).sum()) for f in state.read},
        "instances": {f"{o}/{d}": int(n) for (o, d), n in inst.groupby(["origin", "dataset"]).size().items()},
        "instances_with_flagged_cue": int(inst["cue_flag"].notna().sum()),
        "solves": len(sol),
        "rejected": len(rej),
        "rejected_by_reason": by_reason,
        "skipped_duplicate_files": state.skipped_files,
        "batches": [b.name for b in batches],
    }
    return ImportResult(inst, sol, rej, metrics)


def run(params: dict[str, Any]) -> dict[str, Any]:
    """Stage entry point: release files + raw batches -> instances, solves, annotation_rejects."""
    p = section(params, "annotations", ("release_dir", "release_files", "raw_dir", "annotator_key_env", "crowd"))
    prof = section(params, "profanity", ("extra_words", "allow_words"))
    files = p["release_files"] or []
    for spec in files:
        if not isinstance(spec, dict) or set(spec) != {"file", "dataset"} or spec["dataset"] not in ("game", "swow_baseline"):
            raise ParamsError(f"annotations.release_files entries are {{file, dataset: game|swow_baseline}}; got {spec!r}")
    res = import_all(
        Path(p["release_dir"]) if p["release_dir"] else None,
        files,
        Path(p["raw_dir"]) if p["raw_dir"] else None,
        annotator_key(p["annotator_key_env"]),
        p["crowd"],
        ProfanityFilter(prof["extra_words"], prof["allow_words"]).reason,
    )
    write_table(res.instances, INSTANCES_PATH, Instances)
    write_table(res.solves, SOLVES_PATH, Solves)
    write_table(res.rejects, REJECTS_PATH, AnnotationRejects)
    write_json(METRICS_PATH, res.metrics)
    return res.metrics

"""The game's store: one SQLite file (``<game.store_dir>/game.sqlite``) in WAL mode.

Shared by the game server (:mod:`stages._game`, the writer) and the ``import_annotations``
stage (a reader). Every submission is one ``BEGIN IMMEDIATE`` transaction (writers queue on
SQLite's lock, ``busy_timeout`` 30 s), committed with ``synchronous=FULL`` before the server
answers: an acknowledged submission is in the WAL on disk, so killing the server (``kill -9``)
loses nothing acknowledged, and a submission killed mid-way leaves no partial row. Uniqueness
(one answer per solver and instance, one cue per task and normalised cue, one instance per
(cue, candidates)) is enforced by the schema, so concurrent players cannot duplicate rows.

Tables (ids are random and local to the store; ``import_annotations`` hashes player ids with the
annotator key before anything leaves it):

- ``players(player_id, token_hash, display_name, created_at)``: ``token_hash`` is the sha256 of
  the session token (the token itself is never stored).
- ``tasks(task_id, set_id, spymaster_id, candidates, created_at)``: a creation task, one
  candidate set given to one spymaster for two cues; ``candidates`` a JSON list of names.
- ``creations(seq, instance_id, task_id, spymaster_id, cue, cue_norm, content_key, candidates,
  associations, rival_status, rival_predictions, score_fool_the_ai, created_at)``:
  ``rival_status`` is ``ok``, ``untrained`` (random weights) or ``no_weights`` (then the
  predictions and score are null); ``score_fool_the_ai`` an int 0-100.
- ``solves(seq, instance_id, solver_id, selection, jaccard, created_at)``: ``jaccard`` a fraction.
- ``leases(instance_id, solver_id, leased_at)``: solve work handed out and not yet answered.
- ``settings(key, value)``: ``paused`` ("1"/"0").

Times are Unix seconds (float).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

STORE_FILE = "game.sqlite"

SCHEMA = """
CREATE TABLE IF NOT EXISTS players(
  player_id TEXT PRIMARY KEY, token_hash TEXT NOT NULL UNIQUE, display_name TEXT NOT NULL,
  name_key TEXT NOT NULL UNIQUE, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS tasks(
  task_id TEXT PRIMARY KEY, set_id TEXT NOT NULL, spymaster_id TEXT NOT NULL REFERENCES players(player_id),
  candidates TEXT NOT NULL, created_at REAL NOT NULL, UNIQUE(set_id, spymaster_id));
CREATE TABLE IF NOT EXISTS creations(
  seq INTEGER PRIMARY KEY AUTOINCREMENT, instance_id TEXT NOT NULL UNIQUE,
  task_id TEXT NOT NULL REFERENCES tasks(task_id), spymaster_id TEXT NOT NULL, cue TEXT NOT NULL,
  cue_norm TEXT NOT NULL, content_key TEXT NOT NULL UNIQUE, candidates TEXT NOT NULL, associations TEXT NOT NULL,
  rival_status TEXT NOT NULL CHECK (rival_status IN ('ok', 'untrained', 'no_weights')),
  rival_predictions TEXT, score_fool_the_ai INTEGER CHECK (score_fool_the_ai BETWEEN 0 AND 100),
  created_at REAL NOT NULL, UNIQUE(task_id, cue_norm));
CREATE TABLE IF NOT EXISTS solves(
  seq INTEGER PRIMARY KEY AUTOINCREMENT, instance_id TEXT NOT NULL REFERENCES creations(instance_id),
  solver_id TEXT NOT NULL, selection TEXT NOT NULL, jaccard REAL NOT NULL, created_at REAL NOT NULL,
  UNIQUE(instance_id, solver_id));
CREATE TABLE IF NOT EXISTS leases(
  instance_id TEXT NOT NULL, solver_id TEXT NOT NULL, leased_at REAL NOT NULL, PRIMARY KEY(instance_id, solver_id));
CREATE TABLE IF NOT EXISTS settings(key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def store_file(store_dir: str | Path) -> Path:
    """``<store_dir>/game.sqlite``."""
    return Path(store_dir) / STORE_FILE


def connect(path: str | Path, create: bool = True) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit: :func:`transaction`), WAL,
    ``synchronous=FULL``, foreign keys on, rows as :class:`sqlite3.Row`. Creates the schema when
    ``create`` (the folder too)."""
    path = Path(path)
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    con.row_factory = sqlite3.Row
    con.execute("PRAGMA busy_timeout = 30000")
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("PRAGMA synchronous = FULL")
    con.execute("PRAGMA foreign_keys = ON")
    if create:
        con.executescript(SCHEMA)  # CREATE ... IF NOT EXISTS: safe when several processes open it
    return con


@contextmanager
def transaction(con: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on any exception): one submission; then a
    FULL checkpoint (:func:`checkpoint`)."""
    con.execute("BEGIN IMMEDIATE")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
    checkpoint(con)


def checkpoint(con: sqlite3.Connection) -> None:
    """Copy committed WAL frames into ``game.sqlite`` (``PRAGMA wal_checkpoint(FULL)``: waits for
    readers of older snapshots, up to the busy timeout; a busy result is left to the next one).

    Why: DVC watches the store's folder with the WAL files ignored (``.dvcignore``: the WAL
    index changes on every read, the WAL file appears and disappears with connections), so the
    main file must change exactly when data does. The WAL itself is still what makes a commit
    durable; a frame not yet copied (a crash between commit and checkpoint) is copied by the
    next submission or the next start of the game.
    """
    con.execute("PRAGMA wal_checkpoint(FULL)").fetchall()


def read_submissions(path: str | Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(creations, solves) of a store as raw annotation records, read in one snapshot.

    Each record is ``(seq, fields)`` flattened to a dict with ``seq`` (the row's sequence number,
    the import's "line") and the fields of :class:`schemas.raw.RawCreation` /
    :class:`schemas.raw.RawSolve` (player ids as stored: the import hashes them). A creation's
    ``score_fool_the_ai`` is null unless a trained rival scored it (``rival_status`` ok): random
    weights' scores never enter the benchmark. Returns two empty lists for a missing file.
    """
    path = Path(path)
    if not path.is_file():
        return [], []
    con = connect(path, create=False)
    try:
        con.execute("BEGIN")  # one read snapshot for both tables
        has = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"creations", "solves"} <= has:
            con.execute("COMMIT")
            return [], []
        creations = [
            {
                "seq": r["seq"],
                "instance_id": r["instance_id"],
                "task_id": r["task_id"],
                "spymaster_id": r["spymaster_id"],
                "cue": r["cue"],
                "candidates": json.loads(r["candidates"]),
                "associations": json.loads(r["associations"]),
                "score_fool_the_ai": r["score_fool_the_ai"] if r["rival_status"] == "ok" else None,
                "rival_status": r["rival_status"],
                "images_source": "random",
            }
            for r in con.execute("SELECT * FROM creations ORDER BY seq")
        ]
        solves = [
            {
                "seq": r["seq"],
                "instance_id": r["instance_id"],
                "solver_id": r["solver_id"],
                "selection": json.loads(r["selection"]),
            }
            for r in con.execute("SELECT seq, instance_id, solver_id, selection FROM solves ORDER BY seq")
        ]
        con.execute("COMMIT")
        return creations, solves
    finally:
        con.close()

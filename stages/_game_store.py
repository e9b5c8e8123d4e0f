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

from stages.errors import GavilError

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


#: The store's schema version (``PRAGMA user_version``); 0 is a store from before versioning.
SCHEMA_VERSION = 1
#: What :func:`read_submissions` needs of each table (a store missing one was not written by the
#: game, or lost part of its schema).
READ_COLUMNS = {
    "creations": (
        "seq",
        "instance_id",
        "task_id",
        "spymaster_id",
        "cue",
        "candidates",
        "associations",
        "score_fool_the_ai",
        "rival_status",
    ),
    "solves": ("seq", "instance_id", "solver_id", "selection"),
}
_SQLITE_MAGIC = b"SQLite format 3\x00"


class GameStoreError(GavilError):
    """The game's store cannot be read: damaged, truncated, foreign, newer, or a malformed row.

    The message is one line naming the store file (and the table and ``seq`` of a bad row).
    """


def _fail(path: Path, problem: str, fix: str = "") -> GameStoreError:
    fix = fix or (
        "restore game.sqlite from a backup (the import never modifies it), or move it away if no game was played"
    )
    return GameStoreError(f"game store {path}: {problem}; {fix}")


def _json_list(path: Path, table: str, seq: object, column: str, value: object) -> Any:
    """``value`` parsed as JSON (the row's validation judges its shape); a cell that is not JSON
    text is a damaged row, named by table and ``seq``."""
    try:
        if not isinstance(value, str):
            raise ValueError(f"a {type(value).__name__}, not JSON text")
        return json.loads(value)
    except ValueError as e:  # json.JSONDecodeError is a ValueError
        problem = f"{table} row seq {seq}, column {column!r}: not JSON ({e})"
        raise _fail(
            path, problem, "repair or delete that row (sqlite3), or restore game.sqlite from a backup"
        ) from None


def _open_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection (never changes the file: no journal-mode switch, no schema)."""
    with open(path, "rb") as f:
        head = f.read(len(_SQLITE_MAGIC))
    if not head:
        raise _fail(path, "the file is empty (0 bytes): the game always writes its tables, so it was truncated")
    if head != _SQLITE_MAGIC:
        raise _fail(path, "not an SQLite database (wrong file header)")
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30, isolation_level=None)
    con.row_factory = sqlite3.Row
    con.execute("PRAGMA busy_timeout = 30000")
    return con


def _check_schema(path: Path, con: sqlite3.Connection) -> None:
    """Raise :class:`GameStoreError` unless the store is intact and has the game's read columns."""
    bad = [r[0] for r in con.execute("PRAGMA quick_check")]
    if bad != ["ok"]:
        raise _fail(path, f"damaged (SQLite quick_check: {bad[0]})")
    version = con.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        problem = f"written by a newer gavil (schema version {version} > {SCHEMA_VERSION})"
        raise _fail(path, problem, "import it with that newer version (git pull, pip install -e .)")
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for table, columns in READ_COLUMNS.items():
        if table not in tables:
            found = ", ".join(sorted(t for t in tables if not t.startswith("sqlite_"))) or "none"
            raise _fail(path, f"no table {table!r} (tables: {found}): not a complete game store")
        have = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
        missing = [c for c in columns if c not in have]
        if missing:
            raise _fail(path, f"table {table!r} has no column {missing[0]!r} (columns: {', '.join(sorted(have))})")


def read_submissions(path: str | Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(creations, solves) of a store as raw annotation records, read in one snapshot.

    Each record is ``(seq, fields)`` flattened to a dict with ``seq`` (the row's sequence number,
    the import's "line") and the fields of :class:`schemas.raw.RawCreation` /
    :class:`schemas.raw.RawSolve` (player ids as stored: the import hashes them). A creation's
    ``score_fool_the_ai`` is null unless a trained rival scored it (``rival_status`` ok): random
    weights' scores never enter the benchmark. Returns two empty lists for a missing file. The
    file is opened read-only: reading never changes it.

    Raises:
        GameStoreError: the file is empty (0 bytes), not SQLite, damaged or truncated (SQLite's
            ``quick_check``), of a newer schema (``user_version`` > :data:`SCHEMA_VERSION`), lacks a
            table or column of :data:`READ_COLUMNS`, or a row's list cell is not JSON text.
    """
    path = Path(path)
    if not path.is_file():
        return [], []
    try:
        con = _open_read_only(path)
    except sqlite3.Error as e:
        raise _fail(path, f"cannot be opened ({e})") from None
    try:
        con.execute("BEGIN")  # one read snapshot for both tables
        _check_schema(path, con)
        creations = [
            {
                "seq": r["seq"],
                "instance_id": r["instance_id"],
                "task_id": r["task_id"],
                "spymaster_id": r["spymaster_id"],
                "cue": r["cue"],
                "candidates": _json_list(path, "creations", r["seq"], "candidates", r["candidates"]),
                "associations": _json_list(path, "creations", r["seq"], "associations", r["associations"]),
                "score_fool_the_ai": r["score_fool_the_ai"] if r["rival_status"] == "ok" else None,
                "rival_status": r["rival_status"],
                "images_source": "random",
            }
            for r in con.execute(f"SELECT {', '.join(READ_COLUMNS['creations'])} FROM creations ORDER BY seq")
        ]
        solves = [
            {
                "seq": r["seq"],
                "instance_id": r["instance_id"],
                "solver_id": r["solver_id"],
                "selection": _json_list(path, "solves", r["seq"], "selection", r["selection"]),
            }
            for r in con.execute(f"SELECT {', '.join(READ_COLUMNS['solves'])} FROM solves ORDER BY seq")
        ]
        con.execute("COMMIT")
        return creations, solves
    except sqlite3.Error as e:  # SQLITE_CORRUPT and the like, met while reading a page
        raise _fail(path, f"damaged ({e})") from None
    finally:
        con.close()

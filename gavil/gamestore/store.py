"""The game's store: one SQLite file (``<game.store_dir>/game.sqlite``) in WAL mode.

Shared by the game server (:mod:`gavil.game`, the writer) and the ``import_annotations``
stage (a reader); it knows SQL and nothing of HTTP (its refusals are :mod:`gavil.errors`' domain
errors, which the web app maps to statuses). Every submission is one ``BEGIN IMMEDIATE`` transaction (the writers of one process take turns
(:class:`Writers`), those of several processes queue on SQLite's lock, ``busy_timeout`` 30 s), committed with ``synchronous=FULL`` before the server
answers: an acknowledged submission is in the WAL on disk, so killing the server (``kill -9``)
loses nothing acknowledged, and a submission killed mid-way leaves no partial row. Uniqueness
(one answer per solver and instance, one cue per task and normalised cue, one instance per
(cue, candidates), one answer per served lease, one account per invitation) is enforced by the
schema, so concurrent players cannot duplicate rows.

Schema version :data:`SCHEMA_VERSION` is kept in ``PRAGMA user_version``; a store of an older
version is migrated (one transaction; the steps: :mod:`gavil.gamestore.migrations`) when the game
opens it (:func:`connect` with ``create``); a store of a newer version is refused
(:class:`StoreTooNew`). Version 1 is the first release's store (``user_version`` 0 with tables). Readers (``create=False``) never migrate; they read
every version up to :data:`SCHEMA_VERSION` (:func:`read_submissions`).

Tables (ids are random and local to the store; ``import_annotations`` hashes player ids with the
annotator key before anything leaves it):

- ``players(player_id, token_hash, display_name, name_key, created_at, look_key)``: ``token_hash``
  is the sha256 of the session token (the token itself is never stored); ``name_key`` and
  ``look_key`` are the display name's two unique forms
  (:func:`gavil.domain.names.display_name_keys`: its TR39 skeleton case-folded and as shown).
- ``invitations(code_hash, created_at, used_by, used_at)``: operator-issued single-use join codes
  (``game.identity: invitation``), stored as sha256; ``used_by`` is the one player it created.
- ``tasks(task_id, set_id, spymaster_id, candidates, created_at)``: a creation task, one
  candidate set given to one spymaster for two cues; ``candidates`` a JSON list of names.
- ``creations(seq, instance_id, task_id, spymaster_id, cue, cue_norm, content_key, candidates,
  associations, rival_status, rival_predictions, score_fool_the_ai, created_at, rival_state)``:
  ``rival_status`` is ``ok``, ``untrained`` (random weights) or ``no_weights`` (then the
  predictions and score are null); ``rival_state`` is ``pending`` (stored, the rival's picks not
  yet computed: predictions and score null), ``done`` or ``failed`` (the rival raised: null);
  ``score_fool_the_ai`` an int 0-100. Version 4 adds ``round`` (the round open when it was
  stored; null for the ``swow_af`` variant's rows) and the identity of the rival that scored it:
  ``rival_model`` (the ``models:`` entry), ``rival_architecture``, ``rival_weights`` (pretrained
  tag, ``file:<sha256[:16]>`` or ``untrained``; null without weights) and ``rival_sha256`` (the
  weights file's sha256, null when unknown).
- ``rounds(round_id, rival, architecture, pretrained, weights_sha256, opened_at, closed_at)``
  (version 4): collection rounds, numbered from 1 (round 0 is the released WinoGAViL data); at
  most one has ``closed_at`` null (the open round, enforced by a unique index). ``rival`` is the
  ``models:`` entry named when it was opened, with that entry's architecture, pretrained tag and
  sha256 pin as they were then (:mod:`gavil.game.rounds`).
- ``solves(seq, instance_id, solver_id, selection, jaccard, created_at, lease_id)``: ``jaccard`` a
  fraction; ``lease_id`` the served task it answered (null for version-1 rows).
- ``leases(lease_id, instance_id, solver_id, issued_at, expires_at)``: solve work the server
  handed to one player, not yet answered (an answer deletes it, in the same transaction).
  Version 6 adds ``counted`` to ``leases`` (1: the lease holds one of the association's
  ``select.min_solvers`` places; 0: a pending or failed solver's, which holds none) and to
  ``solves`` (1/0: whether the answer counted when it was given, :func:`gavil.domain.gold.counts`;
  null for answers stored before version 6).
- ``flags(flag_id, instance_id, player_id, category, reason, created_at)`` (version 5): a
  player's flag on an association they were served, one per player and association; ``category``
  one of :data:`gavil.domain.flags.FLAG_CATEGORIES`, ``reason`` cleaned free text (at most 200
  code points, may be empty). ``flag_reviews(review_id, instance_id, decision, note, reviewer,
  flags_through, reviewed_at)``: an admin's ``keep`` or ``retire`` covering the association's
  flags up to ``flags_through``; at most one ``retire`` per association (retire is final). The
  review rule: :mod:`gavil.domain.flags`.
- ``consents(player_id, version, accepted_at)`` (version 7): each player's acceptance of the
  consent text, ``version`` the sha256 of the text's bytes they were shown, one row per player and
  version; ``consent_withdrawals(player_id, withdrawn_at, last_version, leases_released)``: a
  player's withdrawal (final, one per player), the version they had accepted last and how many
  open leases it released (:mod:`gavil.gamestore.consent`, rules :mod:`gavil.domain.consent`).
- ``settings(key, value)``: ``paused`` ("1"/"0").
- ``gold_items``, ``gold_leases``, ``gold_answers``, ``gold_flags`` (version 5): solver checks with
  gold items (``game.gold``), described in :mod:`gavil.gamestore.gold`; ``gold_flags`` holds players'
  flags on the gold items they were served (:mod:`gavil.game.flags`).

Times are Unix seconds (float).
"""

from __future__ import annotations

import fcntl
import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gavil.domain.leases import Lease, lease_refusal
from gavil.errors import GavilError
from gavil.gamestore.migrations import MIGRATIONS
from gavil.gamestore.review import read_flags

STORE_FILE = "game.sqlite"
SCHEMA_VERSION = 7  # PRAGMA user_version of a store this code writes; older ones are migrated on open


class GameStoreError(GavilError):
    """The game's store cannot be read: damaged, truncated, foreign, newer, or a malformed row.

    The message is one line naming the store file (and the table and ``seq`` of a bad row).
    """


class StoreTooNew(GameStoreError):
    """The store was written by a newer version of the game (its ``user_version`` is higher)."""


def store_file(store_dir: str | Path) -> Path:
    """``<store_dir>/game.sqlite``."""
    return Path(store_dir) / STORE_FILE


def store_version(con: sqlite3.Connection) -> int:
    """The store's schema version: ``PRAGMA user_version``, or 1 for a first-release store (tables,
    ``user_version`` 0), or 0 for an empty file."""
    v = int(con.execute("PRAGMA user_version").fetchone()[0])
    if v == 0 and con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'players'").fetchone():
        return 1
    return v


def _too_new(path: Path, v: int) -> StoreTooNew:
    return StoreTooNew(
        f"{path}: the game store has schema version {v}, newer than this code's {SCHEMA_VERSION}.\n"
        "  Update the project (git pull) before opening it; never open it with older code."
    )


def _migrate(con: sqlite3.Connection, path: Path) -> None:
    """Bring the store to :data:`SCHEMA_VERSION`, all steps in one transaction."""
    if store_version(con) == SCHEMA_VERSION:
        return
    con.execute("BEGIN IMMEDIATE")  # another process may be migrating: re-read under the lock
    try:
        v = store_version(con)
        if v > SCHEMA_VERSION:
            raise _too_new(path, v)
        while v < SCHEMA_VERSION:
            step = MIGRATIONS[v]
            if callable(step):
                step(con)
            else:
                for stmt in step.split(";"):
                    if stmt.strip():
                        con.execute(stmt)
            v += 1
        con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def check_store_path(path: str | Path) -> bool:
    """Whether a store exists at ``path``: False when nothing is there (no game was played), True
    for a regular file (symbolic links followed).

    Raises:
        GameStoreError: something that is not a regular file is there (a folder, a dangling or
            looping link, a device): it cannot be the store, and reading it as "no store" would
            silently drop every game answer.
    """
    path = Path(path)
    if path.is_file():
        return True
    if not path.exists() and not path.is_symlink():
        return False
    what = "a dangling or looping symbolic link" if path.is_symlink() and not path.exists() else "not a regular file"
    if path.is_dir():
        what = "a folder"
    raise _fail(path, f"{what}, not an SQLite file", "move it away, or restore game.sqlite from a backup")


#: ``PRAGMA synchronous`` of every connection :func:`connect` opens in this process (the game
#: server sets it once from ``game.synchronous``, :func:`set_synchronous`): ``FULL`` (default), a
#: commit is on disk (fsync) before it returns; ``NORMAL``, in the OS's hands: it survives the
#: process being killed, not a power cut or an OS crash.
SYNCHRONOUS = {"value": "FULL"}


def set_synchronous(value: str) -> None:
    """Set :data:`SYNCHRONOUS` (``FULL`` or ``NORMAL``) for the connections opened from now on.

    Raises:
        ValueError: any other value.
    """
    if value.upper() not in ("FULL", "NORMAL"):
        raise ValueError(f"synchronous must be FULL or NORMAL, not {value!r}")
    SYNCHRONOUS["value"] = value.upper()


def connect(path: str | Path, create: bool = True) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit: :func:`transaction`), WAL,
    ``synchronous`` as :data:`SYNCHRONOUS` (``FULL`` unless the game set it), foreign keys on, rows
    as :class:`sqlite3.Row`. When ``create``: the folder and schema are created and an older store
    is migrated to :data:`SCHEMA_VERSION`.

    Raises:
        StoreTooNew: the store's version is above :data:`SCHEMA_VERSION` (any ``create``).
        GameStoreError: ``path`` is a folder, a dangling link or another non-file
            (:func:`check_store_path`), or a file that is not SQLite.
    """
    path = Path(path)
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
    if check_store_path(path) and path.stat().st_size and _header(path) != _SQLITE_MAGIC:
        raise _fail(path, "not an SQLite database (wrong file header)", "move it away, or restore it from a backup")
    con = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False, factory=StoreConnection)
    con.writers = _writers(path)
    try:
        con.row_factory = sqlite3.Row
        con.execute("PRAGMA busy_timeout = 30000")
        con.execute("PRAGMA journal_mode = WAL")
        con.execute(f"PRAGMA synchronous = {SYNCHRONOUS['value']}")
        con.execute("PRAGMA foreign_keys = ON")
        if create:
            _migrate(con, path)
        elif (v := store_version(con)) > SCHEMA_VERSION:
            raise _too_new(path, v)
    except BaseException:
        con.close()
        raise
    return con


class Writers:
    """The writers of one store file in this process: they take turns on :attr:`lock` (a handover
    the moment it is free) before SQLite's own write lock, whose busy handler would otherwise make
    them poll with sleeps of up to 100 ms; :attr:`waiting` counts those queued for it. With
    ``turns`` (several server processes, :func:`share_writers`), the holder then takes an exclusive
    ``flock`` of that file, so the processes take turns the same way (:meth:`turn`)."""

    def __init__(self, turns: Path | None = None) -> None:
        self.lock = threading.RLock()
        self.waiting = 0
        self.count_lock = threading.Lock()
        self._file = turns.open("a+b") if turns is not None else None
        self._depth = 0  # nested turns of the thread holding the lock

    @contextmanager
    def turn(self) -> Iterator[None]:
        """This process's writers one at a time, then (with ``turns``) the processes one at a time."""
        with self.lock:
            self._depth += 1
            try:
                if self._file is not None and self._depth == 1:
                    fcntl.flock(self._file.fileno(), fcntl.LOCK_EX)
                    try:
                        yield
                    finally:
                        fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
                else:
                    yield
            finally:
                self._depth -= 1


_WRITERS: dict[str, Writers] = {}
_WRITERS_LOCK = threading.Lock()
#: Whether several server processes write the store (``gavil game --workers N``): their writers take
#: turns on ``<store>.writers.lock`` too (:class:`Writers`); set by :func:`share_writers`.
SHARED_WRITERS = {"on": False}


def share_writers() -> None:
    """From now on, this process's writers of a store take turns with other processes' on an
    exclusive ``flock`` of ``<store>.writers.lock`` (set in each worker of ``gavil game --workers``)."""
    SHARED_WRITERS["on"] = True


def _writers(path: Path) -> Writers:
    """The one :class:`Writers` of the store file at ``path`` in this process."""
    key = str(path.resolve())
    with _WRITERS_LOCK:
        if key not in _WRITERS:
            _WRITERS[key] = Writers(path.with_name(path.name + ".writers.lock") if SHARED_WRITERS["on"] else None)
        return _WRITERS[key]


class StoreConnection(sqlite3.Connection):
    """A connection of :func:`connect`: it knows the :class:`Writers` of its store file."""

    writers: Writers | None = None


@contextmanager
def transaction(con: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on any exception): one submission; then a
    checkpoint unless another writer of this process is already queued (the last of a burst
    checkpoints: the main file is current whenever the writers are idle, and a busy server does not
    pay a checkpoint, its slowest part, per write). Writers of one process take turns
    (:class:`Writers`) on a connection of :func:`connect`, and checkpoint after their turn
    (``PASSIVE``: it never waits, so the next writer need not wait for it); across processes
    SQLite's lock decides, or with :func:`share_writers` a file lock first. On any other connection:
    a FULL :func:`checkpoint` after each commit."""
    writers = con.writers if isinstance(con, StoreConnection) else None
    if writers is None:
        with _one_transaction(con):
            yield con
        checkpoint(con)
        return
    with writers.count_lock:
        writers.waiting += 1
    with writers.turn():
        with writers.count_lock:
            writers.waiting -= 1
        with _one_transaction(con):
            yield con
        idle = not writers.waiting
    if idle:
        con.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()


@contextmanager
def _one_transaction(con: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``, ``ROLLBACK`` on any exception."""
    con.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def live_lease(con: sqlite3.Connection, table: str, lease_id: str, pid: str, now: float) -> sqlite3.Row:
    """The live lease ``lease_id`` of player ``pid`` in ``table`` (``leases`` or ``gold_leases``:
    the same rule, :func:`gavil.domain.leases.lease_refusal`, and the same errors for both, so no
    reply tells a gold item from an association).

    Raises:
        gavil.errors.Conflict: already answered (the lease was consumed).
        gavil.errors.NotFound: no such task.
        gavil.errors.Forbidden: served to another player.
        gavil.errors.Expired: expired at ``now`` (Unix seconds).
    """
    row: sqlite3.Row | None = con.execute(f"SELECT * FROM {table} WHERE lease_id = ?", (lease_id,)).fetchone()
    answered = False
    if row is None:
        sql = "SELECT 1 FROM solves WHERE lease_id = ? UNION ALL SELECT 1 FROM gold_answers WHERE lease_id = ?"
        answered = con.execute(sql, (lease_id, lease_id)).fetchone() is not None
    lease = None if row is None else Lease(str(row["solver_id"]), float(row["expires_at"]))
    refusal = lease_refusal(lease, answered, pid, now)
    if refusal is not None:
        raise refusal
    assert row is not None
    return row


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


def _fail(path: Path, problem: str, fix: str = "") -> GameStoreError:
    """The error for a store that cannot be read as it is: ``game store <path>: <problem>; <fix>``
    (the default fix: restore from a backup, or move it away if no game was played)."""
    fix = fix or (
        "restore game.sqlite from a backup (the import never modifies it), or move it away if no game was played"
    )
    return GameStoreError(f"game store {path}: {problem}; {fix}")


def json_cell(path: Path, table: str, row: str, column: str, value: object) -> object:
    """``value`` parsed as JSON (the row's validation judges its shape); a cell that is not JSON
    text is a damaged row, named by ``table`` and ``row`` (how the row is found: ``"seq 3"``, a
    gold id).

    Raises:
        GameStoreError: the cell is not JSON text; the message names table, row and column.
    """
    try:
        if not isinstance(value, str):
            raise ValueError(f"a {type(value).__name__}, not JSON text")
        return json.loads(value)
    except ValueError as e:  # json.JSONDecodeError is a ValueError
        problem = f"{table} row {row}, column {column!r}: not JSON ({e})"
        raise _fail(
            path, problem, "repair or delete that row (sqlite3), or restore game.sqlite from a backup"
        ) from None


def _header(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(len(_SQLITE_MAGIC))


def _open_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection (never changes the file: no journal-mode switch, no schema), rows as
    :class:`sqlite3.Row`, autocommit (the caller opens its read snapshot with ``BEGIN``).

    Raises:
        GameStoreError: the file cannot be read, is empty or is not an SQLite database.
    """
    try:
        head = _header(path)
    except OSError as e:
        raise _fail(path, f"cannot be read ({e.strerror or e})") from None
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
        fix = "import it with that newer version (git pull, pip install -e .)"
        raise StoreTooNew(str(_fail(path, problem, fix)))
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for table, columns in READ_COLUMNS.items():
        if table not in tables:
            found = ", ".join(sorted(t for t in tables if not t.startswith("sqlite_"))) or "none"
            raise _fail(path, f"no table {table!r} (tables: {found}): not a complete game store")
        have = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
        missing = [c for c in columns if c not in have]
        if missing:
            raise _fail(path, f"table {table!r} has no column {missing[0]!r} (columns: {', '.join(sorted(have))})")


@contextmanager
def read_snapshot(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection (:func:`_open_read_only`) inside one read snapshot (``BEGIN``), closed
    on leaving (which ends the snapshot): every table read in the block is read as of one moment.

    Raises:
        GameStoreError: the store cannot be opened, or SQLite meets a damaged page while the block
            reads (``SQLITE_CORRUPT`` and the like); errors the block raises pass unchanged.
    """
    try:
        con = _open_read_only(path)
    except sqlite3.Error as e:
        raise _fail(path, f"cannot be opened ({e})") from None
    try:
        con.execute("BEGIN")
        yield con
    except sqlite3.Error as e:
        raise _fail(path, f"damaged ({e})") from None
    finally:
        con.close()


def _state(row: sqlite3.Row) -> str:
    return str(row["rival_state"]) if "rival_state" in row.keys() else "done"


def read_submissions(path: str | Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(creations, solves) of a store as raw annotation records, read in one snapshot.

    Each record is ``(seq, fields)`` flattened to a dict with ``seq`` (the row's sequence number,
    the import's "line") and the fields of :class:`schemas.raw.RawCreation` /
    :class:`schemas.raw.RawSolve` (player ids as stored: the import hashes them). A creation's
    ``score_fool_the_ai`` is null unless a trained rival scored it (``rival_status`` ok and
    ``rival_state`` done): random weights' scores never enter the benchmark, and a creation whose
    score the game's background rival has not computed yet (``rival_state`` pending) is exported
    like one without a rival (score null, every other field final); once the score is stored, the
    store file changes and the next ``dvc repro`` re-imports it with the score. Each creation also
    carries ``rival_status`` and ``rival_state`` (``done`` for stores of version 1), its ``round``
    (int, null for the ``swow_af`` variant's rows and stores older than version 4) and the scoring
    rival's ``rival_model``, ``rival_architecture``, ``rival_weights`` and ``rival_sha256`` (null
    when not recorded), and its ``flags`` (:class:`gavil.gamestore.review.FlagRecord` list, by
    ``flag_id``, each with its review state; empty for stores older than version 5).
    Returns two empty lists when nothing is at ``path``. The file is opened read-only: reading never changes it.

    Raises:
        GameStoreError: ``path`` is a folder or a dangling link (:func:`check_store_path`), the
            file cannot be read, is empty (0 bytes), not SQLite, damaged or truncated (SQLite's
            ``quick_check``), of a newer schema (``user_version`` > :data:`SCHEMA_VERSION`), lacks a
            table or column of :data:`READ_COLUMNS`, or a row's list cell is not JSON text.
    """
    path = Path(path)
    if not check_store_path(path):
        return [], []
    with read_snapshot(path) as con:
        _check_schema(path, con)
        flags = read_flags(con)
        have = {r[1] for r in con.execute("PRAGMA table_info(creations)")}
        # rival_state: schema version 2 (the background rival); a version-1 store's scores are all final;
        # round and the rival's identity: version 4 (older stores: round null, identity unknown)
        optional = ("rival_state", "round", "rival_model", "rival_architecture", "rival_weights", "rival_sha256")
        creation_columns = READ_COLUMNS["creations"] + tuple(c for c in optional if c in have)
        creations = [
            {
                "seq": r["seq"],
                "instance_id": r["instance_id"],
                "task_id": r["task_id"],
                "spymaster_id": r["spymaster_id"],
                "cue": r["cue"],
                "candidates": json_cell(path, "creations", f"seq {r['seq']}", "candidates", r["candidates"]),
                "associations": json_cell(path, "creations", f"seq {r['seq']}", "associations", r["associations"]),
                "score_fool_the_ai": r["score_fool_the_ai"]
                if r["rival_status"] == "ok" and _state(r) == "done"
                else None,
                "rival_status": r["rival_status"],
                "rival_state": _state(r),
                # served swow_af instances (gavil.game.service.Game.serve_variant) say so; the rest are random sets
                "images_source": "swow_af" if r["spymaster_id"] == "variant:swow_af" else "random",
                **{c: (r[c] if c in r.keys() else None) for c in optional[1:]},
                "flags": flags.get(r["instance_id"], []),
            }
            for r in con.execute(f"SELECT {', '.join(creation_columns)} FROM creations ORDER BY seq")
        ]
        solves = [
            {
                "seq": r["seq"],
                "instance_id": r["instance_id"],
                "solver_id": r["solver_id"],
                "selection": json_cell(path, "solves", f"seq {r['seq']}", "selection", r["selection"]),
                "created_at": r["created_at"],
            }
            for r in con.execute(f"SELECT {', '.join(READ_COLUMNS['solves'])}, created_at FROM solves ORDER BY seq")
        ]
        return creations, solves

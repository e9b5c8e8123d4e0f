"""Rate-limit windows shared by the game's server processes (``gavil game --workers N``): a small
SQLite file beside the store, ``<store>.limits.sqlite`` (:func:`limits_file`), never the store itself
(its schema is untouched).

One table, ``hits(rule, key, lim, t)``: a row per request a moving window let in (``t`` Unix
seconds; ``lim`` the index of the limit in its rule). A check and its count are one transaction,
taken in turns: threads of one process on a lock, processes on an exclusive ``flock`` of
``<store>.limits.lock`` (the kernel wakes the next waiter at once, where SQLite's busy handler polls
with sleeps), so no two processes ever let in the same last request. WAL, ``synchronous=OFF``: the
windows are throttles, not data; a power cut may forget the last requests, never damage the store.
The windows outlive a restart of the server (expired rows are deleted as they are met, and all of
them every :attr:`SharedWindows.SWEEP_EVERY` checks of a process).
"""

from __future__ import annotations

import fcntl
import math
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

LIMITS_SUFFIX = ".limits.sqlite"
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS hits (rule TEXT NOT NULL, key TEXT NOT NULL, lim INTEGER NOT NULL, t REAL NOT NULL);"
    "CREATE INDEX IF NOT EXISTS hits_window ON hits (rule, key, lim, t)"
)


def limits_file(store: str | Path) -> Path:
    """``<store>.limits.sqlite`` beside the store file ``store`` (``game.sqlite``)."""
    store = Path(store)
    return store.with_name(store.name + LIMITS_SUFFIX)


class SharedWindows:
    """Moving windows in ``path`` (created with its table when missing; safe when several processes
    open it at once), shared by every process that opens the same file.

    Args:
        horizon_s: the longest window of any limit (seconds): older rows are swept.
    """

    SWEEP_EVERY = 10_000

    def __init__(self, path: str | Path, horizon_s: float) -> None:
        self.path, self.horizon_s = Path(path), horizon_s
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._lockfile = self.path.with_suffix(".lock").open("a+b")
        self.hits = 0
        self._con = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        with self._turn():
            self._con.execute("PRAGMA journal_mode=WAL")
            self._con.executescript(_SCHEMA)
        self._con.execute("PRAGMA synchronous=OFF")

    @contextmanager
    def _turn(self) -> Iterator[None]:
        """This process's threads one at a time, then the processes one at a time (``flock``)."""
        with self._lock:
            fcntl.flock(self._lockfile.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._lockfile.fileno(), fcntl.LOCK_UN)

    def hit(self, rule: str, key: str, limits: Sequence[tuple[int, float]]) -> tuple[int, int] | None:
        """Count one request under ``rule`` for ``key`` against ``limits`` ((amount, window seconds),
        in order): None when every limit lets it in (it is counted under each); else (the index of
        the first limit already reached, whole seconds until its window lets one more in), the
        request counted under the limits before that one only.

        Raises:
            sqlite3.Error: the file cannot be written (nothing of this request is kept).
        """
        now = time.time()
        con = self._con
        with self._turn():
            con.execute("BEGIN IMMEDIATE")
            try:
                self._sweep(now)
                refused = None
                for i, (amount, span) in enumerate(limits):
                    args = (rule, key, i)
                    con.execute(
                        "DELETE FROM hits WHERE rule = ? AND key = ? AND lim = ? AND t <= ?", (*args, now - span)
                    )
                    n, first = con.execute(
                        "SELECT COUNT(*), MIN(t) FROM hits WHERE rule = ? AND key = ? AND lim = ?", args
                    ).fetchone()
                    if n >= amount:
                        refused = i, max(1, math.ceil(first + span - now))
                        break
                    con.execute("INSERT INTO hits VALUES (?, ?, ?, ?)", (*args, now))
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
        return refused

    def _sweep(self, now: float) -> None:
        """Every :attr:`SWEEP_EVERY` checks of this process: delete the rows older than the horizon."""
        self.hits += 1
        if self.hits % self.SWEEP_EVERY == 0:
            self._con.execute("DELETE FROM hits WHERE t <= ?", (now - self.horizon_s,))

    def close(self) -> None:
        """Close the file and the lock file."""
        self._con.close()
        self._lockfile.close()

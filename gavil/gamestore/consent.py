"""The store's consent records (schema version 7: ``consents`` and ``consent_withdrawals``,
:mod:`gavil.gamestore.store`): what a player accepted and when, their withdrawal, and the readers
of both for the admin's export and the import. The rules are :mod:`gavil.domain.consent`'s.

Times are Unix seconds (UTC by definition). Imports nothing of the game's store, so the store's
readers can import it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import NamedTuple, TypedDict


class PlayerConsent(NamedTuple):
    """One player's consent as stored: the version they accepted last (None: never) and when
    (Unix seconds), and when they withdrew (None: they did not)."""

    accepted: str | None
    accepted_at: float | None
    withdrawn_at: float | None


class ConsentRecord(TypedDict):
    """One acceptance: the player's id as stored (hashed before it leaves the game), the version
    (sha256 of the text's bytes) and the time (Unix seconds)."""

    player_id: str
    version: str
    accepted_at: float


class WithdrawalRecord(TypedDict):
    """One withdrawal: the player's id as stored, the time (Unix seconds), the version accepted
    last (None: none) and how many open leases and unused creation tasks it released."""

    player_id: str
    withdrawn_at: float
    last_version: str | None
    leases_released: int


def has_consent_tables(con: sqlite3.Connection) -> bool:
    """Whether the store has the consent tables (schema version 7 and later)."""
    sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'consent_withdrawals'"
    return con.execute(sql).fetchone() is not None


def player_consent(con: sqlite3.Connection, pid: str) -> PlayerConsent:
    """Player ``pid``'s consent as stored now (:class:`PlayerConsent`)."""
    last = con.execute(
        "SELECT version, accepted_at FROM consents WHERE player_id = ? ORDER BY accepted_at DESC, rowid DESC LIMIT 1",
        (pid,),
    ).fetchone()
    gone = con.execute("SELECT withdrawn_at FROM consent_withdrawals WHERE player_id = ?", (pid,)).fetchone()
    return PlayerConsent(
        None if last is None else str(last[0]),
        None if last is None else float(last[1]),
        None if gone is None else float(gone[0]),
    )


def record_acceptance(con: sqlite3.Connection, pid: str, version: str, now: float) -> float:
    """Store ``pid``'s acceptance of ``version`` at ``now`` (inside the caller's transaction);
    accepting a version again keeps the first time. Returns the stored time (Unix seconds)."""
    con.execute(
        "INSERT OR IGNORE INTO consents (player_id, version, accepted_at) VALUES (?, ?, ?)", (pid, version, now)
    )
    row = con.execute("SELECT accepted_at FROM consents WHERE player_id = ? AND version = ?", (pid, version)).fetchone()
    return float(row[0])


def record_withdrawal(con: sqlite3.Connection, pid: str, now: float) -> WithdrawalRecord:
    """Store ``pid``'s withdrawal at ``now`` (inside the caller's transaction) and release what they
    hold: their open solve leases (``leases``, ``gold_leases``) and creation tasks with no cue yet.
    A second withdrawal changes nothing and returns the first. Answers, creations and flags stay in
    the store: the next build decides their fate (docs/review.md "Consent")."""
    old = con.execute("SELECT * FROM consent_withdrawals WHERE player_id = ?", (pid,)).fetchone()
    if old is not None:
        return _withdrawal(old)
    last = player_consent(con, pid).accepted
    released = con.execute("DELETE FROM leases WHERE solver_id = ?", (pid,)).rowcount
    released += con.execute("DELETE FROM gold_leases WHERE solver_id = ?", (pid,)).rowcount
    released += con.execute(
        "DELETE FROM tasks WHERE spymaster_id = ? AND NOT EXISTS (SELECT 1 FROM creations c WHERE c.task_id = tasks.task_id)",
        (pid,),
    ).rowcount
    con.execute(
        "INSERT INTO consent_withdrawals (player_id, withdrawn_at, last_version, leases_released) VALUES (?, ?, ?, ?)",
        (pid, now, last, released),
    )
    return WithdrawalRecord(player_id=pid, withdrawn_at=now, last_version=last, leases_released=released)


def _withdrawal(r: sqlite3.Row) -> WithdrawalRecord:
    return WithdrawalRecord(
        player_id=str(r["player_id"]),
        withdrawn_at=float(r["withdrawn_at"]),
        last_version=None if r["last_version"] is None else str(r["last_version"]),
        leases_released=int(r["leases_released"]),
    )


def read_consents(con: sqlite3.Connection) -> tuple[list[ConsentRecord], list[WithdrawalRecord]]:
    """Every acceptance (by time, then player) and every withdrawal (by time, then player) of the
    store; two empty lists for a store older than version 7."""
    if not has_consent_tables(con):
        return [], []
    consents = [
        ConsentRecord(player_id=str(r[0]), version=str(r[1]), accepted_at=float(r[2]))
        for r in con.execute("SELECT player_id, version, accepted_at FROM consents ORDER BY accepted_at, player_id")
    ]
    withdrawals = [
        _withdrawal(r) for r in con.execute("SELECT * FROM consent_withdrawals ORDER BY withdrawn_at, player_id")
    ]
    return consents, withdrawals


def read_withdrawals(path: Path) -> dict[str, float]:
    """Player id (as stored) -> withdrawal time (Unix seconds) of the store at ``path``, read-only;
    empty when nothing is there or the store predates version 7.

    Raises:
        gavil.gamestore.store.GameStoreError: the store cannot be read (see
            :func:`gavil.gamestore.store.read_snapshot`).
    """
    from gavil.gamestore.store import check_store_path, read_snapshot

    if not check_store_path(path):
        return {}
    with read_snapshot(path) as con:
        return {w["player_id"]: w["withdrawn_at"] for w in read_consents(con)[1]}

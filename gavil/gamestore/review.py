"""The store's flags and reviews read back (schema version 5 and later: ``flags`` and ``flag_reviews``,
:mod:`gavil.gamestore.store`), each flag with its state under the review rule
(:mod:`gavil.domain.flags`), and the SQL test of a *held* association the game does not serve.

Read by :func:`gavil.gamestore.store.read_submissions` (the import), the admin's review queue and
export (:mod:`gavil.game.flags`, :mod:`gavil.game.admin`). Imports nothing of the game's store, so
the store can import it.
"""

from __future__ import annotations

import sqlite3
from typing import TypedDict

from gavil.domain.flags import FlagState, flag_state


class FlagRecord(TypedDict):
    """One flag as read: the player's id as stored (hashed before it leaves the game), times in Unix
    seconds; ``decision``, ``note``, ``reviewer`` and ``reviewed_at`` are those of the review that
    covers it (null while ``state`` is ``open``)."""

    flag_id: int
    instance_id: str
    player_id: str
    category: str
    reason: str
    created_at: float
    state: FlagState
    decision: str | None
    note: str | None
    reviewer: str | None
    reviewed_at: float | None


def has_flags(con: sqlite3.Connection) -> bool:
    """Whether the store has the flags tables (schema version 5 and later)."""
    return (
        con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'flag_reviews'").fetchone() is not None
    )


def read_flags(con: sqlite3.Connection) -> dict[str, list[FlagRecord]]:
    """instance_id -> its flags (by ``flag_id``) with their states, for every association with a
    flag (once an association is retired, every flag of it is ``retired`` with that review). An older store (no flags tables) has none: ``{}``. Reads in the caller's transaction (one
    snapshot with whatever else it reads)."""
    if not has_flags(con):
        return {}
    reviews: dict[str, list[sqlite3.Row]] = {}
    for r in con.execute("SELECT * FROM flag_reviews ORDER BY review_id"):
        reviews.setdefault(r["instance_id"], []).append(r)
    out: dict[str, list[FlagRecord]] = {}
    for f in con.execute("SELECT * FROM flags ORDER BY flag_id"):
        mine = reviews.get(f["instance_id"], [])
        state, at = flag_state(int(f["flag_id"]), [(int(r["flags_through"]), str(r["decision"])) for r in mine])
        rev = None if at is None else mine[at]
        retire = [r for r in mine if r["decision"] == "retire"]
        if retire:  # retire is final: it decides every flag of the association, kept ones too
            state, rev = "retired", retire[0]
        out.setdefault(f["instance_id"], []).append(
            {
                "flag_id": int(f["flag_id"]),
                "instance_id": str(f["instance_id"]),
                "player_id": str(f["player_id"]),
                "category": str(f["category"]),
                "reason": str(f["reason"]),
                "created_at": float(f["created_at"]),
                "state": state,
                "decision": None if rev is None else str(rev["decision"]),
                "note": None if rev is None else str(rev["note"]),
                "reviewer": None if rev is None else str(rev["reviewer"]),
                "reviewed_at": None if rev is None else float(rev["reviewed_at"]),
            }
        )
    return out


def held(alias: str = "c") -> str:
    """SQL that is true for a held association of the ``creations`` row ``alias``: the game serves
    it to no new solver (:mod:`gavil.domain.flags`). Held: retired by review; or an open flag and no
    review yet (a report takes it out of serving at once); or, after a ``keep``, open flags of weight
    enough. A flag is open when its id is above every review's ``flags_through``.

    Named parameters the query must bind: ``:anyone`` (1: every reporter carries weight, gold checks
    off), ``:weighty`` (JSON list of the player ids whose reports carry weight when ``:anyone`` is 0)
    and ``:need_reporters`` (distinct open reporters of weight that hold it,
    :func:`gavil.domain.flags.reports_hold`)."""
    through = (
        f"COALESCE((SELECT MAX(r.flags_through) FROM flag_reviews r WHERE r.instance_id = {alias}.instance_id), 0)"
    )
    return (
        f"(EXISTS (SELECT 1 FROM flag_reviews r WHERE r.instance_id = {alias}.instance_id AND r.decision = 'retire')"
        f" OR (EXISTS (SELECT 1 FROM flags f WHERE f.instance_id = {alias}.instance_id AND f.flag_id > {through})"
        f" AND (NOT EXISTS (SELECT 1 FROM flag_reviews r WHERE r.instance_id = {alias}.instance_id)"
        f" OR (SELECT COUNT(DISTINCT f.player_id) FROM flags f WHERE f.instance_id = {alias}.instance_id"
        f" AND f.flag_id > {through} AND (:anyone = 1 OR f.player_id IN (SELECT value FROM json_each(:weighty))))"
        " >= :need_reporters)))"
    )

"""Serving gold items to players (``game.gold``; docs/dynamic.md "Solver checks (gold items)").

With ``game.gold.enabled``, gold items (:mod:`gavil.gamestore.gold`: what they are and their
tables) are **interleaved** with real work through the same endpoints, with the same response
keys and the same reply as any association (``POST /api/solve/task``, ``POST /api/solve``): the
served ``instance_id`` looks like a creation's (``g_`` + 16 hex). Which task is gold is drawn per
solver and per task (:func:`gavil.domain.gold.gold_turn`); which gold item, too: the player's own
order of the pool (sha256 of their id and the item's id), so no two solvers share a sequence and
nobody can hand a fixed answer list on. Left out: items the player answered, flagged or created, or
answered as an association, and any item whose creation is still real work (fewer than
``select.min_solvers`` counted answers): a gold item is never work a solver is about to get.

**Nothing tells an answer**: with the switch on, the reply to every answer (gold or real) says the
answer was recorded, with ``jaccard`` null and ``associations`` empty (:func:`reply`), so a gold
item's associations and a player's gold score are shown to nobody but the admin.

**Who counts** is :func:`gavil.domain.gold.counts` (the rule the game and ``import_annotations``
share): an answer counts when its solver had passed when it was given; it is stored with
``counted`` so no later setting changes it, and only counting solvers' leases hold a place.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
from typing import TypedDict

from gavil.domain.gold import counts, gold_turn
from gavil.domain.rules import Answer, score_answer
from gavil.errors import Conflict
from gavil.gamestore.store import live_lease, transaction
from gavil.params.game import GoldParams

#: The settings key recording since when (Unix seconds) the game checks its solvers; read by the import.
GOLD_SINCE = "gold_since"


class SolveTask(TypedDict):
    """A served solve task (:meth:`gavil.game.service.Game.solve_task`), gold or not."""

    lease_id: str
    instance_id: str
    cue: str
    images: list[str]  # sha256 in candidate order
    k: int
    expires_in_s: int


class SolveReply(TypedDict):
    """The reply to an answer (:meth:`gavil.game.service.Game.solve`), gold or not."""

    jaccard: float | None  # a fraction; null while gold checks are on
    selection: list[int]
    associations: list[int]  # positions, revealed once answered; empty while gold checks are on


def reply(answer: Answer, p: GoldParams) -> SolveReply:
    """The reply to a scored answer: its Jaccard and the associations, or (gold checks on) neither,
    for every answer alike, so no reply tells a gold item or its associations."""
    if p.enabled:
        return {"jaccard": None, "selection": answer.selection, "associations": []}
    return {"jaccard": answer.jaccard, "selection": answer.selection, "associations": answer.associations}


def mark_gold_since(db: sqlite3.Connection, p: GoldParams, now: float) -> None:
    """Record in ``settings`` since when the game checks solvers (kept while the switch stays on,
    removed when the game starts with it off): answers before it were given unchecked and count."""
    with transaction(db):
        if not p.enabled:
            db.execute("DELETE FROM settings WHERE key = ?", (GOLD_SINCE,))
        else:
            db.execute("INSERT OR IGNORE INTO settings VALUES (?, ?)", (GOLD_SINCE, repr(now)))


def gold_jaccards(db: sqlite3.Connection, pid: str) -> list[float]:
    """Player ``pid``'s gold Jaccards (fractions) in the order answered."""
    return [
        float(r[0]) for r in db.execute("SELECT jaccard FROM gold_answers WHERE solver_id = ? ORDER BY seq", (pid,))
    ]


def counts_now(db: sqlite3.Connection, pid: str, p: GoldParams) -> bool:
    """Whether an answer player ``pid`` gives now counts (:func:`gavil.domain.gold.counts`)."""
    return (not p.enabled) or counts(gold_jaccards(db, pid), p)


def counted_answers(db: sqlite3.Connection, instance_id: str) -> int:
    """Answers to creation ``instance_id`` that counted when given (``counted`` 1, or null: before version 6)."""
    sql = "SELECT COUNT(*) FROM solves WHERE instance_id = ? AND COALESCE(counted, 1) = 1"
    return int(db.execute(sql, (instance_id,)).fetchone()[0])


def gold_turn_now(db: sqlite3.Connection, pid: str, p: GoldParams) -> bool:
    """Whether player ``pid``'s next task is a gold item (switch on; :func:`gavil.domain.gold.gold_turn`
    of their answers so far, gold and real)."""
    if not p.enabled:
        return False
    n = db.execute(
        "SELECT (SELECT COUNT(*) FROM gold_answers WHERE solver_id = ?1) + (SELECT COUNT(*) FROM solves"
        " WHERE solver_id = ?1)",
        (pid,),
    ).fetchone()[0]
    checked = len(gold_jaccards(db, pid)) >= p.items
    return gold_turn(pid, int(n), checked, p.rate)


_LIVE = (
    "SELECT l.lease_id, l.gold_id, l.expires_at FROM gold_leases l JOIN gold_items g USING (gold_id)"
    " WHERE l.solver_id = ? AND l.expires_at > ? AND g.active = 1 ORDER BY l.issued_at LIMIT 1"
)
_FREE = (
    "SELECT g.gold_id FROM gold_items g WHERE g.active = 1"
    " AND NOT EXISTS (SELECT 1 FROM gold_answers a WHERE a.gold_id = g.gold_id AND a.solver_id = :pid)"
    " AND NOT EXISTS (SELECT 1 FROM gold_flags f WHERE f.gold_id = g.gold_id AND f.player_id = :pid)"
    " AND NOT EXISTS (SELECT 1 FROM creations c WHERE c.instance_id = g.creation_id AND (c.spymaster_id = :pid"
    " OR EXISTS (SELECT 1 FROM solves s WHERE s.instance_id = c.instance_id AND s.solver_id = :pid)"
    " OR (SELECT COUNT(*) FROM solves s WHERE s.instance_id = c.instance_id"
    " AND COALESCE(s.counted, 1) = 1) < :min))"
)


def _own_order(pid: str, gold_id: str) -> bytes:
    return hashlib.sha256(f"gold-pick:{pid}:{gold_id}".encode()).digest()


def live_gold(db: sqlite3.Connection, pid: str, now: float) -> SolveTask | None:
    """The player's live gold lease as a task, or None."""
    lease = db.execute(_LIVE, (pid, now)).fetchone()
    return None if lease is None else _task(db, tuple(lease), now)


def new_gold(db: sqlite3.Connection, pid: str, now: float, lease_s: float, min_solvers: int) -> SolveTask | None:
    """A new gold lease for player ``pid`` (call inside a write transaction, after their expired
    leases were cleared): the first free item in their own order (module docstring), or None."""
    free = [str(r[0]) for r in db.execute(_FREE, {"pid": pid, "min": min_solvers})]
    if not free:
        return None
    lease = (secrets.token_urlsafe(18), min(free, key=lambda g: _own_order(pid, g)), now + lease_s)
    db.execute("DELETE FROM gold_leases WHERE solver_id = ?", (pid,))  # expired, or its item retired
    db.execute("INSERT INTO gold_leases VALUES (?, ?, ?, ?, ?)", (lease[0], lease[1], pid, now, lease[2]))
    return _task(db, lease, now)


def _task(db: sqlite3.Connection, lease: tuple[object, ...], now: float) -> SolveTask:
    g = db.execute("SELECT * FROM gold_items WHERE gold_id = ?", (lease[1],)).fetchone()
    expires = float(lease[2])  # type: ignore[arg-type]  # a REAL column
    return {
        "lease_id": str(lease[0]),
        "instance_id": g["instance_id"],
        "cue": g["cue"],
        "images": json.loads(g["images"]),
        "k": len(json.loads(g["associations"])),
        "expires_in_s": max(0, int(expires - now)),
    }


def is_gold_lease(db: sqlite3.Connection, lease_id: str) -> bool:
    """Whether ``lease_id`` names a gold lease (live or not)."""
    return db.execute("SELECT 1 FROM gold_leases WHERE lease_id = ?", (lease_id,)).fetchone() is not None


def answer_gold(
    db: sqlite3.Connection, pid: str, lease_id: str, selection: object, now: float, p: GoldParams
) -> SolveReply:
    """Store player ``pid``'s answer to gold lease ``lease_id`` (one transaction that consumes the
    lease); the reply of :meth:`gavil.game.service.Game.solve` (same keys, same errors, :func:`reply`)."""

    def live() -> sqlite3.Row:
        return live_lease(db, "gold_leases", lease_id, pid, now)

    g = db.execute("SELECT * FROM gold_items WHERE gold_id = ?", (live()["gold_id"],)).fetchone()
    answer = score_answer(g["candidates"], g["associations"], selection)
    try:
        with transaction(db):
            live()  # again, under the write lock: a concurrent replay lost
            db.execute(
                "INSERT INTO gold_answers (gold_id, solver_id, selection, jaccard, created_at, lease_id)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (g["gold_id"], pid, json.dumps(answer.chosen, ensure_ascii=False), answer.jaccard, now, lease_id),
            )
            db.execute("DELETE FROM gold_leases WHERE lease_id = ?", (lease_id,))
    except sqlite3.IntegrityError:
        raise Conflict("you already solved this association") from None
    return reply(answer, p)

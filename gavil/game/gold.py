"""Serving gold items to players (``game.gold``; docs/dynamic.md "Solver checks (gold items)").

With ``game.gold.enabled``, a player with fewer than ``game.gold.items`` gold answers is served
gold items (:mod:`gavil.gamestore.gold`: what they are and their tables) first, through the same
endpoints and with the same response keys as any association (``POST /api/solve/task``,
``POST /api/solve``): the served ``instance_id`` looks like a creation's (``g_`` + 16 hex) and the
associations are only revealed in the answer's reply, as for every association. Which one: at
random among the active gold items the player has not answered or flagged, did not create and did
not answer as an association of the game.

**Who counts** is :func:`gavil.domain.gold.gold_status` (the one rule the game and
``import_annotations`` share). With the switch on, only answers of solvers who passed count
towards an association's ``select.min_solvers`` answers in the game and its spymaster's
solvable-by-humans score; with it off every answer counts (``not_checked``).
"""

from __future__ import annotations

import json
import random
import secrets
import sqlite3
from typing import TypedDict

from gavil.domain.gold import PASSED, gold_status
from gavil.domain.rules import score_answer
from gavil.errors import Conflict
from gavil.gamestore.store import live_lease, transaction
from gavil.params.game import GoldParams

_PICK = random.SystemRandom()  # which gold item: unpredictable, so players cannot share a fixed answer list


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

    jaccard: float  # a fraction
    selection: list[int]
    associations: list[int]  # positions, revealed once answered


def uncounted(db: sqlite3.Connection, p: GoldParams) -> str:
    """JSON list of the players whose answers do not count now (every player who has not passed;
    ``[]`` with the switch off): for ``s.solver_id NOT IN (SELECT value FROM json_each(?))``."""
    if not p.enabled:
        return "[]"
    js: dict[str, list[float]] = {str(r[0]): [] for r in db.execute("SELECT player_id FROM players")}
    for pid, j in db.execute("SELECT solver_id, jaccard FROM gold_answers ORDER BY seq"):
        js.setdefault(pid, []).append(j)
    return json.dumps(sorted(pid for pid, v in js.items() if gold_status(v, p)[0] != PASSED))


def counted_answers(db: sqlite3.Connection, instance_id: str, p: GoldParams) -> int:
    """Answers to creation ``instance_id`` that count (their solvers are not in :func:`uncounted`)."""
    sql = "SELECT COUNT(*) FROM solves WHERE instance_id = ? AND solver_id NOT IN (SELECT value FROM json_each(?))"
    return int(db.execute(sql, (instance_id, uncounted(db, p))).fetchone()[0])


def in_gold_phase(db: sqlite3.Connection, pid: str, p: GoldParams) -> bool:
    """Whether player ``pid`` is still to be served gold items (switch on, fewer than ``p.items`` answers)."""
    if not p.enabled:
        return False
    return int(db.execute("SELECT COUNT(*) FROM gold_answers WHERE solver_id = ?", (pid,)).fetchone()[0]) < p.items


_LIVE = (
    "SELECT l.lease_id, l.gold_id, l.expires_at FROM gold_leases l JOIN gold_items g USING (gold_id)"
    " WHERE l.solver_id = ? AND l.expires_at > ? AND g.active = 1 ORDER BY l.issued_at LIMIT 1"
)
_FREE = (
    "SELECT g.gold_id FROM gold_items g WHERE g.active = 1"
    " AND NOT EXISTS (SELECT 1 FROM gold_answers a WHERE a.gold_id = g.gold_id AND a.solver_id = :pid)"
    " AND NOT EXISTS (SELECT 1 FROM gold_flags f WHERE f.gold_id = g.gold_id AND f.player_id = :pid)"
    " AND NOT EXISTS (SELECT 1 FROM creations c WHERE c.instance_id = g.creation_id AND (c.spymaster_id = :pid"
    " OR EXISTS (SELECT 1 FROM solves s WHERE s.instance_id = c.instance_id AND s.solver_id = :pid)))"
    " ORDER BY g.gold_id"
)


def gold_task(db: sqlite3.Connection, pid: str, now: float, lease_s: float, issue: bool) -> SolveTask | None:
    """The player's live gold lease, or (with ``issue``) a new one on a gold item left for them
    (module docstring); None when none is left. Keys as :meth:`gavil.game.service.Game.solve_task`."""
    lease = db.execute(_LIVE, (pid, now)).fetchone()
    if lease is None and not issue:
        return None
    if lease is None:
        with transaction(db):
            lease = db.execute(_LIVE, (pid, now)).fetchone()
            if lease is None:
                db.execute("DELETE FROM gold_leases WHERE solver_id = ?", (pid,))  # expired, or its item retired
                free = [r[0] for r in db.execute(_FREE, {"pid": pid})]
                if not free:
                    return None
                lease = (secrets.token_urlsafe(18), _PICK.choice(free), now + lease_s)
                db.execute("INSERT INTO gold_leases VALUES (?, ?, ?, ?, ?)", (lease[0], lease[1], pid, now, lease[2]))
    g = db.execute("SELECT * FROM gold_items WHERE gold_id = ?", (lease[1],)).fetchone()
    return {
        "lease_id": lease[0],
        "instance_id": g["instance_id"],
        "cue": g["cue"],
        "images": json.loads(g["images"]),
        "k": len(json.loads(g["associations"])),
        "expires_in_s": max(0, int(lease[2] - now)),
    }


def is_gold_lease(db: sqlite3.Connection, lease_id: str) -> bool:
    return db.execute("SELECT 1 FROM gold_leases WHERE lease_id = ?", (lease_id,)).fetchone() is not None


def answer_gold(db: sqlite3.Connection, pid: str, lease_id: str, selection: object, now: float) -> SolveReply:
    """Store player ``pid``'s answer to gold lease ``lease_id`` (one transaction that consumes the
    lease); the reply of :meth:`gavil.game.service.Game.solve` (same keys, same errors)."""

    def live() -> sqlite3.Row:
        return live_lease(db, "gold_leases", lease_id, pid, now)

    g = db.execute("SELECT * FROM gold_items WHERE gold_id = ?", (live()["gold_id"],)).fetchone()
    answer = score_answer(g["candidates"], g["associations"], selection)
    chosen, j = answer.chosen, answer.jaccard
    try:
        with transaction(db):
            live()  # again, under the write lock: a concurrent replay lost
            db.execute(
                "INSERT INTO gold_answers (gold_id, solver_id, selection, jaccard, created_at, lease_id)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (g["gold_id"], pid, json.dumps(chosen, ensure_ascii=False), j, now, lease_id),
            )
            db.execute("DELETE FROM gold_leases WHERE lease_id = ?", (lease_id,))
    except sqlite3.IntegrityError:
        raise Conflict("you already solved this association") from None
    return {"jaccard": j, "selection": answer.selection, "associations": answer.associations}

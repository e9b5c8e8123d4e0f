"""Solver checks with gold items (``game.gold``; docs/dynamic.md "Solver checks (gold items)").

A **gold item** is a published instance (a ``selection`` row with status ``selected``: released
or collected, with its spymaster's associations) whose every candidate has an accepted image
(:func:`gold_items`). With ``game.gold.enabled``, a player with fewer than ``game.gold.items`` gold
answers is served gold items first, through the same endpoints and with the same response keys as
any association (``POST /api/solve/task``, ``POST /api/solve``): the served ``instance_id`` looks
like a creation's (``g_`` + 16 hex) and the associations are only revealed in the answer's reply,
as for every association. Which one: at random among the active gold items the player has not
answered or flagged, did not create and did not answer as an association of the game.

Store tables (schema version 5, :mod:`gavil.game.store`):

- ``gold_items(gold_id, instance_id, source_uid, creation_id, cue, candidates, associations,
  images, active, added_at)``: ``gold_id`` is ``<dataset>:<ID>`` (the permanent benchmark ID);
  ``instance_id`` the id players are shown; ``source_uid`` the selection's ``instance_uid``;
  ``creation_id`` the store's creation it was published from (null: released, or a batch's);
  ``candidates``/``associations`` JSON lists of names, ``images`` their sha256 in candidate order;
  ``active`` 0 once the item is no longer published or servable (its answers still count).
- ``gold_leases(lease_id, gold_id, solver_id, issued_at, expires_at)``: served gold work, like
  ``leases`` (an answer consumes it in the same transaction; it expires after ``game.lease_s``).
- ``gold_answers(seq, gold_id, solver_id, selection, jaccard, created_at, lease_id)``: ``jaccard``
  a fraction against the gold item's associations.

**Who counts** (:func:`gold_status`, the one rule the game and ``import_annotations`` share): a
solver who answered ``items`` gold items with a mean Jaccard, rounded to 2 places (the release's
rule for solver means), of at least ``min_jaccard`` has ``passed``; below it, ``failed_gold_check``;
fewer answers, ``gold_pending``. With the switch on, only answers of solvers who passed count
towards an association's ``select.min_solvers`` answers in the game and its spymaster's
solvable-by-humans score; with it off every answer counts (``not_checked``).
"""

from __future__ import annotations

import json
import random
import secrets
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import TypedDict

import pandas as pd

from gavil.game.rules import GameError, score_answer
from gavil.game.store import check_store_path, json_cell, live_lease, read_snapshot, transaction
from gavil.params.game import GoldParams
from schemas.annotations import GOLD_STATUSES

PASSED, FAILED, PENDING, NOT_CHECKED = GOLD_STATUSES  # the values of gold_status (gold_checks, annotator_stats)
_PICK = random.SystemRandom()  # which gold item: unpredictable, so players cannot share a fixed answer list


class GoldRecord(TypedDict):
    """A stored gold item as :func:`read_gold` returns it."""

    gold_id: str
    source_uid: str
    cue: str
    candidates: object  # a JSON value as stored; the import checks it is a list of names
    associations: object  # likewise


class GoldAnswer(TypedDict):
    """A stored gold answer as :func:`read_gold` returns it (``solver_id`` as stored: not yet hashed)."""

    seq: int
    gold_id: str
    solver_id: str
    selection: object  # a JSON list as stored; the import checks its shape


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


@dataclass(frozen=True)
class GoldItem:
    """One published instance servable as a gold item (names in candidate order, one image each)."""

    gold_id: str  # "<dataset>:<ID>"
    source_uid: str  # the selection's instance_uid
    cue: str
    candidates: tuple[str, ...]
    associations: tuple[str, ...]
    images: tuple[str, ...]  # sha256 of each candidate's accepted image

    @property
    def creation_id(self) -> str | None:
        """The game creation it was published from (``raw:<instance_id>`` uids), else None."""
        return self.source_uid[4:] if self.source_uid.startswith("raw:") else None


def gold_mean(jaccards: Sequence[float]) -> float | None:
    """Mean of a solver's gold Jaccards (fractions), rounded to 2 places (the release's rule for
    solver means); None without answers."""
    return round(fmean(jaccards), 2) if jaccards else None


def gold_status(jaccards: Sequence[float], p: GoldParams) -> tuple[str, str | None]:
    """(status, reason) of a solver whose gold answers scored ``jaccards`` (fractions).

    ``not_checked`` (switch off), ``gold_pending`` (fewer than ``p.items`` answers),
    ``failed_gold_check`` (:func:`gold_mean` < ``p.min_jaccard``) or ``passed`` (reason None).
    Reasons are fixed sentences of counts and values (no ids, no times)."""
    if not p.enabled:
        return NOT_CHECKED, None
    n, mean = len(jaccards), gold_mean(jaccards)
    if n < p.items:
        return (
            PENDING,
            f"{n} of {p.items} gold item(s) answered (game.gold.items): answers count once the solver passes",
        )
    assert mean is not None
    if mean < p.min_jaccard:
        return FAILED, f"mean Jaccard {mean:.2f} on {n} gold item(s) < game.gold.min_jaccard {p.min_jaccard:g}"
    return PASSED, None


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


def gold_items(selection: pd.DataFrame, images: dict[str, tuple[str, str]]) -> list[GoldItem]:
    """The published instances of ``selection`` (:class:`schemas.selection.Selection`: status
    ``selected``) whose every candidate has an accepted image in ``images`` (concept -> (sha256,
    path), :func:`schemas.ocr.accepted_images`), by dataset and ID."""
    sel = selection[selection["status"] == "selected"].sort_values(["dataset", "ID"])
    out = []
    for uid, ds, iid, cue, cands, assoc in zip(
        sel["instance_uid"], sel["dataset"], sel["ID"], sel["cue"], sel["candidates"], sel["associations"]
    ):
        if all(c in images for c in cands):
            shas = tuple(images[c][0] for c in cands)
            out.append(GoldItem(f"{ds}:{int(iid)}", str(uid), str(cue), tuple(cands), tuple(assoc), shas))
    return out


def store_gold(db: sqlite3.Connection, items: Sequence[GoldItem], now: float) -> int:
    """Make ``items`` the active gold items (new ones added with a fresh serving id; every other
    stored one deactivated, its answers kept; a stored item whose content differs stays inactive).
    Returns how many are active."""
    with transaction(db):
        db.execute("UPDATE gold_items SET active = 0")
        for it in items:
            cands, assoc = (json.dumps(list(v), ensure_ascii=False) for v in (it.candidates, it.associations))
            shas = json.dumps(list(it.images))
            old = db.execute("SELECT cue, candidates, associations FROM gold_items WHERE gold_id = ?", (it.gold_id,))
            row = old.fetchone()
            if row is None:
                serve_id = "g_" + secrets.token_hex(8)  # shaped like a creation's instance_id
                db.execute(
                    "INSERT INTO gold_items VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?)",
                    (it.gold_id, serve_id, it.source_uid, it.creation_id, it.cue, cands, assoc, shas, now),
                )
            elif tuple(row) == (it.cue, cands, assoc):
                db.execute("UPDATE gold_items SET active = 1, images = ? WHERE gold_id = ?", (shas, it.gold_id))
        return int(db.execute("SELECT COUNT(*) FROM gold_items WHERE active = 1").fetchone()[0])


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
        raise GameError(409, "you already solved this association") from None
    return {"jaccard": j, "selection": answer.selection, "associations": answer.associations}


def read_gold(path: str | Path) -> tuple[list[GoldRecord], list[GoldAnswer]]:
    """(gold items, gold answers) of a store, read-only in one snapshot; two empty lists when
    nothing is at ``path`` or the store predates version 5. Call it after
    :func:`gavil.game.store.read_submissions`, which checks the store's integrity and version.

    Items: ``gold_id``, ``source_uid``, ``cue``, ``candidates``, ``associations`` (lists). Answers
    (store order): ``seq``, ``gold_id``, ``solver_id`` (as stored), ``selection`` (a list).

    Raises:
        gavil.game.store.GameStoreError: SQLite cannot read it, or a list cell is not JSON text.
    """
    path = Path(path)
    if not check_store_path(path):
        return [], []
    with read_snapshot(path) as con:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"gold_items", "gold_answers"} <= tables:
            return [], []
        items: list[GoldRecord] = [
            {
                "gold_id": r["gold_id"],
                "source_uid": r["source_uid"],
                "cue": r["cue"],
                "candidates": json_cell(path, "gold_items", r["gold_id"], "candidates", r["candidates"]),
                "associations": json_cell(path, "gold_items", r["gold_id"], "associations", r["associations"]),
            }
            for r in con.execute("SELECT * FROM gold_items ORDER BY gold_id")
        ]
        answers: list[GoldAnswer] = [
            {
                "seq": r["seq"],
                "gold_id": r["gold_id"],
                "solver_id": r["solver_id"],
                "selection": json_cell(path, "gold_answers", f"seq {r['seq']}", "selection", r["selection"]),
            }
            for r in con.execute("SELECT seq, gold_id, solver_id, selection FROM gold_answers ORDER BY seq")
        ]
        return items, answers

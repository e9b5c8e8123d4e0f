"""Players' flags and the admin's review, over the game's store (``flags``, ``flag_reviews``:
:mod:`gavil.gamestore.store`; the rule: :mod:`gavil.domain.flags`; docs/dynamic.md "Flags and review").

- :func:`flag` (``POST /api/flag``): a player flags an association **they were served**: one they
  hold a solve lease on (live or expired, not yet cleared) or answered, or one they flagged
  already (then: 409). Any other id, whether unknown, another player's work or their own
  creation, gets the same 404, so no id's existence shows. One flag per player and association.
  The flagger's lease on it is released in the same transaction, so the next solve task is
  another association; from then on the game serves it to no new solver while it is held
  (:func:`gavil.gamestore.review.held`). A gold item (``game.gold``) is flagged like any association,
  with the same answers, so a flag never tells a player which items are gold: the flag is kept in
  ``gold_flags`` and the flagger's gold lease released; a gold item published from a game creation
  also flags that creation (so the creation is held and reviewed like any flagged one).
- :func:`queue` (``GET /api/admin/flags``): associations with an open flag, oldest flag first,
  with cue, candidates, associations and their open flags (player ids hashed), counts per category;
  and the flags on gold items (``gold_flags``).
- :func:`review` (``POST /api/admin/flags/review``): ``keep`` or ``retire`` an association with
  an open flag; the review covers every flag stored until then. ``retire`` is final.

Errors are :class:`gavil.game.rules.GameError` (HTTP status, one sentence; a player's never names
an operator's tool).
"""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING, TypedDict

from gavil.domain.flags import FLAG_CATEGORIES, REVIEW_DECISIONS, association_state, clean_flag_text
from gavil.domain.privacy import hash_annotator
from gavil.game.rules import GameError, clean_name
from gavil.gamestore.review import read_flags
from gavil.gamestore.store import transaction

if TYPE_CHECKING:
    from gavil.game.service import Game

MAX_ID = 64
NOT_SERVED = "no association you were served has this id"


class Flagged(TypedDict):
    """What ``POST /api/flag`` answers."""

    instance_id: str
    category: str
    reason: str  # as stored (cleaned)
    flagged: bool


class OpenFlag(TypedDict):
    flag_id: int
    category: str
    reason: str
    player: str  # keyed hash of the player's id
    created_at: float  # Unix seconds


class QueueItem(TypedDict):
    """One association in the review queue."""

    instance_id: str
    cue: str
    candidates: list[str]
    associations: list[str]
    spymaster: str  # keyed hash
    round: int | None
    open_flags: list[OpenFlag]
    counts: dict[str, int]  # open flags per category
    kept_before: int  # flags an earlier keep covered


class GoldFlag(TypedDict):
    """A player's flag on a gold item, in ``GET /api/admin/flags``."""

    gold_id: str  # the selection's stable id of the published instance
    source_uid: str  # the selection's instance_uid (release:... or raw:<creation>)
    cue: str
    category: str
    reason: str
    player: str  # keyed hash
    created_at: float


class Queue(TypedDict):
    """What ``GET /api/admin/flags`` answers."""

    instances: list[QueueItem]
    counts: dict[str, int]  # open flags per category, over the queue
    gold_flags: list[GoldFlag]  # flags on gold items, oldest first (a creation's also in instances)


class Reviewed(TypedDict):
    """What ``POST /api/admin/flags/review`` answers."""

    instance_id: str
    decision: str
    flags_reviewed: int
    state: str  # kept or retired


def _instance_id(value: object) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_ID:
        raise GameError(400, "name the association you were served (instance_id)")
    return value


def _retired(db: sqlite3.Connection, iid: str) -> bool:
    q = "SELECT 1 FROM flag_reviews WHERE instance_id = ? AND decision = 'retire'"
    return db.execute(q, (iid,)).fetchone() is not None


def _flag_gold(db: sqlite3.Connection, iid: str, pid: str, category: str, text: str, now: float) -> bool:
    """Flag gold item ``iid`` if player ``pid`` was served it (a gold lease, answer or flag); False
    when ``iid`` is no gold item of theirs. Raises sqlite3.IntegrityError on a second flag."""
    g = db.execute(
        "SELECT gold_id, creation_id FROM gold_items g WHERE instance_id = ?1 AND ("
        " EXISTS (SELECT 1 FROM gold_leases l WHERE l.gold_id = g.gold_id AND l.solver_id = ?2)"
        " OR EXISTS (SELECT 1 FROM gold_answers a WHERE a.gold_id = g.gold_id AND a.solver_id = ?2)"
        " OR EXISTS (SELECT 1 FROM gold_flags f WHERE f.gold_id = g.gold_id AND f.player_id = ?2))",
        (iid, pid),
    ).fetchone()
    if g is None:
        return False
    db.execute("INSERT INTO gold_flags VALUES (?, ?, ?, ?, ?)", (g["gold_id"], pid, category, text, now))
    db.execute("DELETE FROM gold_leases WHERE gold_id = ? AND solver_id = ?", (g["gold_id"], pid))
    if g["creation_id"] is not None and not _retired(db, g["creation_id"]):
        db.execute(  # the published creation it came from: held and reviewed like any flagged one
            "INSERT OR IGNORE INTO flags (instance_id, player_id, category, reason, created_at)"
            " SELECT instance_id, ?, ?, ?, ? FROM creations WHERE instance_id = ?",
            (pid, category, text, now, g["creation_id"]),
        )
    return True


def flag(game: Game, token: str, instance_id: object, category: object, reason: object) -> Flagged:
    """Store one player's flag (one transaction); returns ``instance_id``, ``category``, ``reason``
    (as stored) and ``flagged`` true.

    ``category``: one of :data:`gavil.domain.flags.FLAG_CATEGORIES`; ``reason``: free text
    (:func:`gavil.domain.flags.clean_flag_text`), required for ``other``.

    Raises GameError: 401 (no session), 503 (paused), 400 (id, category or reason), 404 (not an
    association this player was served), 409 (already flagged by this player, or retired by review).
    """
    pid = game.player(token)
    if game.paused():
        raise GameError(503, "the game is paused by the operator; try again later")
    iid = _instance_id(instance_id)
    if category not in FLAG_CATEGORIES:
        raise GameError(400, f"choose what is wrong with it: {', '.join(FLAG_CATEGORIES)}")
    try:
        text = clean_flag_text(reason, "reason", required=category == "other")
    except ValueError as e:
        raise GameError(400, str(e)) from None
    try:
        with transaction(game.db) as db:
            if _flag_gold(db, iid, pid, category, text, game.clock()):
                return {"instance_id": iid, "category": category, "reason": text, "flagged": True}
            served = db.execute(
                "SELECT EXISTS (SELECT 1 FROM leases WHERE instance_id = ?1 AND solver_id = ?2)"
                " OR EXISTS (SELECT 1 FROM solves WHERE instance_id = ?1 AND solver_id = ?2)"
                " OR EXISTS (SELECT 1 FROM flags WHERE instance_id = ?1 AND player_id = ?2)",
                (iid, pid),
            ).fetchone()[0]
            if not served:
                raise GameError(404, NOT_SERVED)
            if _retired(db, iid):
                raise GameError(409, "this association was already withdrawn after a review; thank you")
            db.execute(
                "INSERT INTO flags (instance_id, player_id, category, reason, created_at) VALUES (?, ?, ?, ?, ?)",
                (iid, pid, category, text, game.clock()),
            )
            db.execute("DELETE FROM leases WHERE instance_id = ? AND solver_id = ?", (iid, pid))
    except sqlite3.IntegrityError:
        raise GameError(409, "you already flagged this association; thank you") from None
    return {"instance_id": iid, "category": category, "reason": text, "flagged": True}


def queue(game: Game) -> Queue:
    """The review queue: every association with an open flag (its state ``open``: not retired),
    by its oldest open flag. Each: ``instance_id``, ``cue``, ``candidates``, ``associations``,
    ``spymaster`` (keyed hash), ``round``, ``open_flags`` (``flag_id``, ``category``, ``reason``,
    ``player`` (keyed hash), ``created_at``), ``counts`` (open flags per category) and
    ``kept_before`` (flags an earlier ``keep`` covered). Also ``counts`` over the whole queue."""
    db = game.db
    db.execute("BEGIN")  # one snapshot of flags, reviews and creations
    try:
        flags = read_flags(db)
        items: list[QueueItem] = []
        for iid, rows in flags.items():
            if association_state([r["decision"] for r in rows], [r["state"] for r in rows]) != "open":
                continue
            c = db.execute("SELECT * FROM creations WHERE instance_id = ?", (iid,)).fetchone()
            open_ = [r for r in rows if r["state"] == "open"]
            items.append(
                {
                    "instance_id": iid,
                    "cue": c["cue"],
                    "candidates": json.loads(c["candidates"]),
                    "associations": json.loads(c["associations"]),
                    "spymaster": hash_annotator(c["spymaster_id"], game.key),
                    "round": c["round"],
                    "open_flags": [
                        {
                            "flag_id": r["flag_id"],
                            "category": r["category"],
                            "reason": r["reason"],
                            "player": hash_annotator(r["player_id"], game.key),
                            "created_at": r["created_at"],
                        }
                        for r in open_
                    ],
                    "counts": {k: sum(r["category"] == k for r in open_) for k in FLAG_CATEGORIES},
                    "kept_before": sum(r["state"] == "kept" for r in rows),
                }
            )
        gold: list[GoldFlag] = [
            {
                "gold_id": r["gold_id"],
                "source_uid": r["source_uid"],
                "cue": r["cue"],
                "category": r["category"],
                "reason": r["reason"],
                "player": hash_annotator(r["player_id"], game.key),
                "created_at": r["created_at"],
            }
            for r in db.execute(
                "SELECT f.*, g.source_uid, g.cue FROM gold_flags f JOIN gold_items g USING (gold_id)"
                " ORDER BY f.created_at, f.gold_id"
            )
        ]
    finally:
        db.execute("COMMIT")
    items.sort(key=lambda i: i["open_flags"][0]["flag_id"])
    totals = {k: sum(i["counts"][k] for i in items) for k in FLAG_CATEGORIES}
    return {"instances": items, "counts": totals, "gold_flags": gold}


def review(game: Game, instance_id: object, decision: object, note: object, reviewer: object) -> Reviewed:
    """Record an admin's ``keep`` or ``retire`` of an association with an open flag (one
    transaction); it covers every flag of the association stored until now. Returns
    ``instance_id``, ``decision``, ``flags_reviewed`` (the open flags it decided) and ``state``
    (``kept`` or ``retired``).

    ``note``: free text (:func:`gavil.domain.flags.clean_flag_text`); ``reviewer``: a name shown
    with the decision (a display name's rules; ``admin`` when not given).

    Raises GameError: 400 (id, decision, note, reviewer), 404 (no such association), 409 (no open
    flag on it, or retired by an earlier review: retire is final).
    """
    iid = _instance_id(instance_id)
    if decision not in REVIEW_DECISIONS:
        raise GameError(400, "decision must be keep or retire")
    try:
        text = clean_flag_text(note, "note")
    except ValueError as e:
        raise GameError(400, str(e)) from None
    who = "admin" if reviewer is None or reviewer == "" else clean_name(reviewer)
    with transaction(game.db) as db:
        if db.execute("SELECT 1 FROM creations WHERE instance_id = ?", (iid,)).fetchone() is None:
            raise GameError(404, f"no association {iid!r} in the store")
        if _retired(db, iid):
            raise GameError(409, f"{iid} was retired by an earlier review: retire is final")
        through = db.execute(
            "SELECT COALESCE(MAX(flags_through), 0) FROM flag_reviews WHERE instance_id = ?", (iid,)
        ).fetchone()[0]
        last, n_open = db.execute(
            "SELECT MAX(flag_id), COUNT(*) FROM flags WHERE instance_id = ? AND flag_id > ?", (iid, through)
        ).fetchone()
        if not n_open:
            raise GameError(409, f"{iid} has no open flag: nothing to review")
        db.execute(
            "INSERT INTO flag_reviews (instance_id, decision, note, reviewer, flags_through, reviewed_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (iid, decision, text, who, last, game.clock()),
        )
    state = "retired" if decision == "retire" else "kept"
    return {"instance_id": iid, "decision": decision, "flags_reviewed": int(n_open), "state": state}

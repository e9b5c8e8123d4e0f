"""Players' flags and the admin's review, over the game's store (``flags``, ``flag_reviews``:
:mod:`gavil.gamestore.store`; the rule: :mod:`gavil.domain.flags`; docs/dynamic.md "Flags and review").

- :func:`flag` (``POST /api/flag``): a player reports an association **they were served**: one they
  hold a solve lease on (live or expired, not yet cleared) or answered, or one they flagged
  already (then: 409). Any other id, whether unknown, another player's work or their own
  creation, gets the same 404, so no id's existence shows. One flag per player and association,
  and at most ``game.flags.reports_per_round`` per account and collection round (then 429).
  The flagger's lease on it is released in the same transaction. A report takes the association
  out of serving at once until an admin reviews it; after a ``keep`` only reports of weight do
  (:func:`gavil.domain.flags.reports_hold`, :func:`gavil.gamestore.review.held`). A gold item
  (``game.gold``) is flagged like any association, with the same answers, so a flag never tells a
  player which items are gold: the flag is kept in ``gold_flags`` (for the admin) and the
  flagger's gold lease released; it never holds the creation the gold item was published from (a
  published instance leaves a release only by the admin's ``retire``).
- :func:`queue` (``GET /api/admin/flags``): associations held by open flags, oldest flag first,
  with cue, candidates, associations and their open flags (player ids hashed, each with its
  ``weight``), counts per category and whether the reports hold it out of a release
  (``holds_release``); and the flags on gold items (``gold_flags``, with their weight).
- :func:`review` (``POST /api/admin/flags/review``): ``keep`` or ``retire`` an association with
  a flag (``keep``: an open one); the review covers every flag stored until then. ``retire`` is
  final and the one way a published game instance leaves a release: the store records who
  (``reviewer``) and why (``note``), the import's ``flags`` table carries them and selection marks
  it ``retired`` (``retired_by_review``), which the release changelog counts.

Errors are :class:`gavil.game.rules.GameError` (HTTP status, one sentence; a player's never names
an operator's tool).
"""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING, TypedDict

from gavil.domain.flags import FLAG_CATEGORIES, REVIEW_DECISIONS, association_state, clean_flag_text, reports_hold
from gavil.domain.gold import PASSED, gold_status
from gavil.domain.privacy import hash_annotator
from gavil.game.rules import GameError, clean_name
from gavil.gamestore.review import FlagRecord, read_flags
from gavil.gamestore.store import transaction
from gavil.params.game import GameParams

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
    weight: bool  # the reporter counts (gold on: passed the gold check; off: every reporter)


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
    holds_release: bool  # open reports of weight enough to hold it out of a release (unpublished only)


class GoldFlag(TypedDict):
    """A player's flag on a gold item, in ``GET /api/admin/flags``."""

    gold_id: str  # the selection's stable id of the published instance
    source_uid: str  # the selection's instance_uid (release:... or raw:<creation>)
    cue: str
    category: str
    reason: str
    player: str  # keyed hash
    created_at: float
    weight: bool  # the reporter counts (as in QueueItem's open flags)


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


def weighty(db: sqlite3.Connection, p: GameParams) -> list[str]:
    """The players whose reports carry weight now (:mod:`gavil.domain.flags`): with gold checks on,
    those who passed (:func:`gavil.domain.gold.gold_status`); with them off, every player."""
    if not p.gold.enabled:
        return [str(r[0]) for r in db.execute("SELECT player_id FROM players ORDER BY player_id")]
    js: dict[str, list[float]] = {}
    for pid, j in db.execute("SELECT solver_id, jaccard FROM gold_answers ORDER BY seq"):
        js.setdefault(str(pid), []).append(float(j))
    return sorted(pid for pid, v in js.items() if gold_status(v, p.gold)[0] == PASSED)


def held_args(db: sqlite3.Connection, p: GameParams) -> dict[str, object]:
    """The named parameters of :func:`gavil.gamestore.review.held` under params ``p``."""
    return {
        "anyone": int(not p.gold.enabled),
        "weighty": json.dumps(weighty(db, p) if p.gold.enabled else []),
        "need_reporters": 1 if p.gold.enabled else p.flags.min_reporters,
    }


def _budget(game: Game, db: sqlite3.Connection, pid: str) -> None:
    """Raise GameError 429 once player ``pid`` used their ``game.flags.reports_per_round`` reports
    in the round this server collects (since it opened; every report when none is open)."""
    since = game.round.opened_at if game.round is not None else 0.0
    made = db.execute(
        "SELECT (SELECT COUNT(*) FROM flags WHERE player_id = ?1 AND created_at >= ?2)"
        " + (SELECT COUNT(*) FROM gold_flags WHERE player_id = ?1 AND created_at >= ?2)",
        (pid, since),
    ).fetchone()[0]
    if made >= game.p.flags.reports_per_round:
        raise GameError(429, f"you have used your {game.p.flags.reports_per_round} reports for this round; thank you")


def _flag_gold(db: sqlite3.Connection, iid: str, pid: str, category: str, text: str, now: float) -> bool:
    """Flag gold item ``iid`` if player ``pid`` was served it (a gold lease, answer or flag); False
    when ``iid`` is no gold item of theirs. Raises sqlite3.IntegrityError on a second flag. The
    flag is for the admin only: it holds nothing (the item is published)."""
    g = db.execute(
        "SELECT gold_id FROM gold_items g WHERE instance_id = ?1 AND ("
        " EXISTS (SELECT 1 FROM gold_leases l WHERE l.gold_id = g.gold_id AND l.solver_id = ?2)"
        " OR EXISTS (SELECT 1 FROM gold_answers a WHERE a.gold_id = g.gold_id AND a.solver_id = ?2)"
        " OR EXISTS (SELECT 1 FROM gold_flags f WHERE f.gold_id = g.gold_id AND f.player_id = ?2))",
        (iid, pid),
    ).fetchone()
    if g is None:
        return False
    if db.execute("SELECT 1 FROM gold_flags WHERE gold_id = ? AND player_id = ?", (g[0], pid)).fetchone():
        raise sqlite3.IntegrityError("already flagged")
    db.execute("INSERT INTO gold_flags VALUES (?, ?, ?, ?, ?)", (g["gold_id"], pid, category, text, now))
    db.execute("DELETE FROM gold_leases WHERE gold_id = ? AND solver_id = ?", (g["gold_id"], pid))
    return True


def _again(db: sqlite3.Connection, iid: str, pid: str) -> bool:
    """Whether player ``pid`` already flagged ``iid`` (a creation or a gold item): answered 409, not 429."""
    return bool(
        db.execute(
            "SELECT EXISTS (SELECT 1 FROM flags WHERE instance_id = ?1 AND player_id = ?2) OR EXISTS (SELECT 1"
            " FROM gold_flags f JOIN gold_items g USING (gold_id) WHERE g.instance_id = ?1 AND f.player_id = ?2)",
            (iid, pid),
        ).fetchone()[0]
    )


def flag(game: Game, token: str, instance_id: object, category: object, reason: object) -> Flagged:
    """Store one player's flag (one transaction); returns ``instance_id``, ``category``, ``reason``
    (as stored) and ``flagged`` true.

    ``category``: one of :data:`gavil.domain.flags.FLAG_CATEGORIES`; ``reason``: free text
    (:func:`gavil.domain.flags.clean_flag_text`), required for ``other``.

    Raises GameError: 401 (no session), 503 (paused), 400 (id, category or reason), 404 (not an
    association this player was served), 409 (already flagged by this player, or retired by review),
    429 (the account's ``game.flags.reports_per_round`` reports in this round are used).
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
            if not _again(db, iid, pid):
                _budget(game, db, pid)
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


def _queue_item(game: Game, c: sqlite3.Row, rows: list[FlagRecord], weights: set[str]) -> QueueItem:
    """One association of the queue (:func:`queue`) from its creation row and its flags."""
    open_ = [r for r in rows if r["state"] == "open"]
    counting = len({r["player_id"] for r in open_ if r["player_id"] in weights})
    return {
        "instance_id": c["instance_id"],
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
                "weight": r["player_id"] in weights,
            }
            for r in open_
        ],
        "counts": {k: sum(r["category"] == k for r in open_) for k in FLAG_CATEGORIES},
        "kept_before": sum(r["state"] == "kept" for r in rows),
        "holds_release": reports_hold(counting, game.p.gold.enabled, game.p.flags.min_reporters),
    }


def queue(game: Game) -> Queue:
    """The review queue: every association its open flags hold from serving (never reviewed; or,
    after a ``keep``, open reports of weight enough: :func:`gavil.gamestore.review.held`), by its
    oldest open flag. Each: ``instance_id``, ``cue``, ``candidates``, ``associations``,
    ``spymaster`` (keyed hash), ``round``, ``open_flags`` (``flag_id``, ``category``, ``reason``,
    ``player`` (keyed hash), ``created_at``, ``weight``), ``counts`` (open flags per category),
    ``kept_before`` (flags an earlier ``keep`` covered) and ``holds_release``. Also ``counts``
    over the whole queue and ``gold_flags`` (flags on gold items, each with its ``weight``)."""
    db = game.db
    db.execute("BEGIN")  # one snapshot of flags, reviews and creations
    try:
        weights = set(weighty(db, game.p))
        items: list[QueueItem] = []
        for iid, rows in read_flags(db).items():
            if association_state([r["decision"] for r in rows], [r["state"] for r in rows]) != "open":
                continue
            c = db.execute("SELECT * FROM creations WHERE instance_id = ?", (iid,)).fetchone()
            item = _queue_item(game, c, rows, weights)
            reviewed = any(r["state"] != "open" for r in rows)
            if not reviewed or item["holds_release"]:  # a kept one stays kept without reports of weight
                items.append(item)
        gold: list[GoldFlag] = [
            {
                "gold_id": r["gold_id"],
                "source_uid": r["source_uid"],
                "cue": r["cue"],
                "category": r["category"],
                "reason": r["reason"],
                "player": hash_annotator(r["player_id"], game.key),
                "created_at": r["created_at"],
                "weight": r["player_id"] in weights,
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

    Raises GameError: 400 (id, decision, note, reviewer), 404 (no such association), 409 (``keep``
    with no open flag, ``retire`` of an association never flagged, or retired by an earlier
    review: retire is final).
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
        flagged = db.execute("SELECT 1 FROM flags WHERE instance_id = ?", (iid,)).fetchone() is not None
        if not n_open and (decision == "keep" or not flagged):
            raise GameError(409, f"{iid} has no open flag: nothing to review")
        db.execute(
            "INSERT INTO flag_reviews (instance_id, decision, note, reviewer, flags_through, reviewed_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (iid, decision, text, who, last if last is not None else through, game.clock()),
        )
    state = "retired" if decision == "retire" else "kept"
    return {"instance_id": iid, "decision": decision, "flags_reviewed": int(n_open), "state": state}

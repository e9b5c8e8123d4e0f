"""The game's scores (paper §2.2, Appendix A.4.1): fool-the-AI, solvable-by-humans, bonus; read
from the store for the dashboard and leaderboard (:mod:`gavil.game.service`).

Scores are made of answers that counted when they were given (``solves.counted``,
:mod:`gavil.game.gold`), so a later setting (gold checks turned on, a solver failing later) never
changes a closed round's scores or board. With gold checks on, neither the dashboard nor the board
of all rounds (both count gold answers) shows a solver's mean Jaccard (``solver_jaccard`` null): it
would tell a player's gold score; a round's board holds only answers to that round's associations
(never gold), so it is shown as it was."""

from __future__ import annotations

import json
import sqlite3
from statistics import fmean
from typing import Any

from gavil.domain.winogavil import solvable_by_humans
from gavil.params.game import GameParams

#: A player's gold answers with their answers (every round): the player's own scores show them alike.
_GOLD_TOO = "UNION ALL SELECT jaccard FROM gold_answers WHERE solver_id = ?"


def bonus(fool: int | None, solvable: float | None, p: GameParams) -> float:
    """The bonus of one association (paper §2.2, Appendix A.4.1): none unless solvable-by-humans
    (a fraction) >= ``bonus_min_solvable`` and fool-the-AI (0-100) reaches a tier; else the
    amount of the highest tier reached."""
    if fool is None or solvable is None or solvable < p.bonus_min_solvable:
        return 0.0
    reached = [t.amount for t in p.bonus_tiers if fool >= t.min_fool]
    return reached[-1] if reached else 0.0


def creation_scores(db: sqlite3.Connection, min_solvers: int, p: GameParams) -> list[dict[str, Any]]:
    """Every creation (store order) with ``solvable`` (solvable-by-humans, a fraction; None below
    ``min_solvers`` answers other than the spymaster's that counted when given), ``bonus`` and its ``round``."""
    rows = db.execute(
        "SELECT c.instance_id, c.spymaster_id, c.rival_status, c.score_fool_the_ai, c.round,"
        " (SELECT json_group_array(s.jaccard) FROM solves s WHERE s.instance_id = c.instance_id"
        "  AND s.solver_id != c.spymaster_id AND COALESCE(s.counted, 1) = 1) AS js"
        " FROM creations c ORDER BY c.seq"
    ).fetchall()
    out = []
    for r in rows:
        js = json.loads(r["js"])
        solvable = solvable_by_humans(js)[0] if len(js) >= min_solvers else None
        fool = r["score_fool_the_ai"] if r["rival_status"] == "ok" else None
        out.append({**dict(r), "solvable": solvable, "bonus": bonus(fool, solvable, p)})
    return out


def summary(creations: list[dict[str, Any]], solves: list[float], hide_jaccard: bool = False) -> dict[str, Any]:
    """One player's scores: their creations (:func:`creation_scores` rows) and answers' Jaccards
    (``hide_jaccard``: gold checks on, ``solver_jaccard`` null)."""
    scored = [c for c in creations if c["score_fool_the_ai"] is not None]  # not pending or failed
    fools = [c["score_fool_the_ai"] for c in scored if c["rival_status"] == "ok"]
    untrained = [c["score_fool_the_ai"] for c in scored if c["rival_status"] == "untrained"]
    solv = [c["solvable"] for c in creations if c["solvable"] is not None]
    return {
        "associations_created": len(creations),
        "fool_the_ai": round(fmean(fools), 1) if fools else None,
        "fool_the_ai_untrained": round(fmean(untrained), 1) if untrained else None,
        "solvable_by_humans": round(100 * fmean(solv), 1) if solv else None,
        "associations_solved": len(solves),
        "solver_jaccard": round(100 * fmean(solves), 1) if solves and not hide_jaccard else None,
        "bonus": sum(c["bonus"] for c in creations),
    }


def dashboard(db: sqlite3.Connection, pid: str, min_solvers: int, p: GameParams) -> dict[str, object]:
    """Player ``pid``'s own scores (percentages) and bonus."""
    name = db.execute("SELECT display_name FROM players WHERE player_id = ?", (pid,)).fetchone()[0]
    mine = [c for c in creation_scores(db, min_solvers, p) if c["spymaster_id"] == pid]
    # gold answers are answers like any other to the player (they cannot tell them apart)
    js = [r[0] for r in db.execute(f"SELECT jaccard FROM solves WHERE solver_id = ? {_GOLD_TOO}", (pid, pid))]
    return {"name": name, **summary(mine, js, p.gold.enabled), "bonus_unit": p.bonus_unit}


def leaderboard(
    db: sqlite3.Connection, min_solvers: int, p: GameParams, limit: int = 20, round_id: int | None = None
) -> list[dict[str, object]]:
    """Display names ranked by bonus, then fool-the-AI, then the player's associations that humans
    could solve (solvable-by-humans >= ``bonus_min_solvable``), then associations created, then
    associations solved (top ``limit``). With an untrained rival (no bonus, no fool-the-AI), the
    spymasters who made a round's solvable associations so rank above the players who only solved them.

    ``round_id``: only that collection round's associations and the answers to them, and only the
    players who created or solved one of them (None: every player, every round). Players who
    withdrew consent are left out."""
    scores = [c for c in creation_scores(db, min_solvers, p) if round_id is None or c["round"] == round_id]
    solves = "SELECT s.jaccard FROM solves s JOIN creations c USING (instance_id) WHERE s.solver_id = ?"
    rows: list[tuple[tuple[float, ...], dict[str, object]]] = []
    players = (  # a player who withdrew consent is not shown (docs/review.md "Consent")
        "SELECT player_id, display_name FROM players p WHERE NOT EXISTS"
        " (SELECT 1 FROM consent_withdrawals w WHERE w.player_id = p.player_id) ORDER BY created_at"
    )
    for pid, name in db.execute(players):
        args: tuple[object, ...] = (pid, pid) if round_id is None else (pid, round_id)
        js = [r[0] for r in db.execute(solves + (f" {_GOLD_TOO}" if round_id is None else " AND c.round = ?"), args)]
        mine = [c for c in scores if c["spymaster_id"] == pid]
        if round_id is not None and not mine and not js:
            continue  # a round's leaderboard: the players who created or solved in it
        # the board of all rounds counts gold answers: with gold checks on it shows no mean Jaccard
        row = {"name": name, **summary(mine, js, p.gold.enabled and round_id is None)}
        solvable = sum(1 for c in mine if c["solvable"] is not None and c["solvable"] >= p.bonus_min_solvable)
        rank = (-row["bonus"], -(row["fool_the_ai"] or 0), -solvable, -len(mine), -row["associations_solved"])
        rows.append((rank, row))
    rows.sort(key=lambda r: r[0])  # stable: equal ranks keep the order players joined
    return [row for _, row in rows[:limit]]

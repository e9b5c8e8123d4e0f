"""The game's scores (paper §2.2, Appendix A.4.1): fool-the-AI, solvable-by-humans, bonus; read
from the store for the dashboard and leaderboard (:mod:`gavil.game.service`)."""

from __future__ import annotations

import json
import sqlite3
from statistics import fmean
from typing import Any

from gavil.domain.winogavil import solvable_by_humans
from gavil.params.game import GameParams


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
    ``min_solvers`` answers other than the spymaster's) and ``bonus``."""
    rows = db.execute(
        "SELECT c.instance_id, c.spymaster_id, c.rival_status, c.score_fool_the_ai,"
        " (SELECT json_group_array(s.jaccard) FROM solves s WHERE s.instance_id = c.instance_id"
        "  AND s.solver_id != c.spymaster_id) AS js FROM creations c ORDER BY c.seq"
    ).fetchall()
    out = []
    for r in rows:
        js = json.loads(r["js"])
        solvable = solvable_by_humans(js)[0] if len(js) >= min_solvers else None
        fool = r["score_fool_the_ai"] if r["rival_status"] == "ok" else None
        out.append({**dict(r), "solvable": solvable, "bonus": bonus(fool, solvable, p)})
    return out


def summary(creations: list[dict[str, Any]], solves: list[float]) -> dict[str, Any]:
    """One player's scores: their creations (:func:`creation_scores` rows) and answers' Jaccards."""
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
        "solver_jaccard": round(100 * fmean(solves), 1) if solves else None,
        "bonus": sum(c["bonus"] for c in creations),
    }

"""The gold check of the game's solvers (``game.gold``; docs/dynamic.md "Solver checks (gold items)").

The game's store holds the gold items it served (published instances with their associations) and
the answers to them (:func:`gavil.gamestore.gold.read_gold`). Each gold answer is checked here (a known
gold item; a selection of exactly K distinct candidates of it) and scored again from the store's
selection and associations: the store is an input, so a ``jaccard`` it holds is never trusted.
Each game solver then gets one status by :func:`gavil.domain.gold.gold_status` (the rule the game
applies too): ``passed``, ``failed_gold_check``, ``gold_pending`` or, with the switch off,
``not_checked``. With the switch on, each answer in the game's ``solves`` is judged **at the time
it was given** (:func:`gavil.domain.gold.counts` over the solver's gold answers stored before it):
one given while its solver had not passed (pending, or after a failure) goes to
``annotation_rejects`` (kind ``solve``) with that status and its reason as the reason, so it is
kept and never counted; one given before the game started checking (the store's ``gold_since``)
was given unchecked and counts; answers from raw and crowd batches are not checked (a
crowd platform has its own qualifications). The ``gold_checks`` table has one row per solver judged.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from gavil.domain.gold import NOT_CHECKED, PASSED, gold_mean, gold_status
from gavil.domain.privacy import hash_annotator
from gavil.domain.winogavil import jaccard
from gavil.gamestore.gold import GoldAnswer, GoldRecord
from gavil.params.game import GoldParams
from schemas.annotations import GoldChecks
from stages.import_annotations.records import ImportState, Records, RowError, parse_id


class GoldCheck(NamedTuple):
    """What judging the game's answers needs: ``game.gold`` params, the hashed solvers' gold
    timelines (:func:`score_gold`) and the store's ``gold_since`` (None: unknown, judge every answer)."""

    p: GoldParams
    timeline: dict[str, list[tuple[float, float]]]
    since: float | None


def _solver(raw: object, key: bytes) -> str | None:
    """The keyed hash the import gives ``raw`` (None for an id the import rejects)."""
    try:
        return hash_annotator(parse_id(raw, "solver_id"), key)
    except RowError:
        return None


def score_gold(
    path: Path, items: list[GoldRecord], answers: list[GoldAnswer], state: ImportState
) -> dict[str, list[tuple[float, float]]]:
    """Hashed solver -> (answered at, Unix seconds; Jaccard, a fraction) of their valid gold
    answers, in store order; an invalid answer is rejected (``<store>#gold_answers``, kind
    ``solve``) and not scored."""
    name = f"{path.as_posix()}#gold_answers"
    by_id = {it["gold_id"]: it for it in items}
    out: dict[str, list[tuple[float, float]]] = {}
    seen: set[tuple[str, str]] = set()
    for a in answers:
        it, solver, sel = by_id.get(a["gold_id"]), _solver(a["solver_id"], state.key), a["selection"]
        cands, assoc = (_names(it["candidates"]), _names(it["associations"])) if it else ([], [])
        if it is None:
            reason = "gold answer to a gold item the store does not hold"
        elif (
            cands is None or assoc is None or not assoc or len(set(assoc)) != len(assoc) or not set(assoc) < set(cands)
        ):
            reason = (
                "gold answer to a malformed gold item: its candidates and associations must be JSON lists of"
                " names, the associations distinct and among the candidates"
            )
        elif solver is None:
            reason = "solver_id is not a non-empty string"
        elif not (
            isinstance(sel, list)
            and all(isinstance(s, str) and s in cands for s in sel)
            and len(set(sel)) == len(sel) == len(assoc)
        ):
            reason = f"gold answer: selection must be K={len(assoc)} distinct candidates of its gold item"
        elif (a["gold_id"], solver) in seen:
            reason = "this solver already answered this gold item"
        else:
            seen.add((a["gold_id"], solver))
            out.setdefault(solver, []).append((float(a["created_at"]), jaccard(sel, assoc)))
            continue
        state.reject(
            name, a["seq"], "solve", reason, {"gold_id": a["gold_id"], "solver_id": a["solver_id"], "selection": sel}
        )
    return out


def _names(value: object) -> list[str] | None:
    """A stored JSON list of names (a gold item's candidates or associations), or None when the
    cell holds anything else (the store is an input: a string or a list of numbers is no list of
    names)."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [str(v) for v in value]
    return None


def judge(
    gold_js: dict[str, list[float]], solves: Sequence[Mapping[str, object]], p: GoldParams, key: bytes
) -> dict[str, tuple[str, str | None]]:
    """Hashed solver -> (status, reason) for every solver with gold answers and, with the switch on,
    every solver of the game's ``solves``."""
    solvers = set(gold_js)
    if p.enabled:
        solvers |= {s for s in (_solver(r["solver_id"], key) for r in solves) if s is not None}
    return {s: gold_status(gold_js.get(s, []), p) for s in sorted(solvers)}


def checked_solves(
    name: str,
    solves: Sequence[Mapping[str, object]],
    fields: tuple[str, ...],
    timeline: dict[str, list[tuple[float, float]]],
    p: GoldParams,
    since: float | None,
    state: ImportState,
    excluded: dict[str, int],
) -> Records:
    """The game's solves as records for the import, less those given while their solver did not
    count (switch on; module docstring): each of those is rejected with ``<status>: <reason>`` (the
    status when it was given) and counted in ``excluded`` (hashed solver -> answers).

    Args:
        timeline: hashed solver -> (answered at, Jaccard) of their gold answers (:func:`score_gold`).
        since: the store's ``gold_since`` (None: every answer is judged).
    """

    def gen() -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
        for r in solves:
            rec, seq = {f: r[f] for f in fields}, r["seq"]
            assert isinstance(seq, int)  # the store's row number
            solver = _solver(r["solver_id"], state.key) or ""
            at = r.get("created_at")
            when = float(at) if isinstance(at, (int, float)) else float("inf")
            if since is not None and when < since:
                yield seq, rec, None  # given before the game checked its solvers
                continue
            status, reason = gold_status([j for t, j in timeline.get(solver, []) if t <= when], p)
            if status in (PASSED, NOT_CHECKED):
                yield seq, rec, None
            else:
                state.reject(name, seq, "solve", f"{status}: {reason}", rec)
                excluded[solver] = excluded.get(solver, 0) + 1

    return gen()


def gold_checks(
    gold_js: dict[str, list[float]], verdict: dict[str, tuple[str, str | None]], excluded: dict[str, int]
) -> pd.DataFrame:
    """:class:`schemas.annotations.GoldChecks`: one row per judged solver, by hashed id
    (``excluded``: the answers :func:`checked_solves` kept out, per solver)."""
    rows = [
        {
            "solver": s,
            "gold_answers": len(gold_js.get(s, [])),
            "gold_mean_jaccard": gold_mean(gold_js.get(s, [])),
            "gold_status": status,
            "reason": reason,
            "excluded_answers": excluded.get(s, 0),
        }
        for s, (status, reason) in verdict.items()
    ]
    df = pd.DataFrame(rows, columns=list(GoldChecks.to_schema().columns))
    df["gold_mean_jaccard"] = df["gold_mean_jaccard"].astype(float)
    for col in ("gold_answers", "excluded_answers"):
        df[col] = df[col].astype(int)
    return df

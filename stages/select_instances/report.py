"""``select_instances``' reports (see :mod:`stages.select_instances.stage`): the paper's Table 1
per dataset and candidate group (and as Markdown), per-annotator statistics (hashed ids only) and
the plots' data."""

from __future__ import annotations

from typing import Any

import pandas as pd

from gavil.domain.winogavil import candidate_group, jaccard
from schemas.selection import UNNUMBERED, AnnotatorStats, Table1


def annotator_stats(selection: pd.DataFrame, solves: pd.DataFrame, gold: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per spymaster and per solver (hashed ids): counts, mean Jaccard, mean fool-the-AI, and each
    solver's gold check.

    Args:
        gold: :class:`schemas.annotations.GoldChecks` (None or empty: no solver was judged). A
            solver it holds gets ``gold_answers``, ``gold_mean_jaccard`` and ``gold_status``, and a
            row even when none of their answers counts (``count`` 0: a solver who failed the check).

    Returns :class:`schemas.selection.AnnotatorStats` rows, spymasters first, by annotator;
    ``count`` and ``mean_jaccard`` of a solver are over the answers in ``solves`` (those that count);
    solvers the gold check never judged have ``gold_answers`` 0 and null gold mean and status.
    """
    rows = []
    spy = selection[selection["spymaster"].notna()]
    for who, g in spy.groupby("spymaster", sort=True):
        fool = g["score_fool_the_ai"].dropna().astype(float)
        human = g["solvers_jaccard_mean"].dropna()
        rows.append(
            {
                "role": "spymaster",
                "annotator": who,
                "count": len(g),
                "selected": int((g["status"] == "selected").sum()),
                "mean_jaccard": float(human.mean()) if len(human) else None,
                "mean_fool_the_ai": float(fool.mean()) if len(fool) else None,
            }
        )
    live = selection[selection["status"] != "rejected"]
    assoc = dict(zip(live["instance_uid"], live["associations"]))
    solves = solves[solves["instance_uid"].isin(set(assoc))]  # an answer to content the ledger rejected: no row
    js = [jaccard(sel, assoc[uid]) for uid, sel in zip(solves["instance_uid"], solves["selection"])]
    by_solver: dict[str, list[float]] = {}
    for who, j in zip(solves["solver"], js):
        by_solver.setdefault(str(who), []).append(j)
    judged = {} if gold is None else {s: r for s, r in zip(gold["solver"], gold.to_dict("records"))}
    for who in sorted(set(by_solver) | set(judged)):
        mine, check = by_solver.get(who, []), judged.get(who)
        rows.append(
            {
                "role": "solver",
                "annotator": who,
                "count": len(mine),
                "selected": None,
                "mean_jaccard": float(pd.Series(mine, dtype=float).mean()) if mine else None,
                "mean_fool_the_ai": None,
                "gold_answers": check["gold_answers"] if check else 0,
                "gold_mean_jaccard": check["gold_mean_jaccard"] if check else None,
                "gold_status": check["gold_status"] if check else None,
            }
        )
    df = pd.DataFrame(rows, columns=list(AnnotatorStats.to_schema().columns))
    for col in ("selected", "gold_answers"):
        df[col] = df[col].astype("Int64")
    df["gold_mean_jaccard"] = df["gold_mean_jaccard"].astype(float)
    return df


def table1(selection: pd.DataFrame, min_solver_jaccard: float) -> pd.DataFrame:
    """The paper's Table 1 per dataset and candidate group (:class:`schemas.selection.Table1`);
    rejected rows (content conflicting with the ID ledger) and duplicates are not instances of
    their own and not counted."""
    selection = selection[~selection["status"].isin(UNNUMBERED)]
    df = selection.assign(group=selection["num_candidates"].map(candidate_group))
    df["_order"] = df["group"].map({"5&6": 0, "10&12": 1})
    rows = []
    for (dataset, _, group), g in df.groupby(["dataset", "_order", "group"], sort=True):
        fool = g["score_fool_the_ai"].dropna().astype(float)
        human = g["solvers_jaccard_mean"].dropna()
        rows.append(
            {
                "dataset": dataset,
                "candidates_group": group,
                "generated_associations": len(g),
                "avg_model_score_percent": round(float((100 - fool).mean()), 1) if len(fool) else None,
                "avg_human_score_percent": round(100 * float(human.mean()), 1) if len(human) else None,
                "kept": int((g["status"] == "selected").sum()),
                "min_solver_jaccard": min_solver_jaccard,
            }
        )
    return pd.DataFrame(rows, columns=list(Table1.to_schema().columns))


def distributions(selection: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Plot data: instances per solver-mean value (by dataset) and per fool-the-AI value (by group)."""
    sj = selection.dropna(subset=["solvers_jaccard_mean"])
    solver = (
        sj.assign(
            series=sj["dataset"] + " " + sj["status"],
            solvers_jaccard_mean=sj["solvers_jaccard_mean"].round(2).astype(str),
        )
        .groupby(["series", "solvers_jaccard_mean"])
        .size()
        .rename("instances")
        .reset_index()
    )
    fa = selection.dropna(subset=["score_fool_the_ai"])
    fool = (
        fa.assign(
            # astype(str): with no scored instance (a game without rival weights) map() gives int64
            series=fa["dataset"] + " " + fa["num_candidates"].map(candidate_group).astype(str),
            score_fool_the_ai=fa["score_fool_the_ai"].astype(int).astype(str),
        )
        .groupby(["series", "score_fool_the_ai"])
        .size()
        .rename("instances")
        .reset_index()
    )
    return solver, fool


def table1_markdown(t: pd.DataFrame) -> str:
    """Table 1 as Markdown, one column per (dataset, group), rows as in the paper."""
    thr = int(round(100 * float(t["min_solver_jaccard"].iloc[0]))) if len(t) else 80
    heads = [f"{d} {g}" for d, g in zip(t["dataset"], t["candidates_group"])]

    def fmt(v: Any, pct: bool = False) -> str:
        return "n/a" if pd.isna(v) else (f"{v:.0f}%" if pct else f"{int(v):,}")

    lines = ["| # Candidates | " + " | ".join(heads) + " |", "|---|" + "---|" * len(heads)]
    lines.append("| # Generated Associations | " + " | ".join(fmt(v) for v in t["generated_associations"]) + " |")
    lines.append("| % Avg. Model Score | " + " | ".join(fmt(v, True) for v in t["avg_model_score_percent"]) + " |")
    lines.append("| % Avg. Human Score | " + " | ".join(fmt(v, True) for v in t["avg_human_score_percent"]) + " |")
    lines.append(f"| # >= {thr}% Avg. Human Score | " + " | ".join(fmt(v) for v in t["kept"]) + " |")
    return "\n".join(lines) + "\n"

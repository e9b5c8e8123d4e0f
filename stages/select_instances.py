"""Stage 8, ``select_instances``: solvable-by-humans scores and the >= 80 % selection.

Per instance (reference "Formulas"): per-solver Jaccard of each solver's selection against
the associations; ``solvers_jaccard_mean = round(mean, 2)``; ``solvers_jaccard_std =
round(population std, 2)``; 3-way agreement |S1∩S2∩S3| / |S1∪S2∪S3|. Released instances keep
their released mean and std. Raw instances with fewer than ``select.min_solvers`` valid solver
answers are ``insufficient_solvers`` (never averaged over fewer). An instance is ``selected``
when its mean >= ``select.min_solver_jaccard`` (paper §2.2: "at least 80%"); model scores
are not used. A raw instance whose cue the profanity filter flagged is ``profane_cue`` (its
scores are kept). Selected instances get ``ID`` 0..n-1 per dataset, in import order; every
instance also gets its release split (game_5_6, game_10_12, swow) and split ID.

Also writes the paper's Table 1 (generated associations, average model score =
mean(100 - fool-the-AI), average human score, kept) per dataset and candidate group, and
per-annotator statistics (hashed ids only): spymasters' instances, selected count, mean human
score and mean fool-the-AI; solvers' answers and mean Jaccard.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from schemas.annotations import Instances, Solves
from schemas.selection import AnnotatorStats, Selection, Table1
from stages._io import ParamsError, atomic_path, read_table, section, write_csv, write_json, write_table
from stages.import_annotations import INSTANCES_PATH, SOLVES_PATH
from stages.winogavil import candidate_group, jaccard, solvable_by_humans, solver_agreement, solver_jaccards

SELECTION_PATH = "data/selection/selection.parquet"
TABLE1_PATH = "data/selection/table1.parquet"
TABLE1_MD_PATH = "data/selection/table1.md"
ANNOTATOR_STATS_PATH = "data/selection/annotator_stats.parquet"
PLOT_SOLVER_JACCARD = "data/plots/solver_jaccard.csv"
PLOT_FOOL_THE_AI = "data/plots/fool_the_ai.csv"
METRICS_PATH = "data/metrics/select_instances.json"


def select(instances: pd.DataFrame, solves: pd.DataFrame, min_solver_jaccard: float, min_solvers: int = 3) -> pd.DataFrame:
    """Score and select instances (pure).

    Args:
        instances: :class:`schemas.annotations.Instances`.
        solves: :class:`schemas.annotations.Solves` (answers to raw instances).
        min_solver_jaccard: threshold on the rounded mean, a fraction (0.8 = 80 %).
        min_solvers: answers needed before a raw instance is scored.

    Returns:
        :class:`schemas.selection.Selection`, one row per instance, in import order.
    """
    by_uid = {uid: g["selection"].tolist() for uid, g in solves.groupby("instance_uid", sort=False)}
    splits = split_ids(instances)
    rows = []
    for rec, (split, sid) in zip(instances.itertuples(index=False), splits):
        row = {
            "instance_uid": rec.instance_uid,
            "origin": rec.origin,
            "dataset": rec.dataset,
            "split": split,
            "split_id": sid,
            "cue": rec.cue,
            "candidates": rec.candidates,
            "associations": rec.associations,
            "num_associations": rec.num_associations,
            "num_candidates": rec.num_candidates,
            "score_fool_the_ai": rec.score_fool_the_ai,
            "annotation_index": rec.annotation_index,
            "images_source": rec.images_source,
            "cue_weight": rec.cue_weight,
            "associations_mean_weight": rec.associations_mean_weight,
            "candidates_connectivity_score": rec.candidates_connectivity_score,
            "spymaster": rec.spymaster,
            "solver_jaccards": None,
            "n_solvers": None,
            "solvers_agreement": None,
            "solvers_jaccard_mean": rec.solvers_jaccard_mean,
            "solvers_jaccard_std": rec.solvers_jaccard_std,
        }
        if rec.origin == "raw":
            sels = by_uid.get(rec.instance_uid, [])
            row["n_solvers"] = len(sels)
            if len(sels) < min_solvers:
                rows.append({**row, "status": "insufficient_solvers", "reason": f"{len(sels)} valid solver answer(s), need {min_solvers}"})
                continue
            js = solver_jaccards(sels, rec.associations)
            mean, std = solvable_by_humans(js)
            row |= {"solver_jaccards": js, "solvers_jaccard_mean": mean, "solvers_jaccard_std": std, "solvers_agreement": solver_agreement(sels)}
        mean = row["solvers_jaccard_mean"]
        if isinstance(rec.cue_flag, str):
            rows.append({**row, "status": "profane_cue", "reason": f"cue flagged: {rec.cue_flag}"})
        elif pd.isna(mean):
            rows.append({**row, "status": "insufficient_solvers", "reason": "no solver scores"})
        elif mean >= min_solver_jaccard:
            rows.append({**row, "status": "selected", "reason": None})
        else:
            rows.append({**row, "status": "below_threshold", "reason": f"solver mean {mean} < {min_solver_jaccard}"})
    df = pd.DataFrame(rows, columns=[c for c in Selection.to_schema().columns if c != "ID"])
    for col in ("score_fool_the_ai", "n_solvers", "annotation_index"):
        df[col] = df[col].astype("Int64")
    for col in ("solvers_jaccard_mean", "solvers_jaccard_std", "solvers_agreement"):
        df[col] = df[col].astype(float)
    selected = df["status"] == "selected"
    df["ID"] = pd.array([pd.NA] * len(df), dtype="Int64")
    df.loc[selected, "ID"] = df[selected].groupby("dataset").cumcount().astype("Int64")
    return df


def split_ids(instances: pd.DataFrame) -> list[tuple[str, int]]:
    """(split, split_id) per instance: game N=5/6 -> game_5_6, N=10/12 -> game_10_12, SWOW -> swow.

    Released rows keep their released ID; new rows get the next free IDs of their split, in
    import order (the release's split files number instances before selection, with gaps).
    """
    names = [
        "swow" if d == "swow_baseline" else ("game_5_6" if n in (5, 6) else "game_10_12")
        for d, n in zip(instances["dataset"], instances["num_candidates"])
    ]
    next_free: dict[str, int] = {}
    for name, rid in zip(names, instances["release_id"]):
        if pd.notna(rid):
            next_free[name] = max(next_free.get(name, 0), int(rid) + 1)
    out = []
    for name, rid in zip(names, instances["release_id"]):
        if pd.notna(rid):
            out.append((name, int(rid)))
        else:
            out.append((name, next_free.get(name, 0)))
            next_free[name] = next_free.get(name, 0) + 1
    return out


def annotator_stats(selection: pd.DataFrame, solves: pd.DataFrame) -> pd.DataFrame:
    """Per spymaster and per solver (hashed ids): counts, mean Jaccard, mean fool-the-AI.

    Returns :class:`schemas.selection.AnnotatorStats` rows, spymasters first, by annotator.
    """
    rows = []
    spy = selection[selection["spymaster"].notna()]
    for who, g in spy.groupby("spymaster", sort=True):
        fool = g["score_fool_the_ai"].dropna().astype(float)
        human = g["solvers_jaccard_mean"].dropna()
        rows.append({"role": "spymaster", "annotator": who, "count": len(g), "selected": int((g["status"] == "selected").sum()),
                     "mean_jaccard": float(human.mean()) if len(human) else None,
                     "mean_fool_the_ai": float(fool.mean()) if len(fool) else None})  # fmt: skip
    assoc = dict(zip(selection["instance_uid"], selection["associations"]))
    if len(solves):
        js = [jaccard(sel, assoc[uid]) for uid, sel in zip(solves["instance_uid"], solves["selection"])]
        sv = solves.assign(j=js)
        for who, g in sv.groupby("solver", sort=True):
            rows.append({"role": "solver", "annotator": who, "count": len(g), "selected": None, "mean_jaccard": float(g["j"].mean()), "mean_fool_the_ai": None})
    df = pd.DataFrame(rows, columns=list(AnnotatorStats.to_schema().columns))
    df["selected"] = df["selected"].astype("Int64")
    return df


def table1(selection: pd.DataFrame, min_solver_jaccard: float) -> pd.DataFrame:
    """The paper's Table 1 per dataset and candidate group (:class:`schemas.selection.Table1`)."""
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
    solver = (sj.assign(series=sj["dataset"] + " " + sj["status"], solvers_jaccard_mean=sj["solvers_jaccard_mean"].round(2).astype(str))
              .groupby(["series", "solvers_jaccard_mean"]).size().rename("instances").reset_index())  # fmt: skip
    fa = selection.dropna(subset=["score_fool_the_ai"])
    fool = (fa.assign(series=fa["dataset"] + " " + fa["num_candidates"].map(candidate_group), score_fool_the_ai=fa["score_fool_the_ai"].astype(int).astype(str))
            .groupby(["series", "score_fool_the_ai"]).size().rename("instances").reset_index())  # fmt: skip
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


def run(params: dict[str, Any]) -> dict[str, Any]:
    """Stage entry point: instances + solves -> selection, table1 (+ Markdown)."""
    p = section(params, "select", ("min_solver_jaccard", "min_solvers"))
    thr = float(p["min_solver_jaccard"])
    if not 0.0 <= thr <= 1.0:
        raise ParamsError(f"select.min_solver_jaccard={thr} must be a fraction in [0, 1] (0.8 = 80 %)")
    solves = read_table(SOLVES_PATH, Solves)
    sel = select(read_table(INSTANCES_PATH, Instances), solves, thr, int(p["min_solvers"]))
    write_table(sel, SELECTION_PATH, Selection)
    write_table(annotator_stats(sel, solves), ANNOTATOR_STATS_PATH, AnnotatorStats)
    t1 = write_table(table1(sel, thr), TABLE1_PATH, Table1)
    with atomic_path(TABLE1_MD_PATH, ".md") as tmp:
        tmp.write_text(table1_markdown(t1))
    plot_solver, plot_fool = distributions(sel)
    write_csv(plot_solver, PLOT_SOLVER_JACCARD)
    write_csv(plot_fool, PLOT_FOOL_THE_AI)
    metrics = {
        "min_solver_jaccard": thr,
        "by_dataset_status": {f"{d}/{s}": int(n) for (d, s), n in sel.groupby(["dataset", "status"]).size().items()},
        "table1": t1.drop(columns="min_solver_jaccard").to_dict("records"),
    }
    write_json(METRICS_PATH, metrics)
    return metrics

"""Stage 8, ``select_instances``: solvable-by-humans scores and the >= 80 % selection.

Per instance (reference "Formulas"): per-solver Jaccard of each solver's selection against
the associations; ``solvers_jaccard_mean = round(mean, 2)``; ``solvers_jaccard_std =
round(population std, 2)``; 3-way agreement |S1∩S2∩S3| / |S1∪S2∪S3|. Released instances keep
their released mean and std. Raw instances with fewer than ``select.min_solvers`` valid solver
answers are ``insufficient_solvers`` (never averaged over fewer). An instance is ``selected``
when its mean >= ``select.min_solver_jaccard`` (paper §2.2: "at least 80%"); model scores
are not used. A raw instance whose cue the profanity filter flagged is ``profane_cue`` (its
scores are kept). Selected instances get a permanent ``ID`` per dataset from the ID ledger
(0..n-1 in import order on a first build; never renumbered later: :func:`benchmark_ids`); every
instance also gets its release split (game_5_6, game_10_12, swow) and a permanent split ID.
Only answers by players other than the instance's spymaster count (paper §2).

Also writes the paper's Table 1 (generated associations, average model score =
mean(100 - fool-the-AI), average human score, kept) per dataset and candidate group, and
per-annotator statistics (hashed ids only): spymasters' instances, selected count, mean human
score and mean fool-the-AI; solvers' answers and mean Jaccard.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

import pandas as pd
from pandera.errors import SchemaError, SchemaErrors

from schemas import ListColumnError
from schemas.selection import AnnotatorStats, IdLedger, Selection, Table1
from stages import catalog
from stages._io import atomic_path, write_csv
from stages.errors import GavilError
from stages.winogavil import candidate_group, jaccard, solvable_by_humans, solver_agreement, solver_jaccards

if TYPE_CHECKING:
    from stages.config import Params


class Metrics(TypedDict):
    """``data/metrics/select_instances.json``."""

    min_solver_jaccard: float  # a fraction
    by_dataset_status: dict[str, int]  # "dataset/status" -> instances
    table1: list[dict[str, Any]]  # Table 1 rows


def select(
    instances: pd.DataFrame,
    solves: pd.DataFrame,
    min_solver_jaccard: float,
    min_solvers: int = 3,
    ledger: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Score and select instances (pure).

    Args:
        instances: :class:`schemas.annotations.Instances`.
        solves: :class:`schemas.annotations.Solves` (answers to raw instances). An answer by the
            instance's own spymaster never counts (paper §2: three *other* players solve it).
        min_solver_jaccard: threshold on the rounded mean, a fraction (0.8 = 80 %).
        min_solvers: answers by other players needed before a raw instance is scored.
        ledger: :class:`schemas.selection.IdLedger` of earlier builds (None: a first build).
            Instances in it keep their split ID and benchmark ID; new ones take the next free.

    Returns:
        :class:`schemas.selection.Selection`, one row per instance, in import order.

    Raises:
        GavilError: the ledger puts an instance in another split than its data does.
    """
    spymaster_of = dict(zip(instances["instance_uid"], instances["spymaster"]))
    own = [s == spymaster_of.get(u) for u, s in zip(solves["instance_uid"], solves["solver"])]
    others = solves.loc[~pd.Series(own, index=solves.index, dtype=bool)]
    by_uid = {uid: g["selection"].tolist() for uid, g in others.groupby("instance_uid", sort=False)}
    splits = split_ids(instances, ledger)
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
                rows.append(
                    {
                        **row,
                        "status": "insufficient_solvers",
                        "reason": f"{len(sels)} valid answer(s) by other players, need {min_solvers}",
                    }
                )
                continue
            js = solver_jaccards(sels, rec.associations)
            mean, std = solvable_by_humans(js)
            row |= {
                "solver_jaccards": js,
                "solvers_jaccard_mean": mean,
                "solvers_jaccard_std": std,
                "solvers_agreement": solver_agreement(sels),
            }
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
    df["ID"] = benchmark_ids(df, ledger)
    return df


def _ledger(ledger: pd.DataFrame | None) -> pd.DataFrame:
    return ledger if ledger is not None else pd.DataFrame(columns=list(IdLedger.to_schema().columns))


def split_ids(instances: pd.DataFrame, ledger: pd.DataFrame | None = None) -> list[tuple[str, int]]:
    """(split, split_id) per instance: game N=5/6 -> game_5_6, N=10/12 -> game_10_12, SWOW -> swow.

    An instance in the ledger keeps its split ID. Released rows keep their released ID; new rows
    get the next free IDs of their split (above every released and ledgered ID), in import
    order (the release's split files number instances before selection, with gaps).

    Raises:
        GavilError: the ledger puts an instance in another split than its data does.
    """
    led = _ledger(ledger)
    known = {u: (s, int(i)) for u, s, i in zip(led["instance_uid"], led["split"], led["split_id"])}
    names = [
        "swow" if d == "swow_baseline" else ("game_5_6" if n in (5, 6) else "game_10_12")
        for d, n in zip(instances["dataset"], instances["num_candidates"])
    ]
    next_free: dict[str, int] = {}
    for name, sid in [*known.values(), *((n, int(r)) for n, r in zip(names, instances["release_id"]) if pd.notna(r))]:
        next_free[name] = max(next_free.get(name, 0), sid + 1)
    out: list[tuple[str, int]] = []
    for uid, name, rid in zip(instances["instance_uid"], names, instances["release_id"]):
        if uid in known:
            if known[uid][0] != name:
                raise GavilError(
                    f"ID ledger: {uid} is in split {known[uid][0]}, but its data now says {name}. An instance's "
                    "dataset and candidate count never change: give the changed instance a new instance_id"
                )
            out.append(known[uid])
        elif pd.notna(rid):
            out.append((name, int(rid)))
        else:
            out.append((name, next_free.get(name, 0)))
            next_free[name] = next_free.get(name, 0) + 1
    owner: dict[tuple[str, int], str] = {}
    for uid, slot in zip(instances["instance_uid"], out):
        if slot in owner:
            raise GavilError(
                f"split ID {slot[1]} of {slot[0]} is claimed by both {owner[slot]} and {uid}: two release files "
                "hold the same split (winogavil_dataset.csv already contains game_5_6 + game_10_12), or a "
                "release file was added after new instances took its IDs; list each released instance once"
            )
        owner[slot] = uid
    return out


def benchmark_ids(selection: pd.DataFrame, ledger: pd.DataFrame | None = None) -> pd.Series:
    """The permanent benchmark ``ID`` of each selected row (Int64; null for the others).

    A row whose instance has an ID in the ledger keeps it; the other selected rows take the next
    free IDs of their dataset (above every ID ever given), in import order. So a first build
    numbers 0..n-1 in import order (the release round trip), and later builds never renumber: a
    batch folder that sorts earlier, or an instance that stops being selected (its ID stays
    reserved: a gap), shifts nothing.
    """
    led = _ledger(ledger)
    has = led[led["ID"].notna()]
    known = {u: int(i) for u, i in zip(has["instance_uid"], has["ID"])}
    next_id = {d: int(g["ID"].max()) + 1 for d, g in has.groupby("dataset")}
    out: list[Any] = []
    for uid, dataset, status in zip(selection["instance_uid"], selection["dataset"], selection["status"]):
        if status != "selected":
            out.append(pd.NA)
        elif uid in known:
            out.append(known[uid])
        else:
            out.append(next_id.get(dataset, 0))
            next_id[dataset] = next_id.get(dataset, 0) + 1
    return pd.Series(pd.array(out, dtype="Int64"), index=selection.index)


def update_ledger(selection: pd.DataFrame, ledger: pd.DataFrame | None = None) -> pd.DataFrame:
    """The ledger after this build (:class:`schemas.selection.IdLedger`): old rows unchanged except
    an ``ID`` given for the first time; new instances appended in import order. Nothing is removed."""
    led = _ledger(ledger).copy()
    ids = dict(zip(selection["instance_uid"], selection["ID"]))
    led["ID"] = pd.array(
        [i if pd.notna(i) else ids.get(u, pd.NA) for u, i in zip(led["instance_uid"], led["ID"])], dtype="Int64"
    )
    new = selection[~selection["instance_uid"].isin(set(led["instance_uid"]))]
    add = new[["instance_uid", "dataset", "split", "split_id", "ID"]]
    out = pd.concat([led, add], ignore_index=True) if len(led) else add.reset_index(drop=True)
    out["split_id"] = out["split_id"].astype(int)
    out["ID"] = out["ID"].astype("Int64")
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
    assoc = dict(zip(selection["instance_uid"], selection["associations"]))
    if len(solves):
        js = [jaccard(sel, assoc[uid]) for uid, sel in zip(solves["instance_uid"], solves["selection"])]
        sv = solves.assign(j=js)
        for who, g in sv.groupby("solver", sort=True):
            rows.append(
                {
                    "role": "solver",
                    "annotator": who,
                    "count": len(g),
                    "selected": None,
                    "mean_jaccard": float(g["j"].mean()),
                    "mean_fool_the_ai": None,
                }
            )
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


def run(params: Params) -> Metrics:
    """Stage entry point: instances + solves -> selection, table1 (+ Markdown), annotator stats, plots.

    Returns the metrics: the threshold (a fraction), instances by dataset/status, Table 1 rows."""
    p = params.select
    thr = p.min_solver_jaccard
    solves = catalog.read_table("solves")
    try:
        ledger = catalog.read_table("id_ledger") if catalog.exists("id_ledger") else None
    except (SchemaErrors, SchemaError, ListColumnError) as e:
        path = catalog.entry("id_ledger").path
        raise GavilError(
            f"{path} is not a valid ID ledger ({str(e).splitlines()[0][:120]}): restore it from git "
            f"(git checkout -- {path}); never edit or merge it by hand"
        ) from e
    sel = select(catalog.read_table("instances"), solves, thr, p.min_solvers, ledger)
    catalog.write_table(sel, "selection")
    catalog.write_table(update_ledger(sel, ledger), "id_ledger")
    catalog.write_table(annotator_stats(sel, solves), "annotator_stats")
    t1 = catalog.write_table(table1(sel, thr), "table1")
    with atomic_path(catalog.path("table1_md", "write"), ".md") as tmp:
        tmp.write_text(table1_markdown(t1))
    plot_solver, plot_fool = distributions(sel)
    write_csv(plot_solver, catalog.path("plot_solver_jaccard", "write"))
    write_csv(plot_fool, catalog.path("plot_fool_the_ai", "write"))
    return {
        "min_solver_jaccard": thr,
        "by_dataset_status": {f"{d}/{s}": int(n) for (d, s), n in sel.groupby(["dataset", "status"]).size().items()},
        "table1": t1.drop(columns="min_solver_jaccard").to_dict("records"),
    }

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
Only answers by players other than the instance's spymaster count (paper §2), and exactly
``select.min_solvers`` of them (the ledger's recorded solvers first, then by hashed solver id);
the rest are counted as ``late_answers``, never averaged in.

The ID ledger binds each ``instance_uid`` to its content (:func:`content_fingerprint`): imported
content that differs under a recorded uid is ``rejected`` (a reused or edited instance_id), and a
published instance is final: its row is rebuilt from the ledger, frozen, whatever later answers,
edits or removed batches say; only ``select.retired`` takes it out (status ``retired``, its ID
never reused). Outputs do not depend on the row order of any input (:func:`canonical_order`).

Also writes the paper's Table 1 (generated associations, average model score =
mean(100 - fool-the-AI), average human score, kept) per dataset and candidate group, and
per-annotator statistics (hashed ids only): spymasters' instances, selected count, mean human
score and mean fool-the-AI; solvers' answers and mean Jaccard.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypedDict

import pandas as pd
from pandera.errors import SchemaError, SchemaErrors

from schemas import ListColumnError
from schemas.selection import ID_STATUSES, PUBLISHED_FIELDS, SPLITS, AnnotatorStats, IdLedger, Selection, Table1
from stages import catalog
from stages._io import atomic_path, write_csv
from stages.domain import normalize_name
from stages.errors import GavilError
from stages.winogavil import candidate_group, jaccard, solvable_by_humans, solver_agreement, solver_jaccards

if TYPE_CHECKING:
    from stages.config import Params


class Metrics(TypedDict):
    """``data/metrics/select_instances.json``."""

    min_solver_jaccard: float  # a fraction
    by_dataset_status: dict[str, int]  # "dataset/status" -> instances
    table1: list[dict[str, Any]]  # Table 1 rows


#: Fixed order of the release splits (the release numbers game_5_6, then game_10_12, then swow).
SPLIT_RANK = {name: i for i, name in enumerate(SPLITS)}
_NUM = re.compile(r"(\d+)")


def content_fingerprint(dataset: str, cue: str, candidates: list[str], associations: list[str]) -> str:
    """The sha256 (hex) an instance's ``instance_uid`` is bound to in the ID ledger.

    Over what makes an instance (paper §2: a cue, the candidate images, the associations the
    spymaster linked to it), as imported by ``import_annotations`` (released files: the
    ``cue``/``candidates``/``associations`` columns; raw, crowd and game creations: the same
    fields after :func:`stages.domain.clean_cue` and name normalization), plus the dataset. Each
    name in :func:`stages.domain.normalize_name` form (NFC, trimmed, case-folded), candidates and
    associations as sorted sets (their order is display order, not content), as canonical JSON
    (sorted keys, no whitespace, UTF-8).
    """

    def names(xs: list[str]) -> list[str]:
        return sorted({normalize_name(x) for x in xs})

    doc = {
        "dataset": dataset,
        "cue": normalize_name(cue),
        "candidates": names(candidates),
        "associations": names(associations),
    }
    return hashlib.sha256(
        json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    ).hexdigest()


def _natural(text: str) -> tuple[Any, ...]:
    """Sort key reading digit runs as numbers (``game_5_6`` before ``game_10_12``)."""
    return tuple(int(t) if t.isdigit() else t for t in _NUM.split(text))


def canonical_order(instances: pd.DataFrame) -> pd.DataFrame:
    """``instances`` in the order the selection numbers them, whatever their row order.

    Released rows first, then raw ones; within each by source file (digit runs as numbers:
    ``game_5_6.csv`` before ``game_10_12.csv``; batch folders by name) and line. On the
    import's own output this is its import order for released files and raw batches."""
    key = [
        (o != "release", _natural(f), int(line), u)
        for o, f, line, u in zip(
            instances["origin"], instances["source_file"], instances["source_line"], instances["instance_uid"]
        )
    ]
    order = sorted(range(len(key)), key=key.__getitem__)
    return instances.iloc[order].reset_index(drop=True)


def _led_records(ledger: pd.DataFrame | None) -> dict[str, dict[str, Any]]:
    led = _ledger(ledger)
    return {r["instance_uid"]: r for r in led.to_dict("records")}


def _is_null(v: Any) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and v != v)


def _same(a: Any, b: Any) -> bool:
    if _is_null(a) or _is_null(b):
        return _is_null(a) and _is_null(b)
    return bool(a == b)


def _split_of(dataset: str, num_candidates: int) -> str:
    return "swow" if dataset == "swow_baseline" else ("game_5_6" if num_candidates in (5, 6) else "game_10_12")


def _retired(ledger: dict[str, dict[str, Any]], retired: Iterable[tuple[str, int, str]]) -> dict[str, str]:
    """instance_uid -> reason for each retired (dataset, ID, reason). Raises GavilError for an
    ID the ledger never published."""
    by_id = {(r["dataset"], int(r["ID"])): u for u, r in ledger.items() if not _is_null(r["ID"])}
    out = {}
    for dataset, id_, reason in retired:
        uid = by_id.get((dataset, int(id_)))
        if uid is None:
            raise GavilError(
                f"select.retired: {dataset} ID {id_} was never published (it is not in the ID ledger "
                "data/ledger/benchmark_ids.parquet): fix the entry's dataset or ID, or remove it"
            )
        out[uid] = reason
    return out


def select(
    instances: pd.DataFrame,
    solves: pd.DataFrame,
    min_solver_jaccard: float,
    min_solvers: int = 3,
    ledger: pd.DataFrame | None = None,
    retired: Iterable[tuple[str, int, str]] = (),
) -> pd.DataFrame:
    """Score and select instances (pure; independent of the row order of every input).

    Args:
        instances: :class:`schemas.annotations.Instances`.
        solves: :class:`schemas.annotations.Solves` (answers to raw instances). An answer by the
            instance's own spymaster never counts (paper §2: three *other* players solve it).
        min_solver_jaccard: threshold on the rounded mean, a fraction (0.8 = 80 %).
        min_solvers: answers by other players that score a raw instance: exactly this many count
            (those of the solvers the ledger recorded for it first, then by hashed solver id);
            the others are ``late_answers``.
        ledger: :class:`schemas.selection.IdLedger` of earlier builds (None: a first build).
            An instance in it keeps its split ID and benchmark ID, and its uid stays bound to
            its recorded content; a published one (with an ``ID``) is rebuilt from it, frozen.
        retired: (dataset, ID, reason) of published instances a lab took out (``select.retired``).

    Returns:
        :class:`schemas.selection.Selection`: one row per imported instance (canonical order,
        :func:`canonical_order`), then published instances no longer imported as published
        (source gone, or its uid now holds other content) rebuilt from the ledger, by dataset and ID.

    Raises:
        GavilError: a retired ID was never published.
    """
    led = _led_records(ledger)
    gone = _retired(led, retired)
    instances = canonical_order(instances)
    spymaster_of = dict(zip(instances["instance_uid"], instances["spymaster"]))
    answers: dict[str, dict[str, list[str]]] = {}
    for uid, solver, selection in zip(solves["instance_uid"], solves["solver"], solves["selection"]):
        if solver != spymaster_of.get(uid):
            answers.setdefault(uid, {})[solver] = list(selection)
    rows: list[dict[str, Any]] = []
    emitted: set[str] = set()
    for rec in instances.itertuples(index=False):
        fp = content_fingerprint(rec.dataset, rec.cue, rec.candidates, rec.associations)
        old = led.get(rec.instance_uid)
        row = {
            "instance_uid": rec.instance_uid,
            "origin": rec.origin,
            "dataset": rec.dataset,
            "split": _split_of(rec.dataset, rec.num_candidates),
            "split_id": None,
            "fingerprint": fp,
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
            "solvers": None,
            "solver_jaccards": None,
            "n_solvers": None,
            "late_answers": 0,
            "solvers_jaccard_mean": rec.solvers_jaccard_mean,
            "solvers_jaccard_std": rec.solvers_jaccard_std,
            "solvers_agreement": None,
            "ID": None,
        }
        given = answers.get(rec.instance_uid, {})
        if old is not None and old["fingerprint"] != fp:
            what = (
                f"published {old['dataset']} ID {int(old['ID'])}"
                if not _is_null(old["ID"])
                else f"{old['split']} split ID {int(old['split_id'])}"
            )
            rows.append(
                row
                | {
                    "instance_uid": f"{rec.instance_uid}#conflict:{fp[:12]}",
                    "late_answers": len(given),
                    "status": "rejected",
                    "reason": f"content differs from {what} (cue {old['cue']!r}) recorded for {rec.instance_uid} "
                    "in the ID ledger: an instance_id names one instance forever; give this instance a new instance_id",
                }
            )
            continue
        emitted.add(rec.instance_uid)
        if old is not None and not _is_null(old["ID"]):
            rows.append(_published_row(old, row, given, gone.get(rec.instance_uid)))
            continue
        if rec.origin == "raw":
            recorded = set(old["solvers"] or []) if old is not None and isinstance(old["solvers"], list) else set()
            order = sorted(given, key=lambda s: (s not in recorded, s))
            row["n_solvers"] = len(order)
            if len(order) < min_solvers:
                rows.append(
                    row
                    | {
                        "status": "insufficient_solvers",
                        "reason": f"{len(order)} valid answer(s) by other players, need {min_solvers}",
                    }
                )
                continue
            counted = order[:min_solvers]
            sels = [given[s] for s in counted]
            js = solver_jaccards(sels, rec.associations)
            mean, std = solvable_by_humans(js)
            row |= {
                "solvers": counted,
                "solver_jaccards": js,
                "n_solvers": len(counted),
                "late_answers": len(order) - len(counted),
                "solvers_jaccard_mean": mean,
                "solvers_jaccard_std": std,
                "solvers_agreement": solver_agreement(sels),
            }
        mean = row["solvers_jaccard_mean"]
        late = f"; {row['late_answers']} later answer(s) not counted" if row["late_answers"] else ""
        if isinstance(rec.cue_flag, str):
            rows.append(row | {"status": "profane_cue", "reason": f"cue flagged: {rec.cue_flag}"})
        elif pd.isna(mean):
            rows.append(row | {"status": "insufficient_solvers", "reason": "no solver scores"})
        elif mean >= min_solver_jaccard:
            rows.append(row | {"status": "selected", "reason": late[2:] or None})
        else:
            rows.append(
                row | {"status": "below_threshold", "reason": f"solver mean {mean} < {min_solver_jaccard}{late}"}
            )
    kept = sorted(
        (r for u, r in led.items() if u not in emitted and not _is_null(r["ID"])),
        key=lambda r: (r["dataset"], int(r["ID"])),
    )
    for old in kept:
        uid = old["instance_uid"]
        shadow = any(r["instance_uid"].startswith(f"{uid}#conflict:") for r in rows)
        why = "its instance_id now holds other content (rejected)" if shadow else "its source row is no longer imported"
        rows.append(
            _published_row(old, {}, answers.get(uid, {}), gone.get(uid), f"published; {why}: kept from the ID ledger")
        )
    df = pd.DataFrame(rows, columns=list(Selection.to_schema().columns))
    for col in ("score_fool_the_ai", "n_solvers", "annotation_index"):
        df[col] = df[col].astype("Int64")
    for col in ("solvers_jaccard_mean", "solvers_jaccard_std", "solvers_agreement", "cue_weight"):
        df[col] = df[col].astype(float)
    for col in ("associations_mean_weight", "candidates_connectivity_score"):
        df[col] = df[col].astype(float)
    live = df["status"] != "rejected"
    slots = split_ids(df[live], ledger, instances)
    df["split_id"] = pd.array([pd.NA] * len(df), dtype="Int64")
    df.loc[live, "split_id"] = pd.array([sid for _, sid in slots], dtype="Int64")
    df["ID"] = benchmark_ids(df, ledger)
    return df


def _published_row(
    old: dict[str, Any], now: dict[str, Any], given: dict[str, list[str]], retired: str | None, note: str = ""
) -> dict[str, Any]:
    """The selection row of a published instance: its ledger row, frozen (answers beyond the
    counted ones are ``late_answers``; imported values that differ from the published ones are
    named in the reason, never used)."""
    counted = set(old["solvers"]) if isinstance(old["solvers"], list) else set()
    late = sum(s not in counted for s in given)
    notes = [note] if note else []
    differs = [
        f for f in ("score_fool_the_ai", "images_source", "annotation_index") if f in now and not _same(now[f], old[f])
    ]
    if "candidates" in now and (now["candidates"] != old["candidates"] or now["associations"] != old["associations"]):
        differs.append("list order")
    if now and now["origin"] == "release":
        differs += [f for f in ("solvers_jaccard_mean", "solvers_jaccard_std") if not _same(now[f], old[f])]
    if differs:
        notes.append(f"source row now differs in {', '.join(differs)}: the published values stay")
    if late:
        notes.append(f"{late} later answer(s) not counted")
    row = {
        "instance_uid": old["instance_uid"],
        "dataset": old["dataset"],
        "split": old["split"],
        "split_id": None,
        "fingerprint": old["fingerprint"],
        **{f: old[f] for f in PUBLISHED_FIELDS},
        "late_answers": late,
        "ID": old["ID"],
    }
    if retired is not None:
        return row | {"status": "retired", "reason": "; ".join([f"retired (select.retired): {retired}", *notes])}
    return row | {"status": "selected", "reason": "; ".join(notes) or None}


def _ledger(ledger: pd.DataFrame | None) -> pd.DataFrame:
    return ledger if ledger is not None else pd.DataFrame(columns=list(IdLedger.to_schema().columns))


def split_ids(
    rows: pd.DataFrame, ledger: pd.DataFrame | None = None, instances: pd.DataFrame | None = None
) -> list[tuple[str, int]]:
    """(split, split_id) per row of ``rows`` (selection rows with ``instance_uid``, ``split``;
    or instances): game N=5/6 -> game_5_6, N=10/12 -> game_10_12, SWOW -> swow.

    A uid in the ledger keeps its split ID. Released rows keep their released ID (``release_id``
    of ``instances``); new rows get the next free IDs of their split (above every released and
    ledgered ID), in the rows' order (the release's split files number instances before
    selection, with gaps).

    Raises:
        GavilError: a split ID is claimed twice (two release files hold the same split).
    """
    led = _ledger(ledger)
    known = {u: (s, int(i)) for u, s, i in zip(led["instance_uid"], led["split"], led["split_id"])}
    src = instances if instances is not None else rows
    rid_of = dict(zip(src["instance_uid"], src["release_id"])) if "release_id" in src else {}
    names = (
        list(rows["split"])
        if "split" in rows
        else [_split_of(d, n) for d, n in zip(rows["dataset"], rows["num_candidates"])]
    )
    next_free: dict[str, int] = {}
    released = [(n, int(rid_of[u])) for u, n in zip(rows["instance_uid"], names) if pd.notna(rid_of.get(u, pd.NA))]
    for name, sid in [*known.values(), *released]:
        next_free[name] = max(next_free.get(name, 0), sid + 1)
    out: list[tuple[str, int]] = []
    for uid, name in zip(rows["instance_uid"], names):
        rid = rid_of.get(uid, pd.NA)
        if uid in known:
            out.append(known[uid])
        elif pd.notna(rid):
            out.append((name, int(rid)))
        else:
            out.append((name, next_free.get(name, 0)))
            next_free[name] = next_free.get(name, 0) + 1
    owner: dict[tuple[str, int], str] = {}
    for uid, slot in zip(rows["instance_uid"], out):
        if slot in owner:
            raise GavilError(
                f"split ID {slot[1]} of {slot[0]} is claimed by both {owner[slot]} and {uid}: two release files "
                "hold the same split (winogavil_dataset.csv already contains game_5_6 + game_10_12), or a "
                "release file was added after new instances took its IDs; list each released instance once"
            )
        owner[slot] = uid
    return out


def benchmark_ids(selection: pd.DataFrame, ledger: pd.DataFrame | None = None) -> pd.Series:
    """The permanent benchmark ``ID`` of each selected or retired row (Int64; null for the others).

    A row whose ``ID`` is already set (a published instance rebuilt from the ledger) keeps it;
    the other selected rows take the next free IDs of their dataset (above every ID the ledger
    ever gave, retired ones included), in row order. So a first build numbers 0..n-1 in import
    order (the release round trip), and later builds never renumber or reuse an ID.
    """
    led = _ledger(ledger)
    has = led[led["ID"].notna()]
    next_id = {d: int(g["ID"].max()) + 1 for d, g in has.groupby("dataset")}
    out: list[Any] = []
    for dataset, status, given in zip(selection["dataset"], selection["status"], selection["ID"]):
        if status not in ID_STATUSES:
            out.append(pd.NA)
        elif not _is_null(given):
            out.append(int(given))
        else:
            out.append(next_id.get(dataset, 0))
            next_id[dataset] = next_id.get(dataset, 0) + 1
    return pd.Series(pd.array(out, dtype="Int64"), index=selection.index)


def update_ledger(selection: pd.DataFrame, ledger: pd.DataFrame | None = None) -> pd.DataFrame:
    """The ledger after this build (:class:`schemas.selection.IdLedger`).

    Published rows (with an ``ID``) never change. An unpublished row takes this build's values
    (and its ``ID`` when first selected: from then on frozen). A new instance is added with its
    content fingerprint. Rejected rows (content conflicting with the ledger) add nothing.
    Nothing is removed. Sorted by split and split_id (bytes independent of input order)."""
    led = _led_records(ledger)
    cols = list(IdLedger.to_schema().columns)
    for r in selection[selection["status"] != "rejected"].to_dict("records"):
        old = led.get(r["instance_uid"])
        if old is not None and (not _is_null(old["ID"]) or old["fingerprint"] != r["fingerprint"]):
            continue
        led[r["instance_uid"]] = {c: r[c] for c in cols}
    rows = sorted(led.values(), key=lambda r: (SPLIT_RANK[r["split"]], int(r["split_id"])))
    out = pd.DataFrame(rows, columns=cols)
    out["split_id"] = out["split_id"].astype(int)
    for col in ("ID", "score_fool_the_ai", "annotation_index", "n_solvers"):
        out[col] = out[col].astype("Int64")
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
    live = selection[selection["status"] != "rejected"]
    assoc = dict(zip(live["instance_uid"], live["associations"]))
    solves = solves[solves["instance_uid"].isin(set(assoc))]  # an answer to content the ledger rejected: no row
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
    """The paper's Table 1 per dataset and candidate group (:class:`schemas.selection.Table1`);
    rejected rows (content conflicting with the ID ledger) are not instances and not counted."""
    selection = selection[selection["status"] != "rejected"]
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
    retired = [(e.dataset, e.ID, e.reason) for e in p.retired]
    sel = select(catalog.read_table("instances"), solves, thr, p.min_solvers, ledger, retired)
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

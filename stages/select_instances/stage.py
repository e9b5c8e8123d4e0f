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
never reused), or players' flags while unreviewed or once a review retired it. A game instance
with an open flag or retired by review never enters the benchmark: ``withheld`` (reason
``flagged_unreviewed`` or ``retired_by_review``; :mod:`stages.select_instances.flags`). Nor does the
unpublished work of a player who withdrew consent (``withheld``, reason ``withdrawn: ...``); their
published instances stay, the withdrawal noted (:mod:`stages.select_instances.consent`).
Outputs do not depend on the row order of any input (:func:`canonical_order`).

Also writes the paper's Table 1 (generated associations, average model score =
mean(100 - fool-the-AI), average human score, kept) per dataset and candidate group, and
per-annotator statistics (hashed ids only): spymasters' instances, selected count, mean human
score and mean fool-the-AI; solvers' answers and mean Jaccard.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, cast

import pandas as pd

from gavil.domain.winogavil import solvable_by_humans, solver_agreement, solver_jaccards
from gavil.io import atomic_path, write_csv
from gavil.pipeline import catalog
from schemas.selection import UNNUMBERED, Selection
from stages.select_instances.consent import published_note, withdraw, withdrawn_of
from stages.select_instances.flags import held_reasons, published_reason, withhold
from stages.select_instances.guard import check_ledger, published_ids, read_ledger, read_published
from stages.select_instances.history import check_history, published_history
from stages.select_instances.identity import duplicate_reason, mark_duplicates
from stages.select_instances.ledger import (
    benchmark_ids,
    canonical_order,
    content_fingerprint,
    fingerprints,
    is_null,
    led_records,
    published_row,
    retired_uids,
    split_ids,
    split_of,
    update_ledger,
)
from stages.select_instances.report import annotator_stats, distributions, table1, table1_markdown
from stages.select_instances.showable import UNSHOWABLE, hold_unshowable, image_fates

if TYPE_CHECKING:
    from gavil.params import Params


class Metrics(TypedDict):
    """``data/metrics/select_instances.json``."""

    min_solver_jaccard: float  # a fraction
    by_dataset_status: dict[str, int]  # "dataset/status" -> instances
    table1: list[dict[str, Any]]  # Table 1 rows


class _InstanceRow(Protocol):
    """A :class:`schemas.annotations.Instances` row as ``itertuples`` yields it (the fields read here;
    ``object``: a nullable value only copied or narrowed here)."""

    instance_uid: str
    origin: str
    dataset: str
    cue: str
    candidates: list[str]
    associations: list[str]
    num_associations: int
    num_candidates: int
    score_fool_the_ai: object
    annotation_index: object
    images_source: object
    cue_weight: float
    associations_mean_weight: float
    candidates_connectivity_score: float
    spymaster: object
    solvers_jaccard_mean: float
    solvers_jaccard_std: float
    cue_flag: object


def select(
    instances: pd.DataFrame,
    solves: pd.DataFrame,
    min_solver_jaccard: float,
    min_solvers: int = 3,
    ledger: pd.DataFrame | None = None,
    retired: Iterable[tuple[str, int, str]] = (),
    flags: pd.DataFrame | None = None,
    images: Mapping[str, str | None] | None = None,
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
        flags: :class:`schemas.annotations.Flags` (None: no flag). An instance with an open flag
            or retired by review is held (:mod:`stages.select_instances.flags`): ``withheld``
            when unpublished, ``retired`` (its ID kept) when published; a kept one as usual.
        images: concept -> None (an accepted image) or why not (:func:`image_fates` of the
            ``ocr`` table); None checks nothing. An unpublished instance not from the release with
            a candidate that cannot be shown is ``withheld`` (:mod:`stages.select_instances.showable`).

    An instance whose ``withdrawn`` (instances column; absent: none) is set, its spymaster having
    withdrawn consent, is ``withheld`` when unpublished and keeps its ID, noted, when published.

    Returns:
        :class:`schemas.selection.Selection`: one row per imported instance (canonical order,
        :func:`canonical_order`), then published instances no longer imported as published
        (source gone, or its uid now holds other content) rebuilt from the ledger, by dataset and ID.

    Raises:
        gavil.errors.GavilError: a retired ID was never published.
    """
    led = led_records(ledger)
    held = held_reasons(flags)  # players' flags: open or retired by review (stages.select_instances.flags)
    published = {u for u, r in led.items() if not is_null(r["ID"])}
    gone = {u: r for u, why in held.items() if u in published and (r := published_reason(why))}
    gone |= retired_uids(led, retired)  # reports never take a published instance out; an admin's retire does
    instances = canonical_order(instances)
    answers = _other_players_answers(instances, solves)
    rows: list[dict[str, Any]] = []
    emitted: set[str] = set()
    # cast: pandas-stubs types every itertuples field as a scalar; list columns hold lists
    for rec in cast("Iterator[_InstanceRow]", instances.itertuples(index=False)):
        given = answers.get(rec.instance_uid, {})
        row, own = _imported_row(rec, led.get(rec.instance_uid), given, gone, min_solver_jaccard, min_solvers)
        rows.append(row)
        if own:
            emitted.add(rec.instance_uid)
    rows += _kept_rows(led, emitted, rows, answers, gone, min_solver_jaccard)
    fresh = ("selected", "below_threshold", "insufficient_solvers", "profane_cue")
    rows = [
        withhold(r, held[r["instance_uid"]])
        if r["instance_uid"] in held and r["instance_uid"] not in published and r["status"] in fresh
        else r
        for r in rows
    ]
    rows = [hold_unshowable(r, images) if r["instance_uid"] not in published else r for r in rows]
    rows = withdraw(rows, withdrawn_of(instances), published)
    dups = mark_duplicates(rows, [r for r in led.values() if not is_null(r["ID"])])
    return _selection_frame(rows, dups, led, ledger, instances)


def _other_players_answers(instances: pd.DataFrame, solves: pd.DataFrame) -> dict[str, dict[str, list[str]]]:
    """instance_uid -> solver -> selection (a list of candidate names), in ``solves``' order; an
    answer by the instance's own spymaster is dropped (paper §2), a solver's later answer wins."""
    spymaster_of = dict(zip(instances["instance_uid"], instances["spymaster"]))
    answers: dict[str, dict[str, list[str]]] = {}
    for uid, solver, selection in zip(solves["instance_uid"], solves["solver"], solves["selection"]):
        if solver != spymaster_of.get(uid):
            answers.setdefault(uid, {})[solver] = list(selection)
    return answers


def _imported_row(
    rec: _InstanceRow,
    old: dict[str, Any] | None,
    given: dict[str, list[str]],
    gone: dict[str, str],
    min_solver_jaccard: float,
    min_solvers: int,
) -> tuple[dict[str, Any], bool]:
    """The selection row of one imported instance, and whether it is emitted under its own uid
    (False: ``rejected``, its content conflicts with the ledger row ``old`` recorded for its uid).

    ``given``: its other players' answers (solver -> selection); ``gone``: uid -> why a published
    instance is out (:func:`published_row`)."""
    fp = content_fingerprint(rec.dataset, rec.cue, rec.candidates, rec.associations)
    row = _base_row(rec, fp)
    if old is not None and old["fingerprint"] != fp and old["fingerprint"] in fingerprints(row):
        row["fingerprint"] = fp = old["fingerprint"]  # bound before variant folding: the same content
    if old is not None and old["fingerprint"] != fp:
        return _conflict_row(rec.instance_uid, row, old, fp, len(given)), False
    if old is not None and not is_null(old["ID"]):
        note = published_note(getattr(rec, "withdrawn", None))
        return published_row(old, row, given, gone.get(rec.instance_uid), min_solver_jaccard, note), True
    if rec.origin == "raw":
        short = _score_raw(row, old, given, rec.associations, min_solvers)
        if short is not None:
            return short, True
    return _fate(row, rec.cue_flag, min_solver_jaccard), True


def _base_row(rec: _InstanceRow, fp: str) -> dict[str, Any]:
    """An imported instance's selection row before scoring (no ``status`` nor ``reason`` yet):
    its imported values, content fingerprint ``fp``, split, and null solver scores and IDs."""
    return {
        "instance_uid": rec.instance_uid,
        "origin": rec.origin,
        "dataset": rec.dataset,
        "split": split_of(rec.dataset, rec.num_candidates),
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


def _conflict_row(uid: str, row: dict[str, Any], old: dict[str, Any], fp: str, n_given: int) -> dict[str, Any]:
    """The ``rejected`` row of imported content (fingerprint ``fp``) that differs from the ledger
    row ``old`` recorded under its ``uid``: uid ``<uid>#conflict:<fp[:12]>``, all ``n_given``
    answers late."""
    what = (
        f"published {old['dataset']} ID {int(old['ID'])}"
        if not is_null(old["ID"])
        else f"{old['split']} split ID {int(old['split_id'])}"
    )
    return row | {
        "instance_uid": f"{uid}#conflict:{fp[:12]}",
        "late_answers": n_given,
        "status": "rejected",
        "reason": f"content differs from {what} (cue {old['cue']!r}) recorded for {uid} "
        "in the ID ledger: an instance_id names one instance forever; give this instance a new instance_id",
    }


def _score_raw(
    row: dict[str, Any],
    old: dict[str, Any] | None,
    given: dict[str, list[str]],
    associations: list[str],
    min_solvers: int,
) -> dict[str, Any] | None:
    """Score a raw instance's ``row`` in place from exactly ``min_solvers`` answers in ``given``
    (the solvers ``old`` recorded first, then by hashed solver id; the rest ``late_answers``).

    Returns its ``insufficient_solvers`` row when fewer answered, else None (``row`` scored)."""
    recorded = set(old["solvers"] or []) if old is not None and isinstance(old["solvers"], list) else set()
    order = sorted(given, key=lambda s: (s not in recorded, s))
    row["n_solvers"] = len(order)
    if len(order) < min_solvers:
        return row | {
            "status": "insufficient_solvers",
            "reason": f"{len(order)} valid answer(s) by other players, need {min_solvers}",
        }
    counted = order[:min_solvers]
    sels = [given[s] for s in counted]
    js = solver_jaccards(sels, associations)
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
    return None


def _fate(row: dict[str, Any], cue_flag: object, min_solver_jaccard: float) -> dict[str, Any]:
    """A scored unpublished row with its status: ``profane_cue`` (``cue_flag`` a string),
    ``insufficient_solvers`` (no mean), ``selected`` (mean >= the threshold) or ``below_threshold``."""
    mean = row["solvers_jaccard_mean"]
    late = f"; {row['late_answers']} later answer(s) not counted" if row["late_answers"] else ""
    if isinstance(cue_flag, str):
        return row | {"status": "profane_cue", "reason": f"cue flagged: {cue_flag}"}
    if pd.isna(mean):
        return row | {"status": "insufficient_solvers", "reason": "no solver scores"}
    if mean >= min_solver_jaccard:
        return row | {"status": "selected", "reason": late[2:] or None}
    return row | {"status": "below_threshold", "reason": f"solver mean {mean} < {min_solver_jaccard}{late}"}


def _kept_rows(
    led: dict[str, dict[str, Any]],
    emitted: set[str],
    rows: list[dict[str, Any]],
    answers: dict[str, dict[str, list[str]]],
    gone: dict[str, str],
    min_solver_jaccard: float,
) -> list[dict[str, Any]]:
    """Published ledger rows not ``emitted`` as imported instances, rebuilt frozen, by dataset and
    ID; the reason says whether their uid now holds other content (a ``rejected`` row in ``rows``)."""
    kept = sorted(
        (r for u, r in led.items() if u not in emitted and not is_null(r["ID"])),
        key=lambda r: (r["dataset"], int(r["ID"])),
    )
    shadowed = {r["instance_uid"].split("#conflict:")[0] for r in rows if r["status"] == "rejected"}
    out = []
    for old in kept:
        uid = old["instance_uid"]
        why = (
            "its instance_id now holds other content (rejected)"
            if uid in shadowed
            else "its source row is no longer imported"
        )
        note = f"published; {why}: kept from the ID ledger"
        out.append(published_row(old, {}, answers.get(uid, {}), gone.get(uid), min_solver_jaccard, note))
    return out


def _selection_frame(
    rows: list[dict[str, Any]],
    dups: dict[int, Any],
    led: dict[str, dict[str, Any]],
    ledger: pd.DataFrame | None,
    instances: pd.DataFrame,
) -> pd.DataFrame:
    """``rows`` as a :class:`schemas.selection.Selection` frame: column dtypes, split IDs and
    benchmark IDs (from ``ledger``), duplicates' reasons (``dups``: row index -> what it copies)
    and collection rounds."""
    df = pd.DataFrame(rows, columns=list(Selection.to_schema().columns))
    for col in ("score_fool_the_ai", "n_solvers", "annotation_index"):
        df[col] = df[col].astype("Int64")
    for col in ("solvers_jaccard_mean", "solvers_jaccard_std", "solvers_agreement", "cue_weight"):
        df[col] = df[col].astype(float)
    for col in ("associations_mean_weight", "candidates_connectivity_score"):
        df[col] = df[col].astype(float)
    live = ~df["status"].isin(UNNUMBERED)
    slots = split_ids(df[live], ledger, instances)
    df["split_id"] = pd.array([pd.NA] * len(df), dtype="Int64")
    df.loc[live, "split_id"] = pd.array([sid for _, sid in slots], dtype="Int64")
    df["ID"] = benchmark_ids(df, ledger)
    if dups:  # a duplicate names the ID of what it copies, given in this build or before
        ided = df[df["ID"].notna()]
        ids = {u: (d, int(i)) for u, d, i in zip(ided["instance_uid"], ided["dataset"], ided["ID"])}
        ids |= {u: (r["dataset"], int(r["ID"])) for u, r in led.items() if not is_null(r["ID"]) and u not in ids}
        df.loc[list(dups), "reason"] = [duplicate_reason(o, ids) for o in dups.values()]
    df["round"] = rounds_of(df, instances)
    for col in ("rival_model", "rival_weights"):  # the imported instance's rival (null: none named)
        by_uid = dict(zip(instances["instance_uid"], instances[col])) if col in instances else {}
        df[col] = [by_uid.get(uid.split("#conflict:")[0]) for uid in df["instance_uid"]]
    return df


def rounds_of(selection: pd.DataFrame, instances: pd.DataFrame) -> pd.Series:
    """The collection round of each selection row (Int64): its imported instance's ``round`` (a
    ``rejected`` row's too, by the uid before ``#conflict:``); a row kept from the ledger whose
    source is no longer imported: 0 when released, else null (the ledger does not record rounds)."""
    by_uid = dict(zip(instances["instance_uid"], instances["round"])) if "round" in instances else {}
    out = [
        by_uid.get(uid.split("#conflict:")[0], 0 if origin == "release" else None)
        for uid, origin in zip(selection["instance_uid"], selection["origin"])
    ]
    return pd.Series(pd.array(out, dtype="Int64"), index=selection.index)


def run(params: Params) -> Metrics:
    """Stage entry point: instances + solves + flags -> selection, table1 (+ Markdown), annotator stats, plots.

    Returns the metrics: the threshold (a fraction), instances by dataset/status, Table 1 rows."""
    p = params.select
    thr = p.min_solver_jaccard
    # the ledger first: a damaged one, or one that lost a published ID, stops before any write
    ledger_path, published_path = catalog.path("id_ledger", "write"), catalog.path("published_ids", "write")
    ledger = read_ledger(ledger_path)
    published = read_published(published_path)
    check_ledger(ledger, published, fingerprints, ledger_path, published_path)
    check_history(published, published_history(Path("."), published_path), published_path)
    solves = catalog.read_table("solves")
    retired = [(e.dataset, e.ID, e.reason) for e in p.retired]
    flags = catalog.read_table("flags")
    # the ocr table exists in every `dvc repro` (ocr_filter runs first); a hand-built project without
    # one (tests, a stage run out of order) is told that the showable check did not run
    images = image_fates(catalog.read_table("ocr")) if catalog.exists("ocr") else None
    if images is None:
        print("select_instances: no ocr table: candidates were not checked for accepted images", file=sys.stderr)
    sel = select(catalog.read_table("instances"), solves, thr, p.min_solvers, ledger, retired, flags, images)
    catalog.write_table(sel, "selection")
    new_ledger = catalog.write_table(update_ledger(sel, ledger), "id_ledger")
    write_csv(published_ids(new_ledger), published_path)
    catalog.write_table(annotator_stats(sel, solves, catalog.read_table("gold_checks")), "annotator_stats")
    unshowable = int(sel["reason"].fillna("").str.startswith(UNSHOWABLE).sum())
    if unshowable:
        print(
            f"select_instances: {unshowable} instance(s) withheld: a candidate has no accepted image "
            "(`gavil query \"select cue, reason from selection where reason like 'unshowable%'\"`)",
            file=sys.stderr,
            flush=True,
        )
    t1 = catalog.write_table(table1(sel, thr), "table1")
    with atomic_path(catalog.path("table1_md", "write"), ".md") as tmp:
        tmp.write_text(table1_markdown(t1))
    plot_solver, plot_fool = distributions(sel)
    write_csv(plot_solver, catalog.path("plot_solver_jaccard", "write"))
    write_csv(plot_fool, catalog.path("plot_fool_the_ai", "write"))
    # casts: pandas-stubs types labels as Hashable; here (dataset, status) pairs and column names
    counts = cast("Iterable[tuple[tuple[str, str], int]]", sel.groupby(["dataset", "status"]).size().items())
    return {
        "min_solver_jaccard": thr,
        "by_dataset_status": {f"{d}/{s}": int(n) for (d, s), n in counts},
        "table1": cast(list[dict[str, Any]], t1.drop(columns="min_solver_jaccard").to_dict("records")),
    }

"""The permanent ID ledger of this stage (:class:`schemas.selection.IdLedger`).

Binds each ``instance_uid`` to a fingerprint of its content, keeps split IDs and benchmark IDs
permanent (never renumbered, never reused, retired ones included) and freezes a published
instance's selection row. Pure functions over tables; :mod:`stages.select_instances.stage` uses them.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any, cast

import pandas as pd

from gavil.domain.vocabulary import normalize_name
from gavil.errors import GavilError
from schemas.selection import ID_STATUSES, PUBLISHED_FIELDS, SPLITS, IdLedger

#: Fixed order of the release splits (the release numbers game_5_6, then game_10_12, then swow).
SPLIT_RANK = {name: i for i, name in enumerate(SPLITS)}
_NUM = re.compile(r"(\d+)")


def _legacy_name(name: str) -> str:
    """The name form fingerprints were made with before apostrophe, quote and hyphen variants were
    folded (NFKC, trimmed, case-folded, NFKC): ledgers written then keep matching."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).strip().casefold())


def content_fingerprint(
    dataset: str, cue: str, candidates: list[str], associations: list[str], legacy: bool = False
) -> str:
    """The sha256 (hex) an instance's ``instance_uid`` is bound to in the ID ledger.

    Over what makes an instance (paper §2: a cue, the candidate images, the associations the
    spymaster linked to it), as imported by ``import_annotations`` (released files: the
    ``cue``/``candidates``/``associations`` columns; raw, crowd and game creations: the same
    fields after :func:`gavil.domain.vocabulary.clean_cue` and name normalization), plus the dataset. Each
    name in :func:`gavil.domain.vocabulary.normalize_name` form (NFC, trimmed, case-folded), candidates and
    associations as sorted sets (their order is display order, not content), as canonical JSON
    (sorted keys, no whitespace, UTF-8). ``legacy``: with :func:`_legacy_name` instead (no
    variant folding), as ledgers written before it were.
    """
    form = _legacy_name if legacy else normalize_name

    def names(xs: list[str]) -> list[str]:
        return sorted({form(x) for x in xs})

    doc = {
        "dataset": dataset,
        "cue": form(cue),
        "candidates": names(candidates),
        "associations": names(associations),
    }
    return hashlib.sha256(
        json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    ).hexdigest()


def fingerprints(row: Mapping[str, object]) -> set[str]:
    """The fingerprints a row's content (``dataset``, ``cue``, ``candidates``, ``associations``) may
    be bound to: now, and as ledgers written before variant folding made it."""
    lists = cast("tuple[Iterable[str], Iterable[str]]", (row["candidates"], row["associations"]))
    args = (str(row["dataset"]), str(row["cue"]), list(lists[0]), list(lists[1]))
    return {content_fingerprint(*args), content_fingerprint(*args, legacy=True)}


def _natural(text: str) -> tuple[Any, ...]:
    """Sort key reading digit runs as numbers (``game_5_6`` before ``game_10_12``)."""
    return tuple(int(t) if t.isdigit() else t for t in _NUM.split(text))


def canonical_order(instances: pd.DataFrame) -> pd.DataFrame:
    """``instances`` in the order the selection numbers them, whatever their row order.

    Released rows first, then raw ones; within each by source file (digit runs as numbers:
    ``game_5_6.csv`` before ``game_10_12.csv``; batch folders by name), then released rows by
    line (the release's own order: its round trip stays byte-identical) and the others by
    instance_uid (digit runs as numbers), so shuffling a batch file's rows numbers nothing anew."""
    key = [
        (o != "release", _natural(f), int(line) if o == "release" else 0, _natural(u))
        for o, f, line, u in zip(
            instances["origin"], instances["source_file"], instances["source_line"], instances["instance_uid"]
        )
    ]
    order = sorted(range(len(key)), key=key.__getitem__)
    return instances.iloc[order].reset_index(drop=True)


def led_records(ledger: pd.DataFrame | None) -> dict[str, dict[str, Any]]:
    led = _ledger(ledger)
    records = cast(list[dict[str, Any]], led.to_dict("records"))  # stubs: Hashable keys; these are column names
    return {r["instance_uid"]: r for r in records}


def is_null(v: object) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and v != v)


def _same(a: Any, b: Any) -> bool:
    if is_null(a) or is_null(b):
        return is_null(a) and is_null(b)
    return bool(a == b)


def split_of(dataset: str, num_candidates: int) -> str:
    return "swow" if dataset == "swow_baseline" else ("game_5_6" if num_candidates in (5, 6) else "game_10_12")


def retired_uids(ledger: dict[str, dict[str, Any]], retired: Iterable[tuple[str, int, str]]) -> dict[str, str]:
    """instance_uid -> the selection reason (``retired (select.retired): <reason>``) of each retired
    (dataset, ID, reason). Raises GavilError for an ID the ledger never published."""
    by_id = {(r["dataset"], int(r["ID"])): u for u, r in ledger.items() if not is_null(r["ID"])}
    out = {}
    for dataset, id_, reason in retired:
        uid = by_id.get((dataset, int(id_)))
        if uid is None:
            raise GavilError(
                f"select.retired: {dataset} ID {id_} was never published (it is not in the ID ledger "
                "data/ledger/benchmark_ids.parquet): fix the entry's dataset or ID, or remove it"
            )
        out[uid] = f"retired (select.retired): {reason}"
    return out


def published_row(
    old: dict[str, Any],
    now: dict[str, Any],
    given: dict[str, list[str]],
    retired: str | None,
    min_solver_jaccard: float,
    note: str = "",
) -> dict[str, Any]:
    """The selection row of a published instance: its ledger row, frozen (answers beyond the
    counted ones are ``late_answers``; imported values that differ from the published ones, and
    a threshold raised above its published mean, are named in the reason, never applied).
    ``retired``: why it is out of the benchmark (``select.retired``, or held by players' flags:
    :mod:`stages.select_instances.flags`): status ``retired``, the reason first; its ID stays."""
    counted = set(old["solvers"]) if isinstance(old["solvers"], list) else set()
    late = sum(s not in counted for s in given)
    notes = [note] if note else []
    if old["solvers_jaccard_mean"] < min_solver_jaccard:
        notes.append(
            f"published before the threshold rose: solver mean {old['solvers_jaccard_mean']} < {min_solver_jaccard}"
        )
    frozen = ("cue", "score_fool_the_ai", "images_source", "annotation_index")
    differs: list[str] = [f for f in frozen if f in now and not _same(now[f], old[f])]
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
        return row | {"status": "retired", "reason": "; ".join([retired, *notes])}
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
        else [split_of(d, n) for d, n in zip(rows["dataset"], rows["num_candidates"])]
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
        elif not is_null(given):
            out.append(int(given))
        else:
            out.append(next_id.get(dataset, 0))
            next_id[dataset] = next_id.get(dataset, 0) + 1
    return pd.Series(pd.array(out, dtype="Int64"), index=selection.index)


def update_ledger(selection: pd.DataFrame, ledger: pd.DataFrame | None = None) -> pd.DataFrame:
    """The ledger after this build (:class:`schemas.selection.IdLedger`).

    Published rows (with an ``ID``) never change. An unpublished row takes this build's values
    (and its ``ID`` when first selected: from then on frozen). A new instance is added with its
    content fingerprint. Rejected rows (content conflicting with the ledger) and duplicates
    (:mod:`stages.select_instances.identity`) add nothing.
    Nothing is removed. Sorted by split and split_id (bytes independent of input order)."""
    led = led_records(ledger)
    cols = list(IdLedger.to_schema().columns)
    for r in selection[~selection["status"].isin(["rejected", "duplicate"])].to_dict("records"):
        old = led.get(r["instance_uid"])
        if old is not None and (not is_null(old["ID"]) or old["fingerprint"] != r["fingerprint"]):
            continue
        led[r["instance_uid"]] = {c: r[c] for c in cols}
    rows = sorted(led.values(), key=lambda r: (SPLIT_RANK[r["split"]], int(r["split_id"])))
    out = pd.DataFrame(rows, columns=cols)
    out["split_id"] = out["split_id"].astype(int)
    for col in ("ID", "score_fool_the_ai", "annotation_index", "n_solvers"):
        out[col] = out[col].astype("Int64")
    return out

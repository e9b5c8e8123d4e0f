"""The collection game's store (``<game.store_dir>/game.sqlite``, :mod:`gavil.gamestore.store`) as an
annotation source: its creations and solves are fed, as raw records, to the same validation as
raw batches (:mod:`stages.import_annotations.raw`: cue, N, K, two-cue tasks, duplicates, no
self-solve) and player ids are hashed with the same annotator key. Rejects name the store file
with ``#creations`` / ``#solves`` and the row's sequence number as the line. Players' flags and
their reviews become the ``flags`` table (:func:`flag_rows`). A player who withdrew consent
(:mod:`gavil.domain.consent`): their answers are rejected with the reason (:func:`drop_withdrawn`),
their creations carry it in the ``withdrawn`` column (:func:`withdrawn_column`), for
``select_instances`` to decide (published ones stay).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from gavil.domain.consent import withdrawn_reason
from gavil.domain.flags import reports_hold
from gavil.domain.privacy import hash_annotator
from gavil.gamestore.consent import read_withdrawals
from gavil.gamestore.store import read_submissions
from stages.import_annotations.gold import GoldCheck, checked_solves
from stages.import_annotations.raw import import_creation_records, import_solve_records
from stages.import_annotations.records import ImportState, Records


def _records(rows: list[dict], fields: tuple[str, ...]) -> Records:
    for r in rows:
        yield r["seq"], {f: r[f] for f in fields}, None


CREATION_FIELDS = (
    "instance_id",
    "task_id",
    "spymaster_id",
    "cue",
    "candidates",
    "associations",
    "score_fool_the_ai",
    "images_source",
    "round",
    "rival_model",
    "rival_weights",
)
SOLVE_FIELDS = ("instance_id", "solver_id", "selection")


def read_game(path: Path) -> tuple[list[dict], list[dict]]:
    """(creations, solves) of the store (see :func:`gavil.gamestore.store.read_submissions`).

    Raises:
        gavil.gamestore.store.GameStoreError: the store is empty (0 bytes), not SQLite, damaged,
            foreign, newer, or has a malformed row (one line naming the store and the row).
    """
    return read_submissions(path)


def store_metrics(path: Path | None, creations: list[dict], solves: list[dict]) -> dict[str, object]:
    """What the import found in the store, so a partial store is never a silent 0.

    ``state``: ``absent`` (no file: no game was played), ``empty`` (the game's tables, no row) or
    ``read``; ``creations_without_solves``: creations no solve answers yet (a counted warning:
    they are imported, and select_instances needs solves to keep them).
    """
    if path is None or not path.is_file():
        return {"state": "absent", "creations_without_solves": 0}
    answered = {s["instance_id"] for s in solves}
    return {
        "state": "read" if creations or solves else "empty",
        "creations_without_solves": sum(c["instance_id"] not in answered for c in creations),
    }


def import_game_creations(path: Path, creations: list[dict], state: ImportState) -> int:
    """Import the store's creations (instance origin ``raw``, images_source ``random``); returns
    how many creations had a random-weights (untrained) fool-the-AI score, imported as null."""
    name = f"{path.as_posix()}#creations"
    state.read[name] = import_creation_records(name, _records(creations, CREATION_FIELDS), state)
    return sum(r["rival_status"] == "untrained" for r in creations)


def import_game_solves(
    path: Path,
    solves: list[dict],
    state: ImportState,
    gold: GoldCheck | None = None,
    excluded: dict[str, int] | None = None,
) -> None:
    """Import the store's solves (after every creation, batches' included); with the gold check on
    (``gold``: params, the solvers' gold timeline and the store's ``gold_since``), answers given
    while their solver did not count are rejected with the reason instead
    (:func:`stages.import_annotations.gold.checked_solves`; counted per hashed solver in ``excluded``)."""
    name = f"{path.as_posix()}#solves"
    records = (
        checked_solves(
            name,
            solves,
            SOLVE_FIELDS,
            gold.timeline,
            gold.p,
            gold.since,
            state,
            excluded if excluded is not None else {},
        )
        if gold is not None
        else _records(solves, SOLVE_FIELDS)
    )
    state.read[name] = import_solve_records(name, records, state)


def flag_rows(
    path: Path, creations: list[dict], state: ImportState, counting: set[str] | None, min_reporters: int
) -> tuple[list[dict], int]:
    """The ``flags`` table's rows (:class:`schemas.annotations.Flags`): every flag of a creation
    this import accepted from the store (``instance_uid`` ``raw:<instance_id>``), by ``flag_id``,
    the player's id hashed with the annotator key; and how many flags were left out because
    their creation was rejected (their instance is in no table: nothing to hold back).

    Each row keeps the flag's state under the review rule (:mod:`gavil.domain.flags`) and the
    covering review's decision, note, reviewer and time (null while open), its ``weight`` (its
    reporter counts: in ``counting``, the hashed solvers who passed the gold check; ``None``: gold
    checks off, every reporter) and ``holds`` (open, and the association's open reports of weight
    reach :func:`gavil.domain.flags.reports_hold`: it holds an unpublished instance out of a release).
    """
    name = f"{path.as_posix()}#creations"
    rows, dropped = [], 0
    for c in creations:
        uid = f"raw:{c['instance_id']}"
        mine = state.by_uid.get(uid)
        if mine is None or mine["source_file"] != name:
            dropped += len(c["flags"])
            continue
        players = {f["flag_id"]: hash_annotator(f["player_id"], state.key) for f in c["flags"]}
        weight = {i: counting is None or h in counting for i, h in players.items()}
        open_ = {players[f["flag_id"]] for f in c["flags"] if f["state"] == "open" and weight[f["flag_id"]]}
        holds = reports_hold(len(open_), counting is not None, min_reporters)
        for f in c["flags"]:
            rows.append(
                {
                    "instance_uid": uid,
                    "flag_id": f["flag_id"],
                    "player": players[f["flag_id"]],
                    "category": f["category"],
                    "reason": f["reason"],
                    "flagged_at": f["created_at"],
                    "state": f["state"],
                    "decision": f["decision"],
                    "review_note": f["note"],
                    "reviewer": f["reviewer"],
                    "reviewed_at": f["reviewed_at"],
                    "source_file": f"{path.as_posix()}#flags",
                    "weight": weight[f["flag_id"]],
                    "holds": holds and f["state"] == "open" and weight[f["flag_id"]],
                }
            )
    return sorted(rows, key=lambda r: r["flag_id"]), dropped


def withdrawn_players(path: Path | None, key: bytes) -> dict[str, float]:
    """Hashed player id -> when they withdrew consent (Unix seconds), of the store at ``path``
    (:func:`gavil.gamestore.consent.read_withdrawals`); empty without a store."""
    if path is None:
        return {}
    return {hash_annotator(pid, key): t for pid, t in read_withdrawals(path).items()}


def drop_withdrawn(
    path: Path, solves: list[dict], withdrawn: dict[str, float], state: ImportState
) -> tuple[list[dict], int]:
    """The store's solves less those of players who withdrew consent (hashed ids in ``withdrawn``),
    and how many were dropped. Each dropped answer is a reject (``#solves``, its ``seq``, reason
    :func:`gavil.domain.consent.withdrawn_reason`) that keeps only the instance and the hashed
    solver, never the answer itself; counted in the file's ``rows_read``."""
    name = f"{path.as_posix()}#solves"
    kept, dropped = [], 0
    for r in solves:
        when = withdrawn.get(hash_annotator(r["solver_id"], state.key)) if withdrawn else None
        if when is None:
            kept.append(r)
            continue
        dropped += 1
        state.reject(name, r["seq"], "solve", withdrawn_reason(when), {k: r[k] for k in ("instance_id", "solver_id")})
    if dropped:
        state.read[name] = state.read.get(name, 0) + dropped
    return kept, dropped


def withdrawn_column(
    path: Path | None, source_files: Iterable[str], spymasters: Iterable[object], withdrawn: dict[str, float]
) -> list[str | None]:
    """The ``withdrawn`` column of the instances table: for a creation of the store at ``path``
    whose (hashed) spymaster withdrew consent, :func:`gavil.domain.consent.withdrawn_reason`; else None."""
    name = f"{path.as_posix()}#creations" if path is not None else None
    return [
        withdrawn_reason(withdrawn[s]) if f == name and isinstance(s, str) and s in withdrawn else None
        for f, s in zip(source_files, spymasters)
    ]


def withdrawals(path: Path | None, solves: list[dict], state: ImportState) -> tuple[list[dict], dict[str, float], int]:
    """The store's withdrawn players applied to its ``solves``: (the solves kept, hashed player id
    -> withdrawal time of :func:`withdrawn_players`, how many solves :func:`drop_withdrawn` rejected)."""
    withdrawn = withdrawn_players(path, state.key)
    if path is None or not withdrawn:
        return solves, withdrawn, 0
    kept, dropped = drop_withdrawn(path, solves, withdrawn, state)
    return kept, withdrawn, dropped


def consent_metrics(withdrawn: dict[str, float], column: pd.Series, dropped: int) -> dict[str, int]:
    """The import's ``consent`` metrics: players who withdrew, their creations (marked in the
    instances' ``withdrawn`` ``column``) and their answers rejected."""
    return {
        "players_withdrawn": len(withdrawn),
        "creations_of_withdrawn": int(column.notna().sum()),
        "solves_dropped": dropped,
    }

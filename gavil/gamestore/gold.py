"""The gold tables of the game's store (schema version 5, :mod:`gavil.gamestore.store`; solver
checks, ``game.gold``; docs/dynamic.md "Solver checks (gold items)"): what is stored as a gold item
(:func:`gold_items`, :func:`store_gold`) and the tables read back for ``import_annotations``
(:func:`read_gold`). SQL only: serving gold items to players is :mod:`gavil.game.gold`; who counts
(the gold check) is :mod:`gavil.domain.gold`.

A **gold item** is a published instance (a ``selection`` row with status ``selected``: released
or collected, with its spymaster's associations) whose every candidate has an accepted image
(:func:`gold_items`).

- ``gold_items(gold_id, instance_id, source_uid, creation_id, cue, candidates, associations,
  images, active, added_at)``: ``gold_id`` is ``<dataset>:<ID>`` (the permanent benchmark ID);
  ``instance_id`` the id players are shown; ``source_uid`` the selection's ``instance_uid``;
  ``creation_id`` the store's creation it was published from (null: released, or a batch's);
  ``candidates``/``associations`` JSON lists of names, ``images`` their sha256 in candidate order;
  ``active`` 0 once the item is no longer published or servable (its answers still count).
- ``gold_leases(lease_id, gold_id, solver_id, issued_at, expires_at)``: served gold work, like
  ``leases`` (an answer consumes it in the same transaction; it expires after ``game.lease_s``).
- ``gold_answers(seq, gold_id, solver_id, selection, jaccard, created_at, lease_id)``: ``jaccard``
  a fraction against the gold item's associations.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import pandas as pd

from gavil.gamestore.store import check_store_path, json_cell, read_snapshot, transaction


class GoldRecord(TypedDict):
    """A stored gold item as :func:`read_gold` returns it."""

    gold_id: str
    source_uid: str
    cue: str
    candidates: object  # a JSON value as stored; the import checks it is a list of names
    associations: object  # likewise


class GoldAnswer(TypedDict):
    """A stored gold answer as :func:`read_gold` returns it (``solver_id`` as stored: not yet hashed)."""

    seq: int
    gold_id: str
    solver_id: str
    selection: object  # a JSON list as stored; the import checks its shape
    created_at: float  # Unix seconds: when it was answered (the import orders a solver's answers by it)


@dataclass(frozen=True)
class GoldItem:
    """One published instance servable as a gold item (names in candidate order, one image each)."""

    gold_id: str  # "<dataset>:<ID>"
    source_uid: str  # the selection's instance_uid
    cue: str
    candidates: tuple[str, ...]
    associations: tuple[str, ...]
    images: tuple[str, ...]  # sha256 of each candidate's accepted image

    @property
    def creation_id(self) -> str | None:
        """The game creation it was published from (``raw:<instance_id>`` uids), else None."""
        return self.source_uid[4:] if self.source_uid.startswith("raw:") else None


def gold_items(selection: pd.DataFrame, images: dict[str, tuple[str, str]]) -> list[GoldItem]:
    """The published instances of ``selection`` (:class:`schemas.selection.Selection`: status
    ``selected``) whose every candidate has an accepted image in ``images`` (concept -> (sha256,
    path), :func:`schemas.ocr.accepted_images`), by dataset and ID."""
    sel = selection[selection["status"] == "selected"].sort_values(["dataset", "ID"])
    out = []
    for uid, ds, iid, cue, cands, assoc in zip(
        sel["instance_uid"], sel["dataset"], sel["ID"], sel["cue"], sel["candidates"], sel["associations"]
    ):
        if all(c in images for c in cands):
            shas = tuple(images[c][0] for c in cands)
            out.append(GoldItem(f"{ds}:{int(iid)}", str(uid), str(cue), tuple(cands), tuple(assoc), shas))
    return out


def store_gold(db: sqlite3.Connection, items: Sequence[GoldItem], now: float) -> int:
    """Make ``items`` the active gold items (new ones added with a fresh serving id; every other
    stored one deactivated, its answers kept; a stored item whose content differs stays inactive).
    Returns how many are active."""
    with transaction(db):
        db.execute("UPDATE gold_items SET active = 0")
        for it in items:
            cands, assoc = (json.dumps(list(v), ensure_ascii=False) for v in (it.candidates, it.associations))
            shas = json.dumps(list(it.images))
            old = db.execute("SELECT cue, candidates, associations FROM gold_items WHERE gold_id = ?", (it.gold_id,))
            row = old.fetchone()
            if row is None:
                serve_id = "g_" + secrets.token_hex(8)  # shaped like a creation's instance_id
                db.execute(
                    "INSERT INTO gold_items VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?)",
                    (it.gold_id, serve_id, it.source_uid, it.creation_id, it.cue, cands, assoc, shas, now),
                )
            elif tuple(row) == (it.cue, cands, assoc):
                db.execute("UPDATE gold_items SET active = 1, images = ? WHERE gold_id = ?", (shas, it.gold_id))
        return int(db.execute("SELECT COUNT(*) FROM gold_items WHERE active = 1").fetchone()[0])


def read_gold(path: str | Path) -> tuple[list[GoldRecord], list[GoldAnswer]]:
    """(gold items, gold answers) of a store, read-only in one snapshot; two empty lists when
    nothing is at ``path`` or the store predates version 5. Call it after
    :func:`gavil.gamestore.store.read_submissions`, which checks the store's integrity and version.

    Items: ``gold_id``, ``source_uid``, ``cue``, ``candidates``, ``associations`` (lists). Answers
    (store order): ``seq``, ``gold_id``, ``solver_id`` (as stored), ``selection`` (a list), ``created_at``.

    Raises:
        gavil.gamestore.store.GameStoreError: SQLite cannot read it, or a list cell is not JSON text.
    """
    path = Path(path)
    if not check_store_path(path):
        return [], []
    with read_snapshot(path) as con:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"gold_items", "gold_answers"} <= tables:
            return [], []
        items: list[GoldRecord] = [
            {
                "gold_id": r["gold_id"],
                "source_uid": r["source_uid"],
                "cue": r["cue"],
                "candidates": json_cell(path, "gold_items", r["gold_id"], "candidates", r["candidates"]),
                "associations": json_cell(path, "gold_items", r["gold_id"], "associations", r["associations"]),
            }
            for r in con.execute("SELECT * FROM gold_items ORDER BY gold_id")
        ]
        answers: list[GoldAnswer] = [
            {
                "seq": r["seq"],
                "gold_id": r["gold_id"],
                "solver_id": r["solver_id"],
                "selection": json_cell(path, "gold_answers", f"seq {r['seq']}", "selection", r["selection"]),
                "created_at": float(r["created_at"]),
            }
            for r in con.execute("SELECT seq, gold_id, solver_id, selection, created_at FROM gold_answers ORDER BY seq")
        ]
        return items, answers


def read_gold_since(path: str | Path) -> float | None:
    """Since when (Unix seconds) the game checks its solvers (the ``gold_since`` setting the game
    writes when it starts with ``game.gold.enabled``), or None: never, or nothing at ``path``.
    Answers given before it were given unchecked."""
    path = Path(path)
    if not check_store_path(path):
        return None
    with read_snapshot(path) as con:
        row = con.execute("SELECT value FROM settings WHERE key = 'gold_since'").fetchone()
        try:
            return None if row is None else float(row[0])
        except ValueError:
            return None

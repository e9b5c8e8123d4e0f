"""What the game's admin endpoints read: every submission, flag, consent and withdrawal with hashed player ids, and the
store as a raw annotation batch (:meth:`gavil.game.service.Game.submissions`, :meth:`~gavil.game.service.Game.export`)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from gavil.domain.consent import utc_iso
from gavil.domain.privacy import hash_annotator
from gavil.gamestore.consent import read_consents
from gavil.gamestore.review import FlagRecord, read_flags
from gavil.gamestore.store import read_snapshot, read_submissions

#: Rows by table name (``creations``, ``solves``, ``flags``), each row a JSON-ready dict.
Records = dict[str, list[dict[str, object]]]


def submissions(db: sqlite3.Connection, key: bytes) -> Records:
    """Every creation and solve of the store ``db``, player ids replaced by their keyed hashes (as
    the import does)."""

    def h(pid: str) -> str:
        return hash_annotator(pid, key)

    creations = [
        {**{k: r[k] for k in r.keys() if k != "spymaster_id"}, "spymaster": h(r["spymaster_id"])}
        for r in db.execute("SELECT * FROM creations ORDER BY seq")
    ]
    solves = [
        {**{k: r[k] for k in r.keys() if k != "solver_id"}, "solver": h(r["solver_id"])}
        for r in db.execute("SELECT * FROM solves ORDER BY seq")
    ]
    return {
        "creations": creations,
        "solves": solves,
        "flags": flag_records(read_flags(db), key),
        **consent_records(db, key),
    }


def consent_records(db: sqlite3.Connection, key: bytes) -> Records:
    """``consents`` (each acceptance: ``player``, ``version`` = the sha256 of the text accepted,
    ``accepted_at`` Unix seconds and ``accepted_at_utc`` ISO 8601) and ``withdrawals`` (``player``,
    ``withdrawn_at``, ``withdrawn_at_utc``, ``last_version``, ``leases_released``) of the store ``db``
    (:func:`gavil.gamestore.consent.read_consents`), player ids replaced by their keyed hashes."""
    consents, withdrawals = read_consents(db)
    return {
        "consents": [
            {
                "player": hash_annotator(c["player_id"], key),
                "version": c["version"],
                "accepted_at": c["accepted_at"],
                "accepted_at_utc": utc_iso(c["accepted_at"]),
            }
            for c in consents
        ],
        "withdrawals": [
            {
                "player": hash_annotator(w["player_id"], key),
                "withdrawn_at": w["withdrawn_at"],
                "withdrawn_at_utc": utc_iso(w["withdrawn_at"]),
                "last_version": w["last_version"],
                "leases_released": w["leases_released"],
            }
            for w in withdrawals
        ],
    }


def flag_records(flags: dict[str, list[FlagRecord]], key: bytes) -> list[dict[str, object]]:
    """Every flag with its review (:class:`gavil.gamestore.review.FlagRecord`), by ``flag_id``, the
    player's id replaced by its keyed hash (``player``)."""
    rows = sorted((f for fs in flags.values() for f in fs), key=lambda f: f["flag_id"])
    return [
        {**{k: v for k, v in f.items() if k != "player_id"}, "player": hash_annotator(f["player_id"], key)}
        for f in rows
    ]


def export(store: Path, key: bytes) -> Records:
    """The store as a raw annotation batch (:class:`schemas.raw.RawCreation` and
    :class:`schemas.raw.RawSolve` records; ids are the keyed hashes, fool-the-AI null unless a
    trained rival scored it; ``round`` the creation's collection round, 0 for rows without one): what
    ``import_annotations`` reads, shareable without player ids; and ``flags``, every player's flag
    with its review (:func:`flag_records`); and the players' ``consents`` and ``withdrawals``
    (:func:`consent_records`: which version of the consent text each player accepted and when, who
    withdrew and when), so whoever imports the batch honours a withdrawal."""
    creations, solves = read_submissions(store)
    with read_snapshot(store) as con:
        consent = consent_records(con, key)

    def h(pid: str) -> str:
        return hash_annotator(pid, key)

    fields = (
        "instance_id",
        "task_id",
        "cue",
        "candidates",
        "associations",
        "score_fool_the_ai",
        "images_source",
        "round",
    )
    return {
        "creations": [
            {**{k: c[k] for k in fields}, "round": c["round"] or 0, "spymaster_id": h(c["spymaster_id"])}
            for c in creations
        ],
        "solves": [
            {"instance_id": r["instance_id"], "solver_id": h(r["solver_id"]), "selection": r["selection"]}
            for r in solves
        ],
        "flags": flag_records({c["instance_id"]: c["flags"] for c in creations}, key),
        **consent,
    }

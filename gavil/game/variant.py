"""The ``swow_af`` variant served as solve tasks (``game.serve_af_variant``): its instances stored as
creations of a pseudo-player nobody can sign in as (:data:`VARIANT_SPYMASTER`)."""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from gavil.domain.vocabulary import name_key, normalize_name

#: the spymaster of served ``swow_af`` instances (a player row nobody can sign in as)
VARIANT_SPYMASTER = "variant:swow_af"


@dataclass(frozen=True)
class VariantInstance:
    """An instance of the ``swow_af`` variant (``af_instances``) served as a solve task."""

    instance_id: str
    cue: str
    candidates: tuple[str, ...]  # concept names, the variant's candidate order
    associations: tuple[str, ...]
    shas: tuple[str, ...]  # the accepted image of each candidate


def store_variant(
    db: sqlite3.Connection, instances: Sequence[VariantInstance], now: float, by_name: dict[str, str], images: set[str]
) -> int:
    """Store ``instances`` in the game database ``db`` (inside the caller's transaction) as creations of
    :data:`VARIANT_SPYMASTER` at time ``now`` (seconds); ``by_name`` (concept -> image sha256) and
    ``images`` (servable shas) are updated in place. Idempotent. Returns how many were added
    (:meth:`gavil.game.service.Game.serve_variant`)."""
    added = 0
    db.execute(
        "INSERT OR IGNORE INTO players (player_id, token_hash, display_name, name_key, created_at, look_key)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (
            VARIANT_SPYMASTER,
            _sha(secrets.token_urlsafe(32)),
            "swow_af variant",
            VARIANT_SPYMASTER,
            now,
            VARIANT_SPYMASTER,
        ),
    )
    for v in instances:
        by_name |= dict(zip(v.candidates, v.shas))
        images |= set(v.shas)
        tid = f"{VARIANT_SPYMASTER}:{v.instance_id}"
        cands = json.dumps(list(v.candidates), ensure_ascii=False)
        if db.execute("SELECT 1 FROM creations WHERE instance_id = ?", (v.instance_id,)).fetchone():
            continue
        db.execute("INSERT OR IGNORE INTO tasks VALUES (?, ?, ?, ?, ?)", (tid, tid, VARIANT_SPYMASTER, cands, now))
        content = json.dumps([name_key(v.cue), sorted(name_key(c) for c in v.candidates)], ensure_ascii=False)
        db.execute(
            "INSERT OR IGNORE INTO creations (instance_id, task_id, spymaster_id, cue, cue_norm, content_key,"
            " candidates, associations, rival_status, rival_predictions, score_fool_the_ai, created_at,"
            " rival_state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'no_weights', NULL, NULL, ?, 'done')",
            (
                v.instance_id,
                tid,
                VARIANT_SPYMASTER,
                v.cue,
                name_key(v.cue),
                content,
                cands,
                json.dumps([normalize_name(a) for a in v.associations], ensure_ascii=False),
                now,
            ),
        )
        added += 1

    return added


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()

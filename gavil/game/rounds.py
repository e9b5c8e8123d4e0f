"""Collection rounds (``gavil round open|close|list``; docs/dynamic.md): the ``rounds`` table of
the game's store (:mod:`gavil.gamestore.store`, schema version 4).

A round is collected against one rival, a ``models:`` entry (``open_clip``) named when the round
is opened; its architecture, pretrained tag and sha256 pin are recorded then, so a later change of
that entry in ``params.yaml`` is caught when the game starts (:func:`check_rival`). Rounds are
numbered from 1 (round 0 is the released WinoGAViL data, collected against the paper's rival); at
most one is open. The game serves the round open when it starts and refuses new associations when
none is open (:class:`gavil.game.service.Game`). Times are Unix seconds (float).
"""

from __future__ import annotations

import sqlite3
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from gavil.errors import GavilError
from gavil.gamestore.store import check_store_path, connect, read_submissions, transaction
from gavil.params import Params

#: What players read when a creation is refused for want of an open round (no operator instruction).
NO_ROUND = "new associations are not being collected right now; you can still solve other players' associations"
#: What the server's console says then (the operator's fix).
NO_ROUND_CONSOLE = (
    "no collection round is open: creations are refused; open one (`gavil round open --rival NAME`), then restart"
)


class RoundError(GavilError):
    """A round cannot be opened, closed or served as asked; the message is one line with the fix."""


@dataclass(frozen=True)
class Round:
    """One row of ``rounds`` (``rival`` and its identity are null for the round a migration made of
    a pre-round store's creations), with its counts when read by :func:`list_rounds`: ``creations``
    (the round's associations) and ``solves`` (answers to them, whenever given)."""

    round_id: int
    rival: str | None
    architecture: str | None
    pretrained: str | None
    weights_sha256: str | None
    opened_at: float
    closed_at: float | None
    creations: int = 0
    solves: int = 0

    @property
    def is_open(self) -> bool:
        """Whether the round takes new associations (not closed)."""
        return self.closed_at is None

    def rival_label(self) -> str:
        """``entry (architecture / pretrained tag or file sha256)``, or ``(not recorded)``."""
        if self.rival is None:
            return "(not recorded)"
        weights = self.pretrained or (f"sha256 {self.weights_sha256[:16]}" if self.weights_sha256 else "random weights")
        return f"{self.rival} ({self.architecture} / {weights})"


_COLUMNS = "round_id, rival, architecture, pretrained, weights_sha256, opened_at, closed_at"


def _row(r: sqlite3.Row | tuple[object, ...], creations: int = 0, solves: int = 0) -> Round:
    rid, rival, arch, tag, sha, opened, closed = tuple(r)
    return Round(
        int(rid), rival, arch, tag, sha, float(opened), None if closed is None else float(closed), creations, solves
    )


def current_round(con: sqlite3.Connection) -> Round | None:
    """The open round of the store ``con`` (schema version 4), or None."""
    r = con.execute(f"SELECT {_COLUMNS} FROM rounds WHERE closed_at IS NULL").fetchone()
    return None if r is None else _row(r)


def still_open(con: sqlite3.Connection, served: Round | None) -> int | None:
    """The id of round ``served`` (the one a game server collects) if it is still the store's open
    round; else None, after printing the operator's reason and fix on stderr (no round is open, or
    another one is: restart ``gavil game``)."""
    now = current_round(con)
    if served is not None and now is not None and now.round_id == served.round_id:
        return now.round_id
    collects = "no round" if served is None else f"round {served.round_id}"
    why = (
        NO_ROUND_CONSOLE
        if now is None
        else f"round {now.round_id} is open but this server collects {collects}: restart `gavil game`"
    )
    print(f"game: creation refused: {why}", file=sys.stderr)
    return None


def round_state(con: sqlite3.Connection, served: Round | None) -> dict[str, int | list[int] | None]:
    """What ``GET /api/status`` says of rounds, read from the store ``con`` at each call, so a
    ``gavil round close`` or ``open`` in another process shows without a restart. Reads only; prints
    nothing.

    Returns:
        ``round``: the id of ``served`` (the round this server collects) while it is still the
        store's open round, else None (closed, or another round opened: :func:`still_open` refuses
        creations then); ``open_round``: the store's open round or None (after ``gavil round open``
        it differs from ``round`` until ``gavil game`` restarts and loads that round's rival);
        ``rounds``: every round id of the store, oldest first, closed ones included.
    """
    now = current_round(con)
    ids = [int(r[0]) for r in con.execute("SELECT round_id FROM rounds ORDER BY round_id")]
    same = served is not None and now is not None and now.round_id == served.round_id
    return {
        "round": served.round_id if same and served is not None else None,
        "open_round": None if now is None else now.round_id,
        "rounds": ids,
    }


def _rival_entry(params: Params, rival: str) -> tuple[str, str | None, str | None]:
    """(architecture, pretrained tag, sha256 pin) of the ``models:`` entry ``rival``.

    Raises:
        RoundError: no such entry, or not an ``open_clip`` entry (the game's rival embeds images).
    """
    models = params.models.root
    entry = models.get(rival)
    if entry is None or entry.kind != "open_clip":
        names = ", ".join(n for n, e in models.items() if e.kind == "open_clip")
        raise RoundError(f"no open_clip entry {rival!r} in params.yaml models: (open_clip entries: {names}); name one")
    return entry.model, entry.pretrained, entry.sha256


def open_round(store: str | Path, params: Params, rival: str, now: float | None = None) -> Round:
    """Open the next round (the highest id so far + 1, or 1) against the ``models:`` entry
    ``rival``, recording its architecture, pretrained tag and sha256 pin. The store is created or
    migrated when needed. A running game keeps serving the round it started with: restart it.

    Raises:
        RoundError: a round is already open, or ``rival`` is not an ``open_clip`` entry of ``models:``.
    """
    arch, tag, pin = _rival_entry(params, rival)
    con = connect(store)
    try:
        with transaction(con) as db:
            if (r := current_round(db)) is not None:
                raise RoundError(f"round {r.round_id} is open (rival {r.rival}): close it first (`gavil round close`)")
            next_id = int(db.execute("SELECT COALESCE(MAX(round_id), 0) + 1 FROM rounds").fetchone()[0])
            db.execute(
                f"INSERT INTO rounds ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, NULL)",
                (next_id, rival, arch, tag, pin, time.time() if now is None else now),
            )
            out = current_round(db)
    finally:
        con.close()
    assert out is not None
    return out


def close_round(store: str | Path, now: float | None = None) -> Round:
    """Close the open round: the game refuses new associations until the next is opened (solves of
    the round's associations go on). Returns the closed round.

    Raises:
        RoundError: no round is open.
    """
    con = connect(store)
    try:
        with transaction(con) as db:
            r = current_round(db)
            if r is None:
                raise RoundError("no round is open: open one with `gavil round open --rival NAME`")
            at = max(r.opened_at, time.time() if now is None else now)
            db.execute("UPDATE rounds SET closed_at = ? WHERE round_id = ?", (at, r.round_id))
    finally:
        con.close()
    return Round(**{**r.__dict__, "closed_at": at})


def list_rounds(store: str | Path) -> list[Round]:
    """Every round of the store, oldest first, with its counts of creations and solves (the store is
    read, never written: an older store is read as it is, its round-less creations counted in no
    round). No store: an empty list.

    Raises:
        GameStoreError: the store cannot be read (:func:`gavil.gamestore.store.read_submissions`).
    """
    store = Path(store)
    if not check_store_path(store):
        return []
    creations, solves = read_submissions(store)
    round_of = {c["instance_id"]: c["round"] for c in creations}
    made: dict[int, int] = {}
    solved: dict[int, int] = {}
    for c in creations:
        if c["round"] is not None:
            made[c["round"]] = made.get(c["round"], 0) + 1
    for s in solves:
        if (rid := round_of.get(s["instance_id"])) is not None:
            solved[rid] = solved.get(rid, 0) + 1
    con = connect(store, create=False)
    try:
        if not con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'rounds'").fetchone():
            return []
        rows = con.execute(f"SELECT {_COLUMNS} FROM rounds ORDER BY round_id").fetchall()
    finally:
        con.close()
    return [_row(r, made.get(r[0], 0), solved.get(r[0], 0)) for r in rows]


def check_rival(r: Round, params: Params) -> None:
    """Raise unless the ``models:`` entry of round ``r``'s rival is what it was when the round was
    opened (architecture, pretrained tag, sha256 pin): a round is collected against one rival.

    Raises:
        RoundError: the entry is gone or changed.
    """
    assert r.rival is not None
    fix = "restore it in params.yaml, or close the round and open a new one (`gavil round close`, `gavil round open`)"
    try:
        now = _rival_entry(params, r.rival)
    except RoundError:
        raise RoundError(
            f"round {r.round_id}'s rival {r.rival!r} is no open_clip entry of models: now; {fix}"
        ) from None
    if now != (r.architecture, r.pretrained, r.weights_sha256):
        raise RoundError(
            f"round {r.round_id}'s rival {r.rival!r} was {r.architecture}/{r.pretrained}/{r.weights_sha256} when "
            f"opened, params.yaml now says {now[0]}/{now[1]}/{now[2]}; {fix}"
        )


def propose_rival(params: Params, evaluation: pd.DataFrame | None) -> tuple[str, float] | None:
    """The best rival for the next round: of the ``open_clip`` entries in ``evaluate.models``, the one
    with the highest mean Jaccard x100 on the game benchmark over every round so far (the
    ``evaluation`` table's rows with ``round`` -1, breakdown ``all``; trained weights only), with
    that mean; None when no such model was scored (no table yet, no weights).

    Args:
        evaluation: the ``evaluation`` table (:class:`schemas.evaluate.Evaluation`), or None.
    """
    if evaluation is None or evaluation.empty:
        return None
    models = params.models.root
    clip = [m for m in params.evaluate.models if m in models and models[m].kind == "open_clip"]
    ev = evaluation
    if "round" in ev:
        ev = ev[ev["round"] == -1]
    ev = ev[
        (ev["dataset"] == "game")
        & (ev["breakdown"] == "all")
        & ev["model_name"].isin(clip)
        & ~ev["untrained"].astype(bool)
        & ev["mean_jaccard_percent"].notna()
    ]
    if ev.empty:
        return None
    best = ev.sort_values(["mean_jaccard_percent", "model_name"], ascending=[False, True]).iloc[0]
    return str(best["model_name"]), float(best["mean_jaccard_percent"])

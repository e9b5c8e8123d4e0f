"""The game's rules, independent of HTTP: joining, creation tasks, solve assignment, scores.

Inputs are validated with the import's rules (:func:`stages.domain.clean_cue`, K within
:data:`stages.domain.K_LIMITS`, distinct candidates of the set; the profanity filter refuses a
cue the import would flag), so whatever the game stores, ``import_annotations`` accepts. Players
pick images by position; names never travel to the browser.

Solve assignment (so instances finish rather than trickle): among associations the player did
not create and has not answered, those still short of ``select.min_solvers`` answers counting
open leases (work handed out in the last :data:`LEASE_S` seconds) come first, the closest to
done first, then the oldest; a player keeps their own open lease until they answer.

Errors are :class:`GameError` with an HTTP status and a sentence the page shows.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Any

from stages._config_game import GameParams
from stages._game.rival import Rival
from stages._game_store import checkpoint, connect, read_submissions, transaction
from stages._privacy import hash_annotator
from stages.domain import K_LIMITS, clean_cue, normalize_name
from stages.names import NameError_, clean_display_name
from stages.winogavil import jaccard, solvable_by_humans

LEASE_S = 600.0  # seconds a served solve stays reserved for its player
MAX_NAME = 32


class GameError(Exception):
    """A refused request: ``status`` (HTTP) and the message shown to the player."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class CandidateSet:
    set_id: str
    candidates: tuple[str, ...]  # concept names
    shas: tuple[str, ...]  # the accepted image of each, by content hash


def bonus(fool: int | None, solvable: float | None, p: GameParams) -> float:
    """The bonus of one association (paper §2.2, Appendix A.4.1): none unless solvable-by-humans
    (a fraction) >= ``bonus_min_solvable`` and fool-the-AI (0-100) reaches a tier; else the
    amount of the highest tier reached."""
    if fool is None or solvable is None or solvable < p.bonus_min_solvable:
        return 0.0
    reached = [t.amount for t in p.bonus_tiers if fool >= t.min_fool]
    return reached[-1] if reached else 0.0


def clean_name(name: object) -> str:
    """A display name by :func:`stages.names.clean_display_name`: NFKC (a full-width name is its
    ASCII twin), trimmed, 1 to ``MAX_NAME`` code points, no invisible character, one script.
    Raises GameError 400 with the reason."""
    if not isinstance(name, str):
        raise GameError(400, "choose a display name")
    try:
        return clean_display_name(name, MAX_NAME)
    except NameError_ as e:
        raise GameError(400, f"{e} (a display name has 1 to {MAX_NAME} visible characters)") from None


def _positions(selection: object, n: int) -> list[int]:
    if not isinstance(selection, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in selection):
        raise GameError(400, "selection must be a list of image positions")
    if len(set(selection)) != len(selection) or not all(0 <= i < n for i in selection):
        raise GameError(400, "select distinct images of this set")
    return list(selection)


class Game:
    """One game over a store, candidate sets and a rival (thread-safe: one connection per thread)."""

    def __init__(
        self,
        store: Path,
        sets: Sequence[CandidateSet],
        rival: Rival,
        params: GameParams,
        min_solvers: int,
        join_code: str,
        admin_token: str,
        key: bytes,
        flag_cue: Callable[[str], str | None] = lambda c: None,
    ) -> None:
        self.store, self.rival, self.p, self.min_solvers = store, rival, params, min_solvers
        self.sets = {s.set_id: s for s in sets}
        self.order = [s.set_id for s in sets]
        self.images = {sha for s in sets for sha in s.shas}
        self.join_code, self.admin_token, self.key, self.flag_cue = join_code, admin_token, key, flag_cue
        self._local = threading.local()
        self._rate: dict[str, list[float]] = {}
        self._rate_lock = threading.Lock()
        con = connect(store)  # the schema, once; and frames a crash left in the WAL into the file
        checkpoint(con)
        con.close()

    # ------------------------------------------------------------------------------ plumbing
    @property
    def db(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = self._local.con = connect(self.store, create=False)
        return con

    def paused(self) -> bool:
        row = self.db.execute("SELECT value FROM settings WHERE key = 'paused'").fetchone()
        return bool(row and row[0] == "1")

    def _submission(self, token: str) -> str:
        """The player of ``token``, after the pause and rate checks for a submission."""
        pid = self.player(token)
        if self.paused():
            raise GameError(503, "the game is paused by the operator; try again later")
        now = time.monotonic()
        with self._rate_lock:
            recent = [t for t in self._rate.get(token, []) if now - t < 60]
            if len(recent) >= self.p.submissions_per_minute:
                raise GameError(429, "too many submissions in the last minute; slow down")
            self._rate[token] = [*recent, now]
        return pid

    def player(self, token: object) -> str:
        if not isinstance(token, str) or not token:
            raise GameError(401, "join the game first")
        row = self.db.execute(
            "SELECT player_id FROM players WHERE token_hash = ?", (hashlib.sha256(token.encode()).hexdigest(),)
        ).fetchone()
        if row is None:
            raise GameError(401, "unknown session: join the game again")
        return str(row[0])

    def check_admin(self, token: object) -> None:
        if not isinstance(token, str) or not secrets.compare_digest(token.encode(), self.admin_token.encode()):
            raise GameError(403, "admin token required")

    # ------------------------------------------------------------------------------ joining
    def join(self, code: object, name: object) -> dict[str, str]:
        """A new player (session token returned once; only its hash is stored)."""
        if not isinstance(code, str) or not secrets.compare_digest(code.encode(), self.join_code.encode()):
            raise GameError(403, "wrong join code: ask the operator for it")
        display = clean_name(name)
        token = secrets.token_urlsafe(32)
        pid = "gp_" + secrets.token_hex(8)
        try:
            with transaction(self.db) as db:
                db.execute(
                    "INSERT INTO players VALUES (?, ?, ?, ?, ?)",
                    (pid, hashlib.sha256(token.encode()).hexdigest(), display, normalize_name(display), time.time()),
                )
        except sqlite3.IntegrityError:
            raise GameError(409, "that display name is taken; choose another") from None
        return {"token": token, "name": display}

    # ------------------------------------------------------------------------------ spymaster
    def _open_task(self, pid: str) -> sqlite3.Row | None:
        return self.db.execute(
            "SELECT t.* FROM tasks t WHERE t.spymaster_id = ? AND "
            "(SELECT COUNT(*) FROM creations c WHERE c.task_id = t.task_id) < 2 ORDER BY t.created_at LIMIT 1",
            (pid,),
        ).fetchone()

    def creation_task(self, token: str) -> dict[str, Any] | None:
        """The player's open creation task (a candidate set and its cues so far), or a new one on
        the set with the fewest tasks that the player has not had; None when none is left."""
        pid = self.player(token)
        row = self._open_task(pid)
        if row is None:
            with transaction(self.db) as db:
                row = self._open_task(pid)
                if row is None:
                    had = {r[0] for r in db.execute("SELECT set_id FROM tasks WHERE spymaster_id = ?", (pid,))}
                    counts = dict(db.execute("SELECT set_id, COUNT(*) FROM tasks GROUP BY set_id").fetchall())
                    free = [s for s in self.order if s not in had]
                    if not free:
                        return None
                    sid = min(free, key=lambda s: counts.get(s, 0))
                    tid = "gt_" + secrets.token_hex(8)
                    cands = json.dumps(list(self.sets[sid].candidates), ensure_ascii=False)
                    db.execute("INSERT INTO tasks VALUES (?, ?, ?, ?, ?)", (tid, sid, pid, cands, time.time()))
                    row = db.execute("SELECT * FROM tasks WHERE task_id = ?", (tid,)).fetchone()
        cs = self.sets[row["set_id"]]
        cues = [r[0] for r in self.db.execute("SELECT cue FROM creations WHERE task_id = ? ORDER BY seq", (row[0],))]
        lo, hi = K_LIMITS[len(cs.candidates)]
        return {"task_id": row["task_id"], "images": list(cs.shas), "k_min": lo, "k_max": hi, "cues_given": cues}

    def create(self, token: str, task_id: object, cue: object, selection: object) -> dict[str, Any]:
        """Store one association (one transaction) and return the rival's picks and score."""
        pid = self._submission(token)
        task = self.db.execute("SELECT * FROM tasks WHERE task_id = ?", (str(task_id),)).fetchone()
        if task is None or task["spymaster_id"] != pid:
            raise GameError(404, "no such creation task of yours")
        cs = self.sets.get(task["set_id"])
        if cs is None:
            raise GameError(410, "this candidate set is no longer in the game")
        try:
            cue_text = clean_cue(cue)
        except ValueError as e:
            raise GameError(400, str(e)) from None
        if self.flag_cue(cue_text):
            raise GameError(400, "this cue is not allowed (profanity filter); choose another")
        picks = _positions(selection, len(cs.candidates))
        lo, hi = K_LIMITS[len(cs.candidates)]
        if not lo <= len(picks) <= hi:
            raise GameError(400, f"select {lo} to {hi} images for {len(cs.candidates)} candidates")
        assoc = [cs.candidates[i] for i in picks]
        rival_pos = self.rival.predict(cue_text, cs.shas, len(picks))
        rival_names = None if rival_pos is None else [cs.candidates[i] for i in rival_pos]
        fool = self.rival.score(rival_names, assoc)
        iid = "g_" + secrets.token_hex(8)
        content = json.dumps([normalize_name(cue_text), sorted(normalize_name(c) for c in cs.candidates)])
        try:
            with transaction(self.db) as db:
                n = db.execute("SELECT COUNT(*) FROM creations WHERE task_id = ?", (task["task_id"],)).fetchone()[0]
                if n >= 2:
                    raise GameError(409, "this task already has its two cues")
                db.execute(
                    "INSERT INTO creations (instance_id, task_id, spymaster_id, cue, cue_norm, content_key, candidates,"
                    " associations, rival_status, rival_predictions, score_fool_the_ai, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        iid,
                        task["task_id"],
                        pid,
                        cue_text,
                        normalize_name(cue_text),
                        content,
                        task["candidates"],
                        json.dumps([normalize_name(a) for a in assoc], ensure_ascii=False),
                        self.rival.status,
                        None if rival_names is None else json.dumps(rival_names, ensure_ascii=False),
                        fool,
                        time.time(),
                    ),
                )
        except sqlite3.IntegrityError:
            raise GameError(409, "this cue was already given for these images; choose another") from None
        return {
            "instance_id": iid,
            "cue": cue_text,
            "selection": picks,
            "rival": rival_pos,
            "rival_status": self.rival.status,
            "rival_message": self.rival.message,
            "score_fool_the_ai": fool,
            "cues_given": n + 1,
        }

    # ------------------------------------------------------------------------------ solver
    def solve_task(self, token: str) -> dict[str, Any] | None:
        """The association this player should solve next (see module docstring), or None."""
        pid = self.player(token)
        now = time.time()
        with transaction(self.db) as db:
            mine = db.execute(
                "SELECT l.instance_id FROM leases l WHERE l.solver_id = ? AND l.leased_at > ? AND NOT EXISTS "
                "(SELECT 1 FROM solves s WHERE s.instance_id = l.instance_id AND s.solver_id = ?) LIMIT 1",
                (pid, now - LEASE_S, pid),
            ).fetchone()
            if mine is None:
                mine = db.execute(
                    "SELECT c.instance_id, (SELECT COUNT(*) FROM solves s WHERE s.instance_id = c.instance_id) AS n,"
                    " (SELECT COUNT(*) FROM leases l WHERE l.instance_id = c.instance_id AND l.leased_at > ?) AS held"
                    " FROM creations c WHERE c.spymaster_id != ? AND NOT EXISTS"
                    " (SELECT 1 FROM solves s WHERE s.instance_id = c.instance_id AND s.solver_id = ?)"
                    " AND n < ? ORDER BY (n + held >= ?), n DESC, c.seq LIMIT 1",
                    (now - LEASE_S, pid, pid, self.min_solvers, self.min_solvers),
                ).fetchone()
                if mine is None:
                    return None
                db.execute("INSERT OR REPLACE INTO leases VALUES (?, ?, ?)", (mine[0], pid, now))
        c = self.db.execute("SELECT * FROM creations WHERE instance_id = ?", (mine[0],)).fetchone()
        shas = self._shas(json.loads(c["candidates"]))
        return {
            "instance_id": c["instance_id"],
            "cue": c["cue"],
            "images": shas,
            "k": len(json.loads(c["associations"])),
        }

    def _shas(self, candidates: list[str]) -> list[str]:
        by_name = {n: s for cs in self.sets.values() for n, s in zip(cs.candidates, cs.shas)}
        return [by_name[n] for n in candidates]

    def solve(self, token: str, instance_id: object, selection: object) -> dict[str, Any]:
        """Store one answer (one transaction); returns its Jaccard and the spymaster's images."""
        pid = self._submission(token)
        c = self.db.execute("SELECT * FROM creations WHERE instance_id = ?", (str(instance_id),)).fetchone()
        if c is None:
            raise GameError(404, "no such association")
        if c["spymaster_id"] == pid:
            raise GameError(403, "you created this association: other players solve it")
        cands, assoc = json.loads(c["candidates"]), json.loads(c["associations"])
        picks = _positions(selection, len(cands))
        if len(picks) != len(assoc):
            raise GameError(400, f"select exactly {len(assoc)} images")
        chosen = [cands[i] for i in picks]
        j = jaccard(chosen, assoc)
        try:
            with transaction(self.db) as db:
                db.execute(
                    "INSERT INTO solves (instance_id, solver_id, selection, jaccard, created_at) VALUES (?, ?, ?, ?, ?)",
                    (c["instance_id"], pid, json.dumps(chosen, ensure_ascii=False), j, time.time()),
                )
                db.execute("DELETE FROM leases WHERE instance_id = ? AND solver_id = ?", (c["instance_id"], pid))
        except sqlite3.IntegrityError:
            raise GameError(409, "you already solved this association") from None
        return {"jaccard": j, "selection": picks, "associations": [cands.index(a) for a in assoc]}

    # ------------------------------------------------------------------------------ scores
    def _creation_scores(self) -> list[dict[str, Any]]:
        rows = self.db.execute(
            "SELECT c.instance_id, c.spymaster_id, c.rival_status, c.score_fool_the_ai,"
            " (SELECT json_group_array(s.jaccard) FROM solves s WHERE s.instance_id = c.instance_id"
            "  AND s.solver_id != c.spymaster_id) AS js FROM creations c ORDER BY c.seq"
        ).fetchall()
        out = []
        for r in rows:
            js = json.loads(r["js"])
            solvable = solvable_by_humans(js)[0] if len(js) >= self.min_solvers else None
            fool = r["score_fool_the_ai"] if r["rival_status"] == "ok" else None
            out.append({**dict(r), "solvable": solvable, "bonus": bonus(fool, solvable, self.p)})
        return out

    def _summary(self, creations: list[dict[str, Any]], solves: list[float]) -> dict[str, Any]:
        fools = [c["score_fool_the_ai"] for c in creations if c["rival_status"] == "ok"]
        untrained = [c["score_fool_the_ai"] for c in creations if c["rival_status"] == "untrained"]
        solv = [c["solvable"] for c in creations if c["solvable"] is not None]
        return {
            "associations_created": len(creations),
            "fool_the_ai": round(fmean(fools), 1) if fools else None,
            "fool_the_ai_untrained": round(fmean(untrained), 1) if untrained else None,
            "solvable_by_humans": round(100 * fmean(solv), 1) if solv else None,
            "associations_solved": len(solves),
            "solver_jaccard": round(100 * fmean(solves), 1) if solves else None,
            "bonus": sum(c["bonus"] for c in creations),
        }

    def dashboard(self, token: str) -> dict[str, Any]:
        """The player's own scores (percentages) and bonus."""
        pid = self.player(token)
        name = self.db.execute("SELECT display_name FROM players WHERE player_id = ?", (pid,)).fetchone()[0]
        mine = [c for c in self._creation_scores() if c["spymaster_id"] == pid]
        js = [r[0] for r in self.db.execute("SELECT jaccard FROM solves WHERE solver_id = ?", (pid,))]
        return {"name": name, **self._summary(mine, js), "bonus_unit": self.p.bonus_unit}

    def leaderboard(self, limit: int = 20) -> list[dict[str, Any]]:
        """Display names ranked by bonus, then fool-the-AI, then associations solved."""
        scores = self._creation_scores()
        rows = []
        for pid, name in self.db.execute("SELECT player_id, display_name FROM players ORDER BY created_at"):
            js = [r[0] for r in self.db.execute("SELECT jaccard FROM solves WHERE solver_id = ?", (pid,))]
            rows.append({"name": name, **self._summary([c for c in scores if c["spymaster_id"] == pid], js)})
        rows.sort(key=lambda r: (-r["bonus"], -(r["fool_the_ai"] or 0), -r["associations_solved"]))
        return rows[:limit]

    # ------------------------------------------------------------------------------ admin
    def set_paused(self, paused: bool) -> None:
        with transaction(self.db) as db:
            db.execute("INSERT OR REPLACE INTO settings VALUES ('paused', ?)", ("1" if paused else "0",))

    def submissions(self) -> dict[str, list[dict[str, Any]]]:
        """Every creation and solve, player ids replaced by their keyed hashes (as the import does)."""
        h = lambda pid: hash_annotator(pid, self.key)  # noqa: E731
        creations = [
            {**{k: r[k] for k in r.keys() if k != "spymaster_id"}, "spymaster": h(r["spymaster_id"])}
            for r in self.db.execute("SELECT * FROM creations ORDER BY seq")
        ]
        solves = [
            {**{k: r[k] for k in r.keys() if k != "solver_id"}, "solver": h(r["solver_id"])}
            for r in self.db.execute("SELECT * FROM solves ORDER BY seq")
        ]
        return {"creations": creations, "solves": solves}

    def export(self) -> dict[str, list[dict[str, Any]]]:
        """The store as a raw annotation batch (:class:`schemas.raw.RawCreation` and
        :class:`schemas.raw.RawSolve` records; ids are the keyed hashes, fool-the-AI null unless a
        trained rival scored it): what ``import_annotations`` reads, shareable without player ids."""
        creations, solves = read_submissions(self.store)
        h = lambda pid: hash_annotator(pid, self.key)  # noqa: E731
        fields = ("instance_id", "task_id", "cue", "candidates", "associations", "score_fool_the_ai", "images_source")
        return {
            "creations": [{**{k: c[k] for k in fields}, "spymaster_id": h(c["spymaster_id"])} for c in creations],
            "solves": [
                {"instance_id": r["instance_id"], "solver_id": h(r["solver_id"]), "selection": r["selection"]}
                for r in solves
            ],
        }

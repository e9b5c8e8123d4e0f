"""The game's rules, independent of HTTP: joining, creation tasks, solve assignment, scores.

Inputs are validated with the import's rules (:func:`gavil.domain.vocabulary.clean_cue`, K within
:data:`gavil.domain.vocabulary.K_LIMITS`, distinct candidates of the set; the profanity filter refuses a cue the
import would flag), so whatever the game stores, ``import_annotations`` accepts. Players pick images by position;
names never travel to the browser.

Only served work counts. ``POST /api/solve/task`` *leases* one association to the player (a store row: lease
id, player, instance, issued, expires after ``game.lease_s``; ``GET /api/solve`` only reads the player's live
lease); an answer must name a live lease of its own player, and
consumes it in the same transaction as the answer. The server, never the client, picks the association: among those
the player did not create and has not answered, with fewer than ``select.min_solvers`` answers plus live leases, the
closest to done first, then the oldest; never one *held* by a player's flag (open, or retired by review:
:mod:`gavil.game.flags`). Gold items (``game.gold``, :mod:`gavil.game.gold`) are interleaved with real work,
and with them on, only answers of solvers who had passed the gold check when they answered count: each answer
is stored with ``counted``, so no later setting changes it, and a closed round's associations, once they have
their counted answers, are never served again. Only a counting solver's lease holds one of an association's
``min_solvers`` places. A player holds at most one live lease (they get it again until they answer or
it expires). An association with ``min_solvers`` counted answers takes no more counted ones (HTTP 409).

Identity (``game.identity``): ``invitation`` (default) — each account needs a single-use code the operator issued
(:meth:`Game.create_invitations`; only its sha256 is stored); ``shared_code`` — one code for all (a trusted lab only).

Rounds (:mod:`gavil.game.rounds`): a game collects the round open when it starts (a restart keeps
it); each creation stores it and the scoring rival's identity; with none open, creations are refused
(HTTP 503) while solving goes on.

The rival never blocks a request: a creation is stored at once, ``rival_state`` pending; one thread
(:class:`gavil.game.rival.RivalWorker`) scores it; the spymaster polls :meth:`Game.creation`. Scores:
:mod:`gavil.game.scores`. Errors are :class:`GameError` with an HTTP status and a sentence the page shows.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gavil.domain.names import display_name_keys
from gavil.domain.rules import positions, score_answer
from gavil.domain.vocabulary import K_LIMITS, clean_cue, name_key, normalize_name
from gavil.game import admin, gold
from gavil.game.consent import ConsentText
from gavil.game.consent import require as require_consent
from gavil.game.flags import held_args
from gavil.game.rival import Rival, RivalWorker
from gavil.game.rounds import NO_ROUND, NO_ROUND_CONSOLE, Round, current_round, still_open
from gavil.game.rules import CandidateSet as CandidateSet
from gavil.game.rules import GameError as GameError
from gavil.game.rules import clean_name as clean_name
from gavil.game.scores import dashboard, leaderboard
from gavil.game.variant import VariantInstance, store_variant
from gavil.gamestore.review import held
from gavil.gamestore.store import checkpoint, connect, live_lease, transaction
from gavil.params.game import GameParams

MAX_INVITATIONS = 1000  # per request

# an association still needs answers: its counted answers plus other players' live leases that hold a place
_NEED = (
    "(SELECT COUNT(*) FROM solves s WHERE s.instance_id = c.instance_id AND COALESCE(s.counted, 1) = 1)"
    " + (SELECT COUNT(*) FROM leases o WHERE o.instance_id = c.instance_id AND o.expires_at > :now"
    " AND o.solver_id != :pid AND o.counted = 1) < :min"
)
# the player's live lease: a place-holding one while the association still needs it, or one that holds none
_LIVE_LEASE = (
    "SELECT l.lease_id, l.instance_id, l.expires_at FROM leases l JOIN creations c USING (instance_id)"
    f" WHERE l.solver_id = :pid AND l.expires_at > :now AND (l.counted = 0 OR {_NEED}) ORDER BY l.issued_at LIMIT 1"
)
# an association the player may be served: not theirs, not answered by them, not held, still needing answers
_SERVABLE = (
    "c.spymaster_id != :pid AND NOT EXISTS"
    " (SELECT 1 FROM solves s WHERE s.instance_id = c.instance_id AND s.solver_id = :pid)"
    f" AND NOT {held('c')} AND {_NEED}"
)
# the association to serve next: the servable one closest to its answers (then the oldest)
_ORDER = (
    "(SELECT COUNT(*) FROM solves s WHERE s.instance_id = c.instance_id AND COALESCE(s.counted, 1) = 1) DESC, c.seq"
)
_PICK = f"SELECT c.instance_id FROM creations c WHERE {_SERVABLE} ORDER BY {_ORDER} LIMIT 1"
#: How many associations :meth:`Game.solve_task` picks before it takes the write lock (a scan of every
#: creation); under the lock each is checked again with ``_STILL_SERVABLE``, one index lookup each.
SHORTLIST = 8
_SHORTLIST = f"SELECT c.instance_id FROM creations c WHERE {_SERVABLE} ORDER BY {_ORDER} LIMIT {SHORTLIST}"
_STILL_SERVABLE = f"SELECT c.instance_id FROM creations c WHERE c.instance_id = :iid AND {_SERVABLE}"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class Game:
    """One game over a store, candidate sets and a rival (thread-safe: one connection per thread). Starts one
    daemon thread computing the rival's picks when the rival has a model (:meth:`close` stops it). ``join_code``:
    the shared code (``game.identity: shared_code``); unused with invitations. ``consent``: the text each
    player accepts before any work (:mod:`gavil.game.consent`; ``gavil game`` always gives the one of
    ``game.consent_path``); None asks for none (tests of other rules)."""

    def __init__(
        self,
        store: Path,
        sets: Sequence[CandidateSet],
        rival: Rival,
        params: GameParams,
        min_solvers: int,
        join_code: str | None,
        admin_token: str,
        key: bytes,
        flag_cue: Callable[[str], str | None] = lambda c: None,
        consent: ConsentText | None = None,
    ) -> None:
        self.store, self.rival, self.p, self.min_solvers = store, rival, params, min_solvers
        self.sets = {s.set_id: s for s in sets}
        self.order = [s.set_id for s in sets]
        self.images = {sha for s in sets for sha in s.shas}
        self._by_name = {n: sha for s in sets for n, sha in zip(s.candidates, s.shas)}
        if params.identity == "shared_code" and not join_code:
            raise ValueError("game.identity shared_code needs a join code")
        self.join_code, self.admin_token, self.key, self.flag_cue = join_code, admin_token, key, flag_cue
        self.consent = consent  # the text a player accepts before work (gavil.game.consent); None: none asked
        self.clock: Callable[[], float] = time.time  # Unix seconds: issue and expiry of leases, row times
        self._local = threading.local()
        self._rate: dict[str, list[float]] = {}
        self._rate_lock = threading.Lock()
        con = connect(store)  # the schema (migrated), once; and frames a crash left in the WAL into the file
        checkpoint(con)
        row = con.execute("SELECT value FROM settings WHERE key = 'paused'").fetchone()
        self.round: Round | None = current_round(con)  # the round this server collects
        gold.mark_gold_since(con, params.gold, self.clock())
        con.close()
        if self.round is None:
            print(f"game: {NO_ROUND_CONSOLE}", file=sys.stderr)
        self._paused = bool(row and row[0] == "1")
        self._paused_read = time.monotonic()  # when _paused was read from the store (paused())
        # several server processes (game.workers): one rival thread scores for all, elected by a lock file
        lock = store.with_name(store.name + ".rival.lock") if params.workers > 1 else None
        self._worker = RivalWorker(rival, store, self._by_name, lock) if rival.model is not None else None

    def serve_variant(self, instances: Sequence[VariantInstance]) -> int:
        """Serve the ``swow_af`` variant as solve tasks (:func:`gavil.game.variant.store_variant`)."""
        with transaction(self.db) as db:
            return store_variant(db, instances, self.clock(), self._by_name, self.images)

    def close(self) -> None:
        """Stop the rival's thread (pending creations stay pending, for the next start)."""
        if self._worker is not None:
            self._worker.close()

    # ------------------------------------------------------------------------------ plumbing
    @property
    def db(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = self._local.con = connect(self.store, create=False)
        return con

    def paused(self) -> bool:
        """Whether the operator paused the game: the store's setting, read again at most once a
        second (another server process, ``game.workers``, may have changed it)."""
        now = time.monotonic()
        if now - self._paused_read >= 1.0:
            row = self.db.execute("SELECT value FROM settings WHERE key = 'paused'").fetchone()
            self._paused, self._paused_read = bool(row and row[0] == "1"), now
        return self._paused

    def _submission(self, token: str) -> str:
        """The player of ``token``, after the pause and rate checks for a submission."""
        pid = self.player(token)
        if self.paused():
            raise GameError(503, "the game is paused by the operator; try again later")
        require_consent(self, self.db, pid)
        now = time.monotonic()
        with self._rate_lock:
            recent = [t for t in self._rate.get(token, []) if now - t < 60]
            if len(recent) >= self.p.submissions_per_minute:
                raise GameError(429, "too many submissions in the last minute; slow down")
            self._rate[token] = [*recent, now]
        return pid

    def _served_round(self, db: sqlite3.Connection) -> int:
        """The round this server collects if still open (:func:`gavil.game.rounds.still_open`), else GameError 503."""
        round_id = still_open(db, self.round)
        if round_id is None:
            raise GameError(503, NO_ROUND)
        return round_id

    def player(self, token: object) -> str:
        """The player id of a session token. Raises GameError 401 for none or an unknown one."""
        if not isinstance(token, str) or not token:
            raise GameError(401, "join the game first")
        row = self.db.execute("SELECT player_id FROM players WHERE token_hash = ?", (_sha(token),)).fetchone()
        if row is None:
            raise GameError(401, "unknown session: join the game again")
        return str(row[0])

    def lookup(self, token: object) -> str | None:
        """The player id of a session token, or None (no token, an unknown one): a read, for the
        web layer's budgets (an unauthenticated request is charged to its own)."""
        if not isinstance(token, str) or not token or len(token) > 256:
            return None
        row = self.db.execute("SELECT player_id FROM players WHERE token_hash = ?", (_sha(token),)).fetchone()
        return None if row is None else str(row[0])

    def admin_ok(self, token: object) -> bool:
        """Whether ``token`` is the admin token, compared in constant time: both sides' sha256
        digests (fixed length, so neither the length nor a prefix of the token shows in the time)."""
        given = token.encode("utf-8", "surrogatepass") if isinstance(token, str) else b""
        return hmac.compare_digest(hashlib.sha256(given).digest(), hashlib.sha256(self.admin_token.encode()).digest())

    def check_admin(self, token: object) -> None:
        """Raise GameError 403 unless ``token`` is the admin token (:meth:`admin_ok`)."""
        if not self.admin_ok(token):
            raise GameError(403, "admin token required")

    # ------------------------------------------------------------------------------ joining
    def create_invitations(self, count: object) -> list[str]:
        """``count`` (1 to :data:`MAX_INVITATIONS`) new single-use invitation codes, returned once
        (only their sha256 is stored); each creates exactly one account."""
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_INVITATIONS:
            raise GameError(400, f"count must be a whole number from 1 to {MAX_INVITATIONS}")
        codes = ["inv-" + secrets.token_urlsafe(16) for _ in range(count)]
        now = self.clock()
        with transaction(self.db) as db:
            db.executemany(
                "INSERT INTO invitations (code_hash, created_at) VALUES (?, ?)", [(_sha(c), now) for c in codes]
            )
        return codes

    def invitations(self) -> dict[str, int]:
        """How many invitations were issued and how many of them created an account."""
        issued, used = self.db.execute("SELECT COUNT(*), COUNT(used_by) FROM invitations").fetchone()
        return {"issued": int(issued), "used": int(used)}

    def join(self, code: object, name: object) -> dict[str, str]:
        """A new player (session token returned once; only its hash is stored).

        ``code``: the player's invitation (``identity: invitation``; consumed by this account) or
        the shared join code (``identity: shared_code``). Raises GameError 403 (code), 400 (name),
        409 (name taken; an invitation stays unused)."""
        if not isinstance(code, str) or not code or len(code) > 200:
            raise GameError(403, "enter the code the operator gave you")
        display = clean_name(name)
        shared = self.p.identity == "shared_code"
        if shared and not secrets.compare_digest(code.encode(), str(self.join_code).encode()):
            raise GameError(403, "wrong join code: ask the operator for it")
        token = secrets.token_urlsafe(32)
        pid = "gp_" + secrets.token_hex(8)
        now = self.clock()
        try:
            with transaction(self.db) as db:
                if not shared:
                    inv = db.execute("SELECT used_by FROM invitations WHERE code_hash = ?", (_sha(code),)).fetchone()
                    if inv is None:
                        raise GameError(403, "unknown invitation code: ask the operator for your own")
                    if inv[0] is not None:
                        raise GameError(403, "this invitation was already used: each one creates one account")
                cf_key, look_key = display_name_keys(display)
                db.execute(
                    "INSERT INTO players (player_id, token_hash, display_name, name_key, created_at, look_key)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (pid, _sha(token), display, cf_key, now, look_key),
                )
                if not shared:
                    db.execute(
                        "UPDATE invitations SET used_by = ?, used_at = ? WHERE code_hash = ? AND used_by IS NULL",
                        (pid, now, _sha(code)),
                    )
        except sqlite3.IntegrityError:
            raise GameError(
                409, "that display name is taken (it reads like another player's name: TR39 skeleton); choose another"
            ) from None
        return {"token": token, "name": display}

    # ------------------------------------------------------------------------------ spymaster
    def _open_task(self, pid: str) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self.db.execute(
            "SELECT t.* FROM tasks t WHERE t.spymaster_id = ? AND "
            "(SELECT COUNT(*) FROM creations c WHERE c.task_id = t.task_id) < 2 ORDER BY t.created_at LIMIT 1",
            (pid,),
        ).fetchone()
        return row

    def creation_task(self, token: str, reserve: bool = True) -> dict[str, Any] | None:
        """The player's open creation task (a candidate set and its cues so far), or a new one on
        the set with the fewest tasks in use (with a cue, or handed out in the last ``lease_s``)
        that the player has not had; None when none is left. Reserved only here, on request: with
        ``reserve`` false only the open task is returned, if any (a read, nothing written). Raises
        gavil.errors.Forbidden without consent (:func:`gavil.game.consent.require`)."""
        pid = self.player(token)
        require_consent(self, self.db, pid)
        row = self._open_task(pid)
        if row is None and not reserve:
            return None
        if row is None:
            with transaction(self.db) as db:
                self._served_round(db)
                row = self._open_task(pid)
                if row is None:
                    had = {r[0] for r in db.execute("SELECT set_id FROM tasks WHERE spymaster_id = ?", (pid,))}
                    counts = dict(
                        db.execute(
                            "SELECT set_id, COUNT(*) FROM tasks t WHERE t.created_at > ? OR EXISTS"
                            " (SELECT 1 FROM creations c WHERE c.task_id = t.task_id) GROUP BY set_id",
                            (self.clock() - self.p.lease_s,),
                        ).fetchall()
                    )
                    free = [s for s in self.order if s not in had]
                    if not free:
                        return None
                    sid = min(free, key=lambda s: counts.get(s, 0))
                    tid = "gt_" + secrets.token_hex(8)
                    cands = json.dumps(list(self.sets[sid].candidates), ensure_ascii=False)
                    db.execute("INSERT INTO tasks VALUES (?, ?, ?, ?, ?)", (tid, sid, pid, cands, self.clock()))
                    row = db.execute("SELECT * FROM tasks WHERE task_id = ?", (tid,)).fetchone()
        cs = self.sets[row["set_id"]]
        cues = [r[0] for r in self.db.execute("SELECT cue FROM creations WHERE task_id = ? ORDER BY seq", (row[0],))]
        lo, hi = K_LIMITS[len(cs.candidates)]
        return {"task_id": row["task_id"], "images": list(cs.shas), "k_min": lo, "k_max": hi, "cues_given": cues}

    def create(self, token: str, task_id: object, cue: object, selection: object) -> dict[str, Any]:
        """Store one association (one transaction; the rival's picks follow in the background:
        ``rival_pending`` true, poll :meth:`creation`)."""
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
        picks = positions(selection, len(cs.candidates))
        lo, hi = K_LIMITS[len(cs.candidates)]
        if not lo <= len(picks) <= hi:
            raise GameError(400, f"select {lo} to {hi} images for {len(cs.candidates)} candidates")
        assoc = [cs.candidates[i] for i in picks]
        iid = "g_" + secrets.token_hex(8)
        # one cue per candidate set, compared by TR39 skeleton (gavil.domain.vocabulary.name_key)
        content = json.dumps([name_key(cue_text), sorted(name_key(c) for c in cs.candidates)], ensure_ascii=False)
        pending = self.rival.model is not None
        try:
            with transaction(self.db) as db:
                round_id = self._served_round(db)
                n = db.execute("SELECT COUNT(*) FROM creations WHERE task_id = ?", (task["task_id"],)).fetchone()[0]
                if n >= 2:
                    raise GameError(409, "this task already has its two cues")
                db.execute(
                    "INSERT INTO creations (instance_id, task_id, spymaster_id, cue, cue_norm, content_key, candidates,"
                    " associations, rival_status, rival_predictions, score_fool_the_ai, created_at, rival_state,"
                    " round, rival_model, rival_architecture, rival_weights, rival_sha256)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        iid,
                        task["task_id"],
                        pid,
                        cue_text,
                        name_key(cue_text),
                        content,
                        task["candidates"],
                        json.dumps([normalize_name(a) for a in assoc], ensure_ascii=False),
                        self.rival.status,
                        self.clock(),
                        "pending" if pending else "done",
                        round_id,
                        *self.rival.identity(),
                    ),
                )
        except sqlite3.IntegrityError:
            raise GameError(409, "this cue was already given for these images; choose another") from None
        if self._worker is not None:
            self._worker.wake()
        return {
            "instance_id": iid,
            "cue": cue_text,
            "selection": picks,
            "rival": None,
            "rival_pending": pending,
            "rival_status": self.rival.status,
            "rival_message": self.rival.message,
            "score_fool_the_ai": None,
            "cues_given": n + 1,
            "round": round_id,
        }

    def creation(self, token: str, instance_id: object) -> dict[str, Any]:
        """One of the player's own associations with the rival's picks (positions) and score once
        computed (``rival_pending`` false). Raises GameError 404 for any other id."""
        pid = self.player(token)
        c = self.db.execute(
            "SELECT * FROM creations WHERE instance_id = ? AND spymaster_id = ?", (str(instance_id), pid)
        ).fetchone()
        if c is None:
            raise GameError(404, "no such association of yours")
        cands = json.loads(c["candidates"])
        preds = json.loads(c["rival_predictions"]) if c["rival_predictions"] else None
        return {
            "instance_id": c["instance_id"],
            "cue": c["cue"],
            "rival": None if preds is None else [cands.index(n) for n in preds],
            "rival_pending": c["rival_state"] == "pending",
            "rival_state": c["rival_state"],
            "rival_status": c["rival_status"],
            "score_fool_the_ai": c["score_fool_the_ai"],
        }

    def wait_for_rival(self, timeout: float = 60.0) -> bool:
        """Whether no creation is pending, after waiting up to ``timeout`` seconds (tests, tools)."""
        return self._worker is None or self._worker.wait_idle(timeout)

    # ------------------------------------------------------------------------------ solver
    def solve_task(self, token: str, issue: bool = True) -> dict[str, Any] | None:
        """Lease the association this player should solve next (module docstring), or None. With
        ``issue`` false only the player's live lease is returned, if any: a read, nothing written.
        With gold checks on, a gold item instead on the player's gold turns (:mod:`gavil.game.gold`).

        Returns ``lease_id`` (what :meth:`solve` needs), ``instance_id``, ``cue``, ``images``
        (sha256 in candidate order), ``k`` and ``expires_in_s``. Raises gavil.errors.Forbidden without
        consent (:func:`gavil.game.consent.require`)."""
        pid = self.player(token)
        require_consent(self, self.db, pid)
        now = self.clock()
        if (task := gold.live_gold(self.db, pid, now)) is not None:
            return dict(task)
        args = {"pid": pid, "now": now, "min": self.min_solvers, **held_args(self.db, self.p)}
        lease = self.db.execute(_LIVE_LEASE, args).fetchone()
        if lease is None and not issue:
            return None
        if lease is None:
            # the scan over every creation runs before the write lock, on the store's last snapshot
            shortlist = [str(r[0]) for r in self.db.execute(_SHORTLIST, args)]
            with transaction(self.db) as db:
                if (task := gold.live_gold(db, pid, now)) is not None:
                    return dict(task)
                lease = db.execute(_LIVE_LEASE, args).fetchone()
                if lease is None:
                    db.execute("DELETE FROM leases WHERE solver_id = ?", (pid,))  # expired or no longer needed
                    picked = self._new_lease(db, pid, now, args, shortlist)
                    if picked is None or isinstance(picked, dict):
                        return None if picked is None else dict(picked)
                    lease = picked
        c = self.db.execute("SELECT * FROM creations WHERE instance_id = ?", (lease[1],)).fetchone()
        return {
            "lease_id": lease[0],
            "instance_id": c["instance_id"],
            "cue": c["cue"],
            "images": [self._by_name[n] for n in json.loads(c["candidates"])],
            "k": len(json.loads(c["associations"])),
            "expires_in_s": max(0, int(lease[2] - now)),
        }

    def _new_lease(
        self, db: sqlite3.Connection, pid: str, now: float, args: dict[str, object], shortlist: Sequence[str] = ()
    ) -> tuple[str, str, float] | gold.SolveTask | None:
        """Inside :meth:`solve_task`'s transaction: a gold task on the player's gold turn (or when no
        real work is left for them), else a new lease on the association to solve next, stored with
        ``counted`` (whether it holds a place: the player's answers count now); None when nothing is left.

        ``shortlist``: the associations to solve next as read before the write lock (best first); the
        first that is still servable under the lock is leased. When none is (others answered, held
        or filled them meanwhile), the whole scan runs again under the lock, so a stale shortlist
        never serves what the rules refuse and never hides what is left."""
        g = self.p.gold
        if gold.gold_turn_now(db, pid, g) and (task := gold.new_gold(db, pid, now, self.p.lease_s, self.min_solvers)):
            return task
        if g.enabled and len(gold.gold_jaccards(db, pid)) < g.items:
            return None  # not yet checked: no real work (no gold item is left for them either)
        pick = next(
            (r for iid in shortlist if (r := db.execute(_STILL_SERVABLE, {**args, "iid": iid}).fetchone())), None
        )
        if pick is None:
            pick = db.execute(_PICK, args).fetchone()
        if pick is None:
            return gold.new_gold(db, pid, now, self.p.lease_s, self.min_solvers) if g.enabled else None
        lease = (secrets.token_urlsafe(18), str(pick[0]), now + self.p.lease_s)
        db.execute(
            "INSERT INTO leases (lease_id, instance_id, solver_id, issued_at, expires_at, counted)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (*lease[:2], pid, now, lease[2], int(gold.counts_now(db, pid, g))),
        )
        return lease

    def solve(self, token: str, lease_id: object, selection: object) -> dict[str, Any]:
        """Store one answer to the task ``lease_id`` served to this player (one transaction that
        also consumes the lease); returns its Jaccard and the spymaster's images (with gold checks
        on, neither, for every answer: :func:`gavil.game.gold.reply`). The answer is stored with
        ``counted``: whether it counts now (:func:`gavil.game.gold.counts_now`).

        Raises GameError: 400 (no lease id, bad selection), 404 (no such task), 403 (served to
        another player, or one's own association), 410 (expired), 409 (already answered, or the
        association has its ``select.min_solvers`` counted answers and this one would count)."""
        pid = self._submission(token)
        if not isinstance(lease_id, str) or not lease_id or len(lease_id) > 100:
            raise GameError(400, "name the solve task you were served (lease_id): get one from POST /api/solve/task")
        if gold.is_gold_lease(self.db, lease_id):  # answered like any association; scored against the gold
            return dict(gold.answer_gold(self.db, pid, lease_id, selection, self.clock(), self.p.gold))
        lease = self._lease(lease_id, pid)
        c = self.db.execute("SELECT * FROM creations WHERE instance_id = ?", (lease["instance_id"],)).fetchone()
        if c["spymaster_id"] == pid:
            raise GameError(403, "you created this association: other players solve it")
        answer = score_answer(c["candidates"], c["associations"], selection)
        try:
            with transaction(self.db) as db:
                self._lease(lease_id, pid)  # again, under the write lock: a concurrent replay lost
                counted = gold.counts_now(db, pid, self.p.gold)
                if counted and gold.counted_answers(db, c["instance_id"]) >= self.min_solvers:
                    db.execute("DELETE FROM leases WHERE lease_id = ?", (lease_id,))
                    raise GameError(
                        409, f"this association already has its {self.min_solvers} answers; it takes no more"
                    )
                db.execute(
                    "INSERT INTO solves (instance_id, solver_id, selection, jaccard, created_at, lease_id, counted)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        c["instance_id"],
                        pid,
                        json.dumps(answer.chosen, ensure_ascii=False),
                        answer.jaccard,
                        self.clock(),
                        lease_id,
                        int(counted),
                    ),
                )
                db.execute("DELETE FROM leases WHERE lease_id = ?", (lease_id,))
        except sqlite3.IntegrityError:
            raise GameError(409, "you already solved this association") from None
        return dict(gold.reply(answer, self.p.gold))

    def _lease(self, lease_id: str, pid: str) -> sqlite3.Row:
        """The live lease ``lease_id`` of player ``pid``, or the GameError that says why not
        (:func:`gavil.gamestore.store.live_lease`)."""
        return live_lease(self.db, "leases", lease_id, pid, self.clock())

    # ------------------------------------------------------------------------------ scores
    def dashboard(self, token: str) -> dict[str, Any]:
        """The player's own scores (percentages) and bonus (:func:`gavil.game.scores.dashboard`)."""
        return dashboard(self.db, self.player(token), self.min_solvers, self.p)

    def leaderboard(self, limit: int = 20, round_id: int | None = None) -> list[dict[str, Any]]:
        """Display names ranked by bonus, then fool-the-AI, then associations solved (one round's or all)."""
        return leaderboard(self.db, self.min_solvers, self.p, limit, round_id)

    # ------------------------------------------------------------------------------ admin
    def set_paused(self, paused: bool) -> None:
        with transaction(self.db) as db:
            db.execute("INSERT OR REPLACE INTO settings VALUES ('paused', ?)", ("1" if paused else "0",))
        self._paused, self._paused_read = paused, time.monotonic()

    def submissions(self) -> dict[str, list[dict[str, Any]]]:
        """Every creation and solve, player ids replaced by their keyed hashes (:func:`gavil.game.admin.submissions`)."""
        return admin.submissions(self.db, self.key)

    def export(self) -> dict[str, list[dict[str, Any]]]:
        """The store as a raw annotation batch (:func:`gavil.game.admin.export`)."""
        return admin.export(self.store, self.key)

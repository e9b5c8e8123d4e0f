"""The game's integrity against its own players (issue 24): only work the server served counts,
once, by the player it was served to, while it is live, up to ``select.min_solvers`` answers;
accounts need single-use invitations; the rival never holds a request; the store migrates and
keeps leases and pending scores across a restart. Each test plays the attack."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from starlette.testclient import TestClient

from gavil.game.launch import build_game
from gavil.game.rival import Rival
from gavil.game.service import Game
from gavil.game.web import create_app
from gavil.gamestore.store import SCHEMA_VERSION, StoreTooNew, read_submissions, store_file
from gavil.params import Params
from stages.import_annotations import import_all
from stages.select_instances import select
from tests.helpers import game_project

KEY = b"test-key-not-secret"
ADMIN = {"X-Admin-Token": "admin-secret"}
NO_RIVAL = Rival("no_weights", "No rival model.")


class FakeRival(Rival):
    """A rival with a "model": picks the first K images; blocks while ``gate`` is not set."""

    def __init__(self, gate: threading.Event | None = None, fail: bool = False) -> None:
        super().__init__("ok", "The rival model is fake.", "fake", model=cast(Any, object()))
        self.gate, self.fail, self.calls = gate, fail, 0

    def predict(self, cue: str, candidate_shas: Sequence[str], k: int) -> list[int] | None:
        self.calls += 1
        if self.gate is not None:
            self.gate.wait()
        if self.fail:
            raise RuntimeError("boom")
        return list(range(k))


def params(identity: str = "invitation", min_solvers: int = 3, **game: Any) -> Params:
    return Params().replace(
        models={"rival": {"allow_download": False}},
        game={"identity": identity, **game},
        select={"min_solvers": min_solvers},
    )


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GAVIL_GAME_JOIN_CODE", "letmein")
    monkeypatch.setenv("GAVIL_GAME_ADMIN_TOKEN", "admin-secret")
    return game_project(tmp_path)


class Server:
    """A game and its app over one project (a restart is a new Server on the same store)."""

    def __init__(self, project: Path, games: list[Game], p: Params | None = None, rival: Rival = NO_RIVAL) -> None:
        self.game, images = build_game(p or params(), project, rival, ask_consent=False)
        games.append(self.game)
        self.client = TestClient(create_app(self.game, images))

    def invite(self, n: int) -> list[str]:
        r = self.client.post("/api/admin/invitations", json={"count": n}, headers=ADMIN)
        assert r.status_code == 200, r.text
        return list(r.json()["codes"])

    def join(self, name: str, code: str | None = None) -> Player:
        return Player(self, name, code if code is not None else self.invite(1)[0])


class Player:
    def __init__(self, server: Server, name: str, code: str) -> None:
        self.c = server.client
        r = self.c.post("/api/join", json={"code": code, "name": name})
        assert r.status_code == 200, r.text
        self.token = r.json()["token"]
        self.h = {"Authorization": f"Bearer {self.token}"}

    def get(self, path: str) -> httpx.Response:
        return self.c.get(path, headers=self.h)

    def post(self, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        return self.c.post(path, json=body, headers=self.h)

    def create(self, cue: str, selection: list[int]) -> httpx.Response:
        task = self.post("/api/create/task").json()["task"]
        return self.post("/api/create", {"task_id": task["task_id"], "cue": cue, "selection": selection})

    def task(self) -> dict[str, Any] | None:
        r = self.post("/api/solve/task")
        assert r.status_code == 200, r.text
        return cast(dict[str, Any] | None, r.json()["task"])

    def answer(self, lease_id: object, selection: list[int]) -> httpx.Response:
        return self.post("/api/solve", {"lease_id": lease_id, "selection": selection})


def solves(project: Path) -> list[tuple[str, str]]:
    con = sqlite3.connect(store_file(project / "data/game"))
    return [(r[0], r[1]) for r in con.execute("SELECT instance_id, solver_id FROM solves ORDER BY seq")]


def iid(r: httpx.Response) -> str:
    assert r.status_code == 200, r.text
    return str(r.json()["instance_id"])


# ------------------------------------------------------------------------------ served work only
def test_a_spymaster_with_three_extra_accounts_cannot_validate_their_own_cue(project, games):
    s = Server(project, games)
    honest = s.join("Honest")
    older = iid(honest.create("Space", [0, 1]))  # other work waiting: the server serves it first
    spy = s.join("Spy")
    own = iid(spy.create("Sky", [0, 1]))
    alts = [s.join(f"Alt {i}") for i in range(3)]  # three more invitations, as an insider could get
    for alt in alts:
        for forged in ({"instance_id": own, "selection": [0, 1]}, {"lease_id": own, "selection": [0, 1]}):
            r = alt.post("/api/solve", forged)  # the target named by id, never served
            assert r.status_code in (400, 404), r.text
        r = alt.post(f"/api/solve/task?instance_id={own}")  # the client cannot choose its work
        assert r.json()["task"]["instance_id"] == older
    assert all(i != own for i, _ in solves(project))
    assert spy.task() is None  # the three alts hold the older one's slots; one's own is never served
    # (the limit, stated in the README: once no other work waits, the server serves the spymaster's
    # association to whoever asks, alts included: invitations bound how many alts a person has)


def test_an_answer_by_id_that_was_never_served_is_refused(project, games):
    s = Server(project, games)
    spy = s.join("Spy")
    target = iid(spy.create("Space", [0, 1]))
    solver = s.join("Solver")
    for body in (
        {"instance_id": target, "selection": [0, 1]},
        {"lease_id": target, "selection": [0, 1]},
        {"lease_id": "x" * 24, "selection": [0, 1]},
        {"lease_id": ["a"], "selection": [0, 1]},
        {"lease_id": "", "selection": [0, 1]},
    ):
        r = solver.post("/api/solve", body)
        assert r.status_code in (400, 404) and r.json()["error"], (body, r.text)
    assert solves(project) == []


def test_a_replayed_solve_is_stored_once(project, games):
    s = Server(project, games, params(min_solvers=10))
    spy = s.join("Spy")
    iid(spy.create("Space", [0, 1]))
    solver = s.join("Solver")
    lease = solver.task()["lease_id"]  # type: ignore[index]
    codes: list[int] = []

    def send() -> None:
        codes.append(solver.answer(lease, [0, 1]).status_code)

    threads = [threading.Thread(target=send) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes) == [200] + [409] * 7
    late = solver.answer(lease, [0, 1])
    assert late.status_code == 409 and "already answered" in late.json()["error"]
    assert len(solves(project)) == 1


def test_no_association_takes_more_than_min_solvers_answers(project, games):
    """The published-instance attack: fresh accounts posting wrong answers after it has its
    ``min_solvers`` right ones are refused; so its mean (and selection) cannot be moved."""
    s = Server(project, games)
    spy = s.join("Spy")
    target = iid(spy.create("Space", [0, 1]))
    right = [s.join(f"S{i}") for i in range(3)]
    leases = [p.task() for p in right]
    assert all(t is not None and t["instance_id"] == target for t in leases)
    extra = s.join("Fresh")
    assert extra.task() is None  # 3 live leases fill it: not handed out beyond what is needed
    for p, t in zip(right, leases):
        assert p.answer(t["lease_id"], [0, 1]).status_code == 200  # type: ignore[index]
    attackers = [s.join(f"Fresh {i}") for i in range(3)]
    assert all(a.task() is None for a in attackers)
    for a in attackers:
        for lease in [t["lease_id"] for t in leases if t]:  # leases seen, e.g. on a shared screen
            assert a.answer(lease, [2, 3]).status_code in (403, 409)
    assert len(solves(project)) == 3
    res = import_all(None, [], None, KEY, game_store=store_file(project / "data/game"))
    chosen = select(res.instances, res.solves, 0.8, 3)
    assert list(chosen["status"]) == ["selected"] and list(chosen["solvers_jaccard_mean"]) == [1.0]


def test_a_stale_shortlist_never_serves_what_the_rules_refuse(project, games, monkeypatch):
    """``solve_task`` reads its shortlist before the write lock and checks each entry again under
    it. With the stalest shortlist there is (every association in the store, newest first: the
    player's own, ones they answered, filled ones), every lease still obeys the rules, and what is
    left is still served."""
    import gavil.game.service as service

    monkeypatch.setattr(service, "_SHORTLIST", "SELECT instance_id FROM creations ORDER BY seq DESC")
    s = Server(project, games, params(min_solvers=2))
    spy = s.join("Spy")
    made = [iid(spy.create(cue, [0, 1])) for cue in ("Space", "Ocean", "Forest")]
    q, r = s.join("Q"), s.join("R")
    answered: dict[str, set[str]] = {"Q": set(), "R": set()}
    counts = dict.fromkeys(made, 0)
    for who, player in (("Q", q), ("Q", q), ("R", r), ("Q", q), ("R", r), ("R", r), ("Q", q), ("R", r)):
        t = player.task()
        servable = [m for m in made if counts[m] < 2 and m not in answered[who]]
        if not servable:
            assert t is None
            continue
        assert t is not None and t["instance_id"] in servable, (who, t, servable)
        assert player.answer(t["lease_id"], [0, 1]).status_code == 200
        answered[who].add(t["instance_id"])
        counts[t["instance_id"]] += 1
    assert spy.task() is None  # every association is the spy's own
    assert list(counts.values()) == [2, 2, 2] and len(solves(project)) == 6


def test_a_live_lease_beyond_a_lowered_min_solvers_is_refused_with_409(project, games):
    first = Server(project, games, params(min_solvers=4))
    spy = first.join("Spy")
    iid(spy.create("Space", [0, 1]))
    ps = [first.join(f"S{i}") for i in range(4)]
    ts = [p.task() for p in ps]
    for p, t in zip(ps[:3], ts[:3]):
        assert p.answer(t["lease_id"], [0, 1]).status_code == 200  # type: ignore[index]
    first.game.close()
    again = Server(project, games, params(min_solvers=3))  # restarted with the paper's 3
    p = Player.__new__(Player)
    p.c, p.h = again.client, ps[3].h
    r = p.answer(ts[3]["lease_id"], [0, 1])  # type: ignore[index]
    assert r.status_code == 409 and "takes no more" in r.json()["error"]
    assert len(solves(project)) == 3


def test_a_lease_served_to_another_player_is_refused(project, games):
    s = Server(project, games)
    spy = s.join("Spy")
    iid(spy.create("Space", [0, 1]))
    alice, mallory = s.join("Alice"), s.join("Mallory")
    lease = alice.task()["lease_id"]  # type: ignore[index]
    stolen = mallory.answer(lease, [0, 1])
    assert stolen.status_code == 403 and "another player" in stolen.json()["error"]
    assert alice.answer(lease, [0, 1]).status_code == 200  # still Alice's
    assert [pid for _, pid in solves(project)] != [] and len(solves(project)) == 1


def test_an_expired_lease_is_refused_and_its_slot_served_again(project, games):
    s = Server(project, games, params(min_solvers=1, lease_s=600))
    spy = s.join("Spy")
    target = iid(spy.create("Space", [0, 1]))
    slow, other = s.join("Slow"), s.join("Other")
    lease = slow.task()["lease_id"]  # type: ignore[index]
    assert other.task() is None  # the one slot is leased
    start = s.game.clock()
    s.game.clock = lambda: start + 601  # ten minutes later
    late = slow.answer(lease, [0, 1])
    assert late.status_code == 410 and "expired" in late.json()["error"]
    t = other.task()
    assert t is not None and t["instance_id"] == target
    assert other.answer(t["lease_id"], [0, 1]).status_code == 200
    assert slow.answer(lease, [0, 1]).status_code in (404, 409, 410)
    assert len(solves(project)) == 1


def test_leases_survive_a_restart_and_stay_single_use(project, games):
    first = Server(project, games)
    spy = first.join("Spy")
    iid(spy.create("Space", [0, 1]))
    solver = first.join("Solver")
    t = solver.task()
    first.game.close()
    second = Server(project, games)  # same store, new process state
    p = Player.__new__(Player)
    p.c, p.h = second.client, solver.h
    assert p.task()["lease_id"] == t["lease_id"]  # type: ignore[index]  # the same served task
    assert p.answer(t["lease_id"], [0, 1]).status_code == 200  # type: ignore[index]
    third = Server(project, games)
    p.c = third.client
    assert p.answer(t["lease_id"], [0, 1]).status_code == 409  # type: ignore[index]
    assert len(solves(project)) == 1


# ------------------------------------------------------------------------------ identity
def test_each_invitation_creates_exactly_one_account(project, games):
    s = Server(project, games)
    code = s.invite(1)[0]
    raw = store_file(project / "data/game").read_bytes()
    assert code.encode() not in raw  # stored hashed only
    results: list[int] = []

    def join(i: int) -> None:
        results.append(s.client.post("/api/join", json={"code": code, "name": f"P{i}"}).status_code)

    threads = [threading.Thread(target=join, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [200] + [403] * 7
    for bad in ("letmein", code + "x", code.upper(), ""):  # the shared code is off by default
        assert s.client.post("/api/join", json={"code": bad, "name": "Q"}).status_code == 403
    for bad in (None, 7):  # not a string: refused by the strict request type before any lookup
        assert s.client.post("/api/join", json={"code": bad, "name": "Q"}).status_code == 400
    assert s.client.post("/api/admin/invitations", json={"count": 2}).status_code == 403
    for n in (0, -1, 10_001, "3", True, None):
        assert s.client.post("/api/admin/invitations", json={"count": n}, headers=ADMIN).status_code == 400


def test_a_failed_join_leaves_the_invitation_unused(project, games):
    s = Server(project, games)
    first, second = s.invite(2)
    s.join("Taken", first)
    assert s.client.post("/api/join", json={"code": second, "name": "taken"}).status_code == 409
    assert s.client.post("/api/join", json={"code": second, "name": "Fresh"}).status_code == 200


def test_the_shared_code_is_an_explicit_mode(project, games):
    s = Server(project, games, params(identity="shared_code"))
    assert s.client.get("/api/status").json()["identity"] == "shared_code"
    Player(s, "A", "letmein")
    Player(s, "B", "letmein")
    assert s.client.post("/api/join", json={"code": "wrong", "name": "C"}).status_code == 403


def test_joining_and_solving_reserve_no_creation_task(project, games):
    s = Server(project, games)
    spy = s.join("Spy")
    iid(spy.create("Space", [0, 1]))
    for i in range(3):
        p = s.join(f"S{i}")
        t = p.task()
        assert p.answer(t["lease_id"], [0, 1]).status_code == 200  # type: ignore[index]
        p.get("/api/me")
        p.get("/api/leaderboard")
    con = sqlite3.connect(store_file(project / "data/game"))
    assert con.execute("SELECT COUNT(*) FROM tasks").fetchone()[0] == 1  # the spymaster's only


# ------------------------------------------------------------------------------ the rival
def _in_thread(fn: Callable[[], httpx.Response]) -> httpx.Response:
    """``fn()`` in a thread; fails (instead of hanging the suite) if it never returns."""
    out: list[httpx.Response] = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    t.join(60)
    assert out, "the request waited for the blocked rival"
    return out[0]


def test_a_blocked_rival_holds_no_request_and_its_score_is_exported_once_computed(project, games):
    gate = threading.Event()
    rival = FakeRival(gate)
    s = Server(project, games, rival=rival)
    spy = s.join("Spy")
    made = _in_thread(lambda: spy.create("Space", [0, 1]))  # the rival is stuck, the request is not
    assert made.status_code == 200 and made.json()["rival_pending"] and made.json()["score_fool_the_ai"] is None
    second = _in_thread(lambda: spy.create("night", [1, 2]))
    assert second.status_code == 200
    assert _in_thread(lambda: s.client.get("/api/status")).status_code == 200
    assert _in_thread(lambda: spy.get("/api/leaderboard")).status_code == 200
    poll = spy.get(f"/api/create/{made.json()['instance_id']}").json()
    assert poll["rival_pending"] and poll["rival"] is None
    creations, _ = read_submissions(store_file(project / "data/game"))
    assert [(c["rival_state"], c["score_fool_the_ai"]) for c in creations] == [("pending", None)] * 2
    gate.set()
    assert s.game.wait_for_rival()
    poll = spy.get(f"/api/create/{made.json()['instance_id']}").json()
    assert poll == {**poll, "rival_pending": False, "rival": [0, 1], "score_fool_the_ai": 0}
    creations, _ = read_submissions(store_file(project / "data/game"))
    assert [(c["rival_state"], c["score_fool_the_ai"]) for c in creations] == [
        ("done", 0),
        ("done", 67),
    ]  # [0, 1] vs [1, 2]
    other = s.join("Other")
    assert other.get(f"/api/create/{made.json()['instance_id']}").status_code == 404  # one's own only


def test_pending_scores_are_computed_after_a_restart(project, games):
    stopped = FakeRival()
    first = Server(project, games, rival=stopped)
    first.game.close()  # the rival's thread is gone (as in a crash): creations stay pending
    spy = first.join("Spy")
    iid(spy.create("Space", [0, 1]))
    assert stopped.calls == 0
    second = Server(project, games, rival=FakeRival())
    assert second.game.wait_for_rival()
    creations, _ = read_submissions(store_file(project / "data/game"))
    assert [(c["rival_state"], c["score_fool_the_ai"]) for c in creations] == [("done", 0)]


def test_a_rival_error_marks_the_creation_failed_and_the_queue_goes_on(project, games, capsys):
    s = Server(project, games, rival=FakeRival(fail=True))
    spy = s.join("Spy")
    iid(spy.create("Space", [0, 1]))
    iid(spy.create("night", [1, 2]))
    assert s.game.wait_for_rival()
    creations, _ = read_submissions(store_file(project / "data/game"))
    assert [(c["rival_state"], c["score_fool_the_ai"]) for c in creations] == [("failed", None)] * 2
    assert "boom" in capsys.readouterr().err


# ------------------------------------------------------------------------------ the store
V1_SCHEMA = """
CREATE TABLE players(player_id TEXT PRIMARY KEY, token_hash TEXT NOT NULL UNIQUE, display_name TEXT NOT NULL,
  name_key TEXT NOT NULL UNIQUE, created_at REAL NOT NULL);
CREATE TABLE tasks(task_id TEXT PRIMARY KEY, set_id TEXT NOT NULL, spymaster_id TEXT NOT NULL REFERENCES players(player_id),
  candidates TEXT NOT NULL, created_at REAL NOT NULL, UNIQUE(set_id, spymaster_id));
CREATE TABLE creations(seq INTEGER PRIMARY KEY AUTOINCREMENT, instance_id TEXT NOT NULL UNIQUE,
  task_id TEXT NOT NULL REFERENCES tasks(task_id), spymaster_id TEXT NOT NULL, cue TEXT NOT NULL,
  cue_norm TEXT NOT NULL, content_key TEXT NOT NULL UNIQUE, candidates TEXT NOT NULL, associations TEXT NOT NULL,
  rival_status TEXT NOT NULL CHECK (rival_status IN ('ok', 'untrained', 'no_weights')),
  rival_predictions TEXT, score_fool_the_ai INTEGER CHECK (score_fool_the_ai BETWEEN 0 AND 100),
  created_at REAL NOT NULL, UNIQUE(task_id, cue_norm));
CREATE TABLE solves(seq INTEGER PRIMARY KEY AUTOINCREMENT, instance_id TEXT NOT NULL REFERENCES creations(instance_id),
  solver_id TEXT NOT NULL, selection TEXT NOT NULL, jaccard REAL NOT NULL, created_at REAL NOT NULL,
  UNIQUE(instance_id, solver_id));
CREATE TABLE leases(instance_id TEXT NOT NULL, solver_id TEXT NOT NULL, leased_at REAL NOT NULL,
  PRIMARY KEY(instance_id, solver_id));
CREATE TABLE settings(key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO players VALUES ('gp_1', 'h1', 'Spy', 'spy', 1), ('gp_2', 'h2', 'Solver', 'solver', 2);
INSERT INTO tasks VALUES ('gt_1', 'random-5-0000', 'gp_1', '["a","b","c","d","e"]', 3);
INSERT INTO creations (instance_id, task_id, spymaster_id, cue, cue_norm, content_key, candidates, associations,
  rival_status, rival_predictions, score_fool_the_ai, created_at)
  VALUES ('g_1', 'gt_1', 'gp_1', 'Space', 'space', 'k', '["a","b","c","d","e"]', '["a","b"]', 'ok', '["a","c"]', 67, 4);
INSERT INTO solves (instance_id, solver_id, selection, jaccard, created_at) VALUES ('g_1', 'gp_2', '["a","b"]', 1.0, 5);
INSERT INTO leases VALUES ('g_1', 'gp_3', 6);
"""


def test_a_first_release_store_is_migrated_and_keeps_its_rows(tmp_path, games):
    project = game_project(tmp_path, open_round=False)
    path = store_file(project / "data/game")
    con = sqlite3.connect(path)
    con.executescript(V1_SCHEMA)
    con.close()
    before = read_submissions(path)
    assert before[0][0]["score_fool_the_ai"] == 67 and before[0][0]["rival_state"] == "done"  # a v1 reader
    assert before[0][0]["round"] is None  # no rounds before version 4
    s = Server(project, games)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    after = read_submissions(path)
    assert after[0][0]["round"] == 1  # the migration's round for what was collected before rounds
    before[0][0]["round"] = 1
    assert after == before
    again = Server(project, games)  # opening a current store changes nothing
    assert read_submissions(path) == before and again.game.store == s.game.store


def test_a_newer_store_is_refused_with_a_clear_message(project, games):
    path = store_file(project / "data/game")
    Server(project, games)
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    con.close()
    for opener in (lambda: Server(project, games), lambda: read_submissions(path)):
        with pytest.raises(StoreTooNew, match=r"newer") as e:  # the game and the import: both name the store
            opener()
        assert "game.sqlite" in str(e.value) and ("update" in str(e.value).lower() or "pip install" in str(e.value))

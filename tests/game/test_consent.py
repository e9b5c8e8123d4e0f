"""Players' consent through the game's HTTP API (Starlette's test client, the real app and store):
no work before the current text is accepted; a changed text asks again; only the current version
(sha256 of the file) is accepted; a withdrawal is one's own, final, releases open work and is in the
admin export; hostile uses (forged hashes, withdrawing another account, re-accepting after a
withdrawal, a missing text) are refused."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from gavil.domain.consent import NOT_ACCEPTED, WITHDRAWN, withdrawn_reason
from gavil.errors import MissingInput
from gavil.game.launch import build_game
from gavil.game.rival import Rival
from gavil.game.web import create_app
from gavil.gamestore.store import store_file
from gavil.params import Params
from tests.game.test_game import Player as GamePlayer
from tests.helpers import game_project

NO_RIVAL = Rival("no_weights", "No rival model.")
ADMIN = {"X-Admin-Token": "admin-secret"}


def params(**game: object) -> Params:
    return Params().replace(
        models={"rival": {"allow_download": False}},
        game={"identity": "shared_code", "admin_failure_delay_s": 0.0, **game},
        select={"min_solvers": 1},
    )


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("GAVIL_GAME_JOIN_CODE", "letmein")
    monkeypatch.setenv("GAVIL_GAME_ADMIN_TOKEN", "admin-secret")
    return game_project(tmp_path)


@pytest.fixture
def client(project) -> TestClient:
    game, images = build_game(params(), project, NO_RIVAL)  # asks for consent, as `gavil game` does
    return TestClient(create_app(game, images))


def consent_file(project: Path) -> Path:
    return project / "data/sample/consent.md"


def version(project: Path) -> str:
    return hashlib.sha256(consent_file(project).read_bytes()).hexdigest()


class Player(GamePlayer):
    """test_game's player, who can also accept the consent text and withdraw."""

    def accept(self, v: str) -> httpx.Response:
        return self.post("/api/consent", {"version": v})


def refused(r: httpx.Response, status: int, text: str) -> None:
    assert r.status_code == status, r.text
    assert text in r.json()["error"]


def test_no_work_before_consent_then_work(client, project):
    p = Player(client, "Ann")
    for path in ("/api/create/task", "/api/solve/task"):
        refused(p.post(path), 403, NOT_ACCEPTED)
    refused(p.get("/api/create"), 403, NOT_ACCEPTED)
    c = p.get("/api/consent").json()
    assert c["required"] and not c["accepted"] and c["version"] == version(project)
    assert c["text"] == consent_file(project).read_text()  # served as text, the page never parses it as HTML
    assert "Withdraw consent" in c["text"] and "Contact" in c["text"]
    r = p.accept(c["version"])
    assert r.status_code == 200 and r.json()["accepted"] and r.json()["accepted_at"].endswith("Z")
    task = p.post("/api/create/task").json()["task"]
    assert task is not None and len(task["images"]) == 5


def test_a_changed_text_asks_again_before_more_work(client, project):
    spy = Player(client, "Spy")
    spy.accept(version(project))
    task = spy.post("/api/create/task").json()["task"]
    assert spy.post("/api/create", {"task_id": task["task_id"], "cue": "space", "selection": [0, 1]}).status_code == 200
    old = version(project)
    consent_file(project).write_text(consent_file(project).read_text() + "\nContact: ethics@example.org\n")
    new = version(project)
    assert new != old
    refused(
        spy.post("/api/create", {"task_id": task["task_id"], "cue": "moon", "selection": [1, 2]}), 403, NOT_ACCEPTED
    )
    refused(spy.post("/api/create/task"), 403, NOT_ACCEPTED)
    c = spy.get("/api/consent").json()
    assert not c["accepted"] and c["accepted_version"] == old and c["version"] == new
    refused(spy.accept(old), 409, "changed")  # the stale version is no acceptance of the new text
    assert spy.accept(new).json()["accepted"]
    assert spy.post("/api/create", {"task_id": task["task_id"], "cue": "moon", "selection": [1, 2]}).status_code == 200


def test_forged_and_malformed_versions_are_refused(client, project):
    p = Player(client, "Mallory")
    refused(p.accept("0" * 64), 409, "changed")
    refused(p.accept(hashlib.sha256(b"a text I wrote").hexdigest()), 409, "changed")
    refused(p.accept(version(project).upper()), 400, "version")
    refused(p.accept("yes"), 400, "version")
    assert p.post("/api/consent", {"version": True}).status_code == 400  # strict body: no coercion
    assert p.post("/api/consent", {"version": version(project), "player": "gp_x"}).status_code == 400  # no extras
    refused(p.post("/api/solve/task"), 403, NOT_ACCEPTED)
    assert client.post("/api/consent", json={"version": version(project)}).status_code == 401  # no session


def test_withdraw_is_final_for_ones_own_account_and_releases_work(client, project):
    spy, solver, other = Player(client, "Spy"), Player(client, "Solver"), Player(client, "Other")
    for p in (spy, solver, other):
        assert p.accept(version(project)).status_code == 200
    task = spy.post("/api/create/task").json()["task"]
    spy.post("/api/create", {"task_id": task["task_id"], "cue": "space", "selection": [0, 1]})
    lease = solver.post("/api/solve/task").json()["task"]
    assert lease is not None
    refused(solver.post("/api/consent/withdraw", {"confirm": False}), 400, "confirm")
    refused(solver.post("/api/consent/withdraw", {"confirm": True, "player_id": "gp_other"}), 400, "player_id")
    w = solver.post("/api/consent/withdraw", {"confirm": True})
    assert w.status_code == 200 and w.json()["withdrawn"] and w.json()["released"] == 1
    assert solver.post("/api/consent/withdraw", {"confirm": True}).json()["withdrawn_at"] == w.json()["withdrawn_at"]
    refused(solver.post("/api/solve", {"lease_id": lease["lease_id"], "selection": [0, 1]}), 403, WITHDRAWN)
    con = sqlite3.connect(store_file(project / "data/game"))
    assert con.execute("SELECT COUNT(*) FROM leases").fetchone()[0] == 0  # the open lease was released
    refused(solver.post("/api/solve/task"), 403, WITHDRAWN)
    refused(solver.accept(version(project)), 403, WITHDRAWN)  # withdraw, then re-accept: refused
    # the released place is served to the next player; the others' consent is untouched
    assert other.post("/api/solve/task").json()["task"]["instance_id"] == lease["instance_id"]
    assert other.get("/api/consent").json()["accepted"] and not other.get("/api/consent").json()["withdrawn"]
    board = {r["name"] for r in other.get("/api/leaderboard").json()["rows"]}
    assert "Solver" not in board and {"Spy", "Other"} <= board  # a withdrawn player leaves the leaderboard
    # a new account (a new code) is a new consent: it starts unaccepted
    again = Player(client, "Solver again")
    assert not again.get("/api/consent").json()["accepted"]


def test_admin_export_carries_consents_and_withdrawals(client, project):
    a, b = Player(client, "Ann"), Player(client, "Bob")
    a.accept(version(project))
    b.accept(version(project))
    b.post("/api/consent/withdraw", {"confirm": True})
    for path in ("/api/admin/export", "/api/admin/submissions"):
        data = client.get(path, headers=ADMIN).json()
        assert [c["version"] for c in data["consents"]] == [version(project)] * 2
        assert all(c["accepted_at_utc"].endswith("Z") and not c["player"].startswith("gp_") for c in data["consents"])
        [w] = data["withdrawals"]
        assert w["player"] == data["consents"][1]["player"] and w["last_version"] == version(project)
    assert client.get("/api/admin/export").status_code == 403


def test_the_store_keeps_version_and_time(client, project):
    p = Player(client, "Ann")
    p.accept(version(project))
    p.accept(version(project))  # again: the first time stays
    con = sqlite3.connect(store_file(project / "data/game"))
    rows = con.execute("SELECT version, accepted_at FROM consents").fetchall()
    assert len(rows) == 1 and rows[0][0] == version(project) and rows[0][1] > 1e9
    assert con.execute("PRAGMA user_version").fetchone()[0] == 7


def test_a_missing_text_stops_the_game_at_start_and_work_while_it_is_gone(client, project):
    p = Player(client, "Ann")
    p.accept(version(project))
    consent_file(project).rename(project / "elsewhere.md")
    refused(p.post("/api/create/task"), 503, "game.consent_path")
    with pytest.raises(MissingInput, match=r"game.consent_path = .*data/sample/consent.md: not a file"):
        build_game(params(), project, NO_RIVAL)


def test_withdrawn_reason_names_the_time_in_utc():
    assert withdrawn_reason(0.0) == "withdrawn: player withdrew consent (1970-01-01T00:00:00Z)"


def joined(client: TestClient, project: Path, name: str) -> Player:
    p = Player(client, name)
    assert p.accept(version(project)).status_code == 200
    return p


def create(p: Player, cue: str, selection: list[int]) -> str:
    task = p.post("/api/create/task").json()["task"]
    r = p.post("/api/create", {"task_id": task["task_id"], "cue": cue, "selection": selection})
    assert r.status_code == 200, r.text
    return r.json()["instance_id"]


def solve(p: Player, right: dict[str, list[int]]) -> str:
    t = p.post("/api/solve/task").json()["task"]
    assert p.post("/api/solve", {"lease_id": t["lease_id"], "selection": right[t["cue"]]}).status_code == 200
    return t["cue"]


def test_the_next_build_drops_a_withdrawn_player_s_unpublished_work_and_keeps_published_ids(client, project):
    from stages.import_annotations import import_all
    from stages.select_instances import select, update_ledger
    from stages.select_instances.guard import published_ids

    key, store = b"test-key-not-secret", store_file(project / "data/game")
    right = {"Space": [0, 1], "night": [1, 2], "Rocket": [0, 2]}
    spy = joined(client, project, "Spy")
    create(spy, "Space", right["Space"])
    assert solve(joined(client, project, "First solver"), right) == "Space"
    first = import_all(None, [], None, key, game_store=store)
    ledger = update_ledger(select(first.instances, first.solves, 0.8, 1))
    assert list(published_ids(ledger)["ID"]) == [0]  # "Space" is published
    create(spy, "night", right["night"])
    assert solve(joined(client, project, "Second solver"), right) == "night"
    other, leaver = joined(client, project, "Other spy"), joined(client, project, "Leaving solver")
    create(other, "Rocket", right["Rocket"])
    assert solve(leaver, right) == "Rocket"
    # both withdraw: a spymaster with a published and an unpublished association, and a solver
    for p in (spy, leaver):
        assert p.post("/api/consent/withdraw", {"confirm": True}).status_code == 200

    res = import_all(None, [], None, key, game_store=store)
    assert res.metrics["consent"] == {"players_withdrawn": 2, "creations_of_withdrawn": 2, "solves_dropped": 1}
    [dropped] = res.rejects.to_dict("records")
    assert dropped["kind"] == "solve" and dropped["reason"].startswith("withdrawn: player withdrew consent (")
    row = json.loads(dropped["row"])  # the reject keeps the instance and the hashed solver, not the answer
    assert set(row) == {"instance_id", "solver_id"} and row["solver_id"].startswith("a_")
    sel = select(res.instances, res.solves, 0.8, 1, ledger)
    rows = {c: (s, r) for c, s, r in zip(sel["cue"], sel["status"], sel["reason"])}
    # published: it stays, its ID kept, the withdrawal recorded; withdrawing never erases published work
    assert rows["Space"][0] == "selected" and rows["Space"][1].startswith("withdrawn: player withdrew consent (")
    assert "its ID stays" in rows["Space"][1] and list(published_ids(update_ledger(sel, ledger))["ID"]) == [0]
    # unpublished: a fate row saying why, never in a release
    assert rows["night"][0] == "withheld" and rows["night"][1].startswith("withdrawn: player withdrew consent (")
    assert rows["night"][1].endswith("otherwise selected")
    # the withdrawn solver's answer is gone: the other spymaster's association waits for another
    assert rows["Rocket"] == ("insufficient_solvers", "0 valid answer(s) by other players, need 1")


def test_a_version_6_store_migrates_to_consent_and_its_players_are_asked(tmp_path):
    from gavil.gamestore.consent import player_consent, read_consents, read_withdrawals
    from gavil.gamestore.store import SCHEMA_VERSION, connect
    from tests.helpers import old_store

    path = tmp_path / "game.sqlite"
    con = old_store(path, 6)
    con.execute(
        "INSERT INTO players (player_id, token_hash, display_name, name_key, created_at, look_key)"
        " VALUES ('gp_1', 'h', 'Ann', 'ann', 1.0, 'Ann')"
    )
    con.close()
    assert read_withdrawals(path) == {}  # read as it is: no consent tables before version 7
    db = connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 7
    assert [tuple(r) for r in db.execute("SELECT display_name FROM players")] == [("Ann",)]
    assert player_consent(db, "gp_1") == (None, None, None)  # an earlier player accepts like a new one
    assert read_consents(db) == ([], [])
    with pytest.raises(sqlite3.IntegrityError):  # a version is a sha256: 64 characters
        db.execute("INSERT INTO consents (player_id, version, accepted_at) VALUES ('gp_1', 'v1', 2.0)")
    with pytest.raises(sqlite3.IntegrityError):  # only a player of the store
        db.execute("INSERT INTO consent_withdrawals (player_id, withdrawn_at) VALUES ('gp_x', 2.0)")
    db.close()

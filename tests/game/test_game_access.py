"""Access limits that hold: admin-token guesses are limited per address and server-wide before a
constant-time compare, each refusal waits its turn and is logged; forwarded headers count only from
a proxy named in game.trusted_proxies (the real server, spoofed from a local client); an
unauthenticated flood has its own budget and never locks out an honest player behind the same
address; reads are throttled per account and never write to the store; a store path that is not
an SQLite file is a clear error."""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from gavil.game.launch import build_game
from gavil.game.rival import Rival
from gavil.game.web import create_app
from gavil.gamestore.store import GameStoreError, connect, read_submissions
from gavil.params import Params
from stages.import_annotations import import_all
from tests.helpers import ROOT, game_project

NO_RIVAL = Rival("no_weights", "No rival model: the RN50 weights are not available.")
CODE, ADMIN = "letmein", "the-admin-secret"


def params(**game) -> Params:
    return Params().replace(
        models={"rival": {"allow_download": False}},
        game={"identity": "shared_code", "admin_failure_delay_s": 0.0, **game},
    )


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.setenv("GAVIL_GAME_JOIN_CODE", CODE)
    monkeypatch.setenv("GAVIL_GAME_ADMIN_TOKEN", ADMIN)
    return game_project(tmp_path)


class App:
    def __init__(self, project: Path, p: Params) -> None:
        self.game, images = build_game(p, project, NO_RIVAL, ask_consent=False)
        self.app = create_app(self.game, images)
        self.store = project / "data/game/game.sqlite"

    def at(self, address: str, port: int = 50000) -> TestClient:
        return TestClient(self.app, client=(address, port))


def bearer(c: TestClient, name: str) -> dict[str, str]:
    r = c.post("/api/join", json={"code": CODE, "name": name})
    assert r.status_code == 200, r.text
    return {"Authorization": f"Bearer {r.json()['token']}"}


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ------------------------------------------------------------------------------ the admin token
def test_300_admin_token_guesses_from_one_address_stop_at_the_limit(project, caplog):
    app = App(project, params(admin_limit_per_address="10/minute", admin_limit_global="1000/minute"))
    c = app.at("203.0.113.5")
    with caplog.at_level(logging.WARNING, logger="gavil.game"):
        replies = [
            c.post("/api/admin/invitations", headers={"X-Admin-Token": f"guess-{i}"}, json={"count": 1})
            for i in range(300)
        ]
    assert [r.status_code for r in replies[:10]] == [403] * 10
    assert {r.status_code for r in replies[10:]} == {429}
    assert int(replies[-1].headers["retry-after"]) >= 1
    right = c.post("/api/admin/invitations", headers={"X-Admin-Token": ADMIN}, json={"count": 1})
    assert right.status_code == 429  # the limit comes before the compare: the right token gets no answer
    refused = [r for r in caplog.records if "refused admin token from 203.0.113.5" in r.getMessage()]
    assert len(refused) == 10  # every compared-and-refused attempt is logged (never the token)
    assert not any("guess-" in r.getMessage() for r in caplog.records)
    assert app.game.invitations()["issued"] == 0
    ok = app.at("198.51.100.9").post("/api/admin/invitations", headers={"X-Admin-Token": ADMIN}, json={"count": 1})
    assert ok.status_code == 200  # another address is not locked out by the per-address limit


def test_admin_guesses_spread_over_many_addresses_meet_the_global_limit(project):
    app = App(project, params(admin_limit_per_address="1000/minute", admin_limit_global="20/minute"))
    codes = [
        app.at(f"10.1.{i // 250}.{i % 250}").get("/api/admin/export", headers={"X-Admin-Token": "x"})
        for i in range(300)
    ]
    assert [r.status_code for r in codes[:20]] == [403] * 20 and {r.status_code for r in codes[20:]} == {429}


def test_refused_admin_attempts_wait_one_at_a_time(project, monkeypatch):
    """Each refusal sleeps ``admin_failure_delay_s`` holding one server-wide lock: concurrent
    guesses are slowed down together, never in parallel (observed, not timed)."""
    import asyncio

    import gavil.game.web as web

    active, seen, real_sleep = [0], [], asyncio.sleep

    async def sleep(delay: float) -> None:
        active[0] += 1
        seen.append((delay, active[0]))
        await real_sleep(0.01)
        active[0] -= 1

    monkeypatch.setattr(web.asyncio, "sleep", sleep)
    app = App(project, params(admin_failure_delay_s=1.5))

    async def guesses() -> list[int]:
        transport = httpx.ASGITransport(app=app.app, client=("192.0.2.1", 1))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            rs = await asyncio.gather(
                *[client.get("/api/admin/export", headers={"X-Admin-Token": f"g{i}"}) for i in range(8)]
            )
            return [r.status_code for r in rs]

    assert asyncio.run(guesses()) == [403] * 8
    assert seen == [(1.5, 1)] * 8  # eight refusals, each waited the delay, never two at once
    right = app.at("192.0.2.2").get("/api/admin/export", headers={"X-Admin-Token": ADMIN})
    assert right.status_code == 200 and len(seen) == 8  # the right token never waits


def test_the_admin_token_is_compared_in_constant_time(project, monkeypatch):
    """Whatever is sent (empty, a prefix, the token with one more byte, 10 KB), the compare sees two
    sha256 digests of equal length: neither the token's length nor a prefix shows in the time."""
    app = App(project, params())
    lengths = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        lengths.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr("gavil.game.service.hmac.compare_digest", spy)
    for token in ("", ADMIN[:3], ADMIN + "x", "x" * 10_000, ADMIN.upper(), None, 5):
        assert not app.game.admin_ok(token)
    assert app.game.admin_ok(ADMIN)
    assert set(lengths) == {(32, 32)}


# ------------------------------------------------------------------------------ forwarded headers
def test_forwarded_headers_are_ignored_unless_a_trusted_proxy_sends_them(project):
    app = App(project, params(join_limit_per_address="5/minute"))
    local = app.at("127.0.0.1")
    replies = [
        local.post(
            "/api/join",
            json={"code": "wrong", "name": f"N{i}"},
            headers={
                "X-Forwarded-For": f"198.18.0.{i}",
                "Forwarded": f"for=198.18.1.{i}",
                "X-Real-IP": f"198.18.2.{i}",
            },
        )
        for i in range(40)
    ]
    assert {r.status_code for r in replies[5:]} == {429}  # every spoofed address was the one local client
    proxied = App(project, params(join_limit_per_address="5/minute", trusted_proxies=["127.0.0.0/8"]))
    via = proxied.at("127.0.0.1")
    for i in range(3):  # the proxy names three clients: each its own budget of 5
        codes = [
            via.post(
                "/api/join", json={"code": "wrong", "name": "x"}, headers={"X-Forwarded-For": f"203.0.113.{i}"}
            ).status_code
            for _ in range(6)
        ]
        assert codes == [403] * 5 + [429]
    # a client-written left part is never believed: the proxy appends the real peer on the right
    spoof = [
        via.post(
            "/api/join", json={"code": "wrong", "name": "x"}, headers={"X-Forwarded-For": f"1.2.3.{i}, 203.0.113.0"}
        ).status_code
        for i in range(3)
    ]
    assert spoof == [429] * 3
    stranger = proxied.at("198.51.100.7")  # not the proxy: its header is ignored
    codes = [
        stranger.post(
            "/api/join", json={"code": "wrong", "name": "x"}, headers={"X-Forwarded-For": f"9.9.9.{i}"}
        ).status_code
        for i in range(6)
    ]
    assert codes == [403] * 5 + [429]


@pytest.fixture
def server(tmp_path) -> Iterator[int]:
    """The real ``gavil game`` on 127.0.0.1, its params as shipped but 5 joins a minute per address."""
    project = game_project(tmp_path)
    text = (ROOT / "params.yaml").read_text().replace("allow_download: true", "allow_download: false")
    (project / "params.yaml").write_text(
        text.replace("join_limit_per_address: 30/minute; 100/hour", "join_limit_per_address: 5/minute")
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GAVIL_GAME_JOIN_CODE": CODE, "GAVIL_GAME_ADMIN_TOKEN": ADMIN}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gavil.cli", "game", "--port", str(port)],
        cwd=project,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        for _ in range(600):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/status", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                if proc.poll() is not None:
                    pytest.fail(proc.stderr.read().decode() if proc.stderr else "the server exited")
                time.sleep(0.2)
        else:
            pytest.fail("the game server did not start")
        yield port
    finally:
        proc.kill()
        proc.wait()


def test_the_real_server_ignores_spoofed_forwarded_headers_from_a_local_client(server):
    url = f"http://127.0.0.1:{server}/api/join"
    codes = [
        httpx.post(
            url,
            json={"code": "wrong", "name": "x"},
            headers={"X-Forwarded-For": f"198.18.0.{i}", "X-Real-IP": f"198.18.0.{i}"},
        ).status_code
        for i in range(12)
    ]
    assert codes == [403] * 5 + [429] * 7


# ------------------------------------------------------------------------------ budgets
def test_an_unauthenticated_flood_never_locks_out_an_honest_player_behind_the_same_address(project):
    app = App(project, params(submission_limit_per_address="20/minute", unauthenticated_limit_per_address="30/minute"))
    nat = app.at("203.0.113.50")
    honest = bearer(nat, "Honest")
    flood = []
    for i in range(500):
        path = ("/api/create", "/api/solve", "/api/me", "/api/create/task")[i % 4]
        h = {"Authorization": f"Bearer forged-{i}"} if i % 2 else {}
        flood.append(
            (nat.post if path != "/api/me" else nat.get)(
                path, headers=h, **({"json": {}} if path in ("/api/create", "/api/solve") else {})
            )
        )
    assert {r.status_code for r in flood[:30]} == {401} and {r.status_code for r in flood[30:]} == {429}
    task = nat.post("/api/create/task", headers=honest).json()["task"]
    r = nat.post("/api/create", headers=honest, json={"task_id": task["task_id"], "cue": "space", "selection": [0, 1]})
    assert r.status_code == 200, r.text
    assert nat.get("/api/me", headers=honest).status_code == 200
    other = bearer(nat, "Second")  # a second honest player behind the NAT too
    assert nat.post("/api/solve/task", headers=other).status_code == 200


def test_reads_are_throttled_per_account_and_never_write_to_the_store(project):
    app = App(project, params(read_limit_per_account="50/minute"))
    c = app.at("203.0.113.60")
    spy, solver = bearer(c, "Spy"), bearer(c, "Solver")
    task = c.post("/api/create/task", headers=spy).json()["task"]
    iid = c.post(
        "/api/create", headers=spy, json={"task_id": task["task_id"], "cue": "space", "selection": [0, 1]}
    ).json()["instance_id"]
    before = digest(app.store)
    reads = ["/api/me", "/api/leaderboard", "/api/create", "/api/solve", f"/api/create/{iid}", "/api/status"]
    codes = [
        c.get(reads[i % len(reads)], headers=solver if i % len(reads) != 4 else spy).status_code for i in range(300)
    ]
    assert digest(app.store) == before  # hundreds of reads, not one byte written
    assert 429 in codes and codes.count(200) < 300
    fresh = bearer(app.at("198.51.100.1"), "Fresh")
    assert app.at("198.51.100.1").get("/api/me", headers=fresh).status_code == 200  # per account, not global
    assert digest(app.store) != before  # (a join is a write: the store really is the one watched)


def test_a_get_never_reserves_work(project):
    app = App(project, params())
    c = app.at("203.0.113.61")
    spy, solver = bearer(c, "Spy"), bearer(c, "Solver")
    assert c.get("/api/create", headers=spy).json() == {"task": None}  # nothing reserved by a read
    task = c.post("/api/create/task", headers=spy).json()["task"]
    assert c.get("/api/create", headers=spy).json()["task"]["task_id"] == task["task_id"]
    c.post("/api/create", headers=spy, json={"task_id": task["task_id"], "cue": "space", "selection": [0, 1]})
    before = digest(app.store)
    assert c.get("/api/solve", headers=solver).json() == {"task": None}
    assert digest(app.store) == before
    lease = c.post("/api/solve/task", headers=solver).json()["task"]
    assert c.get("/api/solve", headers=solver).json()["task"]["lease_id"] == lease["lease_id"]


# ------------------------------------------------------------------------------ the store path
@pytest.mark.parametrize("kind", ["folder", "dangling_link", "link_to_folder", "fifo"])
def test_a_store_path_that_is_not_an_sqlite_file_is_a_clear_error(tmp_path, kind):
    store = tmp_path / "game" / "game.sqlite"
    store.parent.mkdir()
    if kind == "folder":
        store.mkdir()
    elif kind == "dangling_link":
        store.symlink_to(tmp_path / "nowhere.sqlite")
    elif kind == "link_to_folder":
        (tmp_path / "dir").mkdir()
        store.symlink_to(tmp_path / "dir")
    else:
        os.mkfifo(store)
    with pytest.raises(GameStoreError) as e:
        read_submissions(store)
    assert str(store) in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(GameStoreError):
        import_all(None, [], None, b"k", game_store=store)
    with pytest.raises(GameStoreError):  # the game server refuses to start on it too
        connect(store)
    assert read_submissions(tmp_path / "game" / "absent.sqlite") == ([], [])  # nothing there: no game played


# ------------------------------------------------------------------------------ names in the game
def test_display_names_that_read_alike_are_taken(project):
    app = App(project, params())
    c = app.at("203.0.113.70")
    for first, second in (("Iris", "lris"), ("O'Brien", "O\u2019Brien"), ("Bob", "bob"), ("Ann", "\u0410nn")):
        assert c.post("/api/join", json={"code": CODE, "name": first}).status_code == 200
        r = c.post("/api/join", json={"code": CODE, "name": second})
        assert r.status_code in (400, 409), (second, r.text)  # taken, or refused (mixed scripts)
    r = c.post("/api/join", json={"code": CODE, "name": "\u1d05an"})
    assert r.status_code == 400 and "small capital" in r.json()["error"]


def test_a_version_2_store_is_migrated_and_its_twins_keep_their_rows(tmp_path):
    import sqlite3

    from gavil.gamestore.migrations import MIGRATIONS
    from gavil.gamestore.store import SCHEMA_VERSION

    path = tmp_path / "game.sqlite"
    con = sqlite3.connect(path, isolation_level=None)
    for v in (0, 1):
        step = MIGRATIONS[v]
        assert isinstance(step, str)
        con.executescript(step)
    con.execute("PRAGMA user_version = 2")
    con.execute("INSERT INTO players VALUES ('p1', 'h1', 'Iris', 'iris', 1), ('p2', 'h2', 'lris', 'lris', 2)")
    cands = '["rocket", "moon", "cat", "coffee", "brick"]'
    con.execute("INSERT INTO tasks VALUES ('t1', 's', 'p1', ?, 1), ('t2', 's', 'p2', ?, 1)", (cands, cands))
    for seq, (task, cue) in enumerate((("t1", "dog's"), ("t2", "dog\u2019s")), start=1):
        con.execute(
            "INSERT INTO creations (instance_id, task_id, spymaster_id, cue, cue_norm, content_key, candidates,"
            " associations, rival_status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, '[\"moon\", \"cat\"]', 'no_weights', 1)",
            (f"i{seq}", task, f"p{seq}", cue, cue, f"[{cue!r}]", cands),
        )
    con.close()
    new = connect(path)
    assert new.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 7
    keys = new.execute("SELECT player_id, name_key, look_key FROM players ORDER BY player_id").fetchall()
    assert len(keys) == 2 and keys[0][2] != keys[1][2] and keys[1][2].startswith(keys[0][2])  # twin suffixed
    assert new.execute("SELECT COUNT(*) FROM creations").fetchone()[0] == 2
    new.close()
    creations, _ = read_submissions(path)
    assert [c["cue"] for c in creations] == ["dog's", "dog\u2019s"]  # the store is read as it is


def test_a_twin_cue_over_one_candidate_set_is_refused_in_the_game(project):
    app = App(project, params())
    c = app.at("203.0.113.71")

    def create(h: dict[str, str], task: dict, cue: str) -> int:
        r = c.post("/api/create", headers=h, json={"task_id": task["task_id"], "cue": cue, "selection": [0, 1]})
        return r.status_code

    first = bearer(c, "Spy0")
    task = c.post("/api/create/task", headers=first).json()["task"]
    assert create(first, task, "dog's") == 200
    assert create(first, task, "dog\u2019s") == 409  # the task's second cue is the first one again
    for n in (1, 2):  # the other two sets are handed out
        c.post("/api/create/task", headers=bearer(c, f"Spy{n}"))
    last = bearer(c, "Spy3")
    again = c.post("/api/create/task", headers=last).json()["task"]
    assert again["images"] == task["images"]  # the first set again, to another spymaster
    assert create(last, again, "DOG\u02bcS") == 409  # one cue per set, by TR39 skeleton
    assert create(last, again, "cat") == 200

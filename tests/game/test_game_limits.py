"""The game's HTTP layer under attack (issue 24): join-code guessing and account floods are
throttled per client address and per join code (429 + Retry-After), re-joining resets no limit,
oversized bodies are refused without being read whole (the real server's memory stays flat), and
type-confused JSON fields are refused instead of coerced. Every refused request does no work:
nothing is stored and the game's state is unchanged."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from starlette.testclient import TestClient

from gavil.game.launch import build_game
from gavil.game.rival import Rival
from gavil.game.web import MAX_BODY, create_app
from gavil.params import Params
from tests.helpers import ROOT, game_project

NO_RIVAL = Rival("no_weights", "No rival model: the RN50 weights are not available.")
CODE = "letmein"


def params(**game) -> Params:
    """The throttles are the same in both identity modes; these tests join with one shared code
    (an invitation is a code too: guessing invitations meets the same per-address and per-code limits)."""
    return Params().replace(models={"rival": {"allow_download": False}}, game={"identity": "shared_code", **game})


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.setenv("GAVIL_GAME_JOIN_CODE", CODE)
    monkeypatch.setenv("GAVIL_GAME_ADMIN_TOKEN", "admin-secret")
    return game_project(tmp_path)


class App:
    """One app (one game, one set of throttles) reached from any number of client addresses."""

    def __init__(self, project: Path, p: Params) -> None:
        game, images = build_game(p, project, NO_RIVAL, ask_consent=False)
        self.app = create_app(game, images)
        self.store = project / "data/game/game.sqlite"

    def at(self, address: str) -> TestClient:
        return TestClient(self.app, client=(address, 50000))

    def count(self, table: str) -> int:
        return sqlite3.connect(self.store).execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def join(c: TestClient, name: str, code: str = CODE) -> httpx.Response:
    return c.post("/api/join", json={"code": code, "name": name})


def bearer(r: httpx.Response) -> dict[str, str]:
    assert r.status_code == 200, r.text
    return {"Authorization": f"Bearer {r.json()['token']}"}


def create(c: TestClient, h: dict[str, str], cue: str, selection: list[int]) -> httpx.Response:
    task = c.post("/api/create/task", headers=h).json()["task"]
    return c.post("/api/create", headers=h, json={"task_id": task["task_id"], "cue": cue, "selection": selection})


def assert_throttled(r: httpx.Response, window_s: int) -> None:
    assert r.status_code == 429, r.text
    wait = r.headers["retry-after"]
    assert wait.isdigit() and 1 <= int(wait) <= window_s, wait
    assert f"try again in {wait} s" in r.json()["error"]


# ------------------------------------------------------------------------------ throttles
def test_join_code_guesses_from_one_address_are_throttled(project):
    app = App(project, params(join_limit_per_address="10/minute"))
    attacker = app.at("203.0.113.7")
    replies = [join(attacker, f"G{i}", code=f"guess-{i}") for i in range(200)]
    assert [r.status_code for r in replies[:10]] == [403] * 10
    for r in replies[10:]:
        assert_throttled(r, 60)
    right = join(attacker, "Sneaky")  # the limit comes before the code check: the right code gets no answer
    assert_throttled(right, 60)
    assert app.count("players") == 0
    assert join(app.at("198.51.100.2"), "Honest").status_code == 200  # another address is not locked out


def test_join_attempts_with_one_code_are_throttled_across_addresses(project):
    app = App(project, params(join_limit_per_code="5/minute"))
    for i in range(5):
        assert join(app.at(f"10.0.0.{i}"), f"P{i}").status_code == 200
    assert_throttled(join(app.at("10.0.0.99"), "P99"), 60)  # a fresh address does not reset a code's limit
    assert join(app.at("10.0.0.98"), "P98", code="other-code").status_code == 403  # other codes are counted apart
    assert app.count("players") == 5


def test_an_account_flood_from_one_address_stops_at_the_default_limit(project):
    app = App(project, params())  # the params.yaml defaults
    per_minute = int(Params().game.join_limit_per_address.split("/")[0])
    c = app.at("203.0.113.9")
    replies = [join(c, f"Bot{i}") for i in range(200)]
    assert [r.status_code for r in replies[:per_minute]] == [200] * per_minute
    for r in replies[per_minute:]:
        assert_throttled(r, 3600)
    assert app.count("players") == per_minute


def test_joining_again_does_not_reset_the_submission_limits(project):
    app = App(project, params(submission_limit_per_address="3/minute", submissions_per_minute=100))
    c = app.at("203.0.113.10")
    first = bearer(join(c, "Spy"))
    for cue in ("Space", "night", "Earth"):
        assert create(c, first, cue, [0, 1]).status_code == 200
    assert_throttled(create(c, first, "ocean", [0, 1]), 60)
    again = bearer(join(c, "Spy2"))  # a new account, a new session token: the same address
    assert_throttled(create(c, again, "ocean", [0, 1]), 60)
    assert app.count("creations") == 3
    other = app.at("198.51.100.3")
    assert create(other, bearer(join(other, "Elsewhere")), "ocean", [0, 1]).status_code == 200


def test_an_account_moving_address_keeps_its_submission_limit(project):
    app = App(project, params(submissions_per_minute=2))
    home = app.at("203.0.113.11")
    h = bearer(join(home, "Spy"))
    assert create(home, h, "Space", [0, 1]).status_code == 200
    assert create(app.at("203.0.113.12"), h, "night", [0, 1]).status_code == 200
    assert_throttled(create(app.at("203.0.113.13"), h, "Earth", [0, 1]), 60)
    assert app.count("creations") == 2


def test_rate_limits_are_checked_by_the_params_model():
    for bad in ("lots", "0/minute", "10/fortnight", "", "5/minute;;"):
        with pytest.raises(ValueError, match="is not a rate limit"):
            params(join_limit_per_address=bad)


# ------------------------------------------------------------------------------ typed bodies
TYPE_CONFUSED = [
    ("/api/admin/pause", {"paused": "false"}, "paused"),
    ("/api/admin/pause", {"paused": "true"}, "paused"),
    ("/api/admin/pause", {"paused": 0}, "paused"),
    ("/api/admin/pause", {"paused": 1}, "paused"),
    ("/api/admin/pause", {"paused": None}, "paused"),
    ("/api/admin/pause", {}, "paused"),
    ("/api/admin/pause", {"paused": True, "until": "never"}, "until"),
    ("/api/join", {"code": 12345, "name": "N"}, "code"),
    ("/api/join", {"code": [CODE], "name": "N"}, "code"),
    ("/api/join", {"code": CODE, "name": 7}, "name"),
    ("/api/join", {"code": CODE, "name": "N" * 10_000}, "name"),
    ("/api/join", {"code": CODE, "name": "N", "admin": True}, "admin"),
    ("/api/join", [CODE, "N"], "JSON object"),
    ("/api/join", "letmein", "JSON object"),
    ("/api/create", {"task_id": 1, "cue": "sky", "selection": [0, 1]}, "task_id"),
    ("/api/create", {"task_id": "t", "cue": ["sky"], "selection": [0, 1]}, "cue"),
    ("/api/create", {"task_id": "t", "cue": "sky", "selection": ["0", "1"]}, "positions"),
    ("/api/create", {"task_id": "t", "cue": "sky", "selection": [0.0, 1.0]}, "positions"),
    ("/api/create", {"task_id": "t", "cue": "sky", "selection": [True, False]}, "positions"),
    ("/api/create", {"task_id": "t", "cue": "sky", "selection": "0,1"}, "positions"),
    ("/api/create", {"task_id": "t", "cue": "sky", "selection": {"0": 1}}, "positions"),
    ("/api/create", {"task_id": "t", "cue": "sky", "selection": list(range(2000))}, "selection"),
    ("/api/solve", {"lease_id": 5, "selection": [0, 1]}, "lease_id"),
    ("/api/solve", {"lease_id": "gl_1", "selection": [[0], [1]]}, "positions"),
]


@pytest.mark.parametrize(("path", "body", "named"), TYPE_CONFUSED)
def test_type_confused_fields_are_refused_not_coerced(project, path, body, named):
    app = App(project, params())
    c = app.at("203.0.113.20")
    h = {**bearer(join(c, "Spy")), "X-Admin-Token": "admin-secret"}
    r = c.post(path, headers=h, json=body)
    assert r.status_code == 400, r.text
    assert named in r.json()["error"], r.text
    assert c.get("/api/status").json()["paused"] is False
    assert (app.count("players"), app.count("creations"), app.count("solves")) == (1, 0, 0)


def test_the_admin_pause_takes_json_booleans(project):
    c = App(project, params()).at("127.0.0.1")
    admin = {"X-Admin-Token": "admin-secret"}
    assert c.post("/api/admin/pause", headers=admin, json={"paused": True}).json() == {"paused": True}
    assert c.post("/api/admin/pause", headers=admin, json={"paused": False}).json() == {"paused": False}


# ------------------------------------------------------------------------------ body size, real server
@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[tuple[int, psutil.Process]]:
    """`gavil game` (uvicorn on 127.0.0.1) over a scratch project: its port and process."""
    project = game_project(tmp_path_factory.mktemp("game"))
    (project / "params.yaml").write_text(
        (ROOT / "params.yaml").read_text().replace("allow_download: true", "allow_download: false")
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GAVIL_GAME_JOIN_CODE": CODE, "GAVIL_GAME_ADMIN_TOKEN": "a"}
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
        yield port, psutil.Process(proc.pid)
    finally:
        proc.kill()
        proc.wait()


BIG = 64 * 2**20


def send_body(port: int, chunked: bool, send: int, path: str = "/api/join") -> tuple[bytes, int]:
    """POST ``path`` announcing a 64 MB body (Content-Length or chunked), sending ``send`` bytes of
    it from another thread while this one waits for the reply; the reply's first bytes, and how
    many body bytes were sent before the server answered or closed."""
    sock = socket.create_connection(("127.0.0.1", port))
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    head += "Transfer-Encoding: chunked\r\n\r\n" if chunked else f"Content-Length: {BIG}\r\n\r\n"
    sock.sendall(head.encode())
    sent = [0]

    def pour() -> None:
        piece = b" " * 65536
        try:
            while sent[0] < send:
                sock.sendall(b"10000\r\n" + piece + b"\r\n" if chunked else piece)
                sent[0] += len(piece)
            if chunked and send >= BIG:
                sock.sendall(b"0\r\n\r\n")
        except OSError:  # the server closed the connection after refusing: the point
            pass

    writer = threading.Thread(target=pour)
    writer.start()
    sock.settimeout(60)
    try:
        reply = sock.recv(400)
    finally:
        writer.join()
        sock.close()
    return reply, sent[0]


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_64_mb_body_is_refused_without_being_read(server, chunked):
    port, proc = server
    httpx.get(f"http://127.0.0.1:{port}/api/status")
    baseline = proc.memory_info().rss
    # the server answers although the client sends only 1 MB of the announced 64 MB and then waits:
    # it decided from Content-Length, or stopped reading at the cap
    reply, _ = send_body(port, chunked, send=2**20)
    assert reply.startswith(b"HTTP/1.1 413"), reply
    # the client pours all 64 MB: still refused, and the server never held it
    reply, sent = send_body(port, chunked, send=BIG)
    assert reply.startswith(b"HTTP/1.1 413"), reply
    assert sent < BIG  # the server closed the connection instead of swallowing the rest
    grew = proc.memory_info().rss - baseline
    assert grew < 8 * 2**20, f"the server's memory grew by {grew / 2**20:.1f} MB"
    assert httpx.get(f"http://127.0.0.1:{port}/api/status").status_code == 200


def test_a_content_length_over_the_cap_is_refused_before_any_byte(server):
    port, _ = server
    reply, _ = send_body(port, chunked=False, send=0)
    assert reply.startswith(b"HTTP/1.1 413"), reply
    assert b"connection: close" in reply.lower()


def test_a_body_just_over_the_cap_is_refused_and_at_the_cap_is_read(server):
    port, _ = server
    url = f"http://127.0.0.1:{port}/api/join"
    over = httpx.post(url, content=b"{" + b" " * (MAX_BODY - 1) + b"}")
    assert over.status_code == 413
    at = httpx.post(url, content=b"{" + b" " * (MAX_BODY - 2) + b"}")
    assert at.status_code == 400 and "code" in at.json()["error"]  # read and parsed: fields missing

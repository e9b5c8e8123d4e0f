"""The game served from several processes on one store (``gavil game --workers 2``): the real
server on 127.0.0.1, two keep-alive clients each held by a different worker process (told apart by
the pid ``GET /api/admin/stats`` reports), and what must hold across processes does: a rate limit
trips at its configured total, not per process; the last place of an association cannot be leased
twice; a pause set through one process and a round closed in the store stop submissions through
the other."""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from gavil.game.rounds import close_round
from gavil.gamestore.limits import SharedWindows, limits_file
from tests.helpers import ROOT, game_project

CODE, ADMIN = "letmein", "the-admin-secret"
UNAUTHENTICATED = 6  # game.unauthenticated_limit_per_address: 6/minute, the total across both processes


def _project(tmp: Path) -> Path:
    project = game_project(tmp)
    p = yaml.safe_load((ROOT / "params.yaml").read_text())
    p["models"]["rival"]["allow_download"] = False
    p["select"]["min_solvers"] = 1  # one counted answer completes an association: one place to lease
    p["game"] |= {
        "identity": "shared_code",
        "workers": 2,
        "admin_failure_delay_s": 0.0,
        "admin_limit_per_address": "1000/minute",
        "admin_limit_global": "1000/minute",
        "unauthenticated_limit_per_address": f"{UNAUTHENTICATED}/minute",
    }
    (project / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    consent = p["game"].get("consent_path")  # the text players accept, where the game asks for one
    if consent and (ROOT / consent).is_file():
        (project / consent).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / consent, project / consent)
    return project


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    project = _project(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GAVIL_GAME_JOIN_CODE": CODE, "GAVIL_GAME_ADMIN_TOKEN": ADMIN}
    log = tmp_path / "server.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gavil.cli", "game", "--port", str(port)],
        cwd=project,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(900):
            try:
                if httpx.get(f"{base}/api/status", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                if proc.poll() is not None:
                    pytest.fail(log.read_text())
                time.sleep(0.2)
        else:
            pytest.fail("the game server did not start")
        yield base, project
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert "Traceback" not in log.read_text(errors="replace"), log.read_text()


def pid(c: httpx.Client) -> int:
    r = c.get("/api/admin/stats", headers={"X-Admin-Token": ADMIN})
    assert r.status_code == 200, r.text
    assert r.json()["gc_frozen"] > 100_000, r.json()  # each worker froze its start-up heap (settle_heap)
    return int(r.json()["pid"])


def one_client_per_process(base: str) -> tuple[httpx.Client, httpx.Client, list[httpx.Client]]:
    """Two clients whose kept-alive connections are served by two different worker processes (new
    connections until the second process takes one: both wait on the same listening socket)."""
    opened: list[httpx.Client] = []
    by_pid: dict[int, httpx.Client] = {}
    deadline = time.monotonic() + 120  # the second worker may still be loading
    while len(by_pid) < 2 and time.monotonic() < deadline:
        c = httpx.Client(base_url=base, timeout=30)
        opened.append(c)
        by_pid.setdefault(pid(c), c)
        if len(opened) % 20 == 0:
            time.sleep(1)
    assert len(by_pid) == 2, "every connection went to one process"
    a, b = by_pid.values()
    return a, b, opened


def join(c: httpx.Client, name: str) -> dict[str, str]:
    """A new player's session header, their consent given where the game asks for it."""
    r = c.post("/api/join", json={"code": CODE, "name": name})
    assert r.status_code == 200, r.text
    h = {"Authorization": f"Bearer {r.json()['token']}"}
    asked = c.get("/api/consent", headers=h)
    if asked.status_code == 200 and not asked.json()["accepted"]:
        given = c.post("/api/consent", headers=h, json={"version": asked.json()["version"]})
        assert given.status_code == 200, given.text
    return h


def test_shared_windows_count_every_process_and_say_how_long_to_wait(tmp_path, monkeypatch):
    import gavil.gamestore.limits as limits

    clock = [1000.0]
    monkeypatch.setattr(limits.time, "time", lambda: clock[0])
    path = limits_file(tmp_path / "game.sqlite")
    one, two = SharedWindows(path, 3600), SharedWindows(path, 3600)  # as two processes open it
    rule = [(3, 60.0), (4, 3600.0)]
    assert one.hit("read", "p1", rule) is None
    clock[0] += 10
    assert two.hit("read", "p1", rule) is None
    assert one.hit("read", "p1", rule) is None
    assert two.hit("read", "p1", rule) == (0, 50)  # the first hit leaves the minute's window at 1060
    assert one.hit("read", "p2", rule) is None  # another key has its own window
    clock[0] = 1060.0
    assert two.hit("read", "p1", rule) is None  # the first hit has left the minute's window
    clock[0] = 1200.0
    assert one.hit("read", "p1", rule) == (1, 3400)  # four in the hour; the refused ones were not counted
    one.close()
    two.close()


@pytest.mark.slow
def test_two_worker_processes_share_limits_leases_pause_and_rounds(server):
    base, project = server
    a, b, opened = one_client_per_process(base)
    assert limits_file(project / "data/game/game.sqlite").is_file()
    try:
        # a rate limit trips at its total across the processes: requests alternate between them
        codes = [(a if i % 2 else b).get("/api/me").status_code for i in range(UNAUTHENTICATED + 2)]
        assert codes == [401] * UNAUTHENTICATED + [429, 429], codes
        assert pid(a) != pid(b)  # each request above went over its client's kept connection

        # the last place of an association is leased once, whichever process is asked
        spy = join(a, "Spy")
        task = a.post("/api/create/task", headers=spy).json()["task"]
        made = a.post(
            "/api/create", headers=spy, json={"task_id": task["task_id"], "cue": "space", "selection": [0, 1]}
        )
        assert made.status_code == 200, made.text
        x, y = join(a, "Xena"), join(b, "Yann")
        got: dict[str, object] = {}
        start = threading.Barrier(2)

        def ask(name: str, c: httpx.Client, h: dict[str, str]) -> None:
            start.wait()
            got[name] = c.post("/api/solve/task", headers=h).json()["task"]

        threads = [threading.Thread(target=ask, args=args) for args in (("x", a, x), ("y", b, y))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(v is None for v in got.values()) == [False, True], got
        store = project / "data/game/game.sqlite"
        assert sqlite3.connect(store).execute("SELECT COUNT(*) FROM leases").fetchone()[0] == 1

        # a pause set through one process holds in the other (read again at most once a second)
        assert a.post("/api/admin/pause", headers={"X-Admin-Token": ADMIN}, json={"paused": True}).status_code == 200
        time.sleep(1.2)
        second = {"task_id": task["task_id"], "cue": "orbit", "selection": [0, 2]}  # the task's second cue
        paused = b.post("/api/create", headers=spy, json=second)
        assert paused.status_code == 503 and "paused" in paused.json()["error"], paused.text
        assert b.get("/api/status").json()["paused"] is True
        assert a.post("/api/admin/pause", headers={"X-Admin-Token": ADMIN}, json={"paused": False}).status_code == 200

        # a round closed in the store is closed for every process
        close_round(store)
        time.sleep(1.2)  # the pause lifted above is seen again by both
        for c in (a, b):
            refused = c.post("/api/create", headers=spy, json=second)
            assert refused.status_code == 503 and "paused" not in refused.json()["error"], refused.text
            assert c.get("/api/status").json()["round"] is None
    finally:
        for c in opened:
            c.close()

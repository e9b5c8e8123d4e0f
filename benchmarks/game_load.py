"""The collection game under a crowd (issue 49): locust players against the real server.

For each row (default 100, 500 and 1,000 players; a fresh copy of the sample's game project
with round 1 open and a fresh ``gavil game`` process each), a headless locust crowd
(``FastHttpUser``, gevent, one process on the same CPU as the server) plays: every player joins
with their own invitation (issued up front in one admin call) and accepts the consent text where
the game asks for one, then loops: reserve a creation
task (``POST /api/create/task``) and submit a cue (``POST /api/create``), or, when creation work
is gone or at random, lease a solve task (``POST /api/solve/task``) and answer it
(``POST /api/solve``); then thinks 2-4 s. Players spawn over ``--ramp`` seconds.

Measured per request kind: p50/p95/p99 (client-side wall time, ms), replies by status; the 503s of
admission control (``Retry-After``: the player waits that long) apart from errors; acknowledged
writes (creation ids, answered lease ids) against the rows in the store after the server is
killed with SIGKILL (lost: acknowledged but absent); tracebacks in the server's log; the 1-min
load average before and at the end of each row. Throttles are raised (every player comes from
127.0.0.1) so only capacity is measured. The rival has random weights (labelled untrained) and
runs in the game's background thread, as in production.

Usage: python benchmarks/game_load.py [--players 100,500,1000] [--seconds 40] [--ramp 10] [--workers 1]
(``--workers N``: ``gavil game --workers N``, N server processes on one store; ``--no-rival``: no
rival model, to see its share). The machine is
not reserved: the 1-min load average before and at the end of each row says what else ran.
Writes benchmarks/results/game_load.json (``--tag T``: game_load_T.json) and prints a table.
The floor (the same writes without HTTP): benchmarks/game_floor.py.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

JOIN_CODE = "bench"
ADMIN = "bench-admin"
KINDS = ("join", "create_task", "create", "solve_task", "solve")
TARGET_P95_MS, TARGET_P99_MS = 100, 500
RAISED = "1000000/minute"


def make_project(tmp: Path, rival: bool = True) -> Path:
    """The sample's game project (three candidate sets, round 1 open) with every throttle raised;
    the rival with random weights, or none (``rival`` false: creations are not scored)."""
    import yaml

    from tests.helpers import game_project

    root = game_project(tmp)
    p = yaml.safe_load((ROOT / "params.yaml").read_text())
    p["models"]["rival"]["allow_download"] = False
    g = p["game"]
    g["rival_random_weights"] = rival
    g["submissions_per_minute"] = 1_000_000
    for key in list(g):
        if key.endswith(("_limit_per_address", "_limit_per_code", "_limit_per_account", "_limit_global")):
            g[key] = RAISED
    (root / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    consent = g.get("consent_path")  # the text players accept before any work, where the game asks for one
    if consent and (ROOT / consent).is_file():
        (root / consent).parent.mkdir(parents=True, exist_ok=True)
        (root / consent).write_bytes((ROOT / consent).read_bytes())
    return root


def start_server(root: Path, log: Path, workers: int = 1) -> tuple[subprocess.Popen[bytes], str]:
    """``gavil game --workers N`` on a free 127.0.0.1 port, stderr to ``log``; waits until each of
    its processes answers (a crowd arriving earlier would keep all its connections on the first)."""
    import httpx

    from benchmarks._common import tool_env

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "gavil.cli", "game", "--port", str(port), "--workers", str(workers)]
    env = tool_env(PYTHONPATH=str(ROOT), GAVIL_GAME_JOIN_CODE=JOIN_CODE, GAVIL_GAME_ADMIN_TOKEN=ADMIN)
    proc = subprocess.Popen(
        cmd, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=log.open("wb"), start_new_session=True
    )
    base = f"http://127.0.0.1:{port}"
    pids: set[int] = set()
    for _ in range(1200):  # until every worker process answers (new connections each), at most 4 min
        try:
            r = httpx.get(f"{base}/api/admin/stats", headers={"X-Admin-Token": ADMIN}, timeout=1)
            pids.add(r.json()["pid"])
            if len(pids) == workers:
                return proc, base
        except httpx.HTTPError:
            if proc.poll() is not None:
                break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    raise SystemExit(log.read_text() or "server did not start")


def invitations(base: str, n: int) -> list[str]:
    """``n`` single-use invitation codes (admin calls of at most 1,000 each)."""
    import httpx

    codes: list[str] = []
    while len(codes) < n:
        r = httpx.post(
            f"{base}/api/admin/invitations",
            json={"count": min(1000, n - len(codes))},
            headers={"X-Admin-Token": ADMIN},
            timeout=60,
        )
        r.raise_for_status()
        codes += r.json()["codes"]
    return codes


# ------------------------------------------------------------------------------ the crowd (child process)
def _recorder(raw: dict[str, Any]) -> Any:
    """locust's request listener that files each reply into ``raw``: its time (ms) by request kind,
    its status code counted by kind (0: the request never got a reply, kept as a transport error)."""

    def on_request(
        request_type: str, name: str, response_time: float, response: Any, exception: Any, **kw: Any
    ) -> None:
        code = str(getattr(response, "status_code", 0) or 0)
        counts = raw["status"].setdefault(name, {})
        counts[code] = counts.get(code, 0) + 1
        if code == "0":
            raw["transport_errors"].append(f"{name}: {exception!r}"[:200])
        else:
            raw["times"].setdefault(name, []).append(response_time)

    return on_request


def player_class(base: str, codes: list[str], raw: dict[str, Any]) -> Any:
    """The crowd's locust user at ``base``: joins with one of ``codes`` (popped), accepts the consent
    text, then creates or solves, thinking 2-4 s; acknowledged writes are appended to ``raw``."""
    import gevent
    from locust import FastHttpUser, between, task

    class Player(FastHttpUser):
        host = base
        wait_time = between(2, 4)
        network_timeout = connection_timeout = 60.0

        def on_start(self) -> None:
            self.rng = random.Random()
            self.me: dict[str, str] = {}
            self.creating = True
            if codes:
                body = {"code": codes.pop(), "name": f"player{len(codes)}"}
                for _ in range(20):  # a join refused as busy (503) is tried again after its Retry-After
                    got = self._post("/api/join", "join", body)
                    if got:
                        self.me = {"Authorization": f"Bearer {got['token']}"}
                        self._consent()
                        break

        def _consent(self) -> None:
            """Accept the consent text where the game asks for one (``consent``: not a measured kind)."""
            for _ in range(20):  # a request refused as busy (503) is tried again after its Retry-After
                r = self.client.get("/api/consent", headers=self.me, name="consent")
                if r.status_code == 503:
                    gevent.sleep(min(10.0, float(r.headers.get("Retry-After", "1"))))
                    continue
                if r.status_code != 200 or r.json()["accepted"]:
                    return
                self._post("/api/consent", "consent", {"version": r.json()["version"]})

        def _post(self, path: str, name: str, body: Any = None) -> Any:
            r = self.client.post(path, json=body, headers=self.me, name=name)
            if r.status_code == 503 and r.headers.get("Retry-After"):
                gevent.sleep(min(10.0, float(r.headers["Retry-After"])))
            return r.json() if r.status_code == 200 else None

        @task
        def play(self) -> None:
            if not self.me:
                return
            if self.creating and self.rng.random() < 0.5 and self._create():
                return
            self._solve()

        def _create(self) -> bool:
            got = self._post("/api/create/task", "create_task")
            if not got or got["task"] is None:
                self.creating = got is None  # no creation work left for this player: solve from now on
                return False
            t = got["task"]
            cue = "p" + "".join(self.rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(10))
            sel = self.rng.sample(range(len(t["images"])), self.rng.randint(t["k_min"], t["k_max"]))
            done = self._post("/api/create", "create", {"task_id": t["task_id"], "cue": cue, "selection": sel})
            if done:
                raw["acks_create"].append(done["instance_id"])
            return True

        def _solve(self) -> None:
            got = self._post("/api/solve/task", "solve_task")
            if not got or got["task"] is None:
                return
            t = got["task"]
            sel = self.rng.sample(range(len(t["images"])), t["k"])
            if self._post("/api/solve", "solve", {"lease_id": t["lease_id"], "selection": sel}):
                raw["acks_solve"].append(t["lease_id"])

    return Player


def crowd(config: Path) -> None:
    """Run the locust crowd described in ``config`` (JSON: base, codes, seconds, ramp, out) and write
    the raw measurements to ``out``. Runs in its own process: locust patches the standard library
    (gevent)."""
    import gevent
    from locust import events
    from locust.env import Environment

    cfg = json.loads(config.read_text())
    codes: list[str] = list(cfg["codes"])
    raw: dict[str, Any] = {"times": {k: [] for k in KINDS}, "status": {k: {} for k in KINDS}}
    raw |= {"acks_create": [], "acks_solve": [], "transport_errors": []}
    events.request.add_listener(_recorder(raw))
    Player = player_class(cfg["base"], codes, raw)
    env = Environment(user_classes=[Player], events=events)
    runner = env.create_local_runner()
    users = len(codes)
    runner.start(users, spawn_rate=max(1.0, users / cfg["ramp"]))
    gevent.sleep(cfg["seconds"])
    runner.quit()
    Path(cfg["out"]).write_text(json.dumps(raw))


# ------------------------------------------------------------------------------ one row
def pct(ms: list[float]) -> dict[str, Any]:
    """p50/p95/p99/max in ms (None when empty) and the count."""
    import numpy as np

    if not ms:
        return {"n": 0, "p50_ms": None, "p95_ms": None, "p99_ms": None, "max_ms": None}
    a = np.asarray(ms)
    q = {f"p{p}_ms": round(float(np.percentile(a, p)), 1) for p in (50, 95, 99)}
    return {"n": len(ms), **q, "max_ms": round(float(a.max()), 1)}


def stored(db: Path) -> tuple[set[str], set[str]]:
    """(creation instance ids, answered lease ids) in the store."""
    con = sqlite3.connect(db)
    try:
        creations = {r[0] for r in con.execute("SELECT instance_id FROM creations")}
        solves = {r[0] for r in con.execute("SELECT lease_id FROM solves WHERE lease_id IS NOT NULL")}
    finally:
        con.close()
    return creations, solves


def load_row(players: int, seconds: float, ramp: float, workers: int = 1, rival: bool = True) -> dict[str, Any]:
    """One row: a fresh project and server (``workers`` processes), ``players`` locust players for
    ``seconds`` (ramp included)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = make_project(Path(tmp), rival)
        log = Path(tmp) / "server.log"
        proc, base = start_server(root, log, workers)
        try:
            codes = invitations(base, players)
            cfg, out = Path(tmp) / "crowd.json", Path(tmp) / "raw.json"
            cfg.write_text(
                json.dumps({"base": base, "codes": codes, "seconds": seconds, "ramp": ramp, "out": str(out)})
            )
            load_before = os.getloadavg()[0]
            subprocess.run([sys.executable, __file__, "--crowd", str(cfg)], check=True, timeout=seconds + 300)
            load_end = os.getloadavg()[0]
        finally:
            os.killpg(proc.pid, signal.SIGKILL)  # as a crash: every acknowledged write must be in the store
            proc.wait()
        raw = json.loads(out.read_text())
        creations, solves = stored(root / "data/game/game.sqlite")
        server_log = log.read_text(errors="replace")
    lost = [i for i in raw["acks_create"] if i not in creations] + [x for x in raw["acks_solve"] if x not in solves]
    statuses = {k: raw["status"][k] for k in KINDS}
    errors = {k: {c: n for c, n in s.items() if c not in ("200", "503")} for k, s in statuses.items()}
    return {
        "players": players,
        "workers": workers,
        "rival": "random weights" if rival else "none",
        "seconds": seconds,
        "ramp_s": ramp,
        "load_average_1min_before": round(load_before, 2),
        "load_average_1min_end": round(load_end, 2),
        "latency": {k: pct(raw["times"][k]) for k in KINDS},
        "status": statuses,
        "refused_503": sum(s.get("503", 0) for s in statuses.values()),
        "errors": {k: v for k, v in errors.items() if v},
        "transport_error_examples": raw["transport_errors"][:5],
        "writes_acknowledged": len(raw["acks_create"]) + len(raw["acks_solve"]),
        "writes_per_s": round((len(raw["acks_create"]) + len(raw["acks_solve"])) / seconds, 1),
        "creations_stored": len(creations),
        "solves_stored": len(solves),
        "lost": len(lost),
        "server_tracebacks": server_log.count("Traceback"),
    }


def verdict(row: dict[str, Any]) -> str:
    """``ok`` when every kind meets p95 <= 100 ms and p99 <= 500 ms, nothing is lost and no 5xx
    but 503 is an error; else what missed."""
    miss = [
        k for k, m in row["latency"].items() if m["n"] and (m["p95_ms"] > TARGET_P95_MS or m["p99_ms"] > TARGET_P99_MS)
    ]
    bad = [f"{k} {c}" for k, s in row["errors"].items() for c in s if c.startswith("5") or c == "0"]
    return (
        "ok"
        if not (miss or bad or row["lost"])
        else "MISSED " + ", ".join(miss + bad + ([f"lost {row['lost']}"] if row["lost"] else []))
    )


def report(rows: list[dict[str, Any]]) -> None:
    print(f"{'players':>7} {'workers':>7} {'request':12} {'n':>6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}  statuses")
    for row in rows:
        for k in KINDS:
            m = row["latency"][k]
            print(
                f"{row['players']:>7} {row['workers']:>7} {k:12} {m['n']:>6} {m['p50_ms']!s:>8} {m['p95_ms']!s:>8} {m['p99_ms']!s:>8}  "
                f"{row['status'][k]}"
            )
        print(
            f"{row['players']:>7} {row['workers']:>7} {row['writes_per_s']} writes/s acknowledged, lost {row['lost']}, "
            f"503 {row['refused_503']}, errors {row['errors'] or 0}, tracebacks {row['server_tracebacks']}, "
            f"load {row['load_average_1min_before']} -> {row['load_average_1min_end']}: {verdict(row)}"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--players", default="100,500,1000", help="comma-separated player counts, one row each")
    ap.add_argument("--seconds", type=float, default=40, help="crowd time per row, ramp included")
    ap.add_argument("--ramp", type=float, default=10, help="seconds over which the players arrive")
    ap.add_argument("--workers", type=int, default=1, help="server processes (gavil game --workers)")
    ap.add_argument("--no-rival", action="store_true", help="no rival model (creations not scored): its share")
    ap.add_argument("--tag", default="", help="write game_load_<tag>.json instead")
    ap.add_argument("--crowd", type=Path, help=argparse.SUPPRESS)  # internal: the locust child process
    args = ap.parse_args()
    if args.crowd:
        return crowd(args.crowd)
    from benchmarks._common import machine, write_result

    rows = [load_row(int(n), args.seconds, args.ramp, args.workers, not args.no_rival) for n in args.players.split(",")]
    result = {
        "machine": machine("gavil game (uvicorn) + a locust crowd (one process) on the same CPU"),
        "shared_machine": "not reserved: other work ran on the same cores; see each row's load averages",
        "command": "python benchmarks/game_load.py " + " ".join(sys.argv[1:]),
        "think_s": [2, 4],
        "targets": {"p95_ms": TARGET_P95_MS, "p99_ms": TARGET_P99_MS, "lost": 0, "server_errors": 0},
        "rows": rows,
    }
    for row in rows:
        row["verdict"] = verdict(row)
    dest = write_result("game_load" + (f"_{args.tag}" if args.tag else ""), result)
    report(rows)
    print(f"wrote {dest}")


if __name__ == "__main__":
    main()

"""The collection game under load (issue 24), against the real server (`gavil game`, a separate
process, uvicorn on 127.0.0.1) over HTTP.

For each row (default 20 and 60 concurrent players, a fresh project and server each): every
player joins, then loops until the time is up, with a random think time before each step:
``GET /api/status``, a creation (``GET`` then ``POST /api/create``), a solve (``GET`` then
``POST /api/solve``), ``GET /api/leaderboard``. Measured: p50/p95 wall time of each request kind,
errors (any non-200 answer; creation tasks run out after 3 sets x 2 cues per player and are then
skipped, not errors). At the end the server is killed with SIGKILL, as a crash: every
acknowledged submission must be in the store (0 lost), none twice.
Targets: create p95 <= 300 ms, status and leaderboard p95 <= 50 ms, on this 2-core CPU.

The rival runs with random weights (``game.rival_random_weights``, labelled untrained): weights
do not change speed. The sample's 11 images in 3 candidate sets (tests/helpers.py game_project).
The throttles are raised (every simulated player comes from 127.0.0.1): ``submissions_per_minute``
600 and the ``*_limit_*`` rate limits 100000/minute. Also: the rival's ``predict`` alone,
in-process, one call after another (the floor of a creation's time while the rival runs inline).

The API steps that other changes may reshape are one function each: :func:`join` (how a player
gets a session), :func:`solve_body` (what a solve answer carries besides the selection).
Usage: python benchmarks/game.py [--players 20,60] [--seconds 30] [--think 0.2,1.0]
Writes benchmarks/results/game.json and prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import letters, machine, tool_env, write_result  # noqa: E402
from tests.helpers import game_project  # noqa: E402

JOIN_CODE = "bench"
ADMIN = "bench-admin"
KINDS = ("status", "create_task", "create", "solve_task", "solve", "leaderboard")
TARGETS_MS = {"create": 300, "status": 50, "leaderboard": 50}


def pct(xs: list[float]) -> dict[str, float | int | None]:
    """p50 / p95 in ms of durations in seconds (None when there are none) and their count."""
    if not xs:
        return {"p50_ms": None, "p95_ms": None, "n": 0}
    a = np.asarray(xs) * 1000
    return {
        "p50_ms": round(float(np.percentile(a, 50)), 1),
        "p95_ms": round(float(np.percentile(a, 95)), 1),
        "n": len(xs),
    }


def make_project(tmp: Path) -> Path:
    root = game_project(tmp)
    p = yaml.safe_load((ROOT / "params.yaml").read_text())
    p["models"]["rival"]["allow_download"] = False
    g = p["game"]
    g["rival_random_weights"] = True
    g["submissions_per_minute"] = 600
    for key in ("join_limit_per_address", "join_limit_per_code", "submission_limit_per_address"):
        if key in g:  # the throttles this benchmark's single client address would otherwise hit
            g[key] = "100000/minute"
    (root / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    return root


def start_server(root: Path) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "gavil.cli", "game", "--port", str(port)],
        cwd=root,
        env=tool_env(PYTHONPATH=str(ROOT), GAVIL_GAME_JOIN_CODE=JOIN_CODE, GAVIL_GAME_ADMIN_TOKEN=ADMIN),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(900):
        try:
            if httpx.get(f"{base}/api/status", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            if proc.poll() is not None:
                break
            time.sleep(0.2)
    proc.kill()
    raise SystemExit(proc.stderr.read().decode() if proc.stderr else "server did not start")


async def join(http: httpx.AsyncClient, name: str) -> dict[str, str]:
    """A new player's request headers. The one place that knows how a player gets a session."""
    # the default identity: one single-use invitation per person, issued by the operator
    inv = await http.post("/api/admin/invitations", json={"count": 1}, headers={"X-Admin-Token": ADMIN})
    inv.raise_for_status()
    r = await http.post("/api/join", json={"code": inv.json()["codes"][0], "name": name})
    r.raise_for_status()
    me = {"Authorization": f"Bearer {r.json()['token']}"}
    text = await http.get("/api/consent", headers=me)  # the consent text, accepted before any work
    text.raise_for_status()
    (await http.post("/api/consent", json={"version": text.json()["version"]}, headers=me)).raise_for_status()
    return me


def solve_body(task: dict[str, Any], selection: list[int]) -> dict[str, Any]:
    """The answer to a served solve ``task``: the lease the server issued with it (only served work counts)."""
    return {"lease_id": task["lease_id"], "selection": selection}


async def play(i: int, base: str, stop: float, think: tuple[float, float], out: dict[str, Any]) -> None:
    rng = random.Random(i)
    times: dict[str, list[float]] = out["times"]

    async def timed(kind: str, method: str, path: str, **kw: Any) -> httpx.Response | None:
        t0 = time.perf_counter()
        try:
            r = await http.request(method, path, **kw)
        except httpx.HTTPError as e:
            out["errors"].append(f"{kind}: {type(e).__name__}: {e}")
            return None
        times[kind].append(time.perf_counter() - t0)
        if r.status_code != 200:
            out["errors"].append(f"{kind} {r.status_code}: {r.text[:100]}")
            return None
        return r

    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        try:
            me = await join(http, f"player{i}")
        except httpx.HTTPError as e:
            out["errors"].append(f"join: {type(e).__name__}: {e}")
            return
        step = 0
        while time.monotonic() < stop:
            await asyncio.sleep(rng.uniform(*think))
            step += 1
            action = ("status", "create", "solve", "leaderboard")[step % 4]
            if action in ("status", "leaderboard"):
                await timed(action, "GET", f"/api/{action}", headers=me)
            elif action == "create":
                r = await timed("create_task", "POST", "/api/create/task", headers=me)
                task = r.json()["task"] if r else None
                if task is None:
                    continue
                k = rng.randint(task["k_min"], task["k_max"])
                body = {
                    "task_id": task["task_id"],
                    "cue": "p" + letters(i) + "c" + letters(step),
                    "selection": rng.sample(range(len(task["images"])), k),
                }
                r = await timed("create", "POST", "/api/create", headers=me, json=body)
                if r is not None:
                    out["acks_create"].append(r.json()["instance_id"])
            else:
                r = await timed("solve_task", "POST", "/api/solve/task", headers=me)
                task = r.json()["task"] if r else None
                if task is None:
                    continue
                sel = rng.sample(range(len(task["images"])), task["k"])
                r = await timed("solve", "POST", "/api/solve", headers=me, json=solve_body(task, sel))
                if r is not None:
                    out["acks_solve"].append((task["instance_id"], f"player{i}"))


def load_row(players: int, seconds: float, think: tuple[float, float]) -> dict[str, Any]:
    """One row: a fresh project and server, ``players`` concurrent players for ``seconds``."""
    with tempfile.TemporaryDirectory() as tmp:
        root = make_project(Path(tmp))
        proc, base = start_server(root)
        out: dict[str, Any] = {"times": {k: [] for k in KINDS}, "errors": [], "acks_create": [], "acks_solve": []}
        load_before = os.getloadavg()[0]
        try:

            async def main() -> None:
                stop = time.monotonic() + seconds
                await asyncio.gather(*(play(i, base, stop, think, out) for i in range(players)))

            asyncio.run(main())
        finally:
            proc.kill()  # SIGKILL, as a crash: the store must still hold every acknowledged row
            proc.wait()
        con = sqlite3.connect(root / "data/game/game.sqlite")
        stored_c = {r[0] for r in con.execute("SELECT instance_id FROM creations")}
        stored_s = [
            tuple(r)
            for r in con.execute(
                "SELECT s.instance_id, p.display_name FROM solves s JOIN players p ON p.player_id = s.solver_id"
            )
        ]
        con.close()
    lost = [k for k in out["acks_create"] if k not in stored_c] + [
        k for k in out["acks_solve"] if tuple(k) not in set(stored_s)
    ]
    return {
        "players": players,
        "seconds": seconds,
        "think_s": list(think),
        "load_average_1min_before": round(load_before, 2),
        "latency": {k: pct(v) for k, v in out["times"].items()},
        "creations_acknowledged": len(out["acks_create"]),
        "solves_acknowledged": len(out["acks_solve"]),
        "errors": len(out["errors"]),
        "error_examples": out["errors"][:5],
        "lost": len(lost),
        "duplicated_solves": len(stored_s) - len(set(stored_s)),
    }


def rival_alone(n: int) -> tuple[dict[str, Any], str]:
    from gavil.game.launch import game_sets
    from gavil.game.rival import load_rival
    from gavil.params import load_params

    with tempfile.TemporaryDirectory() as tmp:
        root = make_project(Path(tmp))
        sets, paths = game_sets(root)
        rival = load_rival(load_params(root / "params.yaml"), {s: str(p) for s, p in paths.items()})
        times = []
        for i in range(n):
            t0 = time.perf_counter()
            rival.predict(f"alone{i}", sets[-1].shas, 3)
            times.append(time.perf_counter() - t0)
    return pct(times), rival.status


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--players", default="20,60", help="comma-separated player counts, one row each")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--think", default="0.2,1.0", help="min,max seconds a player waits before each step")
    ap.add_argument("--rival-calls", type=int, default=50)
    args = ap.parse_args()
    lo, hi = (float(x) for x in args.think.split(","))
    alone, status = rival_alone(args.rival_calls)
    rows = [load_row(int(n), args.seconds, (lo, hi)) for n in args.players.split(",")]
    result = {
        "machine": machine("uvicorn server process + asyncio httpx clients on the same CPU"),
        "rival": f"RN50 random weights ({status}), 11 images cached",
        "targets_p95_ms": TARGETS_MS,
        "rival_predict_alone": alone,
        "rows": rows,
    }
    dest = write_result("game", result)
    print(f"rival predict alone: p50 {alone['p50_ms']} ms, p95 {alone['p95_ms']} ms (n={alone['n']}, {status})")
    print(f"{'players':>7} {'request':12} {'n':>5} {'p50 ms':>8} {'p95 ms':>8} {'target':>8}")
    for row in rows:
        for kind in KINDS:
            m = row["latency"][kind]
            target = TARGETS_MS.get(kind)
            verdict = "" if target is None or m["p95_ms"] is None else ("ok" if m["p95_ms"] <= target else "MISSED")
            print(
                f"{row['players']:>7} {kind:12} {m['n']:>5} {m['p50_ms']!s:>8} {m['p95_ms']!s:>8} "
                f"{'' if target is None else '<=' + str(target):>6} {verdict}"
            )
        print(
            f"{row['players']:>7} errors {row['errors']}, lost {row['lost']}, duplicated {row['duplicated_solves']}, "
            f"acknowledged {row['creations_acknowledged']} creations + {row['solves_acknowledged']} solves, "
            f"load average before {row['load_average_1min_before']}"
        )
    print(f"wrote {dest}")


if __name__ == "__main__":
    main()

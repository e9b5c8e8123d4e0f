"""The collection game under load (issue targets), against the real server (`gavil game`, a
separate process, uvicorn on 127.0.0.1) over HTTP:

1. Rival prediction latency after a submit: the wall time of ``POST /api/create`` (validation,
   one text embedding, a dot product with the cached image embeddings, the SQLite transaction)
   for distinct cues, one after another; and the rival's ``predict`` alone, in-process.
   Target: p95 < 300 ms on this 2-core CPU.
2. 50 simulated players for 60 s, each joining and then creating and solving with a random
   0.2-1.0 s think time: 0 errors, and every acknowledged submission in the store afterwards
   (0 lost), none twice.

Weights do not change speed: the rival runs with random weights (``game.rival_random_weights``,
labelled untrained). The sample's 11 images in 3 candidate sets (tests/helpers.py game_project);
``game.submissions_per_minute`` is raised to 600 so the simulated players' pace is not refused.
Usage: python benchmarks/game.py [--players 50] [--seconds 60] [--cues 200]
Writes benchmarks/results/game.json and prints a table.
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import letters, machine, tool_env, write_result  # noqa: E402
from tests.helpers import game_project  # noqa: E402


def pct(xs: list[float]) -> dict[str, float]:
    a = np.asarray(xs) * 1000
    return {
        "p50_ms": round(float(np.percentile(a, 50)), 1),
        "p95_ms": round(float(np.percentile(a, 95)), 1),
        "n": len(xs),
    }


def start_server(root: Path) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "stages.cli", "game", "--port", str(port)],
        cwd=root,
        env=tool_env(PYTHONPATH=str(ROOT), GAVIL_GAME_JOIN_CODE="bench", GAVIL_GAME_ADMIN_TOKEN="bench-admin"),
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(f"{base}/api/status", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit(proc.stderr.read().decode() if proc.stderr else "server did not start")


def join(http: httpx.Client, name: str) -> dict[str, str]:
    r = http.post("/api/join", json={"code": "bench", "name": name})
    r.raise_for_status()
    return {"Authorization": f"Bearer {r.json()['token']}"}


def latency(http: httpx.Client, n_cues: int) -> list[float]:
    """Wall time of n distinct creations (new players as the 3 sets x 2 cues run out)."""
    times: list[float] = []
    player = None
    while len(times) < n_cues:
        if player is None:
            player = join(http, f"lat{len(times)}")
        task = http.get("/api/create", headers=player).json()["task"]
        if task is None:
            player = None
            continue
        body = {"task_id": task["task_id"], "cue": "w" + letters(len(times)) + "x", "selection": [0, 1]}
        t0 = time.perf_counter()
        r = http.post("/api/create", headers=player, json=body)
        times.append(time.perf_counter() - t0)
        assert r.status_code == 200 and r.json()["rival"] is not None, r.text
    return times


def rival_alone(root: Path, n: int) -> tuple[list[float], str]:
    from stages._game import game_sets
    from stages._game.rival import load_rival
    from stages.config import load_params

    sets, paths = game_sets(root)
    rival = load_rival(load_params(root / "params.yaml"), {s: str(p) for s, p in paths.items()})
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        rival.predict(f"alone{i}", sets[-1].shas, 3)
        times.append(time.perf_counter() - t0)
    return times, rival.status


def load(base: str, players: int, seconds: float) -> dict:
    acks: dict[str, list] = {"create": [], "solve": []}
    errors: list[str] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def play(i: int) -> None:
        rng = random.Random(i)
        with httpx.Client(base_url=base, timeout=30) as http:
            try:
                me = join(http, f"player{i}")
            except httpx.HTTPError as e:
                with lock:
                    errors.append(f"join: {e}")
                return
            n = 0
            while time.monotonic() < stop:
                time.sleep(rng.uniform(0.2, 1.0))
                n += 1
                try:
                    if n % 2:
                        task = http.get("/api/create", headers=me).json()["task"]
                        if task is None:
                            continue
                        k = rng.randint(task["k_min"], task["k_max"])
                        sel = rng.sample(range(len(task["images"])), k)
                        body = {"task_id": task["task_id"], "cue": f"p{letters(i)}c{letters(n)}", "selection": sel}
                        r = http.post("/api/create", headers=me, json=body)
                        kind, key = "create", r.json().get("instance_id")
                    else:
                        task = http.get("/api/solve", headers=me).json()["task"]
                        if task is None:
                            continue
                        sel = rng.sample(range(len(task["images"])), task["k"])
                        r = http.post(
                            "/api/solve", headers=me, json={"instance_id": task["instance_id"], "selection": sel}
                        )
                        kind, key = "solve", (task["instance_id"], f"player{i}")
                    with lock:
                        if r.status_code == 200:
                            acks[kind].append(key)
                        else:
                            errors.append(f"{kind} {r.status_code}: {r.text[:100]}")
                except httpx.HTTPError as e:
                    with lock:
                        errors.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=play, args=(i,)) for i in range(players)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"acks": acks, "errors": errors}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--players", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--cues", type=int, default=200)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = game_project(Path(tmp))
        p = yaml.safe_load((ROOT / "params.yaml").read_text())
        p["score"]["allow_download"] = False
        p["game"]["rival_random_weights"] = True
        p["game"]["submissions_per_minute"] = 600
        (root / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
        loadavg = {"before": os.getloadavg()[0]}
        alone, status = rival_alone(root, args.cues)
        proc, base = start_server(root)
        try:
            with httpx.Client(base_url=base, timeout=30) as http:
                lat = latency(http, args.cues)
            loadavg["after_latency"] = os.getloadavg()[0]
            run = load(base, args.players, args.seconds)
            loadavg["after_load"] = os.getloadavg()[0]
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
    acks = run["acks"]
    lost_c = [k for k in acks["create"] if k not in stored_c]
    lost_s = [k for k in acks["solve"] if tuple(k) not in set(stored_s)]
    result = {
        "machine": machine("uvicorn server process + client threads on the same CPU"),
        "rival": f"RN50 random weights ({status}), 11 images cached",
        # 1-minute load averages: other jobs shared this 2-core CPU during the run
        "load_average_1min": {k: round(v, 2) for k, v in loadavg.items()},
        "rival_predict_alone": pct(alone),
        "submit_with_rival": pct(lat),
        "load": {
            "players": args.players,
            "seconds": args.seconds,
            "creations_acknowledged": len(acks["create"]),
            "solves_acknowledged": len(acks["solve"]),
            "errors": len(run["errors"]),
            "error_examples": run["errors"][:5],
            "lost": len(lost_c) + len(lost_s),
            "duplicated_solves": len(stored_s) - len(set(stored_s)),
        },
    }
    dest = write_result("game", result)
    print(f"{'measure':40s} {'value':>12s}")
    print(
        f"{'rival predict alone p50 / p95 (ms)':40s} {result['rival_predict_alone']['p50_ms']:>6} / {result['rival_predict_alone']['p95_ms']}"
    )
    print(
        f"{'submit with rival p50 / p95 (ms)':40s} {result['submit_with_rival']['p50_ms']:>6} / {result['submit_with_rival']['p95_ms']}"
    )
    for k, v in result["load"].items():
        if k != "error_examples":
            print(f"{'load: ' + k:40s} {v!s:>12s}")
    print(f"wrote {dest}")


if __name__ == "__main__":
    main()

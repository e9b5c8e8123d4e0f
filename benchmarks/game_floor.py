"""The floor under the game's load benchmark (issue 49): the store writes of a crowd, without HTTP.

The same store (the sample's game project, round 1 open), the same connection settings
(:func:`gavil.gamestore.store.connect`: WAL, ``synchronous=FULL``) and the same transactions
(:func:`gavil.gamestore.store.transaction`: ``BEGIN IMMEDIATE`` ... ``COMMIT``, then the checkpoint
when no other writer is queued), as one player's loop does them: a creation task reserved, a
creation stored, a lease issued, an answer stored with its lease consumed. Writers: 1 (each write
checkpointed, as on an idle server) and ``--threads`` (as the server's thread pool: writers queue,
and the last of a burst checkpoints). Reported: writes per second and per-write p50/p99 (ms):
the most writes/s one server process can acknowledge on this disk; benchmarks/game_load.py measures
how far the HTTP server is from it.

Usage: python benchmarks/game_floor.py [--seconds 10] [--threads 8]
Writes benchmarks/results/game_floor.json.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def one_loop(con: Any, pid: str, other: str, times: list[float]) -> None:
    """One player's writes (4 transactions), each timed into ``times`` (seconds)."""
    from gavil.gamestore.store import transaction

    now = time.time()
    tid, iid, lease = "gt_" + secrets.token_hex(8), "g_" + secrets.token_hex(8), secrets.token_urlsafe(18)
    cands = json.dumps(["a", "b", "c", "d", "e"])
    steps = [
        (
            "INSERT INTO tasks (task_id, set_id, spymaster_id, candidates, created_at) VALUES (?, ?, ?, ?, ?)",
            (tid, "set-" + tid, pid, cands, now),
        ),
        (
            "INSERT INTO creations (instance_id, task_id, spymaster_id, cue, cue_norm, content_key, candidates,"
            " associations, rival_status, created_at, rival_state, round) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (iid, tid, pid, "cue" + iid, "cue" + iid, iid, cands, '["a","b"]', "untrained", now, "done", 1),
        ),
        (
            "INSERT INTO leases (lease_id, instance_id, solver_id, issued_at, expires_at) VALUES (?, ?, ?, ?, ?)",
            (lease, iid, other, now, now + 600),
        ),
        (
            "INSERT INTO solves (instance_id, solver_id, selection, jaccard, created_at, lease_id)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (iid, other, '["a","b"]', 1.0, now, lease),
        ),
    ]
    for sql, args in steps:
        t0 = time.perf_counter()
        with transaction(con) as db:
            db.execute(sql, args)
            if sql.startswith("INSERT INTO solves"):
                db.execute("DELETE FROM leases WHERE lease_id = ?", (lease,))
        times.append(time.perf_counter() - t0)


def run(store: Path, threads: int, seconds: float) -> dict[str, Any]:
    """``threads`` writers looping :func:`one_loop` for ``seconds``; writes/s and per-write times."""
    import numpy as np

    from gavil.gamestore.store import connect, transaction

    setup = connect(store)
    pids = ["fp_" + secrets.token_hex(6) for _ in range(2 * threads)]
    with transaction(setup) as db:
        for p in pids:
            db.execute(
                "INSERT INTO players (player_id, token_hash, display_name, name_key, created_at, look_key)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (p, p, p, p, 0.0, p),
            )
    setup.close()
    per: list[list[float]] = [[] for _ in range(threads)]
    stop = time.monotonic() + seconds

    failed: list[BaseException] = []

    def writer(i: int) -> None:
        con = connect(store, create=False)
        try:
            while time.monotonic() < stop:
                one_loop(con, pids[2 * i], pids[2 * i + 1], per[i])
        except BaseException as e:  # re-raised below: a failed writer fails the benchmark
            failed.append(e)
        finally:
            con.close()

    t0 = time.perf_counter()
    ts = [threading.Thread(target=writer, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    if failed:
        raise failed[0]
    ms = np.asarray([x for p in per for x in p]) * 1000
    return {
        "threads": threads,
        "writes": len(ms),
        "writes_per_s": round(len(ms) / wall, 1),
        "p50_ms": round(float(np.percentile(ms, 50)), 2),
        "p99_ms": round(float(np.percentile(ms, 99)), 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--threads", type=int, default=8)
    args = ap.parse_args()
    from benchmarks._common import machine, write_result
    from tests.helpers import game_project

    rows = []
    for threads in (1, args.threads):
        with tempfile.TemporaryDirectory() as tmp:
            root = game_project(Path(tmp))
            load = os.getloadavg()[0]
            row = run(root / "data/game/game.sqlite", threads, args.seconds)
            rows.append({**row, "load_average_1min_before": round(load, 2)})
    result = {
        "machine": machine("SQLite WAL, synchronous=FULL, one process"),
        "command": "python benchmarks/game_floor.py " + " ".join(sys.argv[1:]),
        "rows": rows,
    }
    dest = write_result("game_floor", result)
    for r in rows:
        print(
            f"{r['threads']:>2} writer(s): {r['writes_per_s']} writes/s, p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms "
            f"(load {r['load_average_1min_before']})"
        )
    print(f"wrote {dest}")


if __name__ == "__main__":
    main()

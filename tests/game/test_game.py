"""The collection game through its HTTP API (Starlette's test client, the real app and store):
rounds, the import's rules, access control, rate limits, assignment, concurrency, kill -9, and
the store read back by import_annotations."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from gavil.game.launch import build_game
from gavil.game.rival import Rival
from gavil.game.web import create_app
from gavil.gamestore.store import store_file
from gavil.params import Params
from stages.import_annotations import import_all
from stages.select_instances import select
from tests.helpers import ROOT, game_project

KEY = b"test-key-not-secret"
NO_RIVAL = Rival("no_weights", "No rival model: the RN50 weights are not available.")


def params(min_solvers: int = 3, **game) -> Params:
    """Shared-code joining (the opt-in mode) unless ``identity`` is given: invitations have their
    own tests (tests/game/test_game_integrity.py)."""
    return Params().replace(
        models={"rival": {"allow_download": False}},
        game={"identity": "shared_code", **game},
        select={"min_solvers": min_solvers},
    )


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.setenv("GAVIL_GAME_JOIN_CODE", "letmein")
    monkeypatch.setenv("GAVIL_GAME_ADMIN_TOKEN", "admin-secret")
    return game_project(tmp_path)


def make_client(project: Path, p: Params | None = None, rival: Rival | None = NO_RIVAL) -> TestClient:
    game, images = build_game(p or params(), project, rival, ask_consent=False)
    return TestClient(create_app(game, images))


class Player:
    def __init__(self, client: TestClient, name: str) -> None:
        self.c = client
        r = client.post("/api/join", json={"code": "letmein", "name": name})
        assert r.status_code == 200, r.text
        self.h = {"Authorization": f"Bearer {r.json()['token']}"}

    def get(self, path: str) -> httpx.Response:
        return self.c.get(path, headers=self.h)

    def post(self, path: str, body: dict | None = None) -> httpx.Response:
        return self.c.post(path, json=body, headers=self.h)

    def solve(self, selection: list[int]) -> tuple[dict, httpx.Response]:
        """The task the server serves, and the answer to it."""
        task = self.post("/api/solve/task").json()["task"]
        return task, self.post("/api/solve", {"lease_id": task["lease_id"], "selection": selection})

    def create(self, cue: str, selection: list[int]) -> httpx.Response:
        task = self.post("/api/create/task").json()["task"]
        return self.post("/api/create", {"task_id": task["task_id"], "cue": cue, "selection": selection})


def poll_rival(p: Player, iid: str) -> dict:
    """The spymaster's view of their creation once the background rival has scored it."""
    for _ in range(600):
        r = p.get(f"/api/create/{iid}").json()
        if not r["rival_pending"]:
            return r
        time.sleep(0.05)
    raise AssertionError("the rival never scored the creation")


def names_of(project: Path, shas: list[str]) -> list[str]:
    import pandas as pd

    ocr = pd.read_parquet(project / "data/ocr/ocr.parquet")
    by_sha = dict(zip(ocr["sha256"], ocr["concept"]))
    return [by_sha[s] for s in shas]


def test_a_full_round_is_imported_selected_and_hashed(project):
    client = make_client(project)
    spy = Player(client, "Spy")
    task = spy.post("/api/create/task").json()["task"]
    assert (task["k_min"], task["k_max"], len(task["images"])) == (2, 3, 5)  # the set with fewest tasks: N=5
    first = spy.create("Space", [0, 1])
    assert first.status_code == 200 and first.json()["rival"] is None and first.json()["score_fool_the_ai"] is None
    assert "No rival model" in first.json()["rival_message"]
    assert spy.create("night", [1, 2]).json()["cues_given"] == 2  # the task's second cue, same images
    assert spy.post("/api/create/task").json()["task"]["task_id"] != task["task_id"]  # then a new set
    iids = [first.json()["instance_id"]]
    assert spy.post("/api/solve/task").json()["task"] is None  # never one's own
    own = spy.post("/api/solve", {"instance_id": iids[0], "selection": [0, 1]})  # an id never served
    assert own.status_code == 400 and "lease_id" in own.json()["error"]
    solvers = [Player(client, f"Solver {i}") for i in range(3)]
    leases = []
    for i, s in enumerate(solvers):
        for _ in range(2):
            t = s.post("/api/solve/task").json()["task"]
            right = [0, 1] if t["cue"] == "Space" else [1, 2]
            sel = right if i < 2 or t["cue"] != "night" else [1, 3]
            r = s.post("/api/solve", {"lease_id": t["lease_id"], "selection": sel})
            assert r.status_code == 200, r.text
            leases.append(t["lease_id"])
    assert solvers[0].post("/api/solve/task").json()["task"] is None  # each answered both
    again = solvers[0].post("/api/solve", {"lease_id": leases[0], "selection": [0, 1]})
    assert again.status_code == 409
    me = spy.get("/api/me").json()
    assert me["associations_created"] == 2 and me["solvable_by_humans"] == pytest.approx((100 + 78) / 2)
    assert me["fool_the_ai"] is None and me["bonus"] == 0  # no rival, no fool-the-AI, no bonus
    board = solvers[0].get("/api/leaderboard").json()["rows"]
    assert {r["name"] for r in board} == {"Spy", "Solver 0", "Solver 1", "Solver 2"}

    res = import_all(None, [], None, KEY, game_store=store_file(project / "data/game"))
    inst, sol = res.instances, res.solves
    assert list(inst["cue"]) == ["Space", "night"] and res.rejects.empty
    assert set(inst["origin"]) == {"raw"} and set(inst["images_source"]) == {"random"}
    assert inst["candidates"].iloc[0] == names_of(project, task["images"])
    assert inst["associations"].iloc[0] == inst["candidates"].iloc[0][:2]
    assert len(sol) == 6 and res.metrics["game"] == {
        "creations": 2,
        "solves": 6,
        "untrained_scores_imported_as_null": 0,
    }
    ids = set(inst["spymaster"]) | set(sol["solver"])
    assert len(ids) == 4 and all(i.startswith("a_") for i in ids)  # hashed like raw batches' ids
    stored = json.dumps(res.instances.astype(str).to_dict()) + json.dumps(sol.astype(str).to_dict())
    assert "gp_" not in stored
    chosen = select(inst, sol, 0.8, 3)
    # rows are in instance-id order (random game ids), so compare by cue
    by_cue = {c: (st, j) for c, st, j in zip(chosen["cue"], chosen["status"], chosen["solvers_jaccard_mean"])}
    assert by_cue == {"Space": ("selected", 1.0), "night": ("below_threshold", 0.78)}


def test_inputs_are_validated_like_the_import(project):
    client = make_client(project)
    spy = Player(client, "Spy")
    for cue, sel, why in [
        ("two words", [0, 1], "single token"),
        ("x", [0, 1], "single token"),
        ("sky", [0], "select 2 to 3"),
        ("sky", [0, 1, 2, 3], "select 2 to 3"),
        ("sky", [0, 0], "distinct"),
        ("sky", [0, 9], "distinct"),
        ("sky", ["0", "1"], "positions"),
        ("butt", [0, 1], "profanity"),
    ]:
        r = spy.create(cue, sel)
        assert r.status_code == 400 and why in r.json()["error"], (cue, sel, r.text)
    assert spy.create("Sky", [0, 1]).status_code == 200
    dup = spy.create("sky", [2, 3])  # one normalisation: "sky" is "Sky"
    assert dup.status_code == 409
    assert spy.create("night", [2, 3]).status_code == 200
    solver = Player(client, "Solver")
    assert solver.solve([0, 1, 2])[1].status_code == 400
    assert client.post("/api/join", json={"code": "wrong", "name": "X"}).status_code == 403
    assert client.post("/api/join", json={"code": "letmein", "name": "spy"}).status_code == 409  # taken
    assert client.post("/api/join", json={"code": "letmein", "name": "a\x00b"}).status_code == 400
    assert client.post("/api/join", content=b"not json").status_code == 400
    assert client.post("/api/join", content=b"{" + b" " * 20000 + b"}").status_code == 413
    assert client.post("/api/create/task").status_code == 401  # no session


def test_images_are_served_only_by_content_hash(project):
    client = make_client(project)
    spy = Player(client, "Spy")
    sha = spy.post("/api/create/task").json()["task"]["images"][0]
    r = client.get(f"/img/{sha}")
    stored = next((project / "data/images" / sha[:2]).glob(f"{sha}.*"))
    assert r.status_code == 200 and r.content == stored.read_bytes()
    for bad in ["0" * 64, "..%2F..%2Fparams.yaml", sha.upper(), sha[:63]]:
        assert client.get(f"/img/{bad}").status_code == 404
    page = client.get("/")
    assert "script-src 'self'" in page.headers["content-security-policy"] and "<script src=" in page.text


def test_admin_actions_need_the_admin_token_and_show_hashed_ids_only(project):
    client = make_client(project)
    spy = Player(client, "Spy")
    assert spy.create("Space", [0, 1]).status_code == 200
    assert client.post("/api/admin/pause", json={"paused": True}).status_code == 403
    assert client.get("/api/admin/submissions", headers={"X-Admin-Token": "nope"}).status_code == 403
    admin = {"X-Admin-Token": "admin-secret"}
    assert client.post("/api/admin/pause", json={"paused": True}, headers=admin).json() == {"paused": True}
    paused = spy.create("night", [1, 2])
    assert paused.status_code == 503 and "paused" in paused.json()["error"]
    assert client.post("/api/admin/pause", json={"paused": False}, headers=admin).status_code == 200
    subs = client.get("/api/admin/submissions", headers=admin).json()
    assert [c["cue"] for c in subs["creations"]] == ["Space"] and subs["creations"][0]["spymaster"].startswith("a_")
    exported = client.get("/api/admin/export", headers=admin).json()
    assert client.get("/api/admin/export").status_code == 403
    assert [(c["cue"], c["spymaster_id"]) for c in exported["creations"]] == [
        ("Space", subs["creations"][0]["spymaster"])
    ]
    raw_ids = {
        r[0] for r in sqlite3.connect(project / "data/game/game.sqlite").execute("SELECT player_id FROM players")
    }
    assert not any(pid in json.dumps(subs) + json.dumps(exported) for pid in raw_ids)


def test_submissions_are_rate_limited_per_session(project):
    client = make_client(project, params(submissions_per_minute=2))
    spy, other = Player(client, "Spy"), Player(client, "Other")
    assert spy.create("Space", [0, 1]).status_code == 200
    assert spy.create("night", [1, 2]).status_code == 200
    limited = spy.create("Earth", [0, 2])
    assert limited.status_code == 429 and "slow down" in limited.json()["error"]
    assert other.create("Earth", [0, 2]).status_code == 200  # another session is not held back


def test_solve_work_goes_to_the_association_closest_to_done(project):
    client = make_client(project, params())
    spy = Player(client, "Spy")
    a = spy.create("Space", [0, 1]).json()["instance_id"]
    b = spy.create("night", [1, 2]).json()["instance_id"]
    s = [Player(client, f"S{i}") for i in range(5)]
    assert s[0].post("/api/solve/task").json()["task"]["instance_id"] == a  # oldest first
    assert s[0].post("/api/solve/task").json()["task"]["instance_id"] == a  # a served task stays the player's
    assert s[0].solve([0, 1])[1].status_code == 200
    assert s[1].post("/api/solve/task").json()["task"]["instance_id"] == a  # 1 answer beats 0
    assert s[2].post("/api/solve/task").json()["task"]["instance_id"] == a  # 1 answer + 1 lease < 3
    assert s[3].post("/api/solve/task").json()["task"]["instance_id"] == b  # a is fully handed out
    for p in s[1:3]:
        assert p.solve([0, 1])[1].status_code == 200
    assert s[4].post("/api/solve/task").json()["task"]["instance_id"] == b  # a has its 3 solvers: no longer served


def test_concurrent_players_lose_and_duplicate_nothing(project):
    client = make_client(project, params(min_solvers=16))
    spy = Player(client, "Spy")
    for c in ("Space", "night"):
        assert spy.create(c, [0, 1]).status_code == 200
    acks: list[tuple[str, str]] = []
    errors: list[str] = []

    def play(i: int) -> None:
        p = Player(client, f"P{i}")
        for _ in range(2):
            t = p.post("/api/solve/task").json()["task"]
            for _ in range(2):  # each answer sent twice: the second is refused, never stored twice
                r = p.post("/api/solve", {"lease_id": t["lease_id"], "selection": [0, 1]})
                if r.status_code == 200:
                    acks.append((p.h["Authorization"], t["instance_id"]))
                elif r.status_code != 409:
                    errors.append(r.text)

    threads = [threading.Thread(target=play, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(acks) == 32 and len(set(acks)) == 32
    n = sqlite3.connect(project / "data/game/game.sqlite").execute("SELECT COUNT(*) FROM solves").fetchone()[0]
    assert n == 32


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_kill_9_loses_no_acknowledged_submission(project):
    """The real server (`gavil game`) killed with SIGKILL while players submit: every answer it
    acknowledged is in the store afterwards, and the store opens cleanly."""
    text = (ROOT / "params.yaml").read_text().replace("allow_download: true", "allow_download: false")
    text = text.replace("identity: invitation", "identity: shared_code").replace("min_solvers: 3", "min_solvers: 1000")
    assert "identity: shared_code" in text and "min_solvers: 1000" in text
    (project / "params.yaml").write_text(text)
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gavil.cli", "game", "--port", str(port)],
        cwd=project,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(f"{base}/api/status", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            pytest.fail(proc.stderr.read().decode() if proc.poll() is not None else "server did not start")
        http = httpx.Client(base_url=base, timeout=5)

        version = hashlib.sha256((project / "data/sample/consent.md").read_bytes()).hexdigest()

        def join(name: str) -> dict[str, str]:
            token = http.post("/api/join", json={"code": "letmein", "name": name}).json()["token"]
            me = {"Authorization": f"Bearer {token}"}
            http.post("/api/consent", headers=me, json={"version": version})  # `gavil game` asks for it
            return me

        spy = join("Spy")
        task = http.post("/api/create/task", headers=spy).json()["task"]
        iid = http.post(
            "/api/create", headers=spy, json={"task_id": task["task_id"], "cue": "Space", "selection": [0, 1]}
        ).json()["instance_id"]
        acked: list[str] = []
        stop = threading.Event()

        def solve_forever(i: int) -> None:
            while not stop.is_set():
                try:
                    h = join(f"P{i}-{len(acked)}-{time.monotonic_ns()}")
                    t = http.post("/api/solve/task", headers=h).json()["task"]
                    assert t["instance_id"] == iid
                    r = http.post("/api/solve", headers=h, json={"lease_id": t["lease_id"], "selection": [0, 1]})
                    if r.status_code == 200:
                        acked.append(h["Authorization"])
                except httpx.HTTPError:
                    return

        workers = [threading.Thread(target=solve_forever, args=(i,)) for i in range(4)]
        for w in workers:
            w.start()
        while len(acked) < 20:
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        stop.set()
        for w in workers:
            w.join()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    con = sqlite3.connect(project / "data/game/game.sqlite")
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    stored = con.execute("SELECT COUNT(*) FROM solves").fetchone()[0]
    assert stored >= len(acked) >= 20
    assert con.execute("SELECT COUNT(*) FROM creations").fetchone()[0] == 1


@pytest.mark.slow
def test_random_weights_only_when_set_and_labelled_untrained_everywhere(project):
    client = make_client(project, params(rival_random_weights=True), rival=None)
    status = client.get("/api/status").json()
    assert status["rival_status"] == "untrained" and "UNTRAINED" in status["rival_message"]
    spy = Player(client, "Spy")
    made = spy.create("Space", [0, 1]).json()
    assert made["rival_pending"] and made["score_fool_the_ai"] is None  # stored at once, scored in the background
    r = poll_rival(spy, made["instance_id"])
    assert r["rival_status"] == "untrained" and len(r["rival"]) == 2 and 0 <= r["score_fool_the_ai"] <= 100
    row = sqlite3.connect(project / "data/game/game.sqlite").execute("SELECT rival_status FROM creations").fetchone()
    assert row[0] == "untrained"
    res = import_all(None, [], None, KEY, game_store=store_file(project / "data/game"))
    assert res.instances["score_fool_the_ai"].isna().all()  # an untrained score never enters the benchmark
    assert res.metrics["game"]["untrained_scores_imported_as_null"] == 1
    me = spy.get("/api/me").json()
    assert me["fool_the_ai"] is None and me["fool_the_ai_untrained"] == r["score_fool_the_ai"]
    # without the explicit switch, the default pretrained weights are missing offline: no rival
    assert make_client(project, params(), rival=None).get("/api/status").json()["rival_status"] == "no_weights"


#: Words of an operator's instructions (params keys, commands, paths) that a player must never be shown.
OPERATOR_WORDS = (
    "weights_path",
    "params",
    "dvc",
    "models.",
    "docs/",
    "pip ",
    "python",
    "sha256",
    "cache",
    "rival_random",
)


@pytest.mark.slow
@pytest.mark.parametrize("random_weights", [False, True])
def test_players_never_see_operator_instructions(random_weights, tmp_path):
    """What the page and the status API show players about the rival says what it means for them; how to
    provide weights (params keys, commands) goes to the server's console only."""
    import yaml

    from gavil.game.rival import load_rival
    from gavil.params import parse_params
    from tests.helpers import ROOT, no_downloads

    data = no_downloads(yaml.safe_load((ROOT / "params.yaml").read_text()))
    data["game"]["rival_random_weights"] = random_weights
    rival = load_rival(parse_params(data), {})
    assert rival.status == ("untrained" if random_weights else "no_weights")
    shown = rival.message.lower()
    assert not [w for w in OPERATOR_WORDS if w in shown], rival.message


@pytest.mark.slow
def test_a_queue_of_creations_shares_the_rivals_forward_passes_and_keeps_its_picks(project):
    """Creations that wait for the rival are scored together, their prompts in shared text forward
    passes (on a CPU each pass holds 16 rows whatever), and each gets the picks the rival makes for
    it alone: the same vector bytes, so the same top K."""
    import json

    game, images = build_game(params(rival_random_weights=True), project, None, ask_consent=False)
    client, rival = TestClient(create_app(game, images)), game.rival
    assert rival.model is not None
    calls: list[int] = []
    embed = rival.model.embed_texts
    object.__setattr__(rival.model, "embed_texts", lambda texts: calls.append(len(texts)) or embed(texts))
    spy = Player(client, "Spy")
    cues = ["Space", "Ocean", "Forest", "Music", "Winter", "Garden"]
    with rival._lock:  # the rival is busy: the creations queue up
        made = [spy.create(cue, [0, 1]).json()["instance_id"] for cue in cues]
    scored = [poll_rival(spy, iid) for iid in made]
    assert sum(calls) == len(cues) and len(calls) <= 2, calls  # one forward pass each would be 6 calls of 1
    con = sqlite3.connect(project / "data/game/game.sqlite")
    for iid, r in zip(made, scored):
        cue, cands, assoc = con.execute(
            "SELECT cue, candidates, associations FROM creations WHERE instance_id = ?", (iid,)
        ).fetchone()
        cands = json.loads(cands)
        rival._text.clear()  # embedded alone now
        alone = rival.predict(cue, [game._by_name[n] for n in cands], len(json.loads(assoc)))
        assert r["rival"] == alone, (cue, r["rival"], alone)
    assert calls[-len(cues) :] == [1] * len(cues)

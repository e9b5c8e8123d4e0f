"""What the game says of rounds, read from its store at each request (docs/dynamic.md, "The round life
cycle"): ``GET /api/status`` after ``gavil round close`` / ``open`` run in another process while the
server runs, creations refused into a closed round, and the schema version docs/game.md states.
The page's round menu and the spymaster's round line in a real browser: tests/game/test_game_browser.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from gavil.game.launch import build_game
from gavil.game.rival import Rival
from gavil.game.rounds import close_round, open_round
from gavil.game.service import NO_ROUND, Game
from gavil.game.web import create_app
from gavil.gamestore.store import SCHEMA_VERSION, store_file
from gavil.params import Params
from tests.helpers import ROOT, game_project


def params() -> Params:
    return Params().replace(models={"rival": {"allow_download": False}}, game={"identity": "shared_code"})


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A game project whose store has round 1 open (against ``rival``), and the repository's params.yaml."""
    monkeypatch.setenv("GAVIL_GAME_JOIN_CODE", "letmein")
    monkeypatch.setenv("GAVIL_GAME_ADMIN_TOKEN", "admin-secret")
    root = game_project(tmp_path)
    (root / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    return root


def client(project: Path, games: list[Game]) -> TestClient:
    game, images = build_game(params(), project, Rival("no_weights", "No rival model."), ask_consent=False)
    games.append(game)
    return TestClient(create_app(game, images))


def status(c: TestClient) -> dict[str, Any]:
    r = c.get("/api/status")
    assert r.status_code == 200, r.text
    return {k: r.json()[k] for k in ("round", "open_round", "rounds")}


def create(c: TestClient, h: dict[str, str], cue: str) -> Any:
    """Ask for a creation task and give ``cue`` for its first two images; the refusal if any step is refused."""
    r = c.post("/api/create/task", headers=h)
    if r.status_code != 200:
        return r
    task = r.json()["task"]
    return c.post("/api/create", headers=h, json={"task_id": task["task_id"], "cue": cue, "selection": [0, 1]})


def gavil_round(project: Path, *args: str) -> str:
    """``gavil round ARGS`` in its own process, on ``project``'s params.yaml; its output."""
    params_file = str(project / "params.yaml")
    out = subprocess.run(
        [sys.executable, "-m", "gavil.cli", "round", *args, "--params", params_file],
        capture_output=True,
        text=True,
        cwd=project,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def player(c: TestClient, name: str) -> dict[str, str]:
    r = c.post("/api/join", json={"code": "letmein", "name": name})
    assert r.status_code == 200, r.text
    return {"Authorization": f"Bearer {r.json()['token']}"}


def test_status_follows_round_close_and_open_in_another_process_without_a_restart(project, games):
    c = client(project, games)
    h = player(c, "Ann")
    assert status(c) == {"round": 1, "open_round": 1, "rounds": [1]}
    assert create(c, h, "space").status_code == 200
    assert "round 1 closed" in gavil_round(project, "close")
    assert status(c) == {"round": None, "open_round": None, "rounds": [1]}  # the closed round is not collected
    r = create(c, h, "night")
    assert r.status_code == 503 and r.json()["error"] == NO_ROUND  # nothing goes into the closed round
    assert c.post("/api/solve/task", headers=player(c, "Bob")).json()["task"] is not None  # solving goes on
    assert "round 2 open" in gavil_round(project, "open", "--rival", "clip-vit-b-32")
    # round 2 is open, but this server has round 1's rival: it collects round 2 only after a restart
    assert status(c) == {"round": None, "open_round": 2, "rounds": [1, 2]}
    assert create(c, h, "night").status_code == 503


def test_a_restart_collects_the_round_opened_meanwhile(project, games):
    c = client(project, games)
    close_round(store_file(project / "data/game"))
    open_round(store_file(project / "data/game"), params(), "rival")
    assert status(c) == {"round": None, "open_round": 2, "rounds": [1, 2]}
    games[-1].close()
    again = client(project, games)
    assert status(again) == {"round": 2, "open_round": 2, "rounds": [1, 2]}
    r = create(again, player(again, "Cid"), "star")
    assert r.status_code == 200 and r.json()["round"] == 2


def test_a_store_without_rounds_lists_none(tmp_path, monkeypatch, games):
    monkeypatch.setenv("GAVIL_GAME_JOIN_CODE", "letmein")
    monkeypatch.setenv("GAVIL_GAME_ADMIN_TOKEN", "admin-secret")
    c = client(game_project(tmp_path, open_round=False), games)
    assert status(c) == {"round": None, "open_round": None, "rounds": []}


def test_docs_game_states_the_code_s_schema_version():
    text = (ROOT / "docs/game.md").read_text(encoding="utf-8")
    stated = {int(n) for n in re.findall(r"schema version (\d+)", text, flags=re.IGNORECASE)}
    assert stated == {SCHEMA_VERSION}, f"docs/game.md states schema version {sorted(stated)}, the code {SCHEMA_VERSION}"

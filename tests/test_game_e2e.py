"""The loop closes: a game round (spymaster -> three solvers) in a real project, then `dvc repro`
folds it in, and the new instance is in the export, selected, with a permanent ID."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from starlette.testclient import TestClient

from gavil.game import build_game
from gavil.game.rival import Rival
from gavil.game.web import create_app
from gavil.params import load_params
from gavil.pipeline import catalog
from gavil.pipeline.dvc import write_dvc_yaml
from tests.helpers import ROOT, mini_project, no_downloads

IMAGES = ["rocket", "moon", "astronaut", "cat", "coffee", "brick"]


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(cwd),  # the project copy's code runs the stages
        "DVC_NO_ANALYTICS": "1",
    }
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_a_game_round_reaches_the_export_with_a_permanent_id(tmp_path, monkeypatch):
    monkeypatch.setenv("GAVIL_GAME_JOIN_CODE", "letmein")
    d = mini_project(tmp_path / "proj", IMAGES)
    p = yaml.safe_load((d / "params.yaml").read_text())
    no_downloads(p)
    p["game"]["identity"] = "shared_code"  # the trusted-lab mode: one code for the test's players
    p["instances"]["game_sets"] = {5: 1, 6: 1, 10: 0, 12: 0}
    p["annotations"]["release_files"] = []  # only the game's instances: a small, fast build
    p["evaluate"]["models"] = ["clip-rn50"]
    (d / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    write_dvc_yaml(d / "dvc.yaml", d / "params.yaml")  # evaluate now names one model: its keys only
    for cmd in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"]):
        assert _run(cmd, d).returncode == 0
    shutil.copy(ROOT / ".dvcignore", d / ".dvcignore")  # the store's WAL index is not data
    built = _run([sys.executable, "-m", "dvc", "repro", "build_instances"], d)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]

    opened = _run([sys.executable, "-m", "gavil.cli", "round", "open", "--rival", "rival"], d)
    assert opened.returncode == 0, opened.stdout + opened.stderr  # the game collects round 1
    game, images = build_game(load_params(d / "params.yaml"), d, Rival("no_weights", "no rival"))
    client = TestClient(create_app(game, images))

    def join(name: str) -> dict[str, str]:
        r = client.post("/api/join", json={"code": "letmein", "name": name})
        return {"Authorization": f"Bearer {r.json()['token']}"}

    spy = join("Spy")
    task = client.post("/api/create/task", headers=spy).json()["task"]
    made = client.post(
        "/api/create", headers=spy, json={"task_id": task["task_id"], "cue": "Space", "selection": [0, 1]}
    )
    assert made.status_code == 200, made.text
    for i in range(3):
        solver = join(f"Solver {i}")
        t = client.post("/api/solve/task", headers=solver).json()["task"]
        assert t["instance_id"] == made.json()["instance_id"]
        assert (
            client.post("/api/solve", headers=solver, json={"lease_id": t["lease_id"], "selection": [0, 1]}).status_code
            == 200
        )

    status = _run([sys.executable, "-m", "dvc", "status", "import_annotations"], d)
    assert "data/game" in status.stdout  # new game data re-runs the import
    rebuilt = _run([sys.executable, "-m", "dvc", "repro"], d)
    assert rebuilt.returncode == 0, rebuilt.stdout[-3000:] + rebuilt.stderr[-3000:]
    assert "Running stage 'import_annotations'" in rebuilt.stdout and "Running stage 'ocr_filter'" not in rebuilt.stdout
    bench = catalog.read_table("benchmark", d)
    row = bench[bench["cue"] == "Space"]
    assert len(row) == 1 and row["solvers_jaccard_mean"].iloc[0] == 1.0
    assert row["round"].tolist() == [1]  # the round the game collected it in
    assert json.loads((d / "data/metrics/export.json").read_text())["version"] == "1.1.0"
    first_id = int(row["ID"].iloc[0])
    sel = catalog.read_table("selection", d)
    assert sel.loc[sel["cue"] == "Space", "status"].tolist() == ["selected"]
    assert client.get("/api/me", headers=spy).status_code == 200  # players reading scores change no data
    quiet = _run([sys.executable, "-m", "dvc", "status", "import_annotations"], d).stdout
    assert "changed" not in quiet, quiet
    late = join("Solver late")  # "Space" has its 3 answers: no more are served or taken
    assert client.post("/api/solve/task", headers=late).json()["task"] is None
    forged = client.post("/api/solve", headers=late, json={"instance_id": t["instance_id"], "selection": [2, 3]})
    assert forged.status_code == 400
    # new data (the task's second cue, answered): the import re-runs, the first instance keeps its ID
    made2 = client.post(
        "/api/create", headers=spy, json={"task_id": task["task_id"], "cue": "night", "selection": [1, 2]}
    )
    assert made2.status_code == 200, made2.text
    for i in range(3):
        solver = join(f"Second {i}")
        t2 = client.post("/api/solve/task", headers=solver).json()["task"]
        assert t2["instance_id"] == made2.json()["instance_id"]
        r = client.post("/api/solve", headers=solver, json={"lease_id": t2["lease_id"], "selection": [1, 2]})
        assert r.status_code == 200, r.text
    again = _run([sys.executable, "-m", "dvc", "repro", "export"], d)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "Running stage 'select_instances'" in again.stdout
    bench2 = catalog.read_table("benchmark", d)
    assert int(bench2.loc[bench2["cue"] == "Space", "ID"].iloc[0]) == first_id  # permanent

"""`gavil game hits`: crowd task files whose batch results the crowd-batch import reads back."""

from __future__ import annotations

import base64
import csv
import json
from pathlib import Path

from typer.testing import CliRunner

from gavil.cli import app
from gavil.params import Params
from schemas.raw import CROWD_FIXED_COLUMNS
from stages.import_annotations import import_all
from tests.helpers import ROOT, game_project

KEY = b"test-key-not-secret"
HOSTILE = "<script>alert(1)</script>"


def _results(path: Path, header: list[str], rows: list[dict[str, str]], worker: str) -> None:
    """A platform's batch results: the fixed columns, Input.<task column>, Answer.<field>."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=CROWD_FIXED_COLUMNS + header)
        w.writeheader()
        for i, r in enumerate(rows):
            fixed = {"HITId": f"H{i}", "AssignmentId": r.pop("AssignmentId", f"A{i}"), "WorkerId": f"{worker}{i}"}
            w.writerow({**fixed, "AssignmentStatus": "Submitted", "SubmitTime": "", "WorkTimeInSeconds": "30", **r})


def test_creation_and_solve_hits_round_trip_through_the_crowd_import(in_tmp):
    game_project(in_tmp)
    (in_tmp / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    out = in_tmp / "hits"
    res = CliRunner().invoke(app, ["game", "hits", "--out", "hits", "--image-url", "https://img.test/"])
    assert res.exit_code == 0, res.output
    tasks = list(csv.DictReader(open(out / "creation_tasks.csv", encoding="utf-8")))
    assert [t["set_id"] for t in tasks] == ["random-5-0000", "random-6-0000", "random-10-0000"]
    payload = json.loads(base64.b64decode(tasks[0]["payload"]))
    assert payload["k_min"] == 2 and payload["k_max"] == 3 and payload["names"] == json.loads(tasks[0]["candidates"])
    assert all(
        u.startswith("https://img.test/") and (out / "images" / u.rsplit("/", 1)[1]).is_file()
        for u in payload["images"]
    )
    html = (out / "creation.html").read_text()
    assert (
        all(f'name="{f}"' in html for f in ("cue1", "associations1", "cue2", "associations2")) and "${payload}" in html
    )

    names = payload["names"]
    batch = in_tmp / "raw/b1"
    batch.mkdir(parents=True)
    creation_cols = ["Input.set_id", "Input.candidates", "Input.payload"] + [
        f"Answer.{f}" for f in ("cue1", "associations1", "cue2", "associations2")
    ]
    answers = {
        "Answer.cue1": "Space",
        "Answer.associations1": json.dumps(names[:2]),
        "Answer.cue2": HOSTILE,
        "Answer.associations2": json.dumps(names[1:3]),
    }
    inputs = {f"Input.{k}": v for k, v in tasks[0].items()}
    _results(batch / "crowd_creations.csv", creation_cols, [{"AssignmentId": "ASG1", **inputs, **answers}], "spy")
    res = CliRunner().invoke(app, ["game", "hits", "--out", "hits", "--creations", str(batch / "crowd_creations.csv")])
    assert res.exit_code == 0, res.output
    solve_tasks = list(csv.DictReader(open(out / "solve_tasks.csv", encoding="utf-8")))
    assert [t["instance_id"] for t in solve_tasks] == ["ASG1:1", "ASG1:2"]  # the import's instance ids
    shown = [json.loads(base64.b64decode(t["payload"])) for t in solve_tasks]
    assert [(p["cue"], p["k_max"]) for p in shown] == [("Space", 2), (HOSTILE, 2)]
    assert HOSTILE not in (out / "solve.html").read_text()  # the cue travels base64-encoded, shown as text
    solves = [
        {"Input.instance_id": t["instance_id"], "Input.payload": t["payload"], "Answer.selection": json.dumps(sel)}
        for t, sel in zip(solve_tasks, [names[:2], names[1:3]])
        for _ in range(3)
    ]
    _results(batch / "crowd_solves.csv", ["Input.instance_id", "Input.payload", "Answer.selection"], solves, "solver")
    crowd = Params().annotations.crowd.model_dump()
    imported = import_all(None, [], in_tmp / "raw", KEY, crowd)
    # the hostile cue is shown safely in the HIT, then refused at import by the word rule
    # (gavil.domain.names): its creation is a reject with the reason, its 3 solves name an unknown instance
    reasons = imported.rejects["reason"].tolist()
    assert len(reasons) == 4 and "must start with a letter" in reasons[0], reasons
    assert all("unknown instance_id" in r for r in reasons[1:])
    assert list(imported.instances["cue"]) == ["Space"]
    assert len(imported.solves) == 3

"""Two collection rounds end to end, played in a real browser (docs/dynamic.md): round 1 against one
rival, close, round 2 against another; players create, flag and solve; an admin reviews the flag;
`dvc repro` exports each round with its dataset version; the Hugging Face dataset loads per round;
Table 4 is given per round and the round-1 rival is scored on round 2; `gavil release` tags each
release; the game keeps its round across a restart."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import datasets
import httpx
import pytest
import yaml
from playwright import sync_api

from gavil.game.launch import build_game
from gavil.game.web import create_app
from gavil.params import load_params
from gavil.pipeline import catalog
from gavil.pipeline.dvc import write_dvc_yaml
from tests.game.test_game_browser import join, pick
from tests.helpers import ROOT, mini_project, no_downloads, serve_app

IMAGES = ["rocket", "moon", "astronaut", "cat", "coffee", "brick", "horse", "grass", "stone", "clock"]
#: Each cue a spymaster gives and the candidate positions of its associations (the solvers' answers).
ROUND_1 = {"space": [0, 1], "night": [1, 2]}
ROUND_2 = {"orbit": [0, 2], "launch": [0, 3]}
#: The rivals: open_clip entries with random weights (no CLIP weights offline; labelled "untrained").
RIVALS = {
    "rival-a": {"kind": "open_clip", "model": "RN50", "pretrained": None, "allow_download": False, "batch_size": 8},
    "rival-b": {"kind": "open_clip", "model": "ViT-B-32", "pretrained": None, "allow_download": False, "batch_size": 8},
}
ADMIN = {"X-Admin-Token": "admin-secret"}


def run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(cwd),  # the project copy's code runs the stages
        "DVC_NO_ANALYTICS": "1",
    }
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def ok(cmd: list[str], cwd: Path) -> str:
    done = run(cmd, cwd)
    assert done.returncode == 0, f"{cmd}: {done.stdout[-3000:]}{done.stderr[-3000:]}"
    return done.stdout + done.stderr


def gavil(d: Path, *args: str) -> str:
    return ok([sys.executable, "-m", "gavil.cli", *args], d)


@contextmanager
def serve(d: Path) -> Iterator[str]:
    """`gavil game` over the project ``d``, on a free 127.0.0.1 port, in this process (so the test
    reads the same store); stopped and its store closed on exit (a restart is a new ``serve``)."""
    game, images = build_game(load_params(d / "params.yaml"), d)
    try:
        with serve_app(create_app(game, images)) as base:
            yield base
            assert game.wait_for_rival(120), "the rival did not answer"
    finally:
        game.close()


def create(page: sync_api.Page, cues: dict[str, list[int]]) -> None:
    """The spymaster gives both cues of one candidate set and waits for the rival's score."""
    expect = sync_api.expect
    page.click("#mode-create")
    for n, (cue, positions) in enumerate(cues.items()):
        if n:
            page.click("#next-create")
        expect(page.locator("#create-grid .tile")).to_have_count(5)
        pick(page, "#create-grid", positions)
        page.fill("#cue", cue)
        page.click("#submit-create")
        expect(page.locator("#create-result")).to_contain_text("Fool-the-AI score (UNTRAINED", timeout=120_000)


def solve_all(page: sync_api.Page, answers: dict[str, list[int]]) -> list[str]:
    """The solver answers every association served (by its cue) until none is left; the cues solved."""
    expect = sync_api.expect
    solved: list[str] = []
    while True:
        page.click("#mode-solve")
        cue = page.locator("#solve-cue")
        expect(cue).not_to_have_text("")
        text = cue.text_content() or ""
        if text == "(nothing to solve right now)":
            return solved
        pick(page, "#solve-grid", answers[text])
        page.click("#submit-solve")
        expect(page.locator("#solve-result")).to_have_text("Your Jaccard score: 100%")
        solved.append(text)


def flag(page: sync_api.Page) -> str:
    """The solver flags the association served on the solve page (category "wrong"); its cue."""
    expect = sync_api.expect
    page.click("#mode-solve")
    cue = page.locator("#solve-cue")
    expect(cue).not_to_have_text("")
    page.select_option("#flag-category", "wrong")
    page.fill("#flag-reason", "the images do not fit")
    page.click("#flag-btn")
    expect(page.locator("#flag-status")).to_have_text("flagged, thanks")
    return cue.text_content() or ""


def release(d: Path, tag: str) -> None:
    """Commit the round's `dvc.lock` and metrics, then `gavil release` tags that commit."""
    ok(["git", "add", "-A"], d)
    ok(["git", "commit", "-qm", tag], d)
    assert tag in gavil(d, "release")
    assert ok(["git", "tag", "--points-at", "HEAD"], d).split() == [tag]


def creations(d: Path) -> list[sqlite3.Row]:
    con = sqlite3.connect(f"file:{d / 'data/game/game.sqlite'}?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    try:
        return con.execute(
            "SELECT cue, round, rival_model, rival_architecture, rival_weights, rival_status, score_fool_the_ai"
            " FROM creations ORDER BY seq"
        ).fetchall()
    finally:
        con.close()


@pytest.mark.slow
def test_two_rounds_against_two_rivals_in_the_browser_reach_two_versioned_releases(tmp_path, monkeypatch, browser):
    monkeypatch.setenv("GAVIL_GAME_JOIN_CODE", "letmein")
    monkeypatch.setenv("GAVIL_GAME_ADMIN_TOKEN", "admin-secret")
    expect = sync_api.expect
    d = mini_project(tmp_path / "proj", IMAGES)
    p = no_downloads(yaml.safe_load((d / "params.yaml").read_text()))
    p["models"] |= RIVALS
    p["game"]["identity"] = "shared_code"
    p["instances"]["game_sets"] = {5: 2, 6: 0, 10: 0, 12: 0}
    p["annotations"]["release_files"] = []  # only the game's rounds: a small, fast build
    p["evaluate"]["models"] = ["rival-a", "rival-b"]
    # gold checks off: one report holds an unpublished association only where one reporter is enough
    # (docs/dynamic.md "Flags and review"; the weight rules are played in tests/game/test_game_trust.py)
    p["game"].setdefault("flags", {})["min_reporters"] = 1
    (d / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    write_dvc_yaml(d / "dvc.yaml", d / "params.yaml")
    shutil.copy(ROOT / ".dvcignore", d / ".dvcignore")  # the store's WAL index is not data
    shutil.copy(ROOT / ".gitignore", d / ".gitignore")
    for cmd in (
        ["git", "init", "-q"],
        ["git", "config", "user.email", "t@t"],  # commits and annotated tags on any machine
        ["git", "config", "user.name", "t"],
        [sys.executable, "-m", "dvc", "init", "-q"],
    ):
        ok(cmd, d)
    ok([sys.executable, "-m", "dvc", "repro", "build_instances"], d)

    # round 1, against rival-a
    assert "round 1 open, rival rival-a (RN50" in gavil(d, "round", "open", "--rival", "rival-a")
    with serve(d) as base:
        create(join(browser, base, "Spy One"), ROUND_1)
    with serve(d) as base:  # a restart mid-round keeps the round
        solvers = [join(browser, base, f"Solver {i}") for i in range(3)]
        flagged = flag(solvers[0])  # the first association served is flagged, not answered
        other = next(c for c in ROUND_1 if c != flagged)
        for s in solvers:  # held from every new solver until an admin reviews it
            assert solve_all(s, ROUND_1) == [other]
        queue = httpx.get(f"{base}/api/admin/flags", headers=ADMIN).json()["instances"]
        assert [(q["cue"], q["round"]) for q in queue] == [(flagged, 1)]
    gavil(d, "round", "close")
    status = ok([sys.executable, "-m", "dvc", "status", "import_annotations"], d)
    assert "data/game" in status  # new game data re-runs the import
    made = creations(d)
    assert [(r["cue"], r["round"], r["rival_model"], r["rival_architecture"], r["rival_weights"]) for r in made] == [
        ("space", 1, "rival-a", "RN50", "untrained"),
        ("night", 1, "rival-a", "RN50", "untrained"),
    ]  # the stored rival is the one that scored it
    assert all(r["rival_status"] == "untrained" and r["score_fool_the_ai"] is not None for r in made)
    rebuilt = ok([sys.executable, "-m", "dvc", "repro"], d)
    assert "Running stage 'import_annotations'" in rebuilt and "Running stage 'ocr_filter'" not in rebuilt
    assert json.loads((d / "data/metrics/export.json").read_text())["version"] == "1.1.0"
    first_id = int(catalog.read_table("benchmark", d)["ID"].iloc[0])
    sel = catalog.read_table("selection", d).set_index("cue")
    assert sel.loc[flagged, "status"] == "withheld" and sel.loc[flagged, "reason"].startswith("flagged_unreviewed")
    assert catalog.read_table("benchmark", d)["cue"].tolist() == [other]  # flagged: not exported before review
    assert catalog.read_table("flags", d)["category"].tolist() == ["wrong"]
    release(d, "v1.1.0")

    # round 2, against rival-b: the CLI proposes only trained models (both rivals run random weights
    # here; tests/game/test_rounds.py covers a proposal), so the maintainer names one
    proposal = run([sys.executable, "-m", "gavil.cli", "round", "open"], d)
    assert proposal.returncode == 2 and "name the rival: --rival NAME" in proposal.stderr, proposal.stderr
    assert "round 2 open, rival rival-b (ViT-B-32" in gavil(d, "round", "open", "--rival", "rival-b")
    with serve(d) as base:
        iid = httpx.get(f"{base}/api/admin/flags", headers=ADMIN).json()["instances"][0]["instance_id"]
        kept = httpx.post(
            f"{base}/api/admin/flags/review", headers=ADMIN, json={"instance_id": iid, "decision": "keep"}
        )
        assert kept.status_code == 200 and kept.json()["state"] == "kept", kept.text
        create(join(browser, base, "Spy Two"), ROUND_2)
        solvers = [join(browser, base, f"Solver {i}b") for i in range(3)]
        answers = {**ROUND_1, **ROUND_2}
        solved = [solve_all(s, answers) for s in solvers]
        assert all(sorted(set(x) - {flagged}) == sorted(ROUND_2) for x in solved)
        assert all(x.count(flagged) == 1 for x in solved)  # kept: served again (held in round 1, unanswered)
        board = solvers[0]
        board.click("#mode-scores")
        expect(board.locator("#leaderboard")).to_contain_text("Spy One")  # every round
        board.select_option("#lb-round", "2")  # the player leaderboard of round 2 alone
        expect(board.locator("#leaderboard")).to_contain_text("Spy Two")
        expect(board.locator("#leaderboard")).not_to_contain_text("Spy One")
        board.select_option("#lb-round", "")
        expect(board.locator("#leaderboard")).to_contain_text("Spy One")
    gavil(d, "round", "close")
    assert [(r["round"], r["rival_model"], r["rival_architecture"]) for r in creations(d)][2:] == [
        (2, "rival-b", "ViT-B-32"),
        (2, "rival-b", "ViT-B-32"),
    ]
    ok([sys.executable, "-m", "dvc", "repro"], d)
    assert json.loads((d / "data/metrics/export.json").read_text())["version"] == "1.2.0"
    release(d, "v1.2.0")
    bench = catalog.read_table("benchmark", d)
    assert sorted(zip(bench["round"], bench["cue"])) == [(1, "night"), (1, "space"), (2, "launch"), (2, "orbit")]
    assert int(bench.loc[bench["cue"] == other, "ID"].iloc[0]) == first_id  # a published ID is permanent
    ev = catalog.read_table("evaluation", d)
    per_round = ev[(ev["dataset"] == "game") & (ev["breakdown"] == "all")]
    assert {(m, r) for m, r in zip(per_round["model_name"], per_round["round"])} >= {
        (m, r) for m in RIVALS for r in (-1, 1, 2)
    }  # Table 4 per round and overall, each rival on each round
    assert "### Round 2" in (d / "data/evaluate/table4.md").read_text()
    rivals = catalog.read_table("rival_rounds", d)
    later = rivals[(rivals["rival_model"] == "rival-a") & (rivals["round"] == 2)]
    assert later["rival_round"].tolist() == [1] and later["status"].tolist() == ["scored"]  # round 1's rival on round 2
    assert later["n_scored"].tolist() == [2] and later["dataset_version"].tolist() == ["1.2.0"]
    for r, cues in ((1, ROUND_1), (2, ROUND_2)):  # the Hugging Face dataset, one config per round
        rows = datasets.load_dataset(str(d / "data/export/dataset"), f"round_{r}", cache_dir=str(tmp_path / "hf"))
        assert sorted(rows["test"]["cue"]) == sorted(cues) and set(rows["test"]["round"]) == {r}
    # the first release is still there: its tag restores its export
    ok(["git", "checkout", "-q", "v1.1.0"], d)
    ok([sys.executable, "-m", "dvc", "checkout", "-q"], d)
    assert json.loads((d / "data/metrics/export.json").read_text())["version"] == "1.1.0"
    assert catalog.read_table("benchmark", d)["cue"].tolist() == [other]
    ok(["git", "checkout", "-q", "-"], d)
    ok([sys.executable, "-m", "dvc", "checkout", "-q"], d)
    gavil(d, "round", "leaderboard", "--out", str(tmp_path / "leaderboard.svg"))
    svg = (tmp_path / "leaderboard.svg").read_text()
    assert "round 1" in svg and "round 2" in svg and "rival-a (untrained)" in svg
    if os.environ.get("GAVIL_DOCS_PICTURE"):  # the picture docs/dynamic.md shows
        shutil.copy(tmp_path / "leaderboard.svg", os.environ["GAVIL_DOCS_PICTURE"])

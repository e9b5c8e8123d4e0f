"""Collection rounds: the store's ``rounds`` table and its migration, ``gavil round open|close|list``,
and the game serving the open round (docs/dynamic.md)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from gavil.cli import app
from gavil.game.launch import build_game
from gavil.game.rival import Rival
from gavil.game.rounds import RoundError, close_round, list_rounds, open_round
from gavil.game.service import NO_ROUND, Game
from gavil.game.web import create_app
from gavil.gamestore.store import SCHEMA_VERSION, connect, read_submissions, store_file
from gavil.params import Params
from tests.helpers import ROOT, game_project, old_store

SHA = "ab" * 32


class FakeRival(Rival):
    """A rival with a "model" and an identity: picks the last K images (so the score is not trivially 0)."""

    def __init__(self, entry: str = "rival", arch: str = "RN50", weights: str = "openai") -> None:
        super().__init__("ok", "The rival model is fake.", "fake", cast(Any, object()), {}, entry, arch, weights, SHA)
        self.seen: list[str] = []

    def predict(self, cue: str, candidate_shas: Sequence[str], k: int) -> list[int] | None:
        self.seen.append(cue)
        return list(range(len(candidate_shas) - k, len(candidate_shas)))


def params() -> Params:
    return Params().replace(models={"rival": {"allow_download": False}}, game={"identity": "shared_code"})


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GAVIL_GAME_JOIN_CODE", "letmein")
    monkeypatch.setenv("GAVIL_GAME_ADMIN_TOKEN", "admin-secret")
    return game_project(tmp_path, open_round=False)


class Server:
    def __init__(self, project: Path, games: list[Game], rival: Rival | None = None) -> None:
        self.game, images = build_game(
            params(), project, rival if rival is not None else FakeRival(), ask_consent=False
        )
        games.append(self.game)
        self.client = TestClient(create_app(self.game, images))

    def player(self, name: str) -> dict[str, str]:
        r = self.client.post("/api/join", json={"code": "letmein", "name": name})
        assert r.status_code == 200, r.text
        return {"Authorization": f"Bearer {r.json()['token']}"}

    def create(self, h: dict[str, str], cue: str) -> Any:
        r = self.client.post("/api/create/task", headers=h)
        if r.status_code != 200:
            return r
        task = r.json()["task"]
        return self.client.post(
            "/api/create", headers=h, json={"task_id": task["task_id"], "cue": cue, "selection": [0, 1]}
        )


def store(project: Path) -> Path:
    return store_file(project / "data/game")


def row(project: Path, instance_id: str) -> sqlite3.Row:
    con = connect(store(project), create=False)
    try:
        r = con.execute("SELECT * FROM creations WHERE instance_id = ?", (instance_id,)).fetchone()
        assert r is not None
        return cast(sqlite3.Row, r)
    finally:
        con.close()


# ------------------------------------------------------------------------------ the store


def version_3_store(path: Path, creations: bool = True) -> None:
    """A store as the previous schema version wrote it (its migration steps, as the old code ran them)."""
    con = old_store(path, 3)
    if creations:
        con.execute("INSERT INTO players VALUES ('p1', 'h1', 'Ann', 'ann', 1, 'Ann')")
        cands = '["rocket", "moon", "cat", "coffee", "brick"]'
        con.execute(
            "INSERT INTO tasks VALUES ('t1', 's', 'p1', ?, 1), ('t2', 'v', 'variant:swow_af', ?, 1)", (cands, cands)
        )
        for iid, task, spy, cue, at in (("g1", "t1", "p1", "space", 10.0), ("g2", "t1", "p1", "night", 20.0)):
            con.execute(
                "INSERT INTO creations (instance_id, task_id, spymaster_id, cue, cue_norm, content_key, candidates,"
                " associations, rival_status, rival_predictions, score_fool_the_ai, created_at, rival_state)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, '[\"moon\", \"cat\"]', 'ok', '[\"moon\", \"rocket\"]', 67, ?, 'done')",
                (iid, task, spy, cue, cue, iid, cands, at),
            )
        con.execute(
            "INSERT INTO creations (instance_id, task_id, spymaster_id, cue, cue_norm, content_key, candidates,"
            " associations, rival_status, created_at, rival_state)"
            " VALUES ('swow_af:1', 't2', 'variant:swow_af', 'sky', 'sky', 'v1', ?, '[\"moon\"]', 'no_weights', 30, 'done')",
            (cands,),
        )
    con.close()


def test_a_version_3_store_migrates_its_creations_into_a_closed_round_1(tmp_path):
    path = tmp_path / "game.sqlite"
    version_3_store(path)
    before, _ = read_submissions(path)  # a version-3 store is read as it is: no round
    assert [c["round"] for c in before] == [None, None, None]
    connect(path).close()
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 7
    assert con.execute("SELECT * FROM rounds").fetchall() == [(1, None, None, None, None, 10.0, 20.0)]
    con.close()
    after, _ = read_submissions(path)
    assert [(c["instance_id"], c["round"], c["rival_model"]) for c in after] == [
        ("g1", 1, None),
        ("g2", 1, None),
        ("swow_af:1", None, None),  # the variant's rows belong to no round
    ]
    assert [c["score_fool_the_ai"] for c in after] == [67, 67, None]  # scores kept
    [r1] = list_rounds(path)
    assert (r1.round_id, r1.is_open, r1.creations, r1.rival_label()) == (1, False, 2, "(not recorded)")
    assert open_round(path, params(), "rival", now=40.0).round_id == 2  # the next round


def test_an_empty_version_3_store_gets_no_round_and_its_first_is_1(tmp_path):
    path = tmp_path / "game.sqlite"
    version_3_store(path, creations=False)
    connect(path).close()
    assert list_rounds(path) == []
    assert open_round(path, params(), "rival").round_id == 1


def test_one_round_open_at_a_time_and_only_an_open_clip_rival(tmp_path):
    path = tmp_path / "game.sqlite"
    with pytest.raises(RoundError, match="no open_clip entry 'text-minilm-l6'"):
        open_round(path, params(), "text-minilm-l6")
    with pytest.raises(RoundError, match="no round is open"):
        close_round(path)
    r = open_round(path, params(), "rival", now=5.0)
    assert (r.round_id, r.rival, r.architecture, r.pretrained, r.is_open) == (1, "rival", "RN50", "openai", True)
    with pytest.raises(RoundError, match="round 1 is open .*gavil round close"):
        open_round(path, params(), "clip-vit-b-32")
    con = sqlite3.connect(path)  # the schema itself refuses a second open round
    with pytest.raises(sqlite3.IntegrityError):
        con.execute("INSERT INTO rounds (round_id, rival, opened_at) VALUES (2, 'x', 1)")
    con.close()
    assert close_round(path, now=9.0).closed_at == 9.0
    assert open_round(path, params(), "clip-vit-b-32").architecture == "ViT-B-32"


def test_round_open_close_list_through_the_cli(in_tmp):
    game_project(in_tmp, open_round=False)
    (in_tmp / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    run = CliRunner()
    res = run.invoke(app, ["round", "list"])
    assert res.exit_code == 0 and "no rounds yet" in res.output
    res = run.invoke(app, ["round", "open", "--rival", "clip-vit-b-32"])
    assert res.exit_code == 0, res.output
    assert "round 1 open, rival clip-vit-b-32 (ViT-B-32 / openai)" in res.output
    res = run.invoke(app, ["round", "open", "--rival", "rival"])
    assert res.exit_code != 0 and "round 1 is open" in str(res.exception)
    res = run.invoke(app, ["round", "list"])
    lines = res.output.splitlines()
    assert res.exit_code == 0 and lines[0].split() == [
        "round",
        "state",
        "rival",
        "opened_at",
        "closed_at",
        "creations",
        "solves",
    ]
    assert lines[1].split()[:3] == ["1", "open", "clip-vit-b-32"] and lines[1].split()[-3:] == ["-", "0", "0"]
    assert run.invoke(app, ["round", "close"]).exit_code == 0
    res = run.invoke(app, ["round", "open", "--rival", "rival"])
    assert res.exit_code == 0 and "round 2 open" in res.output
    rows = [line.split() for line in run.invoke(app, ["round", "list"]).output.splitlines()[1:]]
    assert [(r[0], r[1], r[2]) for r in rows] == [("1", "closed", "clip-vit-b-32"), ("2", "open", "rival")]


# ------------------------------------------------------------------------------ the game


def test_creations_are_refused_with_no_open_round_and_solving_goes_on(project, games, capsys):
    s = Server(project, games)
    h = s.player("Ann")
    r = s.create(h, "space")
    assert r.status_code == 503 and r.json()["error"] == NO_ROUND
    assert "gavil" not in r.json()["error"] and "round open" not in r.json()["error"]  # nothing for operators
    err = capsys.readouterr().err
    assert "no collection round is open" in err and "gavil round open --rival NAME" in err  # the console's line
    assert s.client.get("/api/status").json()["round"] is None
    assert s.client.post("/api/solve/task", headers=h).status_code == 200  # solving is not closed


def test_build_game_without_a_round_loads_no_rival(project, games):
    game, _ = build_game(params(), project, ask_consent=False)  # would load RN50 if it looked for a rival
    games.append(game)
    assert game.round is None and game.rival.model is None


def test_a_creation_stores_its_round_and_the_identity_of_the_rival_that_scored_it(project, games):
    open_round(store(project), params(), "rival")
    rival = FakeRival()
    s = Server(project, games, rival)
    h = s.player("Ann")
    r = s.create(h, "space")
    assert r.status_code == 200, r.text
    assert r.json()["round"] == 1
    assert s.game.wait_for_rival(10)
    seen = s.client.get(f"/api/create/{r.json()['instance_id']}", headers=h).json()
    stored = row(project, r.json()["instance_id"])
    assert rival.seen == ["space"]  # this rival scored it
    assert stored["round"] == 1
    identity = (stored["rival_model"], stored["rival_architecture"], stored["rival_weights"], stored["rival_sha256"])
    assert identity == rival.identity() == ("rival", "RN50", "openai", SHA)
    assert stored["score_fool_the_ai"] == seen["score_fool_the_ai"] == 100  # the score the player saw is this rival's
    [read] = read_submissions(store(project))[0]
    assert (read["round"], read["rival_model"], read["rival_sha256"]) == (1, "rival", SHA)
    batch = s.client.get("/api/admin/export", headers={"X-Admin-Token": "admin-secret"}).json()
    assert [c["round"] for c in batch["creations"]] == [1]  # the raw batch the admin exports keeps the round


def test_a_restart_mid_round_keeps_the_round_and_a_new_round_needs_a_restart(project, games):
    open_round(store(project), params(), "rival")
    first = Server(project, games)
    h = first.player("Ann")
    assert first.create(h, "space").status_code == 200
    first.game.close()
    again = Server(project, games)  # a restart: the same round
    assert again.game.round is not None and again.game.round.round_id == 1
    assert again.client.get("/api/status").json()["round"] == 1
    r = again.create(h, "night")
    assert r.status_code == 200 and r.json()["round"] == 1
    close_round(store(project))
    open_round(store(project), params(), "clip-vit-b-32")
    assert again.create(again.player("Bob"), "star").status_code == 503  # round 2's rival is not loaded here
    third = Server(project, games, FakeRival("clip-vit-b-32", "ViT-B-32"))
    r = third.create(third.player("Cid"), "star")
    assert r.status_code == 200 and r.json()["round"] == 2
    assert row(project, r.json()["instance_id"])["rival_model"] == "clip-vit-b-32"
    counts = [(x.round_id, x.creations) for x in list_rounds(store(project))]
    assert counts == [(1, 2), (2, 1)]
    h = third.player("Dee")

    def board(query: str) -> dict[str, int]:
        r = third.client.get(f"/api/leaderboard{query}", headers=h)
        assert r.status_code == 200, r.text
        return {row["name"]: row["associations_created"] for row in r.json()["rows"]}

    assert {k: v for k, v in board("").items() if v} == {"Ann": 2, "Cid": 1}  # every round, every player
    assert "Dee" in board("")
    assert board("?round=1") == {"Ann": 2} and board("?round=2") == {"Cid": 1}  # a round's players only
    assert third.client.get("/api/leaderboard?round=x", headers=h).status_code == 400


def test_a_changed_rival_entry_stops_the_game_from_serving_its_round(project):
    open_round(store(project), params(), "rival")
    changed = params().replace(models={"rival": {"model": "ViT-B-32"}})
    with pytest.raises(RoundError, match="round 1's rival 'rival' was RN50/openai/None when opened"):
        build_game(changed, project, ask_consent=False)


# ------------------------------------------------------------------------------ round-aware tables


def _solve_all(s: Server, solvers: list[dict[str, str]]) -> None:
    """Each solver answers every association it is served with the spymaster's images (positions 0, 1)."""
    for h in solvers:
        while (task := s.client.post("/api/solve/task", headers=h).json()["task"]) is not None:
            r = s.client.post("/api/solve", headers=h, json={"lease_id": task["lease_id"], "selection": [0, 1]})
            assert r.status_code == 200, r.text


def test_rounds_reach_the_selection_and_gavil_query_counts_them(in_tmp, monkeypatch, games):
    import io
    import json

    import pandas as pd

    from gavil.pipeline import catalog
    from stages.import_annotations import import_all
    from stages.select_instances import select

    monkeypatch.setenv("GAVIL_GAME_JOIN_CODE", "letmein")
    monkeypatch.setenv("GAVIL_GAME_ADMIN_TOKEN", "admin-secret")
    project = game_project(in_tmp)  # round 1 open
    first = Server(project, games)
    spy, solvers = first.player("Spy"), [first.player(f"Solver{i}") for i in range(3)]
    assert first.create(spy, "space").status_code == 200
    assert first.create(spy, "night").status_code == 200
    _solve_all(first, solvers)
    first.game.close()
    close_round(store(project))
    open_round(store(project), params(), "clip-vit-b-32")
    second = Server(project, games, FakeRival("clip-vit-b-32", "ViT-B-32"))
    assert second.create(spy, "planet").status_code == 200
    _solve_all(second, solvers)
    # a raw batch: a row that names its round, one that does not (round 0)
    batch = project / "raw/b1"
    batch.mkdir(parents=True)
    cands = ["rocket", "moon", "astronaut", "cat", "coffee"]
    rows = [
        {"instance_id": "r1", "spymaster_id": "w9", "cue": "orbit", "candidates": cands, "associations": cands[:2]},
        {"instance_id": "r2", "spymaster_id": "w9", "cue": "drink", "candidates": cands, "associations": cands[3:]},
    ]
    rows[0]["round"] = 7
    (batch / "creations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    answers = [
        {"instance_id": r["instance_id"], "solver_id": f"w{i}", "selection": r["associations"]}
        for r in rows
        for i in range(3)
    ]
    (batch / "solves.jsonl").write_text("".join(json.dumps(a) + "\n" for a in answers))

    res = import_all(None, [], project / "raw", b"k", game_store=store(project))
    assert sorted(res.instances["round"]) == [0, 1, 1, 2, 7]
    rivals = {(r, m, w) for r, m, w in zip(*(res.instances[c] for c in ("round", "rival_model", "rival_weights")))}
    # each game creation names the rival that scored it; the raw rows name none
    assert {x for x in rivals if x[0] in (1, 2)} == {(1, "rival", "openai"), (2, "clip-vit-b-32", "openai")}
    assert all(pd.isna(m) for r, m, _ in rivals if r in (0, 7))
    sel = select(res.instances, res.solves, 0.8, 3)
    assert (sel["status"] == "selected").all()
    catalog.write_table(sel, "selection", project)
    out = CliRunner().invoke(
        app,
        [
            "query",
            "--format",
            "csv",
            "select round, count(*) as n from selection where status = 'selected' group by round order by round",
        ],
    )
    assert out.exit_code == 0, out.output
    got = pd.read_csv(io.StringIO(out.output))
    assert list(zip(got["round"], got["n"])) == [(0, 1), (1, 2), (2, 1), (7, 1)]


def _evaluation(rows: list[tuple[str, int, float | None, bool]]) -> Any:
    import pandas as pd

    return pd.DataFrame(
        [
            {
                "model_name": m,
                "weights_id": "openai",
                "dataset": "game",
                "breakdown": "all",
                "cell": "all",
                "n_instances": 10,
                "n_scored": 10,
                "untrained": untrained,
                "mean_jaccard_percent": mean,
                "ci_low_percent": mean,
                "ci_high_percent": mean,
                "random_percent": 30.0,
                "round": rnd,
                "dataset_version": "1.1.0",
            }
            for m, rnd, mean, untrained in rows
        ]
    )


def test_round_open_without_a_rival_proposes_the_best_scored_clip_model_and_opens_nothing(in_tmp):
    from gavil.game.rounds import propose_rival
    from gavil.pipeline import catalog

    game_project(in_tmp, open_round=False)
    (in_tmp / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    run = CliRunner()
    res = run.invoke(app, ["round", "open"])
    assert res.exit_code == 2 and "name the rival: --rival NAME" in res.output  # nothing scored yet
    ev = _evaluation(
        [
            ("clip-rn50", -1, 40.0, False),
            ("clip-rn50", 1, 90.0, False),  # one round alone does not decide
            ("clip-vit-b-32", -1, 55.0, False),
            ("text-minilm-l6", -1, 70.0, False),  # not an open_clip model: it cannot be the game's rival
        ]
    )
    assert propose_rival(params(), ev) == ("clip-vit-b-32", 55.0)
    untrained = ev.assign(untrained=ev["model_name"] == "clip-vit-b-32")
    assert propose_rival(params(), untrained) == ("clip-rn50", 40.0)  # random weights are no rival
    catalog.write_table(ev, "evaluation", in_tmp)
    res = run.invoke(app, ["round", "open"])
    assert res.exit_code == 2 and "proposed rival: clip-vit-b-32 (mean Jaccard 55.0 %" in res.output
    assert "gavil round open --rival clip-vit-b-32" in res.output
    assert list_rounds(store(in_tmp)) == []  # a proposal opens nothing

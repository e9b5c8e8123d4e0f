"""Solver checks with gold items (``game.gold``; docs/dynamic.md "Solver checks (gold items)"): the
game serves new solvers published instances first, the import keeps a failed solver's answers out
of ``solves`` with the reason, ``annotator_stats`` shows gold accuracy, and old stores migrate."""

from __future__ import annotations

import json
import shlex
import sqlite3
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from gavil.cli import app
from gavil.domain.gold import gold_status
from gavil.game.launch import build_game
from gavil.game.service import Game
from gavil.game.web import create_app
from gavil.gamestore.store import SCHEMA_VERSION, connect, read_submissions, store_file
from gavil.params import Params
from gavil.params.game import GoldParams
from gavil.pipeline import catalog
from schemas.selection import Selection
from stages.import_annotations import import_all
from stages.select_instances import annotator_stats, select
from tests.game.test_rounds import FakeRival
from tests.helpers import game_project, old_store

KEY = b"k" * 32
#: published instances over the game project's images (N=5, K=2); the last one has no image for "unicorn"
GOLD = [
    ("space", ["rocket", "moon", "astronaut", "cat", "coffee"], ["rocket", "astronaut"]),
    ("farm", ["horse", "grass", "page", "brick", "cat"], ["horse", "grass"]),
    ("breakfast", ["coffee", "page", "moon", "brick", "horse"], ["coffee", "page"]),
    ("tea", ["coffee", "cat", "moon", "grass", "rocket"], ["coffee", "cat"]),
    ("myth", ["unicorn", "cat", "moon", "grass", "rocket"], ["unicorn", "moon"]),
]


def published(root: Path, rows: list[tuple[str, list[str], list[str]]] = GOLD) -> None:
    """A ``selection`` table whose rows are published (status selected, game IDs 0..n-1)."""
    n = len(rows)
    df = pd.DataFrame(
        {
            "instance_uid": [f"release:game_5_6.csv:{i}" for i in range(n)],
            "origin": "release",
            "dataset": "game",
            "split": "game_5_6",
            "split_id": pd.array(range(n), dtype="Int64"),
            "fingerprint": [f"{i:064x}" for i in range(n)],
            "cue": [r[0] for r in rows],
            "candidates": [r[1] for r in rows],
            "associations": [r[2] for r in rows],
            "num_associations": [len(r[2]) for r in rows],
            "num_candidates": [len(r[1]) for r in rows],
            "score_fool_the_ai": pd.array([50] * n, dtype="Int64"),
            "annotation_index": pd.array([None] * n, dtype="Int64"),
            "images_source": None,
            "cue_weight": float("nan"),
            "associations_mean_weight": float("nan"),
            "candidates_connectivity_score": float("nan"),
            "spymaster": None,
            "solvers": None,
            "solver_jaccards": None,
            "n_solvers": pd.array([None] * n, dtype="Int64"),
            "late_answers": 0,
            "solvers_jaccard_mean": 0.9,
            "solvers_jaccard_std": 0.1,
            "solvers_agreement": float("nan"),
            "status": "selected",
            "reason": None,
            "ID": pd.array(range(n), dtype="Int64"),
            "round": pd.array([0] * n, dtype="Int64"),
        },
        columns=list(Selection.to_schema().columns),
    )
    catalog.write_table(df, "selection", root)


def params(enabled: bool = True, items: int = 2, min_jaccard: float = 0.5, rate: float = 0.0) -> Params:
    """Test params; ``rate`` 0 (later gold checks off) unless a test sweeps the interleaving."""
    gold = {"enabled": enabled, "items": items, "min_jaccard": min_jaccard, "rate": rate}
    return Params().replace(models={"rival": {"allow_download": False}}, game={"identity": "shared_code", "gold": gold})


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GAVIL_GAME_JOIN_CODE", "letmein")
    monkeypatch.setenv("GAVIL_GAME_ADMIN_TOKEN", "admin-secret")
    root = game_project(tmp_path)
    published(root)
    return root


class Server:
    def __init__(self, project: Path, games: list[Game], p: Params) -> None:
        self.game, images = build_game(p, project, FakeRival(), ask_consent=False)
        games.append(self.game)
        self.images = images
        self.client = TestClient(create_app(self.game, images))
        self.store = store_file(project / "data/game")

    def player(self, name: str) -> dict[str, str]:
        r = self.client.post("/api/join", json={"code": "letmein", "name": name})
        assert r.status_code == 200, r.text
        return {"Authorization": f"Bearer {r.json()['token']}"}

    def create(self, h: dict[str, str], cue: str) -> str:
        task = self.client.post("/api/create/task", headers=h).json()["task"]
        r = self.client.post(
            "/api/create", headers=h, json={"task_id": task["task_id"], "cue": cue, "selection": [0, 1]}
        )
        assert r.status_code == 200, r.text
        return str(r.json()["instance_id"])

    def task(self, h: dict[str, str]) -> dict[str, Any] | None:
        r = self.client.post("/api/solve/task", headers=h)
        assert r.status_code == 200, r.text
        return r.json()["task"]

    def answer(self, h: dict[str, str], task: dict[str, Any], right: bool) -> dict[str, Any]:
        """Answer ``task`` with its associations (``right``) or with the other images."""
        assoc = self.truth(task["instance_id"])
        picks = assoc if right else [i for i in range(len(task["images"])) if i not in assoc][: task["k"]]
        r = self.client.post("/api/solve", headers=h, json={"lease_id": task["lease_id"], "selection": picks})
        assert r.status_code == 200, r.text
        return dict(r.json())

    def truth(self, instance_id: str) -> list[int]:
        con = connect(self.store, create=False)
        try:
            row = con.execute("SELECT candidates, associations FROM gold_items WHERE instance_id = ?", (instance_id,))
            hit = (
                row.fetchone()
                or con.execute(
                    "SELECT candidates, associations FROM creations WHERE instance_id = ?", (instance_id,)
                ).fetchone()
            )
        finally:
            con.close()
        cands, assoc = json.loads(hit[0]), json.loads(hit[1])
        return [cands.index(a) for a in assoc]

    def gold_ids(self) -> set[str]:
        con = connect(self.store, create=False)
        try:
            return {r[0] for r in con.execute("SELECT instance_id FROM gold_items WHERE active = 1")}
        finally:
            con.close()


def imported(project: Path, gold: GoldParams) -> Any:
    return import_all(None, [], None, KEY, game_store=store_file(project / "data/game"), gold=gold)


def play(project: Path, games: list[Game], p: Params) -> tuple[Server, dict[str, list[dict[str, Any]]]]:
    """Ann creates one association; Good answers gold right, Bad wrong, then both answer Ann's;
    returns the server and each solver's tasks in the order served."""
    s = Server(project, games, p)
    s.create(s.player("Ann"), "orbit")
    served: dict[str, list[dict[str, Any]]] = {}
    for name, right in (("Good", True), ("Bad", False)):
        h = s.player(name)
        served[name] = []
        for _ in range(p.game.gold.items + 1):
            task = s.task(h)
            assert task is not None
            served[name].append(task)
            s.answer(h, task, right)
    return s, served


def test_a_new_solver_is_served_the_gold_items_first_then_associations(project, games):
    s, served = play(project, games, params(items=2))
    gold = s.gold_ids()
    assert len(gold) == 4  # "myth" has no image for one candidate: never served
    for tasks in served.values():
        assert [t["instance_id"] in gold for t in tasks] == [True, True, False]
        assert len({t["instance_id"] for t in tasks[:2]}) == 2  # two distinct gold items
    # gold and regular tasks, and the replies to them, have the same keys; nothing tells the associations before
    g, r = served["Good"][0], served["Good"][2]
    assert list(g) == list(r) == ["lease_id", "instance_id", "cue", "images", "k", "expires_in_s"]
    assert g["instance_id"].startswith("g_") and len(g["instance_id"]) == len(r["instance_id"])
    h = s.player("Cara")
    task = s.task(h)
    assert task is not None and task["instance_id"] in gold
    again = s.client.get("/api/solve", headers=h).json()["task"]  # the live lease, read again
    assert (again["lease_id"], again["instance_id"]) == (task["lease_id"], task["instance_id"])
    assert all(s.client.get(f"/img/{sha}").status_code == 200 for sha in task["images"])
    replies = [s.answer(h, task, True)]
    for _ in range(2):
        t = s.task(h)
        assert t is not None
        replies.append(s.answer(h, t, True))
    assert list(replies[0]) == list(replies[2]) == ["jaccard", "selection", "associations"]
    # gold answers show in the player's own scores like any answer
    assert s.client.get("/api/me", headers=h).json()["associations_solved"] == 3


def test_answers_of_a_solver_who_failed_gold_do_not_fill_an_association(project, games):
    s, served = play(project, games, params(items=2))
    creation = served["Good"][2]["instance_id"]
    con = connect(s.store, create=False)
    assert con.execute("SELECT COUNT(*) FROM solves WHERE instance_id = ?", (creation,)).fetchone()[0] == 2
    con.close()
    # min_solvers 3: Good's answer counts, Bad's does not, so two more players are served it
    for name in ("Eve", "Fay"):
        h = s.player(name)
        for _ in range(2):
            t = s.task(h)
            assert t is not None
            s.answer(h, t, True)
        t = s.task(h)
        assert t is not None and t["instance_id"] == creation
        s.answer(h, t, True)
    gus = s.player("Gus")  # passes the gold items; the association has its three answers that count
    while (t := s.task(gus)) is not None:  # with no real work left, only gold items are served
        assert t["instance_id"] in s.gold_ids()
        s.answer(gus, t, True)


def test_the_import_keeps_a_failed_solvers_answers_out_with_the_reason(project, games):
    s, served = play(project, games, params(items=2))
    res = imported(project, GoldParams(enabled=True, items=2, min_jaccard=0.5))
    checks = res.gold_checks.set_index("gold_status")
    assert sorted(res.gold_checks["gold_status"]) == ["failed_gold_check", "passed"]
    assert checks.loc["passed", "gold_mean_jaccard"] == 1.0 and checks.loc["passed", "gold_answers"] == 2
    assert checks.loc["failed_gold_check", "gold_mean_jaccard"] == 0.0
    assert checks.loc["failed_gold_check", "excluded_answers"] == 1
    assert list(res.solves["solver"]) == [checks.loc["passed", "solver"]]  # only Good's answer counts
    gold_rejects = res.rejects[res.rejects["reason"].str.startswith("failed_gold_check:")]
    assert len(gold_rejects) == 1 and gold_rejects["kind"].tolist() == ["solve"]
    assert "mean Jaccard 0.00 on 2 gold item(s) < game.gold.min_jaccard 0.5" in gold_rejects["reason"].iloc[0]
    assert checks.loc["failed_gold_check", "solver"] in gold_rejects["row"].iloc[0]  # kept, hashed
    assert "gp_" not in gold_rejects["row"].iloc[0]  # never the raw player id
    assert res.metrics["gold"]["answers_excluded"] == 1
    # the same store with a stricter threshold: both fail, nothing counts
    strict = imported(project, GoldParams(enabled=True, items=2, min_jaccard=1.0))
    assert len(strict.solves) == 1  # 1.0 >= 1.0 passes
    more = imported(project, GoldParams(enabled=True, items=3))
    assert set(more.gold_checks["gold_status"]) == {"gold_pending"} and len(more.solves) == 0
    assert more.rejects["reason"].str.startswith("gold_pending: 2 of 3 gold item(s) answered").sum() == 2


def test_with_the_switch_off_gold_changes_nothing(project, games):
    s = Server(project, games, params(enabled=False))
    s.create(s.player("Ann"), "orbit")
    h = s.player("Bob")
    task = s.task(h)
    assert task is not None and task["instance_id"] not in s.gold_ids()  # no gold served, none stored
    assert s.gold_ids() == set()
    s.answer(h, task, False)
    off = imported(project, GoldParams())
    assert len(off.solves) == 1 and len(off.gold_checks) == 0 and "gold" not in off.metrics
    base = import_all(None, [], None, KEY, game_store=store_file(project / "data/game"))
    for a, b in ((off.instances, base.instances), (off.solves, base.solves), (off.rejects, base.rejects)):
        pd.testing.assert_frame_equal(a, b)
    assert off.metrics == base.metrics


def test_turning_the_switch_off_counts_every_answer_again(project, games):
    play(project, games, params(items=2))
    off = imported(project, GoldParams(enabled=False))
    assert len(off.solves) == 2 and not off.rejects["reason"].str.contains("gold").any()
    assert set(off.gold_checks["gold_status"]) == {"not_checked"}  # gold answers still shown


def test_annotator_stats_show_gold_accuracy_and_gavil_query_reads_them(project, games, monkeypatch):
    play(project, games, params(items=2))
    res = imported(project, GoldParams(enabled=True, items=2))
    sel = select(res.instances, res.solves, 0.8, 3)
    stats = annotator_stats(sel, res.solves, res.gold_checks)
    catalog.write_table(stats, "annotator_stats", project)
    solvers = stats[stats["role"] == "solver"].set_index("gold_status")
    assert solvers.loc["failed_gold_check", "count"] == 0  # a row although none of their answers counts
    assert solvers.loc["passed", "count"] == 1 and solvers.loc["passed", "gold_mean_jaccard"] == 1.0
    assert stats[stats["role"] == "spymaster"]["gold_status"].isna().all()
    monkeypatch.chdir(project)
    sql = "select gold_status, gold_answers, gold_mean_jaccard from annotator_stats where role = 'solver' order by 1"
    out = CliRunner().invoke(app, ["query", sql, "--format", "csv"])
    assert out.exit_code == 0, out.output
    assert out.output.splitlines()[1:] == ["failed_gold_check,2,0.0", "passed,2,1.0"]
    catalog.write_table(res.rejects, "annotation_rejects", project)
    from tests.project.test_readme import DOCS, _queries

    page = DOCS["docs/dynamic.md"]
    queries = _queries(page[page.index("## Solver checks (gold items)") :])
    assert len(queries) == 2
    for command in queries:  # the page's queries, verbatim, give rows once a solver failed gold
        got = CliRunner().invoke(app, [*shlex.split(command)[1:], "--format", "json"])
        assert got.exit_code == 0 and got.output.strip() not in ("", "[]"), (command, got.output)


def test_build_game_refuses_too_few_gold_items(project, games):
    from gavil.game.launch import TooFewGoldItems

    with pytest.raises(TooFewGoldItems, match="game.gold.items = 5"):
        Server(project, games, params(items=5))
    published(project, [])  # nothing published yet
    with pytest.raises(TooFewGoldItems, match="0 published"):
        Server(project, games, params(items=1))


def test_a_gold_lease_cannot_be_replayed_or_used_by_another_player(project, games):
    s = Server(project, games, params(items=2))
    a, b = s.player("Ann"), s.player("Bob")
    task = s.task(a)
    assert task is not None
    other = s.client.post("/api/solve", headers=b, json={"lease_id": task["lease_id"], "selection": [0, 1]})
    assert other.status_code == 403
    wrong_k = s.client.post("/api/solve", headers=a, json={"lease_id": task["lease_id"], "selection": [0]})
    assert wrong_k.status_code == 400
    s.answer(a, task, True)
    again = s.client.post("/api/solve", headers=a, json={"lease_id": task["lease_id"], "selection": [0, 1]})
    assert again.status_code == 409


@pytest.mark.parametrize(
    ("js", "status"),
    [([], "gold_pending"), ([1.0], "gold_pending"), ([0.5, 0.5], "passed"), ([0.5, 0.33], "failed_gold_check")],
)
def test_gold_status_rule(js, status):
    assert gold_status(js, GoldParams(enabled=True, items=2, min_jaccard=0.5))[0] == status
    assert gold_status(js, GoldParams(enabled=False))[0] == "not_checked"


def test_min_jaccard_is_a_fraction():
    with pytest.raises(ValueError, match="fraction"):
        GoldParams(enabled=True, min_jaccard=50)
    with pytest.raises(ValueError):
        GoldParams(items=0)


def version_4_store(path: Path) -> None:
    """A store as schema version 4 wrote it (its migration steps), with one creation and one solve."""
    con = old_store(path, 4)
    con.execute("INSERT INTO players VALUES ('p1', 'h1', 'Ann', 'ann', 1, 'Ann'), ('p2', 'h2', 'Bob', 'bob', 1, 'Bob')")
    cands = '["rocket", "moon", "cat", "coffee", "brick"]'
    con.execute("INSERT INTO tasks VALUES ('t1', 's', 'p1', ?, 1)", (cands,))
    con.execute(
        "INSERT INTO creations (instance_id, task_id, spymaster_id, cue, cue_norm, content_key, candidates,"
        " associations, rival_status, created_at, rival_state, round)"
        " VALUES ('g1', 't1', 'p1', 'space', 'space', 'c1', ?, '[\"moon\", \"rocket\"]', 'no_weights', 10, 'done', NULL)",
        (cands,),
    )
    con.execute(
        "INSERT INTO solves (instance_id, solver_id, selection, jaccard, created_at, lease_id)"
        " VALUES ('g1', 'p2', '[\"moon\", \"cat\"]', 0.33, 11, 'l1')"
    )
    con.close()


def test_a_version_4_store_migrates_and_keeps_its_rows(tmp_path):
    path = tmp_path / "game.sqlite"
    version_4_store(path)
    before = read_submissions(path)
    connect(path).close()
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 7
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"gold_items", "gold_leases", "gold_answers", "rounds", "leases"} <= tables
    assert con.execute("SELECT COUNT(*) FROM gold_answers").fetchone()[0] == 0
    con.close()
    assert read_submissions(path) == before
    res = import_all(None, [], None, KEY, game_store=path, gold=GoldParams(enabled=True))
    assert res.rejects["reason"].str.startswith("gold_pending: 0 of 3").tolist() == [True]  # switch on: no gold yet


def test_a_gold_item_is_flagged_like_any_association_and_the_flag_is_kept(project, games):
    """A flag's answers never tell gold from a regular association: a served gold item is flagged
    with the same reply, a second flag gets the same 409, an unserved gold id the same 404; the
    flag is in ``gold_flags`` and in the admin's queue."""
    s = Server(project, games, params(items=2))
    s.create(s.player("Ann"), "orbit")
    h = s.player("Flo")
    gold = s.task(h)
    assert gold is not None and gold["instance_id"] in s.gold_ids()
    body = {"instance_id": gold["instance_id"], "category": "wrong", "reason": "not these"}
    first = s.client.post("/api/flag", headers=h, json=body)
    assert first.status_code == 200 and list(first.json()) == ["instance_id", "category", "reason", "flagged"]
    again = s.client.post("/api/flag", headers=h, json=body)
    assert again.status_code == 409 and "already flagged" in again.json()["error"]
    nxt = s.task(h)  # the flagged gold item's lease is released: another task is served
    assert nxt is not None and nxt["instance_id"] != gold["instance_id"]
    other = next(i for i in s.gold_ids() if i not in (gold["instance_id"], nxt["instance_id"]))
    unserved = s.client.post("/api/flag", headers=h, json={**body, "instance_id": other})
    unknown = s.client.post("/api/flag", headers=h, json={**body, "instance_id": "g_" + "0" * 16})
    assert unserved.status_code == unknown.status_code == 404 and unserved.json() == unknown.json()
    con = connect(s.store, create=False)
    try:
        rows = con.execute("SELECT g.instance_id, f.category FROM gold_flags f JOIN gold_items g USING (gold_id)")
        assert [tuple(r) for r in rows] == [(gold["instance_id"], "wrong")]
    finally:
        con.close()
    queue = s.client.get("/api/admin/flags", headers={"X-Admin-Token": "admin-secret"}).json()
    assert [(g["cue"], g["category"]) for g in queue["gold_flags"]] == [(gold["cue"], "wrong")]

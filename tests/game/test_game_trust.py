"""Hostile players over HTTP (docs/game.md "Threat model"): throw-away accounts that report every
item they are served, players who try to learn the gold items, failed solvers holding leases, and a
closed round that a later setting must not reopen. Each test plays the attack through the web app
(Starlette's TestClient) and runs the import and selection as ``dvc repro`` would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from gavil.domain.gold import gold_status, gold_turn
from gavil.gamestore.store import connect
from gavil.params.game import FlagParams, GoldParams
from stages.export import changelog
from stages.import_annotations import import_all
from stages.select_instances import select, update_ledger
from stages.select_instances.stage import rounds_of
from tests.game.test_gold import KEY, Server, params, published
from tests.helpers import game_project

ADMIN = {"X-Admin-Token": "admin-secret"}
GOLD_ON = GoldParams(enabled=True, items=2, min_jaccard=0.5)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GAVIL_GAME_JOIN_CODE", "letmein")
    monkeypatch.setenv("GAVIL_GAME_ADMIN_TOKEN", "admin-secret")
    root = game_project(tmp_path)
    published(root)
    return root


def _imported(s: Server, gold: GoldParams = GOLD_ON) -> Any:
    return import_all(None, [], None, KEY, game_store=s.store, gold=gold, flag_params=FlagParams())


def _select(res: Any, ledger: pd.DataFrame | None = None) -> pd.DataFrame:
    sel = select(res.instances, res.solves, 0.8, 3, ledger, flags=res.flags)
    return sel.assign(round=rounds_of(sel, res.instances))


def _solve_all(s: Server, h: dict[str, str], right: bool = True) -> list[str]:
    """Answer every task served to ``h`` until none is left; the ids served."""
    seen = []
    while (t := s.task(h)) is not None:
        seen.append(t["instance_id"])
        s.answer(h, t, right)
    return seen


def _flag_everything(s: Server, h: dict[str, str], answer_wrong: bool) -> int:
    """A hostile account: it flags every item it is served (after answering it wrong, or not at all)."""
    flagged = 0
    for _ in range(30):
        t = s.task(h)
        if t is None:
            break
        if answer_wrong:
            s.answer(h, t, False)
        r = s.client.post("/api/flag", headers=h, json={"instance_id": t["instance_id"], "category": "offensive"})
        if r.status_code == 429:
            break
        flagged += r.status_code == 200
    return flagged


def test_ten_throwaway_accounts_reporting_everything_withdraw_nothing(project, games):
    s = Server(project, games, params(items=2))
    spy = s.player("Spy")
    orbit = s.create(spy, "orbit")
    s.create(spy, "lunar")
    honest = [s.player(f"Honest{i}") for i in range(3)]
    for h in honest:
        _solve_all(s, h)
    first = _select(_imported(s))
    ledger = update_ledger(first)
    ids = dict(zip(first["cue"], first["ID"]))
    assert {"orbit", "lunar"} <= {c for c, i in ids.items() if not pd.isna(i)}
    comet = s.create(spy, "comet")  # unpublished: the throw-away accounts are served it
    flagged = [_flag_everything(s, s.player(f"Troll{i}"), answer_wrong=i % 2 == 0) for i in range(10)]
    assert sum(flagged) >= 10
    q = s.client.get("/api/admin/flags", headers=ADMIN).json()
    assert all(not f["weight"] for i in q["instances"] for f in i["open_flags"])
    assert all(not i["holds_release"] for i in q["instances"]) and all(not g["weight"] for g in q["gold_flags"])
    res = _imported(s)
    assert len(res.flags) and not res.flags["holds"].any()
    sel = _select(res, ledger)
    assert dict(zip(sel["cue"], sel["ID"]))["orbit"] == ids["orbit"]
    assert set(sel[sel["status"] == "selected"]["cue"]) >= {"orbit", "lunar"}
    assert "withheld" not in set(sel["status"])
    # the admin keeps comet: a fresh account's report no longer takes it out of serving
    if comet in {i["instance_id"] for i in q["instances"]}:
        assert (
            s.client.post(
                "/api/admin/flags/review", headers=ADMIN, json={"instance_id": comet, "decision": "keep"}
            ).status_code
            == 200
        )
    _flag_everything(s, s.player("Troll10"), answer_wrong=True)
    late = s.player("Late")
    _solve_all(s, late)
    for h in honest[:2]:  # with Late's, three answers that count: the honest solvers are served comet
        assert comet in _solve_all(s, h)
    sel = _select(_imported(s), ledger)
    assert sel.set_index("cue").loc["comet", "status"] == "selected"
    # a reporter of weight (passed the gold check) holds an unpublished instance; a published one stays
    for iid in (comet, orbit):
        r = s.client.post("/api/flag", headers=honest[0], json={"instance_id": iid, "category": "wrong"})
        assert r.status_code == 200, r.text
    res = _imported(s)
    sel = _select(res, ledger).set_index("cue")
    assert sel.loc["comet", "status"] == "withheld" and sel.loc["comet", "reason"].startswith("flagged_unreviewed")
    assert sel.loc["orbit", "status"] == "selected" and sel.loc["orbit", "ID"] == ids["orbit"]
    # only the admin retires a published instance, recorded with who and why, counted in the changelog
    body = {"instance_id": orbit, "decision": "retire", "note": "a slur in some dialects", "reviewer": "Ines"}
    assert s.client.post("/api/admin/flags/review", headers=ADMIN, json=body).status_code == 200
    res = _imported(s)
    row = res.flags[res.flags["instance_uid"] == f"raw:{orbit}"].iloc[0]
    assert (row["decision"], row["reviewer"], row["review_note"]) == ("retire", "Ines", "a slur in some dialects")
    sel = _select(res, ledger)
    by = sel.set_index("cue")
    assert by.loc["orbit", "status"] == "retired" and by.loc["orbit", "ID"] == ids["orbit"]
    assert by.loc["orbit", "reason"].startswith("retired_by_review: a slur in some dialects (reviewer Ines)")
    assert [c["retired"] for c in changelog(sel) if c["round"] == 1] == [1]


def test_reports_are_budgeted_per_account_and_round(project, games):
    p = params(items=2).replace(game={"flags": {"reports_per_round": 2}})
    s = Server(project, games, p)
    h = s.player("Troll")
    codes = []
    for _ in range(4):
        t = s.task(h)
        assert t is not None
        r = s.client.post("/api/flag", headers=h, json={"instance_id": t["instance_id"], "category": "wrong"})
        codes.append(r.status_code)
    assert codes == [200, 200, 429, 429]


def test_gold_items_are_drawn_per_solver_and_never_revealed(project, games):
    s = Server(project, games, params(items=2))
    s.create(s.player("Spy"), "orbit")
    firsts = []
    for i in range(12):
        h = s.player(f"Solver{i}")
        t = s.task(h)
        assert t is not None and t["instance_id"] in s.gold_ids()
        firsts.append(t["instance_id"])
        reply = s.answer(h, t, True)
        assert reply == {"jaccard": None, "selection": reply["selection"], "associations": []}
    assert len(set(firsts)) >= 3  # not one fixed sequence (four items in the pool)
    rows = s.client.get("/api/leaderboard", headers=h).json()["rows"]
    assert len(rows) == 13 and all(r["solver_jaccard"] is None for r in rows)  # no player's gold score
    me = s.client.get("/api/me", headers=h).json()
    assert me["solver_jaccard"] is None and me["associations_solved"] == 1


def test_gold_turns_differ_per_solver_and_interleave():
    seqs = {tuple(gold_turn(f"gp_{i:016x}", n, True, 0.2) for n in range(40)) for i in range(50)}
    assert len(seqs) == 50
    share = sum(sum(q) for q in seqs) / (50 * 40)
    assert 0.1 < share < 0.3
    assert all(gold_turn("gp_x", n, False, 0.2) for n in range(5))  # before the check: gold only


def test_strikes_fail_a_solver_and_only_later_answers_are_rejected(project, games):
    p = params(items=2, rate=1.0)  # every later task is a gold item: the strikes come at once
    s = Server(project, games, p)
    g = GoldParams(enabled=True, items=2, min_jaccard=0.5, strikes=2)
    assert gold_status([1.0, 1.0, 0.0], g)[0] == "passed"
    assert gold_status([1.0, 1.0, 0.0, 0.0], g)[0] == "failed_gold_check"
    spy = s.player("Spy")
    s.create(spy, "orbit")
    h = s.player("Mallory")
    for _ in range(2):  # passes the check
        t = s.task(h)
        assert t is not None
        s.answer(h, t, True)
    con = connect(s.store, create=False)
    pid = con.execute("SELECT player_id FROM players WHERE display_name = 'Mallory'").fetchone()[0]
    con.close()
    # rate 1: every later task is gold, so the real one comes only when the pool runs out
    served = _solve_all(s, h, right=False)
    assert served and served[-1] not in s.gold_ids()  # then the association, answered after failing
    res = _imported(s, GoldParams(enabled=True, items=2, min_jaccard=0.5, strikes=2))
    bad = res.rejects[res.rejects["reason"].str.startswith("failed_gold_check:")]
    assert len(bad) == 1 and "later gold answer(s) below" in bad["reason"].iloc[0]
    assert pid not in bad["row"].iloc[0]
    checks = res.gold_checks.set_index("gold_status")
    assert checks.loc["failed_gold_check", "excluded_answers"] == 1


@pytest.mark.parametrize("seed", range(3))
def test_failed_and_unchecked_solvers_never_block_a_counted_one(project, games, seed):
    s = Server(project, games, params(items=2))
    spy = s.player("Spy")
    iid = s.create(spy, f"orbit{'x' * seed}")
    for i in range(4):  # failed solvers take leases on the association
        h = s.player(f"Failed{seed}{i}")
        for _ in range(2):
            t = s.task(h)
            assert t is not None
            s.answer(h, t, False)
        t = s.task(h)
        assert t is not None and t["instance_id"] == iid  # served, but its lease holds no place
    for i in range(3):  # unchecked solvers hold gold leases only
        t = s.task(s.player(f"New{seed}{i}"))
        assert t is not None and t["instance_id"] in s.gold_ids()
    for i in range(3):  # three counted solvers each get the association
        h = s.player(f"Good{seed}{i}")
        served = _solve_all(s, h)
        assert iid in served
    con = connect(s.store, create=False)
    n = con.execute("SELECT COUNT(*) FROM solves WHERE instance_id = ? AND counted = 1", (iid,)).fetchone()[0]
    con.close()
    assert n == 3


def test_a_closed_round_stays_closed_when_gold_checks_are_turned_on(project, games):
    from gavil.game.rounds import close_round

    off = Server(project, games, params(enabled=False))
    spy = off.player("Spy")
    ids = [off.create(spy, c) for c in ("orbit", "lunar")]
    for i in range(3):
        _solve_all(off, off.player(f"Solver{i}"))
    board = off.client.get("/api/leaderboard?round=1", headers=spy).json()
    con = connect(off.store, create=False)
    before = con.execute("SELECT COUNT(*) FROM solves").fetchone()[0]
    con.close()
    assert before == 6
    close_round(off.store)
    on = Server(project, games, params(enabled=True, items=2, rate=0.5))
    for i in range(5):
        served = _solve_all(on, on.player(f"New{i}"))
        assert not set(served) & set(ids)  # round 1's associations are never served again
    con = connect(on.store, create=False)
    assert con.execute("SELECT COUNT(*) FROM solves").fetchone()[0] == before
    con.close()
    assert board["rows"] and on.client.get("/api/leaderboard?round=1", headers=spy).json() == board
    res = _imported(on)
    assert len(res.solves) == 6  # given before the game checked solvers: they count

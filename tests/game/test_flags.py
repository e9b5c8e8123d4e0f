"""Players' flags and the admin's review (docs/dynamic.md "Flags and review"): ``POST /api/flag`` only
for associations a player was served, the admin's queue and decisions, the review rule, the store's
migration, and the pipeline: a flagged instance reaches neither the selection's selected rows nor
the export before a review keeps it."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from gavil.cli import app
from gavil.game.launch import build_game
from gavil.game.rival import Rival
from gavil.game.service import Game
from gavil.game.variant import VariantInstance
from gavil.game.web import create_app
from gavil.gamestore.store import SCHEMA_VERSION, StoreTooNew, connect, read_submissions, store_file
from gavil.params.game import FlagParams
from gavil.pipeline import catalog
from stages.export import benchmark_table, to_release_csv
from stages.import_annotations import import_all
from stages.select_instances import select, update_ledger
from tests.game.test_rounds import Server, params
from tests.helpers import game_project, old_store

KEY = b"test-key-not-secret"
ADMIN = {"X-Admin-Token": "admin-secret"}
NO_RIVAL = Rival("no_weights", "No rival model: the RN50 weights are not available.")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GAVIL_GAME_JOIN_CODE", "letmein")
    monkeypatch.setenv("GAVIL_GAME_ADMIN_TOKEN", "admin-secret")
    return game_project(tmp_path)  # round 1 open


class Play(Server):
    """The game over HTTP with helpers for flags (no rival model: nothing runs in the background)."""

    def __init__(self, project: Path, games: list[Game], **game: object) -> None:
        # an admin working through the queue makes more requests than the default budget of one address
        limits = {"admin_limit_per_address": "1000/minute", "admin_failure_delay_s": 0}
        p = params().replace(game={**limits, **game})
        self.game, images = build_game(p, project, NO_RIVAL, ask_consent=False)
        games.append(self.game)
        self.client = TestClient(create_app(self.game, images))

    def task(self, h: dict[str, str]) -> dict[str, Any] | None:
        r = self.client.post("/api/solve/task", headers=h)
        assert r.status_code == 200, r.text
        return r.json()["task"]

    def answer(self, h: dict[str, str], task: dict[str, Any]) -> None:
        r = self.client.post("/api/solve", headers=h, json={"lease_id": task["lease_id"], "selection": [0, 1]})
        assert r.status_code == 200, r.text

    def flag(self, h: dict[str, str], iid: object, category: object = "wrong", reason: object = "no") -> Any:
        return self.client.post(
            "/api/flag", headers=h, json={"instance_id": iid, "category": category, "reason": reason}
        )

    def review(self, iid: str, decision: str, note: str = "", headers: dict[str, str] = ADMIN) -> Any:
        body = {"instance_id": iid, "decision": decision, "note": note}
        return self.client.post("/api/admin/flags/review", headers=headers, json=body)

    def queue(self) -> dict[str, Any]:
        r = self.client.get("/api/admin/flags", headers=ADMIN)
        assert r.status_code == 200, r.text
        return r.json()

    def made(self, h: dict[str, str], cue: str) -> str:
        r = self.create(h, cue)
        assert r.status_code == 200, r.text
        return str(r.json()["instance_id"])


def flag_rows(project: Path) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(store_file(project / "data/game"))
    try:
        return con.execute("SELECT instance_id, player_id, category, reason FROM flags ORDER BY flag_id").fetchall()
    finally:
        con.close()


# ------------------------------------------------------------------------------ the game


def test_a_player_flags_what_they_were_served_and_it_is_served_to_no_new_solver(project, games):
    s = Play(project, games)
    spy = s.player("Spy")
    space, night = s.made(spy, "space"), s.made(spy, "night")
    ann, bob = s.player("Ann"), s.player("Bob")
    task = s.task(ann)
    assert task is not None and task["instance_id"] == space  # the oldest first
    r = s.flag(ann, space, "wrong", "  the images\n\tdon\u2019t   fit  ")
    assert r.status_code == 200, r.text
    assert r.json() == {"instance_id": space, "category": "wrong", "reason": "the images don't fit", "flagged": True}
    [(iid, _, category, reason)] = flag_rows(project)
    assert (iid, category, reason) == (space, "wrong", "the images don't fit")  # stored cleaned
    again = s.flag(ann, space, "offensive", "twice")
    assert again.status_code == 409 and "already flagged" in again.json()["error"]
    nxt = s.task(ann)  # the flagger's lease was released: the next task is another association
    assert nxt is not None and nxt["instance_id"] == night
    assert s.task(bob)["instance_id"] == night  # held: served to no new solver
    s.answer(bob, s.task(bob))
    assert s.task(bob) is None
    assert s.flag(bob, night, "unsolvable", "").status_code == 200  # answered: shown its result, may flag it
    status = s.client.post("/api/flag", json={"instance_id": night, "category": "wrong", "reason": ""})
    assert status.status_code == 401  # a session is needed


def test_only_an_association_served_to_the_player_can_be_flagged(project, games):
    """A sweep of ids a player was never served: each is the same 404 (no id's existence shows), nothing stored."""
    s = Play(project, games)
    spy = s.player("Spy")
    own, other = s.made(spy, "space"), s.made(spy, "night")
    cs = s.game.sets["random-5-0000"]
    variant = VariantInstance("swow_af:7", "sky", cs.candidates, cs.candidates[:2], cs.shas)
    assert s.game.serve_variant([variant]) == 1
    ann, bob, cid = s.player("Ann"), s.player("Bob"), s.player("Cid")
    held = s.task(bob)  # Bob holds a lease on `own`
    assert held is not None and held["instance_id"] == own
    t = s.task(cid)  # Cid answers what the server serves
    s.answer(cid, t)
    answered = t["instance_id"]
    never = [
        "g_0000000000000000",  # unknown
        own,  # Spy's creation: Ann was never served it (Bob holds it)
        answered,  # answered by Cid, not Ann
        "swow_af:7",  # the variant's instance, served to others only
        "SWOW_AF:7",
        own.upper(),
        own + " ",
        "%",
        "' OR 1=1 --",
    ]
    for iid in never:
        r = s.flag(ann, iid)
        assert (r.status_code, r.json()["error"]) == (404, "no association you were served has this id"), iid
    assert s.flag(spy, own).status_code == 404  # one's own creation is never served to oneself
    assert s.flag(spy, other).status_code == 404
    for bad in ("", "x" * 65, 7, None, ["g_1"]):
        assert s.flag(ann, bad).status_code == 400, bad
    assert flag_rows(project) == []
    # what each was served, each may flag: a live lease, the variant's instance once served
    assert s.flag(bob, own).status_code == 200
    while (t := s.task(ann)) is not None and t["instance_id"] != "swow_af:7":
        s.answer(ann, t)
    assert t is not None and s.flag(ann, "swow_af:7", "wrong", "").status_code == 200
    assert [(r[0], r[2]) for r in flag_rows(project)] == [(own, "wrong"), ("swow_af:7", "wrong")]


def test_flags_are_rate_limited_like_every_submission(project, games):
    s = Play(project, games, submissions_per_minute=2)
    spy = s.player("Spy")
    ids = [s.made(spy, "space"), s.made(spy, "night")]
    ann = s.player("Ann")
    s.answer(ann, s.task(ann))
    assert s.flag(ann, ids[0]).status_code == 200  # the answer and this flag: two submissions this minute
    limited = s.flag(ann, ids[1])
    assert limited.status_code == 429 and "slow down" in limited.json()["error"]
    assert limited.headers["Retry-After"].isdigit()
    assert len(flag_rows(project)) == 1


@pytest.mark.parametrize(
    ("category", "reason", "why"),
    [
        ("spam", "x", "choose what is wrong"),
        ("Offensive", "x", "choose what is wrong"),
        ("", "x", "choose what is wrong"),
        (3, "x", "category"),
        ("other", "", "say in a few words why"),
        ("other", " \n\t ", "say in a few words why"),
        ("wrong", "a\u200bb", "invisible or formatting character U+200B"),
        ("wrong", "bad\u202etxt", "U+202E"),
        ("wrong", "x" * 201, "at most 200"),
        ("wrong", 5, "reason"),
        ("wrong", None, "reason"),
    ],
)
def test_categories_and_reasons_are_checked(project, games, category, reason, why):
    s = Play(project, games)
    iid = s.made(s.player("Spy"), "space")
    ann = s.player("Ann")
    assert s.task(ann)["instance_id"] == iid
    r = s.flag(ann, iid, category, reason)
    assert r.status_code == 400 and why in r.json()["error"], r.text
    assert flag_rows(project) == []
    ok = s.flag(ann, iid, "other", "\u0441\u043b\u043e\u0432\u043e and 1+1=3!")  # any script, digits, punctuation
    assert ok.status_code == 200 and ok.json()["reason"] == "\u0441\u043b\u043e\u0432\u043e and 1+1=3!"


def test_the_admin_reviews_the_queue_keep_reopens_on_a_new_flag_and_retire_is_final(project, games):
    s = Play(project, games, flags={"min_reporters": 1})  # gold checks off: one reporter carries weight
    spy = s.player("Spy")
    space, night = s.made(spy, "space"), s.made(spy, "night")
    players = [s.player(n) for n in ("Ann", "Bob", "Cid", "Dee")]
    ann, bob, cid, dee = players
    for h in (ann, bob):
        s.answer(h, s.task(h))
        s.answer(h, s.task(h))
    assert s.flag(ann, space, "offensive", "rude").status_code == 200
    assert s.flag(bob, space, "wrong", "").status_code == 200
    assert s.flag(bob, night, "unsolvable", "").status_code == 200
    for h in ({}, {"X-Admin-Token": "nope"}, ann):  # no token, a wrong one, a player's session
        assert s.client.get("/api/admin/flags", headers=h).status_code == 403
        assert s.review(space, "keep", headers=h).status_code == 403
    q = s.queue()
    assert [i["instance_id"] for i in q["instances"]] == [space, night]
    first = q["instances"][0]
    assert (first["cue"], first["counts"], first["kept_before"]) == (
        "space",
        {"offensive": 1, "wrong": 1, "unsolvable": 0, "other": 0},
        0,
    )
    assert [f["reason"] for f in first["open_flags"]] == ["rude", ""]
    assert all(f["player"].startswith("a_") for f in first["open_flags"])  # keyed hashes, never the ids
    assert q["counts"] == {"offensive": 1, "wrong": 1, "unsolvable": 1, "other": 0}
    assert s.task(cid) is None  # both held: nothing for a new solver
    assert s.review(space, "maybe").status_code == 400
    assert s.review("g_unknown", "keep").status_code == 404
    r = s.review(space, "keep", "fine: a space photo")
    assert r.status_code == 200 and r.json() == {
        "instance_id": space,
        "decision": "keep",
        "flags_reviewed": 2,
        "state": "kept",
    }
    assert s.review(space, "keep").status_code == 409  # nothing open to keep (a retire would be the admin's act)
    assert [i["instance_id"] for i in s.queue()["instances"]] == [night]
    t = s.task(cid)
    assert t is not None and t["instance_id"] == space  # kept: served again
    assert s.flag(cid, space, "other", "still wrong").status_code == 200  # a new flag after keep re-opens review
    [_, reopened] = s.queue()["instances"]  # by oldest open flag: night's came first
    assert (reopened["instance_id"], len(reopened["open_flags"]), reopened["kept_before"]) == (space, 1, 2)
    assert s.task(dee) is None
    r = s.review(night, "retire", "no way to solve it")
    assert r.status_code == 200 and r.json()["state"] == "retired"
    assert s.review(night, "keep").status_code == 409  # retire is final
    late = s.flag(ann, night, "offensive", "")  # Ann answered it; a flag after retire changes nothing
    assert late.status_code == 409 and "withdrawn" in late.json()["error"]
    assert [i["instance_id"] for i in s.queue()["instances"]] == [space]
    subs = s.client.get("/api/admin/export", headers=ADMIN).json()
    assert [(f["instance_id"], f["state"], f["decision"]) for f in subs["flags"]] == [
        (space, "kept", "keep"),
        (space, "kept", "keep"),
        (night, "retired", "retire"),
        (space, "open", None),
    ]
    assert not any("player_id" in f for f in subs["flags"])


def test_flag_texts_for_players_name_no_operator_tool(project, games):
    from tests.game.test_game import OPERATOR_WORDS

    s = Play(project, games)
    iid = s.made(s.player("Spy"), "space")
    ann = s.player("Ann")
    s.answer(ann, s.task(ann))
    answers = [s.flag(ann, "nope"), s.flag(ann, iid, "x"), s.flag(ann, iid, "other", ""), s.flag(ann, iid)]
    answers.append(s.flag(ann, iid))
    assert s.review(iid, "retire").status_code == 200
    answers.append(s.flag(s.player("Bob"), iid))
    for r in answers:
        shown = r.json().get("error", "").lower()
        assert not [w for w in OPERATOR_WORDS if w in shown], shown
    page = (Path(__file__).parents[2] / "gavil/game/static/index.html").read_text().lower()
    assert "flag" in page and not [w for w in OPERATOR_WORDS if w in page.split("<main>")[1]]


# ------------------------------------------------------------------------------ the store


def store_at(path: Path, version: int) -> None:
    """A store as schema ``version`` left it (its migration steps, as the old code ran them), with a
    player, a creation and a solve in the first release's columns (valid at every version)."""
    con = old_store(path, version)
    con.execute(
        "INSERT INTO players (player_id, token_hash, display_name, name_key, created_at) VALUES ('p1', 'h1', 'Ann', 'ann', 1)"
    )
    con.execute(
        "INSERT INTO players (player_id, token_hash, display_name, name_key, created_at) VALUES ('p2', 'h2', 'Bob', 'bob', 1)"
    )
    cands = '["rocket", "moon", "cat", "coffee", "brick"]'
    con.execute("INSERT INTO tasks VALUES ('t1', 's', 'p1', ?, 1)", (cands,))
    con.execute(
        "INSERT INTO creations (instance_id, task_id, spymaster_id, cue, cue_norm, content_key, candidates,"
        " associations, rival_status, rival_predictions, score_fool_the_ai, created_at)"
        " VALUES ('g1', 't1', 'p1', 'space', 'space', 'k1', ?, '[\"moon\", \"cat\"]', 'ok', '[\"moon\", \"rocket\"]', 67, 10)",
        (cands,),
    )
    con.execute(
        "INSERT INTO solves (instance_id, solver_id, selection, jaccard, created_at)"
        " VALUES ('g1', 'p2', '[\"moon\", \"cat\"]', 1.0, 11)"
    )
    con.close()


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_every_older_store_migrates_to_flags_and_keeps_its_rows(tmp_path, version):
    path = tmp_path / "game.sqlite"
    store_at(path, version)
    before, solves = read_submissions(path)  # read as it is: no flags before version 5
    assert [c["flags"] for c in before] == [[]]
    connect(path).close()
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 7
    con.execute(
        "INSERT INTO flags (instance_id, player_id, category, reason, created_at) VALUES ('g1', 'p2', 'wrong', '', 12)"
    )
    with pytest.raises(sqlite3.IntegrityError):  # the schema's own checks
        con.execute(
            "INSERT INTO flags (instance_id, player_id, category, reason, created_at) VALUES ('g1', 'p1', 'spam', '', 12)"
        )
    con.execute(
        "INSERT INTO flag_reviews (instance_id, decision, note, reviewer, flags_through, reviewed_at)"
        " VALUES ('g1', 'retire', 'n', 'admin', 1, 13)"
    )
    with pytest.raises(sqlite3.IntegrityError):  # one retire per association: retire is final
        con.execute(
            "INSERT INTO flag_reviews (instance_id, decision, note, reviewer, flags_through, reviewed_at)"
            " VALUES ('g1', 'retire', 'again', 'admin', 1, 14)"
        )
    con.commit()
    con.close()
    after, solves_after = read_submissions(path)
    assert solves_after == solves and len(after) == 1
    [f] = after[0].pop("flags")
    assert (f["state"], f["decision"], f["note"], f["category"]) == ("retired", "retire", "n", "wrong")
    before[0].pop("flags")
    before[0]["round"] = after[0]["round"]  # a store older than rounds: its creations become round 1
    assert after == before  # every row kept
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    con.close()
    for opener in (lambda: connect(path), lambda: read_submissions(path)):
        with pytest.raises(StoreTooNew, match="newer"):
            opener()


# ------------------------------------------------------------------------------ the pipeline


def _imported(project: Path, min_reporters: int = 1) -> Any:
    """The import of the game's store; ``min_reporters`` 1: with gold checks off one report carries weight."""
    fp = FlagParams(min_reporters=min_reporters)
    return import_all(None, [], None, KEY, game_store=store_file(project / "data/game"), flag_params=fp)


def _answered_by_three(s: Play, cues: list[str]) -> tuple[list[str], list[dict[str, str]]]:
    spy = s.player("Spy")
    ids = [s.made(spy, c) for c in cues]
    solvers = [s.player(f"Solver{i}") for i in range(3)]
    for h in solvers:
        while (t := s.task(h)) is not None:
            s.answer(h, t)
    return ids, solvers


def _benchmark_cues(sel: pd.DataFrame) -> list[str]:
    return list(benchmark_table(sel)["cue"])


def test_a_flagged_instance_reaches_the_export_only_after_a_keep_and_a_retired_one_never(project, games):
    s = Play(project, games)
    (space, night, star), solvers = _answered_by_three(s, ["space", "night", "star"])
    assert s.flag(solvers[0], space, "offensive", "rude").status_code == 200
    assert s.flag(solvers[1], night, "unsolvable", "").status_code == 200
    res = _imported(project)
    assert list(res.flags["state"]) == ["open", "open"]
    assert set(res.flags["instance_uid"]) == {f"raw:{space}", f"raw:{night}"}
    sel = select(res.instances, res.solves, 0.8, 3, flags=res.flags).set_index("instance_uid")
    for iid in (space, night):
        row = sel.loc[f"raw:{iid}"]
        assert row["status"] == "withheld" and pd.isna(row["ID"])
        assert row["reason"].startswith("flagged_unreviewed: 1 open player flag(s)")
        assert row["reason"].endswith("otherwise selected")
    assert sel.loc[f"raw:{star}", "status"] == "selected"
    before = select(res.instances, res.solves, 0.8, 3, flags=res.flags)
    assert _benchmark_cues(before) == ["star"]
    assert to_release_csv(benchmark_table(before)).count("\n") == 2  # the header and star
    assert s.review(space, "keep", "a fair cue").status_code == 200
    assert s.review(night, "retire", "nobody can solve it").status_code == 200
    res = _imported(project)
    assert sorted(res.flags["state"]) == ["kept", "retired"]
    after = select(res.instances, res.solves, 0.8, 3, flags=res.flags)
    by = after.set_index("instance_uid")
    assert by.loc[f"raw:{space}", "status"] == "selected"  # kept: treated as any other
    assert by.loc[f"raw:{night}", "status"] == "withheld"
    assert by.loc[f"raw:{night}", "reason"].startswith("retired_by_review: nobody can solve it (reviewer admin)")
    assert sorted(_benchmark_cues(after)) == ["space", "star"]
    assert select(res.instances, res.solves, 0.8, 3).set_index("instance_uid").loc[f"raw:{night}", "status"] == (
        "selected"  # the flags alone kept it out
    )


def test_a_published_instance_stays_published_whatever_the_reports_until_the_admin_retires_it(project, games):
    """A report is no veto: a published instance stays in the export with its ID whatever reports
    say (this test once asserted the old rule, a flag taking it out); only the admin's retire takes
    it out, recorded with who and why, its ID a gap."""
    s = Play(project, games)
    (space, night), solvers = _answered_by_three(s, ["space", "night"])
    res = _imported(project)
    first = select(res.instances, res.solves, 0.8, 3, flags=res.flags)
    ledger = update_ledger(first)
    ids = dict(zip(first["cue"], first["ID"]))
    assert sorted(_benchmark_cues(first)) == ["night", "space"]
    assert s.flag(solvers[2], space, "offensive", "a slur").status_code == 200
    res = _imported(project)
    assert res.flags["holds"].tolist() == [True]  # of weight: it would hold an unpublished one
    kept = select(res.instances, res.solves, 0.8, 3, ledger, flags=res.flags)
    assert sorted(_benchmark_cues(kept)) == ["night", "space"] and dict(zip(kept["cue"], kept["ID"])) == ids
    ledger2 = update_ledger(kept, ledger)
    assert ledger2.equals(ledger)  # the published row is untouched
    assert s.flag(solvers[1], night, "wrong", "").status_code == 200
    assert s.review(night, "retire", "wrong images").status_code == 200
    res = _imported(project)
    gone = select(res.instances, res.solves, 0.8, 3, ledger2, flags=res.flags).set_index("instance_uid")
    assert gone.loc[f"raw:{night}", "status"] == "retired" and gone.loc[f"raw:{night}", "ID"] == ids["night"]
    assert gone.loc[f"raw:{night}", "reason"].startswith("retired_by_review: wrong images (reviewer admin)")
    assert gone.loc[f"raw:{space}", "status"] == "selected"


def test_the_flags_table_and_the_pages_queries_run(in_tmp, monkeypatch, games):
    import shlex

    from tests.project.test_readme import DOCS, _queries

    monkeypatch.setenv("GAVIL_GAME_JOIN_CODE", "letmein")
    monkeypatch.setenv("GAVIL_GAME_ADMIN_TOKEN", "admin-secret")
    project = game_project(in_tmp)
    s = Play(project, games)
    (space, night), solvers = _answered_by_three(s, ["space", "night"])
    assert s.flag(solvers[0], space, "other", 'it says, "=1+1"').status_code == 200
    assert s.review(space, "keep", "fine").status_code == 200
    assert s.flag(solvers[1], night, "offensive", "").status_code == 200
    res = _imported(project)
    catalog.write_table(res.flags, "flags", project)
    catalog.write_table(select(res.instances, res.solves, 0.8, 3, flags=res.flags), "selection", project)
    query = "select instance_uid, category, reason, state, decision, review_note from flags order by flag_id"
    out = CliRunner().invoke(app, ["query", "--format", "csv", query])
    assert out.exit_code == 0, out.output
    got = pd.read_csv(io.StringIO(out.output), keep_default_na=False)
    assert got.to_dict("records") == [
        {
            "instance_uid": f"raw:{space}",
            "category": "other",
            "reason": 'it says, "=1+1"',
            "state": "kept",
            "decision": "keep",
            "review_note": "fine",
        },
        {
            "instance_uid": f"raw:{night}",
            "category": "offensive",
            "reason": "",
            "state": "open",
            "decision": "",
            "review_note": "",
        },
    ]
    assert res.metrics["flags"] == {
        "rows": 2,
        "by_state": {"open": 1, "kept": 1, "retired": 0},
        "of_rejected_creations": 0,
    }
    page = DOCS["docs/dynamic.md"]
    queries = _queries(page[page.index("## Flags and review") : page.index("## Solver checks (gold items)")])
    assert len(queries) == 3
    for command in queries:  # the page's queries, verbatim, give rows on flagged instances
        out = CliRunner().invoke(app, [*shlex.split(command)[1:], "--format", "json"])
        assert out.exit_code == 0 and out.output.strip() not in ("", "[]"), (command, out.output)
    assert "withheld" in out.output and "flagged_unreviewed" in out.output

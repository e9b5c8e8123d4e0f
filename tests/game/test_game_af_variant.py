"""Issue 28: the swow_af variant is validated by people. With ``game.serve_af_variant`` the game
serves its instances as solve tasks (HTTP API, the real app and store); their solves are imported
like any game creation (``images_source`` swow_af) and only selection (>= 80 % mean solver
Jaccard, ``select.min_solvers`` answers) lets one into the export."""

from __future__ import annotations

import pandas as pd
import pytest
from starlette.testclient import TestClient

from gavil.game.launch import build_game
from gavil.game.web import create_app
from gavil.gamestore.store import store_file
from gavil.pipeline import catalog
from stages.import_annotations import import_all
from stages.select_instances import select
from tests.game.test_game import KEY, NO_RIVAL, Player, params, project  # noqa: F401 (fixture)


def _variant(root) -> None:
    rows = [
        ("swow-a", "space", ["rocket", "moon"], ["rocket", "cat", "moon", "coffee", "brick"]),
        ("swow-b", "money", ["coin", "page"], ["coin", "horse", "grass", "page", "clock"]),
        (
            "swow-c",
            "time",
            ["clock", "moon"],
            ["clock", "moon", "nosuchimage", "cat", "coin"],
        ),  # no image: never served
    ]
    catalog.write_table(
        pd.DataFrame(
            {
                "instance_id": [r[0] for r in rows],
                "variant": "swow_af",
                "cue": [r[1] for r in rows],
                "status": "ok",
                "reason": None,
                "associations": [r[2] for r in rows],
                "candidates": [r[3] for r in rows],
                "distractors": [[c for c in r[3] if c not in r[2]] for r in rows],
                "original_distractors": [[c for c in r[3] if c not in r[2]] for r in rows],
                "replacements": 1,
                "pool_size": 8,
                "num_candidates": 5,
            }
        ),
        "af_instances",
        root,
    )


@pytest.mark.parametrize("serve", [True, False])
def test_served_variant_instances_reach_selection_only_through_human_solves(project, serve):  # noqa: F811
    _variant(project)
    game, images = build_game(params(serve_af_variant=serve), project, NO_RIVAL, ask_consent=False)
    client = TestClient(create_app(game, images))
    solvers = [Player(client, f"Solver {i}") for i in range(3)]
    served = []
    for s in solvers:
        while (t := s.post("/api/solve/task").json()["task"]) is not None:
            served.append(t["instance_id"])
            # everyone finds "space"; "money" is missed by two of three (mean Jaccard < 80 %)
            pick = [0, 2] if t["cue"] == "space" else ([0, 3] if s is solvers[0] else [1, 2])
            assert s.post("/api/solve", {"lease_id": t["lease_id"], "selection": pick}).status_code == 200
    if not serve:
        assert served == []  # off by default: the variant is never served
        return
    assert sorted(set(served)) == ["swow_af:swow-a", "swow_af:swow-b"] and len(served) == 6
    assert (
        build_game(params(serve_af_variant=True), project, NO_RIVAL, ask_consent=False)[0].serve_variant([]) == 0
    )  # idempotent
    res = import_all(None, [], None, KEY, game_store=store_file(project / "data/game"))
    inst, sol = res.instances, res.solves
    assert res.rejects.empty and set(inst["images_source"]) == {"swow_af"} and len(sol) == 6
    chosen = select(inst, sol, 0.8, 3).set_index("cue")
    assert chosen.loc["space", "status"] == "selected" and chosen.loc["space", "solvers_jaccard_mean"] == 1.0
    assert chosen.loc["money", "status"] == "below_threshold"

"""The players' leaderboard with an untrained rival (issue 48): no association earns a bonus or a
fool-the-AI score, so the board must not fall back to ranking by answers given, which put the
solvers above the spymaster who made every association of the round."""

from __future__ import annotations

from typing import Any, cast

from gavil.game.rival import Rival
from gavil.game.rounds import open_round
from tests.game.test_rounds import SHA, Server, params, project, store  # noqa: F401 (project: a fixture)


class UntrainedRival(Rival):
    """A rival with random weights: its picks are not a model's (status ``untrained``)."""

    def __init__(self) -> None:
        super().__init__("untrained", "random weights", "fake", cast(Any, object()), {}, "rival", "RN50", "openai", SHA)

    def predict(self, cue: str, candidate_shas: Any, k: int) -> list[int] | None:
        return list(range(k))


def test_the_spymaster_of_a_rounds_solvable_associations_ranks_above_its_solvers(project, games):  # noqa: F811
    open_round(store(project), params(), "rival")
    s = Server(project, games, UntrainedRival())
    ann = s.player("Ann")
    for cue in ("space", "night"):
        assert s.create(ann, cue).status_code == 200
    for name in ("Ben", "Cid", "Dee"):
        h = s.player(name)
        while (task := s.client.post("/api/solve/task", headers=h).json()["task"]) is not None:
            r = s.client.post("/api/solve", headers=h, json={"lease_id": task["lease_id"], "selection": [0, 1]})
            assert r.status_code == 200, r.text
    for query in ("?round=1", ""):
        rows = s.client.get(f"/api/leaderboard{query}", headers=ann).json()["rows"]
        assert rows[0]["name"] == "Ann", rows
        assert all(r["bonus"] == 0 and r["fool_the_ai"] is None for r in rows)  # no rival score to rank by

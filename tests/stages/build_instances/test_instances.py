import pandas as pd
import pytest

from gavil.io import validate
from schemas.instances import CandidateSets, SwowInstances
from stages.build_instances import game_candidate_sets, swow_instances

POOL = sorted(
    "astronaut brick camera cat cell clock coffee coin eye flower grass horse logo moon page rocket star stone text".split()
)


def edges(rows):
    df = pd.DataFrame(rows, columns=["cue", "response", "r123_count"])
    df["r123_count"] = df["r123_count"].astype("Int64")
    df["rank"] = df.groupby("cue").cumcount() + 1
    return df


def test_game_sets_are_seeded_samples_without_replacement():
    a = validate(game_candidate_sets(POOL, {5: 3, 6: 2, 10: 1, 12: 1}, seed=1), CandidateSets)
    b = game_candidate_sets(POOL, {5: 3, 6: 2, 10: 1, 12: 1}, seed=1)
    c = game_candidate_sets(POOL, {5: 3, 6: 2, 10: 1, 12: 1}, seed=2)
    assert a["candidates"].tolist() == b["candidates"].tolist() != c["candidates"].tolist()
    assert a["num_candidates"].tolist() == [5, 5, 5, 6, 6, 10, 12]
    assert all(set(x) <= set(POOL) and len(set(x)) == len(x) for x in a["candidates"])
    assert game_candidate_sets(POOL[:8], {10: 2}, seed=1).empty  # pool too small for N=10


def test_swow_instances_follow_the_reference_rules():
    e = edges(
        [
            ("spacecraft", "rocket", 40),
            ("spacecraft", "moon", 30),
            ("spacecraft", "shuttle", 20),
            ("spacecraft", "astronaut", 12),
            ("spacecraft", "star", 3),
            ("paddock", "grass", None),
            ("paddock", "horse", None),
            ("lonely", "cat", 50),
            ("lonely", "unicorn", 40),
            ("hell", "moon", 20),
            ("hell", "star", 20),
        ]
    )
    out = validate(swow_instances(e, POOL, profane={"hell"}, seed=13)[0], SwowInstances).set_index("cue")
    sc = out.loc["spacecraft"]
    # strongest responses with an image; "star" has R123=3 < 10; "shuttle" has no image
    assert sc["status"] == "ok" and sc["associations"] == ["rocket", "moon", "astronaut"]
    assert sc["num_candidates"] in (5, 6) and set(sc["associations"]) <= set(sc["candidates"])
    distractors = set(sc["candidates"]) - set(sc["associations"])
    assert not distractors & {"rocket", "moon", "shuttle", "astronaut", "star"}  # never a response of the cue
    assert sc["associations_mean_weight"] == pytest.approx((40 + 30 + 12) / 3)
    assert out.loc["paddock", "status"] == "ok" and pd.isna(out.loc["paddock", "associations_mean_weight"])
    assert out.loc["lonely", "status"] == "too_few_associations"
    assert out.loc["hell", "status"] == "profane_cue"
    again = swow_instances(e, POOL, profane={"hell"}, seed=13)[0].set_index("cue")
    assert again.loc["spacecraft", "candidates"] == sc["candidates"]  # seeded per cue
    fewer = swow_instances(e[e.cue != "paddock"], POOL, profane=set(), seed=13)[0].set_index("cue")
    assert fewer.loc["spacecraft", "candidates"] == sc["candidates"]  # other cues do not shift it


def test_too_few_distractors():
    e = edges([("x", "cat", 20), ("x", "moon", 20)])
    out = swow_instances(e, ["cat", "moon", "sun"], profane=set(), seed=1)[0]
    assert out.loc[0, "status"] == "too_few_distractors"


def test_distractors_cover_exactly_the_pool_minus_the_cues_responses():
    # responses (and the cue itself) sit at the pool's start, middle and end: the index skipping
    # must never hand one out as a distractor, and must reach every other concept
    responses = ["astronaut", "brick", "clock", "coin", "page", "text"]
    e = edges([("rocket", r, 30 - i) for i, r in enumerate(responses)])
    seen: set[str] = set()
    for seed in range(300):
        row = swow_instances(e, POOL, profane=set(), seed=seed)[0].iloc[0]
        assert row["status"] == "ok" and row["associations"] == responses[:4]
        distractors = set(row["candidates"]) - set(row["associations"])
        assert len(distractors) == row["num_candidates"] - 4 and len(row["candidates"]) == len(set(row["candidates"]))
        seen |= distractors
    assert seen == set(POOL) - set(responses) - {"rocket"}


def test_a_word_linked_to_the_cue_in_either_swow_direction_is_never_a_distractor():
    """``dial -> rope`` (R123 40) makes dial a neighbour of the cue rope even though rope never named
    dial: over many seeds, no word that gave the cue as a response is drawn, every other concept is."""
    pool = sorted([*POOL, "dial", "knot"])
    e = edges(
        [
            ("rope", "knot", 40),
            ("rope", "cat", 30),
            ("dial", "rope", 40),  # the other direction
            ("clock", "rope", 2),  # any count links them
            ("knot", "moon", 20),
        ]
    )
    seen: set[str] = set()
    for seed in range(300):
        rows = swow_instances(e, pool, profane=set(), seed=seed)[0].set_index("cue")
        row = rows.loc["rope"]
        assert row["status"] == "ok" and row["associations"] == ["knot", "cat"]
        seen |= set(row["candidates"]) - set(row["associations"])
    assert not seen & {"dial", "clock"}, seen & {"dial", "clock"}
    assert seen == set(pool) - {"rope", "knot", "cat", "dial", "clock"}

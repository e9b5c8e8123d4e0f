"""evaluate: random baseline, bootstrap, the release-predictions check, Table 4."""

import numpy as np
import pandas as pd

from gavil.domain.winogavil import random_expected_jaccard
from gavil.io import validate
from schemas.evaluate import EvalPredictions, Evaluation
from stages.evaluate import (
    RELEASE_EXPECTED,
    RELEASE_MODEL,
    aggregate,
    bootstrap_ci,
    release_predictions,
    table4_markdown,
)
from tests.helpers import RELEASE


def test_bootstrap_ci_brackets_the_mean_and_is_seeded():
    vals = np.array([0, 100, 100, 50, 33.3, 100, 0, 67] * 20, dtype=float)
    lo, hi = bootstrap_ci(vals, 2000, seed=1)
    assert lo < vals.mean() < hi and hi - lo < 20
    assert bootstrap_ci(vals, 2000, seed=1) == (lo, hi)
    assert np.isnan(bootstrap_ci(np.array([]), 10, 0)[0])


def test_release_predictions_reproduce_the_published_numbers_exactly():
    pred = validate(release_predictions(RELEASE / "test_sets_with_zero_shot_predictions"), EvalPredictions)
    assert len(pred) == 854 + 2714 + 1000
    assert (pred["score_fool_the_ai"] == 100 - (100 * pred["jaccard"]).astype(int)).all()
    ev = validate(aggregate(pred, n_boot=200, seed=0), Evaluation)
    assert set(ev["round"]) == {-1, 0} and set(ev["dataset_version"]) == {"1.0.0"}  # the release is round 0
    ev = ev[ev["round"] == -1]
    groups = ev[(ev.breakdown == "group") & (ev.model_name == RELEASE_MODEL)]
    got = {f"{d} {c}": round(float(m), 1) for d, c, m in zip(groups.dataset, groups.cell, groups.mean_jaccard_percent)}
    assert got == RELEASE_EXPECTED  # 41.6 / 53.4 / 74.3
    by_n = ev[(ev.breakdown == "num_candidates") & (ev.dataset == "game")].set_index("cell")
    assert set(by_n.index) == {"5", "6", "10", "12"}
    assert (by_n["mean_jaccard_percent"] > by_n["random_percent"]).all()
    assert (by_n["ci_low_percent"] <= by_n["mean_jaccard_percent"]).all() and (
        by_n["mean_jaccard_percent"] <= by_n["ci_high_percent"]
    ).all()
    # random chance falls with N, as in the paper
    r = by_n["random_percent"]
    assert r["5"] > r["6"] > r["10"] > r["12"]


def test_unscored_models_report_nothing_made_up():
    pred = pd.DataFrame(
        {
            "model_name": ["m", "m"],
            "weights_id": ["openai", "openai"],
            "dataset": ["game", "game"],
            "instance_id": ["a", "b"],
            "num_candidates": [5, 10],
            "status": ["no_weights", "no_weights"],
            "reason": ["x", "x"],
            "predictions": [None, None],
            "similarities": [None, None],
            "jaccard": [None, None],
            "score_fool_the_ai": [None, None],
            "random_jaccard": [0.3, random_expected_jaccard(10, 2)],
        }
    )
    ev = validate(aggregate(validate(pred, EvalPredictions), 100, 0), Evaluation)
    assert ev["mean_jaccard_percent"].isna().all() and (ev["n_scored"] == 0).all()
    md = table4_markdown(ev, {})
    assert "n/a (0/1)" in md and "Random chance" in md


def test_table4_per_collection_round_and_overall_name_the_dataset_version():
    from stages.evaluate import table4_by_round

    ids, rounds, jac = ["a", "b", "c", "d"], {"b": 1, "c": 1, "d": 2}, [1.0, 0.5, 0.0, 0.25]
    pred = pd.DataFrame(
        {
            "model_name": "m",
            "weights_id": "openai",
            "dataset": "game",
            "instance_id": ids,
            "num_candidates": [5, 5, 6, 5],
            "status": "ok",
            "reason": None,
            "predictions": [["x", "y"]] * 4,
            "similarities": None,
            "jaccard": jac,
            "score_fool_the_ai": [100 - int(100 * j) for j in jac],
            "random_jaccard": 0.3,
        }
    )
    ev = validate(aggregate(validate(pred, EvalPredictions), 50, 0, rounds, "1.2.0"), Evaluation)
    assert set(ev["dataset_version"]) == {"1.2.0"}
    grp = ev[(ev["breakdown"] == "group") & (ev["cell"] == "5&6")].set_index("round")
    assert list(grp.index) == [-1, 0, 1, 2]  # overall first, then each round (a: no round given -> 0)
    assert list(grp["n_instances"]) == [4, 1, 2, 1]
    assert list(grp["mean_jaccard_percent"]) == [43.75, 100.0, 25.0, 25.0]
    md = table4_by_round(ev)
    assert (
        "### Round 0" in md and "### Round 1" in md and "| m (openai) | – | 25.0 [0.0, 50.0] (2/2) | – |" in md
    )  # with its CI
    assert "Round" not in table4_markdown(ev, {})  # the overall table reads the round -1 rows only
    assert table4_by_round(ev[ev["round"].isin([-1, 1])]) == ""  # one round: no per-round section

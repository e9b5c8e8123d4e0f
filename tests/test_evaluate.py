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

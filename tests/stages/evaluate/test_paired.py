"""Winoground paired scores (stages/evaluate/paired.py): the release's pair counts, hand-made 2x2
cases, ties, i.i.d. random scores at chance, the cluster bootstrap and "both cues solved"."""

import json

import numpy as np
import pandas as pd
import pytest

from gavil.io import validate
from schemas.evaluate import PairedEvaluation
from stages.evaluate.paired import (
    CHANCE_PERCENT,
    both_solved,
    cluster_bootstrap,
    find_pairs,
    pair_scores,
    paired_scores,
    release_game_predictions,
)
from tests.helpers import RELEASE


def _release() -> pd.DataFrame:
    d = pd.read_csv(RELEASE / "winogavil_dataset.csv")
    return d.assign(
        instance_id=d["ID"], candidates=d["candidates"].map(json.loads), associations=d["associations"].map(json.loads)
    )


def test_release_pair_counts_match_methods():
    pairs, counts = find_pairs(_release())
    assert counts["sets"] == 988
    assert counts["pairs"] == 5404
    assert (counts["identical"], counts["disjoint"], counts["overlapping"]) == (869, 1942, 2593)
    assert counts["same_cue"] == 28
    by_n = pairs[pairs["kind"] == "disjoint"].groupby("num_candidates").size().to_dict()
    assert by_n == {5: 489, 6: 746, 10: 342, 12: 365}  # no disjoint pair shares a cue
    # every returned pair: different cues, different sets, both difference parts non-empty
    assert (pairs["a0"].map(len) > 0).all() and (pairs["a1"].map(len) > 0).all()
    assert counts["scored"] == len(pairs)
    disjoint_scored = (pairs["kind"] == "disjoint").sum()
    assert disjoint_scored == 1942


def test_release_top_k_both_cues_solved():
    inst, pred = release_game_predictions(
        RELEASE / "test_sets_with_zero_shot_predictions",
        ["game_5_6_with_predictions.csv", "game_10_12_with_predictions.csv"],
    )
    assert len(inst) == 3568
    got = validate(both_solved(inst, pred, "release", 200, 0), PairedEvaluation)
    d = got[got["pair_kind"] == "disjoint"].set_index("cell")
    assert d.loc["10&12", "n_pairs"] == 707 and round(d.loc["10&12", "percent"], 1) == 5.5
    assert d.loc["5&6", "n_pairs"] == 1235 and round(d.loc["5&6", "percent"], 1) == 11.2
    assert (d["ci_low_percent"] <= d["percent"]).all() and (d["percent"] <= d["ci_high_percent"]).all()
    assert (d["chance_percent"] < 1).all()
    # weighting every candidate set once instead of every pair
    assert d.loc["10&12", "n_sets"] == 200 and round(d.loc["10&12", "set_weighted_percent"], 1) == 6.1
    assert d.loc["5&6", "n_sets"] == 437 and round(d.loc["5&6", "set_weighted_percent"], 1) == 10.0


@pytest.mark.parametrize(
    "s00,s01,s10,s11,expect",
    [
        (0.9, 0.1, 0.1, 0.9, (True, True, True)),  # both right
        (0.9, 0.8, 0.1, 0.2, (False, True, False)),  # cue 0 scores every set higher: only image right
        (0.9, 0.1, 0.8, 0.2, (True, False, False)),  # set 0 scores higher for both cues: only text right
        (0.1, 0.9, 0.9, 0.1, (False, False, False)),  # swapped
        (0.5, 0.5, 0.5, 0.5, (False, False, False)),  # all tied: strict inequalities -> wrong
        (0.9, 0.9, 0.1, 0.95, (True, False, False)),  # the tie s00 = s01 breaks image only
    ],
)
def test_hand_made_2x2(s00, s01, s10, s11, expect):
    got = pair_scores(*(np.array([v]) for v in (s00, s01, s10, s11)))
    assert (bool(got["text"][0]), bool(got["image"][0]), bool(got["group"][0])) == expect


def _grid(n_sets: int, rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for s in range(n_sets):
        cands = [f"s{s}c{j}" for j in range(6)]
        rows.append((f"{s}a", f"cueA{s}", cands, cands[:2]))
        rows.append((f"{s}b", f"cueB{s}", cands, cands[2:4]))  # disjoint
        rows.append((f"{s}c", f"cueC{s}", cands, [cands[0], cands[4]]))  # overlaps a, disjoint from b
    return pd.DataFrame(rows, columns=["instance_id", "cue", "candidates", "associations"]).assign(dataset="game")


def _pred(inst: pd.DataFrame, sims: list[list[float]], model: str = "m") -> pd.DataFrame:
    return pd.DataFrame(
        {"model_name": model, "weights_id": "w", "instance_id": inst["instance_id"], "similarities": sims}
    )


def test_iid_random_scores_land_on_chance():
    rng = np.random.default_rng(0)
    inst = _grid(3000, rng)
    pred = _pred(inst, [list(rng.random(6)) for _ in range(len(inst))])
    out = validate(paired_scores(inst, pred, 200, 0), PairedEvaluation)
    for kind in ("disjoint", "overlapping"):
        cell = out[(out["pair_kind"] == kind) & (out["cell"] == "all")].set_index("score")
        for score, chance in CHANCE_PERCENT.items():
            assert abs(cell.loc[score, "percent"] - chance) < 2.0, (kind, score)
            assert cell.loc[score, "ci_low_percent"] < chance < cell.loc[score, "ci_high_percent"] + 1.5
    assert CHANCE_PERCENT["group"] == pytest.approx(16.67, abs=0.01)


def test_a_perfect_model_scores_100_and_ties_score_0():
    inst = _grid(20, np.random.default_rng(1))
    perfect = [[1.0 if c in a else 0.0 for c in cs] for cs, a in zip(inst["candidates"], inst["associations"])]
    tied = [[0.5] * 6 for _ in range(len(inst))]
    out = paired_scores(inst, pd.concat([_pred(inst, perfect, "perfect"), _pred(inst, tied, "tied")]), 50, 0)
    allc = out[out["cell"] == "all"]
    assert (allc[allc["model_name"] == "perfect"]["percent"] == 100).all()
    assert (allc[allc["model_name"] == "tied"]["percent"] == 0).all()
    # 3 pairs per set: a-b disjoint, b-c disjoint, a-c overlapping (scored on the symmetric difference)
    assert set(zip(allc["pair_kind"], allc["n_pairs"])) == {("disjoint", 40), ("overlapping", 20)}


def test_models_without_per_candidate_scores_are_not_paired():
    inst = _grid(5, np.random.default_rng(2))
    pred = _pred(inst, [None] * len(inst))
    assert paired_scores(inst, pred, 10, 0).empty


def test_cluster_bootstrap_resamples_sets_not_pairs():
    # 50 sets whose pairs are all right or all wrong: the cluster CI is wider than the pair CI
    vals = np.repeat(np.arange(50) % 2, 20).astype(float)
    clusters = np.repeat(np.arange(50), 20)
    lo, hi = cluster_bootstrap(vals, clusters, 2000, 0)
    plo, phi = cluster_bootstrap(vals, np.arange(len(vals)), 2000, 0)
    assert lo < 0.5 < hi and (hi - lo) > 2 * (phi - plo)
    assert cluster_bootstrap(vals, clusters, 2000, 0) == (lo, hi)


def test_set_weighted_estimate_weighs_every_candidate_set_once():
    # set 0: 6 cues with pairwise-disjoint 1-image sets -> 15 pairs, all right; set 1: 2 cues -> 1 pair, wrong
    rows = []
    c0 = [f"a{j}" for j in range(12)]
    rows += [(f"0{i}", f"cue0{i}", c0, [c0[i]]) for i in range(6)]
    c1 = [f"b{j}" for j in range(5)]
    rows += [("1a", "cueA", c1, [c1[0]]), ("1b", "cueB", c1, [c1[1]])]
    inst = pd.DataFrame(rows, columns=["instance_id", "cue", "candidates", "associations"]).assign(dataset="game")
    # set 0: each cue scores its own image highest; set 1: both cues prefer the other cue's image
    sims = [[1.0 if c in a else 0.0 for c in cs] for cs, a in zip(inst["candidates"][:6], inst["associations"][:6])]
    sims += [[0.0, 1.0, 0, 0, 0], [1.0, 0.0, 0, 0, 0]]
    out = validate(paired_scores(inst, _pred(inst, sims), 200, 0), PairedEvaluation)
    r = out[(out["cell"] == "all") & (out["score"] == "group")].iloc[0]
    assert (r["n_pairs"], r["n_sets"]) == (16, 2)
    assert r["percent"] == pytest.approx(100 * 15 / 16) and r["set_weighted_percent"] == pytest.approx(50.0)
    assert r["set_weighted_ci_low_percent"] <= 50.0 <= r["set_weighted_ci_high_percent"]
    # the pair task ignores the other distractors: set 0's cues score 10 distractors at 1.0 too and still win
    loud = [[1.0 if (c in a or j >= 6) else 0.0 for j, c in enumerate(c0)] for a in inst["associations"][:6]]
    out2 = paired_scores(inst, _pred(inst, loud + sims[6:]), 50, 0)
    assert out2[(out2["cell"] == "all") & (out2["score"] == "group")]["percent"].iloc[0] == pytest.approx(100 * 15 / 16)

"""The WinoGAViL formulas against the paper's examples and the released value sets."""

import csv
import itertools
import json

import pytest

from gavil.domain.winogavil import (
    FOOL_THE_AI_VALUES,
    fool_the_ai_score,
    jaccard,
    k_is_valid,
    prompt_for_cue,
    solvable_by_humans,
    solver_agreement,
    solver_jaccards,
    top_k,
)
from tests.helpers import RELEASE


@pytest.mark.parametrize(
    "cue,prompt",
    [
        ("werewolf", "A werewolf"),
        ("unicorn", "An unicorn"),
        ("hour", "A hour"),
        ("Apple", "An apple"),
        ("  Egg ", "An egg"),
        ("yak", "A yak"),
    ],
)
def test_prompt_rule_is_a_letter_test(cue, prompt):
    assert prompt_for_cue(cue) == prompt


def test_prompt_rejects_empty_cue():
    with pytest.raises(ValueError):
        prompt_for_cue("  ")


def test_jaccard_paper_examples():
    # Fig. 1b: model picks 1 of 2 right plus one wrong -> 1/3
    assert jaccard(["moon", "wolf"], ["moon", "tv"]) == pytest.approx(1 / 3)
    # Fig. 2: 3 associations, model gets 1 right + 2 wrong -> 1/5, fool-the-AI 80
    assert jaccard(["bison", "x", "y"], ["bison", "a", "b"]) == pytest.approx(0.2)
    assert fool_the_ai_score(["bison", "x", "y"], ["bison", "a", "b"]) == 80
    assert jaccard(["a", "b"], ["b", "a"]) == 1.0


def test_fool_the_ai_truncates_and_matches_released_value_sets():
    cands = [f"c{i}" for i in range(12)]
    for k, expected in FOOL_THE_AI_VALUES.items():
        assoc = cands[:k]
        got = {fool_the_ai_score(list(pred), assoc) for pred in itertools.combinations(cands, k)}
        assert got == expected
    seen: dict[int, set[int]] = {}
    for name in ("winogavil_dataset.csv", "game_5_6.csv", "game_10_12.csv"):
        with open(RELEASE / name, newline="") as f:
            for row in csv.DictReader(f):
                seen.setdefault(int(row["num_associations"]), set()).add(int(float(row["score_fool_the_ai"])))
    for k, values in seen.items():
        assert values <= FOOL_THE_AI_VALUES[k], k
    assert seen[2] == {0, 67, 100}  # 67, not 66 or 67 rounded: 100 - int(33.33)


def test_top_k_ties_keep_candidate_order():
    assert top_k(["a", "b", "c", "d"], [0.5, 0.9, 0.9, 0.1], 2) == ["b", "c"]
    assert top_k(["a", "b", "c"], [0.2, 0.2, 0.2], 2) == ["a", "b"]
    with pytest.raises(ValueError):
        top_k(["a", "b"], [0.1], 1)
    with pytest.raises(ValueError):
        top_k(["a", "b"], [0.1, 0.2], 3)


def test_solvable_by_humans_rounding_reproduces_released_values():
    assert solvable_by_humans([1.0, 1.0, 1.0]) == (1.0, 0.0)
    assert solvable_by_humans([1.0, 1.0, 0.5]) == (0.83, 0.24)  # population std, not sample
    assert solvable_by_humans([1.0, 1.0, 0.6]) == (0.87, 0.19)
    means, stds = set(), set()
    with open(RELEASE / "winogavil_dataset.csv", newline="") as f:
        for row in csv.DictReader(f):
            means.add(float(row["solvers_jaccard_mean"]))
            stds.add(float(row["solvers_jaccard_std"]))
    assert means == {1.0, 0.87, 0.83} and stds == {0.0, 0.19, 0.24}


def test_solver_jaccards_and_agreement():
    sels = [["a", "b"], ["b", "a"], ["a", "c"]]
    assert solver_jaccards(sels, ["a", "b"]) == [1.0, 1.0, pytest.approx(1 / 3)]
    assert solver_agreement(sels) == pytest.approx(1 / 3)  # {a} / {a, b, c}


def test_k_limits_of_the_game_ui():
    assert k_is_valid(5, 3) and not k_is_valid(5, 4)
    assert k_is_valid(6, 4) and k_is_valid(12, 6) and not k_is_valid(12, 7)
    assert not k_is_valid(10, 1) and not k_is_valid(7, 2)


def test_release_candidates_are_json_lists():
    with open(RELEASE / "winogavil_dataset.csv", newline="") as f:
        row = next(csv.DictReader(f))
    assert json.loads(row["candidates"]) == ["eagle", "teepee", "factory", "metal", "ash"]

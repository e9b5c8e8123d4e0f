"""One formula, one place: the random-chance Jaccard, the stable top-K rule and the Jaccard of two
K-sets live in :mod:`gavil.domain.winogavil` only; these tests pin them to exact and released
values, tie the vectorised forms to the scalar ones, and fail if a module re-grows a copy."""

from __future__ import annotations

import ast
import csv
import itertools
import json
from fractions import Fraction
from math import comb
from pathlib import Path

import numpy as np
import pytest

from gavil.domain.vocabulary import K_LIMITS
from gavil.domain.winogavil import (
    RANDOM_EXPECTED_JACCARD_PERCENT,
    cue_key,
    jaccard,
    jaccard_from_overlap,
    prompt_for_cue,
    random_expected_jaccard,
    rank_by_score,
    top_k,
    top_k_mask,
    top_k_positions,
)
from tests.helpers import RELEASE, ROOT

# --- random-chance Jaccard ---------------------------------------------------------------------


def _exact_expectation(n: int, k: int) -> Fraction:
    return sum(
        (Fraction(comb(k, i) * comb(n - k, k - i), comb(n, k)) * Fraction(i, 2 * k - i) for i in range(k + 1)),
        Fraction(0),
    )


@pytest.mark.parametrize("n,k", [(5, 2), (5, 3), (6, 4), (10, 2), (12, 5)])
def test_random_expected_jaccard_is_the_mean_over_all_k_subsets(n, k):
    cands = list(range(n))
    assoc = cands[:k]
    brute = np.mean([jaccard(list(s), assoc) for s in itertools.combinations(cands, k)])
    assert random_expected_jaccard(n, k) == pytest.approx(brute, abs=1e-12)


def test_random_expected_jaccard_is_pinned_to_the_bit():
    """The values the two former copies (``evaluate.random_jaccard``, ``features.chance_jaccard``)
    gave, to the last bit: the summation order is part of the byte-identical outputs."""
    pinned = {
        (5, 2): 0.3,
        (5, 3): 0.46,
        (6, 2): 0.24444444444444446,
        (6, 3): 0.365,
        (6, 4): 0.52,
        (10, 2): 0.14074074074074075,
        (10, 5): 0.35040312421264797,
        (12, 2): 0.11616161616161616,
        (12, 6): 0.34720816701336177,
    }
    for (n, k), v in pinned.items():
        assert random_expected_jaccard(n, k) == v
        assert abs(Fraction(v) - _exact_expectation(n, k)) < Fraction(1, 10**15)
    assert _exact_expectation(10, 2) == Fraction(19, 135)


def test_the_papers_random_figures_lie_within_the_ui_range_of_k():
    """The paper's 38 / 34 / 24 / 17 % average over its instances' K (not re-derivable without its
    K mix), so each lies between E[J] at the smallest and the largest K the game allows for N."""
    for n, pct in RANDOM_EXPECTED_JACCARD_PERCENT.items():
        lo, hi = K_LIMITS[n]
        assert 100 * random_expected_jaccard(n, lo) < pct < 100 * random_expected_jaccard(n, hi)


@pytest.mark.parametrize("n,k", [(5, 0), (5, 6), (0, 1)])
def test_random_expected_jaccard_refuses_impossible_subsets(n, k):
    with pytest.raises(ValueError):
        random_expected_jaccard(n, k)


# --- Jaccard of two K-sets ---------------------------------------------------------------------


def test_jaccard_from_overlap_is_the_jaccard_of_two_k_sets():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.choice([5, 6, 10, 12]))
        k = int(rng.integers(1, n + 1))
        a = [str(c) for c in rng.choice(n, k, replace=False)]
        b = [str(c) for c in rng.choice(n, k, replace=False)]
        got = jaccard_from_overlap(np.array([len(set(a) & set(b))]), np.array([k]))[0]
        assert got == jaccard(a, b)


def test_jaccard_from_overlap_gives_the_released_model_jaccards():
    """The release's stored CLIP ViT-B/32 predictions and their ``clip_vit_32_jaccard`` (9 decimals)."""
    rows = 0
    for path in sorted((RELEASE / "test_sets_with_zero_shot_predictions").glob("*_with_predictions.csv")):
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                pred, assoc = json.loads(r["clip_vit_32_predictions"]), json.loads(r["associations"])
                j = jaccard_from_overlap(np.array(len(set(pred) & set(assoc))), np.array(len(assoc)))
                assert round(float(j), 9) == pytest.approx(float(r["clip_vit_32_jaccard"]), abs=1e-9)
                rows += 1
    assert rows > 1000


# --- the stable top-K rule ---------------------------------------------------------------------


def _oracle(scores) -> list[int]:
    """The rule as the reference words it: descending score, ties keep candidate order."""
    return sorted(range(len(scores)), key=lambda i: -scores[i])  # sorted() is stable


def _tied_scores(rng: np.random.Generator, n: int, dtype) -> np.ndarray:
    """Scores drawn from a few values, so that most rows have ties (and some -0.0 / 0.0)."""
    return rng.choice(np.array([-0.5, -0.0, 0.0, 0.25, 0.25, 0.7], dtype=dtype), size=n)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_form_of_the_top_k_rule_agrees_with_the_stable_sort(dtype):
    rng = np.random.default_rng(1)
    for _ in range(300):
        n = int(rng.choice([5, 6, 10, 12]))
        s = _tied_scores(rng, n, dtype) if rng.random() < 0.7 else rng.normal(size=n).astype(dtype)
        want = _oracle(s.tolist())
        assert rank_by_score(s).tolist() == want
        k = int(rng.integers(1, n + 1))
        assert top_k_positions(s, k) == want[:k]
        assert top_k_positions(s.tolist(), k) == want[:k]
        names = [f"c{i}" for i in range(n)]
        assert top_k(names, s.tolist(), k) == [names[i] for i in want[:k]]


def test_top_k_mask_marks_each_rows_top_k_with_padding_last():
    rng = np.random.default_rng(2)
    rows, width = 200, 12
    sizes = rng.choice([5, 6, 10, 12], size=rows)
    scores = np.full((rows, width), -np.inf)
    ks = np.array([int(rng.integers(1, n + 1)) for n in sizes])
    for i, n in enumerate(sizes):
        scores[i, :n] = _tied_scores(rng, int(n), np.float64)
    mask = top_k_mask(scores, ks)
    order = rank_by_score(scores)
    for i, n in enumerate(sizes):
        want = _oracle(scores[i, :n].tolist())[: ks[i]]
        assert sorted(np.flatnonzero(mask[i]).tolist()) == sorted(want)
        assert order[i, : ks[i]].tolist() == want  # the 2-D rank order is the 1-D one, padding after
        assert not mask[i, n:].any()


def test_top_k_ties_keep_candidate_order():
    assert top_k_positions([0.5, 0.9, 0.9, 0.1], 2) == [1, 2]
    assert top_k_positions(np.array([0.2, 0.2, 0.2], dtype=np.float32), 2) == [0, 1]
    with pytest.raises(ValueError):
        top_k_positions([0.1, 0.2], 3)
    with pytest.raises(ValueError):
        top_k_positions([0.1, 0.2], 0)


# --- the cue as models read it ------------------------------------------------------------------


@pytest.mark.parametrize("cue", ["Werewolf", "  Egg ", "ÉCLAIR", "hour"])
def test_the_prompt_and_the_text_models_read_the_same_cue(cue):
    """Text models embed :func:`cue_key` (the shared cache's key); the rival prompts "A/An " + it."""
    assert cue_key(cue) == cue.strip().lower()
    assert prompt_for_cue(cue).split(" ", 1)[1] == cue_key(cue)


# --- no copies ---------------------------------------------------------------------------------


def _negated(node: ast.AST) -> bool:
    return isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)


def _copies(tree: ast.AST) -> list[tuple[int, str]]:
    """Places that write one of the domain's rules again:

    - the stable top-K: ``argsort(-x, ...)`` or ``sorted(..., key=lambda i: -x[i])``;
    - the Jaccard of two K-sets / the random-chance Jaccard: ``a / (2 * k - a)``.
    """
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name == "argsort" and node.args and _negated(node.args[0]):
                found.append((node.lineno, "argsort of negated scores: use gavil.domain.winogavil.rank_by_score"))
            if name == "sorted":
                for kw in node.keywords:
                    if kw.arg == "key" and isinstance(kw.value, ast.Lambda) and _negated(kw.value.body):
                        found.append((node.lineno, "sorted by negated key: use gavil.domain.winogavil.top_k"))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            d = node.right
            if (
                isinstance(d, ast.BinOp)
                and isinstance(d.op, ast.Sub)
                and isinstance(d.left, ast.BinOp)
                and isinstance(d.left.op, ast.Mult)
                and isinstance(d.left.left, ast.Constant)
                and d.left.left.value == 2
            ):
                found.append((node.lineno, "x / (2k - x): use gavil.domain.winogavil.jaccard_from_overlap"))
    return found


def _sources() -> list[Path]:
    files = [p for top in ("gavil", "stages", "schemas", "flows", "benchmarks") for p in (ROOT / top).rglob("*.py")]
    return sorted(p for p in files if (ROOT / "gavil" / "domain") not in p.parents)


def test_the_check_finds_the_copies_it_looks_for():
    planted = (
        "order = np.argsort(-sims, axis=1, kind='stable')\n"
        "o = sorted(range(n), key=lambda i: -s[i])\n"
        "j = hits / (2 * k - hits)\n"
        "e = sum(comb(k, i) / total * i / (2 * k - i) for i in range(k + 1))\n"
        "fine = np.argsort(ids, kind='stable')\n"
    )
    assert [line for line, _ in _copies(ast.parse(planted))] == [1, 2, 3, 4]


def test_no_module_outside_the_domain_rewrites_top_k_or_the_k_set_jaccard():
    bad = [
        f"{p.relative_to(ROOT)}:{line}: {why}" for p in _sources() for line, why in _copies(ast.parse(p.read_text()))
    ]
    assert not bad, "\n".join(bad)

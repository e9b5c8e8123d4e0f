"""SWAG's Adversarial Filtering, the algorithm (Zellers et al. 2018, §3.2-3.4, Algorithm 1): the
members, the iterations, the judges' stopping rule and the held-out report, and each instance's
distractor pool (:func:`pools_for`). Arrays in, arrays out; the stage (:mod:`stages.adversarial_filter`)
reads and writes the tables. The method and its parameters are described there.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
import pandas as pd

from gavil.domain.winogavil import random_expected_jaccard
from gavil.models.features import Layout, fit_logistic, pair_features, topk_credit
from gavil.models.judges import (
    Judge,
    JudgeScore,
    at_chance,
    judge,
)
from gavil.models.keyed import content_seed

if TYPE_CHECKING:
    from gavil.params.adversarial import AdversarialFilterParams


class JudgeReport(TypedDict):
    """One judge: its family and held-out scores on the first and the last judged split."""

    family: str
    first: JudgeScore
    last: JudgeScore


class HeldOutReport(TypedDict):
    """One judge retrained on the instances outside the report set and scored on the report set, on the
    original distractors (``before``) and on AF's (``after``): nothing about these instances or these
    fits took part in choosing when AF stopped."""

    family: str
    before: JudgeScore
    after: JudgeScore


class Stop(TypedDict):
    """Why AF ended: ``judges_at_chance``, ``patience`` (the ensemble phase replaced nothing for
    ``patience`` iterations) or ``budget`` (every iteration ran); ``iterations`` run; each judge as
    the stopping rule saw it (``judges``) and on the held-out report instances (``report``)."""

    reason: str
    iterations: int
    judges: dict[str, JudgeReport]
    report: dict[str, HeldOutReport]
    report_instances: int


@dataclass
class Member:
    """A feature source: cue vectors (one row per instance) and concept vectors (one row per concept)."""

    name: str
    cues: np.ndarray  # (instances, d)
    concepts: np.ndarray  # (concepts, d)
    weights_sha256: str | None = None  # of the model's weights file (recorded in the metrics)


def _scorer(kind: str, members: list[Member], x_train: np.ndarray, y: np.ndarray, p: AdversarialFilterParams, it: int):
    """Fit one model on pair features; returns score(inst_idx, concept_idx arrays) -> scores."""
    if kind == "mlp":
        from sklearn.neural_network import MLPClassifier

        # early stopping on a 10 % validation split (sklearn default patience): 200 full epochs per
        # iteration cost minutes at SWOW scale
        big = len(y) >= 200
        clf: Any = MLPClassifier((p.mlp_hidden,), max_iter=100, early_stopping=big, random_state=p.seed + it)
        import warnings

        from sklearn.exceptions import ConvergenceWarning

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            clf.fit(x_train, y)

        def score(ii: np.ndarray, cc: np.ndarray) -> np.ndarray:
            feats = np.hstack([pair_features(m.cues[ii], m.concepts[cc]) for m in members])
            return clf.predict_proba(feats)[:, 1]

        return score
    clf = fit_logistic(x_train, y, 200, p.seed)
    (m,) = members
    d = m.cues.shape[1]
    w, b = clf.coef_[0].astype(np.float64), float(clf.intercept_[0])

    def linear(ii: np.ndarray, cc: np.ndarray) -> np.ndarray:
        # w·[cue ⊙ c, c] + b = c·(w1 ⊙ cue + w2) + b: no pair matrix needed
        c, q = m.concepts[cc].astype(np.float64), m.cues[ii].astype(np.float64)
        return np.einsum("rd,rd->r", c, q * w[:d] + w[d:]) + b

    return linear


def _features(members: list[Member], ii: np.ndarray, cc: np.ndarray) -> np.ndarray:
    return np.hstack([pair_features(m.cues[ii], m.concepts[cc]) for m in members])


@dataclass
class _Run:
    """One AF run: its inputs (``assigned`` is replaced in place) and its progress so far."""

    ids: list[str]
    positives: list[np.ndarray]  # per instance: its associations' concept indices
    assigned: list[np.ndarray]  # per instance: its current distractors' concept indices
    pools: list[np.ndarray]  # per instance: the concept indices it may draw distractors from
    members: list[Member]
    judges: Sequence[Judge]
    p: AdversarialFilterParams
    in_report: np.ndarray  # (instances,) bool: the held-out report set, never in a stopping split
    n_test: int  # instances in each iteration's held-out split
    it: int = 0  # iterations begun
    first: dict[str, JudgeScore] = field(default_factory=dict)  # the judges' first verdict
    last: dict[str, JudgeScore] = field(default_factory=dict)  # the judges' latest verdict
    reason: str = "budget"
    reps: list[dict[str, Any]] = field(default_factory=list)  # replacement rows
    iters: list[dict[str, Any]] = field(default_factory=list)  # iteration rows


def adversarial_filter(
    ids: list[str],
    positives: list[np.ndarray],
    assigned: list[np.ndarray],
    pools: list[np.ndarray],
    members: list[Member],
    p: AdversarialFilterParams,
    log: Callable[[str], None] | None = None,
    judges: Sequence[Judge] = (),
) -> tuple[list[np.ndarray], list[dict[str, Any]], list[dict[str, Any]], Stop]:
    """SWAG AF over instances (see the module docstring). Concepts are integer indices into each
    member's ``concepts`` rows; ``pools[i]`` must exclude instance i's positives.

    ``judges`` (:mod:`gavil.models.judges`, families other than the members') are trained and
    scored on each ``judge_every``-th iteration's split *before* its replacements; once every
    judge's held-out Jaccard and accuracy are within ``chance_tolerance`` of chance, AF stops
    (reason ``judges_at_chance``); else it runs its budget (``cheap_iterations`` +
    ``ensemble_iterations``, a phase ending after ``patience`` idle iterations) and the judges
    score the final assignment on one more split.

    Returns:
        (final assignment per instance, replacement rows, iteration rows, stop) — the rows as in
        :class:`schemas.adversarial.AfReplacements` / :class:`schemas.adversarial.AfIterations`
        (instance ids from ``ids``; concepts as indices, named by the caller); ``stop``: why and
        when AF ended and each judge's first / last held-out scores.
    """
    n = len(ids)
    original = [a.copy() for a in assigned]
    assigned = [a.copy() for a in assigned]
    n_test = max(1, round(p.test_fraction * n))
    # the report set: seeded, fixed for the run, never part of a stopping split (judges see only the rest)
    n_report = round(p.report_fraction * n) if judges and n >= 4 else 0
    report = np.sort(np.random.default_rng([p.seed, 0]).permutation(n)[:n_report])
    in_report = np.zeros(n, dtype=bool)
    in_report[report] = True
    run = _Run(ids, positives, assigned, pools, members, judges, p, in_report, n_test)
    for phase, count in [("cheap", p.cheap_iterations), ("ensemble", p.ensemble_iterations)]:
        _run_phase(run, phase, count, log)
        if run.reason == "judges_at_chance":
            break
    if judges and run.reason != "judges_at_chance":  # the final assignment, on a split no iteration used
        _, test, train = _split(p.seed, n, n_test, run.it + 1)
        run.last = _judge_split(run, test, train, p.seed + run.it + 1)
        run.first = run.first or run.last
    held = _held_out_report(run, original, report) if n_report else {}
    stop: Stop = {
        "reason": run.reason,
        "iterations": len(run.iters),
        "judges": {
            j.name: {"family": j.family, "first": run.first[j.name], "last": run.last[j.name]}
            for j in judges
            if j.name in run.last
        },
        "report": held,
        "report_instances": n_report,
    }
    return assigned, run.reps, run.iters, stop


def _split(seed: int, n: int, n_test: int, it: int) -> tuple[np.random.Generator, np.ndarray, np.ndarray]:
    """Iteration ``it``'s split of ``n`` instances, seeded by (``seed``, ``it``): the generator (it
    then draws the iteration's replacements), the ``n_test`` held-out and the training indices, sorted."""
    rng = np.random.default_rng([seed, it])
    perm = rng.permutation(n)
    return rng, np.sort(perm[:n_test]), np.sort(perm[n_test:])


def _judge_split(run: _Run, test: np.ndarray, train: np.ndarray, seed: int) -> dict[str, JudgeScore]:
    """The judges trained on ``train`` and scored on ``test`` (both without the report set) on the
    current assignment; judge name -> held-out score."""
    in_report = run.in_report
    return judge(run.judges, run.positives, run.assigned, train[~in_report[train]], test[~in_report[test]], seed)


def _run_phase(run: _Run, phase: str, count: int, log: Callable[[str], None] | None) -> None:
    """Up to ``count`` iterations of ``phase`` (``cheap`` or ``ensemble``), each judged first on its
    ``judge_every``-th turn; ends early when the judges are at chance (``run.reason``
    ``judges_at_chance``) or after ``patience`` iterations that replaced nothing (``patience`` in
    the ensemble phase; the cheap phase just hands over)."""
    p, idle = run.p, 0
    for _ in range(count):
        run.it += 1
        rng, test, train = _split(p.seed, len(run.ids), run.n_test, run.it)
        verdict: dict[str, JudgeScore] = {}
        if run.judges and (run.it - 1) % p.judge_every == 0:
            verdict = _judge_split(run, test, train, p.seed + run.it)
            run.first, run.last = run.first or verdict, verdict
            if at_chance(verdict, p.chance_tolerance):
                run.reason = "judges_at_chance"
                return
        row = _iteration(run, phase, rng, test, train, verdict)
        run.iters.append(row)
        if log:
            log(
                f"adversarial_filter: iteration {run.it} ({phase}, {row['member']}): "
                f"held-out Jaccard {row['held_out_jaccard']:.3f} vs chance {row['chance_jaccard']:.3f}, "
                f"{row['replacements']} replacements"
            )
        idle = idle + 1 if row["replacements"] == 0 else 0
        if idle >= p.patience:
            run.reason = "patience" if phase == "ensemble" else run.reason
            return


def _iteration(
    run: _Run,
    phase: str,
    rng: np.random.Generator,
    test: np.ndarray,
    train: np.ndarray,
    verdict: dict[str, JudgeScore],
) -> dict[str, Any]:
    """One iteration: fit the phase's models on ``train``, keep the best on ``test`` (highest
    held-out Jaccard, then name), replace easy distractors of the ``test`` instances with it.
    Returns the iteration's :class:`schemas.adversarial.AfIterations` row."""
    positives, assigned = run.positives, run.assigned
    results = _fit_models(run, phase, train, test)
    best = min(results, key=lambda k: (-results[k][2], k))
    scorer, scores, jac = results[best]
    easy_total, assigned_total, swaps = _replace(run, phase, best, scorer, scores, test, rng)
    chance = float(
        np.mean([random_expected_jaccard(len(positives[i]) + len(assigned[i]), len(positives[i])) for i in test])
    )
    return {
        "iteration": run.it,
        "phase": phase,
        "member": best,
        "held_out_jaccard": jac,
        "chance_jaccard": chance,
        "member_jaccards": json.dumps({k: round(v[2], 4) for k, v in results.items()}),
        "easy_fraction": easy_total / max(1, assigned_total),
        "replacements": swaps,
        "replacements_mean": swaps / len(test),
        "judge_scores": _judge_json(verdict),
    }


def _fit_models(
    run: _Run, phase: str, train: np.ndarray, test: np.ndarray
) -> dict[str, tuple[Callable[[np.ndarray, np.ndarray], np.ndarray], np.ndarray, float]]:
    """Fit the phase's models (cheap: the first member's linear model; ensemble: each member's and
    the MLP over all) on ``train``'s pairs; model name -> (scorer, ``test`` scores (instances,
    max candidates), -inf past an instance's candidates, positives first; mean top-k Jaccard)."""
    positives, assigned, members = run.positives, run.assigned, run.members
    ti = np.concatenate([np.full(len(positives[i]) + len(assigned[i]), i) for i in train])
    tc = np.concatenate([np.concatenate([positives[i], assigned[i]]) for i in train])
    ty = np.concatenate([np.r_[np.ones(len(positives[i])), np.zeros(len(assigned[i]))] for i in train]) > 0
    kinds = (
        [(members[0].name, "linear", [members[0]])]
        if phase == "cheap"
        else ([(m.name, "linear", [m]) for m in members] + [("ensemble-mlp", "mlp", members)])
    )
    cand = [np.concatenate([positives[i], assigned[i]]) for i in test]
    lay = Layout(
        _pad([np.arange(len(c)) for c in cand]),
        _pad([np.r_[np.ones(len(positives[i])), np.zeros(len(assigned[i]))] > 0 for i in test], False),
        np.array([len(positives[i]) for i in test]),
    )
    ci = np.concatenate([np.full(len(c), i) for c, i in zip(cand, test)])
    cc = np.concatenate(cand)
    results = {}
    for name, kind, ms in kinds:
        scorer = _scorer(kind, ms, _features(ms, ti, tc), ty, run.p, run.it)
        flat = scorer(ci, cc)
        scores = np.full(lay.rows.shape, -np.inf)
        scores[lay.rows >= 0] = flat
        # rows are positions within each instance: place flat scores by padding mask
        results[name] = (scorer, scores, float(topk_credit(scores, lay.label, lay.k).mean()))
    return results


def _replace(
    run: _Run,
    phase: str,
    best: str,
    scorer: Callable[[np.ndarray, np.ndarray], np.ndarray],
    scores: np.ndarray,
    test: np.ndarray,
    rng: np.random.Generator,
) -> tuple[int, int, int]:
    """Per ``test`` instance (row of ``scores``), swap up to ``replacements`` easy distractors
    (scored below its lowest association) for pool concepts ``scorer`` rates above it, drawn by
    ``rng``; ``run.assigned`` changes in place, a row per swap joins ``run.reps``.
    Returns (easy distractors, distractors, swaps) over the test instances."""
    positives, assigned, pools, p = run.positives, run.assigned, run.pools, run.p
    easy_total, assigned_total, swaps = 0, 0, 0
    for row, i in enumerate(test):
        k = len(positives[i])
        s_pos, s_ass = scores[row, :k], scores[row, k : k + len(assigned[i])]
        low = float(s_pos.min())
        easy = np.flatnonzero(s_ass < low)
        easy_total += len(easy)
        assigned_total += len(assigned[i])
        free = np.setdiff1d(pools[i], assigned[i])
        s_free = scorer(np.full(len(free), i), free) if len(free) else np.zeros(0)
        adv = np.flatnonzero(s_free > low)
        r = min(p.replacements, len(easy), len(adv))
        if r == 0:
            continue
        out_slots = rng.choice(easy, r, replace=False)
        in_items = rng.choice(adv, r, replace=False)
        for slot, j in zip(out_slots, in_items):
            run.reps.append(
                {
                    "iteration": run.it,
                    "phase": phase,
                    "instance_id": run.ids[i],
                    "removed": int(assigned[i][slot]),
                    "added": int(free[j]),
                    "removed_score": float(s_ass[slot]),
                    "added_score": float(s_free[j]),
                    "lowest_association_score": low,
                    "member": best,
                }
            )
            assigned[i][slot] = free[j]
        swaps += r
    return easy_total, assigned_total, swaps


def _held_out_report(run: _Run, original: list[np.ndarray], report: np.ndarray) -> dict[str, HeldOutReport]:
    """Each judge retrained on the instances outside ``report`` and scored on ``report``, on the
    ``original`` distractors and on AF's (:class:`HeldOutReport`)."""
    judges, positives, p = run.judges, run.positives, run.p
    rest = np.flatnonzero(~run.in_report)
    before = judge(judges, positives, original, rest, report, p.seed + 1_000_003)
    after = judge(judges, positives, run.assigned, rest, report, p.seed + 1_000_003)
    return {
        j.name: {"family": j.family, "before": before[j.name], "after": after[j.name]}
        for j in judges
        if j.name in after
    }


def _judge_json(verdict: dict[str, JudgeScore]) -> str:
    """``{"judge": {"jaccard": .., "accuracy": ..}}`` (4 decimals), ``{}`` on an iteration not judged."""
    return json.dumps(
        {
            k: {"jaccard": round(v["jaccard"], 4), "accuracy": round(v["accuracy"], 4)}
            for k, v in sorted(verdict.items())
        }
    )


def _pad(arrays: list[np.ndarray], fill: Any = -1) -> np.ndarray:
    width = max(len(a) for a in arrays)
    dtype = bool if fill is False else np.int64
    out = np.full((len(arrays), width), fill, dtype=dtype)
    for r, a in enumerate(arrays):
        out[r, : len(a)] = a
    return out


def pools_for(
    swow: pd.DataFrame, accepted: list[str], edges: pd.DataFrame, size: int, seed: int
) -> tuple[list[list[str]], list[str]]:
    """Each instance's distractor pool: accepted concepts that are neither the cue, an association nor
    a SWOW response of the cue in either direction, sampled down to ``size`` (seeded by ``seed`` and
    the instance id, :func:`content_seed`); the instance's original distractors are always kept.
    Returns (pools, skip reasons), in ``swow``'s row order."""
    near: dict[str, set[str]] = {}
    for c, r in zip(edges["cue"].str.lower(), edges["response"].str.lower()):
        near.setdefault(c, set()).add(r)
        near.setdefault(r, set()).add(c)
    acc = np.array(sorted(set(accepted)))
    where: dict[str, list[int]] = {}
    for j, c in enumerate(acc):
        where.setdefault(c.lower(), []).append(j)
    pools, reasons = [], []
    for iid, cue, cands, assoc in zip(swow["instance_id"], swow["cue"], swow["candidates"], swow["associations"]):
        orig = [c for c in cands if c not in set(assoc)]
        bad = near.get(cue.lower(), set()) | {cue.lower()} | {c.lower() for c in [*assoc, *orig]}
        rest = np.delete(np.arange(len(acc)), [j for c in bad for j in where.get(c, [])])
        take = min(max(0, size - len(orig)), len(rest))
        rng = np.random.default_rng([seed, content_seed(str(iid))])
        extra = acc[rng.choice(rest, take, replace=False)] if take else []
        pools.append(sorted(orig + [str(x) for x in extra]))
        reasons.append("" if take else "pool holds no concept beyond the original distractors")
    return pools, reasons

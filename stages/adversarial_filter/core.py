"""SWAG's Adversarial Filtering, the algorithm (Zellers et al. 2018, §3.2-3.4, Algorithm 1): the
members, the iterations, the judges' stopping rule and the held-out report, and each instance's
distractor pool (:func:`pools_for`). Arrays in, arrays out; the stage (:mod:`stages.adversarial_filter`)
reads and writes the tables. The method and its parameters are described there.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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
    reps: list[dict[str, Any]] = []
    iters: list[dict[str, Any]] = []
    plan = [("cheap", p.cheap_iterations), ("ensemble", p.ensemble_iterations)]
    it = 0
    first: dict[str, JudgeScore] = {}
    last: dict[str, JudgeScore] = {}
    reason = "budget"

    def split(it: int) -> tuple[np.random.Generator, np.ndarray, np.ndarray]:
        rng = np.random.default_rng([p.seed, it])
        perm = rng.permutation(n)
        return rng, np.sort(perm[:n_test]), np.sort(perm[n_test:])

    for phase, count in plan:
        idle = 0
        for _ in range(count):
            it += 1
            rng, test, train = split(it)
            verdict: dict[str, JudgeScore] = {}
            if judges and (it - 1) % p.judge_every == 0:
                verdict = judge(
                    judges, positives, assigned, train[~in_report[train]], test[~in_report[test]], p.seed + it
                )
                first, last = first or verdict, verdict
                if at_chance(verdict, p.chance_tolerance):
                    reason = "judges_at_chance"
                    break
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
                scorer = _scorer(kind, ms, _features(ms, ti, tc), ty, p, it)
                flat = scorer(ci, cc)
                scores = np.full(lay.rows.shape, -np.inf)
                scores[lay.rows >= 0] = flat
                # rows are positions within each instance: place flat scores by padding mask
                results[name] = (scorer, scores, float(topk_credit(scores, lay.label, lay.k).mean()))
            best = min(results, key=lambda k: (-results[k][2], k))
            scorer, scores, jac = results[best]
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
                    reps.append(
                        {
                            "iteration": it,
                            "phase": phase,
                            "instance_id": ids[i],
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
            chance = float(
                np.mean(
                    [random_expected_jaccard(len(positives[i]) + len(assigned[i]), len(positives[i])) for i in test]
                )
            )
            iters.append(
                {
                    "iteration": it,
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
            )
            if log:
                log(
                    f"adversarial_filter: iteration {it} ({phase}, {best}): held-out Jaccard {jac:.3f} vs chance {chance:.3f}, {swaps} replacements"
                )
            idle = idle + 1 if swaps == 0 else 0
            if idle >= p.patience:
                reason = "patience" if phase == "ensemble" else reason
                break
        if reason == "judges_at_chance":
            break
    if judges and reason != "judges_at_chance":  # the final assignment, on a split no iteration used
        _, test, train = split(it + 1)
        last = judge(judges, positives, assigned, train[~in_report[train]], test[~in_report[test]], p.seed + it + 1)
        first = first or last
    held: dict[str, HeldOutReport] = {}
    if n_report:
        rest = np.flatnonzero(~in_report)
        before = judge(judges, positives, original, rest, report, p.seed + 1_000_003)
        after = judge(judges, positives, assigned, rest, report, p.seed + 1_000_003)
        held = {
            j.name: {"family": j.family, "before": before[j.name], "after": after[j.name]}
            for j in judges
            if j.name in after
        }
    stop: Stop = {
        "reason": reason,
        "iterations": len(iters),
        "judges": {
            j.name: {"family": j.family, "first": first[j.name], "last": last[j.name]} for j in judges if j.name in last
        },
        "report": held,
        "report_instances": n_report,
    }
    return assigned, reps, iters, stop


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

"""Stage ``adversarial_filter``: SWAG's Adversarial Filtering (Zellers et al. 2018, §3.2-3.4,
Algorithm 1) choosing distractors for the SWOW-baseline instances — the ``swow_af`` variant.

Context = cue; positives = its K associations; assignment A_i = N − K distractors; pool = accepted concepts (an
accepted image) that are not SWOW responses of the cue in either direction, not the cue and not an association,
sampled down to ``pool_size`` (SWAG: N⁻ = 1023; the instance's original distractors are always in it). Each iteration:
a seeded 80/20 split of the instances (``test_fraction``); models learn (cue, candidate) -> associated from the
training instances' associations and assigned distractors; on each held-out instance, with the reassigning model's
scores s:

- easy = assigned distractors scored below the lowest-scored association (they can never enter
  the top K); adversarial = unassigned pool items scored above it (they would displace one);
- n = min(``replacements``, #easy, #adversarial) random easy slots get random adversarial items
  (SWAG: N_easy = 2); every swap is logged.

Phase ``cheap`` (``cheap_iterations``, swagaf: 100) uses a logistic regression on the first member's pair features;
phase ``ensemble`` (``ensemble_iterations``, swagaf: 50) trains a logistic regression per member and an MLP on their
concatenation and reassigns with the one of best held-out Jaccard (swagaf: "the member with the best validation
accuracy"). A phase stops early once ``patience`` iterations in a row replace nothing. Members (pair features ``[cue ⊙
c, c]``): ``text`` = ``text_model`` on names (offline); ``rival`` = ``rival_model`` (cue prompt vs image; skipped with
the reason when its weights are unavailable).

Output: the ``swow_af`` variant (``af_instances``) for human validation, one row per replacement, one per iteration.
The default benchmark never changes: WinoGAViL does not choose test instances with a model (its §2.2, §4). Risk
(METHODS.md): AF against similarity may pick distractors that are truly associated; SWOW neighbours are excluded and
each added item's score is kept in the log.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
import pandas as pd

from gavil.domain.winogavil import random_expected_jaccard
from gavil.io import write_csv
from gavil.models.embeddings import Cache
from gavil.models.features import Layout, cue_key, embed, fit_logistic, pair_features, topk_credit
from gavil.models.judges import (
    Judge,
    JudgeScore,
    at_chance,
    judge,
    load_judges,
)
from gavil.models.keyed import content_seed
from gavil.models.loading import ModelSpec, RuntimeOptions, WeightsUnavailable, load_model
from gavil.pipeline import catalog
from schemas.ocr import accepted_images

if TYPE_CHECKING:
    from gavil.params import Params
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


class Metrics(TypedDict):
    """``data/metrics/adversarial_filter.json``."""

    instances: int
    skipped: int
    members: dict[str, str]  # member -> "ok" or "skipped: <code or why>" (skipped: no_weights: a fixed sentence)
    weights_sha256: dict[str, str | None]  # member used -> sha256 of its weights file
    iterations: int
    replacements: int
    held_out_jaccard: dict[str, float | None]  # first / last iteration, chance
    easy_fraction: dict[str, float | None]  # first / last iteration
    changed_distractors_percent: float | None
    judges: dict[str, str]  # judge -> "ok" or "skipped: <code>: <why>"
    # why AF ended (judges_at_chance | patience | budget | not_run), iterations run, the tolerance, and per
    # judge: family, held-out Jaccard / accuracy on the first and last judged split, their chance
    stop: dict[str, Any]


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


def _load_members(
    params: Params, cues: list[str], universe: list[str], cache: Cache, images: dict
) -> tuple[list[Member], dict[str, str]]:
    p = params.adversarial_filter
    entries = {"text": params.models[p.text_model], "rival": params.models[p.rival_model]}
    specs = {
        "text": ModelSpec.of(p.text_model, entries["text"]),
        "rival": ModelSpec.of("rival", entries["rival"], p.rival_model),
    }
    members: list[Member] = []
    status: dict[str, str] = {}
    for name in p.members:
        try:
            model = load_model(specs[name], RuntimeOptions.of(entries[name]))
        except WeightsUnavailable as e:
            status[name] = f"skipped: {e.code}: {e.reason}"  # fixed; the machine's cause goes to the log only
            print(f"adversarial_filter: member {name} SKIPPED - {e.log_text()}", file=sys.stderr)
            continue
        if model.untrained:
            status[name] = "skipped: random weights (pretrained: null) are no adversary"
            continue
        cue_vecs, cvecs = embed(model, cues, universe, cache, images)
        missing = [c for c in universe if c not in cvecs]
        if missing:
            status[name] = f"skipped: {len(missing)} concepts without an accepted image, e.g. {missing[:3]}"
            continue
        members.append(
            Member(
                name,
                np.stack([cue_vecs[cue_key(c)] for c in cues]),
                np.stack([cvecs[c] for c in universe]),
                model.weights_sha256,
            )
        )
        status[name] = "ok"
    return members, status


def run(params: Params) -> Metrics:
    """Stage entry: SWOW-baseline instances + accepted concepts + SWOW edges -> the swow_af variant,
    its replacement log and iteration log (and a plot)."""
    p = params.adversarial_filter
    sw = catalog.read_table("swow_instances")
    # by id (unique): the iterations' splits and draws see the instances in one order whatever the input's
    sw = sw[sw["status"] == "ok"].sort_values("instance_id", kind="stable").reset_index(drop=True)
    images = accepted_images(catalog.read_table("ocr"))
    pools, why = pools_for(sw, list(images), catalog.read_table("edges"), p.pool_size, p.seed)
    ok = np.array([not w for w in why], dtype=bool)
    universe = sorted({c for pl in pools for c in pl} | {c for a in sw["associations"] for c in a})
    cidx = {c: i for i, c in enumerate(universe)}
    cache = Cache([catalog.path(n) for n in catalog.EMBEDDING_CACHES], catalog.path("af_embeddings", "write"))
    members, status = _load_members(params, list(sw["cue"]), universe, cache, images) if ok.any() else ([], {})
    cache.save()
    orig = [[c for c in cs if c not in set(a)] for cs, a in zip(sw["candidates"], sw["associations"])]
    final = [list(o) for o in orig]
    reps: list[dict[str, Any]] = []
    iters: list[dict[str, Any]] = []
    stop: Stop = {"reason": "not_run", "iterations": 0, "judges": {}, "report": {}, "report_instances": 0}
    judge_status: dict[str, str] = {}
    if members:
        sel = np.flatnonzero(ok)
        cues = [str(sw["cue"][i]) for i in sel]
        judges, judge_status = load_judges(params, cues, universe, cache)
        cache.save()
        done, reps, iters, stop = adversarial_filter(
            [sw["instance_id"][i] for i in sel],
            [np.array([cidx[c] for c in sw["associations"][i]]) for i in sel],
            [np.array([cidx[c] for c in orig[i]]) for i in sel],
            [np.array([cidx[c] for c in pools[i]]) for i in sel],
            members,
            p,
            log=lambda s: print(s, file=sys.stderr),
            judges=judges,
        )
        for i, a in zip(map(int, sel), done):
            final[i] = [universe[j] for j in a]
        for r in reps:
            r["removed"], r["added"] = universe[r["removed"]], universe[r["added"]]
    n_reps = pd.Series([r["instance_id"] for r in reps], dtype=str).value_counts()
    no_member = "no member available: " + "; ".join(f"{k}: {v}" for k, v in status.items())
    rows = []
    for i, (_, rec) in enumerate(sw.iterrows()):  # i: the row's position (sw's index was reset)
        rng = np.random.default_rng([p.seed, content_seed(str(rec["instance_id"])), 1])  # by id, not position
        cands = list(rec["associations"]) + final[i]
        rows.append(
            {
                "instance_id": rec["instance_id"],
                "variant": "swow_af",
                "cue": rec["cue"],
                "status": "ok" if ok[i] and members else "skipped",
                "reason": None if ok[i] and members else (why[i] or no_member),
                "associations": list(rec["associations"]),
                "candidates": [cands[j] for j in rng.permutation(len(cands))],
                "distractors": final[i],
                "original_distractors": orig[i],
                "replacements": int(n_reps.get(rec["instance_id"], 0)),
                "pool_size": len(pools[i]),
                "num_candidates": len(cands),
            }
        )
    out = catalog.write_table(pd.DataFrame(rows), "af_instances")
    catalog.write_table(pd.DataFrame(reps, columns=_cols("af_replacements")), "af_replacements")
    it = catalog.write_table(pd.DataFrame(iters, columns=_cols("af_iterations")), "af_iterations")
    write_csv(
        it[["iteration", "held_out_jaccard", "chance_jaccard", "easy_fraction"]], catalog.path("plot_af", "write")
    )
    changed = [
        len(set(d) - set(o)) / len(o) for d, o, s in zip(out["distractors"], orig, out["status"]) if s == "ok" and o
    ]

    def r4(v: Any) -> float | None:
        return None if v is None else round(float(v), 4)

    first, last = (iters[0], iters[-1]) if iters else ({}, {})
    return {
        "instances": int((out["status"] == "ok").sum()),
        "skipped": int((out["status"] == "skipped").sum()),
        "members": status,
        "weights_sha256": {m.name: m.weights_sha256 for m in members},
        "iterations": len(iters),
        "replacements": len(reps),
        "held_out_jaccard": {
            "first": r4(first.get("held_out_jaccard")),
            "last": r4(last.get("held_out_jaccard")),
            "chance": r4(last.get("chance_jaccard")),
        },
        "easy_fraction": {"first": r4(first.get("easy_fraction")), "last": r4(last.get("easy_fraction"))},
        "changed_distractors_percent": round(100 * float(np.mean(changed)), 2) if changed else None,
        "judges": judge_status,
        "stop": {
            "reason": stop["reason"],
            "iterations": stop["iterations"],
            "chance_tolerance": p.chance_tolerance,
            "judges": {
                k: {
                    "family": v["family"],
                    **{f"{w}_{m}": r4(v[w][m]) for w in ("first", "last") for m in ("jaccard", "accuracy")},
                    "chance_jaccard": r4(v["last"]["chance_jaccard"]),
                    "chance_accuracy": r4(v["last"]["chance_accuracy"]),
                }
                for k, v in stop["judges"].items()
            },
            # the figure to quote: judges retrained without, and scored on, instances no stopping decision saw
            "held_out_report": {
                "instances": stop["report_instances"],
                "judges": {
                    k: {
                        "family": v["family"],
                        **{f"{w}_{m}": r4(v[w][m]) for w in ("before", "after") for m in ("jaccard", "accuracy")},
                        "chance_jaccard": r4(v["after"]["chance_jaccard"]),
                        "chance_accuracy": r4(v["after"]["chance_accuracy"]),
                    }
                    for k, v in stop["report"].items()
                },
            },
        },
    }


def _cols(name: str) -> list[str]:
    return list(catalog.entry(name).schema().to_schema().columns)  # type: ignore[union-attr]

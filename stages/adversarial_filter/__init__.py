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
(docs/methods.md): AF against similarity may pick distractors that are truly associated; SWOW neighbours are excluded and
each added item's score is kept in the log.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
import pandas as pd

from gavil.io import write_csv
from gavil.models.embeddings import Cache
from gavil.models.features import cue_key, embed
from gavil.models.judges import load_judges
from gavil.models.keyed import content_seed
from gavil.models.loading import ModelSpec, RuntimeOptions, WeightsUnavailable, load_model
from gavil.pipeline import catalog
from schemas.ocr import accepted_images

if TYPE_CHECKING:
    from gavil.params import Params

from stages.adversarial_filter.core import (
    HeldOutReport,
    JudgeReport,
    Member,
    Stop,
    adversarial_filter,
    pools_for,
)

__all__ = ["HeldOutReport", "JudgeReport", "Member", "Metrics", "Stop", "adversarial_filter", "pools_for", "run"]


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
        reps, iters, stop, judge_status = _filter(params, sw, ok, orig, pools, universe, members, cache, final)
    rows = _variant_rows(sw, ok, bool(members), why, status, final, orig, pools, reps, p.seed)
    out = catalog.write_table(pd.DataFrame(rows), "af_instances")
    catalog.write_table(pd.DataFrame(reps, columns=_cols("af_replacements")), "af_replacements")
    it = catalog.write_table(pd.DataFrame(iters, columns=_cols("af_iterations")), "af_iterations")
    write_csv(
        it[["iteration", "held_out_jaccard", "chance_jaccard", "easy_fraction"]], catalog.path("plot_af", "write")
    )
    changed = [
        len(set(d) - set(o)) / len(o) for d, o, s in zip(out["distractors"], orig, out["status"]) if s == "ok" and o
    ]
    first, last = (iters[0], iters[-1]) if iters else ({}, {})
    return {
        "instances": int((out["status"] == "ok").sum()),
        "skipped": int((out["status"] == "skipped").sum()),
        "members": status,
        "weights_sha256": {m.name: m.weights_sha256 for m in members},
        "iterations": len(iters),
        "replacements": len(reps),
        "held_out_jaccard": {
            "first": _r4(first.get("held_out_jaccard")),
            "last": _r4(last.get("held_out_jaccard")),
            "chance": _r4(last.get("chance_jaccard")),
        },
        "easy_fraction": {"first": _r4(first.get("easy_fraction")), "last": _r4(last.get("easy_fraction"))},
        "changed_distractors_percent": round(100 * float(np.mean(changed)), 2) if changed else None,
        "judges": judge_status,
        "stop": _stop_metrics(stop, p.chance_tolerance),
    }


def _filter(
    params: Params,
    sw: pd.DataFrame,
    ok: np.ndarray,
    orig: list[list[str]],
    pools: list[list[str]],
    universe: list[str],
    members: list[Member],
    cache: Cache,
    final: list[list[str]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], Stop, dict[str, str]]:
    """Run AF (:func:`adversarial_filter`) on the instances of ``sw`` whose pool is ``ok`` (a bool
    mask over its rows), with the judges loaded (:func:`load_judges`); concepts are ``universe``'s
    names. ``final`` (per row of ``sw``: its distractors) gets AF's assignment in place.

    Returns (replacement rows, concepts named; iteration rows; why AF stopped; judge -> status)."""
    p = params.adversarial_filter
    cidx = {c: i for i, c in enumerate(universe)}
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
    return reps, iters, stop, judge_status


def _variant_rows(
    sw: pd.DataFrame,
    ok: np.ndarray,
    any_member: bool,
    why: list[str],
    status: dict[str, str],
    final: list[list[str]],
    orig: list[list[str]],
    pools: list[list[str]],
    reps: list[dict[str, Any]],
    seed: int,
) -> list[dict[str, Any]]:
    """The ``af_instances`` rows, one per row of ``sw`` in its order: ``ok`` where its pool held
    concepts (``ok``, else ``why``) and a member ran (else the members' ``status``); candidates are
    the associations and ``final`` distractors shuffled by (``seed``, the instance id)."""
    n_reps = pd.Series([r["instance_id"] for r in reps], dtype=str).value_counts()
    no_member = "no member available: " + "; ".join(f"{k}: {v}" for k, v in status.items())
    rows = []
    for i, (_, rec) in enumerate(sw.iterrows()):  # i: the row's position (sw's index was reset)
        rng = np.random.default_rng([seed, content_seed(str(rec["instance_id"])), 1])  # by id, not position
        cands = list(rec["associations"]) + final[i]
        rows.append(
            {
                "instance_id": rec["instance_id"],
                "variant": "swow_af",
                "cue": rec["cue"],
                "status": "ok" if ok[i] and any_member else "skipped",
                "reason": None if ok[i] and any_member else (why[i] or no_member),
                "associations": list(rec["associations"]),
                "candidates": [cands[j] for j in rng.permutation(len(cands))],
                "distractors": final[i],
                "original_distractors": orig[i],
                "replacements": int(n_reps.get(rec["instance_id"], 0)),
                "pool_size": len(pools[i]),
                "num_candidates": len(cands),
            }
        )
    return rows


def _r4(v: Any) -> float | None:
    """``v`` as a float rounded to 4 decimals; None stays None."""
    return None if v is None else round(float(v), 4)


def _stop_metrics(stop: Stop, chance_tolerance: float) -> dict[str, Any]:
    """The metrics' ``stop`` block: why and after how many iterations AF ended, the tolerance, each
    judge's first / last held-out scores and the held-out report (4 decimals)."""
    return {
        "reason": stop["reason"],
        "iterations": stop["iterations"],
        "chance_tolerance": chance_tolerance,
        "judges": {
            k: {
                "family": v["family"],
                **{f"{w}_{m}": _r4(v[w][m]) for w in ("first", "last") for m in ("jaccard", "accuracy")},
                "chance_jaccard": _r4(v["last"]["chance_jaccard"]),
                "chance_accuracy": _r4(v["last"]["chance_accuracy"]),
            }
            for k, v in stop["judges"].items()
        },
        # the figure to quote: judges retrained without, and scored on, instances no stopping decision saw
        "held_out_report": {
            "instances": stop["report_instances"],
            "judges": {
                k: {
                    "family": v["family"],
                    **{f"{w}_{m}": _r4(v[w][m]) for w in ("before", "after") for m in ("jaccard", "accuracy")},
                    "chance_jaccard": _r4(v["after"]["chance_jaccard"]),
                    "chance_accuracy": _r4(v["after"]["chance_accuracy"]),
                }
                for k, v in stop["report"].items()
            },
        },
    }


def _cols(name: str) -> list[str]:
    return list(catalog.entry(name).schema().to_schema().columns)  # type: ignore[union-attr]

"""Winoground's paired scores on WinoGAViL instances (Thrush et al. 2022, §3.2, Table 3).

A creation task gives two cues for one candidate set, and several spymasters may reuse a set, so
instances that share a candidate set form *pairs* (c0, A0), (c1, A1): different cues (compared
case-folded) and different association sets. Pairs are ``disjoint`` (A0 ∩ A1 empty) or
``overlapping``; identical association sets and same-cue pairs are left out (counted).

Set-level score S(c, A) = mean over a in A of s(c, a), over the symmetric-difference parts
A0 \\ A1 and A1 \\ A0 (for disjoint pairs the whole sets). With strict inequalities (a tie is
wrong, unlike CLIP_benchmark's argmax which breaks ties toward index 0):

- text  = S(c0,A0) > S(c1,A0)  and  S(c1,A1) > S(c0,A1)
- image = S(c0,A0) > S(c0,A1)  and  S(c1,A1) > S(c1,A0)
- group = text and image

Chance for i.i.d. continuous scores: 25 / 25 / 16.67 %. Pairs share candidate sets, so the 95 %
CIs resample candidate sets (cluster bootstrap).

Two caveats of this estimate. (1) ``percent`` weights *pairs*: a candidate set with 6 cues gives
15 pairs, one with 2 cues gives 1, so sets reused by many spymasters dominate. ``set_weighted_percent``
weights every candidate set once (mean over sets of the mean over its pairs; its CI resamples
sets); both are reported. (2) The pair task compares only the two cues' association parts: the
candidates in neither part (the other distractors) never enter S, so a model that ranks a
distractor above both parts can still score a pair right. From top-K lists alone (the release's stored
CLIP ViT-B/32 predictions) only "both cues solved" (both instances exactly right) is defined.

On the release's ``winogavil_dataset.csv``: 988 candidate sets, 5,404 cue pairs, 869 identical,
1,942 disjoint, 2,593 overlapping (docs/methods.md "Winoground paired scores"; asserted in tests/stages/evaluate/test_paired.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import combinations
from math import comb
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np
import pandas as pd

from gavil.domain.winogavil import candidate_group

SCORES = ("text", "image", "group")
CHANCE_PERCENT = {"text": 25.0, "image": 25.0, "group": 100 / 6}
PAIR_KINDS = ("disjoint", "overlapping")


class _PairRow(Protocol):
    """A :func:`find_pairs` row as ``itertuples`` yields it (the fields read here)."""

    id0: str
    id1: str
    a0: list[str]
    a1: list[str]


class _PairedRow(Protocol):
    """A :class:`schemas.evaluate.PairedEvaluation` row as ``itertuples`` yields it."""

    model_name: str
    dataset: str
    pair_kind: str
    cell: str
    score: str
    n_pairs: int
    n_sets: int
    percent: float
    set_weighted_percent: float


def find_pairs(inst: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """Pairs of instances sharing a candidate set.

    Args:
        inst: one row per instance: instance_id, cue, candidates (list[str]), associations (list[str]).

    Returns:
        (pairs, counts). pairs: set_key (str, the sorted candidates joined by "|"), num_candidates,
        id0, id1 (instance ids, input order), kind (disjoint | overlapping), a0, a1 (the
        symmetric-difference parts, sorted lists; both non-empty). counts: sets, pairs (every pair
        of instances in a set), identical, disjoint, overlapping (these three partition the pairs),
        same_cue, nested (an overlapping pair with one set inside the other: an empty difference
        part), scored (pairs returned: not identical, not same-cue, not nested).
    """
    keys = ["|".join(sorted(c)) for c in inst["candidates"]]
    groups: dict[str, list[int]] = {}
    for i, k in enumerate(keys):
        groups.setdefault(k, []).append(i)
    ids, cues = inst["instance_id"].to_numpy(), [str(c).strip().casefold() for c in inst["cue"]]
    assoc = [frozenset(a) for a in inst["associations"]]
    counts = dict.fromkeys(["sets", "pairs", "identical", "same_cue", "disjoint", "overlapping", "nested"], 0)
    counts["sets"] = len(groups)
    rows = []
    for key, members in groups.items():
        for i, j in combinations(members, 2):
            counts["pairs"] += 1
            a, b = assoc[i], assoc[j]
            kind = "identical" if a == b else "overlapping" if a & b else "disjoint"
            counts[kind] += 1
            same_cue = cues[i] == cues[j]
            counts["same_cue"] += same_cue
            d0, d1 = sorted(a - b), sorted(b - a)
            nested = kind == "overlapping" and not (d0 and d1)
            counts["nested"] += nested
            if kind == "identical" or same_cue or nested:
                continue
            rows.append((key, len(key.split("|")), ids[i], ids[j], kind, d0, d1))
    counts["scored"] = len(rows)
    cols = ["set_key", "num_candidates", "id0", "id1", "kind", "a0", "a1"]
    return pd.DataFrame(rows, columns=cols), counts


def pair_scores(s00: np.ndarray, s01: np.ndarray, s10: np.ndarray, s11: np.ndarray) -> dict[str, np.ndarray]:
    """Winoground text / image / group booleans from set-level scores ``sXY = S(cX, AY)``
    (strict inequalities: ties count as wrong)."""
    text = (s00 > s10) & (s11 > s01)
    image = (s00 > s01) & (s11 > s10)
    return {"text": text, "image": image, "group": text & image}


def set_score(cands: Sequence[str], sims: Sequence[float], cue_sims_of: Sequence[str]) -> float:
    """S(c, A): mean of the cue's similarities to the candidates named in ``cue_sims_of``."""
    where = {c: s for c, s in zip(cands, sims)}
    return float(np.mean([where[a] for a in cue_sims_of]))


def cluster_bootstrap(values: np.ndarray, clusters: np.ndarray, n_boot: int, seed: int) -> tuple[float, float]:
    """95 % percentile CI of the mean of ``values`` (fractions), resampling whole clusters."""
    if len(values) == 0:
        return float("nan"), float("nan")
    _, inv = np.unique(clusters, return_inverse=True)
    sums = np.bincount(inv, weights=values.astype(float))
    counts = np.bincount(inv).astype(float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(sums), size=(n_boot, len(sums)))
    means = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def set_weighted(values: np.ndarray, clusters: np.ndarray, n_boot: int, seed: int) -> tuple[float, float, float]:
    """(estimate, 95 % CI low, high) of the mean over clusters of each cluster's mean ``values``
    (fractions): every candidate set weighs the same, however many pairs it holds. The CI resamples
    the clusters' means (:func:`cluster_bootstrap` with one cluster per mean). NaNs when empty."""
    if len(values) == 0:
        return float("nan"), float("nan"), float("nan")
    _, inv = np.unique(clusters, return_inverse=True)
    means = np.bincount(inv, weights=values.astype(float)) / np.bincount(inv)
    lo, hi = cluster_bootstrap(means, np.arange(len(means)), n_boot, seed)
    return float(means.mean()), lo, hi


def _cells(pairs: pd.DataFrame) -> list[tuple[str, pd.Series]]:
    grp = pairs["num_candidates"].map(candidate_group)
    out = [("all", pd.Series(True, index=pairs.index))]
    out += [(g, grp == g) for g in ("5&6", "10&12") if (grp == g).any()]
    return out


def _summarise(
    base: dict[str, Any],
    pairs: pd.DataFrame,
    hits: dict[str, np.ndarray],
    chance: dict[str, float],
    n_boot: int,
    seed: int,
) -> list[dict[str, Any]]:
    rows = []
    for kind in PAIR_KINDS:
        for cell, mask in _cells(pairs):
            m = (pairs["kind"] == kind).to_numpy() & mask.to_numpy()
            for score, h in hits.items():
                vals = h[m].astype(float)
                lo, hi = cluster_bootstrap(vals, pairs["set_key"].to_numpy()[m], n_boot, seed)
                sw, sw_lo, sw_hi = set_weighted(vals, pairs["set_key"].to_numpy()[m], n_boot, seed)
                rows.append(
                    {
                        **base,
                        "pair_kind": kind,
                        "cell": cell,
                        "score": score,
                        "n_pairs": int(m.sum()),
                        "n_sets": int(pairs["set_key"][m].nunique()),
                        "percent": 100 * float(vals.mean()) if len(vals) else None,
                        "ci_low_percent": 100 * lo if len(vals) else None,
                        "ci_high_percent": 100 * hi if len(vals) else None,
                        "chance_percent": chance[score] if score in chance else None,
                        "set_weighted_percent": 100 * sw if len(vals) else None,
                        "set_weighted_ci_low_percent": 100 * sw_lo if len(vals) else None,
                        "set_weighted_ci_high_percent": 100 * sw_hi if len(vals) else None,
                    }
                )
    return rows


def paired_scores(inst: pd.DataFrame, pred: pd.DataFrame, n_boot: int, seed: int) -> pd.DataFrame:
    """Text / image / group scores per model, pair kind and cell (all, 5&6, 10&12), with cluster CIs.

    Args:
        inst: the evaluated instances (instance_id, dataset, cue, candidates, associations).
        pred: :class:`schemas.evaluate.EvalPredictions` rows; models whose rows carry per-candidate
            ``similarities`` are scored, pairs with an unscored instance are left out.

    Returns:
        :class:`schemas.evaluate.PairedEvaluation` rows (percent units).
    """
    rows: list[dict[str, Any]] = []
    by_id = inst.set_index("instance_id")
    for dataset, d in inst.groupby("dataset", sort=False):
        pairs, _ = find_pairs(d)
        if pairs.empty:
            continue
        for (model, weights), g in pred[pred["similarities"].notna()].groupby(["model_name", "weights_id"], sort=False):
            sims = dict(zip(g["instance_id"], g["similarities"]))
            keep = pairs[pairs["id0"].isin(sims) & pairs["id1"].isin(sims)]
            if keep.empty:
                continue
            s = np.zeros((len(keep), 4))
            # casts: pandas-stubs types itertuples fields and .at cells as scalars; these hold lists
            for r, p in enumerate(cast("Iterator[_PairRow]", keep.itertuples(index=False))):
                c0 = cast("list[str]", by_id.at[p.id0, "candidates"])
                c1 = cast("list[str]", by_id.at[p.id1, "candidates"])
                s[r] = [
                    set_score(c0, sims[p.id0], p.a0),
                    set_score(c0, sims[p.id0], p.a1),
                    set_score(c1, sims[p.id1], p.a0),
                    set_score(c1, sims[p.id1], p.a1),
                ]
            hits = pair_scores(s[:, 0], s[:, 1], s[:, 2], s[:, 3])
            base = {"model_name": model, "weights_id": weights, "dataset": dataset, "source": "similarities"}
            rows += _summarise(base, keep.reset_index(drop=True), hits, CHANCE_PERCENT, n_boot, seed)
    return pd.DataFrame(rows, columns=COLUMNS)


def both_solved(
    inst: pd.DataFrame, predictions: Mapping[Any, Sequence[str]], model: str, n_boot: int, seed: int
) -> pd.DataFrame:
    """ "Both cues solved" per pair from top-K lists alone: both instances predicted exactly.

    Chance = mean over pairs of 1/C(N,K0) * 1/C(N,K1) (independent uniformly random K-subsets).
    Returns :class:`schemas.evaluate.PairedEvaluation` rows with score ``both_solved``."""
    pairs, _ = find_pairs(inst)
    pairs = pairs[pairs["id0"].isin(predictions) & pairs["id1"].isin(predictions)].reset_index(drop=True)
    assoc = dict(zip(inst["instance_id"], inst["associations"]))
    n = dict(zip(inst["instance_id"], inst["candidates"].map(len)))

    def exact(i: Any) -> bool:
        return set(predictions[i]) == set(assoc[i])

    hit = np.array([exact(a) and exact(b) for a, b in zip(pairs["id0"], pairs["id1"])], dtype=bool)
    rows = _summarise(
        {"model_name": model, "weights_id": "release", "dataset": "game", "source": "top_k"},
        pairs,
        {"both_solved": hit},
        {},
        n_boot,
        seed,
    )
    for r in rows:
        m = (pairs["kind"] == r["pair_kind"]) & _cells_mask(pairs, r["cell"])
        ch = [
            1 / comb(n[a], len(assoc[a])) / comb(n[b], len(assoc[b])) for a, b in zip(pairs["id0"][m], pairs["id1"][m])
        ]
        r["chance_percent"] = 100 * float(np.mean(ch)) if ch else None
    return pd.DataFrame(rows, columns=COLUMNS)


def _cells_mask(pairs: pd.DataFrame, cell: str) -> pd.Series:
    return dict(_cells(pairs)).get(cell, pd.Series(False, index=pairs.index))


COLUMNS = [
    "model_name",
    "weights_id",
    "dataset",
    "source",
    "pair_kind",
    "cell",
    "score",
    "n_pairs",
    "n_sets",
    "percent",
    "ci_low_percent",
    "ci_high_percent",
    "chance_percent",
    "set_weighted_percent",
    "set_weighted_ci_low_percent",
    "set_weighted_ci_high_percent",
]


def summary(paired: pd.DataFrame) -> dict[str, dict[str, float | None]]:
    """Metrics: ``{model: {"<dataset> <kind> <cell> <score> (n=<pairs>)": percent (2 dp)}}`` for the
    'all' cells and both_solved's 5&6 / 10&12 cells, each beside its set-weighted value under the
    same key + " set-weighted (sets=<n_sets>)"."""
    out: dict[str, dict[str, float | None]] = {}
    keep = paired[(paired["cell"] == "all") | (paired["score"] == "both_solved")]
    for r in cast("Iterator[_PairedRow]", keep.itertuples(index=False)):  # cast: stubs cannot know the columns
        val = None if pd.isna(r.percent) else round(float(r.percent), 2)
        sw = None if pd.isna(r.set_weighted_percent) else round(float(r.set_weighted_percent), 2)
        key = f"{r.dataset} {r.pair_kind} {r.cell} {r.score} (n={r.n_pairs})"
        out.setdefault(str(r.model_name), {})[key] = val
        out[str(r.model_name)][f"{key} set-weighted (sets={r.n_sets})"] = sw
    return out


def release_game_predictions(folder: Path | None, files: Sequence[str]) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """The release's game rows with their stored top-K lists (``clip_vit_32_predictions``); none
    when ``folder`` is None.

    Returns:
        (instances: instance_id, cue, candidates, associations; instance_id -> predicted list).
    """
    import json

    frames = []
    for name in files if folder is not None else ():
        assert folder is not None  # for mypy: the loop runs only with a folder
        # by ID: the file's row order never reaches the pairs or their bootstrap
        d = pd.read_csv(Path(folder) / name).sort_values("ID", kind="stable").reset_index(drop=True)
        frames.append(
            pd.DataFrame(
                {
                    "instance_id": [f"{Path(name).stem}:{i}" for i in d["ID"]],
                    "cue": d["cue"].astype(str),
                    "candidates": d["candidates"].map(json.loads),
                    "associations": d["associations"].map(json.loads),
                    "predictions": d["clip_vit_32_predictions"].map(json.loads),
                }
            )
        )
    if not frames:  # no release folder (evaluate.release_predictions_dir empty)
        return pd.DataFrame(columns=["instance_id", "cue", "candidates", "associations"]), {}
    df = pd.concat(frames, ignore_index=True)
    return df.drop(columns="predictions"), dict(zip(df["instance_id"], df["predictions"]))


def run(inst: pd.DataFrame, pred: pd.DataFrame, release_dir: Path | None, n_boot: int, seed: int) -> dict[str, Any]:
    """Write the ``paired_evaluation`` table (models' paired scores and the release's "both cues
    solved"); returns the metrics: pair counts per dataset and :func:`summary`."""
    from gavil.pipeline import catalog

    rel_inst, rel_pred = release_game_predictions(
        release_dir, ["game_5_6_with_predictions.csv", "game_10_12_with_predictions.csv"]
    )
    release = both_solved(rel_inst, rel_pred, "clip-vit-b-32 (release predictions)", n_boot, seed)
    table = pd.concat([paired_scores(inst, pred, n_boot, seed), release], ignore_index=True)
    table = catalog.write_table(table, "paired_evaluation")
    counts = {str(d): find_pairs(g)[1] for d, g in inst.groupby("dataset", sort=False)}
    return {"pairs": counts, "release_pairs": find_pairs(rel_inst)[1], "scores": summary(table)}

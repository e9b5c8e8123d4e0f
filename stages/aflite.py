"""Stage ``aflite``: WinoGrande's AfLite (Sakaguchi et al. 2020, §4, Algorithm 1) over the selected
instances — a *report* of which instances simple linear models solve from precomputed embeddings.

Unit = instance. Each of ``n_classifiers`` scikit-learn logistic regressions per phase learns
(cue, candidate) -> associated from the pair rows of a random ``m`` instances (split by instance;
with ``image_disjoint`` the held-out instances share no candidate with the training ones) and
predicts every other remaining instance: its top-K candidates by score (K = its number of
associations). Credit = held-out Jaccard (or exact match). score(e) = mean credit over the
classifiers that held e out. Each phase flags the top-``k`` instances with score >= tau (ties by
instance id); phases repeat until fewer than k are flagged or fewer than m remain. m and k are
absolute counts or the paper's fractions (15,000 and 500 of 44,000: 0.3409, 0.0114).

Determinism: instances are sorted by id before any draw, every random subset comes from
``numpy.random.default_rng([seed, phase])`` and every prediction is credited by instance position,
so a permuted input flags the same instances (public re-implementations credited predictions to the
wrong rows after shuffling; tests/test_aflite.py checks this).

Assessment (WinoGrande §4): KL divergence between the label-conditional histograms of the 1-D PCA
projection of the pair features, before, after AfLite, and after a random reduction of the same
size. Probes: the *cue-free* features (candidate only) run one phase of scoring; the text model is
itself image-free (the *image-free* probe is the main run then; with an open_clip model the
image-free probe needs the text side alone and is reported as not run).

Report only by default: nothing downstream reads it, and the export is unchanged. With
``aflite.write_debiased`` the kept instances are written to ``data/export/debiased.csv`` (like
``winogrande_debiased`` beside ``winogrande_xl``); otherwise that file holds the header alone.
WinoGAViL does not choose test instances with a model (its §2.2, §4): do not replace the benchmark
with the debiased split.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
import pandas as pd

from gavil.io import write_csv
from gavil.models.embeddings import Cache
from gavil.models.features import Layout, cue_key, embed, fit_logistic, pair_features, pca_kl, topk_credit
from gavil.models.loading import ModelSpec, RuntimeOptions, WeightsUnavailable, load_model
from gavil.params.adversarial import resolve_size
from gavil.pipeline import catalog
from schemas.ocr import accepted_images

if TYPE_CHECKING:
    from gavil.params import Params
    from gavil.params.adversarial import AfliteParams


class Metrics(TypedDict):
    """``data/metrics/aflite.json``."""

    status: str  # ok | no_weights
    weights_sha256: str | None  # of the model's weights file (None: no weights)
    instances: int  # selected instances assessed
    m: int
    k: int
    phases: int
    flagged: int
    by_dataset: dict[str, dict[str, Any]]  # dataset -> instances, flagged, flagged_percent, mean_score
    kl: dict[str, float | None]  # before, aflite, random (nats)
    probes: dict[str, Any]
    debiased_written: bool


@dataclass(frozen=True)
class Result:
    score: np.ndarray  # last predictability score per instance (nan: never held out)
    phase: np.ndarray  # phase flagged in (0: kept)
    phases: list[dict[str, Any]]


def predictability(
    x: np.ndarray, lay: Layout, alive: np.ndarray, m: int, p: AfliteParams, phase: int, concepts: list[set[str]]
) -> tuple[np.ndarray, np.ndarray]:
    """One phase's scores: (credit sum, times held out) per instance position (all instances)."""
    total, count = np.zeros(len(lay.k)), np.zeros(len(lay.k), dtype=np.int64)
    rng = np.random.default_rng([p.seed, phase])
    for _ in range(p.n_classifiers):
        perm = rng.permutation(len(alive))
        train, test = alive[perm[:m]], alive[perm[m:]]
        if p.image_disjoint:
            seen = set().union(*(concepts[i] for i in train))
            test = np.array([i for i in test if not concepts[i] & seen], dtype=np.int64)
        if len(test) == 0:
            continue
        rows = lay.rows[train]
        valid = rows >= 0
        y = lay.label[train][valid]
        if y.all() or not y.any():
            continue
        clf = fit_logistic(x[rows[valid]], y, p.max_iter, p.seed)
        trows = lay.rows[test]
        scores = np.full(trows.shape, -np.inf)
        scores[trows >= 0] = clf.decision_function(x[trows[trows >= 0]])
        total[test] += topk_credit(scores, lay.label[test], lay.k[test], p.correct == "exact")
        count[test] += 1
    return total, count


def aflite(x: np.ndarray, lay: Layout, ids: np.ndarray, concepts: list[set[str]], p: AfliteParams) -> Result:
    """AfLite over instances (see the module docstring).

    Args:
        x: (pair rows, features) float32, rows as ``lay.rows`` index them.
        lay: the instances' candidates (:class:`gavil.models.features.Layout`), one row per instance.
        ids: instance ids (str), the same order as ``lay``. concepts: each instance's candidates.

    Returns:
        :class:`Result` in the input order; ``phases`` rows: phase, instances, held_out (instances
        scored), above_tau, flagged.
    """
    order = np.argsort(ids, kind="stable")
    inv = np.empty_like(order)
    inv[order] = np.arange(len(order))
    lay_s = Layout(lay.rows[order], lay.label[order], lay.k[order])
    conc_s = [concepts[i] for i in order]
    n = len(ids)
    m, k = resolve_size(p.train_size, n), resolve_size(p.cutoff, n)
    score, phase_of = np.full(n, np.nan), np.zeros(n, dtype=np.int64)
    alive, phases, phase = np.arange(n), [], 0
    while len(alive) > m:
        phase += 1
        total, count = predictability(x, lay_s, alive, m, p, phase, conc_s)
        held = alive[count[alive] > 0]
        score[held] = total[held] / count[held]
        above = held[score[held] >= p.tau]
        top = above[np.lexsort((ids[order][above], -score[above]))][:k]
        phase_of[top] = phase
        alive = np.setdiff1d(alive, top)
        phases.append(
            {
                "phase": phase,
                "instances": len(alive) + len(top),
                "held_out": len(held),
                "above_tau": len(above),
                "flagged": len(top),
            }
        )
        print(
            f"aflite: phase {phase}: {len(alive) + len(top)} instances, {len(above)} >= tau, {len(top)} flagged",
            file=sys.stderr,
        )
        if len(top) < k:
            break
    return Result(score[inv], phase_of[inv], phases)


def kl_assessment(x: np.ndarray, lay: Layout, keep: np.ndarray, bins: int, seed: int) -> dict[str, float | None]:
    """KL (nats) of the label-conditional 1-D PCA histograms: before, after AfLite (``keep``), and
    after a random reduction removing as many instances (seeded)."""
    rng = np.random.default_rng(seed)
    rand = np.zeros(len(keep), dtype=bool)
    rand[rng.choice(len(keep), int(keep.sum()), replace=False)] = True

    def kl(mask: np.ndarray) -> float | None:
        rows = lay.rows[mask]
        v = pca_kl(x[rows[rows >= 0]], lay.label[mask][rows >= 0], bins)
        return None if np.isnan(v) else round(v, 4)

    return {"before": kl(np.ones(len(keep), dtype=bool)), "aflite": kl(keep), "random": kl(rand)}


def _features(
    sel: pd.DataFrame, cue_vecs: dict[str, np.ndarray], cand_vecs: dict[str, np.ndarray], probe: str
) -> np.ndarray:
    cues = np.stack([cue_vecs[cue_key(c)] for c, cs in zip(sel["cue"], sel["candidates"]) for _ in cs])
    cands = np.stack([cand_vecs[c] for cs in sel["candidates"] for c in cs])
    return pair_features(cues, cands, probe)


def run(params: Params) -> Metrics:
    """Stage entry: selection (+ images for open_clip) -> aflite table, phases, plot, debiased CSV."""
    p = params.aflite
    selection = catalog.read_table("selection")
    out = selection[["instance_uid", "dataset", "num_candidates"]].copy()
    out["score"], out["phase"] = np.nan, pd.array([pd.NA] * len(out), dtype="Int64")
    out["status"], out["reason"] = "not_selected", "selection status: " + selection["status"].astype(str)
    chosen = (selection["status"] == "selected").to_numpy()
    images = accepted_images(catalog.read_table("ocr")) if params.models[p.model].kind == "open_clip" else None
    if images is not None:
        has = selection["candidates"].map(lambda cs: all(c in images for c in cs)).to_numpy()
        out.loc[chosen & ~has, ["status", "reason"]] = ["kept", "not assessed: a candidate has no accepted image"]
        chosen &= has
    sel = selection[chosen].reset_index(drop=True)
    cache = Cache([], catalog.path("aflite_embeddings", "write"))
    m = resolve_size(p.train_size, len(sel))
    k = resolve_size(p.cutoff, len(sel))
    metrics: Metrics = {
        "status": "ok",
        "instances": len(sel),
        "m": m,
        "k": k,
        "phases": 0,
        "flagged": 0,
        "by_dataset": {},
        "kl": {},
        "probes": {},
        "debiased_written": p.write_debiased,
        "weights_sha256": None,
    }
    phases: list[dict[str, Any]] = []
    try:
        model = load_model(ModelSpec.of(p.model, params.models[p.model]), RuntimeOptions.of(params.models[p.model]))
        metrics["weights_sha256"] = model.weights_sha256
    except WeightsUnavailable as e:
        print(f"aflite: {p.model}: NO WEIGHTS - nothing assessed. {e.log_text()}", file=sys.stderr)
        out.loc[chosen, ["status", "reason"]] = ["kept", f"not assessed: no weights for {p.model}"]
        metrics["status"] = "no_weights"
        model = None
    if model is not None and len(sel):
        concepts = sorted({c for cs in sel["candidates"] for c in cs})
        cue_vecs, cand_vecs = embed(model, list(sel["cue"]), concepts, cache, images)
        cache.save()
        lay = Layout.build(list(sel["candidates"]), list(sel["associations"]))
        x = _features(sel, cue_vecs, cand_vecs, "full")
        ids = sel["instance_uid"].to_numpy().astype(str)
        sets = [set(cs) for cs in sel["candidates"]]
        res = aflite(x, lay, ids, sets, p)
        phases = res.phases
        flagged = res.phase > 0
        idx = np.flatnonzero(chosen)
        out.loc[idx, "score"] = res.score
        out.loc[idx, "phase"] = pd.array(np.where(flagged, res.phase, 0), dtype="Int64").astype("Int64")
        out.loc[idx[~flagged], "phase"] = pd.NA
        out.loc[idx, "status"] = np.where(flagged, "flagged", "kept")
        out.loc[idx, "reason"] = [
            f"phase {ph}: score {s:.2f} >= tau {p.tau}"
            if f
            else ("never held out" if np.isnan(s) else f"score {s:.2f}")
            for f, ph, s in zip(flagged, res.phase, res.score)
        ]
        metrics["phases"], metrics["flagged"] = len(phases), int(flagged.sum())
        metrics["kl"] = kl_assessment(x, lay, ~flagged, p.kl_bins, p.seed)
        metrics["probes"] = _probes(sel, cue_vecs, cand_vecs, lay, m, p, sets, model.spec.kind)
    for d, g in out[chosen].groupby("dataset"):
        metrics["by_dataset"][str(d)] = {
            "instances": len(g),
            "flagged": int((g["status"] == "flagged").sum()),
            "flagged_percent": round(100 * float((g["status"] == "flagged").mean()), 2),
            "mean_score": None if g["score"].isna().all() else round(float(g["score"].mean()), 4),
        }
    catalog.write_table(out, "aflite")
    cols = ["phase", "instances", "held_out", "above_tau", "flagged"]
    catalog.write_table(pd.DataFrame(phases, columns=cols), "aflite_phases")
    write_csv(pd.DataFrame(phases, columns=cols)[["phase", "flagged"]], catalog.path("plot_aflite", "write"))
    _write_debiased(selection, out, p.write_debiased)
    return metrics


def _probes(
    sel: pd.DataFrame, cue_vecs: dict, cand_vecs: dict, lay: Layout, m: int, p: AfliteParams, sets: list, kind: str
) -> dict[str, Any]:
    """Phase-1 predictability by dataset with the full and the cue-free features."""
    out: dict[str, Any] = {}
    for probe in ("full", "cue_free"):
        x = _features(sel, cue_vecs, cand_vecs, probe)
        total, count = predictability(x, lay, np.arange(len(sel)), m, p, 1, sets)
        s = np.where(count > 0, total / np.maximum(count, 1), np.nan)
        out[probe] = {
            str(d): {
                "mean_score": round(float(np.nanmean(s[g.index])), 4),
                "above_tau_percent": round(100 * float(np.mean(s[g.index] >= p.tau)), 2),
            }
            for d, g in sel.groupby("dataset")
        }
    out["image_free"] = (
        "the text model sees no images: the full run is the image-free probe"
        if kind == "text"
        else "not run: needs the open_clip text side on candidate names"
    )
    return out


def _write_debiased(selection: pd.DataFrame, out: pd.DataFrame, enabled: bool) -> None:
    kept = selection[(out["status"] == "kept").to_numpy()] if enabled else selection.iloc[0:0]
    df = pd.DataFrame(
        {
            "instance_uid": kept["instance_uid"],
            "dataset": kept["dataset"],
            "cue": kept["cue"],
            "candidates": kept["candidates"].map(json.dumps),
            "associations": kept["associations"].map(json.dumps),
            "num_associations": kept["num_associations"],
            "num_candidates": kept["num_candidates"],
        }
    )
    write_csv(df, catalog.path("aflite_debiased", "write"))

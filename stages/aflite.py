"""Stage ``aflite``: WinoGrande's AfLite (Sakaguchi et al. 2020, §4, Algorithm 1) over the selected
instances — a *report* of which instances simple linear models solve from precomputed embeddings.

Unit = instance. Each of ``n_classifiers`` logistic regressions per phase (C = 1, L2; all of a
phase's fitted together by :mod:`gavil.models.batched_logistic`, or one by one with scikit-learn
under ``solver: sklearn``: the same optimum, the same flags) learns
(cue, candidate) -> associated from the pair rows of a random ``m`` instances (split by instance;
with ``image_disjoint`` the held-out instances share no candidate with the training ones) and
predicts every other remaining instance: its top-K candidates by score (K = its number of
associations). Credit = held-out Jaccard (or exact match). score(e) = mean credit over the
classifiers that held e out. Each phase flags the top-``k`` instances with score >= tau (ties by
instance id); phases repeat until fewer than k are flagged or fewer than m remain. m and k are
absolute counts or the paper's fractions (15,000 and 500 of 44,000: 0.3409, 0.0114).

Determinism: instances (and their pair rows) are sorted by id before any draw or sum, every random
subset comes from ``numpy.random.default_rng([seed, phase])`` over id-ordered positions, and every
prediction is credited by instance position, so a permuted input gives bit-identical scores (public
re-implementations credited predictions to the wrong rows after shuffling). The stage sorts the
selection by ``instance_uid`` first: its tables, probes and KL are byte-identical for a shuffled
selection (tests/test_aflite.py).

Progress (stderr): the model load and the embedding say when they start and every 10 s while they
run; each phase prints its counts, the elapsed time and the solver's iterations.

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
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from gavil.io import write_csv
from gavil.models.batched_logistic import fit_logistic_batched, gram
from gavil.models.embeddings import Cache
from gavil.models.features import Layout, cue_key, embed, fit_logistic, pair_features, pca_kl, topk_credit
from gavil.models.loading import ModelSpec, RuntimeOptions, WeightsUnavailable, load_model
from gavil.params.adversarial import resolve_size
from gavil.pipeline import catalog
from gavil.progress import heartbeat
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
    first_score: np.ndarray  # phase 1's score per instance (nan: not held out): the full-feature probe


#: The batched solver's tolerance (Newton decrement): decision values within ~1e-4 of the optimum.
SOLVER_TOL = 1e-4
#: The reference's scikit-learn ``tol`` (max |gradient| of the loss / rows), float64 features: its
#: decision values agree with the optimum to ~1e-5. scikit-learn's default 1e-4 on float32 stops
#: 0.03-0.17 away from it, where the result depends on the solver's path (flags differ).
SKLEARN_TOL = 1e-8
SKLEARN_DTYPE: type[np.floating] = (
    np.float64
)  # benchmarks/aflite.py sets float32 and tol 1e-4 to time the old stage's fits


class _Fitter:
    """Fits a phase's classifiers on the pair rows of ``x`` and returns their decision values.

    ``batched``: :func:`gavil.models.batched_logistic.fit_logistic_batched` over all classifiers at
    once (``threads`` BLAS threads; X1^T X1 computed once; each phase starts from the previous
    phase's mean solution: the optimum is unique, the start only saves iterations).
    ``sklearn``: :func:`gavil.models.features.fit_logistic` one by one on float64 features with
    ``tol`` :data:`SKLEARN_TOL` (the reference: the same optimum, ~10x slower)."""

    def __init__(self, x: np.ndarray, p: AfliteParams, threads: int, x_gram: np.ndarray | None = None):
        self.x, self.p, self.threads = x, p, threads
        self._gram = x_gram
        self._init: np.ndarray | None = None
        self.iterations: list[int] = []

    @property
    def gram(self) -> np.ndarray:
        """X1^T X1 of the pair rows (float64), computed once."""
        if self._gram is None:
            with threadpool_limits(self.threads):
                self._gram = gram(self.x)
        return self._gram

    def decisions(self, lay: Layout, splits: list[tuple[np.ndarray, np.ndarray]]) -> list[np.ndarray]:
        """Per split (train, test instance positions): (len(test), width) decision values, -inf on padding."""
        p, x = self.p, self.x
        if not splits:  # every draw skipped (e.g. a tiny selection where all m are training): nothing to fit
            return []
        if p.solver == "sklearn":
            x64 = x.astype(SKLEARN_DTYPE)
            out = []
            for train, test in splits:
                rows = lay.rows[train]
                clf = fit_logistic(x64[rows[rows >= 0]], lay.label[train][rows >= 0], p.max_iter, p.seed, SKLEARN_TOL)
                trows = lay.rows[test]
                out.append(_scores(trows, clf.decision_function(x64[trows[trows >= 0]])))
                self.iterations.append(int(clf.n_iter_[0]))
            self.iterations = self.iterations[-len(splits) :]
            return out
        masks = np.zeros((len(x), len(splits)), dtype=bool)
        for j, (train, _) in enumerate(splits):
            rows = lay.rows[train]
            masks[rows[rows >= 0], j] = True
        y = np.zeros(len(x), dtype=bool)
        y[lay.rows[lay.rows >= 0]] = lay.label[lay.rows >= 0]
        with threadpool_limits(self.threads):
            fit = fit_logistic_batched(
                x, y, masks, tol=SOLVER_TOL, max_iter=p.max_iter, x_gram=self.gram, init=self._init
            )
            z = fit.decision_function(x)
        self._init = np.concatenate([fit.coef, fit.intercept[:, None]], axis=1).mean(axis=0)
        self.iterations = fit.n_iter.tolist()
        unfinished = int((~fit.converged & ~fit.stalled).sum())
        if unfinished:
            print(
                f"aflite: warning: {unfinished} of {len(splits)} classifiers ran out of iterations "
                f"(max_iter {p.max_iter}) before the tolerance {SOLVER_TOL}",
                file=sys.stderr,
            )
        out = []
        for j, (_, test) in enumerate(splits):
            trows = lay.rows[test]
            out.append(_scores(trows, z[trows[trows >= 0], j]))
        return out


def _scores(trows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(instances, width) decision values: ``values`` on the real candidates, -inf on padding."""
    scores = np.full(trows.shape, -np.inf)
    scores[trows >= 0] = values
    return scores


def splits(
    lay: Layout, alive: np.ndarray, m: int, p: AfliteParams, phase: int, concepts: list[set[str]]
) -> list[tuple[np.ndarray, np.ndarray]]:
    """A phase's classifier splits: (train, test) instance positions, drawn in classifier order from
    ``default_rng([seed, phase])`` over ``alive`` (positions in id order). Splits with no test
    instance, or whose training rows hold a single label, are skipped (their draw still happens)."""
    rng = np.random.default_rng([p.seed, phase])
    out = []
    for _ in range(p.n_classifiers):
        perm = rng.permutation(len(alive))
        train, test = alive[perm[:m]], alive[perm[m:]]
        if p.image_disjoint:
            seen = set().union(*(concepts[i] for i in train))
            test = np.array([i for i in test if not concepts[i] & seen], dtype=np.int64)
        if len(test) == 0:
            continue
        rows = lay.rows[train]
        y = lay.label[train][rows >= 0]
        if y.all() or not y.any():
            continue
        out.append((train, test))
    return out


def predictability(
    fitter: _Fitter, lay: Layout, alive: np.ndarray, m: int, p: AfliteParams, phase: int, concepts: list[set[str]]
) -> tuple[np.ndarray, np.ndarray]:
    """One phase's scores: (credit sum, times held out) per instance position (all instances).
    Credits are added in classifier order, whichever the solver."""
    total, count = np.zeros(len(lay.k)), np.zeros(len(lay.k), dtype=np.int64)
    drawn = splits(lay, alive, m, p, phase, concepts)
    for (_, test), scores in zip(drawn, fitter.decisions(lay, drawn)):
        total[test] += topk_credit(scores, lay.label[test], lay.k[test], p.correct == "exact")
        count[test] += 1
    return total, count


def aflite(
    x: np.ndarray,
    lay: Layout,
    ids: np.ndarray,
    concepts: list[set[str]],
    p: AfliteParams,
    threads: int = 1,
    x_gram: np.ndarray | None = None,
) -> Result:
    """AfLite over instances (see the module docstring).

    Args:
        x: (pair rows, features) float32, rows as ``lay.rows`` index them.
        lay: the instances' candidates (:class:`gavil.models.features.Layout`), one row per instance.
        ids: instance ids (str, unique), the same order as ``lay``. concepts: each instance's candidates.
        threads: BLAS threads of the batched solver. x_gram: optional
            :func:`gavil.models.batched_logistic.gram` of ``x``, used when ``x``'s rows are already in
            id order (as the stage builds them); computed here otherwise.

    Returns:
        :class:`Result` in the input order; ``phases`` rows: phase, instances, held_out (instances
        scored), above_tau, flagged.

    Raises:
        ValueError: ``ids`` repeat an id (the order of instances would then depend on the input's).
    """
    if len(np.unique(ids)) != len(ids):
        raise ValueError("aflite: instance ids repeat; each instance needs a unique id")
    order = np.argsort(ids, kind="stable")
    inv = np.empty_like(order)
    inv[order] = np.arange(len(order))
    # pair rows in id order too, so every sum (the GEMMs included) runs in the same order
    rows = lay.rows[order]
    flat = rows[rows >= 0]
    if not np.array_equal(flat, np.arange(len(x))):
        x, x_gram = x[flat], None
        rows = np.full_like(rows, -1)
        rows[lay.rows[order] >= 0] = np.arange(len(flat))
    lay_s = Layout(rows, lay.label[order], lay.k[order])
    conc_s = [concepts[i] for i in order]
    n = len(ids)
    m, k = resolve_size(p.train_size, n), resolve_size(p.cutoff, n)
    fitter = _Fitter(x, p, threads, x_gram)
    score, phase_of, first = np.full(n, np.nan), np.zeros(n, dtype=np.int64), np.full(n, np.nan)
    alive, phases, phase = np.arange(n), [], 0
    print(
        f"aflite: {n} instances, m = {m}, k = {k}, {p.n_classifiers} classifiers per phase ({p.solver} solver)",
        file=sys.stderr,
    )
    t0 = time.perf_counter()
    while len(alive) > m:
        phase += 1
        total, count = predictability(fitter, lay_s, alive, m, p, phase, conc_s)
        held = alive[count[alive] > 0]
        score[held] = total[held] / count[held]
        if phase == 1:
            first[held] = score[held]
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
        its = f", iterations {min(fitter.iterations)}-{max(fitter.iterations)}" if fitter.iterations else ""
        print(
            f"aflite: phase {phase}: {len(alive) + len(top)} instances, {len(above)} >= tau, {len(top)} flagged"
            f" [{time.perf_counter() - t0:.1f} s{its}]",
            file=sys.stderr,
        )
        if len(top) < k:
            break
    return Result(score[inv], phase_of[inv], phases, first[inv])


def kl_assessment(
    x: np.ndarray, lay: Layout, keep: np.ndarray, bins: int, seed: int, x_gram: np.ndarray | None = None
) -> dict[str, float | None]:
    """KL (nats) of the label-conditional 1-D PCA histograms: before, after AfLite (``keep``), and
    after a random reduction removing as many instances (seeded; positions as given, so callers
    pass instances in id order). ``x_gram``: optional X1^T X1 of all of ``x``'s rows (the PCA's
    scatter matrices are then that minus the removed rows')."""
    rng = np.random.default_rng(seed)
    rand = np.zeros(len(keep), dtype=bool)
    rand[rng.choice(len(keep), int(keep.sum()), replace=False)] = True
    full = gram(x) if x_gram is None else x_gram

    def kl(mask: np.ndarray) -> float | None:
        rows = lay.rows[mask]
        gone = lay.rows[~mask]
        gone = gone[gone >= 0]
        g = full - gram(x[gone]) if len(gone) else full
        v = pca_kl(x[rows[rows >= 0]], lay.label[mask][rows >= 0], bins, g)
        return None if np.isnan(v) else round(v, 4)

    return {"before": kl(np.ones(len(keep), dtype=bool)), "aflite": kl(keep), "random": kl(rand)}


def _features(
    sel: pd.DataFrame, cue_vecs: dict[str, np.ndarray], cand_vecs: dict[str, np.ndarray], probe: str
) -> np.ndarray:
    cues = np.stack([cue_vecs[cue_key(c)] for c, cs in zip(sel["cue"], sel["candidates"]) for _ in cs])
    cands = np.stack([cand_vecs[c] for cs in sel["candidates"] for c in cs])
    return pair_features(cues, cands, probe)


def run(params: Params) -> Metrics:
    """Stage entry: selection (+ images for open_clip) -> aflite table, phases, plot, debiased CSV.

    Order-free: the selection is sorted by ``instance_uid`` first, so every draw, the embedding
    order, the KL's random reduction and the tables (rows by ``instance_uid``) are the same
    whatever the selection's row order."""
    p = params.aflite
    entry = params.models[p.model]
    selection = catalog.read_table("selection").sort_values("instance_uid", kind="stable", ignore_index=True)
    out = selection[["instance_uid", "dataset", "num_candidates"]].copy()
    out["score"], out["phase"] = np.nan, pd.array([pd.NA] * len(out), dtype="Int64")
    out["status"], out["reason"] = "not_selected", "selection status: " + selection["status"].astype(str)
    chosen = (selection["status"] == "selected").to_numpy()
    images = accepted_images(catalog.read_table("ocr")) if entry.kind == "open_clip" else None
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
    opt = RuntimeOptions.of(entry)
    try:
        with heartbeat(f"aflite: loading {p.model}", file=sys.stderr):
            model = load_model(ModelSpec.of(p.model, entry), opt)
        metrics["weights_sha256"] = model.weights_sha256
    except WeightsUnavailable as e:
        print(f"aflite: {p.model}: NO WEIGHTS - nothing assessed. {e.log_text()}", file=sys.stderr)
        out.loc[chosen, ["status", "reason"]] = ["kept", f"not assessed: no weights for {p.model}"]
        metrics["status"] = "no_weights"
        model = None
    if model is not None and len(sel):
        concepts = sorted({c for cs in sel["candidates"] for c in cs})
        with heartbeat(f"aflite: embedding {len(concepts)} concepts and the cues", file=sys.stderr):
            cue_vecs, cand_vecs = embed(model, list(sel["cue"]), concepts, cache, images)
        cache.save()
        lay = Layout.build(list(sel["candidates"]), list(sel["associations"]))
        x = _features(sel, cue_vecs, cand_vecs, "full")
        ids = sel["instance_uid"].to_numpy().astype(str)
        sets = [set(cs) for cs in sel["candidates"]]
        with threadpool_limits(opt.threads):
            x_gram = gram(x)
        res = aflite(x, lay, ids, sets, p, opt.threads, x_gram)
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
        print("aflite: KL assessment (before, after AfLite, after a random reduction)", file=sys.stderr)
        with threadpool_limits(opt.threads):
            metrics["kl"] = kl_assessment(x, lay, ~flagged, p.kl_bins, p.seed, x_gram)
        metrics["probes"] = _probes(sel, cue_vecs, cand_vecs, lay, m, p, sets, model.spec.kind, res, opt.threads)
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
    sel: pd.DataFrame,
    cue_vecs: dict,
    cand_vecs: dict,
    lay: Layout,
    m: int,
    p: AfliteParams,
    sets: list,
    kind: str,
    res: Result,
    threads: int,
) -> dict[str, Any]:
    """Phase-1 predictability by dataset with the full features (the main run's phase 1: the same
    draws on the same id-ordered instances) and with the cue-free ones (one phase, same draws)."""
    out: dict[str, Any] = {}
    for probe in ("full", "cue_free"):
        if probe == "full":
            s = res.first_score
        else:
            print("aflite: cue-free probe (one phase on the candidate features alone)", file=sys.stderr)
            x = _features(sel, cue_vecs, cand_vecs, probe)
            total, count = predictability(_Fitter(x, p, threads), lay, np.arange(len(sel)), m, p, 1, sets)
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

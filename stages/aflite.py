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

Determinism: every draw is keyed by instance id, never by row position: an instance's rank in a
classifier's split (and in the KL's random reduction, and whether ``plant`` marks it) is
``splitmix64(blake2b(instance_uid) ^ key(seed, purpose, phase, classifier))`` (:func:`draw_keys`),
so it depends on the instance's id and the seed alone, not on the row order nor on which other
instances are present. Instances (and their pair rows) are sorted by id before any fit or sum,
and every prediction is credited by instance position, so a permuted input gives bit-identical
scores, probes and KL (tests/test_aflite.py shuffles every table the stage reads: selection,
instances, embedding cache).

Report by source: counts, flags, flag rate and mean score per dataset (game / swow_baseline) and
per batch (``release:<file>`` for the released files, ``raw:<batch folder>`` for new collections,
from the ``instances`` table's ``source_file``). Audit option ``aflite.plant``: a spurious feature
(one extra pair-feature column, ``strength`` on the association rows of a keyed ``fraction`` of the
instances, 0 elsewhere) and the precision and recall of the flags against the planted instances,
overall, per dataset and per batch.

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

import hashlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

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
    from gavil.params.adversarial import AfliteParams, AflitePlantParams


class GroupCounts(TypedDict):
    """One dataset's or batch's assessed instances (``by_dataset`` / ``by_batch``)."""

    dataset: NotRequired[str]  # by_batch only: the batch's dataset
    instances: int
    flagged: int
    flagged_percent: float
    mean_score: float | None  # None: none of them was held out


class PlantCounts(TypedDict):
    """The flags against the planted instances: precision = flagged_planted / flagged, recall =
    flagged_planted / planted (None where the denominator is 0)."""

    instances: int
    planted: int
    flagged: int
    flagged_planted: int
    precision: float | None
    recall: float | None


class PlantReport(PlantCounts):
    """``metrics["plant"]``: the audit's settings, overall counts, and counts per dataset and batch."""

    fraction: float
    strength: float
    seed: int
    by_dataset: dict[str, PlantCounts]
    by_batch: dict[str, PlantCounts]


class Metrics(TypedDict):
    """``data/metrics/aflite.json``."""

    status: str  # ok | no_weights
    weights_sha256: str | None  # of the model's weights file (None: no weights)
    instances: int  # selected instances assessed
    m: int
    k: int
    phases: int
    flagged: int
    by_dataset: dict[str, GroupCounts]  # dataset -> instances, flagged, flagged_percent, mean_score
    by_batch: dict[str, GroupCounts]  # batch -> the same and its dataset
    kl: dict[str, float | None]  # before, aflite, random (nats)
    probes: dict[str, Any]  # full / cue_free -> by_dataset and by_batch -> mean_score, above_tau_percent
    plant: PlantReport | None  # the audit (aflite.plant): precision and recall of the flags; None: off
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


_U64 = np.uint64


def _splitmix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's output function (Steele, Lea & Flood 2014, "Fast splittable pseudorandom number
    generators", OOPSLA; constants of Stafford's Mix13), elementwise on uint64 (wrapping): a
    bijection of 64-bit values whose outputs look independent and uniform."""
    z = z + _U64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> _U64(27))) * _U64(0x94D049BB133111EB)
    return z ^ (z >> _U64(31))


def _blake64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def id_hashes(ids: np.ndarray) -> np.ndarray:
    """(n,) uint64: the first 8 bytes (little-endian) of BLAKE2b of each instance id (UTF-8)."""
    return np.fromiter((_blake64(str(i)) for i in ids), dtype=np.uint64, count=len(ids))


def draw_keys(h: np.ndarray, seed: int, *purpose: object) -> np.ndarray:
    """(n,) uint64 draw values of instances with id hashes ``h`` (:func:`id_hashes`) for one
    ``purpose`` (e.g. ``("split", phase, classifier)``): ``splitmix64(h ^ blake2b64(seed, purpose))``.
    Ranking instances by them is a random order keyed by id: an instance's value depends on its
    id, the seed and the purpose only (distinct ids give distinct values unless their 64-bit hashes
    collide)."""
    key = _blake64(json.dumps([seed, *purpose]))
    return _splitmix64(h ^ _U64(key))


def splits(
    lay: Layout, alive: np.ndarray, m: int, p: AfliteParams, phase: int, concepts: list[set[str]], h: np.ndarray
) -> list[tuple[np.ndarray, np.ndarray]]:
    """A phase's classifier splits: (train, test) instance positions (ascending). Classifier j
    trains on the ``m`` instances of ``alive`` with the smallest ``draw_keys(h, seed, "split",
    phase, j)`` (ties by position, i.e. by id) and tests on the others, so a split is keyed by
    instance id, not by position. Splits with no test instance, or whose training rows hold a
    single label, are skipped.

    Args:
        alive: positions (into ``lay`` and ``h``) of the remaining instances. h: (n,) uint64
            :func:`id_hashes` of all instances, by position."""
    out = []
    for j in range(p.n_classifiers):
        order = np.argsort(draw_keys(h[alive], p.seed, "split", phase, j), kind="stable")
        train, test = np.sort(alive[order[:m]]), np.sort(alive[order[m:]])
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
    fitter: _Fitter,
    lay: Layout,
    alive: np.ndarray,
    m: int,
    p: AfliteParams,
    phase: int,
    concepts: list[set[str]],
    h: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """One phase's scores: (credit sum, times held out) per instance position (all instances).
    Credits are added in classifier order, whichever the solver. ``h``: :func:`id_hashes` by position."""
    total, count = np.zeros(len(lay.k)), np.zeros(len(lay.k), dtype=np.int64)
    drawn = splits(lay, alive, m, p, phase, concepts, h)
    for (_, test), scores in zip(drawn, fitter.decisions(lay, drawn)):
        total[test] += topk_credit(scores, lay.label[test], lay.k[test], p.correct == "exact")
        count[test] += 1
    return total, count


def plant_mask(ids: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """(n,) bool: the instances ``plant`` marks: those whose ``draw_keys(id_hashes(ids), seed,
    "plant")`` falls below ``fraction * 2**64`` (each instance independently, keyed by its id: about
    ``fraction`` of them; none when 0)."""
    if fraction <= 0:
        return np.zeros(len(ids), dtype=bool)
    bound = min(int(fraction * 2**64), 2**64 - 1)
    return draw_keys(id_hashes(ids), seed, "plant") < _U64(bound)


def plant_feature(x: np.ndarray, lay: Layout, planted: np.ndarray, strength: float) -> np.ndarray:
    """``x`` (pair rows, d) with one more column: ``strength`` on the association rows of the
    ``planted`` instances (bool per ``lay`` row), 0 on every other row. A spurious feature that
    gives away the label on those instances only (the audit's known artifact)."""
    col = np.zeros((len(x), 1), dtype=x.dtype)
    hit = lay.label & planted[:, None] & (lay.rows >= 0)
    col[lay.rows[hit], 0] = strength
    return np.hstack([x, col])


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
    h = id_hashes(ids[order])
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
        total, count = predictability(fitter, lay_s, alive, m, p, phase, conc_s, h)
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
    x: np.ndarray,
    lay: Layout,
    ids: np.ndarray,
    keep: np.ndarray,
    bins: int,
    seed: int,
    x_gram: np.ndarray | None = None,
) -> dict[str, float | None]:
    """KL (nats) of the label-conditional 1-D PCA histograms (WinoGrande §4): before, after AfLite
    (``keep``), and after a random reduction keeping as many instances: those with the smallest
    ``draw_keys(id_hashes(ids), seed, "kl")`` (keyed by id, not by position). Callers pass
    instances (and ``x``'s rows) in id order so the sums run in one order. ``x_gram``: optional
    X1^T X1 of all of ``x``'s rows (the PCA's scatter matrices are then that minus the removed rows').

    Returns: {"before", "aflite", "random"}: float rounded to 4 places, or None where a side has a
    single label."""
    rand = np.zeros(len(keep), dtype=bool)
    rand[np.argsort(draw_keys(id_hashes(ids), seed, "kl"), kind="stable")[: int(keep.sum())]] = True
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
    sel: pd.DataFrame,
    cue_vecs: dict[str, np.ndarray],
    cand_vecs: dict[str, np.ndarray],
    probe: str,
    lay: Layout | None = None,
    planted: np.ndarray | None = None,
    p: AfliteParams | None = None,
) -> np.ndarray:
    """(pair rows, width) float32 pair features of ``sel``'s instances (rows in ``sel``'s order,
    candidates in list order); with ``planted`` instances (and ``lay``, ``p``), the ``plant``
    column appended (:func:`plant_feature`)."""
    cues = np.stack([cue_vecs[cue_key(c)] for c, cs in zip(sel["cue"], sel["candidates"]) for _ in cs])
    cands = np.stack([cand_vecs[c] for cs in sel["candidates"] for c in cs])
    x = pair_features(cues, cands, probe)
    if planted is not None and lay is not None and p is not None and p.plant.fraction > 0:
        x = plant_feature(x, lay, planted, p.plant.strength)
    return x


def batch_of(selection: pd.DataFrame, instances: pd.DataFrame) -> pd.Series:
    """Each selection row's batch (str, the selection's index): ``release:<file stem>`` for a
    released file's instance, ``raw:<batch folder>`` for a new collection's (the folder holding
    its ``source_file`` in the ``instances`` table), ``<origin>:(source removed)`` where the
    instance is no longer imported (a published instance kept from the ID ledger)."""
    src = instances.set_index("instance_uid")["source_file"]
    files = selection["instance_uid"].map(src)

    def one(origin: str, file: object) -> str:
        if not isinstance(file, str):
            return f"{origin}:(source removed)"
        path = PurePosixPath(file)
        return f"{origin}:{path.stem if origin == 'release' else path.parent.name}"

    return pd.Series([one(o, f) for o, f in zip(selection["origin"], files)], index=selection.index, dtype=str)


def _round(v: float, places: int = 4) -> float | None:
    return None if np.isnan(v) else round(float(v), places)


def group_counts(t: pd.DataFrame, by: str) -> dict[str, GroupCounts]:
    """Per value of column ``by`` of assessed rows ``t`` (columns dataset, status, score):
    instances, flagged, flagged_percent, mean_score (None: never scored), and the dataset when
    ``by`` is not ``"dataset"``; keys sorted."""
    out: dict[str, GroupCounts] = {}
    for key, g in t.groupby(by, sort=True):
        flagged = g["status"] == "flagged"
        row = GroupCounts(
            instances=len(g),
            flagged=int(flagged.sum()),
            flagged_percent=round(100 * float(flagged.mean()), 2),
            mean_score=_round(float(g["score"].mean())) if g["score"].notna().any() else None,
        )
        out[str(key)] = GroupCounts(dataset=str(g["dataset"].iloc[0]), **row) if by != "dataset" else row
    return out


def _plant_counts(g: pd.DataFrame) -> PlantCounts:
    flagged, planted = (g["status"] == "flagged").to_numpy(), g["planted"].to_numpy(dtype=bool)
    hit = int((flagged & planted).sum())
    return PlantCounts(
        instances=len(g),
        planted=int(planted.sum()),
        flagged=int(flagged.sum()),
        flagged_planted=hit,
        precision=round(hit / flagged.sum(), 4) if flagged.any() else None,
        recall=round(hit / planted.sum(), 4) if planted.any() else None,
    )


def plant_report(t: pd.DataFrame, plant: AflitePlantParams) -> PlantReport:
    """Precision and recall of the flags against the planted instances, over assessed rows ``t``
    (columns dataset, batch, status, planted): overall and per dataset and batch (keys sorted).
    precision = flagged planted / flagged, recall = flagged planted / planted (None where the
    denominator is 0)."""
    return PlantReport(
        fraction=plant.fraction,
        strength=plant.strength,
        seed=plant.seed,
        **_plant_counts(t),
        by_dataset={str(k): _plant_counts(g) for k, g in t.groupby("dataset", sort=True)},
        by_batch={str(k): _plant_counts(g) for k, g in t.groupby("batch", sort=True)},
    )


def run(params: Params) -> Metrics:
    """Stage entry: selection, instances (+ ocr for open_clip) -> aflite table, phases, plot, debiased CSV.

    Order-free: the selection is sorted by ``instance_uid`` first and every draw is keyed by id,
    so the tables (rows by ``instance_uid``), probes and KL are the same whatever the row order
    of any input."""
    p = params.aflite
    entry = params.models[p.model]
    selection = catalog.read_table("selection").sort_values("instance_uid", kind="stable", ignore_index=True)
    out = selection[["instance_uid", "dataset"]].copy()
    out["batch"] = batch_of(selection, catalog.read_table("instances"))
    out["num_candidates"] = selection["num_candidates"]
    out["score"], out["phase"] = np.nan, pd.array([pd.NA] * len(out), dtype="Int64")
    out["planted"] = False
    out["status"], out["reason"] = "not_selected", "selection status: " + selection["status"].astype(str)
    chosen = (selection["status"] == "selected").to_numpy()
    images = accepted_images(catalog.read_table("ocr")) if entry.kind == "open_clip" else None
    if images is not None:
        has = selection["candidates"].map(lambda cs: all(c in images for c in cs)).to_numpy()
        out.loc[chosen & ~has, ["status", "reason"]] = ["kept", "not assessed: a candidate has no accepted image"]
        chosen &= has
    sel = selection[chosen].reset_index(drop=True)
    sel["batch"] = out.loc[chosen, "batch"].to_numpy()
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
        "by_batch": {},
        "kl": {},
        "probes": {},
        "plant": None,
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
        ids = sel["instance_uid"].to_numpy().astype(str)
        planted = plant_mask(ids, p.plant.fraction, p.plant.seed)
        x = _features(sel, cue_vecs, cand_vecs, "full", lay, planted, p)
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
        out.loc[idx, "planted"] = planted
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
            metrics["kl"] = kl_assessment(x, lay, ids, ~flagged, p.kl_bins, p.seed, x_gram)
        metrics["probes"] = _probes(
            sel, cue_vecs, cand_vecs, lay, m, p, sets, model.spec.kind, res, opt.threads, planted
        )
        if p.plant.fraction > 0:
            metrics["plant"] = plant_report(out[chosen], p.plant)
    assessed = out[chosen]
    metrics["by_dataset"] = group_counts(assessed, "dataset")
    metrics["by_batch"] = group_counts(assessed, "batch")
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
    planted: np.ndarray,
) -> dict[str, Any]:
    """Phase-1 predictability by dataset and by batch with the full features (the main run's
    phase 1: the same keyed draws on the same id-ordered instances) and with the cue-free ones
    (one phase, the same draws; the planted column too when ``plant`` is on). ``sel`` in id order."""
    out: dict[str, Any] = {}
    h = id_hashes(sel["instance_uid"].to_numpy().astype(str))
    for probe in ("full", "cue_free"):
        if probe == "full":
            s = res.first_score
        else:
            print("aflite: cue-free probe (one phase on the candidate features alone)", file=sys.stderr)
            x = _features(sel, cue_vecs, cand_vecs, probe, lay, planted, p)
            total, count = predictability(_Fitter(x, p, threads), lay, np.arange(len(sel)), m, p, 1, sets, h)
            s = np.where(count > 0, total / np.maximum(count, 1), np.nan)
        out[probe] = {
            by: {
                str(key): {
                    "mean_score": _round(float(np.nanmean(s[g.index]))) if np.isfinite(s[g.index]).any() else None,
                    "above_tau_percent": round(100 * float(np.mean(s[g.index] >= p.tau)), 2),
                }
                for key, g in sel.groupby(col, sort=True)
            }
            for by, col in (("by_dataset", "dataset"), ("by_batch", "batch"))
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

"""AfLite's algorithm (WinoGrande §4, Algorithm 1; see :mod:`stages.aflite`): classifier splits
keyed by instance id, the phase's fits (batched or scikit-learn), scores, phases, and the KL
assessment. Pure: arrays in, arrays out."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from threadpoolctl import threadpool_limits

from gavil.models.batched_logistic import Design, SharedRows, fit_logistic_batched, gram
from gavil.models.features import Layout, fit_logistic, pca_kl, topk_credit
from gavil.models.keyed import draw_keys, id_hashes
from gavil.params.adversarial import resolve_size

if TYPE_CHECKING:
    from gavil.params.adversarial import AfliteParams


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
)  # benchmarks/aflite.py sets float32 and tol 1e-4 to time scikit-learn's default fits


class Fitter:
    """Fits a phase's classifiers on the pair rows of ``x`` and returns their decision values.

    ``batched``: :func:`gavil.models.batched_logistic.fit_logistic_batched` over all classifiers at
    once (``threads`` BLAS threads; X1^T X1 computed once; each phase starts from the previous
    phase's mean solution: the optimum is unique, the start only saves iterations).
    ``sklearn``: :func:`gavil.models.features.fit_logistic` one by one on float64 features with
    ``tol`` :data:`SKLEARN_TOL` (the reference: the same optimum, ~10x slower).
    ``shared``: optional :class:`gavil.models.batched_logistic.SharedRows` of ``x`` (the candidate
    columns, one vector per concept): the batched solver's GEMMs then run on the distinct vectors."""

    def __init__(
        self,
        x: np.ndarray,
        p: AfliteParams,
        threads: int,
        x_gram: np.ndarray | None = None,
        shared: SharedRows | None = None,
    ):
        self.x, self.p, self.threads = x, p, threads
        self.design = Design(x, shared)
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
                x, y, masks, tol=SOLVER_TOL, max_iter=p.max_iter, x_gram=self.gram, init=self._init, design=self.design
            )
            z = fit.decision_function(x, self.design)
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
    fitter: Fitter,
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


def aflite(
    x: np.ndarray,
    lay: Layout,
    ids: np.ndarray,
    concepts: list[set[str]],
    p: AfliteParams,
    threads: int = 1,
    x_gram: np.ndarray | None = None,
    shared: SharedRows | None = None,
) -> Result:
    """AfLite over instances (see the module docstring).

    Args:
        x: (pair rows, features) float64 (float32 runs too, faster, but its top-K
            credits can flip at near-ties between BLAS kernels), rows as ``lay.rows`` index them.
        lay: the instances' candidates (:class:`gavil.models.features.Layout`), one row per instance.
        ids: instance ids (str, unique), the same order as ``lay``. concepts: each instance's candidates.
        threads: BLAS threads of the batched solver. x_gram: optional
            :func:`gavil.models.batched_logistic.gram` of ``x``, used when ``x``'s rows are already in
            id order (as the stage builds them); computed here otherwise.
        shared: optional :class:`gavil.models.batched_logistic.SharedRows` of ``x`` (columns whose
            rows repeat a few vectors, as the candidates' embeddings do): the same result, the
            batched solver's GEMMs run on the distinct vectors.

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
    x, x_gram, lay_s, shared = _in_id_order(x, x_gram, lay, order, shared)
    conc_s = [concepts[i] for i in order]
    h = id_hashes(ids[order])
    n = len(ids)
    m, k = resolve_size(p.train_size, n), resolve_size(p.cutoff, n)
    fitter = Fitter(x, p, threads, x_gram, shared)
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


def _in_id_order(
    x: np.ndarray, x_gram: np.ndarray | None, lay: Layout, order: np.ndarray, shared: SharedRows | None = None
) -> tuple[np.ndarray, np.ndarray | None, Layout, SharedRows | None]:
    """``lay``'s instances in ``order`` (positions sorting them by id) with ``x``'s pair rows in
    that order too, so every sum (the GEMMs included) runs in the same order. Returns (``x``, or
    its rows reordered; ``x_gram``, or None when the rows moved; the reordered :class:`Layout`;
    ``shared`` with its rows reordered alike)."""
    rows = lay.rows[order]
    flat = rows[rows >= 0]
    if not np.array_equal(flat, np.arange(len(x))):
        x, x_gram = x[flat], None
        shared = shared.rows(flat) if shared is not None else None
        rows = np.full_like(rows, -1)
        rows[lay.rows[order] >= 0] = np.arange(len(flat))
    return x, x_gram, Layout(rows, lay.label[order], lay.k[order]), shared


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

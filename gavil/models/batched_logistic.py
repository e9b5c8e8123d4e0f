"""Many L2-regularised binary logistic regressions over one shared feature matrix, fitted together.

AfLite (stages/aflite/) trains 64 linear classifiers per phase, each on a different random
subset of the same pair rows. Fitted one by one (scikit-learn, L-BFGS) every iteration is a
matrix-vector product over ~10k rows (memory bound); fitted together, an iteration is one GEMM
``X @ W`` over all rows for all classifiers (each row weighted by a 0/1 mask per classifier).

Objective (the same as scikit-learn's ``LogisticRegression(C=C)``, whose lbfgs solver minimises it
divided by the number of rows): for each classifier c with training mask m_c,

    f_c(w, b) = C * sum_r m_rc * [log(1 + exp(z_r)) - y_r * z_r] + 0.5 * ||w||^2,   z_r = x_r . w + b

(unpenalised intercept b). f_c is strictly convex, so the optimum is unique and the solution does
not depend on the solver, the start or the other classifiers — only on the tolerance.

Solver: L-BFGS (Nocedal & Wright 2006, Algorithm 7.4/7.5), one independent instance per column,
preconditioned by a fixed positive definite ``H0 = C * 0.25 * frac * X1^T X1 + diag(1, ..., 1, 0)``
(X1 = [X, 1]; 0.25 bounds the logistic curvature, Böhning 1992; ``frac`` = mean training share),
the initial inverse Hessian of the two-loop recursion being ``H0^-1``. Each iteration costs one
GEMM forward (``dZ = X1 @ direction``) and one backward (``X^T R``); the backtracking (Armijo) line
search moves along ``Z + step * dZ`` elementwise, with the loss difference computed directly
(accurate to float64 even when the loss itself is large).

Convergence: a column stops when its Newton decrement in the H0 metric, ``sqrt(g^T H0^-1 g)``, is
<= ``tol``. Since H0 >= the identity on the weights, the decision values are then within about
``tol`` of the optimum's (default 1e-4; scikit-learn's default stop, ``max|grad| <= 1e-4`` of the
objective divided by the rows, leaves them ~0.03-0.17 away on AfLite's release features).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from threadpoolctl import threadpool_limits


@dataclass(frozen=True)
class BatchedFit:
    """Fitted classifiers: ``coef`` (k, d) float64, ``intercept`` (k,) float64, ``n_iter`` (k,)
    iterations, ``converged`` (k,) bool: the tolerance was reached; ``stalled`` (k,) bool: the
    line search found no decrease first (the float precision of the features' dtype is reached:
    as close as this dtype gets; neither flag: ``max_iter`` ran out)."""

    coef: np.ndarray
    intercept: np.ndarray
    n_iter: np.ndarray
    converged: np.ndarray
    stalled: np.ndarray

    def decision_function(self, x: np.ndarray, design: Design | None = None) -> np.ndarray:
        """(n, k) decision values ``x @ coef.T + intercept``, computed in x's float dtype (x: (n, d));
        ``design``: x's :class:`Design` with its shared rows (the same values with half the work)."""
        dt = x.dtype
        if design is None:
            out: np.ndarray = x @ self.coef.T.astype(dt) + self.intercept.astype(dt)
            return out
        values: np.ndarray = design.forward(self.coef.T).T + self.intercept.astype(dt)
        return values


def _softplus_sigmoid(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``log(1 + exp(z))`` and ``1 / (1 + exp(-z))`` without overflow (one exp)."""
    e = np.exp(-np.abs(z))
    return np.maximum(z, 0) + np.log1p(e), np.where(z >= 0, 1.0, e) / (1 + e)


def gram(x: np.ndarray) -> np.ndarray:
    """(d+1, d+1) float64 ``X1^T X1`` with X1 = [x, 1] (x: (n, d)); pass it to several
    :func:`fit_logistic_batched` calls on the same rows to compute it once."""
    n, d = x.shape
    out = np.empty((d + 1, d + 1))
    out[:d, :d] = (x.T @ x).astype(np.float64)
    s = x.sum(axis=0, dtype=np.float64)
    out[:d, d] = out[d, :d] = s
    out[d, d] = n
    return out


def _dots(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(m,) column-wise dot products of two (p, m) matrices."""
    out: np.ndarray = np.einsum("ij,ij->j", a, b)
    return out


@dataclass(frozen=True)
class SharedRows:
    """Columns ``start:stop`` of the (n, d) features whose rows repeat a few distinct vectors:
    ``x[:, start:stop] == table[index]`` (AfLite's candidate embeddings: about 2,000 concepts behind
    35,000 pair rows of the sample). ``table`` (u, stop - start) in x's dtype, ``index`` (n,) int64.

    :class:`Design` then multiplies those columns on the ``u`` distinct rows and gathers (forward) or
    sums by row (backward) instead of running them over all ``n`` rows: half the GEMM work of
    AfLite's ``[cue ⊙ cand, cand]`` features, the same float64 arithmetic up to summation order."""

    start: int
    stop: int
    table: np.ndarray
    index: np.ndarray

    def rows(self, which: np.ndarray) -> SharedRows:
        """The same columns for the rows ``which`` ((n',) int positions) of the features."""
        return SharedRows(self.start, self.stop, self.table, self.index[which])


class Design:
    """The (n, d) features ``x`` with their optional :class:`SharedRows`: the forward product
    ``V^T X^T`` and the backward product ``D X`` the solver needs, each in x's dtype.

    Raises:
        ValueError: ``shared`` does not describe ``x`` (a column range outside it, another row
            count, or ``x[:, start:stop] != table[index]``)."""

    def __init__(self, x: np.ndarray, shared: SharedRows | None = None):
        self.x, self.shared = x, shared
        n, d = x.shape
        if shared is None:
            return
        a, b = shared.start, shared.stop
        if not (0 <= a < b <= d) or shared.index.shape != (n,) or shared.table.shape[1] != b - a:
            raise ValueError(f"shared rows (columns {a}:{b}, {shared.index.shape[0]} rows) do not fit x {x.shape}")
        if not np.array_equal(x[:, a:b], shared.table[shared.index]):
            raise ValueError(
                f"x[:, {a}:{b}] is not table[index]: pass the table and index the features were built from"
            )
        self.own_cols = np.r_[0:a, b:d]
        self.own = np.ascontiguousarray(x[:, self.own_cols])
        self.table = np.ascontiguousarray(shared.table, dtype=x.dtype)
        self.order = np.argsort(shared.index, kind="stable")  # rows grouped by their distinct vector
        used, self.starts = np.unique(shared.index[self.order], return_index=True)
        self.used = used

    def forward(self, v: np.ndarray) -> np.ndarray:
        """(m, n) ``(X @ v)^T`` in x's dtype for ``v`` (d, m) (any float dtype)."""
        dt = self.x.dtype
        if self.shared is None:
            out: np.ndarray = v.T.astype(dt) @ self.x.T
            return out
        a, b = self.shared.start, self.shared.stop
        out = (v[a:b].T.astype(dt) @ self.table.T)[:, self.shared.index]
        if len(self.own_cols):
            out += v[self.own_cols].T.astype(dt) @ self.own.T
        return out

    def backward(self, dense: np.ndarray) -> np.ndarray:
        """(m, d) ``dense @ X`` for ``dense`` (m, n) in x's dtype."""
        if self.shared is None:
            out: np.ndarray = dense @ self.x
            return out
        a, b = self.shared.start, self.shared.stop
        g = np.empty((dense.shape[0], self.x.shape[1]), dtype=self.x.dtype)
        if len(self.own_cols):
            g[:, self.own_cols] = dense @ self.own
        sums = np.add.reduceat(dense[:, self.order], self.starts, axis=1)  # (m, distinct rows used)
        g[:, a:b] = sums @ self.table[self.used]
        return g


def _forward(design: Design, v: np.ndarray) -> np.ndarray:
    """(m, n) decision values ``(X1 @ v)^T`` in x's dtype (one GEMM): ``v`` (d+1, m) holds
    [coef; intercept] columns."""
    d, dt = design.x.shape[1], design.x.dtype
    out: np.ndarray = design.forward(v[:d]) + v[d].astype(dt)[:, None]
    return out


class _Segments(NamedTuple):
    """Where the active columns' training entries are: ``ent`` their indices in the flat arrays,
    ``pos`` their flat positions in a (len(cols), n) matrix, ``starts`` each column's first entry
    among ``ent`` and ``lens`` its number of entries ((len(cols),) each)."""

    ent: np.ndarray
    pos: np.ndarray
    starts: np.ndarray
    lens: np.ndarray


@dataclass(frozen=True)
class _Rows:
    """Every classifier's training entries, flat and grouped by classifier: ``rows_of[c]`` are
    classifier c's row indices, entries ``off[c]:off[c + 1]`` of the flat arrays are its, ``yf``
    their float64 labels; ``n`` rows in all."""

    rows_of: list[np.ndarray]
    off: np.ndarray
    yf: np.ndarray
    n: int

    @classmethod
    def of(cls, masks: np.ndarray, yb: np.ndarray) -> _Rows:
        """The training entries of ``masks`` ((n, k) bool), labelled by ``yb`` ((n,) bool)."""
        rows_of = [np.flatnonzero(masks[:, c]) for c in range(masks.shape[1])]
        off = np.concatenate([[0], np.cumsum([len(r) for r in rows_of])])
        yf = yb[np.concatenate(rows_of)].astype(np.float64)
        return cls(rows_of, off, yf, masks.shape[0])

    def layout(self, cols: np.ndarray) -> _Segments:
        """The :class:`_Segments` of the active ``cols`` (ascending int array)."""
        off, n = self.off, self.n
        ent = np.concatenate([np.arange(off[c], off[c + 1]) for c in cols])
        pos = np.concatenate([j * n + self.rows_of[c] for j, c in enumerate(cols)])
        lens = off[cols + 1] - off[cols]
        return _Segments(ent, pos, np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)


@dataclass
class _Iterate:
    """The current solution and what the loss needs of it (updated in place): ``theta`` (d+1, k)
    float64 [coef; intercept] per classifier, and per flat training entry its decision value ``z``,
    ``sp`` = softplus(z) and ``sig`` = sigmoid(z) (float64)."""

    theta: np.ndarray
    z: np.ndarray
    sp: np.ndarray
    sig: np.ndarray


@dataclass(frozen=True)
class _Problem:
    """What stays fixed during a fit: the (n, d) features ``x`` and their :class:`Design`, ``C``, the
    training :class:`_Rows` and the (d+1, d+1) float64 inverse preconditioner ``h0inv`` = H0^-1."""

    x: np.ndarray
    design: Design
    C: float
    rows: _Rows
    h0inv: np.ndarray

    def grad(self, it: _Iterate, cols: np.ndarray, seg: _Segments) -> np.ndarray:
        """(d+1, len(cols)) float64 gradient of f_c at ``it`` for the active ``cols`` (``seg`` their
        layout): one backward GEMM ``X^T R`` in x's dtype, the intercept's row summed in float64."""
        n, d = self.x.shape
        r = it.sig[seg.ent] - self.rows.yf[seg.ent]
        dense = np.zeros((len(cols), n), dtype=self.x.dtype)
        dense.ravel()[seg.pos] = r
        g = np.empty((d + 1, len(cols)))
        g[:d] = self.C * self.design.backward(dense).T + it.theta[:d, cols]
        g[d] = self.C * np.add.reduceat(r, seg.starts)
        return g

    def converged(self, g: np.ndarray, tol: float) -> np.ndarray:
        """(m,) bool: the Newton decrement ``sqrt(g^T H0^-1 g)`` of each (d+1, m) gradient column of
        ``g`` is <= ``tol``."""
        out: np.ndarray = np.sqrt(np.maximum(_dots(g, self.h0inv @ g), 0)) <= tol
        return out


@dataclass
class _History:
    """The last ``size`` L-BFGS pairs ``s``, ``y`` ((d+1, k) float64 each) and ``rho`` ((k,));
    columns a pair did not update hold zeros and rho 0 there (no-ops in the recursion)."""

    size: int
    k: int
    s: list[np.ndarray] = field(default_factory=list)
    y: list[np.ndarray] = field(default_factory=list)
    rho: list[np.ndarray] = field(default_factory=list)

    def direction(self, gc: np.ndarray, cols: np.ndarray, h0inv: np.ndarray) -> np.ndarray:
        """(d+1, len(cols)) L-BFGS direction ``-H g`` for the gradient columns ``gc`` of ``cols``: the
        two-loop recursion (Nocedal & Wright Algorithm 7.4), ``h0inv`` as the initial matrix."""
        q = gc.copy()
        alphas = []
        for s, yv, rho in zip(reversed(self.s), reversed(self.y), reversed(self.rho)):
            a = rho[cols] * _dots(s[:, cols], q)
            q -= a * yv[:, cols]
            alphas.append(a)
        r: np.ndarray = h0inv @ q
        for s, yv, rho, a in zip(self.s, self.y, self.rho, reversed(alphas)):
            r += (a - rho[cols] * _dots(yv[:, cols], r)) * s[:, cols]
        return -r

    def push(self, s_new: np.ndarray, y_new: np.ndarray, accepted: np.ndarray, cols: np.ndarray) -> None:
        """Append the step ``s_new`` and gradient change ``y_new`` ((d+1, len(cols)) each) of ``cols``,
        kept where the step was ``accepted`` and the curvature ``s^T y`` is positive (relative to
        1e-12); drop the oldest pair past ``size``."""
        sy = _dots(s_new, y_new)
        ok = accepted & (sy > 1e-12 * np.sqrt(_dots(s_new, s_new) * _dots(y_new, y_new)))
        for lst, v in ((self.s, s_new), (self.y, y_new)):
            full = np.zeros((s_new.shape[0], self.k))
            full[:, cols[ok]] = v[:, ok]
            lst.append(full)
        rho = np.zeros(self.k)
        rho[cols[ok]] = 1 / sy[ok]
        self.rho.append(rho)
        if len(self.s) > self.size:
            self.s.pop(0), self.y.pop(0), self.rho.pop(0)


def _training_totals(x: np.ndarray, y: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``y`` as (n,) bool and the (k,) number of training rows per column of ``masks``.

    Raises:
        ValueError: shapes disagree, masks has no column, or a column's rows hold a single label.
    """
    n = x.shape[0]
    if masks.ndim != 2 or y.shape != (n,) or masks.shape[0] != n:
        raise ValueError(f"x {x.shape}, y {y.shape} and masks {masks.shape} disagree on the rows")
    if masks.shape[1] == 0:
        raise ValueError("masks has no column: nothing to fit (the caller skips an empty batch)")
    yb = y.astype(bool)
    npos, ntot = (masks & yb[:, None]).sum(axis=0), masks.sum(axis=0)
    if np.any(npos == 0) or np.any(npos == ntot):
        raise ValueError("every classifier needs training rows of both labels")
    return yb, ntot


def _inverse_preconditioner(x: np.ndarray, ntot: np.ndarray, C: float, x_gram: np.ndarray | None) -> np.ndarray:
    """(d+1, d+1) float64 symmetric ``H0^-1``, ``H0 = C * 0.25 * frac * X1^T X1 + diag(1, ..., 1, 0)``
    with ``frac`` = the mean training share of the k = len(ntot) columns (module docstring)."""
    n, d = x.shape
    k = len(ntot)
    h0 = C * 0.25 * float(ntot.sum()) / (n * k) * (gram(x) if x_gram is None else x_gram)
    h0[np.arange(d), np.arange(d)] += 1.0
    with threadpool_limits(1):  # small LAPACK calls: 2 threads on a busy 2-core machine ran 40x slower
        h0inv = np.linalg.inv(h0)
    out: np.ndarray = (h0inv + h0inv.T) / 2
    return out


def _start(problem: _Problem, init: np.ndarray | None, k: int) -> _Iterate:
    """The :class:`_Iterate` at ``init`` ((d+1,) or (d+1, k) [coef, intercept]; zeros when None)."""
    p = problem.x.shape[1] + 1
    theta = np.zeros((p, k))
    if init is not None:
        theta += np.asarray(init, dtype=np.float64).reshape(p, -1)
    zt_all = _forward(problem.design, theta)  # (k, n)
    z = np.concatenate([zt_all[c, r] for c, r in enumerate(problem.rows.rows_of)]).astype(np.float64)
    del zt_all
    sp, sig = _softplus_sigmoid(z)
    return _Iterate(theta, z, sp, sig)


def _descent_direction(
    gc: np.ndarray, cols: np.ndarray, hist: _History, h0inv: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The (d+1, len(cols)) L-BFGS direction for gradient columns ``gc`` and its (len(cols),) slopes
    ``g . dir``; a column whose direction is no descent (rounding) takes ``-H0^-1 g`` instead."""
    direction = hist.direction(gc, cols, h0inv)
    slope = _dots(gc, direction)
    bad = slope >= 0
    if bad.any():
        direction[:, bad] = -(h0inv @ gc[:, bad])
        slope[bad] = _dots(gc[:, bad], direction[:, bad])
    return direction, slope


def _line_search(
    problem: _Problem,
    it: _Iterate,
    cols: np.ndarray,
    direction: np.ndarray,
    slope: np.ndarray,
    seg: _Segments,
    dz: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Backtracking (Armijo, c1 = 1e-4, halving, at most 40 tries) along ``direction`` from ``it``
    for the active ``cols``; ``dz`` is the direction's change of each entry's decision value.

    Returns:
        (len(cols),) float64 steps (0.0 where no decrease was found at float precision) and
        (len(cols),) bool ``accepted``.
    """
    d, C = problem.x.shape[1], problem.C
    w, dw = it.theta[:d, cols], direction[:d]
    wdw, dwdw = _dots(w, dw), _dots(dw, dw)
    step = np.ones(len(cols))
    accepted = np.zeros(len(cols), dtype=bool)
    ze, spe, ye = it.z[seg.ent], it.sp[seg.ent], problem.rows.yf[seg.ent]
    for _ls in range(40):
        t = np.repeat(step, seg.lens)
        z_new = ze + t * dz
        sp_new, sig_new = _softplus_sigmoid(z_new)
        # f(theta + step * dir) - f(theta) as a sum of small differences (exact to float64)
        df = C * np.add.reduceat(sp_new - spe - ye * (t * dz), seg.starts) + step * wdw + 0.5 * step**2 * dwdw
        accepted |= df <= 1e-4 * step * slope
        if accepted.all():
            break
        step[~accepted] *= 0.5
    step[~accepted] = 0.0  # no decrease found at float precision: leave the column where it is
    return step, accepted


def _iteration(
    problem: _Problem, it: _Iterate, hist: _History, gc: np.ndarray, cols: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """One L-BFGS iteration of the active ``cols`` (gradient columns ``gc``): direction, line search,
    then ``it`` and ``hist`` updated in place.

    Returns:
        The (d+1, len(cols)) new gradient columns and the (len(cols),) bool ``accepted``.
    """
    direction, slope = _descent_direction(gc, cols, hist, problem.h0inv)
    seg = problem.rows.layout(cols)
    dz = _forward(problem.design, direction).ravel()[seg.pos].astype(np.float64)
    step, accepted = _line_search(problem, it, cols, direction, slope, seg, dz)
    t = np.repeat(step, seg.lens)
    it.z[seg.ent] = it.z[seg.ent] + t * dz
    it.sp[seg.ent], it.sig[seg.ent] = _softplus_sigmoid(it.z[seg.ent])
    s_new = step * direction
    it.theta[:, cols] += s_new
    g_new = problem.grad(it, cols, seg)
    hist.push(s_new, g_new - gc, accepted, cols)
    return g_new, accepted


def fit_logistic_batched(
    x: np.ndarray,
    y: np.ndarray,
    masks: np.ndarray,
    *,
    C: float = 1.0,
    tol: float = 1e-4,
    max_iter: int = 200,
    history: int = 10,
    x_gram: np.ndarray | None = None,
    init: np.ndarray | None = None,
    design: Design | None = None,
) -> BatchedFit:
    """Fit one logistic regression per column of ``masks`` (see the module docstring).

    Args:
        x: (n, d) float32 or float64 features shared by all classifiers (the GEMMs run in this dtype).
        y: (n,) bool/0-1 labels. masks: (n, k) bool, row r trains classifier c when ``masks[r, c]``;
            each column must hold both labels.
        C: inverse regularisation strength (scikit-learn's C). tol: Newton-decrement tolerance.
        max_iter: iterations per classifier. history: L-BFGS memory (pairs).
        x_gram: optional :func:`gram` of ``x``. init: optional (d+1,) or (d+1, k) start
            ([coef, intercept]), e.g. a previous batch's mean solution; zeros by default.
        design: optional :class:`Design` of ``x`` with its :class:`SharedRows` (columns whose rows
            repeat a few vectors; built once for several fits): the same fit with half the GEMM
            work on AfLite's features.

    Returns:
        :class:`BatchedFit`.

    Raises:
        ValueError: shapes disagree, a column's training rows hold a single label, or ``design``
            is another matrix's.
    """
    yb, ntot = _training_totals(x, y, masks)
    d, k = x.shape[1], masks.shape[1]
    if design is None:
        design = Design(x)
    elif design.x is not x:
        raise ValueError("design describes another feature matrix: build it with Design(x, shared)")
    problem = _Problem(x, design, C, _Rows.of(masks, yb), _inverse_preconditioner(x, ntot, C, x_gram))
    it = _start(problem, init, k)
    cols = np.arange(k)
    g = problem.grad(it, cols, problem.rows.layout(cols))
    hist = _History(history, k)
    n_iter = np.zeros(k, dtype=np.int64)
    converged = problem.converged(g, tol)
    stuck = np.zeros(k, dtype=bool)
    for _ in range(max_iter):
        cols = np.flatnonzero(~converged & ~stuck)
        if len(cols) == 0:
            break
        g_new, accepted = _iteration(problem, it, hist, g[:, cols], cols)
        stuck[cols[~accepted]] = True
        g[:, cols] = g_new
        n_iter[cols] += 1
        converged[cols] = problem.converged(g_new, tol)
    return BatchedFit(it.theta[:d].T.copy(), it.theta[d].copy(), n_iter, converged, stuck & ~converged)

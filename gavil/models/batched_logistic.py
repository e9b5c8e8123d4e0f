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

from dataclasses import dataclass

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

    def decision_function(self, x: np.ndarray) -> np.ndarray:
        """(n, k) decision values ``x @ coef.T + intercept``, computed in x's float dtype (x: (n, d))."""
        return x @ self.coef.T.astype(x.dtype) + self.intercept.astype(x.dtype)


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
    return np.einsum("ij,ij->j", a, b)


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

    Returns:
        :class:`BatchedFit`.

    Raises:
        ValueError: shapes disagree, or a column's training rows hold a single label.
    """
    n, d = x.shape
    if masks.ndim != 2 or y.shape != (n,) or masks.shape[0] != n:
        raise ValueError(f"x {x.shape}, y {y.shape} and masks {masks.shape} disagree on the rows")
    k = masks.shape[1]
    if k == 0:
        raise ValueError("masks has no column: nothing to fit (the caller skips an empty batch)")
    yb = y.astype(bool)
    npos, ntot = (masks & yb[:, None]).sum(axis=0), masks.sum(axis=0)
    if np.any(npos == 0) or np.any(npos == ntot):
        raise ValueError("every classifier needs training rows of both labels")
    dt = x.dtype
    p = d + 1
    h0 = C * 0.25 * float(ntot.sum()) / (n * k) * (gram(x) if x_gram is None else x_gram)
    h0[np.arange(d), np.arange(d)] += 1.0
    with threadpool_limits(1):  # small LAPACK calls: 2 threads on a busy 2-core machine ran 40x slower
        h0inv = np.linalg.inv(h0)
    h0inv = (h0inv + h0inv.T) / 2

    # training entries, flat and grouped by classifier: rows[off[c]:off[c + 1]] are classifier c's
    rows_of = [np.flatnonzero(masks[:, c]) for c in range(k)]
    off = np.concatenate([[0], np.cumsum([len(r) for r in rows_of])])
    yf = yb[np.concatenate(rows_of)].astype(np.float64)
    theta = np.zeros((p, k))
    if init is not None:
        theta += np.asarray(init, dtype=np.float64).reshape(p, -1)
    zt_all = theta[:d].T.astype(dt) @ x.T + theta[d].astype(dt)[:, None]  # (k, n)
    z = np.concatenate([zt_all[c, r] for c, r in enumerate(rows_of)]).astype(np.float64)
    del zt_all
    sp, sig = _softplus_sigmoid(z)

    def layout(cols: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """For the active ``cols``: their entries in the flat arrays, the entries' flat positions
        in a (len(cols), n) matrix, segment starts, and segment lengths."""
        ent = np.concatenate([np.arange(off[c], off[c + 1]) for c in cols])
        pos = np.concatenate([j * n + rows_of[c] for j, c in enumerate(cols)])
        lens = off[cols + 1] - off[cols]
        return ent, pos, np.concatenate([[0], np.cumsum(lens)[:-1]]), lens

    def grad(cols: np.ndarray, ent: np.ndarray, pos: np.ndarray, starts: np.ndarray) -> np.ndarray:
        r = sig[ent] - yf[ent]
        dense = np.zeros((len(cols), n), dtype=dt)
        dense.ravel()[pos] = r
        g = np.empty((p, len(cols)))
        g[:d] = C * (dense @ x).T + theta[:d, cols]
        g[d] = C * np.add.reduceat(r, starts)
        return g

    cols = np.arange(k)
    g = grad(cols, *layout(cols)[:3])
    s_hist: list[np.ndarray] = []  # (p, k) pairs; columns not updated hold zeros and rho 0 (no-ops)
    y_hist: list[np.ndarray] = []
    rho_hist: list[np.ndarray] = []
    n_iter = np.zeros(k, dtype=np.int64)
    converged = np.sqrt(np.maximum(_dots(g, h0inv @ g), 0)) <= tol
    stuck = np.zeros(k, dtype=bool)
    for _ in range(max_iter):
        cols = np.flatnonzero(~converged & ~stuck)
        if len(cols) == 0:
            break
        gc = g[:, cols]
        q = gc.copy()  # two-loop recursion (Nocedal & Wright Algorithm 7.4), H0^-1 as initial matrix
        alphas = []
        for s, yv, rho in zip(reversed(s_hist), reversed(y_hist), reversed(rho_hist)):
            a = rho[cols] * _dots(s[:, cols], q)
            q -= a * yv[:, cols]
            alphas.append(a)
        r = h0inv @ q
        for s, yv, rho, a in zip(s_hist, y_hist, rho_hist, reversed(alphas)):
            r += (a - rho[cols] * _dots(yv[:, cols], r)) * s[:, cols]
        direction = -r
        slope = _dots(gc, direction)
        bad = slope >= 0  # not a descent direction (rounding): the preconditioned gradient instead
        if bad.any():
            direction[:, bad] = -(h0inv @ gc[:, bad])
            slope[bad] = _dots(gc[:, bad], direction[:, bad])
        ent, pos, starts, lens = layout(cols)
        dz = (direction[:d].T.astype(dt) @ x.T + direction[d].astype(dt)[:, None]).ravel()[pos].astype(np.float64)
        w, dw = theta[:d, cols], direction[:d]
        wdw, dwdw = _dots(w, dw), _dots(dw, dw)
        step = np.ones(len(cols))
        accepted = np.zeros(len(cols), dtype=bool)
        ze, spe, ye = z[ent], sp[ent], yf[ent]
        for _ls in range(40):  # backtracking (Armijo, c1 = 1e-4), halving
            t = np.repeat(step, lens)
            z_new = ze + t * dz
            sp_new, sig_new = _softplus_sigmoid(z_new)
            # f(theta + step * dir) - f(theta) as a sum of small differences (exact to float64)
            df = C * np.add.reduceat(sp_new - spe - ye * (t * dz), starts) + step * wdw + 0.5 * step**2 * dwdw
            accepted |= df <= 1e-4 * step * slope
            if accepted.all():
                break
            step[~accepted] *= 0.5
        step[~accepted] = 0.0  # no decrease found at float precision: leave the column where it is
        stuck[cols[~accepted]] = True
        t = np.repeat(step, lens)
        z[ent] = ze + t * dz
        sp[ent], sig[ent] = _softplus_sigmoid(z[ent])
        s_new = step * direction
        theta[:, cols] += s_new
        g_new = grad(cols, ent, pos, starts)
        y_new = g_new - gc
        sy = _dots(s_new, y_new)
        ok = accepted & (sy > 1e-12 * np.sqrt(_dots(s_new, s_new) * _dots(y_new, y_new)))
        for lst, v in ((s_hist, s_new), (y_hist, y_new)):
            full = np.zeros((p, k))
            full[:, cols[ok]] = v[:, ok]
            lst.append(full)
        rho = np.zeros(k)
        rho[cols[ok]] = 1 / sy[ok]
        rho_hist.append(rho)
        if len(s_hist) > history:
            s_hist.pop(0), y_hist.pop(0), rho_hist.pop(0)
        g[:, cols] = g_new
        n_iter[cols] += 1
        converged[cols] = np.sqrt(np.maximum(_dots(g_new, h0inv @ g_new), 0)) <= tol
    return BatchedFit(theta[:d].T.copy(), theta[d].copy(), n_iter, converged, stuck & ~converged)

"""Shared by ``adversarial_filter`` and ``aflite``: feature vectors for concepts and cues from a
model (the offline text model on names, or an open_clip model on images with weights), (cue,
candidate) pair features, and vectorised top-K credit of per-candidate scores.

Pair features (both stages): ``[cue ⊙ candidate, candidate]`` (2d floats) — the candidate side
alone is the *cue-free* probe. Vectors are L2-normalised model embeddings (float32); pair features are
float64, so the fits and scores that decide (AF's swaps, AfLite's flags) carry ~1e-16 of BLAS-kernel
and thread-count noise instead of float32's ~1e-7, far below the stored scores' rounding.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gavil.domain.winogavil import cue_key, jaccard_from_overlap, prompt_for_cue, top_k_mask
from gavil.models.embeddings import Cache
from gavil.models.loading import LoadedModel

if TYPE_CHECKING:
    from sklearn.linear_model import LogisticRegression


def embed(
    model: LoadedModel,
    cues: Sequence[str],
    concepts: Sequence[str],
    cache: Cache,
    images: dict[str, tuple[str, str]] | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Cue vectors (by :func:`cue_key`) and concept vectors for a loaded model.

    Text models embed the cue word and the concept *names*; open_clip models embed the cue's
    prompt (:func:`gavil.domain.winogavil.prompt_for_cue`) and each concept's accepted image
    (``images``: concept -> (sha256, path); concepts without one are left out of the result).
    """
    if model.spec.kind == "text":
        items = {c: c for c in concepts} | {cue_key(c): cue_key(c) for c in cues}
        vecs = cache.ensure(model.cache_key("text"), items, model.embed_texts)
        return {cue_key(c): vecs[cue_key(c)] for c in cues}, {c: vecs[c] for c in concepts}
    assert model.embed_images is not None and images is not None
    have = [c for c in concepts if c in images]
    shas = cache.ensure(model.cache_key("image"), {images[c][0]: images[c][1] for c in have}, model.embed_images)
    prompts = cache.ensure(
        model.cache_key("text"), {prompt_for_cue(c): prompt_for_cue(c) for c in cues}, model.embed_texts
    )
    return {cue_key(c): prompts[prompt_for_cue(c)] for c in cues}, {c: shas[images[c][0]] for c in have}


def pair_features(cue_vecs: np.ndarray, cand_vecs: np.ndarray, probe: str = "full") -> np.ndarray:
    """(rows, 2d) float64 ``[cue ⊙ cand, cand]`` for ``probe="full"``; (rows, d) ``cand`` for ``"cue_free"``."""
    cand = cand_vecs.astype(np.float64, copy=False)
    if probe == "cue_free":
        return cand
    return np.hstack([cue_vecs.astype(np.float64, copy=False) * cand, cand])


@dataclass(frozen=True)
class Layout:
    """Instances' candidates as a padded matrix over flat pair rows.

    ``rows[i, j]`` is the flat row of instance i's j-th candidate (-1 = padding); ``label`` (same
    shape, bool) marks associations; ``k`` = number of associations per instance."""

    rows: np.ndarray
    label: np.ndarray
    k: np.ndarray

    @staticmethod
    def build(candidates: Sequence[Sequence[str]], associations: Sequence[Sequence[str]]) -> Layout:
        width = max((len(c) for c in candidates), default=1)
        rows = np.full((len(candidates), width), -1, dtype=np.int64)
        label = np.zeros((len(candidates), width), dtype=bool)
        start = 0
        for i, (cs, a) in enumerate(zip(candidates, associations)):
            rows[i, : len(cs)] = np.arange(start, start + len(cs))
            label[i, : len(cs)] = [c in set(a) for c in cs]
            start += len(cs)
        return Layout(rows, label, np.array([len(a) for a in associations], dtype=np.int64))


def topk_credit(scores: np.ndarray, label: np.ndarray, k: np.ndarray, exact: bool = False) -> np.ndarray:
    """Per instance: Jaccard (or exact match, 0/1) of the top-K candidates by score vs the associations.

    Args:
        scores: (n, width) floats, -inf on padding; the top K by :func:`gavil.domain.winogavil.top_k_mask`
            (ties keep candidate order).
        label: (n, width) bool associations. k: (n,) K per instance.
    """
    picked = top_k_mask(scores, k)
    hits = (picked & label).sum(axis=1)
    jac = jaccard_from_overlap(hits, k)
    return (hits == k).astype(float) if exact else jac


def fit_logistic(x: np.ndarray, y: np.ndarray, max_iter: int, seed: int, tol: float = 1e-4) -> LogisticRegression:
    """scikit-learn ``LogisticRegression`` (lbfgs, C=1, ``tol``: max |gradient| of the loss divided
    by the rows) fitted on ``x, y`` with one BLAS thread; convergence warnings muted. For the
    batched equivalent (many fits over shared rows at once) see :mod:`gavil.models.batched_logistic`."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_limits

    clf = LogisticRegression(max_iter=max_iter, random_state=seed, tol=tol)
    # one BLAS thread: on a shared 2-core machine OpenBLAS's 2 threads made each fit 12x slower
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(x, y)
    return clf


def histogram_kl(values: np.ndarray, label: np.ndarray, bins: int) -> float:
    """KL(P_pos || P_neg) between the label-conditional histograms of 1-D ``values`` (common bin
    edges, add-1e-6 smoothing; nats). WinoGrande §4's assessment on a 1-D PCA projection."""
    if label.all() or not label.any():
        return float("nan")
    edges = np.histogram_bin_edges(values, bins=bins)
    p = np.histogram(values[label], edges)[0].astype(float) + 1e-6
    q = np.histogram(values[~label], edges)[0].astype(float) + 1e-6
    p, q = p / p.sum(), q / q.sum()
    return float(np.sum(p * np.log(p / q)))


def pca_kl(x: np.ndarray, label: np.ndarray, bins: int, x_gram: np.ndarray | None = None) -> float:
    """:func:`histogram_kl` of the first principal component of ``x`` (PCA fitted on ``x``).

    The axis is the top eigenvector of the (d, d) scatter matrix (float64 ``eigh``; sign fixed so
    its largest-magnitude entry is positive), not an SVD of the rows: O(n d^2) once, and
    ``x_gram`` (the (d+1, d+1) ``[x, 1]^T [x, 1]``, :func:`gavil.models.batched_logistic.gram`) can
    be passed in when the caller already has it (e.g. derived from a superset's by subtraction).
    """
    if len(x) < 2:
        return float("nan")
    if x_gram is None:
        from gavil.models.batched_logistic import gram

        x_gram = gram(x)
    d = x.shape[1]
    mean = x_gram[:d, d] / x_gram[d, d]
    scatter = x_gram[:d, :d] - x_gram[d, d] * np.outer(mean, mean)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):  # a 2-thread LAPACK eigh on a busy 2-core machine took 40x longer
        axis = np.linalg.eigh(scatter)[1][:, -1]
    axis *= np.sign(axis[np.argmax(np.abs(axis))])
    return histogram_kl((x - mean.astype(x.dtype)) @ axis.astype(x.dtype), label, bins)

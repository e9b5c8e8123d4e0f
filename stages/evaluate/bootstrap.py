"""The seeded percentile bootstrap every interval of the ``evaluate`` stage uses (Table 4 cells,
per round; the per-round model error rates of :mod:`stages.evaluate.errors`)."""

from __future__ import annotations

import numpy as np


def bootstrap_ci(values: np.ndarray, n_boot: int, seed: int) -> tuple[float, float]:
    """95 % percentile bootstrap CI of the mean (same units as ``values``): ``n_boot`` resamples of
    ``len(values)`` draws with replacement from ``numpy.random.default_rng(seed)``, so the same
    values, ``n_boot`` and ``seed`` give the same interval on every run (Efron & Tibshirani 1993,
    ch. 13, the percentile interval). Empty ``values``: (nan, nan)."""
    if len(values) == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(n_boot, len(values)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))

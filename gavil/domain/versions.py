"""The benchmark's dataset version: ``1.<round>.<patch>`` (docs/dynamic.md).

``round`` is the highest collection round among the benchmark's instances (0: only the released
WinoGAViL data); ``patch`` is ``export.patch``, raised by a maintainer for a re-release of the same
round. ``export`` writes the version into the card and its metrics; ``evaluate`` names it on every
row of its results.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import SupportsInt


def dataset_version(rounds: Iterable[object], patch: int = 0) -> tuple[int, str]:
    """(round, version) of a benchmark whose instances have collection ``rounds`` (ints; None or
    NA for an unknown round, skipped): the highest round (0 when none is known) and ``1.<round>.<patch>``.

    Raises:
        ValueError: ``patch`` or a round is negative.
    """
    known = []
    for r in rounds:
        if isinstance(r, numbers.Real) and isinstance(r, SupportsInt) and r == r:  # None, pandas NA, NaN: not known
            known.append(int(r))
    if patch < 0 or any(r < 0 for r in known):
        raise ValueError(f"rounds and patch are >= 0, not patch={patch}, rounds={sorted(set(known))[:5]}")
    top = max(known, default=0)
    return top, f"1.{top}.{patch}"

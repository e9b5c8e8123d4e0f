"""Who counts as a solver: the gold check (``game.gold``; docs/dynamic.md "Solver checks (gold
items)"), the one rule the game (which answers count towards an association's solvers) and
``import_annotations`` (each solver's ``gold_checks`` row) both apply.

A solver who answered ``items`` gold items with a mean Jaccard, rounded to 2 places (the release's
rule for solver means), of at least ``min_jaccard`` has ``passed``; below it,
``failed_gold_check``; fewer answers, ``gold_pending``; with the switch off, ``not_checked``.
Pure functions: no store, no HTTP.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import fmean
from typing import Protocol

#: A game solver's gold check (:func:`gold_status`), the values of ``gold_checks.gold_status``.
GOLD_STATUSES = ["passed", "failed_gold_check", "gold_pending", "not_checked"]
PASSED, FAILED, PENDING, NOT_CHECKED = GOLD_STATUSES  # the values of gold_status (gold_checks, annotator_stats)


class GoldRule(Protocol):
    """The gold check's settings (``game.gold``: :class:`gavil.params.game.GoldParams`)."""

    @property
    def enabled(self) -> bool: ...

    @property
    def items(self) -> int: ...

    @property
    def min_jaccard(self) -> float: ...


def gold_mean(jaccards: Sequence[float]) -> float | None:
    """Mean of a solver's gold Jaccards (fractions), rounded to 2 places (the release's rule for
    solver means); None without answers."""
    return round(fmean(jaccards), 2) if jaccards else None


def gold_status(jaccards: Sequence[float], p: GoldRule) -> tuple[str, str | None]:
    """(status, reason) of a solver whose gold answers scored ``jaccards`` (fractions).

    ``not_checked`` (switch off), ``gold_pending`` (fewer than ``p.items`` answers),
    ``failed_gold_check`` (:func:`gold_mean` < ``p.min_jaccard``) or ``passed`` (reason None).
    Reasons are fixed sentences of counts and values (no ids, no times)."""
    if not p.enabled:
        return NOT_CHECKED, None
    n, mean = len(jaccards), gold_mean(jaccards)
    if n < p.items:
        return (
            PENDING,
            f"{n} of {p.items} gold item(s) answered (game.gold.items): answers count once the solver passes",
        )
    assert mean is not None
    if mean < p.min_jaccard:
        return FAILED, f"mean Jaccard {mean:.2f} on {n} gold item(s) < game.gold.min_jaccard {p.min_jaccard:g}"
    return PASSED, None

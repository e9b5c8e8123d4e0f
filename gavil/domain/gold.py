"""Who counts as a solver: the gold check (``game.gold``; docs/dynamic.md "Solver checks (gold
items)"), the one rule the game (which answers count towards an association's solvers) and
``import_annotations`` (each solver's ``gold_checks`` row) both apply.

A solver who answered ``items`` gold items with a mean Jaccard, rounded to 2 places (the release's
rule for solver means), of at least ``min_jaccard`` has ``passed``; below it,
``failed_gold_check``; fewer answers, ``gold_pending``; with the switch off, ``not_checked``.
The checks go on after that: each later gold answer below ``min_jaccard`` is a strike, and
``strikes`` strikes fail a solver who had passed (from that answer on).

**Which answers count** (:func:`counts`): a solver's answer counts when, at the time it was given,
their gold answers so far made them ``passed`` (or the switch was off then). So answers given
while pending never count, answers given before a failure stay counted, answers after it never
do; a later setting (the switch turned on, a later failure) never changes an answer already given.

**Which task is gold** (:func:`gold_turn`): a new solver's first ``items`` tasks (before the
check, they take no real work), then a share ``rate`` of their tasks, drawn per solver and per
task from the sha256 of the player's id and the task's number, so every solver's sequence
differs, is fixed by the store, and gold items are interleaved with real work. Pure functions: no store, no HTTP.
"""

from __future__ import annotations

import hashlib
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

    @property
    def strikes(self) -> int: ...


def gold_mean(jaccards: Sequence[float]) -> float | None:
    """Mean of a solver's gold Jaccards (fractions), rounded to 2 places (the release's rule for
    solver means); None without answers."""
    return round(fmean(jaccards), 2) if jaccards else None


def gold_status(jaccards: Sequence[float], p: GoldRule) -> tuple[str, str | None]:
    """(status, reason) of a solver whose gold answers scored ``jaccards`` (fractions, in the order given).

    ``not_checked`` (switch off), ``gold_pending`` (fewer than ``p.items`` answers),
    ``failed_gold_check`` (:func:`gold_mean` of the first ``p.items`` < ``p.min_jaccard``, or
    ``p.strikes`` later answers below it) or ``passed`` (reason None). Reasons are fixed sentences
    of counts and values (no ids, no times)."""
    if not p.enabled:
        return NOT_CHECKED, None
    n = len(jaccards)
    if n < p.items:
        return (
            PENDING,
            f"{n} of {p.items} gold item(s) answered (game.gold.items): answers count once the solver passes",
        )
    mean = gold_mean(jaccards[: p.items])
    assert mean is not None
    if mean < p.min_jaccard:
        return FAILED, f"mean Jaccard {mean:.2f} on {p.items} gold item(s) < game.gold.min_jaccard {p.min_jaccard:g}"
    missed = sum(j < p.min_jaccard for j in jaccards[p.items :])
    if missed >= p.strikes:
        return FAILED, (
            f"{missed} later gold answer(s) below game.gold.min_jaccard {p.min_jaccard:g}"
            f" (game.gold.strikes {p.strikes})"
        )
    return PASSED, None


def counts(jaccards_before: Sequence[float], p: GoldRule) -> bool:
    """Whether an answer counts, given the Jaccards of the solver's gold answers stored before it
    (module docstring): the switch off, or :func:`gold_status` of those answers is ``passed``."""
    return gold_status(jaccards_before, p)[0] in (PASSED, NOT_CHECKED)


def gold_turn(player_id: str, task_no: int, checked: bool, rate: float) -> bool:
    """Whether task number ``task_no`` (0-based: the player's answers so far) of ``player_id`` is a
    gold item: every task of a solver not yet ``checked`` (fewer than ``items`` gold answers: only
    counting solvers take real work), then ``rate`` of them (a fraction), drawn from sha256 of the
    id and the number: fixed by the store, different for every solver, unknown to them (their id
    never leaves the store)."""
    if not checked:
        return True
    digest = hashlib.sha256(f"gold-turn:{player_id}:{task_no}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < rate

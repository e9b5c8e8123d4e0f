"""The scoring of a solver's answer, the rule the game applies when it stores an answer (to an
association or a gold item); HTTP-free and store-free (:mod:`gavil.game.service` and
:mod:`gavil.game.gold` call it)."""

from __future__ import annotations

import json
from typing import NamedTuple

from gavil.domain.winogavil import jaccard
from gavil.errors import Invalid


def positions(selection: object, n: int) -> list[int]:
    """``selection`` as distinct image positions below ``n``.

    Raises:
        gavil.errors.Invalid: it is not a list of whole numbers, or they repeat or fall outside ``0 .. n-1``.
    """
    if not isinstance(selection, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in selection):
        raise Invalid("selection must be a list of image positions")
    if len(set(selection)) != len(selection) or not all(0 <= i < n for i in selection):
        raise Invalid("select distinct images of this set")
    return list(selection)


class Answer(NamedTuple):
    """A solver's answer, scored: ``chosen`` candidate names, their ``jaccard`` index with the
    associations (a fraction; paper §2.2), the ``selection`` (positions) and the associations'
    positions (``associations``), as the reply to the answer shows them."""

    chosen: list[str]
    jaccard: float
    selection: list[int]
    associations: list[int]


def score_answer(candidates: str, associations: str, selection: object) -> Answer:
    """A solver's answer to an association (its stored JSON ``candidates`` and ``associations``),
    scored.

    Raises:
        gavil.errors.Invalid: ``selection`` is not distinct image positions (:func:`positions`), or
            does not pick exactly as many images as there are associations.
    """
    cands, assoc = json.loads(candidates), json.loads(associations)
    picks = positions(selection, len(cands))
    if len(picks) != len(assoc):
        raise Invalid(f"select exactly {len(assoc)} images")
    chosen = [cands[i] for i in picks]
    return Answer(chosen, jaccard(chosen, assoc), picks, [cands.index(a) for a in assoc])

"""The game's request rules that need no store: the error a refused request raises, candidate sets,
display names and image selections (:mod:`gavil.game.service` applies them)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import NamedTuple

from gavil.domain.names import NameError_, clean_display_name
from gavil.domain.winogavil import jaccard

MAX_NAME = 32


class GameError(Exception):
    """A refused request: ``status`` (HTTP) and the message shown to the player."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class CandidateSet:
    set_id: str
    candidates: tuple[str, ...]  # concept names
    shas: tuple[str, ...]  # the accepted image of each, by content hash


def clean_name(name: object) -> str:
    """A display name by :func:`gavil.domain.names.clean_display_name` (NFKC, variants folded, 1 to
    ``MAX_NAME`` code points, no invisible character, one script, no small capital). Raises GameError
    400 with the reason."""
    if not isinstance(name, str):
        raise GameError(400, "choose a display name")
    try:
        return clean_display_name(name, MAX_NAME)
    except NameError_ as e:
        raise GameError(400, f"{e} (a display name has 1 to {MAX_NAME} visible characters)") from None


def positions(selection: object, n: int) -> list[int]:
    """``selection`` as distinct image positions below ``n``; raises GameError 400 otherwise."""
    if not isinstance(selection, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in selection):
        raise GameError(400, "selection must be a list of image positions")
    if len(set(selection)) != len(selection) or not all(0 <= i < n for i in selection):
        raise GameError(400, "select distinct images of this set")
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
    scored. Raises GameError 400 unless ``selection`` picks exactly as many distinct images as
    there are associations."""
    cands, assoc = json.loads(candidates), json.loads(associations)
    picks = positions(selection, len(cands))
    if len(picks) != len(assoc):
        raise GameError(400, f"select exactly {len(assoc)} images")
    chosen = [cands[i] for i in picks]
    return Answer(chosen, jaccard(chosen, assoc), picks, [cands.index(a) for a in assoc])

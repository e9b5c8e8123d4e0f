"""The game's request rules that need no store: the error a refused request raises, candidate sets
and display names (:mod:`gavil.game.service` applies them). Image selections and the scoring of an
answer are :mod:`gavil.domain.rules` (the gold answers apply them too)."""

from __future__ import annotations

from dataclasses import dataclass

from gavil.domain.names import NameError_, clean_display_name

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

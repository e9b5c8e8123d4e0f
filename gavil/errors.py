"""Errors a user can act on.

Every :class:`GavilError` carries a message of a few lines that says what is wrong and how to
fix it. ``gavil`` prints just that message and exits 2; the traceback appears only with
``gavil --debug ...`` or ``GAVIL_DEBUG=1``.
"""

from __future__ import annotations


class GavilError(Exception):
    """Base class: bad params, missing inputs, malformed input files, undeclared table access."""


class ParamsError(GavilError, ValueError):
    """params.yaml holds an unknown key, a missing section or a bad value."""


class MissingInput(GavilError, FileNotFoundError):
    """An input file or table does not exist (yet): the message says what to run or set."""


class Refusal(Exception):
    """A request the game's rules or its store refuse (HTTP-free): ``message`` is the one sentence
    shown to the player. The web app maps each subclass to a status (``gavil/game/web.py: STATUS``);
    the store and the rules never name one."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Invalid(Refusal):
    """The request's content breaks a rule (a selection, a name, a cue)."""


class NotFound(Refusal):
    """The request names something that does not exist (a task, an association)."""


class Forbidden(Refusal):
    """The thing named exists but belongs to, or was served to, someone else."""


class Conflict(Refusal):
    """The request repeats or contradicts what the store already holds (an answered task)."""


class Expired(Refusal):
    """The thing named existed but is no longer valid (an expired lease)."""

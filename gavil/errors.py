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

"""Players' consent to the game's consent text (pure rules; the store keeps the records,
:mod:`gavil.game.consent` applies them).

The paper (Ethical considerations): "players will agree to a consent form when they register".
Here the operator's text (``game.consent_path``) is named by its *version*, the sha256 of the
file's bytes: a player's acceptance names the version they were shown, so a changed text (another
version) asks every player again before more work. A withdrawal is final for its account: it
takes no more work and cannot accept again (a new account needs a new invitation).
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime

from gavil.errors import Conflict, Forbidden, Invalid, Refusal

_VERSION = re.compile(r"^[0-9a-f]{64}$")

#: The refusal of work to a player who has not accepted the current text.
NOT_ACCEPTED = "accept the consent text first: the game shows it before any work"
#: The refusal of anything but reading to an account that withdrew.
WITHDRAWN = "you withdrew your consent: this account takes no more work (ask the operator for a new invitation)"


def consent_version(text: bytes) -> str:
    """The version of a consent text: the sha256 of its bytes, 64 lowercase hex digits."""
    return hashlib.sha256(text).hexdigest()


def work_refusal(accepted: str | None, withdrawn: bool, current: str) -> Refusal | None:
    """Why a player may not be given or submit work, or None when they may.

    Args:
        accepted: the version the player last accepted (None: never).
        withdrawn: whether the account withdrew its consent.
        current: the version of the text the game shows now (:func:`consent_version`).

    Returns:
        :class:`gavil.errors.Forbidden` (withdrawn, or ``accepted`` is not ``current``), or None.
    """
    if withdrawn:
        return Forbidden(WITHDRAWN)
    if accepted != current:
        return Forbidden(NOT_ACCEPTED)
    return None


def acceptance_refusal(given: object, withdrawn: bool, current: str) -> Refusal | None:
    """Why an acceptance naming version ``given`` is refused, or None when it is recorded.

    Only the version shown now is accepted: a forged, stale or malformed one is refused, so an
    acceptance always names a text the game really showed.

    Returns:
        :class:`gavil.errors.Invalid` (not a version: 64 lowercase hex digits),
        :class:`gavil.errors.Forbidden` (the account withdrew), :class:`gavil.errors.Conflict`
        (another version than the current one: reload the text), or None.
    """
    if not isinstance(given, str) or not _VERSION.match(given):
        return Invalid("name the consent text's version you accept (the sha256 the game gave you)")
    if withdrawn:
        return Forbidden(WITHDRAWN)
    if given != current:
        return Conflict("the consent text changed since you loaded it: read it again, then accept")
    return None


def utc_iso(ts: float) -> str:
    """Unix seconds as UTC ISO 8601 with ``Z``, to the second (``2026-01-01T09:30:00Z``)."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def withdrawn_reason(withdrawn_at: float) -> str:
    """The reason a withdrawn player's unpublished work carries downstream:
    ``withdrawn: player withdrew consent (<UTC time>)``."""
    return f"withdrawn: player withdrew consent ({utc_iso(withdrawn_at)})"

"""Players' consent in the game: the operator's text (``game.consent_path``), shown before a
player's first work; acceptances and withdrawals in the store (:mod:`gavil.gamestore.consent`);
the rules are :mod:`gavil.domain.consent`'s; the routes are :func:`gavil.game.web.consent_routes`.

- ``GET /api/consent``: the text (as plain text: the page shows it preformatted, never as HTML),
  its version (the sha256 of the file's bytes), and the player's state (accepted this version,
  when, withdrawn).
- ``POST /api/consent`` ``{"version": <sha256>}``: accept the text shown. Only the current version
  is taken (a forged or stale one: HTTP 409; a malformed one: 400).
- ``POST /api/consent/withdraw`` ``{"confirm": true}``: withdraw, for one's own account only (the
  session token names it; no request names another player). Final: the account's open leases and
  unused creation tasks are released, it takes no more work and cannot accept again.

Every work request (a creation task, a creation, a solve task, an answer) checks the player's
consent against the text's version *now* (:meth:`ConsentText.current` re-reads the file when it
changed on disk), so a changed text asks every player again before more work; refused work is
HTTP 403 with :data:`gavil.domain.consent.NOT_ACCEPTED`. The state lives in the store, so every
server process over one store agrees.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from gavil.domain.consent import acceptance_refusal, consent_version, utc_iso, work_refusal
from gavil.errors import MissingInput
from gavil.game.rules import GameError
from gavil.gamestore.consent import player_consent, record_acceptance, record_withdrawal
from gavil.gamestore.store import transaction

if TYPE_CHECKING:
    import sqlite3

    from gavil.game.service import Game

MAX_TEXT = 200_000  # bytes of a consent text the game serves


class ConsentState(TypedDict):
    """``GET /api/consent``: the text and the player's state (times UTC ISO 8601 with ``Z``)."""

    required: bool  # false: this game asks for no consent
    text: str
    version: str  # sha256 of the text's bytes
    accepted: bool  # this version, and not withdrawn
    accepted_version: str | None  # the last acceptance's version (None: none)
    accepted_at: str | None
    withdrawn: bool
    withdrawn_at: str | None


class Withdrawn(ConsentState):
    """``POST /api/consent/withdraw``: the state after it and how many tasks it released."""

    released: int  # open leases and unused creation tasks released


class ConsentText:
    """The operator's consent text at ``path`` and its version, re-read when the file changes on
    disk (its size, modification time or inode), so an edit while the game runs is the text asked
    for from then on (thread-safe).

    Raises:
        gavil.errors.MissingInput: at construction (the game's start), ``path`` is not a file: one
            line naming ``game.consent_path`` and the fix.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None
        self._text, self._version = "", ""
        if not self.path.is_file():  # checked once when the game starts; later, work waits for it
            raise MissingInput(
                f"game.consent_path = {path}: not a file; write the consent text players accept there "
                "(the sample's data/sample/consent.md is a template), or point game.consent_path at yours"
            )
        self.current()

    def current(self) -> tuple[str, str]:
        """(text, version): the file's text (UTF-8; undecodable bytes shown as U+FFFD) and the
        sha256 of its bytes.

        Raises:
            GameError: 503 when the file cannot be read or is larger than :data:`MAX_TEXT` bytes:
                no work is served until the operator restores it.
        """
        try:
            st = os.stat(self.path)
            key = (st.st_size, st.st_mtime_ns, st.st_ino)
            with self._lock:
                if key != self._seen:
                    if st.st_size > MAX_TEXT:
                        raise OSError(f"larger than {MAX_TEXT} bytes")
                    data = self.path.read_bytes()
                    self._text, self._version = data.decode("utf-8", "replace"), consent_version(data)
                    self._seen = key
                return self._text, self._version
        except OSError as e:
            raise GameError(
                503,
                f"the consent text (game.consent_path: {self.path}) cannot be read ({e.strerror or e}): "
                "no work is served until the operator restores it",
            ) from None


def require(game: Game, db: sqlite3.Connection, pid: str) -> None:
    """Refuse work to ``pid`` unless they accepted the current text and did not withdraw
    (:func:`gavil.domain.consent.work_refusal`); nothing when the game asks for no consent
    (``game.consent`` None).

    Raises:
        gavil.errors.Forbidden: not accepted (this version), or withdrawn.
        GameError: 503, the text cannot be read (:meth:`ConsentText.current`).
    """
    if game.consent is None:
        return
    version = game.consent.current()[1]
    mine = player_consent(db, pid)
    refusal = work_refusal(mine.accepted, mine.withdrawn_at is not None, version)
    if refusal is not None:
        raise refusal


def state(game: Game, token: str) -> ConsentState:
    """The consent text and the player's state: ``required`` (false: this game asks for none),
    ``text``, ``version``, ``accepted`` (this version), ``accepted_version`` and ``accepted_at``
    (the last acceptance, UTC ISO; null: none), ``withdrawn`` and ``withdrawn_at``."""
    pid = game.player(token)
    mine = player_consent(game.db, pid)
    text, version = game.consent.current() if game.consent is not None else ("", "")
    return ConsentState(
        required=game.consent is not None,
        text=text,
        version=version,
        accepted=game.consent is None or (mine.accepted == version and mine.withdrawn_at is None),
        accepted_version=mine.accepted,
        accepted_at=None if mine.accepted_at is None else utc_iso(mine.accepted_at),
        withdrawn=mine.withdrawn_at is not None,
        withdrawn_at=None if mine.withdrawn_at is None else utc_iso(mine.withdrawn_at),
    )


def accept(game: Game, token: str, version: object) -> ConsentState:
    """Record the player's acceptance of ``version`` (one transaction); returns :func:`state`.

    Raises:
        gavil.errors.Invalid: not a version. gavil.errors.Conflict: not the current version.
        gavil.errors.Forbidden: the account withdrew. GameError: 400 when the game asks for no
        consent, 503 (:meth:`ConsentText.current`).
    """
    pid = game.player(token)
    if game.consent is None:
        raise GameError(400, "this game asks for no consent")
    current = game.consent.current()[1]
    with transaction(game.db) as db:
        refusal = acceptance_refusal(version, player_consent(db, pid).withdrawn_at is not None, current)
        if refusal is not None:
            raise refusal
        record_acceptance(db, pid, current, game.clock())
    return state(game, token)


def withdraw(game: Game, token: str) -> Withdrawn:
    """Record the player's withdrawal and release their open work (one transaction,
    :func:`gavil.gamestore.consent.record_withdrawal`); a second one changes nothing. Returns
    :func:`state` and ``released`` (leases and unused creation tasks released)."""
    pid = game.player(token)
    with transaction(game.db) as db:
        w = record_withdrawal(db, pid, game.clock())
    return Withdrawn(**state(game, token), released=w["leases_released"])

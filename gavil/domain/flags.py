"""Player flags on associations and their review: the categories, the free-text rule for a flag's
reason and a reviewer's note, and **the review rule** shared by the game (what it serves), the
import (the ``flags`` table) and selection (docs/dynamic.md "Flags and review").

The review rule. A player flags an association they were served, once per association
(category and a short reason). An admin reviews the flags of one association at a time: ``keep``
or ``retire``; the review covers every flag of the association stored until then (it records the
highest flag id it saw, ``flags_through``). So:

- a flag is **open** while no review covers it (its id is above every review's ``flags_through``
  for its association), **kept** or **retired** after the review that covers it;
- an association is ``retired`` once any review retired it: **retire is final** (the store allows
  one ``retire`` per association; no later flag or review changes it, and the game refuses new
  flags on it); else ``open`` while it has an open flag (a flag arriving after a ``keep``, by
  another player, re-opens review: the ``keep`` covered only the flags before it); else ``kept``.

**A flag is a report, not a veto.** A report takes an association out of serving at once (the
paper's "immediate removal until further examination"), until an admin reviews it. What it does to a
release depends on its **weight** (:func:`reports_hold`): a report carries weight when its reporter
*counts* (with ``game.gold.enabled``: passed the gold check; with it off every reporter counts, and
``game.flags.min_reporters`` distinct ones are needed). Open reports of weight hold an unpublished
instance out of the next release (status ``withheld``); reports never take a published instance
out: only an admin's ``retire`` does (status ``retired``, its ID kept as a gap). After a ``keep``,
only open reports of weight re-open review (and take it out of serving again): reports without
weight leave a kept association kept. ``retired`` stays out.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Literal

from gavil.domain.confusables import fold_variants
from gavil.domain.names import invisible_char, shown

#: What a player may flag an association as (the store's CHECK constraint lists the same words).
FLAG_CATEGORIES = ("offensive", "wrong", "unsolvable", "other")
#: An admin's decisions on a flagged association.
REVIEW_DECISIONS = ("keep", "retire")
#: A flag's state under the review rule (module docstring).
FLAG_STATES = ("open", "kept", "retired")
#: Most code points in a flag's reason or a review's note (after cleaning).
MAX_FLAG_TEXT = 200

FlagState = Literal["open", "kept", "retired"]
_SPACES = re.compile(r"\s+")


def clean_flag_text(text: object, what: str = "reason", required: bool = False) -> str:
    """A flag's reason (or a review's note) in its stored form: NFKC, apostrophe, quote and hyphen
    variants folded (:func:`gavil.domain.confusables.fold_variants`), every run of whitespace (line
    breaks and tabs included) made one space, trimmed; at most :data:`MAX_FLAG_TEXT` code points;
    no invisible or formatting character (:func:`gavil.domain.names.invisible_char`: zero-width,
    bidi controls, ...). Any script, digits and punctuation are allowed: it is free text, shown
    only as text. ``""`` when empty, unless ``required``.

    Raises:
        ValueError: not a string, an invisible character, too long, or empty when ``required``;
            the message says what to change (it never repeats a long input in full).
    """
    if text is None and not required:
        return ""
    if not isinstance(text, str):
        raise ValueError(f"the {what} must be text")
    t = _SPACES.sub(" ", fold_variants(unicodedata.normalize("NFKC", fold_variants(text)))).strip()
    hidden = invisible_char(t)
    if hidden is not None:
        name = unicodedata.name(hidden, "unnamed")
        raise ValueError(f"the {what} contains an invisible or formatting character U+{ord(hidden):04X} ({name})")
    if len(t) > MAX_FLAG_TEXT:
        raise ValueError(f"the {what} {shown(t)} has {len(t)} characters; at most {MAX_FLAG_TEXT}")
    if required and not t:
        raise ValueError(f"say in a few words why (the {what} is empty)")
    return t


def flag_state(flag_id: int, reviews: Iterable[tuple[int, str]]) -> tuple[FlagState, int | None]:
    """The state of flag ``flag_id`` and the index (in ``reviews``) of the review that covers it.

    ``reviews``: the association's reviews in the order they were made, as ``(flags_through,
    decision)``. The first review whose ``flags_through`` is at least ``flag_id`` covers it
    (module docstring); none: ``open``.
    """
    for i, (through, decision) in enumerate(reviews):
        if through >= flag_id:
            return ("retired" if decision == "retire" else "kept"), i
    return "open", None


def association_state(decisions: Iterable[str | None], states: Iterable[str]) -> FlagState:
    """An association's state from its flags' covering decisions and flag states: ``retired`` if
    any review retired it (final), else ``open`` if any flag is open, else ``kept``."""
    if "retire" in set(decisions):
        return "retired"
    return "open" if "open" in set(states) else "kept"


def reports_hold(counting_reporters: int, gold_enabled: bool, min_reporters: int) -> bool:
    """Whether an association's open reports carry weight enough to hold it (module docstring):
    ``counting_reporters`` distinct open reporters who count (gold on: passed the gold check; off:
    every reporter) reach 1 with gold checks on, ``min_reporters`` with them off."""
    return counting_reporters >= (1 if gold_enabled else min_reporters)

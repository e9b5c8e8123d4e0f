"""Players' flags in selection: an instance *held* by its flags (the review rule:
:mod:`gavil.domain.flags`; the ``flags`` table of ``import_annotations``) never reaches the
benchmark before an admin's review keeps it.

- **open** (a flag no review decided yet): ``flagged_unreviewed``;
- **retired** by a review (final): ``retired_by_review``;
- **kept** (every flag decided, none retired): no effect, the instance is selected or not as usual.

An unpublished held instance gets status ``withheld`` (it keeps its scores, its split ID and its
place in the ledger as an unpublished row; no benchmark ID). A published one (an ``ID`` in the ID
ledger) follows the ledger's rule for taking a published ID out: status ``retired``, its ID kept
and never reused, a gap in the export; after a ``keep`` it is ``selected`` again with the same
ID. ``select.retired`` wins over flags.
"""

from __future__ import annotations

import pandas as pd

from gavil.domain.flags import FLAG_CATEGORIES, association_state

#: The reason prefix of an instance with an open flag, and of one an admin's review retired.
FLAGGED_UNREVIEWED = "flagged_unreviewed"
RETIRED_BY_REVIEW = "retired_by_review"


def held_reasons(flags: pd.DataFrame | None) -> dict[str, str]:
    """instance_uid -> the selection reason of each instance its flags hold (module docstring).

    Args:
        flags: :class:`schemas.annotations.Flags` (None or empty: no instance is held).

    Returns:
        ``flagged_unreviewed: <n> open player flag(s) (<category> <count>, ...)`` or
        ``retired_by_review: <note> (reviewer <name>)``, by uid.
    """
    out: dict[str, str] = {}
    if flags is None or not len(flags):
        return out
    for uid, g in flags.sort_values("flag_id").groupby("instance_uid", sort=True):
        decisions = [None if pd.isna(d) else str(d) for d in g["decision"]]
        state = association_state(decisions, [str(s) for s in g["state"]])
        if state == "retired":
            r = g[g["decision"] == "retire"].iloc[0]
            note = str(r["review_note"]) or "no note"
            out[str(uid)] = f"{RETIRED_BY_REVIEW}: {note} (reviewer {r['reviewer']})"
        elif state == "open":
            open_ = g[g["state"] == "open"]
            n = {c: int((open_["category"] == c).sum()) for c in FLAG_CATEGORIES}
            counts = ", ".join(f"{c} {k}" for c, k in n.items() if k)
            out[str(uid)] = f"{FLAGGED_UNREVIEWED}: {len(open_)} open player flag(s) ({counts})"
    return out


def published_reason(reason: str) -> str:
    """The ``retired`` reason of a published instance its flags hold (:func:`held_reasons`)."""
    if reason.startswith(RETIRED_BY_REVIEW):
        return f"{reason}: its ID stays a gap"
    return f"{reason}: out of the export until an admin reviews it (its ID stays)"


def withhold(row: dict[str, object], reason: str) -> dict[str, object]:
    """An unpublished instance's selection row held by its flags (:func:`held_reasons`): status
    ``withheld``, the flag reason, then what it would have been (``otherwise <status>``)."""
    until = "; not published until an admin reviews it" if reason.startswith(FLAGGED_UNREVIEWED) else ""
    was = f"otherwise {row['status']}" + (f": {row['reason']}" if row.get("reason") else "")
    return row | {"status": "withheld", "reason": f"{reason}{until}; {was}"}

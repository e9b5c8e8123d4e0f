"""Players' reports (flags) in selection (the review rule and the weight of a report:
:mod:`gavil.domain.flags`; the ``flags`` table of ``import_annotations``). A flag is a report, not a veto:

- **open reports of weight** (the table's ``holds``): an unpublished instance is ``withheld``,
  ``flagged_unreviewed``, until an admin reviews it; a published one is not touched;
- **open reports without weight**: no effect on a release (the game stopped serving it until review);
- **retired** by an admin's review (final): ``retired_by_review`` with the note and the reviewer:
  an unpublished instance is ``withheld``; a published one (an ``ID`` in the ID ledger) follows
  the ledger's rule for taking a published ID out: status ``retired``, its ID kept and never
  reused, a gap in the export, counted in the release changelog. This is the one way a published
  game instance leaves a release (``select.retired`` is for instances outside the game's store,
  and wins over flags);
- **kept**: no effect, the instance is selected or not as usual.
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
        ``flagged_unreviewed: <n> open player flag(s) of weight (<category> <count>, ...)`` or
        ``retired_by_review: <note> (reviewer <name>)``, by uid. A table without ``holds`` (older
        code) holds by any open flag.
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
            open_ = g[(g["state"] == "open") & (g["holds"].astype(bool) if "holds" in g else True)]
            if not len(open_):
                continue
            n = {c: int((open_["category"] == c).sum()) for c in FLAG_CATEGORIES}
            counts = ", ".join(f"{c} {k}" for c, k in n.items() if k)
            out[str(uid)] = f"{FLAGGED_UNREVIEWED}: {len(open_)} open player flag(s) of weight ({counts})"
    return out


def published_reason(reason: str) -> str | None:
    """The ``retired`` reason of a published instance an admin's review retired, or None: reports
    alone never take a published instance out (:func:`held_reasons`)."""
    if reason.startswith(RETIRED_BY_REVIEW):
        return f"{reason}: its ID stays a gap"
    return None


def withhold(row: dict[str, object], reason: str) -> dict[str, object]:
    """An unpublished instance's selection row held by its flags (:func:`held_reasons`): status
    ``withheld``, the flag reason, then what it would have been (``otherwise <status>``)."""
    until = "; not published until an admin reviews it" if reason.startswith(FLAGGED_UNREVIEWED) else ""
    was = f"otherwise {row['status']}" + (f": {row['reason']}" if row.get("reason") else "")
    return row | {"status": "withheld", "reason": f"{reason}{until}; {was}"}

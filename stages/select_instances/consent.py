"""Players who withdrew consent in the game (:mod:`gavil.domain.consent`) in selection; the
instances table's ``withdrawn`` column names them (``import_annotations``):

- an **unpublished** instance of theirs is ``withheld``, reason ``withdrawn: player withdrew consent
  (<UTC time>)`` then what it would have been: it never enters a release, and its row says why
  (a fate row like every other, never a silent drop);
- a **published** one keeps its ID (the ledger keeps every published ID): it stays ``selected`` (or
  ``retired``), the withdrawal noted first in its reason.

Their answers never reach here: the import rejects them with the same reason.
"""

from __future__ import annotations

import pandas as pd

from stages.select_instances.ledger import is_null

#: The statuses of rows that are no instance of their own: a withdrawal does not change them.
_UNTOUCHED = ("rejected", "duplicate")


def withdrawn_of(instances: pd.DataFrame) -> dict[str, str]:
    """instance_uid -> the ``withdrawn`` reason of each instance whose spymaster withdrew consent
    (:class:`schemas.annotations.Instances` column ``withdrawn``; a table without it: none)."""
    if "withdrawn" not in instances:
        return {}
    return {str(u): str(w) for u, w in zip(instances["instance_uid"], instances["withdrawn"]) if not is_null(w)}


def published_note(withdrawn: object) -> str:
    """The note a published instance of a withdrawn spymaster carries (``""`` when not withdrawn)."""
    if is_null(withdrawn) or not isinstance(withdrawn, str):
        return ""
    return f"{withdrawn}: published before, its ID stays (the ledger keeps every published ID)"


def withdraw(rows: list[dict[str, object]], withdrawn: dict[str, str], published: set[str]) -> list[dict[str, object]]:
    """``rows`` with every unpublished instance in ``withdrawn`` (uid -> reason) ``withheld``, the
    withdrawal first in its reason, then ``otherwise <status>: <reason>``; published ones (uids in
    ``published``) and rejected or duplicate rows unchanged."""
    out = []
    for r in rows:
        uid = str(r["instance_uid"])
        why = withdrawn.get(uid)
        if why is None or uid in published or r["status"] in _UNTOUCHED:
            out.append(r)
            continue
        was = f"otherwise {r['status']}" + (f": {r['reason']}" if r.get("reason") else "")
        out.append(r | {"status": "withheld", "reason": f"{why}; {was}"})
    return out

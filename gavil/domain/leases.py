"""When served solve work may still be answered: the rule of a lease's validity, shared by
association leases (``leases``) and gold leases (``gold_leases``) so no reply tells one from the
other (:func:`gavil.gamestore.store.live_lease` applies it to the row it reads)."""

from __future__ import annotations

from typing import NamedTuple

from gavil.errors import Conflict, Expired, Forbidden, NotFound, Refusal


class Lease(NamedTuple):
    """The fields of a stored lease the rule reads: the player it was served to and when it
    expires (Unix seconds)."""

    solver_id: str
    expires_at: float


def lease_refusal(lease: Lease | None, answered: bool, pid: str, now: float) -> Refusal | None:
    """Why player ``pid`` may not answer the lease ``lease`` at ``now`` (Unix seconds), or None
    when it is live for them.

    Args:
        lease: the stored lease, None when the store has no such lease.
        answered: whether an answer consumed a lease of that id (only read when ``lease`` is None).

    Returns:
        :class:`gavil.errors.Conflict` (already answered), :class:`gavil.errors.NotFound` (no such
        task), :class:`gavil.errors.Forbidden` (served to another player),
        :class:`gavil.errors.Expired` (``expires_at`` <= ``now``), or None.
    """
    if lease is None:
        if answered:
            return Conflict("this task was already answered: get the next one")
        return NotFound("no such solve task: get one from the Solver page (POST /api/solve/task)")
    if lease.solver_id != pid:
        return Forbidden("this solve task was served to another player")
    if lease.expires_at <= now:
        return Expired("this solve task expired: get a new one")
    return None

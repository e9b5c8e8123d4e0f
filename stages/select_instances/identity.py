"""One content, one ID: an instance's content identifies it across every source (released files, raw
and crowd batches, the game), whatever the order they are imported in.

An instance's **content** is its cue, its candidate set and its association set, each name in its
comparison form (:func:`gavil.domain.vocabulary.name_key`: the TR39 skeleton after NFKC and case
folding), so ``dog's`` over some images and ``dog’s`` over the same images are one content. Rules
(:func:`mark_duplicates`), applied to a selection in canonical order
(:func:`stages.select_instances.ledger.canonical_order`, which no input order changes):

1. Published content keeps its ID: every instance the ID ledger published (retired ones included)
   claims its content first; then every instance in canonical order claims content no one has
   (released rows come first in that order). The release's own twins (28 pairs of released rows
   share one content) are each published as released.
2. Any other instance with claimed content is a ``duplicate`` whose reason names the instance it
   copies (its dataset and ``ID`` once it has one): a raw, crowd or game copy of anything, and a
   released row whose content a raw, crowd or game instance published first.
3. Among new instances (raw, crowd, game rows not yet published), a cue given twice for one
   candidate set is one creation (paper §2: a new cue for the candidates), whatever the
   associations: the first in canonical order is kept, the others are duplicates.

A duplicate gets no split ID and never enters the ledger; its answers are kept in ``solves``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypedDict, cast

from gavil.domain.vocabulary import name_key

#: Selection statuses a duplicate can replace (an instance not yet published and not rejected).
OPEN = frozenset({"selected", "below_threshold", "insufficient_solvers", "profane_cue", "withheld"})


class Owner(TypedDict):
    """The instance whose content a duplicate copies."""

    uid: str
    dataset: str
    cue: str
    release: bool  # a released row
    same_content: bool  # rule 2 (same content) or rule 3 (same cue over the same candidates)


Row = Mapping[str, object]  # a selection row (or an ID ledger row): the fields read here


def content_key(cue: str, candidates: Iterable[str], associations: Iterable[str]) -> str:
    """The content of an instance as one string: cue, sorted candidate set, sorted association set,
    each name by :func:`gavil.domain.vocabulary.name_key` (joined with control characters that no
    name holds)."""
    names = lambda xs: "\x1e".join(sorted({name_key(x) for x in xs}))  # noqa: E731
    return "\x1f".join((name_key(cue), names(candidates), names(associations)))


def cue_set_key(cue: str, candidates: Iterable[str]) -> str:
    """The cue and the candidate set (rule 3)."""
    return "\x1f".join((name_key(cue), "\x1e".join(sorted({name_key(x) for x in candidates}))))


def _keys(row: Row) -> tuple[str, str]:
    cue, cands = str(row["cue"]), cast("Iterable[str]", row["candidates"])
    return content_key(cue, cands, cast("Iterable[str]", row["associations"])), cue_set_key(cue, cands)


def _owner(row: Row, same: bool = True) -> Owner:
    return Owner(
        uid=str(row["instance_uid"]),
        dataset=str(row["dataset"]),
        cue=str(row["cue"]),
        release=row["origin"] == "release",
        same_content=same,
    )


def mark_duplicates(rows: list[dict[str, object]], published: list[Row]) -> dict[int, Owner]:
    """Apply the module's rules to ``rows`` (selection rows in canonical order, changed in place:
    ``status`` becomes ``duplicate``); ``published``: the ledger rows with an ``ID``.

    Returns row index -> the instance it copies, for :func:`duplicate_reason` once this build's
    IDs are known."""
    claims: dict[str, Owner] = {}
    twins: dict[str, Owner] = {}
    for r in sorted(published, key=lambda r: (str(r["dataset"]), int(cast(int, r["ID"])))):
        ck, tk = _keys(r)
        claims.setdefault(ck, _owner(r))
        if r["origin"] != "release":
            twins.setdefault(tk, _owner(r, same=False))
    dups: dict[int, Owner] = {}
    for i, r in enumerate(rows):
        if r["status"] not in OPEN or r.get("ID") is not None:
            continue  # rejected, or published (it claimed its content above)
        uid, release = str(r["instance_uid"]), r["origin"] == "release"
        ck, tk = _keys(r)
        owner = claims.get(ck)
        if owner is not None and release and owner["release"]:
            owner = None  # the release's own twins are each published as released
        if (owner is None or owner["uid"] == uid) and not release:
            owner = twins.get(tk)
        if owner is None or owner["uid"] == uid:
            claims.setdefault(ck, _owner(r))
            if not release:
                twins.setdefault(tk, _owner(r, same=False))
            continue
        dups[i] = owner
        r["status"] = "duplicate"
    return dups


def duplicate_reason(owner: Owner, ids: dict[str, tuple[str, int]]) -> str:
    """The reason of a duplicate of ``owner`` (:func:`mark_duplicates`); ``ids``: instance_uid ->
    (dataset, ID) of every instance with an ID after this build."""
    got = ids.get(owner["uid"])
    named = f"{got[0]} ID {got[1]} ({owner['uid']})" if got else f"instance {owner['uid']} (no ID yet)"
    if owner["same_content"]:
        return (
            f"duplicate of {named}: same content (cue {owner['cue']!r}, candidate set, association set, "
            "compared by TR39 skeleton); a copy from any source is not a new instance"
        )
    return (
        f"duplicate of {named}: cue {owner['cue']!r} was already given for these candidates "
        "(compared by TR39 skeleton); a new instance needs a new cue"
    )

"""Only showable instances are published: every candidate of a new instance is a concept with an
accepted image.

An annotation batch, a crowd platform or the game can name candidates that no player could be shown:
a concept whose image OCR rejected (it shows its own word), a concept the profanity filter dropped
(it was never crawled), a concept whose crawl found nothing, or a typo that is no concept at all.
Such an instance would get a permanent ID and a line in ``benchmark.csv`` while the Hugging Face
dataset, which needs every image, leaves it out. So selection holds every unpublished instance that
is not from the WinoGAViL release (whose images are the release's own, reviewed by its authors, and
not shipped with this project) to the ``ocr`` table: an instance with a candidate that has no
accepted image is ``withheld``, its reason naming the first such candidate and why. A published
instance keeps its ID (only an admin's retire takes it out); it is counted on the console.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pandas as pd

#: Instances of this origin are not held to this project's images (module doc).
EXEMPT_ORIGINS = frozenset({"release"})
UNSHOWABLE = "unshowable"


def image_fates(ocr: pd.DataFrame) -> dict[str, str | None]:
    """concept -> None when it has an accepted image, else why not (``<status>: <reason>``), from
    the ``ocr`` table (:class:`schemas.ocr.Ocr`: concept, status, reason; one row per concept)."""
    out: dict[str, str | None] = {}
    for concept, status, reason in zip(ocr["concept"], ocr["status"], ocr["reason"]):
        out[str(concept)] = (
            None
            if status == "accepted"
            else f"{status}" + (f": {reason}" if isinstance(reason, str) and reason else "")
        )
    return out


def unshowable_reason(candidates: Iterable[str], fates: Mapping[str, str | None]) -> str | None:
    """Why an instance with ``candidates`` cannot be shown (the first candidate without an accepted
    image, in candidate order, and its image's fate), or None when every candidate can be."""
    for c in candidates:
        if c not in fates:
            return (
                f"{UNSHOWABLE}: candidate {c!r} has no image: it is no crawled concept of this project "
                "(a typo, a profane or an unknown word)"
            )
        if fates[c] is not None:
            return f"{UNSHOWABLE}: candidate {c!r} has no accepted image ({fates[c]})"
    return None


def hold_unshowable(row: dict[str, object], fates: Mapping[str, str | None] | None) -> dict[str, object]:
    """An unpublished imported instance's selection ``row`` (status already decided), ``withheld``
    with :func:`unshowable_reason` and what it would have been, when a candidate cannot be shown;
    else ``row`` unchanged. ``fates`` None (no ``ocr`` table given) checks nothing."""
    if fates is None or row["origin"] in EXEMPT_ORIGINS or row["status"] in ("rejected", "duplicate"):
        return row
    why = unshowable_reason(row["candidates"], fates)  # type: ignore[arg-type]  # a list of names
    if why is None:
        return row
    was = f"otherwise {row['status']}" + (f": {row['reason']}" if row.get("reason") else "")
    return row | {"status": "withheld", "reason": f"{why}; {was}"}

"""Stage 2, ``filter_profanity``: flag potentially offensive concepts and cues.

WinoGAViL §2.1, fn. 4: "We removed words that are potentially offensive" with a profanity
filter. This stage uses better-profanity's word list (and its leetspeak variants), plus
``profanity.extra_words`` (e.g. "butt", which the WinoGAViL authors removed by hand after
release) and minus ``profanity.allow_words``. Nothing is dropped: every concept keeps a row
with ``status`` ``ok`` or ``profane`` and the reason.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TypedDict

import pandas as pd

from gavil.domain.profanity import ProfanityFilter
from gavil.pipeline import catalog

if TYPE_CHECKING:
    from gavil.params import Params


class Metrics(TypedDict):
    """``data/metrics/filter_profanity.json``."""

    concepts: int
    profane: int


def filter_concepts(concepts: pd.DataFrame, pf: ProfanityFilter) -> pd.DataFrame:
    """Concepts table (catalog ``concepts``) -> one fate row per concept
    (catalog ``concept_filter``: concept, status, reason)."""
    reasons = [pf.reason(c) for c in concepts["concept"]]
    return pd.DataFrame(
        {
            "concept": concepts["concept"].to_numpy(),
            "status": ["ok" if r is None else "profane" for r in reasons],
            "reason": pd.array(reasons, dtype="str"),
        }
    )


def profane_line(fates: pd.DataFrame, shown: int = 10) -> str | None:
    """One console line naming the concepts flagged ``profane`` in ``fates`` (the ``concept_filter``
    table: concept, status, reason), at most ``shown`` of them, and how to keep one; None when none is.
    A user whose own concept disappears sees which word and why, not only a count in the metrics."""
    flagged = sorted(fates.loc[fates["status"] == "profane", "concept"])
    if not flagged:
        return None
    names = ", ".join(repr(c) for c in flagged[:shown]) + (
        f" and {len(flagged) - shown} more" if len(flagged) > shown else ""
    )
    return (
        f"filter_profanity: {len(flagged)} concept(s) flagged profane get no image and no candidate set: {names} "
        '(keep a word with profanity.allow_words in params.yaml; `gavil query "select * from concept_filter '
        "where status = 'profane'\"` lists them with the reason)"
    )


def run(params: Params) -> Metrics:
    """Stage entry point: concepts -> concept_filter. Returns the metrics (concepts, profane); names
    the profane concepts on stderr (:func:`profane_line`)."""
    p = params.profanity
    out = filter_concepts(catalog.read_table("concepts"), ProfanityFilter(p.extra_words, p.allow_words))
    catalog.write_table(out, "concept_filter")
    line = profane_line(out)
    if line:
        print(line, file=sys.stderr, flush=True)
    return {"concepts": len(out), "profane": int((out["status"] == "profane").sum())}

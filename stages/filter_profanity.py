"""Stage 2, ``filter_profanity``: flag potentially offensive concepts and cues.

WinoGAViL §2.1, fn. 4: "We removed words that are potentially offensive" with a profanity
filter. This stage uses better-profanity's word list (and its leetspeak variants), plus
``profanity.extra_words`` (e.g. "butt", which the WinoGAViL authors removed by hand after
release) and minus ``profanity.allow_words``. Nothing is dropped: every concept keeps a row
with ``status`` ``ok`` or ``profane`` and the reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd
from better_profanity import Profanity

from schemas.ingest import Concepts
from schemas.profanity import ConceptFilter
from stages._io import ParamsError, read_table, section, write_json, write_table
from stages.ingest_concepts import CONCEPTS_PATH

FILTER_PATH = "data/profanity/concept_filter.parquet"
METRICS_PATH = "data/metrics/filter_profanity.json"


class ProfanityFilter:
    """better-profanity with project-level additions and exceptions (all matched lower-case)."""

    def __init__(self, extra_words: Iterable[str] = (), allow_words: Iterable[str] = ()):
        self.extra = {w.strip().lower() for w in extra_words if w.strip()}
        self.allow = {w.strip().lower() for w in allow_words if w.strip()}
        self._lib = Profanity()
        self._lib.load_censor_words()

    def reason(self, text: str) -> str | None:
        """Why ``text`` is flagged, or None. Checks the whole phrase and each word."""
        t = text.strip().lower()
        if t in self.allow:
            return None
        for w in dict.fromkeys([*t.split(), t]):  # single words first: the reason names the word
            if w in self.allow:
                continue
            if w in self.extra:
                return f"'{w}' is in profanity.extra_words"
            if self._lib.contains_profanity(w):
                return f"better-profanity word list matches '{w}'"
        return None


def filter_concepts(concepts: pd.DataFrame, pf: ProfanityFilter) -> pd.DataFrame:
    """Concepts table (:class:`schemas.ingest.Concepts`) -> one fate row per concept
    (:class:`schemas.profanity.ConceptFilter`: concept, status, reason)."""
    reasons = [pf.reason(c) for c in concepts["concept"]]
    return pd.DataFrame(
        {
            "concept": concepts["concept"].to_numpy(),
            "status": ["ok" if r is None else "profane" for r in reasons],
            "reason": pd.array(reasons, dtype="str"),
        }
    )


def run(params: dict[str, Any]) -> dict[str, Any]:
    """Stage entry point: concepts -> concept_filter."""
    p = section(params, "profanity", ("extra_words", "allow_words"))
    for key in ("extra_words", "allow_words"):
        if not isinstance(p[key], list):
            raise ParamsError(f"profanity.{key} must be a list of words")
    out = filter_concepts(read_table(CONCEPTS_PATH, Concepts), ProfanityFilter(p["extra_words"], p["allow_words"]))
    write_table(out, FILTER_PATH, ConceptFilter)
    metrics = {"concepts": len(out), "profane": int((out["status"] == "profane").sum())}
    write_json(METRICS_PATH, metrics)
    return metrics

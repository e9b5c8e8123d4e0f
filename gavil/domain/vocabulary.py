"""The domain's fixed vocabulary, defined once: the bottom of the import graph.

Imported by ``schemas/`` (the table contracts), ``gavil/params/__init__.py`` (params) and the stages.
Sources: WinoGAViL paper §2.2 and the game UI (candidate-set sizes and K limits); the crawl
sources this project implements (``stages/crawl_images``).
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache
from typing import Literal, get_args

from gavil.domain.confusables import fold_variants, skeleton
from gavil.domain.names import NameError_, clean_word, shown

#: Candidate-set sizes the game uses (paper §2.2).
CANDIDATE_SIZES: tuple[int, ...] = (5, 6, 10, 12)
#: Spymaster UI limits on K (number of associations) for N candidates (paper §2.2, game UI).
K_LIMITS: dict[int, tuple[int, int]] = {5: (2, 3), 6: (2, 4), 10: (2, 5), 12: (2, 6)}

#: The WinoGAViL release's file layouts (column order as released; WinoGAViL-experiments ``assets/``):
#: ``game_5_6.csv`` / ``game_10_12.csv``, ``winogavil_dataset.csv`` (= the benchmark export) and
#: ``swow.csv``. Read by ingestion and annotation import, written by export.
RELEASE_GAME_COLUMNS: tuple[str, ...] = (
    "candidates",
    "cue",
    "associations",
    "score_fool_the_ai",
    "num_associations",
    "annotation_index",
    "num_candidates",
    "solvers_jaccard_mean",
    "solvers_jaccard_std",
    "images_source",
    "ID",
)
RELEASE_DATASET_COLUMNS: tuple[str, ...] = (
    "candidates",
    "cue",
    "associations",
    "score_fool_the_ai",
    "num_associations",
    "num_candidates",
    "solvers_jaccard_mean",
    "solvers_jaccard_std",
    "ID",
)
RELEASE_SWOW_COLUMNS: tuple[str, ...] = (
    "ID",
    "cue",
    "associations",
    "num_associations",
    "cue_weight",
    "associations_mean_weight",
    "candidates",
    "candidates_connectivity_score",
    "solvers_jaccard_mean",
    "solvers_jaccard_std",
)

#: Where crawl candidates come from (``crawl.source``).
CrawlSource = Literal["local", "urllist", "bing", "greedy"]
CRAWL_SOURCES: tuple[str, ...] = get_args(CrawlSource)


def normalize_name(name: str) -> str:
    """The one stored form of a concept, candidate or association name (raw and game rows,
    ingested SWOW words, the crawl's URL maps).

    Unicode NFKC (so "café" typed precomposed or decomposed is one name, and a full-width
    "ｄｏｇ" is "dog"), apostrophe, quote and hyphen variants in their ASCII spelling
    (:func:`gavil.domain.confusables.fold_variants`: "dog’s" is "dog's"), surrounding whitespace
    trimmed, then case-folded (``str.casefold``: "Dog" and "dog" are one name; "Straße" and
    "strasse" too) and NFKC again (case folding can leave a non-normalised string). Names are
    *compared* by :func:`name_key`. Raises TypeError for a non-string. What a name may contain is
    :mod:`gavil.domain.names`' policy.
    """
    if not isinstance(name, str):
        raise TypeError(f"a name must be a string, got {type(name).__name__}")
    return _normalized(name)


@lru_cache(maxsize=65536)  # a table repeats its names; the cache is bounded, whatever a batch holds
def _normalized(name: str) -> str:
    folded = fold_variants(unicodedata.normalize("NFKC", fold_variants(name))).strip().casefold()
    return unicodedata.normalize("NFKC", folded)


def name_key(name: str) -> str:
    """The one comparison form of every name (cue, candidate, association, selection, SWOW word):
    the Unicode TR39 confusable skeleton (:func:`gavil.domain.confusables.skeleton`) of
    :func:`normalize_name`, i.e. after NFKC, the variant folds and case folding. Two names with
    one key are one name: "dog’s" and "dog's", a Latin script "ɡ" and "g", "ıce" and "ice",
    "modem" and "modern" (TR39: "rn" reads as "m"). A key is for comparing, never shown or stored
    as a name. Raises TypeError for a non-string."""
    return skeleton(normalize_name(name))


def clean_cue(cue: object) -> str:
    """A spymaster's cue in its one stored form (NFKC, trimmed), or ValueError saying why not.

    The rule the annotation import and the game both apply (paper §2: a single word):
    :func:`gavil.domain.names.clean_word` with one word only (letters and marks, an internal hyphen or
    apostrophe; no invisible character, one script, at most :data:`gavil.domain.names.MAX_WORD` code
    points), longer than one character. The error (:class:`gavil.domain.names.NameError_`, a
    ValueError) says why.
    """
    c = clean_word(cue, "cue", phrase=False)
    if len(c) < 2:
        raise NameError_(f"cue {shown(c)} must be a single token longer than one character")
    return c

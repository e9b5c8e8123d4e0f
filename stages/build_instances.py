"""Stage 5, ``build_instances``: game candidate sets and SWOW-baseline instances.

- **Game candidate sets** (paper §2.2; reference "Random candidate sets"): N images sampled
  uniformly without replacement from the pool of accepted images (after profanity and OCR
  filtering), ``instances.game_sets[N]`` sets for each N in 5, 6, 10, 12, seeded. A spymaster
  then gives two cues per set (imported by ``import_annotations``).
- **SWOW-baseline instances** (paper §3.1; generation code unpublished, rules from the
  reference): for each cue, associations = its strongest SWOW responses (edge ``rank``) that
  have an accepted image and at least ``instances.swow.min_r123_count`` R123 responses when
  counts are known, up to ``max_associations`` (K in 2..4); distractors = accepted concepts
  that are never responses of the cue; N = 5 or 6 in total; candidates shuffled. Each cue
  uses its own RNG seeded from (seed, cue), so adding cues never changes existing instances.
  The reference also restricts to concrete words (Brysbaert norms >= ~4.0); those norms are
  not shipped here, so that filter is not applied (README "Known gaps").
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, TypedDict

import numpy as np
import pandas as pd

from schemas.instances import CandidateSets, SwowInstances
from stages import catalog
from stages.domain import CANDIDATE_SIZES

if TYPE_CHECKING:
    from stages.config import Params


class Metrics(TypedDict):
    """``data/metrics/build_instances.json``."""

    pool: int  # accepted concepts
    candidate_sets: dict[int, int]  # N -> sets
    candidate_sets_skipped_sizes: list[int]  # N larger than the pool
    swow_instances: dict[str, int]  # status -> instances


def accepted_pool(ocr: pd.DataFrame, concept_filter: pd.DataFrame) -> list[str]:
    """Sorted concepts whose image passed OCR and whose word passed the profanity filter."""
    ok_words = set(concept_filter.loc[concept_filter["status"] == "ok", "concept"])
    return sorted(set(ocr.loc[ocr["status"] == "accepted", "concept"]) & ok_words)


def game_candidate_sets(pool: list[str], sets_per_size: dict[int, int], seed: int) -> pd.DataFrame:
    """Random candidate sets (:class:`schemas.instances.CandidateSets`).

    A size larger than the pool yields no sets for that size (reported in metrics).
    """
    rng = np.random.default_rng(seed)
    rows = []
    for n in CANDIDATE_SIZES:
        count = int(sets_per_size.get(n, 0))
        if n > len(pool):
            continue
        for i in range(count):
            chosen = rng.choice(len(pool), size=n, replace=False)
            rows.append(
                {
                    "set_id": f"random-{n}-{i:04d}",
                    "num_candidates": n,
                    "candidates": [pool[j] for j in chosen],
                    "images_source": "random",
                }
            )
    return pd.DataFrame(rows, columns=list(CandidateSets.to_schema().columns))


def _cue_rng(seed: int, cue: str) -> np.random.Generator:
    return np.random.default_rng([seed, int(hashlib.sha256(cue.encode()).hexdigest()[:15], 16)])


def swow_instances(
    edges: pd.DataFrame,
    pool: list[str],
    profane: set[str],
    seed: int,
    max_associations: int = 4,
    min_r123_count: int = 10,
) -> pd.DataFrame:
    """One :class:`schemas.instances.SwowInstances` row per cue (ok or why not), cues sorted.

    Args:
        edges: :class:`schemas.ingest.Edges` rows (cue, response, rank, r123_count may be null).
        pool: accepted concepts (images that passed OCR, words that passed profanity).
        profane: cues flagged by ``filter_profanity``.

    Linear in the edges plus, per cue, its own responses: the distractors are drawn by index from
    the sorted pool with the cue's responses skipped, never by materialising a per-cue copy of
    the pool (at SWOW scale, 12,000 cues x 12,000 concepts, that copy took minutes).
    """
    pool_sorted = sorted(set(pool))
    where = {c: i for i, c in enumerate(pool_sorted)}
    e = edges.sort_values(["cue", "rank"], kind="stable")
    eligible = (
        e["response"].isin(pool_sorted)
        & (e["r123_count"].isna() | (e["r123_count"].fillna(0) >= min_r123_count))
        & (e["response"] != e["cue"])
    )
    strong = e[eligible].groupby("cue", sort=False).head(max_associations)
    assoc_of = strong.groupby("cue", sort=False)["response"].agg(list).to_dict()
    counts_of = strong.groupby("cue", sort=False)["r123_count"].agg(list).to_dict()
    responses_of = e.groupby("cue", sort=False)["response"].agg(list).to_dict()
    rows = []
    for cue in sorted(responses_of):
        base = {
            "instance_id": f"swow:{cue}",
            "cue": cue,
            "associations": [],
            "candidates": [],
            "num_associations": 0,
            "num_candidates": 0,
            "associations_mean_weight": None,
        }
        if cue in profane:
            rows.append({**base, "status": "profane_cue", "reason": "cue flagged by filter_profanity"})
            continue
        assoc = assoc_of.get(cue, [])
        if len(assoc) < 2:
            rows.append(
                {
                    **base,
                    "status": "too_few_associations",
                    "reason": f"{len(assoc)} response(s) with an accepted image (need 2)",
                }
            )
            continue
        rng = _cue_rng(seed, cue)
        n = int(rng.choice([5, 6]))
        n = max(n, len(assoc) + 1)
        skipped = sorted(
            {where[r] for r in [*responses_of[cue], cue] if r in where}
        )  # pool positions that are not distractors
        available = len(pool_sorted) - len(skipped)
        if available < n - len(assoc):
            rows.append(
                {
                    **base,
                    "associations": assoc,
                    "num_associations": len(assoc),
                    "status": "too_few_distractors",
                    "reason": f"{available} distractors available, need {n - len(assoc)}",
                }
            )
            continue
        distractors = [
            pool_sorted[_skip(j, skipped)] for j in rng.choice(available, size=n - len(assoc), replace=False)
        ]
        candidates = assoc + distractors
        candidates = [candidates[j] for j in rng.permutation(len(candidates))]
        counts = counts_of[cue]
        rows.append(
            {
                **base,
                "status": "ok",
                "reason": None,
                "associations": assoc,
                "candidates": candidates,
                "num_associations": len(assoc),
                "num_candidates": len(candidates),
                "associations_mean_weight": None
                if any(pd.isna(c) for c in counts)
                else float(pd.Series(counts, dtype=float).mean()),
            }
        )
    return pd.DataFrame(rows, columns=list(SwowInstances.to_schema().columns))


def _skip(j: int, skipped: list[int]) -> int:
    """Position in the sorted pool of the j-th (0-based) element that is not in ``skipped`` (sorted)."""
    for s in skipped:
        if s <= j:
            j += 1
        else:
            break
    return j


def run(params: Params) -> Metrics:
    """Stage entry point: ocr + concept_filter + edges -> candidate_sets, swow_instances."""
    p = params.instances
    sets = {int(k): int(v) for k, v in p.game_sets.items()}
    cf = catalog.read_table("concept_filter")
    pool = accepted_pool(catalog.read_table("ocr"), cf)
    sets_df = game_candidate_sets(pool, sets, p.seed)
    swow = swow_instances(
        catalog.read_table("edges"),
        pool,
        set(cf.loc[cf["status"] != "ok", "concept"]),
        p.seed,
        p.swow.max_associations,
        p.swow.min_r123_count,
    )
    catalog.write_table(sets_df, "candidate_sets")
    catalog.write_table(swow, "swow_instances")
    return {
        "pool": len(pool),
        "candidate_sets": sets_df["num_candidates"].value_counts().sort_index().to_dict(),
        "candidate_sets_skipped_sizes": [n for n in sets if n > len(pool) and sets[n] > 0],
        "swow_instances": swow["status"].value_counts().sort_index().to_dict(),
    }

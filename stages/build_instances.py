"""Stage 5, ``build_instances``: game candidate sets and SWOW-baseline instances.

- **Game candidate sets** (paper §2.2; reference "Random candidate sets"): N images sampled
  uniformly without replacement from the pool of accepted images (after profanity and OCR
  filtering), ``instances.game_sets[N]`` sets for each N in 5, 6, 10, 12, seeded. A spymaster
  then gives two cues per set (imported by ``import_annotations``).
- **SWOW-baseline instances** (paper §3.1; generation code unpublished, rules from the
  reference): for each cue, associations = its strongest SWOW responses (edge ``rank``) that
  have an accepted image and at least ``instances.swow.min_r123_count`` R123 responses when
  counts are known, up to ``max_associations`` (K in 2..4); distractors = accepted concepts
  that are linked to the cue in neither SWOW direction (never a response of the cue, and the cue
  never a response of theirs: paper §3.1, "distractors that are not associated with the cue in the
  SWOW graph"); N = 5 or 6 in total; candidates shuffled. Each cue
  uses its own RNG seeded from (seed, cue), so adding cues never changes existing instances.
- **Concreteness** (reference: every released SWOW association and distractor has a Brysbaert
  rating >= 4.03; cues are not filtered): with ``instances.swow.min_concreteness`` set (default
  4.0), associations and distractors must have a Brysbaert et al. (2014) rating >= it
  (:mod:`gavil.domain.concreteness`). Every word considered gets its fate in the ``concreteness``
  table (rating, status, reason); each instance lists in ``dropped_words`` the responses it skipped
  as associations ("word: reason"). ``null`` turns the filter off.
- **Ambiguity**: ``candidates_connectivity_score`` = the number of distinct candidate subsets
  (size >= 2) that other SWOW cues link to (:func:`gavil.domain.concreteness.connectivity_scores`);
  with ``instances.swow.max_connectivity`` set, instances above it are ``too_ambiguous``.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, TypedDict, cast

import numpy as np
import pandas as pd

from gavil.domain.concreteness import brysbaert_norms, connectivity_scores, judge
from gavil.domain.vocabulary import CANDIDATE_SIZES, name_key
from gavil.pipeline import catalog
from schemas.instances import CandidateSets, Concreteness, SwowInstances

if TYPE_CHECKING:
    from gavil.params import Params


class Metrics(TypedDict):
    """``data/metrics/build_instances.json``."""

    pool: int  # accepted concepts
    candidate_sets: dict[int, int]  # N -> sets
    candidate_sets_skipped_sizes: list[int]  # N larger than the pool
    swow_instances: dict[str, int]  # status -> instances
    concreteness: dict[str, int]  # status -> words considered (pool and candidate associations)


def accepted_pool(ocr: pd.DataFrame, concept_filter: pd.DataFrame) -> list[str]:
    """Sorted concepts whose image passed OCR and whose word passed the profanity filter, one per
    name (:func:`gavil.domain.vocabulary.name_key`: of concepts that read alike, the first in
    sorted order), so no candidate set holds two names that look the same."""
    ok_words = set(concept_filter.loc[concept_filter["status"] == "ok", "concept"])
    pool: dict[str, str] = {}
    for concept in sorted(set(ocr.loc[ocr["status"] == "accepted", "concept"]) & ok_words):
        pool.setdefault(name_key(concept), concept)
    return sorted(pool.values())


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
    min_concreteness: float | None = None,
    max_connectivity: int | None = None,
    norms: dict[str, float] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One :class:`schemas.instances.SwowInstances` row per cue (ok or why not), cues sorted, and
    the :class:`schemas.instances.Concreteness` fate of every word considered.

    Args:
        edges: :class:`schemas.ingest.Edges` rows (cue, response, rank, r123_count may be null).
        pool: accepted concepts (images that passed OCR, words that passed profanity).
        profane: cues flagged by ``filter_profanity``.
        min_concreteness: Brysbaert threshold for associations and distractors (None: no filter).
        max_connectivity: instances with a larger ``candidates_connectivity_score`` are too_ambiguous.
        norms: word -> rating (default: :func:`gavil.domain.concreteness.brysbaert_norms` when filtering).

    Linear in the edges plus, per cue, its own responses: the distractors are drawn by index from
    the sorted pool with the cue's responses skipped, never by materialising a per-cue copy of
    the pool (at SWOW scale, 12,000 cues x 12,000 concepts, that copy took minutes).
    """
    e = edges.sort_values(["cue", "rank"], kind="stable")
    eligible = (
        e["response"].isin(set(pool))
        & (e["r123_count"].isna() | (e["r123_count"].fillna(0) >= min_r123_count))
        & (e["response"] != e["cue"])
    )
    fate: dict[str, tuple[bool, float | None, str | None]] = {}
    if min_concreteness is not None:
        norms = brysbaert_norms() if norms is None else norms
        for w in sorted(set(pool) | set(e.loc[eligible, "response"])):
            fate[w] = judge(w, min_concreteness, norms)
    concrete = {w for w, f in fate.items() if f[0]} if min_concreteness is not None else set(pool)
    pool_sorted = sorted(set(pool) & concrete)  # distractors come from concrete words only
    where = {c: i for i, c in enumerate(pool_sorted)}
    assoc_of, counts_of, dropped_of = _associations(e[eligible], concrete, fate, max_associations)
    # cast: pandas-stubs types to_dict() keys as Hashable; these are the cue column's str values
    responses_of = cast(dict[str, list[str]], e.groupby("cue", sort=False)["response"].agg(list).to_dict())
    # words that gave the cue as a response (the other SWOW direction): linked to the cue, never distractors
    cues_giving = cast(dict[str, list[str]], e.groupby("response", sort=False)["cue"].agg(list).to_dict())
    rows = []
    for cue in sorted(responses_of):
        linked = [*responses_of[cue], *cues_giving.get(cue, []), cue]  # either SWOW direction
        rows.append(
            _cue_row(
                cue,
                assoc_of.get(cue, []),
                counts_of.get(cue, []),
                dropped_of.get(cue, []),
                cue in profane,
                linked,
                pool_sorted,
                where,
                seed,
            )
        )
    out = pd.DataFrame(rows, columns=list(SwowInstances.to_schema().columns))
    _score_connectivity(out, responses_of, max_connectivity)
    return out, _concreteness_table(fate, pool)


def _associations(
    cand: pd.DataFrame,
    concrete: set[str],
    fate: dict[str, tuple[bool, float | None, str | None]],
    max_associations: int,
) -> tuple[dict[str, list[str]], dict[str, list[float]], dict[str, list[str]]]:
    """Each cue's associations from ``cand`` (its eligible edges, by cue then rank): its first
    ``max_associations`` ``concrete`` responses. Returns cue -> associations, cue -> their R123
    counts (NaN: unknown), and cue -> the responses skipped that would have been associations
    (``"word: reason"``, the reason from ``fate``)."""
    keep = cand["response"].isin(concrete)
    strong = cand[keep].groupby("cue", sort=False).head(max_associations)
    # casts: pandas-stubs types to_dict() keys as Hashable; these are the cue column's str values
    assoc_of = cast(dict[str, list[str]], strong.groupby("cue", sort=False)["response"].agg(list).to_dict())
    counts_of = cast(dict[str, list[float]], strong.groupby("cue", sort=False)["r123_count"].agg(list).to_dict())
    last_rank = strong.groupby("cue", sort=False)["rank"].max().to_dict()
    dropped_of: dict[str, list[str]] = {}
    for cue, resp, rank in zip(cand.loc[~keep, "cue"], cand.loc[~keep, "response"], cand.loc[~keep, "rank"]):
        full = len(assoc_of.get(cue, [])) >= max_associations
        if not full or rank < last_rank[cue]:  # it would have been an association
            dropped_of.setdefault(cue, []).append(f"{resp}: {fate[resp][2]}")
    return assoc_of, counts_of, dropped_of


def _cue_row(
    cue: str,
    assoc: list[str],
    counts: list[float],
    dropped: list[str],
    is_profane: bool,
    linked: list[str],
    pool_sorted: list[str],
    where: dict[str, int],
    seed: int,
) -> dict[str, object]:
    """One cue's :class:`schemas.instances.SwowInstances` row: ``profane_cue``, ``too_few_associations``
    (fewer than 2 in ``assoc``), ``too_few_distractors`` or ``ok`` with N = 5 or 6 (at least K + 1)
    candidates: ``assoc`` and distractors from ``pool_sorted`` outside ``linked`` (``where``: a
    word's position there), shuffled, all drawn by the cue's own RNG (:func:`_cue_rng`)."""
    base = {
        "instance_id": f"swow:{cue}",
        "cue": cue,
        "associations": [],
        "candidates": [],
        "num_associations": 0,
        "num_candidates": 0,
        "associations_mean_weight": None,
        "candidates_connectivity_score": None,
        "dropped_words": dropped,
    }
    if is_profane:
        return {**base, "status": "profane_cue", "reason": "cue flagged by filter_profanity"}
    if len(assoc) < 2:
        return {
            **base,
            "status": "too_few_associations",
            "reason": f"{len(assoc)} response(s) with an accepted image (need 2)",
        }
    rng = _cue_rng(seed, cue)
    n = int(rng.choice([5, 6]))
    n = max(n, len(assoc) + 1)
    skipped = sorted({where[r] for r in linked if r in where})  # pool positions that are not distractors
    available = len(pool_sorted) - len(skipped)
    if available < n - len(assoc):
        return {
            **base,
            "associations": assoc,
            "num_associations": len(assoc),
            "status": "too_few_distractors",
            "reason": f"{available} distractors available, need {n - len(assoc)}",
        }
    distractors = [pool_sorted[_skip(j, skipped)] for j in rng.choice(available, size=n - len(assoc), replace=False)]
    candidates = assoc + distractors
    candidates = [candidates[j] for j in rng.permutation(len(candidates))]
    return {
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


def _score_connectivity(out: pd.DataFrame, responses_of: dict[str, list[str]], max_connectivity: int | None) -> None:
    """Fill ``out``'s ``candidates_connectivity_score`` (float) on its ``ok`` rows, in place
    (:func:`gavil.domain.concreteness.connectivity_scores` over ``responses_of``); with
    ``max_connectivity`` set, those above it become ``too_ambiguous`` with the reason."""
    ok = out["status"] == "ok"
    scores = connectivity_scores(list(out.loc[ok, "candidates"]), list(out.loc[ok, "cue"]), responses_of)
    out["candidates_connectivity_score"] = out["candidates_connectivity_score"].astype(float)
    out.loc[ok, "candidates_connectivity_score"] = [float(x) for x in scores]
    if max_connectivity is not None:
        amb = ok & (out["candidates_connectivity_score"] > max_connectivity)
        out.loc[amb, "status"] = "too_ambiguous"
        out.loc[amb, "reason"] = [
            f"candidates_connectivity_score {x:g} > {max_connectivity}"
            for x in out.loc[amb, "candidates_connectivity_score"]
        ]


def _concreteness_table(fate: dict[str, tuple[bool, float | None, str | None]], pool: list[str]) -> pd.DataFrame:
    """The :class:`schemas.instances.Concreteness` rows: each judged word (``fate``: word ->
    (concrete, rating, reason)) in judging order, its status and whether it is in ``pool``."""
    return pd.DataFrame(
        [
            {
                "word": w,
                "rating": f[1],
                "status": "concrete" if f[0] else ("unrated" if f[1] is None else "not_concrete"),
                "reason": f[2],
                "in_pool": w in set(pool),
            }
            for w, f in fate.items()
        ],
        columns=list(Concreteness.to_schema().columns),
    )


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
    swow, words = swow_instances(
        catalog.read_table("edges"),
        pool,
        set(cf.loc[cf["status"] != "ok", "concept"]),
        p.seed,
        p.swow.max_associations,
        p.swow.min_r123_count,
        p.swow.min_concreteness,
        p.swow.max_connectivity,
    )
    catalog.write_table(sets_df, "candidate_sets")
    catalog.write_table(swow, "swow_instances")
    catalog.write_table(words, "concreteness")
    # casts: pandas-stubs types to_dict() keys as Hashable; here they are the counted columns' values
    return {
        "pool": len(pool),
        "candidate_sets": cast(dict[int, int], sets_df["num_candidates"].value_counts().sort_index().to_dict()),
        "candidate_sets_skipped_sizes": [n for n in sets if n > len(pool) and sets[n] > 0],
        "swow_instances": cast(dict[str, int], swow["status"].value_counts().sort_index().to_dict()),
        "concreteness": cast(dict[str, int], words["status"].value_counts().sort_index().to_dict()),
    }

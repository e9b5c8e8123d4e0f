"""The WinoGAViL semantics: Jaccard index, rival-model prompt, top-K, fool-the-AI and
solvable-by-humans scores.

Every formula here is fixed by the released WinoGAViL code and data; the source is named
on each function (paper = Bitton et al., NeurIPS 2022, "WinoGAViL"; release =
WinoGAViL-experiments ``assets/`` files, copied in ``data/sample/winogavil``).
Scores are *fractions* in [0, 1] unless a name says ``percent`` or ``score`` (0-100 ints).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from math import comb
from statistics import fmean, pstdev

import numpy as np

from gavil.domain.vocabulary import CANDIDATE_SIZES, K_LIMITS

#: Random expected Jaccard x100 for N = 5, 6, 10, 12 (paper §2).
RANDOM_EXPECTED_JACCARD_PERCENT: dict[int, int] = {5: 38, 6: 34, 10: 24, 12: 17}
#: Released fool-the-AI values per K (WINOGAVIL reference; checked against the release in tests).
FOOL_THE_AI_VALUES: dict[int, frozenset[int]] = {
    2: frozenset({0, 67, 100}),
    3: frozenset({0, 50, 80, 100}),
    4: frozenset({0, 40, 67, 86, 100}),
}
_VOWELS = frozenset("aeiou")


def jaccard(a: Sequence[str], b: Sequence[str]) -> float:
    """Jaccard index |A ∩ B| / |A ∪ B| of two selections of image names (paper §2, fn. 3).

    Returns a fraction in [0, 1]. Two empty selections give 0.0 (never happens in the game:
    K >= 2).
    """
    sa, sb = set(a), set(b)
    union = sa | sb
    return len(sa & sb) / len(union) if union else 0.0


def cue_key(cue: str) -> str:
    """The cue as models read it: surrounding white space trimmed, lower-cased (``str.lower``).

    What a text model embeds for the cue (and the embedding cache's key for it), and what the
    rival's prompt is built on (:func:`prompt_for_cue`; reference "Formulas": "lower-case the cue").
    """
    return cue.strip().lower()


def prompt_for_cue(cue: str) -> str:
    """The rival model's text prompt "A/An [cue]" (paper §2.1).

    Lower-cases the cue; "An " when its first *letter* is a vowel (a e i o u), else "A ".
    A letter test, not a sound test: "unicorn" -> "An unicorn", "hour" -> "A hour".

    Raises:
        ValueError: for an empty cue.
    """
    c = cue_key(cue)
    if not c:
        raise ValueError("cue is empty")
    return ("An " if c[0] in _VOWELS else "A ") + c


def jaccard_from_overlap(overlap: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Jaccard index of two K-item selections that share ``overlap`` items: ``overlap / (2K - overlap)``.

    The vectorised form of :func:`jaccard` when both sides have exactly K items, as a model's top-K
    and the K associations always do (reference "Formulas": predictions always have K items), since
    |A ∪ B| = 2K - |A ∩ B|. ``overlap`` and ``k``: integer arrays of one shape (broadcastable);
    returns float64 fractions in [0, 1].
    """
    jac: np.ndarray = overlap / (2 * k - overlap)
    return jac


@cache
def random_expected_jaccard(n: int, k: int) -> float:
    """Expected Jaccard of a uniformly random K-subset of N candidates against the K associations
    (fraction): the paper's "random expected Jaccard index" (§2) for one (N, K).

    E[J] = sum_i C(K,i) C(N-K,K-i) / C(N,K) * i / (2K - i): the overlap i is hypergeometric and two
    K-sets overlapping in i have Jaccard i / (2K - i) (:func:`jaccard_from_overlap`). Exact up to
    float rounding (the terms are summed in the order i = 0..K). The paper's per-N figures
    (:data:`RANDOM_EXPECTED_JACCARD_PERCENT`) average over its instances' K and are not re-derived here.

    Raises:
        ValueError: for N < 1 or K outside 1..N (a random K-subset must exist).
    """
    if not 1 <= k <= n:
        raise ValueError(f"k={k} outside 1..{n}")
    total = comb(n, k)
    return sum(comb(k, i) * comb(n - k, k - i) / total * i / (2 * k - i) for i in range(0, k + 1))


def rank_by_score(scores: np.ndarray) -> np.ndarray:
    """Candidate positions in the rival model's rank order: descending score, ties in candidate order.

    The model-prediction rule (reference "Formulas": "top-K; ties keep candidate order (stable
    sort)"; the release's ``Counter.most_common`` keeps insertion order on ties) as
    ``np.argsort(-scores, axis=-1, kind="stable")``. ``scores``: float array, candidates on the last
    axis (1-D for one instance, (n, width) for many); -inf padding ranks last, NaN after it.
    Returns int64 positions of the same shape. The top K are the first K positions.
    """
    return np.argsort(-np.asarray(scores), axis=-1, kind="stable")


def top_k_positions(scores: Sequence[float] | np.ndarray, k: int) -> list[int]:
    """Positions of one instance's K highest-scoring candidates in rank order (:func:`rank_by_score`).

    Raises:
        ValueError: k outside 1..len(scores).
    """
    s = np.asarray(scores)
    if not 1 <= k <= len(s):
        raise ValueError(f"k={k} outside 1..{len(s)}")
    top: list[int] = rank_by_score(s)[:k].tolist()
    return top


def top_k_mask(scores: np.ndarray, k: np.ndarray) -> np.ndarray:
    """For many instances: bool (n, width), True on each row's K[i] top candidates (:func:`rank_by_score`).

    ``scores``: (n, width) floats, -inf on padding; ``k``: (n,) ints, each <= the row's candidates.
    """
    order = rank_by_score(scores)
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(scores.shape[1])[None, :].repeat(len(scores), 0), axis=1)
    return rank < k[:, None]


def top_k(candidates: Sequence[str], similarities: Sequence[float] | np.ndarray, k: int) -> list[str]:
    """The K candidates with the highest similarity, in rank order (:func:`top_k_positions`).

    Raises:
        ValueError: if lengths differ or k is not in 1..len(candidates).
    """
    if len(candidates) != len(similarities):
        raise ValueError(f"{len(candidates)} candidates but {len(similarities)} similarities")
    return [candidates[i] for i in top_k_positions(similarities, k)]


def fool_the_ai_score(prediction: Sequence[str], associations: Sequence[str]) -> int:
    """Spymaster's fool-the-AI score: ``100 - int(100 * J(prediction, associations))``.

    Truncation, not rounding (release: K=2 gives {0, 67, 100}). Returns an int in 0..100.
    """
    return 100 - int(100 * jaccard(prediction, associations))


def solver_jaccards(selections: Sequence[Sequence[str]], associations: Sequence[str]) -> list[float]:
    """Per-solver Jaccard index of each solver's selection against the associations."""
    return [jaccard(s, associations) for s in selections]


def solvable_by_humans(jaccards: Sequence[float]) -> tuple[float, float]:
    """(``solvers_jaccard_mean``, ``solvers_jaccard_std``) as released.

    mean = ``round(mean(J1..Jn), 2)``; std = ``round(population std (ddof=0), 2)``
    (release: means {1.0, 0.87, 0.83}, stds {0.0, 0.19, 0.24} for 3 solvers).

    Raises:
        ValueError: for no solvers.
    """
    if not jaccards:
        raise ValueError("no solver Jaccards")
    return round(fmean(jaccards), 2), round(pstdev(jaccards), 2)


def solver_agreement(selections: Sequence[Sequence[str]]) -> float:
    """3-way agreement |S1 ∩ S2 ∩ ...| / |S1 ∪ S2 ∪ ...| of the solvers' selections (fraction)."""
    if not selections:
        raise ValueError("no selections")
    sets = [set(s) for s in selections]
    union = set().union(*sets)
    return len(set.intersection(*sets)) / len(union) if union else 0.0


def k_is_valid(num_candidates: int, k: int) -> bool:
    """Whether K associations are allowed for N candidates by the game UI (:data:`K_LIMITS`)."""
    lo_hi = K_LIMITS.get(num_candidates)
    return lo_hi is not None and lo_hi[0] <= k <= lo_hi[1]


def candidate_group(num_candidates: int) -> str:
    """The paper's reporting group for N: "5&6" or "10&12" (paper Table 1 / Table 4)."""
    if num_candidates in (5, 6):
        return "5&6"
    if num_candidates in (10, 12):
        return "10&12"
    raise ValueError(f"num_candidates={num_candidates} is not one of {CANDIDATE_SIZES}")

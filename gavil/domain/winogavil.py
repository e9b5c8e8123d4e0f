"""The WinoGAViL semantics: Jaccard index, rival-model prompt, top-K, fool-the-AI and
solvable-by-humans scores.

Every formula here is fixed by the released WinoGAViL code and data; the source is named
on each function (paper = Bitton et al., NeurIPS 2022, "WinoGAViL"; release =
WinoGAViL-experiments ``assets/`` files, copied in ``data/sample/winogavil``).
Scores are *fractions* in [0, 1] unless a name says ``percent`` or ``score`` (0-100 ints).
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import fmean, pstdev

from gavil.domain.vocabulary import CANDIDATE_SIZES, K_LIMITS  # noqa: F401  (re-exported: the semantics use them)

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


def prompt_for_cue(cue: str) -> str:
    """The rival model's text prompt "A/An [cue]" (paper §2.1).

    Lower-cases the cue; "An " when its first *letter* is a vowel (a e i o u), else "A ".
    A letter test, not a sound test: "unicorn" -> "An unicorn", "hour" -> "A hour".

    Raises:
        ValueError: for an empty cue.
    """
    c = cue.strip().lower()
    if not c:
        raise ValueError("cue is empty")
    return ("An " if c[0] in _VOWELS else "A ") + c


def top_k(candidates: Sequence[str], similarities: Sequence[float], k: int) -> list[str]:
    """The K candidates with the highest similarity; ties keep candidate order (stable sort).

    Raises:
        ValueError: if lengths differ or k is not in 1..len(candidates).
    """
    if len(candidates) != len(similarities):
        raise ValueError(f"{len(candidates)} candidates but {len(similarities)} similarities")
    if not 1 <= k <= len(candidates):
        raise ValueError(f"k={k} outside 1..{len(candidates)}")
    order = sorted(range(len(candidates)), key=lambda i: -similarities[i])  # sorted() is stable
    return [candidates[i] for i in order[:k]]


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

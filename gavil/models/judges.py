"""Judges of an Adversarial Filtering variant: models of *other families* than the adversary, scored
on held-out instances (SWAG, Zellers et al. 2018 §5 and WinoGrande, Sakaguchi et al. 2020 §5 report
the drop on models other than the one that filtered).

A judge maps (instance, candidate) pairs to scores; on a held-out instance it predicts the K
top-scored candidates. Its held-out *Jaccard* is the mean of ``|pred ∩ assoc| / |pred ∪ assoc|``
(chance: :func:`gavil.domain.winogavil.random_expected_jaccard`), its held-out *accuracy* the mean
share of candidates labelled right when the top K are called associations: with overlap t,
``(N - 2K + 2t) / N``, chance ``(N - 2K + 2K²/N) / N`` (E[t] = K²/N, hypergeometric mean).
Ties are broken by a seeded random order of each held-out instance's candidates, never by their
position (positives first would favour them).

Families (the adversary must be of none of them; :class:`gavil.params.adversarial.AdversarialFilterParams`
checks the text model):

- ``length``: logistic regression on the candidate name's length (characters, words) — surface;
- ``k_shortest``: no training, the K shortest names (characters) — surface, a rule;
- ``surface``: logistic regression on length, word count and hashed character 1-3-grams of the
  name (a bag-of-characters) plus the cue/name character-trigram Jaccard — surface;
- ``text``: logistic regression on another text model's pair features ``[cue ⊙ c, c]``
  (e.g. MPNet when the adversary is MiniLM).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from gavil.domain.winogavil import cue_key, random_expected_jaccard
from gavil.models.embeddings import Cache
from gavil.models.features import embed, fit_logistic, pair_features, topk_credit
from gavil.models.loading import ModelSpec, RuntimeOptions, WeightsUnavailable, load_model

if TYPE_CHECKING:
    from gavil.params import Params

#: (instance indices, concept indices) -> (rows, features) float64
PairFeatures = Callable[[np.ndarray, np.ndarray], np.ndarray]


class JudgeScore(TypedDict):
    """One judge on one held-out split (fractions in [0, 1])."""

    jaccard: float
    chance_jaccard: float
    accuracy: float
    chance_accuracy: float


@dataclass(frozen=True)
class Judge:
    """A held-out judge: ``features`` for a logistic regression, or ``rule`` scores (no training)."""

    name: str
    family: str
    features: PairFeatures | None = None
    rule: PairFeatures | None = None

    def scores(
        self, train: tuple[np.ndarray, np.ndarray, np.ndarray], test: tuple[np.ndarray, np.ndarray], seed: int
    ) -> np.ndarray:
        """(rows,) float scores of the test pairs; ``train`` = (instance idx, concept idx, bool label)."""
        if self.rule is not None:
            return self.rule(*test).astype(float)
        assert self.features is not None
        x = self.features(train[0], train[1])
        mu, sd = x.mean(axis=0), x.std(axis=0) + 1e-6  # lengths and vectors on one scale
        clf = fit_logistic((x - mu) / sd, train[2], 200, seed)
        scores: np.ndarray = clf.decision_function((self.features(*test) - mu) / sd)
        return scores


def _lengths(names: Sequence[str]) -> np.ndarray:
    return np.array([[len(n), len(n.split())] for n in names], dtype=np.float64)


def length_judge(names: Sequence[str]) -> Judge:
    """Logistic regression on (characters, words) of the candidate's name (``names[concept]``)."""
    lens = _lengths(names)
    return Judge("length", "surface", features=lambda ii, cc: lens[cc])


def k_shortest_judge(names: Sequence[str]) -> Judge:
    """The rule "the K shortest names are the associations" (score = -characters)."""
    chars = _lengths(names)[:, 0]
    return Judge("k_shortest", "surface", rule=lambda ii, cc: -chars[cc])


def _trigrams(text: str) -> set[str]:
    t = f" {text.lower()} "
    return {t[i : i + 3] for i in range(len(t) - 2)}


def surface_judge(names: Sequence[str], cues: Sequence[str], n_features: int = 512) -> Judge:
    """Logistic regression on [characters, words, hashed char 1-3-grams of the name (scikit-learn
    ``HashingVectorizer``, ``char_wb``, ``n_features``, l2), cue/name character-trigram Jaccard]."""
    from sklearn.feature_extraction.text import HashingVectorizer

    grams = (
        HashingVectorizer(analyzer="char_wb", ngram_range=(1, 3), n_features=n_features, alternate_sign=False)
        .transform(list(names))
        .toarray()
        .astype(np.float64)
    )
    base = np.hstack([_lengths(names), grams])
    ctri, ntri = [_trigrams(c) for c in cues], [_trigrams(n) for n in names]

    def feats(ii: np.ndarray, cc: np.ndarray) -> np.ndarray:
        overlap = [len(ctri[i] & ntri[c]) / max(1, len(ctri[i] | ntri[c])) for i, c in zip(ii, cc)]
        return np.hstack([base[cc], np.array(overlap, dtype=np.float64)[:, None]])

    return Judge("surface", "surface", features=feats)


def text_judge(name: str, family: str, cue_vecs: np.ndarray, concept_vecs: np.ndarray) -> Judge:
    """Logistic regression on a text model's pair features ``[cue ⊙ c, c]``
    (:func:`gavil.models.features.pair_features`); ``cue_vecs`` (instances, d), ``concept_vecs`` (concepts, d)."""
    return Judge(name, family, features=lambda ii, cc: pair_features(cue_vecs[ii], concept_vecs[cc]))


def judge(
    judges: Sequence[Judge],
    positives: Sequence[np.ndarray],
    assigned: Sequence[np.ndarray],
    train: np.ndarray,
    test: np.ndarray,
    seed: int,
) -> dict[str, JudgeScore]:
    """Each judge trained on the ``train`` instances' current candidates (positives labelled True)
    and scored on the ``test`` instances (module docstring: Jaccard, accuracy, their chance).

    Args:
        positives: per instance, concept indices of the associations.
        assigned: per instance, concept indices of the distractors.
        train: instance indices the judges learn from.
        test: instance indices they are scored on (disjoint from ``train``).
        seed: the tie-break order and the fits' seed.
    """
    rng = np.random.default_rng([seed, 7])
    ti = np.concatenate([np.full(len(positives[i]) + len(assigned[i]), i) for i in train])
    tc = np.concatenate([np.r_[positives[i], assigned[i]] for i in train])
    ty = np.concatenate([np.r_[np.ones(len(positives[i])), np.zeros(len(assigned[i]))] for i in train]) > 0
    cands, labels = [], []
    for i in test:
        order = rng.permutation(len(positives[i]) + len(assigned[i]))
        cands.append(np.r_[positives[i], assigned[i]][order])
        labels.append((np.arange(len(order)) < len(positives[i]))[order])
    width = max(len(c) for c in cands)
    mask = np.arange(width)[None, :] < np.array([len(c) for c in cands])[:, None]
    lab = np.zeros(mask.shape, dtype=bool)
    lab[mask] = np.concatenate(labels)
    k = np.array([len(positives[i]) for i in test])
    n = np.array([len(c) for c in cands])
    qi = np.concatenate([np.full(len(c), i) for c, i in zip(cands, test)])
    qc = np.concatenate(cands)
    chance_j = float(np.mean([random_expected_jaccard(int(a), int(b)) for a, b in zip(n, k)]))
    chance_a = float(np.mean((n - 2 * k + 2 * k**2 / n) / n))
    out: dict[str, JudgeScore] = {}
    for j in judges:
        s = np.full(mask.shape, -np.inf)
        s[mask] = j.scores((ti, tc, ty), (qi, qc), seed)
        jac = topk_credit(s, lab, k)
        overlap = np.rint(jac * 2 * k / (1 + jac))  # J = t / (2K - t)  =>  t = 2KJ / (1 + J)
        out[j.name] = {
            "jaccard": float(jac.mean()),
            "chance_jaccard": chance_j,
            "accuracy": float(np.mean((n - 2 * k + 2 * overlap) / n)),
            "chance_accuracy": chance_a,
        }
    return out


def at_chance(scores: dict[str, JudgeScore], tolerance: float) -> bool:
    """Every judge's held-out Jaccard and accuracy within ``tolerance`` (a fraction) of chance."""
    return all(
        abs(s["jaccard"] - s["chance_jaccard"]) <= tolerance and abs(s["accuracy"] - s["chance_accuracy"]) <= tolerance
        for s in scores.values()
    )


def load_judges(
    params: Params, cues: list[str], universe: list[str], cache: Cache
) -> tuple[list[Judge], dict[str, str]]:
    """The ``judges`` of :mod:`gavil.models.judges` over ``universe`` (concept names) and ``cues``
    (one per instance), and each one's status (``ok`` or ``skipped: <code>: <why>``)."""
    p = params.adversarial_filter
    judges: list[Judge] = []
    status: dict[str, str] = {}
    for name in p.judges:
        if name == "length":
            judges.append(length_judge(universe))
        elif name == "k_shortest":
            judges.append(k_shortest_judge(universe))
        elif name == "surface":
            judges.append(surface_judge(universe, cues))
        elif p.judge_text_model is not None:  # the params require it with the text judge
            judge_model = p.judge_text_model
            entry = params.models[judge_model]
            try:
                model = load_model(ModelSpec.of(judge_model, entry), RuntimeOptions.of(entry))
            except WeightsUnavailable as e:
                status[judge_model] = f"skipped: {e.code}: {e.reason}"
                print(f"adversarial_filter: judge {judge_model} SKIPPED - {e.log_text()}", file=sys.stderr)
                continue
            cue_vecs, cvecs = embed(model, cues, universe, cache)
            judges.append(
                text_judge(
                    judge_model,
                    f"text: {entry.model}",
                    np.stack([cue_vecs[cue_key(c)] for c in cues]),
                    np.stack([cvecs[c] for c in universe]),
                )
            )
    status |= {j.name: "ok" for j in judges}
    return judges, status

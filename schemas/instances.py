"""Tables of the ``build_instances`` stage: game candidate sets and SWOW-baseline instances."""

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from gavil.domain.vocabulary import CANDIDATE_SIZES
from schemas import StrictModel, exact, list_field

SWOW_STATUSES = ["ok", "profane_cue", "too_few_associations", "too_few_distractors", "too_ambiguous"]


class CandidateSets(StrictModel):
    """Random candidate sets for the spymaster game (sampled without replacement)."""

    set_id: Series[str] = pa.Field(unique=True)
    num_candidates: Series[int] = pa.Field(isin=list(CANDIDATE_SIZES))
    candidates: Series[object] = list_field("str", min_len=5)
    images_source: Series[str] = pa.Field(isin=["random"])

    @pa.dataframe_check(error="len(candidates) must equal num_candidates, without repeats")
    def sizes(cls, df: pd.DataFrame) -> pd.Series:
        return pd.Series(
            [len(c) == n and len(set(c)) == n for c, n in zip(df["candidates"], df["num_candidates"])],
            index=df.index,
            dtype=bool,
        )


class SwowInstances(StrictModel):
    """One row per SWOW cue: the baseline instance built from it, or why none was."""

    instance_id: Series[str] = pa.Field(unique=True)
    cue: Series[str]
    status: Series[str] = pa.Field(isin=SWOW_STATUSES)
    reason: Series[str] = pa.Field(nullable=True)
    associations: Series[object] = list_field("str")
    candidates: Series[object] = list_field("str")
    num_associations: Series[int] = pa.Field(ge=0)
    num_candidates: Series[int] = pa.Field(ge=0)
    associations_mean_weight: Series[float] = pa.Field(
        nullable=True, description="mean R123 count of the associations", metadata=exact("a mean of integer counts")
    )
    candidates_connectivity_score: Series[float] = pa.Field(
        nullable=True,
        ge=0,
        description="distinct candidate subsets (size >= 2) other SWOW cues link to (ok rows)",
        metadata=exact("an integer count"),
    )
    dropped_words: Series[object] = list_field("str", description="responses skipped as associations: 'word: reason'")

    @pa.dataframe_check(error="ok rows need 2..4 associations among 5 or 6 candidates")
    def ok_shape(cls, df: pd.DataFrame) -> pd.Series:
        ok = df["status"] == "ok"
        good = df["num_associations"].between(2, 4) & df["num_candidates"].isin([5, 6])
        return ~ok | good


class Concreteness(StrictModel):
    """Brysbaert concreteness fate of every word the SWOW baseline considered (pool words and
    candidate associations); empty when ``instances.swow.min_concreteness`` is null."""

    word: Series[str] = pa.Field(unique=True)
    rating: Series[float] = pa.Field(
        nullable=True,
        ge=1,
        le=5,
        description="Brysbaert et al. 2014 mean, 1-5",
        metadata=exact("as in the published norms"),
    )
    status: Series[str] = pa.Field(isin=["concrete", "not_concrete", "unrated"])
    reason: Series[str] = pa.Field(nullable=True)
    in_pool: Series[bool] = pa.Field(description="an accepted concept (possible distractor)")

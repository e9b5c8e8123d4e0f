"""Tables of the ``evaluate`` stage: per-instance predictions and the Table-4 style summary."""

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from gavil.domain.vocabulary import CANDIDATE_SIZES
from schemas import MODEL_DECIMALS, PERCENT_DECIMALS, StrictModel, exact, list_field, rounded

STATUSES = ["ok", "untrained", "no_weights", "missing_image"]


class EvalPredictions(StrictModel):
    """One row per (model, benchmark instance)."""

    model_name: Series[str]
    weights_id: Series[str] = pa.Field(description="tag, file:<sha16>, untrained, text model id, or 'release'")
    dataset: Series[str] = pa.Field(isin=["game", "swow_baseline"])
    instance_id: Series[str]
    num_candidates: Series[int] = pa.Field(isin=list(CANDIDATE_SIZES))
    status: Series[str] = pa.Field(isin=STATUSES)
    reason: Series[str] = pa.Field(
        nullable=True,
        description=(
            "ok: null, or 'stored predictions from the WinoGAViL release'; "
            "missing_image: the candidates without an accepted image; untrained: "
            "'random weights ...'; no_weights: a fixed sentence naming models.<entry>.weights_path "
            "(gavil.models.weights.no_weights_reason), never the OS's or a library's error text"
        ),
    )
    predictions: Series[object] = list_field("str", nullable=True)
    similarities: Series[object] = list_field(
        "float",
        nullable=True,
        decimals=MODEL_DECIMALS,
        description="every candidate's score, in candidate order (null: top-K only)",
    )
    jaccard: Series[float] = pa.Field(nullable=True, ge=0, le=1, metadata=exact("a ratio of two set sizes"))
    score_fool_the_ai: Series[pd.Int64Dtype] = pa.Field(
        nullable=True, ge=0, le=100, description="100 - int(100 * jaccard)"
    )
    random_jaccard: Series[float] = pa.Field(
        ge=0, le=1, description="expected Jaccard of a uniformly random K-subset", metadata=rounded(MODEL_DECIMALS)
    )

    @pa.dataframe_check(error="a Jaccard exactly where a model predicted (ok/untrained)")
    def scored_rows(cls, df: pd.DataFrame) -> pd.Series:
        scored = df["status"].isin(["ok", "untrained"])
        return (scored == df["jaccard"].notna()) & (scored == df["score_fool_the_ai"].notna())


class Evaluation(StrictModel):
    """Mean Jaccard x100 per model and cell (dataset x N or group), with a 95 % bootstrap CI."""

    model_name: Series[str]
    weights_id: Series[str]
    dataset: Series[str]
    breakdown: Series[str] = pa.Field(isin=["num_candidates", "group", "all"])
    cell: Series[str] = pa.Field(description="5, 6, 10, 12, 5&6, 10&12 or all")
    n_instances: Series[int] = pa.Field(ge=0)
    n_scored: Series[int] = pa.Field(ge=0)
    untrained: Series[bool]
    mean_jaccard_percent: Series[float] = pa.Field(nullable=True, ge=0, le=100, metadata=rounded(PERCENT_DECIMALS))
    ci_low_percent: Series[float] = pa.Field(nullable=True, ge=0, le=100, metadata=rounded(PERCENT_DECIMALS))
    ci_high_percent: Series[float] = pa.Field(nullable=True, ge=0, le=100, metadata=rounded(PERCENT_DECIMALS))
    random_percent: Series[float] = pa.Field(
        ge=0, le=100, description="random-chance Jaccard x100 on the same instances", metadata=rounded(PERCENT_DECIMALS)
    )
    round: Series[int] = pa.Field(
        ge=-1, description="collection round of the instances (0: the release); -1 (ALL_ROUNDS): every round together"
    )
    dataset_version: Series[str] = pa.Field(
        str_matches=r"^1\.\d+\.\d+$", description="the dataset version scored, 1.<round>.<patch> (as export writes)"
    )


#: ``Evaluation.round`` of the rows over every collection round together.
ALL_ROUNDS = -1


class RivalRounds(StrictModel):
    """Each game round's rival on round 0, its own round and every later round (stages/evaluate/rivals.py):
    one row per (rival round, rival, scored round); game instances, every candidate count."""

    rival_round: Series[int] = pa.Field(ge=1, description="the game round the rival was collected against")
    rival_model: Series[str] = pa.Field(description="the rival's models: entry (stored with each creation)")
    rival_weights: Series[str] = pa.Field(
        nullable=True, description="the weights the game loaded for it (null: not recorded)"
    )
    round: Series[int] = pa.Field(ge=0, description="the collection round scored (0, the rival's round or later)")
    weights_id: Series[str] = pa.Field(nullable=True, description="the weights evaluate loaded for the entry")
    status: Series[str] = pa.Field(isin=["scored", "other_weights", "no_weights", "no_entry"])
    reason: Series[str] = pa.Field(nullable=True)
    n_instances: Series[int] = pa.Field(ge=0)
    n_scored: Series[int] = pa.Field(ge=0)
    mean_jaccard_percent: Series[float] = pa.Field(nullable=True, ge=0, le=100, metadata=rounded(PERCENT_DECIMALS))
    random_percent: Series[float] = pa.Field(
        nullable=True,
        ge=0,
        le=100,
        description="random chance on the same instances",
        metadata=rounded(PERCENT_DECIMALS),
    )
    dataset_version: Series[str] = pa.Field(str_matches=r"^1\.\d+\.\d+$")


class RoundErrors(StrictModel):
    """Each collection round's model error rate (stages/evaluate/errors.py): the share of the round's
    validated game instances (selected) that fooled a rival (its top-K is not exactly the
    associations: Jaccard < 1), after Dynabench's validated model error rate; one row per (round,
    rival, source), percent units, 95 % percentile bootstrap CI over instances."""

    round: Series[int] = pa.Field(ge=0, description="the collection round whose validated instances are measured")
    rival_round: Series[int] = pa.Field(ge=0, description="the round whose rival this is (<= round; 0: the release's)")
    rival_model: Series[str] = pa.Field(
        description="the rival as the benchmark names it: a round's models: entry; round 0: RN50; unknown: not recorded"
    )
    rival_weights: Series[str] = pa.Field(nullable=True, description="its weights (tag, file:<sha>, untrained)")
    source: Series[str] = pa.Field(
        isin=["in_the_loop", "rescored"],
        description="in_the_loop: the fool-the-AI scores stored at collection; rescored: this stage's predictions",
    )
    weights_id: Series[str] = pa.Field(nullable=True, description="the weights the measured predictions came from")
    status: Series[str] = pa.Field(isin=["scored", "not_recorded", "other_weights", "no_weights", "no_entry"])
    reason: Series[str] = pa.Field(nullable=True)
    n_validated: Series[int] = pa.Field(ge=0, description="validated (selected) game instances of the round")
    n_scored: Series[int] = pa.Field(ge=0)
    n_fooled: Series[int] = pa.Field(ge=0)
    error_rate_percent: Series[float] = pa.Field(nullable=True, ge=0, le=100, metadata=rounded(PERCENT_DECIMALS))
    ci_low_percent: Series[float] = pa.Field(nullable=True, ge=0, le=100, metadata=rounded(PERCENT_DECIMALS))
    ci_high_percent: Series[float] = pa.Field(nullable=True, ge=0, le=100, metadata=rounded(PERCENT_DECIMALS))
    chance_error_percent: Series[float] = pa.Field(
        nullable=True,
        ge=0,
        le=100,
        description="a random K-subset's error rate on the same instances, 100 x mean(1 - 1/C(N, K))",
        metadata=rounded(PERCENT_DECIMALS),
    )
    dataset_version: Series[str] = pa.Field(str_matches=r"^1\.\d+\.\d+$")


class PairedEvaluation(StrictModel):
    """Winoground paired scores (stages/evaluate/paired.py): one row per model x dataset x pair kind
    x cell x score, percent units, 95 % cluster-bootstrap CI over candidate sets. ``percent`` weights
    pairs; ``set_weighted_*`` weight every candidate set once."""

    model_name: Series[str]
    weights_id: Series[str]
    dataset: Series[str]
    source: Series[str] = pa.Field(isin=["similarities", "top_k"], description="per-candidate scores or top-K lists")
    pair_kind: Series[str] = pa.Field(isin=["disjoint", "overlapping"])
    cell: Series[str] = pa.Field(isin=["all", "5&6", "10&12"])
    score: Series[str] = pa.Field(isin=["text", "image", "group", "both_solved"])
    n_pairs: Series[int] = pa.Field(ge=0)
    n_sets: Series[int] = pa.Field(ge=0)
    percent: Series[float] = pa.Field(nullable=True, ge=0, le=100, metadata=rounded(PERCENT_DECIMALS))
    ci_low_percent: Series[float] = pa.Field(nullable=True, ge=0, le=100, metadata=rounded(PERCENT_DECIMALS))
    ci_high_percent: Series[float] = pa.Field(nullable=True, ge=0, le=100, metadata=rounded(PERCENT_DECIMALS))
    chance_percent: Series[float] = pa.Field(nullable=True, ge=0, le=100, metadata=rounded(PERCENT_DECIMALS))
    set_weighted_percent: Series[float] = pa.Field(
        nullable=True,
        ge=0,
        le=100,
        description="mean over candidate sets of the set's mean over its pairs",
        metadata=rounded(PERCENT_DECIMALS),
    )
    set_weighted_ci_low_percent: Series[float] = pa.Field(
        nullable=True, ge=0, le=100, metadata=rounded(PERCENT_DECIMALS)
    )
    set_weighted_ci_high_percent: Series[float] = pa.Field(
        nullable=True, ge=0, le=100, metadata=rounded(PERCENT_DECIMALS)
    )

"""Tables of the ``aflite`` and ``adversarial_filter`` stages (the seeds' adversarial methods)."""

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from schemas import MODEL_DECIMALS, StrictModel, list_field, rounded

AFLITE_STATUSES = ["kept", "flagged", "not_selected"]
AF_STATUSES = ["ok", "skipped"]


class AfliteInstances(StrictModel):
    """One row per selection row: its AfLite predictability score and fate (a report; nothing is removed)."""

    instance_uid: Series[str] = pa.Field(unique=True)
    dataset: Series[str]
    batch: Series[str] = pa.Field(
        str_matches=r"^(release|raw):.+$",
        description="release:<released file stem> or raw:<batch folder> (or <origin>:(source removed))",
    )
    num_candidates: Series[int]
    score: Series[float] = pa.Field(
        nullable=True,
        ge=0,
        le=1,
        description="mean held-out credit (Jaccard or exact) in the last phase it was scored",
        metadata=rounded(MODEL_DECIMALS),
    )
    phase: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=1, description="phase it was flagged in")
    planted: Series[bool] = pa.Field(description="carries aflite.plant's spurious feature (audits only; else False)")
    status: Series[str] = pa.Field(isin=AFLITE_STATUSES)
    reason: Series[str]

    @pa.dataframe_check(error="a phase exactly on flagged rows")
    def phase_iff_flagged(cls, df: pd.DataFrame) -> pd.Series:
        return (df["status"] == "flagged") == df["phase"].notna()


class AflitePhases(StrictModel):
    """One row per AfLite phase."""

    phase: Series[int] = pa.Field(ge=1)
    instances: Series[int] = pa.Field(ge=0, description="remaining at the phase's start")
    held_out: Series[int] = pa.Field(ge=0, description="instances scored (held out at least once)")
    above_tau: Series[int] = pa.Field(ge=0)
    flagged: Series[int] = pa.Field(ge=0)


class AfInstances(StrictModel):
    """The ``swow_af`` variant: one row per SWOW-baseline instance with its AF-chosen distractors.

    A labelled variant for human validation, never the default benchmark."""

    instance_id: Series[str] = pa.Field(unique=True)
    variant: Series[str] = pa.Field(isin=["swow_af"])
    cue: Series[str]
    status: Series[str] = pa.Field(isin=AF_STATUSES)
    reason: Series[str] = pa.Field(nullable=True)
    associations: Series[object] = list_field("str")
    candidates: Series[object] = list_field("str", description="associations then distractors, shuffled (seeded)")
    distractors: Series[object] = list_field("str", description="the assignment A_i after the last iteration")
    original_distractors: Series[object] = list_field("str")
    replacements: Series[int] = pa.Field(ge=0)
    pool_size: Series[int] = pa.Field(ge=0)
    num_candidates: Series[int]


class AfReplacements(StrictModel):
    """One row per distractor replacement (what AF's users asked to see)."""

    iteration: Series[int] = pa.Field(ge=1)
    phase: Series[str] = pa.Field(isin=["cheap", "ensemble"])
    instance_id: Series[str]
    removed: Series[str]
    added: Series[str]
    removed_score: Series[float] = pa.Field(metadata=rounded(MODEL_DECIMALS))
    added_score: Series[float] = pa.Field(metadata=rounded(MODEL_DECIMALS))
    lowest_association_score: Series[float] = pa.Field(metadata=rounded(MODEL_DECIMALS))
    member: Series[str] = pa.Field(description="the model whose scores chose the swap")


class AfIterations(StrictModel):
    """One row per AF iteration: held-out Jaccard of each member vs chance, replacements."""

    iteration: Series[int] = pa.Field(ge=1)
    phase: Series[str] = pa.Field(isin=["cheap", "ensemble"])
    member: Series[str] = pa.Field(description="the model used for reassignment")
    held_out_jaccard: Series[float] = pa.Field(ge=0, le=1, metadata=rounded(MODEL_DECIMALS))
    chance_jaccard: Series[float] = pa.Field(ge=0, le=1, metadata=rounded(MODEL_DECIMALS))
    member_jaccards: Series[str] = pa.Field(description='JSON {"member": held-out Jaccard}')
    easy_fraction: Series[float] = pa.Field(
        ge=0,
        le=1,
        description="held-out assigned distractors below every association",
        metadata=rounded(MODEL_DECIMALS),
    )
    replacements: Series[int] = pa.Field(ge=0)
    replacements_mean: Series[float] = pa.Field(
        ge=0, description="per held-out instance", metadata=rounded(MODEL_DECIMALS)
    )
    judge_scores: Series[str] = pa.Field(
        description='JSON {"judge": {"jaccard": .., "accuracy": ..}} held out before the replacements; {} if not judged'
    )

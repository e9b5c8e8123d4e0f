"""Tables of the ``select_instances`` stage."""

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from schemas import StrictModel, list_field

STATUSES = ["selected", "below_threshold", "insufficient_solvers", "profane_cue"]
SPLITS = ["game_5_6", "game_10_12", "swow"]


class Selection(StrictModel):
    """Every imported instance with its solvable-by-humans scores and its fate.

    ``ID`` is the instance's permanent benchmark ID within its dataset (game or swow_baseline),
    from the ID ledger (:class:`IdLedger`): on a first build 0..n-1 in import order; later
    instances take the next free IDs; null for instances not selected.
    """

    instance_uid: Series[str] = pa.Field(unique=True)
    origin: Series[str]
    dataset: Series[str]
    split: Series[str] = pa.Field(isin=SPLITS, description="release file layout the instance belongs to")
    split_id: Series[int] = pa.Field(
        ge=0, description="ID in the split file: the released ID, or the next free one for new instances"
    )
    cue: Series[str]
    candidates: Series[object] = list_field("str")
    associations: Series[object] = list_field("str")
    num_associations: Series[int]
    num_candidates: Series[int]
    score_fool_the_ai: Series[pd.Int64Dtype] = pa.Field(nullable=True)
    annotation_index: Series[pd.Int64Dtype] = pa.Field(nullable=True)
    images_source: Series[str] = pa.Field(nullable=True)
    cue_weight: Series[float] = pa.Field(nullable=True)
    associations_mean_weight: Series[float] = pa.Field(nullable=True)
    candidates_connectivity_score: Series[float] = pa.Field(nullable=True)
    spymaster: Series[str] = pa.Field(nullable=True)
    solver_jaccards: Series[object] = list_field("float", nullable=True, description="per solver (raw instances)")
    n_solvers: Series[pd.Int64Dtype] = pa.Field(
        nullable=True, description="valid solver answers (raw); null for released rows"
    )
    solvers_jaccard_mean: Series[float] = pa.Field(nullable=True, ge=0, le=1)
    solvers_jaccard_std: Series[float] = pa.Field(nullable=True, ge=0, le=1)
    solvers_agreement: Series[float] = pa.Field(nullable=True, ge=0, le=1, description="|S1∩S2∩S3| / |S1∪S2∪S3|")
    status: Series[str] = pa.Field(isin=STATUSES)
    reason: Series[str] = pa.Field(nullable=True)
    ID: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)

    @pa.dataframe_check(error="split_id is unique within a split")
    def split_ids_unique(cls, df: pd.DataFrame) -> bool:
        return not df.duplicated(["split", "split_id"]).any()

    @pa.dataframe_check(error="exactly the selected rows have an ID")
    def id_iff_selected(cls, df: pd.DataFrame) -> pd.Series:
        return (df["status"] == "selected") == df["ID"].notna()


class Table1(StrictModel):
    """The paper's Table 1 layout, per dataset and candidate group (percent values x100)."""

    dataset: Series[str]
    candidates_group: Series[str] = pa.Field(isin=["5&6", "10&12"])
    generated_associations: Series[int] = pa.Field(ge=0)
    avg_model_score_percent: Series[float] = pa.Field(
        nullable=True, ge=0, le=100, description="mean of 100 - fool-the-AI"
    )
    avg_human_score_percent: Series[float] = pa.Field(
        nullable=True, ge=0, le=100, description="mean solver Jaccard x100"
    )
    kept: Series[int] = pa.Field(ge=0, description="instances with solver mean >= the threshold")
    min_solver_jaccard: Series[float] = pa.Field(ge=0, le=1)


class AnnotatorStats(StrictModel):
    """Per-annotator statistics (hashed ids only) for bonuses and spotting careless work."""

    role: Series[str] = pa.Field(isin=["spymaster", "solver"])
    annotator: Series[str] = pa.Field(str_startswith="a_", description="keyed hash, never the raw id")
    count: Series[int] = pa.Field(ge=1, description="instances created (spymaster) or answers given (solver)")
    selected: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0, description="spymaster: instances selected")
    mean_jaccard: Series[float] = pa.Field(
        nullable=True,
        ge=0,
        le=1,
        description="spymaster: mean solver mean of their instances; solver: mean Jaccard of their answers",
    )
    mean_fool_the_ai: Series[float] = pa.Field(nullable=True, ge=0, le=100, description="spymaster only")


class IdLedger(StrictModel):
    """Permanent IDs: every instance's split ID from its first import, and its benchmark ``ID``
    from the first build that selected it. Rows are only ever appended (or an ``ID`` filled in);
    an instance that stops being selected keeps its row, so its ID stays reserved (a gap)."""

    instance_uid: Series[str] = pa.Field(unique=True)
    dataset: Series[str]
    split: Series[str] = pa.Field(isin=SPLITS)
    split_id: Series[int] = pa.Field(ge=0)
    ID: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0, description="null until first selected")

    @pa.dataframe_check(error="split_id is unique within a split")
    def split_ids_unique(cls, df: pd.DataFrame) -> bool:
        return not df.duplicated(["split", "split_id"]).any()

    @pa.dataframe_check(error="ID is unique within a dataset")
    def ids_unique(cls, df: pd.DataFrame) -> bool:
        has = df[df["ID"].notna()]
        return not has.duplicated(["dataset", "ID"]).any()

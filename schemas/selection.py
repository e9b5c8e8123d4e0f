"""Tables of the ``select_instances`` stage."""

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from schemas import MODEL_DECIMALS, PERCENT_DECIMALS, StrictModel, exact, list_field, rounded
from schemas.annotations import GOLD_STATUSES

STATUSES = [
    "selected",
    "below_threshold",
    "insufficient_solvers",
    "profane_cue",
    "withheld",  # held by players' flags, an unshowable image, or a withdrawn spymaster (stages.select_instances)
    "rejected",
    "duplicate",
    "retired",
]
#: Statuses of rows that are not instances of their own (no split ID, never in the ledger).
UNNUMBERED = ["rejected", "duplicate"]
#: Statuses whose row carries its permanent benchmark ``ID`` (a retired ID is shown, never reused).
ID_STATUSES = ["selected", "retired"]
#: A published instance's fields frozen in the ledger at publication (:class:`IdLedger`); the
#: selection row of a published instance is rebuilt from them on every later build.
PUBLISHED_FIELDS = [
    "origin",
    "cue",
    "candidates",
    "associations",
    "num_associations",
    "num_candidates",
    "score_fool_the_ai",
    "annotation_index",
    "images_source",
    "cue_weight",
    "associations_mean_weight",
    "candidates_connectivity_score",
    "spymaster",
    "solvers",
    "solver_jaccards",
    "n_solvers",
    "solvers_jaccard_mean",
    "solvers_jaccard_std",
    "solvers_agreement",
]
SPLITS = ["game_5_6", "game_10_12", "swow"]


class Selection(StrictModel):
    """Every imported instance with its solvable-by-humans scores and its fate.

    ``ID`` is the instance's permanent benchmark ID within its dataset (game or swow_baseline),
    from the ID ledger (:class:`IdLedger`): on a first build 0..n-1 in import order; later
    instances take the next free IDs; set for ``selected`` and ``retired`` rows only.

    A ``rejected`` row is imported content whose ``instance_uid`` the ledger binds to other
    content (its uid here is ``<instance_uid>#conflict:<fingerprint[:12]>``, its split_id null);
    the published instance keeps its own row, rebuilt from the ledger. A ``duplicate`` row copies
    the content of another instance (:mod:`stages.select_instances.identity`); its reason names it,
    its split_id is null. A ``withheld`` row is a game instance held by players' flags (reason
    ``flagged_unreviewed: ...`` until an admin reviews it, ``retired_by_review: ...`` after a
    retire), never in the benchmark; a published one held by flags is ``retired`` with that reason
    (:mod:`stages.select_instances.flags`). An unpublished game instance whose spymaster withdrew
    consent is ``withheld`` too, reason ``withdrawn: player withdrew consent (<UTC time>); ...``; a
    published one keeps its ID with that note (:mod:`stages.select_instances.consent`).
    """

    instance_uid: Series[str] = pa.Field(unique=True)
    origin: Series[str]
    dataset: Series[str]
    split: Series[str] = pa.Field(isin=SPLITS, description="release file layout the instance belongs to")
    split_id: Series[pd.Int64Dtype] = pa.Field(
        nullable=True,
        ge=0,
        description="ID in the split file: the released ID, or the next free one for new instances; null if rejected or duplicate",
    )
    fingerprint: Series[str] = pa.Field(
        str_matches=r"^[0-9a-f]{64}$", description="sha256 of the content (select_instances.content_fingerprint)"
    )
    cue: Series[str]
    candidates: Series[object] = list_field("str")
    associations: Series[object] = list_field("str")
    num_associations: Series[int]
    num_candidates: Series[int]
    score_fool_the_ai: Series[pd.Int64Dtype] = pa.Field(nullable=True)
    annotation_index: Series[pd.Int64Dtype] = pa.Field(nullable=True)
    images_source: Series[str] = pa.Field(nullable=True)
    cue_weight: Series[float] = pa.Field(nullable=True, metadata=exact("as released"))
    associations_mean_weight: Series[float] = pa.Field(nullable=True, metadata=exact("as released or built"))
    candidates_connectivity_score: Series[float] = pa.Field(nullable=True, metadata=exact("as released or built"))
    spymaster: Series[str] = pa.Field(nullable=True)
    solvers: Series[object] = list_field(
        "str", nullable=True, description="hashed ids of the solvers whose answers the scores count (raw)"
    )
    solver_jaccards: Series[object] = list_field(
        "float", nullable=True, exact="ratios of set sizes", description="per counted solver (raw)"
    )
    n_solvers: Series[pd.Int64Dtype] = pa.Field(
        nullable=True, description="answers counted (raw; all valid answers while short of min_solvers); null released"
    )
    late_answers: Series[int] = pa.Field(
        ge=0, description="valid answers by other players that the scores do not count (beyond min_solvers)"
    )
    solvers_jaccard_mean: Series[float] = pa.Field(
        nullable=True, ge=0, le=1, metadata=exact("as released, or rounded to 2 places (the release's rule)")
    )
    solvers_jaccard_std: Series[float] = pa.Field(
        nullable=True, ge=0, le=1, metadata=exact("as released, or rounded to 2 places (the release's rule)")
    )
    solvers_agreement: Series[float] = pa.Field(
        nullable=True, ge=0, le=1, description="|S1∩S2∩S3| / |S1∪S2∪S3|", metadata=exact("a ratio of two set sizes")
    )
    status: Series[str] = pa.Field(isin=STATUSES)
    reason: Series[str] = pa.Field(nullable=True)
    ID: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    round: Series[pd.Int64Dtype] = pa.Field(
        nullable=True,
        ge=0,
        description="collection round (0: the release) of the imported instance; null: a raw instance kept from the "
        "ID ledger whose source is no longer imported",
    )
    rival_model: Series[str] | None = pa.Field(
        nullable=True,
        description="the imported instance's rival (instances.rival_model: the game round's models: entry); "
        "null: released data, a batch that names none, a row kept from the ID ledger",
    )
    rival_weights: Series[str] | None = pa.Field(
        nullable=True, description="that rival's weights as imported (instances.rival_weights)"
    )

    @pa.dataframe_check(error="split_id is unique within a split")
    def split_ids_unique(cls, df: pd.DataFrame) -> bool:
        has = df[df["split_id"].notna()]
        return not has.duplicated(["split", "split_id"]).any()

    @pa.dataframe_check(error="exactly the selected and retired rows have an ID")
    def id_iff_selected(cls, df: pd.DataFrame) -> pd.Series:
        return df["status"].isin(ID_STATUSES) == df["ID"].notna()

    @pa.dataframe_check(error="exactly the rejected and duplicate rows have no split_id")
    def split_id_unless_rejected(cls, df: pd.DataFrame) -> pd.Series:
        return df["status"].isin(UNNUMBERED) == df["split_id"].isna()

    @pa.dataframe_check(error="an ID is unique within a dataset")
    def ids_unique(cls, df: pd.DataFrame) -> bool:
        has = df[df["ID"].notna()]
        return not has.duplicated(["dataset", "ID"]).any()


class Table1(StrictModel):
    """The paper's Table 1 layout, per dataset and candidate group (percent values x100)."""

    dataset: Series[str]
    candidates_group: Series[str] = pa.Field(isin=["5&6", "10&12"])
    generated_associations: Series[int] = pa.Field(ge=0)
    avg_model_score_percent: Series[float] = pa.Field(
        nullable=True, ge=0, le=100, description="mean of 100 - fool-the-AI", metadata=rounded(PERCENT_DECIMALS)
    )
    avg_human_score_percent: Series[float] = pa.Field(
        nullable=True, ge=0, le=100, description="mean solver Jaccard x100", metadata=rounded(PERCENT_DECIMALS)
    )
    kept: Series[int] = pa.Field(ge=0, description="instances with solver mean >= the threshold")
    min_solver_jaccard: Series[float] = pa.Field(ge=0, le=1, metadata=exact("the params value"))


class AnnotatorStats(StrictModel):
    """Per-annotator statistics (hashed ids only) for bonuses and spotting careless work."""

    role: Series[str] = pa.Field(isin=["spymaster", "solver"])
    annotator: Series[str] = pa.Field(str_startswith="a_", description="keyed hash, never the raw id")
    count: Series[int] = pa.Field(
        ge=0, description="instances created (spymaster) or answers that count (solver; 0: failed the gold check)"
    )
    selected: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0, description="spymaster: instances selected")
    mean_jaccard: Series[float] = pa.Field(
        nullable=True,
        ge=0,
        le=1,
        description="spymaster: mean solver mean of their instances; solver: mean Jaccard of their answers",
        metadata=rounded(MODEL_DECIMALS),
    )
    mean_fool_the_ai: Series[float] = pa.Field(
        nullable=True, ge=0, le=100, description="spymaster only", metadata=rounded(PERCENT_DECIMALS)
    )
    gold_answers: Series[pd.Int64Dtype] = pa.Field(
        nullable=True, ge=0, description="solver: answers to gold items (game.gold); null for spymasters"
    )
    gold_mean_jaccard: Series[float] = pa.Field(
        nullable=True,
        ge=0,
        le=1,
        description="solver: mean Jaccard on gold items, a fraction rounded to 2 places; null without gold answers",
        metadata=exact("rounded to 2 places (the release's rule)"),
    )
    gold_status: Series[str] = pa.Field(
        nullable=True, isin=GOLD_STATUSES, description="solver: the gold check (gold_checks); null when never judged"
    )


class IdLedger(StrictModel):
    """The permanent ID ledger (in git): one row per instance ever imported, never removed.

    Identity: ``instance_uid`` is bound to ``fingerprint`` (the content at its first import,
    :func:`stages.select_instances.content_fingerprint`); imported content that differs under
    the same uid is rejected, so an ID never points at other content. ``split_id`` is given at
    first import, ``ID`` at first selection. The other columns (:data:`PUBLISHED_FIELDS`) are the
    instance's selection-row values: refreshed by every build while it is unpublished, frozen
    once it has an ``ID`` (its published row; later answers, edits or a removed batch change
    nothing). Rows are sorted by split and split_id, so the bytes do not depend on input order.
    """

    instance_uid: Series[str] = pa.Field(unique=True)
    dataset: Series[str]
    split: Series[str] = pa.Field(isin=SPLITS)
    split_id: Series[int] = pa.Field(ge=0)
    ID: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0, description="null until first selected")
    fingerprint: Series[str] = pa.Field(str_matches=r"^[0-9a-f]{64}$", description="content the uid is bound to")
    origin: Series[str]
    cue: Series[str]
    candidates: Series[object] = list_field("str", min_len=5)
    associations: Series[object] = list_field("str", min_len=2)
    num_associations: Series[int] = pa.Field(ge=2)
    num_candidates: Series[int]
    score_fool_the_ai: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0, le=100)
    annotation_index: Series[pd.Int64Dtype] = pa.Field(nullable=True)
    images_source: Series[str] = pa.Field(nullable=True)
    cue_weight: Series[float] = pa.Field(nullable=True, metadata=exact("as released"))
    associations_mean_weight: Series[float] = pa.Field(nullable=True, metadata=exact("as released or built"))
    candidates_connectivity_score: Series[float] = pa.Field(nullable=True, metadata=exact("as released or built"))
    spymaster: Series[str] = pa.Field(nullable=True)
    solvers: Series[object] = list_field("str", nullable=True, description="hashed solvers counted (raw)")
    solver_jaccards: Series[object] = list_field("float", nullable=True, exact="ratios of set sizes")
    n_solvers: Series[pd.Int64Dtype] = pa.Field(nullable=True)
    solvers_jaccard_mean: Series[float] = pa.Field(
        nullable=True, ge=0, le=1, metadata=exact("as released, or rounded to 2 places (the release's rule)")
    )
    solvers_jaccard_std: Series[float] = pa.Field(
        nullable=True, ge=0, le=1, metadata=exact("as released, or rounded to 2 places (the release's rule)")
    )
    solvers_agreement: Series[float] = pa.Field(nullable=True, ge=0, le=1, metadata=exact("a ratio of two set sizes"))

    @pa.dataframe_check(error="split_id is unique within a split")
    def split_ids_unique(cls, df: pd.DataFrame) -> bool:
        return not df.duplicated(["split", "split_id"]).any()

    @pa.dataframe_check(error="ID is unique within a dataset")
    def ids_unique(cls, df: pd.DataFrame) -> bool:
        has = df[df["ID"].notna()]
        return not has.duplicated(["dataset", "ID"]).any()

    @pa.dataframe_check(error="a published row (with an ID) has its solver mean")
    def published_has_scores(cls, df: pd.DataFrame) -> pd.Series:
        return df["ID"].isna() | df["solvers_jaccard_mean"].notna()

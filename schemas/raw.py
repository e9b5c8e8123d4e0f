"""Input contracts for new annotation collections (the raw formats ``import_annotations`` reads).

These describe the *files* a maintainer drops into ``<annotations.raw_dir>/<batch>/``; the
import checks each file's header against them and each row with the rules in
:mod:`stages.import_annotations` (a row that breaks a rule is rejected with its reason, never
coerced). List cells are JSON lists of image names.
"""

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from schemas import list_field


class RawCreation(pa.DataFrameModel):
    """``creations.csv`` / ``creations.jsonl``: one row per cue a spymaster gave.

    Rows sharing a ``task_id`` are one creation task: the same candidates and at most two cues
    that differ case-insensitively (the game asks for two cues per candidate set).
    """

    instance_id: Series[str] = pa.Field(unique=True, description="unique across all batches")
    task_id: Series[str] = pa.Field(nullable=True, description="optional: groups the two cues of one task")
    spymaster_id: Series[str] = pa.Field(description="crowd worker id; hashed on import, never stored")
    cue: Series[str] = pa.Field(str_matches=r"^\S{2,}$", description="single token, >= 2 characters")
    candidates: Series[object] = list_field("str", min_len=5)
    associations: Series[object] = list_field("str", min_len=2)
    score_fool_the_ai: Series[pd.Int64Dtype] = pa.Field(
        nullable=True, ge=0, le=100, description="optional, as the game showed it"
    )
    round: Series[pd.Int64Dtype] = pa.Field(
        nullable=True, ge=0, description="optional: the collection round (docs/dynamic.md); absent or empty: 0"
    )
    rival_model: Series[str] = pa.Field(
        nullable=True, description="optional: the models: entry of the rival that scored the creation"
    )
    rival_weights: Series[str] = pa.Field(
        nullable=True, description="optional: that rival's weights (pretrained tag, file:<sha256[:16]>, untrained)"
    )

    class Config:
        strict = False
        coerce = True


class RawSolve(pa.DataFrameModel):
    """``solves.csv`` / ``solves.jsonl``: one row per solver answer."""

    instance_id: Series[str]
    solver_id: Series[str] = pa.Field(description="crowd worker id; hashed on import, never stored")
    selection: Series[object] = list_field("str", min_len=1)

    class Config:
        strict = False
        coerce = True


#: Fixed columns of a crowd-platform batch-results CSV (the shape WinoGAViL's collection used);
#: task inputs and answers are ``Input.*`` / ``Answer.*`` columns named in ``annotations.crowd``.
CROWD_FIXED_COLUMNS = ["HITId", "AssignmentId", "WorkerId", "AssignmentStatus", "SubmitTime", "WorkTimeInSeconds"]


def required_columns(model: type[pa.DataFrameModel]) -> list[str]:
    """Columns a raw file must have: the model's non-nullable columns (list columns by their own flag)."""
    out = []
    for name, col in model.to_schema().columns.items():
        meta = col.metadata or {}
        nullable = meta["list_nullable"] if "list_of" in meta else col.nullable
        if not nullable:
            out.append(name)
    return out

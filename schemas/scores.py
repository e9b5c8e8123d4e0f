"""Table of the ``score_candidates`` stage: the rival model's predictions."""

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from schemas import MODEL_DECIMALS, StrictModel, exact, list_field

STATUSES = ["ok", "untrained", "no_weights", "missing_image"]


class Scores(StrictModel):
    """One row per (model, instance). Scores are null unless status is ok or untrained."""

    instance_id: Series[str]
    model_name: Series[str] = pa.Field(description="label from params, e.g. rival:RN50 or text-minilm")
    model: Series[str] = pa.Field(description="open_clip architecture or text model id, e.g. RN50")
    pretrained: Series[str] = pa.Field(description="pretrained tag, weights file sha256, or 'untrained'")
    status: Series[str] = pa.Field(isin=STATUSES)
    reason: Series[str] = pa.Field(
        nullable=True,
        description=(
            "null for ok; missing_image: the candidates without an accepted image; untrained: "
            "'random weights ...'; no_weights: a fixed sentence naming models.<entry>.weights_path "
            "(gavil.models.weights.no_weights_reason), never the OS's or a library's error text"
        ),
    )
    cue: Series[str]
    prompt: Series[str]
    candidates: Series[object] = list_field("str")
    associations: Series[object] = list_field("str")
    predictions: Series[object] = list_field("str", nullable=True)
    similarities: Series[object] = list_field("float", nullable=True, decimals=MODEL_DECIMALS)
    jaccard: Series[float] = pa.Field(nullable=True, ge=0, le=1, metadata=exact("a ratio of two set sizes"))
    score_fool_the_ai: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0, le=100)

    @pa.dataframe_check(error="scores only where a model ran (ok/untrained); no_weights rows carry none")
    def scores_only_when_scored(cls, df: pd.DataFrame) -> pd.Series:
        scored = df["status"].isin(["ok", "untrained"])
        has = df["jaccard"].notna() & df["score_fool_the_ai"].notna() & df["predictions"].notna()
        none = df["jaccard"].isna() & df["score_fool_the_ai"].isna() & df["predictions"].isna()
        return (scored & has) | (~scored & none & df["reason"].notna())

    @pa.dataframe_check(error="untrained rows must say so in 'pretrained'")
    def untrained_is_labelled(cls, df: pd.DataFrame) -> pd.Series:
        return (df["status"] != "untrained") | (df["pretrained"] == "untrained")

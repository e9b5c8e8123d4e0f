"""Table of the ``safety_score`` stage: the optional zero-shot safety score of the images in the
review queue (docs/review.md "The safety score"). It orders the review page; no stage reads it and
nothing is decided by it."""

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from schemas import StrictModel, rounded

#: ``ok``: a real model's score; ``untrained``: random weights (``pretrained: null``), a number that
#: means nothing; ``no_weights``: the model had no weights, so no score.
STATUSES = ["ok", "untrained", "no_weights"]
#: Decimal places of ``punsafe`` (a softmax mass of float32 cosines): the same bytes on every CPU.
PUNSAFE_DECIMALS = 4


class Safety(StrictModel):
    """One row per image (sha256) the OCR let through (``ocr`` statuses ``accepted``,
    ``review_pending``, ``review_rejected``); zero rows while ``review.safety.enabled`` is false."""

    sha256: Series[str] = pa.Field(unique=True, str_matches=r"^[0-9a-f]{64}$")
    status: Series[str] = pa.Field(isin=STATUSES)
    punsafe: Series[float] = pa.Field(
        nullable=True,
        ge=0,
        le=1,
        description="fraction 0-1: softmax probability mass on the unsafe prompts (null: no_weights)",
        metadata=rounded(PUNSAFE_DECIMALS),
    )
    safety_model: Series[str] = pa.Field(
        description="architecture/weights that scored, e.g. RN50/openai or RN50/untrained (random weights)"
    )
    reason: Series[str] = pa.Field(nullable=True, description="why the score is untrained or missing")

    @pa.dataframe_check(error="a score exactly when the model had weights (status ok or untrained)")
    def score_iff_weights(cls, df: pd.DataFrame) -> pd.Series:
        return df["punsafe"].notna() == df["status"].isin(["ok", "untrained"])

    @pa.dataframe_check(error="an untrained score says so in safety_model")
    def untrained_is_labelled(cls, df: pd.DataFrame) -> pd.Series:
        return (df["status"] != "untrained") | df["safety_model"].str.endswith("/untrained")

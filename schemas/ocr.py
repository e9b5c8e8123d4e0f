"""Table of the ``ocr_filter`` stage."""

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

STATUSES = ["accepted", "rejected_text", "no_image"]


class Ocr(pa.DataFrameModel):
    """One row per concept: the OCR reading of its image and the accept/reject decision."""

    concept: Series[str] = pa.Field(unique=True)
    sha256: Series[str] = pa.Field(nullable=True)
    path: Series[str] = pa.Field(nullable=True)
    status: Series[str] = pa.Field(isin=STATUSES)
    reason: Series[str] = pa.Field(nullable=True)
    ocr_text: Series[str] = pa.Field(nullable=True, description="tokens read, space-joined, in reading order")
    ocr_confidence: Series[float] = pa.Field(nullable=True, ge=0, le=1, description="max token confidence")
    match_token: Series[str] = pa.Field(nullable=True, description="OCR text that matched the concept")
    match_score: Series[float] = pa.Field(nullable=True, ge=0, le=100, description="rapidfuzz ratio, percent")

    @pa.dataframe_check(error="every non-accepted row needs a reason")
    def reason_for_non_accepted(cls, df: pd.DataFrame) -> pd.Series:
        return (df["status"] == "accepted") | df["reason"].notna()

    class Config:
        strict = True
        coerce = True

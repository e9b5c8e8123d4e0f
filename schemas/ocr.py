"""Table of the ``ocr_filter`` stage."""

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from schemas import MODEL_DECIMALS, PERCENT_DECIMALS, StrictModel, rounded

#: ``review_pending`` / ``review_rejected``: the OCR accepted the image, but no reviewer accepted it
#: yet / a reviewer rejected it (``gavil review``, docs/review.md); neither has an image downstream.
STATUSES = ["accepted", "rejected_text", "no_image", "review_pending", "review_rejected"]


class Ocr(StrictModel):
    """One row per concept: the first kept candidate (rank order) without the query text, or why none."""

    concept: Series[str] = pa.Field(unique=True)
    sha256: Series[str] = pa.Field(nullable=True)
    path: Series[str] = pa.Field(nullable=True, description="the decided candidate's stored file")
    source_url: Series[str] = pa.Field(nullable=True, description="where the decided candidate came from")
    rank: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=1, description="crawl rank of the decided candidate")
    candidates_read: Series[pd.Int64Dtype] = pa.Field(
        ge=0, description="kept candidates OCRed for this concept (fall-through)"
    )
    status: Series[str] = pa.Field(isin=STATUSES)
    reason: Series[str] = pa.Field(nullable=True)
    ocr_text: Series[str] = pa.Field(nullable=True, description="tokens read, space-joined, in reading order")
    ocr_confidence: Series[float] = pa.Field(
        nullable=True, ge=0, le=1, description="max token confidence", metadata=rounded(MODEL_DECIMALS)
    )
    match_token: Series[str] = pa.Field(nullable=True, description="OCR text that matched the concept")
    match_score: Series[float] = pa.Field(
        nullable=True, ge=0, le=100, description="rapidfuzz ratio, percent", metadata=rounded(PERCENT_DECIMALS)
    )

    @pa.dataframe_check(error="every non-accepted row needs a reason")
    def reason_for_non_accepted(cls, df: pd.DataFrame) -> pd.Series:
        return (df["status"] == "accepted") | df["reason"].notna()


class OcrCache(StrictModel):
    """Raw OCR detections per (image sha256, canvas size, engine): decisions are recomputed from
    them, so a rule change or a crawl of new concepts only OCRs images never seen before."""

    sha256: Series[str] = pa.Field(str_matches=r"^[0-9a-f]{64}$")
    canvas_size: Series[int] = pa.Field(gt=0, description="pixels, long side")
    engine: Series[str] = pa.Field(description="e.g. easyocr-1.7.2-en")
    detections: Series[str] = pa.Field(description="JSON list of [text, confidence] in reading order")

    @pa.dataframe_check(error="one row per (sha256, canvas_size, engine)")
    def unique_keys(cls, df: pd.DataFrame) -> bool:
        return not df.duplicated(["sha256", "canvas_size", "engine"]).any()


def accepted_images(ocr: pd.DataFrame) -> dict[str, tuple[str, str]]:
    """concept -> (sha256, path) of each concept's accepted image, from an :class:`Ocr` table.

    The one reading of the OCR contract that the scoring, evaluation and export stages share:
    a concept has an image exactly when its row is ``accepted`` (the OCR passed it and, where
    ``review.required``, a reviewer accepted it; ``review_pending`` and ``review_rejected`` rows
    have none)."""
    ok = ocr[ocr["status"] == "accepted"]
    return {c: (s, p) for c, s, p in zip(ok["concept"], ok["sha256"], ok["path"])}

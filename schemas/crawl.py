"""Tables of the ``crawl_images`` stage: every candidate's fate, and one row per concept."""

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from gavil.domain.vocabulary import CRAWL_SOURCES
from schemas import StrictModel

#: Fates of one search result (candidate image URL) of a concept.
CANDIDATE_STATUSES = [
    "kept",
    "download_failed",
    "invalid_image",
    "unsupported_format",
    "duplicate",
    "opted_out",
    "refused_url",
]
#: Fates of a concept. A single failure kind keeps its own name; mixed failures are ``all_rejected``.
STATUSES = [
    "ok",
    "profane",
    "no_results",
    "search_failed",
    "download_failed",
    "invalid_image",
    "unsupported_format",
    "duplicate",
    "opted_out",
    "refused_url",
    "all_rejected",
]
SOURCES = list(CRAWL_SOURCES)


def _image_fields_present(df: pd.DataFrame, ok: pd.Series) -> pd.Series:
    has_img = df[["sha256", "path", "width", "height", "format"]].notna().all(axis=1)
    return (ok & has_img) | (~ok & df["reason"].notna())


class Candidates(StrictModel):
    """One row per (concept, rank): a search result and what became of it.

    ``kept`` candidates are valid images, stored content-addressed, not duplicates of another
    concept's image; ``ocr_filter`` walks them in rank order and keeps the first without text.
    """

    concept: Series[str]
    rank: Series[int] = pa.Field(ge=1, description="1 = top search result")
    url: Series[str] = pa.Field(description="image URL, or file path for the local source")
    status: Series[str] = pa.Field(isin=CANDIDATE_STATUSES)
    reason: Series[str] = pa.Field(nullable=True)
    sha256: Series[str] = pa.Field(nullable=True, str_matches=r"^[0-9a-f]{64}$")
    path: Series[str] = pa.Field(nullable=True, description="stored file, relative to the project root")
    width: Series[pd.Int64Dtype] = pa.Field(nullable=True, gt=0, description="pixels")
    height: Series[pd.Int64Dtype] = pa.Field(nullable=True, gt=0, description="pixels")
    format: Series[str] = pa.Field(nullable=True, description="Pillow format name")
    bytes: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    phash: Series[str] = pa.Field(
        nullable=True, str_matches=r"^[0-9a-f]{16}$", description="imagehash.phash, 64 bits hex"
    )

    @pa.dataframe_check(error="kept rows need sha256, path, width, height, format; others a reason")
    def fate_is_complete(cls, df: pd.DataFrame) -> pd.Series:
        return _image_fields_present(df, df["status"] == "kept")

    @pa.dataframe_check(error="one row per (concept, rank)")
    def unique_rank(cls, df: pd.DataFrame) -> bool:
        return not df.duplicated(["concept", "rank"]).any()


class Images(StrictModel):
    """One row per concept: its top kept candidate (content-addressed by sha256) or why none."""

    concept: Series[str] = pa.Field(unique=True)
    status: Series[str] = pa.Field(isin=STATUSES)
    reason: Series[str] = pa.Field(nullable=True)
    source: Series[str] = pa.Field(isin=SOURCES)
    source_url: Series[str] = pa.Field(nullable=True, description="web URL, or file path for the local source")
    sha256: Series[str] = pa.Field(nullable=True, str_matches=r"^[0-9a-f]{64}$")
    path: Series[str] = pa.Field(nullable=True, description="stored file, relative to the project root")
    width: Series[pd.Int64Dtype] = pa.Field(nullable=True, gt=0, description="pixels")
    height: Series[pd.Int64Dtype] = pa.Field(nullable=True, gt=0, description="pixels")
    format: Series[str] = pa.Field(nullable=True, description="Pillow format name, e.g. JPEG, PNG")
    bytes: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    candidates_kept: Series[int] = pa.Field(ge=0, description="kept candidates (OCR falls through them in rank order)")

    @pa.dataframe_check(error="ok rows need sha256, path, width, height, format; others a reason")
    def fate_is_complete(cls, df: pd.DataFrame) -> pd.Series:
        return _image_fields_present(df, df["status"] == "ok")

"""Table of the ``crawl_images`` stage."""

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

STATUSES = ["ok", "no_results", "download_failed", "invalid_image", "duplicate", "profane"]
SOURCES = ["local", "urllist", "bing"]


class Images(pa.DataFrameModel):
    """One row per concept: the image kept for it (content-addressed by sha256) or why none."""

    concept: Series[str] = pa.Field(unique=True)
    status: Series[str] = pa.Field(isin=STATUSES)
    reason: Series[str] = pa.Field(nullable=True)
    source: Series[str] = pa.Field(isin=SOURCES)
    source_url: Series[str] = pa.Field(nullable=True, description="web URL, or file:// path for the local source")
    sha256: Series[str] = pa.Field(nullable=True, str_matches=r"^[0-9a-f]{64}$")
    path: Series[str] = pa.Field(nullable=True, description="stored file, relative to the project root")
    width: Series[pd.Int64Dtype] = pa.Field(nullable=True, gt=0, description="pixels")
    height: Series[pd.Int64Dtype] = pa.Field(nullable=True, gt=0, description="pixels")
    format: Series[str] = pa.Field(nullable=True, description="Pillow format name, e.g. JPEG, PNG")
    bytes: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)

    @pa.dataframe_check(error="ok rows need sha256, path, width, height, format; others a reason")
    def fate_is_complete(cls, df: pd.DataFrame) -> pd.Series:
        ok = df["status"] == "ok"
        has_img = df[["sha256", "path", "width", "height", "format"]].notna().all(axis=1)
        return (ok & has_img) | (~ok & df["reason"].notna())

    class Config:
        strict = True
        coerce = True

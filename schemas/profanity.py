"""Table of the ``filter_profanity`` stage."""

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from schemas import StrictModel

STATUSES = ["ok", "profane"]


class ConceptFilter(StrictModel):
    """One row per concept with its fate: ``ok`` or ``profane`` with the reason."""

    concept: Series[str] = pa.Field(unique=True)
    status: Series[str] = pa.Field(isin=STATUSES)
    reason: Series[str] = pa.Field(nullable=True)

    @pa.dataframe_check(error="every non-ok row needs a reason")
    def reason_for_non_ok(cls, df: pd.DataFrame) -> pd.Series:
        return (df["status"] == "ok") | df["reason"].notna()

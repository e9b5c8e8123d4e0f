"""Tables of the ``ingest_concepts`` stage: concepts and SWOW cue -> response edges."""

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from schemas import StrictModel, exact

SOURCE_FORMATS = ["swow_r100", "swow_strength_r1", "swow_strength_r123", "winogavil_swow", "concept_list"]


class Concepts(StrictModel):
    """One row per concept (a lower-cased English word or phrase that may get an image)."""

    concept: Series[str] = pa.Field(unique=True, str_length={"min_value": 1})
    is_cue: Series[bool] = pa.Field(description="the word is a SWOW cue")
    is_candidate: Series[bool] = pa.Field(
        description="the word was an image candidate in the input (release format; every concept of a concept list)"
    )
    n_responses: Series[int] = pa.Field(ge=0, description="distinct responses when used as a cue")
    n_cues: Series[int] = pa.Field(ge=0, description="distinct cues that elicited it as a response")
    source_format: Series[str] = pa.Field(isin=SOURCE_FORMATS)


class Edges(StrictModel):
    """One row per (cue, response) association. Counts are null where the input lacks them."""

    cue: Series[str] = pa.Field(str_length={"min_value": 1})
    response: Series[str] = pa.Field(str_length={"min_value": 1})
    r1_count: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0, description="first responses (R1)")
    r123_count: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0, description="responses over R1..R3")
    r1_strength: Series[float] = pa.Field(
        nullable=True,
        ge=0,
        le=1,
        description="R1 / number of valid R1 responses to the cue",
        metadata=exact("a count over the cue's N, or as in the file"),
    )
    r123_strength: Series[float] = pa.Field(
        nullable=True,
        ge=0,
        le=1,
        description="R123 / number of valid R1..R3 responses",
        metadata=exact("a count over the cue's N, or as in the file"),
    )
    rank: Series[int] = pa.Field(
        ge=1, description="1 = strongest response of the cue (R123, then R1, then input order)"
    )
    source_format: Series[str] = pa.Field(isin=SOURCE_FORMATS)

    @pa.dataframe_check(error="(cue, response) pairs must be unique")
    def unique_pairs(cls, df: pd.DataFrame) -> bool:
        return not df.duplicated(["cue", "response"]).any()


class NameRejects(StrictModel):
    """One row per SWOW edge or release candidate refused by the name policy (``gavil/domain/names.py``):
    an invisible or format character, mixed scripts, a non-word character or an over-long word.
    The row keeps the input's text as read, so a reader can see what was refused and why."""

    cue: Series[str] = pa.Field(description="the cue (or the refused candidate name)")
    response: Series[str] = pa.Field(nullable=True, description="the response; null for a refused candidate")
    reason: Series[str] = pa.Field(str_length={"min_value": 1}, description="which rule the name fails")

"""Params section ``ingest`` (stage ``ingest_concepts``): the SWOW input file and how to read it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gavil.params.base import Section


class IngestParams(Section):
    path: str = "data/sample/winogavil/swow.csv"
    format: Literal["auto", "swow_r100", "swow_strength_r1", "swow_strength_r123", "winogavil_swow", "concept_list"] = (
        "auto"
    )
    lowercase: bool = True
    concepts: Literal["cues", "cues_and_responses"] = "cues"
    min_response_count: int = Field(default=1, ge=1)

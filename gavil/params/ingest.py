"""Params section ``ingest`` (stage ``ingest_concepts``): the SWOW input file and how to read it."""

from __future__ import annotations

from typing import Literal

from gavil.params.base import Section


class IngestParams(Section):
    path: str = "data/sample/winogavil/swow.csv"
    format: Literal["auto", "swow_r100", "swow_strength_r1", "swow_strength_r123", "winogavil_swow"] = "auto"
    lowercase: bool = True

"""Params section ``export`` (stage ``export``): how the benchmark dataset is written."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from gavil.params.base import Section


class ExportParams(Section):
    copy_images: bool = True
    # the <patch> of the dataset version 1.<round>.<patch> (round: the highest collection round in the
    # benchmark); raise it for a re-release of the same round (retired instances, late solves), reset to 0
    # when a new round enters the benchmark
    patch: Annotated[int, Field(ge=0)] = 0

"""Params section ``instances`` (stage ``build_instances``): the game's random candidate sets and the
SWOW-baseline instances."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator

from gavil.domain.vocabulary import CANDIDATE_SIZES
from gavil.params.base import NonNegInt, Section


class SwowInstanceParams(Section):
    max_associations: Annotated[int, Field(ge=2, le=4)] = 4
    min_r123_count: NonNegInt = 10
    min_concreteness: Annotated[float, Field(ge=1, le=5)] | None = 4.0  # Brysbaert 1-5; associations and distractors
    max_connectivity: NonNegInt | None = None  # drop instances with a larger candidates_connectivity_score


class InstancesParams(Section):
    seed: int = 13
    game_sets: dict[int, NonNegInt] = {5: 4, 6: 4, 10: 2, 12: 2}
    swow: SwowInstanceParams = SwowInstanceParams()

    @field_validator("game_sets")
    @classmethod
    def _sizes(cls, v: dict[int, int]) -> dict[int, int]:
        bad = sorted(set(v) - set(CANDIDATE_SIZES))
        if bad:
            raise ValueError(f"keys must be among {CANDIDATE_SIZES} (candidates per set), got {bad}")
        return v

"""Params section ``select`` (stage ``select_instances``): the human-solvability threshold (a fraction)
and retired benchmark instances."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from gavil.params.base import Fraction, NonNegInt, PosInt, Section


class RetiredEntry(Section):
    """One retired benchmark instance: its dataset, its permanent ``ID`` and why (README
    "Retiring an instance")."""

    dataset: Literal["game", "swow_baseline"]
    ID: NonNegInt
    reason: Annotated[str, Field(min_length=3, pattern=r"\S")]


class SelectParams(Section):
    min_solver_jaccard: Fraction = 0.8
    min_solvers: PosInt = 3
    retired: list[RetiredEntry] = []

    @field_validator("retired")
    @classmethod
    def _once(cls, v: list[RetiredEntry]) -> list[RetiredEntry]:
        keys = [(e.dataset, e.ID) for e in v]
        dup = sorted({k for k in keys if keys.count(k) > 1})
        if dup:
            raise ValueError(f"each (dataset, ID) is retired once; repeated: {dup}")
        return v

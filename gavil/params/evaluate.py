"""Params section ``evaluate`` (stage ``evaluate``): the zero-shot models of Table 4 (names of
``models`` entries, each with its own numerics), the bootstrap and the release's predictions."""

from __future__ import annotations

from typing import ClassVar

from pydantic import field_validator

from gavil.params.base import NonNegInt, Section, unique_names


class EvaluateParams(Section):
    MODEL_REFS: ClassVar[dict[str, str | None]] = {"models": None}

    models: list[str] = ["clip-rn50", "clip-vit-b-32", "text-minilm-l6"]  # models entries; names label the tables
    bootstrap: NonNegInt = 1000
    seed: int = 0
    release_predictions_dir: str = "data/sample/winogavil/test_sets_with_zero_shot_predictions"

    @field_validator("models")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        return unique_names(v)

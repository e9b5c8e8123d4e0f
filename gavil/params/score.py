"""Params section ``score`` (stage ``score_candidates``): which ``models`` entry is the rival model
(paper §2.1) whose scores define the benchmark, and the stage's own policy and partitioning."""

from __future__ import annotations

from typing import ClassVar

from gavil.params.base import PosInt, Section, runtime_field


class ScoreParams(Section):
    MODEL_REFS: ClassVar[dict[str, str | None]] = {"model": "open_clip"}

    model: str = "rival"  # a models entry (open_clip): the rival; its precision/device are the entry's
    require_weights: bool = False  # true: fail instead of writing no_weights rows
    # images or prompts per partition; None: 4 per worker, >= 128 items each (gavil/pipeline/parallel.py)
    partition_size: PosInt | None = runtime_field(None)

"""AfLite's report by source (dataset and batch) and the ``plant`` audit (see :mod:`stages.aflite`)."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import TYPE_CHECKING, NotRequired, TypedDict

import numpy as np
import pandas as pd

from gavil.models.features import Layout
from gavil.models.keyed import draw_keys, id_hashes

if TYPE_CHECKING:
    from gavil.params.adversarial import AflitePlantParams

_U64 = np.uint64


class GroupCounts(TypedDict):
    """One dataset's or batch's assessed instances (``by_dataset`` / ``by_batch``)."""

    dataset: NotRequired[str]  # by_batch only: the batch's dataset
    instances: int
    flagged: int
    flagged_percent: float
    mean_score: float | None  # None: none of them was held out


class PlantCounts(TypedDict):
    """The flags against the planted instances: precision = flagged_planted / flagged, recall =
    flagged_planted / planted (None where the denominator is 0)."""

    instances: int
    planted: int
    flagged: int
    flagged_planted: int
    precision: float | None
    recall: float | None


class PlantReport(PlantCounts):
    """``metrics["plant"]``: the audit's settings, overall counts, and counts per dataset and batch."""

    fraction: float
    strength: float
    seed: int
    by_dataset: dict[str, PlantCounts]
    by_batch: dict[str, PlantCounts]


def plant_mask(ids: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """(n,) bool: the instances ``plant`` marks: those whose ``draw_keys(id_hashes(ids), seed,
    "plant")`` falls below ``fraction * 2**64`` (each instance independently, keyed by its id: about
    ``fraction`` of them; none when 0)."""
    if fraction <= 0:
        return np.zeros(len(ids), dtype=bool)
    bound = min(int(fraction * 2**64), 2**64 - 1)
    return draw_keys(id_hashes(ids), seed, "plant") < _U64(bound)


def plant_feature(x: np.ndarray, lay: Layout, planted: np.ndarray, strength: float) -> np.ndarray:
    """``x`` (pair rows, d) with one more column: ``strength`` on the association rows of the
    ``planted`` instances (bool per ``lay`` row), 0 on every other row. A spurious feature that
    gives away the label on those instances only (the audit's known artifact)."""
    col = np.zeros((len(x), 1), dtype=x.dtype)
    hit = lay.label & planted[:, None] & (lay.rows >= 0)
    col[lay.rows[hit], 0] = strength
    return np.hstack([x, col])


def batch_of(selection: pd.DataFrame, instances: pd.DataFrame) -> pd.Series:
    """Each selection row's batch (str, the selection's index): ``release:<file stem>`` for a
    released file's instance, ``raw:<batch folder>`` for a new collection's (the folder holding
    its ``source_file`` in the ``instances`` table), ``<origin>:(source removed)`` where the
    instance is no longer imported (a published instance kept from the ID ledger)."""
    src = instances.set_index("instance_uid")["source_file"]
    files = selection["instance_uid"].map(src)

    def one(origin: str, file: object) -> str:
        if not isinstance(file, str):
            return f"{origin}:(source removed)"
        path = PurePosixPath(file)
        return f"{origin}:{path.stem if origin == 'release' else path.parent.name}"

    return pd.Series([one(o, f) for o, f in zip(selection["origin"], files)], index=selection.index, dtype=str)


def round_or_none(v: float, places: int = 4) -> float | None:
    """``v`` rounded to ``places`` decimals, None for NaN (JSON metrics have no NaN)."""
    return None if np.isnan(v) else round(float(v), places)


def group_counts(t: pd.DataFrame, by: str) -> dict[str, GroupCounts]:
    """Per value of column ``by`` of assessed rows ``t`` (columns dataset, status, score):
    instances, flagged, flagged_percent, mean_score (None: never scored), and the dataset when
    ``by`` is not ``"dataset"``; keys sorted."""
    out: dict[str, GroupCounts] = {}
    for key, g in t.groupby(by, sort=True):
        flagged = g["status"] == "flagged"
        row = GroupCounts(
            instances=len(g),
            flagged=int(flagged.sum()),
            flagged_percent=round(100 * float(flagged.mean()), 2),
            mean_score=round_or_none(float(g["score"].mean())) if g["score"].notna().any() else None,
        )
        out[str(key)] = GroupCounts(dataset=str(g["dataset"].iloc[0]), **row) if by != "dataset" else row
    return out


def _plant_counts(g: pd.DataFrame) -> PlantCounts:
    flagged, planted = (g["status"] == "flagged").to_numpy(), g["planted"].to_numpy(dtype=bool)
    hit = int((flagged & planted).sum())
    return PlantCounts(
        instances=len(g),
        planted=int(planted.sum()),
        flagged=int(flagged.sum()),
        flagged_planted=hit,
        precision=round(hit / flagged.sum(), 4) if flagged.any() else None,
        recall=round(hit / planted.sum(), 4) if planted.any() else None,
    )


def plant_report(t: pd.DataFrame, plant: AflitePlantParams) -> PlantReport:
    """Precision and recall of the flags against the planted instances, over assessed rows ``t``
    (columns dataset, batch, status, planted): overall and per dataset and batch (keys sorted).
    precision = flagged planted / flagged, recall = flagged planted / planted (None where the
    denominator is 0)."""
    return PlantReport(
        fraction=plant.fraction,
        strength=plant.strength,
        seed=plant.seed,
        **_plant_counts(t),
        by_dataset={str(k): _plant_counts(g) for k, g in t.groupby("dataset", sort=True)},
        by_batch={str(k): _plant_counts(g) for k, g in t.groupby("batch", sort=True)},
    )

"""Params section ``prefect``: orchestration only (no stage reads it; :mod:`flows.build`,
:mod:`flows.deploy`).

A deployment names the stages its runs *start from* (``from_stages``), never a hand list of what
to run: :mod:`flows.deploy` adds every stage downstream of them from the stage registry
(:func:`gavil.pipeline.registry.downstream`, which also refuses unknown names; this module cannot
import the registry, which imports the params), so after any scheduled run ``dvc status`` is clean.
"""

from __future__ import annotations

import re
import zoneinfo
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from gavil.params.base import NonNegInt, PosInt, Seconds, Section


class TaskRunnerParams(Section):
    kind: Literal["thread", "dask"] = "thread"
    threads: PosInt | None = None
    dask_address: str | None = None
    dask_workers: PosInt = 2
    dask_threads_per_worker: PosInt = 1


_CRON_FIELD = re.compile(r"^[\w*/,?#LW-]+$")


class DeploymentParams(Section):
    """One deployment: when it runs (``cron``) and the stages its runs start from (``from_stages``;
    every stage downstream of them runs too; null: every stage)."""

    cron: str | None = None  # five (or six) cron fields, e.g. "0 3 * * *"; null: on demand
    from_stages: list[str] | None = Field(
        None,
        description="the stages a run starts from; it also runs every stage downstream of them (from the stage "
        "registry), so `dvc status` is clean after it; null: every stage",
    )

    @model_validator(mode="before")
    @classmethod
    def _old_stage_list(cls, data: Any) -> Any:
        """Refuse the earlier ``stages:`` hand list, saying what to write instead."""
        if isinstance(data, dict) and "stages" in data:
            old = data["stages"]
            example = f"[{old[0]}]" if isinstance(old, list) and old else "null"
            raise ValueError(
                "`stages:` was replaced by `from_stages:` (the stages a run starts from; every stage downstream "
                "of them runs too, from the stage registry, so `dvc status` is clean after the run): write "
                f"`from_stages: {example}` (null: every stage) instead of `stages:`"
            )
        return data

    @field_validator("from_stages")
    @classmethod
    def _starts(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and not v:
            raise ValueError("an empty list runs nothing: name the stages a run starts from, or null for every stage")
        if v is not None and len(set(v)) < len(v):
            raise ValueError(f"a stage is named twice: {sorted({s for s in v if v.count(s) > 1})}")
        return v

    @field_validator("cron")
    @classmethod
    def _cron(cls, v: str | None) -> str | None:
        if v is not None and not (5 <= len(v.split()) <= 6 and all(_CRON_FIELD.match(f) for f in v.split())):
            raise ValueError("not a cron expression like '0 3 * * *' (minute hour day month weekday)")
        return v


class PrefectParams(Section):
    """Orchestration only: no stage reads it (flows/build.py, flows/deploy.py)."""

    task_timeout_s: Annotated[float, Field(gt=0)] | None = 21600
    network_retries: NonNegInt = 2
    retry_delay_s: Seconds = 30
    timezone: str = "UTC"  # an IANA time zone name for the crons
    task_runner: TaskRunnerParams = TaskRunnerParams()
    deployments: dict[str, DeploymentParams] = {
        "nightly-annotations": DeploymentParams(cron="0 3 * * *", from_stages=["import_annotations"]),
        "full-build": DeploymentParams(cron=None, from_stages=None),
    }

    @field_validator("timezone")
    @classmethod
    def _zone(cls, v: str) -> str:
        try:
            zoneinfo.ZoneInfo(v)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError("not an IANA time zone name (e.g. UTC, Europe/Berlin)") from None
        return v

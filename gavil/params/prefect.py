"""Params section ``prefect``: orchestration only (no stage reads it; :mod:`flows.build`,
:mod:`flows.deploy`)."""

from __future__ import annotations

import re
import zoneinfo
from typing import Annotated, Literal

from pydantic import Field, field_validator

from gavil.params.base import NonNegInt, PosInt, Seconds, Section


class TaskRunnerParams(Section):
    kind: Literal["thread", "dask"] = "thread"
    threads: PosInt | None = None
    dask_address: str | None = None
    dask_workers: PosInt = 2
    dask_threads_per_worker: PosInt = 1


_CRON_FIELD = re.compile(r"^[\w*/,?#LW-]+$")


class DeploymentParams(Section):
    cron: str | None = None  # five (or six) cron fields, e.g. "0 3 * * *"; null: on demand
    stages: list[str] | None = None

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
        "nightly-annotations": DeploymentParams(
            cron="0 3 * * *", stages=["import_annotations", "select_instances", "export", "evaluate"]
        ),
        "full-build": DeploymentParams(cron=None, stages=None),
    }

    @field_validator("timezone")
    @classmethod
    def _zone(cls, v: str) -> str:
        try:
            zoneinfo.ZoneInfo(v)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError("not an IANA time zone name (e.g. UTC, Europe/Berlin)") from None
        return v

"""The pipeline as a Prefect flow: every stage of ``stages.pipeline.STAGES`` as a task.

Each task calls :func:`stages.pipeline.run_stage`, the same function ``dvc repro`` runs through
``gavil stage``; dependencies come from the registry (a stage waits for the stages whose
outputs it reads), so independent branches (images vs. annotations) run concurrently.
Run it from the project root: ``gavil flow`` or ``python -m flows.build``.
"""

from __future__ import annotations

import os
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from stages.pipeline import STAGES, run_stage, upstream

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")


@task(name="stage", task_run_name="{name}", cache_policy=NO_CACHE)
def stage_task(name: str, params_path: str = "params.yaml") -> dict[str, Any]:
    """One pipeline stage as a Prefect task; returns the stage's metrics dict."""
    return run_stage(name, params_path)


@flow(name="winogavil-build", log_prints=True)
def build_benchmark(params_path: str = "params.yaml", only: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """Run the stages (all, or ``only`` those named) in DAG order; returns {stage: metrics}.

    Raises:
        KeyError: for a name in ``only`` that is not a stage.
    """
    names = [s.name for s in STAGES]
    for n in only or []:
        if n not in names:
            raise KeyError(f"unknown stage {n!r}; stages: {', '.join(names)}")
    futures: dict[str, Any] = {}
    for spec in STAGES:
        if only and spec.name not in only:
            continue
        wait = [futures[u] for u in upstream(spec) if u in futures]
        futures[spec.name] = stage_task.submit(spec.name, params_path, wait_for=wait)
    return {name: f.result() for name, f in futures.items()}


if __name__ == "__main__":
    build_benchmark()

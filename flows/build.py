"""The pipeline as a Prefect flow: every stage of ``stages.pipeline.STAGES`` as a task.

Each task calls :func:`stages.pipeline.run_stage`, the same function ``dvc repro`` runs through
``gavil stage``; dependencies come from the registry (a stage waits for the stages whose
outputs it reads), so independent branches (images vs. annotations) run concurrently.

DVC is the single source of truth for what is up to date. In a DVC repository each task first
asks DVC (``dvc status`` of its stage): an up-to-date stage is skipped and its recorded metrics
returned; a stage that runs is then recorded with ``dvc commit`` (dvc.lock), so after any flow
run ``dvc status`` agrees and ``dvc repro`` has nothing left to do. Outside a DVC repository
every stage simply runs. Run it from the project root: ``gavil flow`` or ``python -m flows.build``.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from stages._io import load_params
from stages.pipeline import BY_NAME, STAGES, StageSpec, run_stage, upstream

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
_dvc_lock = threading.Lock()  # DVC's repo lock is per process call; serialise our calls


def _with_dvc(action: Callable[[Any], Any]) -> Any | None:
    """Run ``action(repo)`` on this directory's DVC repository (serialised); None if there is none."""
    with _dvc_lock:
        if not Path("dvc.yaml").exists() or not Path(".dvc").is_dir():
            return None
        from dvc.repo import Repo

        with Repo(".") as repo:
            return action(repo)


def dvc_up_to_date(name: str) -> bool:
    """Whether DVC considers stage ``name`` (and its dependencies' outputs) up to date."""
    return _with_dvc(lambda repo: not repo.status(targets=[name])) is True


def dvc_record(name: str) -> bool:
    """Record the outputs stage ``name`` just wrote in dvc.lock (``dvc commit --force``)."""
    return _with_dvc(lambda repo: repo.commit(name, force=True) or True) is True


@task(name="stage", task_run_name="{name}", cache_policy=NO_CACHE)
def stage_task(name: str, params_path: str = "params.yaml", use_dvc: bool = True) -> dict[str, Any]:
    """One pipeline stage as a Prefect task; returns the stage's metrics dict.

    With ``use_dvc`` (and a DVC repository), skips the stage when DVC says it is up to date and
    records it in dvc.lock after it runs. A ``"skipped"`` key says which happened.
    """
    logger = get_run_logger()
    if use_dvc and params_path == "params.yaml" and dvc_up_to_date(name):
        logger.info("%s is up to date in DVC: skipped", name)
        return {**json.loads(Path(BY_NAME[name].metrics).read_text()), "skipped": True}
    metrics = run_stage(name, params_path)
    if use_dvc and params_path == "params.yaml" and dvc_record(name):
        logger.info("%s recorded in dvc.lock", name)
    return {**metrics, "skipped": False}


def task_options(spec: StageSpec, params_path: str) -> dict[str, Any]:
    """Prefect options for a stage from ``params.yaml: prefect``: a timeout for every stage, and
    retries with a delay for stages that touch the network (crawl, weight downloads)."""
    p = load_params(params_path).get("prefect", {})
    opts: dict[str, Any] = {"timeout_seconds": p.get("task_timeout_s")}
    if spec.network:
        opts |= {"retries": int(p.get("network_retries", 0)), "retry_delay_seconds": p.get("retry_delay_s", 0)}
    return opts


@flow(name="winogavil-build", log_prints=True)
def build_benchmark(params_path: str = "params.yaml", only: list[str] | None = None, use_dvc: bool = True) -> dict[str, dict[str, Any]]:
    """Run the stages (all, or ``only`` those named) in DAG order; returns {stage: metrics}.

    Args:
        use_dvc: consult and update DVC (see module docstring); only with the default params.yaml,
            which is the file dvc.yaml reads.

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
        task_fn = stage_task.with_options(**task_options(spec, params_path))
        futures[spec.name] = task_fn.submit(spec.name, params_path, use_dvc, wait_for=wait)
    return {name: f.result() for name, f in futures.items()}


if __name__ == "__main__":
    build_benchmark()

"""The pipeline as a Prefect flow: every stage of ``stages.pipeline.STAGES`` as a task.

Each task calls :func:`stages.pipeline.run_stage`, the same function ``dvc repro`` runs through
``gavil stage``; dependencies come from the registry (a stage waits for the stages whose
outputs it reads), so independent branches (images vs. annotations) run concurrently.

DVC is the single source of truth for what is up to date. In a DVC repository each task first
asks DVC (``dvc status`` of its stage): an up-to-date stage is skipped and its recorded metrics
returned; a stage that runs is then recorded with ``dvc commit`` (dvc.lock), so after any flow
run ``dvc status`` agrees and ``dvc repro`` has nothing left to do. Outside a DVC repository
every stage simply runs. Run it from the project root: ``gavil flow`` or ``python -m flows.build``.

Heavy stages (crawl_images, ocr_filter, score_candidates) are partitioned: a ``plan`` task
lists the partitions, ``work`` tasks are mapped over them (``Task.map``), a ``reduce`` task
writes the stage's tables. The task runner comes from ``params.yaml: prefect.task_runner``:
``thread`` (Prefect's ThreadPoolTaskRunner) or ``dask`` (``prefect_dask.DaskTaskRunner``, from the
optional ``dask`` extra: a local cluster of ``dask_workers`` processes, or the scheduler at
``dask_address``; remote workers need the project folder on a shared file system). Results do not
depend on the runner or the partitioning: each stage's reduce registers everything in one
deterministic order.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from filelock import FileLock
from prefect import flow, get_run_logger, task, unmapped
from prefect.cache_policies import NO_CACHE

from stages._io import ParamsError, load_params
from stages.pipeline import BY_NAME, STAGES, StageSpec, plan_stage, reduce_stage, run_stage, upstream, work_stage

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
_dvc_lock = threading.Lock()  # DVC's repo lock fails fast when busy: serialise our calls


def _with_dvc(action: Callable[[Any], Any]) -> Any | None:
    """Run ``action(repo)`` on this directory's DVC repository, serialised across threads and
    processes (Dask workers) by a file lock; None if there is none."""
    if not Path("dvc.yaml").exists() or not Path(".dvc").is_dir():
        return None
    Path(".dvc/tmp").mkdir(exist_ok=True)
    with _dvc_lock, FileLock(".dvc/tmp/gavil-flow.lock"):
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


@task(name="plan", task_run_name="{name}:plan", cache_policy=NO_CACHE)
def plan_task(name: str, params_path: str = "params.yaml", use_dvc: bool = True) -> dict[str, Any]:
    """``{"skipped": metrics}`` when DVC says the stage is up to date, else ``{"parts": [...],
    "started_at": epoch seconds}`` (the stage's start, for its wall-clock time in reduce)."""
    started_at = time.time()
    if use_dvc and params_path == "params.yaml" and dvc_up_to_date(name):
        get_run_logger().info("%s is up to date in DVC: skipped", name)
        return {"skipped": {**json.loads(Path(BY_NAME[name].metrics).read_text()), "skipped": True}}
    parts = plan_stage(name, params_path)
    get_run_logger().info("%s: %d partition(s)", name, len(parts))
    return {"parts": parts, "started_at": started_at}


@task(name="work", task_run_name="{name}:work", cache_policy=NO_CACHE)
def work_task(name: str, part: Any, params_path: str = "params.yaml") -> Any:
    """One partition of a partitioned stage."""
    return work_stage(name, part, params_path)


@task(name="reduce", task_run_name="{name}:reduce", cache_policy=NO_CACHE)
def reduce_task(name: str, results: list[Any], params_path: str = "params.yaml", use_dvc: bool = True, started_at: float | None = None) -> dict[str, Any]:
    """Finish a partitioned stage and record it in dvc.lock (``seconds``: the whole stage since ``started_at``)."""
    metrics = reduce_stage(name, results, params_path, started_at)
    if use_dvc and params_path == "params.yaml" and dvc_record(name):
        get_run_logger().info("%s recorded in dvc.lock", name)
    return {**metrics, "skipped": False}


def task_runner(params_path: str = "params.yaml") -> Any:
    """The task runner named by ``params.yaml: prefect.task_runner`` (see module docstring).

    Raises:
        ParamsError: unknown kind, or ``dask`` without the ``dask`` extra installed.
    """
    from prefect.task_runners import ThreadPoolTaskRunner

    p = (load_params(params_path).get("prefect") or {}).get("task_runner") or {}
    kind = p.get("kind", "thread")
    if kind == "thread":
        return ThreadPoolTaskRunner(max_workers=p.get("threads"))
    if kind != "dask":
        raise ParamsError(f"prefect.task_runner.kind={kind!r}: expected thread or dask")
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError as e:
        raise ParamsError("prefect.task_runner.kind=dask needs the optional extra: pip install -e '.[dask]'") from e
    if p.get("dask_address"):
        return DaskTaskRunner(address=p["dask_address"])
    workers, threads = int(p.get("dask_workers", 2)), int(p.get("dask_threads_per_worker", 1))
    return DaskTaskRunner(
        cluster_class="distributed.LocalCluster",
        cluster_kwargs={"n_workers": workers, "threads_per_worker": threads, "processes": True, "dashboard_address": None,
                        "env": {"OMP_NUM_THREADS": str(worker_cpu_share(workers, threads))}},
    )  # fmt: skip


def worker_cpu_share(workers: int, threads_per_worker: int, cores: int | None = None) -> int:
    """CPU threads one task may use on a local cluster: ``cores // (workers * threads_per_worker)``, at
    least 1. Exported to the workers as ``OMP_NUM_THREADS``, which caps torch's threads in OCR and in the
    models' ``threads`` (:func:`stages._models.thread_cap`), so 2 workers on 2 cores run 1 thread each
    instead of 2 each (measured: ``benchmarks/scale.py --dask``)."""
    cores = cores or len(os.sched_getaffinity(0))
    return max(1, cores // max(1, workers * threads_per_worker))


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
    specs = [s for s in STAGES if not only or s.name in only]
    futures: dict[str, Any] = {}
    pending = list(specs)
    while pending:
        # submit every plain stage whose upstream is submitted (no blocking), then map one partitioned stage
        ready = [s for s in pending if all(u in futures or u not in {x.name for x in specs} for u in upstream(s))]
        plain = [s for s in ready if not s.partitioned]
        for spec in plain or ready[:1]:
            pending.remove(spec)
            wait = [futures[u] for u in upstream(spec) if u in futures]
            opts = task_options(spec, params_path)
            if not spec.partitioned:
                futures[spec.name] = stage_task.with_options(**opts).submit(spec.name, params_path, use_dvc, wait_for=wait)
                continue
            planned = plan_task.with_options(**opts).submit(spec.name, params_path, use_dvc, wait_for=wait).result()  # blocks on upstream
            if "skipped" in planned:
                futures[spec.name] = _Done(planned["skipped"])
                continue
            works = work_task.with_options(**opts).map(unmapped(spec.name), planned["parts"], unmapped(params_path))
            futures[spec.name] = reduce_task.with_options(timeout_seconds=opts["timeout_seconds"]).submit(spec.name, works, params_path, use_dvc, planned["started_at"])
    return {name: f.result() for name, f in futures.items()}


class _Done:
    """A finished value standing in for a future (a stage DVC skipped at planning)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def result(self) -> Any:
        return self.value


def run_flow(params_path: str = "params.yaml", only: list[str] | None = None, use_dvc: bool = True) -> dict[str, dict[str, Any]]:
    """Run :func:`build_benchmark` on the task runner ``params.yaml`` names."""
    return build_benchmark.with_options(task_runner=task_runner(params_path))(params_path, only, use_dvc)


if __name__ == "__main__":
    run_flow()

"""The pipeline as a Prefect flow: every stage of ``gavil.pipeline.registry.STAGES`` as a task.

Each task calls :func:`gavil.pipeline.runner.run_stage`, the same function ``dvc repro`` runs through
``gavil stage``; dependencies come from the registry (a stage waits for the stages whose
outputs it reads), so independent branches (images vs. annotations) run concurrently.

DVC is the single source of truth for what is up to date. In a DVC repository each task first
asks DVC (``dvc status`` of its stage): an up-to-date stage is skipped and its recorded metrics
returned; a stage that runs is then recorded with ``dvc commit`` (dvc.lock), so after any flow
run ``dvc status`` agrees and ``dvc repro`` has nothing left to do. Outside a DVC repository
every stage simply runs. Run it from the project root: ``gavil flow`` or ``python -m flows.build``.

Heavy stages (crawl_images, ocr_filter, score_candidates, evaluate) are partitioned: a ``plan``
task lists the partitions (automatic sizes planned for the flow's task slots), ``work`` tasks are
mapped over them (``Task.map``; a web crawl's run one after another, its politeness limits holding
within one process), a ``reduce`` task writes the stage's tables. The task runner comes from
``params.yaml: prefect.task_runner``: ``thread`` (Prefect's ThreadPoolTaskRunner) or ``dask``
(``prefect_dask.DaskTaskRunner``, from the optional ``dask`` extra: a local cluster of
``dask_workers`` processes, or the scheduler at ``dask_address``). Results do not depend on the
runner or the partitioning: each stage's reduce registers everything in one deterministic order.

Every task carries the project folder as an absolute path and runs its stage there, so a Dask
worker may run from any directory; every worker must see that folder at the same path (shared
storage), which the flow checks on every worker when it starts (:mod:`flows.cluster`). Each stage
process gets its machine's share of the cores (processes x threads <= cores): ``cores // slots``
CPU threads, where slots are the tasks that may run at once on that machine.

Every stage call runs in a *stage process* (:mod:`flows.hosts`), so ``prefect.task_timeout_s``
really stops a stage (Prefect's own ``timeout_seconds`` cannot interrupt a sync task on a thread),
and what a stage prints (its progress lines) is logged as clean lines. Each step logs one
summary line at INFO: ``<stage>: done in <s> s; <its metrics>``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock
from prefect import flow, get_run_logger, task, unmapped
from prefect.cache_policies import NO_CACHE

from flows import hosts
from flows.cluster import Slots, check_workers, require_project, thread_slots, worker_address
from gavil.errors import ParamsError
from gavil.params import load_params
from gavil.pipeline.parallel import thread_env
from gavil.pipeline.registry import BY_NAME, STAGES, StageSpec, upstream
from gavil.pipeline.registry import spec as stage_spec

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
_dvc_lock = threading.Lock()  # DVC's repo lock fails fast when busy: serialise our calls


def _with_dvc(root: str, action: Callable[[Any], Any]) -> Any | None:
    """Run ``action(repo)`` on the DVC repository at ``root`` (the project), serialised across threads
    and processes (Dask workers) by a file lock; None if there is none. DVC resolves some paths
    against the current directory, so the flow's tasks call this in a stage process, which runs in
    the project folder."""
    project = Path(root)
    if not (project / "dvc.yaml").exists() or not (project / ".dvc").is_dir():
        return None
    (project / ".dvc/tmp").mkdir(exist_ok=True)
    with _dvc_lock, FileLock(str(project / ".dvc/tmp/gavil-flow.lock")):
        from dvc.repo import Repo

        with Repo(root) as repo:
            return action(repo)


def _target(name: str, root: str) -> str:
    """Stage ``name`` as a DVC target that does not depend on this process's directory."""
    return f"{Path(root).resolve() / 'dvc.yaml'}:{name}"


def dvc_up_to_date(name: str, root: str = ".") -> bool:
    """Whether DVC considers stage ``name`` (and its dependencies' outputs) up to date."""
    return _with_dvc(root, lambda repo: not repo.status(targets=[_target(name, root)])) is True


def dvc_record(name: str, root: str = ".") -> bool:
    """Record the outputs stage ``name`` just wrote in dvc.lock (``dvc commit --force``)."""
    return _with_dvc(root, lambda repo: repo.commit(_target(name, root), force=True) or True) is True


@dataclass(frozen=True)
class Run:
    """What every task of one flow run needs: the project folder (absolute: a Dask worker runs the
    stage there, whatever its own directory), the params file (absolute), whether to consult DVC,
    the timeout, and the cores' shares (:class:`flows.cluster.Slots`)."""

    root: str
    params: str
    use_dvc: bool
    slots: Slots

    def metrics(self, name: str) -> dict[str, object]:
        """Stage ``name``'s recorded metrics (a stage DVC skipped)."""
        return {**json.loads((Path(self.root) / BY_NAME[name].metrics).read_text()), "skipped": True}


def _brief(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_brief(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return f"[{len(value)} items]" if len(value) > 3 else "[" + ", ".join(_brief(v) for v in value) + "]"
    return " ".join(str(value).split())


def summary(name: str, metrics: Mapping[str, Any], width: int = 240) -> str:
    """One short line for a finished stage: ``name: done in 1.2 s; key=value, ...`` (its metrics,
    cut at ``width`` characters)."""
    seconds = metrics.get("seconds")
    head = f"{name}: done in {seconds:.1f} s" if isinstance(seconds, int | float) else f"{name}: done"
    items = [f"{k}={_brief(v)}" for k, v in metrics.items() if k not in ("seconds", "reduce_seconds", "skipped")]
    text = head + ("; " + ", ".join(items) if items else "")
    return text if len(text) <= width else text[: width - 1] + "\u2026"


def _in_process(run: Run, func: str, *args: Any, timeout_s: float | None, what: str) -> Any:
    """``func(*args)`` (``"module:function"``; a bare name: of :mod:`gavil.pipeline.runner`) in a stage
    process in the project folder, with this machine's share of the cores; its printed lines logged
    at INFO.

    Raises:
        flows.cluster.ProjectNotShared: this (Dask worker's) machine does not see the project folder.
    """
    require_project(run.root)
    logger = get_run_logger()
    threads = run.slots.for_worker(worker_address())
    return hosts.run_in_process(
        func if ":" in func else f"gavil.pipeline.runner:{func}",
        *args,
        timeout=timeout_s,
        sink=logger.info,
        what=what,
        cwd=run.root,
        threads=threads,
    )


@task(name="stage", task_run_name="{name}", cache_policy=NO_CACHE)
def stage_task(name: str, run: Run, timeout_s: float | None = None) -> dict[str, Any]:
    """One pipeline stage as a Prefect task; returns the stage's metrics dict.

    With ``run.use_dvc`` (and a DVC repository), skips the stage when DVC says it is up to date and
    records it in dvc.lock after it runs. A ``"skipped"`` key says which happened. The stage runs
    in a stage process, killed after ``timeout_s`` seconds (:class:`flows.hosts.StageTimeout`).
    """
    logger = get_run_logger()
    require_project(run.root)
    if run.use_dvc and _in_process(
        run, "flows.build:dvc_up_to_date", name, run.root, timeout_s=None, what="dvc status"
    ):
        logger.info("%s is up to date in DVC: skipped", name)
        return run.metrics(name)
    metrics = _in_process(run, "run_stage", name, run.params, timeout_s=timeout_s, what=f"stage {name}")
    logger.info(summary(name, metrics))
    if run.use_dvc and _in_process(run, "flows.build:dvc_record", name, run.root, timeout_s=None, what="dvc commit"):
        logger.info("%s recorded in dvc.lock", name)
    return {**metrics, "skipped": False}


@task(name="plan", task_run_name="{name}:plan", cache_policy=NO_CACHE)
def plan_task(name: str, run: Run, timeout_s: float | None = None) -> dict[str, Any]:
    """``{"skipped": metrics}`` when DVC says the stage is up to date, else ``{"parts": [...],
    "concurrent": bool, "started_at": epoch seconds}`` (automatic partition sizes planned for the
    flow's task slots; ``started_at``: the stage's start, for its wall-clock time in reduce)."""
    started_at = time.time()
    require_project(run.root)
    if run.use_dvc and _in_process(
        run, "flows.build:dvc_up_to_date", name, run.root, timeout_s=None, what="dvc status"
    ):
        get_run_logger().info("%s is up to date in DVC: skipped", name)
        return {"skipped": run.metrics(name)}
    what = f"stage {name} (plan)"
    planned = _in_process(run, "plan_partitions", name, run.params, run.slots.total, timeout_s=timeout_s, what=what)
    order = "" if planned["concurrent"] else ", run one after another"
    get_run_logger().info("%s: %d partition(s)%s", name, len(planned["parts"]), order)
    return {**planned, "started_at": started_at}


@task(name="work", task_run_name="{name}:work", cache_policy=NO_CACHE)
def work_task(name: str, part: Any, run: Run, index: int = 0, total: int = 1, timeout_s: float | None = None) -> Any:
    """One partition (``index`` of ``total``) of a partitioned stage."""
    t0 = time.perf_counter()
    what = f"stage {name} (partition {index + 1}/{total})"
    result = _in_process(run, "work_stage", name, part, run.params, timeout_s=timeout_s, what=what)
    get_run_logger().info("%s: partition %d/%d done in %.1f s", name, index + 1, total, time.perf_counter() - t0)
    return result


@task(name="reduce", task_run_name="{name}:reduce", cache_policy=NO_CACHE)
def reduce_task(
    name: str, results: list[Any], run: Run, started_at: float | None = None, timeout_s: float | None = None
) -> dict[str, Any]:
    """Finish a partitioned stage and record it in dvc.lock (``seconds``: the whole stage since ``started_at``)."""
    what = f"stage {name} (reduce)"
    metrics = _in_process(run, "reduce_stage", name, results, run.params, started_at, timeout_s=timeout_s, what=what)
    get_run_logger().info(summary(name, metrics))
    if run.use_dvc and _in_process(run, "flows.build:dvc_record", name, run.root, timeout_s=None, what="dvc commit"):
        get_run_logger().info("%s recorded in dvc.lock", name)
    return {**metrics, "skipped": False}


def task_runner(params_path: str = "params.yaml") -> Any:
    """The task runner named by ``params.yaml: prefect.task_runner`` (see module docstring).

    Raises:
        ParamsError: unknown kind, or ``dask`` without the ``dask`` extra installed.
    """
    from prefect.task_runners import ThreadPoolTaskRunner

    p = load_params(params_path).prefect.task_runner
    if p.kind == "thread":
        return ThreadPoolTaskRunner(max_workers=p.threads)
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError as e:
        raise ParamsError("prefect.task_runner.kind=dask needs the optional extra: pip install -e '.[dask]'") from e
    if p.dask_address:
        return DaskTaskRunner(address=p.dask_address)
    workers, threads = p.dask_workers, p.dask_threads_per_worker
    return DaskTaskRunner(
        cluster_class="distributed.LocalCluster",
        cluster_kwargs={
            "n_workers": workers,
            "threads_per_worker": threads,
            "processes": True,
            "dashboard_address": None,
            "env": thread_env(worker_cpu_share(workers, threads)),
        },
    )


def worker_cpu_share(workers: int, threads_per_worker: int, cores: int | None = None) -> int:
    """CPU threads one task may use on a local cluster: ``cores // (workers * threads_per_worker)``, at
    least 1. Exported to the workers as ``OMP_NUM_THREADS`` (and the other variables of
    :data:`gavil.pipeline.parallel.THREAD_VARS`), which caps torch's threads in OCR and in the models'
    ``threads`` (:func:`gavil.models.loading.thread_cap`), so 2 workers on 2 cores run 1 thread each
    instead of 2 each (measured: ``benchmarks/scale.py --dask``)."""
    cores = cores or len(os.sched_getaffinity(0))
    return max(1, cores // max(1, workers * threads_per_worker))


def flow_slots(params_path: str | Path, root: Path) -> Slots:
    """How many tasks of this flow run at once and each one's CPU threads (:class:`flows.cluster.Slots`):
    the thread runner's ``threads`` (null: one per core) on this machine; a local Dask cluster's
    workers x threads, each with its share (:func:`worker_cpu_share`, in the workers' environment); a
    Dask scheduler's workers, after checking that each sees the project at ``root``
    (:func:`flows.cluster.check_workers`).

    Raises:
        flows.cluster.ProjectNotShared, flows.cluster.NoWorkers: see :func:`flows.cluster.check_workers`.
    """
    p = load_params(params_path).prefect.task_runner
    if p.kind == "thread":
        return thread_slots(p.threads)
    if p.dask_address:
        return check_workers(p.dask_address, root)
    return Slots(p.dask_workers * p.dask_threads_per_worker)  # the workers' env holds their share


def task_options(spec: StageSpec, params_path: str) -> dict[str, Any]:
    """A stage's options from ``params.yaml: prefect``: ``timeout_seconds`` for every stage (enforced by
    killing its stage process, :mod:`flows.hosts`, not handed to Prefect, whose thread timeouts cannot
    interrupt a running stage), and retries with a delay for stages that touch the network (crawl,
    weight downloads)."""
    p = load_params(params_path).prefect
    opts: dict[str, Any] = {"timeout_seconds": p.task_timeout_s}
    if spec.network:
        opts |= {"retries": p.network_retries, "retry_delay_seconds": p.retry_delay_s}
    return opts


@flow(name="winogavil-build", log_prints=True)
def build_benchmark(
    params_path: str = "params.yaml", only: list[str] | None = None, use_dvc: bool = True
) -> dict[str, dict[str, Any]]:
    """Run the stages (all, or ``only`` those named) in DAG order; returns {stage: metrics}.

    Args:
        use_dvc: consult and update DVC (see module docstring); only with the default params.yaml,
            which is the file dvc.yaml reads.

    Raises:
        gavil.pipeline.registry.UnknownStage: for a name in ``only`` that is not a stage.
    """
    for n in only or []:
        stage_spec(n)  # raises UnknownStage listing the stages
    root = Path.cwd().resolve()
    params = (root / params_path).resolve()
    slots = flow_slots(params, root)
    run = Run(str(root), str(params), use_dvc and params == root / "params.yaml", slots)
    hosts.configure(slots.total)
    get_run_logger().info(
        "project %s: %d task(s) at once%s", root, slots.total, _threads_note(slots) if slots.threads else ""
    )
    try:
        return _submit_all([s for s in STAGES if not only or s.name in only], run, params)
    finally:
        hosts.shutdown()


def _threads_note(slots: Slots) -> str:
    shares = sorted(set(slots.threads.values()))
    return f", {shares[0] if len(shares) == 1 else f'{shares[0]}-{shares[-1]}'} CPU thread(s) each"


def _submit_all(specs: list[StageSpec], run: Run, params_path: Path) -> dict[str, dict[str, Any]]:
    futures: dict[str, Any] = {}
    pending = list(specs)
    while pending:
        # submit every plain stage whose upstream is submitted (no blocking), then map one partitioned stage
        ready = [s for s in pending if all(u in futures or u not in {x.name for x in specs} for u in upstream(s))]
        plain = [s for s in ready if not s.partitioned]
        for spec in plain or ready[:1]:
            pending.remove(spec)
            wait = [futures[u] for u in upstream(spec) if u in futures]
            opts = task_options(spec, str(params_path))
            timeout_s = opts.pop("timeout_seconds")  # ours to enforce (flows.hosts), not Prefect's
            if not spec.partitioned:
                futures[spec.name] = stage_task.with_options(**opts).submit(  # type: ignore[call-overload]
                    spec.name, run, timeout_s, wait_for=wait
                )
                continue
            planned = (
                plan_task.with_options(**opts)
                .submit(spec.name, run, timeout_s, wait_for=wait)  # type: ignore[call-overload]
                .result()
            )  # blocks on upstream
            if "skipped" in planned:
                futures[spec.name] = _Done(planned["skipped"])
                continue
            parts, work = planned["parts"], work_task.with_options(**opts)
            works: Any
            if planned["concurrent"]:
                works = work.map(
                    unmapped(spec.name),
                    parts,
                    unmapped(run),
                    list(range(len(parts))),
                    unmapped(len(parts)),
                    unmapped(timeout_s),
                )
            else:  # one after another (a web crawl: its politeness limits hold within one process)
                works = []
                for i, part in enumerate(parts):
                    after = works[-1:]
                    works.append(work.submit(spec.name, part, run, i, len(parts), timeout_s, wait_for=after))  # type: ignore[call-overload]
            futures[spec.name] = reduce_task.submit(spec.name, works, run, planned["started_at"], timeout_s)
    return {name: f.result() for name, f in futures.items()}


class _Done:
    """A finished value standing in for a future (a stage DVC skipped at planning)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def result(self) -> Any:
        return self.value


def run_flow(
    params_path: str = "params.yaml", only: list[str] | None = None, use_dvc: bool = True
) -> dict[str, dict[str, Any]]:
    """Run :func:`build_benchmark` on the task runner ``params.yaml`` names."""
    return build_benchmark.with_options(task_runner=task_runner(params_path))(params_path, only, use_dvc)


if __name__ == "__main__":
    run_flow()

"""Running a stage: the same ``run_stage`` / ``plan_stage`` / ``work_stage`` / ``reduce_stage`` calls for
``gavil stage NAME`` (what ``dvc repro`` runs) and the Prefect flow's tasks (:mod:`flows.build`).

``run_stage(name, processes=None)`` (``gavil stage``) runs a partitioned stage's partitions on worker
processes of this machine, as many as its cores and memory allow (:mod:`gavil.pipeline.parallel`);
with the default ``processes=1`` every partition runs in this process, one after another.

The stage module ``stages.<name>`` is imported by name. While it runs, the catalog refuses reads and
writes its spec (:mod:`gavil.pipeline.registry`) does not declare; its metrics go to
``data/metrics/details/<name>.json`` and their summary to ``data/metrics/<name>.json``
(:mod:`gavil.pipeline.metrics`).
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypedDict

from gavil.io import write_json
from gavil.params import Params, load_params
from gavil.pipeline import catalog
from gavil.pipeline.metrics import details_path, metrics_summary
from gavil.pipeline.registry import STAGES, spec


def _module(name: str) -> Any:
    """Stage ``name``'s module, imported after :func:`gavil.compat.pandera_dask.skip_dask_typing` (a
    module may build a table's schema as it loads, e.g. ``stages.evaluate.errors``).

    Raises:
        UnknownStage: ``name`` is no stage of the registry.
    """
    from gavil.compat.pandera_dask import skip_dask_typing

    spec(name)
    skip_dask_typing()
    return importlib.import_module(f"stages.{name}")


@contextmanager
def _running(name: str) -> Iterator[None]:
    """The stage's catalog access, and its heartbeat: a line at least every 10 s however long a step
    takes and however loaded the machine (:class:`gavil.progress.Heartbeat`; nothing in a short stage).
    Also keeps the process's freed memory for reuse (:func:`gavil.pipeline.allocator.keep_freed_memory`)
    and spares it pandera's import of ``dask.dataframe`` (:func:`gavil.compat.pandera_dask.skip_dask_typing`)."""
    from gavil.compat.pandera_dask import skip_dask_typing
    from gavil.pipeline.allocator import keep_freed_memory
    from gavil.progress import Heartbeat, active

    keep_freed_memory()
    skip_dask_typing()
    s = spec(name)
    producers = {w: o.name for o in STAGES for w in o.writes}
    with catalog.stage_access(name, s.reads, s.writes, producers):
        if active() is not None:  # a stage run inside another's (tests): one heartbeat
            yield
            return
        with Heartbeat(name):
            yield


def _timed(call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``call()``'s metrics with ``seconds`` (wall clock) added."""
    t0 = time.perf_counter()
    metrics = dict(call())
    metrics["seconds"] = round(time.perf_counter() - t0, 3)
    return metrics


def write_timing(name: str, seconds: float, **extra: Any) -> None:
    """Write ``data/metrics/timings/<name>.json``: ``{"seconds": wall-clock seconds, "cpu_seconds": user +
    system seconds of this process and the worker processes it waited for, "peak_rss_mb": the largest
    resident set of any of them (MB), **extra}``.

    Declared as top-level ``metrics`` in dvc.yaml, so ``dvc metrics show`` lists them beside the
    stages' own metrics; not stage outputs (they differ on every run) and not in git."""
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    peak_mb = max(own.ru_maxrss, kids.ru_maxrss) / 1024  # Linux: kilobytes
    write_json(
        Path(catalog.TIMINGS_DIR) / f"{name}.json",
        {"seconds": round(seconds, 3), "cpu_seconds": round(cpu, 1), "peak_rss_mb": round(peak_mb), **extra},
    )


def _finish(name: str, metrics: dict[str, Any]) -> dict[str, Any]:
    write_json(details_path(name), metrics)
    write_json(catalog.metrics_path(name), metrics_summary(name, metrics))
    return metrics


def _params(params: str | os.PathLike[str] | Params) -> Params:
    return params if isinstance(params, Params) else load_params(params)


def run_stage(
    name: str, params: str | os.PathLike[str] | Params = "params.yaml", processes: int | None = 1
) -> dict[str, Any]:
    """Run one stage in the current directory (the project root); returns its metrics (written
    to ``data/metrics/details/<name>.json``, their summary to ``data/metrics/<name>.json``) with
    ``seconds`` (wall clock, also written to ``data/metrics/timings/<name>.json``).

    Args:
        processes: for a partitioned stage, at most this many worker processes (None: as many as
            the cores and memory allow, :func:`run_partitioned`); 1 runs every partition in this
            process. The outputs are the same bytes either way.

    Raises:
        UnknownStage, gavil.errors.ParamsError, gavil.pipeline.catalog.MissingInput: see their docs.
        gavil.pipeline.parallel.WorkerDied: a worker process ended in the middle of a partition.
    """
    if spec(name).partitioned and processes != 1:
        return run_partitioned(name, params, processes)
    module, p = _module(name), _params(params)
    with _running(name):
        metrics = _timed(lambda: _finish(name, module.run(p)))
    write_timing(name, metrics["seconds"])
    return metrics


def concurrent(name: str, params: Params) -> bool:
    """Whether a partitioned stage's partitions may run at the same time (its module's
    ``concurrent(params)``; True where it has none)."""
    check = getattr(_module(name), "concurrent", None)
    return True if check is None else bool(check(params))


def worker_threads(name: str, params: Params) -> int:
    """The CPU threads one worker of a partitioned stage uses well (its module's
    ``worker_threads(params)``; 1 where it has none). A stage whose one process already runs its
    model on several threads (torch's intra-op pool) gets ``cores // worker_threads`` workers, not
    one per core: on 2 cores, one process of 2 threads beat two of 1 thread each for scoring and
    evaluate, whose workers' imports and model loads were not repaid (``benchmarks/parallel.py``)."""
    check = getattr(_module(name), "worker_threads", None)
    return 1 if check is None else max(1, int(check(params)))


def run_partitioned(
    name: str, params: str | os.PathLike[str] | Params = "params.yaml", processes: int | None = None
) -> dict[str, object]:
    """Run a partitioned stage with its partitions on worker processes (``gavil stage``).

    Plans the partitions for the workers this machine can take (:func:`gavil.pipeline.parallel.budget`:
    cores, ``parallel.processes`` or ``processes``, memory at ``parallel.worker_memory_mb.<name>`` each),
    runs them on that many spawned processes (never more than the partitions, nor more than
    ``cores // worker_threads``: :func:`worker_threads`) with ``cores // processes`` threads each,
    then reduces them here in plan order. One partition (a small input), one core, or a stage whose
    partitions must not overlap (``concurrent``) runs in this process. Prints one line saying how.
    Returns the metrics (as :func:`run_stage`).
    """
    from gavil.pipeline import parallel

    module, p = _module(name), _params(params)
    memory = float(getattr(p.parallel.worker_memory_mb, name))
    available = parallel.available_mb()
    limits = [x for x in (processes, p.parallel.processes) if x is not None]
    limit = min(limits) if limits else None
    budget = parallel.budget(memory, limit, p.parallel.memory_fraction, available=available)
    per = worker_threads(name, p)
    workers = min(budget.workers, max(1, budget.cores // per)) if concurrent(name, p) else 1
    started_at = time.time()
    with _running(name), parallel.planning_for(workers):
        parts = module.plan(p)
    n = min(workers, len(parts))
    threads = parallel.threads_per_process(n, budget.cores)
    how = f"{n} worker processes x {threads} thread(s)" if n > 1 else "this process"
    uses = f"; a worker uses {per} threads well" if per > 1 else ""
    print(f"{name}: {len(parts)} partition(s) on {how}; {budget.describe(memory, available)}{uses}", file=sys.stderr)
    if n > 1:
        results = parallel.map_spawned(work_stage, [(name, part, p) for part in parts], n, threads)
    else:
        with _running(name):
            results = [module.work(p, part) for part in parts]
    return reduce_stage(name, results, p, started_at=started_at, processes=n)


def plan_stage(
    name: str, params: str | os.PathLike[str] | Params = "params.yaml", workers: int | None = None
) -> list[Any]:
    """A partitioned stage's partitions (run in the project root), automatic partition sizes planned
    for ``workers`` workers (:func:`gavil.pipeline.parallel.partition`; None: one)."""
    from gavil.pipeline import parallel

    module, p = _module(name), _params(params)
    with _running(name), parallel.planning_for(workers):
        parts: list[Any] = module.plan(p)
    return parts


class PartitionPlan(TypedDict):
    """A partitioned stage's plan for the Prefect flow: its partitions (what its ``work`` takes)
    and whether they may run at the same time."""

    parts: list[Any]
    concurrent: bool


def plan_partitions(
    name: str, params: str | os.PathLike[str] | Params = "params.yaml", workers: int | None = None
) -> PartitionPlan:
    """``{"parts": plan_stage(...), "concurrent": concurrent(...)}``: what the Prefect flow maps, and
    whether its partitions may run at the same time (a web crawl's run one after another)."""
    p = _params(params)
    return {"parts": plan_stage(name, p, workers), "concurrent": concurrent(name, p)}


def work_stage(name: str, part: Any, params: str | os.PathLike[str] | Params = "params.yaml") -> Any:
    """One partition of a partitioned stage; returns what its ``reduce`` needs."""
    module, p = _module(name), _params(params)
    with _running(name):
        return module.work(p, part)


def reduce_stage(
    name: str,
    results: list[Any],
    params: str | os.PathLike[str] | Params = "params.yaml",
    started_at: float | None = None,
    processes: int | None = None,
) -> dict[str, Any]:
    """Finish a partitioned stage from its partitions' results; returns its metrics.

    Args:
        started_at: when the stage was planned (``time.time()``, epoch seconds): ``seconds`` is
            then the whole stage (plan, the partitions, reduce) on the wall clock, and
            ``reduce_seconds`` the reduce alone. Without it ``seconds`` is the reduce alone.
            ``seconds`` and ``partitions`` are also written to ``data/metrics/timings/<name>.json``.
        processes: the worker processes the partitions ran on (``gavil stage``), for the timings file.
    """
    module, p = _module(name), _params(params)
    with _running(name):
        metrics = _timed(lambda: _finish(name, module.reduce(p, results)))
    if started_at is not None:
        metrics["reduce_seconds"] = metrics["seconds"]
        metrics["seconds"] = round(time.time() - started_at, 3)
    extra = {"processes": processes} if processes is not None else {}
    write_timing(name, metrics["seconds"], partitions=len(results), **extra)
    return metrics

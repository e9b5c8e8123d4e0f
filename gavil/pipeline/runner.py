"""Running a stage: the same ``run_stage`` / ``plan_stage`` / ``work_stage`` / ``reduce_stage`` calls for
``gavil stage NAME`` (what ``dvc repro`` runs) and the Prefect flow's tasks (:mod:`flows.build`).

The stage module ``stages.<name>`` is imported by name. While it runs, the catalog refuses reads and
writes its spec (:mod:`gavil.pipeline.registry`) does not declare; its metrics go to
``data/metrics/details/<name>.json`` and their summary to ``data/metrics/<name>.json``
(:mod:`gavil.pipeline.metrics`).
"""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gavil.io import write_json
from gavil.params import Params, load_params
from gavil.pipeline import catalog
from gavil.pipeline.metrics import details_path, metrics_summary
from gavil.pipeline.registry import STAGES, spec


def _module(name: str) -> Any:
    spec(name)
    return importlib.import_module(f"stages.{name}")


@contextmanager
def _running(name: str) -> Iterator[None]:
    """The stage's catalog access, and its heartbeat: a line at least every 10 s however long a step
    takes and however loaded the machine (:class:`gavil.progress.Heartbeat`; nothing in a short stage)."""
    from gavil.progress import Heartbeat, active

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


def _params(params: str | os.PathLike | Params) -> Params:
    return params if isinstance(params, Params) else load_params(params)


def run_stage(name: str, params: str | os.PathLike | Params = "params.yaml") -> dict[str, Any]:
    """Run one stage in the current directory (the project root); returns its metrics (written
    to ``data/metrics/details/<name>.json``, their summary to ``data/metrics/<name>.json``) with
    ``seconds`` (wall clock, also written to ``data/metrics/timings/<name>.json``).

    Raises:
        UnknownStage, gavil.errors.ParamsError, gavil.pipeline.catalog.MissingInput: see their docs.
    """
    module, p = _module(name), _params(params)
    with _running(name):
        metrics = _timed(lambda: _finish(name, module.run(p)))
    write_timing(name, metrics["seconds"])
    return metrics


def plan_stage(name: str, params: str | os.PathLike | Params = "params.yaml") -> list[Any]:
    """A partitioned stage's partitions (run in the project root)."""
    module, p = _module(name), _params(params)
    with _running(name):
        return module.plan(p)


def work_stage(name: str, part: Any, params: str | os.PathLike | Params = "params.yaml") -> Any:
    """One partition of a partitioned stage; returns what its ``reduce`` needs."""
    module, p = _module(name), _params(params)
    with _running(name):
        return module.work(p, part)


def reduce_stage(
    name: str, results: list[Any], params: str | os.PathLike | Params = "params.yaml", started_at: float | None = None
) -> dict[str, Any]:
    """Finish a partitioned stage from its partitions' results; returns its metrics.

    Args:
        started_at: when the stage was planned (``time.time()``, epoch seconds): ``seconds`` is
            then the whole stage (plan, the partitions, reduce) on the wall clock, and
            ``reduce_seconds`` the reduce alone. Without it ``seconds`` is the reduce alone.
            ``seconds`` and ``partitions`` are also written to ``data/metrics/timings/<name>.json``.
    """
    module, p = _module(name), _params(params)
    with _running(name):
        metrics = _timed(lambda: _finish(name, module.reduce(p, results)))
    if started_at is not None:
        metrics["reduce_seconds"] = metrics["seconds"]
        metrics["seconds"] = round(time.time() - started_at, 3)
    write_timing(name, metrics["seconds"], partitions=len(results))
    return metrics

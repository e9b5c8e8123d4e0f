"""Where a Prefect flow run's time went: per stage and task kind, its window and busy time.

Reads a finished ``winogavil-build`` flow run's task runs from the Prefect API (the server at
``PREFECT_API_URL``, or the local ephemeral one over ``~/.prefect``, which is where
``benchmarks/scale.py --dask`` records its flow) and groups them by stage and kind: ``stage``
(a plain stage), ``plan``, ``work`` (the mapped partitions) and ``reduce``. Per group:

- ``start_s``/``end_s``: seconds from the flow run's start to the first task's start and the
  last task's end (the stage's window on the wall clock);
- ``tasks`` and ``busy_s``: how many task runs, and their summed run time (the sum over the
  partitions; ``busy_s / (end_s - start_s)`` is how many ran at once on average).

Usage (project root, venv with the ``dask`` or ``test`` extra):
    python benchmarks/flow_timeline.py [--flow-run UUID] [--out flow_timeline]
Without ``--flow-run``: the latest completed ``winogavil-build`` run. Prints a table and writes
benchmarks/results/<out>.json.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import machine, write_result  # noqa: E402


def timeline(flow_start: datetime, tasks: list[tuple[str, datetime | None, datetime | None]]) -> list[dict[str, Any]]:
    """Group task runs ``(name, start, end)`` named ``stage`` or ``stage:kind`` (flows/build.py's
    task_run_name) into one row per (stage, kind), in order of first start; times in seconds."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for name, start, end in sorted((t for t in tasks if t[1] and t[2]), key=lambda t: t[1]):
        stage, _, kind = name.partition(":")
        g = groups.setdefault(
            (stage, kind or "stage"),
            {"stage": stage, "kind": kind or "stage", "start_s": None, "end_s": 0.0, "tasks": 0, "busy_s": 0.0},
        )
        s, e = (start - flow_start).total_seconds(), (end - flow_start).total_seconds()
        g["start_s"] = s if g["start_s"] is None else min(g["start_s"], s)
        g["end_s"] = max(g["end_s"], e)
        g["tasks"] += 1
        g["busy_s"] += e - s
    return [
        {**g, "start_s": round(g["start_s"], 1), "end_s": round(g["end_s"], 1), "busy_s": round(g["busy_s"], 1)}
        for g in groups.values()
    ]


def read_run(flow_run_id: str | None) -> tuple[Any, list[tuple[str, datetime | None, datetime | None]]]:
    """The flow run (the latest completed winogavil-build run if no id) and its task runs.

    Raises:
        SystemExit: no such flow run.
    """
    from uuid import UUID

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowFilter,
        FlowFilterName,
        FlowRunFilter,
        FlowRunFilterId,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.client.schemas.sorting import FlowRunSort

    with get_client(sync_client=True) as client:
        if flow_run_id:
            run = client.read_flow_run(UUID(flow_run_id))
        else:
            runs = client.read_flow_runs(
                flow_filter=FlowFilter(name=FlowFilterName(any_=["winogavil-build"])),
                flow_run_filter=FlowRunFilter(state=dict(type=FlowRunFilterStateType(any_=[StateType.COMPLETED]))),
                sort=FlowRunSort.START_TIME_DESC,
                limit=1,
            )
            if not runs:
                raise SystemExit("no completed winogavil-build flow run on this Prefect API")
            run = runs[0]
        tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id])))
    return run, [(t.name, t.start_time, t.end_time) for t in tasks]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--flow-run", help="flow run id (default: the latest completed winogavil-build run)")
    ap.add_argument("--out", default="flow_timeline", help="results file name: benchmarks/results/<out>.json")
    args = ap.parse_args()
    run, tasks = read_run(args.flow_run)
    rows = timeline(run.start_time, tasks)
    total = (run.end_time - run.start_time).total_seconds()
    print(f"flow run {run.name} ({run.id}): {total:.1f} s, {len(tasks)} task runs")
    print(f"{'stage':20s} {'kind':7s} {'start s':>8s} {'end s':>8s} {'tasks':>6s} {'busy s':>8s}")
    for r in rows:
        print(
            f"{r['stage']:20s} {r['kind']:7s} {r['start_s']:8.1f} {r['end_s']:8.1f} {r['tasks']:6d} {r['busy_s']:8.1f}"
        )
    write_result(
        args.out,
        {
            "machine": machine(),
            "flow_run": str(run.id),
            "flow_run_name": run.name,
            "total_s": round(total, 1),
            "groups": rows,
        },
    )


if __name__ == "__main__":
    main()

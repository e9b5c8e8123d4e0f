"""Prefect deployments of :func:`flows.build.build_benchmark`, served from this process.

Defined by the ``prefect`` section of params.yaml: each entry of ``prefect.deployments`` names a
deployment, its cron schedule (or null for on-demand only) and the stages it runs (null = all).
By default:

- ``nightly-annotations`` (03:00 UTC): import_annotations -> select_instances -> export ->
  evaluate, i.e. fold in the annotation batches that arrived and rebuild the benchmark;
- ``full-build`` (on demand): every stage, SWOW ingestion to evaluation.

Serve them against a local Prefect server (README, "Prefect")::

    export PREFECT_API_URL=http://127.0.0.1:4200/api
    gavil server                # a local server in the background (flows/server.py), once it answers
    gavil serve &               # waits for the API, then main() below
    gavil trigger full-build    # a run now, once the deployment is registered
"""

from __future__ import annotations

from typing import Any

from flows.build import build_benchmark, task_runner
from gavil.errors import ParamsError
from gavil.params import load_params
from gavil.pipeline.registry import BY_NAME


def deployments(params_path: str = "params.yaml") -> list[Any]:
    """The RunnerDeployments described by ``params.yaml: prefect``.

    Raises:
        ParamsError: an unknown stage name or a malformed entry.
    """
    from prefect.schedules import Cron

    p = load_params(params_path).prefect
    out = []
    flow_ = build_benchmark.with_options(task_runner=task_runner(params_path))
    for name, spec in p.deployments.items():
        stages = spec.stages
        for s in stages or []:
            if s not in BY_NAME:
                raise ParamsError(f"prefect.deployments.{name}: unknown stage {s!r}; stages: {', '.join(BY_NAME)}")
        out.append(
            flow_.to_deployment(
                name=name,
                schedules=[Cron(spec.cron, timezone=p.timezone)] if spec.cron else None,
                parameters={"params_path": params_path, "only": stages},
                description=f"Stages: {', '.join(stages) if stages else 'all'}.",
                tags=["winogavil"],
            )
        )
    return out


def main(params_path: str = "params.yaml") -> None:
    """Serve every deployment until interrupted (needs a Prefect API: PREFECT_API_URL)."""
    from prefect import serve

    serve(*deployments(params_path))


if __name__ == "__main__":
    main()

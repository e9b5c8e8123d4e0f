"""A scheduled deployment of :func:`flows.build.build_benchmark`, served from this process.

Schedule and name come from the ``prefect`` section of params.yaml. Serve it against a local
Prefect server (README, "Scheduled runs with Prefect")::

    prefect server start --host 127.0.0.1 &          # UI/API on http://127.0.0.1:4200
    export PREFECT_API_URL=http://127.0.0.1:4200/api
    gavil serve                                      # or: python -m flows.deploy
    prefect deployment run 'winogavil-build/nightly-build'   # a run now, besides the cron
"""

from __future__ import annotations

from typing import Any

from flows.build import build_benchmark
from stages._io import load_params, section


def deployment(params_path: str = "params.yaml") -> Any:
    """The RunnerDeployment with the cron schedule from ``params.yaml: prefect``."""
    from prefect.schedules import Cron

    p = section(load_params(params_path), "prefect", ("deployment", "cron", "timezone"))
    return build_benchmark.to_deployment(
        name=p["deployment"],
        schedules=[Cron(p["cron"], timezone=p["timezone"])],
        parameters={"params_path": params_path},
        description="Rebuild the WinoGAViL-style benchmark from params.yaml (all stages).",
        tags=["winogavil"],
    )


def main(params_path: str = "params.yaml") -> None:
    """Serve the deployment until interrupted (needs a Prefect API: PREFECT_API_URL)."""
    from prefect import serve

    serve(deployment(params_path))


if __name__ == "__main__":
    main()

"""Prefect deployments of :func:`flows.build.build_benchmark`, served from this process (``gavil serve``).

Defined by the ``prefect`` section of params.yaml: each entry of ``prefect.deployments`` names a
deployment, its cron schedule (or null for on-demand only) and the stages its runs start from
(``from_stages``; null = every stage). A run also runs every stage downstream of those, taken from the
stage registry (:func:`gavil.pipeline.registry.downstream`), never from a hand list, so after any run
``dvc status`` has nothing stale. By default:

- ``nightly-annotations`` (03:00 UTC) from import_annotations: import_annotations -> select_instances
  -> aflite -> export -> evaluate, i.e. fold in the annotation batches that arrived and rebuild
  everything that reads them;
- ``full-build`` (on demand): every stage, SWOW ingestion to evaluation.

Serve them against a local Prefect server (docs/prefect.md "Deployments and schedules")::

    export PREFECT_API_URL=http://127.0.0.1:4200/api
    gavil server                # a local server in the background (flows/server.py), once it answers
    gavil serve &               # waits for the API, then main() below
    gavil trigger full-build    # a run now, once the deployment is registered
    gavil serve --stop          # stop serving (stop())

**One** ``gavil serve`` **per Prefect home.** A served deployment is paused when its ``gavil serve``
stops (Prefect's ``pause_on_shutdown``: no scheduled runs pile up while nothing serves them), and a
new ``gavil serve`` resumes it. Two at once would undo each other: the first one's shutdown pauses the
deployments the second one serves, silently. So ``gavil serve`` holds a lock
(``$PREFECT_HOME/gavil-serve.lock``, released by the operating system when the process ends, even
when killed) and a second one refuses, naming the first one's pid and how to stop it. Both on start
and on stop, ``gavil serve`` prints the state of each deployment on the server (active or paused) and
how to resume a paused one; ``gavil serve --stop`` stops the running one, waits until it has exited
(its deployments paused) and prints the same.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from flows.build import build_benchmark, task_runner
from flows.server import FLOW_NAME, api_url, prefect_home
from gavil.errors import GavilError, ParamsError
from gavil.params import load_params
from gavil.params.prefect import DeploymentParams
from gavil.pipeline.registry import STAGES, UnknownStage, downstream

LOCK_NAME = "gavil-serve.lock"  # in $PREFECT_HOME: held by the running `gavil serve`
INFO_NAME = "gavil-serve.json"  # in $PREFECT_HOME: its pid, project folder, API and deployments
HOW_TO_STOP = "`gavil serve --stop` (or Ctrl-C in its terminal)"


class AlreadyServing(GavilError):
    """Another ``gavil serve`` is running with the same Prefect home."""


def deployment_stages(name: str, spec: DeploymentParams) -> list[str] | None:
    """The stages a run of deployment ``name`` runs: its ``from_stages`` and every stage downstream
    of them, in registry (DAG) order; None (every stage) when ``from_stages`` is null.

    Raises:
        ParamsError: ``from_stages`` names a stage that does not exist (listing the stages).
    """
    if spec.from_stages is None:
        return None
    try:
        return downstream(spec.from_stages)
    except UnknownStage as e:
        raise ParamsError(f"params.yaml: prefect.deployments.{name}.from_stages: {e}") from None


def describe(name: str, spec: DeploymentParams, timezone: str = "UTC") -> str:
    """One line for deployment ``name``: its schedule and the stages it runs."""
    stages = deployment_stages(name, spec)
    when = f"cron {spec.cron} {timezone}" if spec.cron else "on demand"
    what = f"every stage ({len(STAGES)})" if stages is None else " -> ".join(stages)
    return f"{name} ({when}): {what}"


def deployments(params_path: str = "params.yaml") -> list[Any]:
    """The RunnerDeployments described by ``params.yaml: prefect`` (their ``only`` parameter: the
    stages of :func:`deployment_stages`).

    Raises:
        ParamsError: an unknown stage name or a malformed entry.
    """
    from prefect.schedules import Cron

    p = load_params(params_path).prefect
    out = []
    flow_ = build_benchmark.with_options(task_runner=task_runner(params_path))
    for name, spec in p.deployments.items():
        stages = deployment_stages(name, spec)
        start = ", ".join(spec.from_stages) if spec.from_stages else "every stage"
        out.append(
            flow_.to_deployment(
                name=name,
                schedules=[Cron(spec.cron, timezone=p.timezone)] if spec.cron else None,
                parameters={"params_path": params_path, "only": stages},
                description=f"From {start}; runs {', '.join(stages) if stages else 'every stage'}.",
                tags=["winogavil"],
            )
        )
    return out


# ------------------------------------------------------------------------------- one serve at a time
def _running_info(home: Path) -> dict[str, Any]:
    try:
        info = json.loads((home / INFO_NAME).read_text())
        return info if isinstance(info, dict) else {}
    except (OSError, ValueError):
        return {}


@contextlib.contextmanager
def single_instance(home: Path, info: dict[str, object]) -> Iterator[None]:
    """Hold the serve lock of Prefect home ``home`` for the block, with ``info`` (pid, project, API,
    deployments) next to it for the messages of a second serve and of ``gavil serve --stop``.

    Raises:
        AlreadyServing: another process holds it (the message names its pid and how to stop it).
    """
    home.mkdir(parents=True, exist_ok=True)
    lock = FileLock(home / LOCK_NAME, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        other = _running_info(home)
        pid, project = other.get("pid", "?"), other.get("project", "?")
        raise AlreadyServing(
            f"`gavil serve` is already running (pid {pid}, project {project}, API {other.get('api', '?')}): "
            f"one at a time, or stopping one pauses the deployments the other serves. Stop it with "
            f"{HOW_TO_STOP.replace('its terminal', f'its terminal, or kill {pid}')}, then start `gavil serve` again."
        ) from None
    try:
        (home / INFO_NAME).write_text(json.dumps(info, sort_keys=True) + "\n")
        yield
    finally:
        (home / INFO_NAME).unlink(missing_ok=True)
        lock.release()


def serving_pid(home: Path | None = None) -> int | None:
    """The pid of the ``gavil serve`` running with Prefect home ``home`` (default: this one's), or None."""
    home = home or prefect_home()
    if not (home / LOCK_NAME).exists():
        return None
    lock = FileLock(home / LOCK_NAME, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        pid = _running_info(home).get("pid")
        return int(pid) if isinstance(pid, int) else -1
    lock.release()
    return None


# ------------------------------------------------------------------------------- deployment states
def deployment_states(api: str, names: list[str]) -> dict[str, str] | None:
    """``{name: "active" | "paused" | "not registered"}`` for deployments ``names`` of this project's
    flow on the server at ``api``; None when the API does not answer."""
    body = {"flows": {"name": {"any_": [FLOW_NAME]}}, "deployments": {"name": {"any_": names}}}
    req = urllib.request.Request(
        f"{api.rstrip('/')}/deployments/filter",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as reply:
            found = {d["name"]: d for d in json.loads(reply.read())}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return {n: ("paused" if found[n].get("paused") else "active") if n in found else "not registered" for n in names}


def states_line(api: str, names: list[str], serving: bool) -> str:
    """What state the deployments are in on ``api`` and what to do about it, in one or two sentences."""
    states = deployment_states(api, names)
    if states is None:
        return f"could not read the deployments' state: no Prefect API answers at {api} (see `prefect deployment ls`)"
    shown = ", ".join(f"{n} {s}" for n, s in states.items())
    paused = [n for n, s in states.items() if s == "paused"]
    active = [n for n, s in states.items() if s == "active"]
    line = f"deployments on {api}: {shown}"
    if paused:
        line += "; a paused deployment's schedule creates no runs until `gavil serve` runs again (it resumes them)"
    if active and not serving:
        line += (
            f"; {', '.join(active)} not served but active: its scheduled runs wait (Late) until `gavil serve` runs "
            f"again (or pause it: `prefect deployment pause {FLOW_NAME}/<name>`)"
        )
    return line


def main(params_path: str = "params.yaml") -> None:
    """Serve every deployment until stopped (needs a Prefect API: PREFECT_API_URL); one at a time.

    Prints the deployments' state when it starts (saying which ones it resumes) and when it stops
    (paused by the shutdown, and how to resume them).

    Raises:
        AlreadyServing: another ``gavil serve`` runs with this Prefect home.
        ParamsError: bad ``prefect.deployments``.
    """
    from prefect import serve

    p = load_params(params_path).prefect
    served = deployments(params_path)
    names = list(p.deployments)
    api = api_url() or ""
    info = {"pid": os.getpid(), "project": str(Path.cwd()), "api": api, "deployments": names}
    with single_instance(prefect_home(), info):
        before = deployment_states(api, names) or {}
        resumed = [n for n, s in before.items() if s == "paused"]
        lines = [f"gavil serve (pid {os.getpid()}) serving on {api}:"]
        lines += [f"  {describe(n, spec, p.timezone)}" for n, spec in p.deployments.items()]
        if resumed:
            lines.append(f"  resuming {', '.join(resumed)} (paused when the last `gavil serve` stopped)")
        lines.append(f"  stop with {HOW_TO_STOP}: that pauses these deployments until the next `gavil serve`")
        print("\n".join(lines), flush=True)
        # Prefect 3.8.8's SIGTERM handler calls its async stop from a signal handler, which warns that a
        # coroutine was never awaited; the shutdown still pauses the deployments (checked below)
        warnings.filterwarnings("ignore", message="coroutine 'Runner.astop' was never awaited")
        try:
            serve(*served)
        finally:
            print(f"gavil serve (pid {os.getpid()}) stopped; {states_line(api, names, serving=False)}", flush=True)


def _deployment_names(params_path: str = "params.yaml") -> list[str]:
    """The deployments ``params_path`` defines; none when it cannot be read (not a project folder)."""
    try:
        return list(load_params(params_path).prefect.deployments)
    except GavilError:
        return []


def _exited(home: Path, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while serving_pid(home) is not None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True


def stop(wait: float = 60) -> str:
    """Stop the ``gavil serve`` of this Prefect home (SIGTERM, SIGKILL after ``wait`` seconds), once it
    has exited, and say what state its deployments are in."""
    home = prefect_home()
    info = _running_info(home)
    pid = serving_pid(home)
    api = info.get("api") or api_url() or ""
    names = info.get("deployments") or _deployment_names()
    if pid is None:
        head = f"no `gavil serve` is running (Prefect home {home})"
        return f"{head}; {states_line(api, names, serving=False)}" if api and names else head
    if pid <= 0:
        raise GavilError(f"`gavil serve` holds {home / LOCK_NAME} but {INFO_NAME} names no pid: stop it by hand")
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)  # Prefect's runner: stop polling, pause the deployments, exit
    how = "stopped"
    if not _exited(home, wait):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        how = f"killed (no exit {wait:g} s after SIGTERM, so it paused nothing)"
        if not _exited(home, 30):
            raise GavilError(f"`gavil serve` (pid {pid}) did not exit after SIGKILL")
    return f"{how} `gavil serve` (pid {pid}); {states_line(api, names, serving=False)}"


if __name__ == "__main__":
    main()

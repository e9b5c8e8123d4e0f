"""A local Prefect server for the deployments, and waiting for one: ``gavil server``, ``gavil serve``
and ``gavil trigger`` (docs/prefect.md "Deployments and schedules").

``gavil server`` starts ``prefect server start`` in the background (its own session, output in
``$PREFECT_HOME/gavil-server.log``, pid in ``$PREFECT_HOME/server.pid``, so ``prefect server stop``
stops it too) and returns once ``/api/health`` answers. ``gavil serve`` and ``gavil trigger`` wait
(bounded) for the API and say what to do when none answers, instead of a long traceback.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from gavil.errors import GavilError

DEFAULT_PORT = 4200
LOG_NAME = "gavil-server.log"
PID_NAME = "server.pid"  # Prefect's own name: `prefect server stop` reads it
FLOW_NAME = "winogavil-build"
HOW_TO_START = (
    "start one with `gavil server` and `export PREFECT_API_URL=http://127.0.0.1:4200/api`"
    ' (docs/prefect.md "Deployments and schedules")'
)


class NoServer(GavilError):
    """No Prefect API answers where PREFECT_API_URL points (or it is not set)."""


@dataclass(frozen=True)
class Started:
    """A running local server: its API URL, process id (None: it was already running) and log file."""

    api: str
    pid: int | None
    log: Path | None

    @property
    def ui(self) -> str:
        return self.api.removesuffix("/api")


def api_url() -> str | None:
    """The Prefect API URL this process would use (PREFECT_API_URL or the active profile)."""
    from prefect.settings import get_current_settings

    return get_current_settings().api.url


def prefect_home() -> Path:
    from prefect.settings import get_current_settings

    return Path(get_current_settings().home).expanduser()


def healthy(api: str, timeout: float = 2.0) -> bool:
    """Whether ``<api>/health`` answers ``true``."""
    try:
        with urllib.request.urlopen(f"{api.rstrip('/')}/health", timeout=timeout) as reply:
            return reply.read().strip() == b"true"
    except (OSError, ValueError):
        return False


def wait_healthy(api: str, seconds: float, proc: subprocess.Popen | None = None) -> bool:
    """Poll ``<api>/health`` for up to ``seconds``; False at the deadline or when ``proc`` exits."""
    deadline = time.monotonic() + seconds
    while True:
        if healthy(api):
            return True
        if time.monotonic() >= deadline or (proc is not None and proc.poll() is not None):
            return False
        time.sleep(0.5)


def local_port(port: int | None) -> int:
    """``port``, else PREFECT_API_URL's port when it points at this machine, else 4200."""
    if port:
        return port
    url = urlparse(os.environ.get("PREFECT_API_URL", ""))
    if url.hostname in ("127.0.0.1", "localhost") and url.port:
        return url.port
    return DEFAULT_PORT


def check_server_dependencies() -> None:
    """Refuse a SQLAlchemy with which Prefect 3.8.8's scheduler creates no runs.

    Raises:
        GavilError: SQLAlchemy 2.1 or newer is installed.
    """
    from importlib.metadata import version

    major, minor = (int(x) for x in version("sqlalchemy").split(".")[:2])
    if (major, minor) >= (2, 1):
        raise GavilError(
            f"SQLAlchemy {version('sqlalchemy')} is installed: Prefect 3.8.8's scheduler fails with it "
            "(`Can't evaluate bulk DML statement`) and no scheduled run is ever created.\n"
            'Reinstall with the constraints: pip install -c constraints.txt -e ".[test]"'
        )


def _tail(path: Path, lines: int = 4) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


def start(port: int | None = None, host: str = "127.0.0.1", timeout: float = 120) -> Started:
    """Start ``prefect server start`` in the background and wait for its health endpoint.

    Returns at once if a server already answers there.

    Raises:
        GavilError: it exited or did not answer within ``timeout`` seconds (the log's last lines
            say why), or SQLAlchemy is too new (:func:`check_server_dependencies`).
    """
    port = local_port(port)
    api = f"http://{host}:{port}/api"
    if healthy(api):
        return Started(api, None, None)
    check_server_dependencies()
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: TIME_WAIT is no obstacle
        try:
            probe.bind((host, port))
        except OSError:
            raise GavilError(
                f"port {port} on {host} is taken by a program that is not a Prefect server: pick another with "
                f"`gavil server --port N` and export PREFECT_API_URL=http://{host}:N/api"
            ) from None
    home = prefect_home()
    home.mkdir(parents=True, exist_ok=True)
    log = home / LOG_NAME
    env = {
        **os.environ,
        "PREFECT_SERVER_ANALYTICS_ENABLED": os.environ.get("PREFECT_SERVER_ANALYTICS_ENABLED", "false"),
    }
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", host, "--port", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # outlives this command and the shell's job control, like a daemon
        )
    if wait_healthy(api, timeout, proc):
        (home / PID_NAME).write_text(str(proc.pid))
        return Started(api, proc.pid, log)
    code = proc.poll()
    _stop_pid(proc.pid)
    why = f"exited with code {code}" if code is not None else f"did not answer within {timeout:g} s"
    raise GavilError(f"the Prefect server on {host}:{port} {why}; the end of {log}:\n{_tail(log)}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:  # our own child that exited: reap it
            return False
    try:  # an exited orphan nobody has reaped yet is a zombie: not alive
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _stop_pid(pid: int, grace: float = 15) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def stop() -> str:
    """Stop the server that ``gavil server`` (or ``prefect server start --background``) started."""
    pid_file = prefect_home() / PID_NAME
    if not pid_file.exists():
        return "no local Prefect server was started here (no server.pid)"
    pid = int(pid_file.read_text().strip() or 0)
    if pid and _alive(pid):
        _stop_pid(pid)
        message = f"stopped the Prefect server (pid {pid})"
    else:
        message = f"the Prefect server (pid {pid}) was not running"
    pid_file.unlink(missing_ok=True)
    return message


def require_api(wait: float) -> str:
    """The API URL, once it answers (waits up to ``wait`` seconds).

    Raises:
        NoServer: PREFECT_API_URL unset, or nothing answers there in time.
    """
    api = api_url()
    if not api:
        raise NoServer(f"PREFECT_API_URL is not set, so there is no Prefect server to use: {HOW_TO_START}")
    if not wait_healthy(api, wait):
        raise NoServer(f"no Prefect server answers at {api} (waited {wait:g} s): {HOW_TO_START}")
    return api


def trigger(deployment: str, wait: float = 120, watch: bool = False) -> Any:
    """Start a run of ``deployment`` (``name`` or ``flow/name``) once it is served; returns the
    flow run (its final state with ``watch``).

    Raises:
        NoServer: no API (see :func:`require_api`).
        GavilError: the deployment was not registered within ``wait`` seconds.
    """
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment
    from prefect.exceptions import ObjectNotFound

    api = require_api(wait)
    full = deployment if "/" in deployment else f"{FLOW_NAME}/{deployment}"
    deadline = time.monotonic() + wait
    with get_client(sync_client=True) as client:
        while True:
            try:
                client.read_deployment_by_name(full)
                break
            except ObjectNotFound:
                if time.monotonic() >= deadline:
                    raise GavilError(
                        f"deployment {full} is not served at {api} (waited {wait:g} s): run `gavil serve &` "
                        "first (deployments: params.yaml prefect.deployments)"
                    ) from None
                time.sleep(1)
    return run_deployment(full, timeout=None if watch else 0)

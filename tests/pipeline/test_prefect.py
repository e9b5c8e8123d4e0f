"""Prefect as a lab runs it: the README's Prefect block pasted as written (a local server, the
deployments served, a run triggered), the scheduler creating a run by itself and completing it, a
stage stopped at its timeout, one clean log line per step, and an install pinned so that none of
this can silently break again (constraints.txt)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from gavil.pipeline.registry import STAGES
from tests.helpers import ROOT, mini_project

MINI_IMAGES = ["rocket", "moon", "cat"]
# the README's deployment names and start stages (each runs everything downstream), a nightly run every
# minute so the scheduler fires in the test; the project is cut small (cheap_params) so a whole run is quick
DEPLOYMENTS = {
    "nightly-annotations": {"cron": "* * * * *", "from_stages": ["import_annotations"]},
    "full-build": {"cron": None, "from_stages": None},
}
RELEASE_ROWS = 12  # rows kept of each release CSV in the served project


def cheap_params(d: Path) -> dict:
    """``d``'s params.yaml, cut to a quick whole run: the release CSVs keep their first rows, no
    downloads, the published predictions and paper tables off, AfLite and the bootstrap small."""
    import pandas as pd

    from tests.helpers import FAST_AFLITE, no_downloads

    for name in ("game_5_6.csv", "game_10_12.csv", "swow.csv"):
        f = d / "data/sample/winogavil" / name
        pd.read_csv(f, dtype=str, keep_default_na=False).head(RELEASE_ROWS).to_csv(f, index=False)
    params = no_downloads(yaml.safe_load((d / "params.yaml").read_text()))
    params["evaluate"] |= {"release_predictions_dir": "", "bootstrap": 10, "models": ["text-minilm-l6"]}
    params["paper"]["release_dir"] = ""
    params["aflite"] |= FAST_AFLITE
    return params


BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def readme_prefect_block() -> str:
    """The bash block of docs/prefect.md that serves the deployments."""
    text = (ROOT / "docs/prefect.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    return next(b for b in blocks if "gavil serve" in b)


def _api(base: str, path: str, body: dict | None = None) -> Any:
    req = urllib.request.Request(
        f"{base}{path}",
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="GET" if body is None else "POST",
    )
    with urllib.request.urlopen(req, timeout=10) as reply:
        return json.loads(reply.read())


def _runs(api: str, deployment: str) -> list[dict]:
    deps = {d["name"]: d["id"] for d in _api(api, "/deployments/filter", {})}
    if deployment not in deps:
        return []
    return _api(api, "/flow_runs/filter", {"deployments": {"id": {"any_": [deps[deployment]]}}})


def _wait_for(what: str, seconds: float, probe) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if found := probe():
            return found
        time.sleep(2)
    pytest.fail(f"{what}: not within {seconds:g} s")


def _logs(api: str, flow_run_id: str) -> list[dict]:
    body = {"logs": {"flow_run_id": {"any_": [flow_run_id]}}, "sort": "TIMESTAMP_ASC", "limit": 200}
    return _api(api, "/logs/filter", body)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The README's Prefect block run as written (bash, port 4200 swapped for a free one) in a mini
    project, on 127.0.0.1 with its own PREFECT_HOME; yields (api, project, block output).
    Stops `gavil serve` and the server afterwards."""
    d = mini_project(tmp_path_factory.mktemp("served"), MINI_IMAGES)
    params = cheap_params(d)
    params["prefect"]["deployments"] = DEPLOYMENTS
    (d / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    port = _free_port()
    home = tmp_path_factory.mktemp("prefect-home")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env |= {
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PREFECT_HOME": str(home),
        "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "5",  # the real scheduler service, run often
        "PREFECT_RUNNER_POLL_FREQUENCY": "2",
        "DVC_NO_ANALYTICS": "1",
    }
    block = readme_prefect_block().replace("4200", str(port))
    out = home / "block.log"
    with open(out, "w") as log:
        shell = subprocess.Popen(
            ["bash", "-c", "set -euo pipefail\n" + block],
            cwd=d,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # `gavil serve &` stays in this process group: killed at the end
        )
    try:
        try:
            code = shell.wait(timeout=240)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the README's Prefect block did not finish in 240 s:\n{out.read_text()[-3000:]}")
        yield f"http://127.0.0.1:{port}/api", d, code, out.read_text(), home
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(shell.pid, signal.SIGTERM)  # gavil serve pauses its deployments and exits
        _wait_gone(shell.pid, 30)
        subprocess.run([str(BIN / "gavil"), "server", "--stop"], cwd=d, env=env, capture_output=True, timeout=60)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(shell.pid, signal.SIGKILL)


def _wait_gone(pgid: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.5)


@pytest.mark.slow
def test_readme_prefect_block_works_as_written(served):
    api, _, code, output, _ = served
    assert code == 0 and "Traceback" not in output, output[-3000:]
    assert f"export PREFECT_API_URL={api}" in output and "flow run " in output, output[-3000:]
    deployments = {d["name"] for d in _api(api, "/deployments/filter", {})}
    assert deployments == {"nightly-annotations", "full-build"}
    run = _wait_for(
        "the triggered full-build run completes",
        120,
        lambda: next((r for r in _runs(api, "full-build") if r["state_type"] == "COMPLETED"), None),
    )
    assert not run["auto_scheduled"]


@pytest.mark.slow
def test_the_scheduler_creates_the_nightly_run_and_it_completes(served):
    """Nobody triggers it: the server's scheduler service creates the run from the cron."""
    api, _, _, _, home = served
    run = _wait_for(
        "a scheduler-created nightly-annotations run completes",
        150,
        lambda: next((r for r in _runs(api, "nightly-annotations") if r["state_type"] == "COMPLETED"), None),
    )
    assert run["auto_scheduled"] and "auto-scheduled" in run["tags"]
    assert run["created_by"]["type"] == "SCHEDULE"
    assert run["expected_start_time"].endswith(":00Z") or ":00+00:00" in run["expected_start_time"]
    server_log = (home / "gavil-server.log").read_text()
    assert "bulk DML" not in server_log and "Traceback" not in server_log, server_log[-3000:]


@pytest.mark.slow
def test_flow_run_logs_show_one_clean_summary_line_per_stage(served):
    api, _, _, _, _ = served
    run = _wait_for(
        "a completed full-build run",
        120,
        lambda: next((r for r in _runs(api, "full-build") if r["state_type"] == "COMPLETED"), None),
    )
    stages = [s.name for s in STAGES]  # full-build starts from every stage

    def all_summaries() -> list[str] | None:
        # the flow's state and its log batches reach the API separately: a COMPLETED run's last
        # lines can still be in flight, so wait for them (a line that never comes still fails)
        messages = [rec["message"] for rec in _logs(api, run["id"])]
        done = all(any(m.startswith(f"{stage}: done in ") for m in messages) for stage in stages)
        return messages if done and any(m.startswith("Finished in state") for m in messages) else None

    deadline = time.monotonic() + 60
    while (messages := all_summaries()) is None and time.monotonic() < deadline:
        time.sleep(2)
    messages = messages or [rec["message"] for rec in _logs(api, run["id"])]
    for stage in stages:
        summaries = [m for m in messages if m.startswith(f"{stage}: done in ")]
        assert len(summaries) == 1 and len(summaries[0]) <= 240, messages
    assert "concepts=" in next(m for m in messages if m.startswith("filter_profanity: done in "))
    assert not [m for m in messages if "\x1b" in m or "\r" in m], messages
    assert not [m for m in messages if "timeout" in m.lower()], messages  # no "timeout cannot interrupt" warning


STUCK_STAGE = """

def run_stage(name, params="params.yaml"):  # appended by tests/pipeline/test_prefect.py: a stage stuck in a read
    with open("stuck.fifo", "rb") as pipe:  # nobody ever writes: open() blocks in the kernel
        return pipe.read()
"""


@pytest.mark.slow
def test_a_stage_past_its_timeout_is_stopped(served, tmp_path, monkeypatch):
    """A stage blocked in a system call (what Prefect's thread timeouts cannot interrupt) is killed
    at prefect.task_timeout_s, and its task fails saying so."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.build import build_benchmark
    from flows.hosts import StageTimeout

    api = served[0]
    d = mini_project(tmp_path / "slow", MINI_IMAGES)
    os.mkfifo(d / "stuck.fifo")
    with open(d / "gavil/pipeline/runner.py", "a") as f:  # the stage process imports the project's copy
        f.write(STUCK_STAGE)
    params = yaml.safe_load((d / "params.yaml").read_text())
    params["prefect"]["task_timeout_s"] = 4
    (d / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    monkeypatch.chdir(d)
    t0 = time.monotonic()
    with temporary_settings({PREFECT_API_URL: api}), pytest.raises(StageTimeout) as e:
        build_benchmark(only=["ingest_concepts"], use_dvc=False)
    assert time.monotonic() - t0 < 60
    assert "stage ingest_concepts ran longer than its timeout of 4 s" in str(e.value)
    assert "prefect.task_timeout_s" in str(e.value)
    assert not (d / "data/metrics/ingest_concepts.json").exists()
    assert not _holders(d / "stuck.fifo"), "a process still holds the pipe open"


def _holders(target: Path) -> list[str]:
    """Processes with ``target`` open (from /proc)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == str(target):
                    found.append(pid)
    return found


# ------------------------------------------------------------------------------------ stage processes
def noisy() -> str:
    """Prints like a stage does: nested tqdm bars (escape codes), a colour, a carriage return."""
    from gavil.progress import progress

    for _ in progress(range(2), "outer", interval=0, min_total=1):
        for _ in progress(range(2), "inner", interval=0, min_total=1):
            time.sleep(0.01)
    print("\x1b[31mred\x1b[0m text; half\rwhole line")
    return "ok"


def test_stage_process_output_reaches_the_log_as_clean_lines(monkeypatch):
    from flows.hosts import run_in_process, shutdown

    monkeypatch.chdir(ROOT)

    raw = subprocess.run(
        [sys.executable, "-c", "from tests.pipeline.test_prefect import noisy; noisy()"], cwd=ROOT, capture_output=True
    ).stdout
    assert b"\x1b[" in raw and b"\r" in raw  # what would otherwise reach the logs
    lines: list[str] = []
    try:
        assert run_in_process("tests.pipeline.test_prefect:noisy", timeout=60, sink=lines.append) == "ok"
    finally:
        shutdown()
    assert lines and not [x for x in lines if "\x1b" in x or "\r" in x or not x.strip()], lines
    assert any(x.startswith("outer: ") and "2/2" in x for x in lines), lines
    assert any(x.startswith("inner: ") for x in lines) and "whole line" in lines, lines


def test_stage_process_is_killed_at_its_deadline_and_errors_come_back(monkeypatch):
    from flows.hosts import StageTimeout, run_in_process, shutdown
    from gavil.pipeline.registry import UnknownStage

    monkeypatch.chdir(ROOT)
    try:
        t0 = time.monotonic()
        with pytest.raises(StageTimeout, match=r"sleeping ran longer than its timeout of 1 s") as e:
            run_in_process("time:sleep", 120, timeout=1, what="sleeping")
        assert time.monotonic() - t0 < 15
        pid = int(re.search(r"process (\d+) was killed", str(e.value)).group(1))  # type: ignore[union-attr]
        assert not Path(f"/proc/{pid}").exists()  # killed and reaped
        with pytest.raises(UnknownStage, match="unknown stage 'nope'") as e2:  # the stage's own error, typed
            run_in_process("gavil.pipeline.runner:run_stage", "nope", str(ROOT / "params.yaml"), timeout=60)
        assert "in the stage process" in "".join(e2.value.__notes__)
        assert run_in_process("math:hypot", 3, 4, timeout=60) == 5.0  # a fresh process after the kill
    finally:
        shutdown()


def test_summary_is_one_short_line():
    from flows.build import summary

    line = summary("x", {"seconds": 1.234, "by": {"a": 1, "b": 0.123456}, "rows": list(range(9)), "t": "a\nb"})
    assert line == "x: done in 1.2 s; by={a: 1, b: 0.1235}, rows=[9 items], t=a b"
    long = summary("y", {f"k{i}": "v" * 30 for i in range(20)})
    assert len(long) == 240 and "\n" not in long and long.startswith("y: done; k0=")


# ------------------------------------------------------------------------------------ server commands
def _gavil(args: list[str], **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    return subprocess.run(
        [str(BIN / "gavil"), *args], cwd=ROOT, capture_output=True, text=True, timeout=120, env={**base, **env}
    )


@pytest.mark.slow
def test_serve_and_trigger_without_a_server_say_what_to_do(tmp_path):
    home = str(tmp_path)
    closed = f"http://127.0.0.1:{_free_port()}/api"
    cases = [  # the README's order gone wrong: no server yet; and a shell without the export
        (
            ["serve", "--wait", "1"],
            {"PREFECT_HOME": home, "PREFECT_API_URL": closed},
            f"no Prefect server answers at {closed}",
        ),
        (["trigger", "full-build", "--wait", "1"], {"PREFECT_HOME": home}, "PREFECT_API_URL is not set"),
    ]
    for args, env, expect in cases:
        out = _gavil(args, **env)
        assert out.returncode == 2 and expect in out.stderr, out.stderr[-2000:]
        assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) <= 3, out.stderr


def test_server_refuses_a_sqlalchemy_that_stops_the_scheduler(monkeypatch):
    import importlib.metadata

    from flows.server import check_server_dependencies
    from gavil.errors import GavilError

    check_server_dependencies()  # the installed one is fine
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "2.1.9")
    with pytest.raises(GavilError, match=r"(?s)SQLAlchemy 2\.1\.9 .*constraints\.txt"):
        check_server_dependencies()


# ------------------------------------------------------------------------------------------ the install
def test_constraints_pin_this_tested_environment():
    """constraints.txt = the installed dependency closure (`gavil constraints --write` regenerates it)."""
    from gavil.compat.constraints import constraints_text

    text = (ROOT / "constraints.txt").read_text()
    pins = dict(line.split("==") for line in text.splitlines() if line and not line.startswith("#"))
    assert pins["torch"] == "2.13.0" and pins["torchvision"] == "0.28.0"
    assert not [f"{n}=={v}" for n, v in pins.items() if "+" in v], "a local label resolves on no public index"
    assert not [n for n in pins if n.startswith("nvidia-") or n == "triton"]
    assert tuple(int(x) for x in pins["sqlalchemy"].split(".")[:2]) < (2, 1) and pins["prefect"] == "3.8.8"
    current = constraints_text(ROOT / "pyproject.toml")
    old, new = set(text.splitlines()), set(current.splitlines())
    assert old == new, (
        f"constraints.txt is out of date (run `gavil constraints --write`): "
        f"only in the file {sorted(old - new)[:10]}, only installed {sorted(new - old)[:10]}"
    )
    readme = (ROOT / "README.md").read_text()
    assert "pip install -c constraints.txt -e . && dvc repro" in readme
    assert 'pip install -c constraints.txt -e ".[test]" && pytest' in readme
    assert 'pip install -c constraints.txt -e ".[test]"' in (ROOT / ".ci/run").read_text()

"""Operations leave the project clean: a deployment runs every stage downstream of where it starts
(from the stage registry, so ``dvc status`` is clean after a scheduled run), and ``gavil serve`` runs
once at a time, stops on request and always says in what state it leaves the deployments."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
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

from gavil.errors import ParamsError
from gavil.params import load_params, parse_params
from gavil.params.prefect import DeploymentParams
from gavil.pipeline.registry import STAGES, upstream
from tests.helpers import FAST_AFLITE, ROOT, SAMPLE, mini_project, no_downloads

NAMES = [s.name for s in STAGES]
BIN = Path(sys.executable).parent


# ------------------------------------------------------------------------------------ deployments
def test_the_registry_lists_every_stage_after_the_stages_it_reads():
    """The closure's one pass relies on it: STAGES is a DAG order."""
    seen: set[str] = set()
    for s in STAGES:
        assert set(upstream(s)) <= seen, f"{s.name} comes before {sorted(set(upstream(s)) - seen)}"
        seen.add(s.name)


def test_every_deployment_runs_a_downstream_closed_set_for_any_start():
    """For every choice of start stages (all 2^12), the stages a deployment runs hold the starts and
    every stage that reads what one of them writes (transitively), nothing else, in registry order."""
    from flows.deploy import deployment_stages

    for k in range(1, len(NAMES) + 1):
        for start in itertools.combinations(NAMES, k):
            runs = deployment_stages("d", DeploymentParams(from_stages=list(start)))
            assert runs is not None and set(start) <= set(runs)
            assert runs == [n for n in NAMES if n in runs], (start, runs)  # registry (DAG) order
            for s in STAGES:
                reads_a_run_stage = bool(set(upstream(s)) & set(runs))
                assert not reads_a_run_stage or s.name in runs, f"from {start}: {s.name} would be left stale"
                assert s.name not in runs or s.name in start or reads_a_run_stage, f"from {start}: {s.name} needless"
    assert deployment_stages("d", DeploymentParams(from_stages=None)) is None  # null: every stage


def test_the_shipped_deployments_run_their_downstream_stages():
    """The nightly run starts from the import and includes aflite, which its old hand list omitted
    (so `dvc status` reported aflite stale after every scheduled run)."""
    from flows.deploy import deployments

    deps = {d.name: d for d in deployments(str(ROOT / "params.yaml"))}
    assert load_params(ROOT / "params.yaml").prefect.deployments["nightly-annotations"].from_stages == [
        "import_annotations"
    ]
    assert deps["nightly-annotations"].parameters["only"] == [
        "import_annotations",
        "select_instances",
        "aflite",
        "export",
        "evaluate",
    ]
    assert deps["full-build"].parameters["only"] is None


def test_the_old_stage_list_and_bad_starts_are_refused_with_the_fix():
    from flows.deploy import deployment_stages

    old = {"prefect": {"deployments": {"nightly": {"cron": None, "stages": ["import_annotations", "export"]}}}}
    with pytest.raises(ParamsError, match=r"`stages:` was replaced by `from_stages:`") as e:
        parse_params(old)
    assert "write `from_stages: [import_annotations]`" in str(e.value) and "downstream" in str(e.value)
    with pytest.raises(ParamsError, match="an empty list runs nothing"):
        parse_params({"prefect": {"deployments": {"nightly": {"from_stages": []}}}})
    with pytest.raises(ParamsError, match=r"from_stages: unknown stage 'import_annotation'; stages: ingest_concepts"):
        deployment_stages("nightly", DeploymentParams(from_stages=["import_annotation"]))


# ------------------------------------------------------------------------------------ one serve at a time
HOLD = """
import sys, time
from pathlib import Path
from flows.deploy import single_instance
with single_instance(Path(sys.argv[1]), {"pid": __import__("os").getpid(), "project": "/p", "api": "http://x/api"}):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_second_serve_is_refused_naming_the_first_and_a_killed_one_frees_the_lock(tmp_path):
    from flows.deploy import AlreadyServing, serving_pid, single_instance

    home = tmp_path / "home"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(home)], cwd=ROOT, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert serving_pid(home) == holder.pid
        with pytest.raises(AlreadyServing) as e, single_instance(home, {"pid": os.getpid()}):
            pytest.fail("a second holder got the lock")
        assert f"already running (pid {holder.pid}, project /p, API http://x/api)" in str(e.value)
        assert "gavil serve --stop" in str(e.value) and f"kill {holder.pid}" in str(e.value)
    finally:
        holder.kill()  # SIGKILL: no clean-up code runs; the operating system releases the lock
        holder.wait()
    assert serving_pid(home) is None
    with single_instance(home, {"pid": os.getpid()}):
        assert json.loads((home / "gavil-serve.json").read_text())["pid"] == os.getpid()
    assert not (home / "gavil-serve.json").exists()


# ------------------------------------------------------------------------------------ served, end to end
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(home: Path, api: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    return env | {
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PREFECT_HOME": str(home),
        "PREFECT_API_URL": api,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_RUNNER_POLL_FREQUENCY": "2",
        "DVC_NO_ANALYTICS": "1",
    }


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _paused(api: str) -> dict[str, bool]:
    req = urllib.request.Request(
        f"{api}/deployments/filter", data=b"{}", headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(req, timeout=10) as reply:
        return {d["name"]: d["paused"] for d in json.loads(reply.read())}


def _wait_for(what: str, seconds: float, probe: Any) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if found := probe():
                return found
        time.sleep(1)
    pytest.fail(f"{what}: not within {seconds:g} s")


@pytest.fixture(scope="module")
def served_project(tmp_path_factory):
    """A git+DVC mini project after one `dvc repro`, and a local Prefect server (127.0.0.1, its own
    PREFECT_HOME) started with `gavil server`; yields (project, env, api). Stops the server after."""
    d = mini_project(tmp_path_factory.mktemp("ops"), ["rocket", "moon", "cat"])
    params = yaml.safe_load((d / "params.yaml").read_text())
    no_downloads(params)  # hermetic: never touch the network
    params["aflite"] |= FAST_AFLITE
    # what is run is not what this tests: one model each (MiniLM, a CLIP with no weights), no Table 5
    params["evaluate"]["models"] = ["clip-rn50"]
    params["paper"]["text_models"] = ["text-minilm-l6"]
    params["paper"]["supervised"] |= {"enabled": False, "models": ["text-minilm-l6"]}
    (d / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    home = tmp_path_factory.mktemp("prefect-home")
    api = f"http://127.0.0.1:{_free_port()}/api"
    env = _env(home, api)
    for cmd in (
        ["git", "init", "-q"],
        ["git", "config", "user.email", "t@t"],
        ["git", "config", "user.name", "t"],
        [sys.executable, "-m", "dvc", "init", "-q"],
        [str(BIN / "gavil"), "dvc-yaml", "--write"],  # the models it names changed
    ):
        assert _run(cmd, d, env).returncode == 0
    first = _run([sys.executable, "-m", "dvc", "repro"], d, env)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    started = _run([str(BIN / "gavil"), "server"], d, env, timeout=240)
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        yield d, env, api
    finally:
        _run([str(BIN / "gavil"), "serve", "--stop"], d, env, timeout=120)
        _run([str(BIN / "gavil"), "server", "--stop"], d, env, timeout=120)


def _serve(d: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen(
            [str(BIN / "gavil"), "serve"], cwd=d, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _kill(p: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(p.pid, signal.SIGKILL)
    p.wait()


@pytest.mark.slow
def test_after_the_nightly_run_dvc_status_is_clean(served_project, tmp_path):
    """A new annotation batch, the nightly deployment triggered through the served deployment (the
    same run its cron creates): every stage downstream of the import ran, aflite included, and DVC
    has nothing left to do."""
    d, env, api = served_project
    shutil.copytree(SAMPLE / "raw_example" / "batch-0001", d / "data/sample/raw/batch-0001")
    lock_before = yaml.safe_load((d / "dvc.lock").read_text())["stages"]
    serve = _serve(d, env, tmp_path / "serve.log")
    try:
        run = _run([str(BIN / "gavil"), "trigger", "nightly-annotations", "--watch"], d, env)
        assert run.returncode == 0 and "Completed" in run.stdout, run.stdout + run.stderr
    finally:
        _run([str(BIN / "gavil"), "serve", "--stop"], d, env, timeout=120)
        _kill(serve)
    status = _run([sys.executable, "-m", "dvc", "status"], d, env)
    assert status.returncode == 0 and "up to date" in status.stdout, status.stdout
    lock_after = yaml.safe_load((d / "dvc.lock").read_text())["stages"]
    changed = [n for n in lock_after if lock_after[n] != lock_before[n]]
    assert {"import_annotations", "select_instances", "aflite"} <= set(changed), changed
    assert not set(changed) - {"import_annotations", "select_instances", "aflite", "export", "evaluate"}, changed


@pytest.mark.slow
def test_a_second_serve_refuses_and_stopping_says_the_deployments_are_paused(served_project, tmp_path):
    d, env, api = served_project
    first = _serve(d, env, tmp_path / "first.log")
    try:
        active = {"nightly-annotations": False, "full-build": False}
        _wait_for("the first serve registers its deployments", 120, lambda: _paused(api) == active)
        second = _run([str(BIN / "gavil"), "serve"], d, env, timeout=120)
        assert second.returncode == 2, second.stdout + second.stderr
        assert f"`gavil serve` is already running (pid {first.pid}, project {d}" in second.stderr, second.stderr
        assert "gavil serve --stop" in second.stderr and "Traceback" not in second.stderr
        assert _paused(api) == active  # the refusal changed nothing
        assert first.poll() is None  # and the first one still serves

        stopped = _run([str(BIN / "gavil"), "serve", "--stop"], d, env, timeout=120)
        assert stopped.returncode == 0 and first.wait(timeout=30) == 0, stopped.stdout + stopped.stderr
        said = "nightly-annotations paused, full-build paused; a paused deployment's schedule creates no runs until"
        assert f"stopped `gavil serve` (pid {first.pid}); deployments on {api}: {said}" in stopped.stdout
        assert said in (tmp_path / "first.log").read_text()  # the serve's own output says so too
        assert _paused(api) == {"nightly-annotations": True, "full-build": True}  # what it said is the truth
    finally:
        _kill(first)

    again = _serve(d, env, tmp_path / "again.log")  # a restart resumes them, and says so
    try:
        _wait_for("the restarted serve resumes the deployments", 120, lambda: not any(_paused(api).values()))
        assert "resuming nightly-annotations, full-build" in (tmp_path / "again.log").read_text()
    finally:
        stopped = _run([str(BIN / "gavil"), "serve", "--stop"], d, env, timeout=120)
        _kill(again)
    assert "nightly-annotations paused, full-build paused" in stopped.stdout
    nothing = _run([str(BIN / "gavil"), "serve", "--stop"], d, env, timeout=120)
    assert nothing.returncode == 0 and "no `gavil serve` is running" in nothing.stdout, nothing.stdout

"""A Dask cluster started the way a cluster starts one: ``dask scheduler`` and two ``dask worker``
processes launched from a directory that is not the project, ``gavil flow`` against the scheduler's
address, and the same bytes as ``dvc repro``; a worker that does not see the project folder is
named at flow start in one line (flows/cluster.py)."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from flows.cluster import Slots, dask_slots, probe, thread_slots
from tests.helpers import FAST_AFLITE, MINI_IMAGES, mini_project, no_downloads, run
from tests.pipeline.test_pipeline import small_release

BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    return env | {
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PREFECT_HOME": str(home),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
        "DVC_NO_ANALYTICS": "1",
    }


def docs_block() -> list[str]:
    """The commands of docs/prefect.md's cluster block (the one that starts ``dask scheduler``)."""
    from tests.project.test_code_blocks import _commands, blocks

    text = next(t for p, _, lang, t in blocks() if p == "docs/prefect.md" and lang == "bash" and "dask scheduler" in t)
    return [c.split("  #")[0].strip() for c in _commands(text)]


def here(cmd: str, port: int) -> str:
    """A command of the block for this machine: the scheduler on 127.0.0.1 at ``port``, one thread a worker."""
    return (
        cmd.replace("--host 0.0.0.0", "--host 127.0.0.1")
        .replace("--port 8786", f"--port {port}")
        .replace("SCHEDULER:8786", f"127.0.0.1:{port}")
        .replace("--nthreads 4", "--nthreads 1")
    )


@contextlib.contextmanager
def dask_cluster(where: Path, workers: list[list[str]]) -> Iterator[tuple[str, int]]:
    """The block's ``dask scheduler`` line and its ``dask worker`` line once per entry of ``workers``
    (a command prefix: ``[]``, or an ``unshare`` wrapper; the worker named ``w<i>``), all started in
    ``where``, as cluster nodes start them; yields (address, port) once every worker is connected.
    Stopped afterwards."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    scheduler, worker = (shlex.split(here(c.removesuffix("&").strip(), port)) for c in docs_block()[:2])
    assert scheduler[:2] == ["dask", "scheduler"] and worker[:3] == ["dask", "worker", address], (scheduler, worker)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    procs: list[subprocess.Popen] = []
    logs = where / "logs"
    logs.mkdir(parents=True, exist_ok=True)

    def start(cmd: list[str], log: str) -> None:
        with open(logs / log, "w") as out:
            procs.append(
                subprocess.Popen(cmd, cwd=where, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            )

    try:
        start(scheduler, "scheduler.log")
        for i, prefix in enumerate(workers):
            start([*prefix, *worker, "--name", f"w{i}"], f"w{i}.log")
        from distributed import Client

        deadline = time.monotonic() + 180
        with Client(address, timeout=120, set_as_default=False) as client:
            while len(client.scheduler_info()["workers"]) < len(workers):
                if time.monotonic() > deadline:
                    pytest.fail("workers did not connect: " + "".join(f.read_text()[-800:] for f in logs.iterdir()))
                time.sleep(0.5)
        yield address, port
    finally:
        for p in reversed(procs):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def run_block_in_project(project: Path, port: int, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The block's lines after the workers' (``gavil params set ...``, ``gavil flow``) in ``project``."""
    script = "\n".join(here(c, port) for c in docs_block()[2:])
    return subprocess.run(
        ["bash", "-e", "-c", script], cwd=project, env=env, capture_output=True, text=True, timeout=1800
    )


def _project(dest: Path) -> Path:
    """A small project in git and DVC: the sample images, the release cut to the SWOW rows that name
    them and the first game rows (:func:`tests.pipeline.test_pipeline.small_release`: every stage runs, on
    ~200 concepts), a seeded random-weights rival (so the scoring embeds images), a quick AfLite."""
    d = mini_project(dest, MINI_IMAGES)
    small_release(d)
    params = no_downloads(yaml.safe_load((d / "params.yaml").read_text()), pretrained=None, threads=1)
    params["instances"]["game_sets"] = {5: 1, 6: 1, 10: 0, 12: 0}
    params["aflite"] |= FAST_AFLITE
    (d / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for cmd in (
        ["git", "init", "-q"],
        ["git", "config", "user.email", "t@t"],
        ["git", "config", "user.name", "t"],
        [sys.executable, "-m", "dvc", "init", "-q"],
    ):
        assert run(cmd, d).returncode == 0
    return d


def _outs(project: Path) -> dict[str, object]:
    """Every stage's outputs as dvc.lock records them (path -> md5 or the directory's hash)."""
    lock = yaml.safe_load((project / "dvc.lock").read_text())
    return {
        f"{name}:{o['path']}": o.get("md5")
        for name, st in lock["stages"].items()
        for o in st.get("outs", [])
        if "timings" not in o["path"]
    }


@pytest.mark.slow
def test_gavil_flow_on_a_dask_cluster_started_elsewhere_writes_what_dvc_repro_writes(tmp_path):
    """The scheduler and two workers run from ``elsewhere`` (as on cluster nodes); the flow maps the
    partitioned stages over small partitions on them and records every stage in dvc.lock: the
    outputs are those of ``dvc repro`` on an identical project, byte for byte, and both workers ran
    stage work."""
    reference = _project(tmp_path / "reference")
    done = run([sys.executable, "-m", "dvc", "repro"], reference, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    d = _project(tmp_path / "flow")
    params = yaml.safe_load((d / "params.yaml").read_text())
    params["ocr"]["partition_size"] = params["crawl"]["partition_size"] = 1  # runtime knobs: same outputs
    params["score"]["partition_size"] = 2
    (d / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    with dask_cluster(elsewhere, [[], []]) as (address, port):
        flow = run_block_in_project(d, port, _env(tmp_path / "prefect"))
        assert flow.returncode == 0, (flow.stdout + flow.stderr)[-4000:]
        from distributed import Client

        with Client(address, timeout=30, set_as_default=False) as client:
            ran = client.run(lambda dask_worker: dask_worker.state.executed_count)
    assert len(ran) == 2 and all(n > 0 for n in ran.values()), ran
    want, got = _outs(reference), _outs(d)
    assert len(want) >= 20 and got == want, {
        k: (want.get(k), got.get(k)) for k in want.keys() | got.keys() if want.get(k) != got.get(k)
    }
    status = run([sys.executable, "-m", "dvc", "status"], d)
    assert "up to date" in status.stdout, status.stdout[-2000:]


@pytest.mark.slow
def test_a_worker_that_does_not_see_the_project_is_named_at_flow_start(tmp_path):
    """One of two workers sees an empty folder where the project is (a node without the shared file
    system: its own mount namespace with a tmpfs over the path): ``gavil flow`` stops before any
    stage with one line naming that worker, its host, the path and the fix."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    d = _project(tmp_path / "proj")
    blind = [
        "unshare",
        "--user",
        "--map-root-user",
        "--mount",
        "sh",
        "-c",
        f'mount -t tmpfs none "{d}" && exec "$0" "$@"',
    ]
    with dask_cluster(elsewhere, [[], blind]) as (address, port):
        flow = run_block_in_project(d, port, _env(tmp_path / "prefect"))
        from distributed import Client

        with Client(address, timeout=30, set_as_default=False) as client:
            names = {a: w["name"] for a, w in client.scheduler_info()["workers"].items()}
    blind_addr = next(a for a, n in names.items() if n == "w1")
    assert flow.returncode != 0
    lines = [ln for ln in (flow.stdout + flow.stderr).splitlines() if "cannot use the project" in ln]
    assert lines, (flow.stdout + flow.stderr)[-3000:]
    assert f"Dask worker {blind_addr}" in lines[0] and str(d) in lines[0] and "no params.yaml there" in lines[0]
    assert "shared file system" in lines[0] and "docs/prefect.md" in lines[0]
    assert not (d / "data/ingest").exists()  # no stage ran
    assert not list(d.glob(".gavil-shared-check-*"))  # the check leaves nothing behind


def test_probe_tells_a_missing_folder_a_different_folder_and_the_same_folder_apart(tmp_path):
    (tmp_path / "params.yaml").write_text("{}")
    (tmp_path / ".check").write_text("token")
    same = probe(str(tmp_path), ".check", "token")
    assert same["why"] is None and (tmp_path / same["reply"]).read_text() == "token"
    assert probe(str(tmp_path), ".check", "other")["why"].startswith("another folder at that path")
    assert probe(str(tmp_path / "gone"), ".check", "token")["why"] == "no such folder on that machine"
    (tmp_path / "params.yaml").unlink()
    assert probe(str(tmp_path), ".check", "token")["why"] == "no params.yaml there"


def test_task_slots_keep_processes_times_threads_within_each_machine():
    """Thread runner: ``threads`` stage processes at once, cores // threads each. Dask: the workers
    sharing a machine's CPU set share its cores; workers on other machines do not count."""
    for n_cores in (1, 2, 3, 16):
        for threads in (None, 1, 2, 5, 32):
            s = thread_slots(threads, n_cores)
            assert s.total == (threads or n_cores) and min(s.total, n_cores) * s.for_worker("") <= max(n_cores, s.total)
            assert s.total * s.for_worker("") <= n_cores or s.for_worker("") == 1
    one_box = {f"tcp://a:{i}": {"host": "a", "cpus": [0, 1, 2, 3], "nthreads": 2} for i in range(2)}
    assert dask_slots(one_box) == Slots(4, {"tcp://a:0": 1, "tcp://a:1": 1})
    two_boxes = {"tcp://a:1": {"host": "a", "cpus": [0, 1, 2, 3], "nthreads": 2}}
    two_boxes["tcp://b:1"] = {"host": "b", "cpus": list(range(16)), "nthreads": 4}
    assert dask_slots(two_boxes) == Slots(6, {"tcp://a:1": 2, "tcp://b:1": 4})
    assert Slots(2, {"tcp://a:1": 2}).for_worker("tcp://late:1") is None  # a late worker: its environment decides

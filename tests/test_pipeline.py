"""The pipeline as users run it: dvc.yaml from the registry, `dvc repro` end to end in a
temporary project, the Prefect flow over the same stage functions, DuckDB over the outputs."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from stages.pipeline import STAGES, dvc_yaml, upstream
from tests.conftest import ROOT, mini_project

MINI_IMAGES = ["rocket", "moon", "astronaut", "cat", "coffee", "brick", "horse", "grass", "page"]


def test_committed_dvc_yaml_matches_the_registry():
    assert (ROOT / "dvc.yaml").read_text() == dvc_yaml(), "run `gavil dvc-yaml --write`"


def test_every_stage_has_its_params_section_and_a_module():
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    dvc = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert list(dvc) == [s.name for s in STAGES]
    for s in STAGES:
        assert all(sec in params for sec in s.params), s.name
        assert dvc[s.name]["params"] == list(s.params)
        assert (ROOT / "stages" / f"{s.name}.py").exists()
        for dep in s.deps:
            if not dep.startswith("${") and not dep.startswith("data/") or dep.startswith("data/sample"):
                assert (ROOT / dep).exists(), dep
    assert upstream(next(s for s in STAGES if s.name == "select_instances")) == ["import_annotations"]
    assert upstream(next(s for s in STAGES if s.name == "ingest_concepts")) == []


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}", "DVC_NO_ANALYTICS": "1"}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A git+DVC repository with the project's code and a 9-image sample, after one `dvc repro`."""
    d = mini_project(tmp_path_factory.mktemp("proj"), MINI_IMAGES)
    params = yaml.safe_load((d / "params.yaml").read_text())
    params["score"]["allow_download"] = False  # hermetic: never touch the network
    params["instances"]["game_sets"] = {5: 2, 6: 1, 10: 0, 12: 1}
    (d / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for cmd in (["git", "init", "-q"], ["git", "config", "user.email", "t@t"], ["git", "config", "user.name", "t"], [sys.executable, "-m", "dvc", "init", "-q"]):
        assert _run(cmd, d).returncode == 0
    first = _run([sys.executable, "-m", "dvc", "repro"], d)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    return d, first


@pytest.mark.slow
def test_dvc_repro_end_to_end(project):
    d, first = project
    assert "NO WEIGHTS" in first.stdout + first.stderr  # plain message, run goes on
    metrics = {p.stem: json.loads(p.read_text()) for p in (d / "data/metrics").glob("*.json")}
    assert set(metrics) == {s.name for s in STAGES}
    assert metrics["crawl_images"]["by_status"]["ok"] == len(MINI_IMAGES)
    assert metrics["ocr_filter"]["by_status"]["accepted"] == len(MINI_IMAGES)
    assert metrics["score_candidates"]["by_status"] == {"no_weights": 2}
    ev = metrics["evaluate"]
    assert ev["release_check"]["matches"] and ev["instances"] == 3563 + 998
    assert ev["models"]["clip-rn50"]["status"] == "no_weights" and ev["models"]["clip-rn50"]["game 5&6"] is None
    text = ev["models"]["text-minilm-l6"]  # the offline text-only baseline scores every instance
    assert text["status"] == "ok" and 0 < text["game 5&6"] < text["swow_baseline 5&6"] <= 100
    assert (d / "data/plots/evaluation_by_model.png").read_bytes()[:4] == b"\x89PNG"
    assert "accepted,9" in (d / "data/plots/ocr_fates.csv").read_text()
    assert "game selected,1.0,3387" in (d / "data/plots/solver_jaccard.csv").read_text()
    assert "| text-minilm-l6" in (d / "data/evaluate/table4.md").read_text()
    assert "score.weights_path" in metrics["score_candidates"]["message"]
    assert metrics["build_instances"]["candidate_sets_skipped_sizes"] == [12]  # pool of 9
    assert metrics["export"]["instances"] == 3563
    assert (d / "data/export/benchmark.csv").read_bytes() == (d / "data/sample/winogavil/winogavil_dataset.csv").read_bytes()
    assert metrics["export"]["split_files"] == {"game_5_6": 2709, "game_10_12": 854, "swow": 998}
    images = sorted(p.name for p in (d / "data/export/dataset/images").iterdir())
    assert images and set(images) <= {f"{n}.{e}" for n in MINI_IMAGES for e in ("png", "jpg")}
    card = (d / "data/export/dataset/README.md").read_text()
    assert "CC-BY 4.0" in card and "De Deyne" in card and ">= 0.8" in card

    timings = {p.stem: json.loads(p.read_text()) for p in (d / "data/metrics/timings").glob("*.json")}
    assert set(timings) == {s.name for s in STAGES} and all(t["seconds"] >= 0 for t in timings.values())
    shown = _run([sys.executable, "-m", "dvc", "metrics", "show"], d).stdout
    assert "data/metrics/timings/ocr_filter.json" in shown and "seconds" in shown and "data/metrics/export.json" in shown
    assert "timings" not in (d / "dvc.lock").read_text()  # not outputs: a re-run's new timings change nothing in DVC

    again = _run([sys.executable, "-m", "dvc", "repro"], d)
    assert again.returncode == 0 and "Running stage" not in again.stdout
    status = _run([sys.executable, "-m", "dvc", "status"], d)
    assert "up to date" in status.stdout


@pytest.mark.slow
def test_threshold_change_reruns_only_what_depends_on_the_selection(project):
    d, _ = project
    params_file = d / "params.yaml"
    original = params_file.read_text()
    # the stages' metrics are committed with the run (as in this repository), so `dvc metrics diff` compares runs
    (d / ".gitignore").write_text("/data/*\n!/data/metrics/\n/data/metrics/timings/\n")
    assert _run(["git", "add", ".gitignore", "data/metrics", "dvc.lock", "dvc.yaml", "params.yaml"], d).returncode == 0
    assert _run(["git", "commit", "-q", "-m", "run at 0.8"], d).returncode == 0
    try:
        params = yaml.safe_load(original)
        params["select"]["min_solver_jaccard"] = 0.9
        params_file.write_text(yaml.safe_dump(params, sort_keys=False))
        out = _run([sys.executable, "-m", "dvc", "repro"], d)
        assert out.returncode == 0, out.stderr[-2000:]
        ran = [line.split("'")[1] for line in out.stdout.splitlines() if line.startswith("Running stage")]
        assert ran == ["select_instances", "export", "evaluate"]  # everything downstream of the selection, nothing upstream
        diff = _run([sys.executable, "-m", "dvc", "metrics", "diff", "--json"], d)
        assert json.loads(diff.stdout)["data/metrics/export.json"]["instances"] == {"old": 3563, "new": 3387, "diff": -176}, diff.stdout[-2000:]
        q = _run(["gavil", "query", "select count(*) as n, min(solvers_jaccard_mean) as m from benchmark", "--format", "json"], d)
        assert json.loads(q.stdout) == [{"n": 3387, "m": 1.0}]
    finally:
        params_file.write_text(original)
        assert _run([sys.executable, "-m", "dvc", "repro"], d).returncode == 0


@pytest.mark.slow
def test_query_sees_every_stage_table(project):
    d, _ = project
    from stages.query import connect, table_files

    names = set(table_files(d))
    assert {"concepts", "edges", "concept_filter", "images", "candidates", "ocr", "candidate_sets", "swow_instances", "scores",
            "instances", "solves", "annotation_rejects", "selection", "table1", "annotator_stats", "benchmark",
            "embeddings", "eval_embeddings", "ocr_detections", "predictions", "evaluation"} == names  # fmt: skip
    con = connect(d)
    assert con.execute("select count(*) from benchmark").fetchone()[0] == 3563
    row = con.execute("select list_contains(candidates, 'eagle'), len(associations) from benchmark where ID = 0").fetchone()
    assert row == (True, 2)
    joined = con.execute(
        "select count(*) from scores s join swow_instances i using (instance_id) where s.status = 'no_weights' and s.jaccard is null"
    ).fetchone()[0]
    assert joined == 2


@pytest.mark.slow
def test_prefect_flow_runs_the_same_stages(project, monkeypatch):
    """The flow runs the same stage functions; DVC decides what is up to date and records what ran."""
    from prefect.testing.utilities import prefect_test_harness

    from flows.build import build_benchmark

    d, _ = project
    monkeypatch.chdir(d)
    params_file = d / "params.yaml"
    original = params_file.read_text()
    try:
        with prefect_test_harness(server_startup_timeout=120):
            # 1. without DVC: every stage runs, and writes exactly what dvc repro wrote
            result = build_benchmark(use_dvc=False)
            assert set(result) == {s.name for s in STAGES} and not any(m["skipped"] for m in result.values())
            assert result["export"]["instances"] == 3563 and result["score_candidates"]["by_status"] == {"no_weights": 2}
            ocr = result["ocr_filter"]  # partitioned: seconds is the whole stage (plan, partitions, reduce)
            assert ocr["seconds"] >= ocr["reduce_seconds"] and json.loads((d / "data/metrics/timings/ocr_filter.json").read_text())["partitions"] == 1
            assert "up to date" in _run([sys.executable, "-m", "dvc", "status"], d).stdout
            # 2. with DVC: nothing changed, so every stage is skipped
            result = build_benchmark()
            assert all(m["skipped"] for m in result.values())
            # 3. a threshold change: the flow re-runs what depends on it and records it in dvc.lock
            params = yaml.safe_load(original)
            params["select"]["min_solver_jaccard"] = 0.9
            params_file.write_text(yaml.safe_dump(params, sort_keys=False))
            result = build_benchmark(only=["import_annotations", "select_instances", "export"])
            assert [n for n, m in result.items() if not m["skipped"]] == ["select_instances", "export"]
            assert result["export"]["instances"] == 3387
        status = _run([sys.executable, "-m", "dvc", "status", "select_instances", "export"], d)
        assert "up to date" in status.stdout, status.stdout
    finally:
        params_file.write_text(original)
        assert _run([sys.executable, "-m", "dvc", "repro"], d).returncode == 0


@pytest.mark.slow
def test_dask_runner_gives_the_sequential_results(tmp_path, monkeypatch):
    """Heavy stages mapped over many small partitions on a 2-worker local Dask cluster write the
    same tables as the plain sequential run (run_stage per stage, one partition each)."""
    pytest.importorskip("prefect_dask")
    import pandas as pd
    from prefect.testing.utilities import prefect_test_harness

    from flows.build import run_flow
    from stages.pipeline import run_stage

    def make(name, runner, size):
        d = mini_project(tmp_path / name, MINI_IMAGES)
        params = yaml.safe_load((d / "params.yaml").read_text())
        params["score"] |= {"allow_download": False, "pretrained": None, "partition_size": size, "threads": 1}  # seeded random weights
        params["crawl"]["partition_size"] = params["ocr"]["partition_size"] = size
        params["instances"]["game_sets"] = {5: 1, 6: 1, 10: 0, 12: 0}
        params["prefect"]["task_runner"] = {"kind": runner, "dask_workers": 2, "dask_threads_per_worker": 1}
        (d / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        return d

    seq, dask = make("seq", "thread", 1000), make("dask", "dask", 2)
    monkeypatch.chdir(seq)
    for s in STAGES:
        run_stage(s.name)
    monkeypatch.chdir(dask)
    with prefect_test_harness(server_startup_timeout=120):
        result = run_flow(use_dvc=False)
    assert result["score_candidates"]["by_status"] == {"untrained": 2}
    tables = sorted(p.relative_to(seq) for p in (seq / "data").rglob("*.parquet") if "sample" not in p.parts)
    assert len(tables) >= 15 and tables == sorted(p.relative_to(dask) for p in (dask / "data").rglob("*.parquet") if "sample" not in p.parts)
    for t in tables:
        a, b = pd.read_parquet(seq / t), pd.read_parquet(dask / t)
        if t.name in ("embeddings.parquet", "ocr_detections.parquet", "eval_embeddings.parquet"):  # caches: rows in arrival order
            key = [c for c in ("model", "kind", "key", "sha256") if c in a.columns]
            a, b = a.sort_values(key, ignore_index=True), b.sort_values(key, ignore_index=True)
        pd.testing.assert_frame_equal(a, b, obj=str(t))
    for m in (seq / "data/metrics").glob("*.json"):
        assert json.loads(m.read_text()) == json.loads((dask / "data/metrics" / m.name).read_text()), m.name


def test_local_dask_workers_share_the_cores(tmp_path):
    """Each local Dask worker gets cores // (workers x threads) CPU threads (OMP_NUM_THREADS), never 0."""
    pytest.importorskip("prefect_dask")
    from flows.build import task_runner, worker_cpu_share

    assert worker_cpu_share(2, 1, cores=2) == 1 and worker_cpu_share(2, 1, cores=16) == 8
    assert worker_cpu_share(4, 1, cores=2) == 1 and worker_cpu_share(2, 2, cores=16) == 4
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["prefect"]["task_runner"] = {"kind": "dask", "dask_workers": 2, "dask_threads_per_worker": 1}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    kwargs = task_runner(str(path)).cluster_kwargs
    assert kwargs["n_workers"] == 2 and kwargs["env"] == {"OMP_NUM_THREADS": str(worker_cpu_share(2, 1))}


def test_progress_lines_show_done_total_elapsed_eta_and_rate(capsys):
    """Long loops print plain lines (console and Prefect logs alike); short loops stay silent."""
    import time

    from stages._progress import progress

    def slow():
        for i in range(6):
            time.sleep(0.02)
            yield i

    assert list(progress(slow(), "demo", total=6, interval=0.01, min_total=2)) == list(range(6))
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) >= 2 and all(line.startswith("demo: ") for line in lines)
    last = lines[-1]
    assert "100%" in last and "6/6" in last and "<" in last and ("it/s" in last or "s/it" in last), last  # [elapsed<ETA, rate]
    assert list(progress(range(1), "short", min_total=2)) == [0] and capsys.readouterr().out == ""


def test_network_stages_are_retried_and_every_stage_has_a_timeout():
    from flows.build import task_options

    opts = {s.name: task_options(s, str(ROOT / "params.yaml")) for s in STAGES}
    assert opts["crawl_images"]["retries"] == 2 and opts["crawl_images"]["retry_delay_seconds"] == 30
    assert "retries" not in opts["select_instances"]
    assert all(o["timeout_seconds"] == 21600 for o in opts.values())


def test_deployments_from_params():
    from flows.deploy import deployments

    deps = {d.name: d for d in deployments(str(ROOT / "params.yaml"))}
    assert set(deps) == {"nightly-annotations", "full-build"}
    nightly = deps["nightly-annotations"]
    assert [s.schedule.cron for s in nightly.schedules] == ["0 3 * * *"] and nightly.schedules[0].schedule.timezone == "UTC"
    assert nightly.parameters["only"] == ["import_annotations", "select_instances", "export", "evaluate"]
    assert not deps["full-build"].schedules and deps["full-build"].parameters["only"] is None


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_served_deployment_runs_to_completed_on_a_local_prefect_server(project, tmp_path):
    """`prefect server start` + `python -m flows.deploy` (serve) + a deployment run, all on 127.0.0.1."""
    import time
    import urllib.request

    d, _ = project
    port = _free_port()
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect-home"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_API_URL": f"http://127.0.0.1:{port}/api", "DVC_NO_ANALYTICS": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}  # fmt: skip
    prefect = str(Path(sys.executable).parent / "prefect")
    procs = []
    try:
        procs.append(subprocess.Popen([prefect, "server", "start", "--host", "127.0.0.1", "--port", str(port)], env=env, cwd=d,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))  # fmt: skip
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2).read() == b"true":
                    break
            except OSError:
                time.sleep(1)
        else:
            pytest.fail("Prefect server did not become healthy in 120 s")
        procs.append(subprocess.Popen([sys.executable, "-m", "flows.deploy"], env=env, cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.time() + 120
        while time.time() < deadline:
            ls = subprocess.run([prefect, "deployment", "ls"], env=env, cwd=d, capture_output=True, text=True)
            if "nightly" in ls.stdout:
                break
            time.sleep(2)
        run = subprocess.run([prefect, "deployment", "run", "winogavil-build/nightly-annotations", "--watch", "--watch-timeout", "300"],
                             env=env, cwd=d, capture_output=True, text=True, timeout=400)  # fmt: skip
        assert run.returncode == 0 and "Completed" in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


@pytest.mark.slow
def test_report_page_holds_the_run_and_renders(project, tmp_path):
    import shutil

    from stages.report import write_report

    d, _ = project
    page = write_report(d)
    text = page.read_text()
    for needle in ("Table 1 layout", "Table 4 layout", "Gallery", ">2709<", ">854<", ">41.6<", ">74.3<", "cue: spacecraft", "data:image/jpeg;base64"):
        assert needle in text, needle
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed (.ci/run installs it): screenshot part skipped")
    shot = tmp_path / "report.png"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,2000"]  # fmt: skip
    subprocess.run([chromium, *flags, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120, check=True)
    dom = subprocess.run([chromium, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=True).stdout
    assert "Zero-shot evaluation" in dom and ">2709<" in dom
    from PIL import Image

    with Image.open(shot) as im:
        assert im.size == (1200, 2000)
        lo, hi = im.convert("L").getextrema()
        assert hi - lo > 100  # not a blank page

"""The pipeline as users run it: dvc.yaml from the registry, `dvc repro` end to end in a
temporary project, the Prefect flow over the same stage functions, DuckDB over the outputs."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gavil.params import load_params
from gavil.pipeline.dvc import dvc_yaml
from gavil.pipeline.metrics import METRICS_SUMMARY
from gavil.pipeline.registry import STAGES, upstream
from stages.evaluate.association_types import PAPER_TABLE6
from tests.helpers import FAST_AFLITE, MINI_IMAGES, ROOT, mini_project, no_downloads, require_chromium, run


def test_committed_dvc_yaml_matches_the_registry():
    assert (ROOT / "dvc.yaml").read_text() == dvc_yaml(ROOT / "params.yaml"), "run `gavil dvc-yaml --write`"


def test_every_stage_has_its_params_a_module_and_existing_deps():
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    typed = load_params(ROOT / "params.yaml")
    dvc = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert list(dvc) == [s.name for s in STAGES]
    for s in STAGES:
        for key in s.param_keys(typed):  # every key dvc.yaml names is in params.yaml (DVC needs them all)
            node = params
            for part in key.split("."):  # a dotted path of any depth: models.<name>.<key>, game.gold.<key>
                assert isinstance(node, dict) and part in node, key
                node = node[part]
        assert dvc[s.name]["params"] == s.param_keys(typed)
        assert (ROOT / "stages" / f"{s.name}.py").exists() or (ROOT / "stages" / s.name / "__init__.py").exists()
        for dep in dvc[s.name]["deps"]:
            if not dep.startswith("${") and not dep.startswith("data/") or dep.startswith("data/sample"):
                assert (ROOT / dep).exists(), dep
    assert upstream(next(s for s in STAGES if s.name == "select_instances")) == [
        "ocr_filter",
        "import_annotations",
    ]  # ocr: the showable check
    assert upstream(next(s for s in STAGES if s.name == "ingest_concepts")) == []


_run = run  # the venv's dvc/gavil first on PATH

# The built sample (tests.helpers.build_sample) comes from conftest's session fixtures: `sample_build`
# (shared, read only) and `sample_copy` (a private copy, for tests that change params, re-run or commit).


@pytest.mark.slow
def test_dvc_repro_end_to_end(sample_build):
    d, first = sample_build
    assert "NO WEIGHTS" in first.stdout + first.stderr  # plain message, run goes on
    metrics = {p.stem: json.loads(p.read_text()) for p in (d / "data/metrics/details").glob("*.json")}
    assert set(metrics) == {s.name for s in STAGES}
    assert metrics["crawl_images"]["by_status"]["ok"] == len(MINI_IMAGES)
    assert metrics["ocr_filter"]["by_status"]["accepted"] == len(MINI_IMAGES)
    assert metrics["score_candidates"]["by_status"] == {"no_weights": 2}
    ev = metrics["evaluate"]
    assert ev["release_check"]["matches"] and ev["instances"] == 3563 + 998
    assert ev["models"]["clip-rn50"]["status"] == "no_weights" and ev["models"]["clip-rn50"]["game 5&6"] is None
    text = ev["models"]["text-minilm-l6"]  # the offline text-only baseline scores every instance
    assert text["status"] == "ok" and 0 < text["game 5&6"] < text["swow_baseline 5&6"] <= 100
    paper = ev["paper"]  # the paper's other tables, from the release files, on every dvc repro
    # the default run names no model of an optional extra (MPNet's exact Table 7: tests/stages/evaluate/test_paper.py)
    assert not any("text-mpnet" in m for m in ev["models"])
    assert paper["table7"]["text-minilm-l6 (cue vs OFA captions)"] == {
        "game 10&12": 41,
        "game 5&6": 53,
        "swow_baseline 5&6": 73,
    }
    assert text["weights_sha256"] == load_params(d / "params.yaml").models["text-minilm-l6"].sha256
    t6 = paper["table6"]["clip-vit-b-32 (release predictions)"]
    assert [t6[t]["percent"] for t in PAPER_TABLE6] == [75, 36, 65, 42, 36, 79]
    t5 = paper["table5"]["text-minilm-l6 on captions (offline, text model; not CLIP)"]
    assert len(t5["10&12"]["per_seed"]["supervised"]) == 2 and t5["5&6"]["zero_shot_mean"] > 0
    assert metrics["build_instances"]["concreteness"]["concrete"] >= 9
    assert (d / "data/plots/evaluation_by_model.png").read_bytes()[:4] == b"\x89PNG"
    assert "accepted,9" in (d / "data/plots/ocr_fates.csv").read_text()
    assert "game selected,1.0,3387" in (d / "data/plots/solver_jaccard.csv").read_text()
    assert "| text-minilm-l6" in (d / "data/evaluate/table4.md").read_text()
    assert "models.rival.weights_path" in metrics["score_candidates"]["message"]  # a fixed sentence
    assert "Errno" not in json.dumps(metrics)  # the OS's wording stays in the log
    assert metrics["build_instances"]["candidate_sets_skipped_sizes"] == [12]  # pool of 9
    assert metrics["export"]["instances"] == 3563
    assert (d / "data/export/benchmark.csv").read_bytes() == (
        d / "data/sample/winogavil/winogavil_dataset.csv"
    ).read_bytes()
    assert metrics["export"]["split_files"] == {"game_5_6": 2709, "game_10_12": 854, "swow": 998}
    # the Hugging Face folder holds the instances whose every candidate has an image: none of the
    # release's, with 9 images (tests/stages/export/test_export_hf.py loads a non-empty one with `datasets`)
    assert sorted(p.name for p in (d / "data/export/dataset").iterdir()) == [
        "README.md",
        "croissant.json",
        "test.parquet",
    ]
    assert metrics["export"]["dataset_instances"] == 0 and metrics["export"]["dataset_left_out"] == 3563
    card = (d / "data/export/dataset/README.md").read_text()
    assert "CC-BY 4.0" in card and "De Deyne" in card and ">= 0.8" in card and "Left out: 3563 instances" in card

    timings = {p.stem: json.loads(p.read_text()) for p in (d / "data/metrics/timings").glob("*.json")}
    assert set(timings) == {s.name for s in STAGES} and all(t["seconds"] >= 0 for t in timings.values())
    shown = _run([sys.executable, "-m", "dvc", "metrics", "show"], d).stdout
    assert (
        "data/metrics/timings/ocr_filter.json" in shown and "seconds" in shown and "data/metrics/export.json" in shown
    )
    # the default view is one row per file and a column per summary name: readable on a terminal
    # 12 stages' summary columns and the timings' (seconds, CPU seconds, peak memory, partitions, processes): a wide terminal
    assert max(len(line) for line in shown.splitlines()) <= 250, shown
    summary = {p.stem: json.loads(p.read_text()) for p in (d / "data/metrics").glob("*.json")}
    assert summary["export"] == {"instances": 3563, "hf_instances": 0, "version": "1.0.0"}
    assert summary["ocr_filter"] == {"images": 9, "rejected": 0} and summary["evaluate"]["release_check"] is True
    for stage, columns in METRICS_SUMMARY.items():  # every summary path names a key the stage writes
        for dotted in columns.values():
            *parents, last = dotted.split(".")
            node = metrics[stage]
            for part in parents:
                node = node[part]
            assert "*" in last or last in node, (stage, dotted)
    assert "timings" not in (d / "dvc.lock").read_text()  # not outputs: a re-run's new timings change nothing in DVC

    again = _run([sys.executable, "-m", "dvc", "repro"], d)
    assert again.returncode == 0 and "Running stage" not in again.stdout
    status = _run([sys.executable, "-m", "dvc", "status"], d)
    assert "up to date" in status.stdout


@pytest.mark.slow
def test_threshold_change_reruns_only_what_depends_on_the_selection(sample_copy):
    d = sample_copy
    params_file = d / "params.yaml"
    # the stages' metrics are committed with the run (as in this repository), so `dvc metrics diff` compares runs
    (d / ".gitignore").write_text("/data/*\n!/data/metrics/\n/data/metrics/timings/\n")
    assert _run(["git", "add", ".gitignore", "data/metrics", "dvc.lock", "dvc.yaml", "params.yaml"], d).returncode == 0
    assert _run(["git", "commit", "-q", "-m", "run at 0.8"], d).returncode == 0
    params = yaml.safe_load(params_file.read_text())
    params["select"]["min_solver_jaccard"] = 0.9
    params_file.write_text(yaml.safe_dump(params, sort_keys=False))
    out = _run([sys.executable, "-m", "dvc", "repro"], d)
    assert out.returncode == 0, out.stderr[-2000:]
    ran = [line.split("'")[1] for line in out.stdout.splitlines() if line.startswith("Running stage")]
    # everything downstream of the selection, nothing upstream
    assert ran[0] == "select_instances" and sorted(ran) == ["aflite", "evaluate", "export", "select_instances"]
    # published is final (issue 24): a raised threshold applies to new instances; the 176
    # published ones with a mean below 0.9 stay (a lab takes one out with select.retired)
    diff = _run([sys.executable, "-m", "dvc", "metrics", "diff", "--json"], d)
    assert "instances" not in json.loads(diff.stdout).get("data/metrics/export.json", {}), diff.stdout[-2000:]
    q = _run(
        [
            "gavil",
            "query",
            "select count(*) as n from selection where dataset = 'game' and status = 'selected' "
            "and solvers_jaccard_mean < 0.9 and reason like '%threshold rose%'",
            "--format",
            "json",
        ],
        d,
    )
    assert json.loads(q.stdout) == [{"n": 176}]


@pytest.mark.slow
def test_runtime_knobs_rerun_nothing(sample_copy):
    """Partition sizes, threads, batch sizes and politeness do not change outputs: dvc.yaml leaves
    them out of the stages' params, so changing them re-runs no stage."""
    d = sample_copy
    params_file = d / "params.yaml"
    original = params_file.read_text()
    params = yaml.safe_load(original)
    params["crawl"] |= {"threads": 3, "partition_size": 7, "per_host": {"max_connections": 1, "delay_s": 0.5}}
    params["ocr"] |= {"batch_size": 2, "partition_size": 3}
    params["models"]["rival"] |= {"batch_size": 4, "threads": 1, "loader_workers": 0}
    params["score"]["partition_size"] = 50
    params["prefect"]["task_timeout_s"] = 60
    params_file.write_text(yaml.safe_dump(params, sort_keys=False))
    status = _run([sys.executable, "-m", "dvc", "status"], d)
    assert "up to date" in status.stdout, status.stdout
    params["ocr"]["match_threshold"] = 90  # a real parameter still re-runs its stage
    params_file.write_text(yaml.safe_dump(params, sort_keys=False))
    status = _run([sys.executable, "-m", "dvc", "status", "ocr_filter"], d)
    assert "ocr.match_threshold" in status.stdout, status.stdout
    params["ocr"]["match_threshold"] = yaml.safe_load(original)["ocr"]["match_threshold"]
    params["models"]["text-minilm-l6"]["device"] = "cpu"  # a shared model's setting: exactly its users
    params_file.write_text(yaml.safe_dump(params, sort_keys=False))
    status = _run([sys.executable, "-m", "dvc", "status"], d)
    changed = {line.rstrip(":") for line in status.stdout.splitlines() if line and not line[0].isspace()}
    assert changed == {"adversarial_filter", "aflite", "evaluate"}, status.stdout


@pytest.mark.slow
def test_a_collaborator_pulls_everything_and_reruns_nothing(sample_copy, tmp_path):
    """dvc push to a local directory remote; a second clone that runs dvc pull is up to date:
    caches and plots travel through the remote, the ID ledger and metrics through git."""
    d = sample_copy
    (d / ".gitignore").write_text((ROOT / ".gitignore").read_text())  # the project's own ignore rules
    remote = tmp_path / "remote"
    assert _run([sys.executable, "-m", "dvc", "remote", "add", "-d", "-f", "shared", str(remote)], d).returncode == 0
    push = _run([sys.executable, "-m", "dvc", "push"], d)
    assert push.returncode == 0, push.stderr[-2000:]
    for cmd in (["git", "add", "-A"], ["git", "commit", "-q", "-m", "build"]):
        assert _run(cmd, d).returncode == 0
    status = _run(["git", "status", "--porcelain"], d)
    assert status.stdout == "", status.stdout  # nothing the run wrote is left outside git or DVC
    clone = tmp_path / "clone"
    assert _run(["git", "clone", "-q", str(d), str(clone)], tmp_path).returncode == 0
    pull = _run([sys.executable, "-m", "dvc", "pull"], clone)
    assert pull.returncode == 0, pull.stderr[-2000:]
    status = _run([sys.executable, "-m", "dvc", "status"], clone)
    assert "up to date" in status.stdout, status.stdout
    again = _run([sys.executable, "-m", "dvc", "repro"], clone)
    assert again.returncode == 0 and "Running stage" not in again.stdout, again.stdout[-2000:]
    for rel in ("data/export/benchmark.csv", "data/plots/ocr_fates.csv"):
        assert (clone / rel).read_bytes() == (d / rel).read_bytes(), rel
    # the model-output caches hold this machine's numerics: never shared (each machine keeps its own)
    assert (d / "data/cache/embeddings.parquet").exists() and not (clone / "data/cache/embeddings.parquet").exists()
    assert (clone / "data/ledger/benchmark_ids.parquet").read_bytes() == (
        d / "data/ledger/benchmark_ids.parquet"
    ).read_bytes()


@pytest.mark.slow
def test_query_sees_every_stage_table(sample_build):
    d, _ = sample_build
    from gavil.pipeline import catalog
    from gavil.query import connect, table_files

    names = set(table_files(d))
    assert (
        {
            "concepts",
            "edges",
            "name_rejects",
            "concept_filter",
            "images",
            "candidates",
            "ocr",
            "candidate_sets",
            "swow_instances",
            "concreteness",
            "scores",
            "instances",
            "solves",
            "annotation_rejects",
            "selection",
            "table1",
            "annotator_stats",
            "benchmark",
            "embeddings",
            "eval_embeddings",
            "ocr_detections",
            "predictions",
            "evaluation",
            "benchmark_dataset",
            "id_ledger",
            "paired_evaluation",
            "af_instances",
            "af_replacements",
            "af_iterations",
            "af_embeddings",
            "aflite",
            "aflite_phases",
            "aflite_embeddings",
            "flags",
            "gold_checks",
            "rival_rounds",
            "round_errors",
            "safety",
            "safety_embeddings",
        }
        == names
        == {t.name for t in catalog.TABLES}
    )  # one view per catalog table, named as in the catalog
    con = connect(d)
    assert con.execute("select count(*) from benchmark").fetchone()[0] == 3563
    row = con.execute(
        "select list_contains(candidates, 'eagle'), len(associations) from benchmark where ID = 0"
    ).fetchone()
    assert row == (True, 2)
    joined = con.execute(
        "select count(*) from scores s join swow_instances i using (instance_id) where s.status = 'no_weights' and s.jaccard is null"
    ).fetchone()[0]
    assert joined == 2


_PLOTS_PROBE = """<script>
window.addEventListener('load', () => setTimeout(() => {
  const imgs = [...document.images].map(i => ({src: i.getAttribute('src'), done: i.complete, w: i.naturalWidth, h: i.naturalHeight}));
  const charts = [...document.querySelectorAll('.vega-embed')].map(d => {
    const c = d.querySelector('canvas');
    let ink = 0;
    if (c && c.width && c.height) {
      const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      for (let k = 0; k < px.length; k += 4) if (px[k + 3] > 0 && Math.min(px[k], px[k + 1], px[k + 2]) < 200) ink++;
    }
    return {id: d.id, w: c ? c.width : 0, h: c ? c.height : 0, ink};
  });
  const out = document.createElement('pre');
  out.id = 'probe';
  out.textContent = JSON.stringify({imgs, charts});
  document.body.appendChild(out);
}, 1000));
</script>"""


@pytest.mark.slow
def test_plots_page_renders_offline_in_chromium(sample_copy, tmp_path):
    """`dvc plots show` with this repository's .dvc/config (a clone has it): the page loads no
    script from the network, and in headless Chromium with name resolution switched off every
    plot renders: the vega-lite charts draw on their canvas, the PNG figures load."""
    import re
    import shutil

    d = sample_copy
    for name in ("config", "offline_plots.html"):  # what a clone of this repository has in .dvc/
        shutil.copy(ROOT / ".dvc" / name, d / ".dvc" / name)
    out = _run([sys.executable, "-m", "dvc", "plots", "show", "-o", str(tmp_path / "plots")], d)
    assert out.returncode == 0, out.stderr[-2000:]
    page = tmp_path / "plots/index.html"
    html = page.read_text()
    assert not re.search(r"<script[^>]*\bsrc=[\"']?(https?:)?//", html), (
        "the page must not load scripts from the network"
    )
    declared = [p for s in yaml.safe_load((d / "dvc.yaml").read_text())["stages"].values() for p in s.get("plots", [])]
    n_charts, n_images = len(re.findall(r"vegaEmbed\('#", html)), len(re.findall(r'<img src="static/', html))
    assert n_charts + n_images == len(declared) == 7 and n_images == 2

    chromium = require_chromium()  # fails, saying what to install, without one
    head, body_end, tail = html.rpartition("</body>")
    probe = page.with_name("probe.html")  # the same page plus a script that reports what rendered
    probe.write_text(head + _PLOTS_PROBE + body_end + tail)
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # offline: no host name resolves
        f"--user-data-dir={tmp_path / 'profile'}",
        "--virtual-time-budget=20000",
    ]
    dom = subprocess.run(
        [chromium, *flags, "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    report = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert len(report["charts"]) == n_charts and all(c["w"] > 0 and c["ink"] > 500 for c in report["charts"]), report
    assert len(report["imgs"]) == n_images and all(i["done"] and i["w"] > 0 and i["h"] > 0 for i in report["imgs"])


@pytest.mark.slow
def test_prefect_flow_runs_the_same_stages(sample_copy, monkeypatch):
    """The flow runs the same stage functions; DVC decides what is up to date and records what ran."""
    from prefect.testing.utilities import prefect_test_harness

    from flows.build import build_benchmark

    d = sample_copy
    monkeypatch.chdir(d)
    params_file = d / "params.yaml"
    with prefect_test_harness(server_startup_timeout=120):
        # 1. without DVC: every stage runs, and writes exactly what dvc repro wrote
        result = build_benchmark(use_dvc=False)
        assert set(result) == {s.name for s in STAGES} and not any(m["skipped"] for m in result.values())
        assert result["export"]["instances"] == 3563 and result["score_candidates"]["by_status"] == {"no_weights": 2}
        ocr = result["ocr_filter"]  # partitioned: seconds is the whole stage (plan, partitions, reduce)
        assert (
            ocr["seconds"] >= ocr["reduce_seconds"]
            and json.loads((d / "data/metrics/timings/ocr_filter.json").read_text())["partitions"] == 1
        )
        assert "up to date" in _run([sys.executable, "-m", "dvc", "status"], d).stdout
        # 2. with DVC: nothing changed, so every stage is skipped
        result = build_benchmark()
        assert all(m["skipped"] for m in result.values())
        # 3. a threshold change: the flow re-runs what depends on it and records it in dvc.lock
        params = yaml.safe_load(params_file.read_text())
        params["select"]["min_solver_jaccard"] = 0.9
        params_file.write_text(yaml.safe_dump(params, sort_keys=False))
        result = build_benchmark(only=["import_annotations", "select_instances", "export"])
        assert [n for n, m in result.items() if not m["skipped"]] == ["select_instances", "export"]
        # published is final (issue 24): the 176 published game instances below 0.9 stay exported
        assert result["export"]["instances"] == 3563
    status = _run([sys.executable, "-m", "dvc", "status", "select_instances", "export"], d)
    assert "up to date" in status.stdout, status.stdout


#: rows of each release split the small project keeps (tests/pipeline/test_pipeline.py's Dask check)
SMALL_RELEASE = {"game_5_6": 40, "game_10_12": 20}


def small_release(d: Path) -> None:
    """Cut the release copy in ``d`` (data/sample/winogavil, also the SWOW input) to a small project:
    the SWOW rows that name one of :data:`MINI_IMAGES` (cue, candidate or association: 41 rows, the
    same SWOW instances as the whole file), the first :data:`SMALL_RELEASE` rows of each game split,
    and the stored predictions of exactly those instances. Captions and association types stay whole."""
    import pandas as pd

    rel = d / "data/sample/winogavil"
    mini = set(MINI_IMAGES)

    def cut(name: str, keep) -> set[str]:
        df = pd.read_csv(rel / name, dtype=str, keep_default_na=False)
        df = df[keep(df)]
        df.to_csv(rel / name, index=False)
        return set(df["ID"])

    def names_mini(df: pd.DataFrame) -> list[bool]:
        return [
            bool({cue, *json.loads(c), *json.loads(a)} & mini)
            for cue, c, a in zip(df["cue"], df["candidates"], df["associations"])
        ]

    kept = {"swow": cut("swow.csv", names_mini)}
    for split, n in SMALL_RELEASE.items():
        kept[split] = cut(f"{split}.csv", lambda df, n=n: df.index < n)
    for split, ids in kept.items():
        cut(
            f"test_sets_with_zero_shot_predictions/{split}_with_predictions.csv", lambda df, ids=ids: df["ID"].isin(ids)
        )


@pytest.mark.slow
def test_dask_runner_gives_the_sequential_results(tmp_path, monkeypatch):
    """Heavy stages mapped over many small partitions on a 2-worker local Dask cluster write the
    same tables as the plain sequential run (run_stage per stage, one partition each), on a small
    project (:func:`small_release`: 9 images, ~200 concepts, 101 release instances) so that every
    stage, partitioned or not, runs on both in a minute or two."""
    pytest.importorskip("prefect_dask")
    import pandas as pd
    from prefect.testing.utilities import prefect_test_harness

    from flows.build import run_flow
    from gavil.pipeline.runner import run_stage

    def make(name, runner, size):
        d = mini_project(tmp_path / name, MINI_IMAGES)
        small_release(d)
        params = yaml.safe_load((d / "params.yaml").read_text())
        no_downloads(params, pretrained=None, threads=1)  # seeded random weights
        params["score"]["partition_size"] = params["ocr"]["partition_size"] = size
        params["crawl"]["partition_size"] = 25 * size  # ~200 concepts: a few partitions on Dask, not ~100
        params["instances"]["game_sets"] = {5: 1, 6: 1, 10: 0, 12: 0}
        params["aflite"] |= FAST_AFLITE  # at the paper's settings AfLite alone took most of this test's 800 s
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
    for partitioned in ("crawl_images", "ocr_filter", "score_candidates"):  # several partitions each on Dask
        timing = json.loads((dask / f"data/metrics/timings/{partitioned}.json").read_text())
        assert timing["partitions"] >= 3, (partitioned, timing)
    assert result["export"]["instances"] > 0 and result["evaluate"]["instances"] > 0
    tables = sorted(p.relative_to(seq) for p in (seq / "data").rglob("*.parquet") if "sample" not in p.parts)
    assert len(tables) >= 15 and tables == sorted(
        p.relative_to(dask) for p in (dask / "data").rglob("*.parquet") if "sample" not in p.parts
    )
    from gavil.pipeline import catalog

    # the model-output caches are this machine's own (local, no DVC output): which cache holds a vector
    # depends on which stage computed it first, so only the outputs are compared
    local = {Path(e.path) for e in (*catalog.TABLES, *catalog.ARTIFACTS) if e.local}
    assert local & set(tables), "the caches are among the tables compared before"
    for t in tables:
        if t in local:
            continue
        a, b = pd.read_parquet(seq / t), pd.read_parquet(dask / t)
        pd.testing.assert_frame_equal(a, b, obj=str(t))
    for m in [*(seq / "data/metrics").glob("*.json"), *(seq / "data/metrics/details").glob("*.json")]:
        rel = m.relative_to(seq)
        assert json.loads(m.read_text()) == json.loads((dask / rel).read_text()), rel


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
    from gavil.pipeline.parallel import thread_env

    assert kwargs["n_workers"] == 2 and kwargs["env"] == thread_env(worker_cpu_share(2, 1))
    assert kwargs["env"]["OMP_NUM_THREADS"] == kwargs["env"]["OPENBLAS_NUM_THREADS"] == str(worker_cpu_share(2, 1))


def test_progress_lines_show_done_total_elapsed_eta_and_rate(capsys):
    """Long loops print plain lines (console and Prefect logs alike); short loops stay silent."""
    import time

    from gavil.progress import progress

    def slow():
        for i in range(6):
            time.sleep(0.02)
            yield i

    assert list(progress(slow(), "demo", total=6, interval=0.01, min_total=2)) == list(range(6))
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) >= 2 and all(line.startswith("demo: ") for line in lines)
    last = lines[-1]
    assert "100%" in last and "6/6" in last and "<" in last and ("it/s" in last or "s/it" in last), (
        last
    )  # [elapsed<ETA, rate]
    assert list(progress(range(1), "short", min_total=2)) == [0] and capsys.readouterr().out == ""


def test_ocr_reports_progress_after_every_batch_even_for_a_few_images(capsys, monkeypatch):
    """OCR prints a progress line (done/total, rate, ETA) after each batch of ``ocr.batch_size``
    images, at most every ``PROGRESS_INTERVAL_S`` seconds, however few images there are; it calls the
    reader on the same same-shaped batches the reader would form from the whole chunk itself."""
    import time

    import pandas as pd

    from stages import ocr_filter
    from tests.helpers import IMAGES

    monkeypatch.setattr(ocr_filter, "PROGRESS_INTERVAL_S", 0.0)
    cat, moon = str(next(IMAGES.glob("cat.*"))), str(next(IMAGES.glob("moon.*")))
    files = {"a": cat, "b": cat, "c": cat, "d": moon, "e": cat}  # four images of one shape, one of another
    images = pd.DataFrame({"concept": list(files), "status": "ok", "reason": None})
    candidates = pd.DataFrame(
        {
            "concept": list(files),
            "rank": 1,
            "status": "kept",
            "sha256": [c * 64 for c in files],
            "path": list(files.values()),
            "url": list(files.values()),
        }
    )
    calls: list[list[tuple[int, ...]]] = []

    def read(batch, canvas):
        time.sleep(0.05)
        calls.append([im.shape for im in batch])
        return [[] for _ in batch]

    out = ocr_filter.decide(images, candidates, ocr_filter.MatchRule(), 640, {}, read, batch_size=2)
    assert (out["status"] == "accepted").all()
    assert [len(c) for c in calls] == [2, 2, 1] and all(len(set(c)) == 1 for c in calls)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("ocr_filter: OCR")]
    assert len(lines) >= 3 and "5/5" in lines[-1], lines


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
    assert [s.schedule.cron for s in nightly.schedules] == ["0 3 * * *"] and nightly.schedules[
        0
    ].schedule.timezone == "UTC"
    assert nightly.parameters["only"] == ["import_annotations", "select_instances", "aflite", "export", "evaluate"]
    assert not deps["full-build"].schedules and deps["full-build"].parameters["only"] is None


@pytest.mark.slow
def test_report_page_holds_the_run_and_renders(sample_copy, tmp_path):
    from gavil.report import write_report

    d = sample_copy
    page = write_report(d)
    text = page.read_text()
    for needle in (
        "Table 1 layout",
        "Table 4 layout",
        "Gallery",
        ">2709<",
        ">854<",
        ">41.6<",
        ">74.3<",
        "cue: spacecraft",
        "data:image/jpeg;base64",
    ):
        assert needle in text, needle
    chromium = require_chromium()  # fails, saying what to install, without one
    shot = tmp_path / "report.png"
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1200,2000",
    ]
    subprocess.run(
        [chromium, *flags, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120, check=True
    )
    dom = subprocess.run(
        [chromium, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert "Zero-shot evaluation" in dom and ">2709<" in dom
    from PIL import Image

    with Image.open(shot) as im:
        assert im.size == (1200, 2000)
        lo, hi = im.convert("L").getextrema()
        assert hi - lo > 100  # not a blank page


@pytest.mark.slow
def test_report_lists_each_table4_row_once_and_fits_1280_px(sample_copy, browser):
    """`gavil report` on the built sample: the Table 4 layout holds each (model, dataset, cell) once
    (the all-rounds rows; per-round rows only under "Per collection round"), and a 1280 px wide
    window shows the page without a sideways scroll bar."""
    import re

    from gavil.report import write_report

    page = write_report(sample_copy)
    table4 = page.read_text().split("Table 4 layout", 1)[1].split("<h2>", 1)[0]
    rows = [tuple(re.findall(r"<td>(.*?)</td>", r, re.S)[:3]) for r in re.findall(r"<tr>(.*?)</tr>", table4, re.S)]
    rows = [r for r in rows if r]  # the header row has no <td>
    assert rows and len(rows) == len(set(rows)), rows
    view = browser.new_page(viewport={"width": 1280, "height": 900})
    view.goto(page.as_uri())
    assert view.evaluate("document.documentElement.scrollWidth") <= 1280
    view.close()

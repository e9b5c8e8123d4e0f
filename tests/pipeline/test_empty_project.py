"""Every stage and the Prefect flow run on a project with empty inputs (issue 24).

A lab that crawls its own concepts has no SWOW-baseline instances, no game data, no images and
no release files. Each stage must then succeed with zero-row tables that pass their schemas and
metrics that say 0; before, adversarial_filter wrote a frame with no columns and the flow
stopped on ``column 'instance_id' not in dataframe``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from gavil.pipeline import catalog
from gavil.pipeline.codedeps import PACKAGES
from gavil.pipeline.registry import STAGES
from gavil.pipeline.runner import run_stage
from tests.helpers import FAST_AFLITE, ROOT, no_downloads

#: Tables that hold instances or their derivatives: empty in an empty project.
INSTANCE_TABLES = ("af_instances", "instances", "solves", "selection", "predictions", "evaluation")


def empty_project(dest: Path) -> Path:
    """Code and params, a two-cue SWOW strength file, and nothing else: no images, no release
    files (their params set to ""), no raw batches, no game store, no model weights."""
    for name in PACKAGES:
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "dvc.yaml", dest / "dvc.yaml")
    for folder in ("data/in/images", "data/in/raw", "data/game"):
        (dest / folder).mkdir(parents=True)
    (dest / "data/in/strength.SWOW-EN.R1.csv").write_text(
        "cue\tresponse\tR1\tN\tR1.Strength\nmoon\tsun\t4\t10\t0.4\nrocket\tspace\t5\t10\t0.5\n"
    )
    p = yaml.safe_load((ROOT / "params.yaml").read_text())
    p["ingest"]["path"] = "data/in/strength.SWOW-EN.R1.csv"
    p["crawl"] |= {"source": "local", "local_dir": "data/in/images", "urllist_path": ""}
    p["annotations"] |= {"release_dir": "", "release_files": [], "raw_dir": "data/in/raw"}
    no_downloads(p, pretrained=None)
    p["evaluate"] |= {"release_predictions_dir": "", "bootstrap": 10}
    p["paper"]["release_dir"] = ""
    p["aflite"] |= FAST_AFLITE
    p["prefect"]["task_runner"] = {**p["prefect"]["task_runner"], "kind": "thread"}
    (dest / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    return dest


def check_outputs(d: Path, metrics: dict[str, dict]) -> None:
    """Every declared table a stage wrote reads back through its schema; instance tables are empty."""
    written = [t for t in catalog.TABLES if (d / t.path).exists()]
    assert {t.name for t in written} >= {*INSTANCE_TABLES, "swow_instances"}, sorted(t.name for t in written)
    for t in written:
        df = catalog.read_table(t.name, d)  # validates against the schema
        assert isinstance(df, pd.DataFrame)
        assert list(df.columns) == list(t.schema().to_schema().columns), t.name
        if t.name in INSTANCE_TABLES:
            assert len(df) == 0, (t.name, len(df))
    sw = catalog.read_table("swow_instances", d)  # every cue keeps its fate: rejected, with a reason
    assert len(sw) == 2 and not (sw["status"] == "ok").any() and sw["reason"].notna().all()
    assert metrics["build_instances"]["pool"] == 0
    assert metrics["adversarial_filter"]["instances"] == 0 and metrics["adversarial_filter"]["skipped"] == 0
    assert metrics["import_annotations"]["solves"] == 0
    assert metrics["import_annotations"]["game_store"] == {"state": "absent", "creations_without_solves": 0}
    assert metrics["aflite"]["instances"] == 0 and metrics["export"]["instances"] == 0
    assert metrics["evaluate"]["instances"] == 0


@pytest.fixture
def project(tmp_path, monkeypatch):
    d = empty_project(tmp_path / "empty")
    monkeypatch.chdir(d)
    monkeypatch.setenv("GAVIL_ANNOTATOR_KEY", "empty-project-test-key")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return d


@pytest.mark.slow
def test_every_stage_runs_on_empty_inputs(project):
    metrics = {s.name: run_stage(s.name) for s in STAGES}
    check_outputs(project, metrics)


@pytest.mark.slow
def test_the_prefect_flow_runs_on_empty_inputs(project):
    from prefect.testing.utilities import prefect_test_harness

    from flows.build import build_benchmark

    with prefect_test_harness(server_startup_timeout=120):
        result = build_benchmark(use_dvc=False)
    assert set(result) == {s.name for s in STAGES} and not any(m.get("skipped") for m in result.values())
    check_outputs(project, result)

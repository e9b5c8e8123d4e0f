"""Every core under ``dvc repro``: a partitioned stage's partitions on spawned worker processes,
bounded by the cores and the memory, processes x threads <= cores, the same bytes for any number of
processes and any partition sizes (gavil/pipeline/parallel.py, gavil/pipeline/runner.py)."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from gavil.params import Params, load_params
from gavil.pipeline import parallel
from gavil.pipeline.registry import STAGES
from tests.helpers import copy_project, run

PARTITIONED = [s.name for s in STAGES if s.partitioned]


def report_threads(_: int = 0) -> dict:
    """In a worker: its pid, thread variables and torch's threads (torch imported here, after start)."""
    import torch

    return {
        "pid": os.getpid(),
        "env": {k: os.environ.get(k) for k in parallel.THREAD_VARS},
        "torch": torch.get_num_threads(),
        "forked": "torch" in _IMPORTED_AT_START,
    }


_IMPORTED_AT_START = set(sys.modules)  # a spawned worker imports this module afresh: no torch yet


def fail_on_two(x: int) -> int:
    if x == 2:
        raise ValueError("partition 2 is bad")
    return x * 10


def die_on_one(x: int) -> int:
    if x == 1:
        os._exit(9)  # a worker killed in the middle of a partition (out of memory, a crash in C code)
    return x


@pytest.mark.parametrize("n_cores", [1, 2, 3, 8, 64])
def test_processes_times_threads_never_exceed_the_cores(n_cores):
    for limit in (None, 1, 2, 5, 100):
        for available in (100.0, 4_000.0, 1e6):
            b = parallel.budget(1000, limit, 0.8, n_cores=n_cores, available=available)
            assert 1 <= b.workers <= n_cores
            for parts in (1, 2, 7, 1000):
                n = min(b.workers, parts)
                assert n * parallel.threads_per_process(n, n_cores) <= n_cores


def test_the_budget_names_the_bound_that_set_it():
    assert parallel.budget(1000, None, 0.8, n_cores=8, available=64_000) == parallel.Budget(8, 8, "cores")
    assert parallel.budget(1000, 3, 0.8, n_cores=8, available=64_000) == parallel.Budget(3, 8, "parallel.processes")
    # 5 GB available, 80 % of it, 2.5 GB a worker: 1 worker, whatever the cores
    assert parallel.budget(2500, None, 0.8, n_cores=8, available=5_000) == parallel.Budget(1, 8, "memory")
    assert parallel.budget(2500, None, 0.8, n_cores=8, available=12_500).workers == 4
    assert parallel.budget(100_000, None, 0.8, n_cores=8, available=10).workers == 1  # never 0


def test_automatic_partitions_give_every_worker_work_and_small_inputs_one_partition():
    with parallel.planning_for(2):
        assert parallel.partition(list(range(29)), None, 32) == [list(range(29))]  # the sample: one process
        parts = parallel.partition(list(range(1000)), None, 32)
        assert len(parts) == 8 and sum(parts, []) == list(range(1000))  # 4 per worker, in order
        assert {len(p) for p in parts} == {125}
        assert parallel.partition(list(range(1000)), 7, 32)[0] == list(range(7))  # an explicit size rules
    for workers in (2, 3, 64):
        for n in (0, 1, 31, 32, 63, 64, 65, 1000, 12_001):
            with parallel.planning_for(workers):
                parts = parallel.partition(list(range(n)), None, 32)
            assert sum(parts, []) == list(range(n)) and len(parts) <= max(1, 4 * workers)
            assert len(parts) == 1 or min(len(p) for p in parts) >= 32  # the minimum holds
            assert max(len(p) for p in parts) - min(len(p) for p in parts) <= 1 or len(parts) == 1
    assert parallel.partition(list(range(1000)), None, 32) == [list(range(1000))]  # no runner: one partition
    assert parallel.partition([], None, 32) == [[]]


def test_partition_size_null_is_the_default_and_refuses_zero():
    p = Params()
    assert p.ocr.partition_size is None and p.crawl.partition_size is None and p.score.partition_size is None
    from gavil.errors import ParamsError
    from gavil.params import parse_params

    with pytest.raises(ParamsError, match="ocr.partition_size"):
        parse_params({"ocr": {"partition_size": 0}})
    with pytest.raises(ParamsError, match="parallel.memory_fraction"):
        parse_params({"parallel": {"memory_fraction": 0}})
    with pytest.raises(ParamsError, match="parallel.worker_memory_mb"):
        parse_params({"parallel": {"worker_memory_mb": {"ocr": 100}}})  # stage names, not sections


def test_the_parallel_knobs_are_no_dvc_params():
    """Processes, memory and partition sizes change no output: dvc.yaml lists none of them."""
    from tests.helpers import ROOT

    dvc = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    listed = {k for st in dvc["stages"].values() for k in st.get("params", []) if isinstance(k, str)}
    assert "ocr.canvas_size" in listed
    assert not {k for k in listed if k.startswith("parallel.") or k.endswith("partition_size")}, listed


def test_spawned_workers_start_with_their_share_of_threads():
    """Each worker is a new process (spawned) whose thread variables are set before it imports torch,
    and torch then runs that many threads; this process's environment is left as it was."""
    before = {k: os.environ.get(k) for k in parallel.THREAD_VARS}
    out = parallel.map_spawned(report_threads, [(i,) for i in range(4)], processes=2, threads=1)
    assert {r["pid"] for r in out} - {os.getpid()} == {r["pid"] for r in out} and len({r["pid"] for r in out}) == 2
    assert all(r["torch"] == 1 and set(r["env"].values()) == {"1"} and not r["forked"] for r in out), out
    assert {k: os.environ.get(k) for k in parallel.THREAD_VARS} == before


def test_a_failing_partition_raises_here_and_a_dead_worker_is_named():
    with pytest.raises(ValueError, match="partition 2 is bad"):
        parallel.map_spawned(fail_on_two, [(i,) for i in range(4)], processes=2, threads=1)
    assert parallel.map_spawned(fail_on_two, [(3,), (1,)], processes=2, threads=1) == [30, 10]  # in order
    with pytest.raises(parallel.WorkerDied, match="parallel.processes"):
        parallel.map_spawned(die_on_one, [(0,), (1,), (2,)], processes=2, threads=1)


def test_a_web_crawl_keeps_its_partitions_in_one_process():
    """Politeness (connections per host, delay between starts) holds within a process: a web
    crawl's partitions never overlap; a local one's may."""
    from gavil.pipeline.runner import concurrent

    assert concurrent("crawl_images", Params())  # local
    for source in ("bing", "urllist", "greedy"):
        assert not concurrent("crawl_images", Params().replace(crawl={"source": source}))
    assert all(concurrent(n, Params()) for n in PARTITIONED if n != "crawl_images")


# ------------------------------------------------------------------------------------ same bytes
def _outputs(project: Path, names: list[str]) -> dict[str, str]:
    """sha256 of every file of every output of the stages ``names`` (dvc.yaml outs)."""
    dvc = yaml.safe_load((project / "dvc.yaml").read_text())
    out: dict[str, str] = {}
    for name in names:
        for entry in dvc["stages"][name]["outs"]:
            rel = next(iter(entry)) if isinstance(entry, dict) else entry
            path = project / rel
            files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
            for f in files:
                out[str(f.relative_to(project))] = hashlib.sha256(f.read_bytes()).hexdigest()
    for name in names:  # and the metrics (summary and details), which are in git
        for f in (project / "data/metrics").rglob(f"{name}.json"):
            if "timings" not in f.parts:
                out[str(f.relative_to(project))] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def _variant(src: Path, dest: Path, sizes: dict[str, int | None], threads: int = 2) -> Path:
    """A copy of the built sample whose caches are gone (every image is read and embedded again, in
    the workers) and whose evaluated CLIP models have random weights (so both embed images); the
    CLIP models' ``threads`` (what a worker of scoring and evaluate uses well) set to ``threads``."""
    d = copy_project(src, dest)
    for cache in ("ocr_detections", "embeddings", "eval_embeddings"):
        from gavil.pipeline import catalog

        (d / catalog.entry(cache).path).unlink(missing_ok=True)
    params = yaml.safe_load((d / "params.yaml").read_text())
    params["crawl"]["partition_size"] = sizes["crawl"]
    params["ocr"]["partition_size"] = sizes["ocr"]
    params["score"]["partition_size"] = sizes["score"]
    params["models"]["rival"] |= {"pretrained": None, "threads": threads}
    for name in ("clip-rn50", "clip-vit-b-32"):
        params["models"][name] |= {"pretrained": None, "threads": threads}
    (d / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return d


@pytest.mark.slow
def test_one_or_two_processes_and_any_partition_sizes_write_the_same_bytes(sample_build, tmp_path, monkeypatch):
    """crawl_images, ocr_filter, score_candidates and evaluate, run in one process (one partition
    each, CLIP on 2 threads) and on two spawned worker processes of one thread with two sets of
    partition sizes (and evaluate's CLIP models on a worker each): every output file and metric is
    the same bytes. Scoring with two processes allowed but CLIP's 2 threads per worker on 2 cores
    stays in one process (``worker_threads``), with the same bytes."""
    from gavil.pipeline.runner import run_stage
    from stages.evaluate import spread

    monkeypatch.setattr(parallel, "cores", lambda: 2)  # two workers even on a one-core machine
    monkeypatch.setattr(parallel, "available_mb", lambda: 64_000.0)  # ... or a busy one (memory budget)
    monkeypatch.setattr(spread, "MIN_PARTITION", 1)  # the sample's few images earn each model a worker
    variants = {
        "one": ({"crawl": None, "ocr": None, "score": None}, 1, 2),
        "two": ({"crawl": 2, "ocr": 2, "score": 3}, 2, 1),
        "two-other-sizes": ({"crawl": 5, "ocr": 4, "score": 7}, 2, 1),
    }
    hashes, timings = {}, {}
    for label, (sizes, processes, threads) in variants.items():
        d = _variant(sample_build[0], tmp_path / label, sizes, threads)
        monkeypatch.chdir(d)
        for name in PARTITIONED:
            run_stage(name, "params.yaml", processes=processes)
            timings[(label, name)] = json.loads((d / f"data/metrics/timings/{name}.json").read_text())
        hashes[label] = _outputs(d, PARTITIONED)
    for name in PARTITIONED:
        if name == "evaluate":  # the sample has no instance whose every candidate has an image: no CLIP work to
            continue  # spread, so one partition is right (plan's spreading: test_evaluate_spreads_clip_models_with_work)
        assert timings[("two", name)]["processes"] == 2 and timings[("two", name)]["partitions"] >= 2, name
        assert "processes" not in timings[("one", name)], name  # in this process
    assert len(hashes["one"]) >= 20
    monkeypatch.chdir(tmp_path / "one")
    params = yaml.safe_load(Path("params.yaml").read_text())
    params["score"]["partition_size"] = 3  # partitions enough for two workers
    Path("params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    run_stage("score_candidates", "params.yaml", processes=2)  # allowed two, but a worker uses both cores
    timing = json.loads(Path("data/metrics/timings/score_candidates.json").read_text())
    assert timing["processes"] == 1 and timing["partitions"] >= 2, timing
    assert _outputs(tmp_path / "one", ["score_candidates"]).items() <= hashes["one"].items()
    for label in ("two", "two-other-sizes"):
        differ = sorted(k for k in hashes["one"] if hashes["one"][k] != hashes[label].get(k))
        assert not differ and hashes[label].keys() == hashes["one"].keys(), (label, differ)


def test_evaluate_spreads_clip_models_with_work(monkeypatch):
    """evaluate's plan: with workers, each open_clip model with enough to embed is cut into shares of
    its images and prompts (every one in exactly one share of that model; more shares than workers,
    so every core works even with one such model) and the rest share one partition; with one worker,
    or with nothing for a CLIP model to embed, one partition holds every model."""
    import pandas as pd

    from gavil.params import load_params
    from stages.evaluate import spread
    from tests.helpers import ROOT

    params = load_params(ROOT / "params.yaml")
    names = [f"w{i}" for i in range(400)]
    inst = pd.DataFrame(
        {"cue": [f"cue{i}" for i in range(80)], "candidates": [names[i * 5 : i * 5 + 5] for i in range(80)]}
    )
    images = {c: (f"sha-{c}", f"img/{c}.jpg") for c in names}
    clip = [n for n in params.evaluate.models if params.models[n].kind == "open_clip"]
    assert len(clip) >= 2
    shas, prompts = spread.clip_work(inst, images)
    assert len(shas) == 400 and len(prompts) == 80
    for only in (clip, clip[:1]):  # several CLIP models, or one: it is spread too
        with parallel.planning_for(2):
            parts = spread.plan(params, inst, images, [*only, "text-minilm-l6"])
        for n in only:
            mine = [p for p in parts if p["models"] == [n]]
            assert len(mine) > 2, n  # more shares than the 2 workers
            assert sorted(tuple(x) for p in mine for x in p["images"]) == shas
            assert sorted(q for p in mine for q in p["prompts"]) == prompts
        assert parts[-1] == {"models": ["text-minilm-l6"]}
    with parallel.planning_for(2):
        assert spread.plan(params, inst, {}) == [{"models": list(params.evaluate.models)}]  # no CLIP work
    with parallel.planning_for(1):
        assert spread.plan(params, inst, images) == [{"models": list(params.evaluate.models)}]
    with pytest.raises(ValueError, match="one open_clip model"):
        spread.work(params, {"models": clip, "images": [], "prompts": []}, inst, images, [])


def test_evaluate_shares_give_the_vectors_and_rows_one_process_gives(tmp_path, monkeypatch):
    """Scoring from the shares' embeddings (each share embedded by a stub model in its own cache)
    gives the rows that embedding everything in one call gives."""
    import numpy as np
    import pandas as pd

    from gavil.models.embeddings import Cache, score_instances
    from gavil.models.loading import LoadedModel, ModelSpec
    from gavil.params import load_params
    from stages.evaluate import spread
    from tests.helpers import ROOT

    params = load_params(ROOT / "params.yaml")
    words = [f"w{i}" for i in range(300)]
    inst = pd.DataFrame(
        {
            "instance_id": [f"i{i}" for i in range(60)],
            "cue": [f"cue{i}" for i in range(60)],
            "candidates": [words[i * 5 : i * 5 + 5] for i in range(60)],
            "associations": [words[i * 5 : i * 5 + 2] for i in range(60)],
        }
    )
    images = {c: (f"sha-{c}", f"img/{c}.jpg") for c in words}

    def vec(key: str) -> np.ndarray:
        v = np.random.default_rng(abs(hash(key)) % 2**32).normal(size=8).astype("<f4")
        return v / np.linalg.norm(v)

    stub = LoadedModel(
        ModelSpec("clip-rn50", "open_clip", "RN50", None),
        "untrained",
        True,
        lambda paths: np.stack([vec(p) for p in paths]),
        lambda texts: np.stack([vec(t) for t in texts]),
    )
    monkeypatch.setattr(spread, "load_model", lambda spec, opt: stub)
    with parallel.planning_for(2):
        parts = spread.plan(params, inst, images, ["clip-rn50"])
    assert len(parts) > 1
    whole = Cache([], None)
    one = score_instances(inst, stub, images, whole)
    merged = Cache([], None)
    for p in parts:
        merged.add_rows(spread.work(params, p, inst, images, [], ["clip-rn50"])["rows"])
    model, _ = spread.stand_in(
        stub.spec, {"weights_id": "untrained", "untrained": True, "numerics": stub.numerics, "weights_sha256": None}
    )
    assert model is not None
    split = score_instances(inst, model, images, merged)  # the stand-in refuses to embed: all from the shares
    pd.testing.assert_frame_equal(one, split)


@pytest.mark.slow
def test_gavil_stage_uses_the_cores_from_a_new_interpreter(sample_copy):
    """``gavil stage`` (what dvc.yaml runs) says how it ran a partitioned stage: a small input stays
    in its own process; with several partitions it spawns a worker per core (CI: two)."""
    params = yaml.safe_load((sample_copy / "params.yaml").read_text())
    params["ocr"]["partition_size"] = 2
    (sample_copy / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    done = run(["gavil", "stage", "ocr_filter"], sample_copy)
    assert done.returncode == 0, done.stderr[-3000:]
    n = min(parallel.cores(), 5)  # 9 concepts in partitions of 2
    expected = "this process" if n == 1 else f"on {n} worker processes x {parallel.threads_per_process(n)} thread"
    assert f"ocr_filter: 5 partition(s) {'on ' if n == 1 else ''}{expected}" in done.stderr, done.stderr[-2000:]
    params["ocr"]["partition_size"] = None
    (sample_copy / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    done = run(["gavil", "stage", "ocr_filter"], sample_copy)
    assert done.returncode == 0 and "ocr_filter: 1 partition(s) on this process" in done.stderr, done.stderr[-2000:]
    assert load_params(sample_copy / "params.yaml").ocr.partition_size is None

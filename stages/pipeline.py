"""The stage registry: one definition of every stage's params, inputs and outputs.

``dvc.yaml`` is generated from :data:`STAGES` (``gavil dvc-yaml --write``; a test fails when
the committed file drifts), ``gavil stage NAME`` runs a stage for DVC, and the Prefect flow
(:mod:`flows.build`) runs the very same ``run_stage`` calls as tasks in DAG order.
"""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from stages import build_instances as bi
from stages import crawl_images as ci
from stages import evaluate as ev
from stages import export as ex
from stages import filter_profanity as fp
from stages import import_annotations as ia
from stages import ingest_concepts as ic
from stages import ocr_filter as oc
from stages import score_candidates as sc
from stages import select_instances as si
from stages._io import load_params, write_json

_SHARED_CODE = ("stages/_io.py", "schemas/__init__.py")
#: Run timings, one ``<stage>.json`` per stage (``seconds``; ``partitions`` when the flow mapped them).
#: Declared as top-level ``metrics`` in dvc.yaml, so ``dvc metrics show`` lists them beside the
#: stages' own metrics; not stage outputs (they differ on every run, so dvc.lock holds no hash of
#: them) and not in git.
TIMINGS_DIR = "data/metrics/timings"
_MODEL_CODE = ("stages/_models.py", "stages/_embeddings.py", "stages/_torchvision_compat.py", "stages/winogavil.py", "schemas/embeddings.py")


@dataclass(frozen=True)
class StageSpec:
    """A pipeline stage: module ``stages.<name>`` with ``run(params) -> metrics``."""

    name: str
    params: tuple[str, ...]  # the params.yaml sections it reads (its own first)
    inputs: tuple[str, ...]  # data it reads (may use ${section.key} from params.yaml)
    outs: tuple[str, ...]
    metrics: str
    code: tuple[str, ...] = field(default=())  # extra source files besides stages/<name>.py
    persist: tuple[str, ...] = field(default=())  # outputs kept across runs (caches), not DVC-cached
    kept: tuple[str, ...] = field(default=())  # outputs kept across runs (resumable) *and* DVC-cached (push/pull)
    plots: tuple[str | tuple[str, dict[str, str]], ...] = field(default=())  # `dvc plots show`: path or (path, x/y/template)
    network: bool = False  # may fetch over the network (web crawl, model weights): retried by the flow

    @property
    def partitioned(self) -> bool:
        """Whether the stage splits its work: ``plan(params) -> parts``, ``work(params, part)``,
        ``reduce(params, results) -> metrics`` (``run`` = reduce over work over plan)."""
        m = importlib.import_module(f"stages.{self.name}")
        return all(hasattr(m, f) for f in ("plan", "work", "reduce"))

    @property
    def deps(self) -> list[str]:
        return [f"stages/{self.name}.py", *self.code, *_SHARED_CODE, *self.inputs]


STAGES: tuple[StageSpec, ...] = (
    StageSpec("ingest_concepts", ("ingest",), ("${ingest.path}",), (ic.CONCEPTS_PATH, ic.EDGES_PATH), ic.METRICS_PATH, ("schemas/ingest.py",)),
    StageSpec("filter_profanity", ("profanity",), (ic.CONCEPTS_PATH,), (fp.FILTER_PATH,), fp.METRICS_PATH, ("schemas/profanity.py",)),
    StageSpec(
        # the journal (ci.JOURNAL_DIR) is not an output: its segments are named per run; DVC leaves it alone
        "crawl_images", ("crawl",), (fp.FILTER_PATH, "${crawl.local_dir}", "${crawl.urllist_path}"),
        (ci.CANDIDATES_PATH, ci.IMAGES_PATH), ci.METRICS_PATH, ("schemas/crawl.py",),
        kept=(ci.STORE_DIR,), network=True,
    ),  # fmt: skip
    StageSpec(
        "ocr_filter", ("ocr",), (ci.CANDIDATES_PATH, ci.IMAGES_PATH, ci.STORE_DIR), (oc.OCR_PATH,), oc.METRICS_PATH,
        ("schemas/ocr.py", "stages/_torchvision_compat.py"), persist=(oc.CACHE_PATH,),
        plots=((oc.PLOT_FATES, {"x": "concepts", "y": "fate", "template": "bar_horizontal", "title": "Concepts by OCR fate"}),),
    ),  # fmt: skip
    StageSpec(
        "build_instances", ("instances",), (oc.OCR_PATH, fp.FILTER_PATH, ic.EDGES_PATH),
        (bi.CANDIDATE_SETS_PATH, bi.SWOW_INSTANCES_PATH), bi.METRICS_PATH, ("schemas/instances.py", "stages/winogavil.py"),
    ),  # fmt: skip
    StageSpec(
        "score_candidates", ("score",), (bi.SWOW_INSTANCES_PATH, oc.OCR_PATH, ci.STORE_DIR), (sc.SCORES_PATH,), sc.METRICS_PATH,
        _MODEL_CODE + ("schemas/scores.py",), persist=(sc.CACHE_PATH,), network=True,
    ),  # fmt: skip
    StageSpec(
        "import_annotations", ("annotations", "profanity"), ("${annotations.release_dir}", "${annotations.raw_dir}"),
        (ia.INSTANCES_PATH, ia.SOLVES_PATH, ia.REJECTS_PATH), ia.METRICS_PATH,
        ("schemas/annotations.py", "schemas/raw.py", "stages/winogavil.py", "stages/_privacy.py", "stages/filter_profanity.py"),
    ),  # fmt: skip
    StageSpec(
        "select_instances", ("select",), (ia.INSTANCES_PATH, ia.SOLVES_PATH),
        (si.SELECTION_PATH, si.TABLE1_PATH, si.TABLE1_MD_PATH, si.ANNOTATOR_STATS_PATH),
        si.METRICS_PATH, ("schemas/selection.py", "stages/winogavil.py"),
        plots=(
            (si.PLOT_SOLVER_JACCARD, {"x": "instances", "y": "solvers_jaccard_mean", "template": "bar_horizontal", "title": "Instances by solver mean Jaccard"}),
            (si.PLOT_FOOL_THE_AI, {"x": "instances", "y": "score_fool_the_ai", "template": "bar_horizontal", "title": "Instances by fool-the-AI score"}),
        ),
    ),  # fmt: skip
    StageSpec(
        "export", ("export", "select", "score"), (si.SELECTION_PATH, oc.OCR_PATH, ci.STORE_DIR),
        (ex.BENCHMARK_CSV, ex.BENCHMARK_PARQUET, *ex.SPLIT_FILES.values(), ex.DATASET_DIR), ex.METRICS_PATH, ("schemas/export.py",),
    ),  # fmt: skip
    StageSpec(
        "evaluate", ("evaluate", "score"), (si.SELECTION_PATH, oc.OCR_PATH, ci.STORE_DIR, sc.CACHE_PATH, "${evaluate.release_predictions_dir}"),
        (ev.PREDICTIONS_PATH, ev.EVALUATION_PATH, ev.TABLE4_PATH), ev.METRICS_PATH, _MODEL_CODE + ("schemas/evaluate.py",),
        persist=(ev.CACHE_PATH,), plots=(ev.PLOT_MODELS_PATH, ev.PLOT_CANDIDATES_PATH), network=True,
    ),  # fmt: skip
)
BY_NAME = {s.name: s for s in STAGES}


def upstream(spec: StageSpec) -> list[str]:
    """Names of the stages whose outputs ``spec`` reads (the DAG edges)."""
    return [s.name for s in STAGES if set(s.outs + s.persist + s.kept) & set(spec.inputs)]


def _module(name: str) -> Any:
    """The module ``stages.<name>`` of a registered stage.

    Raises:
        KeyError: unknown stage name (lists the known ones).
    """
    if name not in BY_NAME:
        raise KeyError(f"unknown stage {name!r}; stages: {', '.join(BY_NAME)}")
    return importlib.import_module(f"stages.{name}")


def _timed(call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``call()``'s metrics with ``seconds`` (wall clock) added."""
    t0 = time.perf_counter()
    metrics = dict(call())
    metrics["seconds"] = round(time.perf_counter() - t0, 3)
    return metrics


def write_timing(name: str, seconds: float, **extra: Any) -> None:
    """Write ``data/metrics/timings/<name>.json``: ``{"seconds": wall-clock seconds, **extra}``."""
    write_json(Path(TIMINGS_DIR) / f"{name}.json", {"seconds": round(seconds, 3), **extra})


def run_stage(name: str, params_path: str | os.PathLike = "params.yaml") -> dict[str, Any]:
    """Run one stage in the current directory (the project root) and return its metrics, with
    ``seconds`` (wall clock), also written to ``data/metrics/timings/<name>.json``.

    Raises:
        KeyError: unknown stage name (lists the known ones).
    """
    module = _module(name)
    metrics = _timed(lambda: module.run(load_params(params_path)))
    write_timing(name, metrics["seconds"])
    return metrics


def plan_stage(name: str, params_path: str | os.PathLike = "params.yaml") -> list[Any]:
    """A partitioned stage's partitions (run in the project root)."""
    return _module(name).plan(load_params(params_path))


def work_stage(name: str, part: Any, params_path: str | os.PathLike = "params.yaml") -> Any:
    """One partition of a partitioned stage; returns what its ``reduce`` needs."""
    return _module(name).work(load_params(params_path), part)


def reduce_stage(name: str, results: list[Any], params_path: str | os.PathLike = "params.yaml", started_at: float | None = None) -> dict[str, Any]:
    """Finish a partitioned stage from its partitions' results; returns its metrics.

    Args:
        started_at: when the stage was planned (``time.time()``, epoch seconds): ``seconds`` is
            then the whole stage (plan, the partitions, reduce) on the wall clock, and
            ``reduce_seconds`` the reduce alone. Without it ``seconds`` is the reduce alone.
            ``seconds`` and ``partitions`` are also written to ``data/metrics/timings/<name>.json``.
    """
    module = _module(name)
    metrics = _timed(lambda: module.reduce(load_params(params_path), results))
    if started_at is not None:
        metrics["reduce_seconds"] = metrics["seconds"]
        metrics["seconds"] = round(time.time() - started_at, 3)
    write_timing(name, metrics["seconds"], partitions=len(results))
    return metrics


def dvc_yaml() -> str:
    """The dvc.yaml text for :data:`STAGES`."""
    stages: dict[str, Any] = {}
    for s in STAGES:
        entry: dict[str, Any] = {
            "cmd": f"gavil stage {s.name}",
            "deps": s.deps,
            "params": list(s.params),
            "outs": [*s.outs, *({p: {"persist": True}} for p in s.kept), *({p: {"persist": True, "cache": False}} for p in s.persist)],
            "metrics": [{s.metrics: {"cache": False}}],
        }
        if s.plots:
            entry["plots"] = [{p: {"cache": False}} if isinstance(p, str) else {p[0]: {"cache": False, **p[1]}} for p in s.plots]
        stages[s.name] = entry
    header = "# Generated by `gavil dvc-yaml --write` from stages/pipeline.py; do not edit by hand.\n"
    return header + yaml.safe_dump({"stages": stages, "metrics": [TIMINGS_DIR]}, sort_keys=False, width=120)


def write_dvc_yaml(path: str | os.PathLike = "dvc.yaml") -> Path:
    path = Path(path)
    path.write_text(dvc_yaml())
    return path

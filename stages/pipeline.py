"""The stage registry: every stage's reads, writes and params, by catalog name.

``dvc.yaml`` is generated from :data:`STAGES` (``gavil dvc-yaml --write``; a test fails when the
committed file drifts) without importing any stage module: paths come from the catalog
(:mod:`stages.catalog`), code dependencies from each stage's import closure
(:mod:`stages.codedeps`), params from the typed sections (:mod:`stages.config`, runtime knobs
left out). ``gavil stage NAME`` runs a stage for DVC, and the Prefect flow (:mod:`flows.build`)
runs the very same ``run_stage`` / ``plan_stage`` / ``work_stage`` / ``reduce_stage`` calls as
tasks in DAG order. While a stage runs, the catalog refuses reads and writes its spec does not
declare, so the DAG written here is the DAG the code follows.
"""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from stages import catalog
from stages._io import write_json
from stages._metrics import METRICS_SUMMARY, details_path, metrics_summary  # noqa: F401 (re-exported)
from stages.codedeps import code_deps
from stages.config import SECTIONS, Params, load_params
from stages.errors import GavilError


@dataclass(frozen=True)
class StageSpec:
    """A pipeline stage: module ``stages.<name>`` with ``run(params) -> metrics``; a partitioned one
    also has ``plan(params) -> parts``, ``work(params, part)`` and ``reduce(params, results) -> metrics``."""

    name: str
    reads: tuple[str, ...] = ()  # catalog names it reads (another stage's outputs)
    writes: tuple[str, ...] = ()  # catalog names it writes (it may also read them: caches)
    params: tuple[str, ...] = ()  # params.yaml sections, or section.key, it depends on
    external: tuple[str, ...] = ()  # input paths outside the catalog (may use ${section.key})
    partitioned: bool = False
    network: bool = field(default=False)  # may fetch over the network: retried by the flow

    @property
    def metrics(self) -> str:
        """Its metrics file, ``data/metrics/<name>.json``."""
        return catalog.metrics_path(self.name)

    @property
    def param_keys(self) -> list[str]:
        """The params it depends on, key by key, runtime knobs left out (``dvc.yaml`` params)."""
        keys: list[str] = []
        for p in self.params:
            sec, _, key = p.partition(".")
            if sec not in SECTIONS:
                raise GavilError(f"stage {self.name}: params names unknown section {sec!r}")
            keys += [p] if key else [f"{sec}.{k}" for k in SECTIONS[sec].output_keys()]
        return keys


STAGES: tuple[StageSpec, ...] = (
    StageSpec(
        "ingest_concepts",
        writes=("concepts", "edges", "name_rejects"),
        params=("ingest",),
        external=("${ingest.path}",),
    ),
    StageSpec("filter_profanity", reads=("concepts",), writes=("concept_filter",), params=("profanity",)),
    StageSpec(
        # the journal is not a DVC output (its segments are named per run); DVC leaves it alone
        "crawl_images",
        reads=("concept_filter",),
        writes=("candidates", "images", "image_store", "crawl_journal"),
        params=("crawl",),
        external=("${crawl.local_dir}", "${crawl.urllist_path}"),
        partitioned=True,
        network=True,
    ),
    StageSpec(
        "ocr_filter",
        reads=("candidates", "images", "image_store"),
        writes=("ocr", "ocr_detections", "plot_ocr_fates"),
        params=("ocr",),
        partitioned=True,
    ),
    StageSpec(
        "build_instances",
        reads=("ocr", "concept_filter", "edges"),
        writes=("candidate_sets", "swow_instances", "concreteness"),
        params=("instances",),
    ),
    StageSpec(
        "score_candidates",
        reads=("swow_instances", "ocr", "image_store"),
        writes=("scores", "embeddings"),
        params=("score",),
        partitioned=True,
        network=True,
    ),
    StageSpec(
        "adversarial_filter",
        reads=("swow_instances", "embeddings", "edges", "ocr", "image_store"),
        writes=("af_instances", "af_replacements", "af_iterations", "af_embeddings", "plot_af"),
        params=(
            "adversarial_filter",
            "score.model",
            "score.pretrained",
            "score.weights_path",
            "score.cache_dir",
            "score.allow_download",
            "score.precision",  # the rival member's embeddings are computed at these numerics
            "score.device",
        ),
    ),
    StageSpec(
        "import_annotations",
        writes=("instances", "solves", "annotation_rejects", "annotator_key_fingerprint"),
        params=("annotations", "profanity", "game.store_dir"),
        # the game's store folder: new game data re-runs the import (README "Collecting annotations")
        external=("${annotations.release_dir}", "${annotations.raw_dir}", "${game.store_dir}"),
    ),
    StageSpec(
        "select_instances",
        reads=("instances", "solves"),
        writes=(
            "selection",
            "id_ledger",
            "table1",
            "table1_md",
            "annotator_stats",
            "plot_solver_jaccard",
            "plot_fool_the_ai",
        ),
        params=("select",),
    ),
    StageSpec(
        "aflite",
        reads=("selection", "ocr", "image_store"),
        writes=("aflite", "aflite_phases", "aflite_embeddings", "aflite_debiased", "plot_aflite"),
        # its model loads with score's runtime options: their numerics change the embeddings
        params=("aflite", "score.cache_dir", "score.allow_download", "score.precision", "score.device"),
    ),
    StageSpec(
        "export",
        reads=("selection", "ocr", "image_store"),
        writes=(
            "benchmark",
            "benchmark_csv",
            "split_game_5_6",
            "split_game_10_12",
            "split_swow",
            "dataset_dir",
            "benchmark_dataset",
        ),
        params=("export", "select.min_solver_jaccard", "score.model", "score.pretrained"),  # the dataset card
    ),
    StageSpec(
        "evaluate",
        reads=("selection", "ocr", "image_store", "embeddings"),
        writes=(
            "predictions",
            "evaluation",
            "paired_evaluation",
            "table4_md",
            "eval_embeddings",
            "plot_models",
            "plot_candidates",
            "paper_md",
            "cue_image_pairs",
        ),
        params=("evaluate", "paper", "score.cache_dir", "score.allow_download"),
        external=(
            "${evaluate.release_predictions_dir}",
            "${paper.release_dir}/${paper.captions_file}",
            "${paper.release_dir}/${paper.association_types_file}",
        ),
        network=True,
    ),
)
BY_NAME = {s.name: s for s in STAGES}


class UnknownStage(GavilError, KeyError):
    """A stage name that is not in :data:`STAGES`."""

    def __str__(self) -> str:
        return str(self.args[0])


def spec(name: str) -> StageSpec:
    """The spec of stage ``name``.

    Raises:
        UnknownStage: listing the stages.
    """
    if name not in BY_NAME:
        raise UnknownStage(f"unknown stage {name!r}; stages: {', '.join(BY_NAME)}")
    return BY_NAME[name]


def upstream(s: StageSpec) -> list[str]:
    """Names of the stages whose outputs ``s`` reads (the DAG edges)."""
    return [o.name for o in STAGES if o is not s and set(o.writes) & set(s.reads)]


# ------------------------------------------------------------------------------------------- running
def _module(name: str) -> Any:
    spec(name)
    return importlib.import_module(f"stages.{name}")


@contextmanager
def _running(name: str) -> Iterator[None]:
    s = spec(name)
    producers = {w: o.name for o in STAGES for w in o.writes}
    with catalog.stage_access(name, s.reads, s.writes, producers):
        yield


def _timed(call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``call()``'s metrics with ``seconds`` (wall clock) added."""
    t0 = time.perf_counter()
    metrics = dict(call())
    metrics["seconds"] = round(time.perf_counter() - t0, 3)
    return metrics


def write_timing(name: str, seconds: float, **extra: Any) -> None:
    """Write ``data/metrics/timings/<name>.json``: ``{"seconds": wall-clock seconds, **extra}``.

    Declared as top-level ``metrics`` in dvc.yaml, so ``dvc metrics show`` lists them beside the
    stages' own metrics; not stage outputs (they differ on every run) and not in git."""
    write_json(Path(catalog.TIMINGS_DIR) / f"{name}.json", {"seconds": round(seconds, 3), **extra})


def _finish(name: str, metrics: dict[str, Any]) -> dict[str, Any]:
    write_json(details_path(name), metrics)
    write_json(catalog.metrics_path(name), metrics_summary(name, metrics))
    return metrics


def _params(params: str | os.PathLike | Params) -> Params:
    return params if isinstance(params, Params) else load_params(params)


def run_stage(name: str, params: str | os.PathLike | Params = "params.yaml") -> dict[str, Any]:
    """Run one stage in the current directory (the project root); returns its metrics (written
    to ``data/metrics/details/<name>.json``, their summary to ``data/metrics/<name>.json``) with
    ``seconds`` (wall clock, also written to ``data/metrics/timings/<name>.json``).

    Raises:
        UnknownStage, stages.errors.ParamsError, stages.catalog.MissingInput: see their docs.
    """
    module, p = _module(name), _params(params)
    with _running(name):
        metrics = _timed(lambda: _finish(name, module.run(p)))
    write_timing(name, metrics["seconds"])
    return metrics


def plan_stage(name: str, params: str | os.PathLike | Params = "params.yaml") -> list[Any]:
    """A partitioned stage's partitions (run in the project root)."""
    module, p = _module(name), _params(params)
    with _running(name):
        return module.plan(p)


def work_stage(name: str, part: Any, params: str | os.PathLike | Params = "params.yaml") -> Any:
    """One partition of a partitioned stage; returns what its ``reduce`` needs."""
    module, p = _module(name), _params(params)
    with _running(name):
        return module.work(p, part)


def reduce_stage(
    name: str, results: list[Any], params: str | os.PathLike | Params = "params.yaml", started_at: float | None = None
) -> dict[str, Any]:
    """Finish a partitioned stage from its partitions' results; returns its metrics.

    Args:
        started_at: when the stage was planned (``time.time()``, epoch seconds): ``seconds`` is
            then the whole stage (plan, the partitions, reduce) on the wall clock, and
            ``reduce_seconds`` the reduce alone. Without it ``seconds`` is the reduce alone.
            ``seconds`` and ``partitions`` are also written to ``data/metrics/timings/<name>.json``.
    """
    module, p = _module(name), _params(params)
    with _running(name):
        metrics = _timed(lambda: _finish(name, module.reduce(p, results)))
    if started_at is not None:
        metrics["reduce_seconds"] = metrics["seconds"]
        metrics["seconds"] = round(time.time() - started_at, 3)
    write_timing(name, metrics["seconds"], partitions=len(results))
    return metrics


# ------------------------------------------------------------------------------------------- dvc.yaml
def _inside(path: str, others: list[str]) -> bool:
    return any(path != o and Path(path).is_relative_to(o) for o in others)


def dvc_stage(s: StageSpec) -> dict[str, Any]:
    """The ``dvc.yaml`` entry of one stage (no stage code imported)."""
    writes = [catalog.entry(w) for w in s.writes]
    out_paths = [e.path for e in writes if getattr(e, "kind", "table") not in ("plot", "journal")]
    outs: list[Any] = []
    plots: list[Any] = []
    for e in writes:
        kind = getattr(e, "kind", "table")
        if kind == "journal" or _inside(e.path, out_paths):
            continue  # not a DVC output / covered by a folder output (DVC refuses overlaps)
        if kind == "plot":
            opts = {**({} if e.cache else {"cache": False}), **getattr(e, "plot", {})}
            plots.append({e.path: opts} if opts else e.path)
        elif e.persist:
            outs.append({e.path: {"persist": True, **({} if e.cache else {"cache": False})}})
        else:
            outs.append(e.path)
    outs.append({details_path(s.name): {"cache": False}})  # the full metrics, in git
    inputs = [catalog.entry(r).path for r in s.reads if r not in s.writes]
    entry: dict[str, Any] = {
        "cmd": f"gavil stage {s.name}",
        "deps": [*code_deps(s), *inputs, *s.external],
        "params": s.param_keys,
        "outs": outs,
        "metrics": [{s.metrics: {"cache": False}}],
    }
    if plots:
        entry["plots"] = plots
    return entry


def dvc_yaml() -> str:
    """The dvc.yaml text for :data:`STAGES`."""
    stages = {s.name: dvc_stage(s) for s in STAGES}
    header = "# Generated by `gavil dvc-yaml --write` from stages/pipeline.py; do not edit by hand.\n"
    return header + yaml.safe_dump({"stages": stages, "metrics": [catalog.TIMINGS_DIR]}, sort_keys=False, width=120)


def write_dvc_yaml(path: str | os.PathLike = "dvc.yaml") -> Path:
    """Write :func:`dvc_yaml` to ``path``."""
    path = Path(path)
    path.write_text(dvc_yaml())
    return path

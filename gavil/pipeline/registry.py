"""The stage registry: every stage's reads, writes and params, by catalog name.

``dvc.yaml`` is generated from :data:`STAGES` (``gavil dvc-yaml --write``; a test fails when the
committed file drifts) without importing any stage module: paths come from the catalog
(:mod:`gavil.pipeline.catalog`), code dependencies from each stage's import closure
(:mod:`gavil.pipeline.codedeps`), params from the typed sections (:mod:`gavil.params`, runtime knobs
left out) and, for the ``models`` entries a section names, from ``params.yaml`` (so ``gavil stage``
refuses to run when the committed ``dvc.yaml`` lists other entries than the params name now). ``gavil stage NAME`` runs a stage for DVC, and the Prefect flow (:mod:`flows.build`)
runs the very same ``run_stage`` / ``plan_stage`` / ``work_stage`` / ``reduce_stage`` calls as
tasks in DAG order. While a stage runs, the catalog refuses reads and writes its spec does not
declare, so the DAG written here is the DAG the code follows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gavil.errors import GavilError
from gavil.params import SECTIONS
from gavil.pipeline import catalog

if TYPE_CHECKING:
    from gavil.params import Params

#: ``models[<section>.<field>].<key>``: one key of the ``models`` entry that ``<section>.<field>`` names
#: (a nested block's field: ``<section>.<block>.<field>``); without ``.<key>``: all its output keys.
MODEL_KEY = re.compile(r"models\[(\w+)\.([\w.]+)\](?:\.(\w+))?")


@dataclass(frozen=True)
class StageSpec:
    """A pipeline stage: module ``stages.<name>`` with ``run(params) -> metrics``; a partitioned one
    also has ``plan(params) -> parts``, ``work(params, part)`` and ``reduce(params, results) -> metrics``."""

    name: str
    reads: tuple[str, ...] = ()  # catalog names it reads (another stage's outputs)
    writes: tuple[str, ...] = ()  # catalog names it writes (it may also read them: caches)
    # params.yaml sections, section.key, or models[section.field].key it depends on; a whole section
    # brings the models entries its MODEL_REFS fields name (all their written output keys)
    params: tuple[str, ...] = ()
    external: tuple[str, ...] = ()  # input paths outside the catalog (may use ${section.key})
    partitioned: bool = False
    network: bool = field(default=False)  # may fetch over the network: retried by the flow

    @property
    def metrics(self) -> str:
        """Its metrics file, ``data/metrics/<name>.json``."""
        return catalog.metrics_path(self.name)

    @property
    def sections(self) -> list[str]:
        """The params sections it reads (``models`` where it names a model), in order."""
        out: list[str] = []
        for p in self.params:
            sec = self._section(p)
            names_models = MODEL_KEY.fullmatch(p) or (p == sec and getattr(SECTIONS[sec], "MODEL_REFS", None))
            out += [sec, "models"] if names_models else [sec]
        return list(dict.fromkeys(out))

    def _section(self, p: str) -> str:
        ref = MODEL_KEY.fullmatch(p)
        sec = ref.group(1) if ref else p.partition(".")[0]
        if sec not in SECTIONS:
            raise GavilError(f"stage {self.name}: params names unknown section {sec!r}")
        return sec

    def param_keys(self, params: Params) -> list[str]:
        """The params it depends on, key by key, runtime knobs left out (``dvc.yaml`` params); the
        ``models`` entries its sections name are resolved in ``params`` (``params.yaml``)."""
        keys: list[str] = []
        for p in self.params:
            ref, sec, key = MODEL_KEY.fullmatch(p), self._section(p), p.partition(".")[2]
            if ref:
                for name in getattr(params, ref.group(1)).model_names(ref.group(2)):
                    keys += [f"models.{name}.{ref.group(3)}"] if ref.group(3) else params.models.output_keys(name)
            elif key:
                keys.append(p)
            else:
                section = getattr(params, sec)
                keys += [f"{sec}.{k}" for k in type(section).output_keys()]
                keys += [k for name in section.model_names() for k in params.models.output_keys(name)]
        return list(dict.fromkeys(keys))


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
        params=("ocr", "review.required", "review.decisions_path"),  # review.safety: safety_score's
        external=("${review.decisions_path}",),  # the reviewers' decisions (docs/review.md)
        partitioned=True,
    ),
    StageSpec(
        # the review page's optional sort order; no stage reads it (docs/review.md "The safety score")
        "safety_score",
        reads=("ocr", "image_store", "embeddings"),  # embeddings: the rival's vectors, reused (read only)
        writes=("safety", "safety_embeddings"),
        params=("review.safety", "models[review.safety.model]"),
        network=True,
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
        reads=("swow_instances", "edges", "ocr", "image_store", *catalog.EMBEDDING_CACHES),
        writes=("af_instances", "af_replacements", "af_iterations", "af_embeddings", "plot_af"),
        params=("adversarial_filter",),  # with its text_model and rival_model entries
    ),
    StageSpec(
        "import_annotations",
        writes=("instances", "solves", "annotation_rejects", "flags", "gold_checks", "annotator_key_fingerprint"),
        params=(
            "annotations",
            "profanity",
            "game.store_dir",
            "game.gold.enabled",
            "game.gold.items",
            "game.gold.min_jaccard",
            "game.gold.strikes",
            "game.flags.min_reporters",
        ),
        # the game's store folder: new game data re-runs the import (docs/game.md)
        external=("${annotations.release_dir}", "${annotations.raw_dir}", "${game.store_dir}"),
    ),
    StageSpec(
        "select_instances",
        reads=("instances", "solves", "flags", "gold_checks", "ocr"),
        writes=(
            "selection",
            "id_ledger",
            "published_ids",
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
        reads=("selection", "instances", "ocr", "image_store", *catalog.EMBEDDING_CACHES),
        writes=("aflite", "aflite_phases", "aflite_embeddings", "aflite_debiased", "plot_aflite"),
        params=("aflite",),  # with its model's entry (its numerics change the embeddings)
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
        # the dataset card names the threshold and the rival
        params=(
            "export",
            "select.min_solver_jaccard",
            "review.required",
            "score.model",
            "models[score.model].model",
            "models[score.model].pretrained",
        ),
    ),
    StageSpec(
        "evaluate",
        reads=("selection", "instances", "ocr", "image_store", *catalog.EMBEDDING_CACHES),
        writes=(
            "predictions",
            "evaluation",
            "rival_rounds",
            "round_errors",
            "paired_evaluation",
            "table4_md",
            "eval_embeddings",
            "plot_models",
            "plot_candidates",
            "paper_md",
            "cue_image_pairs",
        ),
        # with the entries of evaluate.models and paper.text_models; export.patch: the dataset version its rows name
        params=("evaluate", "paper", "export.patch"),
        partitioned=True,  # by model (stages/evaluate/spread.py)
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
    """Names of the stages whose outputs ``s`` reads (the DAG edges; a local cache is no edge)."""
    reads = {r for r in s.reads if not catalog.is_local(r)}
    return [o.name for o in STAGES if o is not s and set(o.writes) & reads]


def downstream(names: Iterable[str]) -> list[str]:
    """The stages ``names`` and every stage downstream of them (every stage that reads, directly or
    through other stages, what one of them writes), in registry order, which is a DAG order.

    This is what a run that starts from ``names`` must run so that DVC has nothing left stale
    (a Prefect deployment's stages, ``params.yaml: prefect.deployments.<name>.from_stages``).

    Raises:
        UnknownStage: a name that is not a stage (listing the stages).
    """
    start = {spec(n).name for n in names}
    closed: list[str] = []
    for s in STAGES:  # upstream stages come first in STAGES, so one pass closes the set
        if s.name in start or set(upstream(s)) & set(closed):
            closed.append(s.name)
    return closed

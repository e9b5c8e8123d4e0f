"""The catalog's entries: every table and file the pipeline writes, declared once (name, path,
pandera model or kind, and how DVC treats it: ``persist``, ``cache``, ``local``). Read through
:mod:`gavil.pipeline.catalog`, which checks access and schemas; see its docstring for what each
flag means.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Literal

ArtifactKind = Literal["store", "cache", "file", "dir", "plot", "journal"]


@dataclass(frozen=True)
class Table:
    """A Parquet table: ``path`` (relative to the project root) validated by ``model``."""

    name: str
    path: str
    model: str  # "schemas.<module>:<Class>"
    doc: str
    persist: bool = False  # kept across `dvc repro` (a cache that grows)
    cache: bool = True  # in DVC's cache (pushed/pulled)
    local: bool = False  # no DVC output: this machine's own cache (never hashed in dvc.lock)

    def schema(self) -> Any:
        """The pandera ``DataFrameModel`` class (imported now)."""
        module, cls = self.model.split(":")
        return getattr(importlib.import_module(module), cls)

    @property
    def schema_file(self) -> str:
        """The source file of the model, e.g. ``schemas/ocr.py`` (a code dependency of its stages)."""
        return self.model.split(":")[0].replace(".", "/") + ".py"


@dataclass(frozen=True)
class Artifact:
    """A file or folder that is not a schema-checked table."""

    name: str
    path: str
    kind: ArtifactKind
    doc: str
    persist: bool = False
    cache: bool = True
    plot: dict[str, str] = field(default_factory=dict)  # `dvc plots` options for kind "plot"
    local: bool = False  # no DVC output (a journal, a cache of this machine's model numerics)


TABLES: tuple[Table, ...] = (
    Table("concepts", "data/ingest/concepts.parquet", "schemas.ingest:Concepts", "one row per SWOW concept"),
    Table("edges", "data/ingest/edges.parquet", "schemas.ingest:Edges", "SWOW cue -> response edges, ranked"),
    Table(
        "name_rejects",
        "data/ingest/name_rejects.parquet",
        "schemas.ingest:NameRejects",
        "SWOW edges and candidates refused by the name policy, with the reason",
    ),
    Table(
        "concept_filter",
        "data/profanity/concept_filter.parquet",
        "schemas.profanity:ConceptFilter",
        "profanity fate per concept",
    ),
    Table(
        "candidates",
        "data/crawl/candidates.parquet",
        "schemas.crawl:Candidates",
        "every crawled candidate image's fate",
    ),
    Table("images", "data/crawl/images.parquet", "schemas.crawl:Images", "crawl fate per concept"),
    Table("ocr", "data/ocr/ocr.parquet", "schemas.ocr:Ocr", "OCR decision per concept (accepted image)"),
    Table(
        "ocr_detections",
        "data/cache/ocr_detections.parquet",
        "schemas.ocr:OcrCache",
        "EasyOCR detections by image and canvas (local cache: not a DVC output)",
        persist=True,
        local=True,
    ),
    Table(
        "safety",
        "data/safety/safety.parquet",
        "schemas.safety:Safety",
        "zero-shot safety score of each image in the review queue (orders the page; decides nothing)",
    ),
    Table(
        "safety_embeddings",
        "data/cache/safety_embeddings.parquet",
        "schemas.embeddings:EmbeddingCache",
        "safety model's image and prompt embeddings (local cache: not a DVC output)",
        persist=True,
        local=True,
    ),
    Table(
        "candidate_sets",
        "data/instances/candidate_sets.parquet",
        "schemas.instances:CandidateSets",
        "random game candidate sets",
    ),
    Table(
        "swow_instances",
        "data/instances/swow_instances.parquet",
        "schemas.instances:SwowInstances",
        "SWOW-baseline instances",
    ),
    Table(
        "concreteness",
        "data/instances/concreteness.parquet",
        "schemas.instances:Concreteness",
        "Brysbaert concreteness fate of each SWOW-baseline word",
    ),
    Table(
        "scores",
        "data/score/scores.parquet",
        "schemas.scores:Scores",
        "rival model's predictions and fool-the-AI scores",
    ),
    Table(
        "embeddings",
        "data/cache/embeddings.parquet",
        "schemas.embeddings:EmbeddingCache",
        "rival model's image and prompt embeddings (local cache: not a DVC output)",
        persist=True,
        local=True,
    ),
    Table(
        "instances",
        "data/annotations/instances.parquet",
        "schemas.annotations:Instances",
        "imported instances (released, raw, crowd)",
    ),
    Table("solves", "data/annotations/solves.parquet", "schemas.annotations:Solves", "one row per solver's answer"),
    Table(
        "annotation_rejects",
        "data/annotations/annotation_rejects.parquet",
        "schemas.annotations:AnnotationRejects",
        "rejected annotation rows with file, line and reason",
    ),
    Table(
        "flags",
        "data/annotations/flags.parquet",
        "schemas.annotations:Flags",
        "players' flags on game instances, each with the admin's review (keep, retire) or open",
    ),
    Table(
        "gold_checks",
        "data/annotations/gold_checks.parquet",
        "schemas.annotations:GoldChecks",
        "one row per game solver the gold check judged: gold answers, mean Jaccard, status",
    ),
    Table(
        "selection", "data/selection/selection.parquet", "schemas.selection:Selection", "selection fate per instance"
    ),
    Table(
        "id_ledger",
        "data/ledger/benchmark_ids.parquet",
        "schemas.selection:IdLedger",
        "permanent benchmark and split IDs (appended, never rewritten; in git)",
        persist=True,
        cache=False,
    ),
    Table("table1", "data/selection/table1.parquet", "schemas.selection:Table1", "the paper's Table 1 for this build"),
    Table(
        "annotator_stats",
        "data/selection/annotator_stats.parquet",
        "schemas.selection:AnnotatorStats",
        "per hashed annotator statistics",
    ),
    Table(
        "benchmark",
        "data/export/benchmark.parquet",
        "schemas.export:Benchmark",
        "the selected instances, permanent IDs (ledger)",
    ),
    Table(
        "benchmark_dataset",
        "data/export/dataset/test.parquet",
        "schemas.export:BenchmarkDataset",
        "the Hugging Face folder's test split (instances with every image; images embedded)",
    ),
    Table(
        "predictions",
        "data/evaluate/predictions.parquet",
        "schemas.evaluate:EvalPredictions",
        "zero-shot predictions per model and instance",
    ),
    Table(
        "evaluation",
        "data/evaluate/evaluation.parquet",
        "schemas.evaluate:Evaluation",
        "mean Jaccard with CIs per model and cell",
    ),
    Table(
        "rival_rounds",
        "data/evaluate/rival_rounds.parquet",
        "schemas.evaluate:RivalRounds",
        "each game round's rival on round 0, its own round and every later round",
    ),
    Table(
        "round_errors",
        "data/evaluate/round_errors.parquet",
        "schemas.evaluate:RoundErrors",
        "each round's model error rate (validated instances that fooled its rival, and every earlier rival), with CIs",
    ),
    Table(
        "paired_evaluation",
        "data/evaluate/paired_evaluation.parquet",
        "schemas.evaluate:PairedEvaluation",
        "Winoground text/image/group scores on instance pairs sharing a candidate set",
    ),
    Table(
        "aflite",
        "data/aflite/aflite.parquet",
        "schemas.adversarial:AfliteInstances",
        "AfLite score and fate per instance",
    ),
    Table("aflite_phases", "data/aflite/phases.parquet", "schemas.adversarial:AflitePhases", "AfLite counts per phase"),
    Table(
        "aflite_embeddings",
        "data/cache/aflite_embeddings.parquet",
        "schemas.embeddings:EmbeddingCache",
        "AfLite model's embeddings (local cache: not a DVC output)",
        persist=True,
        local=True,
    ),
    Table(
        "af_instances",
        "data/adversarial/swow_af.parquet",
        "schemas.adversarial:AfInstances",
        "the swow_af variant: SWOW-baseline instances with AF-chosen distractors (for human validation)",
    ),
    Table(
        "af_replacements",
        "data/adversarial/replacements.parquet",
        "schemas.adversarial:AfReplacements",
        "one row per AF distractor replacement",
    ),
    Table(
        "af_iterations",
        "data/adversarial/iterations.parquet",
        "schemas.adversarial:AfIterations",
        "one row per AF iteration",
    ),
    Table(
        "af_embeddings",
        "data/cache/af_embeddings.parquet",
        "schemas.embeddings:EmbeddingCache",
        "AF members' embeddings (local cache: not a DVC output)",
        persist=True,
        local=True,
    ),
    Table(
        "eval_embeddings",
        "data/cache/eval_embeddings.parquet",
        "schemas.embeddings:EmbeddingCache",
        "evaluated models' embeddings (local cache: not a DVC output)",
        persist=True,
        local=True,
    ),
)

#: The embedding caches every stage that embeds reads: one per such stage (each writes its own), and
#: the sample's shipped text-model vectors (``sample_embeddings``, in git, written by no stage).
EMBEDDING_CACHES = ("embeddings", "af_embeddings", "aflite_embeddings", "eval_embeddings", "sample_embeddings")

_PLOT_BAR = {"template": "bar_horizontal"}
ARTIFACTS: tuple[Artifact, ...] = (
    Artifact("image_store", "data/images", "store", "content-addressed images <sha[:2]>/<sha>.<ext>", persist=True),
    Artifact(
        "annotator_key_fingerprint",
        "data/ledger/annotator_key.json",
        "file",
        "fingerprint of the key annotator ids were hashed with (in git; never the key)",
        persist=True,
        cache=False,
    ),
    Artifact(
        "sample_embeddings",
        "data/sample/embeddings.parquet",
        "cache",
        "the embedded sample's text-model embeddings, shipped in git and only read (`gavil sample-embeddings` makes it)",
        local=True,
    ),
    Artifact(
        "crawl_journal", "data/cache/crawl_journal", "journal", "resumable crawl journal (not a DVC output)", local=True
    ),
    Artifact("table1_md", "data/selection/table1.md", "file", "Table 1 as Markdown"),
    Artifact("benchmark_csv", "data/export/benchmark.csv", "file", "the benchmark in the release's CSV layout"),
    Artifact(
        "published_ids",
        "data/ledger/published_ids.csv",
        "file",
        "every ID selection published (dataset, ID, fingerprint; retired ones too): the ID ledger is checked against it",
        persist=True,
        cache=False,
    ),
    Artifact("split_game_5_6", "data/export/game_5_6.csv", "file", "release split file game_5_6.csv"),
    Artifact("split_game_10_12", "data/export/game_10_12.csv", "file", "release split file game_10_12.csv"),
    Artifact("split_swow", "data/export/swow.csv", "file", "release split file swow.csv"),
    Artifact(
        "dataset_dir",
        "data/export/dataset",
        "dir",
        "Hugging Face dataset folder: test.parquet (images embedded) and the card README.md",
    ),
    Artifact("table4_md", "data/evaluate/table4.md", "file", "Table 4 as Markdown"),
    Artifact("paper_md", "data/evaluate/paper_tables.md", "file", "the paper's Tables 5-7 and published numbers"),
    Artifact(
        "cue_image_pairs",
        "data/evaluate/cue_image_pairs",
        "dir",
        "training pairs in the release's cue_image_pairs_<split>.json layout",
    ),
    Artifact(
        "plot_ocr_fates",
        "data/plots/ocr_fates.csv",
        "plot",
        "concepts by OCR fate",
        plot={"x": "concepts", "y": "fate", **_PLOT_BAR, "title": "Concepts by OCR fate"},
    ),
    Artifact(
        "plot_solver_jaccard",
        "data/plots/solver_jaccard.csv",
        "plot",
        "instances by solver mean Jaccard",
        plot={"x": "instances", "y": "solvers_jaccard_mean", **_PLOT_BAR, "title": "Instances by solver mean Jaccard"},
    ),
    Artifact(
        "plot_fool_the_ai",
        "data/plots/fool_the_ai.csv",
        "plot",
        "instances by fool-the-AI score",
        plot={"x": "instances", "y": "score_fool_the_ai", **_PLOT_BAR, "title": "Instances by fool-the-AI score"},
    ),
    Artifact("plot_models", "data/plots/evaluation_by_model.png", "plot", "Table 4 cells per model"),
    Artifact(
        "plot_candidates",
        "data/plots/evaluation_by_candidates.png",
        "plot",
        "Jaccard by number of candidates",
    ),
    Artifact(
        "aflite_debiased",
        "data/export/debiased.csv",
        "file",
        "AfLite's kept instances (opt-in aflite.write_debiased; else a header only); never the benchmark",
    ),
    Artifact(
        "plot_aflite",
        "data/plots/aflite_phases.csv",
        "plot",
        "instances flagged per AfLite phase",
        plot={"x": "phase", "y": "flagged", "title": "AfLite: instances flagged per phase"},
    ),
    Artifact(
        "plot_af",
        "data/plots/af_iterations.csv",
        "plot",
        "AF held-out Jaccard vs chance per iteration",
        plot={"x": "iteration", "y": "held_out_jaccard", "title": "AF: held-out Jaccard per iteration"},
    ),
    Artifact("report", "data/report/index.html", "file", "`gavil report` page (not a DVC output)"),
)

#: Each stage's metrics file is ``METRICS_DIR/<stage>.json``; run timings ``TIMINGS_DIR/<stage>.json``.
METRICS_DIR = "data/metrics"
TIMINGS_DIR = "data/metrics/timings"

TABLE_BY_NAME: dict[str, Table] = {t.name: t for t in TABLES}
ARTIFACT_BY_NAME: dict[str, Artifact] = {a.name: a for a in ARTIFACTS}
Entry = Table | Artifact

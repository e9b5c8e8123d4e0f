"""The catalog: every table and file the pipeline writes, by name.

Stages know each other only through these names. A table has a path and a pandera model
(named as ``"module:Class"`` and imported only when the table is read or written, so loading the
catalog, e.g. to generate ``dvc.yaml``, imports no schema and no stage). Non-table artifacts
(the image store, caches, Markdown tables, plots, the dataset folder) have a path and a kind.

How DVC treats an entry follows from it: ``persist`` outputs survive ``dvc repro`` (resumable
stores). Every output is in DVC's cache (so ``dvc push``/``dvc pull`` share it, plots too, and a
collaborator's pull leaves nothing to re-run) except ``cache=False`` ones, which are small files
kept in git instead (the ID ledger, the annotator key's fingerprint). ``local`` entries are no DVC
output at all: the model-output caches (OCR detections, embeddings) hold this machine's network
numerics (float32 networks differ in the last bits across CPUs and instruction sets), so each machine
keeps its own and ``dvc.lock`` hashes only what is the same everywhere.

:func:`read_table` / :func:`write_table` check the model on every read and write. While a stage
runs (:func:`stage_access`), reading or writing a name the stage's spec does not declare raises
:class:`UndeclaredAccess`, so the DAG in ``dvc.yaml`` cannot drift from what the code reads.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from gavil import io as _io
from gavil.errors import GavilError, MissingInput

__all__ = ["MissingInput", "UndeclaredAccess", "UnknownName", "read_table", "write_table", "path", "entry"]

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

#: The embedding caches, one per stage that embeds (each writes its own; every one of them reads all).
EMBEDDING_CACHES = ("embeddings", "af_embeddings", "aflite_embeddings", "eval_embeddings")

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
        "crawl_journal", "data/cache/crawl_journal", "journal", "resumable crawl journal (not a DVC output)", local=True
    ),
    Artifact("table1_md", "data/selection/table1.md", "file", "Table 1 as Markdown"),
    Artifact("benchmark_csv", "data/export/benchmark.csv", "file", "the benchmark in the release's CSV layout"),
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


class UnknownName(GavilError, KeyError):
    """A name that is not in the catalog."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class UndeclaredAccess(GavilError):
    """A stage read or wrote a catalog entry its spec does not declare (gavil/pipeline/registry.py)."""


def entry(name: str) -> Entry:
    """The catalog entry ``name`` (table or artifact).

    Raises:
        UnknownName: listing the known names.
    """
    found = TABLE_BY_NAME.get(name) or ARTIFACT_BY_NAME.get(name)
    if found is None:
        raise UnknownName(
            f"{name!r} is not in the catalog (gavil/pipeline/catalog.py); known: {', '.join([*TABLE_BY_NAME, *ARTIFACT_BY_NAME])}"
        )
    return found


def is_local(name: str) -> bool:
    """Whether entry ``name`` is ``local``: no DVC output, dependency or DAG edge (a cache of this
    machine's model numerics, the crawl journal). Reading one never orders stages: a cache holds only
    what its reader could compute itself."""
    return entry(name).local


def metrics_path(stage: str) -> str:
    """``data/metrics/<stage>.json``: a stage's deterministic metrics (DVC metrics, in git)."""
    return f"{METRICS_DIR}/{stage}.json"


# ------------------------------------------------------------------ access control during a stage run
@dataclass(frozen=True)
class _Access:
    stage: str
    reads: frozenset[str]
    writes: frozenset[str]
    producers: dict[str, str]  # catalog name -> the stage that writes it (for "run X first")


_ACCESS: ContextVar[_Access | None] = ContextVar("gavil_stage_access", default=None)


@contextmanager
def stage_access(
    stage: str, reads: tuple[str, ...], writes: tuple[str, ...], producers: dict[str, str] | None = None
) -> Iterator[None]:
    """While the block runs, the catalog lets ``stage`` read ``reads`` and its own ``writes``
    and write only ``writes``; anything else raises :class:`UndeclaredAccess`. ``producers``
    (name -> stage) lets a missing input name the stage to run first."""
    token = _ACCESS.set(_Access(stage, frozenset(reads) | frozenset(writes), frozenset(writes), producers or {}))
    try:
        yield
    finally:
        _ACCESS.reset(token)


def _check(name: str, mode: Literal["read", "write"]) -> None:
    acc = _ACCESS.get()
    if acc is None:
        return
    allowed = acc.reads if mode == "read" else acc.writes
    if name not in allowed:
        raise UndeclaredAccess(
            f"stage {acc.stage} {mode}s {name!r}, which its spec does not declare: add it to "
            f"{'reads' if mode == 'read' else 'writes'}= in gavil/pipeline/registry.py, then `gavil dvc-yaml --write`"
        )


def path(name: str, mode: Literal["read", "write"] = "read", root: str | os.PathLike = ".") -> Path:
    """The path of entry ``name`` under ``root``, checked against the running stage's spec."""
    e = entry(name)
    _check(name, mode)
    return Path(root) / e.path


def read_table(name: str, root: str | os.PathLike = ".") -> pd.DataFrame:
    """Read and validate catalog table ``name``.

    Returns the frame with the model's columns in order; list columns as Python lists.

    Raises:
        MissingInput: the file does not exist (names the stage to run first).
        UndeclaredAccess: during a stage run, ``name`` is not among the stage's reads.
        pandera.errors.SchemaErrors / schemas.ListColumnError: the file breaks the contract.
    """
    t = _table(name)
    p = path(name, "read", root)
    if not p.exists():
        acc = _ACCESS.get()
        who = acc.producers.get(name) if acc else None
        fix = f"run `dvc repro {who}` (or `gavil stage {who}`) first" if who else "run `dvc repro` first"
        raise MissingInput(f"{p} ({name}) does not exist yet: {fix}")
    return _io.read_parquet(p, t.schema())


def write_table(df: pd.DataFrame, name: str, root: str | os.PathLike = ".") -> pd.DataFrame:
    """Validate ``df`` against table ``name``'s model and write it atomically; returns the validated frame.

    A zero-row ``df`` gets the schema's missing columns (:func:`empty_table`), so a stage whose
    input is empty writes a valid empty table without building one by hand.

    Raises:
        UndeclaredAccess: during a stage run, ``name`` is not among the stage's writes.
        pandera.errors.SchemaErrors / schemas.ListColumnError: ``df`` breaks the contract
            (nothing is written then).
    """
    t = _table(name)
    if len(df) == 0:
        df = _with_schema_columns(df, name)
    return _io.write_parquet(df, path(name, "write", root), t.schema())


def empty_table(name: str) -> pd.DataFrame:
    """A zero-row frame with table ``name``'s columns, in order, and dtypes (what a stage writes
    when its input has no rows: every table exists, passes its schema, and reads back)."""
    cols = _table(name).schema().to_schema().columns
    return pd.DataFrame({c: pd.Series(dtype=col.dtype.type) for c, col in cols.items()})


def _with_schema_columns(df: pd.DataFrame, name: str) -> pd.DataFrame:
    """A zero-row ``df`` (often ``pd.DataFrame([])`` of no records, which has no columns at all)
    completed with the schema's missing columns and their dtypes. Only for zero rows, so no value
    is invented; a column the schema does not know is kept, and still refused by the schema."""
    empty = empty_table(name)
    for c in empty.columns:
        if c not in df.columns:
            df = df.assign(**{c: empty[c]})
    return df


def exists(name: str, root: str | os.PathLike = ".") -> bool:
    """Whether entry ``name`` exists on disk (no access check: existence is not a read)."""
    return (Path(root) / entry(name).path).exists()


def _table(name: str) -> Table:
    e = entry(name)
    if not isinstance(e, Table):
        raise UnknownName(f"{name!r} is a {e.kind}, not a table")
    return e

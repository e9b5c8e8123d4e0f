"""What a stage's metrics files hold: a narrow summary for ``dvc metrics show`` and the full metrics
beside it. The runner writes both for every stage, so this module shapes every stage's outputs and
is one of every stage's code dependencies (:data:`gavil.pipeline.codedeps.RUNNER_MODULES`)."""

from __future__ import annotations

from typing import Any

from gavil.pipeline import catalog

#: What each stage shows in ``dvc metrics show``: ``data/metrics/<stage>.json`` holds these few
#: scalars, under names shared across stages, so the one table of all stages (a column per name)
#: stays narrow. The stage's full metrics (nested counts, Table 1, per-model cells, messages) go
#: to ``data/metrics/details/<stage>.json``: in git beside them, a plain DVC output, not a metric.
#: Values are dotted paths into the full metrics; a last part with ``*`` sums the counts whose keys
#: match it (0 when none does).
METRICS_SUMMARY: dict[str, dict[str, str]] = {
    "ingest_concepts": {"concepts": "concepts", "edges": "edges"},
    "filter_profanity": {"concepts": "concepts", "rejected": "profane"},
    "crawl_images": {"concepts": "concepts", "images": "by_status.ok"},
    "ocr_filter": {"images": "by_status.accepted", "rejected": "by_status.rejected_*"},
    "build_instances": {"images": "pool", "instances": "swow_instances.ok"},
    "score_candidates": {"instances": "instances", "jaccard": "mean_jaccard_percent"},
    "import_annotations": {"instances": "instances.*", "rejected": "rejected"},
    "select_instances": {"instances": "by_dataset_status.*", "selected": "by_dataset_status.*/selected"},
    "export": {"instances": "instances", "hf_instances": "dataset_instances", "version": "version"},
    "adversarial_filter": {"instances": "instances", "replacements": "replacements"},
    "aflite": {"instances": "instances", "flagged": "flagged"},
    "evaluate": {"instances": "instances", "release_check": "release_check.matches"},
}


def details_path(stage: str) -> str:
    """``data/metrics/details/<stage>.json``: a stage's full metrics (in git; not a DVC metric)."""
    return f"{catalog.METRICS_DIR}/details/{stage}.json"


def metrics_summary(name: str, metrics: dict[str, Any]) -> dict[str, Any]:
    """The scalars of :data:`METRICS_SUMMARY` for stage ``name`` (a stage missing there shows its
    top-level numbers); a path that is not in ``metrics`` gives None."""
    from fnmatch import fnmatchcase

    if name not in METRICS_SUMMARY:
        return {k: v for k, v in metrics.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    out: dict[str, Any] = {}
    for column, dotted in METRICS_SUMMARY[name].items():
        *parents, last = dotted.split(".")
        node: Any = metrics
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if "*" in last:
            items = node.items() if isinstance(node, dict) else ()
            out[column] = sum(v for k, v in items if fnmatchcase(str(k), last) and isinstance(v, int | float))
        else:
            out[column] = node.get(last) if isinstance(node, dict) else None
    return out

"""The pure core (:func:`build_tables`), :func:`ingest` (a file in, tables out) and the stage's :func:`run`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from schemas.ingest import Edges
from stages import catalog
from stages.errors import MissingInput, ParamsError
from stages.ingest_concepts.formats import FORMATS, SwowFormatError, detect_format
from stages.ingest_concepts.readers import Read, read_swow_r100, read_swow_strength, read_winogavil_swow

if TYPE_CHECKING:
    from stages.config import Params


@dataclass(frozen=True)
class IngestResult:
    concepts: pd.DataFrame
    edges: pd.DataFrame
    metrics: dict[str, Any]


def build_tables(edges: pd.DataFrame, source_format: str, candidates: list[str] | None = None) -> IngestResult:
    """Rank edges per cue and derive the concepts table (pure: frames in, frames out).

    Args:
        edges: cue, response, r1_count, r123_count, r1_strength, r123_strength.
        source_format: one of :data:`FORMATS`.
        candidates: image concepts named by the input (release format), or None.

    Returns:
        :class:`IngestResult` with frames valid under :class:`schemas.ingest.Concepts`
        and :class:`schemas.ingest.Edges`.
    """
    e = edges.copy()
    e["_order"] = range(len(e))
    e = e.sort_values(
        ["cue", "r123_count", "r1_count", "_order"],
        ascending=[True, False, False, True],
        na_position="last",
        kind="stable",
    )
    e["rank"] = e.groupby("cue").cumcount() + 1
    e["source_format"] = source_format
    e = e.drop(columns="_order").reset_index(drop=True)
    cues = e["cue"].drop_duplicates()
    cand = list(candidates or [])
    names = pd.Index(cues).append(pd.Index(cand)).drop_duplicates()
    n_resp = e.groupby("cue")["response"].nunique()
    n_cues = e.groupby("response")["cue"].nunique()
    concepts = pd.DataFrame({"concept": names})
    concepts["is_cue"] = concepts["concept"].isin(set(cues))
    concepts["is_candidate"] = concepts["concept"].isin(set(cand))
    concepts["n_responses"] = concepts["concept"].map(n_resp).fillna(0).astype(int)
    concepts["n_cues"] = concepts["concept"].map(n_cues).fillna(0).astype(int)
    concepts["source_format"] = source_format
    concepts = concepts.sort_values("concept", kind="stable").reset_index(drop=True)
    metrics = {
        "format": source_format,
        "concepts": len(concepts),
        "cues": int(concepts["is_cue"].sum()),
        "candidates": int(concepts["is_candidate"].sum()),
        "edges": len(e),
    }
    return IngestResult(concepts, e[list(Edges.to_schema().columns)], metrics)


def ingest(path: str | Path, fmt: str = "auto", lowercase: bool = True) -> IngestResult:
    """Read a SWOW file in any supported format and build the concepts and edges tables.

    Names are stored normalised (:func:`stages.ingest_concepts.formats.name_form`). Metrics add
    ``dropped_cues`` (by reason), ``merged_by_normalisation`` (cues and (cue, response) pairs
    that became one) and ``name_form``.

    Raises:
        MissingInput: if ``path`` does not exist (message says how to point at it).
        SwowFormatError: for malformed input (file, line, column).
        ParamsError: for an unknown ``fmt``.
    """
    path = Path(path)
    if not path.is_file():
        what = "is a directory, not a file" if path.is_dir() else "not found"
        raise MissingInput(
            f"{path} {what}: download SWOW-EN from smallworldofwords.org and set ingest.path in params.yaml"
        )
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt not in FORMATS:
        raise ParamsError(f"ingest.format={fmt!r}: expected 'auto' or one of {FORMATS}")
    read: Read
    if fmt == "swow_r100":
        read = read_swow_r100(path, lowercase)
    elif fmt.startswith("swow_strength"):
        read = read_swow_strength(path, fmt, lowercase)
    else:
        read = read_winogavil_swow(path, lowercase)
    if read.edges.empty:
        dropped = read.stats["dropped_cues"]["no_valid_responses"]
        raise SwowFormatError(path, None, None, f"no cue has a valid response ({dropped} cues, all dropped)")
    result = build_tables(read.edges, fmt, read.candidates)
    result.metrics.update(read.stats)
    result.metrics["name_form"] = "nfc_trim_casefold" if lowercase else "nfc_trim"
    result.metrics["input"] = str(path)
    return result


def run(params: Params) -> dict[str, Any]:
    """Stage entry point (used by ``gavil stage`` and the Prefect flow): params in, tables out."""
    p = params.ingest
    result = ingest(p.path, p.format, p.lowercase)
    catalog.write_table(result.edges, "edges")
    catalog.write_table(result.concepts, "concepts")
    return result.metrics

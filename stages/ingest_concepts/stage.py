"""The pure core (:func:`build_tables`), :func:`ingest` (a file in, tables out) and the stage's :func:`run`."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from gavil.domain.confusables import skeleton
from gavil.domain.names import shown, word_reason
from gavil.domain.vocabulary import name_key
from gavil.errors import MissingInput, ParamsError
from gavil.pipeline import catalog
from schemas.ingest import Edges
from stages.ingest_concepts.concept_list import read_concept_list
from stages.ingest_concepts.formats import FORMATS, SwowFormatError, detect_format
from stages.ingest_concepts.readers import Read, read_swow_r100, read_swow_strength, read_winogavil_swow

if TYPE_CHECKING:
    from gavil.params import Params


@dataclass(frozen=True)
class IngestResult:
    concepts: pd.DataFrame
    edges: pd.DataFrame
    metrics: dict[str, Any]
    #: edges and candidates refused by the name policy: cue, response (None for a candidate), reason
    rejects: pd.DataFrame | None = None


def twin_reasons(names: list[str], counts: dict[str, int], lowercase: bool = True) -> dict[str, str]:
    """Names that read as another one (one :func:`gavil.domain.vocabulary.name_key`: the TR39
    skeleton after NFKC and case folding, e.g. ``bum`` and ``burn``, a Latin script ``ɡ`` and
    ``g``; with ``lowercase`` false, as the names keep their case, the skeleton of the name as
    stored) are one name: the one kept is the name that is its own skeleton, else the most frequent
    (``counts``: rows naming it), then the first in code-point order; each other one -> its reason.
    Independent of the order of ``names``."""
    key_of = name_key if lowercase else lambda n: skeleton(unicodedata.normalize("NFKC", n))
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(key_of(n), []).append(n)
    out: dict[str, str] = {}
    for key, group in groups.items():
        if len(group) < 2:
            continue
        keep = min(group, key=lambda n: (n != key, -counts.get(n, 0), n))
        out |= {
            n: f"word {shown(n)} reads as {shown(keep)} (one TR39 confusable skeleton): one name, kept as {shown(keep)}"
            for n in group
            if n != keep
        }
    return out


def reject_bad_names(
    edges: pd.DataFrame, candidates: list[str] | None, lowercase: bool = True
) -> tuple[pd.DataFrame, list[str] | None, pd.DataFrame]:
    """Split off the edges whose cue or response, and the candidates, that fail the word policy
    (:func:`gavil.domain.names.word_reason`: phrases of letters; no invisible character such as
    ``moon\u200b`` or an RLO; one script; at most :data:`gavil.domain.names.MAX_WORD` code points),
    and every name that reads as another one (:func:`twin_reasons`).

    Returns (kept edges, kept candidates, rejects: one row per refused edge or candidate with
    ``cue``, ``response`` (None for a candidate) and ``reason``, sorted by cue, response
    (candidates last) and reason, so the file's row order never shows). Pure."""
    every = pd.concat([edges["cue"], edges["response"], pd.Series(candidates or [], dtype=object)])
    names = pd.unique(every)
    reason = {n: r for n in names if (r := word_reason(n)) is not None}
    reason |= twin_reasons([n for n in names if n not in reason], every.value_counts().to_dict(), lowercase)
    if not reason:
        return edges, candidates, pd.DataFrame({"cue": [], "response": [], "reason": []}, dtype=object)
    cue_r, resp_r = edges["cue"].map(reason), edges["response"].map(reason)
    bad = cue_r.notna() | resp_r.notna()
    why = cue_r.where(cue_r.notna(), resp_r)
    rej = pd.DataFrame({"cue": edges["cue"][bad], "response": edges["response"][bad], "reason": why[bad]})
    bad_c = [c for c in candidates or [] if c in reason]
    rej = pd.concat(
        [rej, pd.DataFrame({"cue": bad_c, "response": [None] * len(bad_c), "reason": [reason[c] for c in bad_c]})],
        ignore_index=True,
    )
    kept_c = None if candidates is None else [c for c in candidates if c not in reason]
    rej = rej.sort_values(["cue", "response", "reason"], na_position="last", kind="stable").reset_index(drop=True)
    return edges[~bad].reset_index(drop=True), kept_c, rej.astype(object)


def build_tables(
    edges: pd.DataFrame,
    source_format: str,
    candidates: list[str] | None = None,
    concepts_from: str = "cues",
    min_response_count: int = 1,
) -> IngestResult:
    """Rank edges per cue and derive the concepts table (pure: frames in, frames out).

    Which words become concepts (each gets an image, and may be a candidate or an association):
    the cues (the paper's corpus of SWOW concepts, §2.1), the release's image candidates when the
    input names them, and with ``concepts_from="cues_and_responses"`` every response some cue gave at
    least ``min_response_count`` times (R123 count, else R1 count, else 1 where the file has no counts),
    so a small file whose responses are not cues themselves still yields SWOW-baseline instances.

    Args:
        edges: cue, response, r1_count, r123_count, r1_strength, r123_strength. Within a cue, equal
            counts keep this order (the readers give it: by name for counted files, association
            order for the release), so the ranks never depend on the file's row order.
        source_format: one of :data:`FORMATS`.
        candidates: image concepts named by the input (release format), or None.
        concepts_from: ``cues`` or ``cues_and_responses`` (``ingest.concepts``).
        min_response_count: ``ingest.min_response_count``.

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
    names = pd.Index(cues).append(pd.Index(cand))
    if concepts_from == "cues_and_responses":
        counts = e["r123_count"].fillna(e["r1_count"]).fillna(1)
        strong = e.loc[counts.astype(int) >= min_response_count, "response"]
        names = names.append(pd.Index(strong))
    names = names.drop_duplicates()
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


def ingest(
    path: str | Path,
    fmt: str = "auto",
    lowercase: bool = True,
    concepts_from: str = "cues",
    min_response_count: int = 1,
) -> IngestResult:
    """Read a SWOW file in any supported format and build the concepts and edges tables.

    Names are stored normalised (:func:`stages.ingest_concepts.formats.name_form`). Metrics add
    ``dropped_cues`` (by reason), ``merged_by_normalisation`` (cues and (cue, response) pairs
    that became one), ``name_form`` and ``rejected_names`` (edges and candidates whose word fails
    the name policy of :mod:`gavil.domain.names`: each is a row of ``IngestResult.rejects`` with its
    reason, never silently kept or dropped).

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
    elif fmt == "concept_list":
        read = read_concept_list(path, lowercase)
    else:
        read = read_winogavil_swow(path, lowercase)
    edges, candidates, rejects = reject_bad_names(read.edges, read.candidates, lowercase)
    if fmt == "concept_list" and not candidates:
        raise SwowFormatError(path, None, None, f"no concept passes the name policy, e.g. {rejects['reason'].iloc[0]}")
    if edges.empty and fmt != "concept_list":
        dropped = read.stats["dropped_cues"]["no_valid_responses"]
        why = (
            f"; {len(rejects)} edges refused by the name policy, e.g. {rejects['reason'].iloc[0]}"
            if len(rejects)
            else ""
        )
        raise SwowFormatError(path, None, None, f"no cue has a valid response ({dropped} cues, all dropped){why}")
    result = build_tables(edges, fmt, candidates, concepts_from, min_response_count)
    result = IngestResult(result.concepts, result.edges, result.metrics, rejects)
    result.metrics.update(read.stats)
    result.metrics["rejected_names"] = {
        "edges": int(rejects["response"].notna().sum()),
        "candidates": int(rejects["response"].isna().sum()),
    }
    result.metrics["name_form"] = "nfc_trim_casefold" if lowercase else "nfc_trim"
    result.metrics["input"] = str(path)
    return result


def run(params: Params) -> dict[str, Any]:
    """Stage entry point (used by ``gavil stage`` and the Prefect flow): params in, tables out."""
    p = params.ingest
    result = ingest(p.path, p.format, p.lowercase, p.concepts, p.min_response_count)
    catalog.write_table(result.edges, "edges")
    catalog.write_table(result.concepts, "concepts")
    rejects = result.rejects if result.rejects is not None else pd.DataFrame(columns=["cue", "response", "reason"])
    catalog.write_table(rejects.astype({"cue": str, "reason": str}), "name_rejects")
    return result.metrics

"""Registration (pure; no I/O): every candidate's and every concept's fate from the journal.

The paper (§2.1) kept the top-ranked search result that passed its filters. Here every candidate
is downloaded and validated; ``ocr_filter`` then walks the *kept* candidates in rank order and
keeps the first one without the query text, so a rejected top result falls through. The same
sha256, or a perceptual hash within ``crawl.phash_max_distance`` bits, already kept by an earlier
concept is a ``duplicate``; the perceptual test is skipped for images flatter than
``crawl.phash_min_std`` (their hash cannot tell them apart; see :mod:`stages.crawl_images.validate`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from schemas.crawl import Candidates, Images


def register(
    concept_filter: pd.DataFrame,
    candidates: Mapping[str, Sequence[Any]],
    downloads: dict[str, dict],
    source: str,
    phash_max_distance: int | None,
    phash_min_std: float = 0.0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Decide every candidate's and every concept's fate (pure; no I/O).

    Args:
        concept_filter: :class:`schemas.profanity.ConceptFilter` rows (concept, status, reason).
        candidates: concept -> (URLs in rank order, search error or None[, note or None])
            (:class:`stages.crawl_images.sources.Found`); a note (e.g. merged map keys) is added
            to the concept's reason.
        downloads: URL -> journal record (``status`` kept/invalid_image/unsupported_format/
            download_failed/opted_out/refused_url, ``reason``, and for kept: sha256, path, width,
            height, format, bytes, phash, grey_std).
        phash_max_distance: kept images whose 64-bit perceptual hashes differ in at most this
            many bits from an image kept by an earlier concept are duplicates; None: sha256 only.
        phash_min_std: images whose ``grey_std`` (grey levels) is below this take no part in the
            perceptual test (flat images all hash alike); sha256 duplicates still count.

    Returns:
        (:class:`schemas.crawl.Candidates` rows, :class:`schemas.crawl.Images` rows), sorted by
        concept (and rank). Concepts own images in sorted order, so results do not depend on
        download order or partitioning.
    """
    cand_rows: list[dict[str, Any]] = []
    img_rows: list[dict[str, Any]] = []
    n_urls = sum(len(f[0]) for f in candidates.values())
    owners = _Owners(phash_max_distance, phash_min_std, np.zeros(max(1, n_urls), dtype=np.uint64))
    for concept, status, reason in sorted(
        zip(concept_filter["concept"], concept_filter["status"], concept_filter["reason"])
    ):
        row: dict[str, Any] = {"concept": concept, "source": source, "candidates_kept": 0}
        if status != "ok":
            img_rows.append({**row, "status": "profane", "reason": reason})
            continue
        found: Sequence[Any] = candidates.get(concept) or ([], None)
        urls, search_error = list(found[0]), found[1]
        note = found[2] if len(found) > 2 else None
        if not urls:
            img_rows.append(_no_result_row(row, source, search_error, note))
            continue
        mine = _candidate_rows(concept, urls, downloads, owners)
        cand_rows += mine
        img_rows.append(_image_row(row, mine, note))
    cands = pd.DataFrame(cand_rows, columns=list(Candidates.to_schema().columns))
    images = pd.DataFrame(img_rows, columns=list(Images.to_schema().columns))
    for df in (cands, images):
        for col in ("width", "height", "bytes"):
            df[col] = df[col].astype("Int64")
    return cands, images


@dataclass
class _Owners:
    """Which concept owns each image kept so far: ``by_sha`` maps a sha256 to its concept; the
    perceptual test's images (:func:`_comparable`) have their 64-bit hashes in
    ``hashes[: len(hash_owner)]`` (uint64, preallocated for every candidate URL) and their
    concepts in ``hash_owner``, in the order kept."""

    phash_max_distance: int | None
    phash_min_std: float
    hashes: np.ndarray
    by_sha: dict[str, str] = field(default_factory=dict)
    hash_owner: list[str] = field(default_factory=list)

    def duplicate(self, rec: dict[str, Any], concept: str) -> dict[str, str] | None:
        """The ``status``/``reason`` of a kept download ``rec`` of ``concept`` that repeats an owned image
        (the same sha256, or a perceptual hash within ``phash_max_distance`` bits of another concept's,
        the nearest named), or None when it is new."""
        sha = rec["sha256"]
        if sha in self.by_sha:
            who = "an earlier candidate" if self.by_sha[sha] == concept else f"'{self.by_sha[sha]}'"
            return {"status": "duplicate", "reason": f"same image (sha256 {sha[:12]}) as {who}"}
        if self.phash_max_distance is not None and self.hash_owner and _comparable(rec, self.phash_min_std):
            h = np.uint64(int(rec["phash"], 16))
            dist = np.bitwise_count(self.hashes[: len(self.hash_owner)] ^ h)
            near = [
                (int(d), self.hash_owner[i])
                for i in np.flatnonzero(dist <= self.phash_max_distance)
                for d in [dist[i]]
                if self.hash_owner[i] != concept
            ]
            if near:
                d, who = min(near)
                return {
                    "status": "duplicate",
                    "reason": f"near-duplicate of '{who}' (phash distance {d} <= {self.phash_max_distance})",
                }
        return None

    def claim(self, rec: dict[str, Any], concept: str) -> None:
        """Record the kept download ``rec`` as ``concept``'s image (its hash too, when comparable)."""
        self.by_sha[rec["sha256"]] = concept
        if _comparable(rec, self.phash_min_std):
            self.hashes[len(self.hash_owner)] = np.uint64(int(rec["phash"], 16))
            self.hash_owner.append(concept)


def _candidate_rows(concept: str, urls: list[str], downloads: dict[str, dict], owners: _Owners) -> list[dict[str, Any]]:
    """One :class:`schemas.crawl.Candidates` row per URL of ``concept`` (rank from 1): its journal
    record's status and reason (``download_failed`` when it has none), and for a kept image its
    file's columns; a kept image that repeats an owned one is a ``duplicate``, else ``concept``
    claims it in ``owners``."""
    mine: list[dict[str, Any]] = []
    for rank, url in enumerate(urls, start=1):
        rec = downloads.get(url) or {"status": "download_failed", "reason": "not downloaded (crawl interrupted?)"}
        c = {"concept": concept, "rank": rank, "url": url, "status": rec["status"], "reason": rec.get("reason")}
        if rec["status"] == "kept":
            c |= {k: rec[k] for k in ("sha256", "path", "width", "height", "format", "bytes", "phash")}
            dup = owners.duplicate(rec, concept)
            if dup is not None:
                c |= dup
            else:
                owners.claim(rec, concept)
        mine.append(c)
    return mine


def _no_result_row(row: dict[str, Any], source: str, search_error: str | None, note: str | None) -> dict[str, Any]:
    """The :class:`schemas.crawl.Images` row of a concept the search gave no URL: ``search_failed``
    with the search's error, or ``no_results`` (also when the concept is no safe file name)."""
    if search_error and search_error != "concept name is not a safe file name":
        return {**row, "status": "search_failed", "reason": _join(note, search_error)}
    return {
        **row,
        "status": "no_results",
        "reason": _join(
            note,
            f"no {source} result for '{row['concept']}'" + (f" ({search_error})" if search_error else ""),
        ),
    }


def _image_row(row: dict[str, Any], mine: list[dict[str, Any]], note: str | None) -> dict[str, Any]:
    """The :class:`schemas.crawl.Images` row of a concept from its candidate rows ``mine``: ``ok``
    with the top-ranked kept image, else the one status all candidates share or ``all_rejected``;
    the reason lists the candidates not kept."""
    kept = [c for c in mine if c["status"] == "kept"]
    problems = "; ".join(f"#{c['rank']} {c['url']}: {c['reason']}" for c in mine if c["status"] != "kept")
    if kept:
        top = kept[0]
        return {
            **row,
            "status": "ok",
            "reason": _join(note, problems),
            "source_url": top["url"],
            "candidates_kept": len(kept),
            **{k: top[k] for k in ("sha256", "path", "width", "height", "format", "bytes")},
        }
    kinds = {c["status"] for c in mine}
    return {**row, "status": kinds.pop() if len(kinds) == 1 else "all_rejected", "reason": _join(note, problems)}


def _comparable(rec: dict, phash_min_std: float) -> bool:
    """Whether a kept image takes part in the perceptual test (it has a hash, and is not flat)."""
    std = rec.get("grey_std")
    return bool(rec.get("phash")) and (std is None or std >= phash_min_std)


def _join(*parts: str | None) -> str | None:
    return "; ".join(p for p in parts if p) or None

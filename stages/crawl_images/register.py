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
    owner: dict[str, str] = {}
    hashes = np.zeros(max(1, sum(len(f[0]) for f in candidates.values())), dtype=np.uint64)
    hash_owner: list[str] = []
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
            if search_error and search_error != "concept name is not a safe file name":
                img_rows.append({**row, "status": "search_failed", "reason": _join(note, search_error)})
            else:
                img_rows.append(
                    {
                        **row,
                        "status": "no_results",
                        "reason": _join(
                            note,
                            f"no {source} result for '{concept}'" + (f" ({search_error})" if search_error else ""),
                        ),
                    }
                )
            continue
        mine: list[dict[str, Any]] = []
        for rank, url in enumerate(urls, start=1):
            rec = downloads.get(url) or {"status": "download_failed", "reason": "not downloaded (crawl interrupted?)"}
            c = {"concept": concept, "rank": rank, "url": url, "status": rec["status"], "reason": rec.get("reason")}
            if rec["status"] == "kept":
                c |= {k: rec[k] for k in ("sha256", "path", "width", "height", "format", "bytes", "phash")}
                sha = rec["sha256"]
                if sha in owner:
                    who = "an earlier candidate" if owner[sha] == concept else f"'{owner[sha]}'"
                    c |= {"status": "duplicate", "reason": f"same image (sha256 {sha[:12]}) as {who}"}
                elif phash_max_distance is not None and hash_owner and _comparable(rec, phash_min_std):
                    h = np.uint64(int(rec["phash"], 16))
                    dist = np.bitwise_count(hashes[: len(hash_owner)] ^ h)
                    near = [
                        (int(d), hash_owner[i])
                        for i in np.flatnonzero(dist <= phash_max_distance)
                        for d in [dist[i]]
                        if hash_owner[i] != concept
                    ]
                    if near:
                        d, who = min(near)
                        c |= {
                            "status": "duplicate",
                            "reason": f"near-duplicate of '{who}' (phash distance {d} <= {phash_max_distance})",
                        }
                if c["status"] == "kept":
                    owner[sha] = concept
                    if _comparable(rec, phash_min_std):
                        hashes[len(hash_owner)] = np.uint64(int(rec["phash"], 16))
                        hash_owner.append(concept)
            mine.append(c)
        cand_rows += mine
        kept = [c for c in mine if c["status"] == "kept"]
        problems = "; ".join(f"#{c['rank']} {c['url']}: {c['reason']}" for c in mine if c["status"] != "kept")
        if kept:
            top = kept[0]
            img_rows.append(
                {
                    **row,
                    "status": "ok",
                    "reason": _join(note, problems),
                    "source_url": top["url"],
                    "candidates_kept": len(kept),
                    **{k: top[k] for k in ("sha256", "path", "width", "height", "format", "bytes")},
                }
            )
        else:
            kinds = {c["status"] for c in mine}
            img_rows.append(
                {**row, "status": kinds.pop() if len(kinds) == 1 else "all_rejected", "reason": _join(note, problems)}
            )
    cands = pd.DataFrame(cand_rows, columns=list(Candidates.to_schema().columns))
    images = pd.DataFrame(img_rows, columns=list(Images.to_schema().columns))
    for df in (cands, images):
        for col in ("width", "height", "bytes"):
            df[col] = df[col].astype("Int64")
    return cands, images


def _comparable(rec: dict, phash_min_std: float) -> bool:
    """Whether a kept image takes part in the perceptual test (it has a hash, and is not flat)."""
    std = rec.get("grey_std")
    return bool(rec.get("phash")) and (std is None or std >= phash_min_std)


def _join(*parts: str | None) -> str | None:
    return "; ".join(p for p in parts if p) or None

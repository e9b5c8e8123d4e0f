"""The stage's entry points: :func:`plan` / :func:`work` / :func:`reduce` (the Prefect flow maps
:func:`work` over partitions of concepts), :func:`run` (all of it in one process) and :func:`crawl`
(tests and notebooks).

Reads catalog ``concept_filter``; writes ``candidates`` and ``images`` (tables), ``image_store``
(the content-addressed images) and ``crawl_journal`` (what makes a crawl resumable).
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from gavil.pipeline import catalog
from gavil.pipeline.parallel import partition
from gavil.progress import progress
from stages.crawl_images.config import CrawlConfig
from stages.crawl_images.icrawler_glue import CrawlRun
from stages.crawl_images.journal import Journal, reusable
from stages.crawl_images.register import register
from stages.crawl_images.sources import local_candidates, page_url, source_candidates, unmatched_local_files
from stages.crawl_images.store import Keeper, clean_store, staging

if TYPE_CHECKING:
    from gavil.params import Params


#: The smallest automatic partition (concepts): a worker process pays ~2 s of imports, which
#: validating 50 concepts' local files (decode, perceptual hash) repays.
MIN_PARTITION = 50


def plan(params: Params) -> list[list[str]]:
    """The ok concepts of ``concept_filter``, sorted, in partitions of ``crawl.partition_size``
    (None: sized for the workers, :func:`gavil.pipeline.parallel.partition`, at least
    :data:`MIN_PARTITION` concepts each; for ``crawl.source: local``, at least that many of their
    files, since a concept without a file costs nothing: a small folder is one partition, run in
    the stage's own process rather than on worker processes whose start would cost more).

    Raises:
        gavil.errors.MissingInput: ``crawl.source: local`` and ``crawl.local_dir`` is not a folder.
    """
    cf = catalog.read_table("concept_filter")
    concepts = sorted(cf.loc[cf["status"] == "ok", "concept"])
    cfg = CrawlConfig.from_params(params.crawl)
    files = (
        sum(len(f.urls) for f in local_candidates(concepts, Path(cfg.local_dir)).values())
        if cfg.source == "local"
        else None
    )
    return partition(concepts, params.crawl.partition_size, MIN_PARTITION, work=files)


def concurrent(params: Params) -> bool:
    """Whether partitions may run at the same time: only for ``crawl.source: local``. The politeness
    limits (``crawl.per_host``: connections at once, delay between request starts) hold within one
    process, so a web crawl's partitions run one after another (its downloader threads,
    ``crawl.threads``, overlap the waits on the network)."""
    return CrawlConfig.from_params(params.crawl).source == "local"


def work(params: Params, concepts: list[str]) -> dict[str, int]:
    """Search and download the candidates of ``concepts`` (one partition); journals everything.

    Returns counts: ``{"concepts", "fetched"}`` (HTTP downloads made in this call).

    Raises:
        gavil.errors.ParamsError: bad params, or a ``crawl.urllist_path`` that is not a URL map.
        FileNotFoundError: ``crawl.local_dir`` is not a folder (local source).
    """
    cfg = CrawlConfig.from_params(params.crawl)
    journal = Journal(catalog.path("crawl_journal", "write"))
    store = catalog.path("image_store", "write")
    clean_store(store)  # only what crawls that are gone left; a neighbour's staging stays
    fetched = 0
    try:
        with staging(store) as tmpdir:  # this partition's own, locked while it works
            searches, downloads = journal.load()
            if cfg.source == "local":
                _keep_local(cfg, concepts, journal, searches, downloads, store, tmpdir)
            else:
                fetched = _crawl_web(cfg, concepts, journal, searches, downloads, store, tmpdir)
    finally:
        journal.close()
    return {"concepts": len(concepts), "fetched": fetched}


def _local_key(cfg: CrawlConfig, path: str) -> str:
    """A local file's check key: the checks, and the file's size and mtime (an edit re-validates)."""
    st = os.stat(path)
    return f"{cfg.check_key};size={st.st_size};mtime_ns={st.st_mtime_ns}"


def _keep_local(
    cfg: CrawlConfig,
    concepts: list[str],
    journal: Journal,
    searches: dict[str, dict],
    downloads: dict[str, dict],
    store: Path,
    tmpdir: Path,
) -> None:
    """Validate, store and journal the local files of ``concepts`` not settled by the journal."""
    cands = source_candidates(cfg, concepts, searches)
    keeper = Keeper(cfg, journal, downloads, store, tmpdir)
    todo = sorted({u for found in cands.values() for u in found.urls})
    todo = [u for u in todo if not reusable(downloads.get(u), _local_key(cfg, u))]

    def one(path: str) -> None:
        keeper.keep_file(path, Path(path), check=_local_key(cfg, path))

    with ThreadPoolExecutor(cfg.threads) as pool:
        for _ in progress(pool.map(one, todo), "crawl_images (local)", total=len(todo)):
            pass


def _crawl_web(
    cfg: CrawlConfig,
    concepts: list[str],
    journal: Journal,
    searches: dict[str, dict],
    downloads: dict[str, dict],
    store: Path,
    tmpdir: Path,
) -> int:
    """Fetch what the journal does not settle: the search pages of ``concepts`` (bing, greedy) and
    the image URLs (urllist, or those of searches already journaled). Returns HTTP downloads made."""
    if cfg.source == "urllist":
        cands = source_candidates(cfg, concepts, searches)
        images = list(
            dict.fromkeys(
                u for found in cands.values() for u in found.urls if not reusable(downloads.get(u), cfg.check_key)
            )
        )
        pages: dict[str, str] = {}
    else:
        pages = {page_url(cfg, c): c for c in concepts}
        cached = {pg: c for pg, c in pages.items() if _settled_search(cfg, searches.get(f"{cfg.source}|{pg}"))}
        images = list(
            dict.fromkeys(
                u
                for pg in cached
                for u in searches[f"{cfg.source}|{pg}"]["urls"]
                if not reusable(downloads.get(u), cfg.check_key)
            )
        )
        pages = {pg: c for pg, c in pages.items() if pg not in cached}
    if not (pages or images):
        return 0
    return CrawlRun(cfg, journal, searches, downloads, store, tmpdir).run(pages, images)


def _settled_search(cfg: CrawlConfig, rec: dict | None) -> bool:
    """Whether a journaled search stands: not transient, and made under the same search checks."""
    return rec is not None and not rec.get("transient") and rec.get("check") == cfg.search_check


def no_image_warning(images: pd.DataFrame, source: str) -> str | None:
    """One line when concepts were crawled but none got an image, saying how they failed and, when
    every search failed, that the search engine was never reached (an offline machine); else None."""
    if images.empty or (images["status"] == "ok").any():
        return None
    counts = images["status"].value_counts()
    top, n = str(counts.index[0]), int(counts.iloc[0])
    example = images.loc[images["status"] == top, "reason"].dropna()
    why = f" ({example.iloc[0]})" if len(example) else ""
    line = f"crawl_images: WARNING: none of {len(images)} concept(s) got an image from crawl.source {source}: {n} {top}{why}"
    if top in ("search_failed", "download_failed") and n == len(images):
        line += (
            "; no request reached the web: is this machine offline? Offline, set crawl.source: local and "
            "crawl.local_dir to a folder of <concept>.<ext> images (docs/your-own-benchmark.md)"
        )
    return line


def unmatched_file_line(cfg: CrawlConfig, concepts: list[str], shown: int = 10) -> str | None:
    """With ``crawl.source: local``, one console line naming the image files of ``crawl.local_dir``
    that match no concept of ``concepts`` (every concept of ``concept_filter``, profane ones included,
    so a file for a profane concept is not called unmatched), at most ``shown`` names; else None."""
    if cfg.source != "local":
        return None
    files = unmatched_local_files(concepts, Path(cfg.local_dir))
    if not files:
        return None
    names = ", ".join(files[:shown]) + (f" and {len(files) - shown} more" if len(files) > shown else "")
    return (
        f"crawl_images: {len(files)} image file(s) in crawl.local_dir {cfg.local_dir} match no concept and are "
        f"not used: {names} (a file is named <concept>.<ext> with the concept's own spelling)"
    )


def reduce(params: Params, results: list[dict[str, int]]) -> dict[str, Any]:
    """Register all partitions' journaled results into the ``candidates`` and ``images`` tables;
    compact the journal. Returns the metrics (the runner writes them): source, concepts,
    by_status, candidates, candidates_by_status, merged_names (concepts whose candidates came from
    several map keys or files that are one name after normalisation)."""
    cfg = CrawlConfig.from_params(params.crawl)
    cf = catalog.read_table("concept_filter")
    journal = Journal(catalog.path("crawl_journal", "write"))
    searches, downloads = journal.load()
    wanted = sorted(cf.loc[cf["status"] == "ok", "concept"])
    cands = source_candidates(cfg, wanted, searches)
    cand_df, images = register(cf, cands, downloads, cfg.source, cfg.phash_max_distance, cfg.phash_min_std)
    catalog.write_table(cand_df, "candidates")
    catalog.write_table(images, "images")
    journal.compact()
    fetched = sum(r.get("fetched", 0) for r in results)
    print(
        f"crawl_images: {fetched} HTTP download(s) this run, {len(cand_df)} candidates, {int((images['status'] == 'ok').sum())} concepts with an image",
        flush=True,
    )
    warning = no_image_warning(images, cfg.source)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    unused = unmatched_file_line(cfg, list(cf["concept"]))
    if unused:
        print(unused, file=sys.stderr, flush=True)
    return {
        "source": cfg.source,
        "concepts": len(images),
        "by_status": images["status"].value_counts().sort_index().to_dict(),
        "candidates": len(cand_df),
        "candidates_by_status": cand_df["status"].value_counts().sort_index().to_dict(),
        "merged_names": sum(1 for found in cands.values() if found.note),
    }


def crawl(concept_filter: pd.DataFrame, params: Params) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Crawl and register ``concept_filter``'s ok concepts in the current directory (no files written
    besides the store and the journal); returns (candidates, images). For tests and notebooks."""
    cfg = CrawlConfig.from_params(params.crawl)
    wanted = sorted(concept_filter.loc[concept_filter["status"] == "ok", "concept"])
    work(params, wanted)
    searches, downloads = Journal(catalog.path("crawl_journal")).load()
    return register(
        concept_filter,
        source_candidates(cfg, wanted, searches),
        downloads,
        cfg.source,
        cfg.phash_max_distance,
        cfg.phash_min_std,
    )


def run(params: Params) -> dict[str, Any]:
    """Stage entry point: concept_filter -> candidates + images tables, content-addressed store.
    Returns the metrics (see :func:`reduce`)."""
    return reduce(params, [work(params, part) for part in plan(params)])

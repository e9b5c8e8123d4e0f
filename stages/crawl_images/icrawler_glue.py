"""icrawler glue for the web sources: search pages and downloads through icrawler's feeder ->
parser -> downloader threads, every request through :class:`~stages.crawl_images.fetch.Fetcher`.

icrawler's components fetch with their own ``requests`` session: unbounded bodies, no URL guard.
Here the parser threads fetch each search page with :meth:`Fetcher.fetch_page` (guarded, at most
``crawl.max_page_bytes``, within ``crawl.deadline_s``) and read it with our own extraction
(:func:`~stages.crawl_images.sources.bing_image_urls`: every image URL of Bing's result
metadata; :func:`~stages.crawl_images.sources.greedy_image_urls`: every ``<img>`` of the page,
relative ones resolved), and the downloader threads call :meth:`Fetcher.download`. What the
components need is given to them as constructor arguments (icrawler's ``extra_parser_args`` /
``extra_downloader_args``); nothing is attached to icrawler's objects afterwards.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gavil.progress import progress
from stages.crawl_images.client import FetchFailed
from stages.crawl_images.config import CrawlConfig
from stages.crawl_images.fetch import Fetcher
from stages.crawl_images.journal import Journal, reusable
from stages.crawl_images.sources import bing_image_urls, greedy_image_urls


def _crawler_classes() -> tuple[type, type, type, type]:
    """icrawler component subclasses: feeder, parser, downloader, crawler (each built by its factory
    below, which imports icrawler lazily: icrawler is only needed for crawling, and importing it
    at the top would cost every run of the stage, offline sources included, ~0.16 s)."""
    return _journal_feeder_class(), _search_parser_class(), _journal_downloader_class(), _fast_crawler_class()


def _journal_feeder_class() -> type:
    """icrawler ``Feeder`` subclass that feeds search pages to the parsers and already-known image
    URLs straight to the downloaders."""
    from icrawler import Feeder

    class JournalFeeder(Feeder):
        """Feeds search pages to the parsers and already-known image URLs straight to the downloaders."""

        def feed(self, pages: list[str], images: list[str], downloader_queue: Any) -> None:
            for page in pages:
                self.output(page)
            for url in images:
                downloader_queue.put({"file_url": url})

    return JournalFeeder


def _search_parser_class() -> type:
    """icrawler ``Parser`` subclass whose threads fetch the search pages through the fetcher."""
    from icrawler import Parser

    class SearchParser(Parser):
        """Fetches each search page with the fetcher, keeps its top ``top_n`` image URLs (``extract``),
        reports them to ``on_search`` (page, urls=..., error=..., transient=...) and passes on those
        ``settled`` does not accept."""

        def __init__(
            self,
            *args: Any,
            fetcher: Fetcher,
            extract: Callable[[bytes, str], list[str]],
            robots: bool,
            top_n: int,
            on_search: Callable[..., None],
            settled: Callable[[str], bool],
            **kwargs: Any,
        ) -> None:
            super().__init__(*args, **kwargs)
            self._fetcher, self._extract, self._robots = fetcher, extract, robots
            self._top_n, self._on_search, self._settled = top_n, on_search, settled

        def worker_exec(self, queue_timeout: float = 0.1, **kwargs: Any) -> None:
            while True:
                try:
                    page = self.in_queue.get(timeout=queue_timeout)
                except queue.Empty:
                    if self.signal.get("feeder_exited"):
                        break
                    continue
                try:
                    self._search(page)
                except Exception as e:  # one bad page must not kill the thread
                    self._on_search(page, error=f"search page: {type(e).__name__}", transient=True)
                finally:
                    self.in_queue.task_done()

        def _search(self, page: str) -> None:
            try:
                final, body = self._fetcher.fetch_page(page, self._robots)
            except FetchFailed as e:
                reason = e.reason if e.reason.startswith("search page") else f"search page: {e.reason}"
                self._on_search(page, error=reason, transient=e.transient)
                return
            urls = self._extract(body, final)[: self._top_n]
            self._on_search(page, urls=urls)
            for url in urls:
                if not self._settled(url):
                    self.output({"file_url": url})

    return SearchParser


def _journal_downloader_class() -> type:
    """icrawler ``Downloader`` subclass whose threads download through the fetcher."""
    from icrawler import Downloader

    class JournalDownloader(Downloader):
        """Downloads through the fetcher; calls ``on_done()`` after each URL; exits only when the
        parsers are done and the queue is empty."""

        def __init__(self, *args: Any, fetcher: Fetcher, on_done: Callable[[], None], **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.fetcher, self._on_done = fetcher, on_done

        def worker_exec(self, queue_timeout: float = 0.1, **kwargs: Any) -> None:
            while True:
                try:
                    task = self.in_queue.get(timeout=queue_timeout)
                except queue.Empty:
                    if self.signal.get("parser_exited"):
                        break
                    continue
                try:
                    self.fetcher.download(task["file_url"])
                except Exception as e:  # one bad URL must not kill the thread
                    self.fetcher.record(task["file_url"], "download_failed", f"{type(e).__name__}", transient=True)
                finally:
                    self._on_done()
                    self.in_queue.task_done()

    return JournalDownloader


def _fast_crawler_class() -> type:
    """icrawler ``Crawler`` subclass with a 20 ms completion poll."""
    from icrawler import Crawler

    class FastCrawler(Crawler):
        """icrawler's Crawler with a 20 ms completion poll (its own sleeps 1 s per check)."""

        def crawl(self, feeder_kwargs: dict, parser_kwargs: dict, downloader_kwargs: dict) -> None:
            self.signal.reset()
            self.feeder.start(**feeder_kwargs)
            self.parser.start(**parser_kwargs)
            self.downloader.start(**downloader_kwargs)
            while True:
                if not self.feeder.is_alive():
                    self.signal.set(feeder_exited=True)
                if not self.parser.is_alive():
                    self.signal.set(parser_exited=True)
                if not self.downloader.is_alive():
                    break
                time.sleep(0.02)

    return FastCrawler


@contextmanager
def _ticker(desc: str, total: int) -> Iterator[Callable[[], None]]:
    """A thread-safe ``tick()`` for worker threads, reported with :func:`gavil.progress.progress`
    (``total`` may be an upper bound: the report ends when the block does)."""
    ticks: queue.SimpleQueue[int | None] = queue.SimpleQueue()

    def report() -> None:
        for _ in progress(iter(ticks.get, None), desc, total=total):
            pass

    reporter = threading.Thread(target=report, name="crawl-progress", daemon=True)
    reporter.start()
    try:
        yield lambda: ticks.put(1)
    finally:
        ticks.put(None)
        reporter.join()


class CrawlRun:
    """One crawl of some concepts from a web source with icrawler (search pages + downloads)."""

    def __init__(
        self,
        cfg: CrawlConfig,
        journal: Journal,
        searches: dict[str, dict],
        downloads: dict[str, dict],
        store_dir: Path,
        staging: Path,
    ) -> None:
        self.cfg, self.journal, self.searches, self.downloads = cfg, journal, searches, downloads
        self.store_dir, self.staging = store_dir, staging
        self.pages: dict[str, str] = {}  # page url -> concept

    def search_key(self, page: str) -> str:
        return f"{self.cfg.source}|{page}"

    def search_done(
        self, page: str, urls: list[str] | None = None, error: str | None = None, transient: bool = False
    ) -> None:
        """Record a fetched search page's top URLs (or its error) in the journal."""
        rec: dict[str, Any] = {
            "kind": "search",
            "key": self.search_key(page),
            "concept": self.pages.get(page),
            "urls": urls or [],
            "error": error,
            "transient": transient,
            "check": self.cfg.search_check,
        }
        self.searches[rec["key"]] = rec
        self.journal.append(rec)  # transient failures too: they explain the fate, and are retried next run

    def _settled(self, url: str) -> bool:
        return reusable(self.downloads.get(url), self.cfg.check_key)

    def run(self, pages: dict[str, str], images: list[str]) -> int:
        """Fetch search ``pages`` (page url -> concept) and image URLs ``images``. Returns the
        number of image downloads attempted."""
        Feeder, Parser, Down, FastCrawler = _crawler_classes()
        self.pages = dict(pages)
        total = len(images) + len(pages) * self.cfg.top_n
        fetcher = Fetcher(self.cfg, self.journal, self.downloads, self.store_dir, self.staging)
        greedy = self.cfg.source == "greedy"
        try:
            with _ticker(f"crawl_images ({self.cfg.source})", total) as tick:
                crawler = FastCrawler(
                    feeder_cls=Feeder,
                    parser_cls=Parser,
                    downloader_cls=Down,
                    feeder_threads=1,
                    parser_threads=max(1, min(4, self.cfg.threads // 2)),
                    downloader_threads=self.cfg.threads,
                    storage={"root_dir": str(self.staging)},
                    log_level=logging.CRITICAL,
                    extra_parser_args={
                        "fetcher": fetcher,
                        "extract": greedy_image_urls if greedy else bing_image_urls,
                        "robots": greedy,  # a site's pages are crawled; the bing endpoint is the API you chose
                        "top_n": self.cfg.top_n,
                        "on_search": self.search_done,
                        "settled": self._settled,
                    },
                    extra_downloader_args={"fetcher": fetcher, "on_done": tick},
                )
                crawler.crawl(
                    feeder_kwargs={
                        "pages": list(pages),
                        "images": images,
                        "downloader_queue": crawler.downloader.in_queue,
                    },
                    parser_kwargs={"queue_timeout": 0.1},
                    downloader_kwargs={"queue_timeout": 0.1},
                )
        finally:
            fetcher.close()
        for page in pages:  # a page no parser thread reported (should not happen): journaled, retried next run
            if self.search_key(page) not in self.searches:
                self.search_done(page, error="search page not fetched", transient=True)
        return fetcher.fetched

"""Polite, guarded downloads: per-host politeness, opt-outs, and :class:`Fetcher`.

HTTP behaviour (params ``crawl.*``; the client is :mod:`stages.crawl_images.client`, the URL
policy :mod:`stages.crawl_images.urlguard`): ``threads`` downloader threads; per origin at most
``per_host.max_connections`` requests at once and ``per_host.delay_s`` seconds between request
starts; ``timeout_s`` per connect and per read, ``deadline_s`` per whole fetch; ``retries`` with
exponential back-off on connection errors, timeouts, 429 and 5xx, honouring ``Retry-After`` up to
``max_retry_after_s``; at most ``max_redirects`` redirects, each hop checked; image bodies above
``max_bytes`` and search pages above ``max_page_bytes`` refused; a ``User-Agent`` naming the
crawler. Opt-outs (``respect_robots``; false switches off both): robots.txt
(:mod:`stages.crawl_images.robots`) of every hop's origin, and an ``X-Robots-Tag`` opt-out (``noai``,
``noimageai``, ``noindex``, ``noimageindex``, ``none``) on any hop's response, make a candidate ``opted_out``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from urllib3.util import Url

from stages.crawl_images.client import RETRY_STATUS, Client, FetchFailed, Hop
from stages.crawl_images.config import CrawlConfig
from stages.crawl_images.journal import Journal, reusable
from stages.crawl_images.robots import Robots
from stages.crawl_images.store import Keeper
from stages.crawl_images.urlguard import Resolver
from stages.crawl_images.validate import opted_out

#: Image bodies up to this many bytes are also kept in memory while they stream to the staging
#: file, and validated from there (not read back from disk): at most this much per downloader
#: thread; a larger body is validated from its file.
KEEP_IN_MEMORY = 8 << 20


class HostGate:
    """Per-origin politeness: at most ``max_conn`` requests at once, ``delay_s`` seconds between starts."""

    def __init__(self, max_conn: int, delay_s: float) -> None:
        self.max_conn, self.delay_s = max(1, max_conn), max(0.0, delay_s)
        self._lock = threading.Lock()
        self._sems: dict[str, threading.BoundedSemaphore] = {}
        self._next: dict[str, float] = {}

    @contextmanager
    def slot(self, host: str) -> Iterator[None]:
        with self._lock:
            sem = self._sems.setdefault(host, threading.BoundedSemaphore(self.max_conn))
        with sem:
            with self._lock:
                now = time.monotonic()
                start = max(now, self._next.get(host, 0.0))
                self._next[host] = start + self.delay_s
            if start > now:
                time.sleep(start - now)
            yield


class Fetcher(Keeper):
    """Downloads candidate images and search pages over HTTP, then validates, stores and journals
    the images (thread-safe). One per crawl run; ``fetched`` counts image downloads that reached
    the network (past the URL guard and robots.txt)."""

    def __init__(
        self, cfg: CrawlConfig, journal: Journal, downloads: dict[str, dict], store_dir: Path, staging: Path
    ) -> None:
        super().__init__(cfg, journal, downloads, store_dir, staging)
        self.gate = HostGate(cfg.per_host_connections, cfg.per_host_delay_s)
        self.client = Client(
            Resolver(cfg.allow_private_hosts, cfg.timeout_s),
            self.gate.slot,
            user_agent=cfg.user_agent,
            timeout_s=cfg.timeout_s,
            deadline_s=cfg.deadline_s,
            retries=cfg.retries,
            backoff_s=cfg.backoff_s,
            max_retry_after_s=cfg.max_retry_after_s,
            max_redirects=cfg.max_redirects,
            pool_size=max(10, cfg.threads * 2),
        )
        self.robots = Robots(self.client, cfg.user_agent, cfg.max_robots_bytes, cfg.max_redirects)
        self.fetched = 0
        self._count_lock = threading.Lock()

    # -- opt-outs, checked on every hop
    def _robots_hop(self, u: Url) -> None:
        if self.cfg.respect_robots:
            self.robots.check(u)

    def _header_opt_out(self, hop: Hop) -> None:
        token = opted_out(hop.headers.get("X-Robots-Tag")) if self.cfg.respect_robots else None
        if token:
            where = "" if hop.status == 200 else f" (on the HTTP {hop.status} response of {hop.url})"
            raise FetchFailed("opted_out", f"X-Robots-Tag: {token}{where}")

    # -- the download of one URL
    def download(self, url: str) -> dict:
        """Fetch ``url`` unless the journal already settles it; returns its journal record.

        Every outcome is journaled: ``kept``, ``invalid_image``, ``unsupported_format``,
        ``download_failed`` (transient ones are tried again next run), ``opted_out``, ``refused_url``.
        """
        rec = self.downloads.get(url)
        if reusable(rec, self.cfg.check_key):
            return rec  # type: ignore[return-value]
        tmp = self.staging_file()
        first = [True]

        def on_hop(u: Url) -> None:
            self._robots_hop(u)
            if first[0]:  # the first request of this download is about to be made
                first[0] = False
                with self._count_lock:
                    self.fetched += 1

        try:
            r = self.client.fetch(
                url,
                max_bytes=self.cfg.max_bytes,
                too_large=f"body larger than crawl.max_bytes {self.cfg.max_bytes}",
                sink=tmp,
                keep=KEEP_IN_MEMORY,
                on_hop=on_hop,
                on_response=self._header_opt_out,
            )
            if r.status != 200:
                n = self.cfg.retries
                retried = f" after {n} {'retry' if n == 1 else 'retries'}" if r.status in RETRY_STATUS and n else ""
                return self.record(
                    url, "download_failed", f"HTTP {r.status}{retried}", transient=r.status in RETRY_STATUS
                )
            if r.spilled:
                return self.keep_file(url, tmp, sha=r.sha256, staged=True)
            return self.keep_file(url, tmp, sha=r.sha256, data=r.body, unwritten=True)
        except FetchFailed as e:
            return self.record(url, e.status, e.reason, transient=e.transient)
        finally:
            tmp.unlink(missing_ok=True)  # a rejected or duplicate file (a kept one was renamed into the store)

    def fetch_page(self, page: str, robots: bool) -> tuple[str, bytes]:
        """The final URL and body (at most ``crawl.max_page_bytes``) of a search-result page;
        ``robots``: honour robots.txt for it (greedy pages; not the configured bing endpoint).

        Raises:
            FetchFailed: refused, opted out, too large, a network error, or a status other than 200
                (``transient`` for 429 and 5xx).
        """
        r = self.client.fetch(
            page,
            max_bytes=self.cfg.max_page_bytes,
            too_large=f"search page larger than crawl.max_page_bytes {self.cfg.max_page_bytes}",
            on_hop=self._robots_hop if robots else None,
        )
        if r.status != 200:
            raise FetchFailed("search_failed", f"search page HTTP {r.status}", transient=r.status in RETRY_STATUS)
        return r.url, r.body

    def close(self) -> None:
        self.client.close()

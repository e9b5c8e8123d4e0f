"""Stage 3, ``crawl_images``: top-N candidate images per concept, stored content-addressed.

Sources (``crawl.source``), all through icrawler's feeder -> parser -> downloader threads:

- ``local`` (default, offline): a folder of ``<concept>.<ext>`` files (``crawl.local_dir``).
- ``urllist``: a JSON map concept -> image URL (or list of URLs), e.g. the WinoGAViL release's
  ``image2url.json``, so the original benchmark's images can be fetched again.
- ``bing``: web image search (icrawler's ``BingParser``); the top ``crawl.top_n`` results per
  concept. ``crawl.bing.endpoint`` exists so tests and benchmarks can use 127.0.0.1.
- ``greedy``: one page of a site per concept (``crawl.greedy.url_template`` with
  ``{concept}``), images taken in page order by icrawler's ``GreedyParser``.
- ``google`` is refused with a clear message (icrawler's Google parser is broken upstream).

The paper (§2.1) kept the top-ranked search result that passed its filters. Here every candidate
is downloaded and validated; ``ocr_filter`` then walks the *kept* candidates in rank order and
keeps the first one without the query text, so a rejected top result falls through.

HTTP behaviour (params ``crawl.*``): ``threads`` downloader threads; per host at most
``per_host.max_connections`` requests at once and ``per_host.delay_s`` seconds between request
starts; ``timeout_s`` per request; ``retries`` retries with exponential back-off
(``backoff_s`` x 2^n) on connection errors, timeouts, 429 and 5xx, honouring ``Retry-After`` up to
``max_retry_after_s`` (urllib3's ``Retry``); at most ``max_redirects`` redirects, each hop checked;
bodies above ``max_bytes`` refused; a ``User-Agent`` naming the crawler. Opt-outs: robots.txt
(``respect_robots``) and ``X-Robots-Tag: noai`` / ``noimageai`` make a candidate ``opted_out``.
Only http/https; ``urllist``/``greedy``/``bing`` image hosts that are or resolve to loopback,
private, link-local or reserved addresses are ``refused_url`` unless ``allow_private_hosts``.

Validation before anything is kept: Pillow decodes the file (the extension is not trusted);
zero-byte, HTML, truncated, smaller than ``min_side`` pixels, and more than ``max_pixels``
pixels (checked from the header, before decoding) are ``invalid_image``. Kept images go to
``data/images/<sha[:2]>/<sha>.<ext>``; the same sha256, or a perceptual hash within
``phash_max_distance`` bits, already kept by an earlier concept is a ``duplicate``.

Resumable: every finished search and download is appended to a journal
(``data/cache/crawl_journal/*.jsonl``, one segment per run, a torn last line ignored) *after*
its file is renamed into the store, so a crawl killed half-way and re-run downloads only what
is missing and never keeps a half-written file; a re-run with the same params downloads nothing
(only transient failures - timeouts, 429, 5xx - are tried again).

Outputs: ``data/crawl/candidates.parquet`` (:class:`schemas.crawl.Candidates`, every candidate's
fate) and ``data/crawl/images.parquet`` (:class:`schemas.crawl.Images`, one row per concept:
``ok``, ``profane``, ``no_results``, ``search_failed``, ``download_failed``, ``invalid_image``,
``duplicate``, ``opted_out``, ``refused_url`` or ``all_rejected`` - mixed failures - with reasons).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import logging
import os
import queue
import shutil
import socket
import tempfile
import threading
import time
import urllib.robotparser
import uuid
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus, urljoin, urlparse

import numpy as np
import pandas as pd
from PIL import Image

from schemas.crawl import Candidates, Images
from schemas.profanity import ConceptFilter
from stages._io import ParamsError, atomic_path, partitions, read_table, section, sha256_file, write_json, write_table
from stages._progress import progress
from stages.filter_profanity import FILTER_PATH

IMAGES_PATH = "data/crawl/images.parquet"
CANDIDATES_PATH = "data/crawl/candidates.parquet"
STORE_DIR = "data/images"
JOURNAL_DIR = "data/cache/crawl_journal"
METRICS_PATH = "data/metrics/crawl_images.json"
IMAGE_EXTS = ("jpg", "jpeg", "png", "gif", "bmp", "webp", "tif", "tiff")
SOURCES = ("local", "urllist", "bing", "greedy")
REQUIRED = (
    "source", "local_dir", "urllist_path", "top_n", "threads", "timeout_s", "retries", "backoff_s", "max_retry_after_s",
    "max_redirects", "max_bytes", "per_host", "user_agent", "respect_robots", "min_side", "max_pixels", "phash_max_distance",
    "allow_private_hosts", "partition_size", "bing", "greedy",
)  # fmt: skip
RETRY_STATUS = (429, 500, 502, 503, 504)
_FORMAT_EXT = {"JPEG": "jpg", "PNG": "png", "GIF": "gif", "BMP": "bmp", "WEBP": "webp", "TIFF": "tif", "MPO": "jpg"}
_NOAI = {"noai", "noimageai"}
log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- validation (pure)
@dataclass(frozen=True)
class ImageInfo:
    width: int
    height: int
    format: str
    phash: str | None = None  # 64-bit DCT perceptual hash (imagehash.phash), 16 hex digits


class InvalidImage(ValueError):
    """A downloaded file is not an acceptable image; the message is the reason."""


def inspect_image(path: Path, min_side: int, max_pixels: int, with_phash: bool = False) -> ImageInfo:
    """Decode ``path`` with Pillow and check its size (and hash it perceptually, from the same decode).

    Args:
        min_side: minimum of width and height, pixels.
        max_pixels: maximum width*height (checked from the header *before* decoding).
        with_phash: also compute ``imagehash.phash`` of the decoded image.

    Raises:
        InvalidImage: empty, not an image, truncated, too small, or too many pixels.
    """
    if path.stat().st_size == 0:
        raise InvalidImage("zero-byte file")
    try:
        with Image.open(path) as im:
            w, h = im.size
            fmt = im.format or "unknown"
            if w * h > max_pixels:
                raise InvalidImage(f"{w}x{h} = {w * h} pixels > crawl.max_pixels {max_pixels}")
            im.load()  # full decode: catches truncated files
            ph = phash_of(im) if with_phash and min(w, h) >= min_side else None
    except InvalidImage:
        raise
    except Image.DecompressionBombError as e:
        raise InvalidImage(f"decompression bomb refused: {e}") from e
    except (OSError, SyntaxError, ValueError) as e:
        raise InvalidImage(f"not a decodable image ({type(e).__name__}: {e})") from e
    if min(w, h) < min_side:
        raise InvalidImage(f"{w}x{h} smaller than crawl.min_side {min_side} px")
    return ImageInfo(w, h, fmt, ph)


def phash_of(im: Image.Image) -> str:
    """64-bit DCT perceptual hash (``imagehash.phash``) as 16 hex digits."""
    import imagehash

    return str(imagehash.phash(im))


def store_image(src: Path, sha: str, fmt: str, store_dir: Path, move: bool = False) -> Path:
    """Put ``src`` at ``store_dir/<sha[:2]>/<sha>.<ext>`` atomically (no-op if present).

    ``move``: ``src`` is a staging file on the store's file system; it is renamed into place
    (atomic, no copy). Otherwise it is copied to a temp file next to the target, then renamed.
    """
    dest = store_dir / sha[:2] / f"{sha}.{_FORMAT_EXT.get(fmt, 'img')}"
    if not dest.exists():
        if move:
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.chmod(src, 0o644)
            os.replace(src, dest)
        else:
            with atomic_path(dest) as tmp:
                shutil.copyfile(src, tmp)
    return dest


def safe_concept_name(concept: str) -> bool:
    """Whether a concept can name a file (no separators, NUL, '.'/'..', <= 200 bytes)."""
    return (
        bool(concept)
        and concept not in (".", "..")
        and "/" not in concept
        and "\\" not in concept
        and "\x00" not in concept
        and len(concept.encode()) <= 200
    )


def check_url(url: str, allow_private: bool = False) -> str | None:
    """Why ``url`` may not be fetched, or None.

    Only http/https. Unless ``allow_private``, hosts that are or resolve to loopback, private,
    link-local, multicast, reserved or unspecified addresses are refused (a URL list from
    elsewhere must not make the crawler probe the local network). Unresolvable hosts pass here
    and fail as downloads.
    """
    parsed = urlparse(url)
    scheme = parsed.scheme.lower()
    if scheme not in ("http", "https"):
        return f"URL scheme '{scheme}' refused (http/https only)"
    if allow_private:
        return None
    host = parsed.hostname or ""
    try:
        addrs = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except (socket.gaierror, UnicodeError, ValueError):
        return None
    for a in addrs:
        ip = ipaddress.ip_address(a.split("%")[0])
        if ip.is_loopback or ip.is_private or ip.is_link_local or ip.is_multicast or ip.is_reserved or ip.is_unspecified:
            return f"host {host} resolves to non-public address {ip}: refused (set crawl.allow_private_hosts to allow)"
    return None


def opted_out(x_robots_tag: str | None) -> str | None:
    """The ``noai``/``noimageai`` directive in an ``X-Robots-Tag`` header value, or None.

    Directives may be scoped to a user agent (``"otherbot: noai"``); any scope counts.
    """
    if not x_robots_tag:
        return None
    for part in x_robots_tag.lower().replace(";", ",").split(","):
        token = part.rsplit(":", 1)[-1].strip()
        if token in _NOAI:
            return token
    return None


# --------------------------------------------------------------------------- journal
class Journal:
    """Append-only JSON-lines journal of finished searches and downloads (resumable crawls).

    Each writer appends to its own segment ``<dir>/seg-<ns>-<pid>-<rand>.jsonl`` (so parallel
    partitions never interleave), flushing every line. :meth:`load` merges segments in name
    order (later records win) and skips a torn last line left by a killed process.
    """

    def __init__(self, directory: str | os.PathLike) -> None:
        self.dir = Path(directory)
        self._lock = threading.Lock()
        self._fh: Any = None

    def load(self) -> tuple[dict[str, dict], dict[str, dict]]:
        """(searches by key, downloads by url) from every segment."""
        searches: dict[str, dict] = {}
        downloads: dict[str, dict] = {}
        for seg in sorted(self.dir.glob("seg-*.jsonl")) if self.dir.is_dir() else []:
            with open(seg, encoding="utf-8") as f:
                for line in f:
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError:
                        continue  # torn line of a killed writer
                    if rec.get("kind") == "search":
                        searches[rec["key"]] = rec
                    elif rec.get("kind") == "download":
                        downloads[rec["url"]] = rec
        return searches, downloads

    def append(self, rec: dict[str, Any]) -> None:
        line = json.dumps(rec, sort_keys=True) + "\n"
        with self._lock:
            if self._fh is None:
                self.dir.mkdir(parents=True, exist_ok=True)
                name = f"seg-{time.time_ns()}-{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl"
                self._fh = open(self.dir / name, "a", encoding="utf-8")
            self._fh.write(line)
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None

    def compact(self) -> None:
        """Rewrite all segments as one (latest record per key), atomically, then drop the rest."""
        self.close()
        segs = sorted(self.dir.glob("seg-*.jsonl")) if self.dir.is_dir() else []
        if len(segs) <= 1:
            return
        searches, downloads = self.load()
        target = self.dir / f"seg-{time.time_ns()}-{os.getpid()}-compact.jsonl"
        with atomic_path(target, ".part") as tmp:
            with open(tmp, "w", encoding="utf-8") as f:
                for rec in [*searches.values(), *downloads.values()]:
                    f.write(json.dumps(rec, sort_keys=True) + "\n")
        for s in segs:
            s.unlink(missing_ok=True)


# --------------------------------------------------------------------------- config
@dataclass(frozen=True)
class CrawlConfig:
    """The ``crawl`` params section, typed. Units: seconds, pixels, bytes."""

    source: str
    top_n: int
    threads: int
    timeout_s: float
    retries: int
    backoff_s: float
    max_retry_after_s: int
    max_redirects: int
    max_bytes: int
    per_host_connections: int
    per_host_delay_s: float
    user_agent: str
    respect_robots: bool
    min_side: int
    max_pixels: int
    phash_max_distance: int | None
    allow_private_hosts: bool

    @classmethod
    def from_params(cls, p: dict[str, Any]) -> CrawlConfig:
        source = p["source"]
        if source == "google":
            raise ParamsError("crawl.source=google is not supported: icrawler's Google parser is broken upstream; use bing")
        if source not in SOURCES:
            raise ParamsError(f"crawl.source={source!r}: expected one of {SOURCES}")
        if int(p["top_n"]) < 1 or int(p["threads"]) < 1:
            raise ParamsError("crawl.top_n and crawl.threads must be >= 1")
        host = p["per_host"] or {}
        d = p["phash_max_distance"]
        return cls(
            source, int(p["top_n"]), int(p["threads"]), float(p["timeout_s"]), int(p["retries"]), float(p["backoff_s"]),
            int(p["max_retry_after_s"]), int(p["max_redirects"]), int(p["max_bytes"]), int(host.get("max_connections", 2)),
            float(host.get("delay_s", 0.0)), str(p["user_agent"]), bool(p["respect_robots"]), int(p["min_side"]),
            int(p["max_pixels"]), None if d is None else int(d), bool(p["allow_private_hosts"]),
        )  # fmt: skip

    @property
    def check_key(self) -> str:
        """What a journal record's validity depends on (a change re-validates)."""
        return f"min_side={self.min_side};max_pixels={self.max_pixels};private={self.allow_private_hosts};robots={self.respect_robots};max_bytes={self.max_bytes}"


def reusable(rec: dict | None, check_key: str) -> bool:
    """Whether a journal download record stands: not transient, same checks, file still stored."""
    if rec is None or rec.get("transient") or rec.get("check") != check_key:
        return False
    return rec["status"] != "kept" or Path(rec["path"]).exists()


# --------------------------------------------------------------------------- fetching
class _HostGate:
    """Per-host politeness: at most ``max_conn`` requests at once, ``delay_s`` between starts."""

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


class RefusedRedirect(Exception):
    """A redirect pointed at a URL the crawler may not fetch."""


class Keeper:
    """Validates, stores and journals fetched files (thread-safe); the local source uses it alone."""

    def __init__(self, cfg: CrawlConfig, journal: Journal, downloads: dict[str, dict], store_dir: Path) -> None:
        self.cfg, self.journal, self.downloads, self.store_dir = cfg, journal, downloads, store_dir

    def _record(self, url: str, status: str, reason: str | None = None, transient: bool = False, check: str | None = None, **image: Any) -> dict:
        rec = {"kind": "download", "url": url, "status": status, "reason": reason, "transient": transient, "check": check or self.cfg.check_key, **image}
        self.downloads[url] = rec
        self.journal.append(rec)
        return rec

    def keep_file(self, url: str, file: Path, check: str | None = None, sha: str | None = None, move: bool = False) -> dict:
        """Validate ``file`` (fetched from ``url``), store it and journal the outcome.

        ``sha``: its sha256 when already known (hashed while downloading); ``move``: rename a
        staging file into the store instead of copying.
        """
        try:
            info = inspect_image(file, self.cfg.min_side, self.cfg.max_pixels, with_phash=True)
        except InvalidImage as e:
            return self._record(url, "invalid_image", str(e), check=check)
        sha = sha or sha256_file(file)
        dest = store_image(file, sha, info.format, self.store_dir, move=move)
        return self._record(
            url, "kept", None, check=check, sha256=sha, path=dest.as_posix(), width=info.width, height=info.height,
            format=info.format, bytes=dest.stat().st_size, phash=info.phash,
        )  # fmt: skip


class Fetcher(Keeper):
    """Downloads candidate images over HTTP, then validates, stores and journals them (thread-safe).

    One per crawl run; the requests session is icrawler's, configured here with the
    User-Agent, urllib3 retries and a redirect check.
    """

    def __init__(self, cfg: CrawlConfig, session: Any, journal: Journal, downloads: dict[str, dict], store_dir: Path, staging: Path) -> None:
        import requests
        from requests.adapters import HTTPAdapter
        from urllib3.util import Retry

        super().__init__(cfg, journal, downloads, store_dir)
        self.session, self.staging = session, staging
        self.gate = _HostGate(cfg.per_host_connections, cfg.per_host_delay_s)
        self._robots: dict[str, Any] = {}
        self._robots_lock = threading.Lock()
        self.fetched = 0
        self._count_lock = threading.Lock()
        retry = Retry(
            total=cfg.retries, connect=cfg.retries, read=cfg.retries, status=cfg.retries, redirect=None,
            backoff_factor=cfg.backoff_s, status_forcelist=RETRY_STATUS, allowed_methods=frozenset({"GET", "HEAD"}),
            respect_retry_after_header=True, retry_after_max=cfg.max_retry_after_s, raise_on_status=False,
        )  # fmt: skip
        pool = max(10, cfg.threads * 2)
        adapter = HTTPAdapter(max_retries=retry, pool_connections=pool, pool_maxsize=pool)
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        session.headers["User-Agent"] = cfg.user_agent
        session.max_redirects = cfg.max_redirects
        session.hooks["response"] = [self._check_redirect]
        self._requests = requests

    # -- helpers
    def _check_redirect(self, r: Any, *args: Any, **kwargs: Any) -> None:
        if r.is_redirect:
            target = urljoin(r.url, r.headers.get("location", ""))
            problem = check_url(target, self.cfg.allow_private_hosts)
            if problem:
                raise RefusedRedirect(f"redirect to {target}: {problem}")

    def robots_problem(self, url: str) -> str | None:
        """robots.txt of the URL's host (fetched once per host) disallowing our User-Agent, or None.

        404/other errors allow everything; 401/403 disallow everything (RFC 9309 §2.3.1).
        """
        if not self.cfg.respect_robots:
            return None
        u = urlparse(url)
        base = f"{u.scheme}://{u.netloc}"
        with self._robots_lock:
            rp = self._robots.get(base)
            if rp is None:
                rp = urllib.robotparser.RobotFileParser()
                try:
                    with self.gate.slot(u.netloc):
                        r = self.session.get(base + "/robots.txt", timeout=self.cfg.timeout_s)
                    if r.status_code in (401, 403):
                        rp.disallow_all = True
                    elif r.status_code == 200:
                        rp.parse(r.text.splitlines())
                    else:
                        rp.allow_all = True
                except Exception:  # noqa: BLE001 - unreachable robots.txt: allowed (RFC 9309 §2.3.1.3 is for 5xx; we are lenient)
                    rp.allow_all = True
                self._robots[base] = rp
        agent = self.cfg.user_agent.split("/", 1)[0]
        if not rp.can_fetch(agent, url):
            return f"robots.txt of {u.netloc} disallows {agent}"
        return None

    # -- the download of one URL
    def download(self, url: str) -> dict:
        """Fetch ``url`` unless the journal already settles it; returns its journal record."""
        rec = self.downloads.get(url)
        if reusable(rec, self.cfg.check_key):
            return rec  # type: ignore[return-value]
        problem = check_url(url, self.cfg.allow_private_hosts)
        if problem:
            return self._record(url, "refused_url", problem)
        problem = self.robots_problem(url)
        if problem:
            return self._record(url, "opted_out", problem)
        req = self._requests
        tmp = self.staging / (hashlib.sha1(url.encode()).hexdigest() + f"-{threading.get_ident()}.download")
        try:
            with self.gate.slot(urlparse(url).netloc):
                with self.session.get(url, timeout=self.cfg.timeout_s, stream=True) as r:
                    with self._count_lock:
                        self.fetched += 1
                    if r.status_code != 200:
                        retried = f" after {self.cfg.retries} retries" if r.status_code in RETRY_STATUS else ""
                        return self._record(url, "download_failed", f"HTTP {r.status_code}{retried}", transient=r.status_code in RETRY_STATUS)
                    token = opted_out(r.headers.get("X-Robots-Tag"))
                    if token:
                        return self._record(url, "opted_out", f"X-Robots-Tag: {token}")
                    size = 0
                    h = hashlib.sha256()
                    with open(tmp, "wb") as f:
                        for chunk in r.iter_content(1 << 16):
                            size += len(chunk)
                            if size > self.cfg.max_bytes:
                                break
                            h.update(chunk)
                            f.write(chunk)
                    if size > self.cfg.max_bytes:
                        return self._record(url, "invalid_image", f"body larger than crawl.max_bytes {self.cfg.max_bytes}")
            return self.keep_file(url, tmp, sha=h.hexdigest(), move=True)
        except RefusedRedirect as e:
            return self._record(url, "refused_url", str(e))
        except req.exceptions.TooManyRedirects as e:
            return self._record(url, "download_failed", f"redirect loop: {e}"[:300])
        except req.exceptions.RetryError as e:
            return self._record(url, "download_failed", f"retries exhausted: {e}"[:300], transient=True)
        except (req.exceptions.RequestException, OSError) as e:
            return self._record(url, "download_failed", f"{type(e).__name__}: {e}"[:300], transient=True)
        finally:
            tmp.unlink(missing_ok=True)


def _crawler_classes() -> tuple[type, type, type, type, type]:
    """icrawler component subclasses (imported lazily: icrawler is only needed for crawling)."""
    from icrawler import Crawler, Downloader, Feeder
    from icrawler.builtin.bing import BingParser
    from icrawler.builtin.greedy import GreedyParser

    class JournalFeeder(Feeder):
        """Feeds search pages to the parsers and already-known image URLs straight to the downloaders."""

        def feed(self, pages: list[str], images: list[str], downloader_queue: Any) -> None:
            for page in pages:
                self.output(page)
            for url in images:
                downloader_queue.put({"file_url": url})

    class SearchParserMixin:
        """Keeps the top ``top_n`` image URLs of each search page and journals them."""

        run: CrawlRun

        def parse(self, response: Any, **kwargs: Any) -> Iterator[dict]:
            page = (response.history[0].url if response.history else response.url)
            if response.status_code != 200:
                self.run.search_done(page, error=f"search page HTTP {response.status_code}", transient=response.status_code in RETRY_STATUS)
                return
            urls: list[str] = []
            for task in super().parse(response, **kwargs):  # type: ignore[misc]
                if isinstance(task, dict) and task["file_url"] not in urls:
                    urls.append(task["file_url"])
                if len(urls) >= self.run.cfg.top_n:
                    break
            self.run.search_done(page, urls=urls)
            for url in urls:
                if not reusable(self.run.fetcher.downloads.get(url), self.run.cfg.check_key):
                    yield {"file_url": url}

    class BingSearchParser(SearchParserMixin, BingParser):
        pass

    class GreedySearchParser(SearchParserMixin, GreedyParser):
        pass

    class JournalDownloader(Downloader):
        """Downloads through :class:`Fetcher`; exits only when the parsers are done and the queue is empty."""

        run: CrawlRun

        def worker_exec(self, max_num: int = 0, default_ext: str = "", queue_timeout: float = 0.1, req_timeout: float = 5, **kwargs: Any) -> None:
            while True:
                try:
                    task = self.in_queue.get(timeout=queue_timeout)
                except queue.Empty:
                    if self.signal.get("parser_exited"):
                        break
                    continue
                try:
                    self.run.fetcher.download(task["file_url"])
                except Exception as e:  # noqa: BLE001 - one bad URL must not kill the thread
                    self.run.fetcher._record(task["file_url"], "download_failed", f"{type(e).__name__}: {e}"[:300], transient=True)
                finally:
                    self.run.progress()
                    self.in_queue.task_done()

    class FastCrawler(Crawler):
        """icrawler's Crawler with a 20 ms completion poll (its own sleeps 1 s per check)."""

        def crawl(self, feeder_kwargs: dict, parser_kwargs: dict, downloader_kwargs: dict) -> None:  # type: ignore[override]
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

    return JournalFeeder, BingSearchParser, GreedySearchParser, JournalDownloader, FastCrawler


class CrawlRun:
    """One crawl of some concepts from a web source with icrawler (search pages + downloads)."""

    def __init__(
        self, cfg: CrawlConfig, journal: Journal, searches: dict[str, dict], downloads: dict[str, dict], store_dir: Path, staging: Path
    ) -> None:
        self.cfg, self.journal, self.searches, self.downloads = cfg, journal, searches, downloads
        self.store_dir, self.staging = store_dir, staging
        self.pages: dict[str, str] = {}  # page url -> concept
        self._done = 0
        self._total = 0
        self._last = time.monotonic()
        self._t0 = time.monotonic()
        self._lock = threading.Lock()
        self.fetcher: Fetcher

    def search_key(self, page: str) -> str:
        return f"{self.cfg.source}|{page}"

    def search_done(self, page: str, urls: list[str] | None = None, error: str | None = None, transient: bool = False) -> None:
        """Record a fetched search page's top URLs (or its error) in the journal."""
        rec = {"kind": "search", "key": self.search_key(page), "concept": self.pages.get(page), "urls": urls or [], "error": error, "transient": transient}
        self.searches[rec["key"]] = rec
        self.journal.append(rec)  # transient failures too: they explain the fate, and are retried next run

    def progress(self) -> None:
        with self._lock:
            self._done += 1
            now = time.monotonic()
            if now - self._last >= 5 and self._total >= 50:
                rate = self._done / max(now - self._t0, 1e-9)
                print(f"crawl_images: {self._done}/{self._total} downloads [{rate:.1f}/s, ETA {(self._total - self._done) / max(rate, 1e-9):.0f} s]", flush=True)
                self._last = now

    def run(self, pages: dict[str, str], images: list[str], domains: list[str]) -> None:
        """Fetch search ``pages`` (page url -> concept) and image URLs ``images``."""
        Feeder, BingP, GreedyP, Down, FastCrawler = _crawler_classes()
        self.pages = dict(pages)
        self._total = len(images) + len(pages) * self.cfg.top_n
        parser_cls = GreedyP if self.cfg.source == "greedy" else BingP
        capture = _ErrorCapture()
        crawler = FastCrawler(
            feeder_cls=Feeder, parser_cls=parser_cls, downloader_cls=Down, feeder_threads=1,
            parser_threads=max(1, min(4, self.cfg.threads // 2)), downloader_threads=self.cfg.threads,
            storage={"root_dir": str(self.staging)}, log_level=logging.CRITICAL,
        )  # fmt: skip
        crawler.parser.logger.addHandler(capture)
        crawler.parser.logger.setLevel(logging.ERROR)
        self.fetcher = Fetcher(self.cfg, crawler.session, self.journal, self.downloads, self.store_dir, self.staging)
        crawler.parser.run = self
        crawler.downloader.run = self
        parser_kwargs: dict[str, Any] = {"queue_timeout": 0.1, "req_timeout": self.cfg.timeout_s, "max_retry": 1}
        if self.cfg.source == "greedy":
            parser_kwargs["domains"] = domains
        crawler.crawl(
            feeder_kwargs={"pages": list(pages), "images": images, "downloader_queue": crawler.downloader.in_queue},
            parser_kwargs=parser_kwargs,
            downloader_kwargs={"max_num": 0, "queue_timeout": 0.1, "req_timeout": self.cfg.timeout_s},
        )
        for page in pages:  # pages whose fetch raised (timeouts, connection errors, redirect loops)
            if self.search_key(page) not in self.searches:
                self.search_done(page, error=capture.errors.get(page, "search page not fetched"), transient=True)


class _ErrorCapture(logging.Handler):
    """icrawler parser log records of failed page fetches (page url -> message)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.errors: dict[str, str] = {}

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        if record.msg.startswith("Exception caught when fetching page") and len(args) >= 2:
            self.errors[str(args[0])] = f"search page: {type(args[1]).__name__}: {args[1]}"[:300]


# --------------------------------------------------------------------------- per-source candidate lists
def page_url(source: str, concept: str, p: dict[str, Any]) -> str:
    """The search page of ``concept`` for a web source, normalised as requests sends it."""
    from requests.models import PreparedRequest

    if source == "bing":
        url = f"{p['bing']['endpoint']}?q={quote_plus(concept)}&first=0"
    else:
        template = p["greedy"]["url_template"]
        if "{concept}" not in template:
            raise ParamsError("crawl.greedy.url_template needs a {concept} placeholder")
        url = template.replace("{concept}", quote(concept, safe=""))
    req = PreparedRequest()
    req.prepare_url(url, None)
    return str(req.url)


def local_candidates(concepts: Iterable[str], local_dir: Path) -> dict[str, list[str]]:
    """``<local_dir>/<concept>.<ext>`` files per concept (unsafe names never match a file).

    Raises:
        FileNotFoundError: ``local_dir`` is not a folder.
    """
    if not local_dir.is_dir():
        raise FileNotFoundError(f"crawl.local_dir {local_dir} is not a folder of <concept>.<ext> images")
    by_stem: dict[str, list[str]] = {}
    for f in sorted(local_dir.iterdir()):
        if f.is_file() and f.suffix.lower().lstrip(".") in IMAGE_EXTS:
            by_stem.setdefault(f.stem, []).append(f.as_posix())
    return {c: by_stem[c] for c in concepts if safe_concept_name(c) and c in by_stem}


def load_url_map(path: str) -> dict[str, list[str]]:
    """A JSON object concept -> URL or [URLs] (keys lower-cased and stripped).

    Raises:
        ParamsError: not a JSON object of strings / lists of strings.
    """
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict):
        raise ParamsError(f"{path}: expected a JSON object concept -> URL")
    out: dict[str, list[str]] = {}
    for k, v in data.items():
        urls = [v] if isinstance(v, str) else v
        if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
            raise ParamsError(f"{path}: value of {k!r} must be a URL or a list of URLs")
        out[k.strip().lower()] = urls
    return out


def source_candidates(source: str, concepts: list[str], p: dict[str, Any], searches: dict[str, dict]) -> dict[str, tuple[list[str], str | None]]:
    """concept -> (candidate URLs in rank order, search error) from params and finished searches."""
    if source == "local":
        found = local_candidates(concepts, Path(p["local_dir"]))
        return {c: (found.get(c, [])[: int(p["top_n"])], None if safe_concept_name(c) else "concept name is not a safe file name") for c in concepts}
    if source == "urllist":
        m = load_url_map(p["urllist_path"])
        return {c: (m.get(c, [])[: int(p["top_n"])], None) for c in concepts}
    out = {}
    for c in concepts:
        rec = searches.get(f"{source}|{page_url(source, c, p)}")
        out[c] = (list(rec["urls"]), rec["error"]) if rec else ([], "not searched")
    return out


# --------------------------------------------------------------------------- partitions (map) and registration (reduce)
def plan(params: dict[str, Any]) -> list[list[str]]:
    """The ok concepts of ``concept_filter``, in partitions of ``crawl.partition_size``."""
    p = section(params, "crawl", REQUIRED)
    cf = read_table(FILTER_PATH, ConceptFilter)
    return partitions(sorted(cf.loc[cf["status"] == "ok", "concept"]), p["partition_size"])


def _clean_store(store: Path) -> None:
    """Remove what a killed run left in the store (``.<name>.*.tmp`` files, ``.staging-*`` folders):
    never a half-written image."""
    if store.is_dir():
        for d in store.glob(".staging-*"):
            shutil.rmtree(d, ignore_errors=True)
        for f in store.rglob(".*.tmp"):
            f.unlink(missing_ok=True)


def work(params: dict[str, Any], concepts: list[str]) -> dict[str, int]:
    """Search and download the candidates of ``concepts`` (one partition); journals everything.

    Returns counts: ``{"concepts", "fetched"}`` (HTTP downloads made in this call).
    """
    p = section(params, "crawl", REQUIRED)
    cfg = CrawlConfig.from_params(p)
    journal = Journal(JOURNAL_DIR)
    store = Path(STORE_DIR)
    _clean_store(store)
    fetched = 0
    try:
        store.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".staging-", dir=store) as tmpdir:  # same file system: renames
            searches, downloads = journal.load()
            if cfg.source == "local":
                cands = source_candidates("local", concepts, p, searches)
                todo = sorted({u for urls, _ in cands.values() for u in urls})
                keeper = Keeper(cfg, journal, downloads, store)
                todo = [u for u in todo if not reusable(downloads.get(u), _local_key(cfg, u))]

                def one(path: str) -> None:
                    keeper.keep_file(path, Path(path), check=_local_key(cfg, path))

                with ThreadPoolExecutor(cfg.threads) as pool:
                    for _ in progress(pool.map(one, todo), "crawl_images (local)", total=len(todo)):
                        pass
                return {"concepts": len(concepts), "fetched": 0}
            run = CrawlRun(cfg, journal, searches, downloads, store, Path(tmpdir))
            if cfg.source == "urllist":
                cands = source_candidates("urllist", concepts, p, searches)
                images = list(dict.fromkeys(u for urls, _ in cands.values() for u in urls if not reusable(downloads.get(u), cfg.check_key)))
                pages: dict[str, str] = {}
            else:
                pages = {page_url(cfg.source, c, p): c for c in concepts}
                cached = {pg: c for pg, c in pages.items() if (r := searches.get(f"{cfg.source}|{pg}")) and not r.get("transient")}
                images = list(dict.fromkeys(u for pg in cached for u in searches[f"{cfg.source}|{pg}"]["urls"] if not reusable(downloads.get(u), cfg.check_key)))
                pages = {pg: c for pg, c in pages.items() if pg not in cached}
            domains = list({f"{urlparse(pg).scheme}://{urlparse(pg).netloc}" for pg in pages})
            if pages or images:
                run.run(pages, images, domains)
                fetched = run.fetcher.fetched
    finally:
        journal.close()
    return {"concepts": len(concepts), "fetched": fetched}


def _local_key(cfg: CrawlConfig, path: str) -> str:
    st = os.stat(path)
    return f"{cfg.check_key};size={st.st_size};mtime_ns={st.st_mtime_ns}"


def register(
    concept_filter: pd.DataFrame,
    candidates: dict[str, tuple[list[str], str | None]],
    downloads: dict[str, dict],
    source: str,
    phash_max_distance: int | None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Decide every candidate's and every concept's fate (pure; no I/O).

    Args:
        concept_filter: :class:`schemas.profanity.ConceptFilter` rows (concept, status, reason).
        candidates: concept -> (URLs in rank order, search error or None).
        downloads: URL -> journal record (``status`` kept/invalid_image/download_failed/
            opted_out/refused_url, ``reason``, and for kept: sha256, path, width, height,
            format, bytes, phash).
        phash_max_distance: kept images whose 64-bit perceptual hashes differ in at most this
            many bits from an image kept by an earlier concept are duplicates; None: sha256 only.

    Returns:
        (:class:`schemas.crawl.Candidates` rows, :class:`schemas.crawl.Images` rows), sorted by
        concept (and rank). Concepts own images in sorted order, so results do not depend on
        download order or partitioning.
    """
    cand_rows: list[dict[str, Any]] = []
    img_rows: list[dict[str, Any]] = []
    owner: dict[str, str] = {}
    hashes = np.zeros(max(1, sum(len(u) for u, _ in candidates.values())), dtype=np.uint64)
    hash_owner: list[str] = []
    for concept, status, reason in sorted(zip(concept_filter["concept"], concept_filter["status"], concept_filter["reason"])):
        row: dict[str, Any] = {"concept": concept, "source": source, "candidates_kept": 0}
        if status != "ok":
            img_rows.append({**row, "status": "profane", "reason": reason})
            continue
        urls, search_error = candidates.get(concept, ([], None))
        if not urls:
            if search_error and search_error != "concept name is not a safe file name":
                img_rows.append({**row, "status": "search_failed", "reason": search_error})
            else:
                img_rows.append({**row, "status": "no_results", "reason": f"no {source} result for '{concept}'" + (f" ({search_error})" if search_error else "")})
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
                elif phash_max_distance is not None and hash_owner:
                    h = np.uint64(int(rec["phash"], 16))
                    dist = np.bitwise_count(hashes[: len(hash_owner)] ^ h)
                    near = [(int(d), hash_owner[i]) for i in np.flatnonzero(dist <= phash_max_distance) for d in [dist[i]] if hash_owner[i] != concept]
                    if near:
                        d, who = min(near)
                        c |= {"status": "duplicate", "reason": f"near-duplicate of '{who}' (phash distance {d} <= {phash_max_distance})"}
                if c["status"] == "kept":
                    owner[sha] = concept
                    hashes[len(hash_owner)] = np.uint64(int(rec["phash"], 16))
                    hash_owner.append(concept)
            mine.append(c)
        cand_rows += mine
        kept = [c for c in mine if c["status"] == "kept"]
        problems = "; ".join(f"#{c['rank']} {c['url']}: {c['reason']}" for c in mine if c["status"] != "kept")
        if kept:
            top = kept[0]
            img_rows.append(
                {**row, "status": "ok", "reason": problems or None, "source_url": top["url"], "candidates_kept": len(kept),
                 **{k: top[k] for k in ("sha256", "path", "width", "height", "format", "bytes")}}
            )  # fmt: skip
        else:
            kinds = {c["status"] for c in mine}
            img_rows.append({**row, "status": kinds.pop() if len(kinds) == 1 else "all_rejected", "reason": problems})
    cands = pd.DataFrame(cand_rows, columns=list(Candidates.to_schema().columns))
    images = pd.DataFrame(img_rows, columns=list(Images.to_schema().columns))
    for df in (cands, images):
        for col in ("width", "height", "bytes"):
            df[col] = df[col].astype("Int64")
    return cands, images


def reduce(params: dict[str, Any], results: list[dict[str, int]]) -> dict[str, Any]:
    """Register all partitions' journaled results into the two tables; compact the journal."""
    p = section(params, "crawl", REQUIRED)
    cfg = CrawlConfig.from_params(p)
    cf = read_table(FILTER_PATH, ConceptFilter)
    journal = Journal(JOURNAL_DIR)
    searches, downloads = journal.load()
    wanted = sorted(cf.loc[cf["status"] == "ok", "concept"])
    cands = source_candidates(cfg.source, wanted, p, searches)
    cand_df, images = register(cf, cands, downloads, cfg.source, cfg.phash_max_distance)
    write_table(cand_df, CANDIDATES_PATH, Candidates)
    write_table(images, IMAGES_PATH, Images)
    journal.compact()
    fetched = sum(r.get("fetched", 0) for r in results)
    print(f"crawl_images: {fetched} HTTP download(s) this run, {len(cand_df)} candidates, {int((images['status'] == 'ok').sum())} concepts with an image", flush=True)
    metrics = {
        "source": cfg.source,
        "concepts": len(images),
        "by_status": images["status"].value_counts().sort_index().to_dict(),
        "candidates": len(cand_df),
        "candidates_by_status": cand_df["status"].value_counts().sort_index().to_dict(),
    }
    write_json(METRICS_PATH, metrics)
    return metrics


def crawl(concept_filter: pd.DataFrame, params: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Crawl and register ``concept_filter``'s ok concepts in the current directory (no files written
    besides the store and the journal); returns (candidates, images). For tests and notebooks."""
    p = section(params, "crawl", REQUIRED)
    cfg = CrawlConfig.from_params(p)
    wanted = sorted(concept_filter.loc[concept_filter["status"] == "ok", "concept"])
    work(params, wanted)
    searches, downloads = Journal(JOURNAL_DIR).load()
    return register(concept_filter, source_candidates(cfg.source, wanted, p, searches), downloads, cfg.source, cfg.phash_max_distance)


def run(params: dict[str, Any]) -> dict[str, Any]:
    """Stage entry point: concept_filter -> candidates + images tables, content-addressed store."""
    return reduce(params, [work(params, part) for part in plan(params)])

"""Stage 3, ``crawl_images``: one image per concept, stored content-addressed (sha256).

Sources (``crawl.source``):

- ``local`` (default, offline): a folder of ``<concept>.<ext>`` files (``crawl.local_dir``).
- ``urllist``: a JSON map concept -> image URL (e.g. the WinoGAViL release's
  ``image2url.json``), downloaded with icrawler's ``UrlListCrawler``.
- ``bing``: web image search with icrawler's ``BingImageCrawler`` (needs internet); the top
  ``crawl.top_n`` results per concept, the first valid one kept (paper §2.1 took the top
  search result). ``crawl.bing.endpoint`` exists so tests can point it at 127.0.0.1.

Every downloaded file is validated before it is kept: decoded by Pillow (the extension is not
trusted), at least ``crawl.min_side`` pixels on its short side, at most ``crawl.max_pixels``
pixels (decompression bombs refused). Kept images go to ``data/images/<sha[:2]>/<sha>.<ext>``;
an image already kept for another concept is a ``duplicate``. Every concept ends with one row:
``ok``, ``profane``, ``no_results``, ``download_failed``, ``invalid_image`` or ``duplicate``,
with the reason.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import logging
import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus, urlparse

import pandas as pd
from PIL import Image

from schemas.crawl import Images
from schemas.profanity import ConceptFilter
from stages._io import (
    ParamsError,
    atomic_path,
    read_table,
    section,
    sha256_file,
    write_json,
    write_table,
)
from stages._progress import progress
from stages.filter_profanity import FILTER_PATH

IMAGES_PATH = "data/crawl/images.parquet"
STORE_DIR = "data/images"
METRICS_PATH = "data/metrics/crawl_images.json"
IMAGE_EXTS = ("jpg", "jpeg", "png", "gif", "bmp", "webp", "tif", "tiff")
_FORMAT_EXT = {"JPEG": "jpg", "PNG": "png", "GIF": "gif", "BMP": "bmp", "WEBP": "webp", "TIFF": "tif", "MPO": "jpg"}


# --------------------------------------------------------------------------- pure core
@dataclass
class Candidate:
    """One fetched (or failed) search result for a concept, in rank order."""

    url: str
    file: Path | None = None
    error: str | None = None


@dataclass(frozen=True)
class ImageInfo:
    width: int
    height: int
    format: str


class InvalidImage(ValueError):
    """A downloaded file is not an acceptable image; the message is the reason."""


def inspect_image(path: Path, min_side: int, max_pixels: int) -> ImageInfo:
    """Decode ``path`` with Pillow and check its size.

    Args:
        min_side: minimum of width and height, pixels.
        max_pixels: maximum width*height (checked from the header *before* decoding).

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
    except InvalidImage:
        raise
    except Image.DecompressionBombError as e:
        raise InvalidImage(f"decompression bomb refused: {e}") from e
    except (OSError, SyntaxError, ValueError) as e:
        raise InvalidImage(f"not a decodable image ({type(e).__name__}: {e})") from e
    if min(w, h) < min_side:
        raise InvalidImage(f"{w}x{h} smaller than crawl.min_side {min_side} px")
    return ImageInfo(w, h, fmt)




def store_image(src: Path, sha: str, fmt: str, store_dir: Path) -> Path:
    """Copy ``src`` to ``store_dir/<sha[:2]>/<sha>.<ext>`` atomically (no-op if present)."""
    dest = store_dir / sha[:2] / f"{sha}.{_FORMAT_EXT.get(fmt, 'img')}"
    if not dest.exists():
        with atomic_path(dest) as tmp:
            shutil.copyfile(src, tmp)
    return dest


def register_images(
    concept_filter: pd.DataFrame,
    candidates: dict[str, list[Candidate]],
    source: str,
    store_dir: Path,
    min_side: int,
    max_pixels: int,
    root: Path = Path("."),
) -> pd.DataFrame:
    """Decide each concept's image from its fetched candidates and store the winner.

    Args:
        concept_filter: :class:`schemas.profanity.ConceptFilter` rows (concept, status, reason).
        candidates: concept -> fetched candidates in search-rank order (missing = no results).
        source: the crawl source name, written to every row.
        store_dir: content-addressed image store.
        root: paths in the output are relative to it.

    Returns:
        One :class:`schemas.crawl.Images` row per concept, sorted by concept.
    """
    rows: list[dict[str, Any]] = []
    owner: dict[str, str] = {}  # sha256 -> concept that kept it
    for concept, status, reason in sorted(zip(concept_filter["concept"], concept_filter["status"], concept_filter["reason"])):
        row: dict[str, Any] = {"concept": concept, "source": source}
        if status != "ok":
            rows.append({**row, "status": "profane", "reason": reason})
            continue
        cands = candidates.get(concept, [])
        if not cands:
            rows.append({**row, "status": "no_results", "reason": f"no {source} result for '{concept}'"})
            continue
        problems: list[tuple[str, str]] = []  # (status, reason) per rejected candidate
        for rank, cand in enumerate(cands, start=1):
            if cand.file is None:
                problems.append(("download_failed", f"#{rank} {cand.url}: {cand.error or 'download failed'}"))
                continue
            try:
                info = inspect_image(cand.file, min_side, max_pixels)
            except InvalidImage as e:
                problems.append(("invalid_image", f"#{rank} {cand.url}: {e}"))
                continue
            sha = sha256_file(cand.file)
            if sha in owner and owner[sha] != concept:
                problems.append(("duplicate", f"#{rank} {cand.url}: same image (sha256 {sha[:12]}) as '{owner[sha]}'"))
                continue
            owner[sha] = concept
            dest = store_image(cand.file, sha, info.format, store_dir)
            rows.append(
                {
                    **row,
                    "status": "ok",
                    "reason": "; ".join(r for _, r in problems) or None,
                    "source_url": cand.url,
                    "sha256": sha,
                    "path": os.path.relpath(dest, root),
                    "width": info.width,
                    "height": info.height,
                    "format": info.format,
                    "bytes": dest.stat().st_size,
                }
            )
            break
        else:
            # the last problem names the final fate; all reasons are kept
            rows.append({**row, "status": problems[-1][0], "reason": "; ".join(r for _, r in problems)})
    df = pd.DataFrame(rows, columns=list(Images.to_schema().columns))
    for col in ("width", "height", "bytes"):
        df[col] = df[col].astype("Int64")
    return df


# --------------------------------------------------------------------------- sources
def safe_concept_name(concept: str) -> bool:
    """Whether a concept can be used as a file name (no separators, NUL, '.'/'..', <=200 bytes)."""
    return (
        bool(concept)
        and concept not in (".", "..")
        and "/" not in concept
        and "\\" not in concept
        and "\x00" not in concept
        and len(concept.encode()) <= 200
    )


def fetch_local(concepts: Iterable[str], local_dir: Path) -> dict[str, list[Candidate]]:
    """Find ``<local_dir>/<concept>.<ext>`` for each concept (case-insensitive extension)."""
    if not local_dir.is_dir():
        raise FileNotFoundError(f"crawl.local_dir {local_dir} is not a folder of <concept>.<ext> images")
    by_stem: dict[str, list[Path]] = {}
    for f in sorted(local_dir.iterdir()):
        if f.is_file() and f.suffix.lower().lstrip(".") in IMAGE_EXTS:
            by_stem.setdefault(f.stem, []).append(f)
    out = {}
    for c in concepts:
        if safe_concept_name(c) and c in by_stem:
            out[c] = [Candidate(url=p.as_posix(), file=p) for p in by_stem[c]]
    return out


class _ErrorCapture(logging.Handler):
    """Collect icrawler's per-URL download errors from its log records (url -> message)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.errors: dict[str, str] = {}

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        if record.msg.startswith("Response status code") and len(args) == 2:
            self.errors[str(args[1])] = f"HTTP {args[0]}"
        elif record.msg.startswith("Exception caught when downloading") and len(args) >= 2:
            self.errors[str(args[0])] = f"{type(args[1]).__name__}: {args[1]}"[:300]


def _recording_downloader(records: dict[str, str | None]) -> type:
    from icrawler import ImageDownloader

    class RecordingDownloader(ImageDownloader):
        """icrawler's ImageDownloader that names files by URL hash and records what it saved.

        Validation is this stage's (``inspect_image``), so every 200 response is kept.
        """

        _lock = threading.Lock()

        def keep_file(self, task: dict, response: Any, **kwargs: Any) -> bool:
            return True

        def get_filename(self, task: dict, default_ext: str) -> str:
            return hashlib.sha1(task["file_url"].encode()).hexdigest() + ".download"

        def process_meta(self, task: dict) -> None:
            with self._lock:
                records[task["file_url"]] = task.get("filename") if task.get("success") else None

    return RecordingDownloader


def _run_crawler(crawler: Any, feeder_kwargs: dict, max_num: int, timeout_s: float) -> None:
    """Call icrawler's ``Crawler.crawl`` with short queue timeouts (no multi-second idle tail)."""
    from icrawler import Crawler

    Crawler.crawl(
        crawler,
        feeder_kwargs=feeder_kwargs,
        parser_kwargs={"queue_timeout": 0.5, "req_timeout": timeout_s},
        downloader_kwargs={"max_num": max_num, "queue_timeout": 0.5, "req_timeout": timeout_s, "overwrite": True},
    )


def _collect(urls: list[str], records: dict[str, str | None], errors: dict[str, str], tmp: Path) -> list[Candidate]:
    out = []
    for u in urls:
        name = records.get(u)
        if name:
            out.append(Candidate(url=u, file=tmp / name))
        else:
            out.append(Candidate(url=u, error=errors.get(u, "not downloaded")))
    return out


def _check_url(url: str, allow_private: bool = False) -> str | None:
    """Why ``url`` may not be fetched, or None.

    Only http/https. Unless ``allow_private``, hosts that are or resolve to loopback, private,
    link-local, multicast, reserved or unspecified addresses are refused (a URL map from
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


def fetch_urllist(
    concepts: Iterable[str], url_map: dict[str, str], tmp: Path, threads: int, timeout_s: float, allow_private: bool = False
) -> dict[str, list[Candidate]]:
    """Download each concept's URL from ``url_map`` with icrawler's UrlListCrawler.

    URLs refused by :func:`_check_url` become ``download_failed`` candidates with the reason.
    """
    from icrawler.builtin import UrlListCrawler

    lower = {k.strip().lower(): v for k, v in url_map.items()}
    wanted = {c: lower[c] for c in concepts if c in lower}
    out: dict[str, list[Candidate]] = {}
    ok_urls = []
    for c, u in wanted.items():
        problem = _check_url(u, allow_private)
        if problem:
            out[c] = [Candidate(url=u, error=problem)]
        else:
            ok_urls.append(u)
    ok_urls = list(dict.fromkeys(ok_urls))
    records: dict[str, str | None] = {}
    capture = _ErrorCapture()
    if ok_urls:
        crawler = UrlListCrawler(
            downloader_cls=_recording_downloader(records),
            downloader_threads=threads,
            storage={"root_dir": str(tmp)},
            log_level=logging.CRITICAL,
        )
        crawler.downloader.logger.addHandler(capture)
        crawler.downloader.logger.setLevel(logging.ERROR)
        _run_crawler(crawler, {"url_list": ok_urls}, len(ok_urls), timeout_s)
    for c, u in wanted.items():
        if c not in out:
            out[c] = _collect([u], records, capture.errors, tmp)
    return out


def fetch_bing(
    concepts: Iterable[str], tmp: Path, top_n: int, timeout_s: float, endpoint: str, threads: int
) -> dict[str, list[Candidate]]:
    """Search Bing Images for each concept with icrawler's BingImageCrawler (top ``top_n``).

    ``endpoint`` replaces ``https://www.bing.com/images/async`` (tests: a 127.0.0.1 server).
    """
    from icrawler.builtin import BingImageCrawler
    from icrawler.builtin.bing import BingFeeder, BingParser

    class EndpointBingFeeder(BingFeeder):
        def feed(self, keyword: str, offset: int, max_num: int, filters: Any = None) -> None:
            self.filter = self.get_filter()
            for i in range(offset, offset + max_num, 20):
                self.out_queue.put(f"{endpoint}?q={quote_plus(keyword)}&first={i}")

    class TopNParser(BingParser):
        """BingParser that keeps only the first ``top_n`` results, recording their order in ``seen``."""

        seen: list[str]

        def parse(self, response: Any, **kw: Any):  # noqa: ANN201
            for task in super().parse(response, **kw):
                if len(self.seen) < top_n:
                    self.seen.append(task["file_url"])
                    yield task

    out: dict[str, list[Candidate]] = {}
    concepts = list(concepts)
    for c in progress(concepts, "crawl_images (bing)"):
        records: dict[str, str | None] = {}
        capture = _ErrorCapture()
        crawler = BingImageCrawler(
            feeder_cls=EndpointBingFeeder,
            parser_cls=TopNParser,
            downloader_cls=_recording_downloader(records),
            downloader_threads=threads,
            storage={"root_dir": str(tmp)},
            log_level=logging.CRITICAL,
        )
        seen: list[str] = []
        crawler.parser.seen = seen
        crawler.downloader.logger.addHandler(capture)
        crawler.downloader.logger.setLevel(logging.ERROR)
        _run_crawler(crawler, {"keyword": c, "offset": 0, "max_num": top_n}, top_n, timeout_s)
        if seen:
            out[c] = _collect(seen, records, capture.errors, tmp)
    return out


# --------------------------------------------------------------------------- stage I/O
SOURCES = ("local", "urllist", "bing")


def crawl(concept_filter: pd.DataFrame, p: dict[str, Any], fetch: Callable[..., dict[str, list[Candidate]]] | None = None) -> pd.DataFrame:
    """Fetch candidates for the ok concepts from ``p['source']`` and register them."""
    source = p["source"]
    if source == "google":
        raise ParamsError("crawl.source=google is not supported: icrawler's Google parser is broken upstream; use bing")
    if source not in SOURCES:
        raise ParamsError(f"crawl.source={source!r}: expected one of {SOURCES}")
    wanted = concept_filter.loc[concept_filter["status"] == "ok", "concept"].tolist()
    with tempfile.TemporaryDirectory(prefix="gavil-crawl-") as tmpdir:
        tmp = Path(tmpdir)
        if source == "local":
            cands = fetch_local(wanted, Path(p["local_dir"]))
        elif source == "urllist":
            url_map = json.loads(Path(p["urllist_path"]).read_text())
            if not isinstance(url_map, dict):
                raise ParamsError(f"{p['urllist_path']}: expected a JSON object concept -> URL")
            cands = fetch_urllist(wanted, url_map, tmp, p["threads"], p["timeout_s"], bool(p["allow_private_hosts"]))
        else:
            cands = fetch_bing(wanted, tmp, p["top_n"], p["timeout_s"], p["bing"]["endpoint"], p["threads"])
        return register_images(concept_filter, cands, source, Path(STORE_DIR), p["min_side"], p["max_pixels"])


def run(params: dict[str, Any]) -> dict[str, Any]:
    """Stage entry point: concept_filter -> images table + content-addressed image store."""
    p = section(params, "crawl", ("source", "local_dir", "urllist_path", "top_n", "threads", "timeout_s", "min_side", "max_pixels", "allow_private_hosts", "bing"))
    df = crawl(read_table(FILTER_PATH, ConceptFilter), p)
    write_table(df, IMAGES_PATH, Images)
    metrics = {"source": p["source"], "concepts": len(df), "by_status": df["status"].value_counts().sort_index().to_dict()}
    write_json(METRICS_PATH, metrics)
    return metrics
